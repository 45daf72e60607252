//! The stream commands' arguments, parsed before they run ([`crate::cmd::typed`]): the
//! command table ([`COMMANDS`]) names each command's parser. Checks Redis makes only after
//! looking the key up (`XDEL`'s IDs, `XREAD`'s IDs key by key) stay in the commands, which
//! parse those arguments with [`strict_id`] there.

use std::time::Duration;

use super::id::{self, StreamId};
use crate::cmd::data::{Family, Spec};
use crate::cmd::typed::{integer, DataCommand, Parse, ParseError, SYNTAX};
use crate::cmd::Args;

const fn spec(name: &'static str, arity: i32, write: bool, parse: Parse) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Streams,
        parse,
    }
}

pub static COMMANDS: [Spec; 15] = [
    spec("xadd", -5, true, parse_xadd),
    spec("xlen", 2, false, |a| Ok(XLen { key: a.get(1) }.into())),
    spec("xrange", -4, false, |a| parse_xrange(a, false)),
    spec("xrevrange", -4, false, |a| parse_xrange(a, true)),
    spec("xdel", -3, true, |a| {
        Ok(XDel {
            key: a.get(1),
            args: a,
        }
        .into())
    }),
    spec("xtrim", -4, true, parse_xtrim),
    spec("xread", -4, false, parse_xread),
    spec("xsetid", -3, true, parse_xsetid),
    spec("xgroup", -2, true, super::groups::parse::xgroup),
    spec("xreadgroup", -7, true, parse_xread),
    spec("xack", -4, true, |a| {
        Ok(XAck {
            key: a.get(1),
            group: a.get(2),
            args: a,
        }
        .into())
    }),
    spec("xpending", -3, false, super::groups::parse::xpending),
    spec("xclaim", -6, true, |a| Ok(XClaim { args: a }.into())),
    spec(
        "xautoclaim",
        -6,
        true,
        |a| Ok(XAutoClaim { args: a }.into()),
    ),
    spec("xinfo", -2, false, |a| {
        super::groups::info_parse(&a)?;
        Ok(XInfo { args: a }.into())
    }),
];

/// Redis's texts (`src/t_stream.c`).
pub const INVALID_ID: &[u8] = b"Invalid stream ID specified as stream command argument";
pub const ID_TOO_SMALL: &[u8] =
    b"The ID specified in XADD is equal or smaller than the target stream top item";
pub const ID_ZERO: &[u8] = b"The ID specified in XADD must be greater than 0-0";
pub const EXHAUSTED: &[u8] =
    b"The stream has exhausted the last possible ID, unable to add more items";
const MAXLEN_AND_MINID: &[u8] =
    b"syntax error, MAXLEN and MINID options at the same time are not compatible";
const MAXLEN_NEGATIVE: &[u8] = b"The MAXLEN argument must be >= 0.";
const LIMIT_NEGATIVE: &[u8] = b"The LIMIT argument must be >= 0.";
const LIMIT_NO_STRATEGY: &[u8] =
    b"syntax error, LIMIT cannot be used without specifying a trimming strategy";
const XTRIM_NO_STRATEGY: &[u8] = b"syntax error, XTRIM must be called with a trimming strategy";
const LIMIT_NOT_APPROX: &[u8] = b"syntax error, LIMIT cannot be used without the special ~ option";
pub const BAD_START: &[u8] = b"invalid start ID for the interval";
pub const BAD_END: &[u8] = b"invalid end ID for the interval";
/// (The same text for `XREADGROUP` in Redis 7.0.15.)
const UNBALANCED_XREAD: &[u8] =
    b"Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.";
const MISSING_GROUP: &[u8] = b"Missing GROUP option for XREADGROUP";
const GROUP_ONLY_XREADGROUP: &[u8] =
    b"The GROUP option is only supported by XREADGROUP. You called XREAD instead.";
const NOACK_ONLY_XREADGROUP: &[u8] =
    b"The NOACK option is only supported by XREADGROUP. You called XREAD instead.";
pub const GT_ONLY_XREADGROUP: &[u8] = b"The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.";
const TIMEOUT_NOT_INTEGER: &[u8] = b"timeout is not an integer or out of range";
const TIMEOUT_NEGATIVE: &[u8] = b"timeout is negative";
const TIMEOUT_RANGE: &[u8] = b"timeout is out of range";
const ENTRIES_ADDED_NEGATIVE: &[u8] = b"entries_added must be positive";
pub const SETID_BELOW_MAXDEL_ARG: &[u8] =
    b"The ID specified in XSETID is smaller than the provided max_deleted_entry_id";

