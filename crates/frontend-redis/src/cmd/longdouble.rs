//! `INCRBYFLOAT`'s and `HINCRBYFLOAT`'s arithmetic, as redis-server does it on x86-64: the value and the
//! increment parsed by glibc's `strtold` into x87 80-bit long doubles (64-bit significand,
//! correctly rounded), added with round-to-nearest-even, and printed with `%.17Lf` with the
//! trailing zeros removed (`ld2string(..., LD_STR_HUMAN)`). Rust has no such type, so this
//! is an exact emulation with a small arbitrary-precision integer.

use std::cmp::Ordering;

/// A finite long double: `(-1)^neg * m * 2^e` (`m` below `2^64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ld {
    neg: bool,
    m: u64,
    e: i64,
}

/// What parsing gives: a finite value, or an infinity (which every sum turns into an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    Finite(Ld),
    Infinite,
}

/// Smallest exponent of `m * 2^e`: the subnormals' (`2^-16382` scaled by the 63 fraction bits).
const EMIN: i64 = -16382 - 63;
/// Largest exponent of a 64-bit `m`: `2^16383` scaled by the 63 fraction bits.
const EMAX: i64 = 16383 - 63;
/// `MAX_LONG_DOUBLE_CHARS`: `string2ld` refuses strings this long or longer.
const MAX_CHARS: usize = 5 * 1024;

/// Redis's `string2ld`: the whole string must be a number (no leading space, no NaN, no
/// overflow, no underflow to zero); `None` when it is not.
pub fn parse(s: &[u8]) -> Option<Parsed> {
    if s.is_empty() || s.len() >= MAX_CHARS {
        return None;
    }
    let (neg, rest) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
        return Some(Parsed::Infinite);
    }
    let v = if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        parse_hex(&rest[2..])?
    } else {
        parse_decimal(rest)?
    };
    Some(match v {
        Rounded::Inf => Parsed::Infinite,
        Rounded::Finite(m, e) => Parsed::Finite(Ld { neg, m, e }),
    })
}

/// Digits `[0-9a-f]` with one optional `.`, at least one digit: the digits' value in `radix`
/// and how many came after the point; the rest of the input.
fn mantissa(s: &[u8], radix: u32) -> Option<(Big, i64, &[u8])> {
    let mut n = Big::zero();
    let (mut digits, mut frac, mut point) = (0usize, 0i64, false);
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !point {
            point = true;
        } else if let Some(d) = char::from(c).to_digit(radix) {
            n.mul_add(radix, d);
            digits += 1;
            if point {
                frac += 1;
            }
        } else {
            break;
        }
        i += 1;
    }
    (digits > 0).then_some((n, frac, &s[i..]))
}

/// An exponent: optional sign, at least one decimal digit, the whole rest of the string;
/// saturated far beyond any that matters.
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits.iter().fold(0i64, |v, &d| {
        (v * 10 + i64::from(d - b'0')).min(1_000_000_000)
    });
    Some(if neg { -v } else { v })
}

fn parse_decimal(s: &[u8]) -> Option<Rounded> {
    let (n, frac, rest) = mantissa(s, 10)?;
    let exp10 = match rest.first() {
        None => 0,
        Some(b'e' | b'E') => exponent(&rest[1..])?,
        Some(_) => return None,
    } - frac;
    if n.is_zero() {
        return Some(Rounded::Finite(0, 0));
    }
    // Out of range whatever the digits: overflow (`HUGE_VAL`) or underflow to zero, both
    // refused by `string2ld`.
    let magnitude = n.decimal_digits() as i64 + exp10;
    if magnitude > 4934 {
        return None;
    }
    if magnitude < -4952 {
        return None;
    }
    let r = if exp10 >= 0 {
        let mut p = n;
        p.mul_pow10(exp10 as u64);
        round(&p, 0, false)
    } else {
        let mut q = Big::from_u64(1);
        q.mul_pow10(exp10.unsigned_abs());
        // A quotient of 66 bits or more: shift the numerator up, or the divisor.
        let t = 66 + q.bitlen() as i64 - n.bitlen() as i64;
        let (mut p, mut q) = (n, q);
        if t > 0 {
            p.shl(t as u64);
        } else {
            q.shl(t.unsigned_abs());
        }
        let (quot, exact) = p.div_small_quotient(&q);
        round(&Big::from_u128(quot), -t, !exact)
    };
    match r {
        Rounded::Inf | Rounded::Finite(0, _) => None,
        r @ Rounded::Finite(..) => Some(r),
    }
}

