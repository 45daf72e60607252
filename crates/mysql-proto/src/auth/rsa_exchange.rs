//! RSA key exchange for caching_sha2 full authentication on plaintext connections: the
//! server's key pair and decryption, and the client's encryption.

use std::fmt;

use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use sha1::Sha1;

use super::digest::xor_cyclic;
use super::scramble::nonce;
use super::AuthError;
#[cfg(doc)]
use super::{native_verify_cleartext, sha2_verify_cleartext, SHA2_REQUEST_PUBLIC_KEY};

/// Smallest RSA modulus accepted for the caching_sha2 key exchange. 1024 bits still leaves room
/// for an 85-byte password under OAEP; anything smaller is both weak and nearly useless.
pub const RSA_MIN_BITS: usize = 1024;
/// Largest RSA modulus accepted; the `rsa` crate refuses bigger public keys, and MySQL caps the
/// ciphertext at 1024 bytes anyway.
pub const RSA_MAX_BITS: usize = 4096;

/// OAEP with SHA-1 costs two digests plus two bytes of every RSA block.
const OAEP_SHA1_OVERHEAD: usize = 2 * 20 + 2;

/// The server's RSA key for caching_sha2 full authentication without TLS, plus its public half
/// pre-rendered as the PEM that [`SHA2_REQUEST_PUBLIC_KEY`] is answered with.
#[derive(Clone)]
pub struct RsaKeyPair {
    private: RsaPrivateKey,
    public_pem: String,
}

impl fmt::Debug for RsaKeyPair {
    // Never print key material, not even by accident in a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RsaKeyPair")
            .field("bits", &self.bits())
            .finish_non_exhaustive()
    }
}

impl RsaKeyPair {
    /// A fresh key pair (public exponent 65537). Use 2048 bits in production: it is what
    /// `mysqld` auto-generates and what every client is tested against. Generation takes from
    /// tens of milliseconds to seconds, so keep it off the event loop.
    pub fn generate(bits: usize) -> Result<Self, AuthError> {
        if !(RSA_MIN_BITS..=RSA_MAX_BITS).contains(&bits) {
            return Err(AuthError::UnsupportedKeySize { bits });
        }
        let private =
            RsaPrivateKey::new(&mut rand::thread_rng(), bits).map_err(AuthError::KeyGeneration)?;
        Self::from_private(private)
    }

    /// Loads a private key from PEM, either PKCS#1 (`BEGIN RSA PRIVATE KEY`, what `mysqld`'s
    /// auto-generated `private_key.pem` and `openssl genrsa` of OpenSSL 1.x write) or PKCS#8
    /// (`BEGIN PRIVATE KEY`, OpenSSL 3's default). Text around the PEM block is ignored.
    pub fn from_pem(private_key_pem: &str) -> Result<Self, AuthError> {
        let invalid = |why: String| AuthError::InvalidPrivateKey(why);
        let (label, block) = pem_block(private_key_pem).ok_or_else(|| {
            invalid("no complete '-----BEGIN ...-----' / '-----END ...-----' block".into())
        })?;
        let private = match label {
            "RSA PRIVATE KEY" => RsaPrivateKey::from_pkcs1_pem(&block)
                .map_err(|e| invalid(format!("PKCS#1: {e}")))?,
            "PRIVATE KEY" => RsaPrivateKey::from_pkcs8_pem(&block)
                .map_err(|e| invalid(format!("PKCS#8: {e}")))?,
            "ENCRYPTED PRIVATE KEY" => {
                return Err(invalid("password-protected keys are not supported".into()));
            }
            other => {
                return Err(invalid(format!(
                    "expected 'RSA PRIVATE KEY' or 'PRIVATE KEY', found '{other}'"
                )));
            }
        };
        private
            .validate()
            .map_err(|e| invalid(format!("inconsistent key: {e}")))?;
        let bits = private.size() * 8;
        if !(RSA_MIN_BITS..=RSA_MAX_BITS).contains(&bits) {
            return Err(AuthError::UnsupportedKeySize { bits });
        }
        Self::from_private(private)
    }

