# Sourced by scripts that install a Python tool from PyPI into a venv under target/.
# pinned_venv VENV DIST VERSION [PIP OPTION...]: makes VENV (with the first python3 on PATH, or
# $PYTHON) hold distribution DIST at exactly VERSION, installing only when it holds another
# version or none, so a second call installs nothing.
pinned_venv() {
    local venv=$1 dist=$2 version=$3
    shift 3
    [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
    if ! "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(0 if m.version('$dist') == '$version' else 1)" 2>/dev/null; then
        "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" "$dist==$version"
    fi
}
