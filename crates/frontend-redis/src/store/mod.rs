//! Where the keys live: tables in a schema of the cluster's primary, reached through the
//! worker's backend pool to the primary, with parameterised SQL only.
//!
//! SQL state and the transaction context only: what a worker keeps that is not SQL (its
//! groups, figures, blocked clients) is on its [`crate::worker::Worker`], which a
//! transaction reports to through [`TxHost`].
//!
//! - [`Store`]: one per worker: which pool is the primary's now, the statements prepared
//!   for the door (each SQL text gets an id once per worker; a connection prepares it the
//!   first time it runs it), and whether the schema is known to exist.
//! - [`Tx`]: what one batch of commands runs in: a connection borrowed at the first
//!   statement, a transaction when the batch writes (committed once, after every command of
//!   the batch ran), the batch's clock. Begun by the worker ([`crate::worker::Worker::begin`]),
//!   to which it reports its statements' time and the lists it pushed to.
//! - [`schema`]: the tables, created and migrated on first use.
//! - [`keys`]: the key table's rows (type, expiry, length): lookups that treat an expired
//!   key as absent, creation, deletion of a key with its members.
//! - [`sweeper`]: deletes expired keys and collects `gc`, on one worker.

pub mod context;
mod error;
pub mod events;
pub mod keys;
pub mod replicas;
pub mod schema;
pub mod sweeper;

pub use error::{
    pause_before_retry, Attempts, Cause, Decision, Retry, StoreError, TRANSIENT_RETRIES,
};

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use manifold_backend::{BackendConn, ConnKey, Executed, Lease, Param, Pool};
use manifold_mysql_proto::packets::{ErrPacket, Value};
use manifold_router::{NodeId, Topology};

use crate::metrics::WorkerMetrics;
use replicas::Causal;

/// This worker's way to the nodes of the cluster that keeps the door's keys.
pub trait Backends {
    /// The cluster's nodes: which is the primary now (it changes on failover), their
    /// health, lag and positions (the monitor's view).
    fn topology(&self) -> &Topology;

    /// This worker's pool to `node`.
    fn pool(&self, node: NodeId) -> Rc<Pool>;

    /// The node a read goes to by the worker's balancer (the MySQL door's: weights, load,
    /// health, lag), not one of `skip` (a bit per node); the primary when no other can.
    fn pick_reader(&self, skip: u64) -> NodeId;

    /// This worker's pool to the cluster's primary now.
    fn primary(&self) -> Rc<Pool> {
        self.pool(self.topology().primary())
    }
}

/// What every worker's store shares.
#[derive(Debug)]
pub struct StoreShared {
    /// The schema's name, backquoted for SQL.
    quoted_schema: String,
    /// The schema and its tables are known to exist at the current version.
    ready: AtomicBool,
    /// Statements a connection keeps prepared (`pool.max_prepared_statements`).
    pub(crate) keep_statements: usize,
    /// manifold's own login on the door's tables: what the sweeper runs as. Its `Debug`
    /// does not show it.
    own_login: sweeper::OwnLogin,
    /// Read-only batches may run on replicas (`redis.read_from = "replicas"`).
    pub read_from_replicas: bool,
    /// `notify-keyspace-events` now ([`events`]).
    pub keyspace_events: events::Classes,
    /// Some client tracks keys (`CLIENT TRACKING`): transactions record the keys they
    /// change, for the invalidations sent after their commit ([`TxHost::invalidate`]).
    pub tracking: AtomicBool,
}

impl StoreShared {
    pub fn new(
        schema: &str,
        keep_statements: usize,
        read_from_replicas: bool,
        own_login: ConnKey,
    ) -> Arc<Self> {
        Arc::new(Self {
            quoted_schema: format!("`{}`", schema.replace('`', "``")),
            ready: AtomicBool::new(false),
            keep_statements: keep_statements.max(16),
            own_login: sweeper::OwnLogin(own_login),
            read_from_replicas,
            keyspace_events: events::Classes::default(),
            tracking: AtomicBool::new(false),
        })
    }

    /// The schema and its tables are known to exist (a client's batch made sure).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// `sql` with `{s}` replaced by the schema.
    pub fn expand(&self, sql: &str) -> String {
        sql.replace("{s}", &self.quoted_schema)
    }
}

