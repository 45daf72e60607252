//! The sorted set commands' parsers, from raw request bytes, without a database.

use super::parse::*;
use super::range::LexBound;
use crate::cmd::typed::testing::{command, error, parsed};
use crate::cmd::typed::DataCommand;

const SYNTAX: &str = "syntax error";
const NOT_INTEGER: &str = "value is not an integer or out of range";
const NOT_FLOAT: &str = "value is not a valid float";

fn debug(c: ZSetCommand<'_>) -> String {
    format!("{:?}", DataCommand::ZSets(c))
}

/// The `ZADD` a request parses to: its options and pairs.
fn zadd(bytes: &[u8]) -> (ZAddFlags, Vec<(f64, Vec<u8>)>) {
    parsed(bytes, |r| match r {
        Ok(DataCommand::ZSets(ZAdd { flags, pairs, .. })) => (
            flags,
            pairs.into_iter().map(|(s, m)| (s, m.to_vec())).collect(),
        ),
        other => panic!("{other:?}"),
    })
}

#[test]
fn zadd_options_and_pairs() {
    let (f, pairs) = zadd(b"zadd z 1 a 2.5 b\r\n");
    assert_eq!(f, ZAddFlags::default());
    assert_eq!(pairs, [(1.0, b"a".to_vec()), (2.5, b"b".to_vec())]);
    let (f, _) = zadd(b"zadd z NX ch 1 a\r\n");
    assert!(f.nx && f.ch && !f.xx);
    let (f, _) = zadd(b"zadd z xx gt incr 1 a\r\n");
    assert!(f.xx && f.gt && f.incr);
    let (_, pairs) = zadd(b"zadd z -inf a +inf b\r\n");
    assert!(pairs[0].0.is_infinite() && pairs[0].0 < 0.0);
    assert!(pairs[1].0.is_infinite() && pairs[1].0 > 0.0);
    // ZINCRBY is ZADD with INCR, its options included.
    let (f, pairs) = zadd(b"zincrby z 3 m\r\n");
    assert!(f.incr);
    assert_eq!(pairs, [(3.0, b"m".to_vec())]);
    // ZINCRBY's arity leaves no room for options.
    assert_eq!(
        error(b"zincrby z nx 3 m\r\n"),
        "wrong number of arguments for 'zincrby' command"
    );
}

#[test]
fn zadd_refusals_in_redis_order() {
    assert_eq!(error(b"zadd z 1 a 2\r\n"), SYNTAX);
    assert_eq!(error(b"zadd z nx xx\r\n"), SYNTAX);
    assert_eq!(
        error(b"zadd z nx xx 1 a\r\n"),
        "XX and NX options at the same time are not compatible"
    );
    assert_eq!(
        error(b"zadd z nx gt 1 a\r\n"),
        "GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        error(b"zadd z gt lt 1 a\r\n"),
        "GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        error(b"zadd z incr 1 a 2 b\r\n"),
        "INCR option supports a single increment-element pair"
    );
    assert_eq!(error(b"zadd z x a\r\n"), NOT_FLOAT);
    assert_eq!(error(b"zadd z 1 a nan b\r\n"), NOT_FLOAT);
    // The options' conflict comes before a bad score.
    assert_eq!(
        error(b"zadd z nx xx x a\r\n"),
        "XX and NX options at the same time are not compatible"
    );
    assert_eq!(
        error(b"zincrby z 1 a b\r\n"),
        "wrong number of arguments for 'zincrby' command"
    );
    assert_eq!(error(b"zincrby z x m\r\n"), NOT_FLOAT);
}

#[test]
fn member_forms() {
    assert_eq!(
        command(b"zscore z m\r\n"),
        debug(ZScore {
            key: b"z",
            member: b"m"
        })
    );
    assert_eq!(
        command(b"zrevrank z m\r\n"),
        debug(ZRank {
            key: b"z",
            member: b"m",
            rev: true
        })
    );
    assert!(command(b"zrank z m\r\n").contains("rev: false"));
    assert_eq!(command(b"zcard z\r\n"), debug(ZCard { key: b"z" }));
    assert!(command(b"zrem z a b\r\n").starts_with("ZSets(ZRem"));
    assert!(command(b"zmscore z a b\r\n").starts_with("ZSets(ZMScore"));
}

