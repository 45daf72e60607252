//! Handshakes in process between the backend client configurations and a rustls server
//! presenting the certificates real setups have, X.509 v1 included.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, SupportedProtocolVersion};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::client_config;

use crate::config::{BackendTlsConfig, TlsMode};

/// The v1 certificates and keys, made at test time (`super::v1certs`).
fn v1_ec() -> (&'static str, &'static str) {
    let v1 = super::v1certs::ec();
    (&v1.cert, &v1.key)
}

fn v1_rsa() -> (&'static str, &'static str) {
    let v1 = super::v1certs::rsa();
    (&v1.cert, &v1.key)
}
const VERSIONS: [&SupportedProtocolVersion; 2] = [&rustls::version::TLS12, &rustls::version::TLS13];

/// Presents one certificate with one signing key, whether or not they belong together (rustls'
/// own configuration builders would refuse a mismatch, or a v1 certificate).
#[derive(Debug)]
struct Presents(Arc<CertifiedKey>);

impl ResolvesServerCert for Presents {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

fn server(
    cert_pem: &str,
    key_pem: &str,
    version: &'static SupportedProtocolVersion,
) -> Arc<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let signer = provider.key_provider.load_private_key(key).unwrap();
    let cert = CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
    let resolver = Presents(Arc::new(CertifiedKey::new(vec![cert], signer)));
    Arc::new(
        ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[version])
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver)),
    )
}

fn client(mode: TlsMode, ca: Option<&std::path::Path>) -> Arc<rustls::ClientConfig> {
    let cfg = BackendTlsConfig {
        mode,
        ca: ca.map(std::path::Path::to_path_buf),
    };
    client_config(&cfg).unwrap().expect("TLS on")
}

/// A handshake and one byte each way; the client's error if it failed.
async fn handshake(
    client: Arc<rustls::ClientConfig>,
    server: Arc<ServerConfig>,
    name: &str,
) -> Result<(), String> {
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let connector = tokio_rustls::TlsConnector::from(client);
    let acceptor = tokio_rustls::TlsAcceptor::from(server);
    let serve = async move {
        let mut tls = acceptor.accept(server_io).await.ok()?;
        let mut byte = [0u8];
        tls.read_exact(&mut byte).await.ok()?;
        tls.write_all(&byte).await.ok()?;
        tls.flush().await.ok()
    };
    let talk = async move {
        let mut tls = connector
            .connect(name, client_io)
            .await
            .map_err(|e| super::handshake_error(&e))?;
        tls.write_all(b"x").await.map_err(|e| e.to_string())?;
        let mut byte = [0u8];
        tls.read_exact(&mut byte).await.map_err(|e| e.to_string())?;
        assert_eq!(&byte, b"x");
        Ok(())
    };
    tokio::join!(serve, talk).1
}

#[tokio::test]
async fn unverified_modes_accept_a_v1_certificate_over_tls12_and_tls13() {
    for (cert, key) in [v1_ec(), v1_rsa()] {
        for version in VERSIONS {
            for mode in [TlsMode::Required, TlsMode::Preferred, TlsMode::AsClient] {
                let r =
                    handshake(client(mode, None), server(cert, key, version), "127.0.0.1").await;
                assert_eq!(r, Ok(()), "{mode:?} {version:?} {}", &cert[..40]);
            }
        }
    }
}

/// The certificate is not verified, but the handshake is signed by its key: a server that
/// presents someone else's certificate fails.
#[tokio::test]
async fn a_handshake_not_signed_by_the_certificates_key_fails() {
    let other = rcgen::KeyPair::generate().unwrap().serialize_pem();
    let other_rsa = v1_rsa().1;
    for version in VERSIONS {
        for (cert, wrong_key) in [
            (v1_ec().0, other.as_str()),
            (v1_rsa().0, v1_ec().1),
            (v1_ec().0, other_rsa),
        ] {
            let r = handshake(
                client(TlsMode::Required, None),
                server(cert, wrong_key, version),
                "127.0.0.1",
            )
            .await;
            let e = r.expect_err("a signature by another key was accepted");
            assert!(
                e.contains("invalid peer certificate") || e.contains("peer misbehaved"),
                "{version:?}: {e}"
            );
        }
    }
}

#[tokio::test]
async fn verify_ca_refuses_a_v1_certificate_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    // Self-signed: the certificate is its own CA, as `--ssl-ca=server-cert.pem` would be.
    std::fs::write(&ca, v1_ec().0).unwrap();
    for mode in [TlsMode::VerifyCa, TlsMode::VerifyIdentity] {
        let r = handshake(
            client(mode, Some(&ca)),
            server(v1_ec().0, v1_ec().1, &rustls::version::TLS13),
            "v1-ec",
        )
        .await;
        let e = r.expect_err("webpki does not check v1 certificates");
        assert!(e.contains("X.509 v1"), "{mode:?}: {e}");
        assert!(e.contains("use mode required"), "{mode:?}: {e}");
        assert!(!e.contains("OtherError"), "{mode:?}: {e}");
    }
}

#[tokio::test]
async fn verify_ca_ignores_the_name_and_verify_identity_checks_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = manifold_testkit::generate_tls(dir.path(), "backend.test").unwrap();
    let cert = std::fs::read_to_string(&files.server_cert).unwrap();
    let key = std::fs::read_to_string(&files.server_key).unwrap();
    let other = manifold_testkit::generate_tls(&dir.path().join("other"), "other.test").unwrap();
    for version in VERSIONS {
        let serve = || server(&cert, &key, version);
        let ca = Some(files.ca_cert.as_path());
        assert_eq!(
            handshake(client(TlsMode::VerifyCa, ca), serve(), "192.0.2.1").await,
            Ok(())
        );
        assert_eq!(
            handshake(client(TlsMode::VerifyIdentity, ca), serve(), "backend.test").await,
            Ok(())
        );
        let e = handshake(client(TlsMode::VerifyIdentity, ca), serve(), "192.0.2.1").await;
        let e = e.unwrap_err();
        assert!(
            e.contains("not valid for name \"192.0.2.1\""),
            "{version:?} {e}"
        );
        let e = handshake(
            client(TlsMode::VerifyCa, Some(&other.ca_cert)),
            serve(),
            "x",
        )
        .await;
        let e = e.unwrap_err();
        assert!(e.contains("UnknownIssuer"), "{version:?} {e}");
    }
}
