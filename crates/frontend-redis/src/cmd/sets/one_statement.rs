//! Set algebra in one statement, computed by the server: no set is ever held here.
//!
//! [`plan`] turns the sets of a `SUNION`, `SINTER` or `SDIFF` (a missing one empty) into one
//! of: no set, one set, or a first set and up to [`RUN_MAX`] others (padded to a power of
//! two by repeating the last): a union `GROUP BY mh`, an intersection keeping the members
//! of the first (the smallest) that every other holds (counted by a subquery), a difference
//! keeping those no other holds (`NOT EXISTS`). The same plan then:
//! - replies, ordered by member hash (as [`super::algebra`] orders them), written as the rows
//!   are read ([`Cx::stream_reply`]);
//! - stores (`SINTERSTORE`...): `INSERT ... SELECT` into the destination's new set (the old
//!   one's members are deleted after it, so the destination may be a source);
//! - counts (`SINTERCARD`): `COUNT(*)` up to the `LIMIT`.

use std::collections::HashSet;

use manifold_backend::Param;
use manifold_redis_proto::Reply;

use super::algebra::Op;
use crate::cmd::sqltext::{marks, padded, statement};
use crate::store::context::{Cx, RUN_MAX};
use crate::store::keys::{hash, kind, KeyRow};
use crate::store::{int, StoreError};

/// How one statement computes an operation over some sets.
pub(super) enum Plan {
    /// The result is empty.
    Empty,
    /// The result is the set `kid`.
    One(u64),
    Union(Vec<u64>),
    /// The members of the first set held by every one of the others.
    Inter(u64, Vec<u64>),
    /// The members of the first set held by none of the others.
    Diff(u64, Vec<u64>),
}

/// The distinct ids of the sets `rows` (present ones), in first-seen order, but `except`.
fn distinct_kids<'a>(rows: impl Iterator<Item = &'a Option<KeyRow>>, except: u64) -> Vec<u64> {
    let mut seen = HashSet::from([except]);
    rows.flatten()
        .map(|r| r.kid)
        .filter(|k| seen.insert(*k))
        .collect()
}

/// The plan of `op` over the sets `rows` (`None`: missing, an empty set); `None` over more
/// sets than one statement takes.
pub(super) fn plan(op: Op, rows: &[Option<KeyRow>]) -> Option<Plan> {
    let plan = match op {
        Op::Union => {
            let kids = distinct_kids(rows.iter(), 0);
            match kids[..] {
                [] => Plan::Empty,
                [one] => Plan::One(one),
                _ => Plan::Union(kids),
            }
        }
        Op::Inter => match rows.iter().map(Option::as_ref).collect::<Option<Vec<_>>>() {
            None => Plan::Empty,
            Some(live) => match live.iter().min_by_key(|r| r.len) {
                None => Plan::Empty,
                Some(first) => {
                    let others = distinct_kids(rows.iter(), first.kid);
                    if others.is_empty() {
                        Plan::One(first.kid)
                    } else {
                        Plan::Inter(first.kid, others)
                    }
                }
            },
        },
        Op::Diff => match rows.first() {
            Some(Some(first)) if rows[1..].iter().flatten().any(|r| r.kid == first.kid) => {
                Plan::Empty
            }
            Some(Some(first)) => {
                let others = distinct_kids(rows[1..].iter(), first.kid);
                if others.is_empty() {
                    Plan::One(first.kid)
                } else {
                    Plan::Diff(first.kid, others)
                }
            }
            _ => Plan::Empty,
        },
    };
    match &plan {
        Plan::Union(kids) | Plan::Inter(_, kids) | Plan::Diff(_, kids) if kids.len() > RUN_MAX => {
            None
        }
        _ => Some(plan),
    }
}

/// The statements of each plan, by what they do with the members.
struct Texts {
    one: &'static str,
    union: fn(usize) -> &'static str,
    inter: fn(usize) -> &'static str,
    diff: fn(usize) -> &'static str,
}

