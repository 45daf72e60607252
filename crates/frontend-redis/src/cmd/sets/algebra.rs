//! `SMEMBERS`, `SINTER`, `SUNION`, `SDIFF`, `SINTERSTORE`, `SUNIONSTORE`, `SDIFFSTORE`,
//! `SINTERCARD`: every key is looked up first (a missing one is an empty set, any other
//! type `WRONGTYPE`, as Redis checks them all); then, over up to [`crate::store::context::RUN_MAX`]
//! sets, one statement computes the result in the server ([`one_statement`]: a reply written
//! as read, a `STORE` form's `INSERT ... SELECT`, `SINTERCARD`'s `COUNT(*)`), so no set is
//! held here. Over more sets, members are loaded and combined here:
//!
//! An intersection or difference loads the first set (the smallest, for an intersection)
//! whole and then asks each other set either which of the remaining candidates it holds
//! (`mh IN (...)`, when they are few next to it) or for all its hashes. A `STORE` form
//! replaces its destination, whatever it held, by a new set without TTL, or deletes it when
//! the result is empty; it locks the keys it reads.

use std::collections::{BTreeMap, HashSet};

use super::one_statement;
use super::{insert_members, load_hashes, load_members, present, Mh, CHUNK};
use crate::cmd::{checks, Args};
use crate::store::context::Cx;
use crate::store::keys::{kind, KeyRow, WrongType};
use crate::store::StoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Inter,
    Union,
    Diff,
}

/// `op` over the sets `keys` of `args`, replied, or (`dst`) stored at `dst`.
pub(super) async fn run(
    cx: &mut Cx<'_>,
    op: Op,
    args: Args<'_>,
    keys: std::ops::Range<usize>,
    dst: Option<&[u8]>,
) -> Result<(), StoreError> {
    let keys: Vec<&[u8]> = keys.map(|i| args.get(i)).collect();
    let keys = &keys[..];
    let lock = dst.is_some();
    let found = sets(cx, keys, lock).await?;
    let Some(rows) = checks::or_wrongtype(cx, found) else {
        return Ok(());
    };
    let plan = one_statement::plan(op, &rows);
    if let Some(plan) = plan {
        match dst {
            None => one_statement::reply(cx, &plan).await?,
            Some(dst) => {
                let n = one_statement::store(cx, dst, &plan).await?;
                cx.reply().integer(n);
            }
        }
        return Ok(());
    }
    let result = combine(cx, op, &rows).await?;
    match dst {
        None => {
            let mut reply = cx.reply();
            reply.set_len(result.len());
            for m in result.values() {
                reply.bulk(m);
            }
        }
        Some(dst) => {
            let n = store(cx, dst, &result).await?;
            cx.reply().integer(n);
        }
    }
    Ok(())
}

/// Looks up every key of `keys`: `WrongType` if any holds another type.
async fn sets(
    cx: &mut Cx<'_>,
    keys: &[&[u8]],
    lock: bool,
) -> Result<Result<Vec<Option<KeyRow>>, WrongType>, StoreError> {
    let mut rows = Vec::with_capacity(keys.len());
    let mut wrong = false;
    for k in keys {
        match cx.tx.typed_key(cx.db, k, kind::SET, lock).await? {
            Ok(row) => rows.push(row),
            Err(WrongType) => wrong = true,
        }
    }
    Ok(if wrong { Err(WrongType) } else { Ok(rows) })
}

/// The members of `op` over the sets `rows` (`None`: empty), by hash.
async fn combine(
    cx: &mut Cx<'_>,
    op: Op,
    rows: &[Option<KeyRow>],
) -> Result<BTreeMap<Mh, Vec<u8>>, StoreError> {
    let mut result = BTreeMap::new();
    match op {
        Op::Union => {
            let mut kids = HashSet::new();
            for row in rows.iter().flatten() {
                if kids.insert(row.kid) {
                    result.extend(load_members(cx, row.kid).await?);
                }
            }
        }
        Op::Inter => {
            let Some(live) = rows.iter().map(Option::as_ref).collect::<Option<Vec<_>>>() else {
                return Ok(result);
            };
            let Some(first) = live.iter().min_by_key(|r| r.len) else {
                return Ok(result);
            };
            result.extend(load_members(cx, first.kid).await?);
            let mut done = HashSet::from([first.kid]);
            for row in &live {
                if result.is_empty() {
                    break;
                }
                if done.insert(row.kid) {
                    keep(cx, row, &mut result, true).await?;
                }
            }
        }
        Op::Diff => {
            let Some(Some(first)) = rows.first() else {
                return Ok(result);
            };
            result.extend(load_members(cx, first.kid).await?);
            let mut done = HashSet::new();
            for row in rows[1..].iter().flatten() {
                if result.is_empty() {
                    break;
                }
                if row.kid == first.kid {
                    result.clear();
                } else if done.insert(row.kid) {
                    keep(cx, row, &mut result, false).await?;
                }
            }
        }
    }
    Ok(result)
}

/// Keeps in `result` the members the set `row` holds (`inside`) or those it does not.
async fn keep(
    cx: &mut Cx<'_>,
    row: &KeyRow,
    result: &mut BTreeMap<Mh, Vec<u8>>,
    inside: bool,
) -> Result<(), StoreError> {
    let few = (result.len() as i64).saturating_mul(8) <= row.len || result.len() <= CHUNK;
    let there: HashSet<Mh> = if few {
        let candidates: Vec<Mh> = result.keys().copied().collect();
        present(cx, row.kid, &candidates).await?
    } else {
        load_hashes(cx, row.kid).await?.into_iter().collect()
    };
    result.retain(|mh, _| there.contains(mh) == inside);
    Ok(())
}

/// Replaces `dst` by the set `members` (deletes it when empty); the new length.
async fn store(
    cx: &mut Cx<'_>,
    dst: &[u8],
    members: &BTreeMap<Mh, Vec<u8>>,
) -> Result<i64, StoreError> {
    if let Some(old) = cx.tx.key_meta(cx.db, dst, true).await? {
        cx.tx.delete_key(cx.db, dst, &old).await?;
    }
    if members.is_empty() {
        return Ok(0);
    }
    let row = cx.tx.create_key(cx.db, dst, kind::SET).await?;
    let list: Vec<(Mh, &[u8])> = members.iter().map(|(mh, m)| (*mh, m.as_slice())).collect();
    let added = insert_members(cx, row.kid, &list).await?;
    cx.tx.collection_written(cx.db, dst, &row, added).await?;
    Ok(added)
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`.
pub(super) async fn sintercard(
    cx: &mut Cx<'_>,
    args: Args<'_>,
    keys: std::ops::Range<usize>,
    limit: i64,
) -> Result<(), StoreError> {
    let keys: Vec<&[u8]> = keys.map(|i| args.get(i)).collect();
    let found = sets(cx, &keys, false).await?;
    let Some(rows) = checks::or_wrongtype(cx, found) else {
        return Ok(());
    };
    let n = match one_statement::plan(Op::Inter, &rows) {
        Some(plan) => one_statement::count(cx, &plan, limit).await?,
        None => combine(cx, Op::Inter, &rows).await?.len() as i64,
    };
    cx.reply().integer(if limit > 0 { n.min(limit) } else { n });
    Ok(())
}
