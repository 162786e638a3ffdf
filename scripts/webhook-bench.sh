#!/usr/bin/env bash
# The ops fan-out alone (issue 33: svix-server's comparison, delivery keeping up), ROUNDS
# times, each on a fresh database: CALLS live orders created through `POST /requests/sync`
# before any endpoint exists, then ENDPOINTS live endpoints subscribed to
# `same.shipment.to_pick_up` (one port each of examples/hook_sink.rs, a receiver noting every
# receipt), then one ops `to_pick_up` per shipment from CONNECTIONS connections
# (scripts/ops-once.lua; closed loop, or paced with PACE calls/s offered). The run ends when
# the sink holds every delivery. Then the same messages are posted to a fresh sink by the
# floor, examples/fanout_floor.rs (a bare hyper client with the dispatcher's concurrency).
#
# Prints per round: calls/s and their p99 (wrk), deliveries/s from the first commit to the
# last receipt, commit-to-receipt p50 / p99 / max (queued_ms, taken in the committing
# transaction, against the sink's clock), the service's CPU per 1,000 deliveries, and the
# floor's deliveries/s and CPU; on PostgreSQL also the sequential scans of the webhook tables
# during the run (pg_stat_user_tables). Every delivery must arrive exactly once per endpoint:
# a missing, duplicated or unexpected one fails the run (exit 1).
#
#   scripts/webhook-bench.sh                                   # SQLite, closed loop, 3 rounds
#   PACE=2200 scripts/webhook-bench.sh                         # calls offered at 2,200/s
#   DATABASE=postgres://postgres@127.0.0.1:5432/postgres scripts/webhook-bench.sh
#
# Env: BIN (the dropslot binary, default target/release/dropslot; built with the examples when
#      absent), DATABASE (unset: SQLite; postgres://…/DB: a fresh database per round on that
#      server, dropped after it), CALLS (5000), ENDPOINTS (4), CONNECTIONS (32), THREADS (2),
#      PACE (calls/s offered; unset: closed loop), ROUNDS (3), FLOOR (1; 0 skips the floor),
#      NOW (2026-11-23T12:00:00Z), CONFIG (serve config, default scripts/high-limits.toml),
#      KEEP=1 keeps the temporary directory.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CALLS=${CALLS:-5000}
ENDPOINTS=${ENDPOINTS:-4}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
NOW=${NOW:-2026-11-23T12:00:00Z}
API=/scheduled-service/api/v1
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${BIN:-$TARGET/release/dropslot}
die() { printf 'webhook-bench.sh: %s\n' "$*" >&2; exit 1; }
log() { printf '== %s\n' "$*" >&2; }
if [[ ! -x $BIN || ! -x $TARGET/release/examples/hook_sink || ! -x $TARGET/release/examples/fanout_floor ]]; then
  log "building (release): dropslot, hook_sink, fanout_floor"
  cargo build --release -p dropslot --bin dropslot --example hook_sink --example fanout_floor
