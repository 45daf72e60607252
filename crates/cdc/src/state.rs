//! What the binlog service publishes to the workers and the admin port, and the requests it
//! takes from them. Written by the service thread only; read anywhere.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use manifold_binlog::gtid::{Dialect, GtidState};
use manifold_binlog::store::FileInfo;
use tokio::sync::{oneshot, watch};

use crate::config::BinlogConfig;
use crate::metrics::Metrics;

/// The end of what is written: where a dump waits for more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct End {
    pub file: String,
    pub pos: u64,
    /// The global binlog's GTID position (`@@gtid_binlog_pos`, or MySQL's `@@gtid_executed`).
    pub gtid: GtidState,
}

/// A source as `SHOW BINLOG SOURCES` shows it.
#[derive(Debug, Clone, Default)]
pub struct SourceStatus {
    pub cluster: String,
    /// The primary it reads from now.
    pub addr: String,
    /// `connecting`, `streaming`, or `error: ...`.
    pub state: String,
    /// The GTIDs received from it (MariaDB: the last of each domain; MySQL: the set).
    pub received: GtidState,
    /// Its position as recorded in the global binlog (what a restart resumes from).
    pub written: GtidState,
    /// Its last key in the global order (`stamp` nanoseconds).
    pub key: u64,
    /// It holds the merge back (nothing newer than the others' keys arrived from it).
    pub holding_back: bool,
    pub events: u64,
    pub transactions: u64,
    /// Ordering stamps ignored since start for being implausibly far ahead of the clock:
    /// statements written to look stamped (`Assembler::forged_stamps`).
    pub forged_stamps: u64,
    /// Commit time on the source of its last transaction written.
    pub last_commit: Option<SystemTime>,
}

/// A dump connection as `SHOW BINLOG CONSUMERS` shows it.
#[derive(Debug, Clone, Default)]
pub struct ConsumerStatus {
    /// manifold's connection id of the session.
    pub id: u64,
    pub user: String,
    pub addr: String,
    /// `COM_REGISTER_SLAVE`'s server id, or the dump's.
    pub server_id: u32,
    pub file: String,
    pub pos: u64,
    pub gtid: String,
    /// Source commit → sent to this consumer, of the last transaction sent, milliseconds.
    pub delay_ms: u64,
    pub events: u64,
    pub bytes: u64,
}

/// What a purge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Purged {
    /// The files removed, oldest first.
    pub removed: Vec<String>,
    /// It stopped short of what was asked at a file a dump reads: MariaDB's warning 1867.
    pub stopped_at: Option<PurgeStop>,
}

/// Where a purge stopped for a dump, as MariaDB's warning 1867 says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeStop {
    /// The file a dump reads (kept, with every later one).
    pub file: String,
    /// How many dumps read it.
    pub readers: usize,
    /// How many files the purge would have removed.
    pub wanted: usize,
}

impl PurgeStop {
    /// `ER_WARN_PURGE_LOG_IN_USE` (1867) as the servers word it (MySQL ends it with a period,
    /// MariaDB does not).
    pub fn message(&self, purged: usize, dialect: Dialect) -> String {
        let end = if dialect == Dialect::MySql { "." } else { "" };
        format!(
            "file {} was not purged because it was being read by {} thread(s), purged only {purged} out of {} files{end}",
            self.file, self.readers, self.wanted
        )
    }
}

/// What a session asks of the service thread.
#[derive(Debug)]
pub enum Request {
    /// `PURGE BINARY LOGS TO 'file'`.
    PurgeTo(String, oneshot::Sender<Result<Purged, String>>),
    /// `PURGE BINARY LOGS BEFORE time`.
    PurgeBefore(SystemTime, oneshot::Sender<Result<Purged, String>>),
    /// `FLUSH BINARY LOGS`: start a new file.
    Rotate(oneshot::Sender<Result<(), String>>),
}

/// The global binlog as every thread sees it.
#[derive(Debug)]
pub struct BinlogShared {
    pub config: BinlogConfig,
    /// The sources' cluster names, in source index order.
    pub clusters: Vec<String>,
    /// The sources' dialect: what the files are written in and the dumps serve (MariaDB's
    /// until a first start learns it from a primary: see [`BinlogShared::dialect`]).
    dialect: std::sync::atomic::AtomicBool,
    end: watch::Sender<End>,
    files: Mutex<Vec<FileInfo>>,
    sources: Mutex<Vec<SourceStatus>>,
    consumers: Mutex<Vec<ConsumerStatus>>,
    pub metrics: Metrics,
    requests: tokio::sync::mpsc::UnboundedSender<Request>,
}

