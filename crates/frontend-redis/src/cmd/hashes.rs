//! Hashes: `HSET`, `HGET` and the rest of Redis's hash commands. A field is a row of
//! `redis_hash (kid, fh = SHA-256(field), field, v)` under its key's `kid`.
//!
//! SQL (every field found by its hash; IN lists and multi-row inserts padded to a power of
//! two, at most [`crate::store::context::RUN_MAX`] a statement, by repeating the last element):
//! - writes lock the key row first ([`crate::store::Tx::collection`]), then
//!   `HSET`/`HMSET`: `SELECT fh ... WHERE kid = ? AND fh IN (...) FOR UPDATE` (which fields
//!   are new; skipped for a new key), then `INSERT ... VALUES (...), ... ON DUPLICATE KEY
//!   UPDATE v = VALUES(v)`; `HSETNX`, `HINCRBY`, `HINCRBYFLOAT`: a `SELECT v` of the field,
//!   then the same upsert of one row; `HDEL`: `DELETE ... WHERE kid = ? AND fh IN (...)`;
//!   each ends with [`crate::store::Tx::collection_written`] (length, version, an emptied
//!   hash deleted). The key's TTL stays.
//! - `HGET`, `HEXISTS`, `HSTRLEN`: one `SELECT` of the key row `LEFT JOIN` the field;
//!   `HMGET`: the key row, then `fh IN (...)`; `HGETALL`/`HKEYS`/`HVALS`: the key row, then
//!   every field `ORDER BY fh`, written as read ([`crate::store::context::Cx::stream_reply`]); `HLEN`: the key row's `len`.
//! - `HRANDFIELD`: one field at a random `OFFSET`; with a positive count, the whole hash
//!   when the count covers it, else `ORDER BY RAND() LIMIT n`, written as read; with a
//!   negative count, the draws are positions, their distinct ones fetched as a uniform
//!   distinct sample (as `SRANDMEMBER` draws), read up to the client's output limit.
//! - `HSCAN`: `fh >= ? ORDER BY fh LIMIT count + 1`, paged as every `*SCAN`
//!   ([`super::scan`]).
//!
//! Intended differences from redis-server 7.0:
//! - `HGETALL`, `HKEYS`, `HVALS`, `HSCAN` return fields in `fh` order (Redis: unspecified);
//!   `HRANDFIELD` picks differently (random either way).
//! - `HSCAN` honours `COUNT` on any hash (see [`super::scan`]); Redis returns a small
//!   (listpack) hash whole in one call whatever the `COUNT`. Cursors differ in value.
//! - `HRANDFIELD` with a negative count beyond [`RANDFIELD_MAX`] is refused (Redis would
//!   build a reply of that many elements).

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::{Protocol, Reply};
use std::collections::{HashMap, HashSet};

use super::checks::{self, Absent};
use super::longdouble::{self, Ld, Parsed};
use super::rng::Rng;
use super::scan;
use super::sqltext::{in_params, marks, padded, statement, tuples};
use super::{parse_i64, Args};
use crate::errors;
use crate::store::context::{Cx, RUN_MAX};
use crate::store::keys::{hash, kind, KeyRow};
use crate::store::{int, take_bytes, StoreError};

mod parse;
#[cfg(test)]
mod tests;

pub use parse::{All, FieldRead, HashCommand, RandCount, COMMANDS};

const HASH_NOT_INTEGER: &[u8] = b"hash value is not an integer";
const HASH_NOT_FLOAT: &[u8] = b"hash value is not a float";
const TOO_MANY: &[u8] = b"manifold: HRANDFIELD count is too large";

/// Largest negative `HRANDFIELD` count served.
pub const RANDFIELD_MAX: u64 = 1 << 20;

