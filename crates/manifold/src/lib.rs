#![forbid(unsafe_code)]
//! The manifold server as a library: configuration loading and wiring the components
//! (engine, MySQL front door, backend pools, router and its monitor) into a running server. The binary's `main` and the
//! integration tests both start manifold through [`start`]. Logic that is not about assembling
//! and stopping the server belongs in the component crates.

pub mod auto_keys;
pub mod config;
pub mod data_dir;
pub mod fleet_state;
pub mod settings;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use manifold_admin::AdminServer;
use manifold_backend::{BackendTarget, ConnKey, TlsMode};
use manifold_cdc::source::SourceTarget;
use manifold_engine::{ConnectionHandler, Engine, EngineBuilder, HandlerFactory, ShutdownReport};
use manifold_frontend_mysql::{Cluster, Shared, Users, WorkerFrontend};
use manifold_frontend_redis::{
    Account, BackendLogin, Backends, Credentials, RedisFrontend, RedisShared, RedisTlsDoor,
};
use manifold_router::{Monitor, Topology};

use crate::config::{ClusterConfig, Config};

/// A running manifold.
pub struct Server {
    pub engine: Engine,
    pub shared: Arc<Shared>,
    /// Check the nodes (one monitor per cluster) until the server is dropped.
    pub monitors: Vec<Monitor>,
    /// The admin port, unless `[admin] listen` is empty; stops when dropped.
    pub admin: Option<AdminServer>,
    /// The tunables (`SET GLOBAL`, `RELOAD CONFIG`, SIGHUP).
    pub settings: Arc<settings::Settings>,
    /// The data directory's certificate, when clients are offered that one.
    pub generated_cert: Option<auto_keys::ServerCert>,
    /// The global binlog's service, when `[binlog]` is on; stops when dropped.
    pub binlog: Option<manifold_cdc::service::BinlogService>,
    /// Where the Redis door's listeners are among the engine's.
    redis_ports: RedisPorts,
}

impl Server {
    /// The address MySQL clients connect to (port 0 in the configuration resolved).
    pub fn mysql_addr(&self) -> SocketAddr {
        self.engine.local_addrs()[0]
    }

    /// The address Redis clients connect to (the first of `redis.listen`), if the Redis
    /// door listens.
    pub fn redis_addr(&self) -> Option<SocketAddr> {
        self.redis_addrs().first().copied()
    }

    /// Every address the Redis door listens on (an optional one the host lacks left out).
    pub fn redis_addrs(&self) -> Vec<SocketAddr> {
        let all = self.engine.local_addrs();
        self.redis_ports.plain.iter().map(|&i| all[i]).collect()
    }

    /// The address of the Redis door's TLS port (the first), if it listens.
    pub fn redis_tls_addr(&self) -> Option<SocketAddr> {
        self.redis_tls_addrs().first().copied()
    }

    /// Every address of the Redis door's TLS port.
    pub fn redis_tls_addrs(&self) -> Vec<SocketAddr> {
        let all = self.engine.local_addrs();
        self.redis_ports.tls.iter().map(|&i| all[i]).collect()
    }

    /// The admin port's address, if it listens.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|a| a.local_addrs().sql)
    }

    /// The HTTP address (`/metrics`, `/status`), if it listens.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|a| a.local_addrs().http)
    }

    /// Drains the clients, then stops the global binlog (its dumps ended with the clients).
    pub fn shutdown(self, timeout: Duration) -> ShutdownReport {
        let report = self.engine.shutdown(timeout);
        if let Some(mut binlog) = self.binlog {
            binlog.stop();
        }
        // Leaves the registry: the others see it gone at once, not after member_timeout.
        self.shared.fleet.stop();
        report
    }
}

/// Validates `cfg`, binds the listeners and starts the workers. Returns once clients can
/// connect. `RELOAD CONFIG` has no file to read; see [`start_with_reload`].
pub fn start(cfg: &Config) -> Result<Server, String> {
    start_with_reload(cfg, None)
}

