//! `XGROUP` and `XPENDING`'s arguments (Redis's `xgroupCommand`, `xpendingCommand`): what
//! Redis checks before it looks the key up.

use super::super::id::StreamId;
use super::super::parse::{interval, StreamCommand, BAD_END, BAD_START};
use crate::cmd::typed::{integer, DataCommand, ParseError, SYNTAX};
use crate::cmd::Args;

/// An `XGROUP` subcommand.
#[derive(Debug, PartialEq)]
pub enum GroupOp<'a> {
    /// `CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]` and `SETID key group id|$
    /// [ENTRIESREAD n]`: `id` checked after the key and group; `argc_ok` is Redis's count
    /// check, made after them too.
    Create {
        key: &'a [u8],
        group: &'a [u8],
        id: &'a [u8],
        mkstream: bool,
        entries_read: Option<i64>,
        argc_ok: bool,
        /// The subcommand as the client wrote it (for the late error's text).
        sub: &'a [u8],
    },
    SetId {
        key: &'a [u8],
        group: &'a [u8],
        id: &'a [u8],
        entries_read: Option<i64>,
        argc_ok: bool,
        sub: &'a [u8],
    },
    Destroy {
        key: &'a [u8],
        group: &'a [u8],
    },
    CreateConsumer {
        key: &'a [u8],
        group: &'a [u8],
        consumer: &'a [u8],
    },
    DelConsumer {
        key: &'a [u8],
        group: &'a [u8],
        consumer: &'a [u8],
    },
    Help,
}

/// `XPENDING`'s extended form.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRange<'a> {
    pub start: StreamId,
    pub end: StreamId,
    pub count: u64,
    pub min_idle: i64,
    pub consumer: Option<&'a [u8]>,
}

const ENTRIES_READ_RANGE: &[u8] = b"value for ENTRIESREAD must be positive or -1";

/// `unknown subcommand or wrong number of arguments for '<sub>'. Try XGROUP HELP.`
pub fn subcommand_error(sub: &[u8]) -> Vec<u8> {
    let mut t = b"unknown subcommand or wrong number of arguments for '".to_vec();
    t.extend_from_slice(sub);
    t.extend_from_slice(b"'. Try XGROUP HELP.");
    t
}

pub fn xgroup(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let sub = args.get(1);
    let n = args.len();
    let lower = sub.to_ascii_lowercase();
    let (name, arity): (&'static str, i32) = match lower.as_slice() {
        b"create" => ("xgroup|create", -5),
        b"setid" => ("xgroup|setid", -5),
        b"destroy" => ("xgroup|destroy", 4),
        b"createconsumer" => ("xgroup|createconsumer", 5),
        b"delconsumer" => ("xgroup|delconsumer", 5),
        b"help" => ("xgroup|help", 2),
        _ => {
            let mut t = b"unknown subcommand '".to_vec();
            t.extend(
                sub.iter()
                    .take(128)
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
            t.extend_from_slice(b"'. Try XGROUP HELP.");
            return Err(ParseError::Formatted(t));
        }
    };
    let ok = if arity > 0 {
        n == arity as usize
    } else {
        n >= arity.unsigned_abs() as usize
    };
    if !ok {
        return Err(ParseError::Arity(name));
    }
    let op = match lower.as_slice() {
        b"help" => GroupOp::Help,
        b"create" | b"setid" => {
            let create = lower == b"create";
            let mut mkstream = false;
            let mut entries_read = None;
            let mut i = 5;
            while i < n {
                let a = args.get(i);
                if create && a.eq_ignore_ascii_case(b"mkstream") {
                    mkstream = true;
                    i += 1;
                } else if a.eq_ignore_ascii_case(b"entriesread") && i + 1 < n {
                    let v = integer(args.get(i + 1))?;
                    if v < 0 && v != -1 {
                        return Err(ParseError::Text(ENTRIES_READ_RANGE));
                    }
                    entries_read = Some(v);
                    i += 2;
                } else {
                    return Err(ParseError::Formatted(subcommand_error(sub)));
                }
            }
            let (key, group, id) = (args.get(2), args.get(3), args.get(4));
            if create {
                GroupOp::Create {
                    key,
                    group,
                    id,
                    mkstream,
                    entries_read,
                    argc_ok: (5..=8).contains(&n),
                    sub,
                }
            } else {
                GroupOp::SetId {
                    key,
                    group,
                    id,
                    entries_read,
                    argc_ok: n == 5 || n == 7,
                    sub,
                }
            }
        }
        b"destroy" => GroupOp::Destroy {
            key: args.get(2),
            group: args.get(3),
        },
        b"createconsumer" => GroupOp::CreateConsumer {
            key: args.get(2),
            group: args.get(3),
            consumer: args.get(4),
        },
        _ => GroupOp::DelConsumer {
            key: args.get(2),
            group: args.get(3),
            consumer: args.get(4),
        },
    };
    Ok(StreamCommand::XGroup(op).into())
}

pub fn xpending(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let n = args.len();
    if n != 3 && !(6..=9).contains(&n) {
        return Err(SYNTAX);
    }
    let mut range = None;
    if n >= 6 {
        let mut at = 3;
        let mut min_idle = 0;
        if args.get(3).eq_ignore_ascii_case(b"idle") {
            min_idle = integer(args.get(4))?;
            if n < 8 {
                return Err(SYNTAX);
            }
            at += 2;
        }
        let count = integer(args.get(at + 2))?.max(0) as u64;
        let (mut start, ex) = interval(args.get(at), 0)?;
        if ex {
            start = start.next().ok_or(ParseError::Text(BAD_START))?;
        }
        let (mut end, ex) = interval(args.get(at + 1), u64::MAX)?;
        if ex {
            end = end.prev().ok_or(ParseError::Text(BAD_END))?;
        }
        range = Some(PendingRange {
            start,
            end,
            count,
            min_idle,
            consumer: (at + 3 < n).then(|| args.get(at + 3)),
        });
    }
    Ok(StreamCommand::XPending {
        key: args.get(1),
        group: args.get(2),
        range,
    }
    .into())
}
