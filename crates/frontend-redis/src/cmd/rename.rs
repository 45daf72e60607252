//! Key commands that move, copy or drop whole keys: `RENAME`, `RENAMENX`, `COPY`, `MOVE`,
//! `FLUSHDB`, `FLUSHALL` (listed in [`super::keys`]'s table).
//!
//! - `RENAME` moves the key's row: its hash and name change, its `kid` stays, so the
//!   members (rows under that `kid`) and the TTL go with it, in one `UPDATE`. A key at the
//!   new name is deleted first, members included. The moved row's `version` grows; a
//!   `WATCH` tells keys apart by `kid` and `version` together.
//! - `COPY` inserts a new row (a new `kid`) with the source's type, value, TTL and list
//!   bounds, then copies the members with one `INSERT ... SELECT` per table.
//! - `FLUSHDB`/`FLUSHALL` delete the members of the database's keys, then the keys, inside
//!   the batch's transaction (`ASYNC` and `SYNC` do the same).

use manifold_backend::Param;

use crate::store::context::Cx;
use crate::store::keys::{hash, kind};
use crate::store::StoreError;

/// `RENAME` of a missing key (`shared.nokeyerr`).
pub const NO_SUCH_KEY: &[u8] = b"no such key";
/// `COPY` onto itself (`shared.sameobjecterr`).
pub const SAME_OBJECT: &[u8] = b"source and destination objects are the same";
/// An integer argument outside C's `int` (`getIntFromObjectOrReply`).
pub const INT_RANGE: &[u8] =
    b"value is out of range, value must between -2147483648 and 2147483647";

/// `INSERT INTO t (kid, <columns>) SELECT ?, <columns> FROM t WHERE kid = ?`: copies the
/// members of one key (the second `?`) to another (the first).
macro_rules! copy_members {
    ($table:literal, $columns:literal) => {
        concat!(
            "INSERT INTO {s}.",
            $table,
            " (kid, ",
            $columns,
            ") SELECT ?, ",
            $columns,
            " FROM {s}.",
            $table,
            " WHERE kid = ?"
        )
    };
}

/// The member copies, one per table; the column lists (every column but `kid`) are here.
const COPY_HASH: &str = copy_members!("redis_hash", "fh, field, v");
const COPY_SET: &str = copy_members!("redis_set", "mh, member");
const COPY_ZSET: &str = copy_members!("redis_zset", "mh, member, score, sk");
const COPY_LIST: &str = copy_members!("redis_list", "idx, v");
const COPY_STREAM: &str = copy_members!("redis_stream", "ms, seq, fields");
/// A stream's state and consumer groups, copied after its entries.
const COPY_STREAM_STATE: [&str; 4] = [
    copy_members!(
        "redis_stream_meta",
        "last_ms, last_seq, max_deleted_ms, max_deleted_seq, entries_added"
    ),
    copy_members!(
        "redis_stream_group",
        "gh, name, last_ms, last_seq, entries_read"
    ),
    copy_members!("redis_stream_consumer", "gh, ch, name, seen_ms"),
    copy_members!(
        "redis_stream_pending",
        "gh, ms, seq, ch, consumer, delivered_ms, deliveries"
    ),
];

/// The statement copying the members of a key of type `t` (`None`: a string).
fn copy_sql(t: u8) -> Option<&'static str> {
    match t {
        kind::HASH => Some(COPY_HASH),
        kind::SET => Some(COPY_SET),
        kind::ZSET => Some(COPY_ZSET),
        kind::LIST => Some(COPY_LIST),
        kind::STREAM => Some(COPY_STREAM),
        _ => None,
    }
}

/// `RENAME key newkey` (`nx`: `RENAMENX`).
pub async fn rename(cx: &mut Cx<'_>, src: &[u8], dst: &[u8], nx: bool) -> Result<(), StoreError> {
    let db = cx.db;
    let Some(row) = cx.tx.key_meta(db, src, true).await? else {
        cx.reply().error(NO_SUCH_KEY);
        return Ok(());
    };
    if src == dst {
        if nx {
            cx.reply().integer(0);
        } else {
            cx.reply().simple(b"OK");
        }
        return Ok(());
    }
    if let Some(old) = cx.tx.key_meta(db, dst, true).await? {
        if nx {
            cx.reply().integer(0);
            return Ok(());
        }
        cx.tx.delete_key_quietly(db, dst, &old).await?;
    }
    let kh = hash(dst);
    cx.tx
        .exec(
            "UPDATE {s}.redis_keys SET kh = ?, k = ?, version = version + 1 WHERE kid = ?",
            &[Param::Bytes(&kh), Param::Bytes(dst), Param::UInt(row.kid)],
        )
        .await?;
    if wakes_waiters(row.kind) {
        // A list, stream or sorted set arrived at `dst`: clients blocked on it are woken,
        // as a push (or `XADD`, `ZADD`) wakes them.
        cx.tx.note_ready(db, dst, row.kind);
    }
    if nx {
        cx.reply().integer(1);
    } else {
        cx.reply().simple(b"OK");
    }
    Ok(())
}

