//! The string commands' arguments, parsed before they run ([`super::super::typed`]): the
//! command table ([`COMMANDS`]) names each command's parser.

use super::{spec, Unit};
use crate::cmd::data::Spec;
use crate::cmd::longdouble::{self, Parsed};
use crate::cmd::typed::{integer, DataCommand, ParseError, SYNTAX};
use crate::cmd::Args;
use crate::errors;

pub static COMMANDS: [Spec; 22] = [
    spec("get", 2, false, |a| Ok(Get { key: a.get(1) }.into())),
    spec("set", -3, true, parse_set),
    spec("mget", -2, false, |a| Ok(MGet { keys: a }.into())),
    spec("mset", -3, true, |a| parse_mset(a, false)),
    spec("msetnx", -3, true, |a| parse_mset(a, true)),
    spec("setnx", 3, true, |a| {
        Ok(SetNx {
            key: a.get(1),
            value: a.get(2),
        }
        .into())
    }),
    spec("setex", 4, true, |a| {
        parse_setex(a, Unit::Ex, INVALID_EXPIRE_SETEX)
    }),
    spec("psetex", 4, true, |a| {
        parse_setex(a, Unit::Px, INVALID_EXPIRE_PSETEX)
    }),
    spec("getset", 3, true, |a| {
        Ok(GetSet {
            key: a.get(1),
            value: a.get(2),
        }
        .into())
    }),
    spec("getdel", 2, true, |a| Ok(GetDel { key: a.get(1) }.into())),
    spec("getex", -2, true, parse_getex),
    spec("append", 3, true, |a| {
        Ok(Append {
            key: a.get(1),
            value: a.get(2),
        }
        .into())
    }),
    spec("strlen", 2, false, |a| Ok(StrLen { key: a.get(1) }.into())),
    spec("incr", 2, true, |a| {
        Ok(IncrBy {
            key: a.get(1),
            by: 1,
        }
        .into())
    }),
    spec("decr", 2, true, |a| {
        Ok(IncrBy {
            key: a.get(1),
            by: -1,
        }
        .into())
    }),
    spec("incrby", 3, true, |a| {
        let by = integer(a.get(2))?;
        Ok(IncrBy { key: a.get(1), by }.into())
    }),
    spec("decrby", 3, true, |a| {
        let by = integer(a.get(2))?
            .checked_neg()
            .ok_or(ParseError::Text(DECR_OVERFLOW))?;
        Ok(IncrBy { key: a.get(1), by }.into())
    }),
    spec("incrbyfloat", 3, true, |a| {
        // Refused in apply, after the key's type and value (Redis's order).
        let by = longdouble::parse(a.get(2));
        Ok(IncrByFloat { key: a.get(1), by }.into())
    }),
    spec("getrange", 4, false, parse_getrange),
    spec("lcs", -3, false, |a| {
        let rest: Vec<&[u8]> = (3..a.len()).map(|i| a.get(i)).collect();
        Ok(Lcs {
            k1: a.get(1),
            k2: a.get(2),
            opts: super::lcs::parse_options(&rest),
        }
        .into())
    }),
    spec("substr", 4, false, parse_getrange),
    spec("setrange", 4, true, |a| {
        let offset =
            u64::try_from(integer(a.get(2))?).map_err(|_| ParseError::Text(OFFSET_RANGE))?;
        Ok(SetRange {
            key: a.get(1),
            offset,
            value: a.get(3),
        }
        .into())
    }),
];

/// `SETEX` with a bad expire time.
const INVALID_EXPIRE_SETEX: &[u8] = b"invalid expire time in 'setex' command";
/// `PSETEX` with a bad expire time.
const INVALID_EXPIRE_PSETEX: &[u8] = b"invalid expire time in 'psetex' command";
/// `GETEX` with a bad expire time.
pub(super) const INVALID_EXPIRE_GETEX: &[u8] = b"invalid expire time in 'getex' command";
/// `DECRBY key -9223372036854775808`.
const DECR_OVERFLOW: &[u8] = b"decrement would overflow";
/// `SETRANGE` with a negative offset.
const OFFSET_RANGE: &[u8] = b"offset is out of range";

