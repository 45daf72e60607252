//! The range commands: `ZRANGE` (by rank, `BYSCORE`, `BYLEX`, `REV`, `LIMIT`,
//! `WITHSCORES`) and its older forms, `ZRANGESTORE`, `ZCOUNT`, `ZLEXCOUNT`,
//! `ZREMRANGEBYRANK`/`SCORE`/`LEX`. Every range is one SQL condition on `sk` (scores) or on
//! `member` (lex), read in `ORDER BY sk, member` (reversed for `REV`) with `LIMIT ?, ?`:
//! written as its rows are read ([`crate::exec::Cx::stream_reply`]), or copied by the server
//! for `ZRANGESTORE` (`INSERT ... SELECT`).

use manifold_backend::Param;
use manifold_redis_proto::Reply;

use super::super::{checks, parse_i64, Args};
use super::{delete_hashes, member_row, score, Spec};
use crate::cmd::checks::Absent;
use crate::errors;
use crate::exec::Cx;
use crate::store::keys::{hash, kind};
use crate::store::{take_bytes, StoreError};

const NOT_A_FLOAT_RANGE: &[u8] = b"min or max is not a float";
const NOT_A_LEX_RANGE: &[u8] = b"min or max not valid string range item";
const LIMIT_NEEDS_BY: &[u8] =
    b"syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
const WITHSCORES_BYLEX: &[u8] = b"syntax error, WITHSCORES not supported in combination with BYLEX";

/// Runs one range command.
pub async fn run(cx: &mut Cx<'_>, spec: &'static Spec, args: Args<'_>) -> Result<(), StoreError> {
    use Kind::{Lex, Rank, Score};
    match spec.name {
        "zcount" => count(cx, args, Score).await,
        "zlexcount" => count(cx, args, Lex).await,
        "zrange" => zrange(cx, args, false, None, None).await,
        "zrangestore" => zrange(cx, args, true, None, None).await,
        "zrangebyscore" => zrange(cx, args, false, Some(Score), Some(false)).await,
        "zrevrangebyscore" => zrange(cx, args, false, Some(Score), Some(true)).await,
        "zrevrange" => zrange(cx, args, false, Some(Rank), Some(true)).await,
        "zrangebylex" => zrange(cx, args, false, Some(Lex), Some(false)).await,
        "zrevrangebylex" => zrange(cx, args, false, Some(Lex), Some(true)).await,
        "zremrangebyrank" => remove(cx, args, Rank).await,
        "zremrangebyscore" => remove(cx, args, Score).await,
        "zremrangebylex" => remove(cx, args, Lex).await,
        other => unreachable!("{other} is not a sorted set command"),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rank,
    Score,
    Lex,
}

/// A parsed range: the SQL condition after `kid = ?` and its parameters, or `None` when it
/// can hold nothing (a lex range ending at `-` or starting at `+`).
struct Cond<'a> {
    sql: &'static str,
    params: Vec<Param<'a>>,
}

/// A score range (`zslParseRange`): `sk` against the bounds' order keys.
fn score_range<'a>(min: &[u8], max: &[u8]) -> Option<Cond<'a>> {
    let (lo, lo_ex) = score::parse_bound(min)?;
    let (hi, hi_ex) = score::parse_bound(max)?;
    let sql = match (lo_ex, hi_ex) {
        (false, false) => " AND sk >= ? AND sk <= ?",
        (true, false) => " AND sk > ? AND sk <= ?",
        (false, true) => " AND sk >= ? AND sk < ?",
        (true, true) => " AND sk > ? AND sk < ?",
    };
    Some(Cond {
        sql,
        params: vec![
            Param::Int(score::order_key(lo)),
            Param::Int(score::order_key(hi)),
        ],
    })
}

/// One bound of a lex range (`zslParseLexRangeItem`).
#[derive(Clone, Copy)]
enum Lex<'a> {
    /// `-`
    Least,
    /// `+`
    Most,
    /// `[value`
    In(&'a [u8]),
    /// `(value`
    Ex(&'a [u8]),
}

fn lex_bound(arg: &[u8]) -> Option<Lex<'_>> {
    // C sees the text up to a NUL: `+` and `-` must be alone.
    let alone = arg.len() == 1 || arg.get(1) == Some(&0);
    match arg.first()? {
        b'+' if alone => Some(Lex::Most),
        b'-' if alone => Some(Lex::Least),
        b'[' => Some(Lex::In(&arg[1..])),
        b'(' => Some(Lex::Ex(&arg[1..])),
        _ => None,
    }
}

