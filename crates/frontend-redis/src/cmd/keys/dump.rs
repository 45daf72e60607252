//! `DUMP key` and `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME s]
//! [FREQ f]`: a value as Redis's serialized payload ([`super::rdb`]), so keys move between
//! redis-server and the door both ways.
//!
//! - `DUMP` reads the key's members (not locked, as any read) into the payload, in the
//!   plainest encodings redis-server 7.0 loads: `STRING`, `LIST`, `SET`, `ZSET_2`, `HASH`
//!   (redis-server converts them to its own on `RESTORE`); a stream in Redis 7.0's own
//!   `STREAM_LISTPACKS_2`, its groups, consumers and pending entries with it
//!   ([`crate::cmd::streams::dump`]).
//! - `RESTORE` checks as `restoreCommand` does and in its order: the options (before any
//!   read), `BUSYKEY` without `REPLACE`, the TTL, the footer (version, CRC-64), the value.
//!   The value is decoded whole in manifold's memory (4 times `proto-max-bulk-len` at most,
//!   elements counted with their cost: [`rdb::Budget`]) before anything is written, then written as one
//!   new key (a new `kid`) with its members in multi-row inserts, in the batch's
//!   transaction. A TTL already past (`ABSTTL`) writes nothing; with `REPLACE` it deletes
//!   the key that was there (a `del` event, as Redis). `IDLETIME` and `FREQ` are checked
//!   and ignored: the door keeps no access times or counters (nothing is evicted).

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use std::ops::ControlFlow;

use super::rdb::{self, rdb_type, Writer};
use crate::cmd::sqltext::{insert_rows, statement, tuples};
use crate::cmd::typed::{integer, DataCommand, ParseError, SYNTAX};
use crate::cmd::zsets::score;
use crate::cmd::Args;
use crate::store::context::Cx;
use crate::store::keys::{hash, kind};
use crate::store::{double, int, take_bytes, StoreError};

/// `RESTORE` onto a key that exists, without `REPLACE` (`shared.busykeyerr`).
pub const BUSYKEY: &[u8] = b"-BUSYKEY Target key name already exists.";
const BAD_TTL: &[u8] = b"Invalid TTL value, must be >= 0";
const BAD_IDLETIME: &[u8] = b"Invalid IDLETIME value, must be >= 0";
const BAD_FREQ: &[u8] = b"Invalid FREQ value, must be >= 0 and <= 255";

/// `RESTORE`'s arguments: the TTL and the payload are checked when it runs (after the
/// `BUSYKEY` check, as Redis).
#[derive(Debug, PartialEq)]
pub struct Restore<'a> {
    pub key: &'a [u8],
    pub ttl: &'a [u8],
    pub payload: &'a [u8],
    pub replace: bool,
    pub absttl: bool,
}

