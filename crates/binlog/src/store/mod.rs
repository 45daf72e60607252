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
//! In the MySQL dialect (`StoreOptions.dialect`), files MySQL's tools and replicas read: magic,
//! MySQL's format description, `PREVIOUS_GTIDS` (manifold's `server_uuid:1-N` before the
//! file), then transactions as MySQL writes them: a GTID event (`server_uuid:N`, the logical
//! clock `last_committed = k-1, sequence_number = k` for the file's k-th transaction, so that
//! replicas apply them in order; the source's commit times; the exact transaction length),
//! then the body with the origin where MySQL's replicas keep it (`writer.rs`, `OriginPlace`):
//! in a group, the first line of its first `ROWS_QUERY` event (or one of its own before the
//! first table map, or in a group without rows a trailing comment on a statement); in a
//! one-statement group (DDL, `XA COMMIT`), a comment after the statement
//! (` /* # manifold origin ... */`).
//! A directory written in the other dialect is refused ([`StoreError::Dialect`]).
//!
//! Recovery ([`Writer::open`]): the newest file is read to its last complete transaction and
//! cut there; each source's state is the one the file's first transaction records, advanced
//! by every origin after it — or, when the sources checkpoint (`<base_name>.sources`,
//! [`Writer::write_checkpoint`]) names a later point that is in the file, the one it records,
//! advanced by the origins after that point. The checkpoint holds what the files cannot: the
//! transactions a source skipped (heartbeats, [`Writer::note_skipped`]) since the file's first
//! transaction.
//!
//! Timestamps written come from the transactions, never the clock, so that the same input gives
//! the same bytes (a recovered run continues byte-identical to an uninterrupted one): a file's
//! format description and GTID list carry the timestamp of the transaction that opened it by
//! rotation (0 for a file started empty), its rotate event 0.
//!
//! Table ids are renumbered per file by `(source, schema, table)` — the first table seen in a
//! file gets 1 — rather than by the source's table id, because recovery can rebuild that map
//! from the file's own table maps and so continue a file with the ids an uninterrupted run
//! would have used. Every table map still precedes its rows inside its transaction, which is
//! all replicas and CDC readers rely on.
//!
//! [`Origin`]: crate::origin::Origin

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use crate::gtid::{Dialect, GtidState, TxnGtid, Uuid};
use crate::origin::SourceState;
use crate::txn::SourceTxn;

#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub dir: PathBuf,
    /// File name stem: `manifold-bin`.
    pub base_name: String,
    pub max_file_size: u64,
    pub server_id: u32,
    /// The MariaDB domain of the global binlog's GTIDs (`domain-server_id-N`).
    pub domain_id: u32,
    /// The sources' dialect, which the files are written in.
    pub dialect: Dialect,
    /// The source UUID of the global binlog's MySQL GTIDs (`uuid:N`).
    pub server_uuid: Uuid,
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
    #[error("global binlog {path} is written in the {found} dialect but the sources are {want}: move its files away or point binlog.dir elsewhere")]
    Dialect {
        path: String,
        found: Dialect,
        want: Dialect,
    },
}

/// What recovery found.
#[derive(Debug, Clone, Default)]
pub struct Recovered {
    /// Each source's state, in source index order (a new source: empty position, key 0).
    pub sources: Vec<SourceState>,
    /// The global binlog's GTID position (manifold's domain, or its UUID's set).
    pub gtid: GtidState,
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
    pub gtid: TxnGtid,
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
    opts: StoreOptions,
    /// Every file in the index, the current one last (its size as of the last rotation or
    /// recovery; `size` below is the live one).
    files: Vec<FileInfo>,
    /// Number of the current file (`{base}.{number:06}`).
    number: u32,
    out: BufWriter<File>,
    /// End of what is written to the current file, buffered bytes included.
    size: u64,
    /// The current file holds a transaction (so the next one records no source states and a
    /// transaction that does not fit rotates first).
    file_has_txn: bool,
    /// Transactions in the current file (the MySQL dialect's logical clock counts them).
    file_txns: u64,
    sources: Vec<SourceState>,
    gtid: GtidState,
    next_seq: u64,
    tables: TableIds,
    /// Scratch for one event at a time.
    event: Vec<u8>,
    /// A write failed half way: the file's tail is unknown until recovery runs again.
    broken: bool,
    /// The sources' states changed since the last checkpoint (or recovery).
    states_changed: bool,
}

/// The per-file table id map: `(source, schema NUL table) -> id in this file`.
#[derive(Debug, Default)]
struct TableIds {
    by_source: Vec<HashMap<Vec<u8>, u64>>,
    next: u64,
    /// Source table id -> file table id for the transaction being written.
    in_txn: Vec<(u64, u64)>,
    name: Vec<u8>,
}

impl TableIds {
    fn new(sources: usize) -> TableIds {
        TableIds {
            by_source: vec![HashMap::new(); sources],
            next: 1,
            in_txn: Vec::new(),
            name: Vec::new(),
        }
    }

    /// The file's id for `schema.table` of `source`, assigning the next one on first sight.
    fn id_for(&mut self, source: usize, schema: &[u8], table: &[u8]) -> u64 {
        self.name.clear();
        self.name.extend_from_slice(schema);
        self.name.push(0);
        self.name.extend_from_slice(table);
        let Some(map) = self.by_source.get_mut(source) else {
            // A source recovery met in the file but no longer configured: it never writes
            // again, the id only has to stay taken.
            let id = self.next;
            self.next += 1;
            return id;
        };
        if let Some(&id) = map.get(self.name.as_slice()) {
            return id;
        }
        let id = self.next;
        self.next += 1;
        map.insert(self.name.clone(), id);
        id
    }

