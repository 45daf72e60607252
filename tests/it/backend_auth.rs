//! The backend side's caching_sha2_password and TLS, exercised against the two servers that
//! offer them here: MariaDB (TLS) and manifold itself (caching_sha2_password, as MySQL 8 does).

use crate::harness::{client, config, start, topology};
use manifold_backend::TlsMode;

#[test]
fn backend_connections_use_tls_when_configured() {
    let t = topology();
    let mut cfg = config();
    cfg.backend.tls.mode = TlsMode::VerifyCa;
    cfg.backend.tls.ca = Some(t.tls.as_ref().expect("topology has TLS").ca_cert.clone());
    let server = start(&cfg);
    let mut c = client(server.mysql_addr(), None);
    let r = c.query("SHOW SESSION STATUS LIKE 'Ssl_cipher'").unwrap();
    let cipher = r.rows[0][1].clone().unwrap_or_default();
    assert!(!cipher.is_empty(), "the backend session is encrypted");
}

/// manifold B logs into manifold A, which asks for caching_sha2_password: a first login goes
/// through full authentication (RSA key exchange without TLS, cleartext with TLS), later
/// ones through the fast path.
#[test]
fn backend_login_with_caching_sha2_full_and_fast_auth() {
    for tls in [false, true] {
        let t = topology();
        let mut front_a = config();
        front_a.mysql.default_auth_plugin = "caching_sha2_password".into();
        if tls {
            let files = t.tls.as_ref().unwrap();
            front_a.mysql.tls.cert = Some(files.server_cert.clone());
            front_a.mysql.tls.key = Some(files.server_key.clone());
        }
        // Only the sha2 hash: the plugin cannot fall back to native.
        front_a.users[0].password_native = None;
        let a = start(&front_a);
        let mut front_b = config();
        front_b.backend.primary = a.mysql_addr().to_string();
        front_b.pool.min_idle = 0;
        if tls {
            front_b.backend.tls.mode = TlsMode::Required;
        }
        // A new gateway each round: each one logs in to A afresh.
        for _ in 0..2 {
            let b = start(&front_b);
            let mut c = client(b.mysql_addr(), None);
            assert_eq!(
                c.scalar("SELECT 'through two gateways'")
                    .unwrap()
                    .as_deref(),
                Some("through two gateways")
            );
        }
        let m = &a.shared.metrics;
        assert!(
            m.sha2_full_auths.load(std::sync::atomic::Ordering::Relaxed) >= 1,
            "tls={tls}: a full authentication happened"
        );
        assert!(
            m.sha2_fast_auths.load(std::sync::atomic::Ordering::Relaxed) >= 1,
            "tls={tls}: a fast-path login happened"
        );
        drop(a);
    }
}
