//! Values between Redis and Lua, both ways, as Redis 7.0's `script_lua.c` converts them.
//!
//! Redis -> Lua (a `redis.call`'s reply, in the protocol the script chose with
//! `redis.setresp`): integer -> number, bulk -> string, RESP2 null -> `false`, status ->
//! `{ok=...}`, error -> `{err=...}`, array -> table; RESP3: null -> `nil`, boolean ->
//! boolean, map -> `{map={...}}`, set -> `{set={member=true}}`, double -> `{double=n}`,
//! big number -> `{big_number=s}`, verbatim -> `{verbatim_string={format=, string=}}`.
//!
//! Lua -> Redis (the script's reply, in the client's protocol): string -> bulk, number ->
//! integer (truncated), boolean -> `1`/null (RESP3 booleans once the script chose RESP3),
//! `nil` -> null, a table with `err` -> error, `ok` -> status, `double`, `big_number`,
//! `map`, `set`, `verbatim_string`, else an array up to its first `nil`.

use manifold_redis_proto::frame::Frame;
use manifold_redis_proto::{Protocol, Reply};
use mlua::{Lua, Table, Value};

/// Deepest nesting of tables converted to a reply (Redis stops at Lua's C stack).
const MAX_DEPTH: usize = 256;

/// The field names of the tables replies convert to and from (`{ok=...}`, `{err=...}`...),
/// made Lua strings once per state: making one is a protected call each time.
pub struct Names {
    err: mlua::String,
    ok: mlua::String,
    double: mlua::String,
    big_number: mlua::String,
    map: mlua::String,
    set: mlua::String,
    verbatim_string: mlua::String,
    format: mlua::String,
    string: mlua::String,
}

impl Names {
    pub fn new(lua: &Lua) -> mlua::Result<Self> {
        Ok(Self {
            err: lua.create_string("err")?,
            ok: lua.create_string("ok")?,
            double: lua.create_string("double")?,
            big_number: lua.create_string("big_number")?,
            map: lua.create_string("map")?,
            set: lua.create_string("set")?,
            verbatim_string: lua.create_string("verbatim_string")?,
            format: lua.create_string("format")?,
            string: lua.create_string("string")?,
        })
    }
}

/// A reply frame as a Lua value.
pub fn frame_to_lua(lua: &Lua, names: &Names, frame: Frame) -> mlua::Result<Value> {
    Ok(match frame {
        Frame::Simple(s) => {
            let t = lua.create_table()?;
            t.raw_set(&names.ok, lua.create_string(&s)?)?;
            Value::Table(t)
        }
        Frame::Error(s) | Frame::BlobError(s) => Value::Table(error_table_named(lua, names, &s)?),
        Frame::Integer(n) => Value::Number(n as f64),
        Frame::Bulk(b) => Value::String(lua.create_string(&b)?),
        Frame::NullBulk | Frame::NullArray => Value::Boolean(false),
        Frame::Null | Frame::Attribute(_) => Value::Nil,
        Frame::Array(items) | Frame::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_set(i + 1, frame_to_lua(lua, names, item)?)?;
            }
            Value::Table(t)
        }
        Frame::Map(pairs) => {
            let inner = lua.create_table()?;
            for (k, v) in pairs {
                // A nil key cannot be set (and raises; a conversion may run unprotected).
                let k = frame_to_lua(lua, names, k)?;
                if !k.is_nil() {
                    inner.raw_set(k, frame_to_lua(lua, names, v)?)?;
                }
            }
            let t = lua.create_table()?;
            t.raw_set(&names.map, inner)?;
            Value::Table(t)
        }
        Frame::Set(items) => {
            let inner = lua.create_table()?;
            for k in items {
                let k = frame_to_lua(lua, names, k)?;
                if !k.is_nil() {
                    inner.raw_set(k, true)?;
                }
            }
            let t = lua.create_table()?;
            t.raw_set(&names.set, inner)?;
            Value::Table(t)
        }
        Frame::Double(text) => {
            let n = std::str::from_utf8(&text)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(0.0);
            let t = lua.create_table()?;
            t.raw_set(&names.double, n)?;
            Value::Table(t)
        }
        Frame::Boolean(b) => Value::Boolean(b),
        Frame::BigNumber(digits) => {
            let t = lua.create_table()?;
            t.raw_set(&names.big_number, lua.create_string(&digits)?)?;
            Value::Table(t)
        }
        Frame::Verbatim { format, text } => {
            let inner = lua.create_table()?;
            inner.raw_set(&names.string, lua.create_string(&text)?)?;
            inner.raw_set(&names.format, lua.create_string(format)?)?;
            let t = lua.create_table()?;
            t.raw_set(&names.verbatim_string, inner)?;
            Value::Table(t)
        }
    })
}

/// `{err = text}`.
pub fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok(t)
}

/// `{err = text}`, its field name from `names`.
fn error_table_named(lua: &Lua, names: &Names, text: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(&names.err, lua.create_string(text)?)?;
    Ok(t)
}

/// Writes an error reply as Redis's `addReplyErrorFormat("%s")`: `-` and the text, its
/// line breaks made spaces.
pub fn error_reply(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'-');
    out.extend(
        text.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// Most values one script reply may hold, counting each time a shared table is written
/// again (`t = {t, t}` doubles it each level): past it the reply is an error, not a walk
/// of exponential length (some 4 s of a script thread at the most).
pub const MAX_REPLY_VALUES: u64 = 4 << 20;

/// Writes the Lua value `v` as the script's reply; `script_proto`: the protocol the script
/// chose (`redis.setresp`), which decides how a boolean is answered. Holds no Lua
/// reference per element (mlua has room for some 8,000): each is read, written and let go.
/// Stops early once `reply` passes its limit (the client is closed for it) and fails past
/// `max_values` values.
pub fn lua_to_reply(
    lua: &Lua,
    v: &Value,
    reply: &mut Reply<'_>,
    script_proto: Protocol,
    max_values: u64,
) -> Result<(), &'static str> {
    let names = Names::new(lua).map_err(|_| "manifold: out of Lua memory")?;
    lua_to_reply_until(&names, v, reply, script_proto, max_values, &|| None)
}

