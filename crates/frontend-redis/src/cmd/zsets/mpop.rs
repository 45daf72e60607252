//! `ZMPOP numkeys key... MIN|MAX [COUNT count]`: pops from the first of the keys that holds
//! a sorted set (`src/t_zset.c`, `zmpopGenericCommand`).

use super::pop_members;
use crate::cmd::checks;
use crate::cmd::lists::{mpop_count, mpop_keys, Served};
use crate::cmd::typed::{ParseError, SYNTAX};
use crate::cmd::Args;
use crate::store::context::Cx;
use crate::store::keys::kind;
use crate::store::StoreError;

/// `ZMPOP`'s arguments (and `BZMPOP`'s from `numkeys` on).
#[derive(Debug, PartialEq)]
pub struct ZMPop<'a> {
    /// The whole request: the keys are arguments `keys`.
    pub args: Args<'a>,
    pub keys: std::ops::Range<usize>,
    /// `MAX` (else `MIN`).
    pub max: bool,
    pub count: i64,
}

impl<'a> ZMPop<'a> {
    /// Parses `numkeys` at argument `at` and what follows, in Redis's order of checks.
    pub fn parse(args: Args<'a>, at: usize) -> Result<Self, ParseError> {
        let (keys, where_at) = mpop_keys(args, at)?;
        let side = args.get(where_at);
        let max = if side.eq_ignore_ascii_case(b"max") {
            true
        } else if side.eq_ignore_ascii_case(b"min") {
            false
        } else {
            return Err(SYNTAX);
        };
        Ok(Self {
            args,
            keys,
            max,
            count: mpop_count(args, where_at + 1)?,
        })
    }

    /// Pops from the first key holding a sorted set: `[key, [[member, score]...]]`, a null
    /// array when none does, `WRONGTYPE` at the first key of another type before it.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        if self.pop_first(cx).await? == Served::No {
            cx.reply().null_array();
        }
        Ok(())
    }

    /// As [`ZMPop::apply`], but nothing written when no key holds a sorted set (`BZMPOP`
    /// then waits).
    pub async fn pop_first(self, cx: &mut Cx<'_>) -> Result<Served, StoreError> {
        for i in self.keys.clone() {
            let k = self.args.get(i);
            let Some(found) = checks::write(cx, k, kind::ZSET, false).await? else {
                return Ok(Served::Yes);
            };
            let Some(row) = found else { continue };
            cx.reply().array_len(2).bulk(k);
            pop_members(cx, k, &row, self.count, self.max, true).await?;
            return Ok(Served::Yes);
        }
        Ok(Served::No)
    }
}
