//! The key commands' arguments, parsed before they run ([`crate::cmd::typed`]): the
//! command table ([`COMMANDS`]) names each command's parser.

use crate::cmd::data::{Family, Spec};
use crate::cmd::rename::INT_RANGE;
use crate::cmd::scan::{parse_cursor, scan_options, ScanOptions, INVALID_CURSOR};
use crate::cmd::typed::{integer, DataCommand, Parse, ParseError, SYNTAX};
use crate::cmd::Args;
use crate::cmd::DATABASES;
use crate::errors;

const fn spec(name: &'static str, arity: i32, write: bool, parse: Parse) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Keys,
        parse,
    }
}

pub static COMMANDS: [Spec; 18] = [
    spec("del", -2, true, |a| Ok(Del { keys: a }.into())),
    spec("unlink", -2, true, |a| Ok(Del { keys: a }.into())),
    spec("exists", -2, false, |a| Ok(Exists { keys: a }.into())),
    spec("type", 2, false, |a| Ok(Type { key: a.get(1) }.into())),
    // `TOUCH` only counts: there is no access time to update.
    spec("touch", -2, false, |a| Ok(Exists { keys: a }.into())),
    spec("dbsize", 1, false, |_| Ok(DbSize.into())),
    spec("keys", 2, false, |a| Ok(Keys { pattern: a.get(1) }.into())),
    spec("scan", -2, false, parse_scan),
    spec("randomkey", 1, false, |_| Ok(RandomKey.into())),
    spec("rename", 3, true, |a| Ok(parse_rename(a, false))),
    spec("renamenx", 3, true, |a| Ok(parse_rename(a, true))),
    spec("copy", -3, true, parse_copy),
    spec("flushdb", -1, true, |a| parse_flush(a, false)),
    spec("flushall", -1, true, |a| parse_flush(a, true)),
    spec("move", 3, true, parse_move),
    spec("swapdb", 3, true, parse_swapdb),
    spec("dump", 2, false, |a| Ok(Dump { key: a.get(1) }.into())),
    spec("restore", -4, true, super::dump::parse_restore),
];

/// A key command, its arguments parsed. Lists of keys keep the whole request (`keys`: from
/// argument 1 on), read in place.
#[derive(Debug, PartialEq)]
pub enum KeyCommand<'a> {
    /// `DEL`, `UNLINK`: the count deleted.
    Del {
        keys: Args<'a>,
    },
    /// `EXISTS`, `TOUCH`: the count present.
    Exists {
        keys: Args<'a>,
    },
    Type {
        key: &'a [u8],
    },
    DbSize,
    Keys {
        pattern: &'a [u8],
    },
    /// `SCAN cursor [MATCH p] [COUNT n] [TYPE t]`.
    Scan {
        cursor: u64,
        options: ScanOptions<'a>,
    },
    RandomKey,
    /// `RENAME key newkey`, `RENAMENX` (`nx`).
    Rename {
        from: &'a [u8],
        to: &'a [u8],
        nx: bool,
    },
    /// `COPY source destination [DB n] [REPLACE]` (`db`: `None` for the client's).
    Copy {
        from: &'a [u8],
        to: &'a [u8],
        db: Option<u8>,
        replace: bool,
    },
    /// `MOVE key db`.
    Move {
        key: &'a [u8],
        db: u8,
    },
    /// `SWAPDB index1 index2`.
    SwapDb {
        a: u8,
        b: u8,
    },
    /// `FLUSHDB [ASYNC|SYNC]`, `FLUSHALL` (`all`); both modes do the same.
    Flush {
        all: bool,
    },
    /// `DUMP key`.
    Dump {
        key: &'a [u8],
    },
    /// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]`.
    Restore(super::dump::Restore<'a>),
    /// `SORT`, `SORT_RO` ([`super::sort`]).
    Sort(super::sort::Sort<'a>),
}

pub use KeyCommand::{
    Copy, DbSize, Del, Dump, Exists, Flush, Keys, Move, RandomKey, Rename, Restore, Scan, SwapDb,
    Type,
};

impl<'a> From<KeyCommand<'a>> for DataCommand<'a> {
    fn from(c: KeyCommand<'a>) -> Self {
        DataCommand::Keys(c)
    }
}

/// `SCAN`: the cursor, then the options (Redis's order; both before any key is read).
fn parse_scan(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let cursor = parse_cursor(args.get(1)).ok_or(ParseError::Text(INVALID_CURSOR))?;
    let options = scan_options(&args, 2, true).map_err(ParseError::Text)?;
    Ok(Scan { cursor, options }.into())
}

fn parse_rename(args: Args<'_>, nx: bool) -> DataCommand<'_> {
    Rename {
        from: args.get(1),
        to: args.get(2),
        nx,
    }
    .into()
}

/// A database number argument: an integer (`NOT_INTEGER`), within C's `int`
/// ([`INT_RANGE`]), then one of the door's databases, as `getIntFromObjectOrReply` and
/// `selectDb` check it.
fn database(arg: &[u8]) -> Result<u8, ParseError> {
    let n = integer(arg)?;
    let n = i32::try_from(n).map_err(|_| ParseError::Text(INT_RANGE))?;
    if !(0..DATABASES).contains(&i64::from(n)) {
        return Err(ParseError::Text(errors::DB_OUT_OF_RANGE));
    }
    u8::try_from(n).map_err(|_| ParseError::Text(errors::DB_OUT_OF_RANGE))
}

/// `MOVE key db`: the database is checked before the key is read (the same-database check
/// needs the client's and is made when it runs).
fn parse_move(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    Ok(Move {
        key: args.get(1),
        db: database(args.get(2))?,
    }
    .into())
}

/// `SWAPDB index1 index2`, as Redis checks them: each an integer within C's `int` (else
/// its own text), then both databases the door has.
fn parse_swapdb(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let index = |arg: &[u8], text: &'static [u8]| {
        crate::cmd::parse_i64(arg)
            .and_then(|n| i32::try_from(n).ok())
            .ok_or(ParseError::Text(text))
    };
    let a = index(args.get(1), b"invalid first DB index")?;
    let b = index(args.get(2), b"invalid second DB index")?;
    let db = |n: i32| {
        u8::try_from(n)
            .ok()
            .filter(|&d| i64::from(d) < DATABASES)
            .ok_or(ParseError::Text(errors::DB_OUT_OF_RANGE))
    };
    Ok(SwapDb {
        a: db(a)?,
        b: db(b)?,
    }
    .into())
}

/// `COPY`'s options (`DB n`, `REPLACE`) in Redis's order of checks.
fn parse_copy(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let (mut db, mut replace) = (None, false);
    let mut i = 3;
    while i < args.len() {
        let a = args.get(i);
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"db") && i + 1 < args.len() {
            db = Some(database(args.get(i + 1))?);
            i += 1;
        } else {
            return Err(SYNTAX);
        }
        i += 1;
    }
    Ok(Copy {
        from: args.get(1),
        to: args.get(2),
        db,
        replace,
    }
    .into())
}

fn parse_flush(args: Args<'_>, all: bool) -> Result<DataCommand<'_>, ParseError> {
    let mode_ok = match args.len() {
        1 => true,
        2 => {
            let m = args.get(1);
            m.eq_ignore_ascii_case(b"sync") || m.eq_ignore_ascii_case(b"async")
        }
        _ => false,
    };
    if !mode_ok {
        return Err(SYNTAX);
    }
    Ok(Flush { all }.into())
}
