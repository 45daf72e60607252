//! Pub/Sub: `SUBSCRIBE`, `PSUBSCRIBE`, `UNSUBSCRIBE`, `PUNSUBSCRIBE`, `PUBLISH`, `PUBSUB`,
//! across the workers of one manifold and, in a fleet, across its instances (over the
//! fleet's links, [`Hub::set_forward`]: messages never touch the database).
//!
//! The [`Hub`] (shared by every worker) maps channels and patterns to subscribers' queues.
//! A subscriber is a connection's bounded queue: `PUBLISH` takes the hub's lock, puts the
//! message in each matching queue and counts them; the connection writes what its queue
//! holds whenever it is not busy with a request ([`crate::conn`]). A subscriber whose queue
//! is full (it reads too slowly), or whose queued messages pass the `pubsub` class of
//! `client-output-buffer-limit` (bytes: the hard limit, or the soft limit for its seconds in
//! a row), is disconnected, as Redis disconnects it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use manifold_redis_proto::{Protocol, Reply};
use tokio::sync::mpsc;

use crate::session::Session;

/// Messages a subscriber's queue holds before it is disconnected.
const QUEUE: usize = 4096;

/// What a client's queue holds: a published message, or what client-side caching sends
/// ([`crate::tracking`]).
#[derive(Debug)]
pub enum Message {
    Published {
        /// The pattern that matched (`pmessage`), or none (`message`).
        pattern: Option<Arc<[u8]>>,
        channel: Arc<[u8]>,
        payload: Arc<[u8]>,
    },
    /// Keys the client may hold changed (`None`: all of them, after a flush): one push per
    /// key with `each` (default mode), else one array (`BCAST`). `redirected`: sent to a
    /// client other than the tracking one, which a RESP2 subscriber gets on
    /// `__redis__:invalidate`.
    Invalidate {
        keys: Option<Vec<Vec<u8>>>,
        each: bool,
        redirected: bool,
    },
    /// The client this one redirected its invalidations to left (`tracking-redir-broken`).
    RedirectBroken(u64),
}

/// The channel a RESP2 client redirected to gets invalidations on.
const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

impl Message {
    /// The bytes it stands for in a subscriber's queue (about its encoded size).
    pub fn size(&self) -> u64 {
        match self {
            Message::Published {
                pattern,
                channel,
                payload,
            } => {
                let pattern = pattern.as_ref().map_or(0, |p| p.len() + 16);
                (channel.len() + payload.len() + pattern + 48) as u64
            }
            Message::Invalidate { keys, .. } => {
                let keys: usize = keys.iter().flatten().map(|k| k.len() + 48).sum();
                (keys + 48) as u64
            }
            Message::RedirectBroken(_) => 64,
        }
    }

    /// Appends the message as Redis sends it (RESP2 array, RESP3 push) to a client in
    /// `proto`, `subscribed` or not (a RESP2 client gets invalidations only as a redirect
    /// target in the subscribed state, and never `tracking-redir-broken`).
    pub fn encode(&self, out: &mut Vec<u8>, proto: Protocol, subscribed: bool) {
        let resp3 = proto == Protocol::Resp3;
        let mut r = Reply::new(out, proto);
        match self {
            Message::Published {
                pattern,
                channel,
                payload,
            } => {
                let n = if pattern.is_some() { 4 } else { 3 };
                if resp3 {
                    r.push_len(n);
                } else {
                    r.array_len(n);
                }
                match pattern {
                    Some(p) => {
                        r.bulk(b"pmessage").bulk(p);
                    }
                    None => {
                        r.bulk(b"message");
                    }
                }
                r.bulk(channel).bulk(payload);
            }
            Message::Invalidate {
                keys,
                each,
                redirected,
            } => {
                let delivered = resp3 || (*redirected && subscribed);
                if !delivered {
                    return;
                }
                let head = |r: &mut Reply<'_>| {
                    if resp3 {
                        r.push_len(2).bulk(b"invalidate");
                    } else {
                        r.array_len(3).bulk(b"message").bulk(INVALIDATE_CHANNEL);
                    }
                };
                match keys {
                    None => {
                        head(&mut r);
                        r.null();
                    }
                    Some(keys) if *each => {
                        for k in keys {
                            head(&mut r);
                            r.array_len(1).bulk(k);
                        }
                    }
                    Some(keys) => {
                        head(&mut r);
                        r.array_len(keys.len());
                        for k in keys {
                            r.bulk(k);
                        }
                    }
                }
            }
            Message::RedirectBroken(id) => {
                if resp3 {
                    r.push_len(2)
                        .bulk(b"tracking-redir-broken")
                        .integer(*id as i64);
                }
            }
        }
    }
}

