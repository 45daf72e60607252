use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use crate::Error;

/// PEM files of a throw-away CA and a leaf certificate signed by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificate; give it to clients as their trust root (`--ssl-ca`).
    pub ca_cert: PathBuf,
    /// Leaf certificate, valid for the common name, `localhost`, 127.0.0.1 and ::1.
    pub server_cert: PathBuf,
    /// PKCS#8 ECDSA P-256 private key of the leaf, mode 0600.
    pub server_key: PathBuf,
}

/// Writes `ca.pem`, `server-cert.pem` and `server-key.pem` into `dir` (created if missing).
///
/// Keys are ECDSA P-256 because `ring` cannot generate RSA keys; OpenSSL (MariaDB, the `mariadb`
/// CLI, Python, Go) and rustls all accept them. The leaf is usable for both server and client
/// authentication so the same files can serve a test client certificate.
pub fn generate_tls(dir: &Path, common_name: &str) -> Result<TlsFiles, Error> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;

    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{common_name} test CA"));
    ca_params
        .distinguished_name
        .push(DnType::OrganizationName, "manifold-testkit");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;

    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    // A common name such as "manifold test" is not a valid DNS name; only put names and
    // addresses into the SAN list, which is what clients verify.
    let is_host = common_name.parse::<std::net::IpAddr>().is_ok()
        || (!common_name.is_empty()
            && common_name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'));
    if is_host && !names.iter().any(|n| n == common_name) {
        names.insert(0, common_name.to_string());
    }
    let leaf_key = KeyPair::generate()?;
    let mut leaf_params = CertificateParams::new(names)?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    leaf_params
        .distinguished_name
        .push(DnType::OrganizationName, "manifold-testkit");
    leaf_params.is_ca = IsCa::ExplicitNoCa;
    leaf_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf_params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    leaf_params.use_authority_key_identifier_extension = true;
    let leaf_cert = leaf_params.signed_by(&leaf_key, &ca_cert, &ca_key)?;

    let files = TlsFiles {
        ca_cert: dir.join("ca.pem"),
        server_cert: dir.join("server-cert.pem"),
        server_key: dir.join("server-key.pem"),
    };
    write_file(&files.ca_cert, &ca_cert.pem(), 0o644)?;
    write_file(&files.server_cert, &leaf_cert.pem(), 0o644)?;
    write_file(&files.server_key, &leaf_key.serialize_pem(), 0o600)?;
    Ok(files)
}

fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), Error> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::client::WebPkiServerVerifier;
    use rustls::crypto::ring::default_provider as provider;
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::sign::CertifiedKey;

    use super::*;

    #[test]
    fn writes_pem_files() {
        let dir = tempfile::tempdir().unwrap();
        let files = generate_tls(dir.path(), "manifold.test").unwrap();
        let ca = std::fs::read_to_string(&files.ca_cert).unwrap();
        let cert = std::fs::read_to_string(&files.server_cert).unwrap();
        let key = std::fs::read_to_string(&files.server_key).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_ne!(ca, cert);
    }

    /// A verifier that trusts only the CA in `ca` (a PEM file), as a client given `--ssl-ca`.
    fn trusting(ca: &Path) -> Arc<WebPkiServerVerifier> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(ca).unwrap())
            .unwrap();
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::new(provider()))
            .build()
            .unwrap()
    }

    fn verify(verifier: &WebPkiServerVerifier, leaf: &CertificateDer<'_>, name: &str) -> bool {
        let name = ServerName::try_from(name.to_string()).unwrap();
        verifier
            .verify_server_cert(leaf, &[], &name, &[], UnixTime::now())
            .is_ok()
    }

    /// Checked in process with rustls' WebPKI verifier, so no `openssl` binary is needed; the
    /// MariaDB TLS tests check that OpenSSL-based servers and clients accept the files too.
    #[test]
    fn the_leaf_verifies_against_its_ca_for_its_names_only() {
        let dir = tempfile::tempdir().unwrap();
        let files = generate_tls(&dir.path().join("a"), "manifold.test").unwrap();
        let leaf = CertificateDer::from_pem_file(&files.server_cert).unwrap();
        let verifier = trusting(&files.ca_cert);
        for name in ["manifold.test", "localhost", "127.0.0.1", "::1"] {
            assert!(verify(&verifier, &leaf, name), "not valid for {name}");
        }
        assert!(
            !verify(&verifier, &leaf, "example.com"),
            "valid for any name"
        );
        let other = generate_tls(&dir.path().join("b"), "manifold.test").unwrap();
        assert!(
            !verify(&trusting(&other.ca_cert), &leaf, "localhost"),
            "trusted by another CA"
        );
    }

    #[test]
    fn the_key_is_the_leafs() {
        let dir = tempfile::tempdir().unwrap();
        let files = generate_tls(dir.path(), "127.0.0.1").unwrap();
        let leaf = CertificateDer::from_pem_file(&files.server_cert).unwrap();
        let key = PrivateKeyDer::from_pem_file(&files.server_key).unwrap();
        let signer = provider().key_provider.load_private_key(key).unwrap();
        CertifiedKey::new(vec![leaf.clone()], signer.clone())
            .keys_match()
            .expect("the key belongs to the leaf");
        let ca = CertificateDer::from_pem_file(&files.ca_cert).unwrap();
        assert!(
            CertifiedKey::new(vec![ca], signer).keys_match().is_err(),
            "the check tells keys apart"
        );
    }
}
