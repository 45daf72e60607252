//! Reading a server's version from its handshake without logging in, at startup.

use std::time::Duration;

use manifold_mysql_proto::handshake::HandshakeV10;

use super::MAX_LOGIN_PACKET;

/// Why [`probe_server_version`] could not read a server's version.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("{0}: no address")]
    NoAddress(String),
    #[error("{addr}: {source}")]
    Handshake {
        addr: String,
        source: manifold_mysql_proto::ProtoError,
    },
    #[error("{0}: closed before its handshake")]
    Closed(String),
}

/// Reads a server's handshake without logging in, for the version string it announces.
/// Blocking: for startup only.
pub fn probe_server_version(addr: &str, timeout: Duration) -> Result<Vec<u8>, ProbeError> {
    use std::io::Read;
    use std::net::ToSocketAddrs;
    let io = |source| ProbeError::Io {
        addr: addr.to_owned(),
        source,
    };
    let sock = addr
        .to_socket_addrs()
        .map_err(io)?
        .next()
        .ok_or_else(|| ProbeError::NoAddress(addr.to_owned()))?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, timeout).map_err(io)?;
    s.set_read_timeout(Some(timeout)).map_err(io)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Ok(Some(p)) = manifold_mysql_proto::scan_logical(&buf, MAX_LOGIN_PACKET) {
            let hs =
                HandshakeV10::decode(&p.payload(&buf)).map_err(|source| ProbeError::Handshake {
                    addr: addr.to_owned(),
                    source,
                })?;
            return Ok(hs.server_version);
        }
        let n = s.read(&mut chunk).map_err(io)?;
        if n == 0 {
            return Err(ProbeError::Closed(addr.to_owned()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
