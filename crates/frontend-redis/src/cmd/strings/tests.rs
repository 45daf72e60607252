//! The string commands' parsers, from raw request bytes, without a database: the forms
//! they take and Redis 7.0's error texts for the ones they refuse.

use super::parse::*;
use super::Unit;
use crate::cmd::typed::testing::{command, error, parsed};
use crate::cmd::typed::DataCommand;

const SYNTAX: &str = "syntax error";
const NOT_INTEGER: &str = "value is not an integer or out of range";

/// The `SET` a request parses to (panics for anything else).
fn set(bytes: &[u8], check: impl FnOnce(&Set<'_>)) {
    parsed(bytes, |r| match r {
        Ok(DataCommand::Strings(StringCommand::Set(s))) => check(&s),
        other => panic!("not a SET: {other:?}"),
    });
}

#[test]
fn set_plain_and_options() {
    set(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", |s| {
        assert_eq!((s.key, s.value), (&b"k"[..], &b"v"[..]));
        assert!(s.is_plain());
    });
    set(b"set k v nx\r\n", |s| {
        assert_eq!(s.cond, Some(Cond::Nx));
        assert!(!s.is_plain());
    });
    set(b"set k v XX GET\r\n", |s| {
        assert_eq!(s.cond, Some(Cond::Xx));
        assert!(s.get);
    });
    set(b"set k v get\r\n", |s| assert!(s.get && s.cond.is_none()));
    set(b"set k v keepttl\r\n", |s| {
        assert!(s.keep_ttl && s.expiry.is_none());
    });
    set(b"set k v ex 10\r\n", |s| {
        let e = s.expiry.unwrap();
        assert_eq!((e.unit, e.ms), (Unit::Ex, 10_000));
        assert_eq!(e.at(5), Ok(10_005));
    });
    set(b"set k v px 10\r\n", |s| {
        assert_eq!(s.expiry.map(|e| (e.unit, e.ms)), Some((Unit::Px, 10)));
    });
    set(b"set k v exat 7\r\n", |s| {
        let e = s.expiry.unwrap();
        assert_eq!(
            (e.unit, e.ms, e.at(1_000_000)),
            (Unit::ExAt, 7000, Ok(7000))
        );
    });
    set(b"set k v pxat 7\r\n", |s| {
        assert_eq!(s.expiry.unwrap().at(1_000_000), Ok(7));
    });
    // A repeated expiry of one unit: the last wins, as in Redis.
    set(b"set k v ex 1 ex 2\r\n", |s| {
        assert_eq!(s.expiry.unwrap().ms, 2000);
    });
    // NX twice is taken; options in any order and case.
    set(b"set k v nx NX get Ex 3\r\n", |s| {
        assert!(s.get && s.cond == Some(Cond::Nx) && s.expiry.is_some());
    });
    // The value may look like an option.
    set(b"set k nx\r\n", |s| {
        assert!(s.value == b"nx" && s.is_plain());
    });
}

#[test]
fn set_refusals() {
    assert_eq!(error(b"set k v nx xx\r\n"), SYNTAX);
    assert_eq!(error(b"set k v xx nx\r\n"), SYNTAX);
    assert_eq!(error(b"set k v ex 1 px 1\r\n"), SYNTAX);
    assert_eq!(error(b"set k v ex 1 keepttl\r\n"), SYNTAX);
    assert_eq!(error(b"set k v keepttl ex 1\r\n"), SYNTAX);
    assert_eq!(error(b"set k v persist\r\n"), SYNTAX);
    assert_eq!(error(b"set k v ex\r\n"), SYNTAX);
    assert_eq!(error(b"set k v foo\r\n"), SYNTAX);
    assert_eq!(error(b"set k v ex abc\r\n"), NOT_INTEGER);
    assert_eq!(error(b"set k v ex 1.5\r\n"), NOT_INTEGER);
    assert_eq!(error(b"set k v ex 01\r\n"), NOT_INTEGER);
    let invalid = "invalid expire time in 'set' command";
    assert_eq!(error(b"set k v ex 0\r\n"), invalid);
    assert_eq!(error(b"set k v px -1\r\n"), invalid);
    assert_eq!(error(b"set k v exat 9223372036854776\r\n"), invalid);
    // Syntax is checked before the number.
    assert_eq!(error(b"set k v ex abc nx xx\r\n"), SYNTAX);
    assert_eq!(
        error(b"set k\r\n"),
        "wrong number of arguments for 'set' command"
    );
}

