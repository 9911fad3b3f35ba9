-- Shared by the bench's wrk scripts (loaded with dofile by each): the fixed User-Agent, a thread
-- number per wrk thread, exact status counts when BENCH_COUNT_STATUSES=1 (the warm-up runs: a
-- response() callback costs the generator time, so the measured runs go without it and rely on
-- wrk's own count of statuses >= 400), and a done() that prints one line of JSON for
-- bench/lib/wrk.ts.
wrk.headers["User-Agent"] = "urlshortener-bench/1.0"

B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

local threads = {}

-- Runs in the main Lua state once per thread, before that thread's init().
function setup(thread)
  thread:set("tid", #threads)
  threads[#threads + 1] = thread
end

if os.getenv("BENCH_COUNT_STATUSES") == "1" then
  statuses = {}
  function response(status)
    statuses[status] = (statuses[status] or 0) + 1
  end
end

local function encode(value)
  local kind = type(value)
  if kind == "number" then
    if value == math.floor(value) and math.abs(value) < 2 ^ 53 then return string.format("%d", value) end
    return string.format("%.6f", value)
  elseif kind == "string" then
    return '"' .. value:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
  elseif kind == "table" then
    local parts = {}
    if #value > 0 then
      for _, item in ipairs(value) do parts[#parts + 1] = encode(item) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    for key, item in pairs(value) do parts[#parts + 1] = encode(tostring(key)) .. ":" .. encode(item) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif kind == "boolean" then
    return tostring(value)
  end
  return "null"
end

function done(summary, latency)
  local per_thread = {}
  for i, thread in ipairs(threads) do
    per_thread[i] = { statuses = thread:get("statuses") or {}, sample = thread:get("sample") or {} }
  end
  local e = summary.errors
  local out = {
    requests = summary.requests,
    duration_us = summary.duration,
    bytes = summary.bytes,
    errors = { connect = e.connect, read = e.read, write = e.write, status = e.status, timeout = e.timeout },
    latency_us = {
      p50 = latency:percentile(50),
      p90 = latency:percentile(90),
      p99 = latency:percentile(99),
      p999 = latency:percentile(99.9),
      max = latency.max,
      mean = latency.mean,
    },
    threads = per_thread,
  }
  io.write("BENCH_WRK_JSON " .. encode(out) .. "\n")
end

-- The request line and headers of `method path` split around the path, so that a request is one
-- concatenation.
function request_template(method, headers, body)
  local marker = "/@BENCH_PATH@"
  local text = wrk.format(method, marker, headers, body)
  local at = text:find(marker, 1, true)
  return text:sub(1, at - 1), text:sub(at + #marker)
end
