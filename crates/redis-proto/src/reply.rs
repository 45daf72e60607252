//! Appending replies to an output buffer, byte for byte as Redis 7.0's `addReply*` writes
//! them, for protocol 2 (RESP2) or 3 (RESP3).
//!
//! A reply is written piece by piece: an aggregate is its header ([`Reply::array_len`],
//! [`Reply::map_len`]...) followed by its elements. Where RESP2 has no such type, Redis's
//! RESP2 form is written: a map is a flat array of twice its length, a set and a push an
//! array, a double, a verbatim string and a big number a bulk string, a boolean the integer
//! 1 or 0, a null `$-1` (or `*-1` for a null array).
//!
//! Doubles are formatted as Redis 7.0 formats them, `%.17g` (`0.1` is `0.10000000000000001`),
//! with `inf`, `-inf`, `nan` and `-nan`; Redis 7.2 and later write the shortest form that
//! reads back the same (`0.1`).

/// The protocol version a client chose (`HELLO 2` / `HELLO 3`); 2 until it says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

impl Protocol {
    /// The protocol `HELLO <version>` asks for: 2 or 3, else `None`.
    pub fn from_version(version: i64) -> Option<Self> {
        match version {
            2 => Some(Self::Resp2),
            3 => Some(Self::Resp3),
            _ => None,
        }
    }
}

/// Appends replies to `out` for one protocol version. Methods chain.
///
/// A reply may be given a limit ([`Reply::limited`]): once `out` holds more than it, every
/// later append is dropped, as Redis drops the output of a client past its
/// `client-output-buffer-limit` (it is closed without it). The caller sees it with
/// [`Reply::over_limit`] or `out.len() > limit`; a command producing a large reply keeps
/// running, but the buffer stops growing.
#[derive(Debug)]
pub struct Reply<'a> {
    out: &'a mut Vec<u8>,
    proto: Protocol,
    limit: usize,
}

/// Appends the decimal form of `v`.
pub(crate) fn push_decimal(out: &mut Vec<u8>, v: i64) {
    let mut digits = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[i..]);
}

fn push_len(out: &mut Vec<u8>, prefix: u8, len: usize) {
    out.push(prefix);
    push_decimal(out, i64::try_from(len).unwrap_or(i64::MAX));
    out.extend_from_slice(b"\r\n");
}

