-- Shared by the wrk scripts of scripts/bench.sh: per-thread counters of the answers, an
-- optional fixed request rate, and one RESULT line from done() that bench.sh parses.
--
-- wrk gives each thread its own Lua state; setup() and done() run in a third one, which
-- reaches the threads' counters through thread:get(). Connections are invisible to Lua:
-- request() and response() of one thread interleave across its connections, so scripts
-- that keep state per session tag each request with an X-Request-Id (Tether echoes it)
-- and find the session again from the answer's header.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]]
local timespec = ffi.new("bench_timespec")

-- Milliseconds of CLOCK_MONOTONIC.
function now_ms()
  ffi.C.clock_gettime(1, timespec)
  return tonumber(timespec.tv_sec) * 1000 + tonumber(timespec.tv_nsec) / 1e6
end

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  threads[#threads + 1] = thread
end

-- Per thread: answers as expected, other answers, answers by status, and any counters a
-- script adds to `extra` (reported as name=value).
ok, bad, statuses, extra = 0, 0, {}, {}

function count(status, expected)
  local key = tostring(status)
  statuses[key] = (statuses[key] or 0) + 1
  if status == expected then
    ok = ok + 1
    return true
  end
  bad = bad + 1
  return false
end

function bump(name)
  extra[name] = (extra[name] or 0) + 1
end

-- The lines of `path` this thread owns: line i (from 0) belongs to thread i % threads.
function my_lines(path, thread_count)
  local lines, index = {}, 0
  for line in io.lines(path) do
    if line ~= "" then
      if index % thread_count == tid then lines[#lines + 1] = line end
      index = index + 1
    end
  end
  assert(#lines > 0, "no lines for thread " .. tid .. " in " .. path)
  return lines
end

-- Paces this thread to `rate` requests a second: each call of delay() claims the next slot
-- of a fixed schedule and waits for it (wrk measures latency from the actual send, after
-- the delay). While the server keeps up, arrivals follow the schedule whatever the latency,
-- as long as one of the thread's connections is free.
function pace(rate)
  local interval, next_at = 1000 / rate, nil
  delay = function()
    local now = now_ms()
    next_at = next_at or now
    local wait = next_at - now
    next_at = next_at + interval
    if wait < 0 then return 0 end
    return math.floor(wait + 0.5)
  end
end

function header(headers, name)
  return headers[name] or headers[name:lower()]
end

-- The sessions (or users) a thread owns wait in a queue while none of their requests is in
-- flight; each request's X-Request-Id (prefix .. index) names its session in the answer.
function sessions_init(name)
  free, head, tail = {}, 1, 0
  prefix = "bench-" .. name .. "-" .. tid .. "-"
end

-- Puts session `index` back in the queue.
function session_free(index)
  tail = tail + 1
  free[tail] = index
end

-- The next free session, or nil when every one is in flight or lost.
function session_take()
  if head > tail then return nil end
  local index = free[head]
  free[head] = nil
  head = head + 1
  return index
end

-- The session an answer is for, from its X-Request-Id; nil for an untagged one.
function session_of(headers)
  local id = header(headers, "X-Request-Id")
  return id and id:sub(1, #prefix) == prefix and tonumber(id:sub(#prefix + 1)) or nil
end

-- After the answer for session `index`: back in the queue when it succeeded, else lost for good.
function session_settle(index, succeeded)
  if succeeded then session_free(index) else bump("lost") end
end

function done(summary, latency, requests)
  local total_ok, total_bad, by_status, extras = 0, 0, {}, {}
  for _, thread in ipairs(threads) do
    total_ok = total_ok + thread:get("ok")
    total_bad = total_bad + thread:get("bad")
    for status, n in pairs(thread:get("statuses")) do by_status[status] = (by_status[status] or 0) + n end
    for name, n in pairs(thread:get("extra")) do extras[name] = (extras[name] or 0) + n end
  end
  local errors = summary.errors
  local socket_errors = errors.connect + errors.read + errors.write + errors.timeout
  local seconds = summary.duration / 1e6
  local parts = {}
  for status, n in pairs(by_status) do parts[#parts + 1] = status .. ":" .. n end
  table.sort(parts)
  local extra_parts = {}
  for name, n in pairs(extras) do extra_parts[#extra_parts + 1] = name .. "=" .. n end
  table.sort(extra_parts)
  io.write(string.format(
    "RESULT ok=%d bad=%d socket_errors=%d seconds=%.3f rate=%.1f p50_ms=%.3f p95_ms=%.3f p99_ms=%.3f max_ms=%.3f statuses=%s%s\n",
    total_ok, total_bad, socket_errors, seconds, total_ok / seconds,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    #parts > 0 and table.concat(parts, ",") or "none", #extra_parts > 0 and " " .. table.concat(extra_parts, " ") or ""))
end
