//! Cryptography of MySQL's two password auth plugins, `mysql_native_password` and
//! `caching_sha2_password`, for both ends of a connection: manifold is a server to its clients
//! and a client to its backends. Everything here is a pure function of its inputs (apart from
//! drawing randomness for scrambles, RSA keys and RSA padding), so the connection state
//! machines can call it from anywhere; RSA operations are slow (milliseconds) and belong on the
//! blocking pool. MySQL's own server and client code is the reference for every byte layout:
//! `sql/auth/password.cc` (native), `sql/auth/sha2_password.cc` and
//! `sql-common/client_authentication.cc` (caching_sha2 and its RSA exchange).
//!
//! One file per job, all re-exported here so callers write `auth::name`:
//! - [`scramble`]: the server's nonce;
//! - [`native`]: `mysql_native_password` (client response, stored hash, checks);
//! - [`caching_sha2`]: `caching_sha2_password` (fast path, full-auth check, the AuthMoreData
//!   markers of its exchange);
//! - [`rsa_exchange`]: the RSA key exchange of caching_sha2 full authentication without TLS;
//! - `digest` and `hex` (private): hashing, XOR, constant-time comparison, the hex text forms.
//!
//! Scrambles: MySQL always uses exactly [`SCRAMBLE_LEN`] bytes of the server's nonce, but the
//! handshake carries it NUL-terminated (21 bytes), so every function here ignores bytes past
//! the twentieth. That lets callers pass either form without corrupting the hash.
//!
//! "No password" is an account state, not a hash: callers pass `None` as the stored credential
//! for such accounts. An empty password matches only `None`, and `None` matches only an empty
//! password, in every verification function.

pub mod caching_sha2;
mod digest;
mod hex;
pub mod native;
pub mod rsa_exchange;
pub mod scramble;

pub use caching_sha2::{
    format_sha2_hash, parse_sha2_hash, sha2_scramble, sha2_stored_hash, sha2_verify_cleartext,
    sha2_verify_fast, SHA2_FAST_AUTH_SUCCESS, SHA2_HASH_LEN, SHA2_PERFORM_FULL_AUTH,
    SHA2_REQUEST_PUBLIC_KEY,
};
pub use native::{
    format_native_hash, native_scramble, native_stored_hash, native_verify,
    native_verify_cleartext, parse_native_hash, NATIVE_HASH_LEN,
};
pub use rsa_exchange::{encrypt_password_rsa, RsaKeyPair, RSA_MAX_BITS, RSA_MIN_BITS};
pub use scramble::{generate_scramble, generate_scramble_with};

/// Plugin name of the SHA-1 challenge/response scheme (MySQL 4.1 .. 5.7 default).
pub const NATIVE_PASSWORD: &str = "mysql_native_password";
/// Plugin name of the SHA-256 scheme that is the default since MySQL 8.0.
pub const CACHING_SHA2_PASSWORD: &str = "caching_sha2_password";
/// Length of the server's nonce ("scramble", "auth-plugin-data") that both plugins hash.
pub const SCRAMBLE_LEN: usize = 20;

/// Why an auth credential, key or RSA message was rejected.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("invalid {plugin} password hash: expected {expected}")]
    InvalidHash {
        plugin: &'static str,
        expected: &'static str,
    },
    #[error(
        "unsupported RSA key size of {bits} bits (supported: {RSA_MIN_BITS}..={RSA_MAX_BITS})"
    )]
    UnsupportedKeySize { bits: usize },
    #[error("RSA key generation failed: {0}")]
    KeyGeneration(#[source] rsa::Error),
    #[error("invalid RSA private key PEM: {0}")]
    InvalidPrivateKey(String),
    #[error("invalid RSA public key PEM: {0}")]
    InvalidPublicKey(String),
    #[error("the scramble is empty; the server's 20-byte nonce is required")]
    EmptyScramble,
    #[error("RSA-encrypted password is {actual} bytes, expected {expected} (the key size)")]
    CiphertextLength { expected: usize, actual: usize },
    #[error("RSA decryption of the password failed (not OAEP/SHA-1 for this key)")]
    Decryption,
    #[error("decrypted password is not NUL-terminated")]
    MissingNul,
    #[error("password of {len} bytes is too long for RSA encryption with this key (max {max})")]
    PasswordTooLong { len: usize, max: usize },
    #[error("RSA encryption of the password failed: {0}")]
    Encryption(#[source] rsa::Error),
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn protocol_constants() {
        assert_eq!(NATIVE_PASSWORD, "mysql_native_password");
        assert_eq!(CACHING_SHA2_PASSWORD, "caching_sha2_password");
        assert_eq!(SCRAMBLE_LEN, 20);
        assert_eq!(
            (
                SHA2_REQUEST_PUBLIC_KEY,
                SHA2_FAST_AUTH_SUCCESS,
                SHA2_PERFORM_FULL_AUTH
            ),
            (2, 3, 4)
        );
    }

    proptest! {
        #[test]
        fn prop_verify_garbage_never_matches(
            stored20 in proptest::array::uniform20(any::<u8>()),
            stored32 in proptest::array::uniform32(any::<u8>()),
            nonce in proptest::collection::vec(any::<u8>(), 0..30),
            response in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            // Random bytes matching a hash would mean a broken comparison, not luck.
            prop_assert!(!native_verify(Some(&stored20), &nonce, &response));
            prop_assert!(!sha2_verify_fast(Some(&stored32), &nonce, &response));
            prop_assert!(!native_verify_cleartext(Some(&stored20), &response));
            prop_assert!(!sha2_verify_cleartext(Some(&stored32), &response));
        }

        #[test]
        fn prop_hash_parsers_never_panic(text in "\\PC{0,80}", hex in "[*a-zA-Z0-9:]{0,70}") {
            let _ = parse_native_hash(&text);
            let _ = parse_sha2_hash(&text);
            let _ = parse_native_hash(&hex);
            let _ = parse_sha2_hash(&hex);
        }
    }
}
