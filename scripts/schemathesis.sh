#!/usr/bin/env bash
# Schemathesis against the real server and its own /openapi.json (issue 12): every operation,
# `--checks all`, each operation authenticated with the token its security scheme names (a
# test token, an ops token, an operator token, a driver token, the admin token;
# scripts/schemathesis.toml). Runs the debug binary
# on a temporary SQLite file with a pinned clock and generous rate limits; fails on any failure.
# Called by scripts/test.sh after the SQLite test run. Bounded: at most SCHEMATHESIS_TIMEOUT
# seconds in all (default 600); SCHEMATHESIS_MAX_EXAMPLES (20) and SCHEMATHESIS_SEED (1) tune
# it; further arguments go to `schemathesis run`.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=target/debug/dropslot
# Up to date after the test run; cheap when nothing changed.
cargo build --quiet -p dropslot --bin dropslot

WORK=$(mktemp -d)
SERVER=""
cleanup() {
    if [ -n "$SERVER" ]; then
        kill "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE="http://127.0.0.1:$PORT"
export DATABASE_URL="sqlite://$WORK/dropslot.db"
export DROPSLOT_NOW=2026-11-23T12:00:00Z
export DROPSLOT_BASE_URL="$BASE"
export DROPSLOT_ADMIN_TOKEN="schemathesis-admin-token-0123456789"

# A client of its own with a test and an ops token (the database is then not empty, so serve
# creates no demo client).
"$BIN" migrate >/dev/null
CLIENT=$("$BIN" client create --name schemathesis)
DROPSLOT_TEST_TOKEN=$("$BIN" token create --client "$CLIENT" --kind test)
DROPSLOT_OPS_TOKEN=$("$BIN" token create --client "$CLIENT" --kind ops)
# The courier's dispatchers: the fleet and the day plans.
DROPSLOT_OPERATOR_TOKEN=$("$BIN" token create --kind operator)
# A driver, for the driver API: its token is in the sign-in link (the second line).
DROPSLOT_DRIVER_TOKEN=$("$BIN" driver create --name Schemathesis --phone "+1 416 555 0100" --depot YYZ1 \
    --capacity-parcels 100 --capacity-kg 500 --shift 08:00-18:00 --weekdays mon,tue,wed,thu,fri | sed -n 's/.*#token=//p')
[ -n "$DROPSLOT_DRIVER_TOKEN" ] || { echo "schemathesis: no driver token" >&2; exit 1; }
# The client whose tokens the admin listing shows (scripts/schemathesis.toml pins its `{id}`):
# revoking what it lists cannot revoke the run's own tokens.
DROPSLOT_ADMIN_CLIENT=$("$BIN" client create --name schemathesis-admin-target)
export DROPSLOT_TEST_TOKEN DROPSLOT_OPS_TOKEN DROPSLOT_OPERATOR_TOKEN DROPSLOT_DRIVER_TOKEN DROPSLOT_ADMIN_CLIENT

"$BIN" serve --listen "127.0.0.1:$PORT" --config "$PWD/scripts/high-limits.toml" >"$WORK/serve.log" 2>&1 &
SERVER=$!
# Ready when /readyz says so (the store is open and takes writes); bounded.
for _ in $(seq 1 100); do
    if curl -fsS "$BASE/readyz" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$SERVER" 2>/dev/null; then cat "$WORK/serve.log" >&2; exit 1; fi
    sleep 0.1
done
curl -fsS "$BASE/readyz" >/dev/null

CONFIG="$PWD/scripts/schemathesis.toml"
DEADLINE=$((SECONDS + ${SCHEMATHESIS_TIMEOUT:-600}))
# One run, bounded by what is left of the time.
run() {
    local left=$((DEADLINE - SECONDS))
    [ "$left" -gt 0 ] || { echo "schemathesis: out of time" >&2; return 124; }
    # From the temporary folder: schemathesis keeps a cache in its working directory.
    # One worker: with two, Hypothesis's lambda-source cache (an LRU shared by the worker
    # threads) once raised a KeyError inside the generator, a "Runtime Error" of the tool with
    # every case passing; one worker takes about 15 s more and cannot race.
    (cd "$WORK" && timeout "$left" schemathesis --config-file "$CONFIG" run "$BASE/openapi.json" \
        --checks all --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-20}" --workers 1 --seed "${SCHEMATHESIS_SEED:-1}" \
        --request-timeout 10 "$@")
}

status=0
run "$@" || status=$?
if [ "$status" -ne 0 ]; then
    echo "schemathesis: failed (exit $status); the server's errors:" >&2
    grep -E "ERROR|panicked" "$WORK/serve.log" | grep -v '"starting"' | tail -20 >&2 || true
    exit "$status"
fi
echo "schemathesis: ok"
