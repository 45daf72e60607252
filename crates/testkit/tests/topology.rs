#![forbid(unsafe_code)]
//! Runs real MariaDB servers; fails (never skips) when MariaDB is not installed.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use manifold_testkit::{mariadb_client_path, Error, Topology, TopologyConfig};

const REPLICATION_TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn replicates_writes_to_every_replica() {
    let t = Topology::shared();
    assert_eq!(t.replicas.len(), 2);
    t.create_schema("tk_replication").unwrap();
    t.sql(
        &t.primary,
        "CREATE TABLE tk_replication.t (id INT PRIMARY KEY, v VARCHAR(20));
         INSERT INTO tk_replication.t VALUES (1, 'one'), (2, 'two\tthree');",
    )
    .unwrap();
    t.wait_replicated(REPLICATION_TIMEOUT).unwrap();
    for replica in &t.replicas {
        assert_eq!(
            t.sql(replica, "SELECT id, v FROM tk_replication.t ORDER BY id")
                .unwrap(),
            "1\tone\n2\ttwo\\tthree\n",
            "{}",
            replica.name
        );
    }
}

#[test]
fn servers_are_configured_as_documented() {
    let t = Topology::shared();
    let mut ids = Vec::new();
    for server in t.servers() {
        let rows = t
            .sql_rows(
                server,
                "SELECT @@server_id AS server_id, @@log_bin AS log_bin,
                        @@log_slave_updates AS log_slave_updates, @@binlog_format AS binlog_format,
                        @@gtid_strict_mode AS gtid_strict_mode,
                        @@max_allowed_packet AS max_allowed_packet,
                        @@skip_name_resolve AS skip_name_resolve,
                        @@performance_schema AS performance_schema, @@read_only AS read_only,
                        @@have_ssl AS have_ssl, @@port AS port,
                        @@innodb_flush_log_at_trx_commit AS flush, @@sync_binlog AS sync_binlog",
            )
            .unwrap();
        let row: &BTreeMap<String, String> = &rows[0];
        let v = |k: &str| row[k].as_str();
        assert_eq!(v("server_id"), server.server_id.to_string());
        assert_eq!(v("port"), server.port.to_string());
        assert_eq!(v("log_bin"), "1");
        assert_eq!(v("log_slave_updates"), "1");
        assert_eq!(v("binlog_format"), "ROW");
        assert_eq!(v("gtid_strict_mode"), "1");
        assert_eq!(v("max_allowed_packet"), "1073741824");
        assert_eq!(v("skip_name_resolve"), "1");
        assert_eq!(v("performance_schema"), "0");
        assert_eq!(v("have_ssl"), "YES");
        assert_eq!(v("flush"), "2");
        assert_eq!(v("sync_binlog"), "0");
        assert_eq!(v("read_only"), if server.is_replica() { "1" } else { "0" });
        ids.push(server.server_id);
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "server ids must differ");
    for replica in &t.replicas {
        let status = t.replica_status(replica).unwrap();
        assert_eq!(status["Using_Gtid"], "Slave_Pos");
        assert_eq!(status["Master_Port"], t.primary.port.to_string());
    }
    assert!(t.replica_status(&t.primary).unwrap().is_empty());
}

/// Runs the `mariadb` CLI over TCP as an ordinary client would.
fn tcp_client(
    port: u16,
    user: &str,
    password: &str,
    extra: &[String],
    sql: &str,
) -> (bool, String) {
    let out = Command::new(mariadb_client_path().unwrap())
        .arg("--no-defaults")
        .arg(format!("-u{user}"))
        .arg(format!("-p{password}"))
        .arg("-h127.0.0.1")
        .arg(format!("-P{port}"))
        .arg("--protocol=tcp")
        .args(extra)
        .args(["-N", "-B", "-e", sql])
        .output()
        .unwrap();
    let text = if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    (out.status.success(), text)
}