/// A subscriber's queue, and whether it overflowed (the subscriber is then let go).
#[derive(Debug, Clone)]
struct Queue {
    tx: mpsc::Sender<Arc<Message>>,
    overflow: Arc<AtomicBool>,
    /// Bytes queued and not yet taken ([`Message::size`]), and since when (ms on the
    /// door's clock, 0: not) they have been above the soft limit.
    pending: Arc<QueuedBytes>,
    /// The subscriber, closed at once when its queue overflows (it may be blocked writing).
    client: Arc<crate::kill::ClientHandle>,
}

#[derive(Debug, Default)]
struct QueuedBytes {
    bytes: AtomicU64,
    soft_since_ms: AtomicU64,
    /// The soft limit, below which the time above it starts again.
    soft: u64,
}

/// Milliseconds on a clock that starts above 0.
fn clock_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
        + 1
}

/// The channel and pattern maps, alike for adding and removing subscribers.
trait Names {
    fn get_mut(&mut self, name: &[u8]) -> Option<&mut HashMap<u64, Queue>>;
    fn insert(&mut self, name: Arc<[u8]>, clients: HashMap<u64, Queue>);
    fn remove(&mut self, name: &[u8]);
}

impl Names for HashMap<Arc<[u8]>, HashMap<u64, Queue>> {
    fn get_mut(&mut self, name: &[u8]) -> Option<&mut HashMap<u64, Queue>> {
        HashMap::get_mut(self, name)
    }
    fn insert(&mut self, name: Arc<[u8]>, clients: HashMap<u64, Queue>) {
        HashMap::insert(self, name, clients);
    }
    fn remove(&mut self, name: &[u8]) {
        HashMap::remove(self, name);
    }
}

impl Names for BTreeMap<Arc<[u8]>, HashMap<u64, Queue>> {
    fn get_mut(&mut self, name: &[u8]) -> Option<&mut HashMap<u64, Queue>> {
        BTreeMap::get_mut(self, name)
    }
    fn insert(&mut self, name: Arc<[u8]>, clients: HashMap<u64, Queue>) {
        BTreeMap::insert(self, name, clients);
    }
    fn remove(&mut self, name: &[u8]) {
        BTreeMap::remove(self, name);
    }
}

#[derive(Default)]
struct Subscribers {
    /// Client id → its queue: every client with one (subscribed, or tracking keys), for
    /// what is sent to one client ([`Hub::send`]).
    queues: HashMap<u64, Queue>,
    /// Channel → client id → queue.
    channels: HashMap<Arc<[u8]>, HashMap<u64, Queue>>,
    /// Pattern → client id → queue; in pattern order, so that a message matching several
    /// patterns is delivered in an order that does not change from run to run.
    patterns: BTreeMap<Arc<[u8]>, HashMap<u64, Queue>>,
}

/// Every worker's subscriptions.
#[derive(Default)]
pub struct Hub {
    subs: Mutex<Subscribers>,
    /// `client-output-buffer-limit pubsub`.
    limit: crate::memory::ClassLimit,
    /// Sends a message published here to the fleet's other instances.
    forward: std::sync::OnceLock<Forward>,
}

/// Where a message published here goes besides this instance's subscribers.
pub type Forward = Box<dyn Fn(&[u8], &[u8]) + Send + Sync>;

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

/// Keyspace notifications go out through the hub as any message.
impl crate::store::events::Publisher for Hub {
    fn publish(&self, channel: &[u8], payload: &[u8]) -> i64 {
        Hub::publish(self, channel, payload)
    }
}

impl Hub {
    pub fn new(limit: crate::memory::ClassLimit) -> Self {
        Self {
            subs: Mutex::default(),
            limit,
            forward: std::sync::OnceLock::new(),
        }
    }

    /// Sets where every message published here also goes: the fleet's other instances.
    pub fn set_forward(&self, forward: Forward) {
        let _ = self.forward.set(forward);
    }

