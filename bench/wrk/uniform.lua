-- GET /{code} for a code drawn uniformly from all MAPPINGS seeded ones, with a fixed SEED: a mix
-- that mostly misses any cache. The codes are those of bench/lib/codes.ts (seedMapping): "0" and
-- six base-62 digits of MurmurHash3's finaliser of the row's index. The first draws of each thread
-- are kept ("sample", as "<index>/<code>") so that the bench can check them against its own seedMapping().
--   wrk ... -s uniform.lua URL MAPPINGS SEED
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")
local bit = require("bit")
local bxor, rshift = bit.bxor, bit.rshift

local mappings, head, tail
local digits = {}
for i = 1, 62 do digits[i - 1] = B62:byte(i) end

-- (a * c) mod 2^32 for a < 2^32 and c = c_hi * 2^16 + c_lo, exact in doubles.
local function mul32(a, c_lo, c_hi)
  local a_lo = a % 65536
  local a_hi = (a - a_lo) / 65536
  return (a_lo * c_lo + ((a_hi * c_lo + a_lo * c_hi) % 65536) * 65536) % 4294967296
end

local function scramble(value)
  local h = value
  h = bxor(h, rshift(h, 16)) % 4294967296
  h = mul32(h, 0xca6b, 0x85eb)
  h = bxor(h, rshift(h, 13)) % 4294967296
  h = mul32(h, 0xae35, 0xc2b2)
  return bxor(h, rshift(h, 16)) % 4294967296
end

local function path_of(index)
  local h = scramble(index)
  local d = {}
  for k = 6, 1, -1 do
    local r = h % 62
    d[k] = digits[r]
    h = (h - r) / 62
  end
  return string.char(47, 48, d[1], d[2], d[3], d[4], d[5], d[6])
end

function init(args)
  mappings = tonumber(args[1])
  math.randomseed(tonumber(args[2]) + tid * 7919)
  head, tail = request_template("GET")
  sample = {}
end

function request()
  local index = math.random(0, mappings - 1)
  local path = path_of(index)
  if #sample < 4 then sample[#sample + 1] = index .. path end
  return head .. path .. tail
end
