//! The tunables: what `SHOW VARIABLES` lists, `SET GLOBAL` changes and `RELOAD CONFIG`
//! (or SIGHUP) re-reads. Each is named by its configuration key. Runtime tunables take
//! effect at once, in every worker; the others are listed with the value they started with
//! and change at restart only, and a reload that finds them changed in the file says so
//! rather than ignoring them.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use manifold_admin::{Change, Control, SetError, Variable};
use manifold_engine::duration_serde::{format_duration, parse_duration};
use manifold_frontend_mysql::{Shared, Users};

use crate::config::Config;

/// Checks a log filter and, when told to, makes it the running process's; set by the binary
/// when it installs its subscriber (a server started as a library logs however its host
/// decided, and only records the value).
pub type LogFilterHook = Box<dyn Fn(&str, bool) -> Result<(), String> + Send + Sync>;
pub static LOG_FILTER: OnceLock<LogFilterHook> = OnceLock::new();

/// Where a reload reads its configuration from: the file, with the command line's
/// overrides applied again.
pub type ConfigSource = Box<dyn Fn() -> Result<Config, String> + Send + Sync>;

/// The running server's tunables.
pub struct Settings {
    shared: Arc<Shared>,
    /// The configuration the server started with: what restart-only settings run with.
    started: Config,
    /// The log filter now.
    log_level: Mutex<String>,
    /// `RUST_LOG` set the filter at start, and nothing changed it since: a reload of a file
    /// whose `log.level` is as it was keeps it.
    rust_log_wins: std::sync::atomic::AtomicBool,
    source: Option<ConfigSource>,
    /// The users as last applied (at start or by a reload), to tell whether a reload
    /// changes them.
    users_applied: Mutex<String>,
    /// One reload or change at a time.
    changing: Mutex<()>,
}

type Get = fn(&Settings) -> String;
/// Checks a value and, unless only checking, applies it.
type Set = fn(&Settings, &str, bool) -> Result<(), String>;

struct Tunable {
    name: &'static str,
    range: &'static str,
    help: &'static str,
    /// The value as a configuration states it.
    of: fn(&Config) -> String,
    /// For runtime tunables: the value running now, and how to change it.
    live: Option<(Get, Set)>,
}

fn on_off(b: bool) -> String {
    if b { "ON" } else { "OFF" }.into()
}

/// Parses a value given to `SET GLOBAL` or read from the file. Like the other `parse_*`, its
/// error is the message the operator reads, hence a `String`.
fn parse_bool(name: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_uppercase().as_str() {
        "ON" | "1" | "TRUE" => Ok(true),
        "OFF" | "0" | "FALSE" => Ok(false),
        _ => Err(format!("{name}: '{v}' is not ON or OFF")),
    }
}

fn parse_int(name: &str, v: &str, min: u64, max: u64) -> Result<u64, String> {
    let n: u64 = v
        .parse()
        .map_err(|_| format!("{name}: '{v}' is not a whole number in {min}..={max}"))?;
    if !(min..=max).contains(&n) {
        return Err(format!("{name}: {n} is outside its range {min}..={max}"));
    }
    Ok(n)
}

fn parse_duration_in(name: &str, v: &str, max: Duration) -> Result<Duration, String> {
    let d = if v == "0" {
        Duration::ZERO
    } else {
        parse_duration(v).map_err(|e| format!("{name}: '{v}': {e} (e.g. 500ms, 2s)"))?
    };
    if d > max {
        return Err(format!(
            "{name}: {v} is outside its range 0..={}",
            format_duration(max)
        ));
    }
    Ok(d)
}

fn load_usize(a: &std::sync::atomic::AtomicUsize) -> usize {
    a.load(std::sync::atomic::Ordering::Relaxed)
}

fn store<T: Copy>(apply: bool, f: impl FnOnce(T), v: T) {
    if apply {
        f(v);
    }
}

const MAX_SLOW: Duration = Duration::from_secs(3600);

