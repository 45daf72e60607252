//! `caching_sha2_password`: the SHA-256 scheme that is the default since MySQL 8.0, and the
//! one-byte markers of its AuthMoreData exchange.

use super::digest::{ct_eq, sha256, strip_one_nul, xor};
use super::hex::{decode_hex, push_hex, HEX_LOWER};
use super::scramble::nonce;
#[cfg(doc)]
use super::RsaKeyPair;
use super::{AuthError, CACHING_SHA2_PASSWORD};

/// Length of a `caching_sha2_password` stored hash and of its fast-auth client response.
pub const SHA2_HASH_LEN: usize = 32;

/// Client -> server, after [`SHA2_PERFORM_FULL_AUTH`] on a plaintext connection: "send me your
/// RSA public key".
pub const SHA2_REQUEST_PUBLIC_KEY: u8 = 0x02;
/// Server -> client inside AuthMoreData (after the 0x01 marker): the fast path succeeded; an
/// OK packet follows.
pub const SHA2_FAST_AUTH_SUCCESS: u8 = 0x03;
/// Server -> client inside AuthMoreData: the fast path failed or had no cached entry; the
/// client must send its cleartext password (over TLS) or RSA-encrypt it.
pub const SHA2_PERFORM_FULL_AUTH: u8 = 0x04;

/// Client fast-auth response for `caching_sha2_password`:
/// `SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) ‖ scramble)`. Note the scramble goes *after* the
/// hash here, the opposite of native. An empty password is sent as an empty response.
pub fn sha2_scramble(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = sha256(&[password]);
    let stage2 = sha256(&[&stage1]);
    let mask = sha256(&[&stage2, nonce(scramble)]);
    xor(&stage1, &mask).to_vec()
}

/// What manifold keeps for a caching_sha2 account: `SHA256(SHA256(pw))`, i.e. exactly the
/// entry `mysqld` keeps in its fast-auth cache. (MySQL's salted, 5000-round
/// authentication_string is only needed to *fill* that cache, which manifold does from config.)
pub fn sha2_stored_hash(password: &[u8]) -> [u8; SHA2_HASH_LEN] {
    sha256(&[&sha256(&[password])])
}

/// Parses manifold's text form: `sha2:` followed by 64 hex digits in either case.
pub fn parse_sha2_hash(text: &str) -> Result<[u8; SHA2_HASH_LEN], AuthError> {
    text.strip_prefix("sha2:")
        .and_then(decode_hex::<SHA2_HASH_LEN>)
        .ok_or(AuthError::InvalidHash {
            plugin: CACHING_SHA2_PASSWORD,
            expected: "'sha2:' followed by 64 hex digits",
        })
}

/// Manifold's text form: `sha2:` followed by 64 lowercase hex digits.
pub fn format_sha2_hash(hash: &[u8; SHA2_HASH_LEN]) -> String {
    let mut out = String::with_capacity(5 + 2 * SHA2_HASH_LEN);
    out.push_str("sha2:");
    push_hex(&mut out, hash, HEX_LOWER);
    out
}

/// Server-side fast path. The response XOR `SHA256(stored ‖ scramble)` recovers the client's
/// `SHA256(pw)`; hashing it once more must give `stored`. A failure here is not final: the
/// server answers [`SHA2_PERFORM_FULL_AUTH`] and checks the cleartext password instead. Like
/// `mysqld`, both an empty response and a single NUL byte mean "no password".
pub fn sha2_verify_fast(
    stored: Option<&[u8; SHA2_HASH_LEN]>,
    scramble: &[u8],
    response: &[u8],
) -> bool {
    let Some(stored) = stored else {
        return response.is_empty() || response == [0];
    };
    if response.len() != SHA2_HASH_LEN {
        return false;
    }
    let mask = sha256(&[stored, nonce(scramble)]);
    let candidate = xor(response, &mask);
    ct_eq(&sha256(&[&candidate]), stored)
}

