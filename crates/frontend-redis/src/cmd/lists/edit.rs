//! The list commands that read or edit by position or by value: `LRANGE`, `LINDEX`, `LSET`,
//! `LINSERT`, `LREM`, `LTRIM`, `LPOS`.

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;

use super::{first_bytes, insert, llen, set_bounds};
use crate::cmd::checks::Absent;
use crate::cmd::{checks, parse_i64, Args};
use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::{kind, KeyRow};
use crate::store::{int, StoreError};

/// `LSET` on a missing key.
const NO_SUCH_KEY: &[u8] = b"no such key";
/// `LSET` past the ends.
const INDEX_OUT_OF_RANGE: &[u8] = b"index out of range";
/// `LPOS ... RANK 0`.
const RANK_ZERO: &[u8] = b"RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
/// `LPOS ... COUNT` not an integer or negative.
const COUNT_NEGATIVE: &[u8] = b"COUNT can't be negative";
/// `LPOS ... MAXLEN` not an integer or negative.
const MAXLEN_NEGATIVE: &[u8] = b"MAXLEN can't be negative";

/// `LIMIT` for no limit.
const NO_LIMIT: u64 = u64::MAX;

/// Redis's range of `start..=end` (negative: from the end) in a list of `len`, as
/// positions `0..len`, or `None` when empty (`addListRangeReply`, `ltrimCommand`).
fn range(len: i64, start: i64, end: i64) -> Option<(i64, i64)> {
    let mut start = if start < 0 { len + start } else { start };
    let end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    Some((start, end.min(len - 1)))
}

/// Redis's position `index` (negative: from the end) in a list of `len`, if inside it.
fn position(len: i64, index: i64) -> Option<i64> {
    let i = if index < 0 { len + index } else { index };
    (0..len).contains(&i).then_some(i)
}

/// `LRANGE key start stop`.
pub(super) async fn lrange(
    cx: &mut Cx<'_>,
    k: &[u8],
    start: i64,
    end: i64,
) -> Result<(), StoreError> {
    let Some(row) = checks::read_or(cx, k, kind::LIST, Absent::EmptyArray).await? else {
        return Ok(());
    };
    let Some((a, b)) = range(llen(&row), start, end) else {
        cx.reply().array_len(0);
        return Ok(());
    };
    // Written as the elements are read: a whole list is never held.
    cx.stream_reply(
        "SELECT v FROM {s}.redis_list WHERE kid = ? AND idx BETWEEN ? AND ? ORDER BY idx",
        &[
            Param::UInt(row.kid),
            Param::Int(row.lhead + a),
            Param::Int(row.lhead + b),
        ],
        |r, n| {
            r.array_len(n);
        },
        crate::cmd::hashes::bulk_columns,
    )
    .await?;
    Ok(())
}

/// The element at `idx` of the list `kid`.
async fn element(cx: &mut Cx<'_>, kid: u64, idx: i64) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(cx
        .tx
        .rows(
            "SELECT v FROM {s}.redis_list WHERE kid = ? AND idx = ?",
            &[Param::UInt(kid), Param::Int(idx)],
        )
        .await?
        .into_iter()
        .next()
        .map(first_bytes))
}

/// `LINDEX key index` (`None`: not an integer, refused after the key is looked up, as in
/// Redis).
pub(super) async fn lindex(
    cx: &mut Cx<'_>,
    k: &[u8],
    index: Option<i64>,
) -> Result<(), StoreError> {
    let Some(row) = checks::read_or(cx, k, kind::LIST, Absent::Null).await? else {
        return Ok(());
    };
    let Some(index) = index else {
        cx.reply().error(errors::NOT_INTEGER);
        return Ok(());
    };
    let v = match position(llen(&row), index) {
        Some(i) => element(cx, row.kid, row.lhead + i).await?,
        None => None,
    };
    match v {
        Some(v) => cx.reply().bulk(&v),
        None => cx.reply().null(),
    };
    Ok(())
}