impl BinlogShared {
    /// The sources' dialect. Known before the files are opened; a first start whose
    /// primaries had not answered yet learns it on the service thread, which writes nothing
    /// before.
    pub fn dialect(&self) -> Dialect {
        if self.dialect.load(std::sync::atomic::Ordering::Acquire) {
            Dialect::MySql
        } else {
            Dialect::MariaDb
        }
    }

    /// The service thread learned the sources' dialect (before it opens the files).
    pub fn set_dialect(&self, dialect: Dialect) {
        self.dialect.store(
            dialect == Dialect::MySql,
            std::sync::atomic::Ordering::Release,
        );
    }

    /// The shared state of a MariaDB fleet and the receiving end of the requests (the
    /// service's).
    pub fn new(
        config: BinlogConfig,
        clusters: Vec<String>,
    ) -> (
        Arc<BinlogShared>,
        tokio::sync::mpsc::UnboundedReceiver<Request>,
    ) {
        BinlogShared::with_dialect(config, clusters, Dialect::MariaDb)
    }

    /// The shared state of a fleet of `dialect`, and the receiving end of the requests.
    pub fn with_dialect(
        config: BinlogConfig,
        clusters: Vec<String>,
        dialect: Dialect,
    ) -> (
        Arc<BinlogShared>,
        tokio::sync::mpsc::UnboundedReceiver<Request>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sources = clusters
            .iter()
            .map(|c| SourceStatus {
                cluster: c.clone(),
                state: "connecting".into(),
                ..SourceStatus::default()
            })
            .collect();
        (
            Arc::new(BinlogShared {
                config,
                clusters,
                dialect: std::sync::atomic::AtomicBool::new(dialect == Dialect::MySql),
                end: watch::Sender::new(End {
                    gtid: GtidState::empty(dialect),
                    ..End::default()
                }),
                files: Mutex::new(Vec::new()),
                sources: Mutex::new(sources),
                consumers: Mutex::new(Vec::new()),
                metrics: Metrics::default(),
                requests: tx,
            }),
            rx,
        )
    }

    /// The end of the written binlog now.
    pub fn end(&self) -> End {
        self.end.borrow().clone()
    }

    /// Wakes on every change of the end (any runtime).
    pub fn watch_end(&self) -> watch::Receiver<End> {
        self.end.subscribe()
    }

    pub fn publish_end(&self, end: End) {
        self.end.send_replace(end);
    }

    pub fn files(&self) -> Vec<FileInfo> {
        lock(&self.files).clone()
    }

    pub fn set_files(&self, files: Vec<FileInfo>) {
        *lock(&self.files) = files;
    }

    pub fn sources(&self) -> Vec<SourceStatus> {
        lock(&self.sources).clone()
    }

    pub fn update_source(&self, index: usize, f: impl FnOnce(&mut SourceStatus)) {
        if let Some(s) = lock(&self.sources).get_mut(index) {
            f(s);
        }
    }

    pub fn consumers(&self) -> Vec<ConsumerStatus> {
        lock(&self.consumers).clone()
    }

    /// Adds or updates the consumer with `status.id`.
    pub fn update_consumer(&self, status: ConsumerStatus) {
        let mut consumers = lock(&self.consumers);
        match consumers.iter_mut().find(|c| c.id == status.id) {
            Some(c) => *c = status,
            None => consumers.push(status),
        }
    }

    pub fn remove_consumer(&self, id: u64) {
        lock(&self.consumers).retain(|c| c.id != id);
    }

    /// Sends a request to the service thread; false when it has stopped.
    pub fn request(&self, r: Request) -> bool {
        self.requests.send(r).is_ok()
    }

    /// Sends the request `make` builds around a reply channel and waits for the answer;
    /// `None` when the service thread has stopped.
    pub async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, String>>) -> Request,
    ) -> Option<Result<T, String>> {
        let (tx, rx) = oneshot::channel();
        if !self.request(make(tx)) {
            return None;
        }
        rx.await.ok()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
