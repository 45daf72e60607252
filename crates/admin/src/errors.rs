//! Why an admin connection ended, typed per listener. The messages are the text the log has
//! always shown. Starting the listeners (`start`, `bind`) still returns a `String`: that is
//! the message an operator reads when manifold refuses to start.

use manifold_io::ReadError;

/// Why an admin-port (MySQL protocol) connection ended early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminError {
    /// Writing to the client failed.
    #[error("{0}")]
    Write(std::io::Error),
    /// Reading a packet from the client failed (the read error's debug form, as logged).
    #[error("{0:?}")]
    Read(ReadError),
    /// The client did not log in within the login timeout.
    #[error("login timed out")]
    LoginTimeout,
    /// The handshake response was malformed or not `PROTOCOL_41`; the client got ERR.
    #[error("bad handshake")]
    BadHandshake,
    /// Wrong user or password; the client got ERR 1045.
    #[error("access denied")]
    AccessDenied,
}

/// Why an HTTP connection ended without a response, or with a 431.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    /// The request head grew past its limit (answered 431).
    #[error("request head too large")]
    HeadTooLarge,
    #[error("closed before the request ended")]
    ClosedEarly,
    #[error("request timed out")]
    Timeout,
    /// Reading the request or writing the response failed.
    #[error("{0}")]
    Io(std::io::Error),
}
