//! What manifold generates on first start when nothing is configured, as MySQL 8 does in its
//! data directory: a self-signed TLS certificate and its key (`server-cert.pem`,
//! `server-key.pem`), so clients that ask for TLS get it; and an RSA key pair
//! (`private_key.pem`, `public_key.pem`) for `caching_sha2_password` without TLS, kept so that
//! a client given the public key (`--server-public-key-path`, go-sql-driver's `serverPubKey`)
//! still matches after a restart. Later starts load them; a file that cannot be used is an
//! error naming it, never silently replaced (it may be a key someone relies on).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::CertificateDer;
use rustls::sign::CertifiedKey;
use sha2::{Digest as _, Sha256};

use crate::data_dir::DataDir;

pub const CERT_FILE: &str = "server-cert.pem";
pub const KEY_FILE: &str = "server-key.pem";
pub const RSA_PRIVATE_FILE: &str = "private_key.pem";
pub const RSA_PUBLIC_FILE: &str = "public_key.pem";

/// The subject's common name, after MySQL's `MySQL_Server_<version>_Auto_Generated_Server_Certificate`.
pub const COMMON_NAME: &str = "manifold_Auto_Generated_Server_Certificate";
const VALID_DAYS: i64 = 3650;

/// The data directory's certificate and key, ready to use.
#[derive(Debug, Clone)]
pub struct ServerCert {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// SHA-256 of the certificate (DER), as `openssl x509 -fingerprint -sha256` prints it.
    pub fingerprint: String,
    /// Made by this start (else loaded).
    pub generated: bool,
}

/// Loads the data directory's certificate and key, generating what is missing: both when
/// there are neither, a new certificate for the key when only the certificate is missing (how
/// to renew it and keep the key). A certificate without its key is an error: someone may rely
/// on that certificate, and its key may only be misplaced.
pub fn server_cert(dir: &DataDir) -> Result<ServerCert, String> {
    let lock = dir.lock()?;
    let key_pem = dir.read(&lock, KEY_FILE)?;
    let cert_pem = dir.read(&lock, CERT_FILE)?;
    let (cert_pem, generated) = match (key_pem, cert_pem) {
        (Some(key_pem), Some(cert_pem)) => {
            check_pair(dir, &key_pem, &cert_pem)?;
            (cert_pem, false)
        }
        (Some(key_pem), None) => {
            let key = KeyPair::from_pem(&key_pem).map_err(|e| unusable_key(dir, &e))?;
            let cert_pem = self_signed(&key)?;
            dir.write(&lock, CERT_FILE, &cert_pem, 0o644)?;
            tracing::info!(cert = %dir.file(CERT_FILE).display(), "generated a TLS certificate for the data directory's key");
            (cert_pem, true)
        }
        (None, Some(_)) => {
            return Err(format!(
                "{} has no key beside it ({} is missing); remove the certificate to have a new pair generated, or put its key there",
                dir.file(CERT_FILE).display(),
                dir.file(KEY_FILE).display()
            ));
        }
        (None, None) => {
            let key = KeyPair::generate().map_err(|e| format!("generating a TLS key: {e}"))?;
            let cert_pem = self_signed(&key)?;
            // Key first: a crash between the two leaves a key, for which the next start makes
            // a certificate.
            dir.write(&lock, KEY_FILE, &key.serialize_pem(), 0o600)?;
            dir.write(&lock, CERT_FILE, &cert_pem, 0o644)?;
            (cert_pem, true)
        }
    };
    let der = first_cert(dir, &cert_pem)?;
    Ok(ServerCert {
        cert: dir.file(CERT_FILE),
        key: dir.file(KEY_FILE),
        fingerprint: fingerprint(&der),
        generated,
    })
}

/// The data directory's RSA private key file, if there is one (checked: an unusable file is
/// an error naming it).
pub fn existing_rsa_key(dir: &DataDir) -> Result<Option<PathBuf>, String> {
    let lock = dir.lock()?;
    match dir.read(&lock, RSA_PRIVATE_FILE)? {
        Some(pem) => check_rsa_key(dir, &pem).map(|()| Some(dir.file(RSA_PRIVATE_FILE))),
        None => Ok(None),
    }
}

