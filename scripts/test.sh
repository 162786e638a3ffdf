#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need (poppler, the zxing-cpp
# decoder, PostgreSQL), checks formatting and lints, then runs every test of the workspace on
# SQLite, the Debian package on this machine (scripts/deb-test.sh, with the binary those tests
# built), the container image and compose.yaml under podman (scripts/container-test.sh, with the
# same binary; it skips, saying why, where the machine cannot run containers), Schemathesis against the running server's /openapi.json (scripts/schemathesis.sh), and
# the end-to-end tests again on PostgreSQL (DROPSLOT_TEST_DATABASE_URL).
set -euo pipefail
cd "$(dirname "$0")/.."

# Every store operation must be called by the suite on each backend (issue 43): the store
# records each operation a process calls into this folder (crates/dropslot-store/src/trace.rs),
# and scripts/store-trace.py fails on one no test called.
TRACE=target/store-trace
rm -rf "$TRACE"

scripts/test-deps.sh
PG_URL=${DROPSLOT_TEST_POSTGRES_ADMIN_URL:-$(scripts/postgres.sh)}
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

if cargo nextest --version >/dev/null 2>&1; then
    echo "== tests on SQLite"
    DROPSLOT_STORE_TRACE=$PWD/$TRACE/sqlite cargo nextest run --workspace --locked --no-fail-fast
    scripts/store-trace.py $TRACE/sqlite sqlite
    echo "== the Debian package"
    scripts/deb-test.sh
    echo "== the container image and compose"
    scripts/container-test.sh
    echo "== schemathesis against /openapi.json"
    scripts/schemathesis.sh
    echo "== tests on PostgreSQL ($PG_URL)"
    DROPSLOT_STORE_TRACE=$PWD/$TRACE/postgres DROPSLOT_TEST_DATABASE_URL=$PG_URL cargo nextest run -p dropslot --test it --locked --no-fail-fast
    scripts/store-trace.py $TRACE/postgres postgres
else
    echo "== tests on SQLite"
    DROPSLOT_STORE_TRACE=$PWD/$TRACE/sqlite cargo test --workspace --locked --no-fail-fast
    scripts/store-trace.py $TRACE/sqlite sqlite
    echo "== the Debian package"
    scripts/deb-test.sh
    echo "== the container image and compose"
    scripts/container-test.sh
    echo "== schemathesis against /openapi.json"
    scripts/schemathesis.sh
    echo "== tests on PostgreSQL ($PG_URL)"
    DROPSLOT_STORE_TRACE=$PWD/$TRACE/postgres DROPSLOT_TEST_DATABASE_URL=$PG_URL cargo test -p dropslot --test it --locked --no-fail-fast
    scripts/store-trace.py $TRACE/postgres postgres
fi
