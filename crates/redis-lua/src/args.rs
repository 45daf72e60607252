//! Arguments and table entries as Redis's C libraries see them through Lua 5.1's C API:
//! `lua_tonumber` (strings coerced), `luaL_check*` with their texts, and x86-64's C casts.
//!
//! Numbers are read exactly: with Lua 5.1, mlua's generic `Value` turns any number within
//! `f64::EPSILON` of an integer into `Value::Integer`, which loses `-0.0` and tiny numbers
//! (`1e-300` becomes `0`); such a `Value::Integer(0)` is read again as an `f64`, which is exact.

use mlua::{Lua, Table, Value};

/// The arguments of one call: `n` of them (`select('#', ...)`), in `t[1..n]`.
pub struct Args {
    n: usize,
    t: Table,
}

/// `lua_typename(lua_type(v))`.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// `luaL_argerror`'s text.
pub fn arg_error(i: usize, fname: &str, msg: &str) -> String {
    format!("bad argument #{i} to '{fname}' ({msg})")
}

impl Args {
    pub fn new(n: usize, t: Table) -> Self {
        Args { n, t }
    }

    /// `lua_gettop`.
    pub fn len(&self) -> usize {
        self.n
    }

    /// `lua_isnone(i)`.
    pub fn is_none(&self, i: usize) -> bool {
        i == 0 || i > self.n
    }

    /// Argument `i` (1-based); nil when absent.
    pub fn get(&self, i: usize) -> mlua::Result<Value> {
        if self.is_none(i) {
            return Ok(Value::Nil);
        }
        exact_entry(&self.t, i)
    }

    /// `luaL_typename(i)`: "no value" when absent.
    pub fn type_name(&self, i: usize) -> mlua::Result<&'static str> {
        if self.is_none(i) {
            return Ok("no value");
        }
        Ok(type_name(&self.get(i)?))
    }

    /// `luaL_typerror`'s text.
    pub fn type_error(&self, i: usize, fname: &str, expected: &str) -> mlua::Result<String> {
        let got = self.type_name(i)?;
        Ok(arg_error(
            i,
            fname,
            &format!("{expected} expected, got {got}"),
        ))
    }

    /// `lua_tonumber` with `lua_isnumber`: `None` when not a number nor a numeric string.
    pub fn number(&self, lua: &Lua, i: usize) -> mlua::Result<Option<f64>> {
        to_number(lua, self.get(i)?)
    }

    /// `luaL_checknumber`.
    pub fn check_number(
        &self,
        lua: &Lua,
        i: usize,
        fname: &str,
    ) -> mlua::Result<Result<f64, String>> {
        Ok(match self.number(lua, i)? {
            Some(d) => Ok(d),
            None => Err(self.type_error(i, fname, "number")?),
        })
    }

    /// `luaL_checkinteger` (a double cast to `ptrdiff_t` as x86-64 does).
    pub fn check_integer(
        &self,
        lua: &Lua,
        i: usize,
        fname: &str,
    ) -> mlua::Result<Result<i64, String>> {
        Ok(self.check_number(lua, i, fname)?.map(c_i64))
    }

    /// `luaL_checklstring`: a string, or a number converted as Lua prints it.
    pub fn check_bytes(
        &self,
        lua: &Lua,
        i: usize,
        fname: &str,
    ) -> mlua::Result<Result<Vec<u8>, String>> {
        Ok(match to_bytes(lua, self.get(i)?)? {
            Some(b) => Ok(b),
            None => Err(self.type_error(i, fname, "string")?),
        })
    }
}

/// `t[i]` without metamethods, its number exact.
#[inline(never)]
pub fn exact_entry(t: &Table, i: usize) -> mlua::Result<Value> {
    match t.raw_get::<Value>(i)? {
        Value::Integer(0) => Ok(Value::Number(t.raw_get::<f64>(i)?)),
        v => Ok(v),
    }
}

/// A number `Value`'s exact double, when it is one that mlua read exactly (see the module
/// comment); `Value::Integer(0)` needs reading again.
pub fn number_value(v: &Value) -> Option<f64> {
    match v {
        Value::Number(d) => Some(*d),
        Value::Integer(i) => Some(*i as f64),
        _ => None,
    }
}

/// `lua_tonumber` + `lua_isnumber`.
pub fn to_number(lua: &Lua, v: Value) -> mlua::Result<Option<f64>> {
    match v {
        Value::Number(d) => Ok(Some(d)),
        Value::Integer(i) => Ok(Some(i as f64)),
        Value::String(_) => lua.coerce_number(v),
        _ => Ok(None),
    }
}

/// `lua_tolstring` on a string or number (`%.14g`), `None` for other types.
pub fn to_bytes(lua: &Lua, v: Value) -> mlua::Result<Option<Vec<u8>>> {
    match v {
        Value::String(s) => Ok(Some(s.as_bytes().to_vec())),
        Value::Integer(_) | Value::Number(_) => {
            Ok(lua.coerce_string(v)?.map(|s| s.as_bytes().to_vec()))
        }
        _ => Ok(None),
    }
}

const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// `(int64_t)d` as x86-64's `cvttsd2si` does it: NaN and out-of-range give `INT64_MIN`.
pub fn c_i64(d: f64) -> i64 {
    if (-TWO_63..TWO_63).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}

/// `(int)d` as x86-64's 32-bit `cvttsd2si` does it: NaN and out-of-range give `INT_MIN`.
pub fn c_i32(d: f64) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&d) {
        d as i32
    } else {
        i32::MIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_casts_match_x86_64() {
        assert_eq!(c_i64(f64::NAN), i64::MIN);
        assert_eq!(c_i64(1e300), i64::MIN);
        assert_eq!(c_i64(-2.9), -2);
        assert_eq!(c_i32(3e9), i32::MIN);
    }
}