/// Checks the runtime settings of `cfg` against their ranges (what `SET GLOBAL` accepts), so
/// that a file is refused at start, by `check-config` and by a reload alike. The error is
/// the message the operator reads, hence a `String`.
pub fn check_ranges(cfg: &Config) -> Result<(), String> {
    parse_int(
        "mysql.max_connections",
        &cfg.mysql.max_connections.to_string(),
        1,
        1_000_000,
    )?;
    parse_int(
        "pool.max_size",
        &cfg.pool.max_size.to_string(),
        cfg.pool.min_idle.max(1) as u64,
        100_000,
    )?;
    parse_duration_in(
        "log.slow_query_threshold",
        &format_duration(cfg.log.slow_query_threshold),
        MAX_SLOW,
    )?;
    parse_int(
        "log.connection_log_rate",
        &cfg.log.connection_log_rate.to_string(),
        0,
        100_000,
    )?;
    parse_int(
        "admin.query_digests_max",
        &cfg.admin.query_digests_max.to_string(),
        1,
        100_000,
    )?;
    parse_int(
        "security.failed_login_threshold",
        &cfg.security.failed_login_threshold.to_string(),
        0,
        1000,
    )?;
    parse_duration_in(
        "security.max_login_delay",
        &format_duration(cfg.security.max_login_delay),
        manifold_engine::login_throttle::MAX_MAX_DELAY,
    )?;
    Ok(())
}

