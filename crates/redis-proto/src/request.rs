//! One client request from the front of a buffer, as Redis 7.0 reads it
//! (`processMultibulkBuffer`, `processInlineBuffer` and `sdssplitargs`).
//!
//! A request starting with `*` is multibulk: `*<n>\r\n` then `n` times `$<len>\r\n<bytes>\r\n`.
//! Anything else is an inline request: one line (ended by `\n`, a `\r` before it is dropped)
//! split into arguments with double and single quotes and escapes.
//!
//! Redis's quirks are kept, because clients see them:
//! - the count and length lines end at their `\r`; the byte after it, and the two bytes after
//!   an argument, are skipped without being looked at;
//! - `*0`, `*-1` (any count `<= 0`), an empty line and a line of spaces are requests without
//!   arguments, which Redis ignores: [`Request::is_empty`];
//! - Redis searches for line ends with `strchr`, so a NUL byte before the end of a line hides
//!   it: the request stays incomplete until the line is longer than the inline limit;
//! - the inline limit applies only while a line end is missing: a longer line that arrived
//!   whole is accepted.
//!
//! Where manifold differs: Redis 7 accepts up to 2^31-1 arguments; [`Limits::max_multibulk_len`]
//! (default 1024*1024, Redis 6's limit) caps the ranges one request may hold. A request whose
//! whole size exceeds [`Limits::client_query_buffer_limit`] is refused as soon as an argument's
//! announced length says so (Redis moves large arguments out of its query buffer and would
//! take it): the request must fit the caller's buffer.

use std::ops::Range;

use crate::errors::ProtocolError;

/// The limits Redis applies to requests, with Redis's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest argument of a multibulk request (`proto-max-bulk-len`, 512 MiB).
    pub proto_max_bulk_len: u64,
    /// Most arguments of a multibulk request (1024*1024; see the module documentation).
    pub max_multibulk_len: u64,
    /// Longest inline request, count line or length line still missing its end
    /// (`PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub inline_max_size: usize,
    /// Largest request (`client-query-buffer-limit`, 1 GiB).
    pub client_query_buffer_limit: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            proto_max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: 1024 * 1024,
            inline_max_size: 64 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
        }
    }
}

/// Redis refuses more than this many arguments before the client authenticated.
const UNAUTHENTICATED_MAX_ARGS: i64 = 10;
/// Redis refuses arguments longer than this before the client authenticated.
const UNAUTHENTICATED_MAX_BULK: i64 = 16384;
/// `LONG_STR_SIZE`: `string2ll` refuses numbers of this many bytes or more.
const LONG_STR_SIZE: usize = 21;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Step {
    /// Nothing read of the request yet.
    #[default]
    Start,
    /// Looking for the end of an inline line.
    Inline,
    /// Looking for the `\r` of `*<n>`.
    Count,
    /// Looking for the `\r` of `$<len>` at `pos`.
    Header,
    /// Waiting for `len` bytes and two more at `pos`.
    Data(u64),
}

/// A parsed request: its arguments and where the parse stood. Keep one per connection and
/// reuse it; its vectors keep their capacity.
///
/// Arguments of a multibulk request are ranges into the buffer given to [`Request::parse`];
/// those of an inline request (which quotes and escapes may change) are copied into a buffer
/// the request keeps. Read them with [`Request::arg`] or [`Request::args`], passing the same
/// buffer.
#[derive(Debug, Default, Clone)]
pub struct Request {
    args: Vec<Range<usize>>,
    inline_bytes: Vec<u8>,
    inline: bool,
    step: Step,
    /// Start of the next element to read.
    pos: usize,
    /// Where the search for the current line's end resumes.
    scan: usize,
    /// Arguments still to read.
    remaining: u64,
    /// Buffer length a complete request needs at least, as far as known.
    needed: usize,
    auth_required: bool,
}

/// Where a line end search stopped.
enum Search {
    Found(usize),
    /// Not there yet: resume at this index.
    Missing(usize),
}

/// `strchr` from `from`: finds `target`, but stops (as not found) at a NUL byte, where it
/// will stop again next time.
fn find(buf: &[u8], from: usize, target: u8) -> Search {
    let rest = buf.get(from..).unwrap_or_default();
    match rest.iter().position(|&b| b == target || b == 0) {
        Some(i) if rest[i] == target => Search::Found(from + i),
        Some(i) => Search::Missing(from + i),
        None => Search::Missing(buf.len()),
    }
}