statement! {
    fn union_sql = "SELECT MIN(member) FROM {{s}}.redis_set WHERE kid IN ({}) GROUP BY mh ORDER BY mh",
        |n| marks(n)
}

statement! {
    fn inter_sql = "SELECT a.member FROM {{s}}.redis_set a WHERE a.kid = ? AND \
        (SELECT COUNT(*) FROM {{s}}.redis_set b WHERE b.kid IN ({}) AND b.mh = a.mh) = ? ORDER BY a.mh",
        |n| marks(n)
}

statement! {
    fn diff_sql = "SELECT a.member FROM {{s}}.redis_set a WHERE a.kid = ? AND NOT EXISTS \
        (SELECT 1 FROM {{s}}.redis_set b WHERE b.kid IN ({}) AND b.mh = a.mh) ORDER BY a.mh",
        |n| marks(n)
}

const SELECT: Texts = Texts {
    one: "SELECT member FROM {s}.redis_set WHERE kid = ? ORDER BY mh",
    union: union_sql,
    inter: inter_sql,
    diff: diff_sql,
};

statement! {
    fn store_union_sql = "INSERT INTO {{s}}.redis_set (kid, mh, member) \
        SELECT ?, mh, MIN(member) FROM {{s}}.redis_set WHERE kid IN ({}) GROUP BY mh",
        |n| marks(n)
}

statement! {
    fn store_inter_sql = "INSERT INTO {{s}}.redis_set (kid, mh, member) \
        SELECT ?, a.mh, a.member FROM {{s}}.redis_set a WHERE a.kid = ? AND \
        (SELECT COUNT(*) FROM {{s}}.redis_set b WHERE b.kid IN ({}) AND b.mh = a.mh) = ?",
        |n| marks(n)
}

statement! {
    fn store_diff_sql = "INSERT INTO {{s}}.redis_set (kid, mh, member) \
        SELECT ?, a.mh, a.member FROM {{s}}.redis_set a WHERE a.kid = ? AND NOT EXISTS \
        (SELECT 1 FROM {{s}}.redis_set b WHERE b.kid IN ({}) AND b.mh = a.mh)",
        |n| marks(n)
}

const STORE: Texts = Texts {
    one: "INSERT INTO {s}.redis_set (kid, mh, member) SELECT ?, mh, member FROM {s}.redis_set WHERE kid = ?",
    union: store_union_sql,
    inter: store_inter_sql,
    diff: store_diff_sql,
};

statement! {
    fn count_inter_sql = "SELECT COUNT(*) FROM (SELECT 1 FROM {{s}}.redis_set a WHERE a.kid = ? AND \
        (SELECT COUNT(*) FROM {{s}}.redis_set b WHERE b.kid IN ({}) AND b.mh = a.mh) = ? LIMIT ?) t",
        |n| marks(n)
}

/// The statement of `plan` among `texts` and its parameters (after `head`, when given);
/// `None` for an empty result.
fn statement<'a>(
    plan: &Plan,
    texts: &Texts,
    head: Option<Param<'a>>,
) -> Option<(&'static str, Vec<Param<'a>>)> {
    let mut params: Vec<Param<'a>> = Vec::with_capacity(RUN_MAX + 3);
    params.extend(head);
    let others = |params: &mut Vec<Param<'a>>, kids: &[u64]| {
        let n = padded(kids.len());
        let last = kids[kids.len() - 1];
        params.extend((0..n).map(|i| Param::UInt(kids.get(i).copied().unwrap_or(last))));
        n
    };
    let sql = match plan {
        Plan::Empty => return None,
        Plan::One(kid) => {
            params.push(Param::UInt(*kid));
            texts.one
        }
        Plan::Union(kids) => (texts.union)(others(&mut params, kids)),
        Plan::Inter(first, kids) => {
            params.push(Param::UInt(*first));
            let n = others(&mut params, kids);
            params.push(Param::UInt(kids.len() as u64));
            (texts.inter)(n)
        }
        Plan::Diff(first, kids) => {
            params.push(Param::UInt(*first));
            (texts.diff)(others(&mut params, kids))
        }
    };
    Some((sql, params))
}

