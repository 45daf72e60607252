#![forbid(unsafe_code)]
//! Several manifolds in front of the same clusters, as one service.
//!
//! - [`config`]: `[fleet]` of the configuration file.
//! - [`registry`] keeps the table of live instances on the first cluster's primary (claim an id,
//!   heartbeat, age out, leave).
//! - [`ids`] makes connection ids that carry their instance, so a `KILL` through any instance
//!   finds the session.
//! - [`shared_config`] keeps one runtime configuration for the fleet, versioned in the
//!   database.
//! - [`peer`] and [`wire`] carry authenticated links between instances, found through the
//!   registry; [`hmac`] proves the fleet's secret.
//!
//! The registry's statements and the links' server run on one thread of their own; a front
//! door asks another instance from its worker through a [`peer::Link`]. Nothing here is on a
//! request's path: a session reads [`Fleet::instance`] once, at login.

pub mod config;
pub mod errors;
pub mod hmac;
pub mod ids;
pub mod peer;
pub mod registry;
pub mod shared_config;
pub mod wire;

use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use manifold_backend::ConnKey;
use tokio::sync::{watch, Notify};

pub use config::FleetConfig;
pub use errors::PeerError;
pub use registry::Target;
pub use shared_config::{Applier, ShareError, Version};
pub use wire::{Backend, Marked, ProcessRow, Request, Response};

/// Delivers a published message (channel, payload).
pub type Deliver = dyn Fn(&[u8], &[u8]) + Send + Sync;

/// What another instance may ask of this one's sessions (the MySQL door answers).
pub trait Local: Send + Sync {
    /// Marks session `id`'s statement killed, if `user` owns it (`None`: any owner).
    fn mark(&self, id: u32, user: Option<&str>) -> Marked;
    /// Whether session `id` still runs the statement marked as `seq` on `backend`.
    fn still_running(&self, id: u32, seq: u64, backend: Backend) -> bool;
    /// Ends session `id`'s client connection; false if there is none.
    fn disconnect(&self, id: u32) -> bool;
    /// The sessions of `user` (`None`: all).
    fn processes(&self, user: Option<&str>) -> Vec<ProcessRow>;
}

/// Where this instance can be reached, as the registry records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addrs {
    pub name: String,
    pub peer: String,
    pub mysql: String,
    pub admin: String,
    pub http: String,
    pub redis: String,
    pub version: String,
}

impl Addrs {
    /// In the registry's column order.
    fn values(&self) -> [&str; 7] {
        [
            &self.name,
            &self.peer,
            &self.mysql,
            &self.admin,
            &self.http,
            &self.redis,
            &self.version,
        ]
    }
}

/// A live instance, as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: u16,
    pub name: String,
    pub peer: String,
    pub mysql: String,
    pub admin: String,
    pub http: String,
    pub redis: String,
    pub version: String,
    /// When it started, the primary's time (`YYYY-MM-DD hh:mm:ss`).
    pub started: String,
    /// Since its last heartbeat, when the list was read.
    pub heartbeat_age: Duration,
    /// The shared configuration's version it runs.
    pub config_version: u64,
    /// Why it could not apply a newer version, if it could not.
    pub config_fault: String,
    /// This instance.
    pub me: bool,
}

/// This instance's place in the fleet.
pub struct Fleet {
    config: FleetConfig,
    /// Its registry id; 0 until registered (or when alone).
    instance: AtomicU16,
    members: Mutex<Arc<Vec<Member>>>,
    secret: Mutex<Option<Arc<[u8]>>>,
    addrs: Mutex<Addrs>,
    /// Why the registry could not be written, while it cannot.
    fault: Mutex<Option<String>>,
    /// Wakes the registry's loop (new addresses).
    wake: Arc<Notify>,
    /// The addresses changed since the round that wrote them began.
    addrs_changed: std::sync::atomic::AtomicBool,
    stop: watch::Sender<bool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Applies the fleet's configuration versions (set once the server's settings exist).
    applier: OnceLock<Arc<dyn Applier>>,
    /// The shared configuration's version this instance runs (0: none yet).
    config_version: AtomicU64,
    /// Why the newest version could not be applied, if it could not.
    config_fault: Mutex<Option<String>>,
    /// Other live instances, as last read (a publish with none to reach costs one load).
    peers: AtomicUsize,
    /// Messages published here for the other instances ([`Fleet::publish`]).
    outbox: OnceLock<tokio::sync::mpsc::Sender<(Vec<u8>, Vec<u8>)>>,
    /// Bytes waiting in the outbox.
    outbox_bytes: AtomicUsize,
    /// Messages not sent to the other instances: the outbox full, or too large.
    dropped: AtomicU64,
    /// Delivers a message another instance published to this one's subscribers.
    subscribers: OnceLock<Arc<Deliver>>,
    /// Changes to store, for the registry's thread ([`Fleet::share`]).
    shares: Mutex<Option<tokio::sync::mpsc::UnboundedSender<ShareRequest>>>,
    /// Bounds the questions to every instance at once ([`Fleet::ask_all`]): a client
    /// repeating `SHOW PROCESSLIST` cannot make the whole fleet work for it without bound.
    fan_outs: tokio::sync::Semaphore,
}

