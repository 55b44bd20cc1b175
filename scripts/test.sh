#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds every target once in the
# release profile, then runs every test.
#
# Lints: .cargo/config.toml makes clippy-driver the workspace wrapper, so this build IS the
# clippy run over every target (lib, bin, tests); a warning fails the script. Dependencies are
# compiled once and shared with `cargo build --release` and `cargo run --release`.
#
# The test tools (scripts/setup-test-tools.sh: pip installs, mostly waiting on the network)
# install while cargo compiles; the tests start only when both have succeeded. Each step's
# wall time is printed, so a slow CI run says where its minutes went.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
start=$(date +%s)
stamp() { echo "[test.sh] $1 after $(( $(date +%s) - start ))s"; }

tools_log=target/setup-test-tools.log
./scripts/setup-test-tools.sh >"$tools_log" 2>&1 &
tools=$!

log=target/test-build.log
if ! cargo test --release --locked --workspace --all-targets --no-run 2>&1 | tee "$log"; then
    wait "$tools" || true
    exit 1
fi
stamp "build"
if grep -qE '^(warning|error)(\[[A-Za-z0-9_:]+\])?:' "$log"; then
    echo "test.sh: the build printed warnings (clippy runs inside every build; they are denied)" >&2
    wait "$tools" || true
    exit 1
fi
if ! wait "$tools"; then
    cat "$tools_log" >&2
    echo "test.sh: scripts/setup-test-tools.sh failed (log above)" >&2
    exit 1
fi
cat "$tools_log"
stamp "test tools"
cargo test --release --locked --workspace --all-targets
stamp "tests"
