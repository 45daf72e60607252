use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::server::{Launching, Plan, Settings, STOP_GRACE};
use crate::sql::{quote_string, rows_with_headers, run_client};
use crate::{
    datadir, effective_uid, generate_tls, mariadb_client_path, mariadb_install_db_path,
    mariadbd_path, quote_identifier, random_hex, watchdog, Error, MysqlInstall, Server, TlsFiles,
};

/// How long `create_user`/`create_schema` wait for their effect to reach the replicas.
const SETUP_REPLICATION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long replicas get to connect to the primary after `START SLAVE`.
const SLAVE_START_TIMEOUT: Duration = Duration::from_secs(30);

/// What to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyConfig {
    /// Number of GTID replicas of the primary (0 gives a standalone server).
    pub replicas: usize,
    /// Generate a CA and server certificate and enable TLS on every server.
    pub tls: bool,
    /// `max_allowed_packet` of every server, in bytes.
    pub max_allowed_packet: u64,
    /// Extra `mariadbd` options such as `--innodb-buffer-pool-size=256M`; they override the
    /// testkit's defaults.
    pub extra_server_args: Vec<String>,
    /// Which server to run.
    pub flavor: Flavor,
}

/// The server a topology runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flavor {
    /// The installed `mariadbd`.
    #[default]
    MariaDb,
    /// MySQL from the root `scripts/setup-mysql` unpacks (see [`MysqlInstall`]).
    MySql,
}

impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            replicas: 2,
            tls: true,
            max_allowed_packet: 1 << 30,
            extra_server_args: Vec::new(),
            flavor: Flavor::MariaDb,
        }
    }
}

/// A running primary with GTID replicas in a private temporary directory.
///
/// Dropping it stops the servers and removes the directory. If the process dies without dropping
/// it (a `static`, a panic that aborts, SIGKILL), a watchdog does the same within about a second.
#[derive(Debug)]
pub struct Topology {
    pub primary: Server,
    pub replicas: Vec<Server>,
    /// CA, certificate and key the servers use, when TLS is on.
    pub tls: Option<TlsFiles>,
    root_password: String,
    repl_password: String,
    config: TopologyConfig,
    client: PathBuf,
    watchdog: Mutex<Option<Child>>,
    dir: Option<TempDir>,
}

