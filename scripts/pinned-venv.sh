# Sourced by scripts that install a Python tool from PyPI into a venv under target/.
# pinned_venv VENV DIST[EXTRA,...] VERSION [PIP OPTION...]: makes VENV (with the first python3 on
# PATH, or $PYTHON) hold distribution DIST at exactly VERSION, and the requirements of its extras
# EXTRA..., installing only when something is missing or at another version, so a second call
# installs nothing.
pinned_venv() {
    local venv=$1 dist=$2 version=$3 extras=()
    shift 3
    if [[ "$dist" == *"["* ]]; then
        IFS=, read -ra extras <<<"${dist#*\[}"
        extras[-1]=${extras[-1]%]}
    fi
    [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
    # A missing distribution raises, which fails the check too.
    if ! "$venv/bin/python" -c "import importlib.metadata as m, re, sys
dist, version, extras = sys.argv[1], sys.argv[2], sys.argv[3:]
for req in m.requires(dist) or []:
    if any(re.search(r'extra\s*==\s*.%s.' % re.escape(e), req) for e in extras):
        m.version(re.match(r'[A-Za-z0-9._-]+', req).group(0))
sys.exit(0 if m.version(dist) == version else 1)" "${dist%%\[*}" "$version" "${extras[@]}" 2>/dev/null; then
        nice "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" "$dist==$version"
    fi
}
