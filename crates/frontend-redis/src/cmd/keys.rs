//! Commands on keys of any type: `DEL`, `UNLINK`, `EXISTS`, `TYPE`, `TOUCH`, `DBSIZE`,
//! `KEYS`, `SCAN`, `RANDOMKEY` here; `RENAME`, `RENAMENX`, `COPY`, `FLUSHDB`, `FLUSHALL` in
//! [`super::rename`]; `DUMP`, `RESTORE` in [`dump`]; `SORT`, `SORT_RO` in [`sort`]. Every one
//! works on the client's `SELECT`ed database (the `db` column).
//!
//! `SCAN` iterates as every `*SCAN` does ([`super::scan`]): in the order of the keys'
//! SHA-256 (`kh`, the index's order).
//!
//! Costs: `KEYS`, `DBSIZE` read every row of the database (its index range); `SCAN` reads
//! `COUNT` + 1 rows of the index per call; `RANDOMKEY` one row at a random hash.
//!
//! Intended differences from Redis 7.0:
//! - `SCAN`'s cursors are other numbers than Redis's (its order is the hashes', not the
//!   hash table's), and a page holds `COUNT` keys before `MATCH`/`TYPE` filter them (at most
//!   10000 per call); the set of keys an iteration returns is Redis's;
//! - `KEYS` returns the keys in hash order, Redis in its table's order (both unspecified);
//! - `DBSIZE` counts live keys only; Redis counts the expired keys it did not reclaim yet;
//! - `RANDOMKEY` draws among the hashes: not every key with the same chance (as Redis's
//!   draw is not either).

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::Reply;

use super::glob::Glob;
use super::scan::{cursor_bound, page_len, split_page, start_reply, ScanOptions};
use crate::store::context::Cx;
use crate::store::keys::type_name;
use crate::store::{int, take_bytes, StoreError};

pub mod dump;
pub mod object;
mod parse;
pub mod rdb;
pub mod sort;
#[cfg(test)]
mod tests;

pub use parse::{KeyCommand, COMMANDS};

impl KeyCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        use parse::{
            Copy, DbSize, Del, Dump, Exists, Flush, Keys, Move, RandomKey, Rename, Restore, Scan,
            SwapDb, Type,
        };
        match self {
            Del { keys } => {
                let mut n = 0;
                for k in keys.from(1) {
                    if let Some(row) = cx.tx.key_meta(cx.db, k, true).await? {
                        cx.tx.delete_key(cx.db, k, &row).await?;
                        n += 1;
                    }
                }
                cx.reply().integer(n);
            }
            Exists { keys } => {
                let mut n = 0;
                for k in keys.from(1) {
                    if cx.tx.key_meta(cx.db, k, false).await?.is_some() {
                        n += 1;
                    }
                }
                cx.reply().integer(n);
            }
            Type { key } => {
                let t = cx
                    .tx
                    .key_meta(cx.db, key, false)
                    .await?
                    .map_or("none", |r| type_name(r.kind));
                cx.reply().simple(t.as_bytes());
            }
            DbSize => dbsize(cx).await?,
            Keys { pattern } => keys(cx, pattern).await?,
            Scan { cursor, options } => scan(cx, cursor, options).await?,
            RandomKey => randomkey(cx).await?,
            Rename { from, to, nx } => super::rename::rename(cx, from, to, nx).await?,
            Copy {
                from,
                to,
                db,
                replace,
            } => super::rename::copy(cx, from, to, db, replace).await?,
            Move { key, db } => super::rename::move_key(cx, key, db).await?,
            SwapDb { a, b } => super::rename::swap_databases(cx, a, b).await?,
            Flush { all } => {
                super::rename::flush(cx, all).await?;
                cx.tx.note_flush();
            }
            Dump { key } => dump::dump(cx, key).await?,
            Restore(r) => dump::restore(cx, r).await?,
            KeyCommand::Sort(s) => sort::sort(cx, s).await?,
        }
        Ok(())
    }
}

/// The live keys of the client's database, `COUNT(*)` over its index range.
async fn dbsize(cx: &mut Cx<'_>) -> Result<(), StoreError> {
    let rows = cx
        .tx
        .rows(
            "SELECT COUNT(*) FROM {s}.redis_keys WHERE db = ? AND (expire_at IS NULL OR expire_at > ?)",
            &[Param::UInt(u64::from(cx.db)), Param::Int(cx.now_ms())],
        )
        .await?;
    let n = rows
        .first()
        .and_then(|r| r.first())
        .and_then(int)
        .unwrap_or(0);
    cx.reply().integer(n);
    Ok(())
}

