-- Adds one machine-readable line to wrk's report: `WRK_JSON {...}` with the percentiles wrk's
-- text lacks (p99.9), the socket errors, the responses counted by HTTP status (502/504 apart),
-- and "window_us": the wall clock (Unix µs) from before the first request to the last response
-- this wrk counted. The harness counts nginx's log lines inside that window: by wrk's own
-- clock, not by when the harness started wrk (process and thread start-up shift it, tens of
-- ms on a busy machine) nor by wrk's -d (it stops on its next 100 ms tick).
local threads = {}

-- LuaJIT's ffi reads the wall clock to the µs (os.time() has whole seconds); a wrk without it
-- writes no window and the harness falls back to its own clock.
local clock = nil
do
  local ok, ffi = pcall(require, "ffi")
  if ok then
    ffi.cdef [[
      struct wrk_report_timeval { long tv_sec; long tv_usec; };
      int gettimeofday(struct wrk_report_timeval *tv, void *tz);
    ]]
    local tv = ffi.new("struct wrk_report_timeval")
    clock = function()
      ffi.C.gettimeofday(tv, nil)
      return tonumber(tv.tv_sec) * 1000000 + tonumber(tv.tv_usec)
    end
  end
end

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
  -- init runs before this thread is created: before any of its requests.
  first_us = clock and clock()
  last_us = nil
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if clock then
    last_us = clock()
  end
end

local function window()
  local first, last = nil, nil
  for _, thread in ipairs(threads) do
    local f, l = thread:get("first_us"), thread:get("last_us")
    if f and (first == nil or f < first) then first = f end
    if l and (last == nil or l > last) then last = l end
  end
  if first == nil then
    return ""
  end
  -- no response at all: an empty window (nothing nginx logged was seen by wrk)
  return string.format(',"window_us":{"start":%.0f,"end":%.0f}', first, last or first)
end

function done(summary, latency, requests)
  local by_status = {}
  for _, thread in ipairs(threads) do
    local counts = thread:get("statuses")
    if counts then
      for status, n in pairs(counts) do
        by_status[status] = (by_status[status] or 0) + n
      end
    end
  end
  local parts = {}
  for status, n in pairs(by_status) do
    table.insert(parts, string.format('"%d":%d', status, n))
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"duration_us":%d,"requests":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"min":%d,"max":%d,"mean":%.3f,"stdev":%.3f,' ..
    '"p50":%d,"p75":%d,"p90":%d,"p99":%d,"p999":%d,"p9999":%d},"by_status":{%s}%s}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean, latency.stdev,
    latency:percentile(50), latency:percentile(75), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency:percentile(99.99),
    table.concat(parts, ","), window()))
end
