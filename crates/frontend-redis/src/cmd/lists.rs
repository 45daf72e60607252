//! Lists: `LPUSH`, `RPUSH`, `LPUSHX`, `RPUSHX`, `LPOP`, `RPOP`, `LLEN`, `LMOVE`,
//! `RPOPLPUSH`, `LMPOP` here; `LRANGE`, `LINDEX`, `LSET`, `LINSERT`, `LREM`, `LTRIM`, `LPOS`
//! in [`edit`].
//!
//! A list's elements are rows `(kid, idx, v)` of `redis_list`; the key row keeps `lhead`
//! (the first `idx`) and `ltail` (the last `idx` + 1). The indexes are contiguous, so the
//! element Redis numbers `i` is at `idx = lhead + i` and `len = ltail - lhead`:
//! - pushes insert below `lhead` or from `ltail` on (multi-row `INSERT`s), pops read and
//!   delete an `idx` range at one end; neither moves another row;
//! - middle edits (`LINSERT`, `LREM`) shift the shorter side of the list (one `UPDATE ...
//!   ORDER BY idx` so the primary key never collides), `LREM` rewriting the span between
//!   its first and last removal (O(n), as in Redis);
//! - every write sets `lhead`, `ltail`, `len` and bumps `version` on the key row (the TTL
//!   stays); a list left empty is deleted with its key.
//!
//! Elements are compared in SQL (`v = ?`, binary: the door's connections use the `binary`
//! character set), so `LINSERT`, `LREM` and `LPOS` send no values back.
//!
//! Differences from Redis: none intended in replies. A read-only batch runs its statements
//! without a transaction, so a read racing another client's write may see fewer rows than
//! the key row said: the reply then has the rows that were read (never a malformed reply).

mod edit;
mod parse;
#[cfg(test)]
mod tests;
mod timeout;

pub(crate) use parse::{mpop_count, mpop_keys};
pub use parse::{BlockingPop, ListCommand, MPop, Waited, COMMANDS};
pub use timeout::{timeout, timeout_error, BadTimeout};

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;

use super::checks;
use super::data::Spec;
use super::sqltext::{statement, tuples};
use super::typed::DataCommand;
use super::Args;
use crate::store::context::Cx;
use crate::store::keys::{kind, KeyRow};
use crate::store::{take_bytes, StoreError};

/// A list's indexes would leave `BIGINT` (after some 9.2e18 pushes at one end).
const INDEX_SPACE: &[u8] = b"manifold: the list's index space is exhausted";

impl ListCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        use parse::{
            Blocking, LIndex, LInsert, LLen, LMPop, LMove, LPos, LRange, LRem, LSet, LTrim, Pop,
            Push, Waited,
        };
        match self {
            Push {
                key,
                values,
                side,
                only_existing,
            } => push(cx, key, values, side, only_existing).await,
            Pop { key, side, count } => pop_command(cx, key, side, count).await,
            LLen { key } => llen_command(cx, key).await,
            LMove { src, dst, from, to } => lmove(cx, src, dst, from, to).await,
            LMPop(m) => {
                if lmpop_run(cx, m).await? == Served::No {
                    cx.reply().null_array();
                }
                Ok(())
            }
            LRange { key, start, end } => edit::lrange(cx, key, start, end).await,
            LIndex { key, index } => edit::lindex(cx, key, index).await,
            LSet { key, index, value } => edit::lset(cx, key, index, value).await,
            LInsert {
                key,
                after,
                pivot,
                value,
            } => edit::linsert(cx, key, after, pivot, value).await,
            LRem { key, count, value } => edit::lrem(cx, key, count, value).await,
            LTrim { key, start, end } => edit::ltrim(cx, key, start, end).await,
            LPos {
                key,
                element,
                options,
            } => edit::lpos(cx, key, element, options).await,
            Blocking { pop, waited } => {
                if try_pop(cx, pop).await? == Served::No {
                    match waited {
                        Waited::Null => cx.reply().null(),
                        Waited::NullArray => cx.reply().null_array(),
                    };
                }
                Ok(())
            }
        }
    }
}