#[test]
fn pops() {
    assert_eq!(
        command(b"zpopmin z\r\n"),
        debug(ZPop {
            key: b"z",
            count: None,
            max: false
        })
    );
    assert_eq!(
        command(b"zpopmax z 3\r\n"),
        debug(ZPop {
            key: b"z",
            count: Some(3),
            max: true
        })
    );
    assert_eq!(
        error(b"zpopmin z -1\r\n"),
        "value is out of range, must be positive"
    );
    assert_eq!(error(b"zpopmin z 1 2\r\n"), SYNTAX);
}

#[test]
fn ranges_by_score_and_lex() {
    let range = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::ZSets(ZCount { range, .. } | ZRemRange { range, .. })) => {
                format!("{range:?}")
            }
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(
        range(b"zcount z 1 (2\r\n"),
        format!(
            "{:?}",
            Range::Score {
                min: (1.0, false),
                max: (2.0, true)
            }
        )
    );
    assert_eq!(
        range(b"zcount z -inf +inf\r\n"),
        format!(
            "{:?}",
            Range::Score {
                min: (f64::NEG_INFINITY, false),
                max: (f64::INFINITY, false)
            }
        )
    );
    assert_eq!(
        range(b"zlexcount z - [b\r\n"),
        format!(
            "{:?}",
            Range::Lex {
                min: LexBound::Least,
                max: LexBound::In(b"b")
            }
        )
    );
    assert_eq!(
        range(b"zremrangebylex z (a +\r\n"),
        format!(
            "{:?}",
            Range::Lex {
                min: LexBound::Ex(b"a"),
                max: LexBound::Most
            }
        )
    );
    assert_eq!(
        range(b"zremrangebyrank z 0 -1\r\n"),
        format!("{:?}", Range::Rank(0, -1))
    );
    assert_eq!(error(b"zcount z a 1\r\n"), "min or max is not a float");
    assert_eq!(error(b"zcount z 1 ((2\r\n"), "min or max is not a float");
    assert_eq!(
        error(b"zlexcount z a b\r\n"),
        "min or max not valid string range item"
    );
    assert_eq!(
        error(b"zlexcount z -- +\r\n"),
        "min or max not valid string range item"
    );
    assert_eq!(error(b"zremrangebyrank z a 1\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"zremrangebyscore z 1 x\r\n"),
        "min or max is not a float"
    );
}

/// The `ZRANGE` a request parses to.
fn zrange(bytes: &[u8]) -> String {
    parsed(bytes, |r| match r {
        Ok(DataCommand::ZSets(ZSetCommand::ZRange(z))) => format!("{z:?}"),
        other => panic!("{other:?}"),
    })
}

