#![forbid(unsafe_code)]
//! Test fixtures for manifold: this crate owns launching a **real** MariaDB topology (one primary,
//! N GTID replicas, ROW binlogs, TLS with certificates generated at run time) from the installed
//! `mariadbd` in a temporary directory on free ports of 127.0.0.1, running setup SQL through the
//! `mariadb` CLI, and tearing everything down again — even when the process that started it dies
//! without running destructors (a `sh` watchdog per topology kills the servers and removes the
//! directory). It also generates throw-away TLS material and free ports for other test servers,
//! and ships the `manifold-testkit` binary used by the demo and benchmark scripts.
//!
//! Its one piece of state outside a topology's directory is a pristine datadir template cached
//! under `$TMPDIR/manifold-testkit-cache-<uid>/` (it saves the ~2 s of `mariadb-install-db` per
//! topology; `MANIFOLD_TESTKIT_NO_CACHE=1` bypasses it).
//!
//! It must never ship in the manifold binary, must never mock a backend, and must never skip: when
//! MariaDB is not installed, every entry point fails with an error that says what to install.
//! It contains no `unsafe`; processes are signalled through the shell's `kill` and `Child::kill`.
//!
//! ```no_run
//! use std::time::Duration;
//! use manifold_testkit::Topology;
//!
//! let t = Topology::shared(); // one per test binary; 2 replicas, TLS on
//! t.create_schema("my_test").unwrap(); // tests share the servers: use your own names
//! t.sql(&t.primary, "CREATE TABLE my_test.t (id INT PRIMARY KEY); INSERT INTO my_test.t VALUES (1)")
//!     .unwrap();
//! t.wait_replicated(Duration::from_secs(30)).unwrap();
//! assert_eq!(t.sql(&t.replicas[0], "SELECT id FROM my_test.t").unwrap(), "1\n");
//! ```

mod datadir;
mod error;
mod mysql;
mod paths;
mod server;
mod sql;
mod tls;
mod topology;
mod watchdog;

pub use error::Error;
pub use mysql::{MysqlInstall, MYSQL_INSTALL_HINT};
pub use paths::{mariadb_client_path, mariadb_install_db_path, mariadbd_path, INSTALL_HINT};
pub use server::Server;
pub use sql::{quote_identifier, quote_string};
pub use tls::{generate_tls, TlsFiles};
pub use topology::{Flavor, Topology, TopologyConfig};

use std::net::{Ipv4Addr, TcpListener};

/// A port on 127.0.0.1 that was free a moment ago.
///
/// The port is released before returning, so another process may grab it first; servers started
/// by [`Topology`] retry with a fresh port when that happens, and callers starting their own
/// servers should do the same.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .expect("binding 127.0.0.1:0 must succeed on a test machine");
    listener
        .local_addr()
        .expect("a bound listener has a local address")
        .port()
}

/// Effective uid of this process, read from `/proc` because `libc::geteuid` needs `unsafe`.
pub(crate) fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Random lowercase hex, for passwords that only need to differ between runs.
pub(crate) fn random_hex(bytes: usize) -> Result<String, Error> {
    use std::fmt::Write as _;
    use std::io::Read as _;
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| Error::io("reading /dev/urandom", e))?;
    let mut out = String::with_capacity(bytes * 2);
    for b in buf {
        let _ = write!(out, "{b:02x}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_port_is_bindable() {
        let port = free_port();
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }

    #[test]
    fn effective_uid_is_known() {
        assert!(effective_uid().is_some());
    }

    #[test]
    fn random_hex_has_requested_length() {
        let a = random_hex(8).unwrap();
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, random_hex(8).unwrap());
    }
}
