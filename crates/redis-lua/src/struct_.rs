//! `struct`: Roberto Ierusalimschy's struct library as Redis ships it (`pack`, `unpack`,
//! `size`; formats `<>!`, `b B h H l L T i[n] I[n] f d s c[n] x`, alignment), with its texts
//! and its C conversions as x86-64 performs them (`long` integers, 64 bits).

use mlua::{Lua, Table, Value};

use crate::args::{arg_error, c_i64, to_number, Args};
use crate::cjson::MAX_C_STACK;
use crate::shim::{Ret, Shim};

const MAX_INT_SIZE: i64 = 32;
const MAX_ALIGN: i64 = 8;

macro_rules! try_arg {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(m) => return Ok(Ret::Err(m)),
        }
    };
}

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: u64,
}

struct Format<'a> {
    f: &'a [u8],
    i: usize,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.f.get(self.i)?;
        self.i += 1;
        Some(c)
    }

    /// `getnum`.
    fn num(&mut self, default: i64) -> Result<i64, String> {
        if !self.f.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(&c) = self.f.get(self.i).filter(|c| c.is_ascii_digit()) {
            let d = i64::from(c - b'0');
            if a > i64::from(i32::MAX) / 10 || a * 10 > i64::from(i32::MAX) - d {
                return Err("integral size overflow".into());
            }
            a = a * 10 + d;
            self.i += 1;
        }
        Ok(a)
    }

    /// `optsize`.
    fn size(&mut self, opt: u8) -> Result<u64, String> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.num(1)? as u64,
            b'i' | b'I' => {
                let sz = self.num(4)?;
                if sz > MAX_INT_SIZE {
                    return Err(format!(
                        "integral size {sz} is larger than limit of {MAX_INT_SIZE}"
                    ));
                }
                sz as u64
            }
            _ => 0,
        })
    }

    /// `controloptions`.
    fn control(&mut self, opt: u8, h: &mut Header, fname: &str) -> Result<(), String> {
        match opt {
            b' ' => {}
            b'>' => h.endian = Endian::Big,
            b'<' => h.endian = Endian::Little,
            b'!' => {
                let a = self.num(MAX_ALIGN)?;
                if a <= 0 || a & (a - 1) != 0 {
                    return Err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a as u64;
            }
            _ => {
                let msg = format!("invalid format option '{}'", char::from(opt));
                return Err(arg_error(1, fname, &msg));
            }
        }
        Ok(())
    }
}

/// `gettoalign`.
fn to_align(len: u64, h: &Header, opt: u8, size: u64) -> u64 {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

/// The format text as C sees it (up to a NUL).
fn format_bytes(lua: &Lua, args: &Args, fname: &str) -> mlua::Result<Result<Vec<u8>, String>> {
    Ok(args.check_bytes(lua, 1, fname)?.map(|mut f| {
        if let Some(z) = f.iter().position(|&c| c == 0) {
            f.truncate(z);
        }
        f
    }))
}

/// `(uint64_t)d` as gcc compiles it for x86-64.
fn c_u64(d: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO_63 {
        (c_i64(d - TWO_63) as u64) ^ (1 << 63)
    } else {
        c_i64(d) as u64
    }
}

/// An argument error of `pack`: C's `b_pack` pushes a nil after its arguments (a mark before
/// its buffer), so the first missing argument is "nil", not "no value".
fn pack_arg_error(args: &Args, arg: usize, msg: String) -> Ret {
    if arg == args.len() + 1 {
        return Ret::Err(msg.replace("got no value)", "got nil)"));
    }
    Ret::Err(msg)
}

fn pack(lua: &Lua, args: &Args) -> mlua::Result<Ret> {
    let fname = "pack";
    let f = try_arg!(format_bytes(lua, args, fname)?);
    let mut fmt = Format { f: &f, i: 0 };
    let mut h = Header {
        endian: Endian::Little,
        align: 1,
    };
    let mut arg = 2;
    let mut total: u64 = 0;
    let mut out = Vec::new();
    while let Some(opt) = fmt.next() {
        let mut size = try_arg!(fmt.size(opt));
        let pad = to_align(total, &h, opt, size);
        total = total.wrapping_add(pad);
        out.resize(out.len() + pad as usize, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = match args.check_number(lua, arg, fname)? {
                    Ok(v) => v,
                    Err(m) => return Ok(pack_arg_error(args, arg, m)),
                };
                arg += 1;
                let mut value = if n < 0.0 { c_i64(n) as u64 } else { c_u64(n) };
                let mut buf = vec![0u8; size as usize];
                for i in 0..size as usize {
                    let at = if h.endian == Endian::Little {
                        i
                    } else {
                        size as usize - 1 - i
                    };
                    buf[at] = value as u8;
                    value >>= 8;
                }
                out.extend_from_slice(&buf);
            }
            b'x' => out.push(0),
            b'f' => {
                let n = match args.check_number(lua, arg, fname)? {
                    Ok(v) => v,
                    Err(m) => return Ok(pack_arg_error(args, arg, m)),
                } as f32;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => n.to_le_bytes(),
                    Endian::Big => n.to_be_bytes(),
                });
            }
            b'd' => {
                let n = match args.check_number(lua, arg, fname)? {
                    Ok(v) => v,
                    Err(m) => return Ok(pack_arg_error(args, arg, m)),
                };
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => n.to_le_bytes(),
                    Endian::Big => n.to_be_bytes(),
                });
            }
            b'c' | b's' => {
                let s = match args.check_bytes(lua, arg, fname)? {
                    Ok(v) => v,
                    Err(m) => return Ok(pack_arg_error(args, arg, m)),
                };
                arg += 1;
                if size == 0 {
                    size = s.len() as u64;
                }
                if (s.len() as u64) < size {
                    return Ok(Ret::err(arg_error(arg, fname, "string too short")));
                }
                out.extend_from_slice(&s[..size as usize]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => try_arg!(fmt.control(opt, &mut h, fname)),
        }
        total = total.wrapping_add(size);
    }
    Ok(Ret::One(Value::String(lua.create_string(&out)?)))
}

