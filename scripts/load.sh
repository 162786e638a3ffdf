#!/usr/bin/env bash
# Load test of POST /requests/preview and POST /requests/sync against a bare-axum "floor"
# (crates/dropslot/examples/floor.rs) of the same request/response size; then, on the same
# database after a kill -9 and a restart, the shipment lifecycle: one sandbox scenario call
# over 1,000 selected shipments (three times), and sustained ops transitions; then webhooks:
# order creation with 2 subscribed endpoints, 20,000 events fanned out to 4 receivers, and
# the ops fan-out: OPS_FANOUT (5,000) ops transitions from 32 connections, each to 4 endpoints.
# After the restart (both modes): asynchronous orders of 100 drop-offs, in shipments/s.
# First of all (before the floor), address points (CONTRACT §11): POINTS generated points
# imported into a database of their own (points/s, first run and re-run), and preview with
# them loaded against the main server without them, alternated in one invocation. Then the
# day plans (issue 30): 2,000 live drop-offs, 40 drivers, one plan per depot, timed.
#
#   scripts/load.sh                     # 10 s per endpoint, on SQLite
#   DURATION=30s scripts/load.sh
#   DATABASE=postgres://postgres@127.0.0.1:5432/postgres scripts/load.sh              # PostgreSQL
#   DATABASE=postgres://postgres@127.0.0.1:5432/postgres PROCESSES=2 scripts/load.sh  # 2 processes
#
# Env: DURATION (wrk -d, default 10s), WARMUP (default 2s, 0 to skip), THREADS (2),
#      CONNECTIONS (64), CARGO_TARGET_DIR (default ./target), NOW (the pinned clock,
#      POINTS (address points generated and imported, default 1000000; 0 skips the phase),
#      POINTS_PAIRS (A B B A rounds of preview without and with the points, default 2),
#      default 2026-11-23T12:00:00Z, a Monday morning so slots exist), KEEP=1 keeps the
#      temporary directory (logs, database, wrk output), OPS_SEED (wrk -d of live orders
#      created for the ops run, default 6s), FANOUT_SHIPMENTS (shipments moved through the
#      happy path for the fan-out, 5 events each; default 4000 = 20,000 events),
#      DATABASE (unset: a temporary SQLite file; postgres://…/DB: a fresh database
#      dropslot_load_<pid> is created on that server and dropped on exit), PROCESSES (serve
#      processes on the one database, default 1; more only on PostgreSQL: wrk's connections
#      are split evenly between WRKS wrks, and the figures are summed (rates) or the worst
#      taken (latencies); scenario calls and the ops run go to the first),
#      ONLY (all, default; verdict: issue 49's four ratios, both backends, see its block;
#      api: floor, preview, sync with the durability check, and async;
#      points: the address-points phase alone; plan: the day-plan phase alone; operator: the
#      operator side under load alone, issue 33 item 5: see its block below; fleet: fleet
#      capacity against limits, issue 45: see its block),
#      FLEET (1; 0 skips the fleet phase under ONLY=all), FLEET_PAIRS (A B B A rounds of
#      preview and of sync, limits against fleet, default 2), FLEET_STOPS (1000 drop-offs seeded
#      on one day), FLEET_DRIVERS (320: enough that four sync runs at ~9,000 orders/s never fill the 14-day horizon; the run fails if they do), FLEET_PLAN_LIMIT (20 s a plan),
#      PLAN (1; 0 skips the day plans), PLAN_ORDERS (2000), PLAN_DRIVERS (40), PLAN_TIME_LIMIT
#      (20 s a plan), PLAN_PARALLEL (1: both depots' plans at once),
#      OPERATOR (1; 0 skips the operator side under ONLY=all), OPERATOR_PAIRS (A B B A rounds
#      of each comparison, default 1), OPERATOR_DRIVERS (driver apps, 200), OPERATOR_VAN (their
#      vans' parcels; default the day's parcels over the drivers), OPERATOR_PLAN_LIMIT (s to
#      solve their plans, 10), OPERATOR_SETUP_LIMIT (s for plan-load.py's first plans, 5),
#      OPERATOR_POSITION_EVERY (s of real time between an app's positions, 30),
#      OPERATOR_FAIL_PCT (stops failed rather than delivered, 10), OPERATOR_DAY_S (real seconds the
#      driven day is played over; default the drive's length, ~60 s: x390; longer leaves the rest
#      of the day undone), OPERATOR_PARTS ("solve drive"; either alone, or "alone": the drive
#      without the API runs, for the driver calls' own latencies and CPU); the day's size is PLAN_ORDERS's,
#      NO_BUILD=1 (no cargo build: the binaries must be under CARGO_TARGET_DIR already, e.g.
#      another worktree's release build),
#      ASYNC_REQUESTS (asynchronous requests of 100 drop-offs, default 200), ASYNC_CLIENTS
#      (posted at once, default 8), PREVIEW_PAIRS (alternated runs of preview with rate limits
#      and metrics off and on, default 2),
#      CAPACITY_PAIRS (alternated runs of preview and sync with every slot limited, never
#      reached, and without: issue 28's cost of capacity; default 2, 0 skips),
#      WRKS (wrk processes per measurement, default PROCESSES; wrk i drives process i mod
#      PROCESSES, the floor included, so PROCESSES=1 WRKS=2 loads one process exactly as
#      PROCESSES=2 loads two: the fair comparison of 1 and 2 processes on one machine),
#      CURVE (connection counts, e.g. "1 16 64 256": after the async phase, floor, preview
#      and sync again at each; wrk threads are capped at the connections),
#      SEED_ORDERS (e.g. 1000000: after that, sync orders are added through the API until the
#      database holds that many, and floor, preview and sync are measured again on it),
#      PERF_WRITER=1 (SQLite, one process: perf records the writer thread over the timed
#      sync run and the report ends with its self time and the time under the store's and
#      SQLite's functions),
#      BASELINE (another dropslot binary, e.g. the build before a change; SQLite only: after
#      the async phase it serves a fresh database of its own beside the restarted server, and
#      preview and sync are run on both in ABBA order, BASELINE_PAIRS times (default 2), so a
#      change is measured against its predecessor in one invocation, with the floor's run).
# Every run also reports the serve processes' peak RSS (VmHWM) and, on SQLite, the largest
# -wal file seen while sync ran (sampled every 0.2 s); beside every throughput, the server
# side's CPU (user+sys) per 1,000 requests; and sync against its own floor, run right after the
# sync run: on SQLite a bare rusqlite writer of the same rows with the same durability and
# grouping (crates/dropslot/examples/sync_floor.rs), on PostgreSQL a bare tokio-postgres
# pipeline of the same rows on as many connections as the order writers
# (crates/dropslot/examples/sync_floor_pg.rs).
#
# Idempotent: every run uses a fresh database and ephemeral 127.0.0.1 ports;
# every server it starts is stopped on exit. Exit status is non-zero when a check fails
# (a non-2xx response, or orders rows not matching the 201 responses).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-64}
NOW=${NOW:-2026-11-23T12:00:00Z}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
API=/scheduled-service/api/v1

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'load.sh: %s\n' "$*" >&2; exit 1; }

# Seconds in a wrk duration (10, 10s, 2m, 1h).
seconds() {
  local d=$1
  case $d in
    *h) echo $((${d%h} * 3600)) ;;
    *m) echo $((${d%m} * 60)) ;;
    *s) echo "${d%s}" ;;
    *) echo "$d" ;;
  esac
}

# ---------------------------------------------------------------- tools
need_apt=()
command -v wrk >/dev/null || need_apt+=(wrk)
PROCESSES=${PROCESSES:-1}
WRKS=${WRKS:-$PROCESSES}
((WRKS >= 1 && CONNECTIONS % WRKS == 0)) || die "WRKS=$WRKS must divide CONNECTIONS=$CONNECTIONS"
case ${DATABASE:-} in
  "" | sqlite:*) BACKEND=sqlite; command -v sqlite3 >/dev/null || need_apt+=(sqlite3) ;;
  postgres://* | postgresql://*) BACKEND=postgres; command -v psql >/dev/null || need_apt+=(postgresql-client) ;;
  *) die "DATABASE=$DATABASE: neither sqlite: nor postgres://" ;;
esac
[[ $BACKEND == postgres || $PROCESSES == 1 ]] || die "PROCESSES=$PROCESSES needs DATABASE=postgres://..."

