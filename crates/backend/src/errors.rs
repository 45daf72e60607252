//! Backend errors know which side failed and whether retrying elsewhere is safe (the model is
//! Pingora's error type): the router's failover decisions read exactly these two facts.

use manifold_mysql_proto::packets::ErrPacket;
use manifold_mysql_proto::{codes, ErrorCode};

/// Whose fault an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Backend,
    Internal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// TCP connect refused or unreachable.
    Connect,
    /// TCP connect, TLS or login did not finish within `connect_timeout`.
    ConnectTimeout,
    /// TLS required but unavailable, or the TLS handshake failed.
    Tls,
    /// The backend refused the connection before any login (e.g. ERR 1040, too many
    /// connections; host blocked).
    Refused(ErrPacket),
    /// The backend rejected manifold's login.
    Auth(ErrPacket),
    /// The backend sent something that does not follow the protocol.
    Protocol,
    /// The connection broke (EOF, reset) while in use.
    Lost,
    /// No connection became free within `pool.wait_timeout`.
    PoolTimeout,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    pub kind: ErrorKind,
    pub side: Side,
    /// True when nothing reached the backend, so the statement may be sent elsewhere.
    pub retry_safe: bool,
    pub message: String,
}

impl BackendError {
    pub fn new(kind: ErrorKind, retry_safe: bool, message: impl Into<String>) -> Self {
        Self {
            kind,
            side: Side::Backend,
            retry_safe,
            message: message.into(),
        }
    }

    /// The ERR packet a client sees for this failure. A backend's refusal before login keeps
    /// its own code (clients retry on 1040 "Too many connections"); a refused login does
    /// not, since the client's own credentials were fine.
    pub fn to_err_packet(&self) -> ErrPacket {
        match &self.kind {
            ErrorKind::Refused(e) => ErrPacket {
                code: e.code,
                sqlstate: e.sqlstate,
                message: self.message.clone().into_bytes(),
            },
            _ => ErrPacket::new(self.error_code(), self.message.clone()),
        }
    }

    /// The ERR code a client sees for this failure.
    pub fn error_code(&self) -> ErrorCode {
        match self.kind {
            ErrorKind::Connect
            | ErrorKind::ConnectTimeout
            | ErrorKind::Tls
            | ErrorKind::Refused(_)
            | ErrorKind::Auth(_) => codes::BACKEND_UNAVAILABLE,
            ErrorKind::Protocol => codes::BACKEND_PROTOCOL,
            ErrorKind::Lost => codes::BACKEND_LOST,
            ErrorKind::PoolTimeout => codes::BACKEND_POOL_TIMEOUT,
        }
    }
}
