use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting, using or stopping a topology.
///
/// Messages are written for a human reading a failed test: they carry the failing command's
/// stderr or the tail of the server's error log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A MariaDB program is missing; the message says what to install.
    #[error("{0}")]
    NotInstalled(String),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    /// A helper program (`mariadb-install-db`, `kill`, ...) failed.
    #[error("{program} failed ({status}): {output}")]
    Command {
        program: String,
        status: String,
        output: String,
    },

    #[error("{server} did not start: {reason}\n--- tail of {} ---\n{tail}", log.display())]
    ServerStart {
        server: String,
        reason: String,
        log: PathBuf,
        tail: String,
    },

    #[error("SQL on {server} failed: {stderr}\n--- statement ---\n{sql}")]
    Sql {
        server: String,
        sql: String,
        stderr: String,
    },

    #[error("replication on {server}: {detail}")]
    Replication { server: String, detail: String },

    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },

    #[error("generating TLS material: {0}")]
    Tls(#[from] rcgen::Error),

    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// A program that ran and failed, with what it printed.
    pub(crate) fn command(program: impl Into<String>, output: &std::process::Output) -> Self {
        Error::Command {
            program: program.into(),
            status: output.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
