#![forbid(unsafe_code)]
//! The MySQL front door: client sessions.
//!
//! This crate owns everything between a MySQL client and a borrowed backend connection: the
//! server side of the handshake and authentication (against manifold's own user table, TLS,
//! `mysql_native_password`, `caching_sha2_password` with its fast path, full authentication
//! and RSA exchange), the command loop, and relaying answers from the backend to the client
//! as they stream, without decoding and re-encoding them. It must not parse SQL beyond what
//! the lexer offers, open sockets to backends itself (the backend crate's pools do), or let
//! one session's failure reach another.

pub mod binlog_access;
pub mod config;
pub mod digests;
mod fleet;
mod handshake;
mod metrics;
pub mod pins;
mod processlist;
mod registry;
mod relay;
mod session;
pub use manifold_engine::size_serde;
mod statements;
pub mod telemetry;
pub mod tls;
pub mod users;

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use manifold_backend::{BackendBudget, BackendTarget, Pool, PoolConfig, PoolLimits};
use manifold_engine::{ConnectionHandler, WorkerContext};
use manifold_mysql_proto::auth::RsaKeyPair;
use manifold_router::{Balancer, Topology};

pub use config::{FrontTlsConfig, FrontTlsMode, MysqlFrontConfig, UserConfig};
pub use digests::DigestStats;
pub use metrics::{FrontendMetrics, ReplayDecline, REPLAY_DECLINES};
pub use pins::{describe_bits as describe_pins, PinCounters, PinReason, REASONS as PIN_REASONS};
pub use registry::SessionInfo;
pub use telemetry::{Histogram, Stage, Telemetry};
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

/// Settings of the front door an operator may change while manifold runs (`SET GLOBAL`):
/// read with relaxed loads, written by the admin port.
#[derive(Debug)]
pub struct RuntimeSettings {
    pub max_connections: AtomicUsize,
    /// Record stage histograms (and so take the clock at each stage of a request).
    pub stage_histograms: AtomicBool,
    /// Keep per-digest statistics (`SHOW QUERY DIGESTS`).
    pub query_digests: AtomicBool,
    /// Most statement shapes each worker keeps statistics for.
    pub query_digests_max: AtomicUsize,
    /// Statements slower than this (ns) are logged and counted; 0 = off.
    pub slow_query_threshold_ns: AtomicU64,
    /// Connection log lines (refused clients, failed logins) per second at most.
    pub connection_log_rate: AtomicU64,
}

impl RuntimeSettings {
    fn new(config: &MysqlFrontConfig) -> Self {
        RuntimeSettings {
            max_connections: AtomicUsize::new(config.max_connections),
            stage_histograms: AtomicBool::new(true),
            query_digests: AtomicBool::new(true),
            query_digests_max: AtomicUsize::new(10_000),
            slow_query_threshold_ns: AtomicU64::new(1_000_000_000),
            connection_log_rate: AtomicU64::new(10),
        }
    }
}

/// Lets through at most `rate` lines a second, and says how many were held back. Lock-free:
/// during a storm of failed logins every worker goes through it.
#[derive(Debug, Default)]
struct LogLimiter {
    /// The second (since start) the count is for (high half), and lines logged in it.
    window: AtomicU64,
    suppressed: AtomicU64,
}

impl LogLimiter {
    /// Whether to log a line now, and how many were suppressed since the last one logged.
    fn admit(&self, rate: u64, now_secs: u64) -> Option<u64> {
        let mut current = self.window.load(Ordering::Relaxed);
        loop {
            let (secs, count) = (current >> 32, current & 0xFFFF_FFFF);
            let same_second = secs == now_secs & 0xFFFF_FFFF;
            if rate == 0 || (same_second && count >= rate) {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            let next = if same_second {
                current + 1
            } else {
                (now_secs << 32) | 1
            };
            match self.window.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(self.suppressed.swap(0, Ordering::Relaxed)),
                Err(seen) => current = seen,
            }
        }
    }
}

