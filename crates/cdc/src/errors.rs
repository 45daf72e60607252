//! Why a source reader's connection to its primary ended, by kind: the kind is what the reader
//! does next ([`crate::source`]), the message what the log and `SHOW BINLOG SOURCES` say.

/// What a failure means for the source that met it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The connection was lost or refused, the primary moved, the dump went silent, an
    /// event's checksum did not match: reconnect after `reconnect_interval` and resume from
    /// the last whole transaction.
    Lost,
    /// The server (or the login manifold uses on it) is not set up to feed the global binlog:
    /// its binlog settings, its dialect, the login's rights. Reported with what to change,
    /// and checked again every `reconnect_interval`, as it is changed on the server without
    /// restarting manifold.
    Misconfigured,
    /// The source sent what manifold cannot read: reconnecting would read the same events
    /// again. The reader stops; the global order holds there (nothing after it is written
    /// out of order) until manifold is restarted.
    Fatal,
}

/// A source reader's failure: its kind and the message that says what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CdcError {
    pub kind: ErrorKind,
    pub message: String,
}

impl CdcError {
    pub fn lost(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Lost,
            message: message.into(),
        }
    }

    pub fn misconfigured(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Misconfigured,
            message: message.into(),
        }
    }

    pub fn fatal(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Fatal,
            message: message.into(),
        }
    }
}
