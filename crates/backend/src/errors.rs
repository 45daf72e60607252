//! Backend errors, and the one place where whether a failed request may be sent again is
//! decided. The model is Pingora's error type (`pingora-error`'s `RetryType`): the code where
//! an error arises knows how far the request got, and records on the error whether it may be
//! retried ([`RetryType`]); a caller that knows more (that nothing of the client's command had
//! been sent yet) says so with [`BackendError::set_retry`]. The session asks the error
//! ([`BackendError::may_retry`]) and decides only how many tries it allows and where.

use manifold_mysql_proto::packets::ErrPacket;
use manifold_mysql_proto::{codes, ErrorCode};

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

/// Whether the request a backend error interrupted may be sent again, on another connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryType {
    /// Decided where the error arose: `true` when the request did not run and another
    /// connection may serve it (the node was unreachable, or the connection broke before the
    /// request was sent), `false` when it may have run or would fail the same way again.
    Decided(bool),
    /// The request did not run, but a connection failing on its first use says its server is
    /// failing: it is sent again once when the connection had waited in the pool (its server
    /// may have closed it meanwhile), or as often as the caller allows when running it twice
    /// is harmless anyway.
    ReusedOnly,
    /// The request reached the server and may have run, and no byte of its answer reached
    /// the client: it is sent again only if running it twice is harmless (a read).
    Idempotent,
}

impl RetryType {
    /// The default for a kind of error: a node that could not be reached gets the request
    /// elsewhere; a refusal, a broken protocol or a full pool would answer the same again;
    /// a connection lost while in use may have run the request.
    fn of(kind: &ErrorKind) -> Self {
        match kind {
            ErrorKind::Connect | ErrorKind::ConnectTimeout => RetryType::Decided(true),
            ErrorKind::Tls
            | ErrorKind::Refused(_)
            | ErrorKind::Auth(_)
            | ErrorKind::Protocol
            | ErrorKind::Lost
            | ErrorKind::PoolTimeout => RetryType::Decided(false),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    pub kind: ErrorKind,
    pub retry: RetryType,
    pub message: String,
}

impl BackendError {
    /// An error of `kind`, retried as such errors are (see [`RetryType`]).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            retry: RetryType::of(&kind),
            kind,
            message: message.into(),
        }
    }

    /// The same error, retried as `retry` says.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryType) -> Self {
        self.retry = retry;
        self
    }

    /// Decides the retry here: for a caller that knows more than where the error arose (that
    /// the client's command had not been sent when manifold's own command failed, or that the
    /// node is out of service, so another node may answer otherwise).
    pub fn set_retry(&mut self, retry: bool) {
        self.retry = RetryType::Decided(retry);
    }

    /// Whether the interrupted request may be sent again on another connection. `reused`: the
    /// failed connection had waited in the pool; `idempotent`: running the request twice is
    /// harmless (a read, with another node to run it); `resent`: how many times the request
    /// was already sent again after its connection failed under it.
    pub fn may_retry(&self, reused: bool, idempotent: bool, resent: u32) -> bool {
        match self.retry {
            RetryType::Decided(retry) => retry,
            RetryType::ReusedOnly => idempotent || (reused && resent == 0),
            RetryType::Idempotent => idempotent,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_nodes_are_retried_and_refusals_are_not() {
        for kind in [ErrorKind::Connect, ErrorKind::ConnectTimeout] {
            assert!(BackendError::new(kind, "down").may_retry(false, false, 0));
        }
        let refusal = ErrPacket::new(codes::ACCESS_DENIED, "no");
        for kind in [
            ErrorKind::Tls,
            ErrorKind::Refused(refusal.clone()),
            ErrorKind::Auth(refusal),
            ErrorKind::Protocol,
            ErrorKind::PoolTimeout,
        ] {
            assert!(!BackendError::new(kind, "no").may_retry(true, true, 0));
        }
    }

    #[test]
    fn a_lost_connection_may_have_run_the_request() {
        let lost = BackendError::new(ErrorKind::Lost, "reset");
        assert!(!lost.may_retry(true, true, 0));
        // Unless the caller knows nothing of the request had been sent.
        let mut before_sending = lost;
        before_sending.set_retry(true);
        assert!(before_sending.may_retry(false, false, 0));
        assert!(before_sending.may_retry(false, false, 3));
    }

    #[test]
    fn an_unsent_request_is_retried_on_a_reused_connection_or_when_it_may_run_twice() {
        let unsent =
            BackendError::new(ErrorKind::Lost, "send failed").with_retry(RetryType::ReusedOnly);
        assert!(unsent.may_retry(true, false, 0));
        assert!(unsent.may_retry(false, true, 0));
        assert!(!unsent.may_retry(false, false, 0));
    }

    #[test]
    fn an_unsent_request_that_may_not_run_twice_is_sent_again_only_once() {
        let unsent = BackendError::new(ErrorKind::Lost, "reset").with_retry(RetryType::ReusedOnly);
        assert!(unsent.may_retry(true, false, 0));
        assert!(!unsent.may_retry(true, false, 1));
        // A read keeps the caller's own limit.
        assert!(unsent.may_retry(true, true, 1));
        assert!(unsent.may_retry(false, true, 3));
    }

    #[test]
    fn a_request_that_may_have_run_is_retried_only_if_it_may_run_twice() {
        let unanswered =
            BackendError::new(ErrorKind::Lost, "closed").with_retry(RetryType::Idempotent);
        assert!(unanswered.may_retry(false, true, 0));
        assert!(unanswered.may_retry(false, true, 2));
        assert!(!unanswered.may_retry(true, false, 0));
    }

    #[test]
    fn the_client_sees_the_backends_refusal_code() {
        let e = BackendError::new(
            ErrorKind::Refused(ErrPacket::new(codes::TOO_MANY_CONNECTIONS, "full")),
            "backend refused",
        );
        let err = e.to_err_packet();
        assert_eq!(err.code, codes::TOO_MANY_CONNECTIONS.code);
        assert_eq!(err.message, b"backend refused");
        assert_eq!(
            BackendError::new(ErrorKind::Lost, "x").error_code().code,
            codes::BACKEND_LOST.code
        );
    }
}