#[test]
fn zrange_forms() {
    let z = |dst, range, rev, limit, withscores| {
        format!(
            "{:?}",
            ZRange {
                key: b"z",
                dst,
                range,
                rev,
                limit,
                withscores
            }
        )
    };
    assert_eq!(
        zrange(b"zrange z 0 -1\r\n"),
        z(None, Range::Rank(0, -1), false, (0, -1), false)
    );
    assert_eq!(
        zrange(b"zrange z 0 -1 REV withscores\r\n"),
        z(None, Range::Rank(0, -1), true, (0, -1), true)
    );
    // BYSCORE with REV: the bounds come max first and are swapped back.
    let score = Range::Score {
        min: (1.0, false),
        max: (5.0, false),
    };
    assert_eq!(
        zrange(b"zrange z 5 1 byscore rev limit 1 2\r\n"),
        z(None, score, true, (1, 2), false)
    );
    assert_eq!(
        zrange(b"zrevrangebyscore z 5 1\r\n"),
        z(None, score, true, (0, -1), false)
    );
    assert_eq!(
        zrange(b"zrangebyscore z 1 5 withscores limit 0 -1\r\n"),
        z(None, score, false, (0, -1), true)
    );
    assert_eq!(
        zrange(b"zrevrange z 0 1\r\n"),
        z(None, Range::Rank(0, 1), true, (0, -1), false)
    );
    let lex = Range::Lex {
        min: LexBound::Least,
        max: LexBound::Most,
    };
    assert_eq!(
        zrange(b"zrangebylex z - +\r\n"),
        z(None, lex, false, (0, -1), false)
    );
    assert_eq!(
        zrange(b"zrevrangebylex z + -\r\n"),
        z(None, lex, true, (0, -1), false)
    );
    assert_eq!(
        zrange(b"zrange z - + bylex\r\n"),
        z(None, lex, false, (0, -1), false)
    );
    assert_eq!(
        zrange(b"zrangestore d z 0 -1\r\n"),
        z(Some(b"d"), Range::Rank(0, -1), false, (0, -1), false)
    );
    // A negative count with an offset keeps the offset.
    assert_eq!(
        zrange(b"zrangebyscore z 1 5 limit 2 -1\r\n"),
        z(None, score, false, (2, -1), false)
    );
}

