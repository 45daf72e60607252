//! The set commands' parsers, from raw request bytes, without a database.

use super::parse::*;
use super::Op;
use crate::cmd::typed::testing::{command, error, parsed};
use crate::cmd::typed::DataCommand;

const SYNTAX: &str = "syntax error";
const NOT_INTEGER: &str = "value is not an integer or out of range";

fn debug(c: SetCommand<'_>) -> String {
    format!("{:?}", DataCommand::Sets(c))
}

#[test]
fn member_lists() {
    parsed(
        b"*4\r\n$4\r\nSADD\r\n$1\r\ns\r\n$1\r\na\r\n$1\r\nb\r\n",
        |r| match r {
            Ok(DataCommand::Sets(SAdd { key, members })) => {
                assert_eq!(key, b"s");
                assert_eq!(members.from(2).collect::<Vec<_>>(), [b"a", b"b"]);
            }
            other => panic!("{other:?}"),
        },
    );
    assert!(command(b"srem s a\r\n").starts_with("Sets(SRem"));
    assert!(command(b"smismember s a b\r\n").starts_with("Sets(SMIsMember"));
    assert_eq!(
        command(b"sismember s a\r\n"),
        debug(SIsMember {
            key: b"s",
            member: b"a"
        })
    );
    assert_eq!(command(b"scard s\r\n"), debug(SCard { key: b"s" }));
    assert_eq!(
        command(b"smove a b m\r\n"),
        debug(SMove {
            src: b"a",
            dst: b"b",
            member: b"m"
        })
    );
    assert_eq!(
        error(b"sadd s\r\n"),
        "wrong number of arguments for 'sadd' command"
    );
    assert_eq!(
        error(b"smove a b\r\n"),
        "wrong number of arguments for 'smove' command"
    );
}

#[test]
fn algebra_forms() {
    let algebra = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::Sets(Algebra {
                op,
                args,
                keys,
                dst,
            })) => (
                op,
                keys.map(|i| args.get(i).to_vec()).collect::<Vec<_>>(),
                dst.map(<[u8]>::to_vec),
            ),
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(
        algebra(b"smembers s\r\n"),
        (Op::Inter, vec![b"s".to_vec()], None)
    );
    assert_eq!(
        algebra(b"sinter a b\r\n"),
        (Op::Inter, vec![b"a".to_vec(), b"b".to_vec()], None)
    );
    assert_eq!(algebra(b"sunion a\r\n").0, Op::Union);
    assert_eq!(algebra(b"SDIFF a b\r\n").0, Op::Diff);
    assert_eq!(
        algebra(b"sdiffstore d a b\r\n"),
        (
            Op::Diff,
            vec![b"a".to_vec(), b"b".to_vec()],
            Some(b"d".to_vec())
        )
    );
    assert_eq!(algebra(b"sinterstore d a\r\n").2, Some(b"d".to_vec()));
    assert_eq!(algebra(b"sunionstore d a\r\n").0, Op::Union);
    assert_eq!(
        error(b"sinterstore d\r\n"),
        "wrong number of arguments for 'sinterstore' command"
    );
    assert_eq!(
        error(b"smembers a b\r\n"),
        "wrong number of arguments for 'smembers' command"
    );
}

#[test]
fn sintercard_checks_in_redis_order() {
    parsed(b"sintercard 2 a b limit 5\r\n", |r| match r {
        Ok(DataCommand::Sets(SInterCard { args, keys, limit })) => {
            assert_eq!(keys.map(|i| args.get(i)).collect::<Vec<_>>(), [b"a", b"b"]);
            assert_eq!(limit, 5);
        }
        other => panic!("{other:?}"),
    });
    parsed(b"sintercard 1 a\r\n", |r| {
        assert!(matches!(
            r,
            Ok(DataCommand::Sets(SInterCard { limit: 0, .. }))
        ));
    });
    let positive = "numkeys should be greater than 0";
    assert_eq!(error(b"sintercard 0 a\r\n"), positive);
    assert_eq!(error(b"sintercard x a\r\n"), positive);
    assert_eq!(error(b"sintercard -1 a\r\n"), positive);
    assert_eq!(
        error(b"sintercard 3 a b\r\n"),
        "Number of keys can't be greater than number of args"
    );
    assert_eq!(
        error(b"sintercard 1 a limit -1\r\n"),
        "LIMIT can't be negative"
    );
    assert_eq!(
        error(b"sintercard 1 a limit x\r\n"),
        "LIMIT can't be negative"
    );
    assert_eq!(error(b"sintercard 1 a limit\r\n"), SYNTAX);
    assert_eq!(error(b"sintercard 1 a b\r\n"), SYNTAX);
}

#[test]
fn random_counts() {
    assert_eq!(
        command(b"spop s\r\n"),
        debug(SPop {
            key: b"s",
            count: None
        })
    );
    assert_eq!(
        command(b"spop s 0\r\n"),
        debug(SPop {
            key: b"s",
            count: Some(0)
        })
    );
    let positive = "value is out of range, must be positive";
    assert_eq!(error(b"spop s -1\r\n"), positive);
    assert_eq!(error(b"spop s x\r\n"), positive);
    // A third argument is a syntax error, not an arity one.
    assert_eq!(error(b"spop s 1 2\r\n"), SYNTAX);
    assert_eq!(error(b"spop s x 2\r\n"), SYNTAX);
    assert_eq!(
        command(b"srandmember s -5\r\n"),
        debug(SRandMember {
            key: b"s",
            count: Some(-5)
        })
    );
    assert_eq!(
        command(b"srandmember s\r\n"),
        debug(SRandMember {
            key: b"s",
            count: None
        })
    );
    assert_eq!(error(b"srandmember s x\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"srandmember s -9223372036854775808\r\n"),
        "value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(error(b"srandmember s 1 2\r\n"), SYNTAX);
}

#[test]
fn sscan_cursor_first() {
    parsed(b"sscan s 5 count 2\r\n", |r| match r {
        Ok(DataCommand::Sets(SScan(scan))) => {
            assert_eq!((scan.key, scan.cursor), (&b"s"[..], 5));
            assert_eq!(scan.options.unwrap().count, 2);
        }
        other => panic!("{other:?}"),
    });
    assert_eq!(error(b"sscan s abc\r\n"), "invalid cursor");
    parsed(b"sscan s 0 count 0\r\n", |r| match r {
        Ok(DataCommand::Sets(SScan(scan))) => assert!(scan.options.is_err()),
        other => panic!("{other:?}"),
    });
}
