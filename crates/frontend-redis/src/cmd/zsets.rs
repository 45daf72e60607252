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

mod range;
mod score;

use std::collections::HashMap;

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::Reply;

use super::checks::{self, Absent};
use super::data::{Family, Spec};
use super::scan;
use super::sqltext::{in_params, marks, padded, statement, tuples};
use super::typed::{DataCommand, ParseError, Untyped};
use super::Args;
use crate::errors;
use crate::exec::{Cx, RUN_MAX};
use crate::store::keys::{hash, kind};
use crate::store::{double, int, take_bytes, StoreError};

const fn spec(name: &'static str, arity: i32, write: bool) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::ZSets,
        parse: untyped,
    }
}

/// Not typed yet: the arguments are read while the command applies ([`run`]).
fn untyped(_: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    Ok(DataCommand::Untyped(Untyped::ZSets))
}

pub static COMMANDS: [Spec; 23] = [
    spec("zadd", -4, true),
    spec("zincrby", 4, true),
    spec("zrem", -3, true),
    spec("zscore", 3, false),
    spec("zmscore", -3, false),
    spec("zcard", 2, false),
    spec("zcount", 4, false),
    spec("zlexcount", 4, false),
    spec("zrange", -4, false),
    spec("zrangebyscore", -4, false),
    spec("zrevrange", -4, false),
    spec("zrevrangebyscore", -4, false),
    spec("zrangebylex", -4, false),
    spec("zrevrangebylex", -4, false),
    spec("zrank", 3, false),
    spec("zrevrank", 3, false),
    spec("zpopmin", -2, true),
    spec("zpopmax", -2, true),
    spec("zremrangebyrank", 4, true),
    spec("zremrangebyscore", 4, true),
    spec("zremrangebylex", 4, true),
    spec("zrangestore", -5, true),
    spec("zscan", -3, false),
];

// Error texts of `src/t_zset.c` and `src/db.c` (7.0).
const XX_AND_NX: &[u8] = b"XX and NX options at the same time are not compatible";
const GT_LT_NX: &[u8] = b"GT, LT, and/or NX options at the same time are not compatible";
const INCR_ONE_PAIR: &[u8] = b"INCR option supports a single increment-element pair";
const NAN_SCORE: &[u8] = b"resulting score is not a number (NaN)";
/// Runs one sorted set command.
pub async fn run(cx: &mut Cx<'_>, spec: &'static Spec, args: Args<'_>) -> Result<(), StoreError> {
    match spec.name {
        "zadd" => zadd(cx, args, false).await,
        "zincrby" => zadd(cx, args, true).await,
        "zrem" => zrem(cx, args).await,
        "zscore" => zscore(cx, args).await,
        "zmscore" => zmscore(cx, args).await,
        "zcard" => {
            if let Some(row) = checks::read(cx, args.get(1), kind::ZSET).await? {
                cx.reply().integer(row.map_or(0, |r| r.len));
            }
            Ok(())
        }
        "zrank" => zrank(cx, args, false).await,
        "zrevrank" => zrank(cx, args, true).await,
        "zpopmin" => zpop(cx, args, false).await,
        "zpopmax" => zpop(cx, args, true).await,
        "zscan" => zscan(cx, args).await,
        _ => range::run(cx, spec, args).await,
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
/// (`incr`), which Redis parses the same way (its options included).
async fn zadd(cx: &mut Cx<'_>, args: Args<'_>, zincrby: bool) -> Result<(), StoreError> {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, zincrby);
    let mut at = 2;
    while at < args.len() {
        let o = args.get(at);
        let is = |w: &[u8]| o.eq_ignore_ascii_case(w);
        if is(b"nx") {
            nx = true;
        } else if is(b"xx") {
            xx = true;
        } else if is(b"ch") {
            ch = true;
        } else if is(b"incr") {
            incr = true;
        } else if is(b"gt") {
            gt = true;
        } else if is(b"lt") {
            lt = true;
        } else {
            break;
        }
        at += 1;
    }
    let elements = args.len() - at;
    let error = if elements % 2 == 1 || elements == 0 {
        Some(errors::SYNTAX)
    } else if nx && xx {
        Some(XX_AND_NX)
    } else if (nx && (gt || lt)) || (gt && lt) {
        Some(GT_LT_NX)
    } else if incr && elements > 2 {
        Some(INCR_ONE_PAIR)
    } else {
        None
    };
    if let Some(e) = error {
        cx.reply().error(e);
        return Ok(());
    }
    let mut pairs: Vec<(f64, &[u8])> = Vec::with_capacity(elements / 2);
    for j in 0..elements / 2 {
        let Some(s) = score::parse_value(args.get(at + 2 * j)) else {
            cx.reply().error(errors::NOT_FLOAT);
            return Ok(());
        };
        pairs.push((s, args.get(at + 2 * j + 1)));
    }
    let k = args.get(1);
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
async fn zrem(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let k = args.get(1);
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
async fn zscore(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let Some(row) = checks::read_or(cx, args.get(1), kind::ZSET, Absent::Null).await? else {
        return Ok(());
    };
    let mh = hash(args.get(2));
    match scores_of(cx, row.kid, &[mh]).await?.get(&mh) {
        Some(&s) => cx.reply().double(s),
        None => cx.reply().null(),
    };
    Ok(())
}

/// `ZMSCORE key member...`: a missing key is an empty sorted set.
async fn zmscore(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let Some(row) = checks::read(cx, args.get(1), kind::ZSET).await? else {
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
async fn zrank(cx: &mut Cx<'_>, args: Args<'_>, rev: bool) -> Result<(), StoreError> {
    let Some(row) = checks::read_or(cx, args.get(1), kind::ZSET, Absent::Null).await? else {
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
    let mh = hash(args.get(2));
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
async fn zpop(cx: &mut Cx<'_>, args: Args<'_>, max: bool) -> Result<(), StoreError> {
    if args.len() > 3 {
        cx.reply().error(errors::SYNTAX);
        return Ok(());
    }
    let Some(count) = checks::optional_count(cx, &args) else {
        return Ok(());
    };
    let k = args.get(1);
    let Some(row) = checks::write_or(cx, k, kind::ZSET, Absent::EmptyArray).await? else {
        return Ok(());
    };
    let n = count.unwrap_or(1);
    if n == 0 {
        cx.reply().array_len(0);
        return Ok(());
    }
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
    let nested = count.is_some() && cx.proto == manifold_redis_proto::Protocol::Resp3;
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
        cx.tx.delete_key(cx.db, k, &row).await?;
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
        cx.tx.collection_written(cx.db, k, &row, -deleted).await?;
    }
    Ok(())
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`.
async fn zscan(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let Some(page) = scan::collection_page(
        cx,
        &args,
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