/// Whether a blocking command's attempt answered (with elements, or an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Yes,
    /// Nothing to pop: no reply written; the client waits (or times out).
    No,
}

/// One attempt of `BLPOP`/`BRPOP`/`BRPOPLPUSH`/`BLMOVE`/`BLMPOP` (timeout already
/// checked), run by [`crate::blocking`]: pops and answers if an element is there, answers
/// an error for a wrong type or bad arguments, and writes nothing when it would have to
/// wait. Another command (it never waits) is applied and answers at once.
pub async fn try_blocking(
    cx: &mut Cx<'_>,
    spec: &'static Spec,
    args: Args<'_>,
) -> Result<Served, StoreError> {
    match (spec.parse)(args) {
        Ok(DataCommand::Lists(ListCommand::Blocking { pop, .. })) => try_pop(cx, pop).await,
        Ok(other) => {
            other.apply(cx).await?;
            Ok(Served::Yes)
        }
        Err(e) => {
            e.reply(cx);
            Ok(Served::Yes)
        }
    }
}

/// One attempt of a blocking pop: [`Served::No`] (nothing written) when it would wait.
async fn try_pop(cx: &mut Cx<'_>, what: BlockingPop<'_>) -> Result<Served, StoreError> {
    match what {
        BlockingPop::Pop { args, keys, side } => {
            for i in keys {
                let k = args.get(i);
                let Some(found) = checks::write(cx, k, kind::LIST, false).await? else {
                    return Ok(Served::Yes);
                };
                let Some(row) = found else { continue };
                if let Some(v) = pop(cx, k, &row, side, 1).await?.first() {
                    cx.reply().array_len(2).bulk(k).bulk(v);
                    return Ok(Served::Yes);
                }
            }
            Ok(Served::No)
        }
        BlockingPop::Move { src, dst, from, to } => lmove_at(cx, src, dst, from, to).await,
        BlockingPop::MPop(m) => lmpop_run(cx, m).await,
    }
}

/// An end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Left,
    Right,
}

impl Side {
    /// `LEFT` / `RIGHT`, any case.
    fn parse(a: &[u8]) -> Option<Side> {
        if a.eq_ignore_ascii_case(b"left") {
            Some(Side::Left)
        } else if a.eq_ignore_ascii_case(b"right") {
            Some(Side::Right)
        } else {
            None
        }
    }
}

/// A list's length by its key row.
fn llen(row: &KeyRow) -> i64 {
    row.ltail.saturating_sub(row.lhead).max(0)
}

/// Elements were pushed on `key`: clients blocked on it are woken once the batch commits.
/// Called after every push, inside the batch's transaction.
fn pushed(cx: &mut Cx<'_>, key: &[u8]) {
    let db = cx.db;
    cx.tx.note_push(db, key);
}

/// The first value of a row, as bytes.
fn first_bytes(mut row: Vec<Value>) -> Vec<u8> {
    row.get_mut(0).and_then(take_bytes).unwrap_or_default()
}

/// Records the list `k`'s new bounds: `lhead`, `ltail`, `len`, and a new `version` (its TTL
/// stays); an emptied list is deleted with its key. Returns whether the key still exists.
async fn set_bounds(
    cx: &mut Cx<'_>,
    k: &[u8],
    row: &KeyRow,
    lhead: i64,
    ltail: i64,
) -> Result<bool, StoreError> {
    if ltail <= lhead {
        cx.tx.delete_key(cx.db, k, row).await?;
        return Ok(false);
    }
    cx.tx
        .exec(
            "UPDATE {s}.redis_keys SET lhead = ?, ltail = ?, len = ?, version = version + 1 WHERE kid = ?",
            &[
                Param::Int(lhead),
                Param::Int(ltail),
                Param::Int(ltail - lhead),
                Param::UInt(row.kid),
            ],
        )
        .await?;
    Ok(true)
}

