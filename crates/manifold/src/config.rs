//! The configuration file: one TOML document whose tables belong to the components
//! (`[engine]`, `[mysql]`, `[redis]`, `[backend]`, `[pool]`, `[routing]`, `[[users]]`, `[log]`, `[admin]`,
//! `[security]`),
//! and `data_dir` at the top. Every table rejects unknown keys, and `validate` checks values,
//! naming the key at fault.

use std::path::{Path, PathBuf};

use manifold_admin::AdminConfig;
use manifold_backend::{BackendTlsConfig, PoolConfig};
use manifold_engine::EngineConfig;
use manifold_frontend_mysql::{MysqlFrontConfig, UserConfig};
use manifold_frontend_redis::RedisConfig;
use manifold_router::{ReplicaEntry, RoutingConfig};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where manifold keeps what it generates (the TLS certificate when none is configured,
    /// the RSA key); unset: [`crate::data_dir::default_path`].
    pub data_dir: Option<PathBuf>,
    pub engine: EngineConfig,
    pub mysql: MysqlFrontConfig,
    /// The Redis door (`listen = ""`: off).
    pub redis: RedisConfig,
    pub backend: BackendConfig,
    pub pool: PoolConfig,
    pub routing: RoutingConfig,
    /// Clusters besides `[backend]` (the default one), with the schemas and users they serve.
    pub clusters: Vec<ClusterConfig>,
    pub users: Vec<UserConfig>,
    pub log: LogConfig,
    pub admin: AdminConfig,
    /// The global binlog (`dir = ""`: off).
    pub binlog: manifold_cdc::BinlogConfig,
    /// Login delays for password guessing, on every door.
    pub security: manifold_engine::LoginThrottleConfig,
    /// The other manifolds in front of the same clusters (`table = ""`: alone).
    pub fleet: manifold_fleet::FleetConfig,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct BackendConfig {
    /// The primary, "host:port".
    pub primary: String,
    /// Replicas: "host:port" each, or `{ addr = "host:port", read_weight = 2,
    /// max_replication_lag = "5s" }`.
    pub replicas: Vec<ReplicaEntry>,
    pub tls: BackendTlsConfig,
}

/// Another primary with its replicas (`[[clusters]]`). A session uses the cluster listing its
/// current schema, else the one listing its user, else `[backend]`'s. `[backend.tls]`,
/// `[pool]` and `[routing]` apply to every cluster.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub name: String,
    pub primary: String,
    #[serde(default)]
    pub replicas: Vec<ReplicaEntry>,
    #[serde(default)]
    pub schemas: Vec<String>,
    #[serde(default)]
    pub users: Vec<String>,
}

impl ClusterConfig {
    /// `routing` with only the rules that can apply to a cluster of `nodes`: a rule naming a
    /// node of another cluster is left out.
    pub fn routing_for(routing: &RoutingConfig, nodes: &[&str]) -> RoutingConfig {
        let mut r = routing.clone();
        r.rules.retain(|rule| {
            matches!(rule.target.as_str(), "primary" | "replicas")
                || nodes.contains(&rule.target.as_str())
        });
        r
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `error`, `warn`, `info`, `debug`, `trace`, or a tracing filter such as
    /// "info,manifold_backend=debug". `RUST_LOG` overrides it.
    pub level: String,
    /// Statements taking longer than this (read to answered) are logged (target
    /// `manifold::slow_query`) and counted; 0 turns the slow query log off.
    #[serde(with = "manifold_engine::duration_serde")]
    pub slow_query_threshold: std::time::Duration,
    /// Connection log lines (target `manifold::connections`: refused clients, failed
    /// logins) per second at most; the next line logged says how many were held back.
    pub connection_log_rate: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            slow_query_threshold: std::time::Duration::from_secs(1),
            connection_log_rate: 10,
            level: "info".into(),
        }
    }
}

