#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds every target once in the
# release profile, then runs every test.
#
# Lints: .cargo/config.toml makes clippy-driver the workspace wrapper, so this build IS the
# clippy run over every target (lib, bin, tests); a warning fails the script. Dependencies are
# compiled once and shared with `cargo build --release` and `cargo run --release`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-test-tools.sh
mkdir -p target
log=target/test-build.log
cargo test --release --locked --workspace --all-targets --no-run 2>&1 | tee "$log"
if grep -qE '^(warning|error)(\[[A-Za-z0-9_:]+\])?:' "$log"; then
    echo "test.sh: the build printed warnings (clippy runs inside every build; they are denied)" >&2
    exit 1
fi
cargo test --release --locked --workspace --all-targets
