//! Every logged-in client session, findable by its connection id from any worker: what
//! `KILL` needs and what the admin port's `SHOW SESSIONS` reads.
//!
//! Each worker keeps its sessions in a shard of its own, so a login and a session end take
//! one uncontended lock; only `KILL` and the admin port lock another worker's shard. A
//! session publishes what it is doing with relaxed stores that only it makes (no
//! read-modify-write, nothing read on the request path): the server thread id of the
//! backend connection it holds, its pin reasons, and the statement it runs, whose text goes
//! through a sequence lock so a reader never sees half of one statement and half of another.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes of a statement's text a session publishes.
pub const STATEMENT_SHOWN: usize = 256;
const WORDS: usize = STATEMENT_SHOWN / 8;

/// The statement a session runs, written by the session alone.
#[derive(Debug)]
struct Activity {
    /// Odd while the session rewrites the fields below.
    seq: AtomicU32,
    /// When the statement started ([`manifold_engine::clock`] ticks); 0 while idle.
    started: AtomicU64,
    len: AtomicU32,
    text: [AtomicU64; WORDS],
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            seq: AtomicU32::new(0),
            started: AtomicU64::new(0),
            len: AtomicU32::new(0),
            text: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
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
    /// The manifold user now logged in (changes with `COM_CHANGE_USER`).
    user: Mutex<String>,
    /// The backend connection the session holds: its cluster (bits 48..), node (bits 32..48)
    /// and server thread id (low half); 0 when it holds none.
    backend_thread: AtomicU64,
    /// Wakes the session's one long-lived waiter (armed with its drain waiter, not per
    /// command) to end it: `KILL CONNECTION`. No extra file descriptor per session, which a
    /// duplicated socket would cost: ten thousand clients would need twenty thousand.
    killed: tokio::sync::Notify,
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

    pub fn publish_backend_thread(&self, cluster: usize, node: usize, id: u32) {
        let v = if id == 0 {
            0
        } else {
            (cluster as u64) << 48 | (node as u64) << 32 | u64::from(id)
        };
        self.backend_thread.store(v, Ordering::Relaxed);
    }

    pub fn publish_pins(&self, bits: u32) {
        self.pins.store(bits, Ordering::Relaxed);
    }

    /// The session starts running `sql` (its first [`STATEMENT_SHOWN`] bytes are kept) at
    /// `at` ([`manifold_engine::clock`] ticks).
    pub fn statement_started(&self, sql: &[u8], at: u64) {
        let a = &self.activity;
        let seq = a.seq.load(Ordering::Relaxed);
        a.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let shown = &sql[..sql.len().min(STATEMENT_SHOWN)];
        for (word, chunk) in a.text.iter().zip(shown.chunks(8)) {
            let mut bytes = [0u8; 8];
            bytes[..chunk.len()].copy_from_slice(chunk);
            word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        }
        a.len.store(shown.len() as u32, Ordering::Relaxed);
        a.started.store(at.max(1), Ordering::Relaxed);
        a.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The session's statement is answered; it waits for its client again.
    pub fn statement_ended(&self) {
        self.activity.started.store(0, Ordering::Relaxed);
    }

    /// A consistent view of the session now.
    pub fn info(&self) -> SessionInfo {
        let a = &self.activity;
        let now = Instant::now();
        let ticks = manifold_engine::clock::now();
        let mut statement = None;
        // The session rewrites its statement at most once per round trip to its client: a
        // few tries find a quiet moment.
        for _ in 0..100 {
            let before = a.seq.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let started = a.started.load(Ordering::Relaxed);
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
        SessionInfo {
            id: self.id,
            user: self.user(),
            client: self.client,
            connected: now.saturating_duration_since(self.since),
            statement,
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
            user: Mutex::new(user.to_owned()),
            backend_thread: AtomicU64::new(0),
            killed: tokio::sync::Notify::new(),
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
        r.handle.statement_ended();
        assert!(r.handle.info().statement.is_none());
        assert_eq!(shard.all().len(), 1);
        drop(r);
        assert!(shard.all().is_empty());
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