fi
SINK=$TARGET/release/examples/hook_sink
FANOUT_FLOOR=$TARGET/release/examples/fanout_floor
TICKS=$(getconf CLK_TCK)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dropslot-hooks.XXXXXX")
KILL=()
DBS=()
cleanup() {
  for pid in "${KILL[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  if [[ ${KEEP:-0} != 1 ]]; then
    rm -rf "$TMP"
    for db in "${DBS[@]}"; do psql "$DATABASE" -qtAXc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; done
  else
    log "kept $TMP"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BODY=$TMP/body.json
printf '%s' '{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},"drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9","person_name":"Jane Doe","person_phone":"+1 416 555 0100"},"parcels":[{"unit":"g","values":500},{"unit":"g","values":1500}]}]}' >"$BODY"

# await_urls FILE PID N: the first N loopback URLs printed in FILE by PID.
await_urls() {
  for _ in $(seq 300); do
    (($(grep -cE 'http://127\.0\.0\.1:[0-9]+' "$1" 2>/dev/null || true) >= $3)) && {
      grep -oE 'http://127\.0\.0\.1:[0-9]+' "$1" | head -"$3"
      return 0
    }
    kill -0 "$2" 2>/dev/null || { cat "$1" >&2; die "$1: the process exited early"; }
    sleep 0.1
  done
  die "$1: no URL printed"
}
cpu_ticks() { local f; read -r -a f <"/proc/$1/stat"; echo $((f[13] + f[14])); }
# start_sink NAME: a hook_sink with ENDPOINTS ports; sets SINK_PID and SINK_URLS.
start_sink() {
  "$SINK" "$ENDPOINTS" >"$TMP/$1.log" 2>&1 &
  SINK_PID=$!
  KILL+=("$SINK_PID")
  mapfile -t SINK_URLS < <(await_urls "$TMP/$1.log" "$SINK_PID" "$ENDPOINTS")
}
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
# metrics APP: "WRITE_BATCHES BATCHED_JOBS" from the service's /metrics.
metrics() {
  curl -sS --max-time 10 "$1/metrics" |
    awk '$1 == "dropslot_store_write_batches_total" { b = $2 } $1 == "dropslot_store_batched_jobs_total" { j = $2 } END { print b + 0, j + 0 }'
}

one() {
  local n=$1 url
  if [[ -z ${DATABASE:-} ]]; then
    url=sqlite://$TMP/hooks-$n.db
    sql() { sqlite3 -separator ' ' "file:$TMP/hooks-$n.db?mode=ro" "$1"; }
  else
    local db=dropslot_hooks_$$_$n
    psql "$DATABASE" -qtAXc "CREATE DATABASE $db" >/dev/null
    DBS+=("$db")
    url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$DATABASE" "$db")
    sql() { psql "$url" -qtAX -F ' ' -c "$1"; }
  fi
  DROPSLOT_NOW=$NOW RUST_LOG=${RUST_LOG:-warn,dropslot=info} DROPSLOT_CONFIG=${CONFIG:-$ROOT/scripts/high-limits.toml} \
    DROPSLOT_WEBHOOKS_ALLOW_PRIVATE=1 "$BIN" serve --database "$url" --listen 127.0.0.1:0 >"$TMP/serve-$n.log" 2>&1 &
  local server=$!
  KILL+=("$server")
  local app
  app=$(await_urls "$TMP/serve-$n.log" "$server" 1)
  local live ops
  live=$("$BIN" token create --database "$url" --client 1 --kind live)
  ops=$("$BIN" token create --database "$url" --client 1 --kind ops)
  # The orders, made before any endpoint exists.
  while (($(sql "SELECT count(*) FROM drop_off_shipments WHERE mode = 'live'") < CALLS)); do
    BODY_FILE=$BODY TOKEN=$live timeout 70 wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s scripts/load.lua "$app$API/requests/sync" >/dev/null
  done
  sql "SELECT unique_id FROM drop_off_shipments WHERE mode = 'live' ORDER BY id LIMIT $CALLS" >"$TMP/codes-$n.txt"
  start_sink "sink-$n"
  local endpoints=() u id
  for u in "${SINK_URLS[@]}"; do
    id=$(curl -sS --max-time 10 -H "Authorization: Bearer $live" -H 'Content-Type: application/json' \
      --data-binary "{\"url\":\"$u/hook\",\"events\":[\"same.shipment.to_pick_up\"]}" "$app$API/webhooks" |
      grep -oE '"id":[0-9]+' | head -1 | cut -d: -f2)
    [[ -n $id ]] || die "could not subscribe $u"
    endpoints+=("$id")
  done
  local first seq0=
  first=$(sql "SELECT coalesce(max(id), 0) FROM webhook_deliveries")
  [[ -n ${DATABASE:-} ]] && seq0=$(sql "SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_user_tables WHERE relname LIKE 'webhook_%'")
  local want=$((CALLS * ENDPOINTS)) cpu0 cpu1
  cpu0=$(cpu_ticks "$server")
  local b0 j0 b1 j1 t0 t1
  read -r b0 j0 < <(metrics "$app")
  t0=$(date +%s%N)
  CODES_FILE=$TMP/codes-$n.txt TOKEN=$ops THREADS=$THREADS CONNECTIONS=$CONNECTIONS PACE=${PACE:-0} \
    wrk -t"$THREADS" -c"$CONNECTIONS" -d600s --latency -s scripts/ops-once.lua "$app/" >"$TMP/wrk-$n.txt" &
  local wrk_pid=$!
  KILL+=("$wrk_pid")
  # One request that the sink answers once every delivery is in (or after 300 s): polling it
  # every 50 ms took a tenth of the CPU (curl, bash) from the system measured.
  curl -sS --max-time 310 "${SINK_URLS[0]}/wait?count=$want&timeout_ms=300000" >/dev/null
  cpu1=$(cpu_ticks "$server")
  t1=$(date +%s%N)
  read -r b1 j1 < <(metrics "$app")
  local writer=
  [[ -z ${DATABASE:-} ]] && writer=" | "$(awk -v b=$((b1 - b0)) -v j=$((j1 - j0)) -v ns=$((t1 - t0)) \
    'BEGIN { printf "writer: %.0f commits/s, %.1f jobs a commit", b * 1e9 / ns, (b > 0 ? j / b : 0) }')
  # wrk runs for its whole -d unless every thread has stopped; SIGINT makes it report.
  kill -INT "$wrk_pid" 2>/dev/null || true
  wait "$wrk_pid" || true
  local load
  load=$(grep '^LOAD ' "$TMP/wrk-$n.txt") || { cat "$TMP/wrk-$n.txt" >&2; die "no LOAD line from wrk"; }
  # The service's sequential scans of the webhook tables, read before this script's own queries.
  local scans=
  [[ -n ${DATABASE:-} ]] &&
    scans=" seq_scans=$(($(sql "SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_user_tables WHERE relname LIKE 'webhook_%'") - seq0))"
  curl -sS --max-time 30 "${SINK_URLS[0]}/dump" >"$TMP/receipts-$n.txt"
  sql "SELECT d.endpoint_id, m.webhook_id, d.queued_ms FROM webhook_deliveries d
       JOIN webhook_messages m ON m.id = d.message_id WHERE d.id > $first" >"$TMP/queue-$n.txt"
  local hooks status=0
  hooks=$(python3 scripts/webhook-stats.py "$TMP/queue-$n.txt" "$TMP/receipts-$n.txt" "${endpoints[@]}") || status=1
  local cpu
  cpu=$(awk -v d=$((cpu1 - cpu0)) -v hz="$TICKS" -v n="$want" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
  stop "$SINK_PID"
  local floor=
  if [[ ${FLOOR:-1} == 1 ]]; then
    # The same messages, posted by the bare client to a fresh sink, while the service idles.
    sql "SELECT m.webhook_id, m.body FROM webhook_messages m WHERE m.id IN
         (SELECT message_id FROM webhook_deliveries WHERE id > $first) ORDER BY m.id" | sed 's/ /\t/' >"$TMP/messages-$n.txt"
    kill -STOP "$server"
    start_sink "floor-sink-$n"
    local hook_urls=() line
    for u in "${SINK_URLS[@]}"; do hook_urls+=("$u/hook"); done
    line=$("$FANOUT_FLOOR" "$TMP/messages-$n.txt" "${hook_urls[@]}")
    stop "$SINK_PID"
    kill -CONT "$server"
    local f_ok f_rate f_ticks
    read -r f_ok f_rate f_ticks < <(sed -nE 's/.* ok=([0-9]+) .* per_s=([0-9]+) cpu_ticks=([0-9]+).*/\1 \2 \3/p' <<<"$line")
    floor=" | floor: $f_rate deliveries/s ($f_ok ok), CPU µs/delivery $(awk -v d="$f_ticks" -v hz="$TICKS" -v n="$want" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')"
  fi
  echo "round=$n calls: $(sed -nE 's/.*rps=([0-9.]+) .*p99_ms=([0-9.]+) .*non2xx=([0-9]+) errors=([0-9]+).*/\1\/s p99 \2 ms, non2xx \3, errors \4/p' <<<"$load") | $hooks service_cpu_us_per_delivery=$cpu$scans$writer$floor"
  stop "$server"
  return $status
}

failed=0
for ((r = 1; r <= ROUNDS; r++)); do one "$r" || failed=1; done
exit $failed
