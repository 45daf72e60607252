//! The list commands' arguments, parsed before they run ([`crate::cmd::typed`]): the
//! command table ([`COMMANDS`]) names each command's parser.

use super::edit::{lpos_options, LposOptions};
use super::Side;
use crate::cmd::data::{Family, Spec};
use crate::cmd::typed::{integer, DataCommand, Parse, ParseError, SYNTAX};
use crate::cmd::{parse_i64, Args};
use crate::errors;

const fn spec(name: &'static str, arity: i32, write: bool, parse: Parse) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Lists,
        parse,
    }
}

pub static COMMANDS: [Spec; 22] = [
    spec("lpush", -3, true, |a| Ok(push(a, Side::Left, false))),
    spec("rpush", -3, true, |a| Ok(push(a, Side::Right, false))),
    spec("lpushx", -3, true, |a| Ok(push(a, Side::Left, true))),
    spec("rpushx", -3, true, |a| Ok(push(a, Side::Right, true))),
    spec("lpop", -2, true, |a| pop(a, Side::Left, "lpop")),
    spec("rpop", -2, true, |a| pop(a, Side::Right, "rpop")),
    spec("llen", 2, false, |a| Ok(LLen { key: a.get(1) }.into())),
    spec("lmove", 5, true, |a| {
        let (Some(from), Some(to)) = (Side::parse(a.get(3)), Side::parse(a.get(4))) else {
            return Err(SYNTAX);
        };
        Ok(LMove {
            src: a.get(1),
            dst: a.get(2),
            from,
            to,
        }
        .into())
    }),
    spec("rpoplpush", 3, true, |a| {
        Ok(LMove {
            src: a.get(1),
            dst: a.get(2),
            from: Side::Right,
            to: Side::Left,
        }
        .into())
    }),
    spec("lmpop", -4, true, |a| Ok(LMPop(MPop::parse(a, 1)?).into())),
    spec("lrange", 4, false, |a| {
        Ok(LRange {
            key: a.get(1),
            start: integer(a.get(2))?,
            end: integer(a.get(3))?,
        }
        .into())
    }),
    spec("lindex", 3, false, |a| {
        Ok(LIndex {
            key: a.get(1),
            index: parse_i64(a.get(2)),
        }
        .into())
    }),
    spec("lset", 4, true, |a| {
        Ok(LSet {
            key: a.get(1),
            index: parse_i64(a.get(2)),
            value: a.get(3),
        }
        .into())
    }),
    spec("linsert", 5, true, |a| {
        let where_ = a.get(2);
        let after = if where_.eq_ignore_ascii_case(b"after") {
            true
        } else if where_.eq_ignore_ascii_case(b"before") {
            false
        } else {
            return Err(SYNTAX);
        };
        Ok(LInsert {
            key: a.get(1),
            after,
            pivot: a.get(3),
            value: a.get(4),
        }
        .into())
    }),
    spec("lrem", 4, true, |a| {
        Ok(LRem {
            key: a.get(1),
            count: integer(a.get(2))?,
            value: a.get(3),
        }
        .into())
    }),
    spec("ltrim", 4, true, |a| {
        Ok(LTrim {
            key: a.get(1),
            start: integer(a.get(2))?,
            end: integer(a.get(3))?,
        }
        .into())
    }),
    spec("lpos", -3, false, |a| {
        Ok(LPos {
            key: a.get(1),
            element: a.get(2),
            options: lpos_options(&a).map_err(ParseError::Text)?,
        }
        .into())
    }),
    spec("blpop", -3, true, |a| {
        let keys = 1..a.len() - 1;
        blocking(a, "blpop", |a| {
            Ok(BlockingPop::Pop {
                args: a,
                keys,
                side: Side::Left,
            })
        })
    }),
    spec("brpop", -3, true, |a| {
        let keys = 1..a.len() - 1;
        blocking(a, "brpop", |a| {
            Ok(BlockingPop::Pop {
                args: a,
                keys,
                side: Side::Right,
            })
        })
    }),
    spec("brpoplpush", 4, true, |a| {
        blocking(a, "brpoplpush", |a| {
            Ok(BlockingPop::Move {
                src: a.get(1),
                dst: a.get(2),
                from: Side::Right,
                to: Side::Left,
            })
        })
    }),
    spec("blmove", 6, true, |a| {
        blocking(a, "blmove", |a| {
            let (Some(from), Some(to)) = (Side::parse(a.get(3)), Side::parse(a.get(4))) else {
                return Err(SYNTAX);
            };
            Ok(BlockingPop::Move {
                src: a.get(1),
                dst: a.get(2),
                from,
                to,
            })
        })
    }),
    spec("blmpop", -5, true, |a| {
        // numkeys, the side and COUNT before the timeout (`lmpopGenericCommand`).
        let m = MPop::parse(a, 2)?;
        blocking(a, "blmpop", |_| Ok(BlockingPop::MPop(m)))
    }),
];