#[test]
fn tls_connections_get_a_cipher() {
    let t = Topology::shared();
    let tls = t.tls.as_ref().expect("TLS is on by default");
    t.create_user("tk_tls", "p'w\\d").unwrap();
    let ssl = vec![
        "--ssl".to_string(),
        format!("--ssl-ca={}", tls.ca_cert.display()),
        "--ssl-verify-server-cert".to_string(),
    ];
    for server in t.servers() {
        let (ok, out) = tcp_client(
            server.port,
            "tk_tls",
            "p'w\\d",
            &ssl,
            "SHOW STATUS LIKE 'Ssl_cipher'",
        );
        assert!(ok, "{}: {out}", server.name);
        let cipher = out.trim().split('\t').nth(1).unwrap_or_default();
        assert!(!cipher.is_empty(), "{}: no cipher in {out:?}", server.name);
    }
}

#[test]
fn create_user_is_idempotent_and_updates_the_password() {
    let t = Topology::shared();
    t.create_user("tk_idem", "first").unwrap();
    t.create_user("tk_idem", "second").unwrap();
    let replica = &t.replicas[0];
    let (ok, out) = tcp_client(
        replica.port,
        "tk_idem",
        "second",
        &[],
        "SELECT CURRENT_USER()",
    );
    assert!(ok, "{out}");
    assert_eq!(out, "tk_idem@%\n");
    let (ok, out) = tcp_client(replica.port, "tk_idem", "first", &[], "SELECT 1");
    assert!(!ok);
    assert!(out.contains("Access denied"), "{out}");
    let plugin = t
        .sql_value(
            &t.primary,
            "SELECT plugin FROM mysql.user WHERE user = 'tk_idem'",
        )
        .unwrap();
    assert_eq!(plugin, "mysql_native_password");
}

#[test]
fn sql_errors_carry_the_server_message() {
    let t = Topology::shared();
    let err = t.sql(&t.primary, "SELECT * FROM no_such_db.t").unwrap_err();
    assert!(matches!(err, Error::Sql { .. }));
    assert!(err.to_string().contains("no_such_db"), "{err}");
}

fn alive(pid: u32, dir: &Path) -> bool {
    // Zombies have an empty command line; recycled pids would not mention the topology dir.
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&*dir.to_string_lossy()))
}

fn poll(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

#[test]
fn stop_kill_and_restart_servers() {
    let started = Instant::now();
    let t = Topology::start(TopologyConfig {
        replicas: 1,
        tls: false,
        ..TopologyConfig::default()
    })
    .unwrap();
    eprintln!(
        "topology with one replica started in {:.2}s",
        started.elapsed().as_secs_f64()
    );
    assert!(t.tls.is_none());
    let replica = &t.replicas[0];

    t.kill_server(replica).unwrap();
    assert!(replica.current_pid().is_none());
    t.create_schema("tk_restart").unwrap();
    t.sql(
        &t.primary,
        "CREATE TABLE tk_restart.t (id INT PRIMARY KEY); INSERT INTO tk_restart.t VALUES (1);",
    )
    .unwrap();
    t.restart_server(replica).unwrap();
    assert!(replica.current_pid().is_some_and(|pid| pid != replica.pid));
    t.wait_replicated(REPLICATION_TIMEOUT).unwrap();
    assert_eq!(
        t.sql(replica, "SELECT id FROM tk_restart.t").unwrap(),
        "1\n"
    );

    t.stop_server(&t.primary).unwrap();
    t.restart_server(&t.primary).unwrap();
    t.sql(&t.primary, "INSERT INTO tk_restart.t VALUES (2);")
        .unwrap();
    t.wait_replicated(REPLICATION_TIMEOUT).unwrap();
    assert_eq!(
        t.sql(replica, "SELECT id FROM tk_restart.t ORDER BY id")
            .unwrap(),
        "1\n2\n"
    );

    let dir = t.dir().to_path_buf();
    let pids: Vec<u32> = t
        .servers()
        .filter_map(manifold_testkit::Server::current_pid)
        .collect();
    assert_eq!(pids.len(), 2);
    drop(t);
    assert!(!dir.exists());
    assert!(pids.iter().all(|&pid| !alive(pid, &dir)));
}

#[test]
fn early_exit_reports_the_error_log() {
    let err = Topology::start(TopologyConfig {
        replicas: 0,
        tls: false,
        extra_server_args: vec!["--no-such-testkit-option".to_string()],
        ..TopologyConfig::default()
    })
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::ServerStart { .. }), "{msg}");
    assert!(msg.contains("exited early"), "{msg}");
    assert!(msg.contains("no-such-testkit-option"), "{msg}");
}

