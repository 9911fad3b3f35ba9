-- GET /{code}, cycling over the paths in a file (one per line): the "popular links" mix.
--   wrk ... -s popular.lua URL PATHS_FILE
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")

local requests, count, index

function init(args)
  local head, tail = request_template("GET")
  requests = {}
  for line in io.lines(args[1]) do
    if line ~= "" then requests[#requests + 1] = head .. line .. tail end
  end
  count = #requests
  assert(count > 0, "no paths in " .. args[1])
  -- Threads start at different places of the one sequence.
  index = math.floor(count * tid / 64) % count
end

function request()
  index = index % count + 1
  return requests[index]
end