#[test]
fn zrange_refusals_in_redis_order() {
    assert_eq!(
        error(b"zrange z 0 -1 limit 0 1\r\n"),
        "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    );
    // `LIMIT x -1` is Redis's default count: allowed by rank.
    assert!(zrange(b"zrange z 0 -1 limit 3 -1\r\n").contains("Rank"));
    assert_eq!(
        error(b"zrange z - + bylex withscores\r\n"),
        "syntax error, WITHSCORES not supported in combination with BYLEX"
    );
    assert_eq!(error(b"zrange z 0 1 limit x 1\r\n"), NOT_INTEGER);
    assert_eq!(error(b"zrange z 0 1 limit 1\r\n"), SYNTAX);
    assert_eq!(error(b"zrange z 0 1 byscore bylex\r\n"), SYNTAX);
    assert_eq!(error(b"zrange z 0 1 rev rev\r\n"), SYNTAX);
    assert_eq!(error(b"zrevrange z 0 1 rev\r\n"), SYNTAX);
    assert_eq!(error(b"zrangebyscore z 0 1 byscore\r\n"), SYNTAX);
    assert_eq!(error(b"zrangestore d z 0 1 withscores\r\n"), SYNTAX);
    assert_eq!(error(b"zrange z a 1\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"zrange z a 1 byscore\r\n"),
        "min or max is not a float"
    );
    assert_eq!(
        error(b"zrange z a b bylex\r\n"),
        "min or max not valid string range item"
    );
    // The options before the bounds.
    assert_eq!(error(b"zrange z a 1 foo\r\n"), SYNTAX);
    assert_eq!(
        error(b"zrangestore d z\r\n"),
        "wrong number of arguments for 'zrangestore' command"
    );
}

#[test]
fn zscan_cursor_first() {
    assert_eq!(error(b"zscan z x\r\n"), "invalid cursor");
    parsed(b"zscan z 3 match a*\r\n", |r| match r {
        Ok(DataCommand::ZSets(ZScan(scan))) => {
            assert_eq!(scan.cursor, 3);
            assert_eq!(scan.options.unwrap().pattern, Some(&b"a*"[..]));
        }
        other => panic!("{other:?}"),
    });
}

/// The options of a `ZUNION`-like request (numkeys accepted), or their kept error.
fn algebra_options(bytes: &[u8]) -> Result<AlgebraOptions, String> {
    parsed(bytes, |r| match r {
        Ok(DataCommand::ZSets(ZSetCommand::Algebra(a))) => {
            a.options.map_err(|e| String::from_utf8(e.text()).unwrap())
        }
        other => panic!("{other:?}"),
    })
}

#[test]
fn algebra_numkeys_then_options_after_the_keys() {
    assert_eq!(
        error(b"zunion 0 a\r\n"),
        "at least 1 input key is needed for 'zunion' command"
    );
    assert_eq!(
        error(b"zunionstore d -1 a\r\n"),
        "at least 1 input key is needed for 'zunionstore' command"
    );
    assert_eq!(error(b"zinter x a\r\n"), NOT_INTEGER);
    assert_eq!(error(b"zdiff 3 a b\r\n"), SYNTAX);
    assert_eq!(error(b"zintercard 2 a\r\n"), SYNTAX);
    // Option errors are kept for after the keys' type checks.
    let o = algebra_options(b"zunion 2 a b weights 2 -inf aggregate max withscores\r\n").unwrap();
    assert_eq!(o.weights, [2.0, f64::NEG_INFINITY]);
    assert_eq!(o.aggregate, Aggregate::Max);
    assert!(o.withscores);
    let not_float = "weight value is not a float";
    assert_eq!(
        algebra_options(b"zinter 1 a weights nan\r\n").unwrap_err(),
        not_float
    );
    assert_eq!(
        algebra_options(b"zinter 2 a b weights 1\r\n").unwrap_err(),
        SYNTAX
    );
    assert_eq!(
        algebra_options(b"zdiff 1 a weights 1\r\n").unwrap_err(),
        SYNTAX
    );
    assert_eq!(
        algebra_options(b"zunionstore d 1 a withscores\r\n").unwrap_err(),
        SYNTAX
    );
    assert_eq!(
        algebra_options(b"zunion 1 a aggregate avg\r\n").unwrap_err(),
        SYNTAX
    );
    let o = algebra_options(b"zintercard 1 a limit 3\r\n").unwrap();
    assert!(o.card && o.limit == 3);
    assert_eq!(
        algebra_options(b"zintercard 1 a limit -1\r\n").unwrap_err(),
        "LIMIT can't be negative"
    );
    assert_eq!(
        algebra_options(b"zintercard 1 a withscores\r\n").unwrap_err(),
        SYNTAX
    );
}

#[test]
fn zmpop_arguments_in_redis_order_of_checks() {
    let c = command(b"zmpop 2 a b MAX count 3\r\n");
    assert!(c.starts_with("ZSets(ZMPop"), "{c}");
    assert!(c.contains("max: true") && c.contains("count: 3") && c.contains("keys: 2..4"));
    assert!(command(b"zmpop 1 a min\r\n").contains("count: 1"));
    let numkeys = "numkeys should be greater than 0";
    assert_eq!(error(b"zmpop 0 a min\r\n"), numkeys);
    assert_eq!(error(b"zmpop x a min\r\n"), numkeys);
    assert_eq!(error(b"zmpop 3 a min\r\n"), SYNTAX);
    assert_eq!(error(b"zmpop 1 a left\r\n"), SYNTAX);
    let count = "count should be greater than 0";
    assert_eq!(error(b"zmpop 1 a min count 0\r\n"), count);
    assert_eq!(error(b"zmpop 1 a min count x\r\n"), count);
    assert_eq!(error(b"zmpop 1 a min count\r\n"), SYNTAX);
    assert_eq!(error(b"zmpop 1 a min count 1 count 2\r\n"), SYNTAX);
}

#[test]
fn zrandmember_forms_and_checks_in_redis_order() {
    use super::random::RandCount;
    let count = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::ZSets(ZSetCommand::ZRandMember { count, .. })) => count,
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(count(b"zrandmember z\r\n"), None);
    assert_eq!(
        count(b"zrandmember z -5\r\n"),
        Some(RandCount {
            count: -5,
            with_scores: false
        })
    );
    assert_eq!(
        count(b"zrandmember z 3 WithScores\r\n"),
        Some(RandCount {
            count: 3,
            with_scores: true
        })
    );
    assert_eq!(
        count(b"zrandmember z 9223372036854775807\r\n")
            .unwrap()
            .count,
        i64::MAX
    );
    assert_eq!(
        count(b"zrandmember z -4611686018427387903 withscores\r\n")
            .unwrap()
            .count,
        -(i64::MAX / 2)
    );
    assert_eq!(error(b"zrandmember z x\r\n"), NOT_INTEGER);
    assert_eq!(error(b"zrandmember z 1.5\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"zrandmember z -9223372036854775808\r\n"),
        "value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(error(b"zrandmember z 1 withscore\r\n"), SYNTAX);
    assert_eq!(error(b"zrandmember z 1 withscores x\r\n"), SYNTAX);
    // The count first, then the syntax, then the range WITHSCORES allows.
    assert_eq!(error(b"zrandmember z x foo\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"zrandmember z 4611686018427387904 withscores\r\n"),
        "value is out of range"
    );
    assert_eq!(
        error(b"zrandmember z -4611686018427387904 withscores\r\n"),
        "value is out of range"
    );
    assert_eq!(error(b"zrandmember z -4611686018427387904 foo\r\n"), SYNTAX);
}

#[test]
fn blocking_pops_check_their_timeout_and_bzmpop_its_arguments_first() {
    let pop = |bytes: &[u8]| {
        parsed(bytes, |r| match r {
            Ok(DataCommand::ZSets(ZSetCommand::Blocking(p))) => format!("{p:?}"),
            other => panic!("{other:?}"),
        })
    };
    let p = pop(b"bzpopmin a b 0\r\n");
    assert!(p.starts_with("Pop") && p.contains("keys: 1..3") && p.contains("max: false"));
    assert!(pop(b"bzpopmax a 1.5\r\n").contains("max: true"));
    let p = pop(b"bzmpop 0.5 2 a b MAX COUNT 4\r\n");
    assert!(p.starts_with("MPop") && p.contains("keys: 3..5") && p.contains("count: 4"));
    assert!(pop(b"bzmpop 0 1 a min\r\n").contains("count: 1"));
    let not_float = "timeout is not a float or out of range";
    let negative = "timeout is negative";
    assert_eq!(error(b"bzpopmin a x\r\n"), not_float);
    assert_eq!(error(b"bzpopmin a nan\r\n"), not_float);
    assert_eq!(error(b"bzpopmin a -1\r\n"), negative);
    assert_eq!(error(b"bzpopmax a inf\r\n"), negative);
    assert_eq!(error(b"bzpopmax a 1e20\r\n"), negative);
    // As string2ld reads them: hexadecimal, and a long double's range.
    assert!(pop(b"bzpopmin a 0x1p-4\r\n").starts_with("Pop"));
    assert!(pop(b"bzpopmin a 1e-400\r\n").starts_with("Pop"));
    assert_eq!(error(b"bzpopmin a 1e5000\r\n"), not_float);
    assert_eq!(error(b"bzpopmin a 1e-5000\r\n"), not_float);
    assert_eq!(error(b"bzpopmin a 1e400\r\n"), negative);
    assert_eq!(error(b"bzpopmin a 0x\r\n"), not_float);
    assert_eq!(error(b"bzmpop x 1 a min\r\n"), not_float);
    assert_eq!(error(b"bzmpop -1 1 a min\r\n"), negative);
    // BZMPOP: numkeys, the side and COUNT are checked before the timeout (as Redis does).
    assert_eq!(
        error(b"bzmpop -1 0 a min\r\n"),
        "numkeys should be greater than 0"
    );
    assert_eq!(error(b"bzmpop -1 1 a left\r\n"), SYNTAX);
    assert_eq!(
        error(b"bzmpop x 1 a min count 0\r\n"),
        "count should be greater than 0"
    );
    assert_eq!(error(b"bzmpop 0 2 a min\r\n"), SYNTAX);
    assert_eq!(error(b"bzmpop 0 1 a min count\r\n"), SYNTAX);
}