/// Appends `s` with `\r` and `\n` turned into spaces, as Redis keeps status and error lines
/// one line.
fn push_line(out: &mut Vec<u8>, s: &[u8]) {
    out.extend(
        s.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// Appends `d` as C's `printf("%.17g")` writes it (glibc: `inf`, `-inf`, `nan`, `-nan`).
pub(crate) fn push_double_text(out: &mut Vec<u8>, d: f64) {
    const PRECISION: i32 = 17;
    if d.is_sign_negative() {
        out.push(b'-');
    }
    if d.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if d.is_infinite() {
        out.extend_from_slice(b"inf");
        return;
    }
    // Seventeen significant digits, correctly rounded, and the decimal exponent.
    let sci = format!("{:.16e}", d.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    if !(-4..PRECISION).contains(&exp) {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        if exp.abs() < 10 {
            out.push(b'0');
        }
        push_decimal(out, i64::from(exp.abs()));
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        for i in 0..int_len {
            out.push(digits.get(i).copied().unwrap_or(b'0'));
        }
        if digits.len() > int_len {
            out.push(b'.');
            out.extend_from_slice(&digits[int_len..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        for _ in 0..(-exp - 1) {
            out.push(b'0');
        }
        out.extend_from_slice(&digits);
    }
}

impl<'a> Reply<'a> {
    pub fn new(out: &'a mut Vec<u8>, proto: Protocol) -> Self {
        Self {
            out,
            proto,
            limit: usize::MAX,
        }
    }

    /// A reply whose appends stop once `out` holds more than `limit` bytes.
    pub fn limited(out: &'a mut Vec<u8>, proto: Protocol, limit: usize) -> Self {
        Self { out, proto, limit }
    }

    /// `out` passed the limit: nothing more is appended.
    #[inline]
    pub fn over_limit(&self) -> bool {
        self.out.len() > self.limit
    }

    pub fn protocol(&self) -> Protocol {
        self.proto
    }

    fn resp3(&self) -> bool {
        self.proto == Protocol::Resp3
    }

    /// `+<s>` (a status such as `OK`, `PONG`, `QUEUED`).
    pub fn simple(&mut self, s: &[u8]) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        self.out.push(b'+');
        push_line(self.out, s);
        self
    }

    /// An error as Redis's `addReplyError` sends it: `-ERR <msg>`, or `msg` as it is when it
    /// begins with `-` (its own code, as in `-WRONGTYPE ...`).
    pub fn error(&mut self, msg: &[u8]) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        if msg.first() != Some(&b'-') {
            self.out.extend_from_slice(b"-ERR ");
        }
        push_line(self.out, msg);
        self
    }

    /// `-<code> <msg>`, e.g. `error_code("WRONGTYPE", b"Operation against a key holding the
    /// wrong kind of value")`.
    pub fn error_code(&mut self, code: &str, msg: &[u8]) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        self.out.push(b'-');
        self.out.extend_from_slice(code.as_bytes());
        self.out.push(b' ');
        push_line(self.out, msg);
        self
    }

    /// `:<n>`.
    pub fn integer(&mut self, n: i64) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        self.out.push(b':');
        push_decimal(self.out, n);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// `$<len>\r\n<bytes>`.
    pub fn bulk(&mut self, bytes: &[u8]) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        push_len(self.out, b'$', bytes.len());
        self.out.extend_from_slice(bytes);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// A missing value: `$-1` (RESP2), `_` (RESP3).
    pub fn null(&mut self) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        self.out
            .extend_from_slice(if self.resp3() { b"_\r\n" } else { b"$-1\r\n" });
        self
    }

    /// A missing aggregate: `*-1` (RESP2), `_` (RESP3).
    pub fn null_array(&mut self) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        self.out
            .extend_from_slice(if self.resp3() { b"_\r\n" } else { b"*-1\r\n" });
        self
    }

    /// An array of `len` elements, which follow.
    pub fn array_len(&mut self, len: usize) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        push_len(self.out, b'*', len);
        self
    }

    /// A map of `len` pairs (key then value follow): `%<len>` (RESP3), `*<2 len>` (RESP2).
    pub fn map_len(&mut self, len: usize) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        if self.resp3() {
            push_len(self.out, b'%', len);
        } else {
            push_len(self.out, b'*', len.saturating_mul(2));
        }
        self
    }

    /// A set of `len` elements: `~<len>` (RESP3), `*<len>` (RESP2).
    pub fn set_len(&mut self, len: usize) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        push_len(self.out, if self.resp3() { b'~' } else { b'*' }, len);
        self
    }

    /// A push message of `len` elements (Pub/Sub, invalidation): `><len>` (RESP3), `*<len>`
    /// (RESP2).
    pub fn push_len(&mut self, len: usize) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        push_len(self.out, if self.resp3() { b'>' } else { b'*' }, len);
        self
    }

    /// `,<d>` (RESP3) or the same text as a bulk string (RESP2).
    pub fn double(&mut self, d: f64) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        if self.resp3() {
            self.out.push(b',');
            push_double_text(self.out, d);
            self.out.extend_from_slice(b"\r\n");
        } else {
            let mut text = Vec::with_capacity(24);
            push_double_text(&mut text, d);
            self.bulk(&text);
        }
        self
    }

    /// A double already written as text (`text`, as Redis formats it for the command):
    /// `,<text>` (RESP3) or a bulk string (RESP2).
    pub fn double_text(&mut self, text: &[u8]) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        if self.resp3() {
            self.out.push(b',');
            self.out.extend_from_slice(text);
            self.out.extend_from_slice(b"\r\n");
            self
        } else {
            self.bulk(text)
        }
    }

    /// `#t` / `#f` (RESP3), `:1` / `:0` (RESP2).
    pub fn boolean(&mut self, b: bool) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        if self.resp3() {
            self.out
                .extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
            self
        } else {
            self.integer(i64::from(b))
        }
    }

    /// `=<len>\r\n<ext>:<text>` (RESP3; `ext` is cut or padded with spaces to three bytes,
    /// e.g. `txt`), a bulk string of `text` (RESP2).
    pub fn verbatim(&mut self, ext: &[u8], text: &[u8]) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        if !self.resp3() {
            return self.bulk(text);
        }
        push_len(self.out, b'=', text.len().saturating_add(4));
        for i in 0..3 {
            self.out.push(ext.get(i).copied().unwrap_or(b' '));
        }
        self.out.push(b':');
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// `(<digits>` (RESP3), a bulk string of the digits (RESP2).
    pub fn big_number(&mut self, digits: &[u8]) -> &mut Self {
        if self.over_limit() {
            return self;
        }
        if !self.resp3() {
            return self.bulk(digits);
        }
        self.out.push(b'(');
        self.out.extend_from_slice(digits);
        self.out.extend_from_slice(b"\r\n");
        self
    }
}