    /// Whether `queue`, given `size` more bytes, passed the limits.
    fn over_limit(&self, queue: &Queue, size: u64) -> bool {
        let l = &self.limit;
        let held = queue.pending.bytes.fetch_add(size, Ordering::Relaxed) + size;
        if l.hard > 0 && held > l.hard {
            return true;
        }
        if l.soft > 0 && held > l.soft {
            let now = clock_ms();
            let since = queue.pending.soft_since_ms.load(Ordering::Relaxed);
            if since == 0 {
                queue.pending.soft_since_ms.store(now, Ordering::Relaxed);
            } else if now - since >= l.soft_seconds * 1000 {
                return true;
            }
        }
        false
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Subscribers> {
        // A panic while holding the lock leaves maps that are still consistent.
        self.subs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Puts `msg` in `queue`. A full queue, or too many bytes in it: the client is too
    /// slow, and is let go.
    fn deliver(&self, queue: &Queue, msg: Arc<Message>) {
        let size = msg.size();
        if (self.over_limit(queue, size) || queue.tx.try_send(msg).is_err())
            && !queue.overflow.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(target: "manifold::connections", client = %queue.client.addr, id = queue.client.id, "Redis subscriber closed for overcoming of output buffer limits (redis.client_output_buffer_limit pubsub)");
            queue.client.kill();
        }
    }

    /// A queue for `client`, known by its id ([`Hub::send`]).
    pub fn attach(&self, client: Arc<crate::kill::ClientHandle>) -> Subscription {
        let id = client.id;
        let subs = Subscription::new(self.limit.soft, client);
        self.lock().queues.insert(id, subs.queue.clone());
        subs
    }

    /// Puts `msg` in client `id`'s queue; `false` when it has none.
    pub fn send(&self, id: u64, msg: Message) -> bool {
        let subs = self.lock();
        match subs.queues.get(&id) {
            Some(q) => {
                self.deliver(q, Arc::new(msg));
                true
            }
            None => false,
        }
    }

    /// Delivers `payload` on `channel` here and, in a fleet, to the other instances'
    /// subscribers; the number of this instance's subscribers that got it (as a Redis Cluster
    /// node counts its own).
    pub fn publish(&self, channel: &[u8], payload: &[u8]) -> i64 {
        let n = self.publish_here(channel, payload);
        if let Some(forward) = self.forward.get() {
            forward(channel, payload);
        }
        n
    }

    /// Delivers `payload` on `channel` to this instance's subscribers only (a message
    /// another instance published); how many got it.
    pub fn publish_here(&self, channel: &[u8], payload: &[u8]) -> i64 {
        let subs = self.lock();
        let mut channel_arc: Option<Arc<[u8]>> = None;
        let payload: Arc<[u8]> = payload.into();
        let mut n = 0;
        let mut deliver = |queue: &Queue, msg: Arc<Message>| {
            n += 1;
            self.deliver(queue, msg);
        };
        if let Some((ch, clients)) = subs.channels.get_key_value(channel) {
            channel_arc = Some(ch.clone());
            let msg = Arc::new(Message::Published {
                pattern: None,
                channel: ch.clone(),
                payload: payload.clone(),
            });
            for q in clients.values() {
                deliver(q, msg.clone());
            }
        }
        for (pattern, clients) in &subs.patterns {
            if !crate::cmd::glob::glob_match(pattern, channel) {
                continue;
            }
            let ch = channel_arc.get_or_insert_with(|| channel.into()).clone();
            let msg = Arc::new(Message::Published {
                pattern: Some(pattern.clone()),
                channel: ch,
                payload: payload.clone(),
            });
            for q in clients.values() {
                deliver(q, msg.clone());
            }
        }
        n
    }

    fn add(map: &mut impl Names, name: &[u8], id: u64, q: &Queue) {
        match map.get_mut(name) {
            Some(clients) => {
                clients.insert(id, q.clone());
            }
            None => map.insert(name.into(), HashMap::from([(id, q.clone())])),
        }
    }

    fn remove(map: &mut impl Names, name: &[u8], id: u64) {
        if let Some(clients) = map.get_mut(name) {
            clients.remove(&id);
            if clients.is_empty() {
                map.remove(name);
            }
        }
    }

    /// Channels with subscribers (matching `pattern` if given).
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let subs = self.lock();
        subs.channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| crate::cmd::glob::glob_match(p, c)))
            .map(|c| c.to_vec())
            .collect()
    }

    /// How many subscribers a message on `channel` would reach now (channel and pattern
    /// subscriptions, as [`Hub::publish`] counts them), delivering nothing.
    pub fn receivers(&self, channel: &[u8]) -> i64 {
        let subs = self.lock();
        let direct = subs.channels.get(channel).map_or(0, HashMap::len);
        let by_pattern: usize = subs
            .patterns
            .iter()
            .filter(|(p, _)| crate::cmd::glob::glob_match(p, channel))
            .map(|(_, clients)| clients.len())
            .sum();
        (direct + by_pattern) as i64
    }

    /// Subscribers of `channel` (patterns not counted, as in Redis).
    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.lock().channels.get(channel).map_or(0, HashMap::len)
    }

    /// Patterns subscribed to, by any client.
    pub fn numpat(&self) -> usize {
        self.lock().patterns.len()
    }
}

