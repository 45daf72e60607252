//! `mysql_native_password`: the SHA-1 challenge/response scheme (MySQL 4.1 .. 5.7 default).

use super::digest::{ct_eq, sha1, strip_one_nul, xor};
use super::hex::{decode_hex, push_hex, HEX_UPPER};
use super::scramble::nonce;
use super::{AuthError, NATIVE_PASSWORD};

/// Length of a `mysql_native_password` stored hash and of its client response.
pub const NATIVE_HASH_LEN: usize = 20;

/// Client response for `mysql_native_password`:
/// `SHA1(pw) XOR SHA1(scramble ‖ SHA1(SHA1(pw)))`. An empty password is sent as an empty
/// response, which is how servers recognise "no password".
pub fn native_scramble(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = sha1(&[password]);
    let stage2 = sha1(&[&stage1]);
    let mask = sha1(&[nonce(scramble), &stage2]);
    xor(&stage1, &mask).to_vec()
}

/// What a server keeps for a native account: `SHA1(SHA1(pw))`, the value behind MySQL's
/// `*HEX` authentication_string.
pub fn native_stored_hash(password: &[u8]) -> [u8; NATIVE_HASH_LEN] {
    sha1(&[&sha1(&[password])])
}

/// Parses MySQL's text form: `*` followed by 40 hex digits in either case.
pub fn parse_native_hash(text: &str) -> Result<[u8; NATIVE_HASH_LEN], AuthError> {
    text.strip_prefix('*')
        .and_then(decode_hex::<NATIVE_HASH_LEN>)
        .ok_or(AuthError::InvalidHash {
            plugin: NATIVE_PASSWORD,
            expected: "'*' followed by 40 hex digits",
        })
}

/// MySQL's text form: `*` followed by 40 uppercase hex digits, byte-identical to what
/// `SELECT authentication_string FROM mysql.user` shows.
pub fn format_native_hash(hash: &[u8; NATIVE_HASH_LEN]) -> String {
    let mut out = String::with_capacity(1 + 2 * NATIVE_HASH_LEN);
    out.push('*');
    push_hex(&mut out, hash, HEX_UPPER);
    out
}

/// Server-side check of a native response. The response XOR `SHA1(scramble ‖ stored)` yields
/// the client's `SHA1(pw)` only if it knew the password; hashing that once more must give
/// `stored`. Like `mysqld`, only a zero-length response means "no password".
pub fn native_verify(
    stored: Option<&[u8; NATIVE_HASH_LEN]>,
    scramble: &[u8],
    response: &[u8],
) -> bool {
    let Some(stored) = stored else {
        return response.is_empty();
    };
    if response.len() != NATIVE_HASH_LEN {
        return false;
    }
    let mask = sha1(&[nonce(scramble), stored]);
    let candidate = xor(response, &mask);
    ct_eq(&sha1(&[&candidate]), stored)
}