#[test]
fn expiry_overflow_once_the_clock_is_added() {
    set(b"set k v px 9223372036854775807\r\n", |s| {
        let e = s.expiry.unwrap();
        assert_eq!(e.at(0), Ok(i64::MAX));
        assert_eq!(
            e.at(1).unwrap_err().text(),
            b"invalid expire time in 'set' command"
        );
    });
    set(b"set k v ex 9223372036854775\r\n", |s| {
        assert_eq!(s.expiry.unwrap().ms, 9_223_372_036_854_775_000);
    });
}

#[test]
fn setex_and_psetex() {
    assert_eq!(
        command(b"setex k 5 v\r\n"),
        format!(
            "{:?}",
            DataCommand::Strings(SetEx {
                key: b"k",
                expiry: Expiry::parse(b"5", Unit::Ex, b"invalid expire time in 'setex' command")
                    .unwrap(),
                value: b"v"
            })
        )
    );
    assert_eq!(
        error(b"setex k 0 v\r\n"),
        "invalid expire time in 'setex' command"
    );
    assert_eq!(
        error(b"setex k -3 v\r\n"),
        "invalid expire time in 'setex' command"
    );
    assert_eq!(
        error(b"psetex k 0 v\r\n"),
        "invalid expire time in 'psetex' command"
    );
    assert_eq!(error(b"setex k x v\r\n"), NOT_INTEGER);
    assert_eq!(error(b"psetex k 1e3 v\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"setex k 1\r\n"),
        "wrong number of arguments for 'setex' command"
    );
}

#[test]
fn getex_options_and_time_checked_late() {
    let ttl = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Strings(GetEx { ttl, .. })) => format!("{ttl:?}"),
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(ttl(b"getex k\r\n"), "Keep");
    assert_eq!(ttl(b"getex k persist\r\n"), "Persist");
    assert_eq!(ttl(b"getex k EX 10\r\n"), "Set([49, 48], Ex)");
    assert_eq!(ttl(b"getex k pxat 10\r\n"), "Set([49, 48], PxAt)");
    // The time is not read yet: Redis answers nil or WRONGTYPE first.
    assert_eq!(ttl(b"getex k ex abc\r\n"), "Set([97, 98, 99], Ex)");
    assert_eq!(ttl(b"getex k ex 0\r\n"), "Set([48], Ex)");
    assert_eq!(error(b"getex k persist ex 1\r\n"), SYNTAX);
    assert_eq!(error(b"getex k ex 1 persist\r\n"), SYNTAX);
    assert_eq!(error(b"getex k nx\r\n"), SYNTAX);
    assert_eq!(error(b"getex k get\r\n"), SYNTAX);
    assert_eq!(error(b"getex k keepttl\r\n"), SYNTAX);
    assert_eq!(error(b"getex k ex\r\n"), SYNTAX);
    assert_eq!(error(b"getex k ex 1 px 1\r\n"), SYNTAX);
    assert_eq!(
        Expiry::parse(b"0", Unit::Ex, INVALID_EXPIRE_GETEX)
            .unwrap_err()
            .text(),
        b"invalid expire time in 'getex' command"
    );
}

#[test]
fn counters() {
    let by = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Strings(IncrBy { key, by })) => (key.to_vec(), by),
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(by(b"incr k\r\n"), (b"k".to_vec(), 1));
    assert_eq!(by(b"DECR k\r\n"), (b"k".to_vec(), -1));
    assert_eq!(by(b"incrby k -7\r\n").1, -7);
    assert_eq!(by(b"decrby k 7\r\n").1, -7);
    assert_eq!(by(b"incrby k -9223372036854775808\r\n").1, i64::MIN);
    assert_eq!(by(b"decrby k 9223372036854775807\r\n").1, -i64::MAX);
    assert_eq!(
        error(b"decrby k -9223372036854775808\r\n"),
        "decrement would overflow"
    );
    assert_eq!(error(b"incrby k 9223372036854775808\r\n"), NOT_INTEGER);
    assert_eq!(error(b"incrby k 1.0\r\n"), NOT_INTEGER);
    assert_eq!(error(b"incrby k ''\r\n"), NOT_INTEGER);
    assert_eq!(error(b"decrby k +1\r\n"), NOT_INTEGER);
    assert_eq!(error(b"incrby k \" 1\"\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"incr k 1\r\n"),
        "wrong number of arguments for 'incr' command"
    );
}

#[test]
fn incrbyfloat_keeps_a_bad_increment_for_after_the_type() {
    let by = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Strings(IncrByFloat { by, .. })) => by.is_some(),
            other => panic!("{other:?}"),
        })
    };
    assert!(by(b"incrbyfloat k 1.5\r\n"));
    assert!(by(b"incrbyfloat k -5e3\r\n"));
    assert!(!by(b"incrbyfloat k abc\r\n"));
    assert!(!by(b"incrbyfloat k ''\r\n"));
}

