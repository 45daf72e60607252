//! `HINCRBYFLOAT`'s arithmetic as redis-server does it on x86-64: C `long double` (the x87
//! 80-bit format: a 64-bit significand, exponents down to subnormal 2^-16445), read with
//! `strtold` (Redis's `string2ld`), added with round-to-nearest-even and written with
//! `%.17Lf`, trailing zeros cut (`ld2string(..., LD_STR_HUMAN)`).
//!
//! Done exactly in software: a value is `m * 2^e`; reading and rounding go through a small
//! unsigned big integer, so every result is the correctly rounded one, as glibc's are.

use std::cmp::Ordering;

/// The smallest exponent of `m * 2^e`: the least subnormal is 2^-16445.
const EMIN: i64 = -16445;
/// Every finite value is below 2^16384.
const MAX_BITS: i64 = 16384;
/// Redis's `MAX_LONG_DOUBLE_CHARS`: `string2ld` refuses strings this long or longer.
const MAX_CHARS: usize = 5 * 1024;

/// A `long double`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ld {
    /// `(-1)^neg * m * 2^e`.
    Num {
        neg: bool,
        m: u64,
        e: i64,
    },
    Inf {
        neg: bool,
    },
}

/// An unsigned integer of any size, little-endian 32-bit limbs, no leading zero limb.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u128(mut v: u128) -> Big {
        let mut l = Vec::new();
        while v != 0 {
            l.push(v as u32);
            v >>= 32;
        }
        Big(l)
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn bits(&self) -> i64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as i64 - 1) * 32 + i64::from(32 - top.leading_zeros()),
        }
    }

    /// `self = self * m + a`.
    fn mul_add(&mut self, m: u32, a: u32) {
        let mut carry = u64::from(a);
        for l in &mut self.0 {
            let t = u64::from(*l) * u64::from(m) + carry;
            *l = t as u32;
            carry = t >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    /// `self * 10^n`.
    fn mul_pow10(&mut self, mut n: u64) {
        while n >= 9 {
            self.mul_add(1_000_000_000, 0);
            n -= 9;
        }
        self.mul_add(10u32.pow(n as u32), 0);
    }

    fn shl(&self, n: i64) -> Big {
        if self.is_zero() || n <= 0 {
            return self.clone();
        }
        let (words, bits) = ((n / 32) as usize, (n % 32) as u32);
        let mut l = vec![0u32; words];
        let mut carry = 0u32;
        for &w in &self.0 {
            if bits == 0 {
                l.push(w);
            } else {
                l.push((w << bits) | carry);
                carry = w >> (32 - bits);
            }
        }
        if carry != 0 {
            l.push(carry);
        }
        Big(l)
    }

    fn shr(&self, n: i64) -> Big {
        if n <= 0 {
            return self.clone();
        }
        let words = (n / 32) as usize;
        let bits = (n % 32) as u32;
        if words >= self.0.len() {
            return Big(Vec::new());
        }
        let src = &self.0[words..];
        let mut l = Vec::with_capacity(src.len());
        for (i, &w) in src.iter().enumerate() {
            let hi = src.get(i + 1).copied().unwrap_or(0);
            l.push(if bits == 0 {
                w
            } else {
                (w >> bits) | (hi << (32 - bits))
            });
        }
        let mut b = Big(l);
        b.trim();
        b
    }

    fn bit(&self, n: i64) -> bool {
        if n < 0 {
            return false;
        }
        self.0
            .get((n / 32) as usize)
            .is_some_and(|w| (w >> (n % 32)) & 1 == 1)
    }

    /// Any of the lowest `n` bits set.
    fn low_nonzero(&self, n: i64) -> bool {
        if n <= 0 {
            return false;
        }
        let words = (n / 32) as usize;
        let bits = (n % 32) as u32;
        if self.0.iter().take(words).any(|&w| w != 0) {
            return true;
        }
        bits != 0
            && self
                .0
                .get(words)
                .is_some_and(|&w| w & ((1u32 << bits) - 1) != 0)
    }

    fn low_u128(&self) -> u128 {
        self.0
            .iter()
            .take(4)
            .enumerate()
            .fold(0u128, |acc, (i, &w)| acc | (u128::from(w) << (32 * i)))
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn add(&self, o: &Big) -> Big {
        let mut l = Vec::with_capacity(self.0.len().max(o.0.len()) + 1);
        let mut carry = 0u64;
        for i in 0..self.0.len().max(o.0.len()) {
            let t = u64::from(self.0.get(i).copied().unwrap_or(0))
                + u64::from(o.0.get(i).copied().unwrap_or(0))
                + carry;
            l.push(t as u32);
            carry = t >> 32;
        }
        if carry != 0 {
            l.push(carry as u32);
        }
        Big(l)
    }

    /// `self - o`, `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut l = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for (i, &w) in self.0.iter().enumerate() {
            let mut t = i64::from(w) - i64::from(o.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = 0;
            if t < 0 {
                t += 1 << 32;
                borrow = 1;
            }
            l.push(t as u32);
        }
        let mut b = Big(l);
        b.trim();
        b
    }

    /// Divides in place by `d > 0`, returning the remainder.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*l);
            *l = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    fn decimal(mut self) -> Vec<u8> {
        if self.is_zero() {
            return b"0".to_vec();
        }
        let mut chunks = Vec::new();
        while !self.is_zero() {
            chunks.push(self.div_small(1_000_000_000));
        }
        let mut out = Vec::with_capacity(chunks.len() * 9);
        for (i, c) in chunks.iter().rev().enumerate() {
            if i == 0 {
                out.extend_from_slice(c.to_string().as_bytes());
            } else {
                out.extend_from_slice(format!("{c:09}").as_bytes());
            }
        }
        out
    }
}

const ZERO: Ld = Ld::Num {
    neg: false,
    m: 0,
    e: 0,
};

/// `(-1)^neg * (q + a fraction, nonzero when `sticky`, below q's last bit) * 2^e`, rounded
/// to the nearest `long double` (ties to even).
fn round(neg: bool, q: &Big, e: i64, sticky: bool) -> Ld {
    let n = q.bits();
    if n == 0 {
        return Ld::Num { neg, m: 0, e: 0 };
    }
    let shift = (n - 64).max(EMIN.saturating_sub(e)).max(0);
    let kept = q.shr(shift).low_u128();
    let half = q.bit(shift - 1);
    let sticky = sticky || q.low_nonzero(shift - 1);
    let mut e = e + shift;
    let mut m = kept;
    if half && (sticky || m & 1 == 1) {
        m += 1;
    }
    if m == 1 << 64 {
        m >>= 1;
        e += 1;
    }
    if m == 0 {
        return Ld::Num { neg, m: 0, e: 0 };
    }
    if i64::from(128 - m.leading_zeros()) + e > MAX_BITS {
        return Ld::Inf { neg };
    }
    Ld::Num {
        neg,
        m: m as u64,
        e,
    }
}

/// `(-1)^neg * num / den * 2^e`, rounded.
fn div_round(neg: bool, num: &Big, den: &Big, e: i64) -> Ld {
    if num.is_zero() {
        return Ld::Num { neg, m: 0, e: 0 };
    }
    // Scaled so the quotient has 70 or 71 bits.
    let s = 70 - (num.bits() - den.bits());
    let (mut r, d) = if s >= 0 {
        (num.shl(s), den.clone())
    } else {
        (num.clone(), den.shl(-s))
    };
    let mut q: u128 = 0;
    for i in (0..=72).rev() {
        let t = d.shl(i);
        if r.cmp(&t) != Ordering::Less {
            r = r.sub(&t);
            q |= 1 << i;
        }
    }
    round(neg, &Big::from_u128(q), e - s, !r.is_zero())
}

/// Digits of `radix` (10 or 16) as a big integer.
fn digits(ds: &[u8], radix: u32) -> Big {
    let mut b = Big(Vec::new());
    for &d in ds {
        let v = (d as char).to_digit(radix).unwrap_or(0);
        b.mul_add(radix, v);
    }
    b
}

/// Splits `mantissa[.fraction]` where each part is made of digits of `radix`; `None` when
/// there is no digit at all or another byte.
fn split_mantissa(s: &[u8], radix: u32) -> Option<(Vec<u8>, usize)> {
    let mut ds = Vec::with_capacity(s.len());
    let mut frac = 0usize;
    let mut dot = false;
    for &c in s {
        if c == b'.' && !dot {
            dot = true;
        } else if (c as char).is_digit(radix) {
            ds.push(c);
            if dot {
                frac += 1;
            }
        } else {
            return None;
        }
    }
    if ds.is_empty() {
        return None;
    }
    Some((ds, frac))
}

/// A decimal exponent `[+-]digits`, saturated far past any meaningful range.
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, ds) = match s.split_first() {
        Some((b'-', r)) => (true, r),
        Some((b'+', r)) => (false, r),
        _ => (false, s),
    };
    if ds.is_empty() || !ds.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in ds {
        v = (v * 10 + i64::from(d - b'0')).min(1 << 40);
    }
    Some(if neg { -v } else { v })
}

