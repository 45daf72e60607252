//! `bit`: LuaBitOp 1.0.2 as Redis ships it. Operands are normalised as LuaBitOp does with
//! doubles: the low 32 bits of `x + 2^52 + 2^51` (round to nearest even, modulo 2^32);
//! results are signed 32-bit numbers.

use mlua::{Lua, Table, Value};

use crate::args::Args;
use crate::shim::{Ret, Shim};

/// LuaBitOp's `barg`: a number (or numeric string) to its 32 bits; anything else is a
/// "number expected" error.
fn barg(lua: &Lua, args: &Args, i: usize, fname: &str) -> mlua::Result<Result<u32, String>> {
    let Some(d) = args.number(lua, i)? else {
        return Ok(Err(args.type_error(i, fname, "number")?));
    };
    Ok(Ok(tobit(d)))
}

/// The normalisation: adding 2^52+2^51 puts the integer part, rounded to nearest even,
/// in the low bits of the double's mantissa.
pub fn tobit(d: f64) -> u32 {
    (d + 6_755_399_441_055_744.0).to_bits() as u32
}

fn ret(b: u32) -> Ret {
    Ret::One(Value::Number(f64::from(b as i32)))
}

macro_rules! try_arg {
    ($e:expr) => {
        match $e? {
            Ok(v) => v,
            Err(m) => return Ok(Ret::Err(m)),
        }
    };
}

fn unary(
    shim: &Shim,
    lua: &Lua,
    t: &Table,
    name: &'static str,
    op: fn(u32) -> u32,
) -> mlua::Result<()> {
    shim.set(lua, t, name, move |lua, args| {
        Ok(ret(op(try_arg!(barg(lua, args, 1, name)))))
    })
}

fn fold(
    shim: &Shim,
    lua: &Lua,
    t: &Table,
    name: &'static str,
    op: fn(u32, u32) -> u32,
) -> mlua::Result<()> {
    shim.set(lua, t, name, move |lua, args| {
        let mut b = try_arg!(barg(lua, args, 1, name));
        // LuaBitOp reads the operands from the last one down.
        for i in (2..=args.len()).rev() {
            b = op(b, try_arg!(barg(lua, args, i, name)));
        }
        Ok(ret(b))
    })
}

fn shift(
    shim: &Shim,
    lua: &Lua,
    t: &Table,
    name: &'static str,
    op: fn(u32, u32) -> u32,
) -> mlua::Result<()> {
    shim.set(lua, t, name, move |lua, args| {
        let b = try_arg!(barg(lua, args, 1, name));
        let n = try_arg!(barg(lua, args, 2, name)) & 31;
        Ok(ret(op(b, n)))
    })
}

fn tohex(lua: &Lua, args: &Args) -> mlua::Result<Ret> {
    let mut b = try_arg!(barg(lua, args, 1, "tohex"));
    let n = if args.is_none(2) {
        8
    } else {
        try_arg!(barg(lua, args, 2, "tohex")) as i32
    };
    let digits: &[u8; 16] = if n < 0 {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let width = n.unsigned_abs().min(8) as usize;
    let mut buf = vec![0u8; width];
    for slot in buf.iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    Ok(Ret::One(Value::String(lua.create_string(&buf)?)))
}

/// The `bit` table.
pub fn module(lua: &Lua, shim: &Shim) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    unary(shim, lua, &t, "tobit", |b| b)?;
    unary(shim, lua, &t, "bnot", |b| !b)?;
    fold(shim, lua, &t, "band", |a, b| a & b)?;
    fold(shim, lua, &t, "bor", |a, b| a | b)?;
    fold(shim, lua, &t, "bxor", |a, b| a ^ b)?;
    shift(shim, lua, &t, "lshift", |b, n| b << n)?;
    shift(shim, lua, &t, "rshift", |b, n| b >> n)?;
    shift(shim, lua, &t, "arshift", |b, n| ((b as i32) >> n) as u32)?;
    shift(shim, lua, &t, "rol", u32::rotate_left)?;
    shift(shim, lua, &t, "ror", u32::rotate_right)?;
    unary(shim, lua, &t, "bswap", u32::swap_bytes)?;
    shim.set(lua, &t, "tohex", tohex)?;
    Ok(t)
}
