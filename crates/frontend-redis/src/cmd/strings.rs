//! Strings: `GET`, `SET` and the rest of Redis's string commands, and the batched forms
//! [`crate::exec`] uses for runs of `GET`s and plain `SET`s.
//!
//! A string's value is the `v` column of its key's row in `redis_keys`. Writes that set the
//! TTL (`SET`, `SETEX`, `MSET`, `GETSET`...) go through one upsert ([`write_values`]), which
//! also replaces a collection (its members left to the sweeper, `gc`); writes that keep it
//! (`APPEND`, `INCR`, `SETRANGE`...) read the row locked and update `v` alone
//! ([`update_value`]). `INCRBYFLOAT` computes in an emulation of redis-server's x87 long
//! double ([`longdouble`]).
//!
//! - [`numeric`]: `INCR`, `DECR`, `INCRBY`, `DECRBY`, `INCRBYFLOAT`.
//! - [`ranges`]: `APPEND`, `STRLEN`, `GETRANGE`/`SUBSTR`, `SETRANGE`.
//!
//! Known differences from redis-server: a `MGET` of more than [`crate::exec::RUN_MAX`] keys
//! alone in its batch reads them with several statements, not one snapshot.

mod numeric;
mod ranges;

use manifold_backend::Param;

use super::data::{Family, Spec};
use super::sqltext::{in_params, marks, padded, statement, tuples};
use super::{parse_i64, Args};
use crate::errors;
use crate::exec::{Cx, RUN_MAX};
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

pub static COMMANDS: [Spec; 21] = [
    spec("get", 2, false),
    spec("set", -3, true),
    spec("mget", -2, false),
    spec("mset", -3, true),
    spec("msetnx", -3, true),
    spec("setnx", 3, true),
    spec("setex", 4, true),
    spec("psetex", 4, true),
    spec("getset", 3, true),
    spec("getdel", 2, true),
    spec("getex", -2, true),
    spec("append", 3, true),
    spec("strlen", 2, false),
    spec("incr", 2, true),
    spec("decr", 2, true),
    spec("incrby", 3, true),
    spec("decrby", 3, true),
    spec("incrbyfloat", 3, true),
    spec("getrange", 4, false),
    spec("substr", 4, false),
    spec("setrange", 4, true),
];

/// `SETEX` with a bad expire time.
const INVALID_EXPIRE_SETEX: &[u8] = b"invalid expire time in 'setex' command";
/// `PSETEX` with a bad expire time.
const INVALID_EXPIRE_PSETEX: &[u8] = b"invalid expire time in 'psetex' command";
/// `GETEX` with a bad expire time.
const INVALID_EXPIRE_GETEX: &[u8] = b"invalid expire time in 'getex' command";

/// Runs one string command.
pub async fn run(cx: &mut Cx<'_>, spec: &'static Spec, args: Args<'_>) -> Result<(), StoreError> {
    match spec.name {
        "get" => get_run(cx, &[args.get(1)]).await,
        "set" => set(cx, args).await,
        "mget" => mget(cx, args).await,
        "mset" => mset(cx, args, false).await,
        "msetnx" => mset(cx, args, true).await,
        "setnx" => setnx(cx, args).await,
        "setex" => setex(cx, args, true).await,
        "psetex" => setex(cx, args, false).await,
        "getset" => getset(cx, args).await,
        "getdel" => getdel(cx, args).await,
        "getex" => getex(cx, args).await,
        "incr" => numeric::incr_by(cx, args.get(1), 1).await,
        "decr" => numeric::incr_by(cx, args.get(1), -1).await,
        "incrby" => numeric::incrby(cx, args, false).await,
        "decrby" => numeric::incrby(cx, args, true).await,
        "incrbyfloat" => numeric::incrbyfloat(cx, args).await,
        "append" => ranges::append(cx, args).await,
        "strlen" => ranges::strlen(cx, args).await,
        "getrange" | "substr" => ranges::getrange(cx, args).await,
        "setrange" => ranges::setrange(cx, args).await,
        other => unreachable!("{other} is not a string command"),
    }
}

statement! {
    /// `SELECT k, type, v, expire_at ... WHERE kh IN (?, ...)` for `n` (a power of two) keys.
    fn select_in = "SELECT k, type, v, expire_at FROM {{s}}.redis_keys WHERE db = ? AND kh IN ({})", |n| marks(n)
}

