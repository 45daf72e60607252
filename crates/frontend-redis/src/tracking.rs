//! Client-side caching (`CLIENT TRACKING`), the part every worker shares: which clients
//! may hold which keys, and the invalidations sent to them once a transaction that changed
//! those keys committed. As Redis 7.0's `tracking.c`:
//!
//! - **Default mode**: the keys a tracking client read (the read-only commands' keys, taken
//!   before the command runs) are remembered in one table, key → client ids, for every
//!   database at once. A change of a key sends each client in its entry one `invalidate`
//!   push of that key, and forgets the entry (a client is told once, until it reads the
//!   key again).
//! - **`BCAST`**: nothing is remembered; every changed key that starts with one of the
//!   client's prefixes (`""` for all) is sent, a transaction's keys of one prefix as one
//!   array, in key order.
//! - **`NOLOOP`**: a client is not told of its own changes.
//! - **`REDIRECT id`**: the invalidations go to another client of the same user: as a push
//!   in RESP3, or in RESP2 as a message on `__redis__:invalidate` when it is subscribed. A
//!   client redirecting to one that left gets `tracking-redir-broken` (RESP3).
//! - **Flushes** (`FLUSHDB`, `FLUSHALL`) send every tracking client a null: all its keys.
//!
//! The changed keys are the keyspace events a transaction recorded ([`crate::store::events`]:
//! while some client tracks keys, every event is recorded whatever
//! `notify-keyspace-events` asks for), so invalidations leave only after the commit, and a
//! rolled-back attempt sends none. A transaction that could not hold all its events
//! invalidates everything, as a flush.
//!
//! Bounds: the table holds at most `tracking-table-max-keys` keys (Redis's default, one
//! million; 0: no count) and [`MAX_TABLE_BYTES`] whatever that setting says; past them
//! entries are let go, their clients told to forget those keys (as Redis evicts them). A
//! client's invalidations wait in its Pub/Sub queue ([`crate::pubsub`]), bounded as any
//! subscriber's. Nothing is kept or looked up while no client tracks keys.
//!
//! Gaps (docs/REDIS.md): only writes made through this manifold invalidate (not other
//! manifolds' nor SQL's); a write already under way when the first client turns tracking
//! on may go untold; a redirect target gets invalidations only while it has a queue (it
//! is subscribed, or tracks keys itself).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::pubsub::{Hub, Message};
use crate::store::events::Event;
use crate::store::StoreShared;

/// Bytes the table may hold (its keys, plus [`ENTRY_BYTES`] a key and 8 a client id),
/// whatever `tracking-table-max-keys` allows: a client reading many large keys cannot
/// take memory without bound.
pub const MAX_TABLE_BYTES: usize = 64 << 20;
/// What a key's entry costs besides its bytes and its ids.
const ENTRY_BYTES: usize = 64;
/// Prefixes one client may broadcast on (`CLIENT TRACKING ON BCAST PREFIX ...`): each
/// changed key is compared with them.
pub const MAX_PREFIXES: usize = 1024;

/// What a client asked for with `CLIENT TRACKING ON`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mode {
    /// The client its invalidations go to (0: itself).
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
}

/// A tracking client, as the table knows it.
#[derive(Debug)]
struct Client {
    mode: Mode,
    /// It speaks RESP3: without a redirect, only then is it sent anything.
    resp3: bool,
    prefixes: Vec<Box<[u8]>>,
    /// Its redirect target left (`CLIENT TRACKINGINFO`'s `broken_redirect`).
    broken: Arc<AtomicBool>,
}

#[derive(Debug, Default)]
struct Table {
    /// Key → the ids (sorted) of the clients that may hold it (default mode).
    keys: HashMap<Box<[u8]>, Vec<u64>>,
    /// Ids in `keys`, all entries together (`tracking_total_items`).
    items: u64,
    /// What `keys` holds ([`MAX_TABLE_BYTES`]).
    bytes: usize,
    /// Prefix → the ids of the clients broadcast to (`BCAST`).
    prefixes: BTreeMap<Box<[u8]>, Vec<u64>>,
    /// The prefixes' lengths → how many prefixes have it: a changed key is looked up by
    /// its own prefixes of those lengths only.
    prefix_lens: BTreeMap<usize, usize>,
    /// Every client with tracking on.
    clients: HashMap<u64, Client>,
}

