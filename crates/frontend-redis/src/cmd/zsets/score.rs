//! Scores: parsed as Redis parses them (`strtod`, through `string2d` for values and
//! `zslParseRange` for bounds), kept as an order key in SQL, printed as Redis prints them.

/// C's `isspace` in the "C" locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// What `strtod` read from the start of a text.
struct Strtod {
    value: f64,
    /// Bytes consumed (0: no conversion).
    used: usize,
    /// `errno == ERANGE` as glibc would set it where Redis looks at it: overflow to
    /// infinity, or underflow to zero.
    range_error: bool,
}

/// C's `strtod` on `s` (already cut at a NUL, as C sees the text): leading white space, a
/// sign, then `inf`/`infinity`/`nan`, a hexadecimal or a decimal number.
fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        used: 0,
        range_error: false,
    };
    let mut i = 0;
    while i < s.len() && is_space(s[i]) {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    let rest = &s[i..];
    let starts = |w: &[u8]| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w);
    if starts(b"inf") {
        let used = i + if starts(b"infinity") { 8 } else { 3 };
        return Strtod {
            value: sign(f64::INFINITY),
            used,
            range_error: false,
        };
    }
    if starts(b"nan") {
        let mut used = i + 3;
        // `nan(n-char-sequence)`.
        if s.get(used) == Some(&b'(') {
            let mut j = used + 1;
            while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
                j += 1;
            }
            if s.get(j) == Some(&b')') {
                used = j + 1;
            }
        }
        return Strtod {
            value: f64::NAN,
            used,
            range_error: false,
        };
    }
    if (starts(b"0x"))
        && (rest.get(2).is_some_and(u8::is_ascii_hexdigit)
            || (rest.get(2) == Some(&b'.') && rest.get(3).is_some_and(u8::is_ascii_hexdigit)))
    {
        let (value, used, range_error) = hex(&rest[2..]);
        return Strtod {
            value: sign(value),
            used: i + 2 + used,
            range_error,
        };
    }
    // Decimal: digits, an optional fraction, an optional exponent.
    let mut j = i;
    let mut digits = 0;
    let mut nonzero = false;
    while j < s.len() && s[j].is_ascii_digit() {
        nonzero |= s[j] != b'0';
        digits += 1;
        j += 1;
    }
    if s.get(j) == Some(&b'.') {
        j += 1;
        while j < s.len() && s[j].is_ascii_digit() {
            nonzero |= s[j] != b'0';
            digits += 1;
            j += 1;
        }
    }
    if digits == 0 {
        return none;
    }
    if matches!(s.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if s.get(k).is_some_and(u8::is_ascii_digit) {
            while k < s.len() && s[k].is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    // Rust's parser rounds correctly, as glibc's does; it wants a digit before a dot.
    let text = std::str::from_utf8(&s[i..j]).unwrap_or("0");
    let value: f64 = if text.starts_with('.') {
        format!("0{text}").parse().unwrap_or(0.0)
    } else {
        text.parse().unwrap_or(0.0)
    };
    Strtod {
        value: sign(value),
        used: j,
        range_error: value.is_infinite() || (value == 0.0 && nonzero),
    }
}

/// A hexadecimal float's digits after `0x`: its value, bytes used, and a range error.
fn hex(s: &[u8]) -> (f64, usize, bool) {
    let mut mantissa: u64 = 0;
    let mut exp: i64 = 0;
    let mut nonzero = false;
    let mut j = 0;
    let mut add = |d: u8, fraction: bool, exp: &mut i64| {
        let v = u64::from(char::from(d).to_digit(16).unwrap_or(0) as u8);
        nonzero |= v != 0;
        if mantissa >> 58 == 0 {
            mantissa = mantissa << 4 | v;
            if fraction {
                *exp -= 4;
            }
        } else {
            // Past 60 bits the digit only counts for its weight (and as sticky bit).
            mantissa |= u64::from(v != 0);
            if !fraction {
                *exp += 4;
            }
        }
    };
    while j < s.len() && s[j].is_ascii_hexdigit() {
        add(s[j], false, &mut exp);
        j += 1;
    }
    if s.get(j) == Some(&b'.') {
        j += 1;
        while j < s.len() && s[j].is_ascii_hexdigit() {
            add(s[j], true, &mut exp);
            j += 1;
        }
    }
    if matches!(s.get(j), Some(b'p' | b'P')) {
        let mut k = j + 1;
        let neg = s.get(k) == Some(&b'-');
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if s.get(k).is_some_and(u8::is_ascii_digit) {
            let mut e: i64 = 0;
            while k < s.len() && s[k].is_ascii_digit() {
                e = (e * 10 + i64::from(s[k] - b'0')).min(1 << 20);
                k += 1;
            }
            exp += if neg { -e } else { e };
            j = k;
        }
    }
    let exp = i32::try_from(exp.clamp(-4000, 4000)).unwrap_or(0);
    // Two steps so that an exponent past f64's range in one step does not lose the value.
    let value = mantissa as f64 * 2f64.powi(exp / 2) * 2f64.powi(exp - exp / 2);
    (value, j, value.is_infinite() || (value == 0.0 && nonzero))
}

/// Redis's `string2d`: a score or increment (`ZADD`, `ZINCRBY`): the whole argument a
/// number, no leading space, no overflow or underflow to zero, not NaN.
pub fn parse_value(s: &[u8]) -> Option<f64> {
    if s.is_empty() || is_space(s[0]) {
        return None;
    }
    let r = strtod(s);
    if r.used != s.len() || r.range_error || r.value.is_nan() {
        return None;
    }
    Some(r.value)
}

/// A `SORT` weight, as sort.c reads it: `strtod` over the text up to its first NUL (C's
/// view of it), every byte of that used (the empty text is 0; leading space is skipped),
/// no overflow or underflow (`ERANGE`, which glibc sets for a subnormal result too), not
/// NaN.
pub fn parse_sort_weight(arg: &[u8]) -> Option<f64> {
    let text = arg.split(|&b| b == 0).next().unwrap_or_default();
    let r = strtod(text);
    if text.is_empty() {
        return Some(0.0);
    }
    let subnormal = r.value != 0.0 && r.value.abs() < f64::MIN_POSITIVE;
    if r.used != text.len() || r.range_error || subnormal || r.value.is_nan() {
        return None;
    }
    Some(r.value)
}

/// One bound of a score range, as `zslParseRange` reads it: `(` makes it exclusive; the
/// rest is `strtod` up to the first NUL, all of it used (an empty text is 0); not NaN.
pub fn parse_bound(arg: &[u8]) -> Option<(f64, bool)> {
    let text = arg.split(|&b| b == 0).next().unwrap_or_default();
    let (text, exclusive) = match text.split_first() {
        Some((b'(', rest)) => (rest, true),
        _ => (text, false),
    };
    let r = strtod(text);
    if r.used != text.len() && !(r.used == 0 && text.is_empty()) {
        return None;
    }
    if r.value.is_nan() {
        return None;
    }
    Some((r.value, exclusive))
}

/// The order key kept in `redis_zset.sk`: the IEEE bits of `score` made order-preserving
/// as a signed integer (positive scores: their bits; negative: their bits with the 63 low
/// bits flipped), `-0` as `0` (Redis compares them equal).
pub fn order_key(score: f64) -> i64 {
    let bits = if score == 0.0 { 0 } else { score.to_bits() };
    if bits >> 63 == 1 {
        (bits ^ 0x7fff_ffff_ffff_ffff) as i64
    } else {
        bits as i64
    }
}

/// What `redis_zset.score` keeps for `score`: the score itself, `NULL` for the infinities
/// (MariaDB's `DOUBLE` has none; `sk` tells which).
pub fn stored(score: f64) -> Option<f64> {
    score.is_finite().then_some(score)
}

/// A row's score from its `score` and `sk` columns.
pub fn from_columns(score: Option<f64>, sk: i64) -> f64 {
    match score {
        Some(s) => s,
        None if sk < 0 => f64::NEG_INFINITY,
        None => f64::INFINITY,
    }
}

/// A score as `ZSCAN` shows it (Redis's `d2string`, as a small sorted set keeps it): an
/// integral value within ±2^62 as an integer (so `-0` is `0`), otherwise `%.17g`.
pub fn scan_text(score: f64) -> Vec<u8> {
    const HALF: f64 = (i64::MAX / 2) as f64;
    if score.is_finite() && (-HALF..=HALF).contains(&score) && score.fract() == 0.0 {
        return (score as i64).to_string().into_bytes();
    }
    let mut out = Vec::new();
    manifold_redis_proto::Reply::new(&mut out, manifold_redis_proto::Protocol::Resp2).double(score);
    // The bulk string's text: `$<len>\r\n<text>\r\n`.
    let start = out.iter().position(|&b| b == b'\n').map_or(0, |p| p + 1);
    let end = out.len().saturating_sub(2).max(start);
    out[start..end].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_string2d() {
        assert_eq!(parse_value(b"1"), Some(1.0));
        assert_eq!(parse_value(b"-1.5e3"), Some(-1500.0));
        assert_eq!(parse_value(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_value(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_value(b".5"), Some(0.5));
        assert_eq!(parse_value(b"5."), Some(5.0));
        assert_eq!(parse_value(b"0x10"), Some(16.0));
        assert_eq!(parse_value(b"0x1.8p1"), Some(3.0));
        assert_eq!(parse_value(b"1e-320"), Some(1e-320));
        assert_eq!(parse_value(b"1E+05"), Some(1e5));
        assert_eq!(parse_value(&[b'1'; 400]), None);
        assert_eq!(parse_value(b"1e99999999999999999999"), None);
        assert_eq!(parse_value(b"1e-99999999999999999999"), None);
        assert_eq!(parse_value(b"0e99999999999999999999"), Some(0.0));
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"nan",
            b"1e400",
            b"1e-400",
            b"abc",
            b"1e",
            b"0x",
            b"-",
            b".",
            b"1\x002",
            b"infin",
        ] {
            assert_eq!(parse_value(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn bounds_as_zsl_parse_range() {
        assert_eq!(parse_bound(b"(1"), Some((1.0, true)));
        assert_eq!(parse_bound(b""), Some((0.0, false)));
        assert_eq!(parse_bound(b"("), Some((0.0, true)));
        assert_eq!(parse_bound(b" 2"), Some((2.0, false)));
        assert_eq!(parse_bound(b"1e400"), Some((f64::INFINITY, false)));
        assert_eq!(parse_bound(b"-inf"), Some((f64::NEG_INFINITY, false)));
        assert_eq!(parse_bound(b"3\x00junk"), Some((3.0, false)));
        assert_eq!(
            parse_bound(b"1e99999999999999999999"),
            Some((f64::INFINITY, false))
        );
        assert_eq!(
            parse_bound(b"(-1e-99999999999999999999"),
            Some((-0.0, true))
        );
        assert_eq!(parse_bound(b"nan"), None);
        assert_eq!(parse_bound(b"  "), None);
        assert_eq!(parse_bound(b"1x"), None);
        assert_eq!(parse_bound(b"((1"), None);
    }

    #[test]
    fn order_keys_sort_as_scores() {
        let scores = [
            f64::NEG_INFINITY,
            -1e308,
            -1.5,
            -1e-320,
            0.0,
            1e-320,
            1.0,
            1.5,
            1e308,
            f64::INFINITY,
        ];
        for w in scores.windows(2) {
            assert!(order_key(w[0]) < order_key(w[1]), "{} {}", w[0], w[1]);
        }
        assert_eq!(order_key(-0.0), order_key(0.0));
        for s in scores.into_iter().chain([-0.0]) {
            assert_eq!(from_columns(stored(s), order_key(s)).to_bits(), s.to_bits());
        }
    }

    #[test]
    fn scan_texts() {
        assert_eq!(scan_text(1.0), b"1");
        assert_eq!(scan_text(-0.0), b"0");
        assert_eq!(scan_text(1e17), b"100000000000000000");
        assert_eq!(scan_text(1.5), b"1.5");
        assert_eq!(scan_text(0.1), b"0.10000000000000001");
        assert_eq!(scan_text(f64::INFINITY), b"inf");
        assert_eq!(scan_text(f64::NEG_INFINITY), b"-inf");
        assert_eq!(scan_text(1e300), b"1.0000000000000001e+300");
    }
}