/// `KEYS pattern`: every live key of the database, matched here and written as read (the
/// keys are never held all at once).
async fn keys(cx: &mut Cx<'_>, pattern: &[u8]) -> Result<(), StoreError> {
    // `*` alone matches every key, the empty one too (Redis skips the matcher).
    let glob = (pattern != b"*").then(|| Glob::new(pattern, false));
    let params = [Param::UInt(u64::from(cx.db)), Param::Int(cx.now_ms())];
    let element =
        |reply: &mut Reply<'_>, mut row: Vec<Value>| match row.get_mut(0).and_then(take_bytes) {
            Some(k) if glob.as_ref().is_none_or(|g| g.matches(&k)) => {
                reply.bulk(&k);
                1
            }
            _ => 0,
        };
    cx.stream_reply(
        "SELECT k FROM {s}.redis_keys WHERE db = ? AND (expire_at IS NULL OR expire_at > ?)",
        &params,
        |r, n| {
            r.array_len(n);
        },
        element,
    )
    .await?;
    Ok(())
}

/// `SCAN cursor [MATCH p] [COUNT n] [TYPE t]`: `COUNT` live rows from the cursor on in hash
/// order, filtered by `MATCH` and `TYPE` after the read (a page may be empty).
async fn scan(cx: &mut Cx<'_>, cursor: u64, o: ScanOptions<'_>) -> Result<(), StoreError> {
    let glob = o.glob();
    let page = page_len(o.count);
    let mut rows = cx
        .tx
        .rows(
            "SELECT kh, k, type FROM {s}.redis_keys WHERE db = ? AND kh >= ? \
             AND (expire_at IS NULL OR expire_at > ?) ORDER BY kh LIMIT ?",
            &[
                Param::UInt(u64::from(cx.db)),
                Param::Bytes(&cursor_bound(cursor)),
                Param::Int(cx.now_ms()),
                Param::UInt(page as u64 + 1),
            ],
        )
        .await?;
    let next = split_page(&mut rows, page, 0);
    let found: Vec<Vec<u8>> = rows
        .into_iter()
        .filter_map(|mut r| {
            let t = r
                .get(2)
                .and_then(int)
                .map_or("none", |t| u8::try_from(t).map_or("none", type_name));
            let k = r.get_mut(1).and_then(take_bytes)?;
            let wanted = glob.as_ref().is_none_or(|g| g.matches(&k))
                && o.kind
                    .is_none_or(|want| want.eq_ignore_ascii_case(t.as_bytes()));
            wanted.then_some(k)
        })
        .collect();
    let mut r = cx.reply();
    start_reply(&mut r, next, found.len());
    for k in &found {
        r.bulk(k);
    }
    Ok(())
}

/// A number no two calls of a process share, for `RANDOMKEY`'s draws.
fn random_u64() -> u64 {
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static STATE: RandomState = RandomState::new();
    }
    let n = DRAWS.fetch_add(1, Ordering::Relaxed);
    STATE.with(|s| s.hash_one(n))
}

/// `RANDOMKEY`: the first live key from a random hash on (from the start if none follows).
async fn randomkey(cx: &mut Cx<'_>) -> Result<(), StoreError> {
    let bound = cursor_bound(random_u64());
    let db = u64::from(cx.db);
    let now = cx.now_ms();
    let mut rows = cx
        .tx
        .rows(
            "SELECT k FROM {s}.redis_keys WHERE db = ? AND kh >= ? \
             AND (expire_at IS NULL OR expire_at > ?) ORDER BY kh LIMIT 1",
            &[Param::UInt(db), Param::Bytes(&bound), Param::Int(now)],
        )
        .await?;
    if rows.is_empty() {
        rows = cx
            .tx
            .rows(
                "SELECT k FROM {s}.redis_keys WHERE db = ? \
                 AND (expire_at IS NULL OR expire_at > ?) ORDER BY kh LIMIT 1",
                &[Param::UInt(db), Param::Int(now)],
            )
            .await?;
    }
    match rows
        .into_iter()
        .next()
        .and_then(|mut r| r.get_mut(0).and_then(take_bytes))
    {
        Some(k) => cx.reply().bulk(&k),
        None => cx.reply().null(),
    };
    Ok(())
}
