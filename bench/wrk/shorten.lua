-- POST /shorten with a valid body and a code no target has seen: "1", a 4-character TAG that the
-- bench makes unique per target and run, the wrk thread's number, and a per-thread counter in
-- base 62 (7 to 10 characters in all; seeded codes start with "0").
--   wrk ... -s shorten.lua URL TAG
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")

local prefix, counter
local headers = { ["Content-Type"] = "application/json" }

local function base62(n)
  local text = ""
  repeat
    local r = n % 62
    text = B62:sub(r + 1, r + 1) .. text
    n = (n - r) / 62
  until n == 0
  return text
end

function init(args)
  assert(#args[1] == 4, "TAG must have 4 characters")
  prefix = "1" .. args[1] .. B62:sub(tid + 1, tid + 1)
  counter = 0
end

function request()
  local code = prefix .. base62(counter)
  counter = counter + 1
  local body = '{"code":"' .. code .. '","url":"https://example.com/created/' .. code
    .. '?ref=bench","created_at":"2024-01-01T00:00:00Z","click_count":0}'
  return wrk.format("POST", "/shorten", headers, body)
end
