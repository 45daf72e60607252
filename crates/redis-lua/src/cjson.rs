//! `cjson`: Lua CJSON 2.1.0 as Redis ships it (encode, decode, the configuration functions,
//! `cjson.null`, `cjson.new`), texts and limits included.

mod decode;

use std::sync::{Arc, Mutex};

use mlua::{LightUserData, Lua, Table, Value};

use crate::args::{arg_error, c_i32, exact_entry, type_name, Args};
use crate::numfmt::fmt_g;
use crate::shim::{Ret, Shim, Walker};

/// Lua 5.1's `LUAI_MAXCSTACK`: the stack slots a C function may use; cjson's depth checks
/// (`lua_checkstack`) fail past it, and so do ours, counting the slots the C code would use.
pub const MAX_C_STACK: i64 = 8000;

/// The deepest table `encode` enters whatever `encode_max_depth` says (Redis's default):
/// the encoder recurses, and deeper tables would need more than a 2 MiB thread stack.
const ENCODE_DEPTH_CAP: i32 = 1000;

/// The settings one `cjson` table shares between its functions.
#[derive(Clone, Copy)]
pub struct Config {
    pub sparse_convert: bool,
    pub sparse_ratio: i32,
    pub sparse_safe: i32,
    pub encode_max_depth: i32,
    pub decode_max_depth: i32,
    /// 0 off, 1 on, 2 "null".
    pub encode_invalid_numbers: i32,
    pub decode_invalid_numbers: bool,
    pub encode_keep_buffer: bool,
    pub precision: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
            encode_keep_buffer: true,
            precision: 14,
        }
    }
}

/// `cjson`'s settings, shared by the `cjson` tables made with the same (Redis has one Lua
/// state: a setting a script makes holds for every later script, until `SCRIPT FLUSH`).
#[derive(Clone, Default)]
pub struct Settings(Arc<Mutex<Config>>);

impl Settings {
    fn lock(&self) -> std::sync::MutexGuard<'_, Config> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn get(&self) -> Config {
        *self.lock()
    }

    pub fn set(&self, config: Config) {
        *self.lock() = config;
    }

    /// Back to the defaults (`SCRIPT FLUSH`).
    pub fn reset(&self) {
        self.set(Config::default());
    }
}

type Cfg = Settings;

