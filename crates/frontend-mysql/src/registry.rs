//! Every logged-in client session, findable by its connection id from any worker: what
//! `KILL` needs and what the admin port's `SHOW SESSIONS` reads.
//!
//! Each worker keeps its sessions in a shard of its own, so a login and a session end take
//! one uncontended lock; only `KILL` and the admin port lock another worker's shard. A
//! session publishes what it is doing with relaxed stores that only it makes (no
//! read-modify-write, nothing read on the request path): the server thread id of the
//! backend connection it holds, its pin reasons, and the statement it runs, whose text goes
//! through a sequence lock so a reader never sees half of one statement and half of another,
//! and its current schema (the `db` of `SHOW PROCESSLIST`) the same way.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes of a statement's text a session publishes.
pub const STATEMENT_SHOWN: usize = 256;
const WORDS: usize = STATEMENT_SHOWN / 8;
/// Bytes of a schema name a session publishes: 64 characters of up to three bytes (the
/// server's limit, in `utf8mb3`) fit.
pub const SCHEMA_SHOWN: usize = 192;
const SCHEMA_WORDS: usize = SCHEMA_SHOWN / 8;

/// The statement a session runs, written by the session alone.
#[derive(Debug)]
struct Activity {
    /// Odd while the session rewrites the fields below.
    seq: AtomicU64,
    /// When the statement started ([`manifold_engine::clock`] ticks); 0 while idle.
    started: AtomicU64,
    /// When the last statement started; 0 before the first. While idle, the session has
    /// waited for its client since about then (one load and store at the statement's end
    /// instead of a clock reading).
    last_started: AtomicU64,
    len: AtomicU32,
    /// 1 when the statement is a prepared statement's execution, else 0.
    executes: AtomicU32,
    text: [AtomicU64; WORDS],
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            seq: AtomicU64::new(0),
            started: AtomicU64::new(0),
            last_started: AtomicU64::new(0),
            len: AtomicU32::new(0),
            executes: AtomicU32::new(0),
            text: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The session's current schema, written by the session alone.
#[derive(Debug)]
struct PublishedSchema {
    /// Odd while the session rewrites the fields below.
    seq: AtomicU32,
    /// The name's length + 1; 0 for no schema.
    len: AtomicU32,
    text: [AtomicU64; SCHEMA_WORDS],
}

impl Default for PublishedSchema {
    fn default() -> Self {
        PublishedSchema {
            seq: AtomicU32::new(0),
            len: AtomicU32::new(0),
            text: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl PublishedSchema {
    /// Whether `schema` is what is published. Only the writer calls it: it reads its own
    /// stores, so relaxed loads (plain moves) see them and no lock is needed.
    #[inline]
    fn is(&self, schema: Option<&[u8]>) -> bool {
        let Some(name) = schema else {
            return self.len.load(Ordering::Relaxed) == 0;
        };
        let name = &name[..name.len().min(SCHEMA_SHOWN)];
        self.len.load(Ordering::Relaxed) as usize == name.len() + 1
            && self
                .text
                .iter()
                .zip(name.chunks(8))
                .all(|(word, chunk)| word.load(Ordering::Relaxed) == word_of(chunk))
    }

    fn set(&self, schema: Option<&[u8]>) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let name = schema.map(|n| &n[..n.len().min(SCHEMA_SHOWN)]);
        for (word, chunk) in self.text.iter().zip(name.unwrap_or_default().chunks(8)) {
            word.store(word_of(chunk), Ordering::Relaxed);
        }
        self.len
            .store(name.map_or(0, |n| n.len() as u32 + 1), Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// A consistent read, from any thread: `Err` after too many tries to find a quiet
    /// moment (the session rewrites it at most once per statement).
    fn read(&self) -> Result<Option<String>, ()> {
        for _ in 0..100 {
            let before = self.seq.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let len = self.len.load(Ordering::Relaxed) as usize;
            let mut text = Vec::new();
            if len > 0 {
                let n = (len - 1).min(SCHEMA_SHOWN);
                for word in &self.text[..n.div_ceil(8)] {
                    text.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
                }
                text.truncate(n);
            }
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != before {
                continue;
            }
            return Ok((len > 0).then(|| String::from_utf8_lossy(&text).into_owned()));
        }
        Err(())
    }
}

/// Up to eight bytes as one little-endian word, zero-padded.
#[inline]
fn word_of(chunk: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes[..chunk.len()].copy_from_slice(chunk);
    u64::from_le_bytes(bytes)
}

/// What `SHOW SESSIONS` shows of a session.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub id: u32,
    pub user: String,
    pub client: SocketAddr,
    /// Since login.
    pub connected: Duration,
    /// The statement running and for how long; `None` while the session waits for its client.
    pub statement: Option<(String, Duration)>,
    /// The running statement is a prepared statement's execution (`COM_STMT_EXECUTE`).
    pub executes: bool,
    /// While idle: how long it has waited for its client (since its last statement started;
    /// since login before the first).
    pub idle: Duration,
    /// The current schema, as of the end of the session's last statement.
    pub schema: Option<String>,
    /// [`crate::pins::Pins::bits`].
    pub pins: u32,
    /// The backend connection it holds: cluster, node, server thread id (0: none).
    pub backend: (usize, usize, u32),
}

/// What another session may need to know about, or do to, a session.
#[derive(Debug)]
pub(crate) struct SessionHandle {
    pub id: u32,
    client: SocketAddr,
    since: Instant,
    /// The session's pin reasons ([`crate::pins::Pins::bits`]), after each statement.
    pins: AtomicU32,
    activity: Activity,
    schema: PublishedSchema,
    /// The manifold user now logged in (changes with `COM_CHANGE_USER`).
    user: Mutex<String>,
    /// The backend connection the session holds: its cluster (bits 48..), node (bits 32..48)
    /// and server thread id (low half); 0 when it holds none.
    backend_thread: AtomicU64,
    /// Wakes the session's one long-lived waiter (armed with its drain waiter, not per
    /// command) to end it: `KILL CONNECTION`. No extra file descriptor per session, which a
    /// duplicated socket would cost: ten thousand clients would need twenty thousand.
    killed: tokio::sync::Notify,
    /// The statement (its [`Activity`] `seq`) a `KILL QUERY` interrupts; odd: none, as a
    /// statement's `seq` is even once it has started.
    kill_query: AtomicU64,
}

/// A statement [`SessionHandle::mark_query_killed`] marked, and where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KillTarget {
    /// The statement, for [`SessionHandle::still_running`].
    pub seq: u64,
    /// The backend connection it runs on: cluster, node, server thread (0: none yet).
    pub backend: (usize, usize, u32),
}

impl SessionHandle {
    pub fn user(&self) -> String {
        self.user.lock().expect("session user").clone()
    }

    pub fn set_user(&self, name: &str) {
        name.clone_into(&mut self.user.lock().expect("session user"));
    }

    /// The cluster, node and server thread id of the backend connection the session holds;
    /// thread 0 when it holds none.
    pub fn backend_thread(&self) -> (usize, usize, u32) {
        let v = self.backend_thread.load(Ordering::Relaxed);
        ((v >> 48) as usize, (v >> 32) as usize & 0xFFFF, v as u32)
    }

    /// Marks the statement the session is running now as interrupted (`KILL QUERY`) and
    /// says where it runs; `None` when the session runs no statement (a server ignores a
    /// `KILL QUERY` of an idle connection too). A statement waiting for a connection, or
    /// for its answer behind another session's statement, is answered ERR 1317 by its own
    /// session when it sees the mark ([`Self::query_killed`]); a connection the kill may
    /// still reach after the statement ended is closed rather than lent to another session
    /// ([`Self::release_backend_thread`], [`Self::statement_ended`]).
    pub fn mark_query_killed(&self) -> Option<KillTarget> {
        let a = &self.activity;
        // Odd while the session starts a statement, for a few hundred nanoseconds.
        let mut seq = a.seq.load(Ordering::Acquire);
        for i in 0..10_000 {
            if seq & 1 == 0 {
                break;
            }
            if i < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            seq = a.seq.load(Ordering::Acquire);
        }
        if seq & 1 == 1 || a.started.load(Ordering::Relaxed) == 0 {
            return None;
        }
        // Statements only move forward: a killer that read an older `seq` must not replace a
        // newer statement's mark with its own.
        self.kill_query.fetch_max(seq, Ordering::Relaxed);
        // The killer's half of a Dekker pair: it writes the mark, then reads where the
        // statement runs; the session publishes a connection or lets one go, then reads the
        // mark. With a SeqCst fence on each side, one of them sees the other's write.
        fence(Ordering::SeqCst);
        let v = self.backend_thread.load(Ordering::Acquire);
        let backend = ((v >> 48) as usize, (v >> 32) as usize & 0xFFFF, v as u32);
        self.still_running(seq)
            .then_some(KillTarget { seq, backend })
    }

    /// The statement `seq` marked by [`Self::mark_query_killed`] is still the one the
    /// session runs: the killer checks again right before sending its `KILL QUERY`.
    pub fn still_running(&self, seq: u64) -> bool {
        self.activity.seq.load(Ordering::Acquire) == seq
    }

    /// The statement the session runs now was interrupted by a `KILL QUERY`. Only the
    /// session calls this: `seq` is its own to write.
    pub fn query_killed(&self) -> bool {
        self.kill_query.load(Ordering::Relaxed) == self.activity.seq.load(Ordering::Relaxed)
    }

    /// The session lets go of its backend connection; true when its statement was
    /// interrupted meanwhile: a `KILL QUERY` may be on its way to that connection, which
    /// must then close instead of serving another session's statement.
    pub fn release_backend_thread(&self) -> bool {
        self.backend_thread.store(0, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.query_killed()
    }

    /// The session now holds a connection to `node` of `cluster` whose server thread is
    /// `id` (0: none). Its fence pairs with [`Self::mark_query_killed`]'s: a kill that does
    /// not see the connection is seen by the session's next [`Self::query_killed`].
    pub fn publish_backend_thread(&self, cluster: usize, node: usize, id: u32) {
        if id == 0 {
            self.backend_thread.store(0, Ordering::Relaxed);
            return;
        }
        let v = (cluster as u64) << 48 | (node as u64) << 32 | u64::from(id);
        self.backend_thread.store(v, Ordering::Release);
        fence(Ordering::SeqCst);
    }

    pub fn publish_pins(&self, bits: u32) {
        self.pins.store(bits, Ordering::Relaxed);
    }

    /// The session starts running `sql` (its first [`STATEMENT_SHOWN`] bytes are kept) at
    /// `at` ([`manifold_engine::clock`] ticks).
    pub fn statement_started(&self, sql: &[u8], at: u64) {
        self.started(sql, at, false);
    }

    /// The session starts executing the prepared statement `sql` (`COM_STMT_EXECUTE`).
    pub fn execute_started(&self, sql: &[u8], at: u64) {
        self.started(sql, at, true);
    }

    fn started(&self, sql: &[u8], at: u64, executes: bool) {
        let a = &self.activity;
        let seq = a.seq.load(Ordering::Relaxed);
        a.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let shown = &sql[..sql.len().min(STATEMENT_SHOWN)];
        for (word, chunk) in a.text.iter().zip(shown.chunks(8)) {
            word.store(word_of(chunk), Ordering::Relaxed);
        }
        a.len.store(shown.len() as u32, Ordering::Relaxed);
        a.executes.store(u32::from(executes), Ordering::Relaxed);
        a.started.store(at.max(1), Ordering::Relaxed);
        a.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The session's statement is answered; it waits for its client again. With `holding`
    /// (the session keeps its connection, pinned), true when that statement was interrupted
    /// by a `KILL QUERY` which may still reach the connection: it must close, not be lent,
    /// when the session lets it go.
    pub fn statement_ended(&self, holding: bool) -> bool {
        let a = &self.activity;
        // A command that ran no statement (`COM_PING`, `COM_STMT_PREPARE`, ...) leaves the
        // last statement's start as it was: the idle time counts from there.
        let started = a.started.load(Ordering::Relaxed);
        if started == 0 {
            return false;
        }
        a.last_started.store(started, Ordering::Relaxed);
        a.started.store(0, Ordering::Relaxed);
        // A `KILL QUERY` aimed at the statement now over can match no later one.
        let seq = a.seq.load(Ordering::Relaxed);
        a.seq.store(seq + 2, Ordering::Release);
        if !holding {
            return false;
        }
        // Pairs with the killer's check of `seq` before it sends (`still_running`).
        fence(Ordering::SeqCst);
        self.kill_query.load(Ordering::Relaxed) == seq
    }

    /// Publishes the session's current schema if it is not what is published already: one
    /// comparison per statement, a write only when the schema changed.
    #[inline]
    pub fn publish_schema(&self, schema: Option<&[u8]>) {
        if !self.schema.is(schema) {
            self.schema.set(schema);
        }
    }

    /// A consistent view of the session now.
    pub fn info(&self) -> SessionInfo {
        let a = &self.activity;
        let now = Instant::now();
        let ticks = manifold_engine::clock::now();
        let mut statement = None;
        let mut last_started = 0;
        let mut executes = false;
        // The session rewrites its statement at most once per round trip to its client: a
        // few tries find a quiet moment.
        for _ in 0..100 {
            let before = a.seq.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let started = a.started.load(Ordering::Relaxed);
            last_started = a.last_started.load(Ordering::Relaxed);
            executes = a.executes.load(Ordering::Relaxed) == 1;
            let len = (a.len.load(Ordering::Relaxed) as usize).min(STATEMENT_SHOWN);
            let mut text = Vec::with_capacity(len);
            for word in &a.text[..len.div_ceil(8)] {
                text.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
            }
            text.truncate(len);
            fence(Ordering::Acquire);
            if a.seq.load(Ordering::Relaxed) != before {
                continue;
            }
            statement = (started != 0).then(|| {
                let running = manifold_engine::clock::span_ns(started, ticks);
                (
                    String::from_utf8_lossy(&text).into_owned(),
                    Duration::from_nanos(running),
                )
            });
            break;
        }
        let connected = now.saturating_duration_since(self.since);
        let idle = if last_started == 0 {
            connected
        } else {
            Duration::from_nanos(manifold_engine::clock::span_ns(last_started, ticks))
        };
        SessionInfo {
            id: self.id,
            user: self.user(),
            client: self.client,
            connected,
            statement,
            executes,
            idle,
            schema: self.schema.read().unwrap_or_default(),
            pins: self.pins.load(Ordering::Relaxed),
            backend: self.backend_thread(),
        }
    }

    /// Ends the session's client connection (`KILL CONNECTION`) the next time it waits for
    /// its client; a session not yet waiting keeps the request.
    pub fn disconnect(&self) {
        self.killed.notify_one();
    }

    /// Resolves once the session is killed.
    pub fn killed(&self) -> tokio::sync::futures::Notified<'_> {
        self.killed.notified()
    }
}

/// One worker's sessions.
#[derive(Debug, Default)]
pub(crate) struct SessionShard(Mutex<HashMap<u32, Arc<SessionHandle>>>);

impl SessionShard {
    /// Registers a session until the returned guard is dropped.
    pub fn register(self: &Arc<Self>, id: u32, user: &str, client: SocketAddr) -> Registration {
        let handle = Arc::new(SessionHandle {
            id,
            client,
            since: Instant::now(),
            pins: AtomicU32::new(0),
            activity: Activity::default(),
            schema: PublishedSchema::default(),
            user: Mutex::new(user.to_owned()),
            backend_thread: AtomicU64::new(0),
            killed: tokio::sync::Notify::new(),
            kill_query: AtomicU64::new(1),
        });
        self.0
            .lock()
            .expect("session shard")
            .insert(id, handle.clone());
        Registration {
            shard: self.clone(),
            handle,
        }
    }

    pub fn get(&self, id: u32) -> Option<Arc<SessionHandle>> {
        self.0.lock().expect("session shard").get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.0.lock().expect("session shard").len()
    }

    /// Every session of the shard.
    pub fn all(&self) -> Vec<Arc<SessionHandle>> {
        self.0
            .lock()
            .expect("session shard")
            .values()
            .cloned()
            .collect()
    }
}

/// A session's place in its worker's shard; removes it when dropped.
pub(crate) struct Registration {
    shard: Arc<SessionShard>,
    pub handle: Arc<SessionHandle>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shard
            .0
            .lock()
            .expect("session shard")
            .remove(&self.handle.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_query_marks_the_running_statement_only() {
        let shard = Arc::new(SessionShard::default());
        let r = shard.register(9, "app", "127.0.0.1:5000".parse().unwrap());
        let h = &r.handle;
        // Idle (even holding a connection, pinned): nothing to interrupt, nothing marked.
        h.publish_backend_thread(0, 1, 77);
        assert_eq!(h.mark_query_killed(), None);
        h.statement_started(b"SELECT 1", 1);
        assert!(
            !h.query_killed(),
            "a kill of the idle session marks no later statement"
        );
        // Running, on a connection: marked, and the connection is named.
        let marked = h.mark_query_killed().expect("a statement runs");
        assert_eq!(marked.backend, (0, 1, 77));
        assert!(h.still_running(marked.seq));
        assert!(h.query_killed());
        // Still holding the connection when the statement ends (pinned): the kill may yet
        // reach it.
        assert!(h.statement_ended(true));
        assert!(
            !h.still_running(marked.seq),
            "the killer's last check sees it over"
        );
        h.statement_started(b"SELECT 2", 2);
        assert!(!h.query_killed(), "the next statement is not interrupted");
        let marked = h.mark_query_killed().expect("a statement runs");
        assert!(
            h.release_backend_thread(),
            "the connection it ran on must not be lent again"
        );
        assert_eq!(h.backend_thread(), (0, 0, 0));
        assert!(!h.statement_ended(false));
        assert!(!h.still_running(marked.seq));
        // Waiting for a connection (or queued behind another session's statement): marked,
        // with no connection to send the kill to.
        h.statement_started(b"SELECT 3", 3);
        h.publish_backend_thread(0, 1, 78);
        assert!(!h.release_backend_thread());
        let marked = h.mark_query_killed().expect("a statement runs");
        assert_eq!(marked.backend, (0, 0, 0));
        assert!(h.query_killed());
        assert!(!h.statement_ended(false));
        assert!(!h.query_killed());
    }

    #[test]
    fn a_published_statement_reads_back_whole() {
        let shard = Arc::new(SessionShard::default());
        let r = shard.register(7, "app", "127.0.0.1:5000".parse().unwrap());
        assert!(r.handle.info().statement.is_none());
        r.handle
            .statement_started(b"SELECT 1", manifold_engine::clock::now());
        let info = r.handle.info();
        assert_eq!(info.statement.unwrap().0, "SELECT 1");
        let long = vec![b'x'; 1000];
        r.handle
            .statement_started(&long, manifold_engine::clock::now());
        let (text, _) = r.handle.info().statement.unwrap();
        assert_eq!(text.len(), STATEMENT_SHOWN);
        r.handle
            .statement_started(b"SELECT 22", manifold_engine::clock::now());
        assert_eq!(r.handle.info().statement.unwrap().0, "SELECT 22");
        assert!(!r.handle.info().executes);
        r.handle
            .execute_started(b"SELECT ?", manifold_engine::clock::now());
        assert!(r.handle.info().executes);
        r.handle.statement_ended(false);
        assert!(r.handle.info().statement.is_none());
        assert_eq!(shard.all().len(), 1);
        drop(r);
        assert!(shard.all().is_empty());
    }

    #[test]
    fn the_published_schema_follows_the_session() {
        let shard = Arc::new(SessionShard::default());
        let r = shard.register(3, "app", "127.0.0.1:5000".parse().unwrap());
        assert_eq!(r.handle.info().schema, None);
        r.handle.publish_schema(Some(b"shop"));
        assert_eq!(r.handle.info().schema.as_deref(), Some("shop"));
        r.handle
            .publish_schema(Some(b"a_schema_with_a_longer_name"));
        assert_eq!(
            r.handle.info().schema.as_deref(),
            Some("a_schema_with_a_longer_name")
        );
        // A shorter name over a longer one leaves nothing of the longer behind.
        r.handle.publish_schema(Some(b"a_s"));
        assert_eq!(r.handle.info().schema.as_deref(), Some("a_s"));
        r.handle.publish_schema(Some(b""));
        assert_eq!(r.handle.info().schema.as_deref(), Some(""));
        r.handle.publish_schema(None);
        assert_eq!(r.handle.info().schema, None);
        let long = vec![b'x'; 300];
        r.handle.publish_schema(Some(&long));
        assert!(r.handle.schema.is(Some(&long)));
        assert_eq!(r.handle.info().schema.unwrap().len(), SCHEMA_SHOWN);
    }

    #[test]
    fn an_idle_session_counts_from_its_last_statement() {
        let shard = Arc::new(SessionShard::default());
        let r = shard.register(4, "app", "127.0.0.1:5000".parse().unwrap());
        let start = manifold_engine::clock::now();
        r.handle.statement_started(b"SELECT 1", start);
        r.handle.statement_ended(false);
        assert_eq!(
            r.handle.activity.last_started.load(Ordering::Relaxed),
            start.max(1)
        );
        assert!(r.handle.info().statement.is_none());
        // A command that ran no statement (COM_PING) keeps that start.
        r.handle.statement_ended(false);
        assert_eq!(
            r.handle.activity.last_started.load(Ordering::Relaxed),
            start.max(1)
        );
    }

    #[test]
    fn a_reader_never_sees_two_statements_mixed() {
        let shard = Arc::new(SessionShard::default());
        let r = shard.register(1, "app", "127.0.0.1:5000".parse().unwrap());
        let handle = r.handle.clone();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let a = vec![b'a'; 200];
                let b = vec![b'b'; 120];
                while !stop.load(Ordering::Relaxed) {
                    handle.statement_started(&a, 1);
                    handle.statement_started(&b, 2);
                }
            })
        };
        for _ in 0..20_000 {
            if let Some((text, _)) = r.handle.info().statement {
                let bytes = text.as_bytes();
                assert!(
                    bytes == vec![b'a'; 200].as_slice() || bytes == vec![b'b'; 120].as_slice(),
                    "torn read: {text}"
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
    }
}
