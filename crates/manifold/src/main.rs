#![forbid(unsafe_code)]
//! The manifold command line: flags and subcommands, logging, run until a signal.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use manifold_frontend_mysql::UserConfig;
use manifold_mysql_proto::auth;

use manifold::config::Config;

#[derive(Parser, Debug)]
#[command(
    name = "manifold",
    version,
    about = "A gateway in front of MySQL/MariaDB fleets"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// Configuration file (TOML); see manifold.example.toml.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Primary backend, host:port (overrides backend.primary).
    #[arg(long)]
    primary: Option<String>,
    /// Replica backend, host:port; repeatable (overrides backend.replicas).
    #[arg(long)]
    replica: Vec<String>,
    /// A user clients log in as, NAME:PASSWORD; manifold logs into the backends with the same
    /// credentials. Repeatable; added to the file's users.
    #[arg(long)]
    user: Vec<String>,
    /// Address for MySQL clients (overrides mysql.listen; default 0.0.0.0:6033).
    #[arg(long)]
    listen: Option<String>,
    /// Address for Redis clients, host:port; repeatable, or several separated by commas
    /// (overrides redis.listen; default the loopback only: 127.0.0.1:6380 and [::1]:6380;
    /// "" = off). "-" before an address: skipped if this host does not have it.
    #[arg(long)]
    redis_listen: Vec<String>,
    /// Address of the Redis door's TLS port; repeatable as --redis-listen (overrides
    /// redis.tls_listen; default "" = off).
    #[arg(long)]
    redis_tls_listen: Vec<String>,
    /// Worker threads (overrides engine.threads; 0 = one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Directory for what manifold generates and keeps (TLS certificate, RSA key); overrides
    /// data_dir (default: $XDG_STATE_HOME/manifold, else ./manifold-data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// TLS for clients: auto (default: the configured certificate, else one generated in the
    /// data directory) or off (overrides mysql.tls.mode).
    #[arg(long)]
    tls: Option<String>,
    /// Certificate (PEM) offered to clients for TLS (overrides mysql.tls.cert).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// TLS to backends: as_client (default: when the client uses TLS), disabled, preferred,
    /// required, verify_ca, verify_identity.
    #[arg(long)]
    backend_tls: Option<String>,
    /// Admin port credentials, NAME:PASSWORD (override admin.user and admin.password).
    #[arg(long)]
    admin_user: Option<String>,
    /// Address of the admin port (overrides admin.listen; default 127.0.0.1:6032; "" = off).
    #[arg(long)]
    admin_listen: Option<String>,
    /// Address of /metrics and /status (overrides admin.http_listen; default 127.0.0.1:6070;
    /// "" = off).
    #[arg(long)]
    http_listen: Option<String>,
    /// Turn the global binlog on, its files in DIR (overrides binlog.dir): every cluster's
    /// primary is a source; users whose backend login holds REPLICATION SLAVE on every
    /// primary may read it.
    #[arg(long)]
    binlog_dir: Option<PathBuf>,
    /// Log filter (overrides log.level), e.g. "info" or "debug".
    #[arg(long)]
    log_level: Option<String>,
    /// The fleet's registry, schema.table on the first cluster's primary (overrides
    /// fleet.table; default manifold.fleet; "" = this manifold runs alone).
    #[arg(long)]
    fleet_table: Option<String>,
    /// Where the fleet's other instances reach this one (overrides fleet.listen; default
    /// 127.0.0.1:0).
    #[arg(long)]
    fleet_listen: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Validate a configuration file and exit (0 = valid).
    CheckConfig { file: PathBuf },
    /// Print the hashes to put in a [[users]] entry for a password.
    HashPassword { password: String },
}

fn user_from_flag(flag: &str) -> Result<UserConfig, String> {
    let (name, password) = flag
        .split_once(':')
        .ok_or_else(|| format!("--user {flag}: expected NAME:PASSWORD"))?;
    if name.is_empty() {
        return Err(format!("--user {flag}: empty user name"));
    }
    Ok(manifold::config::user_with_password(name, password))
}

fn build_config(cli: &Cli) -> Result<Config, String> {
    let mut cfg = match &cli.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            toml::from_str::<Config>(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => Config::default(),
    };
    if let Some(p) = &cli.primary {
        cfg.backend.primary.clone_from(p);
    }
    if !cli.replica.is_empty() {
        cfg.backend.replicas = cli
            .replica
            .iter()
            .map(|r| manifold_router::ReplicaEntry::Addr(r.clone()))
            .collect();
    }
    for u in &cli.user {
        cfg.users.push(user_from_flag(u)?);
    }
    if let Some(l) = &cli.listen {
        cfg.mysql.listen.clone_from(l);
    }
    if !cli.redis_listen.is_empty() {
        cfg.redis.listen = cli.redis_listen.join(" ");
    }
    if !cli.redis_tls_listen.is_empty() {
        cfg.redis.tls_listen = cli.redis_tls_listen.join(" ");
    }
    if let Some(t) = cli.threads {
        cfg.engine.threads = t;
    }
    if let Some(d) = &cli.data_dir {
        cfg.data_dir = Some(d.clone());
    }
    if let Some(m) = &cli.tls {
        cfg.mysql.tls.mode = toml::Value::String(m.clone())
            .try_into()
            .map_err(|_| format!("--tls {m}: expected auto or off"))?;
    }
    if let (Some(c), Some(k)) = (&cli.tls_cert, &cli.tls_key) {
        cfg.mysql.tls.cert = Some(c.clone());
        cfg.mysql.tls.key = Some(k.clone());
    }
    if let Some(m) = &cli.backend_tls {
        cfg.backend.tls.mode = toml::Value::String(m.clone())
            .try_into()
            .map_err(|_| format!("--backend-tls {m}: expected as_client, disabled, preferred, required, verify_ca or verify_identity"))?;
    }
    if let Some(flag) = &cli.admin_user {
        let (name, password) = flag
            .split_once(':')
            .ok_or_else(|| format!("--admin-user {flag}: expected NAME:PASSWORD"))?;
        name.clone_into(&mut cfg.admin.user);
        password.clone_into(&mut cfg.admin.password);
    }
    if let Some(l) = &cli.admin_listen {
        cfg.admin.listen.clone_from(l);
    }
    if let Some(l) = &cli.http_listen {
        cfg.admin.http_listen.clone_from(l);
    }
    if let Some(dir) = &cli.binlog_dir {
        // Who may read it is what the servers' grants say (binlog.users only narrows that).
        cfg.binlog.dir.clone_from(dir);
    }
    if let Some(l) = &cli.log_level {
        cfg.log.level.clone_from(l);
    }
    if let Some(t) = &cli.fleet_table {
        cfg.fleet.table.clone_from(t);
    }
    if let Some(l) = &cli.fleet_listen {
        cfg.fleet.listen.clone_from(l);
    }
    cfg.validate()?;
    Ok(cfg)
}

