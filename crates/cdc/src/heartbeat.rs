//! The heartbeat row on every primary.
//!
//! OWNER: the source helper.