fn tunables() -> Vec<Tunable> {
    use std::sync::atomic::Ordering::Relaxed;
    vec![
        Tunable {
            name: "mysql.max_connections",
            range: "1..=1000000",
            help: "Client connections open at once; more are refused with ERR 1040.",
            of: |c| c.mysql.max_connections.to_string(),
            live: Some((
                |s| load_usize(&s.shared.settings.max_connections).to_string(),
                |s, v, apply| {
                    let n = parse_int("mysql.max_connections", v, 1, 1_000_000)?;
                    store(
                        apply,
                        |n| s.shared.settings.max_connections.store(n, Relaxed),
                        n as usize,
                    );
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "pool.max_size",
            range: "pool.min_idle..=100000",
            help: "Most backend connections each worker opens to one node (the adaptive limit's ceiling); lowering it closes connections as they come back.",
            of: |c| c.pool.max_size.to_string(),
            live: Some((
                |s| s.shared.pool_limits.max_size().to_string(),
                |s, v, apply| {
                    let min_idle = s.shared.pool_limits.min_idle();
                    let n = parse_int("pool.max_size", v, min_idle.max(1) as u64, 100_000)
                        .map_err(|e| format!("{e} (pool.min_idle is {min_idle})"))?
                        as usize;
                    if apply {
                        s.shared.pool_limits.set(n, min_idle)?;
                    }
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "pool.min_idle",
            range: "0..=pool.max_size",
            help: "Idle connections each worker keeps open and logged in to each node.",
            of: |c| c.pool.min_idle.to_string(),
            live: Some((
                |s| s.shared.pool_limits.min_idle().to_string(),
                |s, v, apply| {
                    let max = s.shared.pool_limits.max_size();
                    let n = parse_int("pool.min_idle", v, 0, max as u64)? as usize;
                    if apply {
                        s.shared.pool_limits.set(max, n)?;
                    }
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "log.level",
            range: "error|warn|info|debug|trace, or a filter such as info,manifold_backend=debug",
            help: "What is logged (RUST_LOG, when set at start, wins until changed here).",
            of: |c| c.log.level.clone(),
            live: Some((
                |s| s.log_level.lock().expect("log level").clone(),
                |s, v, apply| {
                    let v = v.trim();
                    if v.is_empty() {
                        return Err("log.level: empty filter".into());
                    }
                    if let Some(hook) = LOG_FILTER.get() {
                        hook(v, apply).map_err(|e| format!("log.level: '{v}': {e}"))?;
                    }
                    if apply {
                        v.clone_into(&mut s.log_level.lock().expect("log level"));
                        s.rust_log_wins.store(false, Relaxed);
                    }
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "log.slow_query_threshold",
            range: "0 (off)..=1h",
            help: "Statements slower than this are logged (target manifold::slow_query) and counted in Slow_queries.",
            of: |c| format_duration(c.log.slow_query_threshold),
            live: Some((
                |s| {
                    let ns = s.shared.settings.slow_query_threshold_ns.load(Relaxed);
                    format_duration(Duration::from_nanos(ns))
                },
                |s, v, apply| {
                    let d = parse_duration_in("log.slow_query_threshold", v, MAX_SLOW)?;
                    store(
                        apply,
                        |ns| s.shared.settings.slow_query_threshold_ns.store(ns, Relaxed),
                        d.as_nanos() as u64,
                    );
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "log.connection_log_rate",
            range: "0..=100000",
            help: "Connection log lines (refused clients, failed logins) a second at most; 0 logs none.",
            of: |c| c.log.connection_log_rate.to_string(),
            live: Some((
                |s| s.shared.settings.connection_log_rate.load(Relaxed).to_string(),
                |s, v, apply| {
                    let n = parse_int("log.connection_log_rate", v, 0, 100_000)?;
                    store(
                        apply,
                        |n| s.shared.settings.connection_log_rate.store(n, Relaxed),
                        n,
                    );
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "security.failed_login_threshold",
            range: "0 (off)..=1000",
            help: "Consecutive failed logins of a user from an address (any door) before its next attempts wait: 1s, doubling, up to security.max_login_delay; 10 times as many of all users delay the address.",
            of: |c| c.security.failed_login_threshold.to_string(),
            live: Some((
                |s| s.shared.logins.threshold().to_string(),
                |s, v, apply| {
                    let n = parse_int("security.failed_login_threshold", v, 0, 1000)?;
                    store(apply, |n| s.shared.logins.set_threshold(n), n as u32);
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "security.max_login_delay",
            range: "0 (off)..=1h",
            help: "Longest wait of a login from an address that keeps failing.",
            of: |c| format_duration(c.security.max_login_delay),
            live: Some((
                |s| format_duration(s.shared.logins.max_delay()),
                |s, v, apply| {
                    let d = parse_duration_in(
                        "security.max_login_delay",
                        v,
                        manifold_engine::login_throttle::MAX_MAX_DELAY,
                    )?;
                    store(apply, |d| s.shared.logins.set_max_delay(d), d);
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "admin.stage_histograms",
            range: "ON|OFF",
            help: "Record per-stage latency histograms (PERF HIST, /metrics).",
            of: |c| on_off(c.admin.stage_histograms),
            live: Some((
                |s| on_off(s.shared.settings.stage_histograms.load(Relaxed)),
                |s, v, apply| {
                    let b = parse_bool("admin.stage_histograms", v)?;
                    store(
                        apply,
                        |b| s.shared.settings.stage_histograms.store(b, Relaxed),
                        b,
                    );
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "admin.query_digests",
            range: "ON|OFF",
            help: "Keep per-digest statement statistics (SHOW QUERY DIGESTS).",
            of: |c| on_off(c.admin.query_digests),
            live: Some((
                |s| on_off(s.shared.settings.query_digests.load(Relaxed)),
                |s, v, apply| {
                    let b = parse_bool("admin.query_digests", v)?;
                    store(
                        apply,
                        |b| s.shared.settings.query_digests.store(b, Relaxed),
                        b,
                    );
                    Ok(())
                },
            )),
        },
        Tunable {
            name: "admin.query_digests_max",
            range: "1..=100000",
            help: "Statement shapes each worker keeps statistics for; later shapes share one row.",
            of: |c| c.admin.query_digests_max.to_string(),
            live: Some((
                |s| load_usize(&s.shared.settings.query_digests_max).to_string(),
                |s, v, apply| {
                    let n = parse_int("admin.query_digests_max", v, 1, 100_000)?;
                    store(
                        apply,
                        |n| s.shared.settings.query_digests_max.store(n, Relaxed),
                        n as usize,
                    );
                    Ok(())
                },
            )),
        },
        restart("engine.threads", "0 (one per core)..=1024", "Worker threads; each owns its listening socket (SO_REUSEPORT), sessions and pools, so the count is fixed while running.", |c| c.engine.threads.to_string()),
        restart("engine.balance_connections", "true|false", "Each accepted connection goes to the worker with the fewest client connections.", |c| c.engine.balance_connections.to_string()),
        restart("mysql.listen", "host:port", "Address for MySQL clients.", |c| c.mysql.listen.clone()),
        restart("mysql.max_allowed_packet", "1K..=1G", "Largest command a client may send.", |c| c.mysql.max_allowed_packet.to_string()),
        restart("mysql.connect_timeout", "> 0", "Time a client has to finish its login.", |c| format_duration(c.mysql.connect_timeout)),
        restart("mysql.wait_timeout", "> 0", "Idle time after which a client is disconnected.", |c| format_duration(c.mysql.wait_timeout)),
        restart("mysql.multiplexing", "true|false", "Sessions borrow backend connections per statement.", |c| c.mysql.multiplexing.to_string()),
        restart("redis.listen", "host:port list (-host:port: if the host has it), or empty (off)", "Addresses for Redis clients (default the loopback only).", |c| c.redis.listen.clone()),
        restart("redis.proto_max_bulk_len", "1M..", "Largest argument of a Redis request.", |c| c.redis.proto_max_bulk_len.to_string()),
        restart("redis.max_clients", "1..", "Redis clients accepted in all.", |c| c.redis.max_clients.to_string()),
        restart("redis.idle_timeout", "0 (never)..", "Idle time after which a Redis client is disconnected.", |c| format_duration(c.redis.idle_timeout)),
        restart("redis.client_query_buffer_limit", "1M..", "Largest request a Redis client may have buffered.", |c| c.redis.client_query_buffer_limit.to_string()),
        restart("redis.client_output_buffer_limit", "<class> <hard> <soft> <seconds>...", "Replies a Redis client may have waiting (normal, pubsub classes).", |c| c.redis.client_output_buffer_limit.clone()),
        restart("redis.max_memory_clients", "0 (none)..", "Every Redis client's buffers together; past it the largest clients are closed.", |c| c.redis.max_memory_clients.to_string()),
        restart("redis.write_timeout", "0 (never)..", "A Redis client that takes none of its replies this long is disconnected.", |c| format_duration(c.redis.write_timeout)),
        restart("pool.idle_timeout", "> 0", "Idle connections above min_idle unused this long close.", |c| format_duration(c.pool.idle_timeout)),
        restart("pool.connect_timeout", "> 0", "Limit for connecting and logging in to a backend.", |c| format_duration(c.pool.connect_timeout)),
        restart("pool.wait_timeout", "> 0", "How long a statement waits for a free backend connection.", |c| format_duration(c.pool.wait_timeout)),
        restart("pool.max_backend_connections", "0 (per-worker max_size only)..", "Connections to one node over all workers.", |c| c.pool.max_backend_connections.to_string()),
        restart("pool.pipeline_depth", "0 (off)..", "Statements of other sessions written behind a borrower's (default 8).", |c| c.pool.pipeline_depth.to_string()),
        restart("pool.adaptive", "true|false", "Each pool's in-use connections follow an adaptive limit (Vegas) under max_size; false: up to max_size.", |c| c.pool.adaptive.to_string()),
        restart("pool.min_limit", "1..", "The adaptive limit's floor, per worker and node.", |c| c.pool.min_limit.to_string()),
        restart("pool.max_prepared_statements", "1..", "Prepared statements one backend connection keeps.", |c| c.pool.max_prepared_statements.to_string()),
        restart("backend.primary", "host:port", "The primary.", |c| c.backend.primary.clone()),
        restart("backend.replicas", "list of host:port", "The replicas.", |c| c.backend.replicas.iter().map(manifold_router::ReplicaEntry::addr).collect::<Vec<_>>().join(",")),
        restart("routing.read_write_split", "true|false", "Reads go to replicas by weight.", |c| c.routing.read_write_split.to_string()),
        restart("routing.causal_reads", "session|global|none", "What a read waits for on a replica.", |c| format!("{:?}", c.routing.causal_reads).to_ascii_lowercase()),
        restart("routing.causal_read_timeout", "> 0", "How long a read waits for a replica to catch up before the primary answers.", |c| format_duration(c.routing.causal_read_timeout)),
        restart("routing.failover_timeout", ">= 0", "How long writes wait for a primary.", |c| format_duration(c.routing.failover_timeout)),
        restart("routing.auto_promote", "true|false", "Promote a replica when the primary is lost.", |c| c.routing.auto_promote.to_string()),
        restart("routing.transaction_replay", "true|false", "A transaction whose backend connection is lost before COMMIT runs again on the primary, unnoticed when its answers are the same.", |c| c.routing.transaction_replay.to_string()),
        restart("routing.transaction_replay_max_size", "1K..=1G", "What a session's open transaction may keep for its replay; past it, no replay.", |c| c.routing.transaction_replay_max_size.to_string()),
        restart("admin.listen", "host:port, or empty (off)", "The admin port.", |c| c.admin.listen.clone()),
        restart("admin.http_listen", "host:port, or empty (off)", "HTTP: /, /metrics, /status.", |c| c.admin.http_listen.clone()),
        restart("admin.user", "a name", "The admin port's user.", |c| c.admin.user.clone()),
        restart("binlog.dir", "a directory, or empty (off)", "Where the global binlog's files go.", |c| c.binlog.dir.display().to_string()),
        restart("binlog.heartbeat_interval", "> 0", "How often a heartbeat row is written on every primary: the longest an idle source holds the global binlog back.", |c| format_duration(c.binlog.heartbeat_interval)),
        restart("binlog.max_file_size", "4K..1G", "A global binlog file rotates before a transaction would take it past this size.", |c| c.binlog.max_file_size.to_string()),
        restart("binlog.memory_budget", "1M..", "Memory for transactions waiting for the merge; past it they spill to disk.", |c| c.binlog.memory_budget.to_string()),
        restart("binlog.retention_size", "0 (no limit)..", "The oldest global binlog files are removed while all together exceed this.", |c| c.binlog.retention_size.to_string()),
        restart("binlog.retention_age", "0 (forever)..", "Global binlog files last written longer ago than this are removed.", |c| format_duration(c.binlog.retention_age)),
    ]
}

fn restart(
    name: &'static str,
    range: &'static str,
    help: &'static str,
    of: fn(&Config) -> String,
) -> Tunable {
    Tunable {
        name,
        range,
        help,
        of,
        live: None,
    }
}

impl Settings {
    /// The tunables of a server started with `started`, which gets their values now.
    /// `source` re-reads the configuration for `RELOAD CONFIG`; `None` when there is no
    /// file to read.
    pub fn new(
        shared: Arc<Shared>,
        started: &Config,
        source: Option<ConfigSource>,
    ) -> Result<Arc<Settings>, String> {
        // RUST_LOG, when set, is the filter the process started with.
        let rust_log = std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty());
        let s = Settings {
            shared,
            started: started.clone(),
            rust_log_wins: rust_log.is_some().into(),
            log_level: Mutex::new(rust_log.unwrap_or_else(|| started.log.level.clone())),
            source,
            users_applied: Mutex::new(format!("{:?}", started.users)),
            changing: Mutex::new(()),
        };
        for t in tunables() {
            if let Some((_, set)) = t.live {
                if t.name != "log.level" {
                    set(&s, &(t.of)(started), true)?;
                }
            }
        }
        Ok(Arc::new(s))
    }

    /// Applies `new`'s runtime settings, all or (when one is refused) none, and lists what
    /// differs from what runs now.
    fn apply(&self, new: &Config) -> Result<Vec<Change>, String> {
        let users = Users::from_config(&new.users)?;
        let mut changes = Vec::new();
        let mut to_apply = Vec::new();
        for t in tunables() {
            let wanted = (t.of)(new);
            if t.name == "log.level"
                && self
                    .rust_log_wins
                    .load(std::sync::atomic::Ordering::Relaxed)
                && wanted == self.started.log.level
            {
                continue;
            }
            if let Some((get, set)) = t.live {
                let now = get(self);
                if now != wanted {
                    changes.push(Change {
                        name: t.name.into(),
                        old: now,
                        new: wanted.clone(),
                        applied: true,
                    });
                    to_apply.push((t.name, set, wanted));
                }
            } else {
                let running = (t.of)(&self.started);
                if running != wanted {
                    changes.push(Change {
                        name: t.name.into(),
                        old: running,
                        new: wanted,
                        applied: false,
                    });
                }
            }
        }
        // The pool's two limits are checked against each other, as the file has them.
        let pool_changed = to_apply.iter().any(|(n, ..)| n.starts_with("pool."));
        to_apply.retain(|(n, ..)| !n.starts_with("pool."));
        for (_, set, v) in &to_apply {
            set(self, v, false)?;
        }
        if pool_changed {
            self.shared
                .pool_limits
                .set(new.pool.max_size, new.pool.min_idle)?;
        }
        for (_, set, v) in &to_apply {
            set(self, v, true)?;
        }
        let new_users = format!("{:?}", new.users);
        let mut applied_users = self.users_applied.lock().expect("users applied");
        if new_users != *applied_users {
            changes.push(Change {
                name: "users".into(),
                old: "(as before)".into(),
                new: format!("{} users", new.users.len()),
                applied: true,
            });
        }
        self.shared.users.store(Arc::new(users));
        *applied_users = new_users;
        // The global binlog's narrowing applies at once; the grants are learned again.
        let listed = |l: Option<Vec<String>>| {
            l.map_or_else(|| "(unset: the grants decide)".to_owned(), |u| u.join(","))
        };
        let mut wanted = new.binlog.users.clone();
        if let Some(u) = &mut wanted {
            u.sort();
        }
        let listed_now = self.shared.binlog_access.listed();
        if listed_now != wanted {
            changes.push(Change {
                name: "binlog.users".into(),
                old: listed(listed_now),
                new: listed(wanted),
                applied: true,
            });
        }
        self.shared
            .binlog_access
            .configure(new.binlog.users.as_deref());
        // Sections whose other keys changed: named, not silently ignored. Runtime keys are
        // compared above; here they are taken as they run.
        let mut new_mysql = new.mysql.clone();
        new_mysql.max_connections = self.started.mysql.max_connections;
        // Named on its own below.
        new_mysql.tls = self.started.mysql.tls.clone();
        let mut new_admin = new.admin.clone();
        new_admin.stage_histograms = self.started.admin.stage_histograms;
        new_admin.query_digests = self.started.admin.query_digests;
        new_admin.query_digests_max = self.started.admin.query_digests_max;
        let mut new_pool = new.pool.clone();
        new_pool.max_size = self.started.pool.max_size;
        new_pool.min_idle = self.started.pool.min_idle;
        let sections: [(&str, String, String); 9] = [
            (
                "pool",
                format!("{:?}", self.started.pool),
                format!("{new_pool:?}"),
            ),
            (
                "engine",
                format!("{:?}", self.started.engine),
                format!("{:?}", new.engine),
            ),
            (
                "mysql",
                format!("{:?}", self.started.mysql),
                format!("{new_mysql:?}"),
            ),
            (
                "admin",
                format!("{:?}", self.started.admin),
                format!("{new_admin:?}"),
            ),
            (
                "backend",
                format!("{:?}", self.started.backend),
                format!("{:?}", new.backend),
            ),
            (
                "clusters",
                format!("{:?}", self.started.clusters),
                format!("{:?}", new.clusters),
            ),
            (
                "routing",
                format!("{:?}", self.started.routing),
                format!("{:?}", new.routing),
            ),
            (
                "mysql.tls",
                format!("{:?}", self.started.mysql.tls),
                format!("{:?}", new.mysql.tls),
            ),
            (
                "data_dir",
                format!("{:?}", self.started.data_dir),
                format!("{:?}", new.data_dir),
            ),
        ];
        for (name, old, now) in sections {
            let named = changes
                .iter()
                .any(|c| c.name.starts_with(name) && !c.applied);
            if old != now && !named {
                changes.push(Change {
                    name: name.into(),
                    old: "(as started)".into(),
                    new: "(changed in the file)".into(),
                    applied: false,
                });
            }
        }
        Ok(changes)
    }
}

impl Control for Settings {
    fn variables(&self) -> Vec<Variable> {
        // The defaults are what a configuration that sets nothing states.
        let defaults = Config::default();
        tunables()
            .into_iter()
            .map(|t| Variable {
                name: t.name.into(),
                value: match t.live {
                    Some((get, _)) => get(self),
                    None => (t.of)(&self.started),
                },
                default: (t.of)(&defaults),
                range: t.range.into(),
                runtime: t.live.is_some(),
                help: t.help.into(),
            })
            .collect()
    }

    fn set_variable(&self, name: &str, value: &str) -> Result<(), SetError> {
        let _one = self.changing.lock().expect("settings");
        let t = tunables()
            .into_iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| SetError::Unknown(format!("Unknown system variable '{name}'")))?;
        let Some((_, set)) = t.live else {
            return Err(SetError::RestartOnly(format!(
                "Variable '{}' is a read only variable: it changes at restart (edit the configuration file)",
                t.name
            )));
        };
        set(self, value, true).map_err(SetError::Invalid)?;
        tracing::info!(
            variable = t.name,
            value,
            "setting changed by the admin port"
        );
        Ok(())
    }

    fn reload_config(&self) -> Result<Vec<Change>, String> {
        let _one = self.changing.lock().expect("settings");
        let Some(source) = &self.source else {
            return Err(
                "manifold was started without a configuration file (--config): nothing to reload"
                    .into(),
            );
        };
        let new = source()?;
        let changes = self.apply(&new)?;
        for c in &changes {
            if c.applied {
                tracing::info!(setting = %c.name, old = %c.old, new = %c.new, "configuration reloaded: applied");
            } else {
                tracing::warn!(setting = %c.name, old = %c.old, new = %c.new, "configuration reloaded: this change takes effect at restart");
            }
        }
        Ok(changes)
    }
}
