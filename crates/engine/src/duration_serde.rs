//! Humane durations for configuration files: `"10s"`, `"500ms"`, `"2m"`, `"1m30s"`, `"1.5s"`.
//!
//! Use with `#[serde(with = "manifold_engine::duration_serde")]` on a `Duration` field, or
//! `#[serde(with = "manifold_engine::duration_serde::option")]` on an `Option<Duration>`.
//!
//! A bare number is rejected on purpose: MySQL settings mix seconds and milliseconds, so a
//! unit-less value in a gateway config is a bug waiting to happen.
//!
//! Units: `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`, `d`.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {input:?}: {reason} (expected e.g. \"10s\", \"500ms\", \"2m\", \"1m30s\")"
)]
pub struct DurationParseError {
    input: String,
    reason: &'static str,
}

const NANOS_PER_SEC: u128 = 1_000_000_000;

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3_600 * NANOS_PER_SEC,
        "d" => 86_400 * NANOS_PER_SEC,
        _ => return None,
    })
}

/// Parses a humane duration; see the module docs for the accepted forms.
pub fn parse_duration(input: &str) -> Result<Duration, DurationParseError> {
    let err = |reason| DurationParseError {
        input: input.to_owned(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        rest = rest.trim_start();
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() {
            return Err(err("expected a number"));
        }
        let tail = tail.trim_start();
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
            .unwrap_or(tail.len());
        let (unit, after) = tail.split_at(unit_len);
        if unit.is_empty() {
            return Err(err("missing unit"));
        }
        let per = unit_nanos(unit).ok_or_else(|| err("unknown unit"))?;

        // Integer arithmetic on the decimal digits, so "0.1s" is exactly 100ms (f64 is not).
        let (int_part, frac_part) = match num.split_once('.') {
            Some((i, f)) => (i, f),
            None => (num, ""),
        };
        if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
            return Err(err("malformed number"));
        }
        let int: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| err("number too large"))?
        };
        let mut nanos = int.checked_mul(per).ok_or_else(|| err("too large"))?;
        if !frac_part.is_empty() {
            if frac_part.len() > 18 {
                return Err(err("too many decimal places"));
            }
            let frac: u128 = frac_part.parse().map_err(|_| err("malformed number"))?;
            let scale = 10u128.pow(frac_part.len() as u32);
            nanos = nanos
                .checked_add(frac * per / scale)
                .ok_or_else(|| err("too large"))?;
        }
        total = total.checked_add(nanos).ok_or_else(|| err("too large"))?;
        rest = after;
    }
    let secs = u64::try_from(total / NANOS_PER_SEC).map_err(|_| err("too large"))?;
    Ok(Duration::new(secs, (total % NANOS_PER_SEC) as u32))
}

/// Formats a duration so that [`parse_duration`] gives it back exactly, preferring the largest
/// unit that divides it (`"2m"`, not `"120s"`).
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    for (unit, per) in [
        ("d", 86_400 * NANOS_PER_SEC),
        ("h", 3_600 * NANOS_PER_SEC),
        ("m", 60 * NANOS_PER_SEC),
        ("s", NANOS_PER_SEC),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if nanos.is_multiple_of(per) {
            return format!("{}{unit}", nanos / per);
        }
    }
    format!("{nanos}ns")
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration string with a unit, e.g. \"10s\" or \"500ms\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        Err(E::custom(format_args!(
            "duration {v} has no unit; write e.g. \"{v}s\" or \"{v}ms\""
        )))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        Err(E::custom(format_args!(
            "duration {v} has no unit; write e.g. \"{v}s\" or \"{v}ms\""
        )))
    }
}

/// Serde `serialize_with` half.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// Serde `deserialize_with` half.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_any(DurationVisitor)
}

/// The same for `Option<Duration>` (absent or unit-ful string).
pub mod option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    struct Wrap(#[serde(with = "super")] Duration);

    /// Serde `serialize_with` half.
    #[allow(clippy::ref_option)] // serde's `with` hands us `&Option<T>`
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&super::format_duration(*d)),
            None => s.serialize_none(),
        }
    }

    /// Serde `deserialize_with` half.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_compounds() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), ms(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_mins(2));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_hours(1));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_hours(24));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration(" 1m 30s ").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5s").unwrap(), ms(1500));
        assert_eq!(parse_duration("0.1s").unwrap(), ms(100));
        assert_eq!(parse_duration(".25s").unwrap(), ms(250));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("7ns").unwrap(), Duration::from_nanos(7));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "", "  ", "10", "s", "10x", "-1s", "1..5s", ".s", "1s2", "ms10", "1e3s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(parse_duration("99999999999999999999999999999d").is_err());
    }

    #[test]
    fn format_round_trips() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(1_500),
            Duration::from_micros(1),
            Duration::from_millis(1),
            Duration::from_millis(500),
            Duration::from_millis(1500),
            Duration::from_secs(10),
            Duration::from_secs(90),
            Duration::from_mins(2),
            Duration::from_hours(2),
            Duration::from_hours(72),
            Duration::new(12_345, 678_901_234),
            Duration::MAX,
        ] {
            let s = format_duration(d);
            assert_eq!(parse_duration(&s).unwrap(), d, "via {s:?}");
        }
        assert_eq!(format_duration(Duration::from_mins(2)), "2m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    }
}
