//! Per-worker listening sockets sharing a port through `SO_REUSEPORT`, so the kernel spreads
//! accepts over workers and no two workers ever wake for the same connection. The kernel's
//! spread is a hash, not a balance; `balance.rs` evens it out.

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

use crate::errors::EngineError;

/// Binds `workers` sockets to `addr`. When `addr` has port 0 the first bind picks the port and
/// the others join it, so all workers serve one port.
pub(crate) fn bind_group(
    addr: SocketAddr,
    workers: usize,
    backlog: u32,
) -> Result<(SocketAddr, Vec<std::net::TcpListener>), EngineError> {
    let mut actual = addr;
    let mut sockets = Vec::with_capacity(workers);
    for _ in 0..workers {
        let listener = bind_one(actual, backlog)?;
        if actual.port() == 0 {
            actual = listener.local_addr().map_err(|source| EngineError::Bind {
                addr,
                op: "getsockname",
                source,
            })?;
        }
        sockets.push(listener);
    }
    Ok((actual, sockets))
}

fn bind_one(addr: SocketAddr, backlog: u32) -> Result<std::net::TcpListener, EngineError> {
    let err = |op| move |source| EngineError::Bind { addr, op, source };
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(err("socket"))?;
    socket
        .set_reuse_address(true)
        .map_err(err("SO_REUSEADDR"))?;
    socket.set_reuse_port(true).map_err(err("SO_REUSEPORT"))?;
    // Accepted sockets inherit it: no setsockopt per connection.
    socket.set_tcp_nodelay(true).map_err(err("TCP_NODELAY"))?;
    socket.set_nonblocking(true).map_err(err("O_NONBLOCK"))?;
    socket.bind(&addr.into()).map_err(err("bind"))?;
    // Validated to fit; clamp anyway so a direct caller cannot make listen(2) see a negative.
    let backlog = i32::try_from(backlog).unwrap_or(i32::MAX);
    socket.listen(backlog).map_err(err("listen"))?;
    Ok(socket.into())
}
