#![forbid(unsafe_code)]
//! manifold's Redis door: clients speaking RESP2/RESP3 on their own port, served on the
//! engine's workers next to the MySQL front, their keys in InnoDB tables.
//!
//! The crate in floors, bottom to top; a floor names only the ones below it (and the
//! session's state, which every command is applied to), which the `floors` test checks in
//! the sources.
//!
//! 1. Commands, typed:
//!    - [`errors`]: the error texts, as Redis 7.0 writes them.
//!    - [`config`]: the `[redis]` section (`listen`, limits, the output buffer limits).
//!    - [`cmd`]: a request turned once into a typed [`cmd::Command`] (or a [`cmd::Reject`])
//!      by [`cmd::table`], the one table of every command (name, arity, flags, key
//!      positions, family, metrics slot); [`cmd::Args`], a request's arguments in place.
//! 2. Store:
//!    - [`store`]: SQL state and the transaction context only: the tables, key rows, expiry
//!      and its sweeper, statements in a [`store::Tx`] (which reports what is not SQL to
//!      its worker through [`store::TxHost`]), reads on replicas after the client's own
//!      writes ([`store::replicas`]), the backend login ([`store::BackendLogin`]),
//!      [`store::context::Cx`], what a data command runs with (the batch's transaction and
//!      its reply, bounded by the client's output limit), and [`store::StoreError`], which
//!      carries what a batch it stopped may do next ([`store::Retry`], acted on by
//!      [`store::Attempts`]).
//!    - [`metrics`]: the door's figures (counters, histograms, snapshots), per worker.
//! 3. Data families: [`cmd`]'s `strings`, `keys`, `expiry`, `hashes`, `lists`, `sets`,
//!    `zsets` (and `rename`, `scan`...), each applied on a batch's [`store::context::Cx`].
//! 4. Running them:
//!    - [`exec`]: a connection's batch of data commands as one SQL transaction.
//!    - [`group`]: GET-only or SET-only batches of several connections as one statement.
//!    - [`multi`]: `MULTI`/`EXEC`/`WATCH`, a transaction as one SQL transaction.
//!    - [`blocking`]: `BLPOP`... waiting to be woken by pushes.
//!    - [`notify`]: which keyspace events a command made (`notify-keyspace-events`),
//!      published after its transaction commits ([`store::events`]).
//!    - [`script`]: `EVAL`/`EVALSHA`/`SCRIPT`: Lua on script threads, its `redis.call`s run
//!      by the client's worker in the script's one SQL transaction.
//!    - [`worker`]: one worker's state: its [`store::Store`], its open groups, its figures and
//!      its hold on the blocked clients; it begins the batches' transactions.
//! 5. The session:
//!    - [`session`]: a client's state, the dispatch and counting of its requests, and the
//!      connection, server, `INFO` and Pub/Sub commands.
//!    - [`pubsub`]: the cross-worker Pub/Sub hub, and each client's queue of what it is
//!      sent besides replies (messages, invalidations).
//!    - [`tracking`]: client-side caching (`CLIENT TRACKING`): which clients may hold which
//!      keys, and the invalidations sent after a commit changed them.
//!    - [`kill`]: the client registry (`CLIENT KILL`, `CLIENT LIST`).
//!    - [`memory`]: every client's memory bounded (output buffer limits, while a reply is
//!      produced) and all of them together (`max_memory_clients`).
//! 6. Connections:
//!    - [`conn`]: one connection: read into one buffer, parse every complete request, batch
//!      or dispatch them in order, write all their replies in one write (pipelining); a
//!      protocol error ends that connection alone.
//!    - [`server`]: what the workers share ([`RedisShared`]) and each worker's handler
//!      ([`RedisFrontend`]), which lists its own clients.
//!
//! Still upward: the session holds its worker's handler ([`RedisFrontend`]) and its
//! `CLIENT LIST` line ([`server::ClientInfo`]), and a blocked client waits on its handler's
//! worker.

// 1. Commands, typed.
pub mod cmd;
pub mod config;
pub mod errors;

// 2. Store.
pub mod metrics;
pub mod store;

// 4. Running them (3, the data families, are in `cmd`).
pub mod blocking;
pub mod exec;
pub mod group;
pub mod multi;
pub mod notify;
pub mod script;
pub mod worker;

// 5. The session.
pub mod kill;
pub mod memory;
pub mod pubsub;
pub mod session;
pub mod tracking;

// 6. Connections.
pub mod conn;
pub mod server;

#[cfg(test)]
mod floors;

pub use config::RedisConfig;
pub use server::{Account, BackendLogin, Credentials, RedisFrontend, RedisShared, RedisTlsDoor};
pub use store::Backends;

/// The Redis version the door announces (`HELLO`, `INFO`) and whose replies it matches.
pub const REDIS_VERSION: &str = "7.0.15";