/// Makes the RSA key for `caching_sha2_password` (PEM), on the blocking pool.
pub type RsaGenerator = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// A job the admin port runs on a worker's thread, where its pools and tables live.
type WorkerJob = Box<dyn FnOnce(&WorkerFrontend) + Send>;

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
    /// Makes the RSA key at first use when none is configured ([`Shared::set_rsa_generator`]).
    rsa_generator: OnceLock<RsaGenerator>,
    /// Users who completed a `caching_sha2_password` full authentication since start.
    sha2_cache: ArcSwap<std::collections::HashSet<String>>,
    connections: AtomicUsize,
    pub metrics: FrontendMetrics,
    /// Stage histograms and statement counts, per worker.
    pub telemetry: Telemetry,
    pub settings: RuntimeSettings,
    /// `pool.max_size` and `pool.min_idle` as they are now, for every pool.
    pub pool_limits: Arc<PoolLimits>,
    /// A channel to each worker's job runner ([`Shared::ask_workers`]).
    workers: std::sync::Mutex<Vec<tokio::sync::mpsc::UnboundedSender<WorkerJob>>>,
    connection_log: LogLimiter,
    started: std::time::Instant,
    /// Each worker's pin counters, registered when the worker starts.
    pin_counters: std::sync::Mutex<Vec<Arc<PinCounters>>>,
    /// Each worker's sessions, registered when the worker starts.
    session_shards: std::sync::Mutex<Vec<Arc<registry::SessionShard>>>,
    /// The primary's version as announced in its handshake, learned at start.
    backend_version: arc_swap::ArcSwapOption<Vec<u8>>,
    /// The global binlog, when it is on: manifold answers dumps and binlog statements
    /// itself. Set right after [`Shared::new`] (`Arc::get_mut`), before clients connect.
    pub binlog: Option<Arc<manifold_cdc::BinlogShared>>,
    /// Who may use the global binlog: `binlog.users` and the grants learned from the
    /// backends.
    pub binlog_access: binlog_access::BinlogAccess,
    /// Failed logins per client address and user, for every door
    /// ([`manifold_engine::login_throttle`]): the Redis door and the admin port use this
    /// same table.
    pub logins: Arc<manifold_engine::LoginThrottle>,
    /// This instance's place among the manifolds in front of the same clusters: the
    /// instance id its connection ids carry, and the way to the others' sessions. Alone
    /// (instance 0) until set right after [`Shared::new`].
    pub fleet: Arc<manifold_fleet::Fleet>,
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
            settings: RuntimeSettings::new(&config),
            pool_limits: PoolLimits::new(&pool),
            telemetry: Telemetry::default(),
            workers: std::sync::Mutex::default(),
            connection_log: LogLimiter::default(),
            started: std::time::Instant::now(),
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
            rsa_generator: OnceLock::new(),
            sha2_cache: ArcSwap::from_pointee(std::collections::HashSet::new()),
            connections: AtomicUsize::new(0),
            pin_counters: std::sync::Mutex::default(),
            session_shards: std::sync::Mutex::default(),
            metrics: FrontendMetrics::default(),
            backend_version: arc_swap::ArcSwapOption::empty(),
            binlog: None,
            binlog_access: binlog_access::BinlogAccess::default(),
            fleet: manifold_fleet::Fleet::new(manifold_fleet::FleetConfig {
                table: String::new(),
                ..manifold_fleet::FleetConfig::default()
            }),
            logins: Arc::default(),
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

    /// How the RSA key is made at first use when `rsa_private_key` is not configured: a
    /// function returning its PEM (the server's keeps it in its data directory, so it is the
    /// same after a restart). Unset: generated in memory. Set once, before clients connect.
    pub fn set_rsa_generator(&self, generator: RsaGenerator) {
        let _ = self.rsa_generator.set(generator);
    }

    /// The RSA key pair for password exchange; loaded or generated (on the blocking pool:
    /// generating takes a while) the first time a client needs it.
    async fn rsa_key(&self, ctx: &WorkerContext) -> Result<Arc<RsaKeyPair>, String> {
        if let Some(k) = self.rsa.get() {
            return Ok(k.clone());
        }
        let pem = self.rsa_pem.clone();
        let generator = self.rsa_generator.get().cloned();
        let key = ctx
            .blocking()
            .spawn(move || {
                let pem = match (pem, generator) {
                    (Some(pem), _) => pem,
                    (None, Some(generate)) => generate()?,
                    (None, None) => {
                        return RsaKeyPair::generate(2048).map_err(|e| e.to_string());
                    }
                };
                RsaKeyPair::from_pem(&pem).map_err(|e| e.to_string())
            })
            .await
            .map_err(|e| e.to_string())??;
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

    /// The cluster whose `schemas` list `schema`, if one does.
    fn cluster_listing(&self, schema: &[u8]) -> Option<usize> {
        self.cluster_of_schema.get(schema).copied()
    }

    /// The logged-in session with connection id `id`, on whichever worker.
    fn find_session(&self, id: u32) -> Option<Arc<registry::SessionHandle>> {
        let shards = self.session_shards.lock().expect("session shards").clone();
        shards.iter().find_map(|s| s.get(id))
    }

    /// Takes every node at `addr` out of service (`BACKEND OFFLINE`) or puts it back: no new
    /// statement goes there, and each worker's pool to it closes its idle connections now
    /// and its lent ones as they come back. False when no node has that address.
    pub async fn set_backend_offline(&self, addr: &str, offline: bool) -> bool {
        let mut found = Vec::new();
        for (c, cluster) in self.clusters.iter().enumerate() {
            for (n, node) in cluster.topology.nodes.iter().enumerate() {
                if node.addr == addr {
                    node.set_offline(offline);
                    found.push((c, n));
                }
            }
        }
        if found.is_empty() {
            return false;
        }
        self.ask_workers(move |w| {
            for &(c, n) in &found {
                w.pools[c][n].set_draining(offline);
            }
        })
        .await;
        true
    }

    /// Ends the client connection of the session with connection id `id` (as `KILL
    /// CONNECTION` does): at once if it waits for its client, else once its statement is
    /// answered. False when no session has that id.
    pub fn kill_session(&self, id: u32) -> bool {
        self.find_session(id).map(|s| s.disconnect()).is_some()
    }

    /// Whether commands are timed: for stage histograms, digest statistics or the slow log.
    fn timing(&self) -> bool {
        let s = &self.settings;
        s.stage_histograms.load(Ordering::Relaxed)
            || s.query_digests.load(Ordering::Relaxed)
            || s.slow_query_threshold_ns.load(Ordering::Relaxed) > 0
    }

    /// Client sessions logged in now.
    pub fn sessions_open(&self) -> usize {
        let shards = self.session_shards.lock().expect("session shards").clone();
        shards.iter().map(|s| s.len()).sum()
    }

    /// Every logged-in session, on every worker, by connection id.
    pub fn sessions(&self) -> Vec<SessionInfo> {
        let shards = self.session_shards.lock().expect("session shards").clone();
        let mut all: Vec<SessionInfo> = shards
            .iter()
            .flat_map(|s| s.all())
            .map(|h| h.info())
            .collect();
        all.sort_by_key(|s| s.id);
        all
    }

    /// Runs `f` on every worker's thread (where its pools and tables live, unshared) and
    /// collects the answers; a worker that does not answer within two seconds (stuck, or
    /// stopping) is left out.
    pub async fn ask_workers<T, F>(&self, f: F) -> Vec<T>
    where
        T: Send + 'static,
        F: Fn(&WorkerFrontend) -> T + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let links = self.workers.lock().expect("worker links").clone();
        let mut answers = Vec::with_capacity(links.len());
        for link in links {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let f = f.clone();
            let job: WorkerJob = Box::new(move |fe| {
                let _ = tx.send(f(fe));
            });
            if link.send(job).is_ok() {
                answers.push(rx);
            }
        }
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut out = Vec::with_capacity(answers.len());
        for rx in answers {
            if let Ok(Ok(v)) = tokio::time::timeout_at(deadline, rx).await {
                out.push(v);
            }
        }
        out
    }

    /// Logs a connection event through the connection log's rate limit
    /// (`connection_log_rate` lines a second), saying how many lines it held back.
    fn connection_log(&self, log: impl FnOnce(u64)) {
        let rate = self.settings.connection_log_rate.load(Ordering::Relaxed);
        if let Some(suppressed) = self
            .connection_log
            .admit(rate, self.started.elapsed().as_secs())
        {
            log(suppressed);
        }
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
    /// This worker's read balancer for each cluster (the Redis door's replica reads use it too).
    pub balancers: Vec<Balancer>,
    statements: RefCell<statements::Registry>,
    sessions: Arc<registry::SessionShard>,
    pins: Arc<PinCounters>,
    telemetry: Arc<telemetry::WorkerTelemetry>,
    digests: RefCell<digests::DigestTable>,
    /// Statements each routing rule matched on this worker (`[cluster][rule]`).
    rule_hits: RefCell<Vec<Vec<u64>>>,
    worker_id: u32,
    workers: u32,
    next_id: Cell<u32>,
    /// The global binlog's ordering clock of this worker's sessions (`session/stamp.rs`).
    stamp_clock: RefCell<manifold_binlog::stamp::Clock>,
}