/// `LIMIT`'s default with `~` (Redis: 100 times `stream-node-max-entries`, 100).
pub const APPROX_LIMIT: u64 = 10_000;

/// A stream command, its arguments parsed. Lists of IDs keep the whole request (`args`).
#[derive(Debug, PartialEq)]
pub enum StreamCommand<'a> {
    XAdd {
        key: &'a [u8],
        nomkstream: bool,
        trim: Option<Trim>,
        id: AddId,
        /// The request; the field/value pairs from `fields` on.
        args: Args<'a>,
        fields: usize,
    },
    XLen {
        key: &'a [u8],
    },
    /// `XRANGE`/`XREVRANGE`: entries from `start` to `end` (both included, `start <= end`
    /// in the ID order whatever the direction); `count` `None` is no limit, `Some(0)` the
    /// null array.
    XRange {
        key: &'a [u8],
        start: StreamId,
        end: StreamId,
        count: Option<u64>,
        rev: bool,
    },
    /// `XDEL key id...`: the IDs are checked after the key (as Redis does).
    XDel {
        key: &'a [u8],
        args: Args<'a>,
    },
    XTrim {
        key: &'a [u8],
        trim: Trim,
    },
    /// `XREAD [COUNT n] [BLOCK ms] STREAMS key... id...`: `keys` then as many IDs, checked
    /// key by key while reading (as Redis does); `count` 0 is no limit; `block` `None`
    /// without `BLOCK`, `Some(None)` to wait forever.
    XRead {
        args: Args<'a>,
        keys: std::ops::Range<usize>,
        count: u64,
        block: Option<Option<Duration>>,
        /// `XREADGROUP GROUP group consumer`.
        group: Option<(&'a [u8], &'a [u8])>,
        noack: bool,
    },
    XGroup(super::groups::parse::GroupOp<'a>),
    /// `XACK key group id...` (the IDs checked once the group is found).
    XAck {
        key: &'a [u8],
        group: &'a [u8],
        args: Args<'a>,
    },
    /// `XCLAIM`: every argument checked after the key and group (as Redis does).
    XClaim {
        args: Args<'a>,
    },
    /// `XAUTOCLAIM`: its arguments checked before the key (as Redis does), by the command.
    XAutoClaim {
        args: Args<'a>,
    },
    /// `XINFO`: the subcommand and its count checked.
    XInfo {
        args: Args<'a>,
    },
    XPending {
        key: &'a [u8],
        group: &'a [u8],
        range: Option<super::groups::parse::PendingRange<'a>>,
    },
    XSetId {
        key: &'a [u8],
        last: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    },
}

pub use StreamCommand::{
    XAck, XAdd, XAutoClaim, XClaim, XDel, XGroup, XInfo, XLen, XPending, XRange, XRead, XSetId,
    XTrim,
};

impl<'a> From<StreamCommand<'a>> for DataCommand<'a> {
    fn from(c: StreamCommand<'a>) -> Self {
        DataCommand::Streams(c)
    }
}

/// The ID `XADD` was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddId {
    /// `*`.
    Auto,
    /// `ms-seq`, or `ms` (sequence 0).
    Explicit(StreamId),
    /// `ms-*`: the next sequence of that millisecond.
    Ms(u64),
}

/// A trimming strategy (`MAXLEN`/`MINID`, `=` or `~`, `LIMIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trim {
    pub by: TrimBy,
    /// `~`: Redis may trim less; here it trims as `=` does, at most `limit` entries.
    pub approx: bool,
    /// Most entries removed (0: no limit).
    pub limit: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimBy {
    MaxLen(u64),
    MinId(StreamId),
}

/// A strict ID argument (`-` and `+` refused), `ms` alone meaning `ms-0`.
pub fn strict_id(arg: &[u8]) -> Result<StreamId, ParseError> {
    match id::parse(arg, 0, true, false) {
        Some((id, _)) => Ok(id),
        None => Err(ParseError::Text(INVALID_ID)),
    }
}

/// `XADD`/`XTRIM`'s options (Redis's `streamParseAddOrTrimArgsOrReply`): the trimming
/// strategy and, for `XADD`, `NOMKSTREAM` and where the ID is.
struct AddOrTrim {
    trim: Option<Trim>,
    nomkstream: bool,
    /// `XADD`: the ID and its argument's index.
    id: Option<(AddId, usize)>,
}

