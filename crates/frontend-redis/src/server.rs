//! What the workers share, and each worker's handler of Redis connections.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use manifold_engine::{ConnectionHandler, WorkerContext};
use manifold_redis_proto::{Limits, Protocol};

use crate::config::RedisConfig;

pub use crate::store::BackendLogin;

/// Checks a user name and password against manifold's users.
pub trait Credentials: Send + Sync {
    /// `user`'s backend login if `user` exists and `password` is its password.
    fn check(&self, user: &[u8], password: &[u8]) -> Option<BackendLogin>;

    /// Whether `user` exists (`CLIENT KILL USER`).
    fn exists(&self, user: &[u8]) -> bool;

    /// Failed logins per client address and user, shared with the other doors.
    fn logins(&self) -> &manifold_engine::LoginThrottle;

    /// One more connection of `user`, counted with its MySQL sessions against its
    /// `max_connections`, and what it may see of others; `None` when the user is at its
    /// limit (or no longer exists).
    fn account(&self, user: &[u8]) -> Option<Account>;
}

/// A logged-in client's place among its user's connections, given back when dropped, and
/// what the user may do to other users' clients.
pub struct Account {
    /// Sees and ends every user's clients (`[[users]] process`); without it, only its own
    /// user's.
    pub process: bool,
    /// Holds the user's connection until dropped.
    pub slot: Box<dyn std::any::Any>,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

/// State of the Redis door shared by every worker. Touched once per connection (its count
/// and id), never per request.
pub struct RedisShared {
    pub config: RedisConfig,
    /// What every worker's store shares (the schema, whether it exists).
    pub store: Arc<crate::store::StoreShared>,
    /// Pub/Sub subscriptions of every worker.
    pub pubsub: Arc<crate::pubsub::Hub>,
    /// The keys clients tracking keys may hold (`CLIENT TRACKING`), every worker's.
    pub tracker: Arc<crate::tracking::Tracker>,
    /// Clients blocked on lists (`BLPOP`...), woken by pushes committed through any worker.
    pub waiters: Arc<crate::blocking::Waiters>,
    pub limits: Limits,
    /// `client_output_buffer_limit`, parsed.
    pub output: crate::memory::OutputLimits,
    /// Every client's memory summed, and the clients the budget closed.
    pub client_memory: crate::memory::ClientMemory,
    pub credentials: Arc<dyn Credentials>,
    /// Every worker's figures ([`crate::metrics`]).
    pub metrics: crate::metrics::Metrics,
    clients: AtomicUsize,
    next_id: AtomicU64,
    started: Instant,
    /// Every client, for `CLIENT KILL` from any worker.
    pub registry: Arc<crate::kill::Registry>,
    /// The script cache and script threads ([`crate::script`]).
    pub scripts: crate::script::Scripts,
    /// What clients set with `CONFIG SET`.
    pub settings: crate::session::settings::Settings,
}

impl std::fmt::Debug for RedisShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisShared")
            .field("config", &self.config)
            .field("clients", &self.clients.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RedisShared {
    /// `own_login`: what manifold's own statements on the door's tables (the expiry
    /// sweeper) run as.
    pub fn new(
        config: RedisConfig,
        credentials: Arc<dyn Credentials>,
        own_login: &BackendLogin,
        keep_statements: usize,
    ) -> Arc<Self> {
        let scripts = crate::script::Scripts::new(&config);
        crate::cmd::strings::set_max_value_len(config.proto_max_bulk_len);
        let store = crate::store::StoreShared::new(
            &config.schema,
            keep_statements,
            config.reads_from_replicas(),
            crate::store::conn_key(own_login),
        );
        let pubsub = Arc::new(crate::pubsub::Hub::new(config.output_limits().pubsub));
        let registry = Arc::new(crate::kill::Registry::default());
        let tracker = Arc::new(crate::tracking::Tracker::new(
            pubsub.clone(),
            store.clone(),
            registry.clone(),
        ));
        Arc::new(Self {
            store,
            pubsub,
            tracker,
            waiters: Arc::default(),
            limits: config.limits(),
            output: config.output_limits(),
            client_memory: crate::memory::ClientMemory::default(),
            config,
            credentials,
            metrics: crate::metrics::Metrics::default(),
            clients: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            started: Instant::now(),
            registry,
            scripts,
            settings: crate::session::settings::Settings::default(),
        })
    }

    /// Redis clients connected now, on every worker.
    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    /// Seconds since the door was set up (`INFO`'s `uptime_in_seconds`).
    pub fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Counts a client unless that would pass `max_clients`.
    fn admit(&self) -> bool {
        self.clients
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.config.max_clients).then_some(n + 1)
            })
            .is_ok()
    }

    fn release(&self) {
        self.clients.fetch_sub(1, Ordering::Relaxed);
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// What `CLIENT LIST` shows of one client. Lives on its worker; the connection updates it
/// without locks.
#[derive(Debug)]
pub struct ClientInfo {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub fd: i32,
    pub created: Instant,
    pub last_active: Cell<Instant>,
    pub name: RefCell<Vec<u8>>,
    pub user: RefCell<Option<Vec<u8>>>,
    /// The logged-in user's connection slot and rights (with `user`).
    pub account: RefCell<Option<Account>>,
    pub db: Cell<u8>,
    pub proto: Cell<Protocol>,
    /// The last command's full name (`client|list`).
    pub cmd: Cell<&'static str>,
    /// Tracking keys (`CLIENT TRACKING ON`): the client its invalidations go to (0:
    /// itself); -1: not tracking (`CLIENT LIST`'s `redir=` and flag `t`).
    pub redirect: Cell<i64>,
    /// Tracking in `BCAST` mode (flag `B`).
    pub bcast: Cell<bool>,
    /// Set when its redirect target left (flag `R`).
    pub broken_redirect: RefCell<Option<Arc<std::sync::atomic::AtomicBool>>>,
    /// What other workers see of the client (`CLIENT KILL`).
    pub handle: Arc<crate::kill::ClientHandle>,
}

/// One worker's handler of Redis connections, with the clients it serves.
pub struct RedisFrontend {
    pub shared: Arc<RedisShared>,
    /// This worker's way to the tables and its other state (shared with the expiry sweeper
    /// on worker 0 and the tasks of its groups).
    pub worker: Rc<crate::worker::Worker>,
    pub ctx: Rc<WorkerContext>,
    pub clients: RefCell<BTreeMap<u64, Rc<ClientInfo>>>,
}

impl std::fmt::Debug for RedisFrontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisFrontend")
            .field("worker", &self.ctx.id())
            .field("clients", &self.clients.borrow().len())
            .finish_non_exhaustive()
    }
}

