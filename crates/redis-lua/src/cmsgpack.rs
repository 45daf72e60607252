//! `cmsgpack`: lua-cmsgpack 0.4.0 as Redis ships it: `pack` (several values concatenated),
//! `unpack`, `unpack_one`, `unpack_limit`, with its encoding choices (integers when a number
//! is one, float32 when lossless, arrays for tables keyed 1..n, nesting past 16 as nil) and its
//! texts; decoding counts the Lua stack slots the C code would use, so it stops where Redis
//! does ("stack overflow (...)").

// Exact float comparisons are the point: they decide what is lossless, as the C code does.
#![allow(clippy::float_cmp)]

use mlua::{Lua, Table, Value};

use crate::args::{arg_error, c_i32, c_i64, exact_entry, number_value, Args};
use crate::cjson::MAX_C_STACK;
use crate::shim::{Ret, Shim, Walker};

const MAX_NESTING: u32 = 16;

macro_rules! try_arg {
    ($e:expr) => {
        match $e? {
            Ok(v) => v,
            Err(m) => return Ok(Ret::Err(m)),
        }
    };
}

/// The `cmsgpack` table.
pub fn module(lua: &Lua, shim: &Shim) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let walker = shim.walker();
    shim.set(lua, &t, "pack", move |lua, args| pack(lua, args, &walker))?;
    shim.set(lua, &t, "unpack", |lua, args| {
        let s = try_arg!(args.check_bytes(lua, 1, "unpack"));
        unpack(lua, &s, 0, 0, args.len() as i64)
    })?;
    shim.set(lua, &t, "unpack_one", |lua, args| {
        let offset = try_arg!(opt_integer(lua, args, 2, "unpack_one"));
        let s = try_arg!(args.check_bytes(lua, 1, "unpack_one"));
        unpack(lua, &s, 1, offset, 1)
    })?;
    shim.set(lua, &t, "unpack_limit", |lua, args| {
        let limit = try_arg!(args.check_integer(lua, 2, "unpack_limit"));
        let offset = try_arg!(opt_integer(lua, args, 3, "unpack_limit"));
        let s = try_arg!(args.check_bytes(lua, 1, "unpack_limit"));
        unpack(lua, &s, limit, offset, 1)
    })?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

/// `luaL_optinteger`.
fn opt_integer(lua: &Lua, args: &Args, i: usize, name: &str) -> mlua::Result<Result<i64, String>> {
    if matches!(args.get(i)?, Value::Nil) {
        return Ok(Ok(0));
    }
    args.check_integer(lua, i, name)
}

fn pack(lua: &Lua, args: &Args, walker: &Walker) -> mlua::Result<Ret> {
    if args.len() == 0 {
        return Ok(Ret::err(arg_error(
            0,
            "pack",
            "MessagePack pack needs input.",
        )));
    }
    walker.start();
    let mut out = Vec::new();
    for i in 1..=args.len() {
        encode(&mut out, &args.get(i)?, 0, walker)?;
    }
    Ok(Ret::One(Value::String(lua.create_string(&out)?)))
}

