#!/usr/bin/env bash
# Paired A/B of preview or sync throughput between two builds of dropslot (issue 13: "before and after
# figures for each change, from paired runs"). Both servers run at once, each on a fresh SQLite
# file with the same configuration as scripts/load.sh (clock pinned, rate limits on but high,
# RUST_LOG=info); wrk (the same body and script as load.sh) drives them in turn, in ABBA order
# so a drift of the machine weighs on both alike, and the means are compared.
#
#   cargo build --release -p dropslot --bin dropslot && cp target/release/dropslot /tmp/after
#   scripts/ab.sh /tmp/before /tmp/after        # PAIRS=3 DURATION=10s CONNECTIONS=64
#   ENDPOINT=sync scripts/ab.sh /tmp/before /tmp/after   # order creation (default: preview)
#
# POSTGRES=postgres://user@host:port/db: each server on a fresh PostgreSQL database of that
# server instead (created beside `db`, dropped at the end); psql must be on the PATH.
#
# CONFIG_A / CONFIG_B: a configuration file for that server instead of the default one (the
# same binary twice, with CONFIG_B turning something off, measures what that thing costs).
#
# Prints each run's req/s, p99 and the server's CPU time per request (user + system, from
# /proc: steadier than req/s on a shared machine, where another tenant's load moves
# throughput by 10 % between runs), then the means and B/A of both.
set -euo pipefail
cd "$(dirname "$0")/.."

A=${1:?usage: scripts/ab.sh BEFORE_BINARY AFTER_BINARY}
B=${2:?usage: scripts/ab.sh BEFORE_BINARY AFTER_BINARY}
PAIRS=${PAIRS:-3}
ENDPOINT=${ENDPOINT:-preview}
[[ $ENDPOINT == preview || $ENDPOINT == sync ]] || { echo "ab: ENDPOINT=$ENDPOINT: preview or sync" >&2; exit 1; }
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
command -v wrk >/dev/null || { echo "ab: wrk is missing (scripts/load.sh installs it)" >&2; exit 1; }

TMP=$(mktemp -d)
PIDS=()
DATABASES=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for db in "${DATABASES[@]}"; do psql -q "$POSTGRES" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

printf '%s' '{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},"drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9","person_name":"Jane Doe","person_phone":"+1 416 555 0100"},"parcels":[{"unit":"g","values":500},{"unit":"g","values":1500}]}]}' >"$TMP/body.json"

# start NAME BINARY: a server on a fresh database; sets URL_<NAME> and TOKEN_<NAME>.
start() {
  local name=$1 bin=$2 log=$TMP/$1.log extra=CONFIG_$1
  cp "${!extra:-scripts/high-limits.toml}" "$TMP/$name.toml"
  local database="sqlite://$TMP/$name.db"
  if [[ -n ${POSTGRES:-} ]]; then
    local db="ab_${name,,}_$$"
    psql -q "$POSTGRES" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
    DATABASES+=("$db")
    database="${POSTGRES%/*}/$db"
  fi
  DROPSLOT_NOW=2026-11-23T12:00:00Z RUST_LOG=${RUST_LOG:-info} DROPSLOT_CONFIG=$TMP/$name.toml \
    "$bin" serve --database "$database" --listen 127.0.0.1:0 >"$log" 2>&1 &
  PIDS+=($!)
  local url=""
  for _ in $(seq 300); do
    url=$(grep -m1 -oE 'listening on http://127\.0\.0\.1:[0-9]+' "$log" || true)
    [[ -n $url ]] && break
    sleep 0.1
  done
  [[ -n $url ]] || { cat "$log" >&2; echo "ab: $name did not start" >&2; exit 1; }
  printf -v "URL_$name" '%s' "${url#listening on }"
  printf -v "PID_$name" '%s' "${PIDS[-1]}"
  printf -v "TOKEN_$name" '%s' "$(grep -m1 -oE 'ds_test_[A-Za-z0-9_-]+' "$log")"
}
start A "$A"
start B "$B"

declare -a RATES_A RATES_B CPU_A CPU_B
# The server's user + system CPU time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# run NAME: a 2 s warm-up, then the timed run; appends req/s to RATES_NAME.
run() {
  local name=$1 url token
  url=URL_$name token=TOKEN_$name
  local target="${!url}/scheduled-service/api/v1/requests/$ENDPOINT"
  BODY_FILE=$TMP/body.json TOKEN=${!token} wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s scripts/load.lua "$target" >/dev/null
  local line pid=PID_$name c0 c1
  c0=$(cpu_ticks "${!pid}")
  line=$(BODY_FILE=$TMP/body.json TOKEN=${!token} wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency \
    -s scripts/load.lua "$target" | grep '^LOAD ')
  c1=$(cpu_ticks "${!pid}")
  local rps p99 non2xx requests us
  rps=$(sed -nE 's/.* rps=([^ ]+).*/\1/p' <<<"$line")
  requests=$(sed -nE 's/.* requests=([^ ]+).*/\1/p' <<<"$line")
  us=$(awk -v t=$((c1 - c0)) -v n="$requests" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }')
  p99=$(sed -nE 's/.* p99_ms=([^ ]+).*/\1/p' <<<"$line")
  non2xx=$(sed -nE 's/.* non2xx=([^ ]+).*/\1/p' <<<"$line")
  [[ $non2xx == 0 ]] || { echo "ab: $name answered $non2xx non-2xx" >&2; exit 1; }
  printf '%s %10.0f req/s  p99 %6.2f ms  %6.2f us CPU/request\n' "$name" "$rps" "$p99" "$us"
  if [[ $name == A ]]; then RATES_A+=("$rps") CPU_A+=("$us"); else RATES_B+=("$rps") CPU_B+=("$us"); fi
}
for ((k = 1; k <= PAIRS; k++)); do
  if ((k % 2)); then run A; run B; else run B; run A; fi
done
mean() { printf '%s\n' "$@" | awk '{ s += $1 } END { printf "%.2f", s / NR }'; }
MA=$(mean "${RATES_A[@]}") MB=$(mean "${RATES_B[@]}")
CA=$(mean "${CPU_A[@]}") CB=$(mean "${CPU_B[@]}")
echo "A ($A): mean $MA req/s, $CA us CPU/request"
echo "B ($B): mean $MB req/s, $CB us CPU/request"
echo "B/A: throughput $(awk -v a="$MA" -v b="$MB" 'BEGIN { printf "%.3f", b / a }'), CPU per request $(awk -v a="$CA" -v b="$CB" 'BEGIN { printf "%.3f", b / a }')"