impl RedisFrontend {
    /// This worker's handler; on worker 0 it also starts the expiry sweeper
    /// ([`crate::store::sweeper`]), so it is called within the worker's `LocalSet`.
    pub fn new(
        shared: Arc<RedisShared>,
        ctx: &Rc<WorkerContext>,
        backends: Rc<dyn crate::store::Backends>,
    ) -> Self {
        let store = crate::store::Store::new(shared.store.clone(), backends);
        let worker = Rc::new(crate::worker::Worker::new(
            store,
            shared.waiters.clone(),
            shared.pubsub.clone(),
            shared.tracker.clone(),
        ));
        crate::store::sweeper::spawn(&worker, ctx);
        if ctx.id() == 0 {
            // One task sums every worker's clients (`max_memory_clients`).
            let budget = shared.config.max_memory_clients;
            let all = shared.clone();
            tokio::task::spawn_local(crate::memory::run_budget(
                move || crate::memory::enforce_budget(&all.registry, &all.client_memory, budget),
                ctx.clone(),
            ));
            // One task learns the function libraries other manifolds changed.
            let (all, own, drain) = (shared.clone(), worker.clone(), ctx.clone());
            tokio::task::spawn_local(async move {
                loop {
                    tokio::select! {
                        biased;
                        () = drain.drain().notified() => return,
                        () = tokio::time::sleep(crate::script::functions::REFRESH) => {}
                    }
                    let libs = &all.scripts.functions;
                    if let Err(e) = crate::script::functions::refresh_as_own(libs, &*own).await {
                        let error = String::from_utf8_lossy(&e.reply_text()).into_owned();
                        tracing::debug!(target: "manifold::redis", %error, "reading the function libraries failed");
                    }
                }
            });
        }
        shared.metrics.register(worker.metrics.clone()); // metrics: this worker's figures
        Self {
            worker,
            shared,
            ctx: ctx.clone(),
            clients: RefCell::new(BTreeMap::new()),
        }
    }
}

