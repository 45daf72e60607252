//! A blocking list command's timeout, as Redis reads and refuses it: checked when the
//! command is parsed, and read again by [`crate::blocking`] to wait that long.

use std::time::Duration;

use crate::cmd::longdouble::{self, Parsed};
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
/// as a long double (`string2ld`: hexadecimal too, exponents up to the long double's range,
/// refused past it or when it underflows to zero), times 1000 truncated to an integer the
/// way C converts (out of range becomes the most negative value, hence "negative" for `inf`
/// or huge values).
pub fn timeout(args: &Args<'_>, name: &str) -> Result<Option<Duration>, BadTimeout> {
    let v = match longdouble::parse(timeout_arg(args, name)) {
        None => return Err(BadTimeout::NotFloat),
        Some(Parsed::Infinite) => return Err(BadTimeout::Negative),
        Some(Parsed::Finite(v)) => v.to_f64(),
    };
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
