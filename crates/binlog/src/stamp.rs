//! The hybrid logical clock that orders transactions across sources, and the comment that
//! carries a value of it into a source's binlog.
//!
//! manifold prepends `/*manifold:hlc=N*/ ` to each write statement it forwards while the
//! global binlog is on; MariaDB keeps the statement text, comment included, in the annotate
//! event before the statement's rows. N is nanoseconds since the Unix epoch, strictly
//! increasing per clock: a transaction acknowledged before another began has a smaller stamp
//! (the clock is the machine's, shared by every worker), which is what the merge's causal
//! order rests on.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What every stamp comment starts with.
pub const PREFIX: &[u8] = b"/*manifold:hlc=";

/// What manifold's own DDL on a source (the heartbeat table's) starts with: such a
/// transaction is the source's business, not the global binlog's.
pub const INTERNAL: &[u8] = b"/*manifold:internal*/ ";

/// How far past the reader's wall clock a stamp may be and still count. A stamp manifold
/// wrote was taken before the statement ran, so it is earlier than the moment its event
/// arrives, give or take the clock skew between manifold instances; one further ahead was
/// written by someone else (a statement that merely starts like a stamped one) and would
/// hold its source's merge key in the future, stalling the source.
pub const MAX_AHEAD: Duration = Duration::from_secs(10);

/// The longest stamp comment: prefix, 20 digits, `*/ `.
pub const MAX_LEN: usize = PREFIX.len() + 20 + 3;

/// A clock whose readings strictly increase (one per worker, one per heartbeat writer).
#[derive(Debug, Default)]
pub struct Clock {
    last: u64,
}

impl Clock {
    /// The next stamp: the wall clock in nanoseconds, or one more than the last reading when
    /// the wall clock has not moved past it.
    pub fn now(&mut self) -> u64 {
        self.last = wall_now().max(self.last + 1);
        self.last
    }
}

/// The wall clock in stamp units (nanoseconds since the Unix epoch; 0 before it).
pub fn wall_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Whether `stamp`, read from an event that arrived at `wall` (`wall_now`), is one manifold
/// could have written: not past `wall` by more than [`MAX_AHEAD`].
pub fn plausible(stamp: u64, wall: u64) -> bool {
    let ahead = u64::try_from(MAX_AHEAD.as_nanos()).unwrap_or(u64::MAX);
    stamp <= wall.saturating_add(ahead)
}

/// Appends the stamp comment for `hlc` (with a trailing space) to `out`.
pub fn write(out: &mut Vec<u8>, hlc: u64) {
    out.extend_from_slice(PREFIX);
    let mut digits = [0u8; 20];
    let mut n = hlc;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"*/ ");
}

/// The stamp a statement text starts with, if it does.
pub fn parse(text: &[u8]) -> Option<u64> {
    let rest = text.strip_prefix(PREFIX)?;
    let end = rest.iter().position(|b| !b.is_ascii_digit())?;
    if end == 0 || end > 20 || !rest[end..].starts_with(b"*/") {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_increase() {
        let mut clock = Clock::default();
        let a = clock.now();
        let b = clock.now();
        assert!(b > a);
        for v in [0, 7, a, u64::MAX] {
            let mut out = Vec::new();
            write(&mut out, v);
            assert!(out.len() <= MAX_LEN);
            out.extend_from_slice(b"INSERT INTO t VALUES (1)");
            assert_eq!(parse(&out), Some(v));
        }
        assert_eq!(parse(b"/*manifold:hlc=*/ x"), None);
        assert_eq!(parse(b"/*manifold:hlc=12 x"), None);
        assert_eq!(parse(b"INSERT /*manifold:hlc=12*/"), None);
    }

    #[test]
    fn stamps_far_past_the_wall_clock_are_implausible() {
        let wall = wall_now();
        let ahead = u64::try_from(MAX_AHEAD.as_nanos()).unwrap();
        assert!(plausible(
            Clock::default().now(),
            wall.saturating_sub(1_000_000)
        ));
        assert!(plausible(0, wall));
        assert!(plausible(wall + ahead, wall));
        assert!(!plausible(wall + ahead + 1, wall));
        assert!(!plausible(u64::MAX, wall));
        assert!(plausible(u64::MAX, u64::MAX - 1), "no overflow");
    }
}
