#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need (poppler, the zxing-cpp
# decoder), checks formatting and lints, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/test-deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast
else
    cargo test --workspace --locked --no-fail-fast
fi