/// `LSET key index element` (`None`: not an integer, refused after the key, as in Redis).
pub(super) async fn lset(
    cx: &mut Cx<'_>,
    k: &[u8],
    index: Option<i64>,
    value: &[u8],
) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::LIST, Absent::Error(NO_SUCH_KEY)).await? else {
        return Ok(());
    };
    let Some(index) = index else {
        cx.reply().error(errors::NOT_INTEGER);
        return Ok(());
    };
    let Some(i) = position(llen(&row), index) else {
        cx.reply().error(INDEX_OUT_OF_RANGE);
        return Ok(());
    };
    cx.tx
        .exec(
            "UPDATE {s}.redis_list SET v = ? WHERE kid = ? AND idx = ?",
            &[
                Param::Bytes(value),
                Param::UInt(row.kid),
                Param::Int(row.lhead + i),
            ],
        )
        .await?;
    set_bounds(cx, k, &row, row.lhead, row.ltail).await?;
    cx.reply().simple(b"OK");
    Ok(())
}

/// Makes room for one element at `at` (an `idx` in `lhead..=ltail`) of the list `row` by
/// shifting its shorter side; returns the `idx` of the room and the new bounds.
async fn open_gap(
    cx: &mut Cx<'_>,
    row: &KeyRow,
    at: i64,
) -> Result<Option<(i64, i64, i64)>, StoreError> {
    if row.ltail - at <= at - row.lhead {
        let Some(ltail) = row.ltail.checked_add(1) else {
            return Ok(None);
        };
        cx.tx
            .exec(
                "UPDATE {s}.redis_list SET idx = idx + 1 WHERE kid = ? AND idx >= ? ORDER BY idx DESC",
                &[Param::UInt(row.kid), Param::Int(at)],
            )
            .await?;
        Ok(Some((at, row.lhead, ltail)))
    } else {
        let Some(lhead) = row.lhead.checked_sub(1) else {
            return Ok(None);
        };
        cx.tx
            .exec(
                "UPDATE {s}.redis_list SET idx = idx - 1 WHERE kid = ? AND idx < ? ORDER BY idx",
                &[Param::UInt(row.kid), Param::Int(at)],
            )
            .await?;
        Ok(Some((at - 1, lhead, row.ltail)))
    }
}

/// `LINSERT key BEFORE|AFTER pivot element`.
pub(super) async fn linsert(
    cx: &mut Cx<'_>,
    k: &[u8],
    after: bool,
    pivot: &[u8],
    value: &[u8],
) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::LIST, Absent::Zero).await? else {
        return Ok(());
    };
    let pivot = cx
        .tx
        .int(
            "SELECT idx FROM {s}.redis_list WHERE kid = ? AND v = ? ORDER BY idx LIMIT 1",
            &[Param::UInt(row.kid), Param::Bytes(pivot)],
        )
        .await?;
    let Some(pivot) = pivot else {
        cx.reply().integer(-1);
        return Ok(());
    };
    let at = if after { pivot + 1 } else { pivot };
    let Some((idx, lhead, ltail)) = open_gap(cx, &row, at).await? else {
        cx.reply().error(super::INDEX_SPACE);
        return Ok(());
    };
    insert(cx, row.kid, &[(idx, value)]).await?;
    set_bounds(cx, k, &row, lhead, ltail).await?;
    cx.reply().integer(ltail - lhead);
    Ok(())
}