impl HashCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        use parse::{HDel, HIncrBy, HIncrByFloat, HLen, HMGet, HRandField, HScan, HSet, HSetNx};
        match self {
            HSet {
                key,
                pairs,
                count_reply,
            } => hset(cx, key, pairs, count_reply).await,
            HSetNx { key, field, value } => hsetnx(cx, key, field, value).await,
            HashCommand::Field { key, field, read } => field_read(cx, key, field, read).await,
            HMGet { key, fields } => hmget(cx, key, fields).await,
            HashCommand::All { key, what } => get_all(cx, key, what).await,
            HDel { key, fields } => hdel(cx, key, fields).await,
            HIncrBy { key, field, by } => hincrby(cx, key, field, by).await,
            HIncrByFloat { key, field, by } => hincrbyfloat(cx, key, field, by).await,
            HLen { key } => {
                if let Some(row) = checks::read(cx, key, kind::HASH).await? {
                    cx.reply().integer(row.map_or(0, |r| r.len));
                }
                Ok(())
            }
            HRandField { key, count } => hrandfield(cx, key, count).await,
            HScan(scan) => hscan(cx, scan).await,
        }
    }
}

statement! {
    fn exist_in = "SELECT fh FROM {{s}}.redis_hash WHERE kid = ? AND fh IN ({}) FOR UPDATE", |n| marks(n)
}

statement! {
    fn select_in = "SELECT fh, v FROM {{s}}.redis_hash WHERE kid = ? AND fh IN ({})", |n| marks(n)
}

statement! {
    fn delete_in = "DELETE FROM {{s}}.redis_hash WHERE kid = ? AND fh IN ({})", |n| marks(n)
}

statement! {
    fn upsert = "INSERT INTO {{s}}.redis_hash (kid, fh, field, v) VALUES {} \
        ON DUPLICATE KEY UPDATE v = VALUES(v)", |n| tuples("(?, ?, ?, ?)", n)
}

/// The value of field `f` of the hash `row` (no statement for a hash just created).
async fn field_value(
    cx: &mut Cx<'_>,
    row: &KeyRow,
    f: &[u8],
) -> Result<Option<Vec<u8>>, StoreError> {
    if row.len == 0 {
        return Ok(None);
    }
    let mut rows = cx
        .tx
        .rows(
            "SELECT v FROM {s}.redis_hash WHERE kid = ? AND fh = ?",
            &[Param::UInt(row.kid), Param::Bytes(&hash(f))],
        )
        .await?;
    Ok(rows
        .first_mut()
        .and_then(|r| r.first_mut())
        .and_then(take_bytes))
}

/// Writes `pairs` (in order: a later pair of the same field wins) into the hash `kid`.
async fn write_pairs(
    cx: &mut Cx<'_>,
    kid: u64,
    pairs: &[(&[u8], &[u8])],
) -> Result<(), StoreError> {
    for chunk in pairs.chunks(RUN_MAX) {
        let n = padded(chunk.len());
        let hashes: Vec<[u8; 32]> = chunk.iter().map(|(f, _)| hash(f)).collect();
        let mut params = Vec::with_capacity(n * 4);
        for i in 0..n {
            let at = i.min(chunk.len() - 1);
            params.push(Param::UInt(kid));
            params.push(Param::Bytes(&hashes[at]));
            params.push(Param::Bytes(chunk[at].0));
            params.push(Param::Bytes(chunk[at].1));
        }
        cx.tx.exec(upsert(n), &params).await?;
    }
    Ok(())
}

/// The subset of `fhs` (distinct) that are fields of the hash `kid`, locked.
async fn existing(
    cx: &mut Cx<'_>,
    kid: u64,
    fhs: &[[u8; 32]],
) -> Result<HashSet<Vec<u8>>, StoreError> {
    let mut found = HashSet::new();
    for chunk in fhs.chunks(RUN_MAX) {
        let n = padded(chunk.len());
        let params = in_params(Param::UInt(kid), chunk, n);
        for mut row in cx.tx.rows(exist_in(n), &params).await? {
            if let Some(fh) = row.first_mut().and_then(take_bytes) {
                found.insert(fh);
            }
        }
    }
    Ok(found)
}