#[test]
fn ranges() {
    assert_eq!(
        command(b"getrange k 0 -1\r\n"),
        format!(
            "{:?}",
            DataCommand::Strings(GetRange {
                key: b"k",
                start: 0,
                end: -1
            })
        )
    );
    // SUBSTR is GETRANGE's old name.
    assert_eq!(
        command(b"substr k 0 -1\r\n"),
        command(b"GETRANGE k 0 -1\r\n")
    );
    assert_eq!(error(b"getrange k a 1\r\n"), NOT_INTEGER);
    assert_eq!(error(b"getrange k 1 b\r\n"), NOT_INTEGER);
    assert_eq!(
        command(b"setrange k 5 xy\r\n"),
        format!(
            "{:?}",
            DataCommand::Strings(SetRange {
                key: b"k",
                offset: 5,
                value: b"xy"
            })
        )
    );
    assert_eq!(error(b"setrange k -1 x\r\n"), "offset is out of range");
    assert_eq!(error(b"setrange k x x\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"getrange k 1\r\n"),
        "wrong number of arguments for 'getrange' command"
    );
}

#[test]
fn multi_key_forms() {
    parsed(b"mget a b c\r\n", |r| match r {
        Ok(DataCommand::Strings(MGet { keys })) => {
            assert_eq!(keys.from(1).collect::<Vec<_>>(), [b"a", b"b", b"c"]);
        }
        other => panic!("{other:?}"),
    });
    parsed(b"msetnx a 1 b 2\r\n", |r| match r {
        Ok(DataCommand::Strings(MSet { pairs, nx })) => {
            assert!(nx);
            assert_eq!(pairs.len(), 5);
        }
        other => panic!("{other:?}"),
    });
    assert_eq!(
        error(b"mset a 1 b\r\n"),
        "wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        error(b"msetnx a 1 b\r\n"),
        "wrong number of arguments for 'msetnx' command"
    );
    assert_eq!(
        error(b"mset a\r\n"),
        "wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        error(b"mget\r\n"),
        "wrong number of arguments for 'mget' command"
    );
}

#[test]
fn single_key_forms() {
    assert_eq!(
        command(b"*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n"),
        format!("{:?}", DataCommand::Strings(Get { key: b"a\r\nb" }))
    );
    for (bytes, expect) in [
        (&b"getdel k\r\n"[..], GetDel { key: b"k" }),
        (b"strlen k\r\n", StrLen { key: b"k" }),
        (
            b"append k v\r\n",
            Append {
                key: b"k",
                value: b"v",
            },
        ),
        (
            b"getset k v\r\n",
            GetSet {
                key: b"k",
                value: b"v",
            },
        ),
        (
            b"setnx k v\r\n",
            SetNx {
                key: b"k",
                value: b"v",
            },
        ),
    ] {
        assert_eq!(
            command(bytes),
            format!("{:?}", DataCommand::Strings(expect))
        );
    }
    assert_eq!(
        error(b"get a b\r\n"),
        "wrong number of arguments for 'get' command"
    );
}

#[test]
fn lcs_options_are_kept_for_after_the_type_check() {
    use super::lcs::LcsOptions;
    let opts = LcsOptions {
        idx: true,
        min_match_len: 0,
        with_match_len: true,
        len: false,
    };
    assert_eq!(
        command(b"*6\r\n$3\r\nLCS\r\n$1\r\na\r\n$1\r\nb\r\n$3\r\nidx\r\n$11\r\nMINMATCHLEN\r\n$2\r\n-3\r\n"),
        format!(
            "{:?}",
            DataCommand::Strings(Lcs {
                k1: b"a",
                k2: b"b",
                opts: Ok(LcsOptions { with_match_len: false, ..opts }),
            })
        )
    );
    for (bytes, text) in [
        (
            &b"lcs a b len idx\r\n"[..],
            &b"If you want both the length and indexes, please just use IDX."[..],
        ),
        (b"lcs a b minmatchlen\r\n", b"syntax error"),
        (
            b"lcs a b minmatchlen x\r\n",
            b"value is not an integer or out of range",
        ),
    ] {
        assert_eq!(
            command(bytes),
            format!(
                "{:?}",
                DataCommand::Strings(Lcs {
                    k1: b"a",
                    k2: b"b",
                    opts: Err(text)
                })
            )
        );
    }
    assert_eq!(
        error(b"lcs a\r\n"),
        "wrong number of arguments for 'lcs' command"
    );
}

#[test]
fn lcs_matches_come_last_first_as_in_redis() {
    let (len, s, ranges) = super::lcs::compute(b"ohmytext", b"mynewtext", true);
    assert_eq!((len, &s[..]), (6, &b"mytext"[..]));
    assert_eq!(ranges, vec![(4, 7, 5, 8), (2, 3, 0, 1)]);
}
