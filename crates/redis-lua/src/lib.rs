#![forbid(unsafe_code)]
//! Lua 5.1 as Redis 7.0 embeds it, for the Redis door's scripts and functions: a state with
//! the libraries Redis loads (`base`, `table`, `string`, `math`, `cjson`, `cmsgpack`, `bit`,
//! `struct`) and Redis's sandbox. The door adds the `redis` table (its calls need the door).
//!
//! Map of the crate:
//! - `shim`: how a Rust library function is exposed to scripts (a callable table whose
//!   `__call` is a C function of Lua's own, so errors are plain strings with the caller's
//!   position, as `luaL_error` gives them in Redis's C libraries);
//! - `args`: reading arguments and table entries with Lua 5.1's conversions, exact numbers,
//!   and the `bad argument #n to 'f' (...)` texts;
//! - `bit` (LuaBitOp 1.0.2), `cjson` (+ `cjson/decode.rs`, `numfmt` for `%.14g`/`strtod`),
//!   `cmsgpack` (lua-cmsgpack 0.4.0), `struct_` (Roberto Ierusalimschy's struct library):
//!   each reproduces what Redis 7.0.15 answers, texts included.

pub use mlua;

mod args;
mod bit;
mod cjson;
mod cmsgpack;
mod numfmt;
mod shim;
mod struct_;

/// Loads the libraries Redis gives scripts beyond Lua's own (`cjson`, `cmsgpack`, `bit`,
/// `struct`) into `lua`'s globals.
pub fn install_libs(lua: &mlua::Lua) -> mlua::Result<()> {
    let shim = shim::Shim::new(lua)?;
    let globals = lua.globals();
    globals.raw_set("cjson", cjson::module(lua, &shim)?)?;
    globals.raw_set("struct", struct_::module(lua, &shim)?)?;
    globals.raw_set("cmsgpack", cmsgpack::module(lua, &shim)?)?;
    globals.raw_set("bit", bit::module(lua, &shim)?)?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod testutil {
    use mlua::{Lua, StdLib};

    /// A state like the door's: Lua's base/table/string/math libs plus ours.
    pub fn state() -> Lua {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            mlua::LuaOptions::default(),
        )
        .unwrap();
        super::install_libs(&lua).unwrap();
        lua
    }

    /// Runs `code` (a chunk named `user_script`, as Redis names scripts) and returns what it
    /// returns, converted with `tostring` semantics: a string result as its bytes, an error
    /// as its message.
    pub fn run(lua: &Lua, code: &str) -> Result<Vec<u8>, String> {
        let r: mlua::Result<mlua::Value> = lua.load(code).set_name("@user_script").eval();
        match r {
            Ok(mlua::Value::String(s)) => Ok(s.as_bytes().to_vec()),
            Ok(v) => {
                let s = lua
                    .globals()
                    .get::<mlua::Function>("tostring")
                    .unwrap()
                    .call::<mlua::String>(v)
                    .unwrap();
                Ok(s.as_bytes().to_vec())
            }
            Err(mlua::Error::RuntimeError(m)) => Err(m
                .split("\nstack traceback:")
                .next()
                .unwrap_or_default()
                .to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Asserts that each `(code, expected)` runs to `expected` (a `tostring`ed value, or an
    /// error text prefixed with `ERR `).
    pub fn check(cases: &[(&str, &str)]) {
        let lua = state();
        for (code, want) in cases {
            let got = match run(&lua, code) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => format!("ERR {e}"),
            };
            assert_eq!(&got, want, "script: {code}");
        }
    }
}
