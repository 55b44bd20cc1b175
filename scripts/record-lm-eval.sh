#!/usr/bin/env bash
# Records the real lm-evaluation-harness run kept as a test fixture in
# tests/fixtures/lm_eval/real/ (see its README.md): lm-eval 0.4.13 from PyPI, model type
# `local-chat-completions`, against llama.cpp's llama-server serving SmolLM2-135M-Instruct
# (scripts/llama-server.sh start, in another shell).
#
#   scripts/record-lm-eval.sh OUT_DIR     # OUT_DIR must not exist
#
# The six tasks of tests/fixtures/lm_eval/real/tasks/ (a local JSON data set, so no dataset
# hub is contacted: HF_DATASETS_OFFLINE=1, HF_HUB_OFFLINE=1) are run in one lm_eval call.
#
# Environment: LLAMA_PORT (default 8088), LM_EVAL_API_VENV (default
# <repo>/target/lm-eval-api-venv), PYTHON (default python3).
# shellcheck source=scripts/lib-venv.sh
. "$(dirname "$0")/lib-venv.sh"
venv="${LM_EVAL_API_VENV:-$repo/target/lm-eval-api-venv}"
port="${LLAMA_PORT:-8088}"
out="${1:?usage: $0 OUT_DIR}"
if [[ -e "$out" ]]; then
    echo "record-lm-eval: $out exists; give a new folder" >&2
    exit 2
fi
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"

# The `api` extra holds the HTTP client of the API model types (no torch).
pinned_venv "$venv" "lm-eval[api]" 0.4.13

tasks_dir="$repo/tests/fixtures/lm_eval/real/tasks"
tasks="$(cd "$tasks_dir" && ls addq_*.yaml | sed 's/\.yaml$//' | paste -sd, -)"
cache="$(mktemp -d)"
trap 'rm -rf "$cache"' EXIT
# The data files are named relative to the task folder, so lm_eval runs from there.
cd "$tasks_dir"
HF_HOME="$cache" HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 \
    "$venv/bin/lm_eval" --model local-chat-completions \
    --model_args "model=SmolLM2-135M-Instruct.Q4_1,base_url=http://127.0.0.1:$port/v1/chat/completions,num_concurrent=1,max_retries=3,tokenized_requests=False" \
    --include_path "$tasks_dir" --tasks "$tasks" \
    --apply_chat_template --fewshot_as_multiturn false \
    --log_samples --output_path "$out"
