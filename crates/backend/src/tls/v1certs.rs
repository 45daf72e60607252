//! X.509 v1 certificates as real setups make them (`openssl req -new` then `openssl x509
//! -req -signkey`, no extensions file), made once per test run with the `openssl` command:
//! no key is kept in the repository.

use std::process::Command;
use std::sync::OnceLock;

/// A self-signed v1 certificate and its key, both PEM.
pub struct V1 {
    pub cert: String,
    pub key: String,
}

fn make(algorithm: &[&str]) -> V1 {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = |name: &str| dir.path().join(name);
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .output()
            .expect("the openssl command (Debian's openssl package) is needed by these tests");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let key = path("key.pem");
    let csr = path("req.csr");
    let cert = path("cert.pem");
    let key_s = key.to_str().unwrap();
    let mut genkey = vec!["genpkey"];
    genkey.extend_from_slice(algorithm);
    genkey.extend_from_slice(&["-out", key_s]);
    run(&genkey);
    run(&[
        "req",
        "-new",
        "-key",
        key_s,
        "-subj",
        "/CN=localhost",
        "-out",
        csr.to_str().unwrap(),
    ]);
    run(&[
        "x509",
        "-req",
        "-days",
        "30",
        "-in",
        csr.to_str().unwrap(),
        "-signkey",
        key_s,
        "-out",
        cert.to_str().unwrap(),
    ]);
    V1 {
        cert: std::fs::read_to_string(&cert).unwrap(),
        key: std::fs::read_to_string(&key).unwrap(),
    }
}

/// An ECDSA P-256 one.
pub fn ec() -> &'static V1 {
    static CELL: OnceLock<V1> = OnceLock::new();
    CELL.get_or_init(|| make(&["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]))
}

/// An RSA 2048 one.
pub fn rsa() -> &'static V1 {
    static CELL: OnceLock<V1> = OnceLock::new();
    CELL.get_or_init(|| make(&["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]))
}