/// Redis's `string2ld`: the whole of `s` is a `strtold` number that neither overflows nor
/// underflows to zero and is not NaN; `None` otherwise.
pub fn parse(s: &[u8]) -> Option<Ld> {
    if s.is_empty() || s.len() >= MAX_CHARS {
        return None;
    }
    let (neg, rest) = match s.split_first() {
        Some((b'-', r)) => (true, r),
        Some((b'+', r)) => (false, r),
        _ => (false, s),
    };
    if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
        return Some(Ld::Inf { neg });
    }
    let v = if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        let body = &rest[2..];
        let (mant, exp) = match body.iter().position(|&c| c | 0x20 == b'p') {
            Some(p) => (&body[..p], exponent(&body[p + 1..])?),
            None => (body, 0),
        };
        let (ds, frac) = split_mantissa(mant, 16)?;
        let h = digits(&ds, 16);
        if h.is_zero() {
            return Some(ZERO);
        }
        round(neg, &h, exp - 4 * frac as i64, false)
    } else {
        let (mant, exp) = match rest.iter().position(|&c| c | 0x20 == b'e') {
            Some(p) => (&rest[..p], exponent(&rest[p + 1..])?),
            None => (rest, 0),
        };
        let (mut ds, frac) = split_mantissa(mant, 10)?;
        let mut k = exp - frac as i64;
        while ds.last() == Some(&b'0') {
            ds.pop();
            k += 1;
        }
        let first = ds.iter().position(|&d| d != b'0');
        let Some(first) = first else {
            return Some(ZERO);
        };
        let ds = &ds[first..];
        // The value is below 10^mag and at least 10^(mag-1).
        let mag = ds.len() as i64 + k;
        if mag > 4934 {
            return None;
        }
        if mag < -4952 {
            return None;
        }
        let mut d = digits(ds, 10);
        if k >= 0 {
            d.mul_pow10(k as u64);
            round(neg, &d, 0, false)
        } else {
            let mut den = Big::from_u128(1);
            den.mul_pow10(k.unsigned_abs());
            div_round(neg, &d, &den, 0)
        }
    };
    match v {
        Ld::Num { m: 0, .. } | Ld::Inf { .. } => None,
        v @ Ld::Num { .. } => Some(v),
    }
}