/// The distinct hashes of `fields`, in first-seen order.
fn distinct_hashes<'a>(fields: impl Iterator<Item = &'a [u8]>) -> Vec<[u8; 32]> {
    let mut seen = HashSet::new();
    fields.map(hash).filter(|h| seen.insert(*h)).collect()
}

/// `HSET key field value [field value ...]` (the count of new fields) and `HMSET` (`OK`).
/// `args` is the whole request (the pairs from argument 2 on, counted by the parser).
async fn hset(
    cx: &mut Cx<'_>,
    k: &[u8],
    args: Args<'_>,
    count_reply: bool,
) -> Result<(), StoreError> {
    let Some(Some(row)) = checks::write(cx, k, kind::HASH, true).await? else {
        return Ok(());
    };
    let pairs: Vec<(&[u8], &[u8])> = (2..args.len())
        .step_by(2)
        .map(|i| (args.get(i), args.get(i + 1)))
        .collect();
    let fhs = distinct_hashes(pairs.iter().map(|(f, _)| *f));
    let new = if row.len == 0 {
        fhs.len()
    } else {
        fhs.len() - existing(cx, row.kid, &fhs).await?.len()
    };
    write_pairs(cx, row.kid, &pairs).await?;
    cx.tx.collection_written(cx.db, k, &row, new as i64).await?;
    if count_reply {
        cx.reply().integer(new as i64);
    } else {
        cx.reply().simple(b"OK");
    }
    Ok(())
}

/// `HSETNX key field value`.
async fn hsetnx(cx: &mut Cx<'_>, k: &[u8], f: &[u8], v: &[u8]) -> Result<(), StoreError> {
    let Some(Some(row)) = checks::write(cx, k, kind::HASH, true).await? else {
        return Ok(());
    };
    if field_value(cx, &row, f).await?.is_some() {
        cx.reply().integer(0);
        return Ok(());
    }
    write_pairs(cx, row.kid, &[(f, v)]).await?;
    cx.tx.collection_written(cx.db, k, &row, 1).await?;
    cx.reply().integer(1);
    Ok(())
}

/// `HGET`, `HEXISTS`, `HSTRLEN`: the key row and the field in one statement.
async fn field_read(
    cx: &mut Cx<'_>,
    k: &[u8],
    f: &[u8],
    read: FieldRead,
) -> Result<(), StoreError> {
    let (kh, fh) = (hash(k), hash(f));
    let sql = if read == FieldRead::Value {
        "SELECT k.type, k.expire_at, h.v FROM {s}.redis_keys k LEFT JOIN {s}.redis_hash h \
         ON h.kid = k.kid AND h.fh = ? WHERE k.db = ? AND k.kh = ?"
    } else {
        "SELECT k.type, k.expire_at, LENGTH(h.v) FROM {s}.redis_keys k LEFT JOIN {s}.redis_hash h \
         ON h.kid = k.kid AND h.fh = ? WHERE k.db = ? AND k.kh = ?"
    };
    let mut rows = cx
        .tx
        .rows(
            sql,
            &[
                Param::Bytes(&fh),
                Param::UInt(u64::from(cx.db)),
                Param::Bytes(&kh),
            ],
        )
        .await?;
    let now = cx.now_ms();
    let found = match rows.first_mut() {
        Some(r) if r.len() >= 3 && int(&r[1]).is_none_or(|at| at > now) => {
            if int(&r[0]) != Some(i64::from(kind::HASH)) {
                cx.reply().error(errors::WRONGTYPE);
                return Ok(());
            }
            std::mem::replace(&mut r[2], Value::Null)
        }
        _ => Value::Null,
    };
    let present = !matches!(found, Value::Null);
    match read {
        FieldRead::Value => match found {
            Value::Null => cx.reply().null(),
            mut v => cx.reply().bulk(&take_bytes(&mut v).unwrap_or_default()),
        },
        FieldRead::Exists => cx.reply().integer(i64::from(present)),
        FieldRead::Length => cx.reply().integer(int(&found).unwrap_or(0)),
    };
    Ok(())
}

