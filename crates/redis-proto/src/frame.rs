//! A value for any RESP2/RESP3 reply and a parser of what a server sends, for tests and for
//! differential checks against `redis-server` (compare with `src/resp_parser.c`).
//!
//! The parser is strict: every line ends with `\r\n`, numbers are written as Redis writes
//! them (no `+`, no leading zeros), and the only negative length is `-1` (RESP2's nulls).
//! It refuses streamed aggregates (`*?`) and nesting deeper than [`MAX_DEPTH`]. It allocates
//! what it returns, and never panics.

use thiserror::Error;

use crate::reply::push_decimal;
use crate::request::string2ll;

/// Deepest nesting of aggregates [`Frame::parse`] accepts.
pub const MAX_DEPTH: usize = 128;

/// One reply value. Doubles keep their text (`3.14`, `inf`, `nan`), so that frames compare
/// exactly and the text a server wrote can be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// `+OK`
    Simple(Vec<u8>),
    /// `-ERR ...` (without the `-`).
    Error(Vec<u8>),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// RESP2's null bulk string, `$-1`.
    NullBulk,
    /// RESP2's null array, `*-1`.
    NullArray,
    /// RESP3's null, `_`.
    Null,
    /// `*<n>`
    Array(Vec<Frame>),
    /// RESP3 `%<n>`: pairs of key and value.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~<n>`
    Set(Vec<Frame>),
    /// RESP3 `|<n>`: attributes, pairs, which precede the reply they describe.
    Attribute(Vec<(Frame, Frame)>),
    /// RESP3 `><n>`
    Push(Vec<Frame>),
    /// RESP3 `,<text>`
    Double(Vec<u8>),
    /// RESP3 `#t` / `#f`
    Boolean(bool),
    /// RESP3 `=<n>\r\n<format>:<text>`
    Verbatim { format: [u8; 3], text: Vec<u8> },
    /// RESP3 `(<digits>`
    BigNumber(Vec<u8>),
    /// RESP3 `!<n>\r\n<bytes>`
    BlobError(Vec<u8>),
}

/// Bytes that are no valid reply.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FrameError {
    #[error("unknown reply type byte {0:#04x}")]
    UnknownType(u8),
    #[error("malformed reply: {0}")]
    Malformed(&'static str),
    #[error("replies nested deeper than {MAX_DEPTH}")]
    TooDeep,
}

type Step<T> = Result<Option<(T, usize)>, FrameError>;

/// The line starting at `pos` (without its `\r\n`) and the position after it.
fn line(buf: &[u8], pos: usize) -> Step<&[u8]> {
    let rest = buf.get(pos..).unwrap_or_default();
    let Some(cr) = rest.iter().position(|&b| b == b'\r') else {
        return Ok(None);
    };
    match rest.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some((&rest[..cr], pos + cr + 2))),
        Some(_) => Err(FrameError::Malformed("line without \\n after \\r")),
    }
}

/// A length: non-negative, or `-1` (`None`) where `null_ok`.
fn length(text: &[u8], null_ok: bool) -> Result<Option<usize>, FrameError> {
    match string2ll(text) {
        Some(-1) if null_ok => Ok(None),
        Some(n) if n >= 0 => usize::try_from(n)
            .map(Some)
            .map_err(|_| FrameError::Malformed("length too large")),
        _ => Err(FrameError::Malformed("invalid length")),
    }
}

/// `len` bytes at `pos` followed by `\r\n`.
fn blob(buf: &[u8], pos: usize, len: usize) -> Step<&[u8]> {
    let Some(end) = pos.checked_add(len) else {
        return Err(FrameError::Malformed("length too large"));
    };
    if buf.len() < end.saturating_add(2) {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(FrameError::Malformed("blob without \\r\\n"));
    }
    Ok(Some((&buf[pos..end], end + 2)))
}

fn elements(buf: &[u8], mut pos: usize, n: usize, depth: usize) -> Step<Vec<Frame>> {
    let mut items = Vec::with_capacity(n.min(buf.len().saturating_sub(pos) / 3));
    for _ in 0..n {
        let Some((item, next)) = parse_at(buf, pos, depth + 1)? else {
            return Ok(None);
        };
        items.push(item);
        pos = next;
    }
    Ok(Some((items, pos)))
}

fn pairs(buf: &[u8], pos: usize, n: usize, depth: usize) -> Step<Vec<(Frame, Frame)>> {
    let Some(count) = n.checked_mul(2) else {
        return Err(FrameError::Malformed("length too large"));
    };
    let Some((flat, pos)) = elements(buf, pos, count, depth)? else {
        return Ok(None);
    };
    let mut it = flat.into_iter();
    let mut out = Vec::with_capacity(n);
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Ok(Some((out, pos)))
}

