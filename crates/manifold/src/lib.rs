//! The manifold server as a library: configuration loading and wiring the components
//! (engine, MySQL front door, backend pools) into a running server. The binary's `main` and the
//! integration tests both start manifold through [`start`]. Logic that is not about assembling
//! and stopping the server belongs in the component crates.

pub mod config;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use manifold_backend::{BackendTarget, TlsMode};
use manifold_engine::{ConnectionHandler, Engine, EngineBuilder, HandlerFactory, ShutdownReport};
use manifold_frontend_mysql::{Shared, Users, WorkerFrontend};

use crate::config::Config;

/// A running manifold.
pub struct Server {
    pub engine: Engine,
    pub shared: Arc<Shared>,
}

impl Server {
    /// The address MySQL clients connect to (port 0 in the configuration resolved).
    pub fn mysql_addr(&self) -> SocketAddr {
        self.engine.local_addrs()[0]
    }

    pub fn shutdown(self, timeout: Duration) -> ShutdownReport {
        self.engine.shutdown(timeout)
    }
}

/// Validates `cfg`, binds the listeners and starts the workers. Returns once clients can
/// connect.
pub fn start(cfg: &Config) -> Result<Server, String> {
    cfg.validate()?;
    let users = Users::from_config(&cfg.users)?;
    let tls = manifold_backend::tls::client_config(&cfg.backend.tls)?;
    let target = BackendTarget {
        addr: cfg.backend.primary.clone(),
        tls_mode: if tls.is_some() {
            cfg.backend.tls.mode
        } else {
            TlsMode::Disabled
        },
        tls,
        max_packet: 1 << 30,
    };
    let listen: SocketAddr = cfg
        .mysql
        .listen
        .parse()
        .map_err(|e| format!("mysql.listen: {e}"))?;
    let shared = Shared::new(cfg.mysql.clone(), users, target, cfg.pool.clone())?;
    match manifold_backend::probe_server_version(&cfg.backend.primary, cfg.pool.connect_timeout) {
        Ok(v) => shared.set_backend_version(v),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the primary's version; the handshake announces a default until a backend answers");
        }
    }
    let factory_shared = shared.clone();
    let factory: HandlerFactory = Arc::new(move |ctx| {
        let fe = WorkerFrontend::new(factory_shared.clone(), ctx);
        fe.pool.spawn_maintenance(None);
        fe as Rc<dyn ConnectionHandler>
    });
    let engine = EngineBuilder::new(cfg.engine.clone())
        .listen(listen, factory)
        .start()
        .map_err(|e| e.to_string())?;
    Ok(Server { engine, shared })
}