statement! {
    /// `INSERT INTO redis_list (kid, idx, v) VALUES (?, ?, ?), ...` of `n` (a power of two
    /// up to [`super::sqltext::INSERT_MAX`]) rows.
    fn insert_sql = "INSERT INTO {{s}}.redis_list (kid, idx, v) VALUES {}", |n| tuples("(?, ?, ?)", n)
}

/// Inserts `rows` (`idx`, value) of the list `kid`, a few statements of power-of-two sizes.
async fn insert(cx: &mut Cx<'_>, kid: u64, rows: &[(i64, &[u8])]) -> Result<(), StoreError> {
    super::sqltext::insert_rows(
        cx,
        rows,
        |r| r.1.len(),
        3,
        insert_sql,
        |&(idx, v), p| {
            p.push(Param::UInt(kid));
            p.push(Param::Int(idx));
            p.push(Param::Bytes(v));
        },
    )
    .await
}

/// Pushes `values` in order at `side` of the list `k` (row `row`, which exists): `LPUSH a b`
/// leaves `b a ...`. Returns the new length, or `None` when the indexes would overflow.
pub(crate) async fn push_values(
    cx: &mut Cx<'_>,
    k: &[u8],
    row: &KeyRow,
    side: Side,
    values: &[&[u8]],
) -> Result<Option<i64>, StoreError> {
    let Ok(n) = i64::try_from(values.len()) else {
        return Ok(None);
    };
    let (lhead, ltail) = match side {
        Side::Left => (row.lhead.checked_sub(n), Some(row.ltail)),
        Side::Right => (Some(row.lhead), row.ltail.checked_add(n)),
    };
    let (Some(lhead), Some(ltail)) = (lhead, ltail) else {
        return Ok(None);
    };
    let rows: Vec<(i64, &[u8])> = values
        .iter()
        .enumerate()
        .map(|(j, v)| {
            let j = j as i64;
            match side {
                Side::Left => (row.lhead - 1 - j, *v),
                Side::Right => (row.ltail + j, *v),
            }
        })
        .collect();
    insert(cx, row.kid, &rows).await?;
    set_bounds(cx, k, row, lhead, ltail).await?;
    pushed(cx, k);
    Ok(Some(ltail - lhead))
}

/// `LPUSH` / `RPUSH` (`only_existing`: `LPUSHX` / `RPUSHX`) `key element...`.
/// (`args`: the whole request, the elements from argument 2 on.)
async fn push(
    cx: &mut Cx<'_>,
    k: &[u8],
    args: Args<'_>,
    side: Side,
    only_existing: bool,
) -> Result<(), StoreError> {
    let Some(row) = checks::write(cx, k, kind::LIST, !only_existing).await? else {
        return Ok(());
    };
    let Some(row) = row else {
        cx.reply().integer(0);
        return Ok(());
    };
    let values: Vec<&[u8]> = args.from(2).collect();
    match push_values(cx, k, &row, side, &values).await? {
        Some(len) => cx.reply().integer(len),
        None => cx.reply().error(INDEX_SPACE),
    };
    Ok(())
}

/// The statement reading the `n` (at least 1, at most the length) elements at `side` of the
/// list `row` in the order they are popped, and its parameters (the range of `idx`).
fn pop_range(row: &KeyRow, side: Side, n: i64) -> (&'static str, [Param<'static>; 3]) {
    let (from, to, sql) = match side {
        Side::Left => (
            row.lhead,
            row.lhead + n - 1,
            "SELECT v FROM {s}.redis_list WHERE kid = ? AND idx BETWEEN ? AND ? ORDER BY idx",
        ),
        Side::Right => (
            row.ltail - n,
            row.ltail - 1,
            "SELECT v FROM {s}.redis_list WHERE kid = ? AND idx BETWEEN ? AND ? ORDER BY idx DESC",
        ),
    };
    (
        sql,
        [Param::UInt(row.kid), Param::Int(from), Param::Int(to)],
    )
}

