-- What scripts see, made once per Lua state: Redis 7.0.15's globals and libraries, read-only
-- as Redis makes them, with Lua 5.1's holes closed (bytecode, unbounded patterns).
local raw_call, redis, real, setfenv, error_value, lrand48, srand48, raw_metatable, inline = ...
local type, select, tostring, tonumber, error = type, select, tostring, tonumber, error
local next, rawget, rawset, getmetatable, setmetatable, pcall =
  next, rawget, rawset, getmetatable, setmetatable, pcall
local READONLY = "Attempt to modify a readonly table"
-- `luaL_argerror`'s text, at the place of the script that called the wrapper calling this
-- (the C function's own check would name the wrapper's place).
local function argerror(fname, n, msg)
  error("bad argument #" .. n .. " to '" .. fname .. "' (" .. msg .. ")", 3)
end
-- `luaL_typename` of argument `n` of `nargs`.
local function typename(nargs, n, v)
  if n > nargs then return "no value" end
  return type(v)
end
-- On a worker (inline.rs), a script that would do better on a script thread calls
-- `heavy`, which marks it to move there (and raises).
local heavy = inline and inline.heavy
-- A worker's state has less memory than a thread's: a script that runs out of it there
-- moves, even when it catches the error (`pcall`, `xpcall`, `loadstring`), so that its
-- answer is the one a thread gives.
local MEMORY = "not enough memory"
-- pcall gives a script the error of a Rust function (`redis.call`'s) as the value Redis
-- gives, not mlua's error object.
do
  local pcall, xpcall, error_value = pcall, xpcall, error_value
  local function plain(ok, ...)
    if ok then return ok, ... end
    local e = error_value((...))
    if heavy and e == MEMORY then heavy() end
    return false, e
  end
  real.pcall = function(...) return plain(pcall(...)) end
  if heavy then
    -- Lua 5.1 calls no handler for a memory error: xpcall's result says it.
    local function after(ok, ...)
      if not ok and (...) == MEMORY then heavy() end
      return ok, ...
    end
    real.xpcall = function(f, h, ...)
      if type(h) == "function" then
        local handler = h
        h = function(e)
          if error_value(e) == MEMORY then heavy() end
          return handler(e)
        end
      end
      return after(xpcall(f, h, ...))
    end
  end
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
-- A worker's state (inline.rs): a call's arguments are staged, the script's coroutine
-- yields to the worker, which resumes it with the answer. A failed yield (across a C
-- function, as inside `pcall`) is seen at the next stage or at the end: the script then
-- runs again on a script thread, as does one whose error escapes (its place is reported
-- there).
if inline then
  local stage, answer, yield = inline.stage, inline.answer, inline.yield
  redis.call = function(...)
    stage(true, ...)
    yield()
    return answer(true)
  end
  redis.pcall = function(...)
    local e = stage(false, ...)
    if e then return e end
    yield()
    return answer(false)
  end
end
-- The scripts' environment (`_G`): made read-only below, with the rest.
local env

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
  if f then setfenv(f, env) elseif heavy and e == MEMORY then heavy() end
  return f, e
end
real.loadstring = text_only
real.load = function(...)
  local reader, name = ...
  if type(reader) ~= "function" then
    argerror("load", 1, "function expected, got " .. typename(select("#", ...), 1, reader))
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
-- On a worker (inline.rs), the C work a hook cannot interrupt is bounded: a match whose
-- cost may pass WORKER_STEPS, counted as the subject's length (1 when anchored) times the
-- pattern's, times the subject's length again for each quantifier on a class, `%b` and
-- back-reference (each may backtrack over the whole subject), or a subject past
-- WORKER_SUBJECT bytes, or a `string.rep` past WORKER_BYTES, moves the script to a script
-- thread, where it holds no other client. A pattern's count is kept (a few hundred).
local WORKER_STEPS, WORKER_SUBJECT, WORKER_BYTES = 1e6, 16384, 65536
local function text(v)
  if type(v) == "number" then return tostring(v) end
  return v
end
-- How many times a match of pattern `p` may go over its subject, from `p`'s items.
local counted, ncounted = {}, 0
local function multipliers(p)
  local m = counted[p]
  if m then return m end
  m = 0
  local i, len = 1, #p
  if byte(p, 1) == 94 then i = 2 end -- ^
  while i <= len do
    local c = byte(p, i)
    if c == 37 then -- %
      local d = byte(p, i + 1)
      if d == 98 then -- %bxy
        m = m + 1
        i = i + 4
      elseif d == 102 then -- %f[set]: a set follows
        i = i + 2
      elseif d and d >= 49 and d <= 57 then -- %1..%9
        m = m + 1
        i = i + 2
      else
        i = i + 2
      end
    elseif c == 91 then -- [set]
      i = i + 1
      if byte(p, i) == 94 then i = i + 1 end
      if byte(p, i) == 93 then i = i + 1 end -- a leading ] is in the set
      while i <= len and byte(p, i) ~= 93 do
        if byte(p, i) == 37 then i = i + 1 end
        i = i + 1
      end
      i = i + 1
    elseif c == 42 or c == 43 or c == 45 or c == 63 then -- * + - ?
      m = m + 1
      i = i + 1
    else
      i = i + 1
    end
  end
  if ncounted >= 256 then counted, ncounted = {}, 0 end
  counted[p] = m
  ncounted = ncounted + 1
  return m
