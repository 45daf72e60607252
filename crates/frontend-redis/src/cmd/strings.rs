//! Strings: `GET`, `SET` and the rest of Redis's string commands, and the batched forms
//! [`crate::exec`] uses for runs of `GET`s and plain `SET`s.
//!
//! A string's value is the `v` column of its key's row in `redis_keys`.

use std::sync::OnceLock;

use manifold_backend::Param;

use super::data::{Family, Spec};
use super::{parse_i64, Args};
use crate::errors;
use crate::exec::Cx;
use crate::store::keys::{hash, kind};
use crate::store::{int, take_bytes, StoreError};

const fn spec(name: &'static str, arity: i32, write: bool) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Strings,
    }
}

pub static COMMANDS: [Spec; 2] = [spec("get", 2, false), spec("set", -3, true)];

/// Runs one string command.
pub async fn run(cx: &mut Cx<'_>, spec: &'static Spec, args: Args<'_>) -> Result<(), StoreError> {
    match spec.name {
        "get" => get_run(cx, &[args.get(1)]).await,
        "set" => set(cx, args).await,
        other => unreachable!("{other} is not a string command"),
    }
}

/// `n` rounded up to a power of two: batched statements come in few shapes, each prepared
/// once per connection.
fn padded(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

/// `SELECT k, type, v, expire_at ... WHERE kh IN (?, ...)` for `n` (a power of two) keys.
fn select_in(n: usize) -> &'static str {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let all = SQL.get_or_init(|| {
        (0..=crate::exec::RUN_MAX.trailing_zeros())
            .map(|p| {
                let marks = vec!["?"; 1 << p].join(", ");
                format!(
                    "SELECT k, type, v, expire_at FROM {{s}}.redis_keys WHERE db = ? AND kh IN ({marks})"
                )
            })
            .collect()
    });
    &all[n.trailing_zeros() as usize]
}

/// The multi-row upsert of `n` (a power of two) plain `SET`s: the value replaces whatever
/// the key held, its TTL goes. A collection written over keeps its members until the sweeper
/// deletes them (`gc`); MariaDB has no row alias, hence `VALUES(col)`.
fn upsert(n: usize) -> &'static str {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let all = SQL.get_or_init(|| {
        (0..=crate::exec::RUN_MAX.trailing_zeros())
            .map(|p| {
                let rows = vec!["(?, ?, ?, 0, ?, ?)"; 1 << p].join(", ");
                format!(
                    "INSERT INTO {{s}}.redis_keys (db, kh, k, type, v, expire_at) VALUES {rows} \
                     ON DUPLICATE KEY UPDATE gc = IF(type <> 0, type, gc), type = 0, k = VALUES(k), \
                     v = VALUES(v), expire_at = VALUES(expire_at), len = 0, lhead = 0, ltail = 0, \
                     version = version + 1"
                )
            })
            .collect()
    });
    &all[n.trailing_zeros() as usize]
}

/// What a string lookup found for one key.
#[derive(Debug, PartialEq)]
pub enum Found {
    /// Absent or expired.
    Nil,
    Value(Vec<u8>),
    /// Another type.
    WrongType,
}

/// Reads the strings `keys` (at most [`crate::exec::RUN_MAX`]) with one statement, in order.
pub async fn fetch(cx: &mut Cx<'_>, keys: &[&[u8]]) -> Result<Vec<Found>, StoreError> {
    let n = padded(keys.len());
    let hashes: Vec<[u8; 32]> = keys.iter().map(|k| hash(k)).collect();
    let mut params = Vec::with_capacity(n + 1);
    params.push(Param::UInt(u64::from(cx.db)));
    for i in 0..n {
        params.push(Param::Bytes(&hashes[i.min(hashes.len() - 1)]));
    }
    let mut rows = cx.tx.rows(select_in(n), &params).await?;
    let now = cx.now_ms();
    Ok(keys
        .iter()
        .map(|k| {
            let Some(row) = rows.iter_mut().find(
                |r| matches!(&r[0], manifold_mysql_proto::packets::Value::Bytes(b) if b == k),
            ) else {
                return Found::Nil;
            };
            if int(&row[3]).is_some_and(|at| at <= now) {
                return Found::Nil;
            }
            if int(&row[1]) != Some(i64::from(kind::STRING)) {
                return Found::WrongType;
            }
            // A key asked twice keeps its row for the second time.
            match &row[2] {
                manifold_mysql_proto::packets::Value::Bytes(b) => Found::Value(b.clone()),
                _ => Found::Value(take_bytes(&mut row[2]).unwrap_or_default()),
            }
        })
        .collect())
}