/// Statement ids of the door: apart from the MySQL front's (which count up from 1).
const STATEMENT_IDS: u64 = 1 << 62;

/// A statement's id for [`BackendConn::execute`] and its text for the server.
type Prepared = (u64, Rc<[u8]>);

/// One worker's store.
pub struct Store {
    pub shared: Arc<StoreShared>,
    pub(crate) backends: Rc<dyn Backends>,
    /// SQL text (with `{s}`) → its id and its text for the server.
    statements: RefCell<HashMap<Box<str>, Prepared>>,
    /// `WAIT`s of this worker asking replicas now, on a connection each
    /// ([`replicas::replicas_with_write`]).
    pub(crate) wait_asks: std::cell::Cell<usize>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

impl Store {
    pub fn new(shared: Arc<StoreShared>, backends: Rc<dyn Backends>) -> Self {
        Self {
            shared,
            backends,
            statements: RefCell::new(HashMap::new()),
            wait_asks: std::cell::Cell::new(0),
        }
    }

    pub(crate) fn statement(&self, sql: &str) -> (u64, Rc<[u8]>) {
        if let Some((id, text)) = self.statements.borrow().get(sql) {
            return (*id, text.clone());
        }
        let mut map = self.statements.borrow_mut();
        let id = STATEMENT_IDS + map.len() as u64;
        let text: Rc<[u8]> = self.shared.expand(sql).into_bytes().into();
        map.insert(sql.into(), (id, text.clone()));
        (id, text)
    }
}

/// The backend login a Redis user's commands run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendLogin {
    pub user: String,
    pub password: String,
}

/// What a batch's transaction runs on and reports to besides SQL: the worker that began it
/// ([`crate::worker::Worker`] is it). Through it a transaction records its statements' time
/// in the worker's figures, and has the clients blocked on the lists it pushed to woken
/// once it committed.
pub trait TxHost {
    /// The worker's store.
    fn store(&self) -> &Store;
    /// The worker's figures.
    fn metrics(&self) -> &WorkerMetrics;
    /// Some client is blocked on some list: pushes are worth noting (nothing is kept
    /// otherwise).
    fn pushes_wanted(&self) -> bool;
    /// The list `key` of `db` got elements (or a value of type `kind` arrived there) in a
    /// transaction that committed: the clients blocked on it for that type are woken.
    fn pushed(&self, db: u8, key: &[u8], kind: u8);
    /// A transaction that committed made these keyspace events ([`events`]): they are
    /// published as `flags` (`K`, `E`) say.
    fn keyspace_events(&self, flags: u16, events: &[events::Event]);
    /// A transaction that committed while some client tracked keys changed the keys of
    /// `events` (made by client `writer`; 0: by none, or by several), or, with `all`, it
    /// flushed a database or could not hold all its events: the clients that may hold
    /// those keys (all of them, with `all`) are told to forget them.
    fn invalidate(&self, _writer: u64, _events: &[events::Event], _all: bool) {}
    /// The keys of `db` clients are blocked on now (`SWAPDB` wakes those it serves).
    fn blocked_keys(&self, _db: u8) -> Vec<Vec<u8>> {
        Vec::new()
    }
}

/// The key of the door's backend connections for `login`: binary character set (values
/// are bytes), no client capabilities of its own, and manifold's own, so TLS whenever the
/// backend offers it under `backend.tls.mode = as_client` (commands of TLS and plain Redis
/// clients share the door's connections).
pub fn conn_key(login: &BackendLogin) -> ConnKey {
    /// `binary`.
    const BINARY: u8 = 63;
    ConnKey::own(&login.user, &login.password, BINARY)
}