command -v curl >/dev/null || need_apt+=(curl)
if ((${#need_apt[@]})); then
  SUDO=
  [[ $(id -u) -eq 0 ]] || SUDO=sudo
  log "installing ${need_apt[*]} from Debian"
  timeout 600 $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 600 $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# ---------------------------------------------------------------- build
if [[ ${NO_BUILD:-0} != 1 ]]; then
log "building (release): dropslot binary, floor and sync_floor examples"
timeout "${BUILD_TIMEOUT:-3600}" cargo build --release -p dropslot --bin dropslot --example floor --example sync_floor \
  --example sync_floor_pg
fi
DROPSLOT=$TARGET/release/dropslot
FLOOR=$TARGET/release/examples/floor
SYNC_FLOOR=$TARGET/release/examples/sync_floor
SYNC_FLOOR_PG=$TARGET/release/examples/sync_floor_pg
[[ -x $DROPSLOT && -x $FLOOR ]] || die "binaries not found under $TARGET/release"

# ---------------------------------------------------------------- the verdict (issue 49)
# ONLY=verdict: the four figures of issue 49, each a ratio of two measurements of this one
# invocation, on both backends: the ops fan-out (scripts/webhook-bench.sh, one round each, a
# fresh database each) at VERDICT_CALLS (default "2000 5000") on SQLite then PostgreSQL; this
# script's api phase on PostgreSQL (sync against its own tokio-postgres floor) and on SQLite
# (preview's CPU per request against the floor's, and preview with rate limits and HTTP
# metrics against both off, PREVIEW_PAIRS alternations, 4 by default here: with 2 the ratio
# moved by ±3 % between invocations of one build, the target's whole margin). PostgreSQL is VERDICT_POSTGRES
# (default: DATABASE when it is postgres://, else postgres://postgres@127.0.0.1:5432/postgres).
if [[ ${ONLY:-all} == verdict ]]; then
  VTMP=$(mktemp -d "${TMPDIR:-/tmp}/dropslot-verdict.XXXXXX")
  trap 'rm -rf "$VTMP"' EXIT
  PG=${VERDICT_POSTGRES:-}
  [[ -z $PG && $BACKEND == postgres ]] && PG=$DATABASE
  PG=${PG:-postgres://postgres@127.0.0.1:5432/postgres}
  if [[ ! -x $TARGET/release/examples/hook_sink || ! -x $TARGET/release/examples/fanout_floor ]]; then
    cargo build --release -p dropslot --example hook_sink --example fanout_floor
  fi
  CALLS_LIST=${VERDICT_CALLS:-2000 5000}
  declare -A FAN_RATE FAN_P99
  for n in $CALLS_LIST; do
    for backend in sqlite postgres; do
      db=""
      [[ $backend == postgres ]] && db=$PG
      log "verdict: the ops fan-out, $n calls x 4 endpoints, on $backend"
      line=$(DATABASE=$db CALLS=$n ROUNDS=1 FLOOR=0 BIN=$DROPSLOT scripts/webhook-bench.sh 2>"$VTMP/fan-$backend-$n.err" | grep '^round=') ||
        { cat "$VTMP/fan-$backend-$n.err" >&2; die "verdict: the fan-out on $backend failed"; }
      echo "$line" >&2
      FAN_RATE[$backend-$n]=$(sed -nE 's/.* per_s=([0-9.]+) .*/\1/p' <<<"$line")
      FAN_P99[$backend-$n]=$(sed -nE 's/.*HOOKS .* p99_ms=([0-9.]+) .*/\1/p' <<<"$line")
    done
  done
  log "verdict: the api phase on PostgreSQL"
  DATABASE=$PG ONLY=api NO_BUILD=1 POINTS=0 CAPACITY_PAIRS=0 PREVIEW_PAIRS=0 "$0" >"$VTMP/pg.txt" 2>"$VTMP/pg.err" ||
    { tail -30 "$VTMP/pg.err" >&2; die "verdict: the api phase on PostgreSQL failed"; }
  log "verdict: the api phase on SQLite"
  PREVIEW_PAIRS=${PREVIEW_PAIRS:-4}
  DATABASE= ONLY=api NO_BUILD=1 POINTS=0 CAPACITY_PAIRS=0 PREVIEW_PAIRS=$PREVIEW_PAIRS "$0" >"$VTMP/sqlite.txt" 2>"$VTMP/sqlite.err" ||
    { tail -30 "$VTMP/sqlite.err" >&2; die "verdict: the api phase on SQLite failed"; }
  sync_pg=$(grep -m1 '^sync against its own floor' "$VTMP/pg.txt" | sed -nE 's/.* = ([0-9.]+)$/\1/p')
  sync_line=$(grep -m1 '^sync against its own floor' "$VTMP/pg.txt" | sed -nE 's/.*: ([0-9]+ \/ [0-9]+ orders\/s).*/\1/p')
  read -r floor_cpu preview_cpu < <(awk 'NF == 6 && $1 == "floor" { f = $6 } NF == 6 && $1 == "preview" { p = $6 } END { print f, p }' "$VTMP/sqlite.txt")
  read -r floor_rps preview_rps < <(awk 'NF == 6 && $1 == "floor" { f = $2 } NF == 6 && $1 == "preview" { p = $2 } END { print f, p }' "$VTMP/sqlite.txt")
  onoff=$(grep -m1 '^preview with rate limits and HTTP metrics' "$VTMP/sqlite.txt" | sed -nE 's/.*on\/off = ([0-9.]+)$/\1/p')
  number='^[0-9]+([.][0-9]+)?$'
  for v in "$sync_pg" "$floor_cpu" "$preview_cpu" "$floor_rps" "$preview_rps" "$onoff"; do
    [[ $v =~ $number ]] || die "verdict: a figure is missing from the api runs (read '$v')"
  done
  echo
  echo "issue 49's figures, each a ratio within this invocation (SQLite; PostgreSQL at ${PG%%\?*}):"
  for n in $CALLS_LIST; do
    printf 'webhook fan-out, N=%s: PostgreSQL / SQLite = %s / %s deliveries/s = %.3f (target >= 0.78); p99 commit-to-receipt PostgreSQL %s ms, SQLite %s ms (target < 250)\n' \
      "$n" "${FAN_RATE[postgres-$n]}" "${FAN_RATE[sqlite-$n]}" \
      "$(awk -v a="${FAN_RATE[postgres-$n]}" -v b="${FAN_RATE[sqlite-$n]}" 'BEGIN { print a / b }')" "${FAN_P99[postgres-$n]}" "${FAN_P99[sqlite-$n]}"
  done
  echo "sync on PostgreSQL / its tokio-postgres floor: $sync_line = $sync_pg (target >= 0.70)"
  printf 'preview CPU a request / the floor'"'"'s (SQLite): %s / %s us = %.2fx (target <= 2.5x); throughput %.3f of the floor\n' \
    "$preview_cpu" "$floor_cpu" "$(awk -v a="$preview_cpu" -v b="$floor_cpu" 'BEGIN { print a / b }')" \
    "$(awk -v a="$preview_rps" -v b="$floor_rps" 'BEGIN { print a / b }')"
  echo "preview with rate limits and HTTP metrics / both off (SQLite, ${PREVIEW_PAIRS:-2} alternations): $onoff (target >= 0.97)"
  exit 0
fi

# ---------------------------------------------------------------- servers
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dropslot-load.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    # Bounded: SIGKILL whatever is still there after 10 s.
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ ${KEEP:-0} == 1 ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
  if [[ -n ${LOAD_DB:-} && ${KEEP:-0} != 1 ]]; then
    psql "$DATABASE" -qtAXc "DROP DATABASE IF EXISTS $LOAD_DB WITH (FORCE)" >/dev/null 2>&1 || true
    psql "$DATABASE" -qtAXc "DROP DATABASE IF EXISTS ${LOAD_DB}_points WITH (FORCE)" >/dev/null 2>&1 || true
    psql "$DATABASE" -qtAXc "DROP DATABASE IF EXISTS ${LOAD_DB}_floor WITH (FORCE)" >/dev/null 2>&1 || true
    psql "$DATABASE" -qtAXc "DROP DATABASE IF EXISTS ${LOAD_DB}_fleet WITH (FORCE)" >/dev/null 2>&1 || true
    psql "$DATABASE" -qtAXc "DROP DATABASE IF EXISTS ${LOAD_DB}_limits WITH (FORCE)" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits (at most 30 s) for a line matching $2 in file $1 while process $3 lives; prints the match.
await_line() {
  local file=$1 pattern=$2 pid=$3 line
  for _ in $(seq 300); do
    if line=$(grep -m1 -oE "$pattern" "$file" 2>/dev/null); then
      echo "$line"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$file" >&2; die "server exited early"; }
    sleep 0.1
  done
  cat "$file" >&2
  die "timed out waiting for '$pattern' in $file"
}

if [[ $BACKEND == sqlite ]]; then
  DB=$TMP/dropslot.db
  DB_URL=sqlite://$DB
  # sql QUERY: one query on the database, read-only; rows on lines, columns space-separated.
  sql() { sqlite3 -separator ' ' "file:$DB?mode=ro" "$1"; }
else
  LOAD_DB=dropslot_load_$$
  psql "$DATABASE" -qtAXc "CREATE DATABASE $LOAD_DB" >/dev/null || die "cannot create database $LOAD_DB on $DATABASE"
  # db_url NAME: $DATABASE with its database name replaced.
  db_url() { python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$DATABASE" "$1"; }
  DB_URL=$(db_url "$LOAD_DB")
  sql() { psql "$DB_URL" -qtAX -F ' ' -c "$1"; }
fi
log "starting $PROCESSES dropslot serve process(es) on a fresh $BACKEND database, clock pinned to $NOW"
# start_app LOG: one `dropslot serve` on the database; appends to APP_PIDS and APPS (its base
# URL); APP is the first process's.
# The rate limits stay on (their cost is part of what is measured) but far above what one
# token sends here, so no request is refused (scripts/high-limits.toml).
start_app() {
  # Webhook receivers are local floors: private targets allowed (no endpoint exists before
  # the webhook phase).
  DROPSLOT_NOW=$NOW RUST_LOG=${RUST_LOG:-info} DROPSLOT_BASE_URL=${DROPSLOT_BASE_URL:-http://127.0.0.1:8080} \
    DROPSLOT_WEBHOOKS_ALLOW_PRIVATE=1 DROPSLOT_CONFIG=$ROOT/scripts/high-limits.toml \
    "$DROPSLOT" serve --database "$DB_URL" --listen 127.0.0.1:0 >"$1" 2>&1 &
  PIDS+=($!)
  APP_PIDS+=($!)
  local url
  url=$(await_line "$1" 'listening on http://127\.0\.0\.1:[0-9]+' "$!")
  APPS+=("${url#listening on }")
  APP=${APPS[0]}
}
# start_apps PREFIX: PROCESSES servers, one after the other (the first, on an empty database,
# prints the demo token), logs PREFIX-1.log, PREFIX-2.log …
start_apps() {
  APP_PIDS=()
  APPS=()
  local i
  for ((i = 1; i <= PROCESSES; i++)); do start_app "$1-$i.log"; done
}
start_apps "$TMP/dropslot"
TOKEN=$(grep -m1 -oE 'ds_test_[A-Za-z0-9_-]+' "$TMP/dropslot-1.log") || die "no demo token printed (database not empty?)"

# The request body (263 bytes): one drop-off, two parcels, no custom code (so every sync
# request creates a new order).
BODY=$TMP/body.json
printf '%s' '{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},"drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9","person_name":"Jane Doe","person_phone":"+1 416 555 0100"},"parcels":[{"unit":"g","values":500},{"unit":"g","values":1500}]}]}' >"$BODY"

# One real preview: checks the setup and measures the response size the floor must match.
read -r code size < <(curl -sS --max-time 10 -o "$TMP/preview.json" -w '%{http_code} %{size_download}\n' \
  -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' --data-binary @"$BODY" "$APP$API/requests/preview")
[[ $code == 200 ]] || { cat "$TMP/preview.json" >&2; die "preview answered $code"; }
log "real preview response: $size bytes"

log "starting the floor (bare axum, $size-byte response)"
FLOOR_RESPONSE_BYTES=$size "$FLOOR" 127.0.0.1:0 >"$TMP/floor.log" 2>&1 &
PIDS+=($!)
FLOOR_PID=$!
FLOOR_URL=$(await_line "$TMP/floor.log" 'http://127\.0\.0\.1:[0-9]+' "$FLOOR_PID")
fsize=$(curl -sS --max-time 10 -o /dev/null -w '%{size_download}' -H 'Content-Type: application/json' --data-binary @"$BODY" "$FLOOR_URL/")
[[ $fsize == "$size" ]] || die "floor answered $fsize bytes, expected $size"

# ---------------------------------------------------------------- wrk
SECS=$(seconds "$DURATION")
declare -A RPS P50 P99 CPU PGCPU RESULT
TICKS=$(getconf CLK_TCK)
# listener_pids URL...: the processes listening on those URLs' ports (found with ss), each once.
listener_pids() {
  local url port
  for url in "$@"; do
    port=$(sed -E 's#^https?://[^/:]+:([0-9]+).*#\1#' <<<"$url")
    ss -ltnpH "sport = :$port" | grep -oE 'pid=[0-9]+' | cut -d= -f2
  done | sort -u
}
# cpu_ticks PID...: their user+sys CPU so far, summed, in clock ticks (/proc/PID/stat).
cpu_ticks() {
  local pid t=0 f
  for pid in "$@"; do
    read -r -a f <"/proc/$pid/stat" || continue
    # Fields 14 and 15 (utime, stime); the command name (field 2) holds no space here.
    t=$((t + f[13] + f[14]))
  done
  echo "$t"
}

# pg_ticks: the CPU of the PostgreSQL server's processes so far, in clock ticks: the live ones
# (backends and helpers), and the backends that have exited, which the postmaster (the oldest
# process) has reaped into its children's time (fields 16 and 17). What a request costs the
# database, beside the service's own; 0 on SQLite.
pg_ticks() {
  if [[ $BACKEND != postgres ]]; then
    echo 0
    return
  fi
  local live postmaster f
  # shellcheck disable=SC2046 # one pid per word
  live=$(cpu_ticks $(pgrep -x postgres || true))
  postmaster=$(pgrep -o -x postgres || true)
  if [[ -n $postmaster ]] && read -r -a f <"/proc/$postmaster/stat"; then
    live=$((live + f[15] + f[16]))
  fi
  echo "$live"
}

# run NAME PATH [extra env...]: warm-up, then the timed run, with wrk's connections split
# evenly over WRKS wrk processes run at once, wrk i against serve process i mod PROCESSES;
# keeps a LOAD line in RESULT[NAME]: requests, rates and counts summed, latencies the worst of
# the wrks'. With FLOOR_ONLY=1, PATH is a whole URL (the floor), which every wrk drives.
run() {
  local name=$1 path=$2 i
  shift 2
  local urls=()
  for ((i = 0; i < WRKS; i++)); do
    if [[ ${FLOOR_ONLY:-0} == 1 ]]; then urls+=("$path"); else urls+=("${APPS[$((i % ${#APPS[@]}))]}$path"); fi
  done
  local conns=$((CONNECTIONS / WRKS))
  # wrk needs a connection per thread.
  local threads=$((THREADS < conns ? THREADS : conns))
  local wrks=()
  if [[ $WARMUP != 0 ]]; then
    for url in "${urls[@]}"; do
      env BODY_FILE="$BODY" TOKEN="$TOKEN" "$@" timeout $(($(seconds "$WARMUP") + 30)) \
        wrk -t"$threads" -c"$conns" -d"$WARMUP" -s scripts/load.lua "$url" >/dev/null &
      wrks+=($!)
    done
    wait "${wrks[@]}"
    sleep 1
  fi
  "${BEFORE_TIMED:-true}"
  log "wrk -t$threads -c$conns -d$DURATION --latency $name: ${urls[*]}"
  # The server side's CPU over the timed run (every process behind the URLs): what a request
  # costs, a figure that travels between machines better than a rate.
  local servers cpu0
  mapfile -t servers < <(listener_pids "${urls[@]}")
  cpu0=$(cpu_ticks "${servers[@]}")
  local pg0
  pg0=$(pg_ticks)
  for i in "${!urls[@]}"; do
    env BODY_FILE="$BODY" TOKEN="$TOKEN" "$@" timeout $((SECS + 60)) \
      wrk -t"$threads" -c"$conns" -d"$DURATION" --latency -s scripts/load.lua "${urls[$i]}" >"$TMP/wrk-$name-$i.txt" &
    wrks+=($!)
  done
  wait "${wrks[@]}"
  local cpu1 pg1
  cpu1=$(cpu_ticks "${servers[@]}")
  pg1=$(pg_ticks)
  for i in "${!urls[@]}"; do sed 's/^/   /' "$TMP/wrk-$name-$i.txt" >&2; done
  RESULT[$name]=$(cat "$TMP"/wrk-"$name"-*.txt | grep '^LOAD ' | awk '
    { for (f = 2; f <= NF; f++) { split($f, kv, "="); k = kv[1]; v = kv[2] + 0
        if (k ~ /_ms$/) { if (v > m[k]) m[k] = v } else if (k == "duration_s") { if (v > m[k]) m[k] = v } else m[k] += v
        if (!(k in seen)) { seen[k] = 1; order[++n] = k } } }
    END { if (!n) exit 1; line = "LOAD"; for (i = 1; i <= n; i++) line = line " " order[i] "=" m[order[i]]; print line }') ||
    die "no LOAD line from wrk for $name"
  RPS[$name]=$(field "$name" rps)
  P50[$name]=$(field "$name" p50_ms)
  P99[$name]=$(field "$name" p99_ms)
  # CPU milliseconds per 1,000 requests (= µs per request).
  CPU[$name]=$(awk -v d=$((cpu1 - cpu0)) -v hz="$TICKS" -v n="$(field "$name" requests)" \
    'BEGIN { printf "%.1f", (n > 0 ? d * 1000 / hz * 1000 / n : 0) }')
  RESULT[$name]+=" cpu_ms_per_1000=${CPU[$name]}"
  PGCPU[$name]=$(awk -v d=$((pg1 - pg0)) -v hz="$TICKS" -v n="$(field "$name" requests)" \
    'BEGIN { printf "%.1f", (n > 0 ? d * 1000 / hz * 1000 / n : 0) }')
}
field() { sed -nE "s/.* $2=([^ ]+).*/\1/p" <<<"${RESULT[$1]}"; }

count_rows() { sql "SELECT (SELECT count(*) FROM orders) || ' ' || (SELECT count(*) FROM parcels)"; }

# ---------------------------------------------------------------- address points
# POINTS points from scripts/address-points.sh over every postal code of the dataset (the
# demo request's two addresses are among its landmarks, so every preview below finds both),
# imported by `dropslot addresses import` into a database of their own: the rate of the
# first import and of a re-import (which must add nothing). A second serve process on that
# database then answers preview, alternated with the main server (no points) in A B B A
# order, POINTS_PAIRS times, twice: with the same body every time (both addresses found,
# then answered from the lookup cache, like a merchant's pick-up address), and with a new
# street number in the drop-off's text at every request (VARY_NUMBER in load.lua: every
# drop-off is looked up in the database and not found, the full cost of a lookup).
POINTS=${POINTS:-1000000}
points_phase() {
  log "address points: generating $POINTS"
  scripts/address-points.sh --prefix '' --count "$POINTS" >"$TMP/points.csv"
  POINTS_LINES=$(($(wc -l <"$TMP/points.csv") - 1))
  if [[ $BACKEND == sqlite ]]; then
    POINTS_DB_URL=sqlite://$TMP/points.db
    points_size() { du -h "$TMP/points.db" | cut -f1; }
  else
    psql "$DATABASE" -qtAXc "CREATE DATABASE ${LOAD_DB}_points" >/dev/null || die "cannot create ${LOAD_DB}_points"
    POINTS_DB_URL=$(db_url "${LOAD_DB}_points")
    points_size() { psql "$POINTS_DB_URL" -qtAX -c "SELECT pg_size_pretty(pg_total_relation_size('address_points'))"; }
  fi
  # Migrated first, so the import's time is the import's.
  "$DROPSLOT" migrate --database "$POINTS_DB_URL" 2>/dev/null || die "cannot migrate the points database"
  # import_points NAME: one import, its wall time in POINTS_MS[NAME] and its stdout line in POINTS_OUT[NAME].
  declare -gA POINTS_MS POINTS_OUT
  import_points() {
    local t0 t1
    t0=$(date +%s%N)
    "$DROPSLOT" addresses import "$TMP/points.csv" --database "$POINTS_DB_URL" >"$TMP/points-$1.out" 2>"$TMP/points-$1.err" ||
      { tail -3 "$TMP/points-$1.err" >&2; die "address points: the $1 import failed"; }
    t1=$(date +%s%N)
    POINTS_MS[$1]=$(((t1 - t0) / 1000000))
    POINTS_OUT[$1]=$(cat "$TMP/points-$1.out")
    log "address points, $1 import: ${POINTS_OUT[$1]} in ${POINTS_MS[$1]} ms"
  }
  import_points first
  import_points again
  [[ ${POINTS_OUT[first]} == "$POINTS_LINES points read, $POINTS_LINES new, 0 skipped" ]] ||
    die "address points: the first import said '${POINTS_OUT[first]}', expected $POINTS_LINES new"
  [[ ${POINTS_OUT[again]} == "$POINTS_LINES points read, 0 new, 0 skipped" ]] ||
    die "address points: the re-import said '${POINTS_OUT[again]}', expected 0 new"
  POINTS_SIZE=$(points_size)
  DROPSLOT_NOW=$NOW RUST_LOG=${RUST_LOG:-info} DROPSLOT_CONFIG=$ROOT/scripts/high-limits.toml \
    "$DROPSLOT" serve --database "$POINTS_DB_URL" --listen 127.0.0.1:0 >"$TMP/points-serve.log" 2>&1 &
  PIDS+=($!)
  local points_pid=$!
  local points_url points_token main_apps=("${APPS[@]}") main_token=$TOKEN k who variant n=0 name
  points_url=$(await_line "$TMP/points-serve.log" 'listening on http://127\.0\.0\.1:[0-9]+' "$points_pid")
  points_url=${points_url#listening on }
  points_token=$(grep -m1 -oE 'ds_test_[A-Za-z0-9_-]+' "$TMP/points-serve.log") || die "the points server printed no demo token"
  # The drop-off is at its landmark there, at its postal code's location here.
  curl -sS --max-time 10 -H "Authorization: Bearer $points_token" -H 'Content-Type: application/json' \
    --data-binary @"$BODY" "$points_url$API/requests/preview" | grep -q '"lat":"43.6426","lng":"-79.3871"' ||
    die "address points: the points server's preview did not place the drop-off at its point"
  declare -gA POINTS_RPS
  for variant in same distinct; do
    for ((k = 1; k <= ${POINTS_PAIRS:-2}; k++)); do
      for who in A B B A; do
        if [[ $who == B ]]; then APPS=("$points_url"); TOKEN=$points_token; else APPS=("${main_apps[@]}"); TOKEN=$main_token; fi
        name=points_${variant}_${who}_$((++n))
        if [[ $variant == same ]]; then run "$name" "$API/requests/preview"; else run "$name" "$API/requests/preview" "VARY_NUMBER=290 Bremner"; fi
        [[ $(field "$name" non2xx) == 0 ]] || die "address points: non-2xx previews"
        POINTS_RPS[${variant}_$who]+="${RPS[$name]} "
      done
    done
  done
  APPS=("${main_apps[@]}")
  TOKEN=$main_token
  kill "$points_pid"
  wait "$points_pid" 2>/dev/null || true
}
# points_report: the phase's lines of the report.
points_report() {
  ((POINTS > 0)) || return 0
  local rate again_rate mean_a mean_b variant
  rate=$(awk -v n="$POINTS_LINES" -v ms="${POINTS_MS[first]}" 'BEGIN { printf "%.0f", n * 1000 / ms }')
  again_rate=$(awk -v n="$POINTS_LINES" -v ms="${POINTS_MS[again]}" 'BEGIN { printf "%.0f", n * 1000 / ms }')
  echo "address points: $POINTS_LINES imported in ${POINTS_MS[first]} ms = $rate points/s; re-import (0 new) in ${POINTS_MS[again]} ms = $again_rate points/s; address_points $POINTS_SIZE"
  for variant in same distinct; do
    mean_a=$(printf '%s\n' ${POINTS_RPS[${variant}_A]} | awk '{ s += $1 } END { printf "%.1f", s / NR }')
    mean_b=$(printf '%s\n' ${POINTS_RPS[${variant}_B]} | awk '{ s += $1 } END { printf "%.1f", s / NR }')
    echo "preview, $variant addresses: without points ${POINTS_RPS[${variant}_A]}req/s (mean $mean_a); with $POINTS_LINES points ${POINTS_RPS[${variant}_B]}req/s (mean $mean_b); with/without = $(awk -v a="$mean_b" -v b="$mean_a" 'BEGIN { printf "%.3f", a / b }')"
  done
}
# Day plans (issue 30): a Toronto day of PLAN_ORDERS (2,000) live drop-offs over the 4 zones
# and 2 slots, PLAN_DRIVERS (40) drivers, then one delivery plan per depot through the API,
# each with PLAN_TIME_LIMIT (20) seconds to search, timed and judged rule by rule
# (scripts/plan-load.py). PLAN=0 skips it.
PLAN_LINES=()
plan_phase() {
  local client live operator
  client=$("$DROPSLOT" client create --name plan-load --database "$DB_URL")
  live=$("$DROPSLOT" token create --client "$client" --kind live --database "$DB_URL")
  operator=$("$DROPSLOT" token create --kind operator --database "$DB_URL")
  log "day plans: ${PLAN_ORDERS:-2000} drop-offs, ${PLAN_DRIVERS:-40} drivers, ${PLAN_TIME_LIMIT:-20} s per plan"
  mapfile -t PLAN_LINES < <(python3 "$ROOT/scripts/plan-load.py" "$APP" "$operator" "$live" "${NOW%%T*}") \
    || die "day plans: $(printf '%s\n' "${PLAN_LINES[@]}" | tail -1)"
  printf '%s\n' "${PLAN_LINES[@]}" >&2
}
plan_report() {
  ((${#PLAN_LINES[@]} > 0)) || return 0
  echo "day plans (scripts/plan-load.py, one line per depot, then the summary):"
  printf '  %s\n' "${PLAN_LINES[@]}"
}
if [[ ${PLAN:-1} == 1 && ${ONLY:-all} =~ ^(all|plan)$ ]]; then plan_phase; fi
if [[ ${ONLY:-all} == plan ]]; then
  echo
  echo "backend: $BACKEND"
  plan_report
  exit 0
fi

# limited_config FILE: the embedded area with every slot limited to 1,000,000 (never reached),
# and the test suite's generous rate limits: a server that checks every slot's limit.
limited_config() {
  {
    cat scripts/high-limits.toml
    sed -n '/^\[\[regions\]\]/,$p' crates/dropslot-core/src/config/default.toml |
      awk '/^\[\[cities\.pick_up_slots\]\]/ { pu = 1 } /^\[\[zones\.drop_off_slots\]\]/ { pu = 0 } { print }
        /^closing_margin/ { print (pu ? "capacity = { stops = 1000000 }" : "capacity = { stops = 1000000, parcels = 1000000 }") }'
  } >"$1"
  (($(grep -c '^capacity' "$1") > 0)) || die "no slot limited in $1"
}

# ======================================================= fleet capacity (issue 45)
# ONLY=fleet, and under ONLY=all unless FLEET=0. Two more servers, each on a fresh database of
# its own (a depot sells on its fleet or on its limits, never both on one day's orders): one
# with [capacity] mode = "fleet" (a slot has room while depot YYZ1's tentative plan of the
# date takes the stop), one in limits mode with every slot limited and never reached (the
# check fleet mode replaces). scripts/fleet-load.py seeds each with FLEET_DRIVERS (320) drivers
# of YYZ1 and the same FLEET_STOPS (1,000) live drop-offs on the day after NOW, so that on the
# fleet server that day's tentative plan holds them. Then, alternated A B B A FLEET_PAIRS (2)
# times each: preview of a drop-off asking for that day's TOR-DT-EV slot (every preview asks
# the 1,000-stop plan); then the seeded day's plan made by the fleet server (starting from its
# tentative plan) against the same day's plan made from scratch by the limits server,
# FLEET_PLAN_LIMIT (20) s each; last, sync of the main body (no slot asked: the fleet server
# books today's slots until its vans are full, then the next days').
declare -A FLEET_RPS=()
FLEET_PLAN_LINE=
FLEET_SEED_LINE=
FLEET_LATE_LINE=
FLEET_DAYS=
# fleet_server NAME CONFIG: a `dropslot serve` on a fresh database of its own; sets
# FLEET_SERVER_URL, FLEET_SERVER_DB and FLEET_SERVER_PID.
fleet_server() {
  if [[ $BACKEND == sqlite ]]; then
    FLEET_SERVER_DB=sqlite://$TMP/$1.db
  else
    psql "$DATABASE" -qtAXc "CREATE DATABASE ${LOAD_DB}_$1" >/dev/null || die "cannot create ${LOAD_DB}_$1"
    FLEET_SERVER_DB=$(db_url "${LOAD_DB}_$1")
  fi
  DROPSLOT_NOW=$NOW DROPSLOT_CONFIG=$2 "$DROPSLOT" serve --database "$FLEET_SERVER_DB" --listen 127.0.0.1:0 \
    >"$TMP/$1-server.log" 2>&1 &
  FLEET_SERVER_PID=$!
  PIDS+=("$FLEET_SERVER_PID")
  FLEET_SERVER_URL=$(await_line "$TMP/$1-server.log" 'listening on http://127\.0\.0\.1:[0-9]+' "$FLEET_SERVER_PID")
  FLEET_SERVER_URL=${FLEET_SERVER_URL#listening on }
}
fleet_phase() {
  local day side k n=0 endpoint fleet_url limits_url fleet_pid limits_pid fleet_db
  local fleet_live fleet_op limits_live limits_op client
  day=$(date -d "${NOW%%T*} + 1 day" +%F)
  sed 's/^mode = "limits"$/mode = "fleet"/' scripts/high-limits.toml >"$TMP/fleet.toml"
  grep -q '^mode = "fleet"$' "$TMP/fleet.toml" || die "no fleet mode in $TMP/fleet.toml"
  limited_config "$TMP/fleet-limited.toml"
  fleet_server fleet "$TMP/fleet.toml"
  fleet_url=$FLEET_SERVER_URL fleet_pid=$FLEET_SERVER_PID fleet_db=$FLEET_SERVER_DB
  client=$("$DROPSLOT" client create --name fleet-load --database "$fleet_db")
  fleet_live=$("$DROPSLOT" token create --client "$client" --kind live --database "$fleet_db")
  fleet_op=$("$DROPSLOT" token create --kind operator --database "$fleet_db")
  fleet_server limits "$TMP/fleet-limited.toml"
  limits_url=$FLEET_SERVER_URL limits_pid=$FLEET_SERVER_PID
  client=$("$DROPSLOT" client create --name fleet-load --database "$FLEET_SERVER_DB")
  limits_live=$("$DROPSLOT" token create --client "$client" --kind live --database "$FLEET_SERVER_DB")
  limits_op=$("$DROPSLOT" token create --kind operator --database "$FLEET_SERVER_DB")
  log "fleet: seeding ${FLEET_STOPS:-1000} drop-offs on $day, ${FLEET_DRIVERS:-320} drivers of YYZ1, on each server"
  FLEET_SEED_LINE=$(python3 scripts/fleet-load.py seed "$fleet_url" "$fleet_op" "$fleet_live" "$day") ||
    die "fleet: seeding failed: $FLEET_SEED_LINE"
  local limits_seed
  limits_seed=$(python3 scripts/fleet-load.py seed "$limits_url" "$limits_op" "$limits_live" "$day") ||
    die "fleet: seeding the limits server failed: $limits_seed"
  log "fleet: $FLEET_SEED_LINE (limits server: $limits_seed)"
  local saved_body=$BODY saved_token=$TOKEN saved_apps=("${APPS[@]}")
  printf '%s' '{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},"drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9","lat":43.6431,"lng":-79.3801,"person_name":"Jane Doe","person_phone":"+1 416 555 0100"},"scheduled_date":"'"$day"'","time_slot_code":"TOR-DT-EV","parcels":[{"unit":"g","values":500},{"unit":"g","values":1500}]}]}' >"$TMP/fleet-preview.json"
  for endpoint in preview plans sync; do
    if [[ $endpoint == plans ]]; then
      log "fleet: plans of $day, the booked day's against one from scratch (${FLEET_PLAN_LIMIT:-20} s each)"
      FLEET_PLAN_LINE=$(python3 scripts/fleet-load.py plan "$fleet_url" "$fleet_op" "$limits_url" "$limits_op" "$day") ||
        die "fleet: plans: $FLEET_PLAN_LINE"
      # Issue 46: late orders into the seeded day's published plan, on the limits server (its
      # sync runs book today, so the published day stays as it is).
      log "fleet: ${FLEET_LATE:-30} late orders into the published plan of $day"
      FLEET_LATE_LINE=$(python3 scripts/fleet-load.py late "$limits_url" "$limits_op" "$limits_live" "$day" \
        "$(date -d "$day + 1 day" +%F)") || die "fleet: late orders: $FLEET_LATE_LINE"
      continue
    fi
    if [[ $endpoint == preview ]]; then BODY=$TMP/fleet-preview.json; else BODY=$saved_body; fi
    for ((k = 1; k <= ${FLEET_PAIRS:-2}; k++)); do
      for side in limits fleet fleet limits; do
        if [[ $side == fleet ]]; then APPS=("$fleet_url") TOKEN=$fleet_live; else APPS=("$limits_url") TOKEN=$limits_live; fi
        n=$((n + 1))
        run "fleet_${endpoint}_${side}_$n" "$API/requests/$endpoint"
        [[ $(field "fleet_${endpoint}_${side}_$n" non2xx) == 0 ]] || die "fleet $endpoint $side: non-2xx responses"
        FLEET_RPS[${endpoint}_$side]+="${RPS[fleet_${endpoint}_${side}_$n]} "
        FLEET_RPS[${endpoint}_${side}_cpu]+="${CPU[fleet_${endpoint}_${side}_$n]} "
      done
    done
  done
  BODY=$saved_body
  TOKEN=$saved_token
  APPS=("${saved_apps[@]}")
  local q="SELECT count(DISTINCT date) || ' days, at most ' || coalesce(max(n), 0) || ' stops a day' FROM (SELECT date, count(*) AS n FROM fleet_stops WHERE depot = 'YYZ1' GROUP BY date) d"
  if [[ $BACKEND == sqlite ]]; then
    FLEET_DAYS=$(sqlite3 "file:${fleet_db#sqlite://}?mode=ro" "$q")
  else
    FLEET_DAYS=$(psql "$fleet_db" -qtAX -c "$q")
  fi
  kill "$fleet_pid" "$limits_pid"
  wait "$fleet_pid" "$limits_pid" 2>/dev/null || true
}
fleet_report() {
  [[ -n $FLEET_SEED_LINE ]] || return 0
  local endpoint a b
  echo "fleet capacity (issue 45; seed: $FLEET_SEED_LINE; YYZ1's days after the sync runs: $FLEET_DAYS):"
  for endpoint in preview sync; do
    [[ -n ${FLEET_RPS[${endpoint}_limits]:-} ]] || continue # FLEET_PAIRS=0: no runs
    a=$(printf '%s\n' ${FLEET_RPS[${endpoint}_limits]} | awk '{ s += $1 } END { printf "%.1f", s / NR }')
    b=$(printf '%s\n' ${FLEET_RPS[${endpoint}_fleet]} | awk '{ s += $1 } END { printf "%.1f", s / NR }')
    echo "  $endpoint: limits ${FLEET_RPS[${endpoint}_limits]}req/s (mean $a, CPU ms/1000: ${FLEET_RPS[${endpoint}_limits_cpu]}); fleet ${FLEET_RPS[${endpoint}_fleet]}req/s (mean $b, CPU ms/1000: ${FLEET_RPS[${endpoint}_fleet_cpu]}); fleet/limits = $(awk -v a="$b" -v b="$a" 'BEGIN { printf "%.3f", a / b }')"
  done
  echo "  day plans: $FLEET_PLAN_LINE"
  echo "  late orders (issue 46): $FLEET_LATE_LINE"
}
if [[ ${FLEET:-1} == 1 && ${ONLY:-all} =~ ^(all|fleet)$ ]]; then fleet_phase; fi
if [[ ${ONLY:-all} == fleet ]]; then
  echo
  echo "backend: $BACKEND"
  fleet_report
  exit 0
fi

# ======================================================= operator side under load (issue 33 item 5)
# ONLY=operator, and under ONLY=all unless OPERATOR=0. A server of its own (a fresh database,
# the clock pinned to NOW, recipient e-mails going over SMTP to the sink of
# crates/dropslot/examples/smtp_sink.rs), the day of scripts/plan-load.py (PLAN_ORDERS
# drop-offs, each with its own recipient e-mail, and PLAN_DRIVERS drivers), then, with
# scripts/operator-load.py as the client:
#  1. preview and sync (run(), as everywhere in this script, against this server with its demo
#     token) idle (A) and while both depots' plans are being solved (B: `operator-load.py solve`
#     asks for them 1 s before each run, time_limit_s covering the warm-up and the run, and the
#     plans must answer after the run ended), A B B A OPERATOR_PAIRS times: the p99 loaded over
#     idle (target: at most 2);
#  2. OPERATOR_DRIVERS (200) drivers with a published plan per depot and their shipments at the
#     depot (`prepare`); preview and sync again, A B B A, the B runs while every driver's app
#     plays the day (`drive`: sign-in, scans, route start, positions every 30 s of real time,
#     each stop delivered with a signature or failed at its planned ETA, the day's stops
#     compressed into the B runs' span): the same ratio, and the driver calls' own p50/p99;
#  3. the e-mails those moves cause against the delivered events (rate, lag to the sink), and
#     every e-mail of the day sent exactly once (`verify`);
#  4. the driven day's report of each depot (`report`: GET /ops/reports/day, JSON and CSV,
#     timed; CONTRACT §17).
# Its report is printed when it ends; a non-2xx answer, or an e-mail lost, unsent or duplicated,
# stops load.sh non-zero.
OPERATOR_LINES=()
operator_phase() {
  local sink_bin=$TARGET/release/examples/smtp_sink
  if [[ ${NO_BUILD:-0} != 1 ]]; then
    timeout "${BUILD_TIMEOUT:-3600}" cargo build --release -p dropslot --example smtp_sink
  fi
  [[ -x $sink_bin ]] || die "operator: $sink_bin not found"
  local op_db_url
  if [[ $BACKEND == sqlite ]]; then
    op_db_url=sqlite://$TMP/operator.db
  else
    psql "$DATABASE" -qtAXc "CREATE DATABASE ${LOAD_DB}_operator" >/dev/null || die "cannot create ${LOAD_DB}_operator"
    # Dropped on exit as the script's own databases are (after cleanup has stopped the servers).
    trap 'cleanup; [[ ${KEEP:-0} == 1 ]] || psql "$DATABASE" -qtAXc "DROP DATABASE IF EXISTS ${LOAD_DB}_operator WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
    op_db_url=$(db_url "${LOAD_DB}_operator")
  fi
  local smtp_port sink_log=$TMP/operator-smtp.jsonl
  smtp_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  : >"$sink_log"
  "$sink_bin" "127.0.0.1:$smtp_port" "$sink_log" >"$TMP/operator-smtp.out" 2>&1 &
  PIDS+=($!)
  local sink_pid=$!
  await_line "$TMP/operator-smtp.out" '^ready' "$sink_pid" >/dev/null
  {
    cat scripts/high-limits.toml
    printf '[notifications.smtp]\nhost = "127.0.0.1"\nport = %s\nsecurity = "none"\nfrom = "Load Courier <courier@dropslot.test>"\n' "$smtp_port"
  } >"$TMP/operator.toml"
  DROPSLOT_NOW=$NOW RUST_LOG=${RUST_LOG:-info} DROPSLOT_CONFIG=$TMP/operator.toml \
    "$DROPSLOT" serve --database "$op_db_url" --listen 127.0.0.1:0 >"$TMP/operator-serve.log" 2>&1 &
  PIDS+=($!)
  local op_pid=$! op_url op_test client live ops operator date=${NOW%%T*}
  op_url=$(await_line "$TMP/operator-serve.log" 'listening on http://127\.0\.0\.1:[0-9]+' "$op_pid")
  op_url=${op_url#listening on }
  op_test=$(grep -m1 -oE 'ds_test_[A-Za-z0-9_-]+' "$TMP/operator-serve.log") || die "operator: no demo token printed"
  client=$("$DROPSLOT" client create --name operator-load --database "$op_db_url")
  live=$("$DROPSLOT" token create --client "$client" --kind live --database "$op_db_url")
  ops=$("$DROPSLOT" token create --client "$client" --kind ops --database "$op_db_url")
  operator=$("$DROPSLOT" token create --kind operator --database "$op_db_url")
  local orders=${PLAN_ORDERS:-2000}
  log "operator: the day (scripts/plan-load.py): $orders drop-offs with recipient e-mails, ${PLAN_DRIVERS:-40} drivers"
  PLAN_EMAIL=example.com PLAN_PARALLEL=1 PLAN_TIME_LIMIT=${OPERATOR_SETUP_LIMIT:-5} timeout 900 \
    python3 scripts/plan-load.py "$op_url" "$operator" "$live" "$date" >"$TMP/operator-day.txt" ||
    { cat "$TMP/operator-day.txt" >&2; die "operator: plan-load.py failed"; }
  sed 's/^/   /' "$TMP/operator-day.txt" >&2
  # Their "scheduled" e-mails sent before anything is measured.
  local sent
  for _ in $(seq 1200); do
    sent=$(wc -l <"$sink_log")
    ((sent >= orders)) && break
    sleep 0.1
  done
  ((sent >= orders)) || die "operator: $sent of the $orders 'scheduled' e-mails reached the sink in 120 s"

  local saved_apps=("${APPS[@]}") saved_token=$TOKEN
  APPS=("$op_url")
  TOKEN=$op_test
  local warm=0
  [[ $WARMUP == 0 ]] || warm=$(seconds "$WARMUP")
  # 1 s before the warm-up, the warm-up, run()'s 1 s pause, the run, 4 s to spare.
  local limit=$((1 + warm + 1 + SECS + 4))
  ((limit <= 60)) || die "operator: WARMUP + DURATION too long for one plan's time_limit_s (at most 60 s): $limit s"
  declare -A p99=()
  local k who ep n=0 name solve_pid solve_out wrk_end first
  # operator_run PHASE SIDE ENDPOINT: one run() against the operator server; its p99 and rate
  # kept in p99[PHASE_ENDPOINT_SIDE] and p99[PHASE_ENDPOINT_SIDE_rps].
  operator_run() {
    name=op_$1_$3_$2_$((++n))
    run "$name" "$API/requests/$3"
    wrk_end=$(date +%s.%N)
    [[ $(field "$name" non2xx) == 0 ]] || die "operator: $name: $(field "$name" non2xx) non-2xx responses"
    p99[$1_$3_$2]+="$(field "$name" p99_ms) "
    p99[$1_$3_$2_rps]+="$(printf '%.0f' "$(field "$name" rps)") "
    p99[$1_$3_$2_errors]=$((${p99[$1_$3_$2_errors]:-0} + $(field "$name" errors)))
  }
  local parts=" ${OPERATOR_PARTS:-solve drive} "
  if [[ $parts == *" solve "* ]]; then
    log "operator 1: preview and sync idle (A) and while both depots' plans are solved (B, time_limit_s $limit)"
  fi
  for ((k = 1; k <= ${OPERATOR_PAIRS:-1}; k++)); do
    [[ $parts == *" solve "* ]] || break
    for who in A B B A; do
      for ep in preview sync; do
        if [[ $who == B ]]; then
          solve_out=$TMP/operator-solve-$n.txt
          timeout $((limit + 300)) python3 scripts/operator-load.py solve "$op_url" "$operator" "$date" "$limit" \
            >"$solve_out" 2>&1 &
          solve_pid=$!
          sleep 1
        fi
        operator_run solve "$who" "$ep"
        if [[ $who == B ]]; then
          wait "$solve_pid" || { cat "$solve_out" >&2; die "operator: the plans solved beside $name failed"; }
          sed 's/^/   /' "$solve_out" >&2
          first=$(sed -nE 's/.*"first_answer": ([0-9.]+).*/\1/p' "$solve_out")
          awk -v a="$first" -v b="$wrk_end" 'BEGIN { exit !(a >= b) }' ||
            die "operator: a plan answered before $name's run ended: the solver was not busy throughout"
          grep -h '"depot"' "$solve_out" >>"$TMP/operator-solves.txt"
        fi
      done
    done
  done

  # "alone": the same drive without the API runs, so the driver calls' latencies and the
  # server's CPU per driver call are theirs alone (a day is driven once: not with "drive").
  local alone=0
  [[ $parts == *" alone "* && $parts != *" drive "* ]] && alone=1
  if [[ $parts == *" drive "* || $alone == 1 ]]; then
    log "operator 2: ${OPERATOR_DRIVERS:-200} drivers, a published plan per depot, their shipments at the depot"
    timeout 900 python3 scripts/operator-load.py prepare "$op_url" "$operator" "$ops" "$live" "$date" "$TMP/operator-state.json" \
      >"$TMP/operator-prepare.txt" || { cat "$TMP/operator-prepare.txt" >&2; die "operator: prepare failed"; }
    sed 's/^/   /' "$TMP/operator-prepare.txt" >&2
    # One A B B A (a day is driven once): the drive covers both B rounds of preview and sync
    # (each run: warm-up, run()'s 1 s, the run, ~1 s of wrk's start and the CPU reading), with
    # 4 s to spare; its last actions are checked to come after the last B run ended.
    local drive_s=$((2 * 2 * (warm + 1 + SECS + 1) + 4)) drive_pid b_end last
    ((alone)) || for ep in preview sync; do operator_run drive A "$ep"; done
    log "operator 2: ${OPERATOR_DRIVERS:-200} driver apps for $drive_s s $( ((alone)) && echo alone || echo 'beside the API runs') (the day's stops compressed into them)"
    NOW=$NOW OPERATOR_SERVER_PID=$op_pid timeout $((drive_s + 300)) python3 scripts/operator-load.py drive "$op_url" "$TMP/operator-state.json" \
      "$sink_log" "$drive_s" "$TMP/operator-drive.json" >"$TMP/operator-drive.txt" 2>&1 &
    drive_pid=$!
    sleep 1
    b_end=0
    if ((!alone)); then
      for who in B B; do
        for ep in preview sync; do operator_run drive "$who" "$ep"; done
      done
      b_end=$wrk_end
    fi
    wait "$drive_pid" || { cat "$TMP/operator-drive.txt" >&2; die "operator: the driver apps failed"; }
    sed 's/^/   /' "$TMP/operator-drive.txt" >&2
    last=$(sed -nE 's/.*"last_action": ([0-9.]+).*/\1/p' "$TMP/operator-drive.txt")
    awk -v a="$last" -v b="$b_end" 'BEGIN { exit !(a >= b) }' ||
      die "operator: the driver apps stopped before the last B run ended"
    ((alone)) || for ep in preview sync; do operator_run drive A "$ep"; done
    log "operator 3: every e-mail of the day, once"
    timeout 600 python3 scripts/operator-load.py verify "$op_url" "$live" "$TMP/operator-state.json" "$sink_log" \
      "$TMP/operator-drive.json" >"$TMP/operator-verify.txt" 2>&1 ||
      { cat "$TMP/operator-verify.txt" >&2; die "operator: notifications lost, unsent or duplicated"; }
    # The driven day's report (CONTRACT §17) of each depot, JSON and CSV, timed.
    log "operator 4: the day's report of each depot (GET /ops/reports/day, JSON and CSV)"
    timeout 600 python3 scripts/operator-load.py report "$op_url" "$operator" "$date" >"$TMP/operator-report.txt" 2>&1 ||
      { cat "$TMP/operator-report.txt" >&2; die "operator: the day's report failed"; }
    sed 's/^/   /' "$TMP/operator-report.txt" >&2
    local report_line
    while IFS= read -r report_line; do OPERATOR_LINES+=("$report_line"); done < <(grep '^report ' "$TMP/operator-report.txt")
  fi
  APPS=("${saved_apps[@]}")
  TOKEN=$saved_token
  kill "$op_pid" "$sink_pid" 2>/dev/null || true
  wait "$op_pid" "$sink_pid" 2>/dev/null || true

  # The report.
  local phase ratio a b line
  op_mean() { printf '%s\n' "$@" | awk '{ s += $1 } END { printf "%.2f", s / NR }'; }
  for phase in solve drive; do
    [[ $parts == *" $phase "* ]] || continue
    for ep in preview sync; do
      # shellcheck disable=SC2086 # space-separated on purpose
      a=$(op_mean ${p99[${phase}_${ep}_A]})
      # shellcheck disable=SC2086
      b=$(op_mean ${p99[${phase}_${ep}_B]})
      ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / a }')
      OPERATOR_LINES+=("$(printf '%-7s %-7s p99 idle %s ms (mean %s), %s %s ms (mean %s): loaded/idle %s (%s); req/s idle %s, loaded %s; socket errors %s/%s' \
        "$phase" "$ep" "${p99[${phase}_${ep}_A]% }" "$a" "$([[ $phase == solve ]] && echo 'solving' || echo 'driving')" \
        "${p99[${phase}_${ep}_B]% }" "$b" "$ratio" "$(awk -v r="$ratio" 'BEGIN { print (r <= 2 ? "target <= 2 met" : "target <= 2 NOT met") }')" \
        "${p99[${phase}_${ep}_A_rps]% }" "${p99[${phase}_${ep}_B_rps]% }" "${p99[${phase}_${ep}_A_errors]:-0}" "${p99[${phase}_${ep}_B_errors]:-0}")")
    done
  done
  while IFS= read -r line; do OPERATOR_LINES+=("$line"); done < <(OPERATOR_ALONE=$alone python3 - "$TMP/operator-drive.json" "$TMP/operator-prepare.txt" "$TMP/operator-verify.txt" \
    "$TMP/operator-solves.txt" <<'PY'
import json, os, sys
if os.path.exists(sys.argv[4]):
    solves = [json.loads(l) for l in open(sys.argv[4])]
    print(f"plans solved beside the B runs: {len(solves)} (2 a run), {min(l['seconds'] for l in solves):.1f}-"
          f"{max(l['seconds'] for l in solves):.1f} s at time_limit_s {solves[0]['time_limit_s']}, each assigning "
          f"{min(l['assigned'] for l in solves)}-{max(l['assigned'] for l in solves)} shipments "
          f"({max(l['unassigned'] for l in solves)} unassigned at most)")
    for depot in sorted({l["depot"] for l in solves}):
        km = sorted(l["distance_km"] for l in solves if l["depot"] == depot)
        print(f"  {depot}: the plans' distance {km[0]}-{km[-1]} km ({', '.join(str(k) for k in km)})")
if not os.path.exists(sys.argv[1]):
    sys.exit(0)
s = json.load(open(sys.argv[1]))["summary"]
prep = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")][-1]
ver = [json.loads(l) for l in open(sys.argv[3]) if l.startswith("{")][-1]
print(f"driver apps: {s['drivers']} ({s['drivers_with_stops']} with stops; vans of {prep['van_parcels']} parcels; "
      f"{prep['planned_shipments']} shipments planned, {prep['unassigned']} unassigned)")
print(f"  TIME COMPRESSED: the day's departures to its last stop ({s['day'][0][11:16]}-{s['day'][1][11:16]} UTC) played "
      f"x{s['compression']:.0f} (over {s['day_s']:.0f} s; the drive lasted {s['seconds']:.0f} s: {s['apps_started']} apps "
      f"started, {s['shipments_left_in_transit']} shipments left in transit at its end); positions NOT compressed: every "
      f"{s['position_every_s']:g} s of real time per app ({s['positions']} posted)")
for kind, c in s["calls"].items():
    if c["n"]:
        print(f"  {kind:<9} {c['n']:>6} calls  p50 {c['p50_ms']:>8.2f} ms  p99 {c['p99_ms']:>8.2f} ms  max {c['max_ms']:>8.2f} ms")
alone = os.environ.get("OPERATOR_ALONE") == "1"
print(f"  non-2xx: {s['non2xx']}; connections reopened: {s['reconnects']}; the server's CPU "
      + (f"per driver call {s['server_cpu_ms_per_call']} ms (the e-mails sent meanwhile included)" if alone else
         f"over the drive {s['server_cpu_s']} s in {s['seconds']:.0f} s (the API runs' included)")
      + f"; the apps' client {s['client_cpu_s']} s of CPU")
print(f"notifications: {s['started_shipments']} out for delivery, {s['delivered']} delivered and {s['failed']} failed: "
      f"delivered events (stop outcomes) at {s['outcomes_per_s']}/s over {s['outcome_span_s']} s, their e-mails at "
      f"{s['outcome_emails_per_s']}/s over {s['outcome_email_span_s']} s ({s['outcome_emails']}); every e-mail at the sink "
      f"in the outcomes' span (out for delivery too) {s['emails_per_s_in_outcome_span']}/s; all {s['emails_owed']} owed received")
print(f"  from a stop's request to its recipient's e-mail at the sink (20 ms polls): p50 {s['lag_ms']['p50']} ms, "
      f"p99 {s['lag_ms']['p99']} ms, max {s['lag_ms']['max']} ms over {s['lag_ms']['n']}")
print(f"  the day's e-mails: {ver['email_rows_sent']} sent by the service, {ver['sink_messages']} at the sink, "
      f"{ver['duplicate_message_ids']} Message-ID twice, {ver['problems']} shipments with a lost, unsent or extra one: "
      + ("OK" if ver["problems"] == 0 and ver["duplicate_message_ids"] == 0 else "FAIL"))
PY
)
  echo
  echo "operator side under load (issue 33 item 5), backend $BACKEND, $orders drop-offs, wrk -c$CONNECTIONS -d$DURATION:"
  printf '  %s\n' "${OPERATOR_LINES[@]}"
}
if [[ ${OPERATOR:-1} == 1 && ${ONLY:-all} =~ ^(all|operator)$ ]]; then operator_phase; fi
if [[ ${ONLY:-all} == operator ]]; then exit 0; fi
# ======================================================= end of the operator side

((POINTS > 0)) && points_phase
if [[ ${ONLY:-all} == points ]]; then
  echo
  echo "backend: $BACKEND"
  points_report
  exit 0
fi

FLOOR_ONLY=1 run floor "$FLOOR_URL/"
run preview "$API/requests/preview"
[[ $(field preview non2xx) == 0 ]] || die "preview: $(field preview non2xx) non-2xx responses"

# What rate limiting and the HTTP metrics cost on preview: the same binary, on the same
# database, with every bucket off and server.http_metrics = false, its runs alternated with
# the normal server's (one process only).
if ((PROCESSES == 1)); then
  cat >"$TMP/bare.toml" <<'TOML'
[server]
http_metrics = false
[rate_limits]
preview = { per_second = 0, burst = 0 }
orders = { per_second = 0, burst = 0 }
other = { per_second = 0, burst = 0 }
[public_rate_limit]
per_second = 0
burst = 0
[capacity]
mode = "limits"
TOML
  DROPSLOT_NOW=$NOW RUST_LOG=${RUST_LOG:-info} DROPSLOT_CONFIG=$TMP/bare.toml \
    "$DROPSLOT" serve --database "$DB_URL" --listen 127.0.0.1:0 >"$TMP/bare.log" 2>&1 &
  PIDS+=($!)
  BARE_PID=$!
  BARE=$(await_line "$TMP/bare.log" 'listening on http://127\.0\.0\.1:[0-9]+' "$BARE_PID")
  NORMAL_APPS=("${APPS[@]}")
  # PREVIEW_PAIRS (default 2) alternations of the bare server and the normal one after the
  # normal run above: on, off, on, off, on; the ratio compares the means, so a drift of the
  # machine during the runs weighs on both sides alike.
  ON_RATES=("${RPS[preview]}")
  OFF_RATES=()
  for ((k = 1; k <= ${PREVIEW_PAIRS:-2}; k++)); do
    APPS=("${BARE#listening on }")
    run "preview_off_$k" "$API/requests/preview"
    OFF_RATES+=("${RPS[preview_off_$k]}")
    APPS=("${NORMAL_APPS[@]}")
    run "preview_on_$k" "$API/requests/preview"
    ON_RATES+=("${RPS[preview_on_$k]}")
  done
  kill "$BARE_PID"
  wait "$BARE_PID" 2>/dev/null || true
  mean() { printf '%s\n' "$@" | awk '{ s += $1 } END { printf "%.1f", s / NR }'; }
  PREVIEW_ON=$(mean "${ON_RATES[@]}")
  PREVIEW_OFF=$(mean "${OFF_RATES[@]}")
fi

# watch_start: samples, every 0.2 s until watch_stop, the largest -wal file (SQLite) and the
# serve processes' largest resident set, into $TMP/watch ("WAL_BYTES RSS_KB").
watch_start() {
  (
    wal=0 rss=0
    while :; do
      if [[ $BACKEND == sqlite && -f $DB-wal ]]; then
        w=$(stat -c %s "$DB-wal" 2>/dev/null || echo 0)
        ((w > wal)) && wal=$w
      fi
      for pid in "${APP_PIDS[@]}"; do
        r=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
        ((${r:-0} > rss)) && rss=$r
      done
      echo "$wal $rss" >"$TMP/watch.tmp" && mv "$TMP/watch.tmp" "$TMP/watch"
      sleep 0.2
    done
  ) &
  WATCH_PID=$!
}
watch_stop() { kill "$WATCH_PID" 2>/dev/null || true; wait "$WATCH_PID" 2>/dev/null || true; cat "$TMP/watch"; }
# peak_rss: the largest VmHWM (peak resident set, KB) of the serve processes.
peak_rss() {
  local pid m=0 r
  for pid in "${APP_PIDS[@]}"; do
    r=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
    ((${r:-0} > m)) && m=$r
  done
  echo "$m"
}

# metric NAME: the sum of a counter over the serve processes' /metrics.
metric() {
  local app t=0 v
  for app in "${APPS[@]}"; do
    v=$(curl -sS --max-time 10 "$app/metrics" | awk -v n="dropslot_$1_total" '$1 == n { print $2 }')
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
# Counted after the warm-up (whose orders are not part of the check), just before the timed run.
count_before() {
  read -r orders_before parcels_before < <(count_rows)
  batches_before=$(metric store_write_batches)
  jobs_before=$(metric store_batched_jobs)
  # PERF_WRITER=1 (SQLite, one process): the writer thread's profile over the timed sync run.
  if [[ ${PERF_WRITER:-0} == 1 && $BACKEND == sqlite ]]; then
    local tid
    tid=$(grep -lx sqlite-writer /proc/"${APP_PIDS[0]}"/task/*/comm | head -1 | cut -d/ -f5) ||
      die "no sqlite-writer thread in process ${APP_PIDS[0]}"
    command -v perf >/dev/null || die "PERF_WRITER=1 needs perf"
    perf record -q -F 499 --call-graph dwarf,16384 -t "$tid" -o "$TMP/writer.perf" -- sleep "$SECS" \
      >/dev/null 2>&1 &
    PERF_PID=$!
  fi
}
watch_start
BEFORE_TIMED=count_before run sync "$API/requests/sync" WRK_COUNT=1
read -r SYNC_WAL SYNC_RSS < <(watch_stop)
if [[ -n ${PERF_PID:-} ]]; then
  wait "$PERF_PID" || true
  # Self time by symbol, and time under each of the store's functions (the jobs and their
  # statements), for the report's end.
  trim() { sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//; s/[[:space:]]+$//'; }
  perf report -i "$TMP/writer.perf" --stdio --no-children --sort symbol --percent-limit 1 2>/dev/null |
    grep -E '^ +[0-9]' | trim | head -30 >"$TMP/writer-self.txt" || true
  perf report -i "$TMP/writer.perf" --stdio --children --sort symbol --percent-limit 2 -g none 2>/dev/null |
    grep -E '^ +[0-9]' | grep -E 'dropslot_store|sqlite3|fdatasync|pwrite|mutex' |
    grep -vE 'begin_short_backtrace|call_once|catch_unwind|spawn_unchecked' | trim | head -40 >"$TMP/writer-children.txt" || true
fi
PEAK_RSS_API=$(peak_rss)
# The orders a write transaction grouped during the timed run (the mean).
SYNC_GROUP=$(awk -v j=$(($(metric store_batched_jobs) - jobs_before)) -v b=$(($(metric store_write_batches) - batches_before)) \
  'BEGIN { printf "%d", (b > 0 ? j / b + 0.5 : 1) }')
((SYNC_GROUP >= 1)) || SYNC_GROUP=1
# Sync's own floor (SQLite): a bare rusqlite writer of the same rows (the newest order's),
# with the same durability and the same grouping, on a fresh database beside this one, for
# as long as the sync run (examples/sync_floor.rs). It runs while nothing else does.
if [[ $BACKEND == sqlite ]]; then
  "$DROPSLOT" migrate --database "sqlite://$TMP/floor.db" >/dev/null 2>&1 || die "cannot migrate the sync floor's database"
  "$DROPSLOT" client create --name floor --database "sqlite://$TMP/floor.db" >/dev/null
  for pid in "${APP_PIDS[@]}"; do kill -STOP "$pid"; done
  # The sync run's dirty pages written back first: the floor's fsyncs would queue behind them.
  sync
  SYNC_FLOOR_LINE=$("$SYNC_FLOOR" "$TMP/floor.db" "$DB" "$SYNC_GROUP" "$SECS") || die "the sync floor failed"
  for pid in "${APP_PIDS[@]}"; do kill -CONT "$pid"; done
else
  # On PostgreSQL: a bare tokio-postgres pipeline of the same rows on a fresh database of the
  # same server, with the same grouping: as many connections as the processes' order writers
  # ([postgres] order_writers, 4 by default), each committing SYNC_GROUP orders a transaction
  # (examples/sync_floor_pg.rs).
  psql "$DATABASE" -qtAXc "CREATE DATABASE ${LOAD_DB}_floor" >/dev/null || die "cannot create ${LOAD_DB}_floor"
  FLOOR_DB_URL=$(db_url "${LOAD_DB}_floor")
  "$DROPSLOT" migrate --database "$FLOOR_DB_URL" >/dev/null 2>&1 || die "cannot migrate the sync floor's database"
  "$DROPSLOT" client create --name floor --database "$FLOOR_DB_URL" >/dev/null
  for pid in "${APP_PIDS[@]}"; do kill -STOP "$pid"; done
  floor_pg0=$(pg_ticks)
  SYNC_FLOOR_LINE=$("$SYNC_FLOOR_PG" "$FLOOR_DB_URL" "$DB_URL" "$SYNC_GROUP" "$SECS" $((4 * PROCESSES))) ||
    die "the sync floor failed"
  floor_pg1=$(pg_ticks)
  for pid in "${APP_PIDS[@]}"; do kill -CONT "$pid"; done
  # PostgreSQL's CPU an order of the floor's (µs), against PGCPU[sync]: the same rows written.
  PGCPU[sync_floor]=$(awk -v d=$((floor_pg1 - floor_pg0)) -v hz="$TICKS" \
    -v n="$(sed -nE 's/.*orders=([0-9]+).*/\1/p' <<<"$SYNC_FLOOR_LINE")" 'BEGIN { printf "%.1f", (n > 0 ? d * 1e6 / hz / n : 0) }')
fi
log "$SYNC_FLOOR_LINE"
RPS[sync_floor]=$(sed -nE 's/.* per_s=([^ ]+).*/\1/p' <<<"$SYNC_FLOOR_LINE")
# Requests wrk abandoned when its clock ran out may still be committing: let them finish,
# then kill the server hard (no graceful shutdown) before counting what is on disk.
sleep 1
for pid in "${APP_PIDS[@]}"; do kill -9 "$pid"; wait "$pid" 2>/dev/null || true; done
read -r orders_after parcels_after < <(count_rows)

log "restarting dropslot on the same database"
start_apps "$TMP/dropslot-restarted"

# ---------------------------------------------------------------- slot capacity (issue 28)
# What slot capacity costs when limits are set but never reached: the same binary on the same
# database with every slot limited to 1,000,000 (the embedded default's area, each slot given
# a `capacity`), its runs alternated with the normal server's (off on on off), for preview
# and then sync, CAPACITY_PAIRS times each (default 2; 0 skips). One process only.
declare -A CAPACITY=()
if ((PROCESSES == 1)) && [[ ${CAPACITY_PAIRS:-2} != 0 ]]; then
  limited_config "$TMP/limited.toml"
  DROPSLOT_NOW=$NOW RUST_LOG=${RUST_LOG:-info} DROPSLOT_BASE_URL=${DROPSLOT_BASE_URL:-http://127.0.0.1:8080} \
    DROPSLOT_WEBHOOKS_ALLOW_PRIVATE=1 DROPSLOT_CONFIG=$TMP/limited.toml \
    "$DROPSLOT" serve --database "$DB_URL" --listen 127.0.0.1:0 >"$TMP/limited.log" 2>&1 &
  PIDS+=($!)
  LIMITED_PID=$!
  LIMITED=$(await_line "$TMP/limited.log" 'listening on http://127\.0\.0\.1:[0-9]+' "$LIMITED_PID")
  NORMAL_APPS=("${APPS[@]}")
  n=0
  for endpoint in preview sync; do
    for ((k = 1; k <= ${CAPACITY_PAIRS:-2}; k++)); do
      for side in off on on off; do
        if [[ $side == on ]]; then APPS=("${LIMITED#listening on }"); else APPS=("${NORMAL_APPS[@]}"); fi
        n=$((n + 1))
        run "capacity_${endpoint}_${side}_$n" "$API/requests/$endpoint"
        [[ $(field "capacity_${endpoint}_${side}_$n" non2xx) == 0 ]] || die "capacity $endpoint $side: non-2xx responses"
        CAPACITY[${endpoint}_$side]+="${RPS[capacity_${endpoint}_${side}_$n]} "
      done
    done
  done
  APPS=("${NORMAL_APPS[@]}")
  kill "$LIMITED_PID"
  wait "$LIMITED_PID" 2>/dev/null || true
fi

# ---------------------------------------------------------------- asynchronous orders
# ASYNC_REQUESTS requests of 100 drop-offs each (1 to 5 parcels), posted ASYNC_CLIENTS at a
# time; the rate is drop-off shipments written per second from the first POST to the moment
# no request is left queued or processing (so the door's validation counts too).
ASYNC_N=${ASYNC_REQUESTS:-200}
ASYNC_BODY=$TMP/async.json
python3 - "$ASYNC_BODY" <<'PY'
import json, sys
units = [("g", 500), ("kg", 3), ("lb", 15), ("oz", 100), ("g", 1500)]
drop_offs = [{"address": {"text": "290 Bremner Blvd, Toronto, ON M5V 3L9", "person_name": f"Receiver {i}",
                          "person_phone": "+1 416 555 0100"},
              "parcels": [{"unit": units[(i + j) % 5][0], "values": units[(i + j) % 5][1]} for j in range(i % 5 + 1)]}
             for i in range(100)]
json.dump({"pick_up_address": {"text": "100 King St W, Toronto, ON M5X 1A9"}, "drop_offs": drop_offs},
          open(sys.argv[1], "w"))
PY
unfinished_requests() { sql "SELECT count(*) FROM order_requests WHERE status IN ('queued', 'processing')"; }
async_before=$(sql "SELECT count(*) FROM drop_off_shipments")
log "asynchronous orders: $ASYNC_N requests of 100 drop-offs, ${ASYNC_CLIENTS:-8} at a time"
async_start=$(date +%s%N)
# One curl process for all of them (--parallel), so the client's own start-up does not take
# the CPU the server needs: one URL and one -o per request, the same body and headers.
async_args=()
for _ in $(seq "$ASYNC_N"); do async_args+=(-o /dev/null "$APP$API/requests/async"); done
curl -sS --parallel --parallel-immediate --parallel-max "${ASYNC_CLIENTS:-8}" --max-time 60 -w '%{http_code}\n' \
  -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' --data-binary @"$ASYNC_BODY" \
  "${async_args[@]}" >"$TMP/async-codes.txt"
ASYNC_ACCEPTED=$(grep -c '^202$' "$TMP/async-codes.txt" || true)
async_posted=$(date +%s%N)
for _ in $(seq 3000); do
  [[ $(unfinished_requests) == 0 ]] && break
  sleep 0.1
done
[[ $(unfinished_requests) == 0 ]] || die "asynchronous requests still unfinished after 300 s"
async_end=$(date +%s%N)
ASYNC_FAILED=$(sql "SELECT count(*) FROM order_requests WHERE status = 'failed'")
ASYNC_SHIPMENTS=$(($(sql "SELECT count(*) FROM drop_off_shipments") - async_before))
ASYNC_MS=$(((async_end - async_start) / 1000000))
ASYNC_POST_MS=$(((async_posted - async_start) / 1000000))
log "peak RSS after async: $(peak_rss) KB"
ASYNC_RATE=$(awk -v n="$ASYNC_SHIPMENTS" -v ms="$ASYNC_MS" 'BEGIN { printf "%.0f", n * 1000 / (ms > 0 ? ms : 1) }')

# ---------------------------------------------------------------- paired runs against BASELINE
if [[ -n ${BASELINE:-} ]]; then
  [[ $BACKEND == sqlite && $PROCESSES == 1 ]] || die "BASELINE needs SQLite and one process"
  [[ -x $BASELINE ]] || die "BASELINE=$BASELINE is not an executable"
  DROPSLOT_NOW=$NOW RUST_LOG=${RUST_LOG:-info} DROPSLOT_CONFIG=$ROOT/scripts/high-limits.toml \
    "$BASELINE" serve --database "sqlite://$TMP/baseline.db" --listen 127.0.0.1:0 >"$TMP/baseline.log" 2>&1 &
  PIDS+=($!)
  BASE_PID=$!
  BASE_URL=$(await_line "$TMP/baseline.log" 'listening on http://127\.0\.0\.1:[0-9]+' "$BASE_PID")
  BASE_URL=${BASE_URL#listening on }
  BASE_TOKEN=$(grep -m1 -oE 'ds_test_[A-Za-z0-9_-]+' "$TMP/baseline.log") || die "the baseline printed no demo token"
  # Its first orders, so that both databases hold the pick-up text as a saved address.
  BODY_FILE="$BODY" TOKEN="$BASE_TOKEN" timeout 60 wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s scripts/load.lua \
    "$BASE_URL$API/requests/sync" >/dev/null
  MAIN_APPS=("${APPS[@]}")
  MAIN_TOKEN=$TOKEN
  declare -A PAIRED
  # side NAME: point run() at the baseline (B) or the build under test (A).
  side() {
    if [[ $1 == B ]]; then APPS=("$BASE_URL"); TOKEN=$BASE_TOKEN; else APPS=("${MAIN_APPS[@]}"); TOKEN=$MAIN_TOKEN; fi
  }
  for ((k = 1; k <= ${BASELINE_PAIRS:-2}; k++)); do
    for endpoint in preview sync; do
      for who in B A A B; do
        side "$who"
        run "paired_${endpoint}_${who}_$k" "$API/requests/$endpoint"
        PAIRED[${endpoint}_$who]+="${RPS[paired_${endpoint}_${who}_$k]} "
      done
    done
  done
  side A
  kill "$BASE_PID"
  wait "$BASE_PID" 2>/dev/null || true
fi

# ---------------------------------------------------------------- scaling curve
# CURVE: floor, preview and sync at each connection count, on the database as it now is.
for c in ${CURVE:-}; do
  ((c % WRKS == 0)) || die "CURVE: $c connections do not divide over WRKS=$WRKS"
  CONNECTIONS=$c FLOOR_ONLY=1 run "floor_c$c" "$FLOOR_URL/"
  CONNECTIONS=$c run "preview_c$c" "$API/requests/preview"
  CONNECTIONS=$c run "sync_c$c" "$API/requests/sync"
  log "peak RSS after the curve at $c connections: $(peak_rss) KB"
done

# SEED_ORDERS: sync orders added through the API (wrk, CONNECTIONS connections, in rounds
# sized by the last round's rate) until the database holds that many; then floor, preview and
# sync again, to compare with the same measurements on the young database above.
if [[ -n ${SEED_ORDERS:-} ]]; then
  seed_round=10
  while :; do
    have=$(sql "SELECT count(*) FROM orders")
    ((have >= SEED_ORDERS)) && break
    log "seeding: $have of $SEED_ORDERS orders; wrk -d${seed_round}s on sync"
    round_start=$(date +%s)
    for app in "${APPS[@]}"; do
      BODY_FILE="$BODY" TOKEN="$TOKEN" timeout $((seed_round + 60)) \
        wrk -t"$THREADS" -c$((CONNECTIONS / PROCESSES)) -d"${seed_round}s" -s scripts/load.lua "$app$API/requests/sync" \
        >/dev/null &
      seeders+=($!)
    done
    wait "${seeders[@]}"
    seeders=()
    now_have=$(sql "SELECT count(*) FROM orders")
    rate=$(((now_have - have) / ($(date +%s) - round_start > 0 ? $(date +%s) - round_start : 1)))
    ((rate > 0)) || die "seeding made no orders"
    seed_round=$(((SEED_ORDERS - now_have) / rate + 1))
    ((seed_round > 120)) && seed_round=120
  done
  SEEDED=$(sql "SELECT count(*) FROM orders")
  log "database holds $SEEDED orders ($(du -sh "${DB:-/dev/null}" 2>/dev/null | cut -f1) on disk)"
  FLOOR_ONLY=1 run floor_seeded "$FLOOR_URL/"
  run preview_seeded "$API/requests/preview"
  watch_start
  run sync_seeded "$API/requests/sync"
  read -r SEEDED_WAL SEEDED_RSS < <(watch_stop)
  log "peak RSS after the seeded runs: $(peak_rss) KB"
fi
seeders=()

# ---------------------------------------------------------------- lifecycle
if [[ ${ONLY:-all} == all ]]; then
LIVE=$("$DROPSLOT" token create --database "$DB_URL" --client 1 --kind live)
OPS=$("$DROPSLOT" token create --database "$DB_URL" --client 1 --kind ops)

# One scenario call over 1,000 of the sync run's test shipments, three times (each call
# selects 1,000 not yet moved).
# unmoved N: a JSON array of the ids of N test shipments no scenario has moved yet.
unmoved() {
  sql "SELECT id FROM drop_off_shipments WHERE mode = 'test' AND NOT sandbox_moved AND status = 'scheduled'
    ORDER BY id LIMIT $1" | paste -sd, | sed 's/^/[/; s/$/]/'
}
SCENARIO_MS=()
for i in 1 2 3; do
  ids=$(unmoved 1000)
  n=$(tr -cd ',' <<<"$ids" | wc -c)
  ((n + 1 == 1000)) || die "only $((n + 1)) test shipments to select: run longer (DURATION)"
  printf '{"drop_off_shipment_ids":%s}' "$ids" >"$TMP/scenario.json"
  read -r code secs < <(curl -sS --max-time 60 -o "$TMP/scenario-$i.json" -w '%{http_code} %{time_total}\n' \
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' --data-binary @"$TMP/scenario.json" \
    "$APP$API/sandbox/scenarios/happy")
  [[ $code == 200 ]] || { head -c 500 "$TMP/scenario-$i.json" >&2; die "scenario answered $code"; }
  affected=$(grep -o '"to":"delivered"' "$TMP/scenario-$i.json" | wc -l)
  ((affected == 1000)) || die "scenario moved $affected of 1000"
  SCENARIO_MS+=("$(awk -v s="$secs" 'BEGIN { printf "%.0f", s * 1000 }')")
  log "scenario happy over 1000 shipments: ${SCENARIO_MS[-1]} ms"
done

# Ops transitions: live orders to move, then each moved along the table by an ops token.
log "seeding live orders for the ops run (wrk -d${OPS_SEED:-6s})"
seeders=()
for app in "${APPS[@]}"; do
  BODY_FILE="$BODY" TOKEN="$LIVE" timeout $(($(seconds "${OPS_SEED:-6s}") + 60)) \
    wrk -t"$THREADS" -c$((CONNECTIONS / PROCESSES)) -d"${OPS_SEED:-6s}" -s scripts/load.lua "$app$API/requests/sync" >/dev/null &
  seeders+=($!)
done
wait "${seeders[@]}"
CODES=$TMP/codes.txt
sql "SELECT unique_id FROM drop_off_shipments WHERE mode = 'live' ORDER BY id" >"$CODES"
log "wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency ops transitions over $(wc -l <"$CODES") live shipments"
mapfile -t servers < <(listener_pids "$APP")
cpu0=$(cpu_ticks "${servers[@]}")
CODES_FILE=$CODES TOKEN=$OPS THREADS=$THREADS timeout $((SECS + 60)) \
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s scripts/ops.lua "$APP/" | tee "$TMP/wrk-ops.txt" |
  sed 's/^/   /' >&2
cpu1=$(cpu_ticks "${servers[@]}")
RESULT[ops]=$(grep '^LOAD ' "$TMP/wrk-ops.txt") || die "no LOAD line from wrk for ops"
log "peak RSS after scenarios and ops: $(peak_rss) KB"
RPS[ops]=$(field ops rps)
P50[ops]=$(field ops p50_ms)
P99[ops]=$(field ops p99_ms)
CPU[ops]=$(awk -v d=$((cpu1 - cpu0)) -v hz="$TICKS" -v n="$(field ops requests)" 'BEGIN { printf "%.1f", (n > 0 ? d * 1e6 / hz / n : 0) }')

# ---------------------------------------------------------------- webhooks
# Receivers: four bare-axum floors answering every POST with 2 bytes.
RECEIVERS=()
for i in 1 2 3 4; do
  FLOOR_RESPONSE_BYTES=2 "$FLOOR" 127.0.0.1:0 >"$TMP/receiver-$i.log" 2>&1 &
  PIDS+=($!)
  RECEIVERS+=("$(await_line "$TMP/receiver-$i.log" 'http://127\.0\.0\.1:[0-9]+' "$!")/hook")
done
# subscribe URL EVENTS_JSON: a webhook endpoint of the demo client (test mode); prints its id.
subscribe() {
  curl -sS --max-time 10 -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    --data-binary "{\"url\":\"$1\",\"events\":$2}" "$APP$API/webhooks" | grep -oE '"id":[0-9]+' | head -1 | cut -d: -f2
}
unfinished() { sql "SELECT count(*) FROM webhook_deliveries WHERE state IN ('waiting', 'pending')"; }
# Waits (at most 300 s) until every delivery is delivered or failed.
drain_deliveries() {
  for _ in $(seq 3000); do
    [[ $(unfinished) == 0 ]] && return 0
    sleep 0.1
  done
  die "webhook deliveries still unfinished after 300 s: $(unfinished)"
}

# Order creation with 2 endpoints subscribed to every event (each order queues 2 × 3
# deliveries: shipment scheduled and 2 parcels created), the dispatcher delivering as it goes.
log "order creation with 2 subscribed endpoints"
HOOKS=("$(subscribe "${RECEIVERS[0]}" '["*"]')" "$(subscribe "${RECEIVERS[1]}" '["*"]')")
[[ -n ${HOOKS[0]} && -n ${HOOKS[1]} ]] || die "could not create the webhook endpoints"
run sync_hooks "$API/requests/sync" WRK_COUNT=1
[[ $(field sync_hooks non2xx) == 0 ]] || die "sync with webhooks: $(field sync_hooks non2xx) non-2xx responses"
drain_deliveries
log "peak RSS after sync with 2 endpoints: $(peak_rss) KB"
for id in "${HOOKS[@]}"; do
  curl -sS --max-time 10 -X DELETE -H "Authorization: Bearer $TOKEN" "$APP$API/webhooks/$id" >/dev/null
done

# Fan-out: 4 endpoints subscribed to the happy path's events; every event goes to all 4.
# scenario SHIPMENTS: one happy scenario call over that many unmoved test shipments (5
# events each).
scenario_over() {
  local ids code
  ids=$(unmoved "$1")
  printf '{"drop_off_shipment_ids":%s}' "$ids" >"$TMP/fanout.json"
  code=$(curl -sS --max-time 60 -o "$TMP/fanout-out.json" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' --data-binary @"$TMP/fanout.json" "$APP$API/sandbox/scenarios/happy")
  [[ $code == 200 ]] || { head -c 500 "$TMP/fanout-out.json" >&2; die "fan-out scenario answered $code"; }
}
# fanout_stats FIRST_ID: "deliveries delivered span_ms p50_ms p99_ms disorder" of the
# deliveries after FIRST_ID. queued_ms is taken in the committing transaction and finished_ms
# once the receiver's answer is in, so finished - queued bounds commit-to-receipt from above.
# disorder: deliveries that finished before an earlier one of their (endpoint, shipment) stream.
fanout_stats() {
  sql "
    WITH d AS (SELECT endpoint_id, ordering_key, id, state, queued_ms, finished_ms, finished_ms - queued_ms AS ms
               FROM webhook_deliveries WHERE id > $1),
         r AS (SELECT ms, row_number() OVER (ORDER BY ms) AS k, count(*) OVER () AS n FROM d WHERE state = 'delivered'),
         o AS (SELECT finished_ms, lag(finished_ms) OVER (PARTITION BY endpoint_id, ordering_key ORDER BY id) AS prev FROM d)
    SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM d WHERE state = 'delivered'),
           (SELECT max(finished_ms) - min(queued_ms) FROM d),
           (SELECT ms FROM r WHERE k = CASE WHEN n < 2 THEN 1 ELSE CAST(n * 0.50 AS INTEGER) END),
           (SELECT ms FROM r WHERE k = CASE WHEN n < 2 THEN 1 ELSE CAST(n * 0.99 AS INTEGER) END),
           (SELECT count(*) FROM o WHERE prev > finished_ms)"
}
EVENTS='["same.shipment.to_pick_up","same.shipment.picked_up","same.shipment.processing","same.shipment.in_transit","same.shipment.delivered"]'
for r in "${RECEIVERS[@]}"; do [[ -n $(subscribe "$r" "$EVENTS") ]] || die "could not subscribe $r"; done
FANOUT=${FANOUT_SHIPMENTS:-4000}
# 1. Capacity: FANOUT shipments moved at once (scenario calls of 1,000 back to back), then
#    drained; deliveries/s over the whole span. Latency here is mostly time in the queue.
first=$(sql "SELECT coalesce(max(id), 0) FROM webhook_deliveries")
log "fan-out burst: $FANOUT shipments × 5 events × 4 endpoints"
for ((moved = 0; moved < FANOUT; moved += 1000)); do scenario_over 1000; done
drain_deliveries
read -r FAN_N FAN_OK FAN_SPAN FAN_P50 FAN_P99 FAN_DISORDER < <(fanout_stats "$first")
log "peak RSS after the fan-out burst: $(peak_rss) KB"
FAN_RATE=$(awk -v n="$FAN_OK" -v ms="$FAN_SPAN" 'BEGIN { printf "%.0f", n * 1000 / (ms > 0 ? ms : 1) }')
# 2. Latency at a sustained rate: FANOUT_RATE deliveries/s offered (default 5,000) for 8 s,
#    as ten scenario calls a second over RATE/200 shipments each (RATE/10 deliveries), so
#    the offered load is smooth at a tenth of a second.
RATE=${FANOUT_RATE:-5000}
first=$(sql "SELECT coalesce(max(id), 0) FROM webhook_deliveries")
log "fan-out at $RATE deliveries/s for 8 s"
start_ns=$(date +%s%N)
for ((call = 1; call <= 80; call++)); do
  scenario_over $((RATE / 200))
  left=$((start_ns + call * 100000000 - $(date +%s%N)))
  ((left > 0)) && sleep "$(awk -v n="$left" 'BEGIN { printf "%.3f", n / 1e9 }')"
done
drain_deliveries
read -r PACE_N PACE_OK PACE_SPAN PACE_P50 PACE_P99 PACE_DISORDER < <(fanout_stats "$first")

# 3. The ops fan-out (issue 27's load, svix-server's comparison): OPS_FANOUT live shipments
#    (default 5,000) ordered before any live endpoint exists, then 4 live endpoints, then one
#    ops `to_pick_up` per shipment from 32 connections (each call's event goes to all 4).
#    Calls/s from wrk; deliveries/s and queued-to-answered latency from the rows.
OPS_N=${OPS_FANOUT:-5000}
log "ops fan-out: seeding $OPS_N live orders"
live_before=$(sql "SELECT coalesce(max(id), 0) FROM drop_off_shipments")
while (($(sql "SELECT count(*) FROM drop_off_shipments WHERE mode = 'live' AND id > $live_before") < OPS_N)); do
  BODY_FILE="$BODY" TOKEN="$LIVE" timeout 70 wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s scripts/load.lua "$APP$API/requests/sync" >/dev/null
done
sql "SELECT unique_id FROM drop_off_shipments WHERE mode = 'live' AND id > $live_before ORDER BY id LIMIT $OPS_N" >"$TMP/ops-fanout.txt"
subscribe_live() {
  curl -sS --max-time 10 -H "Authorization: Bearer $LIVE" -H 'Content-Type: application/json' \
    --data-binary "{\"url\":\"$1\",\"events\":[\"same.shipment.to_pick_up\"]}" "$APP$API/webhooks" | grep -oE '"id":[0-9]+' | head -1
}
for r in "${RECEIVERS[@]}"; do [[ -n $(subscribe_live "$r") ]] || die "could not subscribe $r (live)"; done
first=$(sql "SELECT coalesce(max(id), 0) FROM webhook_deliveries")
log "ops fan-out: $OPS_N to_pick_up transitions from 32 connections × 4 endpoints"
# wrk runs for its whole -d, so it is interrupted (SIGINT: it then reports) once every
# shipment has moved; its threads stop sending when their codes are used.
CODES_FILE=$TMP/ops-fanout.txt TOKEN=$OPS THREADS=$THREADS \
  wrk -t"$THREADS" -c32 -d600s --latency -s scripts/ops-once.lua "$APP/" >"$TMP/wrk-ops-fanout.txt" &
wrk_pid=$!
last=$(sql "SELECT max(id) FROM (SELECT id FROM drop_off_shipments WHERE mode = 'live' AND id > $live_before
  ORDER BY id LIMIT $OPS_N) AS chosen")
for _ in $(seq 6000); do
  moved=$(sql "SELECT count(*) FROM drop_off_shipments WHERE mode = 'live' AND id > $live_before
    AND id <= $last AND status = 'to_pick_up'")
  ((moved >= OPS_N)) && break
  kill -0 "$wrk_pid" 2>/dev/null || break
  sleep 0.1
done
kill -INT "$wrk_pid" 2>/dev/null || true
wait "$wrk_pid" || true
sed 's/^/   /' "$TMP/wrk-ops-fanout.txt" >&2
RESULT[ops_fanout]=$(grep '^LOAD ' "$TMP/wrk-ops-fanout.txt") || die "no LOAD line from wrk for the ops fan-out"
drain_deliveries
read -r OF_N OF_OK OF_SPAN OF_P50 OF_P99 OF_DISORDER < <(fanout_stats "$first")
OF_RATE=$(awk -v n="$OF_OK" -v ms="$OF_SPAN" 'BEGIN { printf "%.0f", n * 1000 / (ms > 0 ? ms : 1) }')

fi # ONLY=all

# ---------------------------------------------------------------- report
ok=1
non2xx=$(field sync non2xx)
requests=$(field sync requests)
s201=$(field sync s201)
sent=$(field sync sent)
orders=$((orders_after - orders_before))
parcels=$((parcels_after - parcels_before))
inflight=$((orders - s201))

echo
echo "backend: $BACKEND, serve processes: $PROCESSES, wrk processes: $WRKS"
printf '%-10s %10s %9s %9s %9s %14s\n' endpoint 'req/s' 'p50 ms' 'p99 ms' 'vs floor' 'CPU ms/1000'
NAMES=(floor preview sync)
[[ ${ONLY:-all} == all ]] && NAMES+=(sync_hooks ops)
for name in "${NAMES[@]}"; do
  ratio=$(awk -v a="${RPS[$name]}" -v b="${RPS[floor]}" 'BEGIN { printf "%.3f", a / b }')
  printf '%-10s %10.0f %9.2f %9.2f %9s %14s\n' "$name" "${RPS[$name]}" "${P50[$name]}" "${P99[$name]}" "$ratio" "${CPU[$name]:-}"
done
for c in ${CURVE:-}; do
  for name in "floor_c$c" "preview_c$c" "sync_c$c"; do
    ratio=$(awk -v a="${RPS[$name]}" -v b="${RPS[floor_c$c]}" 'BEGIN { printf "%.3f", a / b }')
    printf '%-12s %10.0f %9.2f %9.2f %9s\n' "$name" "${RPS[$name]}" "${P50[$name]}" "${P99[$name]}" "$ratio"
  done
done
if [[ -n ${BASELINE:-} ]]; then
  for endpoint in preview sync; do
    # shellcheck disable=SC2086 # the rates are space-separated on purpose
    read -r mean_a mean_b < <(printf '%s\n' ${PAIRED[${endpoint}_A]} | awk '{ s += $1 } END { printf "%.1f ", s / NR }'
      printf '%s\n' ${PAIRED[${endpoint}_B]} | awk '{ s += $1 } END { printf "%.1f\n", s / NR }')
    echo "paired $endpoint: this build ${PAIRED[${endpoint}_A]}req/s (mean $mean_a), BASELINE ${PAIRED[${endpoint}_B]}req/s (mean $mean_b): $(awk -v a="$mean_a" -v b="$mean_b" 'BEGIN { printf "%.3f", a / b }')x; against this run's floor $(awk -v a="$mean_a" -v f="${RPS[floor]}" 'BEGIN { printf "%.3f", a / f }') and $(awk -v b="$mean_b" -v f="${RPS[floor]}" 'BEGIN { printf "%.3f", b / f }')"
  done
fi
if [[ -n ${SEED_ORDERS:-} ]]; then
  echo "on a database of $SEEDED orders:"
  for name in floor_seeded preview_seeded sync_seeded; do
    ratio=$(awk -v a="${RPS[$name]}" -v b="${RPS[floor_seeded]}" 'BEGIN { printf "%.3f", a / b }')
    printf '%-14s %10.0f %9.2f %9.2f %9s\n' "$name" "${RPS[$name]}" "${P50[$name]}" "${P99[$name]}" "$ratio"
  done
  echo "seeded / young: preview $(awk -v a="${RPS[preview_seeded]}" -v b="${RPS[preview]}" 'BEGIN { printf "%.3f", a / b }'), sync $(awk -v a="${RPS[sync_seeded]}" -v b="${RPS[sync]}" 'BEGIN { printf "%.3f", a / b }') (each against its own floor: preview $(awk -v a="${RPS[preview_seeded]}" -v b="${RPS[floor_seeded]}" -v c="${RPS[preview]}" -v d="${RPS[floor]}" 'BEGIN { printf "%.3f", (a / b) / (c / d) }'), sync $(awk -v a="${RPS[sync_seeded]}" -v b="${RPS[floor_seeded]}" -v c="${RPS[sync]}" -v d="${RPS[floor]}" 'BEGIN { printf "%.3f", (a / b) / (c / d) }'))"
  echo "sync on the seeded database: largest -wal ${SEEDED_WAL} bytes, largest RSS ${SEEDED_RSS} KB"
fi
echo "memory: peak RSS (VmHWM) through floor, preview and sync: $PEAK_RSS_API KB; after every later phase: $(peak_rss) KB"
[[ $BACKEND == sqlite ]] && echo "WAL: largest -wal file while sync ran: $SYNC_WAL bytes"
if [[ -n ${RPS[sync_floor]:-} ]]; then
  if [[ $BACKEND == sqlite ]]; then floor_kind="a bare rusqlite writer"; else floor_kind="a bare tokio-postgres pipeline, $((4 * PROCESSES)) connections"; fi
  echo "sync against its own floor ($floor_kind of the same rows, $SYNC_GROUP orders a commit as sync grouped them): $(printf '%.0f' "${RPS[sync]}") / $(printf '%.0f' "${RPS[sync_floor]}") orders/s = $(awk -v a="${RPS[sync]}" -v b="${RPS[sync_floor]}" 'BEGIN { printf "%.3f", a / b }')"
  if [[ $BACKEND == postgres ]]; then
    echo "  CPU an order, in us: PostgreSQL's ${PGCPU[sync]} for sync, ${PGCPU[sync_floor]} for the floor; the service's own ${CPU[sync]}"
  fi
fi
if [[ -s $TMP/writer-self.txt ]]; then
  echo "the writer thread over the timed sync run (PERF_WRITER=1; perf at 499 Hz; $SYNC_GROUP orders a commit): self time by symbol"
  sed 's/^/  /' "$TMP/writer-self.txt"
  echo "  time under (children): the store's functions, SQLite's and the syscalls"
  sed 's/^/  /' "$TMP/writer-children.txt"
fi
echo
if ((PROCESSES == 1)); then
  for endpoint in preview sync; do
    [[ -n ${CAPACITY[${endpoint}_on]:-} ]] || continue
    # shellcheck disable=SC2086 # the rates are space-separated on purpose
    read -r cap_on cap_off < <(printf '%s\n' ${CAPACITY[${endpoint}_on]} | awk '{ s += $1 } END { printf "%.1f ", s / NR }'
      printf '%s\n' ${CAPACITY[${endpoint}_off]} | awk '{ s += $1 } END { printf "%.1f\n", s / NR }')
    echo "$endpoint with slot limits set (never reached): ${CAPACITY[${endpoint}_on]}req/s (mean $cap_on); without: ${CAPACITY[${endpoint}_off]}req/s (mean $cap_off); with/without = $(awk -v a="$cap_on" -v b="$cap_off" 'BEGIN { printf "%.3f", a / b }')"
  done
  ((${#OFF_RATES[@]} > 0)) && echo "preview with rate limits and HTTP metrics: ${ON_RATES[*]} req/s (mean $PREVIEW_ON); with both off: ${OFF_RATES[*]} req/s (mean $PREVIEW_OFF); on/off = $(awk -v a="$PREVIEW_ON" -v b="$PREVIEW_OFF" 'BEGIN { printf "%.3f", a / b }')"
fi
echo "async: $ASYNC_ACCEPTED of $ASYNC_N requests accepted (posted in $ASYNC_POST_MS ms), $ASYNC_SHIPMENTS drop-off shipments written in $ASYNC_MS ms = $ASYNC_RATE shipments/s; sync: $(printf '%.0f' "${RPS[sync]}") shipments/s ($(awk -v a="$ASYNC_RATE" -v b="${RPS[sync]}" 'BEGIN { printf "%.2f", a / b }')x)"
if ((ASYNC_ACCEPTED != ASYNC_N || ASYNC_FAILED != 0 || ASYNC_SHIPMENTS != ASYNC_N * 100)); then
  echo "FAIL: async: $ASYNC_ACCEPTED accepted, $ASYNC_FAILED failed, $ASYNC_SHIPMENTS shipments for $ASYNC_N requests"; ok=0
fi
if [[ ${ONLY:-all} == all ]]; then
  echo "scenario happy, one call over 1000 shipments: ${SCENARIO_MS[*]} ms"
  echo "sync with 2 webhook endpoints: $(awk -v a="${RPS[sync_hooks]}" -v b="${RPS[sync]}" 'BEGIN { printf "%.3f", a / b }') of sync without"
  echo "webhook fan-out, burst: $FAN_OK of $FAN_N deliveries in $FAN_SPAN ms = $FAN_RATE deliveries/s (queued-to-answered p50 $FAN_P50 ms, p99 $FAN_P99 ms)"
  echo "webhook fan-out at $RATE/s offered: $PACE_OK of $PACE_N deliveries; queued-to-answered p50 $PACE_P50 ms, p99 $PACE_P99 ms"
  if ((FAN_OK != FAN_N || FAN_N != FANOUT * 20 || PACE_OK != PACE_N || PACE_N != RATE * 8)); then
    echo "FAIL: not every fan-out delivery was delivered ($FAN_OK of $FAN_N, $PACE_OK of $PACE_N)"; ok=0
  fi
  echo "ops fan-out: $(field ops_fanout requests) to_pick_up calls at $(printf '%.0f' "$(field ops_fanout rps)")/s (p99 $(field ops_fanout p99_ms) ms); $OF_OK of $OF_N deliveries in $OF_SPAN ms = $OF_RATE deliveries/s (queued-to-answered p50 $OF_P50 ms, p99 $OF_P99 ms)"
  if ((OF_OK != OF_N || OF_N != OPS_N * 4)) || [[ $(field ops_fanout non2xx) != 0 ]]; then
    echo "FAIL: ops fan-out: $OF_OK of $OF_N deliveries delivered (expected $((OPS_N * 4))), $(field ops_fanout non2xx) non-2xx"; ok=0
  fi
  if ((FAN_DISORDER + PACE_DISORDER + OF_DISORDER != 0)); then
    echo "FAIL: $((FAN_DISORDER + PACE_DISORDER + OF_DISORDER)) deliveries finished before an earlier one of their stream"; ok=0
  fi
  if [[ $(field ops non2xx) != 0 || $(field ops errors) != 0 ]]; then
    echo "FAIL: ops transitions: $(field ops non2xx) non-2xx, $(field ops errors) socket errors"; ok=0
  fi
fi
points_report
plan_report
fleet_report
echo "sync durability: wrk saw $requests responses, $s201 of them 201, $non2xx non-2xx; $sent requests sent"
echo "                 orders rows committed during the run: $orders (parcels $parcels), counted after kill -9"
if [[ $non2xx != 0 ]]; then echo "FAIL: $non2xx non-2xx responses"; ok=0; fi
if [[ $s201 != "$requests" ]]; then echo "FAIL: responses ($requests) != 201 responses ($s201)"; ok=0; fi
if ((orders < s201)); then echo "FAIL: $((s201 - orders)) acknowledged orders are missing"; ok=0; fi
if ((orders > s201 + sent - requests)); then
  echo "FAIL: $orders orders but only $s201 acknowledged + $((sent - requests)) unanswered requests"; ok=0
fi
if ((parcels != 2 * orders)); then echo "FAIL: $parcels parcels for $orders orders (expected 2 each)"; ok=0; fi
if ((ok)); then
  if ((inflight == 0)); then
    echo "OK: orders rows == 201 responses ($orders)"
  else
    # wrk stops its clock with up to $CONNECTIONS requests in flight and drops their responses;
    # those orders were committed by the server all the same.
    echo "OK: orders rows = 201 responses ($s201) + $inflight in flight when wrk stopped (<= $((sent - requests)) unanswered)"
  fi
fi
((ok))