struct Up {
    child: Child,
    dir: PathBuf,
    pids: Vec<u32>,
    fields: BTreeMap<String, String>,
}

/// Starts `manifold-testkit up` and parses its info line.
fn up(args: &[&str]) -> Up {
    let mut child = Command::new(env!("CARGO_BIN_EXE_manifold-testkit"))
        .arg("up")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if line.is_empty() {
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        panic!("manifold-testkit up printed nothing: {stderr}");
    }
    let fields: BTreeMap<String, String> = line
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let dir = PathBuf::from(&fields["dir"]);
    let pids: Vec<u32> = fields["pids"]
        .split(',')
        .map(|p| p.parse().unwrap())
        .collect();
    Up {
        child,
        dir,
        pids,
        fields,
    }
}

#[test]
fn watchdog_kills_servers_when_the_owner_is_killed() {
    let mut up = up(&["--replicas", "1", "--user", "tk_app:app"]);
    assert_eq!(up.pids.len(), 2);
    assert!(up.fields["primary"].starts_with("127.0.0.1:"));
    assert!(up.fields["ca"].ends_with("ca.pem"));
    assert!(up.pids.iter().all(|&pid| alive(pid, &up.dir)));

    // SIGKILL: no destructor runs, only the watchdog can clean up.
    up.child.kill().unwrap();
    up.child.wait().unwrap();
    let gone = poll(Duration::from_secs(15), || {
        up.pids.iter().all(|&pid| !alive(pid, &up.dir)) && !up.dir.exists()
    });
    assert!(
        gone,
        "servers {:?} or {} survived their owner",
        up.pids,
        up.dir.display()
    );
}

#[test]
fn binary_stops_when_stdin_closes() {
    let mut up = up(&["--replicas", "1", "--no-tls"]);
    assert_eq!(up.fields["ca"], "");
    drop(up.child.stdin.take());
    let exited = poll(Duration::from_secs(30), || {
        matches!(up.child.try_wait(), Ok(Some(_)))
    });
    assert!(exited, "manifold-testkit did not exit after stdin closed");
    assert!(up.child.wait().unwrap().success());
    // Teardown ran in-process before exit, so nothing is left to wait for.
    assert!(!up.dir.exists());
    assert!(up.pids.iter().all(|&pid| !alive(pid, &up.dir)));
}

#[test]
fn binary_stops_when_its_parent_exits() {
    // sh starts the binary with the test's stdin (kept open) and is then killed, as when a demo
    // script dies without closing the pipe it started manifold-testkit with.
    let mut sh = Command::new("sh")
        .args([
            "-c",
            "exec 3<&0; \"$0\" up --replicas 0 --no-tls <&3 & wait",
            env!("CARGO_BIN_EXE_manifold-testkit"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(sh.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let dir = PathBuf::from(
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix("dir="))
            .unwrap_or_else(|| panic!("no dir in {line:?}")),
    );
    assert!(dir.exists());
    sh.kill().unwrap();
    sh.wait().unwrap();
    assert!(
        poll(Duration::from_secs(15), || !dir.exists()),
        "{} survived the parent of manifold-testkit",
        dir.display()
    );
}
