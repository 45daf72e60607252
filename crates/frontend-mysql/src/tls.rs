//! TLS offered to clients.

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::ring;
use rustls::ServerConfig;

pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let cert_pem = std::fs::read(cert)
        .map_err(|e| format!("mysql.tls.cert: cannot read {}: {e}", cert.display()))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("mysql.tls.cert: {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "mysql.tls.cert: {} holds no certificate",
            cert.display()
        ));
    }
    let key_pem = std::fs::read(key)
        .map_err(|e| format!("mysql.tls.key: cannot read {}: {e}", key.display()))?;
    let key_der = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| format!("mysql.tls.key: {}: {e}", key.display()))?
        .ok_or_else(|| format!("mysql.tls.key: {} holds no private key", key.display()))?;
    let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("mysql.tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| format!("mysql.tls: certificate and key do not match or are unusable: {e}"))?;
    Ok(Arc::new(config))
}