/// `COPY source destination [DB n] [REPLACE]` (`db`: the target database, `None` for the
/// client's, which the same-object check needs).
pub async fn copy(
    cx: &mut Cx<'_>,
    src: &[u8],
    dst: &[u8],
    db: Option<u8>,
    replace: bool,
) -> Result<(), StoreError> {
    let target = db.unwrap_or(cx.db);
    if target == cx.db && src == dst {
        cx.reply().error(SAME_OBJECT);
        return Ok(());
    }
    // Locked: the members stay as they are while they are copied.
    let Some(row) = cx.tx.key(cx.db, src, true).await? else {
        cx.reply().integer(0);
        return Ok(());
    };
    if let Some(old) = cx.tx.key_meta(target, dst, true).await? {
        if !replace {
            cx.reply().integer(0);
            return Ok(());
        }
        cx.tx.delete_key_quietly(target, dst, &old).await?;
    }
    let kh = hash(dst);
    let done = cx
        .tx
        .exec(
            "INSERT INTO {s}.redis_keys (db, kh, k, type, v, expire_at, len, lhead, ltail) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            &[
                Param::UInt(u64::from(target)),
                Param::Bytes(&kh),
                Param::Bytes(dst),
                Param::UInt(u64::from(row.kind)),
                row.v.as_deref().map_or(Param::Null, Param::Bytes),
                row.expire_at.map_or(Param::Null, Param::Int),
                Param::Int(row.len),
                Param::Int(row.lhead),
                Param::Int(row.ltail),
            ],
        )
        .await?;
    if let Some(sql) = copy_sql(row.kind) {
        cx.tx
            .exec(
                sql,
                &[Param::UInt(done.last_insert_id), Param::UInt(row.kid)],
            )
            .await?;
    }
    if row.kind == kind::STREAM {
        for sql in COPY_STREAM_STATE {
            cx.tx
                .exec(
                    sql,
                    &[Param::UInt(done.last_insert_id), Param::UInt(row.kid)],
                )
                .await?;
        }
    }
    if wakes_waiters(row.kind) {
        cx.tx.note_ready(target, dst, row.kind);
    }
    cx.reply().integer(1);
    Ok(())
}

/// `MOVE key db`: the key's row changes database (its `kid`, members and TTL go with it),
/// unless a live key of that name is there already (`0`, as an absent source).
pub async fn move_key(cx: &mut Cx<'_>, key: &[u8], target: u8) -> Result<(), StoreError> {
    if target == cx.db {
        cx.reply().error(SAME_OBJECT);
        return Ok(());
    }
    let Some(row) = cx.tx.key_meta(cx.db, key, true).await? else {
        cx.reply().integer(0);
        return Ok(());
    };
    if cx.tx.key_meta(target, key, true).await?.is_some() {
        cx.reply().integer(0);
        return Ok(());
    }
    cx.tx
        .exec(
            "UPDATE {s}.redis_keys SET db = ?, version = version + 1 WHERE kid = ?",
            &[Param::UInt(u64::from(target)), Param::UInt(row.kid)],
        )
        .await?;
    if wakes_waiters(row.kind) {
        cx.tx.note_ready(target, key, row.kind);
    }
    cx.reply().integer(1);
    Ok(())
}