/// Values written between two calls of a conversion's `stop`.
pub const STOP_CHECK_EVERY: u64 = 4096;

/// [`lua_to_reply`], asking `stop` every [`STOP_CHECK_EVERY`] values whether to give up
/// (`SCRIPT KILL`, the time limit: a big reply takes seconds, after the script's own hook
/// has stopped watching); `stop`'s text is then the error.
pub fn lua_to_reply_until(
    names: &Names,
    v: &Value,
    reply: &mut Reply<'_>,
    script_proto: Protocol,
    max_values: u64,
    stop: &dyn Fn() -> Option<&'static str>,
) -> Result<(), &'static str> {
    let mut w = Writer {
        script_proto,
        budget: max_values,
        written: 0,
        stop,
        names,
    };
    w.value(v, reply, 0)
}

/// One reply's conversion: its protocol, what is left of its budget, and the field names
/// a table is looked up by, made Lua strings once.
struct Writer<'s> {
    script_proto: Protocol,
    budget: u64,
    /// Values written so far.
    written: u64,
    stop: &'s dyn Fn() -> Option<&'static str>,
    names: &'s Names,
}

impl Writer<'_> {
    fn value(
        &mut self,
        v: &Value,
        reply: &mut Reply<'_>,
        depth: usize,
    ) -> Result<(), &'static str> {
        if depth > MAX_DEPTH {
            return Err("reached lua stack limit");
        }
        if self.budget == 0 {
            return Err("manifold: the script's reply holds too many values");
        }
        self.budget -= 1;
        self.written += 1;
        if self.written.is_multiple_of(STOP_CHECK_EVERY) {
            if let Some(text) = (self.stop)() {
                return Err(text);
            }
        }
        if reply.over_limit() {
            return Ok(());
        }
        match v {
            Value::String(s) => {
                reply.bulk(&s.as_bytes());
            }
            Value::Number(n) => {
                reply.integer(*n as i64);
            }
            Value::Integer(n) => {
                reply.integer(*n);
            }
            Value::Boolean(b) => {
                if self.script_proto == Protocol::Resp2 {
                    if *b {
                        reply.integer(1);
                    } else {
                        reply.null();
                    }
                } else {
                    reply.boolean(*b);
                }
            }
            Value::Table(t) => self.table(t, reply, depth)?,
            _ => {
                reply.null();
            }
        }
        Ok(())
    }

    fn table(
        &mut self,
        t: &Table,
        reply: &mut Reply<'_>,
        depth: usize,
    ) -> Result<(), &'static str> {
        if let Ok(Value::String(err)) = t.raw_get::<Value>(&self.names.err) {
            // `-` and the text as it is (`Reply::error` adds no `ERR` to a text with its `-`).
            let mut text = Vec::with_capacity(err.as_bytes().len() + 1);
            text.push(b'-');
            text.extend(
                err.as_bytes()
                    .iter()
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
            reply.error(&text);
            return Ok(());
        }
        if let Ok(Value::String(ok)) = t.raw_get::<Value>(&self.names.ok) {
            let s: Vec<u8> = ok
                .as_bytes()
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                .collect();
            reply.simple(&s);
            return Ok(());
        }
        if let Ok(Value::Number(d)) = t.raw_get::<Value>(&self.names.double) {
            reply.double(d);
            return Ok(());
        }
        if let Ok(Value::String(n)) = t.raw_get::<Value>(&self.names.big_number) {
            reply.big_number(&n.as_bytes());
            return Ok(());
        }
        if let Ok(Value::Table(map)) = t.raw_get::<Value>(&self.names.map) {
            // Counted first, then written pair by pair (in the same order: nothing changes
            // the table between the two walks).
            reply.map_len(map.pairs::<Value, Value>().count());
            for pair in map.pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|_| "manifold: the script's map could not be read")?;
                self.value(&k, reply, depth + 1)?;
                self.value(&v, reply, depth + 1)?;
            }
            return Ok(());
        }
        if let Ok(Value::Table(set)) = t.raw_get::<Value>(&self.names.set) {
            reply.set_len(set.pairs::<Value, Value>().count());
            for pair in set.pairs::<Value, Value>() {
                let (k, _) = pair.map_err(|_| "manifold: the script's set could not be read")?;
                self.value(&k, reply, depth + 1)?;
            }
            return Ok(());
        }
        if let Ok(Value::Table(v)) = t.raw_get::<Value>(&self.names.verbatim_string) {
            if let (Ok(Value::String(format)), Ok(Value::String(s))) = (
                v.raw_get::<Value>(&self.names.format),
                v.raw_get::<Value>(&self.names.string),
            ) {
                reply.verbatim(&format.as_bytes(), &s.as_bytes());
                return Ok(());
            }
        }
        // An array, up to its first nil: its length first, then each element read again.
        let mut len = 0usize;
        while !matches!(t.raw_get::<Value>(len + 1), Ok(Value::Nil) | Err(_)) {
            len += 1;
        }
        reply.array_len(len);
        for i in 1..=len {
            let item = t.raw_get::<Value>(i).unwrap_or(Value::Nil);
            self.value(&item, reply, depth + 1)?;
        }
        Ok(())
    }
}
