//! Sorted sets: `ZADD`, `ZRANGE` and the rest of Redis's sorted set commands. Members are
//! rows of `redis_zset` under their key's `kid`, found by `mh` (SHA-256 of the member).
//!
//! A score is kept twice: `score` (a `DOUBLE`, `NULL` for ±inf, which MariaDB's `DOUBLE`
//! cannot hold) for SQL users and for reading it back, and `sk`, an order key (the IEEE
//! bits made order-preserving as a signed `BIGINT`, [`score::order_key`]) that every range
//! and rank query uses: `ORDER BY sk, member` is Redis's order (score, then member bytes).
//!
//! - [`score`]: scores parsed as Redis parses them (`strtod`), their order key, `ZSCAN`'s
//!   text of them; [`range`]: the range commands (`ZRANGE` and its older forms, `ZCOUNT`,
//!   `ZLEXCOUNT`, `ZREMRANGEBY*`, `ZRANGESTORE`).
//! - [`random`]: `ZRANDMEMBER`; [`blocking`]: `BZPOPMIN`, `BZPOPMAX`, `BZMPOP` (one attempt
//!   each, waited by [`crate::blocking`]); [`mpop`]: `ZMPOP`.
//!
//! Intended differences from Redis 7.0:
//! - Members tied on score are ordered by SQL on their first `max_sort_length` bytes (1024
//!   by default): members longer than that which share those bytes may come in another
//!   order than Redis's (range bounds (`member < ?`) compare them whole).
//! - `ZRANGEBYLEX` and the other lex commands on members of different scores (which Redis
//!   leaves unspecified) select the members in the lex range, in score order.
//! - `ZSCAN` pages by the members' hashes as every `*SCAN` ([`super::scan`]): a page holds
//!   `COUNT` members (Redis answers a small sorted set whole, cursor 0); scores are written as Redis writes a
//!   small set's (`d2string`: integral values as integers), also for sets Redis keeps as a
//!   skiplist (which it prints `%.17g`: differs for integral scores of 1e17 and more).

mod algebra;
mod blocking;
pub mod geo;
mod geohash;
mod mpop;
mod parse;
mod random;
mod range;
pub(crate) mod score;
#[cfg(test)]
mod tests;

pub use blocking::{try_blocking, BlockingZPop};
pub use parse::{ZSetCommand, COMMANDS};
pub(crate) use score::parse_sort_weight;

use std::collections::HashMap;

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::Reply;

use super::checks::{self, Absent};
use super::scan;
use super::sqltext::{in_params, marks, padded, statement, tuples};
use super::Args;
use crate::store::context::{Cx, RUN_MAX};
use crate::store::keys::{hash, kind};
use crate::store::{double, int, take_bytes, StoreError};

const NAN_SCORE: &[u8] = b"resulting score is not a number (NaN)";

impl ZSetCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        use parse::{ZAdd, ZCard, ZCount, ZMScore, ZPop, ZRank, ZRem, ZRemRange, ZScan, ZScore};
        match self {
            ZAdd { key, flags, pairs } => zadd(cx, key, flags, &pairs).await,
            ZRem { key, members } => zrem(cx, key, members).await,
            ZScore { key, member } => zscore(cx, key, member).await,
            ZMScore { key, members } => zmscore(cx, key, members).await,
            ZCard { key } => {
                if let Some(row) = checks::read(cx, key, kind::ZSET).await? {
                    cx.reply().integer(row.map_or(0, |r| r.len));
                }
                Ok(())
            }
            ZRank { key, member, rev } => zrank(cx, key, member, rev).await,
            ZPop { key, count, max } => zpop(cx, key, count, max).await,
            ZCount { key, range } => range::count(cx, key, range).await,
            ZSetCommand::ZRange(z) => z.apply(cx).await,
            ZRemRange { key, range } => range::remove(cx, key, range).await,
            ZScan(scan) => zscan(cx, scan).await,
            ZSetCommand::ZMPop(m) => m.apply(cx).await,
            ZSetCommand::Algebra(a) => a.apply(cx).await,
            ZSetCommand::ZRandMember { key, count } => random::zrandmember(cx, key, count).await,
            ZSetCommand::Blocking(pop) => {
                if pop.try_pop(cx).await? == crate::cmd::lists::Served::No {
                    cx.reply().null_array();
                }
                Ok(())
            }
        }
    }
}

