#![forbid(unsafe_code)]
//! A hot-path SQL lexer.
//!
//! This crate owns reading SQL text just far enough to make gateway decisions: splitting it
//! into tokens (strings, quoted identifiers, comments and MySQL's executable `/*! ... */`
//! comments handled as the server handles them) and [`scan`]ning a statement for what it does
//! to a session — whether it takes a lock, creates a temporary table, touches user variables,
//! or asks about the previous statement (`LAST_INSERT_ID()`, `ROW_COUNT()`, `FOUND_ROWS()`) —
//! and what routing needs: the statement's [`Class`] (read, write, locking read, transaction
//! control...), a `/* manifold:primary */` hint, and its [`digest`].
//! A [`ScanMemo`] lets a statement sent again with other values be scanned from its first
//! value on, or, when only its values differ, be answered after reading just them.
//! It must not allocate (but for a memo's buffers, which grow once to what they remember),
//! must not panic on any input, and must not grow into a SQL parser: when it cannot tell, it
//! says so and the caller keeps the session where it is.

mod digest;
mod keyword;
mod lexer;
mod memo;
mod processlist;
mod scan;
mod schema_of;
mod statements;
mod uservars;

pub use digest::{digest, digest_hash, MAX_DIGEST_TEXT};
pub use lexer::{Lexer, RouteHint, Token, TokenKind};
pub use memo::{scan_memo, scan_with_digest_memo, ScanMemo};
pub use processlist::{parse_show_processlist, replace_processlist_tables, TooLong};
pub use scan::{scan, scan_with_digest, Class, Scan, Verb};
pub use schema_of::{is_system_schema, names_database, schema_of, SchemaOf};
pub use statements::{
    parse_kill, parse_show_diagnostics, parse_use, replace_session_values, set_names_collation,
    Kill, SessionValues, ShowDiagnostics,
};
pub use uservars::{assigned_user_variables, user_variable_name};