fn parse_hex(s: &[u8]) -> Option<Rounded> {
    let (n, frac, rest) = mantissa(s, 16)?;
    let exp2 = match rest.first() {
        None => 0,
        Some(b'p' | b'P') => exponent(&rest[1..])?,
        Some(_) => return None,
    } - 4 * frac;
    if n.is_zero() {
        return Some(Rounded::Finite(0, 0));
    }
    match round(&n, exp2, false) {
        Rounded::Inf | Rounded::Finite(0, _) => None,
        r @ Rounded::Finite(..) => Some(r),
    }
}

/// A value rounded to a long double.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounded {
    Finite(u64, i64),
    Inf,
}

/// `n * 2^e` (plus something below its last bit when `sticky`) rounded to the nearest long
/// double, ties to even.
fn round(n: &Big, e: i64, sticky: bool) -> Rounded {
    let bl = n.bitlen() as i64;
    if bl == 0 {
        return Rounded::Finite(0, 0);
    }
    let s = (bl - 64).max(EMIN - e);
    let (m, exp) = if s <= 0 {
        (n.low_u64_shl(s.unsigned_abs()), e + s)
    } else {
        let s = s.unsigned_abs();
        let m = n.bits_from(s);
        let half = n.bit(s - 1);
        let below = sticky || n.any_below(s - 1);
        let exp = e.saturating_add_unsigned(s);
        if half && (below || m & 1 == 1) {
            inc(m, exp)
        } else {
            (m, exp)
        }
    };
    if m == 0 {
        return Rounded::Finite(0, 0);
    }
    if exp > EMAX {
        return Rounded::Inf;
    }
    Rounded::Finite(m, exp)
}

/// `m + 1` keeping 64 bits.
fn inc(m: u64, e: i64) -> (u64, i64) {
    match m.checked_add(1) {
        Some(m) => (m, e),
        None => (1 << 63, e + 1),
    }
}

/// `a + b` in long double arithmetic; `None` for an infinite result.
pub fn add(a: Ld, b: Ld) -> Option<Ld> {
    if a.m == 0 && b.m == 0 {
        return Some(Ld {
            neg: a.neg && b.neg,
            m: 0,
            e: 0,
        });
    }
    let lo = a.e.min(b.e);
    let mut x = Big::from_u64(a.m);
    x.shl((a.e - lo).unsigned_abs());
    let mut y = Big::from_u64(b.m);
    y.shl((b.e - lo).unsigned_abs());
    let (neg, n) = if a.neg == b.neg {
        x.add(&y);
        (a.neg, x)
    } else {
        match x.cmp(&y) {
            Ordering::Equal => return Some(Ld::default()),
            Ordering::Greater => {
                x.sub(&y);
                (a.neg, x)
            }
            Ordering::Less => {
                y.sub(&x);
                (b.neg, y)
            }
        }
    };
    match round(&n, lo, false) {
        Rounded::Inf => None,
        Rounded::Finite(m, e) => Some(Ld { neg, m, e }),
    }
}

/// `ld2string(..., LD_STR_HUMAN)`: `%.17Lf`, trailing zeros (and a bare point) removed,
/// `-0` written `0`.
pub fn format(v: Ld) -> Vec<u8> {
    let digits: Vec<u8>;
    let mut frac = 0usize;
    if v.e >= 0 {
        let mut n = Big::from_u64(v.m);
        n.shl(v.e.unsigned_abs());
        digits = n.to_decimal();
    } else {
        // m * 10^17 / 2^k, rounded to nearest, ties to even (glibc's printf is exact).
        let k = v.e.unsigned_abs();
        let x = u128::from(v.m) * 100_000_000_000_000_000u128;
        let q = if k >= 122 {
            0
        } else {
            let q = x >> k;
            let rem = x & ((1u128 << k) - 1);
            let half = 1u128 << (k - 1);
            if rem > half || (rem == half && q & 1 == 1) {
                q + 1
            } else {
                q
            }
        };
        digits = format!("{q:018}").into_bytes();
        frac = 17;
    }
    let int_end = digits.len() - frac;
    let mut end = digits.len();
    while end > int_end && digits[end - 1] == b'0' {
        end -= 1;
    }
    let body = &digits[..end];
    if body.iter().all(|&d| d == b'0') {
        return b"0".to_vec();
    }
    let mut out = Vec::with_capacity(body.len() + 2);
    if v.neg {
        out.push(b'-');
    }
    out.extend_from_slice(&body[..int_end.min(body.len())]);
    if end > int_end {
        out.push(b'.');
        out.extend_from_slice(&body[int_end..]);
    }
    out
}

