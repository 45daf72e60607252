//! `ZRANDMEMBER key [count [WITHSCORES]]` (`src/t_zset.c`, `zrandmemberWithCountCommand`),
//! as `HRANDFIELD` draws ([`crate::cmd::hashes`]):
//! - no count: one member at a random `OFFSET`;
//! - a positive count: the whole set when the count covers it, in Redis's order for that
//!   case (highest first, as `ZREVRANGE 0 -1`), else `ORDER BY RAND() LIMIT n`, written as
//!   read;
//! - a negative count (repeats allowed): up to [`DRAWS_MAX`] draws are simulated here as
//!   positions, their distinct ones fetched as a uniform distinct sample, each position then
//!   given one of those members (the law of drawing with replacement); more draws are made
//!   from the whole set, read up to the client's output limit (a set larger than that is
//!   refused: its draws could not be made fairly from what fits). Either way the reply is
//!   written draw by draw and stops growing at the client's output limit (the client is then
//!   closed, as past any limit), so no count costs more than that limit.

use std::collections::HashMap;

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::{Protocol, Reply};

use super::{member_row, Member, ZSetCommand};
use crate::cmd::checks::{self, Absent};
use crate::cmd::rng::Rng;
use crate::cmd::typed::{integer, DataCommand, ParseError, SYNTAX};
use crate::cmd::Args;
use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::kind;
use crate::store::StoreError;

/// Draws past which the members are read whole instead of sampled per position.
pub const DRAWS_MAX: u64 = 1 << 20;
/// A negative count past [`DRAWS_MAX`] on a set larger than the client's output limit.
const TOO_MANY: &[u8] = b"manifold: ZRANDMEMBER count is too large";
/// `WITHSCORES` with a count whose double would overflow (Redis 7.0's check).
const OUT_OF_RANGE: &[u8] = b"value is out of range";
/// Draws written between two looks at the client's limits.
const DRAWS_PER_LOOK: usize = 4096;

/// `ZRANDMEMBER`'s count (never `i64::MIN`; within half of `i64`'s range with
/// `WITHSCORES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandCount {
    /// Negative: members may repeat.
    pub count: i64,
    pub with_scores: bool,
}

/// Redis 7.0's `zrandmemberCommand` checks, in its order: the count an integer, not
/// `i64::MIN`, the syntax, then the range `WITHSCORES` allows.
pub(super) fn parse_zrandmember(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let key = args.get(1);
    if args.len() == 2 {
        return Ok(ZSetCommand::ZRandMember { key, count: None }.into());
    }
    let count = integer(args.get(2))?;
    if count == i64::MIN {
        return Err(ParseError::Text(errors::COUNT_OUT_OF_RANGE));
    }
    if args.len() > 4 || (args.len() == 4 && !args.get(3).eq_ignore_ascii_case(b"withscores")) {
        return Err(SYNTAX);
    }
    let with_scores = args.len() == 4;
    if with_scores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(ParseError::Text(OUT_OF_RANGE));
    }
    Ok(ZSetCommand::ZRandMember {
        key,
        count: Some(RandCount { count, with_scores }),
    }
    .into())
}

