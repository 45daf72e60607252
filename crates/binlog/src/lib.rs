#![forbid(unsafe_code)]
//! The global binlog's data side, without network I/O: binlog events as MariaDB and MySQL
//! write them, transactions of one source, the global order across sources, and the files
//! manifold writes and serves.
//!
//! - [`event`]: the v4 event header, type codes, CRC32, and builders for the events manifold
//!   writes itself (format description, rotate, GTID, GTID list, annotate, XID, heartbeat).
//! - [`gtid`]: MariaDB GTIDs (`domain-server-seq`) and positions (one GTID per domain).
//! - [`txn`]: a source's event stream grouped into whole transactions ([`txn::SourceTxn`]),
//!   with the ordering stamp manifold left in them.
//! - [`payload`]: MySQL's compressed transactions (`TRANSACTION_PAYLOAD`), decompressed into
//!   their events as they are read.
//! - [`stamp`]: the hybrid logical clock and the comment that carries its value into a
//!   source binlog (`/*manifold:hlc=N*/`).
//! - [`merge`]: the k-way merge by watermark: a transaction leaves once every source has
//!   passed its key.
//! - [`spill`]: a transaction's events, in memory or spilled to a plain file past the budget.
//! - [`origin`]: what the global binlog records of each transaction's origin and of every
//!   source's position, from which recovery resumes the sources.
//! - [`store`]: the global binlog's files: writing (rotation, index, table ids renumbered),
//!   recovery after a crash, reading for dumps, purging.
//! - [`private`]: the modes of its directory and files (0700, 0600), tightened at start.

pub mod event;
pub mod gtid;
pub mod merge;
pub mod origin;
pub mod payload;
pub mod private;
pub mod spill;
pub mod stamp;
pub mod store;
pub mod txn;
