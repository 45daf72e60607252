//! Every logged-in client session, findable by its connection id from any worker: what
//! `KILL` needs (and what an admin's session list will read).
//!
//! Each worker keeps its sessions in a shard of its own, so a login and a session end take
//! one uncontended lock; only `KILL` locks another worker's shard. A session publishes the
//! server thread id of the backend connection it holds (a relaxed store at each borrow and
//! release, read by nobody else on the request path).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What another session may need to know about, or do to, a session.
#[derive(Debug)]
pub(crate) struct SessionHandle {
    pub id: u32,
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
    pub fn register(self: &Arc<Self>, id: u32, user: &str) -> Registration {
        let handle = Arc::new(SessionHandle {
            id,
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
