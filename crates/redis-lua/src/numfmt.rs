//! C's number texts as glibc writes and reads them: `printf("%.Ng")` and `strtod`, which
//! cjson uses (and Lua's own `tostring`, which Lua does itself).

/// `snprintf("%.{precision}g", d)` (precision 1..=17).
pub fn fmt_g(d: f64, precision: usize) -> String {
    let neg = d.is_sign_negative();
    if d.is_nan() {
        return if neg { "-nan".into() } else { "nan".into() };
    }
    if d.is_infinite() {
        return if neg { "-inf".into() } else { "inf".into() };
    }
    if d == 0.0 {
        return if neg { "-0".into() } else { "0".into() };
    }
    let p = precision.max(1);
    // Rust's `{:e}` with a precision rounds the exact binary value, ties to even, as glibc.
    let e = format!("{:.*e}", p - 1, d.abs());
    let (mant, exp) = e.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    let digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    let mut out = String::with_capacity(p + 8);
    if neg {
        out.push('-');
    }
    if exp < -4 || exp >= p as i32 {
        out.push(digits[0] as char);
        let frac = trim_zeros(&digits[1..]);
        if !frac.is_empty() {
            out.push('.');
            out.push_str(std::str::from_utf8(frac).expect("digits"));
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        out.push_str(&e.to_string());
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        out.push_str(std::str::from_utf8(&digits[..int_len]).expect("digits"));
        let frac = trim_zeros(&digits[int_len..]);
        if !frac.is_empty() {
            out.push('.');
            out.push_str(std::str::from_utf8(frac).expect("digits"));
        }
    } else {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(std::str::from_utf8(trim_zeros(&digits)).expect("digits"));
    }
    out
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let end = d.iter().rposition(|&c| c != b'0').map_or(0, |i| i + 1);
    &d[..end]
}

/// glibc's `strtod` in the C locale on the NUL-terminated text starting at `s[0]` (bytes past
/// `s`'s end read as NUL): the value and how many bytes it took (0: no number).
pub fn strtod(s: &[u8]) -> (f64, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while matches!(at(i), b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match at(i) {
        b'-' => {
            i += 1;
            true
        }
        b'+' => {
            i += 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    let lower = |j: usize| at(j).to_ascii_lowercase();
    // inf / infinity / nan / nan(chars)
    if lower(i) == b'i' && lower(i + 1) == b'n' && lower(i + 2) == b'f' {
        let word = b"infinity";
        let full = (3..8).all(|k| lower(i + k) == word[k]);
        return (sign(f64::INFINITY), i + if full { 8 } else { 3 });
    }
    if lower(i) == b'n' && lower(i + 1) == b'a' && lower(i + 2) == b'n' {
        let mut end = i + 3;
        if at(end) == b'(' {
            let mut j = end + 1;
            while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
                j += 1;
            }
            if at(j) == b')' {
                end = j + 1;
            }
        }
        return (sign(f64::NAN), end);
    }
    if at(i) == b'0' && lower(i + 1) == b'x' {
        if let Some((v, end)) = hex_float(s, i + 2) {
            return (sign(v), end);
        }
        // "0x" without hex digits: the "0" alone.
        return (sign(0.0), i + 1);
    }
    let start = i;
    let mut digits = 0;
    while at(i).is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return (0.0, 0);
    }
    if lower(i) == b'e' {
        let mut j = i + 1;
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            while at(j).is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let text = std::str::from_utf8(&s[start..i]).expect("ascii");
    // Rust's parser is correctly rounded, as glibc's; it wants a digit before an exponent
    // ("1.e5" reads fine, ".5" too).
    let v: f64 = text.parse().unwrap_or_else(|_| {
        let fixed = text.replacen(".e", ".0e", 1).replacen(".E", ".0E", 1);
        fixed.parse().unwrap_or(0.0)
    });
    (sign(v), i)
}

/// The hexadecimal part of `0x...` starting at `s[i]`: mantissa digits, optional point and
/// digits, optional `p` binary exponent; correctly rounded (ties to even).
fn hex_float(s: &[u8], mut i: usize) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut mant: u64 = 0;
    let mut sticky = false;
    let mut exp: i64 = 0;
    let mut any = false;
    let mut seen_point = false;
    loop {
        let c = at(i);
        if c == b'.' && !seen_point {
            seen_point = true;
            i += 1;
            continue;
        }
        let Some(v) = (c as char).to_digit(16) else {
            break;
        };
        any = true;
        if mant >> 60 == 0 {
            mant = (mant << 4) | u64::from(v);
            if seen_point {
                exp -= 4;
            }
        } else {
            sticky |= v != 0;
            if !seen_point {
                exp += 4;
            }
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if at(i) | 0x20 == b'p' {
        let mut j = i + 1;
        let eneg = match at(j) {
            b'-' => {
                j += 1;
                true
            }
            b'+' => {
                j += 1;
                false
            }
            _ => false,
        };
        if at(j).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(j).is_ascii_digit() {
                e = (e * 10 + i64::from(at(j) - b'0')).min(1 << 20);
                j += 1;
            }
            exp += if eneg { -e } else { e };
            i = j;
        }
    }
    Some((compose(mant, exp, sticky), i))
}

/// `mant * 2^exp` (plus a nonzero tail when `sticky`) rounded to the nearest double.
fn compose(mant: u64, exp: i64, sticky: bool) -> f64 {
    if mant == 0 {
        return 0.0;
    }
    // Normalise to 64 significant bits: value = m * 2^(e), m in [2^63, 2^64).
    let lz = mant.leading_zeros();
    let m = mant << lz;
    let e = exp - i64::from(lz);
    // The value's binary exponent (of its leading bit).
    let top = e + 63;
    if top > 1023 {
        return f64::INFINITY;
    }
    // Bits to keep: 53 for normal numbers, fewer for subnormals.
    let keep: i64 = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if keep <= 0 {
        // Below half the smallest subnormal, or exactly at/above it.
        let half_min = keep == 0 && (m > 1 << 63 || sticky);
        return if half_min { f64::from_bits(1) } else { 0.0 };
    }
    let drop = 64 - keep as u32;
    let kept = m >> drop;
    let rest = m << (64 - drop);
    let half = 1u64 << 63;
    let round_up = rest > half || (rest == half && (sticky || kept & 1 == 1));
    let mut kept = kept + u64::from(round_up);
    let mut top = top;
    if kept >> keep == 1 {
        // Rounding carried into a new bit.
        kept >>= 1;
        top += 1;
        if top > 1023 {
            return f64::INFINITY;
        }
    }
    // value = kept * 2^(top - (keep - 1))
    let scale = top - (keep - 1);
    kept as f64 * pow2(scale)
}

fn pow2(e: i64) -> f64 {
    // Exact in two steps so subnormal results are not double-rounded (kept has few bits then).
    let e = e.clamp(-2200, 2200) as i32;
    if e < -1000 {
        2f64.powi(-1000) * 2f64.powi(e + 1000)
    } else if e > 1000 {
        2f64.powi(1000) * 2f64.powi(e - 1000)
    } else {
        2f64.powi(e)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::float_cmp)]
    use super::*;

    #[test]
    fn g_format_like_glibc() {
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(1e15, 14), "1e+15");
        assert_eq!(fmt_g(123_456_789_012_345.0, 14), "1.2345678901234e+14");
        assert_eq!(fmt_g(1e14, 14), "1e+14");
        assert_eq!(fmt_g(12_345_678_901_234.0, 14), "12345678901234");
        assert_eq!(fmt_g(0.0001, 14), "0.0001");
        assert_eq!(fmt_g(0.00001, 14), "1e-05");
        assert_eq!(fmt_g(-0.0, 14), "-0");
        assert_eq!(fmt_g(0.125, 2), "0.12");
        assert_eq!(fmt_g(2.5, 1), "2");
        assert_eq!(fmt_g(1e100, 14), "1e+100");
        assert_eq!(fmt_g(2.5, 3), "2.5");
        assert_eq!(fmt_g(f64::NEG_INFINITY, 14), "-inf");
    }

    #[test]
    fn strtod_like_glibc() {
        assert_eq!(strtod(b"12abc"), (12.0, 2));
        assert_eq!(strtod(b"-1.5e3x"), (-1500.0, 6));
        assert_eq!(strtod(b"1e"), (1.0, 1));
        assert_eq!(strtod(b"1.e2"), (100.0, 4));
        assert_eq!(strtod(b".5"), (0.5, 2));
        assert_eq!(strtod(b"-"), (0.0, 0));
        assert_eq!(strtod(b"0x10"), (16.0, 4));
        assert_eq!(strtod(b"0x"), (0.0, 1));
        assert_eq!(strtod(b"0x1p-2"), (0.25, 6));
        assert_eq!(strtod(b"0x1.8"), (1.5, 5));
        assert_eq!(strtod(b"Infinity"), (f64::INFINITY, 8));
        assert_eq!(strtod(b"-infx"), (f64::NEG_INFINITY, 4));
        assert!(strtod(b"nan(12)").0.is_nan());
        assert_eq!(strtod(b"nan(12)").1, 7);
        assert_eq!(strtod(b"nan(12").1, 3);
        assert_eq!(strtod(b"0x1p-1074"), (f64::from_bits(1), 9));
        assert!(strtod(b"0x1p1024").0.is_infinite());
        assert_eq!(strtod(b"0x1fffffffffffff8"), (2f64.powi(57), 17));
    }
}
