//! Protocol decoding errors and the table of error codes manifold itself sends to clients.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtoError {
    #[error("packet truncated")]
    Truncated,
    #[error("malformed packet: {0}")]
    Malformed(&'static str),
    #[error("packet sequence id {got} where {expected} was expected")]
    Sequence { expected: u8, got: u8 },
    #[error("packet of {size} bytes exceeds max_allowed_packet ({limit} bytes)")]
    TooLarge { size: usize, limit: usize },
    #[error("client does not support the 4.1 protocol (CLIENT_PROTOCOL_41)")]
    Protocol41Required,
}

/// One error a client can see: MySQL error code, SQLSTATE and the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode {
    pub code: u16,
    pub sqlstate: &'static str,
    /// What the error means; the message sent says what specifically failed.
    pub meaning: &'static str,
}

macro_rules! error_codes {
    ($($(#[$m:meta])* $name:ident = ($code:expr, $state:expr, $meaning:expr);)*) => {
        $( $(#[$m])* pub const $name: ErrorCode = ErrorCode { code: $code, sqlstate: $state, meaning: $meaning }; )*
        /// Every error code manifold sends on its own (not relayed from a backend), for docs and tests.
        pub const ALL_ERROR_CODES: &[(&str, ErrorCode)] = &[ $( (stringify!($name), $name), )* ];
    };
}

/// Codes manifold sends itself. Standard MySQL codes are reused where one means the same
/// thing, so that client libraries react as they would to the server (e.g. retry on 1040,
/// re-authenticate on 1045); codes in the 77xx range are manifold's own.
pub mod codes {
    use super::ErrorCode;
    error_codes! {
        /// `max_connections` reached.
        TOO_MANY_CONNECTIONS = (1040, "08004", "Too many connections");
        /// Handshake packet the server could not make sense of.
        HANDSHAKE_ERROR = (1043, "08S01", "Bad handshake");
        /// The user already holds its `max_connections` connections.
        USER_LIMIT_REACHED = (1226, "42000", "User has exceeded the 'max_user_connections' resource");
        /// Wrong user name or password, or an auth plugin manifold does not support.
        ACCESS_DENIED = (1045, "28000", "Access denied");
        /// The client sent a command manifold does not implement.
        UNKNOWN_COMMAND = (1047, "08S01", "Unknown command");
        /// The client has been idle longer than `wait_timeout`.
        NET_READ_TIMEOUT = (1159, "08S01", "Got timeout reading communication packets");
        /// The client sent a malformed packet (bad length, truncated fields).
        NET_READ_ERROR = (1158, "08S01", "Got an error reading communication packets");
        /// A packet arrived out of sequence.
        NET_PACKETS_OUT_OF_ORDER = (1156, "08S01", "Got packets out of order");
        /// A packet (or a command split over several) exceeds `max_allowed_packet`.
        NET_PACKET_TOO_LARGE = (1153, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes");
        /// The server is shutting down and no longer runs statements.
        SERVER_SHUTDOWN = (1053, "08S01", "Server shutdown in progress");
        /// A TLS-only user connected without TLS or the TLS handshake failed.
        SECURE_TRANSPORT_REQUIRED = (3159, "HY000", "Connections using insecure transport are prohibited");
        /// A prepared-statement command named a statement the session does not have.
        UNKNOWN_STMT_HANDLER = (1243, "HY000", "Unknown prepared statement handler");
        /// `COM_STMT_FETCH` on a statement without an open cursor.
        STMT_HAS_NO_OPEN_CURSOR = (1421, "HY000", "The statement has no open cursor");
        /// `COM_STMT_EXECUTE` too short for the statement's parameters.
        WRONG_ARGUMENTS = (1210, "HY000", "Incorrect arguments to mysqld_stmt_execute");
        /// A statement prepared again on another backend connection now takes a different
        /// number of parameters (the table changed since the client prepared it).
        NEED_REPREPARE = (1615, "HY000", "Prepared statement needs to be re-prepared");
        /// `KILL` named a connection id no session has.
        NO_SUCH_THREAD = (1094, "HY000", "Unknown thread id");
        /// `KILL` of another user's session.
        KILL_DENIED = (1095, "HY000", "You are not owner of thread");
        /// `KILL QUERY` of the session's own connection interrupts the `KILL` itself.
        QUERY_INTERRUPTED = (1317, "70100", "Query execution was interrupted");
        /// `KILL` of the session's own connection.
        CONNECTION_KILLED = (1927, "70100", "Connection was killed");
        /// A statement form manifold cannot map to its own sessions (`KILL USER`, `KILL QUERY ID`).
        NOT_SUPPORTED_YET = (1235, "42000", "This version doesn't yet support it");
        /// An admin port statement that is not an admin command.
        PARSE_ERROR = (1064, "42000", "You have an error in your SQL syntax");
        /// An admin port statement with no text.
        EMPTY_QUERY = (1065, "42000", "Query was empty");
        /// `SET GLOBAL` of a name that is no tunable.
        UNKNOWN_SYSTEM_VARIABLE = (1193, "HY000", "Unknown system variable");
        /// `SET name = value` without `GLOBAL` of a tunable: they are all global.
        GLOBAL_VARIABLE = (1229, "HY000", "Variable is a GLOBAL variable and should be set with SET GLOBAL");
        /// `SET GLOBAL` of a setting that changes only at restart.
        READ_ONLY_VARIABLE = (1238, "HY000", "Variable is a read only variable");
        /// `SET GLOBAL` with a value outside the tunable's range or of the wrong form.
        WRONG_VALUE_FOR_VAR = (1231, "42000", "Variable can't be set to the value");
        /// `RELOAD CONFIG` found the file unreadable or invalid: nothing changed.
        CONFIG_INVALID = (7706, "HY000", "Configuration file invalid; nothing changed");
        /// `BACKEND OFFLINE|ONLINE` named no configured node.
        UNKNOWN_BACKEND = (7707, "HY000", "No such backend");
        /// No backend connection could be opened (refused, unreachable, timed out, login failed).
        BACKEND_UNAVAILABLE = (7701, "08S01", "Backend unavailable");
        /// The backend connection broke while a statement was running.
        BACKEND_LOST = (7702, "08S01", "Lost connection to backend during query");
        /// Waited longer than `pool.wait_timeout` for a free backend connection.
        BACKEND_POOL_TIMEOUT = (7703, "HY000", "Timed out waiting for a backend connection");
        /// The backend sent something manifold could not follow.
        BACKEND_PROTOCOL = (7704, "08S01", "Backend protocol error");
        /// A statement that must run on the primary came while the session is held on a
        /// replica connection by server-side state (a cursor, a lock, a user variable the
        /// server would not report).
        PRIMARY_NEEDED_ON_REPLICA = (7705, "HY000", "Statement needs the primary while the session is held on a replica");
        /// The global binlog: a dump that cannot go on (a position or GTID the files do not
        /// have, a file that cannot be read, the dialect's other positioning).
        MASTER_FATAL_READING_BINLOG = (1236, "HY000", "Got fatal error from master when reading data from binary log");
        /// The global binlog: a request manifold cannot follow (a malformed dump request), or
        /// the binlog service stopped or failed to do what was asked.
        UNKNOWN_ERROR = (1105, "HY000", "Unknown error");
        /// The global binlog: `SHOW BINLOG EVENTS` of a file it does not have, or that could
        /// not be read.
        ERROR_WHEN_EXECUTING_COMMAND = (1220, "HY000", "Error when executing command");
        /// A binlog command (`COM_BINLOG_DUMP`, `COM_REGISTER_SLAVE`...) with the global binlog off.
        NO_BINARY_LOGGING = (1381, "HY000", "You are not using binary logging");
        /// The global binlog: `PURGE BINARY LOGS TO` a file it does not have.
        UNKNOWN_TARGET_BINLOG = (1373, "HY000", "Target log not found in binlog index");
        /// The global binlog: removing files failed.
        BINLOG_PURGE_FATAL_ERR = (1377, "HY000", "Fatal error during log purge");
        /// The global binlog: `PURGE BINARY LOGS BEFORE` a text that is no date and time.
        WRONG_VALUE = (1525, "HY000", "Incorrect value");
        /// The global binlog: the user lacks the privilege the server asks for the operation.
        SPECIFIC_ACCESS_DENIED = (1227, "42000", "Access denied; you need (at least one of) the privilege(s) for this operation");
        /// A statement reading `information_schema.PROCESSLIST` would, with every visible
        /// session in its place, exceed `max_allowed_packet` or one packet's 16 MiB.
        PROCESSLIST_TOO_LARGE = (7708, "HY000", "The process list does not fit in the statement");
        /// A transaction replayed after its backend connection was lost got answers that
        /// differ from what the client had received: it was rolled back.
        TRANSACTION_REPLAY_MISMATCH = (7709, "40001", "Transaction replay gave different results; the transaction was rolled back");
        /// The backend connection was lost while a statement that may commit (`COMMIT`...)
        /// ran: whether it committed is unknown, so it is not run again.
        COMMIT_OUTCOME_UNKNOWN = (7710, "08S01", "Lost connection to backend during COMMIT; its outcome is unknown");
        /// `KILL` of a session another manifold of the fleet runs, which could not be asked.
        FLEET_UNREACHABLE = (7720, "HY000", "The manifold running that session cannot be reached");
        /// Admin port: a runtime change refused because another instance of the fleet stored
        /// a change first; the newer one is applied instead.
        FLEET_CONFIG_CONFLICT = (7721, "HY000", "Another manifold of the fleet changed the configuration first");
    }
}

#[cfg(test)]
mod tests {
    use super::codes::ALL_ERROR_CODES;

    #[test]
    fn every_error_code_is_documented() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/errors.md"))
                .unwrap();
        for (name, code) in ALL_ERROR_CODES {
            let row = format!("| {} | {} | `{name}` |", code.code, code.sqlstate);
            assert!(
                doc.contains(&row),
                "docs/errors.md lacks the row for {name}: {row}"
            );
        }
        let rows = doc
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains('`'))
            .count();
        assert_eq!(
            rows,
            ALL_ERROR_CODES.len(),
            "docs/errors.md lists codes the code does not have"
        );
    }
}