/// The `cjson` table, its settings `cfg`'s.
pub fn module(lua: &Lua, shim: &Shim, cfg: &Settings) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg: Cfg = cfg.clone();
    let c = cfg.clone();
    let walker = shim.walker();
    shim.set(lua, &t, "encode", move |lua, args| {
        encode(lua, args, c.get(), &walker)
    })?;
    let c = cfg.clone();
    shim.set(lua, &t, "decode", move |lua, args| {
        if args.len() != 1 {
            return Ok(Ret::err(arg_error(1, "decode", "expected 1 argument")));
        }
        let text = match args.check_bytes(lua, 1, "decode")? {
            Ok(b) => b,
            Err(m) => return Ok(Ret::Err(m)),
        };
        Ok(match decode::decode(lua, &text, &c.get())? {
            Ok(v) => Ret::One(v),
            Err(m) => Ret::Err(m),
        })
    })?;
    let c = cfg.clone();
    shim.set(lua, &t, "encode_sparse_array", move |lua, args| {
        let name = "encode_sparse_array";
        if let Some(e) = too_many(args, 3, name) {
            return Ok(e);
        }
        let mut conf = c.get();
        let mut convert = i32::from(conf.sparse_convert);
        let r1 = enum_option(lua, args, 1, name, &mut convert, &["off", "on"])?;
        let r1 = match r1 {
            Ok(v) => v,
            Err(m) => return Ok(Ret::Err(m)),
        };
        conf.sparse_convert = convert != 0;
        c.set(conf);
        let r2 = match int_option(lua, args, 2, name, &mut conf.sparse_ratio, 0, i32::MAX)? {
            Ok(v) => v,
            Err(m) => return Ok(Ret::Err(m)),
        };
        c.set(conf);
        let r3 = match int_option(lua, args, 3, name, &mut conf.sparse_safe, 0, i32::MAX)? {
            Ok(v) => v,
            Err(m) => return Ok(Ret::Err(m)),
        };
        c.set(conf);
        let out = lua.create_table()?;
        out.raw_set(1, r1)?;
        out.raw_set(2, r2)?;
        out.raw_set(3, r3)?;
        Ok(Ret::Many(out, 3))
    })?;
    int_setting(shim, lua, &t, &cfg, "encode_max_depth", 1, i32::MAX, |c| {
        &mut c.encode_max_depth
    })?;
    int_setting(shim, lua, &t, &cfg, "decode_max_depth", 1, i32::MAX, |c| {
        &mut c.decode_max_depth
    })?;
    int_setting(shim, lua, &t, &cfg, "encode_number_precision", 1, 14, |c| {
        &mut c.precision
    })?;
    let c = cfg.clone();
    shim.set(lua, &t, "encode_keep_buffer", move |lua, args| {
        let name = "encode_keep_buffer";
        let mut conf = c.get();
        let mut v = i32::from(conf.encode_keep_buffer);
        let r = bool_setting(lua, args, name, &mut v, &["off", "on"])?;
        conf.encode_keep_buffer = v != 0;
        c.set(conf);
        Ok(r)
    })?;
    let c = cfg.clone();
    shim.set(lua, &t, "encode_invalid_numbers", move |lua, args| {
        let name = "encode_invalid_numbers";
        let mut conf = c.get();
        let mut v = conf.encode_invalid_numbers;
        let r = bool_setting(lua, args, name, &mut v, &["off", "on", "null"])?;
        conf.encode_invalid_numbers = v;
        c.set(conf);
        Ok(r)
    })?;
    let c = cfg.clone();
    shim.set(lua, &t, "decode_invalid_numbers", move |lua, args| {
        let name = "decode_invalid_numbers";
        let mut conf = c.get();
        let mut v = i32::from(conf.decode_invalid_numbers);
        let r = bool_setting(lua, args, name, &mut v, &["off", "on"])?;
        conf.decode_invalid_numbers = v != 0;
        c.set(conf);
        Ok(r)
    })?;
    let shim_new = shim.clone();
    // `cjson.new()`: a table with settings of its own.
    shim.set(lua, &t, "new", move |lua, _args| {
        Ok(Ret::One(Value::Table(module(
            lua,
            &shim_new,
            &Settings::default(),
        )?)))
    })?;
    t.raw_set(
        "null",
        Value::LightUserData(LightUserData(std::ptr::null_mut())),
    )?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// `json_arg_init`'s check.
fn too_many(args: &Args, max: usize, name: &str) -> Option<Ret> {
    (args.len() > max).then(|| Ret::err(arg_error(max + 1, name, "found too many arguments")))
}

fn bool_setting(
    lua: &Lua,
    args: &Args,
    name: &str,
    v: &mut i32,
    options: &[&str],
) -> mlua::Result<Ret> {
    if let Some(e) = too_many(args, 1, name) {
        return Ok(e);
    }
    Ok(match enum_option(lua, args, 1, name, v, options)? {
        Ok(r) => Ret::One(r),
        Err(m) => Ret::Err(m),
    })
}

#[allow(clippy::too_many_arguments)]
fn int_setting(
    shim: &Shim,
    lua: &Lua,
    t: &Table,
    cfg: &Cfg,
    name: &'static str,
    min: i32,
    max: i32,
    field: fn(&mut Config) -> &mut i32,
) -> mlua::Result<()> {
    let c = cfg.clone();
    shim.set(lua, t, name, move |lua, args| {
        if let Some(e) = too_many(args, 1, name) {
            return Ok(e);
        }
        let mut conf = c.get();
        let r = int_option(lua, args, 1, name, field(&mut conf), min, max)?;
        c.set(conf);
        Ok(match r {
            Ok(v) => Ret::One(v),
            Err(m) => Ret::Err(m),
        })
    })
}