/// Replies with the result of `plan` as a set, written as its members are read.
pub(super) async fn reply(cx: &mut Cx<'_>, plan: &Plan) -> Result<(), StoreError> {
    let Some((sql, params)) = statement(plan, &SELECT, None) else {
        cx.reply().set_len(0);
        return Ok(());
    };
    let header = |r: &mut Reply<'_>, n: usize| {
        r.set_len(n);
    };
    cx.stream_reply(sql, &params, header, crate::cmd::hashes::bulk_columns)
        .await?;
    Ok(())
}

/// Replaces `dst` (whatever it held; its TTL gone) by the result of `plan`, or deletes it
/// when that is empty; the new length. The key's row goes first and its old members last, so
/// `dst` may be one of the sets read.
pub(super) async fn store(cx: &mut Cx<'_>, dst: &[u8], plan: &Plan) -> Result<i64, StoreError> {
    let old = cx.tx.key_meta(cx.db, dst, true).await?;
    if old.is_some() {
        cx.tx
            .exec(
                "DELETE FROM {s}.redis_keys WHERE db = ? AND kh = ?",
                &[Param::UInt(u64::from(cx.db)), Param::Bytes(&hash(dst))],
            )
            .await?;
    }
    let mut added = 0;
    let mut new = None;
    if !matches!(plan, Plan::Empty) {
        let row = cx.tx.create_key(cx.db, dst, kind::SET).await?;
        if let Some((sql, params)) = statement(plan, &STORE, Some(Param::UInt(row.kid))) {
            added = i64::try_from(cx.tx.affected(sql, &params).await?).unwrap_or(i64::MAX);
        }
        new = Some(row);
    }
    if let Some(old) = &old {
        cx.tx.delete_members(old).await?;
    }
    match new {
        // An empty result deletes the key just made; its `del` event only when there was a
        // key before (keyspace notifications: Redis deletes nothing otherwise).
        Some(row) if added == 0 && old.is_none() => {
            cx.tx.delete_key_quietly(cx.db, dst, &row).await?;
        }
        Some(row) => {
            cx.tx.collection_written(cx.db, dst, &row, added).await?;
        }
        None if old.is_some() => {
            cx.tx
                .notify_after(crate::store::events::class::GENERIC, "del", cx.db, dst);
        }
        None => {}
    }
    Ok(added)
}

/// The size of the intersection `plan`, counted by the server up to `limit` (0: no limit).
pub(super) async fn count(cx: &mut Cx<'_>, plan: &Plan, limit: i64) -> Result<i64, StoreError> {
    let (first, kids) = match plan {
        Plan::Empty => return Ok(0),
        Plan::One(kid) => (*kid, None),
        Plan::Inter(first, kids) => (*first, Some(kids)),
        Plan::Union(_) | Plan::Diff(..) => unreachable!("SINTERCARD counts intersections"),
    };
    let Some(kids) = kids else {
        let n = cx
            .tx
            .rows(
                "SELECT len FROM {s}.redis_keys WHERE kid = ?",
                &[Param::UInt(first)],
            )
            .await?;
        return Ok(n.first().and_then(|r| r.first()).and_then(int).unwrap_or(0));
    };
    let n = padded(kids.len());
    let last = kids[kids.len() - 1];
    let mut params = Vec::with_capacity(n + 3);
    params.push(Param::UInt(first));
    params.extend((0..n).map(|i| Param::UInt(kids.get(i).copied().unwrap_or(last))));
    params.push(Param::UInt(kids.len() as u64));
    params.push(Param::UInt(if limit > 0 { limit as u64 } else { u64::MAX }));
    let found = cx.tx.rows(count_inter_sql(n), &params).await?;
    Ok(found
        .first()
        .and_then(|r| r.first())
        .and_then(int)
        .unwrap_or(0))
}
