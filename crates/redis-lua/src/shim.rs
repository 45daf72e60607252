//! How a Rust library function becomes a script's function.
//!
//! Redis's libraries are C functions: their errors are plain strings that `luaL_error`
//! prefixes with the caller's position (`user_script:1: `), and they see any number of
//! arguments on the Lua stack. An mlua callback raises errors as userdata (scripts would get
//! a userdata from `pcall`) and turns every string argument into a reference on mlua's
//! auxiliary stack (a few thousand at most, past which mlua panics); a plain Lua wrapper
//! would lose the caller's position when tail-called. So each library function is a callable
//! table (see `WRAPPER`) whose body gets its arguments packed in one table (`n`, `{...}`) and
//! answers a status, its results, or its error text.
//!
//! The one visible difference: `type(cjson.encode)` is `"table"` (callable), not `"function"`.

use mlua::{Function, IntoLuaMulti, Lua, MultiValue, Table, Value};

use crate::args::Args;

/// What a library function's body answers.
pub enum Ret {
    /// One value.
    One(Value),
    /// `n` values, in `t[1..n]`.
    Many(Table, usize),
    /// An error: the message without position (the wrapper adds it).
    Err(String),
}

impl Ret {
    pub fn err(msg: impl Into<String>) -> Self {
        Ret::Err(msg.into())
    }
}

impl IntoLuaMulti for Ret {
    fn into_lua_multi(self, lua: &Lua) -> mlua::Result<MultiValue> {
        match self {
            Ret::One(v) => (0, v).into_lua_multi(lua),
            Ret::Many(t, n) => (1, t, n).into_lua_multi(lua),
            Ret::Err(m) => (2, lua.create_string(m)?).into_lua_multi(lua),
        }
    }
}

// `make(body)` returns the script-visible object: a table whose `__call` is a
// `coroutine.wrap` function (a C function of Lua's base library) resuming a loop that runs
// `body`. Being a C function, it keeps the caller's frame even when tail-called
// (`return cjson.decode(x)`), and on an error it prefixes the message with the caller's
// position (`luaL_where(L, 1)`), as Redis's C libraries' `luaL_error` does; an error ends
// the coroutine, so the loop first installs a fresh one.
const WRAPPER: &str = r"
local error, unpack, select, pcall = error, unpack, select, pcall
local wrap, yield = coroutine.wrap, coroutine.yield
local setmetatable, rawset = setmetatable, rawset
-- `unpack` refuses more results than Lua's C stack limit lets a C function push; the
-- libraries may return up to that limit, so long lists are spread by Lua calls instead.
local function spread(a, i, n)
  if n - i < 100 then return unpack(a, i, n) end
  return a[i], spread(a, i + 1, n)
end
return function(body)
  local mt = {}
  local n, args
  local function take(_, ...)
    n, args = select('#', ...), {...}
  end
  local function loop(...)
    take(...)
    while true do
      local ok, status, a, b = pcall(body, n, args)
      n, args = nil, nil
      if not ok or status == 2 then
        rawset(mt, '__call', wrap(loop))
        error(ok and a or status, 0)
      end
      if status == 0 then
        take(yield(a))
      else
        take(yield(spread(a, 1, b)))
      end
    end
  end
  rawset(mt, '__call', wrap(loop))
  rawset(mt, '__metatable', false)
  return setmetatable({}, mt)
end
";

// `next` whose numbers also come back as plain numbers, which mlua reads exactly as `f64`
// (see `args`).
const NEXT_EXACT: &str = r"
local next, type = next, type
return function(t, k)
  local k2, v = next(t, k)
  return k2, v, type(k2) == 'number' and k2 or nil, type(v) == 'number' and v or nil
end
";

/// Makes script functions out of Rust bodies.
#[derive(Clone)]
pub struct Shim {
    wrap: Function,
    next_exact: Function,
}

impl Shim {
    pub fn new(lua: &Lua) -> mlua::Result<Self> {
        let wrap: Function = lua.load(WRAPPER).set_name("=[C]").eval()?;
        let next_exact: Function = lua.load(NEXT_EXACT).set_name("=[C]").eval()?;
        Ok(Shim { wrap, next_exact })
    }

    /// A table walker: `lua_next` with exact numbers.
    pub fn walker(&self) -> Walker {
        Walker(self.next_exact.clone(), std::cell::Cell::new(MAX_ENTRIES))
    }

    /// A script-callable object running `body` on its arguments.
    pub fn function<F>(&self, lua: &Lua, body: F) -> mlua::Result<Table>
    where
        F: Fn(&Lua, &Args) -> mlua::Result<Ret> + 'static,
    {
        let inner = lua.create_function(move |lua, (n, t): (usize, Table)| {
            let args = Args::new(n, t);
            body(lua, &args)
        })?;
        self.wrap.call(inner)
    }

    /// Sets `t[name]` to a function running `body`.
    pub fn set<F>(&self, lua: &Lua, t: &Table, name: &str, body: F) -> mlua::Result<()>
    where
        F: Fn(&Lua, &Args) -> mlua::Result<Ret> + 'static,
    {
        t.raw_set(name, self.function(lua, body)?)
    }
}

/// `lua_next` over a table, numbers exact.
#[derive(Clone)]
pub struct Walker(Function, std::cell::Cell<u32>);

/// Most table entries one `cjson.encode` or `cmsgpack.pack` visits (some 3 s of a script
/// thread): a table shared at every level makes the walk exponential, out of reach of the
/// hook that stops scripts.
pub const MAX_ENTRIES: u32 = 2 << 20;

impl Walker {
    /// A new walk (an encoder's call) may visit [`MAX_ENTRIES`] entries.
    pub fn start(&self) {
        self.1.set(MAX_ENTRIES);
    }

    /// The entry after `key` (`Nil` to start), or `None` at the end; past [`MAX_ENTRIES`]
    /// in this walk, Lua's error for memory it cannot have.
    #[inline(never)]
    pub fn next(&self, t: &Table, key: &Value) -> mlua::Result<Option<(Value, Value)>> {
        let left = self.1.get();
        if left == 0 {
            return Err(mlua::Error::RuntimeError(crate::TOO_LONG.to_string()));
        }
        self.1.set(left - 1);
        let (k, v, kn, vn): (Value, Value, Option<f64>, Option<f64>) = self.0.call((t, key))?;
        if matches!(k, Value::Nil) {
            return Ok(None);
        }
        let k = kn.map_or(k, Value::Number);
        let v = vn.map_or(v, Value::Number);
        Ok(Some((k, v)))
    }
}