impl Topology {
    /// Starts a topology; takes about a second with a warm template cache, a few without.
    pub fn start(cfg: TopologyConfig) -> Result<Topology, Error> {
        let mysql = match cfg.flavor {
            Flavor::MySql => Some(MysqlInstall::find()?),
            Flavor::MariaDb => None,
        };
        let (mariadbd, install_db) = match &mysql {
            Some(m) => (m.loader(), PathBuf::new()),
            None => (mariadbd_path()?, mariadb_install_db_path()?),
        };
        let client = mariadb_client_path()?;
        let dir = tempfile::Builder::new()
            .prefix("manifold-testkit-")
            .tempdir_in(temp_base())
            .map_err(|e| Error::io("creating the topology directory", e))?;
        let mut partial = Partial {
            watchdog: Some(watchdog::spawn(dir.path())?),
            servers: Vec::new(),
            dir: Some(dir),
        };
        let root = partial
            .dir
            .as_ref()
            .expect("set above")
            .path()
            .to_path_buf();

        let template = match &mysql {
            Some(m) => {
                let datadir = root.join("template");
                m.initialize(&datadir)?;
                datadir::Template {
                    datadir,
                    owned: true,
                }
            }
            None => datadir::template(&root, &install_db, &mariadbd)?,
        };
        let plans: Vec<Plan> = (0..=cfg.replicas)
            .map(|i| {
                let name = if i == 0 {
                    "primary".to_string()
                } else {
                    format!("replica{i}")
                };
                Plan {
                    dir: root.join(&name),
                    name,
                    server_id: u32::try_from(i + 1).expect("replica count fits in u32"),
                    is_replica: i > 0,
                }
            })
            .collect();
        // Copies are made before any server starts, so every one begins from the same pristine
        // state and none has a binlog or GTID position of its own.
        for_each_parallel(&plans, |plan| {
            std::fs::create_dir_all(&plan.dir)
                .map_err(|e| Error::io(format!("creating {}", plan.dir.display()), e))?;
            datadir::copy_tree(&template.datadir, &plan.dir.join("data"))?;
            // MySQL names a server by the UUID in auto.cnf; copies must each make their own.
            let _ = std::fs::remove_file(plan.dir.join("data").join("auto.cnf"));
            Ok(())
        })?;
        if template.owned {
            let _ = std::fs::remove_dir_all(&template.datadir);
        }

        let tls = if cfg.tls {
            Some(generate_tls(&root.join("tls"), "manifold-testkit-mariadb")?)
        } else {
            None
        };
        let settings = Settings {
            mariadbd: &mariadbd,
            mysql: mysql.as_ref(),
            run_as_root: effective_uid() == Some(0),
            max_allowed_packet: cfg.max_allowed_packet,
            tls: tls.as_ref(),
            extra_args: &cfg.extra_server_args,
        };

        // All servers boot concurrently; each one's readiness is awaited in turn.
        let launching = plans
            .into_iter()
            .map(|plan| Launching::spawn(plan, &settings))
            .collect::<Result<Vec<_>, _>>()?;
        for l in launching {
            partial.servers.push(l.finish(&settings)?);
        }

        let root_password = random_hex(12)?;
        let repl_password = random_hex(12)?;
        for_each_parallel(&partial.servers, |server| {
            secure(&client, server, &root_password, &repl_password)
        })?;

        let mut servers = std::mem::take(&mut partial.servers).into_iter();
        let primary = servers.next().expect("the primary is always planned");
        let topology = Topology {
            primary,
            replicas: servers.collect(),
            tls,
            root_password,
            repl_password,
            config: cfg,
            client,
            watchdog: Mutex::new(partial.watchdog.take()),
            dir: partial.dir.take(),
        };
        // From here on, Topology's own Drop cleans up on error.
        for_each_parallel(&topology.replicas, |replica| {
            topology.start_replication(replica)?;
            topology.wait_slave_running(replica, SLAVE_START_TIMEOUT)
        })?;
        Ok(topology)
    }

