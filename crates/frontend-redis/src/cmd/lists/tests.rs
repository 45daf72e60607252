//! The list commands' parsers, from raw request bytes, without a database.

use super::edit::LposOptions;
use super::parse::*;
use super::Side;
use crate::cmd::typed::testing::{command, error, parsed};
use crate::cmd::typed::DataCommand;

const SYNTAX: &str = "syntax error";
const NOT_INTEGER: &str = "value is not an integer or out of range";

fn debug(c: ListCommand<'_>) -> String {
    format!("{:?}", DataCommand::Lists(c))
}

#[test]
fn pushes() {
    for (bytes, side, only_existing) in [
        (&b"lpush l a b\r\n"[..], Side::Left, false),
        (b"RPUSH l a b\r\n", Side::Right, false),
        (b"lpushx l a b\r\n", Side::Left, true),
        (b"rpushx l a b\r\n", Side::Right, true),
    ] {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Lists(Push {
                key,
                values,
                side: s,
                only_existing: o,
            })) => {
                assert_eq!(key, b"l");
                assert_eq!(values.from(2).collect::<Vec<_>>(), [b"a", b"b"]);
                assert_eq!((s, o), (side, only_existing));
            }
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(
        error(b"lpush l\r\n"),
        "wrong number of arguments for 'lpush' command"
    );
}

#[test]
fn pops_and_their_count() {
    assert_eq!(
        command(b"lpop l\r\n"),
        debug(Pop {
            key: b"l",
            side: Side::Left,
            count: None
        })
    );
    assert_eq!(
        command(b"rpop l 0\r\n"),
        debug(Pop {
            key: b"l",
            side: Side::Right,
            count: Some(0)
        })
    );
    let positive = "value is out of range, must be positive";
    assert_eq!(error(b"lpop l -1\r\n"), positive);
    assert_eq!(error(b"lpop l x\r\n"), positive);
    assert_eq!(
        error(b"lpop l 1 2\r\n"),
        "wrong number of arguments for 'lpop' command"
    );
    assert_eq!(
        error(b"rpop l 1 2\r\n"),
        "wrong number of arguments for 'rpop' command"
    );
}

#[test]
fn moves() {
    assert_eq!(
        command(b"lmove a b LEFT right\r\n"),
        debug(LMove {
            src: b"a",
            dst: b"b",
            from: Side::Left,
            to: Side::Right
        })
    );
    assert_eq!(
        command(b"rpoplpush a b\r\n"),
        debug(LMove {
            src: b"a",
            dst: b"b",
            from: Side::Right,
            to: Side::Left
        })
    );
    assert_eq!(error(b"lmove a b up left\r\n"), SYNTAX);
    assert_eq!(error(b"lmove a b left down\r\n"), SYNTAX);
}

#[test]
fn lmpop_checks_in_redis_order() {
    parsed(b"lmpop 2 a b right count 3\r\n", |r| match r {
        Ok(DataCommand::Lists(LMPop(m))) => {
            assert_eq!(m.keys, 2..4);
            assert_eq!((m.side, m.count), (Side::Right, 3));
        }
        other => panic!("{other:?}"),
    });
    parsed(b"lmpop 1 a LEFT\r\n", |r| match r {
        Ok(DataCommand::Lists(LMPop(m))) => assert_eq!((m.keys, m.count), (2..3, 1)),
        other => panic!("{other:?}"),
    });
    let numkeys = "numkeys should be greater than 0";
    assert_eq!(error(b"lmpop 0 a left\r\n"), numkeys);
    assert_eq!(error(b"lmpop -1 a left\r\n"), numkeys);
    assert_eq!(error(b"lmpop x a left\r\n"), numkeys);
    // More keys than arguments, or no LEFT/RIGHT where it should be.
    assert_eq!(error(b"lmpop 3 a left\r\n"), SYNTAX);
    assert_eq!(error(b"lmpop 9223372036854775807 a left\r\n"), SYNTAX);
    assert_eq!(error(b"lmpop 1 a middle\r\n"), SYNTAX);
    let count = "count should be greater than 0";
    assert_eq!(error(b"lmpop 1 a left count 0\r\n"), count);
    assert_eq!(error(b"lmpop 1 a left count x\r\n"), count);
    assert_eq!(error(b"lmpop 1 a left count 1 count 2\r\n"), SYNTAX);
    assert_eq!(error(b"lmpop 1 a left count\r\n"), SYNTAX);
    assert_eq!(error(b"lmpop 1 a left foo\r\n"), SYNTAX);
    // BLMPOP shares the parser from its numkeys on.
    parsed(b"blmpop 0 1 a left\r\n", |r| assert!(r.is_ok()));
    let mpop = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Lists(Blocking {
                pop: BlockingPop::MPop(m),
                ..
            })) => (m.keys, m.side, m.count),
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(mpop(b"blmpop 0 2 a b right\r\n"), (3..5, Side::Right, 1));
    assert_eq!(
        mpop(b"blmpop 0 1 a left count 4\r\n"),
        (3..4, Side::Left, 4)
    );
    assert_eq!(
        error(b"blmpop 0 0 a right\r\n"),
        "numkeys should be greater than 0"
    );
    // numkeys, the side and COUNT are checked before the timeout (as redis-server 7.0.15
    // does: `lmpopGenericCommand` parses them first).
    assert_eq!(
        error(b"blmpop x 0 a right\r\n"),
        "numkeys should be greater than 0"
    );
    assert_eq!(
        error(b"blmpop x 1 a right\r\n"),
        "timeout is not a float or out of range"
    );
}