statement! {
    /// The multi-row upsert of `n` (a power of two) plain `SET`s: the value replaces whatever
    /// the key held, its TTL goes. A collection written over keeps its members until the sweeper
    /// deletes them (`gc`); MariaDB has no row alias, hence `VALUES(col)`.
    fn upsert = "INSERT INTO {{s}}.redis_keys (db, kh, k, type, v, expire_at) VALUES {} \
        ON DUPLICATE KEY UPDATE gc = IF(type <> 0, type, gc), type = 0, k = VALUES(k), \
        v = VALUES(v), expire_at = VALUES(expire_at), len = 0, lhead = 0, ltail = 0, \
        version = version + 1", |n| tuples("(?, ?, ?, 0, ?, ?)", n)
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
    let params = in_params(Param::UInt(u64::from(cx.db)), &hashes, n);
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
    let hashes: Vec<[u8; 32]> = pairs.iter().map(|(k, _)| hash(k)).collect();
    // Rows in key-hash order, each key once (its last value): concurrent upserts then lock
    // their rows in one order and cannot deadlock each other.
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_unstable_by(|&a, &b| hashes[a].cmp(&hashes[b]).then(b.cmp(&a)));
    order.dedup_by(|later, kept| hashes[*later] == hashes[*kept]);
    // Statements of at most RUN_MAX rows, in that order (a longer run too).
    for chunk in order.chunks(crate::exec::RUN_MAX) {
        let n = padded(chunk.len());
        let mut params = Vec::with_capacity(n * 5);
        for i in 0..n {
            let at = chunk[i.min(chunk.len() - 1)];
            params.push(Param::UInt(u64::from(cx.db)));
            params.push(Param::Bytes(&hashes[at]));
            params.push(Param::Bytes(pairs[at].0));
            params.push(Param::Bytes(pairs[at].1));
            params.push(expire_at.map_or(Param::Null, Param::Int));
        }
        cx.tx.exec(upsert(n), &params).await?;
    }
    Ok(())
}

/// Creates the string `k`, which a locking read just found absent. A plain `INSERT`, not the
/// upsert: writes run in read committed, where that read locked no gap, so another batch may
/// have created the key since; then this fails (duplicate key, 1062) and the batch runs
/// again and sees the key, where an upsert would overwrite it (two `SET NX` both answering
/// OK, two `INCR`s of a new key both answering 1).
pub async fn insert_value(
    cx: &mut Cx<'_>,
    k: &[u8],
    v: &[u8],
    expire_at: Option<i64>,
) -> Result<(), StoreError> {
    let kh = hash(k);
    cx.tx
        .exec(
            "INSERT INTO {s}.redis_keys (db, kh, k, type, v, expire_at) VALUES (?, ?, ?, 0, ?, ?)",
            &[
                Param::UInt(u64::from(cx.db)),
                Param::Bytes(&kh),
                Param::Bytes(k),
                Param::Bytes(v),
                expire_at.map_or(Param::Null, Param::Int),
            ],
        )
        .await?;
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

/// Replaces the value of the live string `k` (its row locked by the caller), keeping its
/// TTL; counts a write.
pub async fn update_value(cx: &mut Cx<'_>, k: &[u8], v: &[u8]) -> Result<(), StoreError> {
    let kh = hash(k);
    cx.tx
        .exec(
            "UPDATE {s}.redis_keys SET v = ?, version = version + 1 WHERE db = ? AND kh = ?",
            &[
                Param::Bytes(v),
                Param::UInt(u64::from(cx.db)),
                Param::Bytes(&kh),
            ],
        )
        .await?;
    Ok(())
}

/// Writes the string `k` keeping its TTL: an update when it `existed` (a live string, row
/// locked), else a new key without TTL ([`insert_value`]).
pub async fn store_value(
    cx: &mut Cx<'_>,
    k: &[u8],
    existed: bool,
    v: &[u8],
) -> Result<(), StoreError> {
    if existed {
        update_value(cx, k, v).await
    } else {
        insert_value(cx, k, v, None).await
    }
}

/// Sets (or with `None` removes) the TTL of the live key `k`; counts a write.
async fn set_expire(cx: &mut Cx<'_>, k: &[u8], at: Option<i64>) -> Result<(), StoreError> {
    let kh = hash(k);
    cx.tx
        .exec(
            "UPDATE {s}.redis_keys SET expire_at = ?, version = version + 1 WHERE db = ? AND kh = ?",
            &[
                at.map_or(Param::Null, Param::Int),
                Param::UInt(u64::from(cx.db)),
                Param::Bytes(&kh),
            ],
        )
        .await?;
    Ok(())
}

/// The unit of an expire time: `EX`, `PX`, `EXAT`, `PXAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// What `SET`'s or `GETEX`'s options ask (Redis 7.0 `parseExtendedStringArgumentsOrReply`).
#[derive(Debug, Default)]
struct Options<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    /// The expire argument and its unit, not validated yet.
    expire: Option<(&'a [u8], Unit)>,
}

/// Parses the options from argument `first` on (`SET`'s if `set`, else `GETEX`'s), as
/// Redis does: a repeated `EX` is taken (the last wins), a conflicting one is a syntax
/// error.
fn parse_options<'a>(
    args: &Args<'a>,
    first: usize,
    set: bool,
) -> Result<Options<'a>, &'static [u8]> {
    let mut o = Options::default();
    let mut i = first;
    while i < args.len() {
        let a = args.get(i);
        let next = (i + 1 < args.len()).then(|| args.get(i + 1));
        let is = |w: &[u8]| a.eq_ignore_ascii_case(w);
        let unit = o.expire.map(|(_, u)| u);
        let other_unit = |u: Unit| unit.is_some_and(|x| x != u);
        if is(b"nx") && set && !o.xx {
            o.nx = true;
        } else if is(b"xx") && set && !o.nx {
            o.xx = true;
        } else if is(b"get") && set {
            o.get = true;
        } else if is(b"keepttl") && set && !o.persist && unit.is_none() {
            o.keep_ttl = true;
        } else if is(b"persist") && !set && unit.is_none() && !o.keep_ttl {
            o.persist = true;
        } else if let (Some(u), Some(value)) = (
            [
                (&b"ex"[..], Unit::Ex),
                (b"px", Unit::Px),
                (b"exat", Unit::ExAt),
                (b"pxat", Unit::PxAt),
            ]
            .into_iter()
            .find(|(w, _)| is(w))
            .map(|(_, u)| u),
            next,
        ) {
            if o.keep_ttl || o.persist || other_unit(u) {
                return Err(errors::SYNTAX);
            }
            o.expire = Some((value, u));
            i += 1;
        } else {
            return Err(errors::SYNTAX);
        }
        i += 1;
    }
    Ok(o)
}