/// The RSA key for `caching_sha2_password` when `rsa_private_key` is not configured, made at
/// first use and the same on every call after: kept in the data directory when there is one
/// ([`rsa_key`]), else in memory.
#[derive(Debug)]
pub struct RsaKeySource {
    dir: Option<DataDir>,
    pem: Mutex<Option<String>>,
}

impl RsaKeySource {
    /// `dir`: `None` when the data directory cannot be used (see [`rsa_in_memory_warning`]).
    pub fn new(dir: Option<DataDir>) -> RsaKeySource {
        RsaKeySource {
            dir,
            pem: Mutex::new(None),
        }
    }

    /// The key's PEM. Callers at once wait for the first one's key rather than make another.
    pub fn get(&self) -> Result<String, String> {
        let mut held = self.pem.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pem) = held.as_ref() {
            return Ok(pem.clone());
        }
        let pem = match &self.dir {
            Some(dir) => rsa_key(dir)?,
            None => new_rsa_key()?.0,
        };
        *held = Some(pem.clone());
        Ok(pem)
    }
}

/// Logs that the RSA key is kept in memory only, because the data directory `dir` cannot be
/// used (`error`): logins work, but a client given the public key needs the new one after a
/// restart.
pub fn rsa_in_memory_warning(dir: &Path, error: &str) {
    tracing::warn!(
        data_dir = %dir.display(),
        error,
        "data directory not usable: the RSA key for caching_sha2_password is kept in memory, a new one each start"
    );
}

/// The data directory's RSA private key (PEM), generated when missing (2048 bits, PKCS#1, as
/// mysqld's `private_key.pem`; with `public_key.pem` beside it). Generating takes from a
/// fraction of a second to many on a loaded machine, so it is done at first use, not at start.
/// When the directory cannot be locked or the key written, the key is used all the same, kept
/// in memory, with a warning: a login does not fail for it. A key file that cannot be used is
/// an error.
pub fn rsa_key(dir: &DataDir) -> Result<String, String> {
    let lock = match dir.lock() {
        Ok(lock) => lock,
        Err(e) => {
            rsa_in_memory_warning(dir.path(), &e);
            return Ok(new_rsa_key()?.0);
        }
    };
    if let Some(pem) = dir.read(&lock, RSA_PRIVATE_FILE)? {
        check_rsa_key(dir, &pem)?;
        return Ok(pem);
    }
    let (pem, public) = new_rsa_key()?;
    match dir.write(&lock, RSA_PRIVATE_FILE, &pem, 0o600) {
        Ok(path) => {
            tracing::info!(key = %path.display(), "generated an RSA key for caching_sha2_password");
            if let Err(e) = dir.write(&lock, RSA_PUBLIC_FILE, &public, 0o644) {
                tracing::warn!(error = %e, "the RSA key's public half is not in the data directory");
            }
        }
        Err(e) => rsa_in_memory_warning(dir.path(), &e),
    }
    Ok(pem)
}

/// A new RSA key: its private PEM (PKCS#1) and public PEM.
fn new_rsa_key() -> Result<(String, String), String> {
    use rsa::pkcs1::EncodeRsaPrivateKey as _;
    let private = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048)
        .map_err(|e| format!("generating an RSA key: {e}"))?;
    let pem = private
        .to_pkcs1_pem(rsa::pkcs1::LineEnding::LF)
        .map_err(|e| format!("encoding the RSA key: {e}"))?
        .to_string();
    let pair = manifold_mysql_proto::auth::RsaKeyPair::from_pem(&pem)
        .map_err(|e| format!("the generated RSA key: {e}"))?;
    let public = pair.public_key_pem().to_owned();
    Ok((pem, public))
}

fn check_rsa_key(dir: &DataDir, pem: &str) -> Result<(), String> {
    manifold_mysql_proto::auth::RsaKeyPair::from_pem(pem)
        .map(drop)
        .map_err(|e| {
            format!(
                "{}: not a usable RSA private key ({e}); remove it to have a new one generated, or set mysql.tls.rsa_private_key",
                dir.file(RSA_PRIVATE_FILE).display()
            )
        })
}