/// A string command, its arguments parsed.
#[derive(Debug, PartialEq)]
pub enum StringCommand<'a> {
    Get {
        key: &'a [u8],
    },
    Set(Set<'a>),
    /// `MGET key...`: the whole request (the keys from argument 1 on).
    MGet {
        keys: Args<'a>,
    },
    /// `MSET key value...`, `MSETNX` (`nx`): the whole request (the pairs from argument 1
    /// on, their count checked).
    MSet {
        pairs: Args<'a>,
        nx: bool,
    },
    SetNx {
        key: &'a [u8],
        value: &'a [u8],
    },
    /// `SETEX key seconds value`, `PSETEX key ms value`.
    SetEx {
        key: &'a [u8],
        expiry: Expiry,
        value: &'a [u8],
    },
    GetSet {
        key: &'a [u8],
        value: &'a [u8],
    },
    GetDel {
        key: &'a [u8],
    },
    GetEx {
        key: &'a [u8],
        ttl: GetExTtl<'a>,
    },
    /// `INCR`, `DECR`, `INCRBY`, `DECRBY`: the increment (a decrement negated).
    IncrBy {
        key: &'a [u8],
        by: i64,
    },
    /// `INCRBYFLOAT key increment`: `None` when the increment is not a number, which Redis
    /// answers only after the key's type and value ([`super::numeric::incrbyfloat`]).
    IncrByFloat {
        key: &'a [u8],
        by: Option<Parsed>,
    },
    Append {
        key: &'a [u8],
        value: &'a [u8],
    },
    StrLen {
        key: &'a [u8],
    },
    /// `GETRANGE key start end`, `SUBSTR`.
    GetRange {
        key: &'a [u8],
        start: i64,
        end: i64,
    },
    SetRange {
        key: &'a [u8],
        offset: u64,
        value: &'a [u8],
    },
    /// `LCS key1 key2 [options]`: the options' error is answered after the keys' types.
    Lcs {
        k1: &'a [u8],
        k2: &'a [u8],
        opts: Result<super::lcs::LcsOptions, &'static [u8]>,
    },
}

pub use StringCommand::{
    Append, Get, GetDel, GetEx, GetRange, GetSet, IncrBy, IncrByFloat, Lcs, MGet, MSet, SetEx,
    SetNx, SetRange, StrLen,
};

impl<'a> From<StringCommand<'a>> for DataCommand<'a> {
    fn from(c: StringCommand<'a>) -> Self {
        DataCommand::Strings(c)
    }
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
#[derive(Debug, PartialEq)]
pub struct Set<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub expiry: Option<Expiry>,
    pub cond: Option<Cond>,
    pub get: bool,
    pub keep_ttl: bool,
}

impl Set<'_> {
    /// No option: it may join a run of `SET`s written with one upsert
    /// ([`super::set_run`]).
    pub fn is_plain(&self) -> bool {
        self.expiry.is_none() && self.cond.is_none() && !self.get && !self.keep_ttl
    }
}

/// `SET`'s `NX` or `XX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// Only if the key does not exist.
    Nx,
    /// Only if it exists.
    Xx,
}

/// An expire time checked as Redis's `getExpireMillisecondsOrReply` checks it before it
/// knows the clock: an integer, positive, and in milliseconds within `i64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    pub unit: Unit,
    /// In milliseconds.
    pub ms: i64,
    /// The error text of a time refused (`invalid expire time in '<cmd>' command`).
    invalid: &'static [u8],
}

impl Expiry {
    pub fn parse(value: &[u8], unit: Unit, invalid: &'static [u8]) -> Result<Self, ParseError> {
        let n = integer(value)?;
        let seconds = matches!(unit, Unit::Ex | Unit::ExAt);
        if n <= 0 || (seconds && n > i64::MAX / 1000) {
            return Err(ParseError::Text(invalid));
        }
        let ms = if seconds { n * 1000 } else { n };
        Ok(Self { unit, ms, invalid })
    }

    /// The absolute time in Unix ms. A relative time that overflows once `now_ms` is added
    /// is refused here, in apply, as the clock is the batch's (Redis's last check, still
    /// before the key is read).
    pub fn at(self, now_ms: i64) -> Result<i64, ParseError> {
        match self.unit {
            Unit::Ex | Unit::Px => self
                .ms
                .checked_add(now_ms)
                .ok_or(ParseError::Text(self.invalid)),
            Unit::ExAt | Unit::PxAt => Ok(self.ms),
        }
    }
}

