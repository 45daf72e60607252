//! The set commands' arguments, parsed before they run ([`crate::cmd::typed`]): the
//! command table ([`COMMANDS`]) names each command's parser.

use super::algebra::Op;
use crate::cmd::data::{Family, Spec};
use crate::cmd::scan::CollectionScan;
use crate::cmd::typed::{DataCommand, Parse, ParseError, SYNTAX};
use crate::cmd::{parse_i64, Args};
use crate::errors;

const fn spec(name: &'static str, arity: i32, write: bool, parse: Parse) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Sets,
        parse,
    }
}

pub static COMMANDS: [Spec; 17] = [
    spec("sadd", -3, true, |a| {
        Ok(SAdd {
            key: a.get(1),
            members: a,
        }
        .into())
    }),
    spec("srem", -3, true, |a| {
        Ok(SRem {
            key: a.get(1),
            members: a,
        }
        .into())
    }),
    spec("smembers", 2, false, |a| Ok(algebra(a, Op::Inter, false))),
    spec("sismember", 3, false, |a| {
        Ok(SIsMember {
            key: a.get(1),
            member: a.get(2),
        }
        .into())
    }),
    spec("smismember", -3, false, |a| {
        Ok(SMIsMember {
            key: a.get(1),
            members: a,
        }
        .into())
    }),
    spec("scard", 2, false, |a| Ok(SCard { key: a.get(1) }.into())),
    spec("spop", -2, true, parse_spop),
    spec("srandmember", -2, false, parse_srandmember),
    spec("sinter", -2, false, |a| Ok(algebra(a, Op::Inter, false))),
    spec("sunion", -2, false, |a| Ok(algebra(a, Op::Union, false))),
    spec("sdiff", -2, false, |a| Ok(algebra(a, Op::Diff, false))),
    spec("sinterstore", -3, true, |a| Ok(algebra(a, Op::Inter, true))),
    spec("sunionstore", -3, true, |a| Ok(algebra(a, Op::Union, true))),
    spec("sdiffstore", -3, true, |a| Ok(algebra(a, Op::Diff, true))),
    spec("sintercard", -3, false, parse_sintercard),
    spec("smove", 4, true, |a| {
        Ok(SMove {
            src: a.get(1),
            dst: a.get(2),
            member: a.get(3),
        }
        .into())
    }),
    spec("sscan", -3, false, |a| {
        Ok(SScan(CollectionScan::parse(a)?).into())
    }),
];

/// `SINTERCARD`'s errors (`src/t_set.c`).
const NUMKEYS_POSITIVE: &[u8] = b"numkeys should be greater than 0";
const NUMKEYS_TOO_MANY: &[u8] = b"Number of keys can't be greater than number of args";
const LIMIT_NEGATIVE: &[u8] = b"LIMIT can't be negative";

/// A set command, its arguments parsed. Lists of members and keys keep the whole request
/// (`members`: from argument 2 on), read in place.
#[derive(Debug, PartialEq)]
pub enum SetCommand<'a> {
    SAdd {
        key: &'a [u8],
        members: Args<'a>,
    },
    SRem {
        key: &'a [u8],
        members: Args<'a>,
    },
    SCard {
        key: &'a [u8],
    },
    SIsMember {
        key: &'a [u8],
        member: &'a [u8],
    },
    SMIsMember {
        key: &'a [u8],
        members: Args<'a>,
    },
    SMove {
        src: &'a [u8],
        dst: &'a [u8],
        member: &'a [u8],
    },
    /// `SMEMBERS` (an intersection of one), `SINTER`, `SUNION`, `SDIFF` and (with `dst`)
    /// their `STORE` forms: the sets are `keys` of `args`.
    Algebra {
        op: Op,
        args: Args<'a>,
        keys: std::ops::Range<usize>,
        dst: Option<&'a [u8]>,
    },
    /// `SINTERCARD numkeys key... [LIMIT limit]` (0: no limit).
    SInterCard {
        args: Args<'a>,
        keys: std::ops::Range<usize>,
        limit: i64,
    },
    SPop {
        key: &'a [u8],
        count: Option<i64>,
    },
    /// `SRANDMEMBER key [count]` (never `i64::MIN`).
    SRandMember {
        key: &'a [u8],
        count: Option<i64>,
    },
    SScan(CollectionScan<'a>),
}

pub use SetCommand::{
    Algebra, SAdd, SCard, SInterCard, SIsMember, SMIsMember, SMove, SPop, SRandMember, SRem, SScan,
};

impl<'a> From<SetCommand<'a>> for DataCommand<'a> {
    fn from(c: SetCommand<'a>) -> Self {
        DataCommand::Sets(c)
    }
}

fn algebra(args: Args<'_>, op: Op, store: bool) -> DataCommand<'_> {
    let (first, dst) = if store {
        (2, Some(args.get(1)))
    } else {
        (1, None)
    };
    Algebra {
        op,
        args,
        keys: first..args.len(),
        dst,
    }
    .into()
}

/// `SINTERCARD`'s checks, in Redis's order (`numkeys`, then `LIMIT` and the syntax).
fn parse_sintercard(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let numkeys = match parse_i64(args.get(1)) {
        Some(n) if n >= 1 => n,
        _ => return Err(ParseError::Text(NUMKEYS_POSITIVE)),
    };
    let numkeys = usize::try_from(numkeys)
        .ok()
        .filter(|&n| n <= args.len() - 2)
        .ok_or(ParseError::Text(NUMKEYS_TOO_MANY))?;
    let mut limit = 0i64;
    let mut i = 2 + numkeys;
    while i < args.len() {
        if args.get(i).eq_ignore_ascii_case(b"limit") && i + 1 < args.len() {
            match parse_i64(args.get(i + 1)) {
                Some(n) if n >= 0 => limit = n,
                _ => return Err(ParseError::Text(LIMIT_NEGATIVE)),
            }
            i += 2;
        } else {
            return Err(SYNTAX);
        }
    }
    Ok(SInterCard {
        args,
        keys: 2..2 + numkeys,
        limit,
    }
    .into())
}

/// `SPOP key [count]`: a third argument is a syntax error (Redis's `spopCommand`), the
/// count not negative (one text for a negative count and for one that is not an integer).
fn parse_spop(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
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
    Ok(SPop {
        key: args.get(1),
        count,
    }
    .into())
}

/// `SRANDMEMBER key [count]`: any count but `i64::MIN` (Redis's
/// `getRangeLongFromObjectOrReply`).
fn parse_srandmember(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    if args.len() > 3 {
        return Err(SYNTAX);
    }
    let count = if args.len() == 3 {
        match parse_i64(args.get(2)) {
            None => return Err(ParseError::Text(errors::NOT_INTEGER)),
            Some(i64::MIN) => return Err(ParseError::Text(errors::COUNT_OUT_OF_RANGE)),
            Some(n) => Some(n),
        }
    } else {
        None
    };
    Ok(SRandMember {
        key: args.get(1),
        count,
    }
    .into())
}