impl WorkerFrontend {
    pub fn new(shared: Arc<Shared>, ctx: &WorkerContext) -> Rc<Self> {
        let pools: Vec<Vec<Rc<Pool>>> = shared
            .clusters
            .iter()
            .zip(&shared.budgets)
            .map(|(cluster, budgets)| {
                cluster
                    .targets
                    .iter()
                    .zip(budgets)
                    .map(|(target, budget)| {
                        Pool::new(
                            target.clone(),
                            shared.pool.clone(),
                            shared.pool_limits.clone(),
                            budget.clone(),
                        )
                    })
                    .collect()
            })
            .collect();
        // A node taken offline before this worker started (the fleet's configuration,
        // applied at start) is drained here too.
        for (cluster, pools) in shared.clusters.iter().zip(&pools) {
            for (node, pool) in cluster.topology.nodes.iter().zip(pools) {
                if node.is_offline() {
                    pool.set_draining(true);
                }
            }
        }
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
        let (jobs_tx, mut jobs) = tokio::sync::mpsc::unbounded_channel::<WorkerJob>();
        shared.workers.lock().expect("worker links").push(jobs_tx);
        let fe = Rc::new(WorkerFrontend {
            sessions,
            telemetry: shared.telemetry.register(),
            digests: RefCell::default(),
            rule_hits: RefCell::new(
                shared
                    .clusters
                    .iter()
                    .map(|c| vec![0; c.topology.rules.len()])
                    .collect(),
            ),
            shared,
            pools,
            balancers,
            statements: RefCell::default(),
            pins,
            worker_id: ctx.id() as u32,
            workers: ctx.workers().max(1) as u32,
            next_id: Cell::new(0),
            stamp_clock: RefCell::default(),
        });
        let runner = Rc::downgrade(&fe);
        tokio::task::spawn_local(async move {
            while let Some(job) = jobs.recv().await {
                match runner.upgrade() {
                    Some(fe) => job(&fe),
                    None => break,
                }
            }
        });
        fe
    }