/// As [`start`]; `RELOAD CONFIG` and SIGHUP read the configuration again from `source`.
pub fn start_with_reload(
    cfg: &Config,
    source: Option<settings::ConfigSource>,
) -> Result<Server, String> {
    cfg.validate()?;
    let users = Users::from_config(&cfg.users)?;
    let tls = manifold_backend::tls::client_config(&cfg.backend.tls)?;
    let mut clusters = Vec::new();
    for (i, (name, primary, replicas)) in cfg.cluster_nodes().into_iter().enumerate() {
        let mut nodes = vec![primary];
        nodes.extend(replicas.iter().map(manifold_router::ReplicaEntry::addr));
        let topology = Arc::new(Topology::new(
            primary,
            replicas,
            ClusterConfig::routing_for(&cfg.routing, &nodes),
        )?);
        let targets: Vec<BackendTarget> = topology
            .nodes
            .iter()
            .map(|node| BackendTarget {
                addr: node.addr.clone(),
                tls_mode: if tls.is_some() {
                    cfg.backend.tls.mode
                } else {
                    TlsMode::Disabled
                },
                tls: tls.clone(),
                max_packet: 1 << 30,
            })
            .collect();
        let (schemas, users) = match i.checked_sub(1).map(|k| &cfg.clusters[k]) {
            Some(c) => (c.schemas.clone(), c.users.clone()),
            None => (Vec::new(), Vec::new()),
        };
        clusters.push(Cluster {
            name: name.to_owned(),
            topology,
            targets,
            schemas,
            users,
        });
    }
    let listen: SocketAddr = cfg
        .mysql
        .listen
        .parse()
        .map_err(|e| format!("mysql.listen: {e}"))?;
    let monitor_login = monitor_login(cfg);
    let monitors = clusters
        .iter()
        .map(|c| Monitor::start(c.topology.clone(), c.targets.clone(), monitor_login.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let FrontKeys {
        mysql,
        generated: generated_cert,
        rsa,
    } = front_keys(cfg)?;
    // The Redis door's TLS port offers the MySQL port's certificate.
    let redis_tls = if cfg.redis.tls_listen.is_empty() {
        None
    } else {
        let (Some(cert), Some(key)) = (&mysql.tls.cert, &mysql.tls.key) else {
            return Err(
                "redis.tls_listen: no certificate (mysql.tls: set cert and key, or mode = \"auto\")"
                    .into(),
            );
        };
        Some(manifold_frontend_mysql::tls::server_config(cert, key)?)
    };
    let binlog_sources: Vec<SourceTarget> = clusters
        .iter()
        .map(|c| SourceTarget {
            cluster: c.name.clone(),
            topology: c.topology.clone(),
            targets: c.targets.clone(),
        })
        .collect();
    let mut shared = Shared::new(mysql, users, clusters, cfg.pool.clone())?;
    shared
        .logins
        .set_threshold(cfg.security.failed_login_threshold);
    shared.logins.set_max_delay(cfg.security.max_login_delay);
    let fleet = manifold_fleet::Fleet::new(cfg.fleet.clone());
    Arc::get_mut(&mut shared)
        .ok_or("the front's shared state is in use before the fleet is set")?
        .fleet = fleet.clone();
    let mut binlog_config = cfg.binlog.clone();
    if cfg.fleet.enabled() {
        // The registry's rows change every heartbeat: they are not the clients' data.
        let (schema, table) = cfg.fleet.table_name();
        binlog_config.also_own_tables = vec![
            (schema.to_owned(), table.to_owned()),
            (schema.to_owned(), format!("{table}_secret")),
            (schema.to_owned(), format!("{table}_config")),
        ];
    }
    let binlog = if cfg.binlog.enabled() {
        let service = manifold_cdc::service::start(
            binlog_config,
            binlog_sources,
            binlog_login(cfg, &monitor_login),
        )?;
        let front = Arc::get_mut(&mut shared)
            .ok_or("the front's shared state is in use before the global binlog is set")?;
        front.binlog = Some(service.shared.clone());
        front.binlog_access.configure(cfg.binlog.users.as_deref());
        Some(service)
    } else {
        None
    };
    if let Some(source) = rsa {
        // Generating takes from a fraction of a second to many on a loaded machine: begun
        // now, in the background, so the first client needing it rarely waits (it waits for
        // this key).
        let early = source.clone();
        std::thread::Builder::new()
            .name("rsa-keygen".into())
            .spawn(move || {
                if let Err(e) = early.get() {
                    tracing::warn!(error = %e, "RSA key not generated; the first client needing it tries again");
                }
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        shared.set_rsa_generator(Arc::new(move || source.get()));
    }
    let settings = settings::Settings::new(shared.clone(), cfg, source)?;
    match manifold_backend::probe_server_version(&cfg.backend.primary, cfg.pool.connect_timeout) {
        Ok(v) => shared.set_backend_version(v),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the primary's version; the handshake announces a default until a backend answers");
        }
    }
    // Registered before clients connect, so that their connection ids carry the instance
    // (a registry that cannot be reached yet: instance 0 until it can).
    let local: std::sync::Weak<dyn manifold_fleet::Local> = Arc::downgrade(&shared) as _;
    // The fleet's newest configuration version is applied over the file's before clients
    // connect.
    fleet.set_applier(Arc::new(fleet_state::FleetState {
        settings: Arc::downgrade(&settings),
        shared: Arc::downgrade(&shared),
    }));
    fleet.start(
        manifold_fleet::Target {
            topology: shared.clusters[0].topology.clone(),
            targets: shared.clusters[0].targets.clone(),
        },
        fleet_login(cfg, &monitor_login),
        local,
    )?;
    let factory_shared = shared.clone();
    let factory: HandlerFactory = Arc::new(move |ctx| {
        let fe = WorkerFrontend::new(factory_shared.clone(), ctx);
        for pool in fe.pools.iter().flatten() {
            pool.spawn_maintenance(None);
        }
        WORKER_FRONTEND.with(|w| *w.borrow_mut() = Some(fe.clone()));
        fe as Rc<dyn ConnectionHandler>
    });
    let mut builder = EngineBuilder::new(cfg.engine.clone()).listen(listen, factory);
    let mut redis_ports = RedisPorts::default();
    let mut redis = None;
    let plain_addrs = bindable("redis.listen", &cfg.redis.listen)?;
    if !plain_addrs.is_empty() || redis_tls.is_some() {
        let door = RedisShared::new(
            cfg.redis.clone(),
            Arc::new(MysqlUsers(shared.clone())) as Arc<dyn Credentials>,
            &redis_login(cfg, &monitor_login),
            cfg.pool.max_prepared_statements,
        );
        let mut next = 1;
        for addr in plain_addrs {
            let door = door.clone();
            builder = builder.listen(
                addr,
                Arc::new(move |ctx: &Rc<manifold_engine::WorkerContext>| {
                    redis_frontend(&door, ctx) as Rc<dyn ConnectionHandler>
                }),
            );
            redis_ports.plain.push(next);
            next += 1;
        }
        if let Some(tls) = redis_tls {
            for addr in bindable("redis.tls_listen", &cfg.redis.tls_listen)? {
                let door = door.clone();
                let tls = tls.clone();
                builder = builder.listen(
                    addr,
                    Arc::new(move |ctx: &Rc<manifold_engine::WorkerContext>| {
                        Rc::new(RedisTlsDoor {
                            fe: redis_frontend(&door, ctx),
                            tls: tls.clone(),
                        }) as Rc<dyn ConnectionHandler>
                    }),
                );
                redis_ports.tls.push(next);
                next += 1;
            }
        }
        // Pub/Sub across the fleet: what is published here goes to the other instances,
        // what they publish reaches the subscribers here.
        // A strong handle: a publish costs one load when alone (no shared count touched).
        let to_fleet = fleet.clone();
        door.pubsub.set_forward(Box::new(move |channel, payload| {
            to_fleet.publish(channel, payload);
        }));
        let hub = Arc::downgrade(&door.pubsub);
        fleet.set_subscribers(Arc::new(move |channel, payload| {
            if let Some(hub) = hub.upgrade() {
                hub.publish_here(channel, payload);
            }
        }));
        redis = Some(door);
    }
    let engine = builder.start().map_err(|e| e.to_string())?;
    let admin = manifold_admin::start(&cfg.admin, shared.clone(), settings.clone(), redis.clone())?;
    let addrs = admin.as_ref().map(manifold_admin::AdminServer::local_addrs);
    let mysql_addr = engine.local_addrs()[0];
    let redis_addr = redis_ports
        .plain
        .first()
        .map(|&i| engine.local_addrs()[i].to_string());
    fleet.set_addrs(|a| {
        a.name = cfg
            .fleet
            .name
            .clone()
            .unwrap_or_else(|| format!("{}:{}", host_name(), mysql_addr.port()));
        a.mysql = mysql_addr.to_string();
        a.admin = addrs
            .as_ref()
            .and_then(|l| l.sql)
            .map(|s| s.to_string())
            .unwrap_or_default();
        a.http = addrs
            .as_ref()
            .and_then(|l| l.http)
            .map(|s| s.to_string())
            .unwrap_or_default();
        a.redis = redis_addr.unwrap_or_default();
    });
    Ok(Server {
        engine,
        shared,
        monitors,
        admin,
        settings,
        generated_cert,
        binlog,
        redis_ports,
    })
}

thread_local! {
    /// This worker's MySQL door handler, for the Redis door made after it on the same worker.
    static WORKER_FRONTEND: std::cell::RefCell<Option<Rc<WorkerFrontend>>> =
        const { std::cell::RefCell::new(None) };
    /// This worker's Redis door handler, shared by its plain and TLS ports.
    static REDIS_FRONTEND: std::cell::RefCell<Option<Rc<RedisFrontend>>> =
        const { std::cell::RefCell::new(None) };
}

/// Which of the engine's listeners are the Redis door's (the MySQL port is the first).
#[derive(Debug, Default)]
struct RedisPorts {
    plain: Vec<usize>,
    tls: Vec<usize>,
}

/// The addresses of a `listen` list to bind: an optional one (`-addr`) the host does not
/// have (no such interface address, or no IPv6 at all) is left out, with a warning, as
/// redis-server does; any other failure is the engine's to report when it binds.
fn bindable(key: &str, value: &str) -> Result<Vec<SocketAddr>, String> {
    let listed = manifold_frontend_redis::config::listen_addrs(key, value)?;
    let mut out = Vec::with_capacity(listed.len());
    for a in &listed {
        if a.optional {
            // Port 0: only whether the address can be had, whatever holds the port.
            let probe = SocketAddr::new(a.addr.ip(), 0);
            if let Err(e) = std::net::TcpListener::bind(probe) {
                const EAFNOSUPPORT: i32 = 97;
                if e.kind() == std::io::ErrorKind::AddrNotAvailable
                    || e.raw_os_error() == Some(EAFNOSUPPORT)
                {
                    tracing::warn!(
                        "{key}: {} left out: this host has no such address ({e})",
                        a.addr
                    );
                    continue;
                }
            }
        }
        out.push(a.addr);
    }
    if out.is_empty() && !listed.is_empty() {
        return Err(format!(
            "{key}: none of '{value}' is an address of this host"
        ));
    }
    Ok(out)
}

/// This worker's Redis door handler, made on first use. The MySQL door's handler of the
/// worker is made before (listeners are set up in order on each worker): the Redis door
/// shares its pools.
fn redis_frontend(
    door: &Arc<RedisShared>,
    ctx: &Rc<manifold_engine::WorkerContext>,
) -> Rc<RedisFrontend> {
    REDIS_FRONTEND.with(|slot| {
        slot.borrow_mut()
            .get_or_insert_with(|| {
                let fe = WORKER_FRONTEND
                    .with(|w| w.borrow().clone())
                    .expect("the MySQL door's handler is made first on each worker");
                Rc::new(RedisFrontend::new(
                    door.clone(),
                    ctx,
                    Rc::new(PrimaryOf(fe)),
                ))
            })
            .clone()
    })
}

/// The Redis door's way to the nodes: the worker's pools to the first cluster's nodes, and
/// its read balancer.
struct PrimaryOf(Rc<WorkerFrontend>);

impl Backends for PrimaryOf {
    fn topology(&self) -> &manifold_router::Topology {
        &self.0.shared.clusters[0].topology
    }

    fn pool(&self, node: manifold_router::NodeId) -> Rc<manifold_backend::Pool> {
        self.0.pools[0][node].clone()
    }

    fn pick_reader(&self, skip: u64) -> manifold_router::NodeId {
        let pools = &self.0.pools[0];
        self.0.balancers[0].pick(self.topology(), |n| pools[n].in_use(), skip)
    }
}

/// The Redis door's `AUTH` against the MySQL front's users (`[[users]]`, `--user`), as they
/// are now (a reload's users included): the password must match the user's stored
/// `caching_sha2_password` or `mysql_native_password` hash.
struct MysqlUsers(Arc<Shared>);

impl Credentials for MysqlUsers {
    /// A refusal counts as a refused login (`Client_auth_failures`), as on the MySQL port.
    fn check(&self, user: &[u8], password: &[u8]) -> Option<BackendLogin> {
        let login = self.verify(user, password);
        if login.is_none() {
            manifold_frontend_mysql::FrontendMetrics::inc(&self.0.metrics.auth_failures);
        }
        login
    }

    fn exists(&self, user: &[u8]) -> bool {
        self.0.users.load().get(user).is_some()
    }

    fn logins(&self) -> &manifold_engine::LoginThrottle {
        &self.0.logins
    }

    /// The same per-user count as the MySQL door's sessions (`User::acquire_connection`).
    fn account(&self, user: &[u8]) -> Option<Account> {
        let u = self.0.users.load().get(user)?.clone();
        if !u.acquire_connection() {
            tracing::info!(
                target: "manifold::connections",
                user = %u.name,
                max = u.max_connections,
                "redis login refused: the user is at its max_connections"
            );
            return None;
        }
        Some(Account {
            process: u.process,
            slot: Box::new(UserConnection(u)),
        })
    }
}

/// One of a user's connections, given back when dropped.
struct UserConnection(Arc<manifold_frontend_mysql::User>);

impl Drop for UserConnection {
    fn drop(&mut self) {
        self.0.release_connection();
    }
}

impl MysqlUsers {
    fn verify(&self, user: &[u8], password: &[u8]) -> Option<BackendLogin> {
        use manifold_mysql_proto::auth;
        // The MySQL checks drop one trailing NUL (a C string's); a Redis password is bytes.
        let nul = password.last() == Some(&0);
        let users = self.0.users.load();
        let known = users.get(user);
        // An unknown user is hashed as a known one is: no faster answer says it is unknown.
        let u: &manifold_frontend_mysql::User = match known {
            Some(u) => u,
            None => users.decoy_for(user),
        };
        let ok = if u.sha2_hash.is_some() {
            auth::sha2_verify_cleartext(u.sha2_hash.as_ref(), password)
        } else {
            auth::native_verify_cleartext(u.native_hash.as_ref(), password)
        };
        (ok && !nul && known.is_some()).then(|| BackendLogin {
            user: u.backend_user.clone(),
            password: u.backend_password.clone(),
        })
    }
}

/// `[mysql]` with the data directory's files filled in where nothing is configured: the
/// certificate and key in `auto` mode, the RSA key when the data directory has one (else
/// where to get it at first use). The data directory is required only for the certificate:
/// when only the RSA key would use it and it cannot be opened or written, the key is kept in
/// memory, after a warning. Logs which certificate clients are offered.
fn front_keys(cfg: &Config) -> Result<FrontKeys, String> {
    use manifold_frontend_mysql::FrontTlsMode;
    let mut mysql = cfg.mysql.clone();
    let generate_cert = mysql.tls.mode == FrontTlsMode::Auto && mysql.tls.cert.is_none();
    let mut generated = None;
    let dir = if generate_cert {
        let dir = data_dir::DataDir::open(&cfg.data_dir())?;
        let cert = auto_keys::server_cert(&dir)?;
        tracing::info!(
            cert = %cert.cert.display(),
            sha256 = %cert.fingerprint,
            generated = cert.generated,
            "TLS for clients: the data directory's self-signed certificate"
        );
        mysql.tls.cert = Some(cert.cert.clone());
        mysql.tls.key = Some(cert.key.clone());
        generated = Some(cert);
        Some(dir)
    } else if mysql.tls.rsa_private_key.is_none() {
        let path = cfg.data_dir();
        match data_dir::DataDir::open(&path).and_then(|dir| dir.lock().map(|_| dir)) {
            Ok(dir) => Some(dir),
            Err(e) => {
                auto_keys::rsa_in_memory_warning(&path, &e);
                None
            }
        }
    } else {
        None
    };
    let mut rsa_source = None;
    if mysql.tls.rsa_private_key.is_none() {
        if let Some(dir) = &dir {
            mysql.tls.rsa_private_key = auto_keys::existing_rsa_key(dir)?;
        }
        if mysql.tls.rsa_private_key.is_none() {
            rsa_source = Some(Arc::new(auto_keys::RsaKeySource::new(dir)));
        }
    }
    match (&mysql.tls.cert, mysql.tls.mode) {
        (_, FrontTlsMode::Off) => tracing::info!("TLS for clients: off (mysql.tls.mode)"),
        (Some(cert), _) if generated.is_none() => {
            // Shared::new reads it again and names any fault; here only what to log.
            let sha256 = std::fs::read(cert)
                .ok()
                .and_then(|pem| rustls_pemfile::certs(&mut pem.as_slice()).next()?.ok())
                .map(|der| auto_keys::fingerprint(&der))
                .unwrap_or_default();
            tracing::info!(cert = %cert.display(), %sha256, "TLS for clients: the configured certificate");
        }
        _ => {}
    }
    Ok(FrontKeys {
        mysql,
        generated,
        rsa: rsa_source,
    })
}

/// What [`front_keys`] found.
struct FrontKeys {
    mysql: manifold_frontend_mysql::MysqlFrontConfig,
    /// The data directory's certificate, when clients are offered that one.
    generated: Option<auto_keys::ServerCert>,
    /// Where the RSA key comes from at first use, when none is configured or kept.
    rsa: Option<Arc<auto_keys::RsaKeySource>>,
}

/// The login the global binlog's source readers and heartbeats use: `binlog.user`, or else
/// the monitor's. Both are manifold's own connections (TLS whenever offered under
/// `as_client`): the rows they read are every client's.
fn binlog_login(cfg: &Config, monitor: &ConnKey) -> ConnKey {
    match &cfg.binlog.user {
        Some(user) => ConnKey::own(user, &cfg.binlog.password, 45),
        None => monitor.clone(),
    }
}

/// The login the Redis door's own statements (the expiry sweeper) run as: `redis.user`, or
/// else the monitor's. Never a client's: a client's grants must not decide what manifold's
/// own work may do, nor its login be used for statements it did not send.
fn redis_login(cfg: &Config, monitor: &ConnKey) -> BackendLogin {
    match &cfg.redis.user {
        Some(user) => BackendLogin {
            user: user.clone(),
            password: cfg.redis.password.clone(),
        },
        None => BackendLogin {
            user: monitor.user.clone(),
            password: monitor.password.clone(),
        },
    }
}

/// The login of the fleet registry's statements: `fleet.user`, or else the monitor's.
fn fleet_login(cfg: &Config, monitor: &ConnKey) -> ConnKey {
    match &cfg.fleet.user {
        Some(user) => ConnKey::own(user, &cfg.fleet.password, 45),
        None => monitor.clone(),
    }
}

/// This host's name, for the registry (`fleet.name` unset).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "manifold".into())
}

/// `routing.monitor.user`, or else the first user's backend login.
fn monitor_login(cfg: &Config) -> ConnKey {
    let m = &cfg.routing.monitor;
    let (user, password) = match (&m.user, cfg.users.first()) {
        (Some(u), _) => (u.clone(), m.password.clone()),
        (None, Some(u)) => (
            u.backend_user.clone().unwrap_or_else(|| u.name.clone()),
            u.backend_password.clone(),
        ),
        (None, None) => (String::new(), String::new()),
    };
    // utf8mb4_general_ci; the monitor's queries return ASCII. Its own connections: TLS
    // whenever offered under `as_client`.
    ConnKey::own(&user, &password, 45)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data directory that cannot be made, for root too: under a regular file.
    fn unusable_data_dir(tmp: &tempfile::TempDir) -> std::path::PathBuf {
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        file.join("data")
    }

    #[test]
    fn the_data_dir_is_needed_only_for_the_generated_certificate() {
        use manifold_frontend_mysql::FrontTlsMode;
        let tmp = tempfile::tempdir().unwrap();
        let mut cfg = Config {
            data_dir: Some(unusable_data_dir(&tmp)),
            ..Config::default()
        };
        // auto without a certificate: the data directory is required.
        let Err(e) = front_keys(&cfg) else {
            panic!("started without its data directory")
        };
        assert!(
            e.contains(&tmp.path().join("file").display().to_string()),
            "{e}"
        );
        // TLS off: only the RSA key would use it; kept in memory.
        cfg.mysql.tls.mode = FrontTlsMode::Off;
        let keys = front_keys(&cfg).unwrap();
        assert!(keys.generated.is_none() && keys.mysql.tls.rsa_private_key.is_none());
        let rsa = keys.rsa.unwrap();
        let pem = rsa.get().unwrap();
        manifold_mysql_proto::auth::RsaKeyPair::from_pem(&pem).unwrap();
        assert_eq!(rsa.get().unwrap(), pem);
    }
}
