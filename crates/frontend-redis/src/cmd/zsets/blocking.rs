//! `BZPOPMIN key... timeout`, `BZPOPMAX key... timeout` and
//! `BZMPOP timeout numkeys key... MIN|MAX [COUNT count]` (`src/t_zset.c`,
//! `blockingGenericZpopCommand`): one attempt pops from the first key holding a sorted set,
//! else writes nothing and [`crate::blocking`] waits for a sorted set to be created at one of
//! the keys (every command that creates one notes it: [`crate::store::Tx::create_key`],
//! `RENAME`, `COPY`).

use super::mpop::ZMPop;
use super::{delete_hashes, member_row, ZSetCommand};
use crate::cmd::checks;
use crate::cmd::data::Spec;
use crate::cmd::lists::{timeout, timeout_error, Served};
use crate::cmd::typed::{DataCommand, ParseError};
use crate::cmd::Args;
use crate::store::context::Cx;
use crate::store::keys::{hash, kind};
use crate::store::StoreError;

/// What a blocking sorted set command pops.
#[derive(Debug, PartialEq)]
pub enum BlockingZPop<'a> {
    /// `BZPOPMIN`/`BZPOPMAX key... timeout`: one member from the first of `keys` of `args`
    /// holding a sorted set, answered `[key, member, score]`.
    Pop {
        args: Args<'a>,
        keys: std::ops::Range<usize>,
        max: bool,
    },
    /// `BZMPOP timeout numkeys key... MIN|MAX [COUNT count]`, answered as `ZMPOP`.
    MPop(ZMPop<'a>),
}

/// `BZPOPMIN`/`BZPOPMAX`: the timeout is their only argument to check.
pub(super) fn parse_bzpop(args: Args<'_>, max: bool) -> Result<DataCommand<'_>, ParseError> {
    let name = if max { "bzpopmax" } else { "bzpopmin" };
    check_timeout(&args, name)?;
    Ok(ZSetCommand::Blocking(BlockingZPop::Pop {
        args,
        keys: 1..args.len() - 1,
        max,
    })
    .into())
}

/// `BZMPOP`: `numkeys`, the side and `COUNT` first, then the timeout (Redis parses them in
/// `zmpopGenericCommand` before `blockingGenericZpopCommand` reads the timeout).
pub(super) fn parse_bzmpop(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let m = ZMPop::parse(args, 2)?;
    check_timeout(&args, "bzmpop")?;
    Ok(ZSetCommand::Blocking(BlockingZPop::MPop(m)).into())
}

fn check_timeout(args: &Args<'_>, name: &str) -> Result<(), ParseError> {
    match timeout(args, name) {
        Ok(_) => Ok(()),
        Err(_) => Err(ParseError::Text(timeout_error(args, name))),
    }
}

impl BlockingZPop<'_> {
    /// Pops and answers when one of the keys holds a sorted set (or answers `WRONGTYPE` at
    /// the first key of another type before it); [`Served::No`], nothing written, else.
    pub async fn try_pop(self, cx: &mut Cx<'_>) -> Result<Served, StoreError> {
        match self {
            BlockingZPop::MPop(m) => m.pop_first(cx).await,
            BlockingZPop::Pop { args, keys, max } => {
                for i in keys {
                    let k = args.get(i);
                    let Some(found) = checks::write(cx, k, kind::ZSET, false).await? else {
                        return Ok(Served::Yes);
                    };
                    let Some(row) = found else { continue };
                    let sql = if max {
                        "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ? \
                         ORDER BY sk DESC, member DESC LIMIT 1"
                    } else {
                        "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ? \
                         ORDER BY sk, member LIMIT 1"
                    };
                    let params = [manifold_backend::Param::UInt(row.kid)];
                    let rows = cx.tx.rows(sql, &params).await?;
                    let Some(m) = rows.into_iter().next().and_then(member_row) else {
                        continue;
                    };
                    let deleted = delete_hashes(cx, row.kid, &[hash(&m.member)]).await?;
                    cx.tx.collection_written(cx.db, k, &row, -deleted).await?;
                    cx.reply()
                        .array_len(3)
                        .bulk(k)
                        .bulk(&m.member)
                        .double(m.score);
                    return Ok(Served::Yes);
                }
                Ok(Served::No)
            }
        }
    }
}

/// One attempt of `BZPOPMIN`/`BZPOPMAX`/`BZMPOP` (timeout already checked), run by
/// [`crate::blocking`]: as [`crate::cmd::lists::try_blocking`] for the lists.
pub async fn try_blocking(
    cx: &mut Cx<'_>,
    spec: &'static Spec,
    args: Args<'_>,
) -> Result<Served, StoreError> {
    match (spec.parse)(args) {
        Ok(DataCommand::ZSets(ZSetCommand::Blocking(pop))) => pop.try_pop(cx).await,
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
