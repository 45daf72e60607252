//! `SPOP` and `SRANDMEMBER`: random members.
//!
//! - One member of a set of up to [`OFFSET_MAX`] members: `ORDER BY mh LIMIT 1 OFFSET ?`
//!   with a uniform offset (exactly fair); of a larger set: the first member at or after a
//!   random hash (`mh >= ?`, wrapping around), which costs one index lookup and favours a
//!   member by the gap of hashes before it, as Redis's own pick is not exactly fair either.
//! - Several distinct members: `ORDER BY RAND() LIMIT ?` (a scan of the set's rows); `SPOP`
//!   of fewer than the set orders by `MD5(CONCAT(key, mh))` with a random key drawn for the
//!   call instead, so its `DELETE ... ORDER BY ... LIMIT ?` removes exactly the members it
//!   read, none of them kept here.
//! - `SRANDMEMBER` with a negative count (repeats allowed): the draws are simulated here as
//!   positions, the distinct ones fetched as a uniform distinct sample, each position then
//!   given one of those members: the same law as drawing with replacement.

use std::collections::HashMap;

use manifold_backend::Param;
use manifold_redis_proto::Reply;

use super::{delete_members, member_row, Mh};
use crate::cmd::checks;
use crate::cmd::rng::Rng;
use crate::store::context::Cx;
use crate::store::keys::{kind, KeyRow};
use crate::store::{take_bytes, StoreError};

/// Most members `SRANDMEMBER` with a negative count answers (an intended difference).
pub const MAX_REPEATED: u64 = 1 << 20;
/// Refused negative counts.
const TOO_MANY_REPEATED: &[u8] =
    b"manifold: SRANDMEMBER count is limited to 1048576 members when negative";
/// Sets up to this size get their single random member by offset.
const OFFSET_MAX: i64 = 1024;

/// One random member of the set `row` (which is not empty).
async fn one(
    cx: &mut Cx<'_>,
    row: &KeyRow,
    rng: &mut Rng,
) -> Result<Option<(Mh, Vec<u8>)>, StoreError> {
    let kid = Param::UInt(row.kid);
    if row.len <= OFFSET_MAX {
        let at = rng.below(row.len.max(1) as u64);
        let rows = cx
            .tx
            .rows(
                "SELECT mh, member FROM {s}.redis_set WHERE kid = ? ORDER BY mh LIMIT 1 OFFSET ?",
                &[kid, Param::UInt(at)],
            )
            .await?;
        if let Some(found) = rows.into_iter().next().and_then(member_row) {
            return Ok(Some(found));
        }
    }
    let mut from = [0u8; 32];
    for chunk in from.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_be_bytes());
    }
    let rows = cx
        .tx
        .rows(
            "SELECT mh, member FROM {s}.redis_set WHERE kid = ? AND mh >= ? ORDER BY mh LIMIT 1",
            &[Param::UInt(row.kid), Param::Bytes(&from)],
        )
        .await?;
    if let Some(found) = rows.into_iter().next().and_then(member_row) {
        return Ok(Some(found));
    }
    let rows = cx
        .tx
        .rows(
            "SELECT mh, member FROM {s}.redis_set WHERE kid = ? ORDER BY mh LIMIT 1",
            &[Param::UInt(row.kid)],
        )
        .await?;
    Ok(rows.into_iter().next().and_then(member_row))
}

/// `n` distinct random members of the set `kid`, in random order, each written at least
/// once in the reply: past the client's output limit, fewer, and `false`
/// ([`Cx::rows_for_reply`]).
async fn distinct(cx: &mut Cx<'_>, kid: u64, n: u64) -> Result<(Vec<Vec<u8>>, bool), StoreError> {
    let (rows, whole) = cx
        .rows_for_reply(
            "SELECT member FROM {s}.redis_set WHERE kid = ? ORDER BY RAND() LIMIT ?",
            &[Param::UInt(kid), Param::UInt(n)],
            0,
        )
        .await?;
    let members = rows
        .into_iter()
        .filter_map(|mut r| r.first_mut().and_then(take_bytes))
        .collect();
    Ok((members, whole))
}