/// `LMPOP`'s `numkeys`.
const NUMKEYS: &[u8] = b"numkeys should be greater than 0";
/// `LMPOP`'s `COUNT`.
const COUNT_POSITIVE: &[u8] = b"count should be greater than 0";

/// A list command, its arguments parsed. Lists of elements and keys keep the whole request,
/// read in place.
#[derive(Debug, PartialEq)]
pub enum ListCommand<'a> {
    /// `LPUSH`/`RPUSH` (`only_existing`: `LPUSHX`/`RPUSHX`) `key element...` (the elements
    /// from argument 2 on).
    Push {
        key: &'a [u8],
        values: Args<'a>,
        side: Side,
        only_existing: bool,
    },
    /// `LPOP`/`RPOP key [count]`.
    Pop {
        key: &'a [u8],
        side: Side,
        count: Option<i64>,
    },
    LLen {
        key: &'a [u8],
    },
    /// `LMOVE src dst from to`, `RPOPLPUSH src dst` (right to left).
    LMove {
        src: &'a [u8],
        dst: &'a [u8],
        from: Side,
        to: Side,
    },
    LMPop(MPop<'a>),
    LRange {
        key: &'a [u8],
        start: i64,
        end: i64,
    },
    /// `LINDEX key index`: `None` for an index that is not an integer, refused only after
    /// the key is read (Redis looks the key up first).
    LIndex {
        key: &'a [u8],
        index: Option<i64>,
    },
    /// `LSET key index element`: the index as `LINDEX`'s, refused after the key.
    LSet {
        key: &'a [u8],
        index: Option<i64>,
        value: &'a [u8],
    },
    LInsert {
        key: &'a [u8],
        after: bool,
        pivot: &'a [u8],
        value: &'a [u8],
    },
    LRem {
        key: &'a [u8],
        count: i64,
        value: &'a [u8],
    },
    LTrim {
        key: &'a [u8],
        start: i64,
        end: i64,
    },
    /// `LPOS key element [RANK rank] [COUNT num] [MAXLEN len]`.
    LPos {
        key: &'a [u8],
        element: &'a [u8],
        options: LposOptions,
    },
    /// `BLPOP`, `BRPOP`, `BRPOPLPUSH`, `BLMOVE`, `BLMPOP`, their timeout checked (its value
    /// is [`crate::blocking`]'s, which makes them wait; inside `EXEC` they answer as the
    /// command would without waiting, else `waited`, their timeout reply).
    Blocking {
        pop: BlockingPop<'a>,
        waited: Waited,
    },
}

pub use ListCommand::{
    Blocking, LIndex, LInsert, LLen, LMPop, LMove, LPos, LRange, LRem, LSet, LTrim, Pop, Push,
};

impl<'a> From<ListCommand<'a>> for DataCommand<'a> {
    fn from(c: ListCommand<'a>) -> Self {
        DataCommand::Lists(c)
    }
}

/// What a blocking command pops.
#[derive(Debug, PartialEq)]
pub enum BlockingPop<'a> {
    /// `BLPOP`/`BRPOP key... timeout`: from the first of `keys` of `args` holding a list.
    Pop {
        args: Args<'a>,
        keys: std::ops::Range<usize>,
        side: Side,
    },
    /// `BRPOPLPUSH src dst timeout` (right to left), `BLMOVE src dst from to timeout`.
    Move {
        src: &'a [u8],
        dst: &'a [u8],
        from: Side,
        to: Side,
    },
    /// `BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT count]`.
    MPop(MPop<'a>),
}

