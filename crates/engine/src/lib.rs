//! The gateway's execution engine: thread-per-core workers (one current-thread tokio runtime
//! each, optionally pinned), a `SO_REUSEPORT` listening socket per worker per front port,
//! per-worker connection accounting and graceful drain, and an elastic blocking pool for work
//! that must not run on a worker.
//!
//! It must not know about MySQL (or any protocol: services plug in through
//! [`ConnectionHandler`]), and must not take a cross-thread lock on the per-connection path: a
//! connection lives on the worker that accepted it, and its state is `Rc`/`Cell`, never shared.

mod blocking;
mod config;
pub mod duration_serde;
mod engine;
mod errors;
mod listener;
mod worker;

pub use blocking::{BlockingConfig, BlockingPool, BlockingStats};
pub use config::EngineConfig;
pub use engine::{wait_for_signal, Engine, EngineBuilder, ShutdownReport};
pub use errors::{BlockingError, ConfigError, EngineError};
pub use worker::{
    ConnectionGuard, ConnectionHandler, Drain, HandlerFactory, WorkerContext, WorkerStartHook,
};
