//! One replication connection per cluster primary.
//!
//! OWNER: the source helper.
