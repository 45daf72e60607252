//! The range commands: `ZRANGE` (by rank, `BYSCORE`, `BYLEX`, `REV`, `LIMIT`,
//! `WITHSCORES`) and its older forms, `ZRANGESTORE`, `ZCOUNT`, `ZLEXCOUNT`,
//! `ZREMRANGEBYRANK`/`SCORE`/`LEX`. Every range is one SQL condition on `sk` (scores) or on
//! `member` (lex), read in `ORDER BY sk, member` (reversed for `REV`) with `LIMIT ?, ?`:
//! written as its rows are read ([`crate::store::context::Cx::stream_reply`]), or copied by the server
//! for `ZRANGESTORE` (`INSERT ... SELECT`).

use manifold_backend::Param;
use manifold_redis_proto::Reply;

use super::parse::{Range, ZRange};
use super::{delete_hashes, member_row, score};
use crate::cmd::checks::{self, Absent};
use crate::store::context::Cx;
use crate::store::keys::{hash, kind};
use crate::store::{take_bytes, StoreError};

impl ZRange<'_> {
    /// Runs `ZRANGE` and its forms, `ZRANGESTORE`.
    pub(super) async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        zrange(cx, self).await
    }
}

/// A parsed range: the SQL condition after `kid = ?` and its parameters, or `None` when it
/// can hold nothing (a lex range ending at `-` or starting at `+`).
struct Cond<'a> {
    sql: &'static str,
    params: Vec<Param<'a>>,
}

/// A score range (`zslParseRange`'s bounds): `sk` against the bounds' order keys.
fn score_range<'a>((lo, lo_ex): (f64, bool), (hi, hi_ex): (f64, bool)) -> Cond<'a> {
    let sql = match (lo_ex, hi_ex) {
        (false, false) => " AND sk >= ? AND sk <= ?",
        (true, false) => " AND sk > ? AND sk <= ?",
        (false, true) => " AND sk >= ? AND sk < ?",
        (true, true) => " AND sk > ? AND sk < ?",
    };
    Cond {
        sql,
        params: vec![
            Param::Int(score::order_key(lo)),
            Param::Int(score::order_key(hi)),
        ],
    }
}

/// One bound of a lex range (`zslParseLexRangeItem`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LexBound<'a> {
    /// `-`
    Least,
    /// `+`
    Most,
    /// `[value`
    In(&'a [u8]),
    /// `(value`
    Ex(&'a [u8]),
}

pub(super) fn lex_bound(arg: &[u8]) -> Option<LexBound<'_>> {
    // C sees the text up to a NUL: `+` and `-` must be alone.
    let alone = arg.len() == 1 || arg.get(1) == Some(&0);
    match arg.first()? {
        b'+' if alone => Some(LexBound::Most),
        b'-' if alone => Some(LexBound::Least),
        b'[' => Some(LexBound::In(&arg[1..])),
        b'(' => Some(LexBound::Ex(&arg[1..])),
        _ => None,
    }
}

/// A lex range's condition: `None` when it holds nothing.
fn lex_range<'a>(lo: LexBound<'a>, hi: LexBound<'a>) -> Option<Cond<'a>> {
    let mut params = Vec::with_capacity(2);
    let lo_sql = match lo {
        LexBound::Least => "",
        LexBound::Most => return None,
        LexBound::In(v) => {
            params.push(Param::Bytes(v));
            ">="
        }
        LexBound::Ex(v) => {
            params.push(Param::Bytes(v));
            ">"
        }
    };
    let hi_sql = match hi {
        LexBound::Most => "",
        LexBound::Least => return None,
        LexBound::In(v) => {
            params.push(Param::Bytes(v));
            "<="
        }
        LexBound::Ex(v) => {
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
    Some(Cond { sql, params })
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

/// The rows `range` selects (with `LIMIT offset limit` for scores and lex).
fn window(range: Range<'_>, offset: i64, limit: i64) -> Window<'_> {
    match range {
        Range::Rank(a, b) => Window::Rank(a, b),
        Range::Score { min, max } => Window::Cond(Some(score_range(min, max)), offset, limit),
        Range::Lex { min, max } => Window::Cond(lex_range(min, max), offset, limit),
    }
}

/// `ZCOUNT` / `ZLEXCOUNT key min max`.
pub(super) async fn count(cx: &mut Cx<'_>, k: &[u8], range: Range<'_>) -> Result<(), StoreError> {
    let cond = match window(range, 0, -1) {
        Window::Cond(c, ..) => c,
        Window::Rank(..) => None,
    };
    let Some(row) = checks::read_or(cx, k, kind::ZSET, Absent::Zero).await? else {
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

/// `ZRANGE` and its forms, `ZRANGESTORE` (its options checked by the parser).
async fn zrange(cx: &mut Cx<'_>, z: ZRange<'_>) -> Result<(), StoreError> {
    let ZRange {
        key,
        dst,
        range,
        rev,
        limit: (offset, limit),
        withscores,
    } = z;
    let window = window(range, offset, limit);
    let Some(row) = checks::read(cx, key, kind::ZSET).await? else {
        return Ok(());
    };
    if let Some(dst) = dst {
        let query = row.and_then(|row| window_query(row.kid, row.len, window, rev, STORED));
        return store_window(cx, dst, query).await;
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
pub(super) async fn remove(cx: &mut Cx<'_>, k: &[u8], range: Range<'_>) -> Result<(), StoreError> {
    let window = window(range, 0, -1);
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
