//! The gateway's execution engine: thread-per-core workers (one current-thread tokio runtime
//! each, optionally pinned), a `SO_REUSEPORT` listening socket per worker per front port,
//! accepted connections handed to the worker with the fewest (the kernel's pick is a hash),
//! per-worker connection accounting and graceful drain, and an elastic blocking pool for work
//! that must not run on a worker.
//!
//! It must not know about MySQL (or any protocol: services plug in through
//! [`ConnectionHandler`]), and must not take a cross-thread lock on the per-connection path: a
//! connection moves at most once, when accepted, and then lives on the worker serving it, and
//! its state is `Rc`/`Cell`, never shared.
//!
//! ```no_run
//! use std::{future::Future, net::SocketAddr, pin::Pin, rc::Rc};
//! use manifold_engine::{
//!     handler_factory, ConnectionHandler, EngineBuilder, EngineConfig, WorkerContext,
//! };
//!
//! struct Echo;
//! impl ConnectionHandler for Echo {
//!     fn handle(
//!         self: Rc<Self>,
//!         mut stream: tokio::net::TcpStream,
//!         _peer: SocketAddr,
//!         _ctx: Rc<WorkerContext>,
//!     ) -> Pin<Box<dyn Future<Output = ()>>> {
//!         Box::pin(async move {
//!             let (mut r, mut w) = stream.split();
//!             let _ = tokio::io::copy(&mut r, &mut w).await;
//!         })
//!     }
//! }
//!
//! let engine = EngineBuilder::new(EngineConfig::default())
//!     .listen("0.0.0.0:7000".parse().unwrap(), handler_factory(|_ctx| Echo))
//!     .start()?;
//! let report = engine.run_until_signal();
//! # Ok::<(), manifold_engine::EngineError>(())
//! ```

mod balance;
mod blocking;
pub mod clock;
mod config;
pub mod duration_serde;
mod engine;
mod errors;
pub mod histogram;
mod listener;
pub mod login_throttle;
mod memory;
pub mod size_serde;
mod worker;

pub use blocking::{BlockingConfig, BlockingPool, BlockingStats};
pub use config::EngineConfig;
pub use engine::{wait_for_signal, Engine, EngineBuilder, ShutdownReport};
pub use errors::{BlockingError, ConfigError, EngineError};
pub use login_throttle::{Door, LoginThrottle, LoginThrottleConfig, WaitClock};
pub use worker::{
    handler_factory, ConnectionGuard, ConnectionHandler, Drain, HandlerFactory, WorkerContext,
    WorkerStartHook,
};