/// Redis's `getExpireMillisecondsOrReply`: the absolute expiry in Unix ms, or the error text
/// (`invalid` for a time that is not positive or overflows).
fn expire_at(
    value: &[u8],
    unit: Unit,
    now_ms: i64,
    invalid: &'static [u8],
) -> Result<i64, &'static [u8]> {
    let n = parse_i64(value).ok_or(errors::NOT_INTEGER)?;
    let seconds = matches!(unit, Unit::Ex | Unit::ExAt);
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(invalid);
    }
    let ms = if seconds { n * 1000 } else { n };
    match unit {
        Unit::Ex | Unit::Px => ms.checked_add(now_ms).ok_or(invalid),
        Unit::ExAt | Unit::PxAt => Ok(ms),
    }
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
async fn set(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let o = match parse_options(&args, 3, true).and_then(|o| {
        let at = match o.expire {
            Some((v, u)) => Some(expire_at(v, u, cx.now_ms(), errors::INVALID_EXPIRE_SET)?),
            None => None,
        };
        Ok((o, at))
    }) {
        Ok(o) => o,
        Err(text) => {
            cx.reply().error(text);
            return Ok(());
        }
    };
    let (o, at) = o;
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
    let at = if o.keep_ttl {
        old.as_ref().and_then(|r| r.expire_at)
    } else {
        at
    };
    if exists {
        write_values(cx, &[(k, v)], at).await?;
    } else {
        insert_value(cx, k, v, at).await?;
    }
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

/// `SETNX key value`: 1 if it set, 0 if the key exists (of any type).
async fn setnx(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let k = args.get(1);
    if cx.tx.key_meta(cx.db, k, true).await?.is_some() {
        cx.reply().integer(0);
        return Ok(());
    }
    insert_value(cx, k, args.get(2), None).await?;
    cx.reply().integer(1);
    Ok(())
}

/// `SETEX key seconds value` (`seconds`), `PSETEX key ms value`.
async fn setex(cx: &mut Cx<'_>, args: Args<'_>, seconds: bool) -> Result<(), StoreError> {
    let (unit, invalid) = if seconds {
        (Unit::Ex, INVALID_EXPIRE_SETEX)
    } else {
        (Unit::Px, INVALID_EXPIRE_PSETEX)
    };
    let at = match expire_at(args.get(2), unit, cx.now_ms(), invalid) {
        Ok(at) => at,
        Err(text) => {
            cx.reply().error(text);
            return Ok(());
        }
    };
    write_values(cx, &[(args.get(1), args.get(3))], Some(at)).await?;
    cx.reply().simple(b"OK");
    Ok(())
}

/// `GETSET key value`: the old string (nil if none), the new value without TTL.
async fn getset(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let k = args.get(1);
    let old = cx.tx.key(cx.db, k, true).await?;
    if old.as_ref().is_some_and(|r| r.kind != kind::STRING) {
        cx.reply().error(errors::WRONGTYPE);
        return Ok(());
    }
    if old.is_some() {
        write_values(cx, &[(k, args.get(2))], None).await?;
    } else {
        insert_value(cx, k, args.get(2), None).await?;
    }
    match old {
        Some(row) => cx.reply().bulk(row.v.as_deref().unwrap_or_default()),
        None => cx.reply().null(),
    };
    Ok(())
}

/// `GETDEL key`: the string, deleted.
async fn getdel(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let k = args.get(1);
    match cx.tx.key(cx.db, k, true).await? {
        None => {
            cx.reply().null();
        }
        Some(row) if row.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
        }
        Some(row) => {
            cx.tx.delete_key(cx.db, k, &row).await?;
            cx.reply().bulk(row.v.as_deref().unwrap_or_default());
        }
    }
    Ok(())
}

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]`: the string, its TTL changed.
async fn getex(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let o = match parse_options(&args, 2, false) {
        Ok(o) => o,
        Err(text) => {
            cx.reply().error(text);
            return Ok(());
        }
    };
    let k = args.get(1);
    let row = match cx.tx.key(cx.db, k, true).await? {
        None => {
            cx.reply().null();
            return Ok(());
        }
        Some(row) if row.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
            return Ok(());
        }
        Some(row) => row,
    };
    let at = match o.expire {
        Some((v, u)) => match expire_at(v, u, cx.now_ms(), INVALID_EXPIRE_GETEX) {
            Ok(at) => Some((at, u)),
            Err(text) => {
                cx.reply().error(text);
                return Ok(());
            }
        },
        None => None,
    };
    cx.reply().bulk(row.v.as_deref().unwrap_or_default());
    match at {
        Some((at, Unit::ExAt | Unit::PxAt)) if at <= cx.now_ms() => {
            cx.tx.delete_key(cx.db, k, &row).await?;
        }
        Some((at, _)) => set_expire(cx, k, Some(at)).await?,
        None if o.persist && row.expire_at.is_some() => set_expire(cx, k, None).await?,
        None => {}
    }
    Ok(())
}

/// `MGET key...`: one statement per [`RUN_MAX`] keys; a key of another type is nil.
async fn mget(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let keys: Vec<&[u8]> = args.from(1).collect();
    cx.reply().array_len(keys.len());
    for chunk in keys.chunks(RUN_MAX) {
        for found in fetch(cx, chunk).await? {
            match found {
                Found::Value(v) => cx.reply().bulk(&v),
                Found::Nil | Found::WrongType => cx.reply().null(),
            };
        }
    }
    Ok(())
}

/// `MSET key value...` (`+OK`), `MSETNX key value...` (`nx`: 1 if no key existed and all
/// were set, else 0 and none).
async fn mset(cx: &mut Cx<'_>, args: Args<'_>, nx: bool) -> Result<(), StoreError> {
    if args.len().is_multiple_of(2) {
        super::checks::arity(cx, if nx { "msetnx" } else { "mset" });
        return Ok(());
    }
    let pairs: Vec<(&[u8], &[u8])> = (1..args.len())
        .step_by(2)
        .map(|i| (args.get(i), args.get(i + 1)))
        .collect();
    // MSETNX: locking reads first (an expired key is deleted on the way); one live key stops
    // it. The upsert replaces whatever the keys held.
    if nx {
        for (k, _) in &pairs {
            if cx.tx.key_meta(cx.db, k, true).await?.is_some() {
                cx.reply().integer(0);
                return Ok(());
            }
        }
        // All absent: each created by a plain insert ([`insert_value`]), the last value of
        // a key named twice.
        for (i, (k, v)) in pairs.iter().enumerate() {
            if !pairs[i + 1..].iter().any(|(later, _)| later == k) {
                insert_value(cx, k, v, None).await?;
            }
        }
        cx.reply().integer(1);
        return Ok(());
    }
    for chunk in pairs.chunks(RUN_MAX) {
        write_values(cx, chunk, None).await?;
    }
    cx.reply().simple(b"OK");
    Ok(())
}