fn encode(out: &mut Vec<u8>, v: &Value, level: u32, walker: &Walker) -> mlua::Result<()> {
    if out.len() > crate::MAX_ENCODED {
        return Err(mlua::Error::RuntimeError(crate::TOO_LONG.to_string()));
    }
    match v {
        Value::String(s) => encode_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(_) | Value::Number(_) => {
            let d = number_value(v).unwrap_or(0.0);
            if !d.is_infinite() && c_i64(d) as f64 == d {
                encode_int(out, c_i64(d));
            } else {
                encode_double(out, d);
            }
        }
        Value::Table(t) if level < MAX_NESTING => encode_table(out, t, level, walker)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_double(out: &mut Vec<u8>, d: f64) {
    let f = d as f32;
    if f64::from(f) == d {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_len(out: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 65535 {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_table(out: &mut Vec<u8>, t: &Table, level: u32, walker: &Walker) -> mlua::Result<()> {
    // `table_is_an_array`: only positive `int` keys, as many as the largest.
    let mut count: i32 = 0;
    let mut max: i32 = 0;
    let mut is_array = true;
    let mut key = Value::Nil;
    while let Some((k, _)) = walker.next(t, &key)? {
        let n = match &k {
            Value::Integer(_) | Value::Number(_) => number_value(&k),
            _ => None,
        };
        match n {
            Some(n) if n > 0.0 && f64::from(c_i32(n)) == n => {
                if n > f64::from(max) {
                    max = c_i32(n);
                }
                count = count.wrapping_add(1);
            }
            _ => {
                is_array = false;
                break;
            }
        }
        key = k;
    }
    if is_array && max == count {
        let len = count as usize;
        encode_len(out, len, 0x90, 0xdc, 0xdd);
        for i in 1..=len {
            encode(out, &exact_entry(t, i)?, level + 1, walker)?;
        }
        return Ok(());
    }
    let mut len = 0usize;
    let mut key = Value::Nil;
    while let Some((k, _)) = walker.next(t, &key)? {
        len += 1;
        key = k;
    }
    encode_len(out, len, 0x80, 0xde, 0xdf);
    let mut key = Value::Nil;
    while let Some((k, v)) = walker.next(t, &key)? {
        encode(out, &k, level + 1, walker)?;
        encode(out, &v, level + 1, walker)?;
        key = k;
    }
    Ok(())
}

enum Fail {
    Eof,
    BadFormat,
    /// A Lua error raised while decoding (`luaL_checkstack`, `lua_settable`).
    Lua(String),
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    /// Lua stack slots the C decoder's frame would hold.
    slots: i64,
}

impl Cursor<'_> {
    fn need(&self, n: usize) -> Result<(), Fail> {
        if self.data.len() - self.pos < n {
            Err(Fail::Eof)
        } else {
            Ok(())
        }
    }

    fn be(&self, from: usize, n: usize) -> u64 {
        self.data[from..from + n]
            .iter()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b))
    }

    fn check_stack(&self, what: &str) -> Result<(), Fail> {
        if self.slots + 1 > MAX_C_STACK {
            return Err(Fail::Lua(format!("stack overflow ({what})")));
        }
        Ok(())
    }
}

const TOO_MANY: &str = "too many return values at once; use unpack_one or unpack_limit instead.";

/// `mp_decode_to_lua_type`: one value (its slot counted in `c.slots` by the caller).
fn decode(lua: &Lua, c: &mut Cursor) -> mlua::Result<Result<Value, Fail>> {
    if let Err(f) = c.need(1) {
        return Ok(Err(f));
    }
    if let Err(f) = c.check_stack(TOO_MANY) {
        return Ok(Err(f));
    }
    let p = c.pos;
    let b = c.data[p];
    let fixed = |c: &mut Cursor, n: usize| -> Result<u64, Fail> {
        c.need(n + 1)?;
        let v = c.be(p + 1, n);
        c.pos += n + 1;
        Ok(v)
    };
    macro_rules! ok {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(f) => return Ok(Err(f)),
            }
        };
    }
    let num = |d: f64| Value::Number(d);
    let v = match b {
        0xcc => num(ok!(fixed(c, 1)) as f64),
        0xd0 => num(f64::from(ok!(fixed(c, 1)) as u8 as i8)),
        0xcd => num(ok!(fixed(c, 2)) as f64),
        0xd1 => num(f64::from(ok!(fixed(c, 2)) as u16 as i16)),
        0xce => num(ok!(fixed(c, 4)) as f64),
        0xd2 => num(f64::from(ok!(fixed(c, 4)) as u32 as i32)),
        0xcf | 0xd3 => num(ok!(fixed(c, 8)) as i64 as f64),
        0xc0 => {
            c.pos += 1;
            Value::Nil
        }
        0xc3 | 0xc2 => {
            c.pos += 1;
            Value::Boolean(b == 0xc3)
        }
        0xca => num(f64::from(f32::from_bits(ok!(fixed(c, 4)) as u32))),
        0xcb => num(f64::from_bits(ok!(fixed(c, 8)))),
        0xd9..=0xdb => {
            let n = match b {
                0xd9 => 1,
                0xda => 2,
                _ => 4,
            };
            ok!(c.need(1 + n));
            let len = c.be(p + 1, n) as usize;
            ok!(c.need(1 + n + len));
            let start = p + 1 + n;
            c.pos = start + len;
            Value::String(lua.create_string(&c.data[start..start + len])?)
        }
        0xdc..=0xdf => {
            let n = if b == 0xdc || b == 0xde { 2 } else { 4 };
            let len = ok!(fixed(c, n)) as usize;
            if b <= 0xdd {
                return decode_array(lua, c, len);
            }
            return decode_map(lua, c, len);
        }
        _ if b & 0x80 == 0 => {
            c.pos += 1;
            num(f64::from(b))
        }
        _ if b & 0xe0 == 0xe0 => {
            c.pos += 1;
            num(f64::from(b as i8))
        }
        _ if b & 0xe0 == 0xa0 => {
            let len = usize::from(b & 0x1f);
            ok!(c.need(1 + len));
            c.pos += 1 + len;
            Value::String(lua.create_string(&c.data[p + 1..p + 1 + len])?)
        }
        _ if b & 0xf0 == 0x90 => {
            c.pos += 1;
            return decode_array(lua, c, usize::from(b & 0xf));
        }
        _ if b & 0xf0 == 0x80 => {
            c.pos += 1;
            return decode_map(lua, c, usize::from(b & 0xf));
        }
        _ => return Ok(Err(Fail::BadFormat)),
    };
    Ok(Ok(v))
}

fn decode_array(lua: &Lua, c: &mut Cursor, len: usize) -> mlua::Result<Result<Value, Fail>> {
    let t = lua.create_table()?;
    c.slots += 1; // the table
    if let Err(f) = c.check_stack("in function mp_decode_to_lua_array") {
        return Ok(Err(f));
    }
    for index in 1..=len {
        c.slots += 1; // the index
        let v = match decode(lua, c)? {
            Ok(v) => v,
            Err(f) => return Ok(Err(f)),
        };
        c.slots -= 1;
        t.raw_set(index, v)?;
    }
    c.slots -= 1;
    Ok(Ok(Value::Table(t)))
}

fn decode_map(lua: &Lua, c: &mut Cursor, len: usize) -> mlua::Result<Result<Value, Fail>> {
    let t = lua.create_table()?;
    c.slots += 1; // the table
    for _ in 0..len {
        let k = match decode(lua, c)? {
            Ok(v) => v,
            Err(f) => return Ok(Err(f)),
        };
        c.slots += 1; // the key
        let v = match decode(lua, c)? {
            Ok(v) => v,
            Err(f) => return Ok(Err(f)),
        };
        c.slots -= 1;
        match &k {
            Value::Nil => return Ok(Err(Fail::Lua("table index is nil".into()))),
            Value::Number(d) if d.is_nan() => {
                return Ok(Err(Fail::Lua("table index is NaN".into())))
            }
            _ => t.raw_set(k, v)?,
        }
    }
    c.slots -= 1;
    Ok(Ok(Value::Table(t)))
}

/// `mp_unpack_full`; `top` is the C function's stack height (its arguments).
fn unpack(lua: &Lua, s: &[u8], limit: i64, offset: i64, top: i64) -> mlua::Result<Ret> {
    let len = s.len();
    if offset < 0 || limit < 0 {
        return Ok(Ret::err(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    }
    if offset as u64 > len as u64 {
        return Ok(Ret::err(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let results = lua.create_table()?;
    let mut c = Cursor {
        data: s,
        pos: offset as usize,
        slots: top,
    };
    let mut cnt: i64 = 0;
    let first = usize::from(!decode_all);
    while c.pos < len && cnt < limit {
        match decode(lua, &mut c)? {
            Ok(v) => results.raw_set(first + cnt as usize + 1, v)?,
            Err(Fail::Eof) => return Ok(Ret::err("Missing bytes in input.")),
            Err(Fail::BadFormat) => return Ok(Ret::err("Bad data format in input.")),
            Err(Fail::Lua(m)) => return Ok(Ret::Err(m)),
        }
        c.slots += 1;
        cnt += 1;
    }
    if !decode_all {
        if c.slots + 1 > MAX_C_STACK {
            return Ok(Ret::err("stack overflow (in function mp_unpack_full)"));
        }
        let next = if c.pos == len { -1.0 } else { c.pos as f64 };
        results.raw_set(1, next)?;
        cnt += 1;
    }
    Ok(Ret::Many(results, cnt as usize))
}