end
local function costly(s, p, plain)
  s, p = text(s), text(p)
  if type(s) ~= "string" or type(p) ~= "string" then return false end
  local n = #s
  if n > WORKER_SUBJECT then return true end
  local anchored = not plain and byte(p, 1) == 94
  local steps = (anchored and 1 or n) * (#p + 1)
  if steps > WORKER_STEPS then return true end
  if plain or n < 2 then return false end
  for _ = 1, multipliers(p) do
    steps = steps * n
    if steps > WORKER_STEPS then return true end
  end
  return false
end
local function check_worker(s, p, plain)
  if heavy and costly(s, p, plain) then heavy() end
end
-- Not tail calls: an argument error still names the function ('find'...).
local function pass(...) return ... end
string.find = function(s, p, i, plain, ...)
  check(p) check_worker(s, p, plain)
  return pass(find(s, p, i, plain, ...))
end
string.match = function(s, p, ...) check(p) check_worker(s, p) return pass(match(s, p, ...)) end
string.gmatch = function(s, p, ...) check(p) check_worker(s, p) return pass(gmatch(s, p, ...)) end
string.gsub = function(s, p, ...) check(p) check_worker(s, p) return pass(gsub(s, p, ...)) end
if heavy then
  local rep = string.rep
  string.rep = function(s, n, ...)
    local t, k = text(s), tonumber(n)
    if type(t) == "string" and k and (k > WORKER_BYTES or #t * k > WORKER_BYTES) then heavy() end
    return pass(rep(s, n, ...))
  end
end

-- One state serves every client's scripts, one after the other: what a script changed in it
-- (a library's function, the string metatable, a global) would reach the next scripts,
-- another user's included. Redis 7.0 makes every table reachable from the globals (and
-- their metatables) read-only in its patched Lua: any write fails with "Attempt to modify
-- a readonly table". Plain Lua 5.1 has no such tables, so scripts never get the real ones:
--
-- - each table reachable from the globals or the string metatable is seen through a
--   proxy, an empty table whose metatable reads a view of it (its entries, the tables
--   among them as their proxies) and refuses writes; the globals' proxy is `env`, the
--   scripts' environment; the real tables are left to the libraries' own code;
-- - a library function made in Rust is a callable table (see manifold-redis-lua's shim):
--   it is kept, its metatable refusing writes too;
-- - what reaches a table past its metatable is wrapped: `rawset` and `table.insert`
--   refuse these tables, `rawget`, `next`, `pairs` and `table.foreach` read the views,
--   `getmetatable` answers the proxies (a string's metatable too), `setmetatable` refuses
--   these tables, each with Lua's texts and Redis's;
-- - every proxy and callable stays empty, which `changed` checks after each script (a
--   raw write past all this would be seen there: the state is then replaced).
--
-- `ipairs`, `unpack`, `#` and the table functions that read by index need no wrapping:
-- these tables have no integer keys (checked below), so they read nothing either way.
local view_of = {}   -- proxy -> its view
local frozen = {}    -- proxy or callable -> true
local meta_of = {}   -- proxy or callable -> what getmetatable answers (false: nil)
local proxy_of = {}  -- real table -> what scripts see of it
local watched = {}   -- the proxies and callables, to check they stay empty
local function readonly() error(READONLY, 2) end
local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end

-- `p` (a new table if nil), read-only, reading `view`.
local function seal(view, p)
  p = p or {}
  setmetatable(p, { __index = view, __newindex = readonly, __metatable = false })
  view_of[p], frozen[p], meta_of[p] = view, true, false
  watched[#watched + 1] = p
  return p
end

local function protect(t)
  local seen = proxy_of[t]
  if seen then return seen end
  local meta = raw_metatable(t)
  if meta ~= nil then
    -- A callable (its metatable hidden): scripts get it as it is.
    proxy_of[t] = t
    if rawget(meta, "__newindex") == nil then rawset(meta, "__newindex", readonly) end
    frozen[t], meta_of[t] = true, false
    watched[#watched + 1] = t
    return t
  end
  local p, view = {}, {}
  proxy_of[t] = p
  for k, v in next, t do
    if type(k) == "number" then error("a shared table has an integer key: " .. tostring(k)) end
    if type(v) == "table" then v = protect(v) end
    view[k] = v
  end
  return seal(view, p)
end

-- The wrapped functions, with the C functions' checks first (their texts, at the
-- script's place), then Redis's refusal of a read-only table.
local insert, foreach = table.insert, table.foreach

local function ro_next(...)
  local t, k = ...
  if type(t) ~= "table" then
    argerror("next", 1, "table expected, got " .. typename(select("#", ...), 1, t))
  end
  return next(view_of[t] or t, k)
end
real.next = ro_next
real.pairs = function(...)
  local t = ...
  if type(t) ~= "table" then
    argerror("pairs", 1, "table expected, got " .. typename(select("#", ...), 1, t))
  end
  if view_of[t] then return ro_next, t, nil end
  return next, t, nil
end
real.rawget = function(...)
  local t, k = ...
  if type(t) ~= "table" then
    argerror("rawget", 1, "table expected, got " .. typename(select("#", ...), 1, t))
  end
  if select("#", ...) < 2 then argerror("rawget", 2, "value expected") end
  return rawget(view_of[t] or t, k)
end
real.rawset = function(...)
  local n = select("#", ...)
  local t, k, v = ...
  if type(t) ~= "table" then argerror("rawset", 1, "table expected, got " .. typename(n, 1, t)) end
  if n < 2 then argerror("rawset", 2, "value expected") end
  if n < 3 then argerror("rawset", 3, "value expected") end
  if frozen[t] then error(READONLY, 0) end
  return rawset(t, k, v)
end
local string_meta = getmetatable("")
local string_meta_seen -- protect(string_meta), below
real.getmetatable = function(...)
  local o = ...
  if type(o) == "string" then return string_meta_seen end
  local m = meta_of[o]
  if m ~= nil then return m or nil end
  if select("#", ...) == 0 then argerror("getmetatable", 1, "value expected") end
  return getmetatable(o)
end
real.setmetatable = function(...)
  local n = select("#", ...)
  local t, m = ...
  if type(t) ~= "table" then
    argerror("setmetatable", 1, "table expected, got " .. typename(n, 1, t))
  end
  if n < 2 or (m ~= nil and type(m) ~= "table") then
    argerror("setmetatable", 2, "nil or table expected")
  end
  if frozen[t] then error(READONLY, 0) end
  -- Its one error left ("cannot change a protected metatable") at the script's place.
  local ok, r = pcall(setmetatable, t, m)
  if not ok then error(r, 2) end
  return r
end
-- `table.insert` is common in scripts' loops: the C function runs under pcall (its errors
-- then name '?' and no place, both put back) rather than behind checks in Lua.
table.insert = function(...)
  local t = ...
  if frozen[t] then
    local n = select("#", ...)
    if n == 3 then
      local _, pos = ...
      local kind = type(pos)
      if (kind ~= "number" and kind ~= "string") or tonumber(pos) == nil then
        argerror("insert", 2, "number expected, got " .. kind)
      end
    elseif n ~= 2 then
      error("wrong number of arguments to 'insert'", 2)
    end
    error(READONLY, 0)
  end
  local ok, e = pcall(insert, ...)
  if not ok then
    if find(e, "^bad argument") or find(e, "^wrong number") then
      error((gsub(e, "'%?'", "'insert'", 1)), 2)
    end
    error(e, 0)
  end
end
table.foreach = function(...)
  local n = select("#", ...)
  local t, f = ...
  if type(t) ~= "table" then argerror("foreach", 1, "table expected, got " .. typename(n, 1, t)) end
  if type(f) ~= "function" then
    argerror("foreach", 2, "function expected, got " .. typename(n, 2, f))
  end
  return foreach(view_of[t] or t, f)
end

-- The globals: `env` reads their view, which answers a missing name with Redis's error.
-- `_G` is `env` (the globals hold themselves as `_G`). `KEYS` and `ARGV` are set in the
-- view before each script.
env = protect(real)
local globals = view_of[env]
setmetatable(globals, { __index = missing })
-- Redis's globals have a metatable reading missing names: scripts see one alike.
meta_of[env] = protect({ __index = missing })
string_meta_seen = protect(string_meta)

-- FCALL: a library's script (functions.rs's `wrapper`) runs its code with the `redis` it
-- had at FUNCTION LOAD, read-only too: the scripts' with `register_function`, which
-- collects the callbacks in the table it is given with it.
local lower = string.lower
local registered
local library_view = {}
for k, v in next, view_of[proxy_of[redis]] do library_view[k] = v end
library_view.register_function = function(name, callback)
  if type(name) == "table" then
    -- Named arguments, in any case (FUNCTION LOAD checked them).
    local args = name
    for k, v in next, args do
      local key = lower(tostring(k))
      if key == "function_name" then name = v elseif key == "callback" then callback = v end
    end
  end
  registered[tostring(name)] = callback
end
local library_redis = seal(library_view)
local function run_library(f, h)
  local fns = {}
  registered = fns
  return xpcall(function() return f(library_redis, fns) end, h)
end

-- A library's script in a worker's coroutine (inline.rs): no `xpcall` there (a yield
-- cannot cross it), an error ends the coroutine and the script runs again on a thread.
local function inline_script(f)
  return true, f()
end
local function inline_library(f)
  local fns = {}
  registered = fns
  return true, f(library_redis, fns)
end

local count = #watched
-- After each script: O(number of shared tables), one `next` each.
local function changed()
  for i = 1, count do
    if next(watched[i]) ~= nil then return true end
  end
  return getmetatable("") ~= string_meta
end

return env, globals, function(f, h) return xpcall(f, h) end, run_library, changed, inline_script, inline_library