/// A member and its score.
struct Member {
    member: Vec<u8>,
    score: f64,
}

/// A row of `member, score, sk`.
fn member_row(mut row: Vec<Value>) -> Option<Member> {
    if row.len() < 3 {
        return None;
    }
    let sk = int(&row[2])?;
    Some(Member {
        score: score::from_columns(double(&row[1]), sk),
        member: take_bytes(&mut row[0])?,
    })
}

statement! {
    fn select_in = "SELECT mh, score, sk FROM {{s}}.redis_zset WHERE kid = ? AND mh IN ({})", |n| marks(n)
}

statement! {
    fn delete_in = "DELETE FROM {{s}}.redis_zset WHERE kid = ? AND mh IN ({})", |n| marks(n)
}

statement! {
    fn upsert_sql = "INSERT INTO {{s}}.redis_zset (kid, mh, member, score, sk) VALUES {} \
        ON DUPLICATE KEY UPDATE score = VALUES(score), sk = VALUES(sk)", |n| tuples("(?, ?, ?, ?, ?)", n)
}

/// The scores of the members hashed `hashes` (at most [`RUN_MAX`] a statement) in `kid`.
async fn scores_of(
    cx: &mut Cx<'_>,
    kid: u64,
    hashes: &[[u8; 32]],
) -> Result<HashMap<[u8; 32], f64>, StoreError> {
    let mut found = HashMap::new();
    for chunk in hashes.chunks(RUN_MAX) {
        let n = padded(chunk.len());
        let params = in_params(Param::UInt(kid), chunk, n);
        for row in cx.tx.rows(select_in(n), &params).await? {
            let (Some(Value::Bytes(mh)), Some(sk)) = (row.first(), row.get(2).and_then(int)) else {
                continue;
            };
            if let Ok(mh) = <[u8; 32]>::try_from(mh.as_slice()) {
                let s = score::from_columns(row.get(1).and_then(double), sk);
                found.insert(mh, s);
            }
        }
    }
    Ok(found)
}

/// Writes `members` (new or with a new score) into `kid`, [`RUN_MAX`] rows a statement.
async fn upsert(cx: &mut Cx<'_>, kid: u64, members: &[(&[u8], f64)]) -> Result<(), StoreError> {
    for chunk in members.chunks(RUN_MAX) {
        let n = padded(chunk.len());
        let hashes: Vec<[u8; 32]> = chunk.iter().map(|(m, _)| hash(m)).collect();
        let mut params = Vec::with_capacity(n * 5);
        for i in 0..n {
            let at = i.min(chunk.len() - 1);
            let (m, s) = chunk[at];
            params.push(Param::UInt(kid));
            params.push(Param::Bytes(&hashes[at]));
            params.push(Param::Bytes(m));
            params.push(score::stored(s).map_or(Param::Null, Param::Double));
            params.push(Param::Int(score::order_key(s)));
        }
        cx.tx.exec(upsert_sql(n), &params).await?;
    }
    Ok(())
}

