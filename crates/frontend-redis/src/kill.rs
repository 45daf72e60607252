//! `CLIENT KILL` across the workers: every client has a [`ClientHandle`] in the door's
//! shared registry (touched when a client connects, logs in, subscribes or leaves, never
//! per command), through which any worker's client can end it.
//!
//! A client sees and ends only its own user's clients, unless its user has `process =
//! true`: another user's client is answered for as one that does not exist (`No such
//! client`, or `0` killed), and `USER` naming another user matches nothing, whether that
//! user exists or not (the answer does not tell which users exist).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use manifold_redis_proto::Reply;
use tokio::sync::Notify;

use crate::cmd::{parse_i64, Args};
use crate::errors;
use crate::session::Session;

/// What other workers may see of a client, and how they end it.
#[derive(Debug)]
pub struct ClientHandle {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    user: Mutex<Option<Vec<u8>>>,
    /// Subscribed to some channel or pattern (`TYPE pubsub`).
    pubsub: AtomicBool,
    killed: AtomicBool,
    kill: Notify,
    /// Bytes the client's buffers hold, as its connection last noted
    /// ([`crate::memory`]: `max_memory_clients`).
    memory: AtomicU64,
}

impl ClientHandle {
    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr) -> Self {
        Self {
            id,
            addr,
            laddr,
            user: Mutex::new(None),
            pubsub: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
            memory: AtomicU64::new(0),
        }
    }

    pub fn set_user(&self, user: Option<&[u8]>) {
        *self
            .user
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = user.map(<[u8]>::to_vec);
    }

    /// Logged in as `user`.
    pub fn is_user(&self, user: Option<&[u8]>) -> bool {
        user.is_some()
            && self
                .user
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_deref()
                == user
    }

    pub fn set_pubsub(&self, on: bool) {
        self.pubsub.store(on, Ordering::Relaxed);
    }

    /// What the client's buffers hold now (written by its connection only).
    pub fn note_memory(&self, bytes: u64) {
        self.memory.store(bytes, Ordering::Relaxed);
    }

    pub fn memory(&self) -> u64 {
        self.memory.load(Ordering::Relaxed)
    }

    /// Ends the client: its connection closes at its next turn.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Ready once the client is killed.
    pub async fn killed(&self) {
        if !self.is_killed() {
            self.kill.notified().await;
        }
    }
}

/// A batch's replies publish what they hold on their client's handle, and stop once it is
/// killed ([`crate::store::context::ReplyOwner`]).
impl crate::store::context::ReplyClient for ClientHandle {
    fn memory(&self) -> u64 {
        ClientHandle::memory(self)
    }

    fn note_memory(&self, bytes: u64) {
        ClientHandle::note_memory(self, bytes);
    }

    fn is_killed(&self) -> bool {
        ClientHandle::is_killed(self)
    }

    fn id(&self) -> u64 {
        self.id
    }
}

/// Every connected client of the door, by id.
#[derive(Debug, Default)]
pub struct Registry {
    clients: Mutex<HashMap<u64, Arc<ClientHandle>>>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<ClientHandle>>> {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn add(&self, handle: Arc<ClientHandle>) {
        self.lock().insert(handle.id, handle);
    }

    pub fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Client `id`, if connected.
    pub fn get(&self, id: u64) -> Option<Arc<ClientHandle>> {
        self.lock().get(&id).cloned()
    }

    /// Whether client `id` is connected.
    pub fn contains(&self, id: u64) -> bool {
        self.lock().contains_key(&id)
    }

    /// What every client not already killed noted, summed: loads only, no handle taken.
    pub fn memory_total(&self) -> u64 {
        self.lock()
            .values()
            .filter(|h| !h.is_killed())
            .map(|h| h.memory())
            .sum()
    }

    /// Every client not already killed, with the memory it noted (only once the total is
    /// past the budget: taking a handle is an atomic add per client).
    pub fn memory(&self) -> Vec<(u64, Arc<ClientHandle>)> {
        self.lock()
            .values()
            .filter(|h| !h.is_killed())
            .map(|h| (h.memory(), h.clone()))
            .collect()
    }
}

/// The filters of `CLIENT KILL <filter> <value> ...`.
#[derive(Default)]
struct Filters<'a> {
    id: Option<u64>,
    pubsub: Option<bool>,
    user: Option<&'a [u8]>,
    addr: Option<&'a [u8]>,
    laddr: Option<&'a [u8]>,
    skipme: bool,
}

