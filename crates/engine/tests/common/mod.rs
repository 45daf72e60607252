//! What the engine's integration tests share.

use std::net::SocketAddr;

use manifold_engine::EngineConfig;

/// The default engine configuration with `threads` workers.
pub fn cfg(threads: usize) -> EngineConfig {
    EngineConfig {
        threads,
        ..EngineConfig::default()
    }
}

/// A loopback address on a port the kernel picks.
pub fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}
