#![forbid(unsafe_code)]
//! Connections from manifold to backend MySQL/MariaDB servers.
//!
//! This crate owns logging into backends as a MySQL client (TLS, `mysql_native_password`,
//! `caching_sha2_password`), the backend connections and the per-worker pools, and their
//! errors. The byte streams and packet framing it reads and writes through are
//! `manifold-io`'s, shared with the client side. It must not route (which backend a statement
//! goes to is the router's decision) nor look at client SQL.

pub mod config;
pub mod conn;
pub mod errors;
pub mod pool;
pub mod state;
pub mod stmts;
pub mod tls;

pub use config::{BackendTlsConfig, PoolConfig, TlsMode};
pub use conn::{
    probe_server_version, BackendConn, BackendTarget, ConnKey, Executed, Param, PrepareAnswer,
    ProbeError, Rows, Schema, ServerFlavor,
};
pub use errors::{BackendError, ErrorKind, RetryType};
/// What reading a packet from [`BackendConn::io`] can fail with, for callers that read it
/// directly (a binlog dump).
pub use manifold_io::ReadError;
pub use pool::{Acquired, BackendBudget, Lease, Pool, PoolLimits, PoolStats};
pub use state::{SessionVars, TrackedChanges, UserVars};
