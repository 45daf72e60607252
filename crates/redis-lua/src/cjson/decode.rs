//! `cjson.decode`: Lua CJSON's tokenizer and parser, iterative (open containers live in one
//! Lua table, so neither Rust's stack nor mlua's references grow with the nesting), with the
//! same errors and the same depth limits (`decode_max_depth` and Lua's C stack slots).

use mlua::{LightUserData, Lua, Table, Value};

use super::{Config, MAX_C_STACK};
use crate::numfmt::strtod;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num,
    Bool,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::ObjBegin => "T_OBJ_BEGIN",
        Kind::ObjEnd => "T_OBJ_END",
        Kind::ArrBegin => "T_ARR_BEGIN",
        Kind::ArrEnd => "T_ARR_END",
        Kind::Str => "T_STRING",
        Kind::Num => "T_NUMBER",
        Kind::Bool => "T_BOOLEAN",
        Kind::Null => "T_NULL",
        Kind::Colon => "T_COLON",
        Kind::Comma => "T_COMMA",
        Kind::End => "T_END",
        Kind::Error => "T_ERROR",
    }
}

struct Token {
    kind: Kind,
    index: usize,
    num: f64,
    boolean: bool,
    text: Vec<u8>,
    error: &'static str,
}

struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    cfg: &'a Config,
}

impl Parser<'_> {
    /// The byte at `i`; the text reads as NUL-terminated, as the C parser sees it.
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn error(&self, kind_err: &'static str) -> Token {
        Token {
            kind: Kind::Error,
            index: self.pos,
            num: 0.0,
            boolean: false,
            text: Vec::new(),
            error: kind_err,
        }
    }

    fn simple(kind: Kind, index: usize) -> Token {
        Token {
            kind,
            index,
            num: 0.0,
            boolean: false,
            text: Vec::new(),
            error: "",
        }
    }

    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        } else if c <= b'9' {
            return false;
        }
        let word = |w: &[u8]| (0..3).all(|k| self.at(p + k).to_ascii_lowercase() == w[k]);
        word(b"inf") || word(b"nan")
    }

    fn number(&mut self) -> Token {
        let (v, used) = strtod(&self.data[self.pos.min(self.data.len())..]);
        if used == 0 {
            return self.error("invalid number");
        }
        let t = Token {
            kind: Kind::Num,
            index: self.pos,
            num: v,
            boolean: false,
            text: Vec::new(),
            error: "",
        };
        self.pos += used;
        t
    }

    fn next(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let c = self.at(self.pos);
        let single = match c {
            b'{' => Some(Kind::ObjBegin),
            b'}' => Some(Kind::ObjEnd),
            b'[' => Some(Kind::ArrBegin),
            b']' => Some(Kind::ArrEnd),
            b',' => Some(Kind::Comma),
            b':' => Some(Kind::Colon),
            _ => None,
        };
        if let Some(k) = single {
            self.pos += 1;
            return Self::simple(k, index);
        }
        if c == 0 {
            return Self::simple(Kind::End, index);
        }
        if !matches!(
            c,
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-' | b'0'..=b'9'
        ) {
            return self.error("invalid token");
        }
        if c == b'"' {
            return self.string();
        }
        if c == b'-' || c.is_ascii_digit() {
            if !self.cfg.decode_invalid_numbers && self.is_invalid_number() {
                return self.error("invalid number");
            }
            return self.number();
        }
        let rest = &self.data[self.pos..];
        if rest.starts_with(b"true") {
            self.pos += 4;
            let mut t = Self::simple(Kind::Bool, index);
            t.boolean = true;
            return t;
        }
        if rest.starts_with(b"false") {
            self.pos += 5;
            return Self::simple(Kind::Bool, index);
        }
        if rest.starts_with(b"null") {
            self.pos += 4;
            return Self::simple(Kind::Null, index);
        }
        if self.cfg.decode_invalid_numbers && self.is_invalid_number() {
            return self.number();
        }
        self.error("invalid token")
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0;
        for k in 0..4 {
            v = (v << 4) | (self.at(at + k) as char).to_digit(16)?;
        }
        Some(v)
    }

    /// `json_append_unicode_escape` at the backslash: the bytes and the escape's length.
    fn unicode_escape(&self, out: &mut Vec<u8>) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        if cp <= 0x7F {
            out.push(cp as u8);
        } else if cp <= 0x7FF {
            out.extend_from_slice(&[(cp >> 6) as u8 | 0xC0, (cp & 0x3F) as u8 | 0x80]);
        } else if cp <= 0xFFFF {
            out.extend_from_slice(&[
                (cp >> 12) as u8 | 0xE0,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]);
        } else {
            out.extend_from_slice(&[
                (cp >> 18) as u8 | 0xF0,
                ((cp >> 12) & 0x3F) as u8 | 0x80,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]);
        }
        // Remember the length through the position the caller advances by.
        out.push(len as u8);
        true
    }

    fn string(&mut self) -> Token {
        let index = self.pos;
        self.pos += 1;
        let mut text = Vec::new();
        loop {
            let c = self.at(self.pos);
            if c == b'"' {
                break;
            }
            if c == 0 {
                return self.error("unexpected end of string");
            }
            if c == b'\\' {
                let e = self.at(self.pos + 1);
                let mapped = match e {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 0x0c,
                    b'r' => b'\r',
                    b'u' => {
                        if self.unicode_escape(&mut text) {
                            let len = text.pop().unwrap_or(6);
                            self.pos += len as usize;
                            continue;
                        }
                        return self.error("invalid unicode escape code");
                    }
                    _ => return self.error("invalid escape code"),
                };
                text.push(mapped);
                self.pos += 2;
                continue;
            }
            text.push(c);
            self.pos += 1;
        }
        self.pos += 1;
        Token {
            kind: Kind::Str,
            index,
            num: 0.0,
            boolean: false,
            text,
            error: "",
        }
    }
}