/// What `GETEX` does to the TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetExTtl<'a> {
    Keep,
    Persist,
    /// `EX`/`PX`/`EXAT`/`PXAT` and the time, not checked yet: Redis checks it only after
    /// the key's type ([`super::getex`]).
    Set(&'a [u8], Unit),
}

/// `SET`'s or `GETEX`'s options as read so far.
#[derive(Debug, Default)]
struct Options<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    /// The expire argument and its unit, not validated yet.
    expire: Option<(&'a [u8], Unit)>,
}

/// Parses the options from argument `first` on (`SET`'s if `set`, else `GETEX`'s), as
/// Redis 7.0's `parseExtendedStringArgumentsOrReply`: a repeated `EX` is taken (the last
/// wins), a conflicting one is a syntax error.
fn parse_options<'a>(args: &Args<'a>, first: usize, set: bool) -> Result<Options<'a>, ParseError> {
    let mut o = Options::default();
    let mut i = first;
    while i < args.len() {
        let a = args.get(i);
        let next = (i + 1 < args.len()).then(|| args.get(i + 1));
        let is = |w: &[u8]| a.eq_ignore_ascii_case(w);
        let unit = o.expire.map(|(_, u)| u);
        let other_unit = |u: Unit| unit.is_some_and(|x| x != u);
        if is(b"nx") && set && !o.xx {
            o.nx = true;
        } else if is(b"xx") && set && !o.nx {
            o.xx = true;
        } else if is(b"get") && set {
            o.get = true;
        } else if is(b"keepttl") && set && !o.persist && unit.is_none() {
            o.keep_ttl = true;
        } else if is(b"persist") && !set && unit.is_none() && !o.keep_ttl {
            o.persist = true;
        } else if let (Some(u), Some(value)) = (
            [
                (&b"ex"[..], Unit::Ex),
                (b"px", Unit::Px),
                (b"exat", Unit::ExAt),
                (b"pxat", Unit::PxAt),
            ]
            .into_iter()
            .find(|(w, _)| is(w))
            .map(|(_, u)| u),
            next,
        ) {
            if o.keep_ttl || o.persist || other_unit(u) {
                return Err(SYNTAX);
            }
            o.expire = Some((value, u));
            i += 1;
        } else {
            return Err(SYNTAX);
        }
        i += 1;
    }
    Ok(o)
}

fn parse_set(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let o = parse_options(&args, 3, true)?;
    let expiry = match o.expire {
        Some((v, u)) => Some(Expiry::parse(v, u, errors::INVALID_EXPIRE_SET)?),
        None => None,
    };
    let cond = match (o.nx, o.xx) {
        (true, _) => Some(Cond::Nx),
        (_, true) => Some(Cond::Xx),
        _ => None,
    };
    Ok(StringCommand::Set(Set {
        key: args.get(1),
        value: args.get(2),
        expiry,
        cond,
        get: o.get,
        keep_ttl: o.keep_ttl,
    })
    .into())
}

fn parse_getex(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let o = parse_options(&args, 2, false)?;
    let ttl = match o.expire {
        Some((v, u)) => GetExTtl::Set(v, u),
        None if o.persist => GetExTtl::Persist,
        None => GetExTtl::Keep,
    };
    Ok(GetEx {
        key: args.get(1),
        ttl,
    }
    .into())
}

fn parse_setex<'a>(
    args: Args<'a>,
    unit: Unit,
    invalid: &'static [u8],
) -> Result<DataCommand<'a>, ParseError> {
    Ok(SetEx {
        key: args.get(1),
        expiry: Expiry::parse(args.get(2), unit, invalid)?,
        value: args.get(3),
    }
    .into())
}

/// `MSET`/`MSETNX`: pairs, else the arity error (the table's arity says only "at least 3").
fn parse_mset(args: Args<'_>, nx: bool) -> Result<DataCommand<'_>, ParseError> {
    if args.len().is_multiple_of(2) {
        return Err(ParseError::Arity(if nx { "msetnx" } else { "mset" }));
    }
    Ok(MSet { pairs: args, nx }.into())
}

fn parse_getrange(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    Ok(GetRange {
        key: args.get(1),
        start: integer(args.get(2))?,
        end: integer(args.get(3))?,
    }
    .into())
}
