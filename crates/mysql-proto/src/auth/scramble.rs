//! The server's nonce ("scramble", "auth-plugin-data") that both plugins hash.

use rand::{CryptoRng, Rng, RngCore};

use super::SCRAMBLE_LEN;

/// A fresh server nonce from the thread-local CSPRNG. See [`generate_scramble_with`].
pub fn generate_scramble() -> [u8; SCRAMBLE_LEN] {
    generate_scramble_with(&mut rand::thread_rng())
}

/// A fresh server nonce: 20 bytes in `1..=127`. The handshake sends it as a NUL-terminated
/// string and clients copy it with C string functions, so a zero byte would silently shorten
/// it; staying in 7-bit ASCII matches what `mysqld` generates and keeps charset-converting
/// clients from mangling it. The RNG must be cryptographic because a predictable nonce lets a
/// captured native response be replayed.
pub fn generate_scramble_with<R: RngCore + CryptoRng + ?Sized>(rng: &mut R) -> [u8; SCRAMBLE_LEN] {
    let mut out = [0u8; SCRAMBLE_LEN];
    for byte in &mut out {
        *byte = rng.gen_range(1..=127);
    }
    out
}

/// The part of a scramble MySQL actually hashes (see the module docs of [`super`]).
pub(super) fn nonce(scramble: &[u8]) -> &[u8] {
    &scramble[..scramble.len().min(SCRAMBLE_LEN)]
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn scramble_bytes_are_nonzero_ascii() {
        let mut seen = [false; 128];
        for _ in 0..2000 {
            for b in generate_scramble() {
                assert!((1..=127).contains(&b), "byte {b} out of range");
                seen[usize::from(b)] = true;
            }
        }
        // 40k draws over 127 values: every value should show up, and zero never.
        assert!(!seen[0]);
        assert!(seen[1..].iter().all(|&s| s));
        assert_ne!(generate_scramble(), generate_scramble());
    }

    #[test]
    fn scramble_with_seeded_rng_is_deterministic() {
        let a = generate_scramble_with(&mut StdRng::seed_from_u64(7));
        let b = generate_scramble_with(&mut StdRng::seed_from_u64(7));
        assert_eq!(a, b);
    }

    proptest! {
        #[test]
        fn prop_scramble_with_any_seed_is_valid(seed in any::<u64>()) {
            let s = generate_scramble_with(&mut StdRng::seed_from_u64(seed));
            prop_assert!(s.iter().all(|b| (1..=127).contains(b)));
        }
    }
}
