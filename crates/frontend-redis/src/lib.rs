#![forbid(unsafe_code)]
//! manifold's Redis door: clients speaking RESP2/RESP3 on their own port, served on the
//! engine's workers next to the MySQL front.
//!
//! This is the door's first slice: connections and the connection commands (`PING`, `AUTH`,
//! `HELLO`, `SELECT`, `CLIENT`, `INFO`...). Data commands (`GET`, `SET`...) come with the
//! tables that keep the keys; until then they get Redis's unknown command error.
//!
//! - [`config`]: the `[redis]` section (`listen`, limits).
//! - [`conn`]: one connection: read into one buffer, parse every complete request
//!   ([`manifold_redis_proto::Request::parse`]), apply them in order, write all their
//!   replies in one write (pipelining); a protocol error ends that connection alone.
//! - [`cmd`]: a request turned into a typed [`cmd::Command`] first (name, arity, subcommand,
//!   all checked there), applied second; one module per command family.
//! - [`server`]: what the workers share ([`RedisShared`]: limits, users, client count) and
//!   each worker's handler ([`RedisFrontend`]), which lists its own clients.
//! - [`errors`]: the error texts, as Redis 7.0 writes them.
//! - [`replicas`]: read-only batches on replicas (`read_from = "replicas"`), after the
//!   client's own writes.
//! - [`memory`]: every client's memory bounded (Redis's `client-output-buffer-limit`,
//!   enforced while a reply is produced) and all of them together (`max_memory_clients`).

pub mod blocking;
pub mod cmd;
pub mod config;
pub mod conn;
pub mod errors;
pub mod exec;
pub mod group;
pub mod kill;
pub mod memory;
pub mod metrics;
pub mod multi;
pub mod pubsub;
pub mod replicas;
pub mod server;
pub mod store;
pub mod worker;

pub use config::RedisConfig;
pub use server::{Account, BackendLogin, Credentials, RedisFrontend, RedisShared, RedisTlsDoor};
pub use store::Backends;

/// The Redis version the door announces (`HELLO`, `INFO`) and whose replies it matches.
pub const REDIS_VERSION: &str = "7.0.15";
