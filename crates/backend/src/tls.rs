//! TLS for connections to backends: a rustls client configuration for each `TlsMode`.
//!
//! Without verification (`preferred`, `required`, `as_client` without `ca`) the certificate
//! the server presents is accepted whatever its form, X.509 v1 included (webpki parses only
//! v3): the handshake's signature is still checked with the key it carries ([`leaf`]), so the
//! peer holds that certificate's key. `verify_ca` and `verify_identity` check certificates with
//! webpki, which refuses v1 ones; the error then says so and what to do.

mod leaf;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod v1certs;

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{
    ring, verify_tls13_signature_with_raw_key, CryptoProvider, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::{CertificateDer, ServerName, SubjectPublicKeyInfoDer, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, OtherError, PeerMisbehaved,
    RootCertStore, SignatureScheme,
};

use crate::config::{BackendTlsConfig, TlsMode};

/// Builds the client TLS configuration, or `None` when TLS is disabled.
pub fn client_config(cfg: &BackendTlsConfig) -> Result<Option<Arc<ClientConfig>>, String> {
    let provider = Arc::new(ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("backend.tls: {e}"))?;
    let config = match cfg.mode {
        TlsMode::Disabled => return Ok(None),
        TlsMode::AsClient if cfg.ca.is_none() => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(algorithms(&provider))))
            .with_no_client_auth(),
        TlsMode::Preferred | TlsMode::Required => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(algorithms(&provider))))
            .with_no_client_auth(),
        TlsMode::AsClient | TlsMode::VerifyCa | TlsMode::VerifyIdentity => {
            let path = cfg
                .ca
                .as_ref()
                .ok_or("backend.tls.ca: required when mode is verify_ca or verify_identity")?;
            let pem = std::fs::read(path)
                .map_err(|e| format!("backend.tls.ca: cannot read {}: {e}", path.display()))?;
            let mut roots = RootCertStore::empty();
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                let cert = cert.map_err(|e| format!("backend.tls.ca: {}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("backend.tls.ca: {}: {e}", path.display()))?;
            }
            if roots.is_empty() {
                return Err(format!(
                    "backend.tls.ca: {} holds no certificate",
                    path.display()
                ));
            }
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("backend.tls.ca: {e}"))?;
            let verifier = Verify {
                webpki,
                check_name: cfg.mode == TlsMode::VerifyIdentity,
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth()
        }
    };
    Ok(Some(Arc::new(config)))
}

fn algorithms(provider: &CryptoProvider) -> WebPkiSupportedAlgorithms {
    provider.signature_verification_algorithms
}

/// `preferred` / `required` (and `as_client` without `ca`): encrypt, but trust any
/// certificate, of any X.509 version (MySQL's semantics for these modes). The handshake's
/// signature is still checked with the certificate's key, so the peer holds that key.
#[derive(Debug)]
struct AcceptAnyCert(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let leaf = leaf::leaf_key(cert).ok_or(CertificateError::BadEncoding)?;
        // What rustls's `verify_tls12_signature` does once webpki has parsed the certificate:
        // the algorithms the scheme allows, the one for the key's type.
        let (_, candidates) = self
            .0
            .mapping
            .iter()
            .find(|(scheme, _)| *scheme == dss.scheme)
            .ok_or(PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme)?;
        let algorithm = candidates
            .iter()
            .find(|a| a.public_key_alg_id().as_ref() == leaf.alg_id)
            .ok_or(CertificateError::BadSignature)?;
        algorithm
            .verify_signature(leaf.key, message, dss.signature())
            .map_err(|_| CertificateError::BadSignature)?;
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let leaf = leaf::leaf_key(cert).ok_or(CertificateError::BadEncoding)?;
        verify_tls13_signature_with_raw_key(
            message,
            &SubjectPublicKeyInfoDer::from(leaf.spki),
            dss,
            &self.0,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// `verify_ca` / `verify_identity`: the chain must lead to the configured CA; the name in the
/// certificate is compared with the address only for `verify_identity` (backends are often
/// reached by IP). webpki checks X.509 v3 certificates only: a v1 one is refused with
/// [`V1Certificate`], which says what to do.
#[derive(Debug)]
struct Verify {
    webpki: Arc<WebPkiServerVerifier>,
    check_name: bool,
}

/// What a failed TLS handshake with a backend says: rustls's error, or for a v1 certificate
/// under `verify_ca`/`verify_identity`, what to do about it (rustls would show the reason as
/// `Other(OtherError(..))`).
pub(crate) fn handshake_error(e: &std::io::Error) -> String {
    let v1 = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|e| match e {
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(why))) => {
                why.is::<V1Certificate>()
            }
            _ => false,
        });
    if v1 {
        V1Certificate.to_string()
    } else {
        e.to_string()
    }
}

/// Why a backend's X.509 v1 certificate fails `verify_ca` / `verify_identity`.
#[derive(Debug)]
struct V1Certificate;

impl std::fmt::Display for V1Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the backend's certificate is X.509 v1 (made without extensions), which \
             backend.tls.mode verify_ca and verify_identity cannot check: reissue it as v3 \
             (openssl x509 -req ... -extfile with subjectAltName) or use mode required",
        )
    }
}

impl std::error::Error for V1Certificate {}

impl ServerCertVerifier for Verify {
    fn verify_server_cert(
        &self,
        end: &CertificateDer<'_>,
        inter: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(end, inter, name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            Err(_) if leaf::leaf_key(end).is_some_and(|l| l.version == leaf::V1) => {
                Err(CertificateError::Other(OtherError(Arc::new(V1Certificate))).into())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