/// Server-side check of a cleartext password (caching_sha2 full auth over TLS or RSA, or
/// `mysql_clear_password`) against a native account. One trailing NUL is removed because
/// clients send the password as a C string.
pub fn native_verify_cleartext(stored: Option<&[u8; NATIVE_HASH_LEN]>, password: &[u8]) -> bool {
    let password = strip_one_nul(password);
    match stored {
        None => password.is_empty(),
        Some(stored) => !password.is_empty() && ct_eq(&native_stored_hash(password), stored),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::generate_scramble;
    use super::*;

    // go-sql-driver's auth_test.go nonce, reused so our vectors are its vectors.
    const GO_NATIVE_NONCE: [u8; 20] = [
        70, 114, 92, 94, 1, 38, 11, 116, 63, 114, 23, 101, 126, 103, 26, 95, 81, 17, 24, 21,
    ];

    #[test]
    fn native_stored_hash_matches_mysql_password_function() {
        // MySQL 5.7: SELECT PASSWORD('password') = '*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19'.
        let hash = native_stored_hash(b"password");
        assert_eq!(
            format_native_hash(&hash),
            "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
        );
    }

    #[test]
    fn native_scramble_known_answer() {
        // Same answer from go-sql-driver's TestAuthFastNativePassword and from Python's
        // hashlib following the formula by hand:
        //   s1 = sha1(b"secret"); s2 = sha1(s1); m = sha1(nonce + s2); s1 ^ m
        let expected = [
            53, 177, 140, 159, 251, 189, 127, 53, 109, 252, 172, 50, 211, 192, 240, 164, 26, 48,
            207, 45,
        ];
        let response = native_scramble(b"secret", &GO_NATIVE_NONCE);
        assert_eq!(response, expected);
        let stored = native_stored_hash(b"secret");
        assert!(native_verify(Some(&stored), &GO_NATIVE_NONCE, &response));
    }

    #[test]
    fn native_rejects_wrong_password_nonce_and_length() {
        let nonce = generate_scramble();
        let stored = native_stored_hash(b"right");
        assert!(native_verify(
            Some(&stored),
            &nonce,
            &native_scramble(b"right", &nonce)
        ));
        assert!(!native_verify(
            Some(&stored),
            &nonce,
            &native_scramble(b"wrong", &nonce)
        ));
        let other_nonce = generate_scramble();
        assert!(!native_verify(
            Some(&stored),
            &other_nonce,
            &native_scramble(b"right", &nonce)
        ));
        let mut response = native_scramble(b"right", &nonce);
        response.push(0);
        assert!(!native_verify(Some(&stored), &nonce, &response));
        response.truncate(19);
        assert!(!native_verify(Some(&stored), &nonce, &response));
        // Replaying the stored hash itself must not work: that is the point of the scheme.
        assert!(!native_verify(Some(&stored), &nonce, &stored));
    }

    #[test]
    fn native_empty_password() {
        let nonce = generate_scramble();
        assert!(native_scramble(b"", &nonce).is_empty());
        assert!(native_verify(None, &nonce, &[]));
        assert!(!native_verify(None, &nonce, &native_scramble(b"x", &nonce)));
        assert!(!native_verify(None, &nonce, &[0]));
        let stored = native_stored_hash(b"x");
        assert!(!native_verify(Some(&stored), &nonce, &[]));
        // Even a hash of "" does not turn an empty response into a match: use None for that.
        assert!(!native_verify(Some(&native_stored_hash(b"")), &nonce, &[]));
    }

    #[test]
    fn native_nul_terminated_nonce_is_equivalent() {
        let nonce = generate_scramble();
        let mut with_nul = nonce.to_vec();
        with_nul.push(0);
        assert_eq!(
            native_scramble(b"pw", &nonce),
            native_scramble(b"pw", &with_nul)
        );
        let stored = native_stored_hash(b"pw");
        assert!(native_verify(
            Some(&stored),
            &with_nul,
            &native_scramble(b"pw", &nonce)
        ));
    }

    #[test]
    fn native_hash_text_form() {
        let hash = native_stored_hash(b"password");
        let text = format_native_hash(&hash);
        assert_eq!(text.len(), 41);
        assert_eq!(parse_native_hash(&text).unwrap(), hash);
        assert_eq!(
            parse_native_hash("*2470c0c06dee42fd1618bb99005adca2ec9d1e19").unwrap(),
            hash
        );
        for bad in [
            "",
            "*",
            "2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19",
            "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E1",
            "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E190",
            "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E1G",
            " *2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19",
            "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1EÄ",
        ] {
            let err = parse_native_hash(bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    AuthError::InvalidHash {
                        plugin: NATIVE_PASSWORD,
                        ..
                    }
                ),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_native_hash("nope").unwrap_err().to_string(),
            "invalid mysql_native_password password hash: expected '*' followed by 40 hex digits"
        );
    }

    #[test]
    fn native_cleartext() {
        let stored = native_stored_hash(b"secret");
        assert!(native_verify_cleartext(Some(&stored), b"secret"));
        assert!(native_verify_cleartext(Some(&stored), b"secret\0"));
        assert!(!native_verify_cleartext(Some(&stored), b"secret\0\0"));
        assert!(!native_verify_cleartext(Some(&stored), b"Secret"));
        assert!(!native_verify_cleartext(Some(&stored), b""));
        assert!(!native_verify_cleartext(Some(&stored), b"\0"));
        assert!(native_verify_cleartext(None, b""));
        assert!(native_verify_cleartext(None, b"\0"));
        assert!(!native_verify_cleartext(None, b"secret"));
    }

    proptest! {
        #[test]
        fn prop_native_client_server_agree(
            password in proptest::collection::vec(1u8..=255, 1..80),
            nonce in proptest::array::uniform20(1u8..=127),
            other in proptest::collection::vec(1u8..=255, 1..80),
        ) {
            let stored = native_stored_hash(&password);
            let response = native_scramble(&password, &nonce);
            prop_assert_eq!(response.len(), NATIVE_HASH_LEN);
            prop_assert!(native_verify(Some(&stored), &nonce, &response));
            prop_assert!(native_verify_cleartext(Some(&stored), &password));
            prop_assert!(!native_verify(None, &nonce, &response));
            if other != password {
                let wrong = native_scramble(&other, &nonce);
                prop_assert!(!native_verify(Some(&stored), &nonce, &wrong));
                prop_assert!(!native_verify_cleartext(Some(&stored), &other));
            }
            let text = format_native_hash(&stored);
            prop_assert_eq!(parse_native_hash(&text).unwrap(), stored);
        }
    }
}
