#!/usr/bin/env bash
# Recipient notification benchmark (issue 32), on SQLite, release build:
#  1. e-mails/s: at least N (default 10,000) messages are enqueued (live orders with a recipient
#     address, created while nothing listens on the SMTP port: each message is refused once
#     and waits 10 minutes), the service is stopped, the rows are made due again, the local
#     SMTP server (crates/dropslot/tests/smtp_server.py, aiosmtpd) is started, and the
#     service restarted: the time from its start to the last message in the server's log.
#     SINK=native (default): the sink of crates/dropslot/examples/smtp_sink.rs (a few µs a
#     message, as a remote relay costs the service's machine nothing); SINK=aiosmtpd: the
#     tests' Python server in --light mode (no MIME parse), ~170 messages/s and most of a core.
#  2. order creation (POST /requests/sync, wrk) with notifications on (SMTP configured and
#     sending, a recipient e-mail and phone on each order) and off (no channel configured:
#     the rows are still written, `not_configured`), alternated ON OFF OFF ON … PAIRS times;
#     each run also reports the service's CPU (user+sys, /proc/PID/stat) per 1,000 orders, and
#     the on runs how many of their e-mails reached the sink by the end of the run.
#
#   scripts/notify-bench.sh                  # N=10000 DURATION=10s PAIRS=2
# Env: N, DURATION (wrk -d), PAIRS, CONNECTIONS (32), THREADS (2), SINK, CARGO_TARGET_DIR, KEEP=1.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${N:-10000}
DURATION=${DURATION:-10s}
PAIRS=${PAIRS:-2}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
SINK=${SINK:-native}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
API=/scheduled-service/api/v1
NOW=2026-11-23T12:00:00Z
log() { printf '== %s\n' "$*" >&2; }
die() { printf 'notify-bench.sh: %s\n' "$*" >&2; exit 1; }
command -v wrk >/dev/null || die "wrk is needed (apt-get install wrk)"
python3 -c 'import aiosmtpd' || die "aiosmtpd is needed (scripts/test-deps.sh)"

