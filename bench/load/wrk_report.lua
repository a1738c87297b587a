-- Adds one machine-readable line to wrk's report: `WRK_JSON {...}` with the percentiles wrk's
-- text lacks (p99.9) and the socket errors. With the script argument `statuses`
-- (`wrk ... URL -- statuses`) also the responses counted by HTTP status (502/504 apart) and
-- "window_us": the wall clock (Unix µs) from before the first request to the last response
-- this wrk counted. The harness counts nginx's log lines inside that window: by wrk's own
-- clock, not by when the harness started wrk (process and thread start-up shift it, tens of
-- ms on a busy machine) nor by wrk's -d (it stops on its next 100 ms tick).
--
-- Without `statuses` there is no response() function: wrk then neither copies each
-- response's headers and body nor calls into Lua per response (measured here: ~1.5-2 µs per
-- response, 11-17 % of wrk's own CPU, taken from the server on a shared machine). wrk still
-- counts responses with a status above 399 itself ("status" errors: the record's non_2xx).
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

local function count(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if clock then
    last_us = clock()
  end
end

function init(args)
  statuses = {}
  -- init runs before this thread is created: before any of its requests.
  first_us = clock and clock()
  last_us = nil
  -- wrk asks whether response() exists after the first thread's init(): defined here or not
  -- at all.
  counting = args[1] == "statuses"
  response = counting and count or nil
end

local function window()
  if not threads[1] or not threads[1]:get("counting") then
    return ""
  end
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
  -- not counted: no by_status key at all (an empty one would say "no response")
  local counted = threads[1] and threads[1]:get("counting")
  local statuses_json = counted and (',"by_status":{' .. table.concat(parts, ",") .. '}') or ""
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"duration_us":%d,"requests":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"min":%d,"max":%d,"mean":%.3f,"stdev":%.3f,' ..
    '"p50":%d,"p75":%d,"p90":%d,"p99":%d,"p999":%d,"p9999":%d}%s%s}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean, latency.stdev,
    latency:percentile(50), latency:percentile(75), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency:percentile(99.99),
    statuses_json, window()))
end