fn parse_at(buf: &[u8], pos: usize, depth: usize) -> Step<Frame> {
    if depth > MAX_DEPTH {
        return Err(FrameError::TooDeep);
    }
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let Some((text, next)) = line(buf, pos + 1)? else {
        return Ok(None);
    };
    let done = |f: Frame| Ok(Some((f, next)));
    match kind {
        b'+' => done(Frame::Simple(text.to_vec())),
        b'-' => done(Frame::Error(text.to_vec())),
        b':' => match string2ll(text) {
            Some(n) => done(Frame::Integer(n)),
            None => Err(FrameError::Malformed("invalid integer")),
        },
        b'_' if text.is_empty() => done(Frame::Null),
        b'#' => match text {
            b"t" => done(Frame::Boolean(true)),
            b"f" => done(Frame::Boolean(false)),
            _ => Err(FrameError::Malformed("invalid boolean")),
        },
        b',' if !text.is_empty() => done(Frame::Double(text.to_vec())),
        b'(' if string2ll(text).is_some() || is_big_number(text) => {
            done(Frame::BigNumber(text.to_vec()))
        }
        b'$' | b'!' | b'=' => {
            let Some(len) = length(text, kind == b'$')? else {
                return done(Frame::NullBulk);
            };
            let Some((data, after)) = blob(buf, next, len)? else {
                return Ok(None);
            };
            let frame = match kind {
                b'$' => Frame::Bulk(data.to_vec()),
                b'!' => Frame::BlobError(data.to_vec()),
                _ => match data {
                    [a, b, c, b':', text @ ..] => Frame::Verbatim {
                        format: [*a, *b, *c],
                        text: text.to_vec(),
                    },
                    _ => return Err(FrameError::Malformed("verbatim string without its format")),
                },
            };
            Ok(Some((frame, after)))
        }
        b'*' | b'~' | b'>' => {
            let Some(n) = length(text, kind == b'*')? else {
                return done(Frame::NullArray);
            };
            let Some((items, after)) = elements(buf, next, n, depth)? else {
                return Ok(None);
            };
            let frame = match kind {
                b'*' => Frame::Array(items),
                b'~' => Frame::Set(items),
                _ => Frame::Push(items),
            };
            Ok(Some((frame, after)))
        }
        b'%' | b'|' => {
            let Some(n) = length(text, false)? else {
                return Err(FrameError::Malformed("invalid length"));
            };
            let Some((items, after)) = pairs(buf, next, n, depth)? else {
                return Ok(None);
            };
            Ok(Some((
                if kind == b'%' {
                    Frame::Map(items)
                } else {
                    Frame::Attribute(items)
                },
                after,
            )))
        }
        b'_' | b',' | b'(' => Err(FrameError::Malformed("invalid RESP3 scalar")),
        other => Err(FrameError::UnknownType(other)),
    }
}

