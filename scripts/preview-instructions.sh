#!/usr/bin/env bash
# Instructions a preview costs the server, counted by callgrind (valgrind): deterministic to
# about 0.1 % from run to run, whatever else the machine does, where throughput on these VMs
# moves by 10-15 % between runs. For changes of a few per cent to preview's CPU (issue 49):
# compare two builds, or one build under two configurations.
#
#   scripts/preview-instructions.sh target/release/dropslot                     # scripts/high-limits.toml
#   CONFIG=/tmp/bare.toml scripts/preview-instructions.sh target/release/dropslot
#
# Starts BIN under callgrind with instrumentation off on a fresh SQLite file, sends 200
# previews to warm it, turns instrumentation on, sends N (default 1000) previews over one
# keep-alive connection (the body load.sh sends), turns it off, and prints
# `Ir_per_request=… total=… N=…`: user-space instructions of every thread of the server,
# the kernel's work not included. Needs valgrind (installed from Debian when missing).
set -eu
cd "$(dirname "$0")/.."
BIN=${1:?usage: scripts/preview-instructions.sh DROPSLOT_BINARY}
CONFIG=${CONFIG:-scripts/high-limits.toml}
N=${N:-1000}
command -v valgrind >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
TMP=$(mktemp -d)
PID=
cleanup() {
  [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
printf '%s' '{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},"drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9","person_name":"Jane Doe","person_phone":"+1 416 555 0100"},"parcels":[{"unit":"g","values":500},{"unit":"g","values":1500}]}]}' >"$TMP/body.json"
DROPSLOT_NOW=2026-11-23T12:00:00Z RUST_LOG=info DROPSLOT_CONFIG=$CONFIG \
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" --instr-atstart=no \
  "$BIN" serve --database "sqlite://$TMP/db" --listen 127.0.0.1:0 >"$TMP/log" 2>&1 &
PID=$!
for _ in $(seq 600); do grep -q "listening on" "$TMP/log" && break; sleep 0.2; done
PORT=$(grep -m1 -oE 'http://127\.0\.0\.1:[0-9]+' "$TMP/log" | sed 's/.*://') || { cat "$TMP/log" >&2; exit 1; }
TOKEN=$(grep -m1 -oE 'ds_test_[A-Za-z0-9_-]+' "$TMP/log")
previews() {
  python3 - "$PORT" "$TOKEN" "$1" "$TMP/body.json" <<'PY'
import http.client, sys
port, token, n, body = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), open(sys.argv[4], 'rb').read()
c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
headers = {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token}
for _ in range(n):
    c.request('POST', '/scheduled-service/api/v1/requests/preview', body, headers)
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status
PY
}
previews 200
callgrind_control -i on "$PID" >/dev/null 2>&1
previews "$N"
callgrind_control -i off "$PID" >/dev/null 2>&1
kill "$PID"
wait "$PID" 2>/dev/null || true
PID=
ir=$(callgrind_annotate "$TMP/cg.out" 2>/dev/null | grep -m1 'PROGRAM TOTALS' | awk '{ gsub(",", "", $1); print $1 }' || true)
[[ $ir =~ ^[0-9]+$ ]] || { echo "preview-instructions: no total from callgrind" >&2; exit 1; }
echo "Ir_per_request=$((ir / N)) total=$ir N=$N"