/// `json_integer_option`.
fn int_option(
    lua: &Lua,
    args: &Args,
    i: usize,
    name: &str,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> mlua::Result<Result<Value, String>> {
    if !matches!(args.get(i)?, Value::Nil) {
        let value = match args.check_integer(lua, i, name)? {
            Ok(v) => v as i32,
            Err(m) => return Ok(Err(m)),
        };
        if value < min || value > max {
            let msg = format!("expected integer between {min} and {max}");
            return Ok(Err(arg_error(1, name, &msg)));
        }
        *setting = value;
    }
    Ok(Ok(Value::Number(f64::from(*setting))))
}

/// `json_enum_option` with `bool_true` 1.
fn enum_option(
    lua: &Lua,
    args: &Args,
    i: usize,
    name: &str,
    setting: &mut i32,
    options: &[&str],
) -> mlua::Result<Result<Value, String>> {
    match args.get(i)? {
        Value::Nil => {}
        Value::Boolean(b) => *setting = i32::from(b),
        _ => {
            let text = match args.check_bytes(lua, i, name)? {
                Ok(b) => b,
                Err(m) => return Ok(Err(m)),
            };
            let Some(p) = options.iter().position(|o| o.as_bytes() == text.as_slice()) else {
                let msg = format!("invalid option '{}'", String::from_utf8_lossy(&text));
                return Ok(Err(arg_error(i, name, &msg)));
            };
            *setting = p as i32;
        }
    }
    Ok(Ok(if *setting == 0 || *setting == 1 {
        Value::Boolean(*setting == 1)
    } else {
        Value::String(lua.create_string(options[*setting as usize])?)
    }))
}

fn encode(lua: &Lua, args: &Args, cfg: Config, walker: &Walker) -> mlua::Result<Ret> {
    if args.len() != 1 {
        return Ok(Ret::err(arg_error(1, "encode", "expected 1 argument")));
    }
    walker.start();
    let mut out = Vec::new();
    let mut enc = Encoder {
        cfg,
        walker,
        out: &mut out,
    };
    Ok(match enc.value(&args.get(1)?, 0, 1)? {
        Ok(()) => Ret::One(Value::String(lua.create_string(&out)?)),
        Err(m) => Ret::Err(m),
    })
}

struct Encoder<'a> {
    cfg: Config,
    walker: &'a Walker,
    out: &'a mut Vec<u8>,
}

fn exception(v: &Value, reason: &str) -> String {
    format!("Cannot serialise {}: {reason}", type_name(v))
}

