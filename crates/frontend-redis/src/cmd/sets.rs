//! Sets: `SADD`, `SMEMBERS` and the rest of Redis's set commands. Members are rows of
//! `redis_set (kid, mh, member)`, `mh` the SHA-256 of the member (the index), `member` its
//! bytes; the key's row keeps the exact count (`len`).
//!
//! - Here: the command table, `SADD`, `SREM`, `SCARD`, `SISMEMBER`, `SMISMEMBER`, `SMOVE`,
//!   and the statements the others share (multi-row `INSERT IGNORE`, `DELETE ... IN`,
//!   membership probes, whole loads), each batched by up to [`CHUNK`] members padded to a
//!   power of two (by repeating the chunk's shortest member), so statement shapes are few.
//! - [`algebra`]: `SMEMBERS`, `SINTER`, `SUNION`, `SDIFF`, their `STORE` forms, `SINTERCARD`,
//!   each one statement in the server ([`one_statement`]) over up to [`crate::store::context::RUN_MAX`] sets.
//! - [`random`]: `SPOP`, `SRANDMEMBER`.
//! - [`scan`]: `SSCAN`, paged as every `*SCAN` is.
//!
//! Intended differences from Redis 7.0 (the tests normalize them):
//! - Where Redis's order is unspecified (`SMEMBERS`, `SINTER`, `SUNION`, `SDIFF`, `SPOP`
//!   with a count, `SRANDMEMBER` with a count, `SSCAN` pages), members come ordered by
//!   their SHA-256; the random picks are other picks than Redis's.
//! - `SSCAN` pages as every `*SCAN` ([`crate::cmd::scan`]): a page holds exactly `COUNT`
//!   members before `MATCH` filters them (Redis: about `COUNT`, and everything at once for
//!   small sets).
//! - `SRANDMEMBER` with a negative count beyond [`random::MAX_REPEATED`] is refused
//!   (Redis builds the whole reply, whatever its size).

mod algebra;
mod one_statement;
mod parse;
mod random;
mod scan;
#[cfg(test)]
mod tests;

pub use algebra::Op;
pub use parse::{SetCommand, COMMANDS};

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;

use super::checks::{self, Absent};
use super::sqltext::{in_params, marks, padded, statement, tuples};
use super::Args;
use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::{hash, kind};
use crate::store::{take_bytes, StoreError};

impl SetCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        use parse::{
            Algebra, SAdd, SCard, SInterCard, SIsMember, SMIsMember, SMove, SPop, SRandMember,
            SRem, SScan,
        };
        match self {
            SAdd { key, members } => sadd(cx, key, members).await,
            SRem { key, members } => srem(cx, key, members).await,
            SCard { key } => scard(cx, key).await,
            SIsMember { key, member } => sismember(cx, key, member).await,
            SMIsMember { key, members } => smismember(cx, key, members).await,
            SMove { src, dst, member } => smove(cx, src, dst, member).await,
            Algebra {
                op,
                args,
                keys,
                dst,
            } => algebra::run(cx, op, args, keys, dst).await,
            SInterCard { args, keys, limit } => algebra::sintercard(cx, args, keys, limit).await,
            SPop { key, count } => random::spop(cx, key, count).await,
            SRandMember { key, count } => random::srandmember(cx, key, count).await,
            SScan(scan) => scan::sscan(cx, scan).await,
        }
    }
}

/// Most members in one statement.
const CHUNK: usize = 128;
/// A chunk ends once its members reach this many bytes (a chunk has one member at least).
const CHUNK_BYTES: usize = 1 << 20;

/// SHA-256 of a member.
type Mh = [u8; 32];

statement! {
    /// `INSERT IGNORE` of `n` members: one affected row per member added.
    fn insert_sql = "INSERT IGNORE INTO {{s}}.redis_set (kid, mh, member) VALUES {}", |n| tuples("(?, ?, ?)", n)
}

statement! {
    /// `DELETE` of `n` members: one affected row per member removed.
    fn delete_sql = "DELETE FROM {{s}}.redis_set WHERE kid = ? AND mh IN ({})", |n| marks(n)
}

statement! {
    /// Which of `n` members are there.
    fn present_sql = "SELECT mh FROM {{s}}.redis_set WHERE kid = ? AND mh IN ({})", |n| marks(n)
}