    /// Recovery: `schema NUL table` of `source` had `id` in the file.
    fn restore(&mut self, source: Option<usize>, name: Vec<u8>, id: u64) {
        self.next = self.next.max(id + 1);
        if let Some(map) = source.and_then(|s| self.by_source.get_mut(s)) {
            map.insert(name, id);
        }
    }
}

impl Writer {
    /// Recovers the directory (creating it when missing) and opens it for appending.
    pub fn open(opts: StoreOptions) -> Result<(Writer, Recovered), StoreError> {
        recover::open(opts)
    }

    /// Writes one transaction of source `txn.source` with its global `key`, rotating first
    /// when needed. Bytes are in the file (visible to readers) once [`Writer::flush`] ran.
    pub fn append(&mut self, txn: &SourceTxn, key: u64) -> Result<Appended, StoreError> {
        self.append_txn(txn, key)
    }

    /// Writes what is buffered to the file.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        use std::io::Write as _;
        let path = self.current_path();
        self.out.flush().map_err(|e| io_error(&path, e))
    }

    /// Where the next transaction will start (the end of what is written).
    pub fn end(&self) -> Position {
        Position {
            file: files::file_name(&self.opts.base_name, self.number),
            pos: self.size,
        }
    }

    pub fn gtid_pos(&self) -> GtidState {
        self.gtid.clone()
    }

    /// Where source `index` started reading: what its state lacks is taken from `start`
    /// (MariaDB: the domains its transactions did not touch; MySQL: the set the dump started
    /// after), so the next file's first transaction records the whole position of the source.
    pub fn set_start(&mut self, index: usize, start: &GtidState) {
        if let Some(state) = self.sources.get_mut(index) {
            state.pos.fill_from(start);
        }
    }

    /// A transaction of source `index` that is not written (a heartbeat) with its `key`: the
    /// source's state moves past it as if it were, so that a restart does not ask for it
    /// again and a MySQL source's set stays one interval. Call it only once every earlier
    /// transaction of the source is written: for MariaDB the position is the last GTID per
    /// domain, so noting it early would let a crash skip the ones still waiting.
    pub fn note_skipped(&mut self, index: usize, gtid: &TxnGtid, key: u64) {
        if let Some(state) = self.sources.get_mut(index) {
            state.pos.update(gtid);
            state.key = state.key.max(key);
            self.states_changed = true;
        }
    }

    /// Records every source's exact state with the point of the global binlog it goes with
    /// (`<base_name>.sources`, replaced atomically), after flushing what is buffered; nothing
    /// when the states did not change since the last one. True when it wrote.
    pub fn write_checkpoint(&mut self) -> Result<bool, StoreError> {
        if !self.states_changed {
            return Ok(false);
        }
        if self.broken {
            return Err(damaged(
                &self.current_path(),
                "an earlier write failed; reopen the global binlog to recover it",
            ));
        }
        self.flush()?;
        checkpoint::write(
            &self.opts.dir,
            &self.opts.base_name,
            &checkpoint::Checkpoint {
                end: self.end(),
                gtid: self.gtid.clone(),
                sources: self.sources.clone(),
            },
        )?;
        self.states_changed = false;
        Ok(true)
    }

    /// Each source's state after what is written.
    pub fn sources(&self) -> &[SourceState] {
        &self.sources
    }

    pub fn files(&self) -> Vec<FileInfo> {
        let mut files = self.files.clone();
        if let Some(current) = files.last_mut() {
            current.size = self.size;
        }
        files
    }

    /// `FLUSH BINARY LOGS`: ends the current file and starts the next one, unless the current
    /// one holds no transaction yet (recovery reads the sources' positions from a file's first
    /// transaction, so two files in a row without one are never made). True when it rotated.
    pub fn rotate(&mut self, timestamp: u32) -> Result<bool, StoreError> {
        self.rotate_now(timestamp)
    }

    /// `PURGE BINARY LOGS TO 'file'`: removes the files before it (never the current one).
    pub fn purge_to(&mut self, file: &str) -> Result<Vec<String>, StoreError> {
        self.purge_to_file(file, None)
    }

    /// [`Writer::purge_to`], keeping `in_use` and every file after it too: the oldest file a
    /// reader (a dump) is in (`None`, or a name not of this binlog: no such limit). As MariaDB,
    /// which never purges a log a dump thread reads.
    pub fn purge_to_keeping(
        &mut self,
        file: &str,
        in_use: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        self.purge_to_file(file, in_use)
    }

    /// Retention: removes the oldest files while the total is over `max_bytes` (0: no limit)
    /// or a file's last write is older than `max_age` (zero: no limit); never the current one.
    pub fn retain(
        &mut self,
        max_bytes: u64,
        max_age: std::time::Duration,
    ) -> Result<Vec<String>, StoreError> {
        self.retain_files(max_bytes, max_age, None)
    }

    /// [`Writer::retain`], keeping `in_use` and every file after it (see
    /// [`Writer::purge_to_keeping`]).
    pub fn retain_keeping(
        &mut self,
        max_bytes: u64,
        max_age: std::time::Duration,
        in_use: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        self.retain_files(max_bytes, max_age, in_use)
    }
}

pub use files::file_dialect;
pub use reader::{list_files, locate_gtid, Reader};

fn io_error(path: &std::path::Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn damaged(path: &std::path::Path, what: impl Into<String>) -> StoreError {
    StoreError::Damaged {
        path: path.display().to_string(),
        what: what.into(),
    }
}

mod checkpoint;
mod files;
mod reader;
mod recover;
mod writer;

#[cfg(test)]
mod tests;