/// The wall clock in Unix milliseconds: expiry times are kept in it.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One batch's statements: on one connection, in one transaction when the batch writes.
pub struct Tx<'s> {
    store: &'s Store,
    /// Where its statements' time and its pushes are reported (not SQL state).
    host: &'s dyn TxHost,
    key: &'s ConnKey,
    lease: Option<Lease>,
    write: bool,
    /// Repeatable read instead of read committed ([`Tx::gap_locks`]).
    gap_locks: bool,
    /// The batch's clock: every command of the batch sees the same time.
    pub now_ms: i64,
    /// Lists pushed to (and other keys made ready, with their type) while clients were
    /// blocked on some key: woken after the commit.
    pushed: Vec<(u8, Vec<u8>, u8)>,
    /// Keyspace events of its commands, published after the commit (none while
    /// notifications are off).
    events: Vec<events::Event>,
    /// Where the events that follow the running command's own start ([`Tx::notify_after`]).
    trailing: Option<usize>,
    /// Rows its statements changed (their affected rows): whether a command wrote.
    changed: u64,
    /// What `events` holds, and the events dropped past [`events::MAX_EVENT_BYTES`].
    events_bytes: usize,
    events_dropped: u64,
    /// The client whose commands these are (0: several, or none), for `CLIENT TRACKING
    /// ... NOLOOP` (its own writes do not invalidate its keys).
    writer: u64,
    /// It flushed a database (`FLUSHDB`, `FLUSHALL`): every tracked key is invalidated.
    flushed: bool,
    /// Some client tracked keys when it began: its commands recorded the keys they changed.
    tracked_at_begin: bool,
    /// The sessions whose writes this transaction's commits are: each remembers the
    /// commit's GTID, which its later reads on replicas wait for.
    writers: Vec<Causal>,
    /// A read-only batch that may run on a replica once it has applied these sessions'
    /// writes (`redis.read_from = "replicas"`).
    readers: Option<Vec<Causal>>,
    /// The node the connection is on.
    node: NodeId,
    on_replica: bool,
}

impl<'s> Tx<'s> {
    /// A transaction for one batch on `host`'s store, as `key`'s backend login; `write`: the batch
    /// writes, so its statements run in one transaction committed by [`Tx::commit`].
    pub fn new(host: &'s dyn TxHost, key: &'s ConnKey, write: bool) -> Self {
        Tx {
            store: host.store(),
            host,
            key,
            lease: None,
            write,
            gap_locks: false,
            now_ms: now_ms(),
            pushed: Vec::new(),
            events: Vec::new(),
            trailing: None,
            changed: 0,
            events_bytes: 0,
            events_dropped: 0,
            writer: 0,
            flushed: false,
            tracked_at_begin: host.store().shared.tracking.load(Ordering::Relaxed),
            writers: Vec::new(),
            readers: None,
            node: 0,
            on_replica: false,
        }
    }
}