/// `SPOP key [count]`.
pub(super) async fn spop(cx: &mut Cx<'_>, k: &[u8], count: Option<i64>) -> Result<(), StoreError> {
    let Some(found) = checks::write(cx, k, kind::SET, false).await? else {
        return Ok(());
    };
    let mut rng = Rng::new();
    let Some(count) = count else {
        let Some(row) = found else {
            cx.reply().null();
            return Ok(());
        };
        let Some((mh, member)) = one(cx, &row, &mut rng).await? else {
            cx.reply().null();
            return Ok(());
        };
        let removed = delete_members(cx, row.kid, &[mh]).await?;
        cx.tx.collection_written(cx.db, k, &row, -removed).await?;
        cx.reply().bulk(&member);
        return Ok(());
    };
    let Some(row) = found.filter(|_| count > 0) else {
        cx.reply().set_len(0);
        return Ok(());
    };
    // Written as read; only the members' hashes are kept (to delete them), none when the
    // count takes the whole set (its key is deleted).
    let header = |r: &mut Reply<'_>, n: usize| {
        r.set_len(n);
    };
    if count >= row.len {
        cx.stream_reply(
            "SELECT member FROM {s}.redis_set WHERE kid = ? ORDER BY mh",
            &[Param::UInt(row.kid)],
            header,
            crate::cmd::hashes::bulk_columns,
        )
        .await?;
        cx.tx.delete_key(cx.db, k, &row).await?;
        return Ok(());
    }
    // Fewer than the set: the popped members are the first `count` in an order drawn for
    // this call (the MD5 of a random key and the member's hash, a uniform random order),
    // written as read up to the output limit, then deleted by the server in that same order
    // within this transaction: nothing of them is kept here, whatever the count.
    let mut key = [0u8; 16];
    for chunk in key.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_be_bytes());
    }
    let params = [
        Param::UInt(row.kid),
        Param::Bytes(&key),
        Param::UInt(count as u64),
    ];
    cx.stream_reply(
        "SELECT member FROM {s}.redis_set WHERE kid = ? ORDER BY MD5(CONCAT(?, mh)), mh LIMIT ?",
        &params,
        header,
        crate::cmd::hashes::bulk_columns,
    )
    .await?;
    let removed = cx
        .tx
        .affected(
            "DELETE FROM {s}.redis_set WHERE kid = ? ORDER BY MD5(CONCAT(?, mh)), mh LIMIT ?",
            &params,
        )
        .await?;
    let removed = i64::try_from(removed).unwrap_or(i64::MAX);
    cx.tx.collection_written(cx.db, k, &row, -removed).await?;
    Ok(())
}

/// `SRANDMEMBER key [count]`.
pub(super) async fn srandmember(
    cx: &mut Cx<'_>,
    k: &[u8],
    count: Option<i64>,
) -> Result<(), StoreError> {
    let Some(found) = checks::read(cx, k, kind::SET).await? else {
        return Ok(());
    };
    let mut rng = Rng::new();
    let Some(count) = count else {
        let picked = match found {
            Some(row) => one(cx, &row, &mut rng).await?,
            None => None,
        };
        match picked {
            Some((_, m)) => cx.reply().bulk(&m),
            None => cx.reply().null(),
        };
        return Ok(());
    };
    let Some(row) = found.filter(|_| count != 0) else {
        cx.reply().array_len(0);
        return Ok(());
    };
    let len = row.len.max(0) as u64;
    if count > 0 {
        // Distinct members, as many as the set has at most: written as they are read.
        let n = count as u64;
        let kid = Param::UInt(row.kid);
        let (sql, params) = if n >= len {
            (
                "SELECT member FROM {s}.redis_set WHERE kid = ? ORDER BY mh",
                &[kid][..],
            )
        } else {
            (
                "SELECT member FROM {s}.redis_set WHERE kid = ? ORDER BY RAND() LIMIT ?",
                &[kid, Param::UInt(n)][..],
            )
        };
        let header = |r: &mut Reply<'_>, n: usize| {
            r.array_len(n);
        };
        cx.stream_reply(sql, params, header, crate::cmd::hashes::bulk_columns)
            .await?;
        return Ok(());
    }
    let n = count.unsigned_abs();
    if n > MAX_REPEATED {
        cx.reply().error(TOO_MANY_REPEATED);
        return Ok(());
    }
    // Each draw is a position in the set; positions seen before reuse their member.
    let mut slot_of: HashMap<u64, u32> = HashMap::new();
    let mut slots = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let at = rng.below(len.max(1));
        let next = slot_of.len() as u32;
        slots.push(*slot_of.entry(at).or_insert(next));
    }
    let (members, whole) = distinct(cx, row.kid, slot_of.len() as u64).await?;
    if members.is_empty() {
        cx.reply().array_len(0);
        return Ok(());
    }
    // Written as drawn, not gathered first: a member repeated a million times is one
    // member in memory, and the reply stops growing at the client's output limit. When
    // the members were read only up to that limit, the draws of the unread ones are left
    // out (the members read, each written once, pass the limit: the client is closed).
    let mut reply = cx.reply();
    reply.array_len(slots.len());
    for s in slots {
        if reply.over_limit() {
            break;
        }
        let s = s as usize;
        if s < members.len() {
            reply.bulk(&members[s]);
        } else if whole {
            // The set had fewer members than its key row says: never an unfinished reply.
            reply.bulk(&members[members.len() - 1]);
        }
    }
    Ok(())
}