/// `HMGET key field [field ...]` (`args`: the whole request, the fields from argument 2 on).
async fn hmget(cx: &mut Cx<'_>, k: &[u8], args: Args<'_>) -> Result<(), StoreError> {
    let Some(row) = checks::read(cx, k, kind::HASH).await? else {
        return Ok(());
    };
    let mut values: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    if let Some(row) = row {
        let fhs = distinct_hashes(args.from(2));
        for chunk in fhs.chunks(RUN_MAX) {
            let n = padded(chunk.len());
            let params = in_params(Param::UInt(row.kid), chunk, n);
            for mut r in cx.tx.rows(select_in(n), &params).await? {
                if r.len() < 2 {
                    continue;
                }
                if let (Some(fh), Some(v)) = (take_bytes(&mut r[0]), take_bytes(&mut r[1])) {
                    values.insert(fh, v);
                }
            }
        }
    }
    cx.reply().array_len(args.len() - 2);
    for f in args.from(2) {
        match values.get(&hash(f)[..]) {
            Some(v) => cx.reply().bulk(v),
            None => cx.reply().null(),
        };
    }
    Ok(())
}

/// `HGETALL` (a map in RESP3), `HKEYS`, `HVALS`: written as the fields are read.
async fn get_all(cx: &mut Cx<'_>, k: &[u8], what: All) -> Result<(), StoreError> {
    let pairs = what == All::Pairs;
    let Some(row) = checks::read(cx, k, kind::HASH).await? else {
        return Ok(());
    };
    let Some(row) = row else {
        if pairs {
            cx.reply().map_len(0);
        } else {
            cx.reply().array_len(0);
        }
        return Ok(());
    };
    let sql = match what {
        All::Pairs => "SELECT field, v FROM {s}.redis_hash WHERE kid = ? ORDER BY fh",
        All::Fields => "SELECT field FROM {s}.redis_hash WHERE kid = ? ORDER BY fh",
        All::Values => "SELECT v FROM {s}.redis_hash WHERE kid = ? ORDER BY fh",
    };
    let header = |r: &mut Reply<'_>, n: usize| {
        if pairs {
            r.map_len(n);
        } else {
            r.array_len(n);
        }
    };
    cx.stream_reply(sql, &[Param::UInt(row.kid)], header, bulk_columns)
        .await?;
    Ok(())
}

/// Writes every column of `row` as a bulk string: one unit of a header.
pub(crate) fn bulk_columns(reply: &mut Reply<'_>, mut row: Vec<Value>) -> usize {
    for col in &mut row {
        reply.bulk(&take_bytes(col).unwrap_or_default());
    }
    1
}

/// `HDEL key field [field ...]`: the count deleted; the last field takes the key along
/// (`args`: the whole request, the fields from argument 2 on).
async fn hdel(cx: &mut Cx<'_>, k: &[u8], args: Args<'_>) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::HASH, Absent::Zero).await? else {
        return Ok(());
    };
    let fhs = distinct_hashes(args.from(2));
    let mut deleted = 0u64;
    for chunk in fhs.chunks(RUN_MAX) {
        let n = padded(chunk.len());
        let params = in_params(Param::UInt(row.kid), chunk, n);
        deleted += cx.tx.affected(delete_in(n), &params).await?;
    }
    if deleted > 0 {
        cx.tx
            .collection_written(cx.db, k, &row, -(deleted as i64))
            .await?;
    }
    cx.reply().integer(deleted as i64);
    Ok(())
}