/// `LREM key count element`: the matches' `idx` come from SQL; the rows between the first
/// and the last removed are rewritten, the shorter side beyond them shifted.
pub(super) async fn lrem(
    cx: &mut Cx<'_>,
    k: &[u8],
    count: i64,
    value: &[u8],
) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::LIST, Absent::Zero).await? else {
        return Ok(());
    };
    let (sql, limit) = match count {
        0 => (
            "SELECT idx FROM {s}.redis_list WHERE kid = ? AND v = ? ORDER BY idx LIMIT ?",
            NO_LIMIT,
        ),
        c if c > 0 => (
            "SELECT idx FROM {s}.redis_list WHERE kid = ? AND v = ? ORDER BY idx LIMIT ?",
            c.unsigned_abs(),
        ),
        c => (
            "SELECT idx FROM {s}.redis_list WHERE kid = ? AND v = ? ORDER BY idx DESC LIMIT ?",
            c.unsigned_abs(),
        ),
    };
    let mut removed: Vec<i64> = cx
        .tx
        .rows(
            sql,
            &[
                Param::UInt(row.kid),
                Param::Bytes(value),
                Param::UInt(limit),
            ],
        )
        .await?
        .iter()
        .filter_map(|r| r.first().and_then(int))
        .collect();
    removed.sort_unstable();
    let (Some(&first), Some(&last)) = (removed.first(), removed.last()) else {
        cx.reply().integer(0);
        return Ok(());
    };
    let r = removed.len() as i64;
    if r >= llen(&row) {
        cx.tx.delete_key(cx.db, k, &row).await?;
        cx.reply().integer(r);
        return Ok(());
    }
    let span = [Param::UInt(row.kid), Param::Int(first), Param::Int(last)];
    let survivors: Vec<(i64, Vec<u8>)> = cx
        .tx
        .rows(
            "SELECT idx, v FROM {s}.redis_list WHERE kid = ? AND idx BETWEEN ? AND ? ORDER BY idx",
            &span,
        )
        .await?
        .into_iter()
        .filter_map(|mut r| {
            let idx = r.first().and_then(int)?;
            if removed.binary_search(&idx).is_ok() {
                return None;
            }
            Some((idx, r.get_mut(1).and_then(crate::store::take_bytes)?))
        })
        .collect();
    cx.tx
        .exec(
            "DELETE FROM {s}.redis_list WHERE kid = ? AND idx BETWEEN ? AND ?",
            &span,
        )
        .await?;
    let left = first - row.lhead;
    let right = row.ltail - 1 - last;
    let (base, lhead, ltail) = if right <= left {
        cx.tx
            .exec(
                "UPDATE {s}.redis_list SET idx = idx - ? WHERE kid = ? AND idx > ? ORDER BY idx",
                &[Param::Int(r), Param::UInt(row.kid), Param::Int(last)],
            )
            .await?;
        (first, row.lhead, row.ltail - r)
    } else {
        cx.tx
            .exec(
                "UPDATE {s}.redis_list SET idx = idx + ? WHERE kid = ? AND idx < ? ORDER BY idx DESC",
                &[Param::Int(r), Param::UInt(row.kid), Param::Int(first)],
            )
            .await?;
        (first + r, row.lhead + r, row.ltail)
    };
    let rows: Vec<(i64, &[u8])> = survivors
        .iter()
        .enumerate()
        .map(|(j, (_, v))| (base + j as i64, v.as_slice()))
        .collect();
    insert(cx, row.kid, &rows).await?;
    set_bounds(cx, k, &row, lhead, ltail).await?;
    cx.reply().integer(r);
    Ok(())
}

/// `LTRIM key start stop`.
pub(super) async fn ltrim(
    cx: &mut Cx<'_>,
    k: &[u8],
    start: i64,
    end: i64,
) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::LIST, Absent::Ok).await? else {
        return Ok(());
    };
    match range(llen(&row), start, end) {
        None => cx.tx.delete_key(cx.db, k, &row).await?,
        Some((a, b)) => {
            let (lhead, ltail) = (row.lhead + a, row.lhead + b + 1);
            cx.tx
                .exec(
                    "DELETE FROM {s}.redis_list WHERE kid = ? AND (idx < ? OR idx >= ?)",
                    &[Param::UInt(row.kid), Param::Int(lhead), Param::Int(ltail)],
                )
                .await?;
            set_bounds(cx, k, &row, lhead, ltail).await?;
        }
    }
    cx.reply().simple(b"OK");
    Ok(())
}

/// `LPOS`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LposOptions {
    pub rank: i64,
    /// `None`: not given (one position or nil); `Some(0)`: all matches.
    pub count: Option<i64>,
    /// 0: the whole list.
    pub maxlen: i64,
}

