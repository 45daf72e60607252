//! The hash commands' arguments, parsed before they run ([`crate::cmd::typed`]): the
//! command table ([`COMMANDS`]) names each command's parser.

use crate::cmd::data::{Family, Spec};
use crate::cmd::longdouble::{self, Parsed};
use crate::cmd::scan::CollectionScan;
use crate::cmd::typed::{integer, DataCommand, Parse, ParseError, SYNTAX};
use crate::cmd::Args;
use crate::errors;

const fn spec(name: &'static str, arity: i32, write: bool, parse: Parse) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Hashes,
        parse,
    }
}

pub static COMMANDS: [Spec; 16] = [
    spec("hset", -4, true, |a| parse_hset(a, "hset")),
    spec("hsetnx", 4, true, |a| {
        Ok(HSetNx {
            key: a.get(1),
            field: a.get(2),
            value: a.get(3),
        }
        .into())
    }),
    spec("hget", 3, false, |a| Ok(field_read(a, FieldRead::Value))),
    spec("hmget", -3, false, |a| {
        Ok(HMGet {
            key: a.get(1),
            fields: a,
        }
        .into())
    }),
    spec("hmset", -4, true, |a| parse_hset(a, "hmset")),
    spec("hgetall", 2, false, |a| Ok(get_all(a, All::Pairs))),
    spec("hdel", -3, true, |a| {
        Ok(HDel {
            key: a.get(1),
            fields: a,
        }
        .into())
    }),
    spec("hexists", 3, false, |a| {
        Ok(field_read(a, FieldRead::Exists))
    }),
    spec("hincrby", 4, true, |a| {
        Ok(HIncrBy {
            key: a.get(1),
            field: a.get(2),
            by: integer(a.get(3))?,
        }
        .into())
    }),
    spec("hincrbyfloat", 4, true, |a| {
        let by = match longdouble::parse(a.get(3)) {
            None => return Err(ParseError::Text(errors::NOT_FLOAT)),
            Some(Parsed::Infinite) => return Err(ParseError::Text(NAN_OR_INFINITY)),
            Some(by) => by,
        };
        Ok(HIncrByFloat {
            key: a.get(1),
            field: a.get(2),
            by,
        }
        .into())
    }),
    spec("hkeys", 2, false, |a| Ok(get_all(a, All::Fields))),
    spec("hvals", 2, false, |a| Ok(get_all(a, All::Values))),
    spec("hlen", 2, false, |a| Ok(HLen { key: a.get(1) }.into())),
    spec("hstrlen", 3, false, |a| {
        Ok(field_read(a, FieldRead::Length))
    }),
    spec("hrandfield", -2, false, parse_hrandfield),
    spec("hscan", -3, false, |a| {
        Ok(HScan(CollectionScan::parse(a)?).into())
    }),
];

const NAN_OR_INFINITY: &[u8] = b"value is NaN or Infinity";
const OUT_OF_RANGE: &[u8] = b"value is out of range";

/// A hash command, its arguments parsed. Lists of fields keep the whole request (`fields`,
/// `pairs`: from argument 2 on), read in place.
#[derive(Debug, PartialEq)]
pub enum HashCommand<'a> {
    /// `HSET key field value...` (replies the count of new fields), `HMSET` (`+OK`): the
    /// pairs counted.
    HSet {
        key: &'a [u8],
        pairs: Args<'a>,
        count_reply: bool,
    },
    HSetNx {
        key: &'a [u8],
        field: &'a [u8],
        value: &'a [u8],
    },
    /// `HGET`, `HEXISTS`, `HSTRLEN`.
    Field {
        key: &'a [u8],
        field: &'a [u8],
        read: FieldRead,
    },
    HMGet {
        key: &'a [u8],
        fields: Args<'a>,
    },
    /// `HGETALL`, `HKEYS`, `HVALS`.
    All {
        key: &'a [u8],
        what: All,
    },
    HDel {
        key: &'a [u8],
        fields: Args<'a>,
    },
    HIncrBy {
        key: &'a [u8],
        field: &'a [u8],
        by: i64,
    },
    /// The increment is finite (Redis refuses an infinite one first).
    HIncrByFloat {
        key: &'a [u8],
        field: &'a [u8],
        by: Parsed,
    },
    HLen {
        key: &'a [u8],
    },
    /// `HRANDFIELD key [count [WITHVALUES]]`.
    HRandField {
        key: &'a [u8],
        count: Option<RandCount>,
    },
    HScan(CollectionScan<'a>),
}

pub use HashCommand::{HDel, HIncrBy, HIncrByFloat, HLen, HMGet, HRandField, HScan, HSet, HSetNx};

impl<'a> From<HashCommand<'a>> for DataCommand<'a> {
    fn from(c: HashCommand<'a>) -> Self {
        DataCommand::Hashes(c)
    }
}

/// What `HGET`, `HEXISTS`, `HSTRLEN` answer of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldRead {
    Value,
    Exists,
    Length,
}

/// What `HGETALL` (pairs, a map in RESP3), `HKEYS`, `HVALS` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum All {
    Pairs,
    Fields,
    Values,
}

/// `HRANDFIELD`'s count (never `i64::MIN`; within half of `i64`'s range `WITHVALUES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandCount {
    /// Negative: fields may repeat.
    pub count: i64,
    pub with_values: bool,
}

/// `HSET`/`HMSET`: field-value pairs, else the arity error (the table's arity says only
/// "at least 4").
fn parse_hset<'a>(args: Args<'a>, name: &'static str) -> Result<DataCommand<'a>, ParseError> {
    if args.len() % 2 == 1 {
        return Err(ParseError::Arity(name));
    }
    Ok(HSet {
        key: args.get(1),
        pairs: args,
        count_reply: name == "hset",
    }
    .into())
}

fn field_read(args: Args<'_>, read: FieldRead) -> DataCommand<'_> {
    HashCommand::Field {
        key: args.get(1),
        field: args.get(2),
        read,
    }
    .into()
}

fn get_all(args: Args<'_>, what: All) -> DataCommand<'_> {
    HashCommand::All {
        key: args.get(1),
        what,
    }
    .into()
}

/// Redis 7.0's `hrandfieldWithCountCommand` checks, in its order: the count an integer, not
/// `i64::MIN`, the syntax, then the range `WITHVALUES` allows.
fn parse_hrandfield(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let key = args.get(1);
    if args.len() == 2 {
        return Ok(HRandField { key, count: None }.into());
    }
    let count = integer(args.get(2))?;
    if count == i64::MIN {
        return Err(ParseError::Text(errors::COUNT_OUT_OF_RANGE));
    }
    if args.len() > 4 || (args.len() == 4 && !args.get(3).eq_ignore_ascii_case(b"withvalues")) {
        return Err(SYNTAX);
    }
    let with_values = args.len() == 4;
    if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(ParseError::Text(OUT_OF_RANGE));
    }
    Ok(HRandField {
        key,
        count: Some(RandCount { count, with_values }),
    }
    .into())
}