/// `HINCRBY key field increment`.
async fn hincrby(cx: &mut Cx<'_>, k: &[u8], f: &[u8], incr: i64) -> Result<(), StoreError> {
    let Some(Some(row)) = checks::write(cx, k, kind::HASH, true).await? else {
        return Ok(());
    };
    let old = field_value(cx, &row, f).await?;
    let current = match &old {
        None => 0,
        Some(v) => {
            let Some(n) = parse_i64(v) else {
                cx.reply().error(HASH_NOT_INTEGER);
                return Ok(());
            };
            n
        }
    };
    let Some(value) = current.checked_add(incr) else {
        cx.reply().error(errors::INCR_OVERFLOW);
        return Ok(());
    };
    let text = value.to_string();
    write_pairs(cx, row.kid, &[(f, text.as_bytes())]).await?;
    cx.tx
        .collection_written(cx.db, k, &row, i64::from(old.is_none()))
        .await?;
    cx.reply().integer(value);
    Ok(())
}

/// `HINCRBYFLOAT key field increment`, in `long double` as redis-server computes it.
async fn hincrbyfloat(cx: &mut Cx<'_>, k: &[u8], f: &[u8], incr: Parsed) -> Result<(), StoreError> {
    let Some(Some(row)) = checks::write(cx, k, kind::HASH, true).await? else {
        return Ok(());
    };
    let old = field_value(cx, &row, f).await?;
    let current = match &old {
        None => Parsed::Finite(Ld::default()),
        Some(v) => {
            let Some(x) = longdouble::parse(v) else {
                cx.reply().error(HASH_NOT_FLOAT);
                return Ok(());
            };
            x
        }
    };
    let Some(text) = longdouble::incr(current, incr) else {
        cx.reply().error(errors::INCR_NAN_OR_INF);
        return Ok(());
    };
    write_pairs(cx, row.kid, &[(f, &text)]).await?;
    cx.tx
        .collection_written(cx.db, k, &row, i64::from(old.is_none()))
        .await?;
    cx.reply().bulk(&text);
    Ok(())
}