/// Parses `LPOS`'s options (from argument 3); the error text on failure.
pub(super) fn lpos_options(args: &Args<'_>) -> Result<LposOptions, &'static [u8]> {
    let mut o = LposOptions {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut j = 3;
    while j < args.len() {
        let opt = args.get(j);
        let more = j + 1 < args.len();
        let value = args.get(j + 1);
        if opt.eq_ignore_ascii_case(b"rank") && more {
            o.rank = parse_i64(value).ok_or(errors::NOT_INTEGER)?;
            if o.rank == 0 {
                return Err(RANK_ZERO);
            }
        } else if opt.eq_ignore_ascii_case(b"count") && more {
            o.count = Some(parse_i64(value).filter(|&c| c >= 0).ok_or(COUNT_NEGATIVE)?);
        } else if opt.eq_ignore_ascii_case(b"maxlen") && more {
            o.maxlen = parse_i64(value)
                .filter(|&m| m >= 0)
                .ok_or(MAXLEN_NEGATIVE)?;
        } else {
            return Err(errors::SYNTAX);
        }
        j += 2;
    }
    Ok(o)
}

/// `LPOS key element [RANK rank] [COUNT num] [MAXLEN len]`.
pub(super) async fn lpos(
    cx: &mut Cx<'_>,
    k: &[u8],
    element: &[u8],
    o: LposOptions,
) -> Result<(), StoreError> {
    let Some(row) = checks::read(cx, k, kind::LIST).await? else {
        return Ok(());
    };
    let Some(row) = row else {
        if o.count.is_some() {
            cx.reply().array_len(0);
        } else {
            cx.reply().null();
        }
        return Ok(());
    };
    // A negative rank searches from the tail. Redis negates it as a C `long`: `LONG_MIN`
    // stays negative, so every match counts (the first from the tail).
    let backward = o.rank < 0;
    let rank = o.rank.wrapping_neg();
    let skip = if backward && rank < 0 {
        0
    } else {
        o.rank.unsigned_abs() - 1
    };
    let len = llen(&row);
    let scan = if o.maxlen == 0 {
        len
    } else {
        o.maxlen.min(len)
    };
    let (from, to) = if backward {
        (row.ltail - scan, row.ltail - 1)
    } else {
        (row.lhead, row.lhead + scan - 1)
    };
    let limit = match o.count {
        None => 1,
        Some(0) => NO_LIMIT,
        Some(c) => c.unsigned_abs(),
    };
    let sql = if backward {
        "SELECT idx FROM {s}.redis_list WHERE kid = ? AND v = ? AND idx BETWEEN ? AND ? ORDER BY idx DESC LIMIT ? OFFSET ?"
    } else {
        "SELECT idx FROM {s}.redis_list WHERE kid = ? AND v = ? AND idx BETWEEN ? AND ? ORDER BY idx LIMIT ? OFFSET ?"
    };
    let params = [
        Param::UInt(row.kid),
        Param::Bytes(element),
        Param::Int(from),
        Param::Int(to),
        Param::UInt(limit),
        Param::UInt(skip),
    ];
    if o.count.is_some() {
        // `COUNT 0` may match a whole list: positions written as they are read.
        let head = row.lhead;
        let element = |r: &mut manifold_redis_proto::Reply<'_>, row: Vec<Value>| match row
            .first()
            .and_then(int)
        {
            Some(idx) => {
                r.integer(idx - head);
                1
            }
            None => 0,
        };
        let header = |r: &mut manifold_redis_proto::Reply<'_>, n: usize| {
            r.array_len(n);
        };
        cx.stream_reply(sql, &params, header, element).await?;
        return Ok(());
    }
    let found: Vec<i64> = cx
        .tx
        .rows(sql, &params)
        .await?
        .iter()
        .filter_map(|r| r.first().and_then(int))
        .map(|idx| idx - row.lhead)
        .collect();
    match found.first() {
        Some(&p) => cx.reply().integer(p),
        None => cx.reply().null(),
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{position, range};

    #[test]
    fn ranges_as_redis() {
        assert_eq!(range(5, 0, -1), Some((0, 4)));
        assert_eq!(range(5, -100, 100), Some((0, 4)));
        assert_eq!(range(5, 3, 1), None);
        assert_eq!(range(5, 5, 10), None);
        assert_eq!(range(5, i64::MIN, i64::MAX), Some((0, 4)));
        assert_eq!(range(5, i64::MAX, i64::MIN), None);
        assert_eq!(range(5, -2, -1), Some((3, 4)));
        assert_eq!(range(0, 0, -1), None);
        assert_eq!(position(3, -1), Some(2));
        assert_eq!(position(3, -4), None);
        assert_eq!(position(3, 3), None);
        assert_eq!(position(3, i64::MIN), None);
    }
}