/// A self-signed certificate for `key`: MySQL's auto-generated shape (a server certificate
/// named for the server, valid for ten years), with `localhost` and the loopback addresses
/// as its names, so a client on the same host that trusts this file can check the name too.
fn self_signed(key: &KeyPair) -> Result<String, String> {
    let failed = |e: rcgen::Error| format!("generating a TLS certificate: {e}");
    let names = ["localhost", "127.0.0.1", "::1"]
        .map(str::to_owned)
        .to_vec();
    let mut params = CertificateParams::new(names).map_err(failed)?;
    params
        .distinguished_name
        .push(DnType::CommonName, COMMON_NAME);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    // A day back, for clients whose clock is a little behind.
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(VALID_DAYS);
    Ok(params.self_signed(key).map_err(failed)?.pem())
}

/// The key and certificate read from the data directory parse and belong together.
fn check_pair(dir: &DataDir, key_pem: &str, cert_pem: &str) -> Result<(), String> {
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .ok()
        .flatten()
        .ok_or_else(|| unusable_key(dir, &"no PEM private key in it"))?;
    let key = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| unusable_key(dir, &e))?;
    let cert = first_cert(dir, cert_pem)?;
    match CertifiedKey::new(vec![cert], key).keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(()),
        Err(e) => Err(format!(
            "{} and {} do not belong together or cannot be used ({e}); remove both to have a new pair generated, or set mysql.tls.cert and mysql.tls.key",
            dir.file(CERT_FILE).display(),
            dir.file(KEY_FILE).display()
        )),
    }
}

fn first_cert(dir: &DataDir, cert_pem: &str) -> Result<CertificateDer<'static>, String> {
    rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .next()
        .and_then(Result::ok)
        .ok_or_else(|| {
            format!(
                "{}: no PEM certificate in it; remove it to have a new one generated for the key, or set mysql.tls.cert and mysql.tls.key",
                dir.file(CERT_FILE).display()
            )
        })
}

fn unusable_key(dir: &DataDir, why: &dyn std::fmt::Display) -> String {
    format!(
        "{}: not a usable private key ({why}); remove it (and {CERT_FILE}) to have a new pair generated, or set mysql.tls.cert and mysql.tls.key",
        dir.file(KEY_FILE).display()
    )
}

