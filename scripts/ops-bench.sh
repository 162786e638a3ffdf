#!/usr/bin/env bash
# Ops moves alone (issue 33 item 3a): for each dropslot binary given, in turn and ROUNDS times
# (A B B A … for two), a fresh database, one `dropslot serve`, live orders seeded through
# `POST /requests/sync` (wrk, SEED long), then `scripts/ops.lua` (every shipment walked
# through to_pick_up, picked_up, processing, in_transit, delivered) from CONNECTIONS
# connections for DURATION. Prints one LOAD line per run, prefixed with the binary's label.
# Builds nothing: pass release binaries (scripts/load.sh builds one).
#
#   scripts/ops-bench.sh base=/tmp/dropslot-before new=target/release/dropslot
#   DATABASE=postgres://postgres@127.0.0.1:5432/postgres scripts/ops-bench.sh new=target/release/dropslot
#
# Env: DATABASE (unset: a temporary SQLite file; postgres://…/DB: a fresh database
#      dropslot_ops_<pid>_<n> on that server for each run, dropped after it), DURATION (wrk -d,
#      10s), SEED (wrk -d of the seeding, 8s), CONNECTIONS (64), THREADS (2), ROUNDS (2),
#      NOW (the pinned clock, 2026-11-23T12:00:00Z), CONFIG (the serve config, default
#      scripts/high-limits.toml), KEEP=1 keeps the logs and databases.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
DURATION=${DURATION:-10s}
SEED=${SEED:-8s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
NOW=${NOW:-2026-11-23T12:00:00Z}
API=/scheduled-service/api/v1
die() { printf 'ops-bench.sh: %s\n' "$*" >&2; exit 1; }
(($# >= 1)) || die "usage: scripts/ops-bench.sh LABEL=BINARY [LABEL=BINARY …]"
for arg in "$@"; do [[ $arg == *=* && -x ${arg#*=} ]] || die "$arg: not LABEL=executable"; done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dropslot-ops.XXXXXX")
SERVER=
DBS=()
cleanup() {
  [[ -n $SERVER ]] && { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
  if [[ ${KEEP:-0} != 1 ]]; then
    rm -rf "$TMP"
    for db in "${DBS[@]}"; do psql "$DATABASE" -qtAXc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; done
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BODY=$TMP/body.json
printf '%s' '{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},"drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9","person_name":"Jane Doe","person_phone":"+1 416 555 0100"},"parcels":[{"unit":"g","values":500},{"unit":"g","values":1500}]}]}' >"$BODY"

# one LABEL BINARY N: one measured run on a fresh database.
one() {
  local label=$1 bin=$2 n=$3 url sql
  if [[ -z ${DATABASE:-} ]]; then
    url=sqlite://$TMP/ops-$n.db
    sql() { sqlite3 -separator ' ' "file:$TMP/ops-$n.db?mode=ro" "$1"; }
  else
    local db=dropslot_ops_$$_$n
    psql "$DATABASE" -qtAXc "CREATE DATABASE $db" >/dev/null
    DBS+=("$db")
    url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$DATABASE" "$db")
    sql() { psql "$url" -qtAX -F ' ' -c "$1"; }
  fi
  local log=$TMP/serve-$n.log
  DROPSLOT_NOW=$NOW RUST_LOG=${RUST_LOG:-warn,dropslot=info} DROPSLOT_CONFIG=${CONFIG:-$ROOT/scripts/high-limits.toml} \
    "$bin" serve --database "$url" --listen 127.0.0.1:0 >"$log" 2>&1 &
  SERVER=$!
  local app=
  for _ in $(seq 300); do
    app=$(grep -m1 -oE 'http://127\.0\.0\.1:[0-9]+' "$log" 2>/dev/null) && break
    kill -0 "$SERVER" 2>/dev/null || { cat "$log" >&2; die "server exited early"; }
    sleep 0.1
  done
  [[ -n $app ]] || die "server did not listen"
  local live ops
  live=$("$bin" token create --database "$url" --client 1 --kind live)
  ops=$("$bin" token create --database "$url" --client 1 --kind ops)
  BODY_FILE=$BODY TOKEN=$live wrk -t"$THREADS" -c"$CONNECTIONS" -d"$SEED" -s scripts/load.lua "$app$API/requests/sync" >/dev/null
  sql "SELECT unique_id FROM drop_off_shipments WHERE mode = 'live' ORDER BY id" >"$TMP/codes-$n.txt"
  local codes
  codes=$(wc -l <"$TMP/codes-$n.txt")
  sleep 1
  local line
  line=$(CODES_FILE=$TMP/codes-$n.txt TOKEN=$ops THREADS=$THREADS \
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s scripts/ops.lua "$app/" | grep '^LOAD ')
  echo "$label run=$n shipments=$codes $line"
  kill "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  SERVER=
}

n=0
for ((r = 1; r <= ROUNDS; r++)); do
  order=("$@")
  # A B, then B A: each binary runs first as often as last.
  if ((r % 2 == 0)); then
    order=()
    for ((i = $# - 1; i >= 0; i--)); do order+=("${@:i+1:1}"); done
  fi
  for arg in "${order[@]}"; do
    n=$((n + 1))
    one "${arg%%=*}" "${arg#*=}" "$n"
  done
done