/// The length of the first reply written in `buf` (`None`: incomplete or not RESP): how a
/// run of replies written one after the other is split back into each command's.
pub fn reply_len(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    // Replies still to skip (aggregates add their elements).
    let mut left: u64 = 1;
    while left > 0 {
        left -= 1;
        let kind = *buf.get(at)?;
        let end = at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        let line = buf.get(at + 1..end)?;
        at = end + 2;
        let n = || -> Option<i64> { std::str::from_utf8(line).ok()?.parse().ok() };
        match kind {
            b'$' | b'=' | b'!' => {
                let n = n()?;
                if n >= 0 {
                    at = at.checked_add(usize::try_from(n).ok()?)?.checked_add(2)?;
                }
            }
            b'*' | b'~' | b'>' => {
                let n = n()?;
                left = left.checked_add(u64::try_from(n).unwrap_or(0))?;
            }
            b'%' | b'|' => {
                let n = n()?;
                left = left.checked_add(u64::try_from(n).unwrap_or(0).checked_mul(2)?)?;
                // An attribute precedes the reply it describes.
                if kind == b'|' {
                    left += 1;
                }
            }
            _ => {}
        }
    }
    (at <= buf.len()).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::{push_double_text, reply_len, Protocol, Reply};

    fn both(f: impl Fn(&mut Reply<'_>)) -> (Vec<u8>, Vec<u8>) {
        let (mut two, mut three) = (Vec::new(), Vec::new());
        f(&mut Reply::new(&mut two, Protocol::Resp2));
        f(&mut Reply::new(&mut three, Protocol::Resp3));
        (two, three)
    }

    fn check(f: impl Fn(&mut Reply<'_>), resp2: &[u8], resp3: &[u8]) {
        let (two, three) = both(f);
        assert_eq!(
            String::from_utf8_lossy(&two),
            String::from_utf8_lossy(resp2)
        );
        assert_eq!(
            String::from_utf8_lossy(&three),
            String::from_utf8_lossy(resp3)
        );
    }

    #[test]
    fn reply_lengths() {
        assert_eq!(reply_len(b"+OK\r\nrest"), Some(5));
        assert_eq!(reply_len(b"$3\r\nabc\r\n"), Some(9));
        assert_eq!(reply_len(b"$-1\r\n"), Some(5));
        assert_eq!(reply_len(b"*-1\r\n"), Some(5));
        assert_eq!(reply_len(b"*2\r\n:1\r\n*0\r\n:9\r\n"), Some(12));
        assert_eq!(reply_len(b"=7\r\ntxt:abc\r\n"), Some(13));
        assert_eq!(reply_len(b"%1\r\n+a\r\n,1.5\r\n"), Some(14));
        assert_eq!(reply_len(b"*2\r\n:1\r\n"), None);
        assert_eq!(reply_len(b"$5\r\nab"), None);
        assert_eq!(reply_len(b"*9999999999999999999\r\n"), None);
        assert_eq!(reply_len(b""), None);
    }

    #[test]
    fn scalars() {
        check(
            |r| {
                r.simple(b"OK");
            },
            b"+OK\r\n",
            b"+OK\r\n",
        );
        check(
            |r| {
                r.simple(b"a\r\nb");
            },
            b"+a  b\r\n",
            b"+a  b\r\n",
        );
        check(
            |r| {
                r.error(b"unknown command");
            },
            b"-ERR unknown command\r\n",
            b"-ERR unknown command\r\n",
        );
        check(
            |r| {
                r.error(b"-NOAUTH Authentication required.");
            },
            b"-NOAUTH Authentication required.\r\n",
            b"-NOAUTH Authentication required.\r\n",
        );
        check(
            |r| {
                r.error(b"");
            },
            b"-ERR \r\n",
            b"-ERR \r\n",
        );
        check(
            |r| {
                r.error_code(
                    "WRONGTYPE",
                    b"Operation against a key holding the wrong kind of value",
                );
            },
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        check(
            |r| {
                r.integer(i64::MIN);
            },
            b":-9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
        );
        check(
            |r| {
                r.integer(0);
            },
            b":0\r\n",
            b":0\r\n",
        );
        check(
            |r| {
                r.bulk(b"");
            },
            b"$0\r\n\r\n",
            b"$0\r\n\r\n",
        );
        check(
            |r| {
                r.bulk(b"a\r\nb");
            },
            b"$4\r\na\r\nb\r\n",
            b"$4\r\na\r\nb\r\n",
        );
        check(
            |r| {
                r.null();
            },
            b"$-1\r\n",
            b"_\r\n",
        );
        check(
            |r| {
                r.null_array();
            },
            b"*-1\r\n",
            b"_\r\n",
        );
        check(
            |r| {
                r.boolean(true);
            },
            b":1\r\n",
            b"#t\r\n",
        );
        check(
            |r| {
                r.boolean(false);
            },
            b":0\r\n",
            b"#f\r\n",
        );
        check(
            |r| {
                r.verbatim(b"txt", b"hi");
            },
            b"$2\r\nhi\r\n",
            b"=6\r\ntxt:hi\r\n",
        );
        check(
            |r| {
                r.verbatim(b"m", b"");
            },
            b"$0\r\n\r\n",
            b"=4\r\nm  :\r\n",
        );
        check(
            |r| {
                r.big_number(b"-12345678901234567890");
            },
            b"$21\r\n-12345678901234567890\r\n",
            b"(-12345678901234567890\r\n",
        );
    }

    #[test]
    fn aggregates() {
        check(
            |r| {
                r.array_len(2).bulk(b"a").integer(1);
            },
            b"*2\r\n$1\r\na\r\n:1\r\n",
            b"*2\r\n$1\r\na\r\n:1\r\n",
        );
        check(
            |r| {
                r.map_len(1).bulk(b"k").bulk(b"v");
            },
            b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n",
            b"%1\r\n$1\r\nk\r\n$1\r\nv\r\n",
        );
        check(
            |r| {
                r.set_len(0);
            },
            b"*0\r\n",
            b"~0\r\n",
        );
        check(
            |r| {
                r.push_len(3);
            },
            b"*3\r\n",
            b">3\r\n",
        );
    }

    #[test]
    fn a_limited_reply_stops_growing_past_its_limit() {
        let mut out = Vec::new();
        let mut r = Reply::limited(&mut out, Protocol::Resp2, 20);
        r.array_len(3).bulk(b"abcdef");
        assert!(!r.over_limit());
        // This one passes the limit: it is written, nothing after it.
        r.bulk(b"ghijkl");
        assert!(r.over_limit());
        r.bulk(b"mnopqr").integer(1).null();
        assert_eq!(out, b"*3\r\n$6\r\nabcdef\r\n$6\r\nghijkl\r\n");
        // Unlimited by default.
        let mut out = Vec::new();
        let mut r = Reply::new(&mut out, Protocol::Resp2);
        for _ in 0..100 {
            r.bulk(b"0123456789");
        }
        assert!(!r.over_limit());
        assert_eq!(out.len(), 1700);
    }

    #[test]
    fn doubles() {
        check(
            |r| {
                r.double(1.5);
            },
            b"$3\r\n1.5\r\n",
            b",1.5\r\n",
        );
        check(
            |r| {
                r.double(f64::INFINITY);
            },
            b"$3\r\ninf\r\n",
            b",inf\r\n",
        );
        check(
            |r| {
                r.double(f64::NEG_INFINITY);
            },
            b"$4\r\n-inf\r\n",
            b",-inf\r\n",
        );
        check(
            |r| {
                r.double(f64::NAN);
            },
            b"$3\r\nnan\r\n",
            b",nan\r\n",
        );
        let text = |d: f64| {
            let mut v = Vec::new();
            push_double_text(&mut v, d);
            String::from_utf8(v).unwrap()
        };
        // What glibc's printf("%.17g") writes.
        for (d, s) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (0.1, "0.10000000000000001"),
            (2.675, "2.6749999999999998"),
            (-2.5, "-2.5"),
            (100.0, "100"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (1.5e300, "1.5000000000000001e+300"),
            (1e-4, "0.0001"),
            (1e-5, "1.0000000000000001e-05"),
            (123_456_789.125, "123456789.125"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "4.9406564584124654e-324"),
            (-f64::NAN, "-nan"),
        ] {
            assert_eq!(text(d), s, "{d:e}");
        }
    }
}
