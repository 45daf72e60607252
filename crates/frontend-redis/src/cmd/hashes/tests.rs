//! The hash commands' parsers, from raw request bytes, without a database.

use super::parse::*;
use crate::cmd::longdouble;
use crate::cmd::scan::ScanOptions;
use crate::cmd::typed::testing::{command, error, parsed};
use crate::cmd::typed::{DataCommand, ParseError};

const SYNTAX: &str = "syntax error";
const NOT_INTEGER: &str = "value is not an integer or out of range";

fn debug(c: HashCommand<'_>) -> String {
    format!("{:?}", DataCommand::Hashes(c))
}

#[test]
fn hset_and_hmset_count_their_pairs() {
    parsed(
        b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n",
        |r| match r {
            Ok(DataCommand::Hashes(HSet {
                key,
                pairs,
                count_reply,
            })) => {
                assert_eq!(key, b"h");
                assert!(count_reply);
                assert_eq!(pairs.from(2).collect::<Vec<_>>(), [b"f", b"v"]);
            }
            other => panic!("{other:?}"),
        },
    );
    parsed(b"hmset h a 1 b 2\r\n", |r| match r {
        Ok(DataCommand::Hashes(HSet { count_reply, .. })) => assert!(!count_reply),
        other => panic!("{other:?}"),
    });
    assert_eq!(
        error(b"hset h a 1 b\r\n"),
        "wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        error(b"hmset h a 1 b\r\n"),
        "wrong number of arguments for 'hmset' command"
    );
    assert_eq!(
        error(b"hset h a\r\n"),
        "wrong number of arguments for 'hset' command"
    );
}

#[test]
fn field_reads() {
    for (bytes, read) in [
        (&b"hget h f\r\n"[..], FieldRead::Value),
        (b"HEXISTS h f\r\n", FieldRead::Exists),
        (b"hstrlen h f\r\n", FieldRead::Length),
    ] {
        assert_eq!(
            command(bytes),
            debug(HashCommand::Field {
                key: b"h",
                field: b"f",
                read
            })
        );
    }
    for (bytes, what) in [
        (&b"hgetall h\r\n"[..], All::Pairs),
        (b"hkeys h\r\n", All::Fields),
        (b"hvals h\r\n", All::Values),
    ] {
        assert_eq!(command(bytes), debug(HashCommand::All { key: b"h", what }));
    }
    assert_eq!(command(b"hlen h\r\n"), debug(HLen { key: b"h" }));
    assert_eq!(
        command(b"hsetnx h f v\r\n"),
        debug(HSetNx {
            key: b"h",
            field: b"f",
            value: b"v"
        })
    );
    assert_eq!(
        error(b"hget h\r\n"),
        "wrong number of arguments for 'hget' command"
    );
    assert_eq!(
        error(b"hlen h x\r\n"),
        "wrong number of arguments for 'hlen' command"
    );
}

#[test]
fn field_lists() {
    parsed(b"hmget h a b a\r\n", |r| match r {
        Ok(DataCommand::Hashes(HMGet { key, fields })) => {
            assert_eq!(key, b"h");
            assert_eq!(fields.from(2).collect::<Vec<_>>(), [b"a", b"b", b"a"]);
        }
        other => panic!("{other:?}"),
    });
    parsed(b"hdel h a\r\n", |r| {
        assert!(matches!(r, Ok(DataCommand::Hashes(HDel { key: b"h", .. }))));
    });
    assert_eq!(
        error(b"hdel h\r\n"),
        "wrong number of arguments for 'hdel' command"
    );
    assert_eq!(
        error(b"hmget h\r\n"),
        "wrong number of arguments for 'hmget' command"
    );
}

