use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Read as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::datadir::{INNODB_BUFFER_POOL_SIZE, INNODB_LOG_FILE_SIZE};
use crate::mysql::MysqlInstall;
use crate::watchdog::PID_FILE;
use crate::{free_port, Error, TlsFiles};

/// How long a server may take from spawn to accepting connections. Generous because CI machines
/// are shared and a cold page cache makes the first InnoDB start slow.
const START_TIMEOUT: Duration = Duration::from_mins(1);
/// Another process can take a port between `free_port` and the server's bind.
const PORT_ATTEMPTS: usize = 5;
/// SIGTERM grace before SIGKILL; the data is discarded, so a slow shutdown is not worth waiting on.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(5);

/// One running `mariadbd` of a topology.
#[derive(Debug)]
pub struct Server {
    /// `primary`, `replica1`, `replica2`, ...
    pub name: String,
    /// TCP port on 127.0.0.1.
    pub port: u16,
    pub server_id: u32,
    /// Unix socket; root can log in over it with [`crate::Topology::root_password`].
    pub socket: PathBuf,
    pub datadir: PathBuf,
    /// Pid of the first `mariadbd` process. After [`crate::Topology::restart_server`] use
    /// [`Server::current_pid`].
    pub pid: u32,
    pub(crate) dir: PathBuf,
    pub(crate) error_log: PathBuf,
    pub(crate) client_cnf: PathBuf,
    pub(crate) is_replica: bool,
    program: PathBuf,
    args: Vec<OsString>,
    child: Mutex<Option<Child>>,
    current_pid: AtomicU32,
}

impl Server {
    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The server's error log, for tests that assert on what the server saw.
    pub fn error_log(&self) -> &Path {
        &self.error_log
    }

    /// A `[client]` option file for root over the unix socket, to pass as the *first* argument
    /// of `mariadb --defaults-file=...` (handy when debugging a kept-alive topology by hand).
    pub fn client_cnf(&self) -> &Path {
        &self.client_cnf
    }

    /// True for replicas, which also run with `read_only=ON`.
    pub fn is_replica(&self) -> bool {
        self.is_replica
    }

    /// Pid of the running `mariadbd`, or `None` while it is stopped.
    pub fn current_pid(&self) -> Option<u32> {
        match self.current_pid.load(Ordering::Acquire) {
            0 => None,
            pid => Some(pid),
        }
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// SIGTERM, then SIGKILL after `grace`; returns once the process is reaped.
    pub(crate) fn stop(&self, grace: Duration) -> Result<(), Error> {
        let mut guard = self.child();
        let Some(child) = guard.as_mut() else {
            return Ok(());
        };
        if matches!(child.try_wait(), Ok(None)) {
            if !grace.is_zero() {
                // std only offers SIGKILL; the shell's builtin `kill` gives SIGTERM without
                // `unsafe`, and unlike /usr/bin/kill it exists even without procps.
                let _ = Command::new("sh")
                    .args(["-c", "kill -TERM \"$1\"", "sh"])
                    .arg(child.id().to_string())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                let deadline = Instant::now() + grace;
                while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let _ = child.kill();
        }
        let waited = child.wait();
        *guard = None;
        self.current_pid.store(0, Ordering::Release);
        let _ = std::fs::remove_file(self.dir.join(PID_FILE));
        waited
            .map(|_| ())
            .map_err(|e| Error::io(format!("waiting for {}", self.name), e))
    }

    /// Starts `mariadbd` again with the same configuration and port.
    pub(crate) fn restart(&self) -> Result<(), Error> {
        let mut guard = self.child();
        if let Some(child) = guard.as_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                return Err(Error::InvalidArgument(format!(
                    "{} is still running",
                    self.name
                )));
            }
        }
        let _ = std::fs::remove_file(&self.socket);
        let child = spawn(&self.dir, &self.error_log, &self.program, &self.args)?;
        let pid = child.id();
        *guard = Some(child);
        self.current_pid.store(pid, Ordering::Release);
        let child = guard.as_mut().expect("just set");
        match wait_ready(child, &self.socket, START_TIMEOUT) {
            Ok(()) => Ok(()),
            Err(reason) => {
                let _ = child.kill();
                let _ = child.wait();
                *guard = None;
                self.current_pid.store(0, Ordering::Release);
                Err(Error::ServerStart {
                    server: self.name.clone(),
                    reason: reason.to_string(),
                    log: self.error_log.clone(),
                    tail: log_tail(&self.error_log),
                })
            }
        }
    }
}

/// What differs between the servers of a topology.
pub(crate) struct Plan {
    pub(crate) name: String,
    pub(crate) server_id: u32,
    pub(crate) dir: PathBuf,
    pub(crate) is_replica: bool,
}

/// What all servers of a topology share.
pub(crate) struct Settings<'a> {
    pub(crate) mariadbd: &'a Path,
    /// Set for a MySQL topology: `mariadbd` is then MySQL's loader (see [`MysqlInstall`]).
    pub(crate) mysql: Option<&'a MysqlInstall>,
    pub(crate) run_as_root: bool,
    pub(crate) max_allowed_packet: u64,
    pub(crate) tls: Option<&'a TlsFiles>,
    pub(crate) extra_args: &'a [String],
}