/// What a blocking command answers when it times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    Null,
    NullArray,
}

/// `LMPOP numkeys key... LEFT|RIGHT [COUNT count]` (and `BLMPOP`'s part from `numkeys` on).
#[derive(Debug, PartialEq)]
pub struct MPop<'a> {
    /// The whole request: the keys are arguments `keys`.
    pub args: Args<'a>,
    pub keys: std::ops::Range<usize>,
    pub side: Side,
    pub count: i64,
}

impl<'a> MPop<'a> {
    /// Parses `numkeys` at argument `at` (`LMPOP`: 1, `BLMPOP`: 2) and what follows, in
    /// Redis's order of checks.
    pub fn parse(args: Args<'a>, at: usize) -> Result<Self, ParseError> {
        let (keys, where_at) = mpop_keys(args, at)?;
        let side = Side::parse(args.get(where_at)).ok_or(SYNTAX)?;
        Ok(Self {
            args,
            keys,
            side,
            count: mpop_count(args, where_at + 1)?,
        })
    }
}

/// `numkeys` at argument `at` of `LMPOP`/`ZMPOP` (and their blocking forms), checked as
/// Redis checks it: the keys' arguments, and where the word after them (`LEFT|RIGHT`,
/// `MIN|MAX`) is.
pub(crate) fn mpop_keys(
    args: Args<'_>,
    at: usize,
) -> Result<(std::ops::Range<usize>, usize), ParseError> {
    let numkeys = match parse_i64(args.get(at)) {
        Some(n) if n >= 1 => n,
        _ => return Err(ParseError::Text(NUMKEYS)),
    };
    let where_at = numkeys
        .checked_add(at as i64 + 1)
        .and_then(|w| usize::try_from(w).ok())
        .filter(|&w| w < args.len())
        .ok_or(SYNTAX)?;
    Ok((at + 1..where_at, where_at))
}

/// The optional `COUNT count` from argument `from` on of `LMPOP`/`ZMPOP` (1 when absent).
pub(crate) fn mpop_count(args: Args<'_>, from: usize) -> Result<i64, ParseError> {
    let mut count = None;
    let mut j = from;
    while j < args.len() {
        if count.is_none() && args.get(j).eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            match parse_i64(args.get(j + 1)) {
                Some(c) if c >= 1 => count = Some(c),
                _ => return Err(ParseError::Text(COUNT_POSITIVE)),
            }
            j += 2;
        } else {
            return Err(SYNTAX);
        }
    }
    Ok(count.unwrap_or(1))
}

fn push(args: Args<'_>, side: Side, only_existing: bool) -> DataCommand<'_> {
    Push {
        key: args.get(1),
        values: args,
        side,
        only_existing,
    }
    .into()
}

/// `LPOP`/`RPOP key [count]`: at most one count, not negative (Redis's
/// `getPositiveLongFromObjectOrReply`, one text for a negative count and for one that is not
/// an integer).
fn pop<'a>(args: Args<'a>, side: Side, name: &'static str) -> Result<DataCommand<'a>, ParseError> {
    if args.len() > 3 {
        return Err(ParseError::Arity(name));
    }
    let count = if args.len() < 3 {
        None
    } else {
        match parse_i64(args.get(2)) {
            Some(n) if n >= 0 => Some(n),
            _ => return Err(ParseError::Text(errors::MUST_BE_POSITIVE)),
        }
    };
    Ok(Pop {
        key: args.get(1),
        side,
        count,
    }
    .into())
}

/// A blocking command: the timeout first (as [`crate::blocking`] checks it), then the
/// rest (`pop`) in Redis's order.
fn blocking<'a>(
    args: Args<'a>,
    name: &'static str,
    pop: impl FnOnce(Args<'a>) -> Result<BlockingPop<'a>, ParseError>,
) -> Result<DataCommand<'a>, ParseError> {
    if super::timeout(&args, name).is_err() {
        return Err(ParseError::Text(super::timeout_error(&args, name)));
    }
    let waited = match name {
        "brpoplpush" | "blmove" => Waited::Null,
        _ => Waited::NullArray,
    };
    Ok(Blocking {
        pop: pop(args)?,
        waited,
    }
    .into())
}