    /// One topology per process with [`TopologyConfig::default`], started on first use and never
    /// stopped by Rust: the watchdog removes it when the process exits.
    ///
    /// Tests sharing it must use their own schemas and users. Panics with the start error (every
    /// time it is called, not just the first) when it cannot start.
    pub fn shared() -> &'static Topology {
        static SHARED: OnceLock<Result<Topology, String>> = OnceLock::new();
        match SHARED
            .get_or_init(|| Topology::start(TopologyConfig::default()).map_err(|e| e.to_string()))
        {
            Ok(topology) => topology,
            Err(message) => panic!("cannot start the shared MariaDB topology: {message}"),
        }
    }

    /// Runs `sql` (any number of `;`-separated statements) as root over the unix socket and
    /// returns `mariadb -N -B` output: one line per row, tab-separated columns, no header, with
    /// tabs, newlines and backslashes inside values escaped as `\t`, `\n`, `\\` and NULL as `NULL`.
    pub fn sql(&self, server: &Server, sql: &str) -> Result<String, Error> {
        run_client(
            &self.client,
            &Self::client_args(server, &["-N", "-B"]),
            sql,
            &server.name,
        )
    }

    /// Like [`Topology::sql`], trimmed of the trailing newline; for single-value queries.
    pub fn sql_value(&self, server: &Server, sql: &str) -> Result<String, Error> {
        Ok(self.sql(server, sql)?.trim_end_matches('\n').to_string())
    }

    /// Result rows of one statement as column → value maps (same escaping as [`Topology::sql`]).
    pub fn sql_rows(
        &self,
        server: &Server,
        sql: &str,
    ) -> Result<Vec<BTreeMap<String, String>>, Error> {
        let out = run_client(
            &self.client,
            &Self::client_args(server, &["-B"]),
            sql,
            &server.name,
        )?;
        Ok(rows_with_headers(&out)
            .into_iter()
            .map(|row| row.into_iter().collect())
            .collect())
    }

    /// A `mariadb` command logged in as root to `server` over its unix socket; add arguments (for
    /// instance `-h127.0.0.1 -P<port> --protocol=tcp --ssl ...`) and run it.
    pub fn client_command(&self, server: &Server) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.client);
        cmd.args(Self::client_args(server, &[]));
        cmd
    }

    fn client_args(server: &Server, extra: &[&str]) -> Vec<OsString> {
        let mut args = vec![OsString::from(format!(
            "--defaults-file={}",
            server.client_cnf.display()
        ))];
        args.extend(extra.iter().map(OsString::from));
        args
    }

    /// Creates (or updates the password of) `user@'%'` on the primary with
    /// `mysql_native_password` and every privilege, then waits until the replicas have it.
    pub fn create_user(&self, user: &str, password: &str) -> Result<(), Error> {
        if user.is_empty() {
            return Err(Error::InvalidArgument("user name is empty".to_string()));
        }
        let account = format!("{}@'%'", quote_string(user));
        let password = quote_string(password);
        // MySQL 9 has no mysql_native_password: its accounts use caching_sha2_password.
        let identified = match self.config.flavor {
            Flavor::MariaDb => format!("VIA mysql_native_password USING PASSWORD({password})"),
            Flavor::MySql => format!("BY {password}"),
        };
        self.sql(
            &self.primary,
            &format!(
                "CREATE USER IF NOT EXISTS {account} IDENTIFIED {identified};\n\
                 ALTER USER {account} IDENTIFIED {identified};\n\
                 GRANT ALL PRIVILEGES ON *.* TO {account} WITH GRANT OPTION;\n"
            ),
        )?;
        self.wait_replicated(SETUP_REPLICATION_TIMEOUT)
    }

    /// Drops and recreates a schema on the primary, then waits until the replicas have it.
    pub fn create_schema(&self, name: &str) -> Result<(), Error> {
        let schema = quote_identifier(name);
        self.sql(
            &self.primary,
            &format!("DROP DATABASE IF EXISTS {schema};\nCREATE DATABASE {schema};\n"),
        )?;
        self.wait_replicated(SETUP_REPLICATION_TIMEOUT)
    }

    /// Waits until every running replica has applied everything in the primary's
    /// `@@gtid_binlog_pos` as of this call. Fails early when a replica's SQL thread stopped with
    /// an error.
    pub fn wait_replicated(&self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        let sql = self.dialect();
        let target = self
            .sql_value(&self.primary, sql.position)?
            .replace("\\n", "");
        if target.is_empty() {
            return Ok(());
        }
        for replica in &self.replicas {
            if replica.current_pid().is_none() {
                continue;
            }
            loop {
                // MASTER_GTID_WAIT compares against gtid_slave_pos per domain, which is exactly
                // "covers"; short waits let us notice a broken replica instead of sleeping on it.
                let remaining = deadline.saturating_duration_since(Instant::now());
                // MySQL waits forever for a timeout of 0.
                let wait = remaining
                    .clamp(Duration::from_millis(1), Duration::from_millis(500))
                    .as_secs_f64();
                let result = self.sql_value(
                    replica,
                    &format!("SELECT {}({}, {wait:.3})", sql.wait, quote_string(&target)),
                )?;
                if result == "0" {
                    break;
                }
                let status = self.replica_status(replica)?;
                let field = |k: &str| status.get(k).map_or("", String::as_str);
                if field(sql.sql_running) != "Yes" && !field("Last_SQL_Error").is_empty() {
                    return Err(Error::Replication {
                        server: replica.name.clone(),
                        detail: format!(
                            "SQL thread stopped: {} (primary at {target}, replica at {})",
                            field("Last_SQL_Error"),
                            field(sql.applied)
                        ),
                    });
                }
                if Instant::now() >= deadline {
                    return Err(Error::Timeout {
                        what: format!(
                            "{} to reach GTID {target} (it is at {:?}; IO thread: {} {}; SQL thread: {})",
                            replica.name,
                            field(sql.applied),
                            field(sql.io_running),
                            field("Last_IO_Error"),
                            field(sql.sql_running),
                        ),
                        after: timeout,
                    });
                }
            }
        }
        Ok(())
    }

    /// `SHOW SLAVE STATUS` (`SHOW REPLICA STATUS` on MySQL, whose columns say `Replica` and
    /// `Source`) of a server as column → value (empty when it is not a replica).
    pub fn replica_status(&self, server: &Server) -> Result<BTreeMap<String, String>, Error> {
        Ok(self
            .sql_rows(server, self.dialect().status)?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    /// Password of `root` on every server (`root@localhost`, `root@127.0.0.1`, `root@::1`).
    pub fn root_password(&self) -> &str {
        &self.root_password
    }

    /// The configuration it was started with.
    pub fn config(&self) -> &TopologyConfig {
        &self.config
    }

    /// The topology's temporary directory (servers, TLS files); removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("present until drop").path()
    }

    /// The primary followed by the replicas.
    pub fn servers(&self) -> impl Iterator<Item = &Server> {
        std::iter::once(&self.primary).chain(&self.replicas)
    }

    /// Shuts a server down cleanly (SIGTERM; SIGKILL if it takes longer than 5 s).
    pub fn stop_server(&self, server: &Server) -> Result<(), Error> {
        server.stop(STOP_GRACE)
    }

    /// SIGKILLs a server, for crash and failover tests.
    pub fn kill_server(&self, server: &Server) -> Result<(), Error> {
        server.stop(Duration::ZERO)
    }

    /// Starts a stopped server again on the same port and waits until it accepts connections.
    /// A replica resumes replication by itself.
    pub fn restart_server(&self, server: &Server) -> Result<(), Error> {
        server.restart()
    }

    /// Stops a replica's SQL thread (it keeps receiving, applies nothing): a lagging replica.
    pub fn stop_sql_thread(&self, replica: &Server) -> Result<(), Error> {
        self.sql(replica, self.dialect().stop_sql).map(drop)
    }

    /// Starts a replica's SQL thread again.
    pub fn start_sql_thread(&self, replica: &Server) -> Result<(), Error> {
        self.sql(replica, self.dialect().start_sql).map(drop)
    }

    /// The server's flavour of replication statements and status columns.
    fn dialect(&self) -> &'static Dialect {
        match self.config.flavor {
            Flavor::MariaDb => &MARIADB,
            Flavor::MySql => &MYSQL,
        }
    }

    fn start_replication(&self, replica: &Server) -> Result<(), Error> {
        let password = quote_string(&self.repl_password);
        let port = self.primary.port;
        let sql = match self.config.flavor {
            Flavor::MariaDb => format!(
                "CHANGE MASTER TO master_host='127.0.0.1', master_port={port}, master_user='repl', \
                 master_password={password}, master_use_gtid=slave_pos, master_connect_retry=1;\n\
                 START SLAVE;\n"
            ),
            Flavor::MySql => format!(
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={port}, \
                 SOURCE_USER='repl', SOURCE_PASSWORD={password}, SOURCE_AUTO_POSITION=1, \
                 GET_SOURCE_PUBLIC_KEY=1, SOURCE_CONNECT_RETRY=1;\n\
                 START REPLICA;\n"
            ),
        };
        self.sql(replica, &sql).map(drop)
    }

    fn wait_slave_running(&self, replica: &Server, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        let sql = self.dialect();
        loop {
            let status = self.replica_status(replica)?;
            let field = |k: &str| status.get(k).map_or("", String::as_str);
            if field(sql.io_running) == "Yes" && field(sql.sql_running) == "Yes" {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Replication {
                    server: replica.name.clone(),
                    detail: format!(
                        "replication threads not running after {timeout:?}: IO {} ({}), SQL {} ({})",
                        field(sql.io_running),
                        field("Last_IO_Error"),
                        field(sql.sql_running),
                        field("Last_SQL_Error"),
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Where the servers' replication SQL differs.
struct Dialect {
    /// A query for the primary's position.
    position: &'static str,
    /// The function that waits for a position on a replica (0 when reached).
    wait: &'static str,
    status: &'static str,
    io_running: &'static str,
    sql_running: &'static str,
    /// The status column with the replica's applied position.
    applied: &'static str,
    stop_sql: &'static str,
    start_sql: &'static str,
}

const MARIADB: Dialect = Dialect {
    position: "SELECT @@GLOBAL.gtid_binlog_pos",
    wait: "MASTER_GTID_WAIT",
    status: "SHOW SLAVE STATUS",
    io_running: "Slave_IO_Running",
    sql_running: "Slave_SQL_Running",
    applied: "Gtid_Slave_Pos",
    stop_sql: "STOP SLAVE SQL_THREAD",
    start_sql: "START SLAVE SQL_THREAD",
};

const MYSQL: Dialect = Dialect {
    position: "SELECT @@GLOBAL.gtid_executed",
    wait: "WAIT_FOR_EXECUTED_GTID_SET",
    status: "SHOW REPLICA STATUS",
    io_running: "Replica_IO_Running",
    sql_running: "Replica_SQL_Running",
    applied: "Executed_Gtid_Set",
    stop_sql: "STOP REPLICA SQL_THREAD",
    start_sql: "START REPLICA SQL_THREAD",
};

impl Drop for Topology {
    fn drop(&mut self) {
        // Concurrently, so teardown costs one server's shutdown rather than the sum.
        let servers: Vec<&Server> = self.servers().collect();
        let _ = for_each_parallel(&servers, |server| server.stop(STOP_GRACE));
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
        let mut watchdog = self.watchdog.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(mut child) = watchdog.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `f` on every item concurrently: setup steps are dominated by waiting for servers and
/// for `mariadb` client processes, so a topology costs one server's setup rather than the sum.
fn for_each_parallel<T: Sync>(
    items: &[T],
    f: impl Fn(&T) -> Result<(), Error> + Sync,
) -> Result<(), Error> {
    std::thread::scope(|scope| {
        let f = &f;
        let handles: Vec<_> = items
            .iter()
            .map(|item| scope.spawn(move || f(item)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .collect()
    })
}

/// Cleanup for a topology that failed half-way through `start`.
struct Partial {
    watchdog: Option<Child>,
    servers: Vec<Server>,
    dir: Option<TempDir>,
}

impl Drop for Partial {
    fn drop(&mut self) {
        for server in &self.servers {
            let _ = server.stop(Duration::ZERO);
        }
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
        if let Some(mut child) = self.watchdog.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sets root's password, adds the replication account and writes the server's client option
/// file. Runs with `sql_log_bin=0` on every server so all binlogs start empty and replicas do not
/// replay the primary's setup on top of their own.
fn secure(
    client: &Path,
    server: &Server,
    root_password: &str,
    repl_password: &str,
) -> Result<(), Error> {
    let root_pw = quote_string(root_password);
    let repl_pw = quote_string(repl_password);
    let sql = format!(
        "SET SESSION sql_log_bin=0;\n\
         DROP USER IF EXISTS ''@'localhost';\n\
         ALTER USER 'root'@'localhost' IDENTIFIED BY {root_pw};\n\
         CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';\n\
         ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY {root_pw};\n\
         GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;\n\
         CREATE USER IF NOT EXISTS 'root'@'::1';\n\
         ALTER USER 'root'@'::1' IDENTIFIED BY {root_pw};\n\
         GRANT ALL PRIVILEGES ON *.* TO 'root'@'::1' WITH GRANT OPTION;\n\
         CREATE USER 'repl'@'%' IDENTIFIED BY {repl_pw};\n\
         GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%';\n"
    );
    // The fresh datadir's root has no password yet, so this first login cannot use the file.
    let args: Vec<OsString> = vec![
        "--no-defaults".into(),
        "-uroot".into(),
        format!("--socket={}", server.socket.display()).into(),
        "-N".into(),
        "-B".into(),
    ];
    run_client(client, &args, &sql, &server.name)?;
    let cnf = format!(
        "[client]\nuser=root\npassword={root_password}\nsocket={}\nport={}\n\
         default-character-set=utf8mb4\nmax-allowed-packet=1G\n",
        server.socket.display(),
        server.port
    );
    write_private(&server.client_cnf, &cnf)
}

fn write_private(path: &Path, contents: &str) -> Result<(), Error> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// Unix socket paths are limited to 107 bytes; a long `$TMPDIR` would make servers fail to start.
fn temp_base() -> PathBuf {
    let base = std::env::temp_dir();
    if base.as_os_str().len() <= 60 {
        base
    } else {
        PathBuf::from("/tmp")
    }
}
