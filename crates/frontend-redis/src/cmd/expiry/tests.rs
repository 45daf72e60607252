//! The expiry commands' parsers, from raw request bytes, without a database.

use super::*;
use crate::cmd::typed::testing::{command, error, parsed};

const NOT_INTEGER: &str = "value is not an integer or out of range";

#[test]
fn c_strings_end_at_nul() {
    assert_eq!(c_string(b"nx\0zz"), b"nx");
    assert_eq!(c_string(b"\0"), b"");
    assert_eq!(c_string(b"gt"), b"gt");
}

/// The `(ms, relative, flags)` an `EXPIRE`-family request parses to.
fn expire(bytes: &[u8]) -> (i64, bool, Flags, &'static str) {
    parsed(bytes, |r| match r {
        Ok(DataCommand::Expiry(ExpiryCommand::Expire {
            ms,
            relative,
            flags,
            name,
            ..
        })) => (ms, relative, flags, name),
        other => panic!("{other:?}"),
    })
}

#[test]
fn units_and_bases() {
    let none = Flags::default();
    assert_eq!(expire(b"expire k 10\r\n"), (10_000, true, none, "expire"));
    assert_eq!(expire(b"PEXPIRE k 10\r\n"), (10, true, none, "pexpire"));
    assert_eq!(
        expire(b"expireat k 10\r\n"),
        (10_000, false, none, "expireat")
    );
    assert_eq!(
        expire(b"pexpireat k 10\r\n"),
        (10, false, none, "pexpireat")
    );
    // A past or negative time is taken: the key is deleted when applied.
    assert_eq!(expire(b"expire k -10\r\n").0, -10_000);
    assert_eq!(expire(b"pexpire k -9223372036854775808\r\n").0, i64::MIN);
}

#[test]
fn flags_and_their_conflicts() {
    let f = |nx, xx, gt, lt| Flags { nx, xx, gt, lt };
    assert_eq!(expire(b"expire k 1 nx\r\n").2, f(true, false, false, false));
    assert_eq!(
        expire(b"expire k 1 XX GT\r\n").2,
        f(false, true, true, false)
    );
    assert_eq!(
        expire(b"expire k 1 lt lt\r\n").2,
        f(false, false, false, true)
    );
    // Redis compares the option as a C string: up to its first NUL.
    assert_eq!(
        expire(b"*4\r\n$6\r\nexpire\r\n$1\r\nk\r\n$1\r\n1\r\n$4\r\nnx\0z\r\n").2,
        f(true, false, false, false)
    );
    assert_eq!(
        error(b"expire k 1 nx xx\r\n"),
        "NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        error(b"expire k 1 gt nx\r\n"),
        "NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        error(b"expire k 1 gt lt\r\n"),
        "GT and LT options at the same time are not compatible"
    );
    assert_eq!(error(b"expire k 1 foo\r\n"), "Unsupported option foo");
    // Line breaks in the option become spaces, as addReplyErrorFormat writes them.
    assert_eq!(
        error(b"*4\r\n$6\r\nexpire\r\n$1\r\nk\r\n$1\r\n1\r\n$4\r\na\r\nb\r\n"),
        "Unsupported option a  b"
    );
    // The options are checked before the time.
    assert_eq!(error(b"expire k x foo\r\n"), "Unsupported option foo");
    assert_eq!(
        error(b"expire k x gt lt\r\n"),
        "GT and LT options at the same time are not compatible"
    );
}

#[test]
fn times_refused_before_the_key() {
    assert_eq!(error(b"expire k x\r\n"), NOT_INTEGER);
    assert_eq!(error(b"expire k 1.5\r\n"), NOT_INTEGER);
    assert_eq!(error(b"pexpire k 9223372036854775808\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"expire k 9223372036854776\r\n"),
        "invalid expire time in 'expire' command"
    );
    assert_eq!(
        error(b"expireat k -9223372036854776\r\n"),
        "invalid expire time in 'expireat' command"
    );
    assert_eq!(
        expire(b"expire k 9223372036854775\r\n").0,
        9_223_372_036_854_775_000
    );
    assert_eq!(
        error(b"expire k\r\n"),
        "wrong number of arguments for 'expire' command"
    );
}

#[test]
fn readers() {
    for (bytes, unit) in [
        (&b"ttl k\r\n"[..], Ttl::Seconds),
        (b"PTTL k\r\n", Ttl::Ms),
        (b"expiretime k\r\n", Ttl::UnixSeconds),
        (b"pexpiretime k\r\n", Ttl::UnixMs),
    ] {
        assert_eq!(
            command(bytes),
            format!(
                "{:?}",
                DataCommand::Expiry(ExpiryCommand::Ttl { key: b"k", unit })
            )
        );
    }
    assert_eq!(
        command(b"persist k\r\n"),
        format!(
            "{:?}",
            DataCommand::Expiry(ExpiryCommand::Persist { key: b"k" })
        )
    );
    assert_eq!(
        error(b"ttl a b\r\n"),
        "wrong number of arguments for 'ttl' command"
    );
    assert_eq!(
        error(b"persist\r\n"),
        "wrong number of arguments for 'persist' command"
    );
}
