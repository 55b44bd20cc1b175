#!/usr/bin/env bash
# Installs the external tools some tests run for real, into virtual environments under
# target/ (nothing outside the checkout): the BagIt reference validator (bagit from PyPI) and
# lm-evaluation-harness (lm-eval from PyPI, core install without torch). Needs python3 with
# venv and pip, and access to PyPI. Idempotent: a second call installs nothing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
if ! command -v "$py" >/dev/null 2>&1; then
    echo "setup-test-tools: $py is not installed; install python3 (with venv and pip) first" >&2
    exit 1
fi
# shellcheck source=scripts/pinned-venv.sh
. "$root/scripts/pinned-venv.sh"
bagit_venv="${BAGIT_VENV:-$root/target/bagit-venv}"
pinned_venv "$bagit_venv" bagit 1.9.0 --no-compile
lm_venv="${LM_EVAL_VENV:-$root/target/lm-eval-venv}"
pinned_venv "$lm_venv" lm_eval 0.4.13 --no-compile
echo "setup-test-tools: bagit 1.9.0 in $bagit_venv, lm-eval 0.4.13 in $lm_venv"
