//! A blocking list command's timeout, as Redis reads and refuses it: checked when the
//! command is parsed, and read again by [`crate::blocking`] to wait that long.

use std::time::Duration;

use crate::cmd::Args;

/// The argument holding a blocking command's timeout.
fn timeout_arg<'a>(args: &Args<'a>, name: &str) -> &'a [u8] {
    if name == "blmpop" || name == "bzmpop" {
        args.get(1)
    } else {
        args.get(args.len() - 1)
    }
}

/// 2^63: C's conversion of a double to `long long` holds what is below it in magnitude.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// Why a timeout is refused (Redis's `getTimeoutFromObjectOrReply`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadTimeout {
    NotFloat,
    Negative,
    OutOfRange,
}

/// The timeout of a blocking command (`None`: wait forever), as Redis reads it: seconds
/// as a float, times 1000 truncated to an integer the way C converts (out of range becomes
/// the most negative value, hence "negative" for `inf` or huge values).
pub fn timeout(args: &Args<'_>, name: &str) -> Result<Option<Duration>, BadTimeout> {
    let text = timeout_arg(args, name);
    let s = std::str::from_utf8(text).map_err(|_| BadTimeout::NotFloat)?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return Err(BadTimeout::NotFloat);
    }
    let v: f64 = s.parse().map_err(|_| BadTimeout::NotFloat)?;
    if v.is_nan() {
        return Err(BadTimeout::NotFloat);
    }
    let ms = v * 1000.0;
    let ms = if (-TWO_63..TWO_63).contains(&ms) {
        ms as i64
    } else {
        i64::MIN
    };
    match ms {
        ..0 => Err(BadTimeout::Negative),
        0 => Ok(None),
        ms if ms > i64::MAX - crate::store::now_ms() => Err(BadTimeout::OutOfRange),
        ms => Ok(Some(Duration::from_millis(ms as u64))),
    }
}

/// The error text of a refused timeout.
pub fn timeout_error(args: &Args<'_>, name: &str) -> &'static [u8] {
    match timeout(args, name) {
        Err(BadTimeout::Negative) => b"timeout is negative",
        Err(BadTimeout::OutOfRange) => b"timeout is out of range",
        _ => b"timeout is not a float or out of range",
    }
}
