#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need (poppler, the zxing-cpp
# decoder, PostgreSQL), checks formatting and lints, then runs every test of the workspace on
# SQLite, the Debian package on this machine (scripts/deb-test.sh, with the binary those tests
# built), Schemathesis against the running server's /openapi.json (scripts/schemathesis.sh), and
# the end-to-end tests again on PostgreSQL (DROPSLOT_TEST_DATABASE_URL).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/test-deps.sh
PG_URL=${DROPSLOT_TEST_POSTGRES_ADMIN_URL:-$(scripts/postgres.sh)}
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

if cargo nextest --version >/dev/null 2>&1; then
    echo "== tests on SQLite"
    cargo nextest run --workspace --locked --no-fail-fast
    echo "== the Debian package"
    scripts/deb-test.sh
    echo "== schemathesis against /openapi.json"
    scripts/schemathesis.sh
    echo "== tests on PostgreSQL ($PG_URL)"
    DROPSLOT_TEST_DATABASE_URL=$PG_URL cargo nextest run -p dropslot --test it --locked --no-fail-fast
else
    echo "== tests on SQLite"
    cargo test --workspace --locked --no-fail-fast
    echo "== the Debian package"
    scripts/deb-test.sh
    echo "== schemathesis against /openapi.json"
    scripts/schemathesis.sh
    echo "== tests on PostgreSQL ($PG_URL)"
    DROPSLOT_TEST_DATABASE_URL=$PG_URL cargo test -p dropslot --test it --locked --no-fail-fast
fi
