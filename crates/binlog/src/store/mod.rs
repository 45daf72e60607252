//! The global binlog's files in `binlog.dir`: `manifold-bin.000001`, ... and
//! `manifold-bin.index`.
//!
//! OWNER: the store helper (API fixed here; bodies to build).
//!
//! Each file: magic, format description, GTID list (the global position before the file),
//! then whole transactions. A transaction is written as: GTID event (manifold's domain and
//! server id, next global sequence number), an annotate event with its [`Origin`] (the first
//! transaction of a file also records every source's state), then the source's events after
//! its GTID with server id and `log_pos` rewritten, table ids renumbered per file, CRC32
//! recomputed. A file rotates before a transaction that would take it past `max_file_size`
//! (a transaction is never split; one larger than the limit gets a file of its own).
//!
//! Recovery ([`Writer::open`]): the newest file is read to its last complete transaction and
//! cut there; each source's state is the one the file's first transaction records, advanced
//! by every origin after it.
//!
//! [`Origin`]: crate::origin::Origin

use std::path::PathBuf;

use crate::gtid::GtidPos;
use crate::origin::SourceState;
use crate::txn::SourceTxn;

#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub dir: PathBuf,
    /// File name stem: `manifold-bin`.
    pub base_name: String,
    pub max_file_size: u64,
    pub server_id: u32,
    pub domain_id: u32,
    /// The sources' cluster names, in source index order.
    pub clusters: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("global binlog {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("global binlog {path} is damaged: {what}")]
    Damaged { path: String, what: String },
}

/// What recovery found.
#[derive(Debug, Clone, Default)]
pub struct Recovered {
    /// Each source's state, in source index order (a new source: empty position, key 0).
    pub sources: Vec<SourceState>,
    /// The global binlog's GTID position (manifold's domain).
    pub gtid: GtidPos,
    /// Bytes cut off the newest file (a transaction the crash left half written).
    pub truncated: u64,
}

/// A position in the global binlog.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Position {
    pub file: String,
    pub pos: u64,
}

/// What [`Writer::append`] wrote.
#[derive(Debug, Clone)]
pub struct Appended {
    pub end: Position,
    pub gtid: crate::gtid::Gtid,
    pub bytes: u64,
    pub events: u64,
    /// A new file was started for it.
    pub rotated: bool,
}

/// A file of the global binlog as `SHOW BINARY LOGS` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    pub name: String,
    pub size: u64,
}

/// Appends transactions to the global binlog (one writer per directory).
#[derive(Debug)]
pub struct Writer {
    _opts: StoreOptions,
}

impl Writer {
    /// Recovers the directory (creating it when missing) and opens it for appending.
    pub fn open(_opts: StoreOptions) -> Result<(Writer, Recovered), StoreError> {
        todo!("store helper")
    }

    /// Writes one transaction of source `txn.source` with its global `key`, rotating first
    /// when needed. Bytes are in the file (visible to readers) once [`Writer::flush`] ran.
    pub fn append(&mut self, _txn: &SourceTxn, _key: u64) -> Result<Appended, StoreError> {
        todo!("store helper")
    }

    /// Writes what is buffered to the file.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        todo!("store helper")
    }

    /// Where the next transaction will start (the end of what is written).
    pub fn end(&self) -> Position {
        todo!("store helper")
    }

    pub fn gtid_pos(&self) -> GtidPos {
        todo!("store helper")
    }

    /// Each source's state after what is written.
    pub fn sources(&self) -> &[SourceState] {
        todo!("store helper")
    }

    pub fn files(&self) -> Vec<FileInfo> {
        todo!("store helper")
    }

    /// `PURGE BINARY LOGS TO 'file'`: removes the files before it (never the current one).
    pub fn purge_to(&mut self, _file: &str) -> Result<Vec<String>, StoreError> {
        todo!("store helper")
    }

    /// Retention: removes the oldest files while the total is over `max_bytes` (0: no limit)
    /// or a file's last write is older than `max_age` (zero: no limit); never the current one.
    pub fn retain(
        &mut self,
        _max_bytes: u64,
        _max_age: std::time::Duration,
    ) -> Result<Vec<String>, StoreError> {
        todo!("store helper")
    }
}

/// Reads a file of the global binlog event by event, for dumps and `SHOW BINLOG EVENTS`.
#[derive(Debug)]
pub struct Reader {
    _path: PathBuf,
}

impl Reader {
    /// Opens `file` in `dir` at `pos` (4: the first event).
    pub fn open(_dir: &std::path::Path, _file: &str, _pos: u64) -> Result<Reader, StoreError> {
        todo!("store helper")
    }

    /// The next whole event into `buf` if one ends at or before `limit` (the writer's end in
    /// this file, as published); false when none does yet.
    pub fn next_event(&mut self, _buf: &mut Vec<u8>, _limit: u64) -> Result<bool, StoreError> {
        todo!("store helper")
    }

    /// Position of the next event.
    pub fn pos(&self) -> u64 {
        todo!("store helper")
    }
}

/// The files listed in the index, in order, with their sizes.
pub fn list_files(_dir: &std::path::Path, _base_name: &str) -> Result<Vec<FileInfo>, StoreError> {
    todo!("store helper")
}

/// The file and position where a consumer at global position `pos` (MariaDB
/// `@slave_connect_state`) continues: the start of the first file whose GTID list `pos`
/// covers, and the GTID list there, which the dump skips transactions up to.
pub fn locate_gtid(
    _dir: &std::path::Path,
    _base_name: &str,
    _pos: &GtidPos,
) -> Result<Option<(Position, GtidPos)>, StoreError> {
    todo!("store helper")
}