/// Messages waiting to go to the other instances, at most (by count and by bytes): past
/// them a published message reaches this instance's subscribers only, and is counted.
const OUTBOX: usize = 65_536;
const OUTBOX_BYTES: usize = 64 << 20;

/// How long a stopping instance tries to delete its registry row (else it ages out).
const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Questions to the whole fleet that may run at once, per instance.
pub const MAX_FAN_OUTS: usize = 4;

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("instance", &self.instance())
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// A fleet place not yet started: alone, instance 0.
    pub fn new(config: FleetConfig) -> Arc<Fleet> {
        let secret = config
            .secret
            .as_ref()
            .map(|s| Arc::from(s.as_bytes().to_vec().into_boxed_slice()));
        Arc::new(Fleet {
            config,
            instance: AtomicU16::new(0),
            members: Mutex::default(),
            secret: Mutex::new(secret),
            addrs: Mutex::default(),
            fault: Mutex::default(),
            wake: Arc::new(Notify::new()),
            addrs_changed: std::sync::atomic::AtomicBool::new(false),
            stop: watch::channel(false).0,
            thread: Mutex::default(),
            fan_outs: tokio::sync::Semaphore::new(MAX_FAN_OUTS),
            applier: OnceLock::new(),
            config_version: AtomicU64::new(0),
            config_fault: Mutex::default(),
            shares: Mutex::default(),
            peers: AtomicUsize::new(0),
            outbox: OnceLock::new(),
            outbox_bytes: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            subscribers: OnceLock::new(),
        })
    }

    pub fn config(&self) -> &FleetConfig {
        &self.config
    }

    /// This instance's id in the registry; 0 while unregistered.
    pub fn instance(&self) -> u16 {
        self.instance.load(Ordering::Relaxed)
    }

    /// The live fleet as last read (this instance included once registered).
    pub fn members(&self) -> Arc<Vec<Member>> {
        self.members.lock().expect("fleet members").clone()
    }

    /// Why the registry cannot be written now, if it cannot.
    pub fn fault(&self) -> Option<String> {
        self.fault.lock().expect("fleet fault").clone()
    }

    /// The shared configuration's version this instance runs (0: none yet).
    pub fn config_version(&self) -> u64 {
        self.config_version.load(Ordering::Relaxed)
    }

    /// Why the newest shared configuration could not be applied here, if it could not.
    pub fn config_fault(&self) -> Option<String> {
        self.config_fault
            .lock()
            .expect("fleet config fault")
            .clone()
    }

    /// Sets what delivers a message another instance published to this one's subscribers.
    pub fn set_subscribers(&self, deliver: Arc<Deliver>) {
        let _ = self.subscribers.set(deliver);
    }

    /// Sends a message published here (a Redis `PUBLISH`, a keyspace notification) to the
    /// other live instances' subscribers, in the order published; nothing to do alone. Never
    /// waits: a message past the outbox's bounds is dropped and counted, as a slow
    /// subscriber's would be.
    pub fn publish(&self, channel: &[u8], payload: &[u8]) {
        if self.peers.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(outbox) = self.outbox.get() else {
            return;
        };
        let size = channel.len() + payload.len();
        let held = self.outbox_bytes.fetch_add(size, Ordering::Relaxed) + size;
        if size + 1024 > peer::MAX_REQUEST
            || held > OUTBOX_BYTES
            || outbox
                .try_send((channel.to_vec(), payload.to_vec()))
                .is_err()
        {
            self.outbox_bytes.fetch_sub(size, Ordering::Relaxed);
            if self
                .dropped
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(10_000)
            {
                tracing::warn!(
                    "fleet: a published message did not go to the other instances (the outbox is full, or it is over 16 MiB); counted in Fleet_publish_dropped"
                );
            }
        }
    }

    /// Published messages that did not go to the other instances.
    pub fn publish_dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Sets what applies the shared configuration (before [`Fleet::start`], so that a
    /// restarted instance applies the newest version before clients connect).
    pub fn set_applier(&self, applier: Arc<dyn Applier>) {
        let _ = self.applier.set(applier);
    }

    /// Stores the shared state after a change made here (`what`: the admin command) on top
    /// of version `base` (what this instance ran when the change began) as the version after
    /// it. A newer version applied here meanwhile (which undid the change), or a conflict (another instance stored that
    /// version first) applies the newer version here and refuses the change; a registry that
    /// cannot be written leaves the change on this instance alone. Alone (no fleet, or not
    /// started): nothing to share. The registry's thread does the work.
    pub async fn share(&self, what: &str, base: u64) -> Result<(), ShareError> {
        if self.applier.get().is_none() || !self.config.enabled() {
            return Ok(());
        }
        let Some(requests) = self.shares.lock().expect("fleet shares").clone() else {
            return Ok(());
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        if requests.send((what.to_owned(), base, tx)).is_err() {
            return Err(ShareError::Unshared(
                "the fleet's thread has stopped".into(),
            ));
        }
        match tokio::time::timeout(registry::ROUND_TIMEOUT * 3, rx).await {
            Ok(Ok(outcome)) => outcome,
            _ => Err(ShareError::Unshared(
                "the fleet's thread did not answer in time".into(),
            )),
        }
    }

    fn sql(&self) -> registry::Sql {
        let (schema, table) = self.config.table_name();
        registry::Sql {
            schema: schema.to_owned(),
            table: table.to_owned(),
            timeout_us: self.config.member_timeout.as_micros(),
        }
    }

    /// Applies stored version `v`, recording the outcome.
    async fn apply_version(&self, applier: &dyn Applier, v: &Version) {
        match applier.apply(&v.state).await {
            Ok(()) => {
                tracing::info!(
                    version = v.version,
                    by = v.instance,
                    what = %v.what,
                    "fleet: configuration version applied"
                );
                *self.config_fault.lock().expect("fleet config fault") = None;
            }
            Err(e) => {
                tracing::warn!(
                    version = v.version,
                    by = v.instance,
                    what = %v.what,
                    "fleet: configuration version not applied in full: {e}"
                );
                *self.config_fault.lock().expect("fleet config fault") =
                    Some(format!("version {}: {e}", v.version));
            }
        }
        // Not again, even in part: the next change starts from this version.
        self.config_version.store(v.version, Ordering::Relaxed);
    }

    fn secret(&self) -> Option<Arc<[u8]>> {
        self.secret.lock().expect("fleet secret").clone()
    }

    /// Records where this instance's doors are (sent at once when the registry's loop is
    /// waiting, else with the next heartbeat).
    pub fn set_addrs(&self, f: impl FnOnce(&mut Addrs)) {
        f(&mut self.addrs.lock().expect("fleet addresses"));
        self.addrs_changed.store(true, Ordering::SeqCst);
        // Only a loop waiting now is woken (no permit is kept for later): a change made
        // during a round goes with the next heartbeat, and no round runs unasked.
        self.wake.notify_waiters();
    }

    /// Binds the link port and starts the registry's thread; returns once the first attempt
    /// to register has ended (registered or not: the thread keeps trying).
    pub fn start(
        self: &Arc<Self>,
        target: Target,
        login: ConnKey,
        local: Weak<dyn Local>,
    ) -> Result<(), String> {
        if !self.config.enabled() {
            return Ok(());
        }
        let listener = std::net::TcpListener::bind(&self.config.listen)
            .map_err(|e| format!("fleet.listen {}: {e}", self.config.listen))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("fleet.listen: {e}"))?;
        let bound = listener
            .local_addr()
            .map_err(|e| format!("fleet.listen: {e}"))?;
        let peer = self
            .config
            .advertise
            .clone()
            .unwrap_or_else(|| bound.to_string());
        self.set_addrs(|a| {
            a.peer = peer;
            a.version = env!("CARGO_PKG_VERSION").into();
        });
        let (shares_tx, shares) = tokio::sync::mpsc::unbounded_channel();
        let (outbox_tx, outbox) = tokio::sync::mpsc::channel(OUTBOX);
        let _ = self.outbox.set(outbox_tx);
        *self.shares.lock().expect("fleet shares") = Some(shares_tx);
        let (first_tx, first_rx) = std::sync::mpsc::channel();
        let fleet = self.clone();
        let thread = std::thread::Builder::new()
            .name("fleet".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = first_tx.send(());
                        tracing::error!("fleet: no runtime: {e}");
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = first_tx.send(());
                            tracing::error!("fleet.listen: {e}");
                            return;
                        }
                    };
                    let weak = Arc::downgrade(&fleet);
                    let secret_of = weak.clone();
                    let runs = weak.clone();
                    let wake = fleet.wake.clone();
                    let stop = fleet.stop.subscribe();
                    // The thread holds the fleet only during a round: dropping the last
                    // handle elsewhere stops it (and the instance leaves the registry).
                    drop(fleet);
                    let subscribers = weak.clone();
                    let serving = Arc::new(peer::Serving {
                        instance: Box::new(move || weak.upgrade().map_or(0, |f| f.instance())),
                        secret: Box::new(move || secret_of.upgrade().and_then(|f| f.secret())),
                        local,
                        publish: Box::new(move |channel, payload| {
                            if let Some(deliver) = subscribers
                                .upgrade()
                                .and_then(|f| f.subscribers.get().cloned())
                            {
                                deliver(channel, payload);
                            }
                        }),
                    });
                    let forwarder = tokio::spawn(forward(runs.clone(), outbox));
                    let server = tokio::spawn(peer::serve(listener, serving));
                    run(&runs, &wake, stop, shares, target, login, first_tx).await;
                    server.abort();
                    forwarder.abort();
                });
            })
            .map_err(|e| format!("cannot start the fleet's thread: {e}"))?;
        *self.thread.lock().expect("fleet thread") = Some(thread);
        // The first round is bounded by the connect and round timeouts.
        let _ = first_rx.recv_timeout(registry::CONNECT_TIMEOUT + registry::ROUND_TIMEOUT);
        Ok(())
    }

    /// Leaves the registry (deletes this instance's row) and stops the thread.
    pub fn stop(&self) {
        self.stop.send_replace(true);
        if let Some(t) = self.thread.lock().expect("fleet thread").take() {
            let _ = t.join();
        }
    }

    /// An authenticated link to live instance `id`.
    pub async fn link(&self, id: u16) -> Result<peer::Link, PeerError> {
        let Some(secret) = self.secret() else {
            return Err(PeerError::NotJoined(
                self.fault().unwrap_or_else(|| "registering".into()),
            ));
        };
        let members = self.members();
        let Some(m) = members.iter().find(|m| m.id == id && !m.me) else {
            return Err(PeerError::NoSuchInstance(id));
        };
        peer::Link::open(self.instance(), id, &m.peer, &secret).await
    }

    /// Asks every other live instance `request`, all at once; each one's answer or failure.
    pub async fn ask_all(&self, request: &Request) -> Vec<(Member, Result<Response, PeerError>)> {
        let others = self.others();
        if others.is_empty() {
            return Vec::new();
        }
        let Ok(_permit) = self.fan_outs.acquire().await else {
            return Vec::new();
        };
        let asks = others.iter().map(|m| async move {
            let mut link = self.link(m.id).await?;
            link.call(request).await
        });
        let answers = join_all(asks).await;
        others.into_iter().zip(answers).collect()
    }

    /// Every live instance but this one.
    pub fn others(&self) -> Vec<Member> {
        self.members().iter().filter(|m| !m.me).cloned().collect()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// A message on its way to one other instance, shared by every instance's queue.
type Published = Arc<(Request, usize)>;

/// One other instance's queue of published messages, drained by a task of its own (so that
/// an instance that is slow or gone holds up no other).
struct PeerQueue {
    tx: tokio::sync::mpsc::Sender<Published>,
    /// Bytes in the queue.
    bytes: Arc<AtomicUsize>,
    /// The address the task sends to: a new one (the instance restarted elsewhere) is a
    /// new queue.
    peer: String,
}

/// Messages (and bytes) one other instance's queue holds at most.
const PEER_QUEUE: usize = 16_384;
const PEER_BYTES: usize = 32 << 20;
/// After a failed send, messages for that instance are dropped (and counted) this long
/// rather than each waiting for a connection.
const PEER_BACKOFF: Duration = Duration::from_secs(1);

/// Hands the messages published here to each other live instance's queue, in the order
/// published.
async fn forward(weak: Weak<Fleet>, mut outbox: tokio::sync::mpsc::Receiver<(Vec<u8>, Vec<u8>)>) {
    let mut queues: std::collections::HashMap<u16, PeerQueue> = std::collections::HashMap::new();
    while let Some((channel, payload)) = outbox.recv().await {
        let Some(fleet) = weak.upgrade() else {
            break;
        };
        let size = channel.len() + payload.len();
        fleet.outbox_bytes.fetch_sub(size, Ordering::Relaxed);
        let message: Published = Arc::new((Request::Publish { channel, payload }, size));
        let members = fleet.members();
        // An instance gone, or restarted at another address: its queue (and task) ends.
        queues.retain(|id, q| {
            members
                .iter()
                .any(|m| m.id == *id && !m.me && m.peer == q.peer)
        });
        for m in members.iter().filter(|m| !m.me) {
            let q = queues
                .entry(m.id)
                .or_insert_with(|| peer_queue(weak.clone(), m));
            let held = q.bytes.fetch_add(size, Ordering::Relaxed) + size;
            if held > PEER_BYTES || q.tx.try_send(message.clone()).is_err() {
                q.bytes.fetch_sub(size, Ordering::Relaxed);
                fleet.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Starts the task that sends to instance `m` over a link kept open: checked before each
/// message (an instance that restarted, or closed it, gets a new one) and renewed before the
/// other side's idle timeout could close it under a message.
fn peer_queue(weak: Weak<Fleet>, m: &Member) -> PeerQueue {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Published>(PEER_QUEUE);
    let bytes = Arc::new(AtomicUsize::new(0));
    let held = bytes.clone();
    let (id, name) = (m.id, m.name.clone());
    tokio::spawn(async move {
        let mut link: Option<(peer::Link, std::time::Instant)> = None;
        let mut down_until: Option<std::time::Instant> = None;
        let mut logged: Option<std::time::Instant> = None;
        while let Some(message) = rx.recv().await {
            held.fetch_sub(message.1, Ordering::Relaxed);
            let Some(fleet) = weak.upgrade() else {
                break;
            };
            if down_until.is_some_and(|t| std::time::Instant::now() < t) {
                fleet.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let mut sent = false;
            for _ in 0..2 {
                if link.as_ref().is_some_and(|(l, last)| {
                    last.elapsed() > peer::IDLE_TIMEOUT / 2 || !l.is_open()
                }) {
                    link = None;
                }
                if link.is_none() {
                    match fleet.link(id).await {
                        Ok(l) => link = Some((l, std::time::Instant::now())),
                        Err(_) => break,
                    }
                }
                let (l, last) = link.as_mut().expect("just opened");
                if l.send(&message.0).await.is_ok() {
                    *last = std::time::Instant::now();
                    sent = true;
                    break;
                }
                link = None;
            }
            if sent {
                down_until = None;
            } else {
                fleet.dropped.fetch_add(1, Ordering::Relaxed);
                down_until = Some(std::time::Instant::now() + PEER_BACKOFF);
                if logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(30)) {
                    logged = Some(std::time::Instant::now());
                    tracing::warn!(instance = id, "fleet: published messages do not reach manifold {id} ({name}); counted in Fleet_publish_dropped");
                }
            }
        }
    });
    PeerQueue {
        tx,
        bytes,
        peer: m.peer.clone(),
    }
}

/// Runs every future to its end, concurrently; their outputs in order.
async fn join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in futures {
        set.push(Box::pin(f));
    }
    let mut out: Vec<Option<F::Output>> = set.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in set.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *slot = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter()
        .map(|v| v.expect("every future ended"))
        .collect()
}

/// The registry's loop: join, heartbeat, read the fleet, until stopped (or the fleet
/// dropped); then leave.
async fn run(
    weak: &Weak<Fleet>,
    wake: &Notify,
    mut stop: watch::Receiver<bool>,
    mut shares: tokio::sync::mpsc::UnboundedReceiver<ShareRequest>,
    target: Target,
    login: ConnKey,
    first: std::sync::mpsc::Sender<()>,
) {
    let Some(fleet) = weak.upgrade() else {
        return;
    };
    let sql = fleet.sql();
    let interval = fleet.config.heartbeat_interval;
    drop(fleet);
    let create = sql.create();
    let mut primary = registry::Primary::new(target, login);
    let incarnation: u64 = rand::random::<u64>() >> 1;
    let mut first = Some(first);
    let mut logged_fault = false;
    // Failed rounds in a row: the next ones wait longer (up to a minute), so that a registry
    // this login cannot write is not tried on a new connection every second.
    let mut failures: u32 = 0;
    let mut id = 0;
    loop {
        let Some(fleet) = weak.upgrade() else {
            break;
        };
        let fleet = &fleet;
        // A stop does not wait for a round a primary that is gone holds up.
        let round = tokio::select! {
            r = tokio::time::timeout(
                registry::ROUND_TIMEOUT,
                round(fleet, &mut primary, &create, &sql, incarnation),
            ) => r.unwrap_or_else(|_| Err("the primary did not answer within 5s".into())),
            _ = stop.wait_for(|s| *s) => break,
        };
        match round {
            Ok(()) => {
                if logged_fault {
                    tracing::info!(instance = fleet.instance(), "fleet: registry written again");
                    logged_fault = false;
                }
                *fleet.fault.lock().expect("fleet fault") = None;
                failures = 0;
            }
            Err(e) => {
                primary.drop_conn();
                failures = failures.saturating_add(1);
                if !logged_fault {
                    tracing::warn!(
                        table = %fleet.config.table,
                        "fleet: cannot write the registry (retried every heartbeat): {e}"
                    );
                    logged_fault = true;
                }
                *fleet.fault.lock().expect("fleet fault") = Some(e);
            }
        }
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
        id = fleet.instance();
        if failures == 0 && fleet.addrs_changed.load(Ordering::SeqCst) {
            // New addresses came during the round (or before the loop waited): at once.
            continue;
        }
        let pause = if failures == 0 {
            interval
        } else {
            (interval * 2u32.pow(failures.min(6))).min(Duration::from_secs(60))
        };
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            () = tokio::time::sleep(pause) => {}
            () = wake.notified() => {}
            Some((what, base, reply)) = shares.recv() => {
                let stored = tokio::time::timeout(
                    registry::ROUND_TIMEOUT,
                    share_here(fleet, &mut primary, &create, &sql, &what, base),
                )
                .await
                .unwrap_or_else(|_| Err("the primary did not answer within 5s".into()));
                let outcome = match stored {
                    Ok(None) => Ok(()),
                    Ok(Some(newer)) => {
                        if let Some(applier) = fleet.applier.get() {
                            fleet.apply_version(applier.as_ref(), &newer).await;
                        }
                        Err(ShareError::Conflict(newer))
                    }
                    Err(e) => {
                        primary.drop_conn();
                        tracing::warn!(what, "fleet: a configuration change holds on this instance only: {e}");
                        Err(ShareError::Unshared(e))
                    }
                };
                let _ = reply.send(outcome);
            }
        }
    }
    if id != 0 {
        let leave = async {
            let conn = primary.conn(&create).await?;
            registry::exec(conn, &sql.leave(id, incarnation)).await
        };
        // Bounded shortly: a stopping server waits for it.
        match tokio::time::timeout(LEAVE_TIMEOUT, leave).await {
            Ok(Ok(_)) => tracing::info!(instance = id, "fleet: left the registry"),
            Ok(Err(e)) => tracing::warn!(instance = id, "fleet: could not leave the registry: {e}"),
            Err(_) => tracing::warn!(instance = id, "fleet: could not leave the registry in time"),
        }
    }
}

/// A change to store, and where its outcome goes.
type ShareRequest = (
    String,
    u64,
    tokio::sync::oneshot::Sender<Result<(), ShareError>>,
);

/// Stores the state after change `what` as the next version; the newer version another
/// instance stored first, if one did.
async fn share_here(
    fleet: &Fleet,
    primary: &mut registry::Primary,
    create: &[String],
    sql: &registry::Sql,
    what: &str,
    base: u64,
) -> Result<Option<Version>, String> {
    let Some(applier) = fleet.applier.get() else {
        return Ok(None);
    };
    let conn = primary.conn(create).await?;
    if fleet.config_version() != base {
        // A newer version was applied here while the change was made: it undid the change.
        return match shared_config::latest(conn, sql).await? {
            Some(newer) => Ok(Some(newer)),
            None => Err("the version applied here is gone from the registry".into()),
        };
    }
    let v = Version {
        version: base + 1,
        instance: fleet.instance(),
        what: what.chars().take(1000).collect(),
        state: applier.snapshot(),
    };
    if shared_config::store(conn, sql, &v).await? {
        fleet.config_version.store(v.version, Ordering::Relaxed);
        tracing::info!(
            version = v.version,
            what,
            "fleet: configuration change shared"
        );
        return Ok(None);
    }
    match shared_config::latest(conn, sql).await? {
        Some(newer) => Ok(Some(newer)),
        None => Err("the version it would follow is gone from the registry".into()),
    }
}

/// One heartbeat: registers if needed, writes the row, reads the fleet.
async fn round(
    fleet: &Fleet,
    primary: &mut registry::Primary,
    create: &[String],
    sql: &registry::Sql,
    incarnation: u64,
) -> Result<(), String> {
    let conn = primary.conn(create).await?;
    if fleet.secret().is_none() {
        let offered = hex::encode(rand::random::<[u8; 32]>());
        registry::exec(conn, &sql.offer_secret(&offered)).await?;
        let rows = registry::rows(conn, &sql.read_secret()).await?;
        let Some(secret) = rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next().flatten())
        else {
            return Err(format!(
                "no secret in `{}`.`{}`",
                sql.schema,
                sql.secret_table()
            ));
        };
        *fleet.secret.lock().expect("fleet secret") =
            Some(Arc::from(secret.into_bytes().into_boxed_slice()));
    }
    fleet.addrs_changed.store(false, Ordering::SeqCst);
    let addrs = fleet.addrs.lock().expect("fleet addresses").clone();
    let fault: String = fleet
        .config_fault()
        .unwrap_or_default()
        .chars()
        .take(1000)
        .collect();
    let config = (fleet.config_version(), fault.as_str());
    let mut id = fleet.instance();
    if id != 0 && registry::exec(conn, &sql.beat(id, incarnation, &addrs, config)).await? == 0 {
        // Out of the fleet (a pause longer than member_timeout, or the row deleted): its id
        // may be another's now. Sessions keep the ids they have.
        tracing::warn!(
            instance = id,
            "fleet: this manifold's registry row was taken or removed; registering again"
        );
        id = 0;
    }
    if id == 0 {
        // A deadlock between two instances claiming at once: the loser tries next round.
        match registry::claim(conn, sql, incarnation, &addrs, config).await? {
            Some(claimed) => {
                tracing::info!(instance = claimed, "fleet: registered");
                id = claimed;
                fleet.instance.store(claimed, Ordering::Relaxed);
            }
            None => {
                return Err(format!(
                    "every instance id up to {} is held",
                    ids::MAX_INSTANCE
                ))
            }
        }
    }
    let members = registry::members(conn, sql, id).await?;
    fleet
        .peers
        .store(members.iter().filter(|m| !m.me).count(), Ordering::Relaxed);
    *fleet.members.lock().expect("fleet members") = Arc::new(members);
    if let Some(applier) = fleet.applier.get() {
        if let Some(newest) = shared_config::latest(conn, sql).await? {
            if newest.version > fleet.config_version() {
                fleet.apply_version(applier.as_ref(), &newest).await;
            }
        }
    }
    Ok(())
}
