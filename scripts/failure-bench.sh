#!/usr/bin/env bash
# Failed deliveries through the driver API, with and without the automatic re-attempt (issue
# 44), paired: each run a server of its own on a fresh database (clock pinned to Monday
# 2026-11-23 07:00 in Toronto), DRIVERS drivers whose published, started routes hold ORDERS
# shipments (scripts/failure-bench.py prepare), then every stop failed through
# POST /driver/shipments/{id}/transitions, all drivers at once (failure-bench.py fail), under
# the client's policy `hold` (A: the failure alone) or `reattempt` (B: the failure and the
# re-attempt booked into Tuesday's slot in the same transaction). One uncounted run of A
# first, then A and B in Thue-Morse order (A B B A B A A B …), so a drift of the machine
# weighs on both alike. Prints each run's line, then the means and B/A.
#
#   scripts/failure-bench.sh                          # SQLite, PAIRS=4
#   DATABASE=postgres://postgres@127.0.0.1:5432/postgres scripts/failure-bench.sh
#
# Env: BIN (default target/release/dropslot, built when absent), DATABASE (unset: SQLite),
#      PAIRS (4), DRIVERS (10), ORDERS (400), KEEP=1 keeps the temporary directory.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${BIN:-$TARGET/release/dropslot}
PAIRS=${PAIRS:-4}
die() { printf 'failure-bench.sh: %s\n' "$*" >&2; exit 1; }
[[ -x $BIN ]] || cargo build --release -p dropslot --bin dropslot
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dropslot-failures.XXXXXX")
KILL=() DBS=()
cleanup() {
  for pid in "${KILL[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  for db in "${DBS[@]}"; do psql "$DATABASE" -qtAXc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; done
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$TMP"
}
trap cleanup EXIT

await_url() {
  for _ in $(seq 300); do
    grep -m1 -oE 'http://127\.0\.0\.1:[0-9]+' "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { cat "$1" >&2; die "the server exited early"; }
    sleep 0.1
  done
  die "no URL in $1"
}

# run N POLICY: one run; prints its result line.
run() {
  local n=$1 policy=$2 url
  if [[ -z ${DATABASE:-} ]]; then
    url=sqlite://$TMP/failures-$n.db
  else
    local db=dropslot_failures_$$_$n
    psql "$DATABASE" -qtAXc "CREATE DATABASE $db" >/dev/null
    DBS+=("$db")
    url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$DATABASE" "$db")
  fi
  DROPSLOT_NOW=2026-11-23T12:00:00Z RUST_LOG=${RUST_LOG:-warn} DROPSLOT_CONFIG=$ROOT/scripts/high-limits.toml \
    "$BIN" serve --database "$url" --listen 127.0.0.1:0 >"$TMP/serve-$n.log" 2>&1 &
  local server=$!
  KILL+=("$server")
  local app live ops operator
  app=$(await_url "$TMP/serve-$n.log" "$server")
  live=$("$BIN" token create --database "$url" --client 1 --kind live)
  ops=$("$BIN" token create --database "$url" --client 1 --kind ops)
  operator=$("$BIN" token create --database "$url" --kind operator)
  python3 scripts/failure-bench.py prepare "$app" "$operator" "$live" "$ops" "$TMP/state-$n.json" >&2
  python3 scripts/failure-bench.py fail "$app" "$live" "$TMP/state-$n.json" "$policy" "$server"
  kill "$server"
  wait "$server" 2>/dev/null || true
}

order=()
for ((i = 0; i < 2 * PAIRS; i++)); do
  bits=0
  for ((k = i; k > 0; k >>= 1)); do bits=$((bits + (k & 1))); done
  if ((bits % 2 == 0)); then order+=(A); else order+=(B); fi
done
run 0 hold >/dev/null
results=$TMP/results
n=0
for who in "${order[@]}"; do
  n=$((n + 1))
  policy=hold
  [[ $who == B ]] && policy=reattempt
  line=$(run "$n" "$policy")
  echo "$who $line"
  rate=$(sed -nE 's/.* per_s=([0-9.]+) .*/\1/p' <<<"$line")
  p99=$(sed -nE 's/.* p99_ms=([0-9.]+) .*/\1/p' <<<"$line")
  cpu=$(sed -nE 's/.* cpu_us_per_failure=([0-9.]+).*/\1/p' <<<"$line")
  echo "$who $rate $p99 $cpu" >>"$results"
done
awk '{ n[$1]++; r[$1] += $2; p[$1] += $3; c[$1] += $4 }
     END {
       printf "mean A (hold): %.1f failures/s, p99 %.1f ms, %.0f µs CPU a failure\n", r["A"] / n["A"], p["A"] / n["A"], c["A"] / n["A"]
       printf "mean B (reattempt): %.1f failures/s, p99 %.1f ms, %.0f µs CPU a failure\n", r["B"] / n["B"], p["B"] / n["B"], c["B"] / n["B"]
       printf "B/A: failures/s %.3f, CPU a failure %.3f\n", (r["B"] / n["B"]) / (r["A"] / n["A"]), (c["B"] / n["B"]) / (c["A"] / n["A"])
     }' "$results"