/// Splits `items` (with each one's byte size) into chunks of at most [`CHUNK`] items and
/// about [`CHUNK_BYTES`] bytes.
fn chunks<T>(items: &[T], size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < items.len() {
        let mut end = start;
        let mut bytes = 0usize;
        while end < items.len() && end - start < CHUNK && (end == start || bytes < CHUNK_BYTES) {
            bytes = bytes.saturating_add(size(&items[end]));
            end += 1;
        }
        out.push(&items[start..end]);
        start = end;
    }
    out
}

/// Reads a member hash column.
fn mh_of(v: &Value) -> Option<Mh> {
    match v {
        Value::Bytes(b) => b.as_slice().try_into().ok(),
        _ => None,
    }
}

/// A `(mh, member)` row.
fn member_row(mut row: Vec<Value>) -> Option<(Mh, Vec<u8>)> {
    let mh = mh_of(row.first()?)?;
    let member = take_bytes(row.get_mut(1)?)?;
    Some((mh, member))
}

/// Adds `members` (hash, bytes) to the set `kid`; how many were not there.
async fn insert_members(
    cx: &mut Cx<'_>,
    kid: u64,
    members: &[(Mh, &[u8])],
) -> Result<i64, StoreError> {
    let mut added = 0u64;
    for chunk in chunks(members, |(_, m)| m.len() + 32) {
        let n = padded(chunk.len());
        let pad = chunk
            .iter()
            .min_by_key(|(_, m)| m.len())
            .unwrap_or(&chunk[0]);
        let mut params = Vec::with_capacity(n * 3);
        for i in 0..n {
            let (mh, m) = chunk.get(i).unwrap_or(pad);
            params.push(Param::UInt(kid));
            params.push(Param::Bytes(mh));
            params.push(Param::Bytes(m));
        }
        added += cx.tx.affected(insert_sql(n), &params).await?;
    }
    Ok(i64::try_from(added).unwrap_or(i64::MAX))
}

/// Removes the members hashed `hashes` from the set `kid`; how many were there.
async fn delete_members(cx: &mut Cx<'_>, kid: u64, hashes: &[Mh]) -> Result<i64, StoreError> {
    let mut removed = 0u64;
    for chunk in hashes.chunks(CHUNK) {
        let n = padded(chunk.len());
        let params = in_params(Param::UInt(kid), chunk, n);
        removed += cx.tx.affected(delete_sql(n), &params).await?;
    }
    Ok(i64::try_from(removed).unwrap_or(i64::MAX))
}

/// Which of `hashes` are members of the set `kid`.
async fn present(
    cx: &mut Cx<'_>,
    kid: u64,
    hashes: &[Mh],
) -> Result<std::collections::HashSet<Mh>, StoreError> {
    let mut found = std::collections::HashSet::new();
    for chunk in hashes.chunks(CHUNK) {
        let n = padded(chunk.len());
        let params = in_params(Param::UInt(kid), chunk, n);
        for row in cx.tx.rows(present_sql(n), &params).await? {
            if let Some(mh) = row.first().and_then(mh_of) {
                found.insert(mh);
            }
        }
    }
    Ok(found)
}

/// Every member of the set `kid`, ordered by hash.
async fn load_members(cx: &mut Cx<'_>, kid: u64) -> Result<Vec<(Mh, Vec<u8>)>, StoreError> {
    let rows = cx
        .tx
        .rows(
            "SELECT mh, member FROM {s}.redis_set WHERE kid = ? ORDER BY mh",
            &[Param::UInt(kid)],
        )
        .await?;
    Ok(rows.into_iter().filter_map(member_row).collect())
}

/// The hashes of every member of the set `kid`.
async fn load_hashes(cx: &mut Cx<'_>, kid: u64) -> Result<Vec<Mh>, StoreError> {
    let rows = cx
        .tx
        .rows(
            "SELECT mh FROM {s}.redis_set WHERE kid = ?",
            &[Param::UInt(kid)],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| r.first().and_then(mh_of))
        .collect())
}