    /// This worker's pools' figures, `[cluster][node]` in the order of [`Shared::clusters`]
    /// and their topologies' nodes.
    pub fn pool_stats(&self) -> Vec<Vec<manifold_backend::PoolStats>> {
        self.pools
            .iter()
            .map(|pools| pools.iter().map(|p| p.stats()).collect())
            .collect()
    }

    /// The worker's index.
    pub fn worker_id(&self) -> u32 {
        self.worker_id
    }

    /// A copy of this worker's digest table.
    pub fn digest_stats(&self) -> Vec<DigestStats> {
        self.digests.borrow().snapshot()
    }

    pub fn clear_digests(&self) {
        self.digests.borrow_mut().clear();
    }

    fn count_rule_hit(&self, cluster: usize, rule: usize) {
        if let Some(n) = self.rule_hits.borrow_mut()[cluster].get_mut(rule) {
            *n += 1;
        }
    }

    /// Statements each routing rule matched on this worker (`[cluster][rule]`).
    pub fn rule_hits(&self) -> Vec<Vec<u64>> {
        self.rule_hits.borrow().clone()
    }

    /// Connection ids unique across workers without sharing a counter: worker `w` of `n` hands
    /// out session numbers `w + 1, w + 1 + n, ...` (each worker its own residue class, also
    /// after they wrap), under the fleet's instance id ([`manifold_fleet::ids`]): within
    /// [`manifold_fleet::ids::LOCAL_MASK`] whenever the fleet is on, so that an id never
    /// looks like another instance's. Once the numbers have wrapped, one still held by a
    /// long-lived session (on this worker: the numbers are the worker's own) is skipped.
    fn next_connection_id(&self) -> u32 {
        let fleet = &self.shared.fleet;
        let instance = fleet.instance();
        let space = if fleet.config().enabled() {
            manifold_fleet::ids::LOCAL_MASK
        } else {
            u32::MAX
        };
        let per_worker = space / self.workers;
        loop {
            let k = self.next_id.get();
            self.next_id.set(k.wrapping_add(1));
            let wrapped = k >= per_worker;
            let number = (k % per_worker) * self.workers + self.worker_id + 1;
            let id = manifold_fleet::ids::compose(instance, number);
            if !(wrapped && self.sessions.get(id).is_some()) {
                return id;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::LogLimiter;

    #[test]
    fn the_connection_log_lets_through_its_rate_and_counts_the_rest() {
        let l = LogLimiter::default();
        assert_eq!(l.admit(2, 5), Some(0));
        assert_eq!(l.admit(2, 5), Some(0));
        assert_eq!(l.admit(2, 5), None);
        assert_eq!(l.admit(2, 5), None);
        assert_eq!(
            l.admit(2, 6),
            Some(2),
            "the next second's first line says two were held"
        );
        assert_eq!(l.admit(0, 6), None, "rate 0 logs nothing");
        assert_eq!(l.admit(5, 6), Some(1));
    }
}