/// Takes a client off the worker's list and the shared count when its connection ends.
struct Registered {
    fe: Rc<RedisFrontend>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let info = self.fe.clients.borrow_mut().remove(&self.id);
        // The user's connection is given back now, whoever else holds the client's info.
        if let Some(info) = info {
            info.account.borrow_mut().take();
        }
        self.fe.shared.registry.remove(self.id);
        self.fe.shared.release();
    }
}

impl RedisFrontend {
    /// Serves one client on `stream` (plain or TLS), counted against `max_clients`.
    async fn serve_client<S>(
        self: Rc<Self>,
        mut stream: S,
        peer: SocketAddr,
        laddr: SocketAddr,
        fd: i32,
    ) where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        if !self.shared.admit() {
            use tokio::io::AsyncWriteExt;
            self.worker.metrics.rejected_connections.add(1); // metrics
            let _ = stream.write_all(crate::errors::MAX_CLIENTS).await;
            return;
        }
        self.worker.metrics.connections.add(1); // metrics
        let now = Instant::now();
        let id = self.shared.next_id();
        let handle = Arc::new(crate::kill::ClientHandle::new(id, peer, laddr));
        self.shared.registry.add(handle.clone());
        let info = Rc::new(ClientInfo {
            id,
            handle,
            addr: peer,
            laddr,
            fd,
            created: now,
            last_active: Cell::new(now),
            name: RefCell::new(Vec::new()),
            user: RefCell::new(None),
            account: RefCell::new(None),
            db: Cell::new(0),
            proto: Cell::new(Protocol::Resp2),
            cmd: Cell::new("NULL"),
            redirect: Cell::new(-1),
            bcast: Cell::new(false),
            broken_redirect: RefCell::new(None),
        });
        self.clients.borrow_mut().insert(info.id, info.clone());
        let _registered = Registered {
            fe: self.clone(),
            id: info.id,
        };
        crate::conn::serve(&self, stream, &info).await;
    }
}

/// A new client's socket set up for replies written at once: its local address and fd (for
/// `CLIENT LIST`).
fn accepted(stream: &tokio::net::TcpStream, peer: SocketAddr) -> (SocketAddr, i32) {
    let _ = stream.set_nodelay(true);
    (
        stream.local_addr().unwrap_or(peer),
        std::os::fd::AsRawFd::as_raw_fd(stream),
    )
}

impl ConnectionHandler for RedisFrontend {
    fn handle(
        self: Rc<Self>,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        _ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let (laddr, fd) = accepted(&stream, peer);
            self.serve_client(stream, peer, laddr, fd).await;
        })
    }
}

/// How long a client has to finish the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The Redis door's TLS port (`redis.tls_listen`): the TLS handshake first (as Redis's
/// `tls-port`), then the same door as the plain port, sharing the worker's handler.
pub struct RedisTlsDoor {
    pub fe: Rc<RedisFrontend>,
    pub tls: Arc<rustls::ServerConfig>,
}

impl ConnectionHandler for RedisTlsDoor {
    fn handle(
        self: Rc<Self>,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        _ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let (laddr, fd) = accepted(&stream, peer);
            let accept = tokio_rustls::TlsAcceptor::from(self.tls.clone()).accept(stream);
            match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, accept).await {
                Ok(Ok(tls)) => self.fe.clone().serve_client(tls, peer, laddr, fd).await,
                Ok(Err(e)) => {
                    tracing::debug!(target: "manifold::connections", client = %peer, error = %e, "redis TLS handshake failed");
                }
                Err(_) => {
                    tracing::debug!(target: "manifold::connections", client = %peer, "redis TLS handshake timed out");
                }
            }
        })
    }
}