#[test]
fn positions_and_ranges() {
    assert_eq!(
        command(b"lrange l 0 -1\r\n"),
        debug(LRange {
            key: b"l",
            start: 0,
            end: -1
        })
    );
    assert_eq!(
        command(b"ltrim l -2 5\r\n"),
        debug(LTrim {
            key: b"l",
            start: -2,
            end: 5
        })
    );
    assert_eq!(error(b"lrange l a 1\r\n"), NOT_INTEGER);
    assert_eq!(error(b"lrange l 1 b\r\n"), NOT_INTEGER);
    assert_eq!(error(b"ltrim l 1.0 2\r\n"), NOT_INTEGER);
    // LINDEX and LSET look the key up before they refuse the index.
    assert_eq!(
        command(b"lindex l x\r\n"),
        debug(LIndex {
            key: b"l",
            index: None
        })
    );
    assert_eq!(
        command(b"lindex l -1\r\n"),
        debug(LIndex {
            key: b"l",
            index: Some(-1)
        })
    );
    assert_eq!(
        command(b"lset l x v\r\n"),
        debug(LSet {
            key: b"l",
            index: None,
            value: b"v"
        })
    );
    assert_eq!(
        command(b"lrem l -2 v\r\n"),
        debug(LRem {
            key: b"l",
            count: -2,
            value: b"v"
        })
    );
    assert_eq!(error(b"lrem l x v\r\n"), NOT_INTEGER);
}

#[test]
fn linsert_where() {
    assert_eq!(
        command(b"linsert l BEFORE p v\r\n"),
        debug(LInsert {
            key: b"l",
            after: false,
            pivot: b"p",
            value: b"v"
        })
    );
    assert!(command(b"linsert l after p v\r\n").contains("after: true"));
    assert_eq!(error(b"linsert l inside p v\r\n"), SYNTAX);
    assert_eq!(
        error(b"linsert l after p\r\n"),
        "wrong number of arguments for 'linsert' command"
    );
}

#[test]
fn lpos_options() {
    let o = |rank, count, maxlen| LposOptions {
        rank,
        count,
        maxlen,
    };
    let options = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Lists(LPos { options, .. })) => options,
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(options(b"lpos l e\r\n"), o(1, None, 0));
    assert_eq!(
        options(b"lpos l e RANK -2 COUNT 0 MAXLEN 10\r\n"),
        o(-2, Some(0), 10)
    );
    assert_eq!(options(b"lpos l e rank 1 rank 3\r\n"), o(3, None, 0));
    assert_eq!(
        error(b"lpos l e rank 0\r\n"),
        "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
    );
    assert_eq!(error(b"lpos l e rank x\r\n"), NOT_INTEGER);
    assert_eq!(error(b"lpos l e count -1\r\n"), "COUNT can't be negative");
    assert_eq!(error(b"lpos l e count x\r\n"), "COUNT can't be negative");
    assert_eq!(error(b"lpos l e maxlen -1\r\n"), "MAXLEN can't be negative");
    assert_eq!(error(b"lpos l e rank\r\n"), SYNTAX);
    assert_eq!(error(b"lpos l e foo 1\r\n"), SYNTAX);
    // Left to right: the first bad option is the one answered.
    assert_eq!(
        error(b"lpos l e count -1 rank 0\r\n"),
        "COUNT can't be negative"
    );
}

#[test]
fn blocking_pops() {
    let pop = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Lists(Blocking { pop, .. })) => format!("{pop:?}"),
            other => panic!("{other:?}"),
        })
    };
    assert!(pop(b"blpop a b 0\r\n").contains("keys: 1..3, side: Left"));
    assert!(pop(b"brpop a 0\r\n").contains("keys: 1..2, side: Right"));
    assert_eq!(
        pop(b"brpoplpush a b 0\r\n"),
        format!(
            "{:?}",
            BlockingPop::Move {
                src: b"a",
                dst: b"b",
                from: Side::Right,
                to: Side::Left
            }
        )
    );
    assert_eq!(
        pop(b"blmove a b right LEFT 0\r\n"),
        format!(
            "{:?}",
            BlockingPop::Move {
                src: b"a",
                dst: b"b",
                from: Side::Right,
                to: Side::Left
            }
        )
    );
    assert_eq!(error(b"blmove a b up left 0\r\n"), SYNTAX);
    // The timeout before the sides, as the door checks them.
    assert_eq!(
        error(b"blmove a b up left x\r\n"),
        "timeout is not a float or out of range"
    );
}

#[test]
fn blocking_commands_check_their_timeout() {
    for (bytes, waited) in [
        (&b"blpop a b 0\r\n"[..], Waited::NullArray),
        (b"brpop a 1.5\r\n", Waited::NullArray),
        (b"brpoplpush a b 0\r\n", Waited::Null),
        (b"blmove a b left right 0\r\n", Waited::Null),
        (b"blmpop 0 1 a left\r\n", Waited::NullArray),
    ] {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Lists(Blocking { waited: w, .. })) => assert_eq!(w, waited),
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(error(b"blpop a -1\r\n"), "timeout is negative");
    assert_eq!(
        error(b"blpop a x\r\n"),
        "timeout is not a float or out of range"
    );
    assert_eq!(
        error(b"blmpop x 1 a left\r\n"),
        "timeout is not a float or out of range"
    );
    assert_eq!(
        error(b"blpop a\r\n"),
        "wrong number of arguments for 'blpop' command"
    );
}