fn parse_error(expected: &str, t: &Token) -> String {
    let found = if t.kind == Kind::Error {
        t.error
    } else {
        kind_name(t.kind)
    };
    format!(
        "Expected {expected} but found {found} at character {}",
        t.index + 1
    )
}

enum Open {
    Arr { next: usize },
    Obj { key: Vec<u8> },
}

/// Decodes `data`; `Err` is the error text.
pub fn decode(lua: &Lua, data: &[u8], cfg: &Config) -> mlua::Result<Result<Value, String>> {
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Ok(Err("JSON parser does not support UTF-16 or UTF-32".into()));
    }
    let mut p = Parser { data, pos: 0, cfg };
    // Containers being filled: `stack[i]`'s table is `tables[i + 1]`; `cur` is the top one.
    let tables = lua.create_table()?;
    let mut stack: Vec<(Open, i64)> = Vec::new();
    let mut cur: Option<Table> = None;
    // Lua stack slots the C parser would use: the argument, then per open container its
    // table (and, in an object, the pending key).
    let mut slots: i64 = 1;
    let mut tok = p.next();
    'value: loop {
        let mut v = match tok.kind {
            Kind::Str => Value::String(lua.create_string(&tok.text)?),
            Kind::Num => Value::Number(tok.num),
            Kind::Bool => Value::Boolean(tok.boolean),
            Kind::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
            Kind::ObjBegin | Kind::ArrBegin => {
                let is_obj = tok.kind == Kind::ObjBegin;
                let depth = stack.len() as i64 + 1;
                let need = if is_obj { 3 } else { 2 };
                if depth > i64::from(cfg.decode_max_depth) || slots + need > MAX_C_STACK {
                    return Ok(Err(format!(
                        "Found too many nested data structures ({depth}) at character {}",
                        p.pos
                    )));
                }
                if let Some(parent) = cur.take() {
                    tables.raw_set(stack.len(), parent)?;
                }
                let t = lua.create_table()?;
                tok = p.next();
                let end = if is_obj { Kind::ObjEnd } else { Kind::ArrEnd };
                if tok.kind == end {
                    if !stack.is_empty() {
                        cur = Some(tables.raw_get(stack.len())?);
                    }
                    Value::Table(t)
                } else {
                    cur = Some(t);
                    if is_obj {
                        if tok.kind != Kind::Str {
                            return Ok(Err(parse_error("object key string", &tok)));
                        }
                        let key = std::mem::take(&mut tok.text);
                        tok = p.next();
                        if tok.kind != Kind::Colon {
                            return Ok(Err(parse_error("colon", &tok)));
                        }
                        stack.push((Open::Obj { key }, slots));
                        slots += 2;
                        tok = p.next();
                    } else {
                        stack.push((Open::Arr { next: 1 }, slots));
                        slots += 1;
                    }
                    continue 'value;
                }
            }
            _ => return Ok(Err(parse_error("value", &tok))),
        };
        // Attach the finished value `v` to the open containers, closing those that end.
        loop {
            let Some((open, _)) = stack.last_mut() else {
                let end = p.next();
                if end.kind != Kind::End {
                    return Ok(Err(parse_error("the end", &end)));
                }
                return Ok(Ok(v));
            };
            let t = cur.as_ref().expect("open container");
            match open {
                Open::Arr { next } => {
                    t.raw_set(*next, v)?;
                    *next += 1;
                    tok = p.next();
                    if tok.kind != Kind::ArrEnd {
                        if tok.kind != Kind::Comma {
                            return Ok(Err(parse_error("comma or array end", &tok)));
                        }
                        tok = p.next();
                        continue 'value;
                    }
                }
                Open::Obj { key } => {
                    t.raw_set(lua.create_string(&*key)?, v)?;
                    tok = p.next();
                    if tok.kind != Kind::ObjEnd {
                        if tok.kind != Kind::Comma {
                            return Ok(Err(parse_error("comma or object end", &tok)));
                        }
                        tok = p.next();
                        if tok.kind != Kind::Str {
                            return Ok(Err(parse_error("object key string", &tok)));
                        }
                        *key = std::mem::take(&mut tok.text);
                        tok = p.next();
                        if tok.kind != Kind::Colon {
                            return Ok(Err(parse_error("colon", &tok)));
                        }
                        tok = p.next();
                        continue 'value;
                    }
                }
            }
            // The container ended: it is the finished value for its parent.
            let (_, parent_slots) = stack.pop().expect("open container");
            slots = parent_slots;
            v = Value::Table(cur.take().expect("open container"));
            if !stack.is_empty() {
                cur = Some(tables.raw_get(stack.len())?);
                tables.raw_set(stack.len(), Value::Nil)?;
            }
        }
    }
}
