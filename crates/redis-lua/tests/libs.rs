#![forbid(unsafe_code)]
//! The libraries against what redis-server 7.0.15 answered for the same scripts.
//!
//! `tests/cases/<lib>.txt` holds pairs of lines: `S <script>` and `E <expected>` (the script's
//! reply as redis-cli prints it, or `ERR <message>` without Redis's ` script: ...` suffix),
//! recorded from redis-server 7.0.15 by running the scripts in order after `SCRIPT FLUSH`
//! (the libraries' settings, e.g. `cjson.encode_number_precision`, carry over as in Redis).
//! tests/python/test_redis_lua_libs.py re-checks the same files against a live redis-server.

use manifold_redis_lua::install_libs;
use mlua::{Lua, LuaOptions, StdLib, Value};

fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            match b[i + 1] {
                b'\\' => out.push(b'\\'),
                b'n' => out.push(b'\n'),
                b'x' => {
                    let h = std::str::from_utf8(&b[i + 2..i + 4]).unwrap();
                    out.push(u8::from_str_radix(h, 16).unwrap());
                    i += 2;
                }
                c => panic!("bad escape {c}"),
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// What redis-cli prints for the script's reply (Lua numbers become integers).
fn run(lua: &Lua, script: &[u8]) -> Vec<u8> {
    let r: mlua::Result<Value> = lua.load(script).set_name("@user_script").eval();
    match r {
        Ok(Value::String(s)) => s.as_bytes().to_vec(),
        Ok(Value::Integer(i)) => i.to_string().into_bytes(),
        Ok(Value::Number(d)) => (d as i64).to_string().into_bytes(),
        Ok(Value::Boolean(true)) => b"1".to_vec(),
        Ok(Value::Nil | Value::Boolean(false)) => Vec::new(),
        Ok(other) => format!("<{}>", other.type_name()).into_bytes(),
        Err(mlua::Error::RuntimeError(m)) => {
            let m = m.split("\nstack traceback:").next().unwrap_or_default();
            format!("ERR {m}").into_bytes()
        }
        Err(e) => format!("ERR <{e}>").into_bytes(),
    }
}

fn check_file(text: &str) {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::default(),
    )
    .unwrap();
    install_libs(&lua).unwrap();
    let mut lines = text.lines();
    let mut failures = Vec::new();
    while let Some(s) = lines.next() {
        let e = lines.next().expect("an E line after each S line");
        let script = unescape(s.strip_prefix("S ").expect("S line"));
        let want = unescape(e.strip_prefix("E ").expect("E line"));
        let got = run(&lua, &script);
        if got != want {
            failures.push(format!(
                "{}\n   want {:?}\n    got {:?}",
                String::from_utf8_lossy(&script),
                String::from_utf8_lossy(&want),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn bit_matches_redis() {
    check_file(include_str!("cases/bit.txt"));
}

#[test]
fn cjson_matches_redis() {
    check_file(include_str!("cases/cjson.txt"));
}

#[test]
fn cmsgpack_matches_redis() {
    check_file(include_str!("cases/cmsgpack.txt"));
}

#[test]
fn struct_matches_redis() {
    check_file(include_str!("cases/struct.txt"));
}

/// Random numbers (fixed seed) through cjson and cmsgpack, both ways.
#[test]
fn numbers_match_redis() {
    check_file(include_str!("cases/numbers.txt"));
}

/// A table shared at every level (eight times itself, forty levels deep) is walked by the
/// encoders only up to their most entries (or longest text), then fails as Lua does without
/// memory: neither Rust memory nor the walk's time grows without bound (the hook that stops
/// scripts does not reach inside a library call).
#[test]
fn encoders_stop_at_their_longest_text() {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::default(),
    )
    .unwrap();
    install_libs(&lua).unwrap();
    for (lib, wide) in [("cjson.encode", 40), ("cmsgpack.pack", 15)] {
        // cmsgpack stops at 16 levels: a wider table makes it exponential all the same.
        let script = format!(
            "local t = {{}} for i = 1, {wide} do local n = {{}} for j = 1, 8 do n[j] = t end t = n end \
             return {lib}(t)"
        );
        let got = run(&lua, script.as_bytes());
        let got = String::from_utf8_lossy(&got);
        assert!(got.contains("not enough memory"), "{lib}: {got}");
    }
}
