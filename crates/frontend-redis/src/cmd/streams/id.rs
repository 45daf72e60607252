//! Stream entry IDs (`<ms>-<seq>`, two unsigned 64-bit integers), parsed as Redis parses
//! them (`streamGenericParseIDOrReply`, `string2ull`).

use std::fmt::Write as _;

/// An entry ID; ordered by milliseconds, then sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const ZERO: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> Self {
        Self { ms, seq }
    }

    /// The ID just after this one (`None` after the last possible one).
    pub fn next(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The ID just before this one (`None` before 0-0).
    pub fn prev(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// `<ms>-<seq>`, appended to `out`.
    pub fn write(self, out: &mut String) {
        let _ = write!(out, "{}-{}", self.ms, self.seq);
    }

    pub fn text(self) -> String {
        let mut s = String::with_capacity(24);
        self.write(&mut s);
        s
    }
}

/// Parses an ID argument: `-` (0-0) and `+` (the last possible ID) unless `strict`;
/// `<ms>` alone takes `missing_seq`; with `seq_star` (`XADD`) `<ms>-*` parses with its
/// sequence not given. Returns the ID and whether its sequence was given.
pub fn parse(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_star: bool,
) -> Option<(StreamId, bool)> {
    // Redis copies the argument into a 128-byte C string: longer ones are refused, and
    // it ends at a NUL.
    if arg.len() > 127 {
        return None;
    }
    let arg = match arg.iter().position(|&b| b == 0) {
        Some(end) => &arg[..end],
        None => arg,
    };
    if strict && (arg == b"-" || arg == b"+") {
        return None;
    }
    if arg == b"-" {
        return Some((StreamId::ZERO, true));
    }
    if arg == b"+" {
        return Some((StreamId::MAX, true));
    }
    let (ms_part, seq_part) = match arg.iter().position(|&b| b == b'-') {
        Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
        None => (arg, None),
    };
    let ms = string2ull(ms_part)?;
    match seq_part {
        Some(b"*") if seq_star => Some((StreamId::new(ms, 0), false)),
        Some(s) => Some((StreamId::new(ms, string2ull(s)?), true)),
        None => Some((StreamId::new(ms, missing_seq), true)),
    }
}

/// Redis's `string2ull`: a strict `long long` if it is one (refused when negative), else
/// C's `strtoull` in base 10 over the whole text (leading blanks, a sign, any digits;
/// refused past `u64::MAX`; a minus negates modulo 2^64).
pub fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::cmd::parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}