#[test]
fn increments() {
    assert_eq!(
        command(b"hincrby h f -3\r\n"),
        debug(HIncrBy {
            key: b"h",
            field: b"f",
            by: -3
        })
    );
    assert_eq!(error(b"hincrby h f x\r\n"), NOT_INTEGER);
    assert_eq!(error(b"hincrby h f 1.5\r\n"), NOT_INTEGER);
    assert_eq!(error(b"hincrby h f 9223372036854775808\r\n"), NOT_INTEGER);
    assert_eq!(
        command(b"hincrbyfloat h f 1.5\r\n"),
        debug(HIncrByFloat {
            key: b"h",
            field: b"f",
            by: longdouble::parse(b"1.5").unwrap()
        })
    );
    assert_eq!(
        error(b"hincrbyfloat h f abc\r\n"),
        "value is not a valid float"
    );
    assert_eq!(
        error(b"hincrbyfloat h f inf\r\n"),
        "value is NaN or Infinity"
    );
    assert_eq!(
        error(b"hincrbyfloat h f -inf\r\n"),
        "value is NaN or Infinity"
    );
}

#[test]
fn hrandfield_forms_and_checks_in_redis_order() {
    assert_eq!(
        command(b"hrandfield h\r\n"),
        debug(HRandField {
            key: b"h",
            count: None
        })
    );
    let count = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Hashes(HRandField { count, .. })) => count,
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(
        count(b"hrandfield h -5\r\n"),
        Some(RandCount {
            count: -5,
            with_values: false
        })
    );
    assert_eq!(
        count(b"hrandfield h 3 WithValues\r\n"),
        Some(RandCount {
            count: 3,
            with_values: true
        })
    );
    assert_eq!(count(b"hrandfield h 0\r\n").unwrap().count, 0);
    assert_eq!(
        count(b"hrandfield h 9223372036854775807\r\n")
            .unwrap()
            .count,
        i64::MAX
    );
    assert_eq!(error(b"hrandfield h x\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"hrandfield h -9223372036854775808\r\n"),
        "value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(error(b"hrandfield h 1 withvalue\r\n"), SYNTAX);
    assert_eq!(error(b"hrandfield h 1 withvalues x\r\n"), SYNTAX);
    // The count first, then the syntax.
    assert_eq!(error(b"hrandfield h x foo\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"hrandfield h 4611686018427387904 withvalues\r\n"),
        "value is out of range"
    );
    assert_eq!(
        error(b"hrandfield h -4611686018427387904 withvalues\r\n"),
        "value is out of range"
    );
    assert_eq!(
        count(b"hrandfield h 4611686018427387903 withvalues\r\n")
            .unwrap()
            .count,
        i64::MAX / 2
    );
    // Without WITHVALUES any count but i64::MIN is taken.
    assert!(count(b"hrandfield h 4611686018427387904\r\n").is_some());
}

#[test]
fn hscan_refuses_the_cursor_first_and_keeps_option_errors_for_after_the_key() {
    let scan = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Hashes(HScan(s))) => {
                (s.key.to_vec(), s.cursor, format!("{:?}", s.options))
            }
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(
        scan(b"hscan h 0\r\n"),
        (
            b"h".to_vec(),
            0,
            format!(
                "{:?}",
                Ok::<_, ParseError>(ScanOptions {
                    count: 10,
                    pattern: None,
                    kind: None
                })
            )
        )
    );
    assert_eq!(
        scan(b"hscan h 7 MATCH a* COUNT 5\r\n").2,
        format!(
            "{:?}",
            Ok::<_, ParseError>(ScanOptions {
                count: 5,
                pattern: Some(b"a*"),
                kind: None
            })
        )
    );
    assert_eq!(scan(b"hscan h 1 match *\r\n").2, scan(b"hscan h 1\r\n").2);
    assert_eq!(scan(b"hscan h -1\r\n").1, u64::MAX);
    assert_eq!(error(b"hscan h x\r\n"), "invalid cursor");
    assert_eq!(error(b"hscan h x count 0\r\n"), "invalid cursor");
    // Refusals of the options: answered by apply, after the key's type.
    let refused = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Hashes(HScan(s))) => {
                String::from_utf8(s.options.unwrap_err().text()).unwrap()
            }
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(refused(b"hscan h 0 count 0\r\n"), SYNTAX);
    assert_eq!(refused(b"hscan h 0 count x\r\n"), NOT_INTEGER);
    assert_eq!(refused(b"hscan h 0 count\r\n"), SYNTAX);
    assert_eq!(refused(b"hscan h 0 type string\r\n"), SYNTAX);
    assert_eq!(refused(b"hscan h 0 foo bar\r\n"), SYNTAX);
}
