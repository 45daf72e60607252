//! The MySQL front door: client sessions.
//!
//! This crate owns everything between a MySQL client and a borrowed backend connection: the
//! server side of the handshake and authentication (against manifold's own user table, TLS,
//! `mysql_native_password`, `caching_sha2_password` with its fast path, full authentication
//! and RSA exchange), the command loop, and relaying answers from the backend to the client
//! as they stream, without decoding and re-encoding them. It must not parse SQL beyond what
//! the lexer offers, open sockets to backends itself (the backend crate's pools do), or let
//! one session's failure reach another.

pub mod config;
mod handshake;
mod metrics;
pub mod pins;
mod registry;
mod relay;
mod session;
pub mod size_serde;
mod statements;
mod tls;
pub mod users;

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use manifold_backend::{BackendBudget, BackendTarget, Pool, PoolConfig};
use manifold_engine::{ConnectionHandler, WorkerContext};
use manifold_mysql_proto::auth::RsaKeyPair;
use manifold_router::{Balancer, Topology};

pub use config::{FrontTlsConfig, MysqlFrontConfig, UserConfig};
pub use metrics::FrontendMetrics;
pub use pins::{PinCounters, PinReason, REASONS as PIN_REASONS};
pub use users::{User, Users};

/// One primary and its replicas, and which sessions use them.
pub struct Cluster {
    pub name: String,
    /// Its nodes, their health, which one is the primary.
    pub topology: Arc<Topology>,
    /// How to reach each node (same index).
    pub targets: Vec<BackendTarget>,
    /// Sessions whose current schema is one of these use this cluster...
    pub schemas: Vec<String>,
    /// ...else sessions of these users do.
    pub users: Vec<String>,
}

/// State shared by all workers: read-mostly, swapped whole, never locked per request.
pub struct Shared {
    pub config: MysqlFrontConfig,
    pub users: ArcSwap<Users>,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The clusters; the first is the default (`[backend]`).
    pub clusters: Vec<Cluster>,
    /// Cluster by schema, then by user, when there are several.
    cluster_of_schema: std::collections::HashMap<Vec<u8>, usize>,
    cluster_of_user: std::collections::HashMap<String, usize>,
    /// Some cluster's routing rules match on digests: queries get one in the lexer's pass.
    rules_need_digest: bool,
    pub pool: PoolConfig,
    /// `pool.max_backend_connections` of each node of each cluster, shared by every
    /// worker's pool to it.
    budgets: Vec<Vec<Arc<BackendBudget>>>,
    rsa: OnceLock<Arc<RsaKeyPair>>,
    rsa_pem: Option<String>,
    /// Users who completed a `caching_sha2_password` full authentication since start.
    sha2_cache: ArcSwap<std::collections::HashSet<String>>,
    connections: AtomicUsize,
    pub metrics: FrontendMetrics,
    /// Each worker's pin counters, registered when the worker starts.
    pin_counters: std::sync::Mutex<Vec<Arc<PinCounters>>>,
    /// Each worker's sessions, registered when the worker starts.
    session_shards: std::sync::Mutex<Vec<Arc<registry::SessionShard>>>,
    /// The primary's version as announced in its handshake, learned at start.
    backend_version: arc_swap::ArcSwapOption<Vec<u8>>,
}

impl Shared {
    pub fn new(
        config: MysqlFrontConfig,
        users: Users,
        clusters: Vec<Cluster>,
        pool: PoolConfig,
    ) -> Result<Arc<Shared>, String> {
        config.validate()?;
        if clusters.is_empty()
            || clusters
                .iter()
                .any(|c| c.targets.len() != c.topology.nodes.len())
        {
            return Err("each cluster needs one backend target per node".into());
        }
        let mut cluster_of_schema = std::collections::HashMap::new();
        let mut cluster_of_user = std::collections::HashMap::new();
        for (i, c) in clusters.iter().enumerate() {
            for s in &c.schemas {
                cluster_of_schema.insert(s.as_bytes().to_vec(), i);
            }
            for u in &c.users {
                cluster_of_user.insert(u.clone(), i);
            }
        }
        let tls = match (&config.tls.cert, &config.tls.key) {
            (Some(c), Some(k)) => Some(tls::server_config(c, k)?),
            _ => None,
        };
        let rsa_pem = match &config.tls.rsa_private_key {
            Some(p) => {
                let pem = std::fs::read_to_string(p).map_err(|e| {
                    format!(
                        "mysql.tls.rsa_private_key: cannot read {}: {e}",
                        p.display()
                    )
                })?;
                RsaKeyPair::from_pem(&pem)
                    .map_err(|e| format!("mysql.tls.rsa_private_key: {e}"))?;
                Some(pem)
            }
            None => None,
        };
        Ok(Arc::new(Shared {
            config,
            users: ArcSwap::from_pointee(users),
            tls,
            budgets: clusters
                .iter()
                .map(|c| {
                    c.targets
                        .iter()
                        .map(|_| BackendBudget::new(pool.max_backend_connections))
                        .collect()
                })
                .collect(),
            rules_need_digest: clusters.iter().any(|c| c.topology.rules.needs_digest()),
            clusters,
            cluster_of_schema,
            cluster_of_user,
            pool,
            rsa: OnceLock::new(),
            rsa_pem,
            sha2_cache: ArcSwap::from_pointee(std::collections::HashSet::new()),
            connections: AtomicUsize::new(0),
            pin_counters: std::sync::Mutex::default(),
            session_shards: std::sync::Mutex::default(),
            metrics: FrontendMetrics::default(),
            backend_version: arc_swap::ArcSwapOption::empty(),
        }))
    }

