//! Protocol errors in client requests, with the reply Redis sends for each.
//!
//! After any of these the caller sends [`ProtocolError::reply`] (if any) and closes the
//! connection, as Redis does.

use thiserror::Error;

/// A request Redis would refuse. The `Display` text is Redis's message; the bytes sent to the
/// client are [`ProtocolError::reply`].
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*<n>` with `n` not a number, or above the multibulk limit.
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// `*<n>` with `n > 10` before the client authenticated (when authentication is required).
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// `$<len>` with `len` not a number, negative, or above `proto_max_bulk_len`.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// `$<len>` with `len > 16384` before the client authenticated.
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// An argument of a multibulk request that does not begin with `$`.
    #[error("Protocol error: expected '$', got '{}'", shown_byte(*.0))]
    ExpectedDollar(u8),
    /// An inline request longer than the inline limit without its end of line.
    #[error("Protocol error: too big inline request")]
    TooBigInlineRequest,
    /// A `*<n>` line longer than the inline limit without its `\r`.
    #[error("Protocol error: too big mbulk count string")]
    TooBigMbulkCountString,
    /// A `$<len>` line longer than the inline limit without its `\r`.
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCountString,
    /// An inline request with an unclosed quote, or a closing quote followed by more than
    /// a space.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// The request needs more bytes than `client_query_buffer_limit` (Redis closes such a
    /// client without a reply).
    #[error("request needs {needed} bytes, more than the query buffer limit ({limit} bytes)")]
    QueryBufferLimit { needed: u64, limit: usize },
}

/// How Redis shows the byte in `expected '$', got '%c'`: its error replies turn `\r` and `\n`
/// into spaces so that the reply stays one line.
fn shown_byte(b: u8) -> char {
    match b {
        b'\r' | b'\n' => ' ',
        _ => char::from(b),
    }
}

impl ProtocolError {
    /// The exact bytes Redis replies with before it closes the connection, or `None` when it
    /// closes without a reply (the query buffer limit).
    pub fn reply(&self) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(64);
        match self {
            Self::QueryBufferLimit { .. } => return None,
            Self::ExpectedDollar(b) => {
                // Redis formats the byte with `%c`: the raw byte, not its UTF-8 form.
                out.extend_from_slice(b"-ERR Protocol error: expected '$', got '");
                out.push(match *b {
                    b'\r' | b'\n' => b' ',
                    b => b,
                });
                out.extend_from_slice(b"'\r\n");
            }
            other => {
                out.extend_from_slice(b"-ERR ");
                out.extend_from_slice(other.to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::ProtocolError;

    #[test]
    fn replies_are_redis_bytes() {
        assert_eq!(
            ProtocolError::InvalidMultibulkLength.reply().unwrap(),
            b"-ERR Protocol error: invalid multibulk length\r\n"
        );
        assert_eq!(
            ProtocolError::ExpectedDollar(b'x').reply().unwrap(),
            b"-ERR Protocol error: expected '$', got 'x'\r\n"
        );
        assert_eq!(
            ProtocolError::ExpectedDollar(b'\r').reply().unwrap(),
            b"-ERR Protocol error: expected '$', got ' '\r\n"
        );
        assert_eq!(
            ProtocolError::ExpectedDollar(0xff).reply().unwrap(),
            b"-ERR Protocol error: expected '$', got '\xff'\r\n"
        );
        assert_eq!(
            ProtocolError::QueryBufferLimit {
                needed: 2,
                limit: 1
            }
            .reply(),
            None
        );
    }
}