impl Encoder<'_> {
    /// `json_append_data`: `slots` counts the Lua stack slots the C encoder would hold.
    fn value(&mut self, v: &Value, depth: i32, slots: i64) -> mlua::Result<Result<(), String>> {
        if self.out.len() > crate::MAX_ENCODED {
            return Ok(Err(crate::TOO_LONG.to_string()));
        }
        match v {
            Value::String(s) => self.string(&s.as_bytes()),
            Value::Integer(_) | Value::Number(_) => {
                let d = crate::args::number_value(v).unwrap_or(0.0);
                return Ok(self.number(v, d));
            }
            Value::Boolean(true) => self.out.extend_from_slice(b"true"),
            Value::Boolean(false) => self.out.extend_from_slice(b"false"),
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            Value::Table(t) => return self.table(t, depth + 1, slots),
            other => return Ok(Err(exception(other, "type not supported"))),
        }
        Ok(Ok(()))
    }

    #[inline(never)]
    fn string(&mut self, s: &[u8]) {
        self.out.push(b'"');
        for &c in s {
            match c {
                b'"' => self.out.extend_from_slice(b"\\\""),
                b'\\' => self.out.extend_from_slice(b"\\\\"),
                b'/' => self.out.extend_from_slice(b"\\/"),
                b'\n' => self.out.extend_from_slice(b"\\n"),
                b'\t' => self.out.extend_from_slice(b"\\t"),
                b'\r' => self.out.extend_from_slice(b"\\r"),
                0x08 => self.out.extend_from_slice(b"\\b"),
                0x0c => self.out.extend_from_slice(b"\\f"),
                0..=0x1f | 0x7f => {
                    self.out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
                }
                _ => self.out.push(c),
            }
        }
        self.out.push(b'"');
    }

    /// `json_append_number`.
    #[inline(never)]
    fn number(&mut self, v: &Value, d: f64) -> Result<(), String> {
        match self.cfg.encode_invalid_numbers {
            0 if !d.is_finite() => return Err(exception(v, "must not be NaN or Inf")),
            1 if d.is_nan() => {
                self.out.extend_from_slice(b"nan");
                return Ok(());
            }
            2 if !d.is_finite() => {
                self.out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {}
        }
        self.out
            .extend_from_slice(fmt_g(d, self.cfg.precision as usize).as_bytes());
        Ok(())
    }

    fn table(&mut self, t: &Table, depth: i32, slots: i64) -> mlua::Result<Result<(), String>> {
        if depth > self.cfg.encode_max_depth.min(ENCODE_DEPTH_CAP) || slots + 3 > MAX_C_STACK {
            return Ok(Err(format!(
                "Cannot serialise, excessive nesting ({depth})"
            )));
        }
        let len = match self.array_length(t)? {
            Ok(n) => n,
            Err(m) => return Ok(Err(m)),
        };
        if len > 0 {
            self.out.push(b'[');
            for i in 1..=len as usize {
                if i > 1 {
                    self.out.push(b',');
                }
                let v = exact_entry(t, i)?;
                if let Err(m) = self.value(&v, depth, slots + 1)? {
                    return Ok(Err(m));
                }
            }
            self.out.push(b']');
            return Ok(Ok(()));
        }
        self.out.push(b'{');
        let mut key = Value::Nil;
        let mut first = true;
        while let Some((k, v)) = self.walker.next(t, &key)? {
            if !first {
                self.out.push(b',');
            }
            first = false;
            match &k {
                Value::Integer(_) | Value::Number(_) => {
                    let d = crate::args::number_value(&k).unwrap_or(0.0);
                    self.out.push(b'"');
                    if let Err(m) = self.number(&k, d) {
                        return Ok(Err(m));
                    }
                    self.out.extend_from_slice(b"\":");
                }
                Value::String(s) => {
                    self.string(&s.as_bytes());
                    self.out.push(b':');
                }
                other => {
                    return Ok(Err(exception(
                        other,
                        "table key must be a number or string",
                    )))
                }
            }
            if let Err(m) = self.value(&v, depth, slots + 2)? {
                return Ok(Err(m));
            }
            key = k;
        }
        self.out.push(b'}');
        Ok(Ok(()))
    }

    /// `lua_array_length`: the array's length, or -1 (an object).
    #[inline(never)]
    fn array_length(&mut self, t: &Table) -> mlua::Result<Result<i32, String>> {
        let mut max: i32 = 0;
        let mut items: i32 = 0;
        let mut key = Value::Nil;
        while let Some((k, _)) = self.walker.next(t, &key)? {
            let d = match k {
                Value::Integer(_) | Value::Number(_) => crate::args::number_value(&k),
                _ => None,
            };
            match d {
                Some(d) if d >= 1.0 && d.fract() == 0.0 => {
                    if d > f64::from(max) {
                        max = c_i32(d);
                    }
                    items = items.wrapping_add(1);
                }
                _ => return Ok(Ok(-1)),
            }
            key = k;
        }
        let cfg = self.cfg;
        if cfg.sparse_ratio > 0
            && max > items.wrapping_mul(cfg.sparse_ratio)
            && max > cfg.sparse_safe
        {
            if !cfg.sparse_convert {
                return Ok(Err(
                    "Cannot serialise table: excessively sparse array".into()
                ));
            }
            return Ok(Ok(-1));
        }
        Ok(Ok(max))
    }
}
