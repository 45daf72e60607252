#![forbid(unsafe_code)]
//! The global binlog service (PolarDB-X CDC's idea for a fleet of stock MariaDB primaries):
//! every configured cluster's primary is read as a replica would, its transactions are put in
//! one global order and written to manifold's own binlog files, which manifold serves on the
//! MySQL port as if it were the one server. Serving it (dumps, binlog statements) is
//! `manifold-binlog-serve`'s: this crate answers no client.
//!
//! - [`config`]: the `[binlog]` section.
//! - [`errors`]: why a source's connection ended, by kind (lost, misconfigured, fatal).
//! - [`source`]: one replication connection per cluster primary (register, GTID dump,
//!   checksums, reconnect and resume, following failover), yielding raw events.
//! - [`heartbeat`]: the heartbeat row stamped with the clock, written on every primary each
//!   `heartbeat_interval`: what moves the merge's watermark past idle sources.
//! - [`service`]: the thread that runs the sources, assembles transactions, merges and writes
//!   them, applies retention and publishes the state below.
//! - [`state`]: what the service publishes to the workers and the admin port (end of the
//!   written binlog, files, sources, consumers, metrics).
//! - [`metrics`]: EPS, DML EPS, BPS, TPS, files per minute, delays.

pub mod config;
pub mod errors;
pub mod heartbeat;
pub mod metrics;
pub mod service;
pub mod source;
pub mod state;

pub use config::BinlogConfig;
pub use errors::{CdcError, ErrorKind};
pub use state::BinlogShared;
