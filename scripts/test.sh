#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need (poppler, the zxing-cpp
# decoder, PostgreSQL), checks formatting and lints, then runs every test of the workspace on
# SQLite and the end-to-end tests again on PostgreSQL (DROPSLOT_TEST_DATABASE_URL).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/test-deps.sh
PG_URL=${DROPSLOT_TEST_POSTGRES_ADMIN_URL:-$(scripts/postgres.sh)}
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

# The PostgreSQL pass: the end-to-end tests that run on it so far (the backend is being
# ported; store::postgres::COMPLETE turns this into the whole suite).
PG_FILTER='test(=cli::clients_and_tokens_from_the_command_line) | test(=cli::processes_started_at_once_migrate_once)'

if cargo nextest --version >/dev/null 2>&1; then
    echo "== tests on SQLite"
    cargo nextest run --workspace --locked --no-fail-fast
    echo "== tests on PostgreSQL ($PG_URL)"
    DROPSLOT_TEST_DATABASE_URL=$PG_URL cargo nextest run -p dropslot --test it --locked --no-fail-fast -E "$PG_FILTER"
else
    echo "== tests on SQLite"
    cargo test --workspace --locked --no-fail-fast
    echo "== tests on PostgreSQL ($PG_URL)"
    DROPSLOT_TEST_DATABASE_URL=$PG_URL cargo test -p dropslot --test it --locked --no-fail-fast -- \
        cli::clients_and_tokens_from_the_command_line cli::processes_started_at_once_migrate_once
fi