/// Redis's `string2ll`: an optional `-`, no leading zeros, no `+`, no spaces, fits an `i64`.
pub(crate) fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= LONG_STR_SIZE {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

impl Request {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the client must still authenticate: Redis then refuses more than 10 arguments
    /// and arguments longer than 16384 bytes. Off by default.
    pub fn set_auth_required(&mut self, required: bool) {
        self.auth_required = required;
    }

    /// Forgets a request in progress: the next [`Request::parse`] starts over.
    pub fn reset(&mut self) {
        self.step = Step::Start;
        self.args.clear();
        self.inline_bytes.clear();
        self.inline = false;
        self.pos = 0;
        self.scan = 0;
        self.remaining = 0;
        self.needed = 0;
    }

    /// Parses one request from the front of `buf`.
    ///
    /// - `Ok(None)`: incomplete; call again once more bytes have been appended.
    ///   [`Request::needed`] says how long the buffer must at least grow.
    /// - `Ok(Some(consumed))`: a whole request of `consumed` bytes; its arguments are
    ///   [`Request::args`] (none for a request Redis ignores).
    /// - `Err`: Redis would send [`ProtocolError::reply`] and close the connection.
    ///
    /// After `Ok(None)` the parse resumes where it stood, so the next call's `buf` must begin
    /// with the same bytes (it may have moved in memory); otherwise call [`Request::reset`].
    pub fn parse(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, ProtocolError> {
        if self.step == Step::Start || self.pos > buf.len() || self.scan > buf.len() {
            self.reset();
        }
        let result = self.step(buf, limits);
        match result {
            Ok(None) => {
                if buf.len() > limits.client_query_buffer_limit {
                    self.step = Step::Start;
                    return Err(ProtocolError::QueryBufferLimit {
                        needed: buf.len() as u64,
                        limit: limits.client_query_buffer_limit,
                    });
                }
                self.needed = self.needed.max(buf.len() + 1);
            }
            Ok(Some(_)) | Err(_) => self.step = Step::Start,
        }
        result
    }

    fn step(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, ProtocolError> {
        if self.step == Step::Start {
            match buf.first() {
                None => return Ok(None),
                Some(b'*') => self.step = Step::Count,
                Some(_) => self.step = Step::Inline,
            }
        }
        match self.step {
            Step::Inline => self.inline(buf, limits),
            _ => self.multibulk(buf, limits),
        }
    }

    fn inline(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, ProtocolError> {
        let newline = match find(buf, self.scan, b'\n') {
            Search::Found(i) => i,
            Search::Missing(resume) => {
                self.scan = resume;
                if buf.len() > limits.inline_max_size {
                    return Err(ProtocolError::TooBigInlineRequest);
                }
                return Ok(None);
            }
        };
        let end = if newline > 0 && buf[newline - 1] == b'\r' {
            newline - 1
        } else {
            newline
        };
        self.inline = true;
        split_args(&buf[..end], &mut self.inline_bytes, &mut self.args)
            .map_err(|()| ProtocolError::UnbalancedQuotes)?;
        Ok(Some(newline + 1))
    }

    /// Finds the `\r` of the line at `self.pos`, or says why not (`Ok(None)` to wait,
    /// `too_big` past the inline limit).
    fn line_end(
        &mut self,
        buf: &[u8],
        limits: &Limits,
        too_big: ProtocolError,
    ) -> Result<Option<usize>, ProtocolError> {
        let from = self.scan.max(self.pos);
        match find(buf, from, b'\r') {
            Search::Missing(resume) => {
                self.scan = resume;
                if buf.len() - self.pos > limits.inline_max_size {
                    return Err(too_big);
                }
                Ok(None)
            }
            Search::Found(i) => {
                self.scan = i;
                // Redis wants the byte after `\r` in the buffer, but does not look at it.
                if i + 2 > buf.len() {
                    return Ok(None);
                }
                Ok(Some(i))
            }
        }
    }

    fn multibulk(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, ProtocolError> {
        if self.step == Step::Count {
            let Some(cr) = self.line_end(buf, limits, ProtocolError::TooBigMbulkCountString)?
            else {
                return Ok(None);
            };
            let count = match string2ll(buf.get(1..cr).unwrap_or_default()) {
                Some(n)
                    if n <= i64::from(i32::MAX)
                        && (n <= 0 || n as u64 <= limits.max_multibulk_len) =>
                {
                    n
                }
                _ => return Err(ProtocolError::InvalidMultibulkLength),
            };
            if count > UNAUTHENTICATED_MAX_ARGS && self.auth_required {
                return Err(ProtocolError::UnauthenticatedMultibulkLength);
            }
            self.pos = cr + 2;
            if count <= 0 {
                return Ok(Some(self.pos));
            }
            self.remaining = count as u64;
            self.step = Step::Header;
        }
        loop {
            if self.step == Step::Header {
                let Some(cr) = self.line_end(buf, limits, ProtocolError::TooBigBulkCountString)?
                else {
                    return Ok(None);
                };
                let first = buf[self.pos];
                if first != b'$' {
                    return Err(ProtocolError::ExpectedDollar(first));
                }
                let len = match string2ll(buf.get(self.pos + 1..cr).unwrap_or_default()) {
                    Some(n) if n >= 0 && n as u64 <= limits.proto_max_bulk_len => n,
                    _ => return Err(ProtocolError::InvalidBulkLength),
                };
                if len > UNAUTHENTICATED_MAX_BULK && self.auth_required {
                    return Err(ProtocolError::UnauthenticatedBulkLength);
                }
                self.pos = cr + 2;
                // The cheap check: refuse now what could never fit, rather than buffer it.
                let needed = self.pos as u64 + len as u64 + 2;
                if needed > limits.client_query_buffer_limit as u64 {
                    return Err(ProtocolError::QueryBufferLimit {
                        needed,
                        limit: limits.client_query_buffer_limit,
                    });
                }
                self.needed = needed as usize;
                self.step = Step::Data(len as u64);
            }
            let Step::Data(len) = self.step else {
                return Ok(None);
            };
            let len = len as usize;
            if buf.len() - self.pos < len + 2 {
                return Ok(None);
            }
            self.args.push(self.pos..self.pos + len);
            self.pos += len + 2;
            self.scan = self.pos;
            self.remaining = self.remaining.saturating_sub(1);
            if self.remaining == 0 {
                return Ok(Some(self.pos));
            }
            self.step = Step::Header;
        }
    }

    /// The buffer length the request needs at least after `Ok(None)`: the end of the
    /// argument being read when its length is known, else one byte more than was given.
    pub fn needed(&self) -> usize {
        self.needed
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// A request without arguments (`*0`, `*-1`, an empty line): Redis ignores it.
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// Whether the request was inline (its arguments live in the request, not the buffer).
    pub fn is_inline(&self) -> bool {
        self.inline
    }

    /// Argument `i`; `buf` is the buffer given to the [`Request::parse`] that returned it.
    pub fn arg<'a>(&'a self, buf: &'a [u8], i: usize) -> Option<&'a [u8]> {
        let range = self.args.get(i)?.clone();
        let from = if self.inline {
            &self.inline_bytes[..]
        } else {
            buf
        };
        from.get(range)
    }

    /// The arguments in order; `buf` as for [`Request::arg`].
    pub fn args<'a>(&'a self, buf: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        (0..self.args.len()).map(move |i| self.arg(buf, i).unwrap_or_default())
    }
}

/// C's `isspace` in the C locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `sdssplitargs` of `line` (which holds no NUL: its end plays the NUL), as owned
/// arguments; `None` on unbalanced quotes. For other texts Redis splits so (a function
/// library's `#!` line).
pub fn split_args_owned(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let (mut out, mut args) = (Vec::new(), Vec::new());
    split_args(line, &mut out, &mut args).ok()?;
    Some(args.into_iter().map(|r| out[r].to_vec()).collect())
}

/// `sdssplitargs`: splits `line` (which holds no NUL: its end plays the NUL) into arguments
/// appended to `out`, their ranges to `args`. `Err` on unbalanced quotes.
fn split_args(line: &[u8], out: &mut Vec<u8>, args: &mut Vec<Range<usize>>) -> Result<(), ()> {
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut p = 0;
    loop {
        while at(p) != 0 && is_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Ok(());
        }
        let start = out.len();
        let (mut in_double, mut in_single, mut done) = (false, false, false);
        while !done {
            let c = at(p);
            if in_double {
                if c == b'\\' && at(p + 1) == b'x' {
                    if let (Some(hi), Some(lo)) = (hex_value(at(p + 2)), hex_value(at(p + 3))) {
                        out.push(hi * 16 + lo);
                        p += 3;
                    } else {
                        // `\x` without two hex digits: an ordinary escape, giving `x`.
                        p += 1;
                        out.push(b'x');
                    }
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    out.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    // A closing quote must be followed by a space or the end.
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return Err(());
                    }
                    done = true;
                } else if c == 0 {
                    return Err(());
                } else {
                    out.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    out.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return Err(());
                    }
                    done = true;
                } else if c == 0 {
                    return Err(());
                } else {
                    out.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => out.push(c),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        args.push(start..out.len());
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