fn is_big_number(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

fn push_header(out: &mut Vec<u8>, prefix: u8, n: usize) {
    out.push(prefix);
    push_decimal(out, i64::try_from(n).unwrap_or(i64::MAX));
    out.extend_from_slice(b"\r\n");
}

impl Frame {
    /// Parses one reply from the front of `buf`: `Ok(None)` while incomplete, else the frame
    /// and the bytes it took.
    pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
        parse_at(buf, 0, 0)
    }

    /// Appends the frame's bytes. Simple strings, errors and doubles are written as they are
    /// (they must hold no `\r` or `\n` to parse back).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let line = |out: &mut Vec<u8>, prefix: u8, text: &[u8]| {
            out.push(prefix);
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        };
        let blob = |out: &mut Vec<u8>, prefix: u8, data: &[u8]| {
            push_header(out, prefix, data.len());
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        };
        match self {
            Frame::Simple(s) => line(out, b'+', s),
            Frame::Error(s) => line(out, b'-', s),
            Frame::Integer(n) => {
                out.push(b':');
                push_decimal(out, *n);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Bulk(data) => blob(out, b'$', data),
            Frame::BlobError(data) => blob(out, b'!', data),
            Frame::NullBulk => out.extend_from_slice(b"$-1\r\n"),
            Frame::NullArray => out.extend_from_slice(b"*-1\r\n"),
            Frame::Null => out.extend_from_slice(b"_\r\n"),
            Frame::Double(text) => line(out, b',', text),
            Frame::Boolean(b) => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Frame::BigNumber(digits) => line(out, b'(', digits),
            Frame::Verbatim { format, text } => {
                push_header(out, b'=', text.len() + 4);
                out.extend_from_slice(format);
                out.push(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
                let prefix = match self {
                    Frame::Array(_) => b'*',
                    Frame::Set(_) => b'~',
                    _ => b'>',
                };
                push_header(out, prefix, items.len());
                for item in items {
                    item.encode(out);
                }
            }
            Frame::Map(items) | Frame::Attribute(items) => {
                push_header(
                    out,
                    if matches!(self, Frame::Map(_)) {
                        b'%'
                    } else {
                        b'|'
                    },
                    items.len(),
                );
                for (k, v) in items {
                    k.encode(out);
                    v.encode(out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Frame, FrameError, MAX_DEPTH};

    fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
        Frame::parse(buf)
    }

    fn whole(buf: &[u8], frame: &Frame) {
        assert_eq!(
            parse(buf),
            Ok(Some((frame.clone(), buf.len()))),
            "{:?}",
            String::from_utf8_lossy(buf)
        );
        let mut out = Vec::new();
        frame.encode(&mut out);
        assert_eq!(out, buf);
        for k in 0..buf.len() {
            assert_eq!(
                parse(&buf[..k]),
                Ok(None),
                "prefix {k} of {:?}",
                String::from_utf8_lossy(buf)
            );
        }
    }

    #[test]
    fn every_type() {
        whole(b"+OK\r\n", &Frame::Simple(b"OK".to_vec()));
        whole(b"-ERR x\r\n", &Frame::Error(b"ERR x".to_vec()));
        whole(b":-12\r\n", &Frame::Integer(-12));
        whole(b"$3\r\na\r\n\r\n", &Frame::Bulk(b"a\r\n".to_vec()));
        whole(b"$-1\r\n", &Frame::NullBulk);
        whole(b"*-1\r\n", &Frame::NullArray);
        whole(b"_\r\n", &Frame::Null);
        whole(
            b"*2\r\n:1\r\n$0\r\n\r\n",
            &Frame::Array(vec![Frame::Integer(1), Frame::Bulk(vec![])]),
        );
        whole(
            b"%1\r\n+k\r\n#t\r\n",
            &Frame::Map(vec![(Frame::Simple(b"k".to_vec()), Frame::Boolean(true))]),
        );
        whole(b"~1\r\n#f\r\n", &Frame::Set(vec![Frame::Boolean(false)]));
        whole(
            b"|1\r\n+a\r\n:1\r\n",
            &Frame::Attribute(vec![(Frame::Simple(b"a".to_vec()), Frame::Integer(1))]),
        );
        whole(b">1\r\n_\r\n", &Frame::Push(vec![Frame::Null]));
        whole(b",-inf\r\n", &Frame::Double(b"-inf".to_vec()));
        whole(
            b"=6\r\ntxt:hi\r\n",
            &Frame::Verbatim {
                format: *b"txt",
                text: b"hi".to_vec(),
            },
        );
        whole(
            b"(123456789012345678901234567890\r\n",
            &Frame::BigNumber(b"123456789012345678901234567890".to_vec()),
        );
        whole(b"!3\r\nERR\r\n", &Frame::BlobError(b"ERR".to_vec()));
    }

    #[test]
    fn malformed() {
        for bad in [
            &b"?x\r\n"[..],
            b"+OK\rX",
            b":01\r\n",
            b":x\r\n",
            b"$-2\r\n",
            b"$3\r\nabcde",
            b"%-1\r\n",
            b"~-1\r\n",
            b"#x\r\n",
            b"_x\r\n",
            b",\r\n",
            b"(1a\r\n",
            b"=2\r\nab\r\n",
            b"*?\r\n",
            b"$99999999999999999999\r\n",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse(b"$9223372036854775807\r\n"), Ok(None));
    }

    #[test]
    fn depth_is_bounded() {
        let deep = b"*1\r\n".repeat(100_000);
        assert_eq!(parse(&deep), Err(FrameError::TooDeep));
        let ok = [b"*1\r\n".repeat(MAX_DEPTH), b":1\r\n".to_vec()].concat();
        assert!(matches!(parse(&ok), Ok(Some(_))));
    }

    #[test]
    fn huge_counts_do_not_allocate_up_front() {
        assert_eq!(parse(b"*2147483647\r\n:1\r\n"), Ok(None));
        assert_eq!(parse(b"%4611686018427387904\r\n"), Ok(None));
    }
}
