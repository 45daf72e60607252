//! The sorted set commands' arguments, parsed before they run ([`crate::cmd::typed`]): the
//! command table ([`COMMANDS`]) names each command's parser.

use super::range::{lex_bound, LexBound};
use super::score;
use crate::cmd::data::{Family, Spec};
use crate::cmd::scan::CollectionScan;
use crate::cmd::typed::{DataCommand, Parse, ParseError, NOT_INTEGER, SYNTAX};
use crate::cmd::{parse_i64, Args};
use crate::errors;

const fn spec(name: &'static str, arity: i32, write: bool, parse: Parse) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::ZSets,
        parse,
    }
}

pub static COMMANDS: [Spec; 35] = [
    spec("zadd", -4, true, |a| parse_zadd(a, false)),
    spec("zincrby", 4, true, |a| parse_zadd(a, true)),
    spec("zrem", -3, true, |a| {
        Ok(ZRem {
            key: a.get(1),
            members: a,
        }
        .into())
    }),
    spec("zscore", 3, false, |a| {
        Ok(ZScore {
            key: a.get(1),
            member: a.get(2),
        }
        .into())
    }),
    spec("zmscore", -3, false, |a| {
        Ok(ZMScore {
            key: a.get(1),
            members: a,
        }
        .into())
    }),
    spec("zcard", 2, false, |a| Ok(ZCard { key: a.get(1) }.into())),
    spec("zcount", 4, false, |a| parse_count(a, By::Score)),
    spec("zlexcount", 4, false, |a| parse_count(a, By::Lex)),
    spec("zrange", -4, false, |a| parse_zrange(a, false, None, None)),
    spec("zrangebyscore", -4, false, |a| {
        parse_zrange(a, false, Some(By::Score), Some(false))
    }),
    spec("zrevrange", -4, false, |a| {
        parse_zrange(a, false, Some(By::Rank), Some(true))
    }),
    spec("zrevrangebyscore", -4, false, |a| {
        parse_zrange(a, false, Some(By::Score), Some(true))
    }),
    spec("zrangebylex", -4, false, |a| {
        parse_zrange(a, false, Some(By::Lex), Some(false))
    }),
    spec("zrevrangebylex", -4, false, |a| {
        parse_zrange(a, false, Some(By::Lex), Some(true))
    }),
    spec("zrank", 3, false, |a| Ok(parse_zrank(a, false))),
    spec("zrevrank", 3, false, |a| Ok(parse_zrank(a, true))),
    spec("zpopmin", -2, true, |a| parse_zpop(a, false)),
    spec("zpopmax", -2, true, |a| parse_zpop(a, true)),
    spec("zmpop", -4, true, |a| {
        Ok(ZSetCommand::ZMPop(super::mpop::ZMPop::parse(a, 1)?).into())
    }),
    spec("zremrangebyrank", 4, true, |a| parse_remove(a, By::Rank)),
    spec("zremrangebyscore", 4, true, |a| parse_remove(a, By::Score)),
    spec("zremrangebylex", 4, true, |a| parse_remove(a, By::Lex)),
    spec("zrangestore", -5, true, |a| {
        parse_zrange(a, true, None, None)
    }),
    spec("zscan", -3, false, |a| {
        Ok(ZScan(CollectionScan::parse(a)?).into())
    }),
    spec("zunion", -3, false, |a| {
        parse_algebra(a, "zunion", SetOp::Union, false)
    }),
    spec("zinter", -3, false, |a| {
        parse_algebra(a, "zinter", SetOp::Inter, false)
    }),
    spec("zdiff", -3, false, |a| {
        parse_algebra(a, "zdiff", SetOp::Diff, false)
    }),
    spec("zunionstore", -4, true, |a| {
        parse_algebra(a, "zunionstore", SetOp::Union, true)
    }),
    spec("zinterstore", -4, true, |a| {
        parse_algebra(a, "zinterstore", SetOp::Inter, true)
    }),
    spec("zdiffstore", -4, true, |a| {
        parse_algebra(a, "zdiffstore", SetOp::Diff, true)
    }),
    spec("zintercard", -3, false, |a| {
        parse_algebra(a, "zintercard", SetOp::Inter, false)
    }),
    spec("zrandmember", -2, false, super::random::parse_zrandmember),
    spec("bzpopmin", -3, true, |a| {
        super::blocking::parse_bzpop(a, false)
    }),
    spec("bzpopmax", -3, true, |a| {
        super::blocking::parse_bzpop(a, true)
    }),
    spec("bzmpop", -5, true, super::blocking::parse_bzmpop),
];