/// An unsigned integer of any size: little-endian 32-bit limbs, no high zero limbs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Ld {
    /// The nearest `f64` for what a caller converts on (a blocking command's timeout):
    /// infinite past `f64`'s range, zero far below a millisecond.
    pub fn to_f64(self) -> f64 {
        let v = if self.m == 0 || self.e < -1200 {
            0.0
        } else if self.e > 1100 {
            f64::INFINITY
        } else {
            (self.m as f64) * 2f64.powi(self.e as i32)
        };
        if self.neg {
            -v
        } else {
            v
        }
    }
}

impl Big {
    fn zero() -> Self {
        Big(Vec::new())
    }

    fn from_u64(v: u64) -> Self {
        Self::from_u128(u128::from(v))
    }

    fn from_u128(mut v: u128) -> Self {
        let mut limbs = Vec::new();
        while v != 0 {
            limbs.push(v as u32);
            v >>= 32;
        }
        Big(limbs)
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn bitlen(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => self.0.len() as u64 * 32 - u64::from(top.leading_zeros()),
        }
    }

    fn decimal_digits(&self) -> usize {
        self.to_decimal().len()
    }

    /// `self = self * mul + add`.
    fn mul_add(&mut self, mul: u32, add: u32) {
        let mut carry = u64::from(add);
        for l in &mut self.0 {
            let v = u64::from(*l) * u64::from(mul) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    fn mul_pow10(&mut self, mut k: u64) {
        while k >= 9 {
            self.mul_add(1_000_000_000, 0);
            k -= 9;
        }
        if k > 0 {
            self.mul_add(10u32.pow(k as u32), 0);
        }
        self.trim();
    }

    fn shl(&mut self, bits: u64) {
        if self.is_zero() {
            return;
        }
        let (limbs, bits) = ((bits / 32) as usize, (bits % 32) as u32);
        if bits > 0 {
            let mut carry = 0u32;
            for l in &mut self.0 {
                let v = (u64::from(*l) << bits) | u64::from(carry);
                *l = v as u32;
                carry = (v >> 32) as u32;
            }
            if carry != 0 {
                self.0.push(carry);
            }
        }
        if limbs > 0 {
            self.0.splice(0..0, std::iter::repeat_n(0, limbs));
        }
    }

    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        self.0.get(limb).is_some_and(|l| l >> (i % 32) & 1 == 1)
    }

    /// Some bit below bit `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        if self.0.iter().take(limb).any(|&l| l != 0) {
            return true;
        }
        let mask = (1u64 << (i % 32)) - 1;
        self.0.get(limb).is_some_and(|&l| u64::from(l) & mask != 0)
    }

    /// Bits `s..s+64` as a number.
    fn bits_from(&self, s: u64) -> u64 {
        (0..64).fold(0u64, |acc, i| acc | (u64::from(self.bit(s + i)) << i))
    }

    /// The value (at most 64 bits once shifted) shifted left by `s`.
    fn low_u64_shl(&self, s: u64) -> u64 {
        let v = self
            .0
            .iter()
            .take(2)
            .rev()
            .fold(0u64, |acc, &l| (acc << 32) | u64::from(l));
        v.checked_shl(s as u32).unwrap_or(0)
    }

    fn add(&mut self, o: &Big) {
        let mut carry = 0u64;
        for i in 0..self.0.len().max(o.0.len()) {
            if i == self.0.len() {
                self.0.push(0);
            }
            let v = u64::from(self.0[i]) + u64::from(o.0.get(i).copied().unwrap_or(0)) + carry;
            self.0[i] = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    /// `self -= o`, `o` not larger.
    fn sub(&mut self, o: &Big) {
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut v = i64::from(self.0[i]) - i64::from(o.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            self.0[i] = v as u32;
        }
        self.trim();
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    /// `self / d` when the quotient fits 127 bits, and whether it is exact.
    fn div_small_quotient(mut self, d: &Big) -> (u128, bool) {
        let qbits = (self.bitlen() + 1).saturating_sub(d.bitlen()).min(127);
        let mut q = 0u128;
        for i in (0..=qbits).rev() {
            let mut s = d.clone();
            s.shl(i);
            if self.cmp(&s) != Ordering::Less {
                self.sub(&s);
                q |= 1 << i;
            }
        }
        (q, self.is_zero())
    }

    /// `self / 1e9`, the remainder.
    fn div_1e9(&mut self) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let v = (rem << 32) | u64::from(*l);
            *l = (v / 1_000_000_000) as u32;
            rem = v % 1_000_000_000;
        }
        self.trim();
        rem as u32
    }

    fn to_decimal(&self) -> Vec<u8> {
        if self.is_zero() {
            return b"0".to_vec();
        }
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_1e9());
        }
        let mut out = Vec::with_capacity(chunks.len() * 9);
        for (i, c) in chunks.iter().rev().enumerate() {
            let chunk = if i == 0 {
                c.to_string()
            } else {
                format!("{c:09}")
            };
            out.extend_from_slice(chunk.as_bytes());
        }
        out
    }
}

