#!/usr/bin/env bash
# The recipient change page's requests per second (issue 44): a release server on SQLite (clock
# pinned), one test order, its page (as the tracking page links it), then wrk -t2 -c16 for 10 s,
# three times each: GET the page, and POST an instruction alone (each a 303 and one write).
#   scripts/change-page-bench.sh          (needs target/release/dropslot and wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
TMP=$(mktemp -d)
DROPSLOT_NOW=2026-11-23T12:00:00Z RUST_LOG=warn DROPSLOT_CONFIG=scripts/high-limits.toml target/release/dropslot serve --database sqlite://$TMP/c.db --listen 127.0.0.1:0 >$TMP/serve.log 2>&1 &
pid=$!
trap 'kill $pid; rm -rf $TMP' EXIT
for _ in $(seq 100); do grep -q 'http://127' $TMP/serve.log && break; sleep 0.1; done
app=$(grep -m1 -oE 'http://127\.0\.0\.1:[0-9]+' $TMP/serve.log)
token=$(grep -m1 -oE 'ds_test_[A-Za-z0-9_-]+' $TMP/serve.log)
code=$(curl -sS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' --data-binary '{"pick_up_address":{"text":"100 King St W, Toronto, ON M5X 1A9"},"drop_offs":[{"address":{"text":"290 Bremner Blvd, Toronto, ON M5V 3L9","person_name":"Jane Doe","person_phone":"+1 416 555 0100"},"parcels":[{"unit":"g","values":500}]}]}' "$app/scheduled-service/api/v1/requests/sync" | grep -oE '"unique_id":"DS[A-Z0-9]+"' | head -1 | cut -d'"' -f4)
path=$(curl -sS "$app/track/$code" | grep -oE 'id="change" href="[^"]+"' | cut -d'"' -f4)
expect=$(curl -sS "$app$path" | grep -oE 'name="expect" value="[^"]+"' | cut -d'"' -f4)
echo "page: $path expect: $expect"
cat > $TMP/post.lua <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.body = "instruction=Leave+it+with+the+concierge&expect=$(python3 -c 'import urllib.parse,sys;print(urllib.parse.quote(sys.argv[1]))' "$expect")"
LUA
for i in 1 2 3; do
  wrk -t2 -c16 -d10s --latency "$app$path" | grep -E 'Requests/sec|50%|99%' | tr -s ' ' | paste -sd' ' | sed "s/^/GET  run $i: /"
done
for i in 1 2 3; do
  wrk -t2 -c16 -d10s --latency -s $TMP/post.lua "$app$path" | grep -E 'Requests/sec|50%|99%|Non-2xx' | tr -s ' ' | paste -sd' ' | sed "s/^/POST run $i: /"
done
curl -sS -o /dev/null -w 'last POST answer: %{http_code}\n' -X POST -H 'Content-Type: application/x-www-form-urlencoded' --data "instruction=x&expect=$expect" "$app$path"
