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
bagit_venv="${BAGIT_VENV:-$root/target/bagit-venv}"
if [ ! -x "$bagit_venv/bin/bagit.py" ]; then
    "$py" -m venv "$bagit_venv"
    "$bagit_venv/bin/pip" install --quiet --no-compile --disable-pip-version-check "bagit==1.9.0"
fi
lm_venv="${LM_EVAL_VENV:-$root/target/lm-eval-venv}"
if [ ! -x "$lm_venv/bin/python" ]; then
    "$py" -m venv "$lm_venv"
fi
if ! "$lm_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('lm_eval') == '0.4.13' else 1)" 2>/dev/null; then
    "$lm_venv/bin/pip" install --quiet --no-compile --disable-pip-version-check "lm-eval==0.4.13"
fi
echo "setup-test-tools: bagit 1.9.0 in $bagit_venv, lm-eval 0.4.13 in $lm_venv"