/// Writes one member (and its score: `scores`, a pair of its own in RESP3).
fn write_member(r: &mut Reply<'_>, m: &Member, scores: bool, resp3: bool) {
    if scores {
        if resp3 {
            r.array_len(2);
        }
        r.bulk(&m.member).double(m.score);
    } else {
        r.bulk(&m.member);
    }
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`.
pub(super) async fn zrandmember(
    cx: &mut Cx<'_>,
    k: &[u8],
    count: Option<RandCount>,
) -> Result<(), StoreError> {
    let Some(RandCount {
        count: l,
        with_scores: scores,
    }) = count
    else {
        return checks::random_one(
            cx,
            k,
            kind::ZSET,
            "SELECT member FROM {s}.redis_zset WHERE kid = ? ORDER BY mh LIMIT 1 OFFSET ?",
        )
        .await;
    };
    let Some(row) = checks::read_or(cx, k, kind::ZSET, Absent::EmptyArray).await? else {
        return Ok(());
    };
    let count = l.unsigned_abs();
    if count == 0 {
        cx.reply().array_len(0);
        return Ok(());
    }
    let size = row.len.max(0) as u64;
    let resp3 = cx.proto == Protocol::Resp3;
    let units = |n: usize| if scores && !resp3 { n * 2 } else { n };
    if l > 0 {
        // Distinct members, as many as the set has at most: written as they are read.
        let whole = count >= size;
        let sql = if whole {
            "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ? \
             ORDER BY sk DESC, member DESC"
        } else {
            "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ? ORDER BY RAND() LIMIT ?"
        };
        let params = [Param::UInt(row.kid), Param::UInt(count)];
        let params = if whole { &params[..1] } else { &params[..] };
        let header = |r: &mut Reply<'_>, n: usize| {
            r.array_len(units(n));
        };
        let element = |r: &mut Reply<'_>, row: Vec<Value>| {
            let Some(m) = member_row(row) else {
                return 0;
            };
            write_member(r, &m, scores, resp3);
            1
        };
        cx.stream_reply(sql, params, header, element).await?;
        return Ok(());
    }
    // A RESP3 pair is `*2\r\n` around its member and score; a score takes up to some 24
    // bytes, not counted as a bulk by `rows_for_reply`.
    let row_extra = if scores {
        24 + if resp3 { 4 } else { 0 }
    } else {
        0
    };
    let mut rng = Rng::new();
    if count > DRAWS_MAX {
        // Many draws: from the whole set, each uniform over it (Redis's law).
        let (rows, whole) = cx
            .rows_for_reply(
                "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ?",
                &[Param::UInt(row.kid)],
                row_extra,
            )
            .await?;
        if !whole {
            cx.reply().error(TOO_MANY);
            return Ok(());
        }
        let members: Vec<Member> = rows.into_iter().filter_map(member_row).collect();
        if members.is_empty() {
            cx.reply().array_len(0);
            return Ok(());
        }
        let n = members.len() as u64;
        write_draws(cx, units(count as usize), count, scores, |_| {
            &members[rng.below(n) as usize]
        });
        return Ok(());
    }
    // Each draw is a position in the set; positions seen before reuse their member.
    let mut slot_of: HashMap<u64, u32> = HashMap::new();
    let mut slots = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let at = rng.below(size.max(1));
        let next = slot_of.len() as u32;
        slots.push(*slot_of.entry(at).or_insert(next));
    }
    let (rows, whole) = cx
        .rows_for_reply(
            "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ? ORDER BY RAND() LIMIT ?",
            &[Param::UInt(row.kid), Param::UInt(slot_of.len() as u64)],
            row_extra,
        )
        .await?;
    let members: Vec<Member> = rows.into_iter().filter_map(member_row).collect();
    if members.is_empty() {
        cx.reply().array_len(0);
        return Ok(());
    }
    // Members read only up to the output limit: the draws of those left unread are left
    // out (the members read, each written once, pass the limit: the client is closed). The
    // set had fewer members than its key row says: the last one stands in (never an
    // unfinished reply).
    let last = members.len() - 1;
    let slots: Vec<usize> = slots
        .into_iter()
        .map(|s| s as usize)
        .filter(|&s| whole || s <= last)
        .collect();
    write_draws(cx, units(slots.len()), slots.len() as u64, scores, |i| {
        &members[slots[i as usize].min(last)]
    });
    Ok(())
}

/// Writes an array of `header` units holding `draws` members, `draw(i)` the `i`th, looking
/// at the client's output limit and memory budget every [`DRAWS_PER_LOOK`] draws: past
/// them the rest is dropped (the client is closed without it), so a huge count costs about
/// that limit.
fn write_draws<'m>(
    cx: &mut Cx<'_>,
    header: usize,
    draws: u64,
    scores: bool,
    mut draw: impl FnMut(u64) -> &'m Member,
) {
    let resp3 = cx.proto == Protocol::Resp3;
    cx.reply().array_len(header);
    let mut i = 0u64;
    while i < draws {
        {
            let mut r = cx.reply();
            let end = draws.min(i + DRAWS_PER_LOOK as u64);
            while i < end {
                write_member(&mut r, draw(i), scores, resp3);
                i += 1;
            }
        }
        cx.note_memory();
        if cx.over_limit() {
            break;
        }
    }
}