/// `INCRBYFLOAT`: the new value's text, or `None` when the sum is not finite.
pub fn incr(value: Parsed, by: Parsed) -> Option<Vec<u8>> {
    match (value, by) {
        (Parsed::Finite(a), Parsed::Finite(b)) => add(a, b).map(format),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> Option<String> {
        let (a, b) = (parse(a.as_bytes())?, parse(b.as_bytes())?);
        incr(a, b).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn like_redis_server() {
        assert_eq!(sum("10.5", "0.1").as_deref(), Some("10.6"));
        assert_eq!(sum("0", "0.1").as_deref(), Some("0.1"));
        assert_eq!(sum("3.0e3", "200").as_deref(), Some("3200"));
        assert_eq!(sum("5.0e3", "-5000").as_deref(), Some("0"));
        assert_eq!(sum("1", "-1.5").as_deref(), Some("-0.5"));
        assert_eq!(sum("0x10", "1").as_deref(), Some("17"));
        assert_eq!(sum("1e4000", "1e4000").as_deref().map(str::len), Some(4001));
        assert_eq!(sum("inf", "1"), None);
        assert_eq!(sum("1e5000", "1"), None);
        assert!(parse(b" 1").is_none());
        assert!(parse(b"1 ").is_none());
        assert!(parse(b"nan").is_none());
        assert!(parse(b"1e").is_none());
        assert!(parse(b"").is_none());
        assert!(parse(b".").is_none());
        assert!(parse(b"1e-5000").is_none());
        assert!(parse(b"0e-5000").is_some());
        assert_eq!(sum("-0.000000000000000001", "0").as_deref(), Some("0"));
    }

    #[test]
    fn sums_as_redis_server_prints_them() {
        assert_eq!(sum("10.50", "0.1").as_deref(), Some("10.6"));
        assert_eq!(sum("5.0e3", "2.0e2").as_deref(), Some("5200"));
        assert_eq!(sum("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(sum("1", "-1").as_deref(), Some("0"));
        assert_eq!(sum("1e20", "1").as_deref(), Some("100000000000000000000"));
        assert_eq!(sum("0x10", "1.5").as_deref(), Some("17.5"));
        assert_eq!(sum("3", "-5.25").as_deref(), Some("-2.25"));
        assert_eq!(sum("1e4932", "1e4932"), None, "overflows to infinity");
    }

    #[test]
    fn refusals() {
        for s in [
            "",
            " 1",
            "1 ",
            "abc",
            "1e",
            "1e+",
            ".",
            "-",
            "nan",
            "NaN",
            "0x",
            "0x1p",
            "1e-5000",
            "1e5000",
            "0x1p99999",
            "1..2",
            "1.2.3",
        ] {
            assert_eq!(parse(s.as_bytes()), None, "{s:?}");
        }
        for s in ["inf", "-Infinity"] {
            assert_eq!(parse(s.as_bytes()), Some(Parsed::Infinite), "{s:?}");
        }
        for s in [".5", "5.", "+1", "0x1.8p1", "1E3", "0e-99999"] {
            assert!(
                matches!(parse(s.as_bytes()), Some(Parsed::Finite(_))),
                "{s:?}"
            );
        }
    }
}