// Error texts of `src/t_zset.c` (7.0).
const XX_AND_NX: &[u8] = b"XX and NX options at the same time are not compatible";
const GT_LT_NX: &[u8] = b"GT, LT, and/or NX options at the same time are not compatible";
const INCR_ONE_PAIR: &[u8] = b"INCR option supports a single increment-element pair";
const NOT_A_FLOAT_RANGE: &[u8] = b"min or max is not a float";
const NOT_A_LEX_RANGE: &[u8] = b"min or max not valid string range item";
const LIMIT_NEEDS_BY: &[u8] =
    b"syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
const WITHSCORES_BYLEX: &[u8] = b"syntax error, WITHSCORES not supported in combination with BYLEX";

/// A sorted set command, its arguments parsed. Lists of members keep the whole request
/// (`members`: from argument 2 on), read in place.
#[derive(Debug, PartialEq)]
pub enum ZSetCommand<'a> {
    /// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member...`, `ZINCRBY key incr member`
    /// (`INCR` set).
    ZAdd {
        key: &'a [u8],
        flags: ZAddFlags,
        pairs: Vec<(f64, &'a [u8])>,
    },
    ZRem {
        key: &'a [u8],
        members: Args<'a>,
    },
    ZScore {
        key: &'a [u8],
        member: &'a [u8],
    },
    ZMScore {
        key: &'a [u8],
        members: Args<'a>,
    },
    ZCard {
        key: &'a [u8],
    },
    /// `ZRANK`, `ZREVRANK` (`rev`).
    ZRank {
        key: &'a [u8],
        member: &'a [u8],
        rev: bool,
    },
    /// `ZPOPMIN`, `ZPOPMAX` (`max`) `key [count]`.
    ZPop {
        key: &'a [u8],
        count: Option<i64>,
        max: bool,
    },
    /// `ZCOUNT`, `ZLEXCOUNT key min max`.
    ZCount {
        key: &'a [u8],
        range: Range<'a>,
    },
    ZRange(ZRange<'a>),
    /// `ZREMRANGEBYRANK`, `ZREMRANGEBYSCORE`, `ZREMRANGEBYLEX`.
    ZRemRange {
        key: &'a [u8],
        range: Range<'a>,
    },
    ZScan(CollectionScan<'a>),
    /// `ZMPOP numkeys key... MIN|MAX [COUNT count]`.
    ZMPop(super::mpop::ZMPop<'a>),
    /// `ZUNION`, `ZINTER`, `ZDIFF`, their `STORE` forms, `ZINTERCARD`.
    Algebra(Algebra<'a>),
    /// `ZRANDMEMBER key [count [WITHSCORES]]`.
    ZRandMember {
        key: &'a [u8],
        count: Option<super::random::RandCount>,
    },
    /// `BZPOPMIN`, `BZPOPMAX`, `BZMPOP`, their timeout checked (its value is
    /// [`crate::blocking`]'s, which makes them wait; inside `EXEC` and scripts they answer
    /// as the command would without waiting, a null array when nothing is there).
    Blocking(super::blocking::BlockingZPop<'a>),
}

pub use ZSetCommand::{ZAdd, ZCard, ZCount, ZMScore, ZPop, ZRank, ZRem, ZRemRange, ZScan, ZScore};

impl<'a> From<ZSetCommand<'a>> for DataCommand<'a> {
    fn from(c: ZSetCommand<'a>) -> Self {
        DataCommand::ZSets(c)
    }
}

/// `ZADD`'s options.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ZAddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub ch: bool,
    pub incr: bool,
}

/// What a range counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Rank,
    Score,
    Lex,
}

/// A range, its bounds parsed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range<'a> {
    /// Ranks `start..=stop` (negative: from the end).
    Rank(i64, i64),
    /// Scores, each bound with whether it is exclusive (`(`), as `zslParseRange` reads
    /// them.
    Score { min: (f64, bool), max: (f64, bool) },
    /// Members, as `zslParseLexRange` reads them.
    Lex {
        min: LexBound<'a>,
        max: LexBound<'a>,
    },
}

impl<'a> Range<'a> {
    /// The range `lo`..`hi` counted in `by`, or Redis's error text.
    pub fn parse(by: By, lo: &'a [u8], hi: &'a [u8]) -> Result<Self, ParseError> {
        Ok(match by {
            By::Rank => {
                let (Some(a), Some(b)) = (parse_i64(lo), parse_i64(hi)) else {
                    return Err(NOT_INTEGER);
                };
                Range::Rank(a, b)
            }
            By::Score => {
                let bounds = score::parse_bound(lo).zip(score::parse_bound(hi));
                let (min, max) = bounds.ok_or(ParseError::Text(NOT_A_FLOAT_RANGE))?;
                Range::Score { min, max }
            }
            By::Lex => {
                let bounds = lex_bound(lo).zip(lex_bound(hi));
                let (min, max) = bounds.ok_or(ParseError::Text(NOT_A_LEX_RANGE))?;
                Range::Lex { min, max }
            }
        })
    }
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`, its
/// older forms, and `ZRANGESTORE dst src ...` (`dst`).
#[derive(Debug, PartialEq)]
pub struct ZRange<'a> {
    pub key: &'a [u8],
    pub dst: Option<&'a [u8]>,
    /// For `REV` with scores or lex, the bounds as given swapped back (min first).
    pub range: Range<'a>,
    pub rev: bool,
    /// `LIMIT offset count` (`count` negative: all; `(0, -1)` when not given), BYSCORE
    /// and BYLEX only.
    pub limit: (i64, i64),
    pub withscores: bool,
}

/// `ZADD` and `ZINCRBY` as Redis parses them (`zaddGenericCommand`, its options
/// included), every check in its order before the key is read.
fn parse_zadd(args: Args<'_>, zincrby: bool) -> Result<DataCommand<'_>, ParseError> {
    let mut f = ZAddFlags {
        incr: zincrby,
        ..ZAddFlags::default()
    };
    let mut at = 2;
    while at < args.len() {
        let o = args.get(at);
        let is = |w: &[u8]| o.eq_ignore_ascii_case(w);
        if is(b"nx") {
            f.nx = true;
        } else if is(b"xx") {
            f.xx = true;
        } else if is(b"ch") {
            f.ch = true;
        } else if is(b"incr") {
            f.incr = true;
        } else if is(b"gt") {
            f.gt = true;
        } else if is(b"lt") {
            f.lt = true;
        } else {
            break;
        }
        at += 1;
    }
    let elements = args.len() - at;
    if elements % 2 == 1 || elements == 0 {
        return Err(SYNTAX);
    } else if f.nx && f.xx {
        return Err(ParseError::Text(XX_AND_NX));
    } else if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(ParseError::Text(GT_LT_NX));
    } else if f.incr && elements > 2 {
        return Err(ParseError::Text(INCR_ONE_PAIR));
    }
    let mut pairs = Vec::with_capacity(elements / 2);
    for j in 0..elements / 2 {
        let s =
            score::parse_value(args.get(at + 2 * j)).ok_or(ParseError::Text(errors::NOT_FLOAT))?;
        pairs.push((s, args.get(at + 2 * j + 1)));
    }
    Ok(ZAdd {
        key: args.get(1),
        flags: f,
        pairs,
    }
    .into())
}

fn parse_zrank(args: Args<'_>, rev: bool) -> DataCommand<'_> {
    ZRank {
        key: args.get(1),
        member: args.get(2),
        rev,
    }
    .into()
}

/// `ZPOPMIN`/`ZPOPMAX key [count]`: a third argument is a syntax error, the count not
/// negative (one text for a negative count and for one that is not an integer).
fn parse_zpop(args: Args<'_>, max: bool) -> Result<DataCommand<'_>, ParseError> {
    if args.len() > 3 {
        return Err(SYNTAX);
    }
    let count = if args.len() == 3 {
        match parse_i64(args.get(2)) {
            Some(n) if n >= 0 => Some(n),
            _ => return Err(ParseError::Text(errors::MUST_BE_POSITIVE)),
        }
    } else {
        None
    };
    Ok(ZPop {
        key: args.get(1),
        count,
        max,
    }
    .into())
}

fn parse_count(args: Args<'_>, by: By) -> Result<DataCommand<'_>, ParseError> {
    Ok(ZCount {
        key: args.get(1),
        range: Range::parse(by, args.get(2), args.get(3))?,
    }
    .into())
}

fn parse_remove(args: Args<'_>, by: By) -> Result<DataCommand<'_>, ParseError> {
    Ok(ZRemRange {
        key: args.get(1),
        range: Range::parse(by, args.get(2), args.get(3))?,
    }
    .into())
}

/// `ZRANGE` and its forms (`by` and `rev` fixed by the older ones) as
/// `zrangeGenericCommand` parses them, errors in its order.
fn parse_zrange(
    args: Args<'_>,
    store: bool,
    by: Option<By>,
    rev: Option<bool>,
) -> Result<DataCommand<'_>, ParseError> {
    let first = if store { 2 } else { 1 };
    let (mut by, mut rev) = (by, rev);
    let (mut withscores, mut limit) = (false, (0i64, -1i64));
    let mut j = first + 3;
    while j < args.len() {
        let o = args.get(j);
        let is = |w: &[u8]| o.eq_ignore_ascii_case(w);
        if !store && is(b"withscores") {
            withscores = true;
        } else if is(b"limit") && args.len() - j > 2 {
            let (Some(a), Some(b)) = (parse_i64(args.get(j + 1)), parse_i64(args.get(j + 2)))
            else {
                return Err(NOT_INTEGER);
            };
            limit = (a, b);
            j += 2;
        } else if rev.is_none() && is(b"rev") {
            rev = Some(true);
        } else if by.is_none() && is(b"bylex") {
            by = Some(By::Lex);
        } else if by.is_none() && is(b"byscore") {
            by = Some(By::Score);
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let by = by.unwrap_or(By::Rank);
    // A count of -1 is Redis's default: no LIMIT as far as this check goes.
    if limit.1 != -1 && by == By::Rank {
        return Err(ParseError::Text(LIMIT_NEEDS_BY));
    }
    if withscores && by == By::Lex {
        return Err(ParseError::Text(WITHSCORES_BYLEX));
    }
    let (mut lo, mut hi) = (args.get(first + 1), args.get(first + 2));
    if rev && by != By::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    Ok(ZSetCommand::ZRange(ZRange {
        key: args.get(first),
        dst: store.then(|| args.get(1)),
        range: Range::parse(by, lo, hi)?,
        rev,
        limit,
        withscores,
    })
    .into())
}

/// How `ZUNION`/`ZINTER`/`ZDIFF` combine their inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOp {
    Union,
    Inter,
    Diff,
}

/// `AGGREGATE SUM|MIN|MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The options after the keys (Redis refuses them only after it has looked the keys up).
#[derive(Debug, PartialEq)]
pub struct AlgebraOptions {
    /// One per key, or empty (all 1).
    pub weights: Vec<f64>,
    pub aggregate: Aggregate,
    pub withscores: bool,
    /// `ZINTERCARD`: the count is answered (`limit`, 0 for none).
    pub card: bool,
    pub limit: i64,
}

/// `ZUNION numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]` and the
/// others (`dst` for the `STORE` forms).
#[derive(Debug, PartialEq)]
pub struct Algebra<'a> {
    pub op: SetOp,
    pub dst: Option<&'a [u8]>,
    /// The whole request: the keys are arguments `keys`.
    pub args: Args<'a>,
    pub keys: std::ops::Range<usize>,
    pub options: Result<AlgebraOptions, ParseError>,
}

const WEIGHT_NOT_FLOAT: &[u8] = b"weight value is not a float";
const LIMIT_NEGATIVE: &[u8] = b"LIMIT can't be negative";

/// As `zunionInterDiffGenericCommand` parses its arguments: `numkeys` now, the options
/// (their error kept) after the keys are read.
fn parse_algebra<'a>(
    args: Args<'a>,
    name: &'static str,
    op: SetOp,
    store: bool,
) -> Result<DataCommand<'a>, ParseError> {
    let card = name == "zintercard";
    let at = if store { 2 } else { 1 };
    let n = parse_i64(args.get(at)).ok_or(NOT_INTEGER)?;
    if n < 1 {
        return Err(ParseError::Formatted(
            format!("at least 1 input key is needed for '{name}' command").into_bytes(),
        ));
    }
    let first = at + 1;
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n > args.len() - first {
        return Err(SYNTAX);
    }
    let keys = first..first + n;
    let options = algebra_options(&args, keys.end, n, op, store, card);
    Ok(ZSetCommand::Algebra(Algebra {
        op,
        dst: store.then(|| args.get(1)),
        args,
        keys,
        options,
    })
    .into())
}