    fn from_private(private: RsaPrivateKey) -> Result<Self, AuthError> {
        // SubjectPublicKeyInfo ("BEGIN PUBLIC KEY"), 64-column base64, LF line ends and a final
        // newline: byte-for-byte the shape of OpenSSL's PEM_write_bio_RSA_PUBKEY, which is what
        // mysqld sends and what libmysqlclient (PEM_read_bio_RSA_PUBKEY), libmariadb,
        // go-sql-driver (x509.ParsePKIXPublicKey) and PyMySQL (load_pem_public_key) parse.
        // PKCS#1 "BEGIN RSA PUBLIC KEY" would be rejected by most of them.
        let public_pem = private
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| AuthError::InvalidPrivateKey(format!("cannot encode public key: {e}")))?;
        Ok(Self {
            private,
            public_pem,
        })
    }

    /// The public key as SPKI PEM, ending in `"\n"`. Send these bytes as they are after the
    /// 0x01 AuthMoreData marker; `mysqld` sends no terminating NUL.
    pub fn public_key_pem(&self) -> &str {
        &self.public_pem
    }

    /// Modulus size in bits.
    pub fn bits(&self) -> usize {
        self.private.size() * 8
    }

    /// Exact length of the client's encrypted-password packet for this key (the modulus size in
    /// bytes); anything else is a protocol error, as in `mysqld`.
    pub fn ciphertext_len(&self) -> usize {
        self.private.size()
    }

    /// Server side of full auth without TLS: RSA-OAEP (SHA-1, MGF1-SHA-1) decryption, then XOR
    /// with the scramble repeated cyclically, then cut at the first NUL exactly as `mysqld`
    /// does with `strlen`. Returns the cleartext password, without its NUL, for
    /// [`sha2_verify_cleartext`] / [`native_verify_cleartext`].
    ///
    /// PKCS#1 v1.5 padding is deliberately not accepted: every shipped client (libmysqlclient's
    /// sha256_password since 5.6 and caching_sha2 since 8.0.5, libmariadb, mysqlnd,
    /// go-sql-driver, PyMySQL, Connector/J) uses OAEP, and a v1.5 fallback would hand an
    /// attacker a Bleichenbacher padding oracle against this key, i.e. a way to decrypt other
    /// clients' captured passwords. Callers should still answer every failure here the same way
    /// as a wrong password.
    pub fn decrypt_password(
        &self,
        ciphertext: &[u8],
        scramble: &[u8],
    ) -> Result<Vec<u8>, AuthError> {
        if scramble.is_empty() {
            return Err(AuthError::EmptyScramble);
        }
        let expected = self.ciphertext_len();
        if ciphertext.len() != expected {
            return Err(AuthError::CiphertextLength {
                expected,
                actual: ciphertext.len(),
            });
        }
        // Blinding keeps the private-key operation's timing independent of the ciphertext.
        let mut plain = self
            .private
            .decrypt_blinded(&mut rand::thread_rng(), Oaep::new::<Sha1>(), ciphertext)
            .map_err(|_| AuthError::Decryption)?;
        xor_cyclic(&mut plain, nonce(scramble));
        let end = plain
            .iter()
            .position(|&b| b == 0)
            .ok_or(AuthError::MissingNul)?;
        plain.truncate(end);
        Ok(plain)
    }
}

/// Client side of caching_sha2 full auth without TLS (manifold logging into a MySQL 8 backend):
/// `(password ‖ NUL) XOR scramble` (scramble repeated cyclically), encrypted with RSA-OAEP
/// (SHA-1) under the server's public key. The key may be SPKI (`BEGIN PUBLIC KEY`, what servers
/// send) or PKCS#1 (`BEGIN RSA PUBLIC KEY`); surrounding text and trailing NULs are ignored.
pub fn encrypt_password_rsa(
    public_key_pem: &[u8],
    password: &[u8],
    scramble: &[u8],
) -> Result<Vec<u8>, AuthError> {
    if scramble.is_empty() {
        return Err(AuthError::EmptyScramble);
    }
    let key = parse_public_key(public_key_pem)?;
    let max = key.size().saturating_sub(OAEP_SHA1_OVERHEAD + 1);
    if password.len() > max {
        return Err(AuthError::PasswordTooLong {
            len: password.len(),
            max,
        });
    }
    let mut message = Vec::with_capacity(password.len() + 1);
    message.extend_from_slice(password);
    message.push(0);
    xor_cyclic(&mut message, nonce(scramble));
    key.encrypt(&mut rand::thread_rng(), Oaep::new::<Sha1>(), &message)
        .map_err(AuthError::Encryption)
}

