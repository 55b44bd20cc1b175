#!/usr/bin/env bash
# Acceptance check of the delimiter-sweep task files against lm-evaluation-harness itself.
#
#   scripts/lm-eval-check.sh            # install lm-eval 0.4.13 (once), generate, check
#
# 1. Installs lm-eval==0.4.13 from PyPI into a venv under target/ (core install: no torch;
#    the script fails if torch is importable there, so the claim stays tested).
# 2. Writes task files for mmlu, arc_challenge and commonsense_qa with
#    `protospread sweep lm-eval --python <venv>/bin/python` (default [sweep] set: 35
#    delimiters x plain/named; the task folder is found through the installed lm_eval).
# 3. Runs scripts/lm_eval_check.py: lm-eval's TaskManager(include_path=...) must register
#    every generated task, and the few-shot context rendered by lm-eval for one document must
#    have the delimiter after every example and the naming line in the named variant.
#    Data sets are small local JSON files written by the checker: no network besides PyPI.
#
# Environment: PROTOSPREAD (binary; default target/release/protospread, built if missing),
# LM_EVAL_VENV (default target/lm-eval-venv), PYTHON (default python3).
# shellcheck source=scripts/lib-venv.sh
. "$(dirname "$0")/lib-venv.sh"
venv="${LM_EVAL_VENV:-$repo/target/lm-eval-venv}"
bin="${PROTOSPREAD:-$repo/target/release/protospread}"
LM_EVAL_VERSION="0.4.13"

pinned_venv "$venv" lm-eval "$LM_EVAL_VERSION"
if "$venv/bin/python" -c "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 1)"; then
    echo "lm-eval-check: torch is installed in $venv; the core install of lm-eval $LM_EVAL_VERSION should not need it" >&2
    exit 1
fi
if [[ ! -x "$bin" ]]; then
    (cd "$repo" && cargo build --release --locked --bin protospread)
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A configuration with the default [sweep] section.
printf '[study]\nname = "lm-eval-check"\n' > "$work/pipeline.toml"
dirs=()
for t in mmlu arc_challenge commonsense_qa; do
    # No --lm-eval-tasks: protospread finds the task folder through the venv's lm_eval.
    "$bin" --config "$work/pipeline.toml" --quiet sweep lm-eval --task "$t" \
        --python "$venv/bin/python" --task-dir "$work/$t"
    dirs+=("$work/$t")
done
"$venv/bin/python" "$repo/scripts/lm_eval_check.py" "${dirs[@]}"
