//! Parse tests: requests in raw RESP bytes, through the command table and the parsers, as
//! the door reads them (no database).

use super::id::{self, StreamId};
use crate::cmd::typed::testing::{command, error};

/// A multibulk request of `args`.
fn req(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

const INVALID: &str = "Invalid stream ID specified as stream command argument";

#[test]
fn ids_parse_as_redis_parses_them() {
    let p = |s: &[u8]| id::parse(s, 0, true, true);
    assert_eq!(p(b"1-2"), Some((StreamId::new(1, 2), true)));
    assert_eq!(p(b"5"), Some((StreamId::new(5, 0), true)));
    assert_eq!(p(b"5-*"), Some((StreamId::new(5, 0), false)));
    assert_eq!(id::parse(b"5-*", 0, true, false), None);
    assert_eq!(p(b"-"), None);
    assert_eq!(p(b"+"), None);
    assert_eq!(
        id::parse(b"-", 0, false, false),
        Some((StreamId::ZERO, true))
    );
    assert_eq!(
        id::parse(b"+", 0, false, false),
        Some((StreamId::MAX, true))
    );
    assert_eq!(
        id::parse(b"7", u64::MAX, false, false),
        Some((StreamId::new(7, u64::MAX), true))
    );
    // strtoull's leniency, past the strict integers.
    assert_eq!(p(b" 9"), Some((StreamId::new(9, 0), true)));
    assert_eq!(p(b"+10-007"), Some((StreamId::new(10, 7), true)));
    assert_eq!(
        p(b"18446744073709551615-18446744073709551615"),
        Some((StreamId::MAX, true))
    );
    assert_eq!(p(b"18446744073709551616"), None);
    assert_eq!(p(b"-1"), None);
    assert_eq!(p(b"1--1"), None);
    assert_eq!(p(b"1-"), None);
    assert_eq!(p(b"a"), None);
    assert_eq!(p(b"1-2-3"), None);
    assert_eq!(p(&[b'1'; 128]), None);
    // A C string ends at its NUL.
    assert_eq!(p(b"3\x00junk"), Some((StreamId::new(3, 0), true)));
    assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
    assert_eq!(StreamId::MAX.next(), None);
    assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
    assert_eq!(StreamId::ZERO.prev(), None);
}

#[test]
fn xadd_options_and_errors() {
    let c = command(&req(&[b"XADD", b"s", b"*", b"f", b"v"]));
    assert!(c.contains("id: Auto") && c.contains("fields: 3"), "{c}");
    let c = command(&req(&[
        b"xadd",
        b"s",
        b"nomkstream",
        b"MAXLEN",
        b"~",
        b"5",
        b"1-*",
        b"f",
        b"v",
    ]));
    assert!(
        c.contains("nomkstream: true") && c.contains("MaxLen(5)") && c.contains("approx: true"),
        "{c}"
    );
    assert!(c.contains("limit: 10000") && c.contains("Ms(1)"), "{c}");
    let c = command(&req(&[
        b"XADD", b"s", b"MINID", b"=", b"3", b"4", b"f", b"v",
    ]));
    assert!(c.contains("MinId") && c.contains("approx: false"), "{c}");
    assert_eq!(
        error(&req(&[b"XADD", b"s", b"0-0", b"f", b"v"])),
        "The ID specified in XADD must be greater than 0-0"
    );
    assert_eq!(
        error(&req(&[b"XADD", b"s", b"0", b"f", b"v"])),
        "The ID specified in XADD must be greater than 0-0"
    );
    assert_eq!(error(&req(&[b"XADD", b"s", b"x", b"f", b"v"])), INVALID);
    assert_eq!(
        error(&req(&[b"XADD", b"s", b"1-1", b"f"])),
        "wrong number of arguments for 'xadd' command"
    );
    assert_eq!(
        error(&req(&[b"XADD", b"s", b"1-1", b"f", b"v", b"g"])),
        "wrong number of arguments for 'xadd' command"
    );
    assert_eq!(
        error(&req(&[b"XADD", b"s", b"MAXLEN", b"5"])),
        "wrong number of arguments for 'xadd' command"
    );
    assert_eq!(
        error(&req(&[b"XADD", b"s", b"MAXLEN", b"-1", b"*", b"f", b"v"])),
        "The MAXLEN argument must be >= 0."
    );
    assert_eq!(
        error(&req(&[
            b"XADD", b"s", b"MAXLEN", b"1", b"MINID", b"1", b"*", b"f"
        ])),
        "syntax error, MAXLEN and MINID options at the same time are not compatible"
    );
    assert_eq!(
        error(&req(&[
            b"XADD", b"s", b"MAXLEN", b"1", b"LIMIT", b"1", b"*", b"f", b"v"
        ])),
        "syntax error, LIMIT cannot be used without the special ~ option"
    );
    assert_eq!(
        error(&req(&[b"XADD", b"s", b"LIMIT", b"1", b"*", b"f", b"v"])),
        "syntax error, LIMIT cannot be used without specifying a trimming strategy"
    );
    assert_eq!(
        error(&req(&[b"XADD", b"s", b"LIMIT", b"-1", b"*", b"f", b"v"])),
        "The LIMIT argument must be >= 0."
    );
}

#[test]
fn xtrim_xrange_xread_xsetid() {
    assert_eq!(error(&req(&[b"XTRIM", b"s", b"FOO", b"1"])), "syntax error");
    assert_eq!(
        error(&req(&[b"XTRIM", b"s", b"LIMIT", b"0", b"x"])),
        "syntax error"
    );
    assert_eq!(
        error(&req(&[b"XTRIM", b"s", b"MAXLEN", b"x"])),
        "value is not an integer or out of range"
    );
    assert!(command(&req(&[b"XTRIM", b"s", b"MINID", b"~", b"9"])).contains("approx: true"));
    let c = command(&req(&[b"XRANGE", b"s", b"(1", b"(5", b"COUNT", b"-3"]));
    assert!(
        c.contains("start: StreamId { ms: 1, seq: 1 }")
            && c.contains("end: StreamId { ms: 5, seq: 18446744073709551614 }"),
        "{c}"
    );
    assert!(c.contains("count: Some(0)"), "{c}");
    let c = command(&req(&[b"XREVRANGE", b"s", b"+", b"-"]));
    assert!(c.contains("rev: true") && c.contains("count: None"), "{c}");
    assert_eq!(error(&req(&[b"XRANGE", b"s", b"(+", b"+"])), INVALID);
    assert_eq!(
        error(&req(&[
            b"XRANGE",
            b"s",
            b"(18446744073709551615-18446744073709551615",
            b"+"
        ])),
        "invalid start ID for the interval"
    );
    assert_eq!(
        error(&req(&[b"XRANGE", b"s", b"-", b"(0-0"])),
        "invalid end ID for the interval"
    );
    assert_eq!(
        error(&req(&[b"XRANGE", b"s", b"-", b"+", b"COUNT"])),
        "syntax error"
    );
    let c = command(&req(&[
        b"XREAD", b"COUNT", b"2", b"BLOCK", b"0", b"STREAMS", b"a", b"b", b"0", b"$",
    ]));
    assert!(
        c.contains("keys: 6..8") && c.contains("count: 2") && c.contains("block: Some(None)"),
        "{c}"
    );
    assert!(command(&req(&[b"XREAD", b"STREAMS", b"a", b"x"])).contains("block: None"));
    assert_eq!(
        error(&req(&[b"XREAD", b"STREAMS", b"a", b"b", b"0"])),
        "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
    );
    assert_eq!(
        error(&req(&[b"XREAD", b"BLOCK", b"-1", b"STREAMS", b"a", b"0"])),
        "timeout is negative"
    );
    assert_eq!(
        error(&req(&[b"XREAD", b"BLOCK", b"1.5", b"STREAMS", b"a", b"0"])),
        "timeout is not an integer or out of range"
    );
    assert_eq!(
        error(&req(&[b"XREAD", b"COUNT", b"1", b"FOO", b"x"])),
        "syntax error"
    );
    assert_eq!(
        error(&req(&[b"XREAD", b"COUNT", b"1", b"COUNT", b"2"])),
        "syntax error"
    );
    assert_eq!(
        error(&req(&[b"XREAD", b"NOACK", b"STREAMS", b"a", b"0"])),
        "The NOACK option is only supported by XREADGROUP. You called XREAD instead."
    );
    assert_eq!(error(&req(&[b"XSETID", b"s", b"-"])), INVALID);
    assert_eq!(
        error(&req(&[b"XSETID", b"s", b"1", b"ENTRIESADDED", b"-1"])),
        "entries_added must be positive"
    );
    assert_eq!(
        error(&req(&[b"XSETID", b"s", b"1", b"MAXDELETEDID", b"2"])),
        "The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
    );
    assert_eq!(
        error(&req(&[b"XSETID", b"s", b"1", b"ENTRIESADDED"])),
        "syntax error"
    );
    assert_eq!(
        error(&req(&[b"XLEN"])),
        "wrong number of arguments for 'xlen' command"
    );
}

#[test]
fn fields_round_trip_as_netstrings() {
    let pairs: [&[u8]; 4] = [b"f", b"", b"10:x,", b"\x00\r\n"];
    let blob = super::encode_fields(pairs.iter().copied());
    assert_eq!(blob, b"1:f,0:,5:10:x,,3:\x00\r\n,");
    assert_eq!(super::decode_fields(&blob), pairs.to_vec());
    assert_eq!(super::decode_fields(b"3:ab"), Vec::<&[u8]>::new());
}

#[test]
fn xgroup_xpending_xreadgroup_parse() {
    let c = command(&req(&[
        b"XGROUP",
        b"CREATE",
        b"s",
        b"g",
        b"$",
        b"MKSTREAM",
        b"ENTRIESREAD",
        b"-1",
    ]));
    assert!(
        c.contains("mkstream: true")
            && c.contains("entries_read: Some(-1)")
            && c.contains("argc_ok: true"),
        "{c}"
    );
    let c = command(&req(&[
        b"XGROUP",
        b"CREATE",
        b"s",
        b"g",
        b"0",
        b"MKSTREAM",
        b"ENTRIESREAD",
        b"1",
        b"MKSTREAM",
    ]));
    assert!(c.contains("argc_ok: false"), "{c}");
    assert_eq!(
        error(&req(&[b"XGROUP", b"FOO", b"s"])),
        "unknown subcommand 'FOO'. Try XGROUP HELP."
    );
    assert_eq!(
        error(&req(&[b"XGROUP", b"create", b"s"])),
        "wrong number of arguments for 'xgroup|create' command"
    );
    assert_eq!(
        error(&req(&[b"XGROUP", b"destroy", b"s", b"g", b"x"])),
        "wrong number of arguments for 'xgroup|destroy' command"
    );
    assert_eq!(
        error(&req(&[b"XGROUP", b"SetId", b"s", b"g", b"0", b"MKSTREAM"])),
        "unknown subcommand or wrong number of arguments for 'SetId'. Try XGROUP HELP."
    );
    assert_eq!(
        error(&req(&[
            b"XGROUP",
            b"CREATE",
            b"s",
            b"g",
            b"0",
            b"ENTRIESREAD",
            b"-2"
        ])),
        "value for ENTRIESREAD must be positive or -1"
    );
    assert!(command(&req(&[b"XGROUP", b"HELP"])).contains("Help"));
    let c = command(&req(&[
        b"XPENDING",
        b"s",
        b"g",
        b"IDLE",
        b"10",
        b"(1",
        b"+",
        b"5",
        b"alice",
    ]));
    assert!(
        c.contains("min_idle: 10")
            && c.contains("count: 5")
            && c.contains("start: StreamId { ms: 1, seq: 1 }"),
        "{c}"
    );
    assert!(command(&req(&[b"XPENDING", b"s", b"g"])).contains("range: None"));
    assert_eq!(
        error(&req(&[b"XPENDING", b"s", b"g", b"-"])),
        "syntax error"
    );
    assert_eq!(
        error(&req(&[b"XPENDING", b"s", b"g", b"IDLE", b"5", b"-", b"+"])),
        "syntax error"
    );
    assert_eq!(
        error(&req(&[b"XPENDING", b"s", b"g", b"-", b"+", b"x"])),
        "value is not an integer or out of range"
    );
    let c = command(&req(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"c",
        b"NOACK",
        b"COUNT",
        b"3",
        b"STREAMS",
        b"s",
        b">",
    ]));
    assert!(
        c.contains("noack: true") && c.contains("count: 3") && c.contains("group: Some"),
        "{c}"
    );
    assert_eq!(
        error(&req(&[
            b"XREADGROUP",
            b"COUNT",
            b"1",
            b"STREAMS",
            b"s",
            b"t",
            b">",
            b">"
        ])),
        "Missing GROUP option for XREADGROUP"
    );
    assert_eq!(
        error(&req(&[b"XACK", b"s", b"g"])),
        "wrong number of arguments for 'xack' command"
    );
}