/// Logs to stderr through a filter `SET GLOBAL log.level` (and a reload) can replace.
fn init_logging(level: &str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_writer(std::io::stderr),
        )
        .init();
    let _ = manifold::settings::LOG_FILTER.set(Box::new(move |text: &str, apply: bool| {
        let filter = EnvFilter::try_new(text).map_err(|e| e.to_string())?;
        if apply {
            handle.reload(filter).map_err(|e| e.to_string())?;
        }
        Ok(())
    }));
}

fn run(cfg: &Config, cli: Cli) -> Result<(), String> {
    // SIGHUP is caught from before the server starts: one sent while it starts (a service
    // manager reloading early) must not end the process, as the default action would.
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let hangup = {
        let _in = signals.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| format!("cannot catch SIGHUP: {e}"))?
    };
    let reloadable = cli.config.is_some();
    let source: manifold::settings::ConfigSource = Box::new(move || build_config(&cli));
    let server = manifold::start_with_reload(cfg, reloadable.then_some(source))?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        listen = %server.mysql_addr(),
        threads = server.engine.threads(),
        primary = %cfg.backend.primary,
        replicas = ?cfg.backend.replicas.iter().map(manifold_router::ReplicaEntry::addr).collect::<Vec<_>>(),
        users = cfg.users.len(),
        tls = server.shared.tls.is_some(),
        "manifold serving MySQL clients"
    );
    let redis = server.redis_addrs();
    if !redis.is_empty() {
        tracing::info!("{}", door_opened("Redis door", &redis));
    }
    let redis_tls = server.redis_tls_addrs();
    if !redis_tls.is_empty() {
        tracing::info!("{}", door_opened("Redis door's TLS port", &redis_tls));
    }
    let report = serve_until_stopped(server, &signals, hangup, cfg.engine.shutdown_timeout);
    tracing::info!(
        drained = report.drained,
        aborted = report.aborted,
        "manifold stopped"
    );
    Ok(())
}

/// The start-up line of a door: where it listens, and, when that is the loopback only, how
/// to open it to the network.
fn door_opened(what: &str, addrs: &[std::net::SocketAddr]) -> String {
    let list = addrs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" and ");
    if addrs.iter().all(|a| a.ip().is_loopback()) {
        let flag = if what.contains("TLS") {
            "--redis-tls-listen"
        } else {
            "--redis-listen"
        };
        let port = addrs[0].port();
        format!(
            "{what} open on {list} (loopback only; {flag} 0.0.0.0:{port} to open it to the network)"
        )
    } else {
        format!("{what} open on {list}")
    }
}

/// Serves until SIGTERM or SIGINT, reloading the configuration on each SIGHUP, then drains.
fn serve_until_stopped(
    server: manifold::Server,
    signals: &tokio::runtime::Runtime,
    mut hangup: tokio::signal::unix::Signal,
    shutdown_timeout: std::time::Duration,
) -> manifold_engine::ShutdownReport {
    use manifold_admin::Control;
    let settings = server.settings.clone();
    let waited = signals.block_on(async {
        let stop = manifold_engine::wait_for_signal();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                name = &mut stop => return name,
                _ = hangup.recv() => match settings.reload_config() {
                    Ok(changes) => tracing::info!(changes = changes.len(), "SIGHUP: configuration reloaded"),
                    Err(e) => tracing::error!(error = %e, "SIGHUP: configuration not reloaded, nothing changed"),
                },
            }
        }
    });
    match waited {
        Ok(name) => tracing::info!(signal = name, "shutdown requested"),
        Err(e) => tracing::error!(error = %e, "cannot wait for signals; shutting down"),
    }
    server.shutdown(shutdown_timeout)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Cmd::CheckConfig { file }) => match Config::load(file) {
            Ok(_) => {
                println!("{}: OK", file.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        },
        Some(Cmd::HashPassword { password }) => {
            println!(
                "password_native = \"{}\"",
                auth::format_native_hash(&auth::native_stored_hash(password.as_bytes()))
            );
            println!(
                "password_sha2 = \"{}\"",
                auth::format_sha2_hash(&auth::sha2_stored_hash(password.as_bytes()))
            );
            ExitCode::SUCCESS
        }
        None => {
            let cfg = match build_config(&cli) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("manifold: {e}");
                    return ExitCode::from(2);
                }
            };
            init_logging(&cfg.log.level);
            match run(&cfg, cli) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e}");
                    eprintln!("manifold: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