/// `GET` of each of `keys`, one reply each, with one statement.
pub async fn get_run(cx: &mut Cx<'_>, keys: &[&[u8]]) -> Result<(), StoreError> {
    for found in fetch(cx, keys).await? {
        match found {
            Found::Nil => cx.reply().null(),
            Found::Value(v) => cx.reply().bulk(&v),
            Found::WrongType => cx.reply().error(errors::WRONGTYPE),
        };
    }
    Ok(())
}

/// Writes each `(key, value)` as a plain `SET` would (no TTL) with one statement.
pub async fn write_values(
    cx: &mut Cx<'_>,
    pairs: &[(&[u8], &[u8])],
    expire_at: Option<i64>,
) -> Result<(), StoreError> {
    let n = padded(pairs.len());
    let hashes: Vec<[u8; 32]> = pairs.iter().map(|(k, _)| hash(k)).collect();
    let mut params = Vec::with_capacity(n * 5);
    for i in 0..n {
        let at = i.min(pairs.len() - 1);
        params.push(Param::UInt(u64::from(cx.db)));
        params.push(Param::Bytes(&hashes[at]));
        params.push(Param::Bytes(pairs[at].0));
        params.push(Param::Bytes(pairs[at].1));
        params.push(expire_at.map_or(Param::Null, Param::Int));
    }
    cx.tx.exec(upsert(n), &params).await?;
    Ok(())
}

/// A run of plain `SET key value`s: one upsert, `+OK` each.
pub async fn set_run(cx: &mut Cx<'_>, pairs: &[(&[u8], &[u8])]) -> Result<(), StoreError> {
    write_values(cx, pairs, None).await?;
    for _ in pairs {
        cx.reply().simple(b"OK");
    }
    Ok(())
}

/// What `SET`'s options ask (Redis 7.0 `parseExtendedStringArgumentsOrReply`).
#[derive(Debug, Default)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    /// Absolute expiry in Unix ms.
    expire_at: Option<i64>,
}

/// Parses `SET`'s options after the value; the error text on failure.
fn set_options(args: &Args<'_>, now_ms: i64) -> Result<SetOptions, &'static [u8]> {
    let mut o = SetOptions::default();
    let mut expire: Option<(&[u8], u8)> = None;
    let mut i = 3;
    while i < args.len() {
        let a = args.get(i);
        let next = (i + 1 < args.len()).then(|| args.get(i + 1));
        let is = |w: &[u8]| a.eq_ignore_ascii_case(w);
        if is(b"nx") && !o.xx {
            o.nx = true;
        } else if is(b"xx") && !o.nx {
            o.xx = true;
        } else if is(b"get") {
            o.get = true;
        } else if is(b"keepttl") && expire.is_none() {
            o.keep_ttl = true;
        } else if (is(b"ex") || is(b"px") || is(b"exat") || is(b"pxat"))
            && !o.keep_ttl
            && expire.is_none()
            && next.is_some()
        {
            let unit = a[0].to_ascii_lowercase();
            let at = a.len() > 2;
            expire = Some((next.unwrap_or_default(), unit | if at { 0x80 } else { 0 }));
            i += 1;
        } else {
            return Err(errors::SYNTAX);
        }
        i += 1;
    }
    if let Some((value, unit)) = expire {
        let n = parse_i64(value).ok_or(errors::NOT_INTEGER)?;
        let seconds = unit & 0x7f == b'e';
        if n <= 0 || (seconds && n > i64::MAX / 1000) {
            return Err(errors::INVALID_EXPIRE_SET);
        }
        let ms = if seconds { n * 1000 } else { n };
        let absolute = if unit & 0x80 != 0 {
            ms
        } else {
            ms.checked_add(now_ms).ok_or(errors::INVALID_EXPIRE_SET)?
        };
        o.expire_at = Some(absolute);
    }
    Ok(o)
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
async fn set(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let o = match set_options(&args, cx.now_ms()) {
        Ok(o) => o,
        Err(text) => {
            cx.reply().error(text);
            return Ok(());
        }
    };
    let (k, v) = (args.get(1), args.get(2));
    let old = cx.tx.key(cx.db, k, true).await?;
    if o.get && old.as_ref().is_some_and(|r| r.kind != kind::STRING) {
        cx.reply().error(errors::WRONGTYPE);
        return Ok(());
    }
    let exists = old.is_some();
    if (o.nx && exists) || (o.xx && !exists) {
        match old {
            Some(row) if o.get => cx.reply().bulk(row.v.as_deref().unwrap_or_default()),
            _ => cx.reply().null(),
        };
        return Ok(());
    }
    let expire_at = if o.keep_ttl {
        old.as_ref().and_then(|r| r.expire_at)
    } else {
        o.expire_at
    };
    write_values(cx, &[(k, v)], expire_at).await?;
    if o.get {
        match old {
            Some(row) => cx.reply().bulk(row.v.as_deref().unwrap_or_default()),
            None => cx.reply().null(),
        };
    } else {
        cx.reply().simple(b"OK");
    }
    Ok(())
}
