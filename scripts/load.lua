-- wrk script for scripts/load.sh: POSTs the JSON body in $BODY_FILE with
-- Content-Type: application/json and, when $TOKEN is set, Authorization: Bearer $TOKEN.
-- done() prints one machine-readable line:
--   LOAD requests=N duration_s=S rps=R p50_ms=.. p90_ms=.. p99_ms=.. max_ms=.. non2xx=N errors=N [sent=N s201=N]
-- With WRK_COUNT=1 it also counts requests sent and 201 responses per thread (costs a Lua
-- call per request, so only the order-creation run uses it).
-- With VARY_NUMBER set to a text of the body that starts with a street number ("290 Bremner"),
-- every request carries its own number there instead ("100000001 Bremner", …): no cache
-- keyed on the address helps (the address-points phase measures a lookup's full cost so).

local body_file = os.getenv("BODY_FILE")
local f = assert(io.open(body_file, "rb"), "BODY_FILE not readable: " .. tostring(body_file))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
local token = os.getenv("TOKEN")
if token and token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("first_number", #threads * 100000000)
end

local vary = os.getenv("VARY_NUMBER")
if vary and vary ~= "" and os.getenv("WRK_COUNT") ~= "1" then
  local at, to = string.find(wrk.body, vary, 1, true)
  assert(at, "VARY_NUMBER " .. vary .. " is not in the body")
  local before, after = wrk.body:sub(1, at - 1), vary:gsub("^%d+", "") .. wrk.body:sub(to + 1)
  local n

  function init(args)
    n = first_number
  end

  function request()
    n = n + 1
    return wrk.format(nil, nil, nil, before .. n .. after)
  end
end

if os.getenv("WRK_COUNT") == "1" then
  local req
  sent, s201 = 0, 0

  function init(args)
    req = wrk.format()
  end

  function request()
    sent = sent + 1
    return req
  end

  function response(status, headers, body)
    if status == 201 then
      s201 = s201 + 1
    end
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  local line = string.format(
    "LOAD requests=%d duration_s=%.3f rps=%.1f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f non2xx=%d errors=%d",
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, e.status, e.connect + e.read + e.write + e.timeout)
  if os.getenv("WRK_COUNT") == "1" then
    local sent_total, s201_total = 0, 0
    for _, t in ipairs(threads) do
      sent_total = sent_total + (t:get("sent") or 0)
      s201_total = s201_total + (t:get("s201") or 0)
    end
    line = line .. string.format(" sent=%d s201=%d", sent_total, s201_total)
  end
  io.write(line .. "\n")
end
