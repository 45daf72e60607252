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
//!   each reproduces what Redis 7.0.15 answers, texts included (tests/libs.rs).

pub use mlua;

mod args;
mod bit;
pub mod cjson;
mod cmsgpack;
mod numfmt;
mod shim;
mod struct_;

/// Longest text `cjson.encode` or `cmsgpack.pack` makes: the default script memory could
/// not hold more, and a table shared at every level (`t = {t, t}`, again and again) would
/// otherwise make the walk, and the Rust memory behind it, exponential, out of reach of the
/// hook that stops scripts.
pub const MAX_ENCODED: usize = 64 << 20;

/// The error past [`MAX_ENCODED`]: Lua's own for memory it cannot have.
pub(crate) const TOO_LONG: &str = "not enough memory";

/// Loads the libraries Redis gives scripts beyond Lua's own (`cjson`, `struct`, `cmsgpack`,
/// `bit`) into `lua`'s globals.
pub fn install_libs(lua: &mlua::Lua) -> mlua::Result<()> {
    install_libs_sharing(lua, &cjson::Settings::default())
}

/// [`install_libs`], `cjson`'s settings being `cjson`'s (shared with the other states given
/// them).
pub fn install_libs_sharing(lua: &mlua::Lua, cjson: &cjson::Settings) -> mlua::Result<()> {
    let shim = shim::Shim::new(lua)?;
    let globals = lua.globals();
    globals.raw_set("cjson", cjson::module(lua, &shim, cjson)?)?;
    globals.raw_set("struct", struct_::module(lua, &shim)?)?;
    globals.raw_set("cmsgpack", cmsgpack::module(lua, &shim)?)?;
    globals.raw_set("bit", bit::module(lua, &shim)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use mlua::{Lua, LuaOptions, StdLib};

    fn state() -> Lua {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )
        .unwrap();
        super::install_libs(&lua).unwrap();
        lua
    }

    /// Random bytes and mangled JSON never panic: cjson.decode answers a value or a Lua error.
    #[test]
    fn decode_random_input_gives_values_or_errors() {
        let lua = state();
        let decode: mlua::Table = lua.globals().get::<mlua::Table>("cjson").unwrap();
        let decode: mlua::Value = decode.get("decode").unwrap();
        let call: mlua::Function = lua
            .load("local f = ... return function(s) return pcall(f, s) end")
            .into_function()
            .unwrap()
            .call(decode)
            .unwrap();
        let seeds: &[&[u8]] = &[
            br#"{"a":[1,2,{"b":null}],"c":"\u00e9\ud83d\ude00"}"#,
            b"[1e400,-0,0x1p3,nan,-Infinity,\"x\"]",
            b"",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for round in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let seed = seeds[round % seeds.len()];
            let mut input: Vec<u8> = seed.to_vec();
            let edits = (x % 6) as usize;
            for e in 0..edits {
                let r = x.rotate_left(e as u32 * 11);
                let byte = (r >> 8) as u8;
                if input.is_empty() || r.is_multiple_of(3) {
                    input.push(byte);
                } else {
                    let at = (r as usize >> 16) % input.len();
                    if r % 3 == 1 {
                        input[at] = byte;
                    } else {
                        input.remove(at);
                    }
                }
            }
            let s = lua.create_string(&input).unwrap();
            let (ok, _v): (bool, mlua::Value) = call.call(s).unwrap();
            let _ = ok;
        }
    }

    /// Random bytes never panic: cmsgpack.unpack and struct.unpack (random bytes as format too)
    /// answer values or a Lua error.
    #[test]
    fn msgpack_random_input_gives_values_or_errors() {
        let lua = state();
        let call: mlua::Function = lua
            .load("return function(s) return pcall(cmsgpack.unpack, s) end")
            .eval()
            .unwrap();
        let unpack_struct: mlua::Function = lua
            .load("return function(f, s) return pcall(struct.unpack, f, s) end")
            .eval()
            .unwrap();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..20_000 {
            let mut input = Vec::new();
            for _ in 0..(round % 40) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                input.push((x >> 24) as u8);
            }
            let s = lua.create_string(&input).unwrap();
            let (_ok, _v): (bool, mlua::Value) = call.call(&s).unwrap();
            let fmt = lua.create_string(&input[..input.len() / 2]).unwrap();
            let (_ok, _v): (bool, mlua::Value) = unpack_struct.call((fmt, s)).unwrap();
        }
    }

    /// Deep nesting is bounded by the depth limit and Lua's C stack slots, as in Redis, even
    /// with the limit raised, and needs no deep Rust recursion in decode.
    #[test]
    fn deep_nesting_is_bounded() {
        let lua = state();
        let r: String = lua
            .load(
                "cjson.decode_max_depth(1000000) \
                 local ok, e = pcall(cjson.decode, string.rep('[', 100000)) return e",
            )
            .eval()
            .unwrap();
        assert_eq!(
            r,
            "Found too many nested data structures (7999) at character 7999"
        );
        let r: String = lua
            .load("local ok, e = pcall(cjson.decode, string.rep('{\"a\":', 100000)) return e")
            .eval()
            .unwrap();
        assert_eq!(
            r,
            "Found too many nested data structures (4000) at character 19996"
        );
    }

    /// Encoding deep tables stops at 1000 levels even with the limit raised, within a 2 MiB
    /// thread stack (tokio's default for workers).
    #[test]
    fn deep_encode_is_bounded() {
        let r = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                let lua = state();
                lua.load(
                    "cjson.encode_max_depth(1000000) \
                     local t = {} local c = t for i=1,10000 do c[1] = {} c = c[1] end \
                     local ok, e = pcall(cjson.encode, t) \
                     local t2 = {} c = t2 for i=1,10000 do c.a = {} c = c.a end \
                     local ok2, e2 = pcall(cjson.encode, t2) return e .. '|' .. e2",
                )
                .eval::<String>()
                .unwrap()
            })
            .unwrap()
            .join()
            .unwrap();
        // redis-server 7.0.15 stops at 7998 and 4000 levels (Lua's C stack); we stop at 1000
        // whatever the setting (an intended difference: the encoder recurses).
        assert_eq!(
            r,
            "Cannot serialise, excessive nesting (1001)|Cannot serialise, excessive nesting (1001)"
        );
    }

    /// Deeply nested msgpack stops where Redis does (its Lua stack's limit, about 4000 levels)
    /// within a 1 MiB thread stack, half of tokio's default for workers.
    #[test]
    fn deep_msgpack_is_bounded() {
        let r = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(|| {
                let lua = state();
                lua.load(
                    "local ok, e = pcall(cmsgpack.unpack, string.rep('\\145', 100000)) \
                     local ok2, e2 = pcall(cmsgpack.unpack, string.rep('\\129\\1', 100000)) \
                     return e .. '|' .. e2",
                )
                .eval::<String>()
                .unwrap()
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(
            r,
            "stack overflow (in function mp_decode_to_lua_array)|stack overflow (too many return \
             values at once; use unpack_one or unpack_limit instead.)"
        );
    }

    /// After an error the function still works (its coroutine is replaced), and `pcall` gets
    /// the message as a string.
    #[test]
    fn functions_survive_their_errors() {
        let lua = state();
        let r: String = lua
            .load(
                "local ok, e = pcall(cjson.decode, 'x') \
                 return type(e) .. ':' .. e .. ':' .. cjson.encode(cjson.decode('[1]')) \
                   .. ':' .. bit.tohex(bit.band(0xff, 0x0f))",
            )
            .eval()
            .unwrap();
        assert_eq!(
            r,
            "string:Expected value but found invalid token at character 1:[1]:0000000f"
        );
    }
}