/// A user whose client password and backend password are both `password` (what
/// `--user NAME:PASSWORD` means): both hashes are computed, the password itself is kept only as
/// the backend login.
pub fn user_with_password(name: &str, password: &str) -> UserConfig {
    use manifold_mysql_proto::auth;
    UserConfig {
        name: name.to_owned(),
        password_native: Some(auth::format_native_hash(&auth::native_stored_hash(
            password.as_bytes(),
        ))),
        password_sha2: Some(auth::format_sha2_hash(&auth::sha2_stored_hash(
            password.as_bytes(),
        ))),
        backend_user: None,
        backend_password: password.to_owned(),
        max_connections: 0,
        // As a new server account: its own sessions only (a quick start's one user sees
        // all of them anyway).
        process: false,
    }
}

fn check_addr(key: &str, addr: &str) -> Result<(), String> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!("{key}: '{addr}' is not host:port"));
    };
    if host.is_empty() {
        return Err(format!("{key}: '{addr}' has no host"));
    }
    port.parse::<u16>()
        .map_err(|_| format!("{key}: '{addr}' has no valid port"))?;
    Ok(())
}

impl Config {
    pub fn from_toml(text: &str) -> Result<Config, String> {
        let cfg: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Config::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn validate(&self) -> Result<(), String> {
        self.engine.validate().map_err(|e| format!("engine.{e}"))?;
        self.mysql.validate()?;
        self.fleet.validate()?;
        self.redis.validate()?;
        // Listeners bind with SO_REUSEPORT: the second would share the first's port without
        // an error, and take some of its clients.
        let mut listeners = vec![("mysql.listen", self.mysql.listen.clone())];
        for key in ["redis.listen", "redis.tls_listen"] {
            let value = if key == "redis.listen" {
                &self.redis.listen
            } else {
                &self.redis.tls_listen
            };
            for a in manifold_frontend_redis::config::listen_addrs(key, value)? {
                listeners.push((key, a.addr.to_string()));
            }
        }
        for (i, (key, addr)) in listeners.iter().enumerate() {
            for (other, taken) in &listeners[..i] {
                if key != other && same_port(addr, taken) {
                    return Err(format!(
                        "{key}: '{addr}' is the port of {other} ('{taken}')"
                    ));
                }
            }
        }
        self.pool.validate()?;
        if self.backend.primary.is_empty() {
            return Err("backend.primary: required (host:port of the primary server)".into());
        }
        check_addr("backend.primary", &self.backend.primary)?;
        self.routing.validate()?;
        for (i, r) in self.backend.replicas.iter().enumerate() {
            check_addr(&format!("backend.replicas[{i}]"), r.addr())?;
        }
        self.validate_clusters()?;
        self.validate_binlog()?;
        self.admin.validate()?;
        crate::settings::check_ranges(self)?;
        if matches!(
            self.backend.tls.mode,
            manifold_backend::TlsMode::VerifyCa | manifold_backend::TlsMode::VerifyIdentity
        ) && self.backend.tls.ca.is_none()
        {
            return Err(
                "backend.tls.ca: required when backend.tls.mode is verify_ca or verify_identity"
                    .into(),
            );
        }
        if self.users.is_empty() {
            return Err("users: at least one [[users]] entry is required".into());
        }
        for (i, u) in self.users.iter().enumerate() {
            u.validate(i)?;
        }
        Ok(())
    }
}

impl Config {
    /// `data_dir`, or its default.
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(crate::data_dir::default_path)
    }

    /// Every cluster: `("default", primary, replicas)` first, then `[[clusters]]`.
    pub fn cluster_nodes(&self) -> Vec<(&str, &str, &[ReplicaEntry])> {
        let mut all = vec![(
            "default",
            self.backend.primary.as_str(),
            self.backend.replicas.as_slice(),
        )];
        for c in &self.clusters {
            all.push((c.name.as_str(), c.primary.as_str(), c.replicas.as_slice()));
        }
        all
    }

    /// `[binlog]`: its own keys, and what the global binlog needs of the rest: cluster names
    /// it can record in its origin events, readers that are configured users.
    fn validate_binlog(&self) -> Result<(), String> {
        let b = &self.binlog;
        if !b.enabled() {
            return Ok(());
        }
        b.validate()?;
        for (i, c) in self.clusters.iter().enumerate() {
            if !manifold_binlog::origin::valid_cluster_name(&c.name) {
                return Err(format!(
                    "clusters[{i}].name: '{}': with the global binlog on, cluster names are letters, digits, '_', '-' and '.' only",
                    c.name
                ));
            }
        }
        for u in b.users.iter().flatten() {
            if !self.users.iter().any(|c| &c.name == u) {
                return Err(format!("binlog.users: '{u}' is not a [[users]] entry"));
            }
        }
        Ok(())
    }