/// `SADD key member [member ...]` (`args`: the whole request, the members from argument 2
/// on).
async fn sadd(cx: &mut Cx<'_>, k: &[u8], args: Args<'_>) -> Result<(), StoreError> {
    let Some(Some(row)) = checks::write(cx, k, kind::SET, true).await? else {
        return Ok(());
    };
    let members: Vec<(Mh, &[u8])> = args.from(2).map(|m| (hash(m), m)).collect();
    let added = insert_members(cx, row.kid, &members).await?;
    if added > 0 || row.len == 0 {
        cx.tx.collection_written(cx.db, k, &row, added).await?;
    }
    cx.reply().integer(added);
    Ok(())
}

/// `SREM key member [member ...]` (`args`: the whole request).
async fn srem(cx: &mut Cx<'_>, k: &[u8], args: Args<'_>) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::SET, Absent::Zero).await? else {
        return Ok(());
    };
    let hashes: Vec<Mh> = args.from(2).map(hash).collect();
    let removed = delete_members(cx, row.kid, &hashes).await?;
    if removed > 0 {
        cx.tx.collection_written(cx.db, k, &row, -removed).await?;
    }
    cx.reply().integer(removed);
    Ok(())
}

/// `SCARD key`.
async fn scard(cx: &mut Cx<'_>, k: &[u8]) -> Result<(), StoreError> {
    if let Some(row) = checks::read(cx, k, kind::SET).await? {
        cx.reply().integer(row.map_or(0, |r| r.len));
    }
    Ok(())
}

/// `SISMEMBER key member`.
async fn sismember(cx: &mut Cx<'_>, k: &[u8], member: &[u8]) -> Result<(), StoreError> {
    let Some(row) = checks::read_or(cx, k, kind::SET, Absent::Zero).await? else {
        return Ok(());
    };
    let mh = hash(member);
    let there = present(cx, row.kid, &[mh]).await?.contains(&mh);
    cx.reply().integer(i64::from(there));
    Ok(())
}

/// `SMISMEMBER key member [member ...]` (`args`: the whole request).
async fn smismember(cx: &mut Cx<'_>, k: &[u8], args: Args<'_>) -> Result<(), StoreError> {
    let Some(row) = checks::read(cx, k, kind::SET).await? else {
        return Ok(());
    };
    let hashes: Vec<Mh> = args.from(2).map(hash).collect();
    let there = match row {
        Some(row) => present(cx, row.kid, &hashes).await?,
        None => std::collections::HashSet::default(),
    };
    let mut reply = cx.reply();
    reply.array_len(hashes.len());
    for mh in &hashes {
        reply.integer(i64::from(there.contains(mh)));
    }
    Ok(())
}

/// `SMOVE source destination member`.
async fn smove(cx: &mut Cx<'_>, src: &[u8], dst: &[u8], member: &[u8]) -> Result<(), StoreError> {
    let src_found = cx.tx.typed_key(cx.db, src, kind::SET, true).await?;
    let dst_found = if src == dst {
        src_found.clone()
    } else {
        cx.tx.typed_key(cx.db, dst, kind::SET, true).await?
    };
    // A missing source answers 0 before any type check, as in Redis.
    let Ok(src_row) = src_found else {
        cx.reply().error(errors::WRONGTYPE);
        return Ok(());
    };
    let Some(src_row) = src_row else {
        cx.reply().integer(0);
        return Ok(());
    };
    let Some(dst_row) = checks::or_wrongtype(cx, dst_found) else {
        return Ok(());
    };
    let mh = hash(member);
    if src == dst {
        let there = present(cx, src_row.kid, &[mh]).await?.contains(&mh);
        cx.reply().integer(i64::from(there));
        return Ok(());
    }
    if delete_members(cx, src_row.kid, &[mh]).await? == 0 {
        cx.reply().integer(0);
        return Ok(());
    }
    cx.tx.collection_written(cx.db, src, &src_row, -1).await?;
    let dst_row = match dst_row {
        Some(row) => row,
        None => cx.tx.create_key(cx.db, dst, kind::SET).await?,
    };
    let added = insert_members(cx, dst_row.kid, &[(mh, member)]).await?;
    if added > 0 {
        cx.tx
            .collection_written(cx.db, dst, &dst_row, added)
            .await?;
        // Keyspace notifications: `sadd` only when the destination gained the member, after
        // the source's `srem` (decided after the command, in `crate::notify`).
        cx.tx
            .notify_after(crate::store::events::class::SET, "sadd", cx.db, dst);
    }
    cx.reply().integer(1);
    Ok(())
}