fn parse_public_key(pem: &[u8]) -> Result<RsaPublicKey, AuthError> {
    let invalid = |why: String| AuthError::InvalidPublicKey(why);
    let text = std::str::from_utf8(pem).map_err(|_| invalid("not UTF-8 text".into()))?;
    let (label, block) = pem_block(text).ok_or_else(|| {
        invalid("no complete '-----BEGIN ...-----' / '-----END ...-----' block".into())
    })?;
    match label {
        "PUBLIC KEY" => {
            RsaPublicKey::from_public_key_pem(&block).map_err(|e| invalid(format!("SPKI: {e}")))
        }
        "RSA PUBLIC KEY" => {
            RsaPublicKey::from_pkcs1_pem(&block).map_err(|e| invalid(format!("PKCS#1: {e}")))
        }
        other => Err(invalid(format!(
            "expected 'PUBLIC KEY' or 'RSA PUBLIC KEY', found '{other}'"
        ))),
    }
}

/// Finds the first PEM block and returns its label and the block alone, newline-terminated.
/// Keys arrive from files and from servers with stray surroundings (comments, a trailing NUL
/// or no final newline) that the strict RFC 7468 decoder would refuse.
fn pem_block(text: &str) -> Option<(&str, String)> {
    const BEGIN: &str = "-----BEGIN ";
    const DASHES: &str = "-----";
    let start = text.find(BEGIN)?;
    let after_begin = &text[start + BEGIN.len()..];
    let label = &after_begin[..after_begin.find(DASHES)?];
    let end_marker = format!("-----END {label}-----");
    let end = start + BEGIN.len() + after_begin.find(&end_marker)? + end_marker.len();
    let mut block = String::with_capacity(end - start + 1);
    block.push_str(&text[start..end]);
    block.push('\n');
    Some((label, block))
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use proptest::prelude::*;
    use rsa::pkcs1::{EncodeRsaPrivateKey, EncodeRsaPublicKey};
    use rsa::pkcs8::EncodePrivateKey;
    use rsa::Pkcs1v15Encrypt;

    use super::super::{
        generate_scramble, native_stored_hash, native_verify_cleartext, sha2_stored_hash,
        sha2_verify_cleartext, SCRAMBLE_LEN,
    };
    use super::*;

    /// Key generation dominates test time; one 1024-bit key serves every test that does not
    /// care about the size.
    fn key1024() -> &'static RsaKeyPair {
        static KEY: OnceLock<RsaKeyPair> = OnceLock::new();
        KEY.get_or_init(|| RsaKeyPair::generate(1024).unwrap())
    }

    // The 2048-bit SPKI key from go-sql-driver's tests, i.e. the shape a MySQL server sends.
    const GO_PUBLIC_KEY: &str = "-----BEGIN PUBLIC KEY-----\n\
        MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAol0Z8G8U+25Btxk/g/fm\n\
        UAW/wEKjQCTjkibDE4B+qkuWeiumg6miIRhtilU6m9BFmLQSy1ltYQuu4k17A4tQ\n\
        rIPpOQYZges/qsDFkZh3wyK5jL5WEFVdOasf6wsfszExnPmcZS4axxoYJfiuilrN\n\
        hnwinBAqfi3S0sw5MpSI4Zl1AbOrHG4zDI62Gti2PKiMGyYDZTS9xPrBLbN95Kby\n\
        FFclQLEzA9RJcS1nHFsWtRgHjGPhhjCQxEm9NQ1nePFhCfBfApyfH1VM2VCOQum6\n\
        Ci9bMuHWjTjckC84mzF99kOxOWVU7mwS6gnJqBzpuz8t3zq8/iQ2y7QrmZV+jTJP\n\
        WQIDAQAB\n\
        -----END PUBLIC KEY-----\n";

    #[test]
    fn rsa_round_trip_1024() {
        let key = key1024();
        assert_eq!(key.bits(), 1024);
        assert_eq!(key.ciphertext_len(), 128);
        let nonce = generate_scramble();
        // 85 = 128 - 42 (OAEP/SHA-1) - 1 (NUL): the longest password a 1024-bit key carries.
        let longest = vec![b'p'; 85];
        for password in [
            &b"secret"[..],
            b"",
            b"x",
            "pässwörd".as_bytes(),
            &[0xff; 40],
            &longest,
        ] {
            let ciphertext =
                encrypt_password_rsa(key.public_key_pem().as_bytes(), password, &nonce).unwrap();
            assert_eq!(ciphertext.len(), 128);
            let plain = key.decrypt_password(&ciphertext, &nonce).unwrap();
            assert_eq!(plain, password);
        }
        let too_long = vec![b'p'; 86];
        let err =
            encrypt_password_rsa(key.public_key_pem().as_bytes(), &too_long, &nonce).unwrap_err();
        assert!(
            matches!(err, AuthError::PasswordTooLong { len: 86, max: 85 }),
            "{err}"
        );
    }

    #[test]
    fn rsa_round_trip_feeds_cleartext_verification() {
        let key = key1024();
        let nonce = generate_scramble();
        let ciphertext =
            encrypt_password_rsa(key.public_key_pem().as_bytes(), b"secret", &nonce).unwrap();
        let plain = key.decrypt_password(&ciphertext, &nonce).unwrap();
        assert!(sha2_verify_cleartext(
            Some(&sha2_stored_hash(b"secret")),
            &plain
        ));
        assert!(native_verify_cleartext(
            Some(&native_stored_hash(b"secret")),
            &plain
        ));
        // Wrong nonce: the XOR garbles the password instead of revealing it.
        let mut other = nonce;
        other[0] ^= 0x40;
        let garbled = key.decrypt_password(&ciphertext, &other).unwrap();
        assert_eq!(garbled, b"3ecret");
    }

    #[test]
    fn rsa_round_trip_2048_and_pem_shape() {
        let key = RsaKeyPair::generate(2048).unwrap();
        assert_eq!(key.bits(), 2048);
        let pem = key.public_key_pem();
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{pem}");
        assert!(pem.ends_with("\n-----END PUBLIC KEY-----\n"), "{pem}");
        assert!(!pem.contains('\r') && !pem.contains('\0'));
        let body: Vec<&str> = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        // OpenSSL wraps at 64 columns; a 2048-bit SPKI is 294 bytes = 392 base64 chars.
        assert_eq!(body.len(), 7);
        assert!(body[..6].iter().all(|l| l.len() == 64));
        assert_eq!(body.concat().len(), 392);
        let parsed = RsaPublicKey::from_public_key_pem(pem).unwrap();
        assert_eq!(parsed, key.private.to_public_key());

        let nonce = generate_scramble();
        let ciphertext = encrypt_password_rsa(pem.as_bytes(), b"hunter2", &nonce).unwrap();
        assert_eq!(ciphertext.len(), 256);
        assert_eq!(
            key.decrypt_password(&ciphertext, &nonce).unwrap(),
            b"hunter2"
        );
        let longest = vec![b'q'; 213];
        let ciphertext = encrypt_password_rsa(pem.as_bytes(), &longest, &nonce).unwrap();
        assert_eq!(key.decrypt_password(&ciphertext, &nonce).unwrap(), longest);
    }

    #[test]
    fn rsa_client_matches_mysql_server_algorithm() {
        // Decrypt by hand the way sha2_password.cc does: OAEP decrypt, XOR over SCRAMBLE_LENGTH,
        // strlen. This pins the wire format independently of decrypt_password.
        let key = key1024();
        let nonce = generate_scramble();
        let ciphertext =
            encrypt_password_rsa(key.public_key_pem().as_bytes(), b"abc", &nonce).unwrap();
        let mut plain = key
            .private
            .decrypt(Oaep::new::<Sha1>(), &ciphertext)
            .unwrap();
        assert_eq!(plain.len(), 4);
        for (i, b) in plain.iter_mut().enumerate() {
            *b ^= nonce[i % SCRAMBLE_LEN];
        }
        assert_eq!(plain, b"abc\0");
    }

    #[test]
    fn rsa_server_matches_mysql_client_algorithm() {
        // Encrypt by hand the way libmysqlclient/libmariadb do, with the handshake's 21-byte
        // NUL-terminated nonce handed to the server side: only 20 bytes may be used.
        let key = key1024();
        let nonce = generate_scramble();
        let password = b"a password longer than the twenty byte nonce";
        let mut message = password.to_vec();
        message.push(0);
        for (i, b) in message.iter_mut().enumerate() {
            *b ^= nonce[i % SCRAMBLE_LEN];
        }
        let public = key.private.to_public_key();
        let ciphertext = public
            .encrypt(&mut rand::thread_rng(), Oaep::new::<Sha1>(), &message)
            .unwrap();
        let mut nonce21 = nonce.to_vec();
        nonce21.push(0);
        assert_eq!(
            key.decrypt_password(&ciphertext, &nonce21).unwrap(),
            password
        );
    }

    #[test]
    fn rsa_decrypt_cuts_at_first_nul_like_mysqld() {
        let key = key1024();
        let nonce = generate_scramble();
        let ciphertext =
            encrypt_password_rsa(key.public_key_pem().as_bytes(), b"ab\0cd", &nonce).unwrap();
        assert_eq!(key.decrypt_password(&ciphertext, &nonce).unwrap(), b"ab");
    }

    #[test]
    fn rsa_decrypt_requires_nul() {
        let key = key1024();
        let nonce = generate_scramble();
        // XOR-ing "abc" with the nonce yields bytes that all stay non-zero after the server's
        // XOR, because nothing was appended.
        let mut message = b"abc".to_vec();
        xor_cyclic(&mut message, &nonce);
        let public = key.private.to_public_key();
        let ciphertext = public
            .encrypt(&mut rand::thread_rng(), Oaep::new::<Sha1>(), &message)
            .unwrap();
        assert!(matches!(
            key.decrypt_password(&ciphertext, &nonce),
            Err(AuthError::MissingNul)
        ));
    }

    #[test]
    fn rsa_decrypt_rejects_bad_input() {
        let key = key1024();
        let nonce = generate_scramble();
        let ciphertext =
            encrypt_password_rsa(key.public_key_pem().as_bytes(), b"pw", &nonce).unwrap();
        assert!(matches!(
            key.decrypt_password(&ciphertext[1..], &nonce),
            Err(AuthError::CiphertextLength {
                expected: 128,
                actual: 127
            })
        ));
        assert!(matches!(
            key.decrypt_password(&[], &nonce),
            Err(AuthError::CiphertextLength { .. })
        ));
        assert!(matches!(
            key.decrypt_password(&ciphertext, &[]),
            Err(AuthError::EmptyScramble)
        ));
        let mut flipped = ciphertext.clone();
        flipped[64] ^= 1;
        assert!(matches!(
            key.decrypt_password(&flipped, &nonce),
            Err(AuthError::Decryption)
        ));
        // Encrypted for another key.
        let other = RsaKeyPair::generate(1024).unwrap();
        let foreign =
            encrypt_password_rsa(other.public_key_pem().as_bytes(), b"pw", &nonce).unwrap();
        assert!(matches!(
            key.decrypt_password(&foreign, &nonce),
            Err(AuthError::Decryption)
        ));
    }

    #[test]
    fn rsa_pkcs1v15_padding_is_refused() {
        let key = key1024();
        let nonce = generate_scramble();
        let mut message = b"pw\0".to_vec();
        xor_cyclic(&mut message, &nonce);
        let public = key.private.to_public_key();
        let ciphertext = public
            .encrypt(&mut rand::thread_rng(), Pkcs1v15Encrypt, &message)
            .unwrap();
        assert!(matches!(
            key.decrypt_password(&ciphertext, &nonce),
            Err(AuthError::Decryption)
        ));
    }

    #[test]
    fn rsa_from_pem_pkcs1_and_pkcs8() {
        let key = key1024();
        let pkcs1 = key.private.to_pkcs1_pem(LineEnding::LF).unwrap();
        let pkcs8 = key.private.to_pkcs8_pem(LineEnding::LF).unwrap();
        assert!(pkcs1.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        assert!(pkcs8.starts_with("-----BEGIN PRIVATE KEY-----"));
        let nonce = generate_scramble();
        let ciphertext =
            encrypt_password_rsa(key.public_key_pem().as_bytes(), b"pw", &nonce).unwrap();
        for pem in [pkcs1.as_str(), pkcs8.as_str()] {
            let loaded = RsaKeyPair::from_pem(pem).unwrap();
            assert_eq!(loaded.public_key_pem(), key.public_key_pem());
            assert_eq!(loaded.decrypt_password(&ciphertext, &nonce).unwrap(), b"pw");
        }
        // CRLF files, comments around the block and a missing final newline are all tolerated.
        let crlf = pkcs1.replace('\n', "\r\n");
        let decorated = format!(
            "# mysqld private_key.pem\n{}\ntrailing junk",
            pkcs8.trim_end()
        );
        for pem in [crlf.as_str(), decorated.as_str(), pkcs8.trim_end()] {
            let loaded = RsaKeyPair::from_pem(pem).unwrap();
            assert_eq!(loaded.public_key_pem(), key.public_key_pem());
        }
    }

    #[test]
    fn rsa_from_pem_errors() {
        let key = key1024();
        let public_pem = key.public_key_pem();
        let err = RsaKeyPair::from_pem(public_pem).unwrap_err();
        assert!(
            matches!(err, AuthError::InvalidPrivateKey(ref m) if m.contains("PUBLIC KEY")),
            "{err}"
        );
        assert!(matches!(
            RsaKeyPair::from_pem(""),
            Err(AuthError::InvalidPrivateKey(_))
        ));
        assert!(matches!(
            RsaKeyPair::from_pem(
                "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"
            ),
            Err(AuthError::InvalidPrivateKey(_))
        ));
        assert!(matches!(
            RsaKeyPair::from_pem(
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
            ),
            Err(AuthError::InvalidPrivateKey(ref m)) if m.contains("password-protected")
        ));
        // Mismatched END label.
        let pkcs1 = key.private.to_pkcs1_pem(LineEnding::LF).unwrap();
        let broken = pkcs1.replace("END RSA PRIVATE KEY", "END PRIVATE KEY");
        assert!(matches!(
            RsaKeyPair::from_pem(&broken),
            Err(AuthError::InvalidPrivateKey(_))
        ));
        // Keys outside the supported size range.
        let small = RsaPrivateKey::new(&mut rand::thread_rng(), 512).unwrap();
        let small_pem = small.to_pkcs8_pem(LineEnding::LF).unwrap();
        assert!(matches!(
            RsaKeyPair::from_pem(&small_pem),
            Err(AuthError::UnsupportedKeySize { bits: 512 })
        ));
    }

    #[test]
    fn rsa_generate_rejects_bad_sizes() {
        for bits in [0, 512, 1023, 4097, 8192] {
            assert!(matches!(
                RsaKeyPair::generate(bits),
                Err(AuthError::UnsupportedKeySize { bits: b }) if b == bits
            ));
        }
    }

    #[test]
    fn rsa_debug_hides_key_material() {
        let shown = format!("{:?}", key1024());
        assert_eq!(shown, "RsaKeyPair { bits: 1024, .. }");
    }

    #[test]
    fn encrypt_accepts_server_sent_key_shapes() {
        let nonce = generate_scramble();
        // Exactly what go-sql-driver's tests feed it as a MySQL server's answer.
        let ciphertext = encrypt_password_rsa(GO_PUBLIC_KEY.as_bytes(), b"secret", &nonce).unwrap();
        assert_eq!(ciphertext.len(), 256);
        // A trailing NUL (some servers/tools add one), CRLF, and PKCS#1 "RSA PUBLIC KEY".
        let with_nul = format!("{GO_PUBLIC_KEY}\0");
        assert!(encrypt_password_rsa(with_nul.as_bytes(), b"secret", &nonce).is_ok());
        let crlf = GO_PUBLIC_KEY.replace('\n', "\r\n");
        assert!(encrypt_password_rsa(crlf.as_bytes(), b"secret", &nonce).is_ok());
        let key = key1024();
        let pkcs1 = key
            .private
            .to_public_key()
            .to_pkcs1_pem(LineEnding::LF)
            .unwrap();
        assert!(pkcs1.starts_with("-----BEGIN RSA PUBLIC KEY-----"));
        let ciphertext = encrypt_password_rsa(pkcs1.as_bytes(), b"secret", &nonce).unwrap();
        assert_eq!(
            key.decrypt_password(&ciphertext, &nonce).unwrap(),
            b"secret"
        );
    }

    #[test]
    fn encrypt_rejects_bad_keys() {
        let nonce = generate_scramble();
        for bad in [
            &b""[..],
            b"\xff\xfe",
            b"-----BEGIN PUBLIC KEY-----\n",
            b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        ] {
            assert!(matches!(
                encrypt_password_rsa(bad, b"pw", &nonce),
                Err(AuthError::InvalidPublicKey(_))
            ));
        }
        assert!(matches!(
            encrypt_password_rsa(GO_PUBLIC_KEY.as_bytes(), b"pw", &[]),
            Err(AuthError::EmptyScramble)
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn prop_rsa_round_trip(
            password in proptest::collection::vec(1u8..=255, 0..=85),
            nonce in proptest::array::uniform20(1u8..=127),
        ) {
            let key = key1024();
            let pem = key.public_key_pem().as_bytes();
            let ciphertext = encrypt_password_rsa(pem, &password, &nonce).unwrap();
            prop_assert_eq!(key.decrypt_password(&ciphertext, &nonce).unwrap(), password);
        }

        #[test]
        fn prop_rsa_decrypt_garbage_never_panics(
            garbage in proptest::collection::vec(any::<u8>(), 0..300),
            full_length in proptest::collection::vec(any::<u8>(), 128),
            nonce in proptest::collection::vec(any::<u8>(), 0..25),
        ) {
            let key = key1024();
            let _ = key.decrypt_password(&garbage, &nonce);
            // Right length, random content: must fail cleanly (OAEP's check makes an accidental
            // success astronomically unlikely).
            let result = key.decrypt_password(&full_length, &nonce);
            prop_assert!(result.is_err());
        }

        #[test]
        fn prop_pem_garbage_never_panics(
            garbage in proptest::collection::vec(any::<u8>(), 0..400),
            body in "[A-Za-z0-9+/=\\n]{0,400}",
            label in "(PUBLIC KEY|RSA PUBLIC KEY|PRIVATE KEY|RSA PRIVATE KEY|[A-Z ]{0,12})",
        ) {
            let nonce = [1u8; 20];
            let _ = encrypt_password_rsa(&garbage, b"pw", &nonce);
            let _ = RsaKeyPair::from_pem(&String::from_utf8_lossy(&garbage));
            let pem = format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----\n");
            let _ = encrypt_password_rsa(pem.as_bytes(), b"pw", &nonce);
            let _ = RsaKeyPair::from_pem(&pem);
        }

        #[test]
        fn prop_pem_mutations_never_panic(
            index in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            // Corrupt one byte of a real key: exercises the DER parsers past the base64 layer.
            let key = key1024();
            let mut public = key.public_key_pem().as_bytes().to_vec();
            let i = index.index(public.len());
            public[i] = byte;
            let _ = encrypt_password_rsa(&public, b"pw", &[1; 20]);
            let mut private = key.private.to_pkcs1_pem(LineEnding::LF).unwrap().as_bytes().to_vec();
            let i = index.index(private.len());
            private[i] = byte;
            let _ = RsaKeyPair::from_pem(&String::from_utf8_lossy(&private));
        }
    }
}