/// `a + b` (round to nearest even); an infinity in, an infinity or NaN (`None`) out.
pub fn add(a: Ld, b: Ld) -> Option<Ld> {
    match (a, b) {
        (Ld::Inf { neg: x }, Ld::Inf { neg: y }) if x != y => None,
        (i @ Ld::Inf { .. }, _) | (_, i @ Ld::Inf { .. }) => Some(i),
        (
            Ld::Num {
                neg: an,
                m: am,
                e: ae,
            },
            Ld::Num {
                neg: bn,
                m: bm,
                e: be,
            },
        ) => {
            if am == 0 {
                return Some(b);
            }
            if bm == 0 {
                return Some(a);
            }
            let e = ae.min(be);
            let x = Big::from_u128(u128::from(am)).shl(ae - e);
            let y = Big::from_u128(u128::from(bm)).shl(be - e);
            let (neg, sum) = if an == bn {
                (an, x.add(&y))
            } else {
                match x.cmp(&y) {
                    Ordering::Less => (bn, y.sub(&x)),
                    _ => (an, x.sub(&y)),
                }
            };
            Some(round(neg, &sum, e, false))
        }
    }
}

/// Whether `v` is an infinity.
pub fn is_inf(v: Ld) -> bool {
    matches!(v, Ld::Inf { .. })
}