/// `CLIENT KILL addr` (answers `OK`) or `CLIENT KILL <filter> <value> ...` (answers how
/// many), as Redis 7.0.
pub fn client_kill(session: &mut Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    let proto = session.proto;
    let me = session.info.handle.id;
    let registry = &session.fe.shared.registry;
    let process = crate::session::connection::sees_everyone(session.info);
    let my_user = session.info.user.borrow().clone();
    let my_user = my_user.as_deref();
    // Another user's client is, to this one, a client that does not exist.
    let visible = |c: &ClientHandle| process || c.is_user(my_user);
    if args.len() == 3 {
        let addr = args.get(2);
        let found: Vec<Arc<ClientHandle>> = registry
            .lock()
            .values()
            .filter(|c| c.addr.to_string().as_bytes() == addr && visible(c))
            .cloned()
            .collect();
        if found.is_empty() {
            Reply::new(out, proto).error(b"No such client");
            return;
        }
        for c in found {
            c.kill();
        }
        Reply::new(out, proto).simple(b"OK");
        return;
    }
    let mut f = Filters {
        skipme: true,
        ..Filters::default()
    };
    if !args.len().is_multiple_of(2) {
        Reply::new(out, proto).error(errors::SYNTAX);
        return;
    }
    let mut i = 2;
    while i + 1 < args.len() {
        let (name, value) = (args.get(i), args.get(i + 1));
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"id") {
            match parse_i64(value) {
                Some(id) if id > 0 => f.id = Some(id as u64),
                _ => {
                    Reply::new(out, proto).error(b"client-id should be greater than 0");
                    return;
                }
            }
        } else if is(b"type") {
            let t = |n: &[u8]| value.eq_ignore_ascii_case(n);
            if t(b"normal") {
                f.pubsub = Some(false);
            } else if t(b"pubsub") {
                f.pubsub = Some(true);
            } else if t(b"master") || t(b"slave") || t(b"replica") {
                // No replication clients here: the filter matches nobody.
                f.id = Some(0);
            } else {
                let mut text = b"Unknown client type '".to_vec();
                text.extend_from_slice(value);
                text.push(b'\'');
                Reply::new(out, proto).error(&text);
                return;
            }
        } else if is(b"user") {
            // Only its own user's clients are there for it to find: no other user exists.
            let hidden = !process && my_user != Some(value);
            if !hidden && !session.fe.shared.credentials.exists(value) {
                let mut text = b"No such user '".to_vec();
                text.extend_from_slice(value);
                text.push(b'\'');
                Reply::new(out, proto).error(&text);
                return;
            }
            f.user = Some(value);
        } else if is(b"addr") {
            f.addr = Some(value);
        } else if is(b"laddr") {
            f.laddr = Some(value);
        } else if is(b"skipme") {
            if value.eq_ignore_ascii_case(b"yes") {
                f.skipme = true;
            } else if value.eq_ignore_ascii_case(b"no") {
                f.skipme = false;
            } else {
                Reply::new(out, proto).error(errors::SYNTAX);
                return;
            }
        } else {
            Reply::new(out, proto).error(errors::SYNTAX);
            return;
        }
        i += 2;
    }
    let matches: Vec<Arc<ClientHandle>> = registry
        .lock()
        .values()
        .filter(|c| {
            f.id.is_none_or(|id| c.id == id)
                && f.pubsub
                    .is_none_or(|p| c.pubsub.load(Ordering::Relaxed) == p)
                && f.addr.is_none_or(|a| c.addr.to_string().as_bytes() == a)
                && f.laddr.is_none_or(|a| c.laddr.to_string().as_bytes() == a)
                && f.user.is_none_or(|u| {
                    c.user
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .as_deref()
                        == Some(u)
                })
                && !(f.skipme && c.id == me)
                && visible(c)
        })
        .cloned()
        .collect();
    for c in &matches {
        c.kill();
    }
    Reply::new(out, proto).integer(matches.len() as i64);
}
