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
//! - [`lcs`]: `LCS`, its table bounded.
//!
//! Known differences from redis-server: a `MGET` of more than [`crate::store::context::RUN_MAX`] keys
//! alone in its batch reads them with several statements, not one snapshot.

pub mod bitfield;
pub mod bits;
pub mod hll;
pub(crate) mod lcs;
mod numeric;
mod parse;
pub mod pf;
mod ranges;
#[cfg(test)]
mod tests;

use manifold_backend::Param;

use super::data::Spec;
use super::sqltext::{in_params, marks, padded, statement, tuples};
use super::{parse_i64, Args};
use crate::errors;
use crate::store::context::{Cx, RUN_MAX};
use crate::store::keys::{hash, kind};
use crate::store::{int, take_bytes, StoreError};

pub use parse::{Cond, Expiry, GetExTtl, Set, StringCommand, COMMANDS};

/// The longest value a command may make by growing one (`SETRANGE`, `APPEND`, `SETBIT`):
/// `proto-max-bulk-len`, as Redis's `checkStringLength` and bit offsets check it. Set from
/// the configuration at start; the value is built in manifold's memory before the backend
/// sees it, so Redis's 512 MiB would let one request take that much.
static MAX_VALUE_LEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(64 << 20);

/// A string command's entry in the command table.
const fn spec(name: &'static str, arity: i32, write: bool, parse: super::typed::Parse) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: super::data::Family::Strings,
        parse,
    }
}

/// Sets [`MAX_VALUE_LEN`] (the door's `proto_max_bulk_len`).
pub fn set_max_value_len(len: u64) {
    MAX_VALUE_LEN.store(len, std::sync::atomic::Ordering::Relaxed);
}

/// [`MAX_VALUE_LEN`].
pub fn max_value_len() -> u64 {
    MAX_VALUE_LEN.load(std::sync::atomic::Ordering::Relaxed)
}

impl StringCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        use parse::{
            Append, Get, GetDel, GetEx, GetRange, GetSet, IncrBy, IncrByFloat, Lcs, MGet, MSet,
            SetEx, SetNx, SetRange, StrLen,
        };
        match self {
            Get { key } => get_run(cx, &[key]).await,
            StringCommand::Set(set) => apply_set(cx, set).await,
            MGet { keys } => mget(cx, keys).await,
            MSet { pairs, nx } => mset(cx, pairs, nx).await,
            SetNx { key, value } => setnx(cx, key, value).await,
            SetEx { key, expiry, value } => setex(cx, key, expiry, value).await,
            GetSet { key, value } => getset(cx, key, value).await,
            GetDel { key } => getdel(cx, key).await,
            GetEx { key, ttl } => getex(cx, key, ttl).await,
            IncrBy { key, by } => numeric::incr_by(cx, key, by).await,
            IncrByFloat { key, by } => numeric::incrbyfloat(cx, key, by).await,
            Append { key, value } => ranges::append(cx, key, value).await,
            StrLen { key } => ranges::strlen(cx, key).await,
            GetRange { key, start, end } => ranges::getrange(cx, key, start, end).await,
            SetRange { key, offset, value } => ranges::setrange(cx, key, offset, value).await,
            Lcs { k1, k2, opts } => lcs::lcs(cx, k1, k2, opts).await,
        }
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

