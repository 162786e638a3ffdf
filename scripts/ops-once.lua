-- wrk script for scripts/load.sh's ops fan-out (issues 27 and 33): one `to_pick_up` per
-- tracking code of $CODES_FILE, the codes split between the threads; a thread stops once its
-- codes are used, so wrk ends when every transition is answered (run it with a generous -d).
-- done() prints the LOAD line of load.lua. With PACE (calls/s over all connections) and
-- CONNECTIONS set, each connection waits CONNECTIONS / PACE seconds after an answer before
-- its next call: an open-ish load whose achieved rate (wrk's rps) is a little under PACE.

local token = os.getenv("TOKEN")
local threads = {}
local nthreads = tonumber(os.getenv("THREADS") or "2")

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

local owned, sent, answered
-- wrk calls request() once on thread 0 to check the request, and discards it: that call
-- must not use up a code.
local checked = false

local pace = tonumber(os.getenv("PACE") or "0")
if pace > 0 then
  local wait_ms = 1000 * tonumber(os.getenv("CONNECTIONS") or "32") / pace
  function delay()
    return wait_ms
  end
end

function init(args)
  owned, sent, answered = {}, 0, 0
  local i = 0
  for line in io.lines(os.getenv("CODES_FILE")) do
    if i % nthreads == id then
      table.insert(owned, line)
    end
    i = i + 1
  end
  assert(#owned > 0, "no tracking codes for thread " .. tostring(id))
end

function request()
  local code = owned[sent + 1]
  if id ~= 0 or checked then
    sent = sent + 1
  end
  checked = true
  if code == nil then
    -- A connection asking again before the thread stops: a request that moves nothing.
    return wrk.format("GET", "/healthz")
  end
  return wrk.format("POST", "/scheduled-service/api/v1/ops/shipments/" .. code .. "/transitions", {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. token,
  }, '{"to":"to_pick_up","reason":"load test"}')
end

function response(status, headers, body)
  answered = answered + 1
  if answered >= #owned then
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    "LOAD requests=%d duration_s=%.3f rps=%.1f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f non2xx=%d errors=%d\n",
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, e.status, e.connect + e.read + e.write + e.timeout))
end