fn add_or_trim(args: &Args<'_>, xadd: bool) -> Result<AddOrTrim, ParseError> {
    let mut by: Option<TrimBy> = None;
    let mut approx = false;
    let mut limit: Option<u64> = None;
    let mut nomkstream = false;
    let mut id = None;
    let mut i = 2;
    let n = args.len();
    while i < n {
        let more = n - 1 - i;
        let opt = args.get(i);
        if xadd && opt == b"*" {
            id = Some((AddId::Auto, i));
            break;
        } else if (opt.eq_ignore_ascii_case(b"maxlen") || opt.eq_ignore_ascii_case(b"minid"))
            && more > 0
        {
            if by.is_some() {
                return Err(ParseError::Text(MAXLEN_AND_MINID));
            }
            approx = false;
            let next = args.get(i + 1);
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let arg = args.get(i + 1);
            by = Some(if opt.eq_ignore_ascii_case(b"maxlen") {
                let max = integer(arg)?;
                if max < 0 {
                    return Err(ParseError::Text(MAXLEN_NEGATIVE));
                }
                TrimBy::MaxLen(max as u64)
            } else {
                TrimBy::MinId(strict_id(arg)?)
            });
            i += 1;
        } else if opt.eq_ignore_ascii_case(b"limit") && more > 0 {
            let l = integer(args.get(i + 1))?;
            if l < 0 {
                return Err(ParseError::Text(LIMIT_NEGATIVE));
            }
            limit = Some(l as u64);
            i += 1;
        } else if xadd && opt.eq_ignore_ascii_case(b"nomkstream") {
            nomkstream = true;
        } else if xadd {
            let Some((parsed, seq_given)) = id::parse(opt, 0, true, true) else {
                return Err(ParseError::Text(INVALID_ID));
            };
            let add = if seq_given {
                AddId::Explicit(parsed)
            } else {
                AddId::Ms(parsed.ms)
            };
            id = Some((add, i));
            break;
        } else {
            return Err(SYNTAX);
        }
        i += 1;
    }
    if limit.is_some_and(|l| l > 0) && by.is_none() {
        return Err(ParseError::Text(LIMIT_NO_STRATEGY));
    }
    if !xadd && by.is_none() {
        return Err(ParseError::Text(XTRIM_NO_STRATEGY));
    }
    let limit_given = limit.is_some();
    let limit = match limit {
        Some(l) => l,
        None if approx => APPROX_LIMIT,
        None => 0,
    };
    if limit_given && !approx {
        return Err(ParseError::Text(LIMIT_NOT_APPROX));
    }
    Ok(AddOrTrim {
        trim: by.map(|by| Trim { by, approx, limit }),
        nomkstream,
        id,
    })
}

fn parse_xadd(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let parsed = add_or_trim(&args, true)?;
    // Options only, no ID: the pairs are missing (Redis's arity error).
    let Some((id, at)) = parsed.id else {
        return Err(ParseError::Arity("xadd"));
    };
    let fields = at + 1;
    let pairs = args.len() - fields;
    if pairs < 2 || pairs % 2 == 1 {
        return Err(ParseError::Arity("xadd"));
    }
    if id == AddId::Explicit(StreamId::ZERO) {
        return Err(ParseError::Text(ID_ZERO));
    }
    Ok(XAdd {
        key: args.get(1),
        nomkstream: parsed.nomkstream,
        trim: parsed.trim,
        id,
        args,
        fields,
    }
    .into())
}

fn parse_xtrim(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let parsed = add_or_trim(&args, false)?;
    let trim = parsed.trim.ok_or(ParseError::Text(XTRIM_NO_STRATEGY))?;
    Ok(XTrim {
        key: args.get(1),
        trim,
    }
    .into())
}

/// An interval bound (Redis's `streamParseIntervalIDOrReply`): `(` excludes (strict ID
/// after it), else `-`, `+` or an ID whose missing sequence is `missing_seq`.
pub fn interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), ParseError> {
    let exclude = arg.len() > 1 && arg[0] == b'(';
    let parsed = if exclude {
        id::parse(&arg[1..], missing_seq, true, false)
    } else {
        id::parse(arg, missing_seq, false, false)
    };
    match parsed {
        Some((id, _)) => Ok((id, exclude)),
        None => Err(ParseError::Text(INVALID_ID)),
    }
}

