//! `SORT`/`SORT_RO`'s parser from raw request bytes (no database), and the pieces of
//! sort.c's arithmetic that need none.

use std::cmp::Ordering;

use super::{c_string_cmp, limits, Pattern, Sort};
use crate::cmd::keys::KeyCommand;
use crate::cmd::typed::testing::{error, parsed};
use crate::cmd::typed::DataCommand;

/// The `Sort` a request parses to (panics when refused).
fn sort_of(bytes: &[u8], check: impl FnOnce(&Sort<'_>)) {
    parsed(bytes, |r| match r {
        Ok(DataCommand::Keys(KeyCommand::Sort(s))) => check(&s),
        other => panic!("{other:?}"),
    });
}

#[test]
fn options_in_any_order_and_case_the_last_winning() {
    sort_of(b"*2\r\n$4\r\nSORT\r\n$1\r\nk\r\n", |s| {
        assert_eq!(s.key, b"k");
        assert!(!s.desc && !s.alpha && !s.dont_sort);
        assert_eq!((s.start, s.count), (0, -1));
        assert_eq!((s.by, s.store), (None, None));
        assert!(s.gets.is_empty());
    });
    sort_of(
        b"*14\r\n$4\r\nsort\r\n$1\r\nk\r\n$4\r\ndesc\r\n$5\r\nAlpha\r\n$5\r\nLIMIT\r\n$2\r\n-1\r\n$1\r\n5\r\n\
$3\r\nGET\r\n$1\r\n#\r\n$3\r\nget\r\n$5\r\nw_*->\r\n$2\r\nBY\r\n$3\r\nw_*\r\n$3\r\nASC\r\n",
        |s| {
            assert!(!s.desc && s.alpha && !s.dont_sort);
            assert_eq!((s.start, s.count), (-1, 5));
            assert_eq!(s.gets, [&b"#"[..], &b"w_*->"[..]]);
            assert_eq!(s.by, Some(&b"w_*"[..]));
        },
    );
    // A BY without `*` (before any NUL) is `nosort`; STORE twice: the last.
    sort_of(
        b"*9\r\n$4\r\nSORT\r\n$1\r\nk\r\n$2\r\nBY\r\n$4\r\nno\x00*\r\n$5\r\nSTORE\r\n$1\r\na\r\n$5\r\nstore\r\n$1\r\nb\r\n$4\r\nDESC\r\n",
        |s| {
            assert!(s.dont_sort && s.desc);
            assert_eq!(s.store, Some(&b"b"[..]));
        },
    );
}

#[test]
fn refusals_in_redis_order() {
    const SYNTAX: &str = "syntax error";
    const NOT_INTEGER: &str = "value is not an integer or out of range";
    assert_eq!(
        error(b"*1\r\n$4\r\nSORT\r\n"),
        "wrong number of arguments for 'sort' command"
    );
    assert_eq!(
        error(b"*1\r\n$7\r\nSORT_RO\r\n"),
        "wrong number of arguments for 'sort_ro' command"
    );
    assert_eq!(
        error(b"*3\r\n$4\r\nSORT\r\n$1\r\nk\r\n$3\r\nBAD\r\n"),
        SYNTAX
    );
    // An option without its arguments is unknown (a syntax error), LIMIT's integers are
    // checked where they are met.
    assert_eq!(
        error(b"*3\r\n$4\r\nSORT\r\n$1\r\nk\r\n$5\r\nLIMIT\r\n"),
        SYNTAX
    );
    assert_eq!(
        error(b"*4\r\n$4\r\nSORT\r\n$1\r\nk\r\n$5\r\nLIMIT\r\n$1\r\n1\r\n"),
        SYNTAX
    );
    assert_eq!(
        error(b"*3\r\n$4\r\nSORT\r\n$1\r\nk\r\n$2\r\nBY\r\n"),
        SYNTAX
    );
    assert_eq!(
        error(b"*3\r\n$4\r\nSORT\r\n$1\r\nk\r\n$3\r\nGET\r\n"),
        SYNTAX
    );
    assert_eq!(
        error(b"*3\r\n$4\r\nSORT\r\n$1\r\nk\r\n$5\r\nSTORE\r\n"),
        SYNTAX
    );
    assert_eq!(
        error(b"*5\r\n$4\r\nSORT\r\n$1\r\nk\r\n$5\r\nLIMIT\r\n$1\r\nx\r\n$1\r\n1\r\n"),
        NOT_INTEGER
    );
    assert_eq!(
        error(b"*5\r\n$4\r\nSORT\r\n$1\r\nk\r\n$5\r\nLIMIT\r\n$1\r\n1\r\n$3\r\n1.5\r\n"),
        NOT_INTEGER
    );
    assert_eq!(
        error(b"*6\r\n$4\r\nSORT\r\n$1\r\nk\r\n$3\r\nBAD\r\n$5\r\nLIMIT\r\n$1\r\nx\r\n$1\r\n1\r\n"),
        SYNTAX
    );
    // SORT_RO has no STORE.
    assert_eq!(
        error(b"*4\r\n$7\r\nSORT_RO\r\n$1\r\nk\r\n$5\r\nSTORE\r\n$1\r\nd\r\n"),
        SYNTAX
    );
}

#[test]
fn limit_arithmetic_is_sort_c() {
    assert_eq!(limits(5, 0, -1), (0, 4));
    assert_eq!(limits(5, -3, 2), (0, 1));
    assert_eq!(limits(5, 1, 0), (1, 0));
    assert_eq!(limits(5, 3, 100), (3, 4));
    assert_eq!(limits(5, 5, 1), (4, 3));
    assert_eq!(limits(5, 2, -7), (2, 4));
    assert_eq!(limits(5, i64::MAX, i64::MAX), (4, 3));
    assert_eq!(limits(0, 0, -1), (-1, -2));
}

#[test]
fn patterns_as_lookup_key_by_pattern() {
    let key = |p: &'static [u8]| match Pattern::new(p) {
        Pattern::Key {
            prefix,
            suffix,
            field,
        } => (prefix, suffix, field),
        Pattern::Element => (&b"#"[..], &b""[..], None),
        Pattern::Nothing => (&b""[..], &b""[..], None),
    };
    assert!(matches!(Pattern::new(b"#"), Pattern::Element));
    assert!(matches!(Pattern::new(b"#\x00x"), Pattern::Element));
    assert!(matches!(Pattern::new(b"##"), Pattern::Nothing));
    assert!(matches!(Pattern::new(b"nostar"), Pattern::Nothing));
    assert!(matches!(Pattern::new(b"no\x00*"), Pattern::Nothing));
    assert_eq!(key(b"w_*"), (&b"w_"[..], &b""[..], None));
    assert_eq!(key(b"a*b->f"), (&b"a"[..], &b"b"[..], Some(&b"f"[..])));
    // An empty field is no field; the first `->` after the `*` splits.
    assert_eq!(key(b"a*->"), (&b"a"[..], &b"->"[..], None));
    assert_eq!(key(b"a*->f->g"), (&b"a"[..], &b""[..], Some(&b"f->g"[..])));
    assert_eq!(key(b"->a*"), (&b"->a"[..], &b""[..], None));
    // Past a NUL, C finds no `->`: the rest is the key's suffix.
    assert_eq!(key(b"a*\x00->f"), (&b"a"[..], &b"\x00->f"[..], None));
}

#[test]
fn alpha_compares_as_strcmp() {
    assert_eq!(c_string_cmp(b"a\x00b", b"a\x00c"), Ordering::Equal);
    assert_eq!(c_string_cmp(b"B", b"a"), Ordering::Less);
    assert_eq!(c_string_cmp(b"\xff", b"a"), Ordering::Greater);
    assert_eq!(c_string_cmp(b"", b"\x00x"), Ordering::Equal);
}