/// `SWAPDB a b`: every key row of `a` goes to `b` and every one of `b` to `a`, by way of
/// database 255 (the primary key `(db, kh)` would collide midway); versions are bumped
/// with it. Clients blocked on a key of either database whose new value serves them are
/// woken, as Redis scans both databases for ready keys. Its cost is the rows of both
/// databases, in one transaction (Redis swaps two pointers).
pub async fn swap_databases(cx: &mut Cx<'_>, a: u8, b: u8) -> Result<(), StoreError> {
    if a != b {
        // One SWAPDB at a time: two would each park rows at 255 and deadlock there.
        const ONE_AT_A_TIME: &str =
            "INSERT INTO {s}.redis_meta (name, value) VALUES ('swapdb', 1) \
                                     ON DUPLICATE KEY UPDATE value = value + 1";
        const MOVE: &str = "UPDATE {s}.redis_keys SET db = ?, version = version + 1 WHERE db = ?";
        cx.tx.exec(ONE_AT_A_TIME, &[]).await?;
        for (to, from) in [(255, a), (a, b), (b, 255)] {
            let params = [Param::UInt(u64::from(to)), Param::UInt(u64::from(from))];
            cx.tx.exec(MOVE, &params).await?;
        }
        // Every key of both databases changed: a client tracking keys forgets them all
        // (Redis 7.2 does so too; 7.0 left them stale).
        cx.tx.note_flush();
        for db in [a, b] {
            for key in cx.tx.blocked_keys(db) {
                if let Some(row) = cx.tx.key_meta(db, &key, false).await? {
                    if wakes_waiters(row.kind) {
                        cx.tx.note_ready(db, &key, row.kind);
                    }
                }
            }
        }
    }
    cx.reply().simple(b"OK");
    Ok(())
}

/// The members of the keys of one database, then those keys.
const FLUSH_DB: [&str; 10] = [
    "DELETE FROM {s}.redis_hash WHERE kid IN (SELECT kid FROM {s}.redis_keys WHERE db = ?)",
    "DELETE FROM {s}.redis_set WHERE kid IN (SELECT kid FROM {s}.redis_keys WHERE db = ?)",
    "DELETE FROM {s}.redis_zset WHERE kid IN (SELECT kid FROM {s}.redis_keys WHERE db = ?)",
    "DELETE FROM {s}.redis_list WHERE kid IN (SELECT kid FROM {s}.redis_keys WHERE db = ?)",
    "DELETE FROM {s}.redis_stream WHERE kid IN (SELECT kid FROM {s}.redis_keys WHERE db = ?)",
    "DELETE FROM {s}.redis_stream_meta WHERE kid IN (SELECT kid FROM {s}.redis_keys WHERE db = ?)",
    "DELETE FROM {s}.redis_stream_group WHERE kid IN (SELECT kid FROM {s}.redis_keys WHERE db = ?)",
    "DELETE FROM {s}.redis_stream_consumer WHERE kid IN (SELECT kid FROM {s}.redis_keys WHERE db = ?)",
    "DELETE FROM {s}.redis_stream_pending WHERE kid IN (SELECT kid FROM {s}.redis_keys WHERE db = ?)",
    "DELETE FROM {s}.redis_keys WHERE db = ?",
];

/// Every member, then every key (`DELETE`, not `TRUNCATE`: it stays in the transaction).
const FLUSH_ALL: [&str; 10] = [
    "DELETE FROM {s}.redis_hash",
    "DELETE FROM {s}.redis_set",
    "DELETE FROM {s}.redis_zset",
    "DELETE FROM {s}.redis_list",
    "DELETE FROM {s}.redis_stream",
    "DELETE FROM {s}.redis_stream_meta",
    "DELETE FROM {s}.redis_stream_group",
    "DELETE FROM {s}.redis_stream_consumer",
    "DELETE FROM {s}.redis_stream_pending",
    "DELETE FROM {s}.redis_keys",
];

/// `FLUSHDB [ASYNC|SYNC]` (`all`: `FLUSHALL [ASYNC|SYNC]`).
/// (The mode is checked by the parser.)
pub async fn flush(cx: &mut Cx<'_>, all: bool) -> Result<(), StoreError> {
    if all {
        for sql in FLUSH_ALL {
            cx.tx.exec(sql, &[]).await?;
        }
    } else {
        let db = u64::from(cx.db);
        for sql in FLUSH_DB {
            cx.tx.exec(sql, &[Param::UInt(db)]).await?;
        }
    }
    cx.reply().simple(b"OK");
    Ok(())
}

/// Whether a key of this type arriving somewhere serves clients blocked on that key (Redis
/// signals the key ready): lists (`BLPOP`...), streams (`XREAD`/`XREADGROUP BLOCK`) and
/// sorted sets (`BZPOPMIN`...).
fn wakes_waiters(t: u8) -> bool {
    t == kind::LIST || t == kind::STREAM || t == kind::ZSET
}