/// A spawned server that may not accept connections yet. Dropping it kills the server, so a
/// failure or panic half-way through starting a topology leaves no process behind.
pub(crate) struct Launching {
    plan: Plan,
    port: u16,
    program: PathBuf,
    args: Vec<OsString>,
    child: KillOnDrop,
}

struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    fn get(&mut self) -> &mut Child {
        self.0.as_mut().expect("child present until taken")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Launching {
    pub(crate) fn spawn(plan: Plan, settings: &Settings<'_>) -> Result<Self, Error> {
        let port = free_port();
        let program = settings.mariadbd.to_path_buf();
        let args = args(&plan, settings);
        write_cnf(&plan, settings, port)?;
        let child = spawn(&plan.dir, &plan.dir.join("error.log"), &program, &args)?;
        Ok(Launching {
            plan,
            port,
            program,
            args,
            child: KillOnDrop(Some(child)),
        })
    }

    /// Waits until the server accepts connections, moving it to another port if its port was
    /// taken in the meantime.
    pub(crate) fn finish(mut self, settings: &Settings<'_>) -> Result<Server, Error> {
        let socket = self.plan.dir.join("mysqld.sock");
        let error_log = self.plan.dir.join("error.log");
        let mut attempt = 1;
        loop {
            match wait_ready(self.child.get(), &socket, START_TIMEOUT) {
                Ok(()) => break,
                Err(NotReady::Exited(_))
                    if attempt < PORT_ATTEMPTS && port_was_taken(&error_log) =>
                {
                    attempt += 1;
                    self.port = free_port();
                    write_cnf(&self.plan, settings, self.port)?;
                    let _ = std::fs::remove_file(&error_log);
                    self.child = KillOnDrop(Some(spawn(
                        &self.plan.dir,
                        &error_log,
                        &self.program,
                        &self.args,
                    )?));
                }
                Err(reason) => {
                    drop(self.child);
                    return Err(Error::ServerStart {
                        server: self.plan.name.clone(),
                        reason: reason.to_string(),
                        tail: log_tail(&error_log),
                        log: error_log,
                    });
                }
            }
        }
        let child = self.child.0.take().expect("child present until taken");
        let pid = child.id();
        Ok(Server {
            name: self.plan.name,
            port: self.port,
            server_id: self.plan.server_id,
            socket,
            datadir: self.plan.dir.join("data"),
            pid,
            client_cnf: self.plan.dir.join("client.cnf"),
            error_log,
            is_replica: self.plan.is_replica,
            dir: self.plan.dir,
            program: self.program,
            args: self.args,
            child: Mutex::new(Some(child)),
            current_pid: AtomicU32::new(pid),
        })
    }
}

fn args(plan: &Plan, settings: &Settings<'_>) -> Vec<OsString> {
    let mut args = settings
        .mysql
        .map(MysqlInstall::mysqld_prefix)
        .unwrap_or_default();
    // --defaults-file must come first; later command-line options override the file, which is
    // what lets `extra_server_args` change any default below.
    args.push(OsString::from(format!(
        "--defaults-file={}",
        plan.dir.join("my.cnf").display()
    )));
    if settings.run_as_root {
        args.push("--user=root".into());
    }
    args.extend(settings.extra_args.iter().map(OsString::from));
    args
}

fn write_cnf(plan: &Plan, settings: &Settings<'_>, port: u16) -> Result<(), Error> {
    let mut cnf = match settings.mysql {
        Some(mysql) => mysql_cnf(plan, settings, port, mysql),
        None => mariadb_cnf(plan, settings, port),
    };
    if plan.is_replica {
        // Like a production replica: routers may tell replicas apart by @@read_only, and stray
        // writes from tests would otherwise break strict-mode GTID replication.
        cnf.push_str("read-only=ON\n");
    }
    if let Some(tls) = settings.tls {
        let _ = write!(
            cnf,
            "ssl-ca={}\nssl-cert={}\nssl-key={}\n",
            tls.ca_cert.display(),
            tls.server_cert.display(),
            tls.server_key.display()
        );
    }
    for sub in ["tmp", "files"] {
        let path = plan.dir.join(sub);
        std::fs::create_dir_all(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    }
    let path = plan.dir.join("my.cnf");
    std::fs::write(&path, cnf).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// The options every test server has, whichever it is: where its files are, its port and
/// id, and a binlog to replicate from.
fn server_cnf(plan: &Plan, section: &str, pid_file: &str, port: u16) -> String {
    let dir = plan.dir.display();
    format!(
        "# Written by manifold-testkit for {name}.
[{section}]
datadir={dir}/data
socket={dir}/mysqld.sock
pid-file={dir}/{pid_file}
log-error={dir}/error.log
tmpdir={dir}/tmp
port={port}
bind-address=127.0.0.1
server-id={server_id}
report-host=127.0.0.1
report-port={port}
log-bin=binlog
relay-log=relay-bin
",
        name = plan.name,
        server_id = plan.server_id,
    )
}

fn mysql_cnf(plan: &Plan, settings: &Settings<'_>, port: u16, mysql: &MysqlInstall) -> String {
    let dir = plan.dir.display();
    let mut cnf = server_cnf(plan, "mysqld", "mysqld.pid", port);
    let _ = write!(
        cnf,
        "{paths}secure-file-priv={dir}/files
max-allowed-packet={max_allowed_packet}
innodb-buffer-pool-size={INNODB_BUFFER_POOL_SIZE}
innodb-redo-log-capacity={redo}
{options}",
        paths = mysql.path_options(),
        max_allowed_packet = settings.max_allowed_packet,
        redo = crate::mysql::REDO_LOG_CAPACITY,
        options = crate::mysql::SERVER_OPTIONS,
    );
    cnf
}

fn mariadb_cnf(plan: &Plan, settings: &Settings<'_>, port: u16) -> String {
    let mut cnf = server_cnf(plan, "mariadbd", "mariadbd.pid", port);
    let _ = write!(
        cnf,
        "log-slave-updates=ON
binlog-format=ROW
gtid-domain-id=0
gtid-strict-mode=ON
max-allowed-packet={max_allowed_packet}
max-connections=2000
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
skip-name-resolve
performance-schema=OFF
innodb-buffer-pool-size={INNODB_BUFFER_POOL_SIZE}
innodb-log-file-size={INNODB_LOG_FILE_SIZE}
innodb-flush-log-at-trx-commit=2
# The default 12 MiB temporary tablespace is written out in full at every start.
innodb-temp-data-file-path=ibtmp1:1M:autoextend
innodb-buffer-pool-dump-at-shutdown=OFF
innodb-buffer-pool-load-at-startup=OFF
sync-binlog=0
# Many servers on one CI machine can exhaust fs.aio-max-nr; simulated AIO always works.
innodb-use-native-aio=OFF
",
        max_allowed_packet = settings.max_allowed_packet,
    );
    cnf
}

fn spawn(dir: &Path, error_log: &Path, program: &Path, args: &[OsString]) -> Result<Child, Error> {
    use std::os::unix::process::CommandExt as _;
    // Output before the server opens its error log (bad options, say) lands in the same file.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(error_log)
        .map_err(|e| Error::io(format!("opening {}", error_log.display()), e))?;
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        // Out of the terminal's foreground group: Ctrl-C on a test run must leave teardown to the
        // watchdog instead of killing servers mid-setup.
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io(format!("spawning {}", program.display()), e))?;
    let pid_file = dir.join(PID_FILE);
    std::fs::write(&pid_file, format!("{}\n", child.id()))
        .map_err(|e| Error::io(format!("writing {}", pid_file.display()), e))?;
    Ok(child)
}

#[derive(Debug)]
enum NotReady {
    Exited(std::process::ExitStatus),
    TimedOut(Duration),
    Wait(std::io::Error),
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReady::Exited(status) => write!(f, "mariadbd exited early ({status})"),
            NotReady::TimedOut(after) => {
                write!(f, "no connection accepted within {after:?}")
            }
            NotReady::Wait(e) => write!(f, "cannot check the mariadbd process: {e}"),
        }
    }
}