/// A lex range: `Err` when it is not one; `Ok(None)` when it holds nothing.
fn lex_range<'a>(min: &'a [u8], max: &'a [u8]) -> Result<Option<Cond<'a>>, ()> {
    let (lo, hi) = (lex_bound(min).ok_or(())?, lex_bound(max).ok_or(())?);
    let mut params = Vec::with_capacity(2);
    let lo_sql = match lo {
        Lex::Least => "",
        Lex::Most => return Ok(None),
        Lex::In(v) => {
            params.push(Param::Bytes(v));
            ">="
        }
        Lex::Ex(v) => {
            params.push(Param::Bytes(v));
            ">"
        }
    };
    let hi_sql = match hi {
        Lex::Most => "",
        Lex::Least => return Ok(None),
        Lex::In(v) => {
            params.push(Param::Bytes(v));
            "<="
        }
        Lex::Ex(v) => {
            params.push(Param::Bytes(v));
            "<"
        }
    };
    let sql = match (lo_sql, hi_sql) {
        ("", "") => "",
        ("", "<=") => " AND member <= ?",
        ("", _) => " AND member < ?",
        (">=", "") => " AND member >= ?",
        (_, "") => " AND member > ?",
        (">=", "<=") => " AND member >= ? AND member <= ?",
        (">=", _) => " AND member >= ? AND member < ?",
        (_, "<=") => " AND member > ? AND member <= ?",
        _ => " AND member > ? AND member < ?",
    };
    Ok(Some(Cond { sql, params }))
}

/// Redis's index arithmetic for a rank range of a set of `len`: the first index and how
/// many, or `None` when empty.
fn rank_window(len: i64, start: i64, end: i64) -> Option<(i64, i64)> {
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start, end - start + 1))
}

/// The range `lo`..`hi` of kind `by` (with `LIMIT offset limit` for scores and lex), or
/// the error text when it is not one.
fn window<'a>(
    by: Kind,
    lo: &'a [u8],
    hi: &'a [u8],
    offset: i64,
    limit: i64,
) -> Result<Window<'a>, &'static [u8]> {
    Ok(match by {
        Kind::Rank => {
            let (Some(a), Some(b)) = (parse_i64(lo), parse_i64(hi)) else {
                return Err(errors::NOT_INTEGER);
            };
            Window::Rank(a, b)
        }
        Kind::Score => {
            let c = score_range(lo, hi).ok_or(NOT_A_FLOAT_RANGE)?;
            Window::Cond(Some(c), offset, limit)
        }
        Kind::Lex => {
            let c = lex_range(lo, hi).map_err(|()| NOT_A_LEX_RANGE)?;
            Window::Cond(c, offset, limit)
        }
    })
}

/// `ZCOUNT` / `ZLEXCOUNT key min max`.
async fn count(cx: &mut Cx<'_>, args: Args<'_>, k: Kind) -> Result<(), StoreError> {
    let cond = match window(k, args.get(2), args.get(3), 0, -1) {
        Err(e) => {
            cx.reply().error(e);
            return Ok(());
        }
        Ok(Window::Cond(c, ..)) => c,
        Ok(Window::Rank(..)) => None,
    };
    let Some(row) = checks::read_or(cx, args.get(1), kind::ZSET, Absent::Zero).await? else {
        return Ok(());
    };
    let Some(cond) = cond else {
        cx.reply().integer(0);
        return Ok(());
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {{s}}.redis_zset WHERE kid = ?{}",
        cond.sql
    );
    let mut params = vec![Param::UInt(row.kid)];
    params.extend(cond.params);
    let rows = cx.tx.rows(&sql, &params).await?;
    let n = rows
        .first()
        .and_then(|r| r.first())
        .and_then(crate::store::int)
        .unwrap_or(0);
    cx.reply().integer(n);
    Ok(())
}

