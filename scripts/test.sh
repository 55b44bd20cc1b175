#!/usr/bin/env bash
# The README's test command: installs what the tests need, then lints and tests the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo clippy --release --all-targets --locked -- -D warnings
cargo test --release --locked --workspace
