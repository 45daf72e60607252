#![forbid(unsafe_code)]
//! Property tests: requests and frames survive encoding and parsing, replies parse as the
//! frames they claim, and no input makes a parser panic.

use manifold_redis_proto::{Frame, Limits, Protocol, Reply, Request};
use proptest::collection::vec;
use proptest::prelude::*;

fn multibulk(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// An inline line that `sdssplitargs` reads back as `args`: every argument quoted, every
/// byte that is not plain ASCII written `\xHH`.
fn inline(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for a in args {
        out.push(b'"');
        for &b in a {
            if b.is_ascii_alphanumeric() || b == b' ' {
                out.push(b);
            } else {
                out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
            }
        }
        out.extend_from_slice(b"\" ");
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn parse_all(req: &mut Request, buf: &[u8]) -> Option<(usize, Vec<Vec<u8>>)> {
    let n = req.parse(buf, &Limits::default()).expect("valid request")?;
    Some((n, req.args(buf).map(<[u8]>::to_vec).collect()))
}

fn frame() -> impl Strategy<Value = Frame> {
    let line = || {
        vec(
            any::<u8>().prop_filter("no line end", |b| *b != b'\r' && *b != b'\n'),
            0..12,
        )
    };
    let leaf = prop_oneof![
        line().prop_map(Frame::Simple),
        line().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        vec(any::<u8>(), 0..20).prop_map(Frame::Bulk),
        vec(any::<u8>(), 0..20).prop_map(Frame::BlobError),
        Just(Frame::NullBulk),
        Just(Frame::NullArray),
        Just(Frame::Null),
        any::<f64>().prop_map(|d| {
            let mut out = Vec::new();
            Reply::new(&mut out, Protocol::Resp3).double(d);
            Frame::Double(out[1..out.len() - 2].to_vec())
        }),
        any::<bool>().prop_map(Frame::Boolean),
        (any::<[u8; 3]>(), vec(any::<u8>(), 0..20))
            .prop_map(|(format, text)| Frame::Verbatim { format, text }),
        "-?[1-9][0-9]{0,40}".prop_map(|s| Frame::BigNumber(s.into_bytes())),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Frame::Array),
            vec(inner.clone(), 0..6).prop_map(Frame::Set),
            vec(inner.clone(), 0..6).prop_map(Frame::Push),
            vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            vec((inner.clone(), inner), 0..4).prop_map(Frame::Attribute),
        ]
    })
}

/// Bytes made of protocol pieces, to reach the parsers' deeper states more often than
/// uniform noise does.
fn protocol_noise() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"*".to_vec()),
        Just(b"$".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"'".to_vec()),
        Just(b"\\x".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"\0".to_vec()),
        "[0-9]{1,3}".prop_map(String::into_bytes),
        "[%~>|=!(,#_:+-]".prop_map(String::into_bytes),
        vec(any::<u8>(), 0..4),
    ];
    vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn multibulk_round_trip(args in vec(vec(any::<u8>(), 0..40), 1..8), cut in any::<prop::sample::Index>()) {
        let buf = multibulk(&args);
        let mut req = Request::new();
        // Any shorter prefix is incomplete; resuming on the whole gives the arguments.
        let k = cut.index(buf.len());
        prop_assert_eq!(parse_all(&mut req, &buf[..k]), None);
        prop_assert_eq!(parse_all(&mut req, &buf), Some((buf.len(), args.clone())));
        prop_assert!(!req.is_inline());
        // A second request behind it is left alone.
        let mut two = buf.clone();
        two.extend_from_slice(&buf);
        prop_assert_eq!(parse_all(&mut Request::new(), &two), Some((buf.len(), args)));
    }

    #[test]
    fn inline_round_trip(args in vec(vec(any::<u8>().prop_filter("no NUL", |b| *b != 0), 0..20), 1..6)) {
        let buf = inline(&args);
        let mut req = Request::new();
        prop_assert_eq!(parse_all(&mut req, &buf), Some((buf.len(), args)));
        prop_assert!(req.is_inline());
    }

    #[test]
    fn frames_round_trip(f in frame()) {
        let mut buf = Vec::new();
        f.encode(&mut buf);
        prop_assert_eq!(Frame::parse(&buf), Ok(Some((f, buf.len()))));
        for k in 0..buf.len() {
            prop_assert_eq!(Frame::parse(&buf[..k]), Ok(None));
        }
    }

    #[test]
    fn doubles_read_back(d in any::<f64>()) {
        let mut buf = Vec::new();
        Reply::new(&mut buf, Protocol::Resp3).double(d);
        let Ok(Some((Frame::Double(text), _))) = Frame::parse(&buf) else {
            return Err(TestCaseError::fail("not a double"));
        };
        let text = String::from_utf8(text).unwrap();
        if d.is_nan() {
            prop_assert!(text.ends_with("nan"));
        } else {
            prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), d.to_bits());
        }
        let mut two = Vec::new();
        Reply::new(&mut two, Protocol::Resp2).double(d);
        prop_assert_eq!(Frame::parse(&two), Ok(Some((Frame::Bulk(text.into_bytes()), two.len()))));
    }

    #[test]
    fn garbage_never_panics(bytes in prop_oneof![vec(any::<u8>(), 0..200), protocol_noise()]) {
        let small = Limits {
            proto_max_bulk_len: 64,
            max_multibulk_len: 8,
            inline_max_size: 16,
            client_query_buffer_limit: 128,
        };
        for limits in [Limits::default(), small] {
            let mut req = Request::new();
            req.set_auth_required(bytes.first().is_some_and(|b| b & 1 == 1));
            // Fed whole, and fed growing (resuming), from every start.
            for start in 0..bytes.len().min(8) {
                let buf = &bytes[start..];
                if let Ok(Some(n)) = req.parse(buf, &limits) {
                    prop_assert!(n <= buf.len());
                    prop_assert_eq!(req.args(buf).count(), req.len());
                }
                req.reset();
                for k in 0..=buf.len() {
                    match req.parse(&buf[..k], &limits) {
                        Ok(None) => prop_assert!(req.needed() > k),
                        _ => break,
                    }
                }
                req.reset();
            }
        }
        let _ = Frame::parse(&bytes);
    }

    #[test]
    fn resuming_on_other_bytes_never_panics(a in protocol_noise(), b in protocol_noise(), cut in any::<prop::sample::Index>()) {
        // A caller breaking the contract (the next buffer must begin with the same bytes)
        // gets nonsense, never a panic.
        let limits = Limits::default();
        let mut req = Request::new();
        let _ = req.parse(&a[..cut.index(a.len() + 1)], &limits);
        if let Ok(Some(n)) = req.parse(&b, &limits) {
            prop_assert!(n <= b.len());
            prop_assert_eq!(req.args(&b).count(), req.len());
        }
    }
}