/// Polls the unix socket for a protocol-10 greeting.
///
/// The socket is unique to this server, unlike the TCP port, which may belong to someone else if
/// our bind lost a race. mariadbd binds TCP before creating the socket and aborts when TCP fails,
/// so a greeting on the socket also proves the port is ours.
fn wait_ready(child: &mut Child, socket: &Path, timeout: Duration) -> Result<(), NotReady> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Err(NotReady::Exited(status)),
            Ok(None) => {}
            Err(e) => return Err(NotReady::Wait(e)),
        }
        if greeting(socket) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(NotReady::TimedOut(timeout));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn greeting(socket: &Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut header = [0u8; 5];
    // 3-byte length, sequence id, then the protocol version (10) of the initial handshake.
    stream.read_exact(&mut header).is_ok() && header[4] == 10
}

fn port_was_taken(error_log: &Path) -> bool {
    std::fs::read_to_string(error_log).is_ok_and(|log| {
        log.contains("Address already in use") || log.contains("Bind on TCP/IP port")
    })
}

/// The last lines of a log, for error messages.
pub(crate) fn log_tail(path: &Path) -> String {
    const LINES: usize = 40;
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(LINES)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tail_keeps_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut text = String::new();
        for i in 0..100 {
            writeln!(text, "line {i}").unwrap();
        }
        std::fs::write(&path, text).unwrap();
        let tail = log_tail(&path);
        assert!(tail.starts_with("line 60\n"));
        assert!(tail.ends_with("line 99"));
        assert!(log_tail(&dir.path().join("missing")).contains("cannot read"));
    }

    #[test]
    fn detects_port_collisions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(
            &path,
            "[ERROR] Can't start server: Bind on TCP/IP port. Got error: 98: Address already in use\n",
        )
        .unwrap();
        assert!(port_was_taken(&path));
        std::fs::write(&path, "[ERROR] Aria engine failed\n").unwrap();
        assert!(!port_was_taken(&path));
    }
}
