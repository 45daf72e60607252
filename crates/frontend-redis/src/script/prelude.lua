local raw_call, redis, real, setfenv, error_value, lrand48, srand48 = ...
-- pcall gives a script the error of a Rust function (`redis.call`'s) as the value Redis
-- gives, not mlua's error object.
do
  local pcall, error_value = pcall, error_value
  local function plain(ok, ...)
    if ok then return ok, ... end
    return false, error_value((...))
  end
  real.pcall = function(...) return plain(pcall(...)) end
end
-- Redis's math.random and math.randomseed: its rand48, one sequence for every script of
-- the process from Redis's start value, as redis-server has (neither an EVAL nor SCRIPT
-- FLUSH reseeds it), the same numbers for the same seed; a number is drawn before the
-- arguments are checked.
do
  local floor, tonumber, type, select, error = math.floor, tonumber, type, select, error
  -- luaL_checkint: a number or a numeric string, truncated, then cast to a C int.
  local function checkint(fname, n, nargs, v)
    local d = (type(v) == 'number' or type(v) == 'string') and tonumber(v) or nil
    if d == nil then
      local got = n > nargs and 'no value' or type(v)
      return nil, "bad argument #" .. n .. " to '" .. fname .. "' (number expected, got " .. got .. ")"
    end
    if not (d > -9.2233720368547758e18 and d < 9.2233720368547758e18) then
      return 0
    end
    d = d >= 0 and floor(d) or -floor(-d)
    d = d % 4294967296
    if d >= 2147483648 then d = d - 4294967296 end
    return d
  end
  math.random = function(...)
    local nargs = select('#', ...)
    local r = (lrand48() % 2147483647) / 2147483647
    if nargs == 0 then return r end
    if nargs > 2 then error("wrong number of arguments", 2) end
    local a, b = ...
    local l, e = checkint('random', 1, nargs, a)
    if not l then error(e, 2) end
    if nargs == 1 then
      if l < 1 then error("bad argument #1 to 'random' (interval is empty)", 2) end
      return floor(r * l) + 1
    end
    local u, e2 = checkint('random', 2, nargs, b)
    if not u then error(e2, 2) end
    if l > u then error("bad argument #2 to 'random' (interval is empty)", 2) end
    return floor(r * (u - l + 1)) + l
  end
  math.randomseed = function(...)
    local s, e = checkint('randomseed', 1, select('#', ...), (...))
    if not s then error(e, 2) end
    if s < 0 then s = s + 4294967296 end
    srand48(s)
  end
end
redis.pcall = function(...)
  local r = raw_call(...)
  return r
end
local env = {}
setmetatable(env, {
  __index = function(_, k)
    local v = real[k]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
real._G = env

-- Only source text is loaded, never precompiled bytecode (Lua 5.1 does not check it:
-- crafted bytecode reads and writes memory), as Redis's patched Lua does: a chunk starting
-- with the bytecode mark is read as text, which fails as Redis's does ("unexpected symbol
-- near 'char(27)'"). Loaded chunks see the scripts' environment, not the real globals.
local loadstring, concat, byte = real.loadstring, table.concat, string.byte
local function text_only(s, name)
  if type(s) == "string" and byte(s, 1) == 27 then
    name = name or s
    s = " " .. s
  end
  local f, e = loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
real.loadstring = text_only
real.load = function(reader, name)
  if type(reader) ~= "function" then
    return loadstring(reader, name)
  end
  local parts = {}
  while true do
    local piece = reader()
    if piece == nil or piece == "" then break end
    if type(piece) ~= "string" then return nil, "reader function must return a string" end
    parts[#parts + 1] = piece
  end
  return text_only(concat(parts), name or "=(load)")
end

-- Lua 5.1's pattern matcher recurses once per quantifier or capture, with no bound (5.2
-- added one): a pattern of thousands of them overflows the script thread's stack and ends
-- the process. Patterns past 5.2's bound are refused with 5.2's error.
local find, match, gmatch, gsub = string.find, string.match, string.gmatch, string.gsub
local PATTERN_ITEMS = 200
local function check(p)
  if type(p) == "string" and #p > PATTERN_ITEMS then
    local n = 0
    for i = 1, #p do
      local c = byte(p, i)
      -- * + - ? ( )
      if c == 42 or c == 43 or c == 45 or c == 63 or c == 40 or c == 41 then n = n + 1 end
    end
    if n > PATTERN_ITEMS then error("pattern too complex", 3) end
  end
end
-- Not tail calls: an argument error still names the function ('find'...).
local function pass(...) return ... end
string.find = function(s, p, ...) check(p) return pass(find(s, p, ...)) end
string.match = function(s, p, ...) check(p) return pass(match(s, p, ...)) end
string.gmatch = function(s, p, ...) check(p) return pass(gmatch(s, p, ...)) end
string.gsub = function(s, p, ...) check(p) return pass(gsub(s, p, ...)) end

-- One state serves every client's scripts, one after the other: what a script changes in
-- it (a library's function, the string metatable, a global set with rawset) would reach
-- the next scripts, another user's included. Redis makes these tables read-only; here
-- everything reachable from the globals is noted now and compared after each script, and
-- a state that changed is thrown away (`changed` answers true).
local per_script = { KEYS = true, ARGV = true }
local watched = {}
local function watch(t)
  if type(t) ~= "table" or watched[t] then return end
  local copy, n = {}, 0
  local w = { copy, getmetatable(t), 0 }
  watched[t] = w
  for k, v in next, t do
    if not (t == real and per_script[k]) then
      copy[k] = v
      n = n + 1
      watch(v)
    end
  end
  w[3] = n
  watch(getmetatable(t))
end
watch(real)
watch(getmetatable(""))
local string_meta = getmetatable("")
-- One pass over each table (it runs after every script): every key it holds has its noted
-- value (so is a noted key, values being non-nil), and it holds as many keys as were
-- noted, so none was removed.
local function changed()
  if next(env) ~= nil or getmetatable("") ~= string_meta then return true end
  for t, w in next, watched do
    local copy, n = w[1], 0
    if getmetatable(t) ~= w[2] then return true end
    if t == real then
      for k, v in next, t do
        if not per_script[k] then
          if not rawequal(copy[k], v) then return true end
          n = n + 1
        end
      end
    else
      for k, v in next, t do
        if not rawequal(copy[k], v) then return true end
        n = n + 1
      end
    end
    if n ~= w[3] then return true end
  end
  return false
end

return env, function(f, h) return xpcall(f, h) end, changed