    fn validate_clusters(&self) -> Result<(), String> {
        let mut names = std::collections::HashSet::from(["default"]);
        let mut schemas = std::collections::HashSet::new();
        let mut users = std::collections::HashSet::new();
        for (i, c) in self.clusters.iter().enumerate() {
            let key = format!("clusters[{i}]");
            if c.name.is_empty() || !names.insert(c.name.as_str()) {
                return Err(format!(
                    "{key}.name: '{}' is empty, 'default' or used twice",
                    c.name
                ));
            }
            check_addr(&format!("{key}.primary"), &c.primary)?;
            for (j, r) in c.replicas.iter().enumerate() {
                check_addr(&format!("{key}.replicas[{j}]"), r.addr())?;
            }
            for s in &c.schemas {
                if !schemas.insert(s.as_str()) {
                    return Err(format!("{key}.schemas: '{s}' is listed by two clusters"));
                }
            }
            for u in &c.users {
                if !users.insert(u.as_str()) {
                    return Err(format!("{key}.users: '{u}' is listed by two clusters"));
                }
            }
        }
        let mut all_nodes = Vec::new();
        for (_, primary, replicas) in self.cluster_nodes() {
            all_nodes.push(primary);
            all_nodes.extend(replicas.iter().map(ReplicaEntry::addr));
        }
        for (i, rule) in self.routing.rules.iter().enumerate() {
            let t = rule.target.as_str();
            if !matches!(t, "primary" | "replicas") && !all_nodes.contains(&t) {
                return Err(format!("routing.rules[{i}].target: '{t}' is not primary, replicas, or a configured node's host:port"));
            }
        }
        // Each cluster's nodes and the rules that apply there (patterns, duplicates).
        for (_, primary, replicas) in self.cluster_nodes() {
            let mut nodes = vec![primary];
            nodes.extend(replicas.iter().map(ReplicaEntry::addr));
            manifold_router::Topology::new(
                primary,
                replicas,
                ClusterConfig::routing_for(&self.routing, &nodes),
            )?;
        }
        Ok(())
    }
}

