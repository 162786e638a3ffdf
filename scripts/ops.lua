-- wrk script for scripts/load.sh: ops transitions. Each thread owns every Tth tracking code of
-- $CODES_FILE and walks them round-robin through to_pick_up, picked_up, processing,
-- in_transit and delivered (with a proof), so a shipment's next move is requested only
-- after every other owned shipment's: moves of one shipment never race each other.
-- done() prints the LOAD line of load.lua.

local token = os.getenv("TOKEN")
local steps = {
  '{"to":"to_pick_up","reason":"load test"}',
  '{"to":"picked_up"}',
  '{"to":"processing"}',
  '{"to":"in_transit"}',
  '{"to":"delivered","proof_of_delivery":[{"type":"receiver_name","value":"Load Test"}]}',
}
local threads = {}
local nthreads = tonumber(os.getenv("THREADS") or "2")

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

local owned, counter
-- wrk calls request() once on thread 0 to check the request, and discards it: that call must
-- not use up a move.
local checked = false

function init(args)
  owned, counter = {}, 0
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
  local n = #owned
  local code = owned[(counter % n) + 1]
  local step = math.floor(counter / n) + 1
  if id ~= 0 or checked then
    counter = counter + 1
  end
  checked = true
  if step > #steps then
    error("ran out of moves: seed more live shipments (OPS_SEED) or shorten DURATION")
  end
  return wrk.format("POST", "/scheduled-service/api/v1/ops/shipments/" .. code .. "/transitions", {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. token,
  }, steps[step])
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