/// Removes up to `n` (at least 1) elements at `side` of the list `k` (row `row`) and returns
/// them in the order they were popped.
async fn pop(
    cx: &mut Cx<'_>,
    k: &[u8],
    row: &KeyRow,
    side: Side,
    n: i64,
) -> Result<Vec<Vec<u8>>, StoreError> {
    let n = n.clamp(0, llen(row));
    if n == 0 {
        return Ok(Vec::new());
    }
    let (sql, range) = pop_range(row, side, n);
    let values: Vec<Vec<u8>> = cx
        .tx
        .rows(sql, &range)
        .await?
        .into_iter()
        .map(first_bytes)
        .collect();
    remove_popped(cx, k, row, side, n).await?;
    Ok(values)
}

/// [`pop`] replying with the popped elements as an array, written as they are read (a
/// count covering a huge list never holds it whole).
async fn pop_reply(
    cx: &mut Cx<'_>,
    k: &[u8],
    row: &KeyRow,
    side: Side,
    n: i64,
) -> Result<(), StoreError> {
    let n = n.clamp(0, llen(row));
    if n == 0 {
        cx.reply().array_len(0);
        return Ok(());
    }
    let (sql, range) = pop_range(row, side, n);
    let header = |r: &mut manifold_redis_proto::Reply<'_>, n: usize| {
        r.array_len(n);
    };
    cx.stream_reply(sql, &range, header, super::hashes::bulk_columns)
        .await?;
    remove_popped(cx, k, row, side, n).await
}

/// Deletes the `n` (at least 1, at most the length) elements at `side` of the list `k`.
async fn remove_popped(
    cx: &mut Cx<'_>,
    k: &[u8],
    row: &KeyRow,
    side: Side,
    n: i64,
) -> Result<(), StoreError> {
    if n >= llen(row) {
        cx.tx.delete_key(cx.db, k, row).await?;
    } else {
        let (_, range) = pop_range(row, side, n);
        cx.tx
            .exec(
                "DELETE FROM {s}.redis_list WHERE kid = ? AND idx BETWEEN ? AND ?",
                &range,
            )
            .await?;
        let (lhead, ltail) = match side {
            Side::Left => (row.lhead + n, row.ltail),
            Side::Right => (row.lhead, row.ltail - n),
        };
        set_bounds(cx, k, row, lhead, ltail).await?;
    }
    Ok(())
}

/// `LPOP` / `RPOP key [count]`.
async fn pop_command(
    cx: &mut Cx<'_>,
    k: &[u8],
    side: Side,
    count: Option<i64>,
) -> Result<(), StoreError> {
    let Some(row) = checks::write(cx, k, kind::LIST, false).await? else {
        return Ok(());
    };
    let Some(row) = row else {
        if count.is_some() {
            cx.reply().null_array();
        } else {
            cx.reply().null();
        }
        return Ok(());
    };
    match count {
        Some(0) => {
            cx.reply().array_len(0);
        }
        None => match pop(cx, k, &row, side, 1).await?.first() {
            Some(v) => {
                cx.reply().bulk(v);
            }
            None => {
                cx.reply().null();
            }
        },
        Some(n) => pop_reply(cx, k, &row, side, n).await?,
    }
    Ok(())
}

/// `LLEN key`.
async fn llen_command(cx: &mut Cx<'_>, k: &[u8]) -> Result<(), StoreError> {
    if let Some(row) = checks::read(cx, k, kind::LIST).await? {
        cx.reply().integer(row.as_ref().map_or(0, llen));
    }
    Ok(())
}

/// `LMOVE src dst from to` (`RPOPLPUSH src dst`: from the right to the left): pops at `from`
/// of `src`, pushes at `to` of `dst`, in one transaction; `dst` of another type is refused
/// before anything moves. `src == dst` rotates the list.
async fn lmove(
    cx: &mut Cx<'_>,
    src: &[u8],
    dst: &[u8],
    from: Side,
    to: Side,
) -> Result<(), StoreError> {
    if lmove_at(cx, src, dst, from, to).await? == Served::No {
        cx.reply().null();
    }
    Ok(())
}