/// `RESTORE`'s options, in `restoreCommand`'s order of checks: `IDLETIME` and `FREQ`
/// exclude each other (the second is a syntax error), each needs its value.
pub fn parse_restore(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (false, false);
    let mut j = 4;
    while j < args.len() {
        let a = args.get(j);
        let more = j + 1 < args.len();
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"absttl") {
            absttl = true;
        } else if a.eq_ignore_ascii_case(b"idletime") && more && !freq {
            if integer(args.get(j + 1))? < 0 {
                return Err(ParseError::Text(BAD_IDLETIME));
            }
            idle = true;
            j += 1;
        } else if a.eq_ignore_ascii_case(b"freq") && more && !idle {
            if !(0..=255).contains(&integer(args.get(j + 1))?) {
                return Err(ParseError::Text(BAD_FREQ));
            }
            freq = true;
            j += 1;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    Ok(super::parse::Restore(Restore {
        key: args.get(1),
        ttl: args.get(2),
        payload: args.get(3),
        replace,
        absttl,
    })
    .into())
}

/// `DUMP key`: the payload, or a null for a missing key.
pub async fn dump(cx: &mut Cx<'_>, key: &[u8]) -> Result<(), StoreError> {
    let Some(row) = cx.tx.key(cx.db, key, false).await? else {
        cx.reply().null();
        return Ok(());
    };
    let (rdb_kind, sql): (u8, &str) = match row.kind {
        kind::STRING => {
            let mut w = Writer::new(rdb_type::STRING);
            w.string(row.v.as_deref().unwrap_or_default());
            cx.reply().bulk(&w.finish(0));
            return Ok(());
        }
        kind::LIST => (
            rdb_type::LIST,
            "SELECT v FROM {s}.redis_list WHERE kid = ? ORDER BY idx",
        ),
        kind::SET => (
            rdb_type::SET,
            "SELECT member FROM {s}.redis_set WHERE kid = ?",
        ),
        kind::ZSET => (
            rdb_type::ZSET_2,
            "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ?",
        ),
        kind::HASH => (
            rdb_type::HASH,
            "SELECT field, v FROM {s}.redis_hash WHERE kid = ?",
        ),
        _ => return crate::cmd::streams::dump(cx, &row).await,
    };
    // The payload is built as the rows are read; past what the client's output limit
    // leaves, the read stops and the (partial) reply passes the limit: the client is
    // closed without it.
    let budget = cx.out_limit.saturating_sub(cx.out.len());
    let mut w = Writer::new(rdb_kind);
    w.count_ahead();
    let mut count = 0u64;
    let zset = rdb_kind == rdb_type::ZSET_2;
    cx.tx
        .exec_each(sql, &[Param::UInt(row.kid)], |mut r: Vec<Value>| {
            for (i, col) in r.iter_mut().enumerate() {
                if zset && i == 1 {
                    break;
                }
                w.string(&take_bytes(col).unwrap_or_default());
            }
            if zset {
                let sk = r.get(2).and_then(int).unwrap_or(0);
                w.double(score::from_columns(r.get(1).and_then(double), sk));
            }
            count += 1;
            if w.size() > budget {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await?;
    cx.reply().bulk(&w.finish(count));
    Ok(())
}

/// `RESTORE`.
pub async fn restore(cx: &mut Cx<'_>, r: Restore<'_>) -> Result<(), StoreError> {
    let db = cx.db;
    let old = cx.tx.key_meta(db, r.key, true).await?;
    if old.is_some() && !r.replace {
        cx.reply().error(BUSYKEY);
        return Ok(());
    }
    let ttl = match integer(r.ttl) {
        Ok(t) if t < 0 => {
            cx.reply().error(BAD_TTL);
            return Ok(());
        }
        Ok(t) => t,
        Err(e) => {
            cx.reply().error(&e.text());
            return Ok(());
        }
    };
    // The decoded value may take 4 times `proto-max-bulk-len` (what one argument may be).
    let limit = crate::cmd::strings::max_value_len().saturating_mul(4);
    let value = match rdb::decode(r.payload, limit) {
        Ok(v) => v,
        Err(refused) => {
            cx.reply().error(refused.text());
            return Ok(());
        }
    };
    let now = cx.now_ms();
    let expire_at = match ttl {
        0 => None,
        t if r.absttl => Some(t),
        t => Some(t.saturating_add(now)),
    };
    if expire_at.is_some_and(|at| at <= now) {
        // Already expired: nothing is created; the key replaced is deleted (its `del`).
        if let Some(old) = old {
            cx.tx.delete_key(db, r.key, &old).await?;
        }
        cx.reply().simple(b"OK");
        return Ok(());
    }
    if let Some(old) = old {
        cx.tx.delete_key_quietly(db, r.key, &old).await?;
    }
    write_value(cx, r.key, &value, expire_at).await?;
    cx.reply().simple(b"OK");
    Ok(())
}

statement! {
    fn insert_list = "INSERT INTO {{s}}.redis_list (kid, idx, v) VALUES {}", |n| tuples("(?, ?, ?)", n)
}
statement! {
    fn insert_set = "INSERT INTO {{s}}.redis_set (kid, mh, member) VALUES {}", |n| tuples("(?, ?, ?)", n)
}
statement! {
    fn insert_zset = "INSERT INTO {{s}}.redis_zset (kid, mh, member, score, sk) VALUES {}", |n| tuples("(?, ?, ?, ?, ?)", n)
}
statement! {
    fn insert_hash = "INSERT INTO {{s}}.redis_hash (kid, fh, field, v) VALUES {}", |n| tuples("(?, ?, ?, ?)", n)
}

/// Writes `value` as the new key `k` (absent now) of the client's database.
async fn write_value(
    cx: &mut Cx<'_>,
    k: &[u8],
    value: &rdb::Value,
    expire_at: Option<i64>,
) -> Result<(), StoreError> {
    let (t, v, len) = match value {
        rdb::Value::String(s) => (kind::STRING, Some(&s[..]), 0),
        rdb::Value::List(l) => (kind::LIST, None, l.len()),
        rdb::Value::Set(s) => (kind::SET, None, s.len()),
        rdb::Value::ZSet(z) => (kind::ZSET, None, z.len()),
        rdb::Value::Hash(h) => (kind::HASH, None, h.len()),
        rdb::Value::Stream(s) => (kind::STREAM, None, s.entries.len()),
    };
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let ltail = if t == kind::LIST { len } else { 0 };
    let kh = hash(k);
    let done = cx
        .tx
        .exec(
            "INSERT INTO {s}.redis_keys (db, kh, k, type, v, expire_at, len, lhead, ltail) \
             VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)",
            &[
                Param::UInt(u64::from(cx.db)),
                Param::Bytes(&kh),
                Param::Bytes(k),
                Param::UInt(u64::from(t)),
                v.map_or(Param::Null, Param::Bytes),
                expire_at.map_or(Param::Null, Param::Int),
                Param::Int(len),
                Param::Int(ltail),
            ],
        )
        .await?;
    let kid = done.last_insert_id;
    match value {
        rdb::Value::String(_) => {}
        rdb::Value::List(items) => {
            let rows: Vec<_> = items.iter().enumerate().collect();
            insert_rows(
                cx,
                &rows,
                |(_, v)| v.len(),
                3,
                insert_list,
                |(i, v), p| {
                    p.push(Param::UInt(kid));
                    p.push(Param::Int(*i as i64));
                    p.push(Param::Bytes(v));
                },
            )
            .await?;
        }
        rdb::Value::Set(items) => {
            let rows: Vec<_> = items.iter().map(|m| (hash(m), m)).collect();
            insert_rows(
                cx,
                &rows,
                |(_, m)| m.len(),
                3,
                insert_set,
                |(h, m), p| {
                    p.push(Param::UInt(kid));
                    p.push(Param::Bytes(h));
                    p.push(Param::Bytes(m));
                },
            )
            .await?;
        }
        rdb::Value::ZSet(items) => {
            let rows: Vec<_> = items.iter().map(|(m, s)| (hash(m), m, *s)).collect();
            insert_rows(
                cx,
                &rows,
                |(_, m, _)| m.len(),
                5,
                insert_zset,
                |(h, m, s), p| {
                    p.push(Param::UInt(kid));
                    p.push(Param::Bytes(h));
                    p.push(Param::Bytes(m));
                    p.push(score::stored(*s).map_or(Param::Null, Param::Double));
                    p.push(Param::Int(score::order_key(*s)));
                },
            )
            .await?;
        }
        rdb::Value::Hash(items) => {
            let rows: Vec<_> = items.iter().map(|(f, v)| (hash(f), f, v)).collect();
            insert_rows(
                cx,
                &rows,
                |(_, f, v)| f.len() + v.len(),
                4,
                insert_hash,
                |(h, f, v), p| {
                    p.push(Param::UInt(kid));
                    p.push(Param::Bytes(h));
                    p.push(Param::Bytes(f));
                    p.push(Param::Bytes(v));
                },
            )
            .await?;
        }
        rdb::Value::Stream(s) => {
            crate::cmd::streams::restore(cx, kid, s).await?;
            // Clients blocked on `k` (`XREAD`...) are served once this commits.
            cx.tx.note_push(cx.db, k);
        }
    }
    if t == kind::LIST || t == kind::ZSET {
        // Clients blocked on `k` (`BLPOP`, `BZPOPMIN`...) are served once this commits.
        cx.tx.note_ready(cx.db, k, t);
    }
    Ok(())
}
