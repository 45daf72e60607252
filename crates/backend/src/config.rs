//! Backend and pool settings.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// How manifold's connections to backends use TLS: the values of MySQL's `--ssl-mode`, plus
/// `as_client` (MySQL Router's `server_ssl_mode=AS_CLIENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TlsMode {
    /// Encrypt exactly when the client's connection is encrypted (and the backend offers
    /// TLS), so a client that asked for TLS is encrypted end to end and sees a TLS session
    /// on the server (`Ssl_cipher`). Connections manifold opens for itself (Redis door, global
    /// binlog, monitor) have no client: they are encrypted whenever the backend offers TLS.
    /// Certificates are checked against `ca` when it is set.
    #[default]
    AsClient,
    /// Never.
    Disabled,
    /// When the server offers it, without verifying its certificate.
    Preferred,
    /// Always, without verifying the certificate.
    Required,
    /// Always, certificate signed by `ca`.
    VerifyCa,
    /// Always, certificate signed by `ca` and naming the host connected to.
    VerifyIdentity,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct BackendTlsConfig {
    pub mode: TlsMode,
    /// PEM file with the CA certificate(s) that sign the backends' certificates.
    pub ca: Option<PathBuf>,
}

/// Per-worker pool of connections to one backend.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolConfig {
    /// Idle connections each worker keeps open and logged in, so a new client's first statement
    /// never waits for a backend login.
    pub min_idle: usize,
    /// Most connections each worker opens to one backend.
    pub max_size: usize,
    /// An idle connection above `min_idle` unused this long is closed.
    #[serde(with = "manifold_engine::duration_serde")]
    pub idle_timeout: Duration,
    /// Limit for TCP connect + TLS + login to a backend.
    #[serde(with = "manifold_engine::duration_serde")]
    pub connect_timeout: Duration,
    /// How long a statement waits for a free connection when the pool is at `max_size`.
    #[serde(with = "manifold_engine::duration_serde")]
    pub wait_timeout: Duration,
    /// Prepared statements one backend connection keeps; beyond this the least recently used
    /// is closed. Keep `max_size` × workers × this under the server's
    /// `max_prepared_stmt_count` (16382 by default); if the server refuses anyway, half of
    /// the connection's statements are closed and the prepare is tried once more.
    pub max_prepared_statements: usize,
    /// Most connections to one backend over all workers together; 0 = only `max_size` per
    /// worker. A worker waiting for a connection while the others hold them all gets one
    /// as soon as another worker has one idle.
    pub max_backend_connections: usize,
    /// Pipelining across sessions: how many other sessions' statements may be written
    /// right behind a borrower's on its connection, when they would otherwise wait for one;
    /// 0 = off.
    pub pipeline_depth: usize,
    /// Size each pool by an adaptive concurrency limit (Vegas): it grows while the node's
    /// latency stays near its minimum and backs off when it rises, between `min_limit` and
    /// `max_size`. Off: every pool may lend up to `max_size`.
    pub adaptive: bool,
    /// The adaptive limit's floor: connections each worker's pool may always lend to one
    /// node.
    pub min_limit: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            min_idle: 4,
            max_size: 256,
            idle_timeout: Duration::from_mins(1),
            connect_timeout: Duration::from_secs(5),
            wait_timeout: Duration::from_secs(10),
            max_prepared_statements: 64,
            max_backend_connections: 0,
            pipeline_depth: 8,
            adaptive: true,
            min_limit: 4,
        }
    }
}

impl PoolConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_size == 0 {
            return Err("pool.max_size: must be at least 1".into());
        }
        if self.min_idle > self.max_size {
            return Err(format!(
                "pool.min_idle: {} exceeds pool.max_size {}",
                self.min_idle, self.max_size
            ));
        }
        if self.connect_timeout.is_zero() {
            return Err("pool.connect_timeout: must be greater than 0".into());
        }
        if self.min_limit == 0 {
            return Err("pool.min_limit: must be at least 1".into());
        }
        if self.max_prepared_statements == 0 {
            return Err("pool.max_prepared_statements: must be at least 1".into());
        }
        if self.wait_timeout.is_zero() {
            return Err("pool.wait_timeout: must be greater than 0".into());
        }
        Ok(())
    }
}