/// `HRANDFIELD key [count [WITHVALUES]]`. A negative count past [`RANDFIELD_MAX`] is
/// refused here, after the key is read (an absent key answers an empty array first).
async fn hrandfield(cx: &mut Cx<'_>, k: &[u8], count: Option<RandCount>) -> Result<(), StoreError> {
    let Some(RandCount {
        count: l,
        with_values: values,
    }) = count
    else {
        return checks::random_one(
            cx,
            k,
            kind::HASH,
            "SELECT field FROM {s}.redis_hash WHERE kid = ? ORDER BY fh LIMIT 1 OFFSET ?",
        )
        .await;
    };
    let Some(row) = checks::read_or(cx, k, kind::HASH, Absent::EmptyArray).await? else {
        return Ok(());
    };
    let count = l.unsigned_abs();
    if count == 0 {
        cx.reply().array_len(0);
        return Ok(());
    }
    let repeat = l < 0;
    if repeat && count > RANDFIELD_MAX {
        cx.reply().error(TOO_MANY);
        return Ok(());
    }
    let size = row.len.max(0) as u64;
    let resp3 = cx.proto == Protocol::Resp3;
    if !repeat {
        // Distinct fields, as many as the hash has at most: written as they are read.
        let (sql, limit) = match (count >= size, values) {
            (true, true) => (
                "SELECT field, v FROM {s}.redis_hash WHERE kid = ? ORDER BY fh",
                None,
            ),
            (true, false) => (
                "SELECT field FROM {s}.redis_hash WHERE kid = ? ORDER BY fh",
                None,
            ),
            (false, true) => (
                "SELECT field, v FROM {s}.redis_hash WHERE kid = ? ORDER BY RAND() LIMIT ?",
                Some(Param::UInt(count)),
            ),
            (false, false) => (
                "SELECT field FROM {s}.redis_hash WHERE kid = ? ORDER BY RAND() LIMIT ?",
                Some(Param::UInt(count)),
            ),
        };
        let params = [Param::UInt(row.kid), limit.unwrap_or(Param::Null)];
        let params = if limit.is_some() {
            &params[..]
        } else {
            &params[..1]
        };
        let header = |r: &mut Reply<'_>, n: usize| {
            r.array_len(if values && !resp3 { n * 2 } else { n });
        };
        let element = |r: &mut Reply<'_>, row: Vec<Value>| {
            if values && resp3 {
                r.array_len(2);
            }
            bulk_columns(r, row)
        };
        cx.stream_reply(sql, params, header, element).await?;
        return Ok(());
    }
    // With repetition (at most `RANDFIELD_MAX` draws), as `SRANDMEMBER` draws: each draw
    // is a position in the hash, positions seen before reuse their field; the distinct ones
    // are fetched as a uniform distinct sample, each written at least once, so they are
    // read only up to the client's output limit ([`Cx::rows_for_reply`]).
    let mut rng = Rng::new();
    let mut slot_of: HashMap<u64, u32> = HashMap::new();
    let mut slots = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let at = rng.below(size.max(1));
        let next = slot_of.len() as u32;
        slots.push(*slot_of.entry(at).or_insert(next));
    }
    let sql = if values {
        "SELECT field, v FROM {s}.redis_hash WHERE kid = ? ORDER BY RAND() LIMIT ?"
    } else {
        "SELECT field FROM {s}.redis_hash WHERE kid = ? ORDER BY RAND() LIMIT ?"
    };
    // A RESP3 pair is `*2\r\n` around its field and value.
    let pair_head = if values && resp3 { 4 } else { 0 };
    let (mut rows, whole) = cx
        .rows_for_reply(
            sql,
            &[Param::UInt(row.kid), Param::UInt(slot_of.len() as u64)],
            pair_head,
        )
        .await?;
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = rows
        .iter_mut()
        .filter(|r| !r.is_empty())
        .map(|r| {
            let f = take_bytes(&mut r[0]).unwrap_or_default();
            let v = r.get_mut(1).and_then(take_bytes).unwrap_or_default();
            (f, v)
        })
        .collect();
    drop(rows);
    if pairs.is_empty() {
        cx.reply().array_len(0);
        return Ok(());
    }
    let mut reply = cx.reply();
    if values && !resp3 {
        reply.array_len(slots.len() * 2);
    } else {
        reply.array_len(slots.len());
    }
    for s in slots {
        if reply.over_limit() {
            break;
        }
        // Read only up to the output limit: the draws of the fields left unread are left out
        // (those read, each written once, pass the limit: the client is closed).
        let s = s as usize;
        if s >= pairs.len() && !whole {
            continue;
        }
        let (f, v) = &pairs[s.min(pairs.len() - 1)];
        if values && resp3 {
            reply.array_len(2);
        }
        reply.bulk(f);
        if values {
            reply.bulk(v);
        }
    }
    Ok(())
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`.
async fn hscan(cx: &mut Cx<'_>, scan: scan::CollectionScan<'_>) -> Result<(), StoreError> {
    let Some(page) = scan::collection_scan(
        cx,
        scan,
        kind::HASH,
        "SELECT fh, field, v FROM {s}.redis_hash WHERE kid = ? AND fh >= ? ORDER BY fh LIMIT ?",
    )
    .await?
    else {
        return Ok(());
    };
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(page.rows.len());
    for mut r in page.rows {
        let (Some(f), Some(v)) = (
            r.get_mut(1).and_then(take_bytes),
            r.get_mut(2).and_then(take_bytes),
        ) else {
            continue;
        };
        if page.pattern.as_ref().is_none_or(|g| g.matches(&f)) {
            out.push((f, v));
        }
    }
    let mut reply = cx.reply();
    scan::start_reply(&mut reply, page.next, out.len() * 2);
    for (f, v) in &out {
        reply.bulk(f).bulk(v);
    }
    Ok(())
}
