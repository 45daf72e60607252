use super::{string2ll, Limits, Request};
use crate::errors::ProtocolError;

type Parsed = Result<Option<(usize, Vec<Vec<u8>>)>, ProtocolError>;

fn parse_with(buf: &[u8], limits: &Limits) -> Parsed {
    let mut req = Request::new();
    let r = req.parse(buf, limits)?;
    Ok(r.map(|n| (n, req.args(buf).map(<[u8]>::to_vec).collect())))
}

fn parse(buf: &[u8]) -> Parsed {
    parse_with(buf, &Limits::default())
}

fn args(list: &[&[u8]]) -> Vec<Vec<u8>> {
    list.iter().map(|a| a.to_vec()).collect()
}

fn ok(buf: &[u8], list: &[&[u8]]) {
    assert_eq!(
        parse(buf),
        Ok(Some((buf.len(), args(list)))),
        "{:?}",
        String::from_utf8_lossy(buf)
    );
}

fn err(buf: &[u8], e: ProtocolError) {
    assert_eq!(parse(buf), Err(e), "{:?}", String::from_utf8_lossy(buf));
}

fn incomplete(buf: &[u8]) {
    assert_eq!(parse(buf), Ok(None), "{:?}", String::from_utf8_lossy(buf));
}

#[test]
fn multibulk() {
    ok(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", &[b"GET", b"k"]);
    ok(b"*1\r\n$0\r\n\r\n", &[b""]);
    ok(b"*1\r\n$4\r\na\r\nb\r\n", &[b"a\r\nb"]);
    ok(b"*1\r\n$3\r\n\0\x01\xff\r\n", &[b"\0\x01\xff"]);
    // Redis skips the byte after `\r` and the two after an argument without looking.
    ok(b"*1\rX$3\r\nfooXY", &[b"foo"]);
    ok(b"*1\r\n$3\rzfoo\r\n", &[b"foo"]);
    // A pipeline: only the first request is consumed.
    assert_eq!(
        parse(b"*1\r\n$4\r\nPING\r\n*1\r\n"),
        Ok(Some((14, args(&[b"PING"]))))
    );
}

#[test]
fn requests_redis_ignores() {
    ok(b"*0\r\n", &[]);
    ok(b"*-1\r\n", &[]);
    ok(b"*-100\r\n", &[]);
    ok(b"\r\n", &[]);
    ok(b"\n", &[]);
    ok(b"   \t \r\n", &[]);
}

#[test]
fn incomplete_requests() {
    incomplete(b"");
    incomplete(b"*");
    incomplete(b"*1");
    incomplete(b"*1\r");
    incomplete(b"*1\r\n");
    incomplete(b"*1\r\n$");
    incomplete(b"*1\r\n$3\r");
    incomplete(b"*1\r\n$3\r\nfo");
    incomplete(b"*1\r\n$3\r\nfoo");
    incomplete(b"*1\r\n$3\r\nfoo\r");
    incomplete(b"PING");
    incomplete(b"PING\r");
    // `\n` alone does not end a count line: Redis waits for `\r`.
    incomplete(b"*1\n$4\n");
    // A NUL before the line end hides it, as Redis's strchr does.
    incomplete(b"PI\0NG\r\n");
    incomplete(b"*1\0\r\n$1\r\na\r\n");
    incomplete(b"*1\r\n$1\0\r\na\r\n");
}

#[test]
fn multibulk_length_errors() {
    use ProtocolError::InvalidMultibulkLength as E;
    for bad in [
        &b"*x\r\n"[..],
        b"*\r\n",
        b"*01\r\n",
        b"*+1\r\n",
        b"* 1\r\n",
        b"*1 \r\n",
        b"*-\r\n",
        b"*-0\r\n",
        b"*2147483648\r\n",
        b"*99999999999999999999\r\n",
        b"*1048577\r\n",
        b"*1\n$4\r\n",
    ] {
        err(bad, E);
    }
    // Redis 7's own limit is 2^31-1; ours is configurable.
    let limits = Limits {
        max_multibulk_len: 1 << 31,
        ..Limits::default()
    };
    assert_eq!(parse_with(b"*2147483647\r\n", &limits), Ok(None));
    assert_eq!(parse_with(b"*2147483648\r\n", &limits), Err(E));
}

#[test]
fn bulk_length_errors() {
    use ProtocolError::InvalidBulkLength as E;
    for bad in [
        &b"*1\r\n$x\r\n"[..],
        b"*1\r\n$\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$-5\r\n",
        b"*1\r\n$03\r\n",
        b"*1\r\n$999999999999\r\n",
        b"*1\r\n$536870913\r\n",
        b"*1\r\n$99999999999999999999999\r\n",
    ] {
        err(bad, E);
    }
    // 512 MiB is allowed, and checked against the query buffer limit at once.
    assert_eq!(parse(b"*1\r\n$536870912\r\n"), Ok(None));
    let small = Limits {
        client_query_buffer_limit: 100,
        ..Limits::default()
    };
    assert_eq!(
        parse_with(b"*1\r\n$200\r\n", &small),
        Err(ProtocolError::QueryBufferLimit {
            needed: 212,
            limit: 100
        })
    );
    assert_eq!(
        parse_with(&[b'a'; 101], &small),
        Err(ProtocolError::QueryBufferLimit {
            needed: 101,
            limit: 100
        })
    );
}

#[test]
fn expected_dollar() {
    err(b"*1\r\nx\r\n", ProtocolError::ExpectedDollar(b'x'));
    err(b"*1\r\n:3\r\n", ProtocolError::ExpectedDollar(b':'));
    err(b"*1\r\n\r\n", ProtocolError::ExpectedDollar(b'\r'));
    err(
        b"*2\r\n$1\r\na\r\n*1\r\n",
        ProtocolError::ExpectedDollar(b'*'),
    );
}

#[test]
fn too_big_lines() {
    let limits = Limits::default();
    let mut inline = vec![b'a'; limits.inline_max_size];
    incomplete(&inline);
    inline.push(b'a');
    err(&inline, ProtocolError::TooBigInlineRequest);
    // A long line that arrived whole is accepted.
    inline.extend_from_slice(b" b\r\n");
    assert_eq!(parse(&inline).unwrap().unwrap().1.len(), 2);

    let mut count = b"*".to_vec();
    count.resize(limits.inline_max_size, b'1');
    incomplete(&count);
    count.push(b'1');
    err(&count, ProtocolError::TooBigMbulkCountString);

    let mut bulk = b"*1\r\n$".to_vec();
    bulk.resize(4 + limits.inline_max_size, b'1');
    incomplete(&bulk);
    bulk.push(b'1');
    err(&bulk, ProtocolError::TooBigBulkCountString);
}

#[test]
fn unauthenticated() {
    let limits = Limits::default();
    let mut req = Request::new();
    req.set_auth_required(true);
    assert_eq!(
        req.parse(b"*11\r\n", &limits),
        Err(ProtocolError::UnauthenticatedMultibulkLength)
    );
    assert_eq!(req.parse(b"*10\r\n", &limits), Ok(None));
    req.reset();
    assert_eq!(
        req.parse(b"*1\r\n$16385\r\n", &limits),
        Err(ProtocolError::UnauthenticatedBulkLength)
    );
    assert_eq!(req.parse(b"*1\r\n$16384\r\n", &limits), Ok(None));
    req.reset();
    // Invalid lengths are reported before the authentication check.
    assert_eq!(
        req.parse(b"*-1x\r\n", &limits),
        Err(ProtocolError::InvalidMultibulkLength)
    );
}

#[test]
fn inline() {
    ok(b"PING\r\n", &[b"PING"]);
    ok(b"PING\n", &[b"PING"]);
    ok(b"  SET  k\tv  \r\n", &[b"SET", b"k", b"v"]);
    ok(b"SET k \"a b\"\r\n", &[b"SET", b"k", b"a b"]);
    ok(b"SET k 'a b'\r\n", &[b"SET", b"k", b"a b"]);
    ok(
        b"SET k \"\\x41\\x4a\\n\\r\\t\\b\\a\\\\\\\"\\q\"\r\n",
        &[b"SET", b"k", b"AJ\n\r\t\x08\x07\\\"q"],
    );
    ok(b"\"\\xzz\"\r\n", &[b"xzz"]);
    ok(b"'it\\'s' '\\n'\r\n", &[b"it's", b"\\n"]);
    ok(b"\"\" ''\r\n", &[b"", b""]);
    ok(b"foo\"bar\" x\r\n", &[b"foobar", b"x"]);
    // Only space, tab, CR, LF end an unquoted argument; any C space follows a quote.
    ok(b"a\x0bb \"c\"\x0c\r\n", &[b"a\x0bb", b"c"]);
    ok(b"a\rb\r\n", &[b"a", b"b"]);
    ok(b"\xff\xfe\n", &[b"\xff\xfe"]);
    assert_eq!(parse(b"PING\r\nPING\r\n"), Ok(Some((6, args(&[b"PING"])))));
}

#[test]
fn unbalanced_quotes() {
    for bad in [
        &b"SET \"a\r\n"[..],
        b"'a\r\n",
        b"\"a\"b\r\n",
        b"'a'b\r\n",
        b"\"a\\\"\r\n",
        b"\"\\\r\n",
    ] {
        err(bad, ProtocolError::UnbalancedQuotes);
    }
}

#[test]
fn string2ll_is_redis() {
    assert_eq!(string2ll(b"0"), Some(0));
    assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
    assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
    for bad in [
        &b""[..],
        b"-",
        b"00",
        b"-0",
        b"+1",
        b"1a",
        b"9223372036854775808",
        b"123456789012345678901",
    ] {
        assert_eq!(string2ll(bad), None, "{bad:?}");
    }
}

/// Feeding a request byte by byte (resuming) and as fresh prefixes gives the result the
/// whole request gives.
fn check_splits(buf: &[u8]) {
    let limits = Limits::default();
    let whole = parse(buf);
    let mut resumed = Request::new();
    for k in 0..=buf.len() {
        let prefix = &buf[..k];
        let fresh = parse(prefix);
        let again = resumed
            .parse(prefix, &limits)
            .map(|r| r.map(|n| (n, resumed.args(prefix).map(<[u8]>::to_vec).collect())));
        assert_eq!(fresh, again, "{buf:?} at {k}");
        match fresh {
            Ok(None) => {}
            other => {
                assert_eq!(other, whole, "{buf:?} at {k}");
                return;
            }
        }
    }
    assert_eq!(whole, Ok(None));
}

#[test]
fn every_split_gives_the_same_result() {
    let cases: &[&[u8]] = &[
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$0\r\n\r\n",
        b"*0\r\n",
        b"*-1\r\n",
        b"*1\r\nx\r\n",
        b"*x\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$999999999999\r\n",
        b"*1\rX$3\r\nfooXY",
        b"SET k \"a b\" 'c'\r\n",
        b"SET k \"a\r\n",
        b"PING\n",
        b"\r\n",
        b"PI\0NG\r\n",
        b"*2\r\n$1\r\na\r\n",
    ];
    for case in cases {
        check_splits(case);
    }
}
