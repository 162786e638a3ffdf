#!/usr/bin/env bash
# Paired A/B of the ops fan-out between two builds of dropslot (issue 43: "paired runs within
# 3 % of the build before"): scripts/webhook-bench.sh, one round per run (a fresh database,
# CALLS live orders, ENDPOINTS endpoints, CALLS ops moves from CONNECTIONS connections, every
# delivery checked once per endpoint), alternated A B B A B A A B (PAIRS pairs, after one run
# not counted) so a drift of the machine weighs on both alike. Prints each run's deliveries/s, commit-to-receipt p99 and the
# service's CPU per delivery, then the means and B/A of each.
#
#   scripts/ab-fanout.sh /tmp/before /tmp/after                 # SQLite, PAIRS=4, CALLS=5000
#   DATABASE=postgres://postgres@127.0.0.1:5432/postgres scripts/ab-fanout.sh /tmp/before /tmp/after
#
# Env: PAIRS (4; a multiple of 2 keeps the order balanced), CALLS (5000), and what webhook-bench.sh takes (DATABASE, ENDPOINTS,
# CONNECTIONS, PACE). Needs target/release/examples/hook_sink (webhook-bench.sh builds it).
set -euo pipefail
cd "$(dirname "$0")/.."

A=${1:?usage: scripts/ab-fanout.sh BEFORE_BINARY AFTER_BINARY}
B=${2:?usage: scripts/ab-fanout.sh BEFORE_BINARY AFTER_BINARY}
PAIRS=${PAIRS:-4}
export CALLS=${CALLS:-5000} ROUNDS=1 FLOOR=0

# The runs drift down as they go (the same binary as A and B gave B/A 0.93 in A B B A A B
# order on machine E, the first run the fastest): one run of A is made first and not counted,
# and the order is the Thue-Morse sequence (A B B A B A A B …), in which A and B hold the same
# mean position for every multiple of four runs, so a steady drift weighs on both alike.
order=()
for ((i = 0; i < 2 * PAIRS; i++)); do
  bits=0
  for ((n = i; n > 0; n >>= 1)); do bits=$((bits + (n & 1))); done
  if ((bits % 2 == 0)); then order+=(A); else order+=(B); fi
done
BIN=$A scripts/webhook-bench.sh >/dev/null 2>&1 || { echo "ab-fanout: the warm-up run failed" >&2; exit 1; }
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for who in "${order[@]}"; do
  bin=$A
  [[ $who == B ]] && bin=$B
  line=$(BIN=$bin scripts/webhook-bench.sh 2>/dev/null | grep '^round=') || { echo "ab-fanout: a run of $who failed" >&2; exit 1; }
  rate=$(sed -nE 's/.* per_s=([0-9.]+) .*/\1/p' <<<"$line")
  p99=$(sed -nE 's/.*HOOKS .* p99_ms=([0-9.]+) .*/\1/p' <<<"$line")
  cpu=$(sed -nE 's/.*service_cpu_us_per_delivery=([0-9.]+).*/\1/p' <<<"$line")
  echo "$who deliveries/s=$rate p99_ms=$p99 cpu_us_per_delivery=$cpu"
  echo "$who $rate $p99 $cpu" >>"$results"
done
awk '{ n[$1]++; r[$1] += $2; p[$1] += $3; c[$1] += $4 }
     END {
       printf "mean A: %.0f deliveries/s, p99 %.1f ms, %.1f µs CPU a delivery\n", r["A"] / n["A"], p["A"] / n["A"], c["A"] / n["A"]
       printf "mean B: %.0f deliveries/s, p99 %.1f ms, %.1f µs CPU a delivery\n", r["B"] / n["B"], p["B"] / n["B"], c["B"] / n["B"]
       printf "B/A: deliveries/s %.3f, CPU a delivery %.3f\n", (r["B"] / n["B"]) / (r["A"] / n["A"]), (c["B"] / n["B"]) / (c["A"] / n["A"])
     }' "$results"