/// Reads the strings `keys` (at most [`crate::store::context::RUN_MAX`]) with one statement, in order.
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
    for chunk in order.chunks(crate::store::context::RUN_MAX) {
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
pub enum Unit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
async fn apply_set(cx: &mut Cx<'_>, set: Set<'_>) -> Result<(), StoreError> {
    let at = match set.expiry.map(|e| e.at(cx.now_ms())).transpose() {
        Ok(at) => at,
        Err(e) => {
            e.reply(cx);
            return Ok(());
        }
    };
    let (k, v) = (set.key, set.value);
    let old = cx.tx.key(cx.db, k, true).await?;
    if set.get && old.as_ref().is_some_and(|r| r.kind != kind::STRING) {
        cx.reply().error(errors::WRONGTYPE);
        return Ok(());
    }
    let exists = old.is_some();
    if (set.cond == Some(Cond::Nx) && exists) || (set.cond == Some(Cond::Xx) && !exists) {
        match old {
            Some(row) if set.get => cx.reply().bulk(row.v.as_deref().unwrap_or_default()),
            _ => cx.reply().null(),
        };
        return Ok(());
    }
    let at = if set.keep_ttl {
        old.as_ref().and_then(|r| r.expire_at)
    } else {
        at
    };
    if exists {
        write_values(cx, &[(k, v)], at).await?;
    } else {
        insert_value(cx, k, v, at).await?;
    }
    if set.get {
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
async fn setnx(cx: &mut Cx<'_>, k: &[u8], v: &[u8]) -> Result<(), StoreError> {
    if cx.tx.key_meta(cx.db, k, true).await?.is_some() {
        cx.reply().integer(0);
        return Ok(());
    }
    insert_value(cx, k, v, None).await?;
    cx.reply().integer(1);
    Ok(())
}

/// `SETEX key seconds value`, `PSETEX key ms value`.
async fn setex(cx: &mut Cx<'_>, k: &[u8], expiry: Expiry, v: &[u8]) -> Result<(), StoreError> {
    let at = match expiry.at(cx.now_ms()) {
        Ok(at) => at,
        Err(e) => {
            e.reply(cx);
            return Ok(());
        }
    };
    write_values(cx, &[(k, v)], Some(at)).await?;
    cx.reply().simple(b"OK");
    Ok(())
}

/// `GETSET key value`: the old string (nil if none), the new value without TTL.
async fn getset(cx: &mut Cx<'_>, k: &[u8], v: &[u8]) -> Result<(), StoreError> {
    let old = cx.tx.key(cx.db, k, true).await?;
    if old.as_ref().is_some_and(|r| r.kind != kind::STRING) {
        cx.reply().error(errors::WRONGTYPE);
        return Ok(());
    }
    if old.is_some() {
        write_values(cx, &[(k, v)], None).await?;
    } else {
        insert_value(cx, k, v, None).await?;
    }
    match old {
        Some(row) => cx.reply().bulk(row.v.as_deref().unwrap_or_default()),
        None => cx.reply().null(),
    };
    Ok(())
}

/// `GETDEL key`: the string, deleted.
async fn getdel(cx: &mut Cx<'_>, k: &[u8]) -> Result<(), StoreError> {
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

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]`: the string, its TTL changed. The time
/// is checked here, after the key's type: Redis answers a missing key (nil) or one of
/// another type (`WRONGTYPE`) before a bad time.
async fn getex(cx: &mut Cx<'_>, k: &[u8], ttl: GetExTtl<'_>) -> Result<(), StoreError> {
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
    let at = match ttl {
        GetExTtl::Set(v, u) => {
            match Expiry::parse(v, u, parse::INVALID_EXPIRE_GETEX).and_then(|e| e.at(cx.now_ms())) {
                Ok(at) => Some((at, u)),
                Err(e) => {
                    e.reply(cx);
                    return Ok(());
                }
            }
        }
        GetExTtl::Keep | GetExTtl::Persist => None,
    };
    cx.reply().bulk(row.v.as_deref().unwrap_or_default());
    match at {
        Some((at, Unit::ExAt | Unit::PxAt)) if at <= cx.now_ms() => {
            cx.tx.delete_key(cx.db, k, &row).await?;
        }
        Some((at, _)) => set_expire(cx, k, Some(at)).await?,
        None if ttl == GetExTtl::Persist && row.expire_at.is_some() => {
            set_expire(cx, k, None).await?;
        }
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
/// were set, else 0 and none); `args` is the whole request, its pairs counted by the parser.
async fn mset(cx: &mut Cx<'_>, args: Args<'_>, nx: bool) -> Result<(), StoreError> {
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