fn algebra_options(
    args: &Args<'_>,
    mut j: usize,
    n: usize,
    op: SetOp,
    store: bool,
    card: bool,
) -> Result<AlgebraOptions, ParseError> {
    let mut o = AlgebraOptions {
        weights: Vec::new(),
        aggregate: Aggregate::Sum,
        withscores: false,
        card,
        limit: 0,
    };
    while j < args.len() {
        let remaining = args.len() - j;
        let is = |w: &[u8]| args.get(j).eq_ignore_ascii_case(w);
        if op != SetOp::Diff && !card && remaining > n && is(b"weights") {
            j += 1;
            o.weights.clear();
            for _ in 0..n {
                let w =
                    score::parse_value(args.get(j)).ok_or(ParseError::Text(WEIGHT_NOT_FLOAT))?;
                o.weights.push(w);
                j += 1;
            }
        } else if op != SetOp::Diff && !card && remaining >= 2 && is(b"aggregate") {
            let a = args.get(j + 1);
            o.aggregate = if a.eq_ignore_ascii_case(b"sum") {
                Aggregate::Sum
            } else if a.eq_ignore_ascii_case(b"min") {
                Aggregate::Min
            } else if a.eq_ignore_ascii_case(b"max") {
                Aggregate::Max
            } else {
                return Err(SYNTAX);
            };
            j += 2;
        } else if !store && !card && is(b"withscores") {
            o.withscores = true;
            j += 1;
        } else if card && remaining >= 2 && is(b"limit") {
            match parse_i64(args.get(j + 1)) {
                Some(l) if l >= 0 => o.limit = l,
                _ => return Err(ParseError::Text(LIMIT_NEGATIVE)),
            }
            j += 2;
        } else {
            return Err(SYNTAX);
        }
    }
    Ok(o)
}