/// `getinteger`.
fn get_integer(b: &[u8], endian: Endian, signed: bool) -> f64 {
    let size = b.len();
    let mut l: u64 = 0;
    for i in 0..size {
        let at = if endian == Endian::Big {
            i
        } else {
            size - 1 - i
        };
        l = (l << 8) | u64::from(b[at]);
    }
    if !signed {
        return l as f64;
    }
    let mask = u64::MAX << ((size as i64 * 8 - 1) & 63);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &Args) -> mlua::Result<Ret> {
    let fname = "unpack";
    let f = try_arg!(format_bytes(lua, args, fname)?);
    let data = try_arg!(args.check_bytes(lua, 2, fname)?);
    let pos: i64 = if matches!(args.get(3)?, Value::Nil) {
        1
    } else {
        try_arg!(args.check_integer(lua, 3, fname)?)
    };
    let pos = pos as u64;
    if pos == 0 {
        return Ok(Ret::err(arg_error(3, fname, "offset must be 1 or greater")));
    }
    let mut pos = pos - 1;
    let ld = data.len() as u64;
    let mut fmt = Format { f: &f, i: 0 };
    let mut h = Header {
        endian: Endian::Little,
        align: 1,
    };
    let results = lua.create_table()?;
    let mut n: usize = 0;
    let mut last: Option<Value> = None;
    let top = args.len() as i64;
    let short = || Ret::err(arg_error(2, fname, "data string too short"));
    while let Some(opt) = fmt.next() {
        let mut size = try_arg!(fmt.size(opt));
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Ok(short());
        }
        if top + n as i64 + 2 > MAX_C_STACK {
            return Ok(Ret::err("stack overflow (too many results)"));
        }
        let at = pos as usize;
        let value = match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let b = &data[at..at + size as usize];
                Some(Value::Number(get_integer(
                    b,
                    h.endian,
                    opt.is_ascii_lowercase(),
                )))
            }
            b'x' => None,
            b'f' => {
                let b: [u8; 4] = data[at..at + 4].try_into().expect("4 bytes");
                let v = match h.endian {
                    Endian::Little => f32::from_le_bytes(b),
                    Endian::Big => f32::from_be_bytes(b),
                };
                Some(Value::Number(f64::from(v)))
            }
            b'd' => {
                let b: [u8; 8] = data[at..at + 8].try_into().expect("8 bytes");
                Some(Value::Number(match h.endian {
                    Endian::Little => f64::from_le_bytes(b),
                    Endian::Big => f64::from_be_bytes(b),
                }))
            }
            b'c' => {
                if size == 0 {
                    let prev = match last.take() {
                        Some(v) if n > 0 => to_number(lua, v)?,
                        _ => None,
                    };
                    let Some(d) = prev else {
                        return Ok(Ret::err("format 'c0' needs a previous size"));
                    };
                    size = c_u64(d);
                    n -= 1;
                    if !(size <= ld && pos <= ld - size) {
                        return Ok(short());
                    }
                }
                Some(Value::String(
                    lua.create_string(&data[at..at + size as usize])?,
                ))
            }
            b's' => {
                let Some(z) = data[at..].iter().position(|&c| c == 0) else {
                    return Ok(Ret::err("unfinished string in data"));
                };
                size = z as u64 + 1;
                Some(Value::String(lua.create_string(&data[at..at + z])?))
            }
            _ => {
                try_arg!(fmt.control(opt, &mut h, fname));
                None
            }
        };
        if let Some(v) = value {
            n += 1;
            results.raw_set(n, v.clone())?;
            last = Some(v);
        }
        pos = pos.wrapping_add(size);
    }
    n += 1;
    results.raw_set(n, Value::Number(pos.wrapping_add(1) as i64 as f64))?;
    Ok(Ret::Many(results, n))
}

fn size(lua: &Lua, args: &Args) -> mlua::Result<Ret> {
    let fname = "size";
    let f = try_arg!(format_bytes(lua, args, fname)?);
    let mut fmt = Format { f: &f, i: 0 };
    let mut h = Header {
        endian: Endian::Little,
        align: 1,
    };
    let mut pos: u64 = 0;
    while let Some(opt) = fmt.next() {
        let size = try_arg!(fmt.size(opt));
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if opt == b's' {
            return Ok(Ret::err(arg_error(
                1,
                fname,
                "option 's' has no fixed size",
            )));
        } else if opt == b'c' && size == 0 {
            return Ok(Ret::err(arg_error(
                1,
                fname,
                "option 'c0' has no fixed size",
            )));
        }
        if !opt.is_ascii_alphanumeric() {
            try_arg!(fmt.control(opt, &mut h, fname));
        }
        pos = pos.wrapping_add(size);
    }
    Ok(Ret::One(Value::Number(pos as i64 as f64)))
}

/// The `struct` table.
pub fn module(lua: &Lua, shim: &Shim) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    shim.set(lua, &t, "pack", pack)?;
    shim.set(lua, &t, "unpack", unpack)?;
    shim.set(lua, &t, "size", size)?;
    Ok(t)
}
