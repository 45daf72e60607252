//! The binlog service thread.
//!
//! OWNER: the service helper (phase 2).