/// A connection's subscriptions.
#[derive(Debug)]
pub struct Subscription {
    queue: Queue,
    pub inbox: mpsc::Receiver<Arc<Message>>,
    channels: BTreeSet<Vec<u8>>,
    patterns: BTreeSet<Vec<u8>>,
}

impl Subscription {
    fn new(soft: u64, client: Arc<crate::kill::ClientHandle>) -> Self {
        let (tx, inbox) = mpsc::channel(QUEUE);
        Self {
            queue: Queue {
                tx,
                overflow: Arc::new(AtomicBool::new(false)),
                pending: Arc::new(QueuedBytes {
                    soft,
                    ..QueuedBytes::default()
                }),
                client,
            },
            inbox,
            channels: BTreeSet::new(),
            patterns: BTreeSet::new(),
        }
    }

    fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// `m` left the queue: its bytes no longer count against the limits.
    pub fn taken(&self, m: &Message) {
        let left = self
            .queue
            .pending
            .bytes
            .fetch_sub(m.size(), Ordering::Relaxed)
            .saturating_sub(m.size());
        if self.queue.pending.soft_since_ms.load(Ordering::Relaxed) != 0
            && left <= self.queue.pending.soft
        {
            self.queue.pending.soft_since_ms.store(0, Ordering::Relaxed);
        }
    }

    /// The next queued message, if any, without waiting.
    pub fn try_next(&mut self) -> Option<Arc<Message>> {
        let m = self.inbox.try_recv().ok()?;
        self.taken(&m);
        Some(m)
    }
}

/// Whether the client is in Redis's subscribed state (some subscription).
pub fn subscribed(session: &Session<'_>) -> bool {
    session.subs.as_ref().is_some_and(|s| s.count() > 0)
}

/// The reply to a command a RESP2 subscriber may not send.
pub fn refuse_while_subscribed(full_name: &str, proto: Protocol, out: &mut Vec<u8>) {
    let text = format!(
        "Can't execute '{full_name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    );
    Reply::new(out, proto).error(text.as_bytes());
}

fn confirm(out: &mut Vec<u8>, proto: Protocol, kind: &[u8], name: Option<&[u8]>, count: usize) {
    let mut r = Reply::new(out, proto);
    if proto == Protocol::Resp3 {
        r.push_len(3);
    } else {
        r.array_len(3);
    }
    r.bulk(kind);
    match name {
        Some(n) => r.bulk(n),
        None => r.null(),
    };
    r.integer(count as i64);
}

/// `SUBSCRIBE` (`pattern` false) or `PSUBSCRIBE` of `names`.
pub fn subscribe<'a>(
    session: &mut Session<'_>,
    names: impl Iterator<Item = &'a [u8]>,
    pattern: bool,
    out: &mut Vec<u8>,
) {
    let hub = session.fe.shared.pubsub.clone();
    let id = session.info.id;
    let proto = session.proto;
    let subs = queue(session);
    for name in names {
        let fresh = if pattern {
            subs.patterns.insert(name.to_vec())
        } else {
            subs.channels.insert(name.to_vec())
        };
        if fresh {
            let mut all = hub.lock();
            if pattern {
                Hub::add(&mut all.patterns, name, id, &subs.queue);
            } else {
                Hub::add(&mut all.channels, name, id, &subs.queue);
            }
        }
        let kind: &[u8] = if pattern { b"psubscribe" } else { b"subscribe" };
        confirm(out, proto, kind, Some(name), subs.count());
    }
    session.info.handle.set_pubsub(subscribed(session));
}