/// [`lmove`], answering nothing when `src` has no element.
async fn lmove_at(
    cx: &mut Cx<'_>,
    src: &[u8],
    dst: &[u8],
    from: Side,
    to: Side,
) -> Result<Served, StoreError> {
    let Some(srow) = checks::write(cx, src, kind::LIST, false).await? else {
        return Ok(Served::Yes);
    };
    let Some(srow) = srow else {
        return Ok(Served::No);
    };
    if src == dst {
        return rotate(cx, src, &srow, from, to).await.map(|()| Served::Yes);
    }
    let Some(drow) = checks::write(cx, dst, kind::LIST, false).await? else {
        return Ok(Served::Yes);
    };
    let Some(v) = pop(cx, src, &srow, from, 1).await?.into_iter().next() else {
        return Ok(Served::No);
    };
    let drow = match drow {
        Some(row) => row,
        None => cx.tx.create_key(cx.db, dst, kind::LIST).await?,
    };
    match push_values(cx, dst, &drow, to, &[&v]).await? {
        Some(_) => cx.reply().bulk(&v),
        None => cx.reply().error(INDEX_SPACE),
    };
    Ok(Served::Yes)
}

/// `LMOVE k k from to`: the element at `from` goes to `to` (it stays when they are the
/// same end); one row changes its `idx`.
async fn rotate(
    cx: &mut Cx<'_>,
    k: &[u8],
    row: &KeyRow,
    from: Side,
    to: Side,
) -> Result<(), StoreError> {
    let at = match from {
        Side::Left => row.lhead,
        Side::Right => row.ltail - 1,
    };
    let v = cx
        .tx
        .rows(
            "SELECT v FROM {s}.redis_list WHERE kid = ? AND idx = ?",
            &[Param::UInt(row.kid), Param::Int(at)],
        )
        .await?
        .into_iter()
        .next()
        .map(first_bytes);
    let Some(v) = v else {
        cx.reply().null();
        return Ok(());
    };
    let moved = match (from, to) {
        (Side::Left, Side::Right) => row
            .ltail
            .checked_add(1)
            .map(|t| (row.ltail, row.lhead + 1, t)),
        (Side::Right, Side::Left) => row.lhead.checked_sub(1).map(|h| (h, h, row.ltail - 1)),
        _ => Some((at, row.lhead, row.ltail)),
    };
    let Some((new_idx, lhead, ltail)) = moved else {
        cx.reply().error(INDEX_SPACE);
        return Ok(());
    };
    if new_idx != at {
        cx.tx
            .exec(
                "UPDATE {s}.redis_list SET idx = ? WHERE kid = ? AND idx = ?",
                &[Param::Int(new_idx), Param::UInt(row.kid), Param::Int(at)],
            )
            .await?;
    }
    set_bounds(cx, k, row, lhead, ltail).await?;
    pushed(cx, k);
    cx.reply().bulk(&v);
    Ok(())
}

/// `LMPOP numkeys key... LEFT|RIGHT [COUNT count]`: pops from the first of the keys that
/// holds a list; nothing answered when none does.
async fn lmpop_run(cx: &mut Cx<'_>, m: MPop<'_>) -> Result<Served, StoreError> {
    let MPop {
        args,
        keys,
        side,
        count,
    } = m;
    for i in keys {
        let k = args.get(i);
        let Some(found) = checks::write(cx, k, kind::LIST, false).await? else {
            return Ok(Served::Yes);
        };
        let Some(row) = found else { continue };
        cx.reply().array_len(2).bulk(k);
        pop_reply(cx, k, &row, side, count).await?;
        return Ok(Served::Yes);
    }
    Ok(Served::No)
}
