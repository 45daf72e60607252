//! Hashing, XOR and comparison helpers shared by the plugins.

use sha1::{Digest, Sha1};
use sha2::Sha256;

pub(super) fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

pub(super) fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

pub(super) fn xor<const N: usize>(a: &[u8], b: &[u8; N]) -> [u8; N] {
    let mut out = *b;
    for (o, x) in out.iter_mut().zip(a) {
        *o ^= x;
    }
    out
}

pub(super) fn xor_cyclic(buf: &mut [u8], key: &[u8]) {
    for (b, k) in buf.iter_mut().zip(key.iter().cycle()) {
        *b ^= k;
    }
}

/// Equality whose running time does not depend on where the inputs differ, so response
/// checks leak nothing about the stored hash through timing.
pub(super) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

pub(super) fn strip_one_nul(password: &[u8]) -> &[u8] {
    password.strip_suffix(&[0]).unwrap_or(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ct_eq_basics() {
        assert!(ct_eq(b"", b""));
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
