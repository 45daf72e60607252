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

    /// The ERR code a client sees for this failure.
    pub fn error_code(&self) -> ErrorCode {
        match self.kind {
            ErrorKind::Connect
            | ErrorKind::ConnectTimeout
            | ErrorKind::Tls
            | ErrorKind::Auth(_) => codes::BACKEND_UNAVAILABLE,
            ErrorKind::Protocol => codes::BACKEND_PROTOCOL,
            ErrorKind::Lost => codes::BACKEND_LOST,
            ErrorKind::PoolTimeout => codes::BACKEND_POOL_TIMEOUT,
        }
    }
}
