# Sourced first by the scripts that run Python tools from the checkout:
#   . "$(dirname "$0")/lib-venv.sh"
# Turns on strict mode and sets $repo (the checkout, absolute) and $py (the Python that makes
# venvs: $PYTHON, default python3); defines pinned_venv (scripts/pinned-venv.sh).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
# shellcheck source=scripts/pinned-venv.sh
. "$repo/scripts/pinned-venv.sh"