/// Server-side full auth: checks a cleartext password (as sent over TLS, or as returned by
/// [`RsaKeyPair::decrypt_password`]) against a caching_sha2 account. One trailing NUL is
/// removed because clients send the password as a C string.
pub fn sha2_verify_cleartext(stored: Option<&[u8; SHA2_HASH_LEN]>, password: &[u8]) -> bool {
    let password = strip_one_nul(password);
    match stored {
        None => password.is_empty(),
        Some(stored) => !password.is_empty() && ct_eq(&sha2_stored_hash(password), stored),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::hex::hex_value;
    use super::super::{
        format_native_hash, generate_scramble, native_scramble, native_stored_hash,
    };
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        s.as_bytes()
            .chunks(2)
            .map(|p| hex_value(p[0]).unwrap() << 4 | hex_value(p[1]).unwrap())
            .collect()
    }

    // go-sql-driver's auth_test.go nonces, reused so our vectors are its vectors.
    const GO_SHA2_NONCE: [u8; 20] = [
        10, 47, 74, 111, 75, 73, 34, 48, 88, 76, 114, 74, 37, 13, 3, 80, 82, 2, 23, 21,
    ];
    const GO_SHA2_NONCE_2: [u8; 20] = [
        90, 105, 74, 126, 30, 48, 37, 56, 3, 23, 115, 127, 69, 22, 41, 84, 32, 123, 43, 118,
    ];

    #[test]
    fn sha2_scramble_known_answers() {
        // go-sql-driver TestScrambleSHA256Pass and TestAuthFastCachingSHA256PasswordCached.
        assert_eq!(
            sha2_scramble(b"secret", &GO_SHA2_NONCE),
            unhex("f490e76f66d9d86665ce54d98c78d0acfe2fb0b08b423da807144873d30b312c")
        );
        assert_eq!(
            sha2_scramble(b"secret2", &GO_SHA2_NONCE),
            unhex("abc3934a012cf342e876071c8ee202de51785b430258a7a0138bc79c4d800bc6")
        );
        let expected = [
            102, 32, 5, 35, 143, 161, 140, 241, 171, 232, 56, 139, 43, 14, 107, 196, 249, 170, 147,
            60, 220, 204, 120, 178, 214, 15, 184, 150, 26, 61, 57, 235,
        ];
        assert_eq!(sha2_scramble(b"secret", &GO_SHA2_NONCE_2), expected);
        let stored = sha2_stored_hash(b"secret");
        assert!(sha2_verify_fast(Some(&stored), &GO_SHA2_NONCE_2, &expected));
        assert!(!sha2_verify_fast(Some(&stored), &GO_SHA2_NONCE, &expected));
    }

    #[test]
    fn sha2_stored_hash_known_answer() {
        // python: hashlib.sha256(hashlib.sha256(b"secret").digest()).hexdigest()
        assert_eq!(
            format_sha2_hash(&sha2_stored_hash(b"secret")),
            "sha2:3881219d087dd9c634373fd33dfa33a2cb6bfc6c520b64b8bb60ef2ceb534ae7"
        );
    }

    #[test]
    fn sha2_rejects_wrong_password_nonce_and_length() {
        let nonce = generate_scramble();
        let stored = sha2_stored_hash(b"right");
        assert!(sha2_verify_fast(
            Some(&stored),
            &nonce,
            &sha2_scramble(b"right", &nonce)
        ));
        assert!(!sha2_verify_fast(
            Some(&stored),
            &nonce,
            &sha2_scramble(b"wrong", &nonce)
        ));
        assert!(!sha2_verify_fast(
            Some(&stored),
            &generate_scramble(),
            &sha2_scramble(b"right", &nonce)
        ));
        // A native response (20 bytes) or a truncated one never passes.
        assert!(!sha2_verify_fast(
            Some(&stored),
            &nonce,
            &native_scramble(b"right", &nonce)
        ));
        assert!(!sha2_verify_fast(Some(&stored), &nonce, &stored[..31]));
        assert!(!sha2_verify_fast(Some(&stored), &nonce, &stored));
    }

    #[test]
    fn sha2_empty_password() {
        let nonce = generate_scramble();
        assert!(sha2_scramble(b"", &nonce).is_empty());
        assert!(sha2_verify_fast(None, &nonce, &[]));
        assert!(sha2_verify_fast(None, &nonce, &[0]));
        assert!(!sha2_verify_fast(None, &nonce, &[0, 0]));
        assert!(!sha2_verify_fast(
            None,
            &nonce,
            &sha2_scramble(b"x", &nonce)
        ));
        let stored = sha2_stored_hash(b"x");
        assert!(!sha2_verify_fast(Some(&stored), &nonce, &[]));
        assert!(!sha2_verify_fast(Some(&stored), &nonce, &[0]));
        assert!(!sha2_verify_fast(Some(&sha2_stored_hash(b"")), &nonce, &[]));
    }

    #[test]
    fn sha2_nul_terminated_nonce_is_equivalent() {
        let nonce = generate_scramble();
        let mut with_nul = nonce.to_vec();
        with_nul.push(0);
        assert_eq!(
            sha2_scramble(b"pw", &nonce),
            sha2_scramble(b"pw", &with_nul)
        );
    }

    #[test]
    fn sha2_hash_text_form() {
        let hash = sha2_stored_hash(b"secret");
        let text = format_sha2_hash(&hash);
        assert_eq!(text.len(), 69);
        assert_eq!(text, text.to_lowercase());
        assert_eq!(parse_sha2_hash(&text).unwrap(), hash);
        assert_eq!(
            parse_sha2_hash(&format!("sha2:{}", text[5..].to_uppercase())).unwrap(),
            hash
        );
        for bad in [
            String::new(),
            "sha2:".to_string(),
            text[5..].to_string(),
            format!("SHA2:{}", &text[5..]),
            text[..68].to_string(),
            format!("{text}0"),
            format!("{}x", &text[..68]),
            format_native_hash(&native_stored_hash(b"secret")),
        ] {
            let err = parse_sha2_hash(&bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    AuthError::InvalidHash {
                        plugin: CACHING_SHA2_PASSWORD,
                        ..
                    }
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn sha2_cleartext() {
        let stored = sha2_stored_hash(b"secret");
        assert!(sha2_verify_cleartext(Some(&stored), b"secret"));
        assert!(sha2_verify_cleartext(Some(&stored), b"secret\0"));
        assert!(!sha2_verify_cleartext(Some(&stored), b"secret\0\0"));
        assert!(!sha2_verify_cleartext(Some(&stored), b"secre"));
        assert!(!sha2_verify_cleartext(Some(&stored), b""));
        assert!(!sha2_verify_cleartext(Some(&stored), b"\0"));
        assert!(!sha2_verify_cleartext(Some(&sha2_stored_hash(b"")), b"\0"));
        assert!(sha2_verify_cleartext(None, b""));
        assert!(sha2_verify_cleartext(None, b"\0"));
        assert!(!sha2_verify_cleartext(None, b"secret\0"));
    }

    proptest! {
        #[test]
        fn prop_sha2_client_server_agree(
            password in proptest::collection::vec(1u8..=255, 1..80),
            nonce in proptest::array::uniform20(1u8..=127),
            other in proptest::collection::vec(1u8..=255, 1..80),
        ) {
            let stored = sha2_stored_hash(&password);
            let response = sha2_scramble(&password, &nonce);
            prop_assert_eq!(response.len(), SHA2_HASH_LEN);
            prop_assert!(sha2_verify_fast(Some(&stored), &nonce, &response));
            prop_assert!(sha2_verify_cleartext(Some(&stored), &password));
            prop_assert!(!sha2_verify_fast(None, &nonce, &response));
            if other != password {
                let wrong = sha2_scramble(&other, &nonce);
                prop_assert!(!sha2_verify_fast(Some(&stored), &nonce, &wrong));
                prop_assert!(!sha2_verify_cleartext(Some(&stored), &other));
            }
            let text = format_sha2_hash(&stored);
            prop_assert_eq!(parse_sha2_hash(&text).unwrap(), stored);
        }
    }
}