    /// Records the version string the primary announces, which the handshake repeats.
    pub fn set_backend_version(&self, version: Vec<u8>) {
        self.backend_version.store(Some(Arc::new(version)));
    }

    /// Client connections open now, over all workers.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    fn sha2_cached(&self, user: &str) -> bool {
        self.sha2_cache.load().contains(user)
    }

    fn sha2_remember(&self, user: &str) {
        self.sha2_cache.rcu(|set| {
            let mut s = (**set).clone();
            s.insert(user.to_owned());
            s
        });
    }

    /// The RSA key pair for password exchange; generated (on the blocking pool: it takes a
    /// while) the first time a client needs it.
    async fn rsa_key(&self, ctx: &WorkerContext) -> Result<Arc<RsaKeyPair>, String> {
        if let Some(k) = self.rsa.get() {
            return Ok(k.clone());
        }
        let pem = self.rsa_pem.clone();
        let key = ctx
            .blocking()
            .spawn(move || match pem {
                Some(pem) => RsaKeyPair::from_pem(&pem),
                None => RsaKeyPair::generate(2048),
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        Ok(self.rsa.get_or_init(|| Arc::new(key)).clone())
    }
}

impl Shared {
    /// The default cluster's topology (`[backend]`).
    pub fn topology(&self) -> &Arc<Topology> {
        &self.clusters[0].topology
    }

    /// The cluster a session with current schema `schema` and user `user` uses: the one
    /// listing the schema, else the one listing the user, else the default.
    fn cluster_for(&self, schema: Option<&[u8]>, user: &str) -> usize {
        if self.clusters.len() == 1 {
            return 0;
        }
        schema
            .and_then(|s| self.cluster_of_schema.get(s))
            .or_else(|| self.cluster_of_user.get(user))
            .copied()
            .unwrap_or(0)
    }

    /// The logged-in session with connection id `id`, on whichever worker.
    fn find_session(&self, id: u32) -> Option<Arc<registry::SessionHandle>> {
        let shards = self.session_shards.lock().expect("session shards").clone();
        shards.iter().find_map(|s| s.get(id))
    }

    /// Ends the client connection of the session with connection id `id` (as `KILL
    /// CONNECTION` does): at once if it waits for its client, else once its statement is
    /// answered. False when no session has that id.
    pub fn kill_session(&self, id: u32) -> bool {
        self.find_session(id).map(|s| s.disconnect()).is_some()
    }

    /// Statements written behind another session's on its connection, summed over workers.
    pub fn pipelined(&self) -> u64 {
        self.pin_counters
            .lock()
            .expect("pin counter list")
            .iter()
            .map(|c| c.pipelined())
            .sum()
    }

    /// Times sessions became pinned for `reason`, summed over workers.
    pub fn pins(&self, reason: PinReason) -> u64 {
        self.pin_counters
            .lock()
            .expect("pin counter list")
            .iter()
            .map(|c| c.get(reason))
            .sum()
    }
}

/// One worker's side of the front door: its backend pools (one per node), read balancer,
/// prepared statements and connection-id sequence.
pub struct WorkerFrontend {
    pub shared: Arc<Shared>,
    /// This worker's pool to each node of each cluster (`pools[cluster][node]`).
    pub pools: Vec<Vec<Rc<Pool>>>,
    /// This worker's read balancer for each cluster.
    balancers: Vec<Balancer>,
    statements: RefCell<statements::Registry>,
    sessions: Arc<registry::SessionShard>,
    pins: Arc<PinCounters>,
    worker_id: u32,
    workers: u32,
    next_id: Cell<u32>,
}

impl WorkerFrontend {
    pub fn new(shared: Arc<Shared>, ctx: &WorkerContext) -> Rc<Self> {
        let pools = shared
            .clusters
            .iter()
            .zip(&shared.budgets)
            .map(|(cluster, budgets)| {
                cluster
                    .targets
                    .iter()
                    .zip(budgets)
                    .map(|(target, budget)| {
                        Pool::new(target.clone(), shared.pool.clone(), budget.clone())
                    })
                    .collect()
            })
            .collect();
        let balancers = shared
            .clusters
            .iter()
            .map(|_| Balancer::default())
            .collect();
        let pins = Arc::new(PinCounters::default());
        shared
            .pin_counters
            .lock()
            .expect("pin counter list")
            .push(pins.clone());
        let sessions = Arc::new(registry::SessionShard::default());
        shared
            .session_shards
            .lock()
            .expect("session shards")
            .push(sessions.clone());
        Rc::new(WorkerFrontend {
            sessions,
            shared,
            pools,
            balancers,
            statements: RefCell::default(),
            pins,
            worker_id: ctx.id() as u32,
            workers: ctx.workers().max(1) as u32,
            next_id: Cell::new(0),
        })
    }

    /// Connection ids unique across workers without sharing a counter: worker `w` of `n` hands
    /// out `w + 1, w + 1 + n, ...`.
    fn next_connection_id(&self) -> u32 {
        let k = self.next_id.get();
        self.next_id.set(k.wrapping_add(1));
        k.wrapping_mul(self.workers)
            .wrapping_add(self.worker_id + 1)
    }
}

impl ConnectionHandler for WorkerFrontend {
    fn handle(
        self: Rc<Self>,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(session::run(self, stream, peer, ctx))
    }
}
