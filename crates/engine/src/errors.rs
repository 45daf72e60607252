use std::io;
use std::net::SocketAddr;

/// A configuration value that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("engine config: {key}: {reason}")]
    Invalid { key: &'static str, reason: String },
}

impl ConfigError {
    /// The config key at fault, e.g. `"blocking_max_threads"`.
    pub fn key(&self) -> &'static str {
        match self {
            Self::Invalid { key, .. } => key,
        }
    }
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Creating, configuring, binding or listening on a socket failed.
    #[error("cannot listen on {addr}: {op}: {source}")]
    Bind {
        addr: SocketAddr,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    /// The same non-zero address was given to `listen()` twice; with `SO_REUSEPORT` both would
    /// silently share one port, so it is refused.
    #[error("address {0} is listed twice")]
    DuplicateListen(SocketAddr),
    #[error("cannot spawn thread {name}: {source}")]
    ThreadSpawn {
        name: String,
        #[source]
        source: io::Error,
    },
    /// A worker failed while setting up (runtime, listener registration, start hook).
    #[error("worker {worker} failed to start: {reason}")]
    WorkerStart { worker: usize, reason: String },
}

/// Why a blocking-pool job did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockingError {
    #[error("blocking pool is shut down")]
    Shutdown,
    #[error("blocking job panicked: {0}")]
    Panicked(String),
    /// No thread could be started to run the job, or the job was dropped unrun.
    #[error("blocking job was not run")]
    Canceled,
}