impl Tx<'_> {
    /// Its commands are client `id`'s ([`Tx::writer`]).
    #[must_use]
    pub fn by(mut self, id: u64) -> Self {
        self.writer = id;
        self
    }

    /// It flushed a database: every client tracking keys forgets them all after the commit.
    pub fn note_flush(&mut self) {
        self.flushed = true;
    }

    /// What this transaction commits is `session`'s write (its reads must see it).
    #[must_use]
    pub fn noting(mut self, session: &Causal) -> Self {
        self.writers.push(session.clone());
        self
    }

    /// The batch only reads: with `redis.read_from = "replicas"` it may run on a replica
    /// that has applied the writes of `sessions` (on the primary otherwise).
    #[must_use]
    pub fn reading_after(mut self, sessions: Vec<Causal>) -> Self {
        if self.store.shared.read_from_replicas && !self.write {
            self.readers = Some(sessions);
        }
        self
    }

    /// An error of this transaction, as the batch may retry it: whatever fails on a
    /// replica (only reads run there) runs again on the primary.
    fn made(&self, e: StoreError) -> StoreError {
        if self.on_replica {
            e.on_replica()
        } else {
            e
        }
    }

    /// Takes in an OK packet's session-state data: a commit's GTID is the writers' last
    /// write.
    fn note(&self, session_state: &[u8]) {
        if self.writers.is_empty() || session_state.is_empty() {
            return;
        }
        if let Some(g) = replicas::committed_gtid(session_state) {
            for w in &self.writers {
                w.borrow_mut().note_write(g, replicas::CLUSTER, self.node);
            }
        }
    }

    /// Elements were pushed on the list `key`: clients blocked on it are woken once this
    /// transaction commits (nothing is kept while no client is blocked anywhere).
    pub fn note_push(&mut self, db: u8, key: &[u8]) {
        self.note_ready(db, key, keys::kind::LIST);
    }

    /// The keys of `db` this manifold's clients are blocked on now.
    pub fn blocked_keys(&self, db: u8) -> Vec<Vec<u8>> {
        if self.host.pushes_wanted() {
            self.host.blocked_keys(db)
        } else {
            Vec::new()
        }
    }

    /// A value of type `kind` arrived at `key` (a sorted set created, a key renamed or
    /// copied there): the clients blocked on it for that type are woken once this
    /// transaction commits (Redis's `signalKeyAsReady`).
    pub fn note_ready(&mut self, db: u8, key: &[u8], kind: u8) {
        if self.host.pushes_wanted() {
            self.pushed.push((db, key.to_vec(), kind));
        }
    }

    async fn conn(&mut self) -> Result<&mut BackendConn, StoreError> {
        if self.lease.is_none() {
            if let Some(sessions) = self.readers.take() {
                if self.store.shared.ready.load(Ordering::Acquire) {
                    if let Some((lease, node)) =
                        replicas::acquire(self.store, self.key, &sessions).await
                    {
                        self.node = node;
                        self.on_replica = true;
                        return Ok(self.lease.insert(lease).conn());
                    }
                }
            }
            self.node = self.store.backends.topology().primary();
            let pool = self.store.backends.pool(self.node);
            let mut lease = pool.acquire(self.key, None, 0).await?;
            let conn = lease.conn();
            if !self.store.shared.ready.load(Ordering::Acquire) {
                schema::ensure(conn, &self.store.shared).await?;
                self.store.shared.ready.store(true, Ordering::Release);
            }
            if self.write {
                // Read committed: no gap locks, so writers of different new keys do not
                // deadlock; a write reads its keys with `FOR UPDATE` (the latest commit).
                // Applies to this transaction only: the session stays as it was.
                let level: &[u8] = if self.gap_locks {
                    b"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
                } else {
                    b"SET TRANSACTION ISOLATION LEVEL READ COMMITTED"
                };
                if let Err(e) = conn.run_ok_many(&[level, b"START TRANSACTION"]).await? {
                    return Err(StoreError::refused(e));
                }
            }
            self.lease = Some(lease);
        }
        Ok(self.lease.as_mut().expect("just set").conn())
    }

    /// Runs the transaction (before its first statement) in repeatable read, where a locking
    /// read of an absent key locks the gap it would be in: no other batch can create the key
    /// until this one ends. `EXEC` needs it for keys `WATCH` saw absent.
    pub fn gap_locks(&mut self) {
        self.gap_locks = true;
    }

    /// Runs `sql` (`{s}` stands for the schema) with `params`.
    pub async fn exec(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Executed, StoreError> {
        let mut rows = Vec::new();
        let mut done = self
            .exec_each(sql, params, |row| {
                rows.push(row);
                ControlFlow::Continue(())
            })
            .await?;
        done.rows = rows;
        Ok(done)
    }

    /// Runs `sql` with `params`, handing each row to `on_row` as it is read, so a large
    /// result set is never held whole; after `on_row` says `Break` the rest are read and
    /// dropped ([`BackendConn::execute_each`]).
    pub async fn exec_each(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        on_row: impl FnMut(Vec<Value>) -> ControlFlow<()>,
    ) -> Result<Executed, StoreError> {
        let executed = self.run_each(sql, params, on_row).await;
        executed.map_err(|e| self.made(e))
    }

    async fn run_each(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        on_row: impl FnMut(Vec<Value>) -> ControlFlow<()>,
    ) -> Result<Executed, StoreError> {
        let (id, text) = self.store.statement(sql);
        let keep = self.store.shared.keep_statements;
        let conn = self.conn().await?;
        // The server would close the connection on a packet past its limit (failing every
        // command of the batch): refused here, it fails only its own command.
        let size = manifold_backend::conn::execute_packet_size(params) + text.len() as u64;
        if size > conn.max_allowed_packet().await? {
            return Err(StoreError::refused(ErrPacket {
                code: 1153,
                sqlstate: *b"08S01",
                message: b"Got a packet bigger than 'max_allowed_packet' bytes".to_vec(),
            }));
        }
        let from = crate::metrics::now(); // metrics: time in backend statements
        let executed = conn.execute_each(id, &text, params, keep, on_row).await;
        self.host.metrics().record(crate::metrics::Stage::Sql, from);
        match executed? {
            Ok(done) => {
                self.note(&done.session_state);
                self.changed += done.affected;
                Ok(done)
            }
            Err(e) => Err(StoreError::refused(e)),
        }
    }

    /// The rows `sql` returns.
    pub async fn rows(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<Vec<Value>>, StoreError> {
        Ok(self.exec(sql, params).await?.rows)
    }

    /// The integer in the first column of the first row `sql` returns (`None`: no row, or
    /// not an integer).
    pub async fn int(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Option<i64>, StoreError> {
        Ok(self
            .rows(sql, params)
            .await?
            .first()
            .and_then(|r| r.first().and_then(int)))
    }

    /// The affected rows of `sql`.
    pub async fn affected(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, StoreError> {
        Ok(self.exec(sql, params).await?.affected)
    }

    /// Commits (when the batch wrote) and gives the connection back as it was borrowed.
    pub async fn commit(mut self) -> Result<(), StoreError> {
        let Some(mut lease) = self.lease.take() else {
            return Ok(());
        };
        if self.write {
            let from = crate::metrics::now(); // metrics: time in backend statements
            let committed = lease.conn().run_ok(b"COMMIT").await;
            self.host.metrics().record(crate::metrics::Stage::Sql, from);
            match committed {
                Ok(Ok(ok)) => self.note(&ok.session_state),
                // The pool resets the connection (which rolls back) before lending it again.
                Ok(Err(e)) => return Err(self.made(StoreError::refused_commit(e))),
                Err(e) => return Err(self.made(e.into())),
            }
        }
        lease.mark_clean();
        for (db, key, kind) in &self.pushed {
            self.host.pushed(*db, key, *kind);
        }
        if self.events_dropped > 0 {
            tracing::warn!(
                dropped = self.events_dropped,
                "redis keyspace notifications: a transaction made more than 16 MiB of events; the rest were not published"
            );
        }
        // Tracking turned on while it ran: what it changed before may not be recorded, so
        // every tracking client forgets everything (only around that moment).
        let late = !self.tracked_at_begin && self.changed > 0;
        let all = self.flushed || self.events_dropped > 0 || late;
        if (all || !self.events.is_empty()) && self.store.shared.tracking.load(Ordering::Relaxed) {
            self.host.invalidate(self.writer, &self.events, all);
        }
        if !self.events.is_empty() {
            self.host
                .keyspace_events(self.event_flags(), &std::mem::take(&mut self.events));
        }
        Ok(())
    }

    /// Ends the batch without committing: the connection is reset (which rolls back)
    /// before it serves anyone else.
    pub fn abandon(mut self) {
        drop(self.lease.take());
    }
}

/// Reads a column as bytes (`NULL` and numbers as their text).
pub fn bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::Bytes(b) => Some(b.clone()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        Value::UInt(u) => Some(u.to_string().into_bytes()),
        Value::Double(d) => Some(d.to_string().into_bytes()),
        Value::Float(f) => Some(f.to_string().into_bytes()),
        _ => None,
    }
}

/// Reads an integer column (`NULL` as `None`).
pub fn int(v: &Value) -> Option<i64> {
    match *v {
        Value::Int(i) => Some(i),
        Value::UInt(u) => i64::try_from(u).ok(),
        Value::Double(d) => Some(d as i64),
        Value::Bytes(ref b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// Reads a floating-point column.
pub fn double(v: &Value) -> Option<f64> {
    match *v {
        Value::Double(d) => Some(d),
        Value::Float(f) => Some(f64::from(f)),
        Value::Int(i) => Some(i as f64),
        Value::UInt(u) => Some(u as f64),
        Value::Bytes(ref b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// Moves a bytes column out of a row.
pub fn take_bytes(v: &mut Value) -> Option<Vec<u8>> {
    match std::mem::replace(v, Value::Null) {
        Value::Bytes(b) => Some(b),
        other => bytes(&other),
    }
}