/// `AB:CD:...`, uppercase, of SHA-256 over `der`.
pub fn fingerprint(der: &[u8]) -> String {
    let hex = hex::encode_upper(Sha256::digest(der));
    let pairs: Vec<&str> = (0..hex.len()).step_by(2).map(|i| &hex[i..i + 2]).collect();
    pairs.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, DataDir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(&tmp.path().join("data")).unwrap();
        (tmp, dir)
    }

    fn mode(path: &std::path::Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn generated_once_then_reused() {
        let (_tmp, dir) = dir();
        let first = server_cert(&dir).unwrap();
        assert!(first.generated);
        assert_eq!(mode(&first.key), 0o600);
        let again = server_cert(&dir).unwrap();
        assert!(!again.generated);
        assert_eq!(again.fingerprint, first.fingerprint);
        assert_eq!(first.fingerprint.len(), 32 * 3 - 1);
        // The fingerprint is of the certificate on disk.
        let pem = std::fs::read(&first.cert).unwrap();
        let der = rustls_pemfile::certs(&mut pem.as_slice())
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(fingerprint(&der), first.fingerprint);
    }

    #[test]
    fn a_missing_certificate_is_made_again_for_the_same_key() {
        let (_tmp, dir) = dir();
        let first = server_cert(&dir).unwrap();
        let key = std::fs::read(&first.key).unwrap();
        std::fs::remove_file(&first.cert).unwrap();
        let renewed = server_cert(&dir).unwrap();
        assert!(renewed.generated);
        assert_ne!(renewed.fingerprint, first.fingerprint);
        assert_eq!(std::fs::read(&renewed.key).unwrap(), key);
    }

    #[test]
    fn a_certificate_without_its_key_is_an_error_and_is_kept() {
        let (_tmp, dir) = dir();
        let first = server_cert(&dir).unwrap();
        let cert = std::fs::read(&first.cert).unwrap();
        std::fs::remove_file(&first.key).unwrap();
        let e = server_cert(&dir).unwrap_err();
        assert!(
            e.contains(&first.cert.display().to_string())
                && e.contains(&first.key.display().to_string())
                && e.contains("remove the certificate"),
            "{e}"
        );
        assert_eq!(std::fs::read(&first.cert).unwrap(), cert);
        assert!(!first.key.exists());
    }

    #[test]
    fn a_corrupt_key_is_an_error_naming_it_and_is_kept() {
        let (_tmp, dir) = dir();
        let first = server_cert(&dir).unwrap();
        std::fs::write(&first.key, "-----BEGIN PRIVATE KEY-----\nnot base64\n").unwrap();
        let e = server_cert(&dir).unwrap_err();
        assert!(
            e.contains(&first.key.display().to_string()) && e.contains("not a usable private key"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(&first.key).unwrap(),
            "-----BEGIN PRIVATE KEY-----\nnot base64\n"
        );
    }

    #[test]
    fn a_key_of_another_certificate_is_an_error() {
        let (_tmp, dir) = dir();
        let first = server_cert(&dir).unwrap();
        let other = KeyPair::generate().unwrap();
        std::fs::write(&first.key, other.serialize_pem()).unwrap();
        let e = server_cert(&dir).unwrap_err();
        assert!(
            e.contains(&first.key.display().to_string()) && e.contains("belong together"),
            "{e}"
        );
    }

    #[test]
    fn rsa_key_generated_once_and_checked() {
        let (_tmp, dir) = dir();
        assert_eq!(existing_rsa_key(&dir).unwrap(), None);
        let pem = rsa_key(&dir).unwrap();
        assert!(pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"), "{pem}");
        let path = existing_rsa_key(&dir).unwrap().unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), pem);
        assert!(std::fs::read_to_string(dir.file(RSA_PUBLIC_FILE))
            .unwrap()
            .starts_with("-----BEGIN PUBLIC KEY-----"));
        assert_eq!(rsa_key(&dir).unwrap(), pem);
        std::fs::write(&path, "garbage").unwrap();
        let e = existing_rsa_key(&dir).unwrap_err();
        assert!(e.contains(&path.display().to_string()), "{e}");
        let e = rsa_key(&dir).unwrap_err();
        assert!(e.contains(&path.display().to_string()), "{e}");
    }

    #[test]
    fn an_rsa_key_that_cannot_be_written_is_kept_in_memory() {
        let (_tmp, dir) = dir();
        // Where the key's temporary file would be written, a directory: writing fails (for
        // root too).
        let blocker = dir.file(&format!(".{RSA_PRIVATE_FILE}.{}.tmp", std::process::id()));
        std::fs::create_dir(&blocker).unwrap();
        let source = RsaKeySource::new(Some(dir.clone()));
        let pem = source.get().unwrap();
        manifold_mysql_proto::auth::RsaKeyPair::from_pem(&pem).unwrap();
        assert!(!dir.file(RSA_PRIVATE_FILE).exists());
        // The same key for every later client, not a new one each.
        assert_eq!(source.get().unwrap(), pem);
        // A directory gone (no lock): in memory too.
        let gone = DataDir::open(&dir.path().join("gone")).unwrap();
        std::fs::remove_dir(gone.path()).unwrap();
        let pem = rsa_key(&gone).unwrap();
        manifold_mysql_proto::auth::RsaKeyPair::from_pem(&pem).unwrap();
        // No data directory at all.
        let source = RsaKeySource::new(None);
        let pem = source.get().unwrap();
        assert_eq!(source.get().unwrap(), pem);
    }

    #[test]
    fn starts_racing_on_one_directory_agree() {
        let (_tmp, dir) = dir();
        let path = dir.path().to_owned();
        let prints: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let path = path.clone();
                    s.spawn(move || {
                        server_cert(&DataDir::open(&path).unwrap())
                            .unwrap()
                            .fingerprint
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(prints.iter().all(|p| *p == prints[0]), "{prints:?}");
        assert_eq!(server_cert(&dir).unwrap().fingerprint, prints[0]);
    }
}