/// `ld2string(v, LD_STR_HUMAN)`: `%.17Lf`, then trailing zeros (and a bare `.`) cut, `-0`
/// written `0`.
pub fn human(v: Ld) -> Vec<u8> {
    let (neg, m, e) = match v {
        Ld::Inf { neg } => {
            return if neg {
                b"-inf".to_vec()
            } else {
                b"inf".to_vec()
            }
        }
        Ld::Num { neg, m, e } => (neg, m, e),
    };
    // round(|v| * 10^17), ties to even.
    let mut t = Big::from_u128(u128::from(m));
    t.mul_pow10(17);
    let n = if e >= 0 {
        t.shl(e)
    } else {
        let sh = -e;
        let mut q = t.shr(sh);
        let half = t.bit(sh - 1);
        let sticky = t.low_nonzero(sh - 1);
        if half && (sticky || q.bit(0)) {
            q = q.add(&Big::from_u128(1));
        }
        q
    };
    let mut digits = n.decimal();
    while digits.len() < 18 {
        digits.insert(0, b'0');
    }
    let (int, frac) = digits.split_at(digits.len() - 17);
    let mut out = Vec::with_capacity(digits.len() + 2);
    if neg {
        out.push(b'-');
    }
    out.extend_from_slice(int);
    let frac_len = frac.iter().rposition(|&d| d != b'0').map_or(0, |p| p + 1);
    if frac_len > 0 {
        out.push(b'.');
        out.extend_from_slice(&frac[..frac_len]);
    }
    if out == b"-0" {
        out.remove(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> String {
        let x = parse(a.as_bytes()).expect("a");
        let y = parse(b.as_bytes()).expect("b");
        String::from_utf8(human(add(x, y).expect("sum"))).expect("utf8")
    }

    #[test]
    fn sums_as_redis_server_prints_them() {
        assert_eq!(incr("10.50", "0.1"), "10.6");
        assert_eq!(incr("5.0e3", "2.0e2"), "5200");
        assert_eq!(incr("0", "0.1"), "0.1");
        assert_eq!(incr("0.1", "0.2"), "0.3");
        assert_eq!(incr("1", "-1"), "0");
        assert_eq!(incr("-0.00000000000000000001", "0"), "0");
        assert_eq!(incr("1e20", "1"), "100000000000000000000");
        assert_eq!(incr("0x10", "1.5"), "17.5");
        assert_eq!(incr("3", "-5.25"), "-2.25");
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
            "1e5000",
            "1e-5000",
            "0x1p99999",
            "1..2",
            "1.2.3",
        ] {
            assert_eq!(parse(s.as_bytes()), None, "{s:?}");
        }
        for s in [
            "inf",
            "-Infinity",
            ".5",
            "5.",
            "+1",
            "0x1.8p1",
            "1E3",
            "0e-99999",
        ] {
            assert!(parse(s.as_bytes()).is_some(), "{s:?}");
        }
        assert!(add(
            parse(b"1e4932").expect("big"),
            parse(b"1e4932").expect("big")
        )
        .is_some_and(is_inf));
    }
}