/// `UNSUBSCRIBE` / `PUNSUBSCRIBE` of `names`, or of every channel (pattern) when empty.
pub fn unsubscribe(session: &mut Session<'_>, names: Vec<&[u8]>, pattern: bool, out: &mut Vec<u8>) {
    let hub = session.fe.shared.pubsub.clone();
    let id = session.info.id;
    let proto = session.proto;
    let kind: &[u8] = if pattern {
        b"punsubscribe"
    } else {
        b"unsubscribe"
    };
    let Some(subs) = session.subs.as_mut() else {
        if names.is_empty() {
            confirm(out, proto, kind, None, 0);
        }
        for n in names {
            confirm(out, proto, kind, Some(n), 0);
        }
        return;
    };
    let targets: Vec<Vec<u8>> = if names.is_empty() {
        let set = if pattern {
            &subs.patterns
        } else {
            &subs.channels
        };
        set.iter().cloned().collect()
    } else {
        names.iter().map(|n| n.to_vec()).collect()
    };
    if targets.is_empty() {
        confirm(out, proto, kind, None, subs.count());
        return;
    }
    let mut counts = Vec::with_capacity(targets.len());
    for name in &targets {
        let was = if pattern {
            subs.patterns.remove(name)
        } else {
            subs.channels.remove(name)
        };
        if was {
            let mut all = hub.lock();
            if pattern {
                Hub::remove(&mut all.patterns, name, id);
            } else {
                Hub::remove(&mut all.channels, name, id);
            }
        }
        counts.push(subs.count());
    }
    // Messages published before these subscriptions ended come first, as Redis has them in
    // the client's output already: after the confirmations, a RESP2 client would take one
    // for the reply of its next command.
    while let Some(m) = subs.try_next() {
        m.encode(out, proto, true);
    }
    for (name, count) in targets.iter().zip(counts) {
        confirm(out, proto, kind, Some(name), count);
    }
    release(session);
    session.info.handle.set_pubsub(subscribed(session));
}

/// The session's queue, made (and known to the hub by the client's id) if it had none:
/// a client has one while it is subscribed, tracks keys or speaks RESP3.
pub fn queue<'q>(session: &'q mut Session<'_>) -> &'q mut Subscription {
    let hub = &session.fe.shared.pubsub;
    let handle = &session.info.handle;
    session
        .subs
        .get_or_insert_with(|| hub.attach(handle.clone()))
}

/// Lets the session's queue go once it is neither subscribed, nor tracking keys, nor in
/// RESP3 (which may be sent pushes any time).
pub fn release(session: &mut Session<'_>) {
    if session.tracking.is_some()
        || session.proto == Protocol::Resp3
        || session.subs.as_ref().is_none_or(|s| s.count() > 0)
    {
        return;
    }
    session.subs = None;
    session
        .fe
        .shared
        .pubsub
        .lock()
        .queues
        .remove(&session.info.id);
}

/// Ends every subscription of the session, and its tracking of keys (at `RESET` and when
/// the connection ends).
pub fn leave(session: &mut Session<'_>) {
    session.info.handle.set_pubsub(false);
    if session.tracking.take().is_some() {
        session.fe.shared.tracker.disable(session.info.id);
        crate::session::tracking::shown_off(session.info);
    }
    let Some(subs) = session.subs.take() else {
        return;
    };
    if subs.queue.overflow.load(Ordering::Relaxed) {
        session.fe.worker.metrics.output_limit_closed.add(1); // metrics
    }
    let mut all = session.fe.shared.pubsub.lock();
    all.queues.remove(&session.info.id);
    for c in &subs.channels {
        Hub::remove(&mut all.channels, c, session.info.id);
    }
    for p in &subs.patterns {
        Hub::remove(&mut all.patterns, p, session.info.id);
    }
}

/// The next message for a subscribed session; never ready without subscriptions. `None`:
/// the subscriber fell too far behind and is to be disconnected.
pub async fn next_message(subs: &mut Option<Subscription>) -> Option<Arc<Message>> {
    match subs {
        Some(s) => {
            let msg = s.inbox.recv().await;
            if s.queue.overflow.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(m) = &msg {
                s.taken(m);
            }
            msg
        }
        None => std::future::pending().await,
    }
}