/// Two listen addresses that would bind the same port: the same fixed port on the same
/// address, or on any address where one of them is a wildcard.
fn same_port(a: &str, b: &str) -> bool {
    use std::net::SocketAddr;
    match (a.parse::<SocketAddr>(), b.parse::<SocketAddr>()) {
        (Ok(a), Ok(b)) => {
            a.port() != 0
                && a.port() == b.port()
                && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        [backend]
        primary = "127.0.0.1:3306"
        [[users]]
        name = "app"
        password_native = "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
        backend_password = "password"
    "#;

    fn err(extra: &str) -> String {
        Config::from_toml(&format!("{extra}\n{MINIMAL}")).unwrap_err()
    }

    #[test]
    fn minimal_file_loads_with_defaults() {
        let c = Config::from_toml(MINIMAL).unwrap();
        assert_eq!(c.mysql.listen, "0.0.0.0:6033");
        assert_eq!(c.mysql.max_allowed_packet, 64 << 20);
        assert_eq!(c.users[0].name, "app");
    }

    #[test]
    fn tls_mode_alone_or_in_its_table() {
        use manifold_frontend_mysql::FrontTlsMode;
        let c = Config::from_toml(MINIMAL).unwrap();
        assert_eq!(c.mysql.tls.mode, FrontTlsMode::Auto);
        assert_eq!(c.data_dir, None);
        let c = Config::from_toml(&format!(
            "data_dir = \"/var/lib/m\"\n[mysql]\ntls = \"off\"\n{MINIMAL}"
        ))
        .unwrap();
        assert_eq!(c.mysql.tls.mode, FrontTlsMode::Off);
        assert_eq!(c.data_dir(), PathBuf::from("/var/lib/m"));
        let c = Config::from_toml(&format!("[mysql.tls]\nmode = \"off\"\n{MINIMAL}")).unwrap();
        assert_eq!(c.mysql.tls.mode, FrontTlsMode::Off);
        // The table as before: a configured certificate, mode auto.
        let c = Config::from_toml(&format!(
            "[mysql.tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\nrequired = true\n{MINIMAL}"
        ))
        .unwrap();
        assert_eq!(c.mysql.tls.mode, FrontTlsMode::Auto);
        assert!(c.mysql.tls.required);
        // Required TLS needs no certificate of its own now: the generated one serves.
        Config::from_toml(&format!("[mysql.tls]\nrequired = true\n{MINIMAL}")).unwrap();
        let e = err("[mysql]\ntls = \"on\"");
        assert!(
            e.contains("on") && e.contains("auto") && e.contains("off"),
            "{e}"
        );
        let e = err("[mysql.tls]\nmode = \"off\"\ncert = \"/c.pem\"\nkey = \"/k.pem\"");
        assert!(e.contains("mysql.tls.cert"), "{e}");
        let e = err("[mysql.tls]\nmode = \"off\"\nrequired = true");
        assert!(e.contains("mysql.tls.required"), "{e}");
        let e = err("[mysql.tls]\nmood = \"off\"");
        assert!(e.contains("mood"), "{e}");
    }

    #[test]
    fn example_file_is_valid() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../manifold.example.toml"
        ))
        .unwrap();
        Config::from_toml(&text).unwrap();
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = err("[mysql]\nlisten_port = 1");
        assert!(e.contains("listen_port"), "{e}");
        let e = Config::from_toml(&format!("{MINIMAL}\nbogus = 1")).unwrap_err();
        assert!(e.contains("bogus"), "{e}");
        let e =
            Config::from_toml(&MINIMAL.replace("backend_password", "backend_pasword")).unwrap_err();
        assert!(e.contains("backend_pasword"), "{e}");
    }

    #[test]
    fn bad_values_are_named_with_the_reason() {
        for (extra, key) in [
            (
                "[mysql]\nmax_allowed_packet = \"12X\"",
                "max_allowed_packet",
            ),
            ("[mysql]\nwait_timeout = \"soon\"", "wait_timeout"),
            ("[mysql]\nlisten = \"nowhere\"", "mysql.listen"),
            (
                "[mysql]\ndefault_auth_plugin = \"ed25519\"",
                "mysql.default_auth_plugin",
            ),
            ("[mysql.tls]\ncert = \"/x.pem\"", "mysql.tls.key"),
            ("[pool]\nmax_size = 0", "pool.max_size"),
            ("[pool]\nmin_idle = 9\nmax_size = 4", "pool.min_idle"),
            ("[engine]\nblocking_max_threads = 0", "blocking_max_threads"),
            (
                "[[routing.rules]]\ndigest = \"(\"\ntarget = \"primary\"",
                "routing.rules[0].digest",
            ),
            (
                "[[routing.rules]]\ntarget = \"10.9.9.9:1\"",
                "routing.rules[0].target",
            ),
            (
                "[routing.monitor]\nshun_after = 0",
                "routing.monitor.shun_after",
            ),
            (
                "[[clusters]]\nname = \"default\"\nprimary = \"h:1\"",
                "clusters[0].name",
            ),
            (
                "[[clusters]]\nname = \"b\"\nprimary = \"h\"",
                "clusters[0].primary",
            ),
        ] {
            let e = err(extra);
            assert!(e.contains(key), "{extra}: {e}");
        }
        let e = Config::from_toml(
            &MINIMAL.replace("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19", "*123"),
        )
        .unwrap_err();
        assert!(e.contains("users[0].password_native"), "{e}");
        let e = Config::from_toml(&MINIMAL.replace("127.0.0.1:3306", "127.0.0.1")).unwrap_err();
        assert!(e.contains("backend.primary"), "{e}");
    }

    #[test]
    fn the_global_binlog_is_off_by_default_and_checked_when_on() {
        let c = Config::from_toml(MINIMAL).unwrap();
        assert!(!c.binlog.enabled());
        let on = "[binlog]\ndir = \"/tmp/gb\"\nusers = [\"app\"]";
        let c = Config::from_toml(&format!("{on}\n{MINIMAL}")).unwrap();
        assert!(c.binlog.enabled());
        // Set, binlog.users narrows; unset, the backends' grants alone decide.
        assert_eq!(c.binlog.users, Some(vec!["app".to_owned()]));
        let unset = Config::from_toml(&format!("[binlog]\ndir = \"/tmp/gb\"\n{MINIMAL}")).unwrap();
        assert_eq!(unset.binlog.users, None);
        assert_eq!(c.binlog.base_name, "manifold-bin");
        assert_eq!(
            c.binlog.heartbeat_interval,
            std::time::Duration::from_millis(100)
        );
        // A cluster name that cannot go in an origin record: refused only with the binlog on.
        let odd = "[[clusters]]\nname = \"east 1\"\nprimary = \"10.0.0.9:3306\"";
        Config::from_toml(&format!("{odd}\n{MINIMAL}")).unwrap();
        let e = err(&format!("{odd}\n{on}"));
        assert!(
            e.contains("clusters[0].name") && e.contains("east 1"),
            "{e}"
        );
        for (extra, key) in [
            (
                "[binlog]\ndir = \"/tmp/gb\"\nusers = [\"nobody\"]",
                "binlog.users",
            ),
            (
                "[binlog]\ndir = \"/tmp/gb\"\nserver_id = 0",
                "binlog.server_id",
            ),
            (
                "[binlog]\ndir = \"/tmp/gb\"\nheartbeat_table = \"hb\"",
                "binlog.heartbeat_table",
            ),
            (
                "[binlog]\ndir = \"/tmp/gb\"\nmax_file_size = \"1K\"",
                "binlog.max_file_size",
            ),
            (
                "[binlog]\ndir = \"/tmp/gb\"\nretention = \"1d\"",
                "retention",
            ),
        ] {
            let e = err(extra);
            assert!(e.contains(key), "{extra}: {e}");
        }
    }

    #[test]
    fn the_redis_door_may_not_share_the_mysql_port() {
        assert!(super::same_port("0.0.0.0:6033", "127.0.0.1:6033"));
        assert!(super::same_port("127.0.0.1:6033", "127.0.0.1:6033"));
        assert!(super::same_port("[::]:6033", "127.0.0.1:6033"));
        assert!(!super::same_port("127.0.0.1:6033", "127.0.0.2:6033"));
        assert!(
            !super::same_port("127.0.0.1:0", "127.0.0.1:0"),
            "each gets its own port"
        );
        assert!(!super::same_port("0.0.0.0:6380", "0.0.0.0:6033"));
        // Every address of a list is checked.
        let e = err("[redis]\nlisten = \"127.0.0.1:7000 0.0.0.0:6033\"");
        assert!(
            e.contains("redis.listen") && e.contains("mysql.listen"),
            "{e}"
        );
        let e = err("[redis]\nlisten = \"[::1]:7000\"\ntls_listen = [\"[::]:7000\"]");
        assert!(e.contains("redis.tls_listen"), "{e}");
    }

    #[test]
    fn the_redis_door_listens_on_a_list() {
        let c = Config::from_toml(MINIMAL).unwrap();
        assert_eq!(c.redis.listen, "127.0.0.1:6380 -[::1]:6380");
        let c = Config::from_toml(&format!(
            "[redis]\nlisten = [\"127.0.0.1:7000\", \"-[::1]:7000\"]\n{MINIMAL}"
        ))
        .unwrap();
        let addrs =
            manifold_frontend_redis::config::listen_addrs("redis.listen", &c.redis.listen).unwrap();
        assert_eq!(addrs.len(), 2);
        assert!(!addrs[0].optional && addrs[1].optional);
        let c = Config::from_toml(&format!("[redis]\nlisten = \"\"\n{MINIMAL}")).unwrap();
        assert!(c.redis.listen.is_empty());
        let e = err("[redis]\nlisten = [\"127.0.0.1:7000\", \"x\"]");
        assert!(e.contains("redis.listen") && e.contains("'x'"), "{e}");
    }
}
