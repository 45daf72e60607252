#![forbid(unsafe_code)]
//! Serving the global binlog: manifold is the one server for binlog purposes. The MySQL port
//! answers binlog statements and dumps through this crate, and the admin port answers its
//! `SHOW MASTER STATUS` and `SHOW BINARY LOGS` through it too, so both give one answer.
//! It reads what the binlog service ([`manifold_cdc`]) publishes and its files; it never
//! writes the binlog.
//!
//! - [`sql`]: the statements manifold answers itself (`SHOW MASTER STATUS`, `SHOW BINLOG
//!   EVENTS`, `PURGE BINARY LOGS`, the binlog's variables, the replication `@vars`), read
//!   with `sql-lex`'s lexer.
//! - [`answer`]: the result sets of those statements, as MariaDB shapes them, and the errors
//!   they end with.
//! - [`dump`]: `COM_BINLOG_DUMP` and MySQL's `COM_BINLOG_DUMP_GTID`: the stream of events
//!   from the files, waiting for more.
//! - [`mysql`]: what the MySQL dialect adds: the GTID dump's request and checks, MySQL's
//!   texts of its events.
//! - [`packets`]: events as packets, the events a server makes up, capability downgrades.
//! - [`session`]: the replication variables a session set, kept for its dump.
//!
//! OWNER: the serving helper.

pub mod answer;
pub mod dump;
pub mod mysql;
pub mod packets;
pub mod session;
pub mod sql;

pub use answer::{ResultSet, Row};
pub use dump::{Dump, DumpOutcome, DumpRequest};
pub use mysql::DumpGtidRequest;
pub use session::BinlogSession;
pub use sql::{parse, Statement};