fn parse_xrange(args: Args<'_>, rev: bool) -> Result<DataCommand<'_>, ParseError> {
    let (start_arg, end_arg) = if rev {
        (args.get(3), args.get(2))
    } else {
        (args.get(2), args.get(3))
    };
    let (mut start, ex) = interval(start_arg, 0)?;
    if ex {
        start = start.next().ok_or(ParseError::Text(BAD_START))?;
    }
    let (mut end, ex) = interval(end_arg, u64::MAX)?;
    if ex {
        end = end.prev().ok_or(ParseError::Text(BAD_END))?;
    }
    let mut count = None;
    let mut j = 4;
    while j < args.len() {
        if args.get(j).eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            count = Some(integer(args.get(j + 1))?.max(0) as u64);
            j += 2;
        } else {
            return Err(SYNTAX);
        }
    }
    Ok(XRange {
        key: args.get(1),
        start,
        end,
        count,
        rev,
    }
    .into())
}

/// `BLOCK`'s milliseconds (Redis's `getTimeoutFromObjectOrReply` in milliseconds): `None`
/// to wait forever.
fn block_timeout(arg: &[u8]) -> Result<Option<Duration>, ParseError> {
    let ms = crate::cmd::parse_i64(arg).ok_or(ParseError::Text(TIMEOUT_NOT_INTEGER))?;
    match ms {
        ..0 => Err(ParseError::Text(TIMEOUT_NEGATIVE)),
        0 => Ok(None),
        ms if ms > i64::MAX - crate::store::now_ms() => Err(ParseError::Text(TIMEOUT_RANGE)),
        ms => Ok(Some(Duration::from_millis(ms as u64))),
    }
}

/// `XREAD` and `XREADGROUP` (Redis's `xreadCommand`).
fn parse_xread(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let xreadgroup = args.get(0).eq_ignore_ascii_case(b"xreadgroup");
    let mut group = None;
    let mut noack = false;
    let mut count = 0u64;
    let mut block = None;
    let mut streams = None;
    let n = args.len();
    let mut i = 1;
    while i < n {
        let more = n - i - 1;
        let o = args.get(i);
        if o.eq_ignore_ascii_case(b"block") && more > 0 {
            i += 1;
            block = Some(block_timeout(args.get(i))?);
        } else if o.eq_ignore_ascii_case(b"count") && more > 0 {
            i += 1;
            count = integer(args.get(i))?.max(0) as u64;
        } else if o.eq_ignore_ascii_case(b"streams") && more > 0 {
            let first = i + 1;
            let rest = n - first;
            if !rest.is_multiple_of(2) {
                return Err(ParseError::Text(UNBALANCED_XREAD));
            }
            streams = Some(first..first + rest / 2);
            break;
        } else if o.eq_ignore_ascii_case(b"group") && more >= 2 {
            if !xreadgroup {
                return Err(ParseError::Text(GROUP_ONLY_XREADGROUP));
            }
            group = Some((args.get(i + 1), args.get(i + 2)));
            i += 2;
        } else if o.eq_ignore_ascii_case(b"noack") {
            if !xreadgroup {
                return Err(ParseError::Text(NOACK_ONLY_XREADGROUP));
            }
            noack = true;
        } else {
            return Err(SYNTAX);
        }
        i += 1;
    }
    let keys = streams.ok_or(SYNTAX)?;
    if xreadgroup && group.is_none() {
        return Err(ParseError::Text(MISSING_GROUP));
    }
    Ok(XRead {
        args,
        keys,
        count,
        block,
        group,
        noack,
    }
    .into())
}

fn parse_xsetid(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let last = strict_id(args.get(2))?;
    let mut entries_added = None;
    let mut max_deleted = None;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args.get(i);
        if opt.eq_ignore_ascii_case(b"entriesadded") && more > 0 {
            let n = integer(args.get(i + 1))?;
            if n < 0 {
                return Err(ParseError::Text(ENTRIES_ADDED_NEGATIVE));
            }
            entries_added = Some(n as u64);
        } else if opt.eq_ignore_ascii_case(b"maxdeletedid") && more > 0 {
            let m = strict_id(args.get(i + 1))?;
            if last < m {
                return Err(ParseError::Text(SETID_BELOW_MAXDEL_ARG));
            }
            max_deleted = Some(m);
        } else {
            return Err(SYNTAX);
        }
        i += 2;
    }
    Ok(XSetId {
        key: args.get(1),
        last,
        entries_added,
        max_deleted,
    }
    .into())
}