log "building (release)"
cargo build --release --quiet -p dropslot --bin dropslot --example smtp_sink
BIN=$TARGET/release/dropslot

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dropslot-notify.XXXXXX")
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  if [[ ${KEEP:-0} == 1 ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
# cpu PID: the process's user+sys CPU so far, in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICKS=$(getconf CLK_TCK)
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# serve CONFIG DB LOG: starts the service, waits for it; sets APP and APP_PID.
serve() {
  local p
  p=$(port)
  DROPSLOT_NOW=$NOW DATABASE_URL=$2 DROPSLOT_CONFIG=$1 "$BIN" serve --listen "127.0.0.1:$p" >"$3" 2>&1 &
  APP_PID=$!
  PIDS+=("$APP_PID")
  APP=http://127.0.0.1:$p
  for _ in $(seq 300); do curl -fsS "$APP/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  cat "$3" >&2
  die "the service did not start"
}
stop() { kill "$1"; wait "$1" 2>/dev/null || true; }

SMTP_PORT=$(port)
smtp_config() {
  printf '%s\n[webhooks]\nretry_schedule = "%s"\n[notifications.smtp]\nhost = "127.0.0.1"\nport = %s\nsecurity = "none"\nfrom = "Bench Courier <bench@dropslot.test>"\n' \
    "$(cat scripts/high-limits.toml)" "$1" "$SMTP_PORT"
}
smtp_config 10m >"$TMP/refused.toml"
smtp_config "5s,5m,30m,2h,5h,10h,10h" >"$TMP/on.toml"
cp scripts/high-limits.toml "$TMP/off.toml"

# new_db NAME: a migrated SQLite file with a client and its live token; sets DB and LIVE.
new_db() {
  DB=sqlite://$TMP/$1.db
  DATABASE_URL=$DB "$BIN" migrate >/dev/null
  local client
  client=$(DATABASE_URL=$DB "$BIN" client create --name Bench)
  LIVE=$(DATABASE_URL=$DB "$BIN" token create --client "$client" --kind live)
}
BODY=$TMP/body.json
printf '%s' '{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},"drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9","person_name":"Jane Doe","person_phone":"+1 416 555 0100","person_email":"jane@example.com"},"parcels":[{"unit":"g","values":500}]}]}' >"$BODY"

# ---- 1. e-mails/s
new_db mail
serve "$TMP/refused.toml" "$DB" "$TMP/enqueue.log"
log "enqueueing at least $N messages (orders while the SMTP port is closed)"
while (($(sqlite3 "$TMP/mail.db" "SELECT count(*) FROM notifications WHERE channel = 'email'") < N)); do
  BODY_FILE=$BODY TOKEN=$LIVE wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s scripts/load.lua "$APP$API/requests/sync" >/dev/null
done
for _ in $(seq 600); do
  left=$(sqlite3 "$TMP/mail.db" "SELECT count(*) FROM notifications WHERE channel = 'email' AND attempts = 0")
  [[ $left == 0 ]] && break
  sleep 0.1
done
stop "$APP_PID"
queued=$(sqlite3 "$TMP/mail.db" "SELECT count(*) FROM notifications WHERE channel = 'email' AND state = 'pending'")
sqlite3 "$TMP/mail.db" "UPDATE notifications SET next_attempt_ms = 0, attempts = 0, last_error = NULL WHERE state = 'pending'"
# sink LOG: starts the SMTP sink on SMTP_PORT, logging to LOG; waits until it listens.
sink() {
  touch "$1"
  if [[ $SINK == native ]]; then
    "$TARGET/release/examples/smtp_sink" "127.0.0.1:$SMTP_PORT" "$1" >"$1.out" &
  else
    python3 crates/dropslot/tests/smtp_server.py --light --port "$SMTP_PORT" --log "$1" >"$1.out" &
  fi
  SINK_PID=$!
  PIDS+=("$SINK_PID")
  for _ in $(seq 100); do grep -q ready "$1.out" 2>/dev/null && return 0; sleep 0.1; done
  die "the SMTP sink did not start"
}
sink "$TMP/smtp.jsonl"
start=$(date +%s.%N)
serve "$TMP/on.toml" "$DB" "$TMP/send.log"
while (($(wc -l <"$TMP/smtp.jsonl" 2>/dev/null || echo 0) < queued)); do sleep 0.05; done
end=$(date +%s.%N)
mail_cpu=$(cpu "$APP_PID")
stop "$SINK_PID"
dups=$(python3 -c 'import json,sys,collections; c=collections.Counter(json.loads(l)["message_id"] for l in open(sys.argv[1])); print(sum(v-1 for v in c.values()))' "$TMP/smtp.jsonl")
python3 -c "import sys; n=int(sys.argv[1]); s=float(sys.argv[3])-float(sys.argv[2]); print(f'EMAILS sink={sys.argv[5]} n={n} seconds={s:.2f} per_s={n/s:.0f} duplicates={sys.argv[4]} cpu_ms_per_1000={int(sys.argv[6])*1e6/int(sys.argv[7])/n:.1f}')" "$queued" "$start" "$end" "$dups" "$SINK" "$mail_cpu" "$TICKS"
stop "$APP_PID"

# ---- 2. order creation, notifications on and off, alternated
run() { # run MODE
  local log=$TMP/orders-$1-$RANDOM.jsonl out before after orders mails=""
  [[ $1 == on ]] && sink "$log"
  new_db "order-$1-$RANDOM"
  serve "$TMP/$1.toml" "$DB" "$TMP/order-$1.log"
  BODY_FILE=$BODY TOKEN=$LIVE wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s scripts/load.lua "$APP$API/requests/sync" >/dev/null
  before=$(cpu "$APP_PID")
  local sent_before=0
  [[ $1 == on ]] && sent_before=$(wc -l <"$log")
  out=$(BODY_FILE=$BODY TOKEN=$LIVE wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s scripts/load.lua \
    "$APP$API/requests/sync" | grep '^LOAD')
  after=$(cpu "$APP_PID")
  orders=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$out")
  if [[ $1 == on ]]; then
    mails=" emails_during=$(($(wc -l <"$log") - sent_before))"
  fi
  printf '%s cpu_ms_per_1000=%s%s\n' "${out/#LOAD/ORDERS notifications=$1}" \
    "$(python3 -c "import sys; print(round((int(sys.argv[2])-int(sys.argv[1]))*1000/int(sys.argv[3])*1000/int(sys.argv[4]), 1))" "$before" "$after" "$TICKS" "$orders")" "$mails"
  stop "$APP_PID"
  [[ $1 == on ]] && stop "$SINK_PID"
  return 0
}
for ((p = 0; p < PAIRS; p++)); do
  if ((p % 2 == 0)); then run on; run off; else run off; run on; fi
done