/// Deletes the members hashed `hashes` from `kid`; how many there were.
async fn delete_hashes(cx: &mut Cx<'_>, kid: u64, hashes: &[[u8; 32]]) -> Result<i64, StoreError> {
    let mut deleted = 0u64;
    for chunk in hashes.chunks(RUN_MAX) {
        let n = padded(chunk.len());
        let params = in_params(Param::UInt(kid), chunk, n);
        deleted += cx.tx.affected(delete_in(n), &params).await?;
    }
    Ok(i64::try_from(deleted).unwrap_or(i64::MAX))
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member...`, and `ZINCRBY key incr member`
/// (`incr`), their options and scores checked by the parser.
async fn zadd(
    cx: &mut Cx<'_>,
    k: &[u8],
    flags: parse::ZAddFlags,
    pairs: &[(f64, &[u8])],
) -> Result<(), StoreError> {
    let parse::ZAddFlags {
        nx,
        xx,
        gt,
        lt,
        ch,
        incr,
    } = flags;
    let Some(row) = checks::write(cx, k, kind::ZSET, !xx).await? else {
        return Ok(());
    };
    let Some(row) = row else {
        // XX on a missing key: nothing to do.
        if incr {
            cx.reply().null();
        } else {
            cx.reply().integer(0);
        }
        return Ok(());
    };
    let hashes: Vec<[u8; 32]> = pairs.iter().map(|(_, m)| hash(m)).collect();
    let mut current = if row.len > 0 {
        scores_of(cx, row.kid, &hashes).await?
    } else {
        HashMap::new()
    };
    // What changes, in order: the index in `writes` of each member written.
    let mut writes: Vec<(&[u8], f64)> = Vec::new();
    let mut written: HashMap<[u8; 32], usize> = HashMap::new();
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut last = 0.0;
    let mut nan = false;
    for ((s, m), mh) in pairs.iter().zip(&hashes) {
        let mut s = *s;
        match current.get(mh).copied() {
            Some(cur) => {
                if nx {
                    continue;
                }
                if incr {
                    s += cur;
                    if s.is_nan() {
                        nan = true;
                        break;
                    }
                }
                if (lt && s >= cur) || (gt && s <= cur) {
                    continue;
                }
                processed += 1;
                last = s;
                // Redis compares scores exactly (`-0` equals `0`).
                #[allow(clippy::float_cmp)]
                let same = s == cur;
                if same {
                    continue;
                }
                updated += 1;
            }
            None if !xx => {
                added += 1;
                processed += 1;
                last = s;
            }
            None => continue,
        }
        current.insert(*mh, s);
        if let Some(&i) = written.get(mh) {
            writes[i].1 = s;
        } else {
            written.insert(*mh, writes.len());
            writes.push((m, s));
        }
    }
    upsert(cx, row.kid, &writes).await?;
    if added > 0 || updated > 0 || row.len == 0 {
        cx.tx.collection_written(cx.db, k, &row, added).await?;
    }
    if nan {
        cx.reply().error(NAN_SCORE);
    } else if incr {
        if processed > 0 {
            cx.reply().double(last);
        } else {
            cx.reply().null();
        }
    } else {
        cx.reply().integer(if ch { added + updated } else { added });
    }
    Ok(())
}

/// `ZREM key member...`.
/// (`args`: the whole request, the members from argument 2 on.)
async fn zrem(cx: &mut Cx<'_>, k: &[u8], args: Args<'_>) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::ZSET, Absent::Zero).await? else {
        return Ok(());
    };
    let mut hashes: Vec<[u8; 32]> = args.from(2).map(hash).collect();
    hashes.sort_unstable();
    hashes.dedup();
    let deleted = delete_hashes(cx, row.kid, &hashes).await?;
    if deleted > 0 {
        cx.tx.collection_written(cx.db, k, &row, -deleted).await?;
    }
    cx.reply().integer(deleted);
    Ok(())
}

/// `ZSCORE key member`.
async fn zscore(cx: &mut Cx<'_>, k: &[u8], member: &[u8]) -> Result<(), StoreError> {
    let Some(row) = checks::read_or(cx, k, kind::ZSET, Absent::Null).await? else {
        return Ok(());
    };
    let mh = hash(member);
    match scores_of(cx, row.kid, &[mh]).await?.get(&mh) {
        Some(&s) => cx.reply().double(s),
        None => cx.reply().null(),
    };
    Ok(())
}

/// `ZMSCORE key member...`: a missing key is an empty sorted set.
/// (`args`: the whole request, the members from argument 2 on.)
async fn zmscore(cx: &mut Cx<'_>, k: &[u8], args: Args<'_>) -> Result<(), StoreError> {
    let Some(row) = checks::read(cx, k, kind::ZSET).await? else {
        return Ok(());
    };
    let hashes: Vec<[u8; 32]> = args.from(2).map(hash).collect();
    let found = match row {
        Some(row) => scores_of(cx, row.kid, &hashes).await?,
        None => HashMap::new(),
    };
    let mut r = cx.reply();
    r.array_len(hashes.len());
    for mh in &hashes {
        match found.get(mh) {
            Some(&s) => r.double(s),
            None => r.null(),
        };
    }
    Ok(())
}

/// `ZRANK` / `ZREVRANK key member`: the members before it (after it, `rev`) in order.
async fn zrank(cx: &mut Cx<'_>, k: &[u8], member: &[u8], rev: bool) -> Result<(), StoreError> {
    let Some(row) = checks::read_or(cx, k, kind::ZSET, Absent::Null).await? else {
        return Ok(());
    };
    let sql = if rev {
        "SELECT (SELECT COUNT(*) FROM {s}.redis_zset o WHERE o.kid = z.kid \
         AND (o.sk > z.sk OR (o.sk = z.sk AND o.member > z.member))) \
         FROM {s}.redis_zset z WHERE z.kid = ? AND z.mh = ?"
    } else {
        "SELECT (SELECT COUNT(*) FROM {s}.redis_zset o WHERE o.kid = z.kid \
         AND (o.sk < z.sk OR (o.sk = z.sk AND o.member < z.member))) \
         FROM {s}.redis_zset z WHERE z.kid = ? AND z.mh = ?"
    };
    let mh = hash(member);
    let rows = cx
        .tx
        .rows(sql, &[Param::UInt(row.kid), Param::Bytes(&mh)])
        .await?;
    match rows.first().and_then(|r| r.first()).and_then(int) {
        Some(rank) => cx.reply().integer(rank),
        None => cx.reply().null(),
    };
    Ok(())
}

/// `ZPOPMIN` / `ZPOPMAX key [count]`.
async fn zpop(cx: &mut Cx<'_>, k: &[u8], count: Option<i64>, max: bool) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::ZSET, Absent::EmptyArray).await? else {
        return Ok(());
    };
    let n = count.unwrap_or(1);
    if n == 0 {
        cx.reply().array_len(0);
        return Ok(());
    }
    let nested = count.is_some() && cx.proto == manifold_redis_proto::Protocol::Resp3;
    pop_members(cx, k, &row, n, max, nested).await
}

/// Pops the `n` (> 0) lowest (highest: `max`) members of the sorted set `row` at `k`,
/// replying them as an array of member, score (of pairs: `nested`).
async fn pop_members(
    cx: &mut Cx<'_>,
    k: &[u8],
    row: &crate::store::keys::KeyRow,
    n: i64,
    max: bool,
    nested: bool,
) -> Result<(), StoreError> {
    let sql = if max {
        "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ? \
         ORDER BY sk DESC, member DESC LIMIT ?"
    } else {
        "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ? \
         ORDER BY sk, member LIMIT ?"
    };
    // Written as read up to the output limit, then deleted by the server in the same order
    // within this transaction (the key, when the count takes the whole set): nothing of
    // them is kept here, whatever the count.
    let whole = n >= row.len;
    let header = |r: &mut Reply<'_>, n: usize| {
        r.array_len(if nested { n } else { n * 2 });
    };
    let element = |r: &mut Reply<'_>, row: Vec<Value>| {
        let Some(m) = member_row(row) else {
            return 0;
        };
        if nested {
            r.array_len(2);
        }
        r.bulk(&m.member).double(m.score);
        1
    };
    let params = [Param::UInt(row.kid), Param::UInt(n as u64)];
    cx.stream_reply(sql, &params, header, element).await?;
    if whole {
        cx.tx.delete_key(cx.db, k, row).await?;
        return Ok(());
    }
    let delete = if max {
        "DELETE FROM {s}.redis_zset WHERE kid = ? ORDER BY sk DESC, member DESC LIMIT ?"
    } else {
        "DELETE FROM {s}.redis_zset WHERE kid = ? ORDER BY sk, member LIMIT ?"
    };
    let deleted = cx.tx.affected(delete, &params).await?;
    let deleted = i64::try_from(deleted).unwrap_or(i64::MAX);
    if deleted > 0 {
        cx.tx.collection_written(cx.db, k, row, -deleted).await?;
    }
    Ok(())
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`.
async fn zscan(cx: &mut Cx<'_>, scan: scan::CollectionScan<'_>) -> Result<(), StoreError> {
    let Some(page) = scan::collection_scan(
        cx,
        scan,
        kind::ZSET,
        "SELECT mh, member, score, sk FROM {s}.redis_zset WHERE kid = ? AND mh >= ? \
         ORDER BY mh LIMIT ?",
    )
    .await?
    else {
        return Ok(());
    };
    let members: Vec<Member> = page
        .rows
        .into_iter()
        .filter_map(|r| member_row(r.into_iter().skip(1).collect()))
        .filter(|m| page.pattern.as_ref().is_none_or(|g| g.matches(&m.member)))
        .collect();
    let mut r = cx.reply();
    scan::start_reply(&mut r, page.next, members.len() * 2);
    for m in &members {
        r.bulk(&m.member).bulk(&score::scan_text(m.score));
    }
    Ok(())
}