/// A range to read.
enum Window<'a> {
    Rank(i64, i64),
    /// A score or lex condition (`None`: empty), with `LIMIT offset count`.
    Cond(Option<Cond<'a>>, i64, i64),
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`, its
/// older forms (`by` and `rev` fixed), and `ZRANGESTORE dst src ...` (`store`), parsed as
/// `zrangeGenericCommand` parses them (errors in its order).
async fn zrange(
    cx: &mut Cx<'_>,
    args: Args<'_>,
    store: bool,
    by: Option<Kind>,
    rev: Option<bool>,
) -> Result<(), StoreError> {
    let first = if store { 2 } else { 1 };
    let (mut by, mut rev) = (by, rev);
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = first + 3;
    while j < args.len() {
        let o = args.get(j);
        let is = |w: &[u8]| o.eq_ignore_ascii_case(w);
        if !store && is(b"withscores") {
            withscores = true;
        } else if is(b"limit") && args.len() - j > 2 {
            let (Some(a), Some(b)) = (parse_i64(args.get(j + 1)), parse_i64(args.get(j + 2)))
            else {
                cx.reply().error(errors::NOT_INTEGER);
                return Ok(());
            };
            (offset, limit) = (a, b);
            j += 2;
        } else if rev.is_none() && is(b"rev") {
            rev = Some(true);
        } else if by.is_none() && is(b"bylex") {
            by = Some(Kind::Lex);
        } else if by.is_none() && is(b"byscore") {
            by = Some(Kind::Score);
        } else {
            cx.reply().error(errors::SYNTAX);
            return Ok(());
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let by = by.unwrap_or(Kind::Rank);
    if limit != -1 && by == Kind::Rank {
        cx.reply().error(LIMIT_NEEDS_BY);
        return Ok(());
    }
    if withscores && by == Kind::Lex {
        cx.reply().error(WITHSCORES_BYLEX);
        return Ok(());
    }
    let (mut lo, mut hi) = (args.get(first + 1), args.get(first + 2));
    if rev && by != Kind::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let window = match window(by, lo, hi, offset, limit) {
        Ok(w) => w,
        Err(e) => {
            cx.reply().error(e);
            return Ok(());
        }
    };
    let Some(row) = checks::read(cx, args.get(first), kind::ZSET).await? else {
        return Ok(());
    };
    if store {
        let query = row.and_then(|row| window_query(row.kid, row.len, window, rev, STORED));
        return store_window(cx, args.get(1), query).await;
    }
    let nested = cx.proto == manifold_redis_proto::Protocol::Resp3;
    let query = row.and_then(|row| window_query(row.kid, row.len, window, rev, READ));
    let Some((sql, params)) = query else {
        cx.reply().array_len(0);
        return Ok(());
    };
    // Written as the members are read: a whole sorted set is never held.
    let header = |r: &mut Reply<'_>, n: usize| {
        r.array_len(if withscores && !nested { n * 2 } else { n });
    };
    let element = |r: &mut Reply<'_>, row| {
        let Some(m) = member_row(row) else {
            return 0;
        };
        if withscores && nested {
            r.array_len(2);
        }
        r.bulk(&m.member);
        if withscores {
            r.double(m.score);
        }
        1
    };
    cx.stream_reply(&sql, &params, header, element).await?;
    Ok(())
}

/// What a range's statement does with the members: reads them as rows of `member, score, sk`.
const READ: &str = "SELECT member, score, sk";
/// ... or copies them into the sorted set whose `kid` is its first parameter.
const STORED: &str =
    "INSERT INTO {s}.redis_zset (kid, mh, member, score, sk) SELECT ?, mh, member, score, sk";

/// The statement `what` (`READ`, `STORED`) over `window` of `kid` (a set of `len`), in order
/// (reversed with `rev`), and its parameters after `STORED`'s; `None` when it is empty.
fn window_query<'a>(
    kid: u64,
    len: i64,
    window: Window<'a>,
    rev: bool,
    what: &str,
) -> Option<(String, Vec<Param<'a>>)> {
    let order = if rev {
        " ORDER BY sk DESC, member DESC LIMIT ?, ?"
    } else {
        " ORDER BY sk, member LIMIT ?, ?"
    };
    let (cond, offset, limit) = match window {
        Window::Rank(start, end) => {
            let (offset, n) = rank_window(len, start, end)?;
            (None, offset, n)
        }
        Window::Cond(None, ..) => return None,
        // A negative offset skips every member (Redis walks past the end).
        Window::Cond(Some(_), offset, _) if offset < 0 => return None,
        Window::Cond(Some(c), offset, limit) => {
            (Some(c), offset, if limit < 0 { i64::MAX } else { limit })
        }
    };
    let sql = format!(
        "{what} FROM {{s}}.redis_zset WHERE kid = ?{}{order}",
        cond.as_ref().map_or("", |c| c.sql)
    );
    let mut params = vec![Param::UInt(kid)];
    if let Some(c) = cond {
        params.extend(c.params);
    }
    params.push(Param::UInt(offset as u64));
    params.push(Param::UInt(limit as u64));
    Some((sql, params))
}

/// `ZRANGESTORE`'s end: `dst` becomes a sorted set of the members `query` (a `STORED`
/// statement, `None`: none) copies in the server (whatever `dst` was, its TTL gone), or is
/// deleted when there are none; replies how many. The key's row goes first and its old
/// members last, so `dst` may be the source.
async fn store_window(
    cx: &mut Cx<'_>,
    dst: &[u8],
    query: Option<(String, Vec<Param<'_>>)>,
) -> Result<(), StoreError> {
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
    if let Some((sql, mut params)) = query {
        let row = cx.tx.create_key(cx.db, dst, kind::ZSET).await?;
        params.insert(0, Param::UInt(row.kid));
        added = i64::try_from(cx.tx.affected(&sql, &params).await?).unwrap_or(i64::MAX);
        new = Some(row);
    }
    if let Some(old) = &old {
        cx.tx.delete_members(old).await?;
    }
    if let Some(row) = new {
        // An empty range deletes the key just made.
        cx.tx.collection_written(cx.db, dst, &row, added).await?;
    }
    cx.reply().integer(added);
    Ok(())
}

/// `ZREMRANGEBYRANK key start stop`, `ZREMRANGEBYSCORE key min max`, `ZREMRANGEBYLEX key
/// min max`.
async fn remove(cx: &mut Cx<'_>, args: Args<'_>, by: Kind) -> Result<(), StoreError> {
    let (lo, hi) = (args.get(2), args.get(3));
    let window = match window(by, lo, hi, 0, -1) {
        Ok(w) => w,
        Err(e) => {
            cx.reply().error(e);
            return Ok(());
        }
    };
    let k = args.get(1);
    let Some(row) = checks::write_or(cx, k, kind::ZSET, Absent::Zero).await? else {
        return Ok(());
    };
    let deleted = match window {
        Window::Rank(start, end) => match rank_window(row.len, start, end) {
            None => 0,
            Some((offset, n)) => {
                let rows = cx
                    .tx
                    .rows(
                        "SELECT mh FROM {s}.redis_zset WHERE kid = ? ORDER BY sk, member LIMIT ?, ?",
                        &[
                            Param::UInt(row.kid),
                            Param::UInt(offset as u64),
                            Param::UInt(n as u64),
                        ],
                    )
                    .await?;
                let hashes: Vec<[u8; 32]> = rows
                    .into_iter()
                    .filter_map(|mut r| <[u8; 32]>::try_from(take_bytes(r.get_mut(0)?)?).ok())
                    .collect();
                delete_hashes(cx, row.kid, &hashes).await?
            }
        },
        Window::Cond(None, ..) => 0,
        Window::Cond(Some(c), ..) => {
            let sql = format!("DELETE FROM {{s}}.redis_zset WHERE kid = ?{}", c.sql);
            let mut params = vec![Param::UInt(row.kid)];
            params.extend(c.params);
            let n = cx.tx.affected(&sql, &params).await?;
            i64::try_from(n).unwrap_or(i64::MAX)
        }
    };
    if deleted > 0 {
        cx.tx.collection_written(cx.db, k, &row, -deleted).await?;
    }
    cx.reply().integer(deleted);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::rank_window;

    #[test]
    fn rank_windows_as_redis() {
        assert_eq!(rank_window(5, 0, -1), Some((0, 5)));
        assert_eq!(rank_window(5, -2, -1), Some((3, 2)));
        assert_eq!(rank_window(5, -100, 1), Some((0, 2)));
        assert_eq!(rank_window(5, 3, 100), Some((3, 2)));
        assert_eq!(rank_window(5, 5, 10), None);
        assert_eq!(rank_window(5, 2, 1), None);
        assert_eq!(rank_window(5, 0, -6), None);
        assert_eq!(rank_window(0, 0, -1), None);
        assert_eq!(rank_window(5, i64::MIN, i64::MAX), Some((0, 5)));
    }
}
