#!/usr/bin/env bash
# Validate a BagIt bag with the reference validator (`bagit` from PyPI, `bagit.py --validate`),
# then check that the validator rejects a copy of the bag with one payload byte changed.
#
#   scripts/check-bag.sh BAG
#
# Installs bagit into a virtual environment under target/ (override with BAGIT_VENV). Exit codes:
# 0 = valid bag and the corrupted copy is rejected; 1 = a check failed; 77 = python3 missing.
set -euo pipefail
bag=${1:?usage: scripts/check-bag.sh BAG}
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${BAGIT_VENV:-$root/target/bagit-venv}"
version=1.9.0

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed; cannot run the reference BagIt validator" >&2
    exit 77
fi
if [ ! -x "$venv/bin/bagit.py" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "bagit==$version"
fi

echo "check-bag: validating $bag with bagit $version"
"$venv/bin/bagit.py" --validate "$bag"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -a "$bag" "$work/bag"
# The first payload file in manifest order; flip its first byte.
target="$(awk 'NR==1 {print $2}' "$work/bag/manifest-sha256.txt")"
python3 - "$work/bag/$target" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[0] ^= 0x01
open(p, "wb").write(bytes(b))
PY
if "$venv/bin/bagit.py" --validate "$work/bag" 2>"$work/err"; then
    echo "check-bag: FAILED: a bag with one changed byte in $target still validates" >&2
    exit 1
fi
echo "check-bag: corrupted copy rejected as expected: $(grep -m1 -i -E 'invalid|checksum|fail' "$work/err" || head -1 "$work/err")"
echo "check-bag: OK"