/// The tracking table, every worker's.
pub struct Tracker {
    table: Mutex<Table>,
    /// Where invalidations go: the clients' Pub/Sub queues.
    hub: Arc<Hub>,
    /// Whose flag says that some client tracks keys (transactions then record their keys).
    store: Arc<StoreShared>,
    /// Whether a redirect target still exists (it may have no queue).
    registry: Arc<crate::kill::Registry>,
    /// `tracking-table-max-keys` (0: no count).
    max_keys: AtomicU64,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker").finish_non_exhaustive()
    }
}

/// The table's figures, as `INFO` shows them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    pub clients: usize,
    pub keys: usize,
    pub items: u64,
    pub prefixes: usize,
}

/// Redis's default `tracking-table-max-keys`.
pub const DEFAULT_MAX_KEYS: u64 = 1_000_000;

fn entry_bytes(key: &[u8], ids: usize) -> usize {
    key.len() + ENTRY_BYTES + 8 * ids
}

impl Tracker {
    pub fn new(
        hub: Arc<Hub>,
        store: Arc<StoreShared>,
        registry: Arc<crate::kill::Registry>,
    ) -> Self {
        Self {
            table: Mutex::default(),
            hub,
            store,
            registry,
            max_keys: AtomicU64::new(DEFAULT_MAX_KEYS),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic while holding the lock leaves maps that are still consistent enough:
        // at worst an invalidation is sent twice or a figure is off.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `tracking-table-max-keys`.
    pub fn max_keys(&self) -> u64 {
        self.max_keys.load(Ordering::Relaxed)
    }

    pub fn set_max_keys(&self, n: u64) {
        self.max_keys.store(n, Ordering::Relaxed);
        let mut t = self.lock();
        self.evict(&mut t);
    }

    /// Turns tracking on for client `id` (again: its mode replaced, `prefixes` added),
    /// which speaks RESP3 or not; the flag it shows a broken redirect on.
    pub fn enable(&self, id: u64, mode: Mode, prefixes: &[&[u8]], resp3: bool) -> Arc<AtomicBool> {
        let mut t = self.lock();
        let t = &mut *t;
        let client = t.clients.entry(id).or_insert_with(|| Client {
            mode,
            resp3,
            prefixes: Vec::new(),
            broken: Arc::default(),
        });
        client.mode = mode;
        client.resp3 = resp3;
        client.broken.store(false, Ordering::Relaxed);
        if mode.bcast {
            let all: &[&[u8]] = if prefixes.is_empty() {
                &[b""]
            } else {
                prefixes
            };
            for p in all {
                if client.prefixes.iter().any(|q| **q == **p) {
                    continue;
                }
                client.prefixes.push((*p).into());
                let ids = t.prefixes.entry((*p).into()).or_insert_with(|| {
                    *t.prefix_lens.entry(p.len()).or_default() += 1;
                    Vec::new()
                });
                if let Err(at) = ids.binary_search(&id) {
                    ids.insert(at, id);
                }
            }
        }
        let broken = client.broken.clone();
        self.store.tracking.store(true, Ordering::Relaxed);
        broken
    }

    /// Turns tracking off for client `id`. Its ids in the keys' entries go when those keys
    /// change or are let go (as Redis, which forgets them lazily too).
    pub fn disable(&self, id: u64) {
        let mut t = self.lock();
        let Some(client) = t.clients.remove(&id) else {
            return;
        };
        for p in &client.prefixes {
            if let Some(ids) = t.prefixes.get_mut(p) {
                ids.retain(|&i| i != id);
                if ids.is_empty() {
                    t.prefixes.remove(p);
                    if let Some(n) = t.prefix_lens.get_mut(&p.len()) {
                        *n -= 1;
                        if *n == 0 {
                            t.prefix_lens.remove(&p.len());
                        }
                    }
                }
            }
        }
        if t.clients.is_empty() {
            self.store.tracking.store(false, Ordering::Relaxed);
        }
    }

    /// Client `id` now speaks RESP3 (`HELLO 3`) or not.
    pub fn set_resp3(&self, id: u64, resp3: bool) {
        if let Some(c) = self.lock().clients.get_mut(&id) {
            c.resp3 = resp3;
        }
    }

    /// Remembers that client `id` may hold `keys` (it is reading them now).
    pub fn remember<'k>(&self, id: u64, keys: impl Iterator<Item = &'k [u8]>) {
        let mut t = self.lock();
        let t = &mut *t;
        for key in keys {
            if let Some(ids) = t.keys.get_mut(key) {
                if let Err(at) = ids.binary_search(&id) {
                    ids.insert(at, id);
                    t.items += 1;
                    t.bytes += 8;
                }
            } else {
                t.keys.insert(key.into(), vec![id]);
                t.items += 1;
                t.bytes += entry_bytes(key, 1);
            }
        }
        self.evict(t);
    }

    /// Lets entries go once the table is past its bounds, down to nine tenths of them
    /// (so that a full table does not pay a scan per key read), their clients told to
    /// forget those keys.
    fn evict(&self, t: &mut Table) {
        let max = self.max_keys() as usize;
        if (max == 0 || t.keys.len() <= max) && t.bytes <= MAX_TABLE_BYTES {
            return;
        }
        let keys_goal = if max > 0 { max - max / 10 } else { usize::MAX };
        let mut excess_keys = t.keys.len().saturating_sub(keys_goal);
        let mut excess_bytes = t.bytes.saturating_sub(MAX_TABLE_BYTES / 10 * 9);
        let victims: Vec<Box<[u8]>> = t
            .keys
            .iter()
            .take_while(|(k, ids)| {
                let go = excess_keys > 0 || excess_bytes > 0;
                excess_keys = excess_keys.saturating_sub(1);
                excess_bytes = excess_bytes.saturating_sub(entry_bytes(k, ids.len()));
                go
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut told: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
        for key in victims {
            if let Some(ids) = t.keys.remove(&key) {
                t.items -= ids.len() as u64;
                t.bytes -= entry_bytes(&key, ids.len());
                for id in ids {
                    if t.clients.get(&id).is_some_and(|c| !c.mode.bcast) {
                        told.entry(id).or_default().push(key.to_vec());
                    }
                }
            }
        }
        for (id, keys) in told {
            self.send(t, id, Some(keys), true);
        }
    }

    /// Sends client `id`'s invalidation of `keys` (`None`: all), one push per key with
    /// `each`, else one array, to the client it redirects to, if any.
    fn send(&self, t: &Table, id: u64, keys: Option<Vec<Vec<u8>>>, each: bool) {
        let Some(client) = t.clients.get(&id) else {
            return;
        };
        let redirect = client.mode.redirect;
        if redirect == 0 {
            // A RESP2 client is sent nothing (as Redis): nothing to queue.
            if !client.resp3 {
                return;
            }
            self.hub.send(
                id,
                Message::Invalidate {
                    keys,
                    each,
                    redirected: false,
                },
            );
            return;
        }
        let sent = self.hub.send(
            redirect,
            Message::Invalidate {
                keys,
                each,
                redirected: true,
            },
        );
        if !sent && !self.registry.contains(redirect) {
            // The client it redirects to left: it is told, as Redis tells it (RESP3).
            client.broken.store(true, Ordering::Relaxed);
            self.hub.send(id, Message::RedirectBroken(redirect));
        }
    }

    /// The table's figures now.
    pub fn figures(&self) -> Figures {
        if !self.store.tracking.load(Ordering::Relaxed) {
            return Figures::default();
        }
        let t = self.lock();
        Figures {
            clients: t.clients.len(),
            keys: t.keys.len(),
            items: t.items,
            prefixes: t.prefixes.len(),
        }
    }
}

/// A committed transaction's changes reach the clients that may hold its keys.
impl crate::store::events::Invalidator for Tracker {
    fn invalidate(&self, writer: u64, events: &[Event], all: bool) {
        let mut t = self.lock();
        let t = &mut *t;
        if all {
            let ids: Vec<u64> = t.clients.keys().copied().collect();
            for id in ids {
                self.send(t, id, None, false);
            }
            t.keys.clear();
            t.keys.shrink_to(1024);
            t.items = 0;
            t.bytes = 0;
            return;
        }
        let noloop =
            |t: &Table, id: u64| id == writer && t.clients.get(&id).is_some_and(|c| c.mode.noloop);
        // Default mode: each client's keys, in the order they changed.
        let mut each: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
        // `BCAST`: each prefix's keys, in key order.
        let mut bcast: BTreeMap<&[u8], BTreeSet<&[u8]>> = BTreeMap::new();
        for e in events {
            let key = &e.key[..];
            if let Some(ids) = t.keys.remove(key) {
                t.items -= ids.len() as u64;
                t.bytes -= entry_bytes(key, ids.len());
                for id in ids {
                    let listens = t.clients.get(&id).is_some_and(|c| !c.mode.bcast);
                    if listens && !noloop(t, id) {
                        each.entry(id).or_default().push(key.to_vec());
                    }
                }
            }
            for &l in t.prefix_lens.keys().take_while(|&&l| l <= key.len()) {
                if let Some((p, _)) = t.prefixes.get_key_value(&key[..l]) {
                    bcast.entry(p).or_default().insert(key);
                }
            }
        }
        for (id, keys) in each {
            self.send(t, id, Some(keys), true);
        }
        for (prefix, keys) in bcast {
            let Some(ids) = t.prefixes.get(prefix) else {
                continue;
            };
            for &id in ids {
                if !noloop(t, id) {
                    let keys = keys.iter().map(|k| k.to_vec()).collect();
                    self.send(t, id, Some(keys), false);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::{Mode, Tracker};
    use crate::kill::{ClientHandle, Registry};
    use crate::pubsub::{Hub, Message, Subscription};
    use crate::store::events::{Event, Invalidator};

    struct Kit {
        tracker: Tracker,
        hub: Arc<Hub>,
        registry: Arc<Registry>,
    }

    fn kit() -> Kit {
        let hub = Arc::new(Hub::new(crate::config::ClassLimit {
            hard: 0,
            soft: 0,
            soft_seconds: 0,
        }));
        let store = crate::store::StoreShared::new(
            "t",
            16,
            false,
            crate::store::conn_key(&crate::store::BackendLogin {
                user: "u".into(),
                password: "p".into(),
            }),
        );
        let registry = Arc::new(Registry::default());
        Kit {
            tracker: Tracker::new(hub.clone(), store, registry.clone()),
            hub,
            registry,
        }
    }

    impl Kit {
        /// A connected client with a queue.
        fn client(&self, id: u64) -> Subscription {
            let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
            let handle = Arc::new(ClientHandle::new(id, addr, addr));
            self.registry.add(handle.clone());
            self.hub.attach(handle)
        }
    }

    fn changed(keys: &[&str]) -> Vec<Event> {
        keys.iter()
            .map(|k| Event {
                db: 0,
                class: crate::store::events::class::STRING,
                name: "set",
                key: k.as_bytes().to_vec(),
            })
            .collect()
    }

    /// What `subs` was sent: each message's keys (`None`: all), and whether one push per
    /// key.
    fn sent(subs: &mut Subscription) -> Vec<(Option<Vec<String>>, bool)> {
        let mut out = Vec::new();
        while let Some(m) = subs.try_next() {
            match &*m {
                Message::Invalidate { keys, each, .. } => out.push((
                    keys.as_ref().map(|ks| {
                        ks.iter()
                            .map(|k| String::from_utf8_lossy(k).into_owned())
                            .collect()
                    }),
                    *each,
                )),
                other => panic!("unexpected {other:?}"),
            }
        }
        out
    }

    fn keys(ks: &[&str]) -> Vec<String> {
        ks.iter().map(|k| (*k).to_string()).collect()
    }

    #[test]
    fn a_read_key_is_invalidated_once_and_only_for_its_readers() {
        let k = kit();
        let (mut a, mut b) = (k.client(1), k.client(2));
        k.tracker.enable(1, Mode::default(), &[], true);
        k.tracker.enable(2, Mode::default(), &[], true);
        k.tracker.remember(1, [&b"x"[..], b"y"].into_iter());
        k.tracker.remember(2, [&b"y"[..]].into_iter());
        assert_eq!(k.tracker.figures().keys, 2);
        assert_eq!(k.tracker.figures().items, 3);
        k.tracker.invalidate(0, &changed(&["y", "z", "x"]), false);
        assert_eq!(sent(&mut a), vec![(Some(keys(&["y", "x"])), true)]);
        assert_eq!(sent(&mut b), vec![(Some(keys(&["y"])), true)]);
        // Told once: until it reads the key again.
        k.tracker.invalidate(0, &changed(&["x", "y"]), false);
        assert!(sent(&mut a).is_empty());
        assert_eq!(k.tracker.figures().keys, 0);
    }

    #[test]
    fn noloop_skips_the_clients_own_writes_only() {
        let k = kit();
        let mut a = k.client(1);
        let noloop = Mode {
            noloop: true,
            ..Mode::default()
        };
        k.tracker.enable(1, noloop, &[], true);
        k.tracker.remember(1, [&b"x"[..]].into_iter());
        k.tracker.invalidate(1, &changed(&["x"]), false);
        assert!(sent(&mut a).is_empty());
        k.tracker.remember(1, [&b"x"[..]].into_iter());
        k.tracker.invalidate(7, &changed(&["x"]), false);
        assert_eq!(sent(&mut a), vec![(Some(keys(&["x"])), true)]);
    }

    #[test]
    fn bcast_sends_each_prefix_keys_in_order_as_one_array() {
        let k = kit();
        let mut a = k.client(1);
        let bcast = Mode {
            bcast: true,
            ..Mode::default()
        };
        k.tracker.enable(1, bcast, &[b"p:", b"q"], true);
        k.tracker
            .invalidate(0, &changed(&["p:b", "x", "p:a", "q1", "p:b"]), false);
        assert_eq!(
            sent(&mut a),
            vec![
                (Some(keys(&["p:a", "p:b"])), false),
                (Some(keys(&["q1"])), false)
            ]
        );
        assert_eq!(k.tracker.figures().prefixes, 2);
        k.tracker.disable(1);
        assert_eq!(k.tracker.figures().prefixes, 0);
        k.tracker.invalidate(0, &changed(&["p:a"]), false);
        assert!(sent(&mut a).is_empty());
    }

    #[test]
    fn a_flush_sends_every_client_a_null_and_empties_the_table() {
        let k = kit();
        let (mut a, mut b) = (k.client(1), k.client(2));
        k.tracker.enable(1, Mode::default(), &[], true);
        let bcast = Mode {
            bcast: true,
            ..Mode::default()
        };
        k.tracker.enable(2, bcast, &[], true);
        k.tracker.remember(1, [&b"x"[..]].into_iter());
        k.tracker.invalidate(0, &[], true);
        assert_eq!(sent(&mut a), vec![(None, false)]);
        assert_eq!(sent(&mut b), vec![(None, false)]);
        assert_eq!(k.tracker.figures().keys, 0);
    }

    #[test]
    fn past_its_bounds_the_table_lets_keys_go_and_tells_their_clients() {
        let k = kit();
        let mut a = k.client(1);
        k.tracker.enable(1, Mode::default(), &[], true);
        k.tracker.set_max_keys(10);
        let names: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        k.tracker.remember(1, names.iter().map(String::as_bytes));
        let f = k.tracker.figures();
        assert!(f.keys <= 10, "{f:?}");
        let told: usize = sent(&mut a)
            .into_iter()
            .map(|(ks, _)| ks.unwrap().len())
            .sum();
        assert_eq!(told + f.keys, 40);
        assert_eq!(f.items, f.keys as u64);
    }

    #[test]
    fn a_redirect_to_a_client_that_left_is_reported_to_the_tracking_client() {
        let k = kit();
        let mut a = k.client(1);
        let mut t = k.client(5);
        let to = |id| Mode {
            redirect: id,
            ..Mode::default()
        };
        k.tracker.enable(1, to(5), &[], true);
        k.tracker.remember(1, [&b"x"[..]].into_iter());
        k.tracker.invalidate(0, &changed(&["x"]), false);
        assert_eq!(sent(&mut t), vec![(Some(keys(&["x"])), true)]);
        // Gone: no queue, not connected.
        let broken = k.tracker.enable(1, to(9), &[], true);
        k.tracker.remember(1, [&b"x"[..]].into_iter());
        k.tracker.invalidate(0, &changed(&["x"]), false);
        assert!(broken.load(Ordering::Relaxed));
        let m = a.try_next().expect("told");
        assert!(matches!(&*m, Message::RedirectBroken(9)), "{m:?}");
        let _ = t;
    }
}
