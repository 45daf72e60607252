#![forbid(unsafe_code)]
//! Node failures under load, each test on a MariaDB topology of its own (they kill servers
//! and promote replicas): a replica killed under 32 reading threads, a primary stopped with
//! a replica promoted by hand, a primary killed with `routing.auto_promote`, and transactions
//! replayed across a lost primary (`replay.rs`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use manifold::config::{user_with_password, Config};
use manifold::Server;
use manifold_router::ReplicaEntry;
use manifold_testkit::{Topology, TopologyConfig};
use manifold_tests::Client;

mod replay;

const USER: &str = "app";
const PASSWORD: &str = "app";

/// One topology at a time: the machine has two cores.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A primary with two replicas, the test user, and schema `db` with table `t` (100 rows).
fn topology(db: &str) -> Topology {
    let t = Topology::start(TopologyConfig {
        tls: false,
        ..TopologyConfig::default()
    })
    .expect("start a MariaDB topology");
    t.create_user(USER, PASSWORD).unwrap();
    t.create_schema(db).unwrap();
    let rows: Vec<String> = (0..100).map(|i| format!("({i}, {i}, 0)")).collect();
    let sql = format!(
        "CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT, port INT); INSERT INTO {db}.t VALUES {}",
        rows.join(",")
    );
    t.sql(&t.primary, &sql).unwrap();
    t.wait_replicated(Duration::from_secs(20)).unwrap();
    t
}

fn config(t: &Topology) -> Config {
    // What manifold generates (TLS certificate, RSA key), shared by the tests' servers.
    let mut cfg = Config {
        data_dir: Some(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("manifold-data")),
        ..Config::default()
    };
    // Servers run side by side here: each its own admin port and HTTP.
    cfg.admin.listen = "127.0.0.1:0".into();
    cfg.admin.http_listen = "127.0.0.1:0".into();
    cfg.backend.primary = t.primary.addr().to_string();
    cfg.backend.replicas = t
        .replicas
        .iter()
        .map(|r| ReplicaEntry::Addr(r.addr().to_string()))
        .collect();
    cfg.routing.monitor.interval = Duration::from_millis(100);
    cfg.routing.monitor.timeout = Duration::from_millis(500);
    cfg.routing.failover_timeout = Duration::from_secs(3);
    cfg.pool.connect_timeout = Duration::from_secs(1);
    cfg.mysql.listen = "127.0.0.1:0".into();
    cfg.engine.threads = 2;
    cfg.pool.min_idle = 1;
    cfg.users.push(user_with_password(USER, PASSWORD));
    cfg
}

fn start(cfg: &Config) -> Server {
    let server = manifold::start(cfg).expect("manifold starts");
    let topology = server.shared.topology();
    wait_for("every node readable", Duration::from_secs(15), || {
        (0..topology.nodes.len()).all(|n| topology.can_read(n))
    });
    server
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn port(s: &manifold_testkit::Server) -> String {
    s.addr().port().to_string()
}

/// `threads` clients reading `t` by primary key until dropped; counts reads per port and
/// keeps every error.
struct ReadLoad {
    stop: Arc<AtomicBool>,
    /// Reads counted from here on go to `after`.
    phase: Arc<AtomicUsize>,
    seen: Arc<Mutex<[BTreeMap<String, usize>; 2]>>,
    errors: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl ReadLoad {
    fn start(server: &Server, db: &str, threads: usize) -> ReadLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let phase = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new([BTreeMap::new(), BTreeMap::new()]));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let addr = server.mysql_addr();
        let handles = (0..threads)
            .map(|k| {
                let (stop, phase, seen, errors) =
                    (stop.clone(), phase.clone(), seen.clone(), errors.clone());
                let db = db.to_owned();
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr, USER, PASSWORD, Some(&db)).unwrap();
                    let mut i = k;
                    while !stop.load(Ordering::Relaxed) {
                        i = (i + 7) % 100;
                        match c.query(&format!("SELECT v, @@port FROM t WHERE id = {i}")) {
                            Ok(r)
                                if r.rows.first().and_then(|r| r[0].clone())
                                    == Some(i.to_string()) =>
                            {
                                let p = r.rows[0][1].clone().unwrap();
                                *seen.lock().unwrap()[phase.load(Ordering::Relaxed)]
                                    .entry(p)
                                    .or_insert(0) += 1;
                            }
                            Ok(r) => errors.lock().unwrap().push(format!("wrong answer {r:?}")),
                            Err(e) => {
                                errors.lock().unwrap().push(e.to_string());
                                match Client::connect(addr, USER, PASSWORD, Some(&db)) {
                                    Ok(n) => c = n,
                                    Err(e) => {
                                        errors.lock().unwrap().push(format!("reconnect: {e}"));
                                    }
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        ReadLoad {
            stop,
            phase,
            seen,
            errors,
            threads: handles,
        }
    }

    fn finish(mut self) -> ([BTreeMap<String, usize>; 2], Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
        let seen = self.seen.lock().unwrap().clone();
        let errors = self.errors.lock().unwrap().clone();
        (seen, errors)
    }
}

#[test]
fn a_killed_replica_costs_autocommit_reads_nothing() {
    let _serial = serial();
    let t = topology("fo_kill");
    let server = start(&config(&t));
    let load = ReadLoad::start(&server, "fo_kill", 32);
    std::thread::sleep(Duration::from_secs(1));
    t.kill_server(&t.replicas[0]).unwrap();
    let node = &server.shared.topology().nodes[1];
    wait_for(
        "the killed replica to be shunned",
        Duration::from_secs(10),
        || !node.is_up(),
    );
    std::thread::sleep(Duration::from_millis(500));
    t.restart_server(&t.replicas[0]).unwrap();
    wait_for(
        "the replica to be taken back",
        Duration::from_secs(20),
        || server.shared.topology().can_read(1),
    );
    load.phase.store(1, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(1));
    let (seen, errors) = load.finish();
    assert!(
        errors.is_empty(),
        "{} client errors, first: {:?}",
        errors.len(),
        errors.first()
    );
    assert!(node.shunned_total() >= 1);
    // Reads caught on the killed replica ran again elsewhere, and were counted.
    assert!(
        server
            .shared
            .metrics
            .retries
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1,
        "Retries counts reads sent again elsewhere"
    );
    let total: usize = seen[0].values().sum::<usize>() + seen[1].values().sum::<usize>();
    assert!(total > 1000, "reads kept flowing: {seen:?}");
    let back = seen[1].get(&port(&t.replicas[0])).copied().unwrap_or(0);
    assert!(
        back > 0,
        "the restarted replica serves reads again: {:?}",
        seen[1]
    );
}

#[test]
fn writes_wait_for_a_primary_promoted_by_hand_while_reads_go_on() {
    let _serial = serial();
    let t = topology("fo_manual");
    let server = start(&config(&t));
    let mut writer =
        Client::connect(server.mysql_addr(), USER, PASSWORD, Some("fo_manual")).unwrap();
    writer
        .query("UPDATE t SET port = @@port WHERE id = 1")
        .unwrap();
    let load = ReadLoad::start(&server, "fo_manual", 8);

    t.stop_server(&t.primary).unwrap();
    // No primary and none promoted: the write fails once routing.failover_timeout (3 s) is
    // over, with manifold's error; the client's own 60 s read timeout would catch a hang.
    let began = Instant::now();
    let e = writer
        .query("UPDATE t SET port = @@port WHERE id = 2")
        .unwrap_err();
    assert_eq!(e.code(), Some(7701), "{e}");
    assert!(e.to_string().contains("failover_timeout"), "{e}");
    assert!(began.elapsed() < Duration::from_secs(30), "no hang");

    // Promote the first replica by hand and point the second at it.
    let (new, other) = (&t.replicas[0], &t.replicas[1]);
    t.sql(
        new,
        "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF",
    )
    .unwrap();
    t.sql(
        other,
        &format!("STOP SLAVE; CHANGE MASTER TO master_port = {}, master_use_gtid = slave_pos; START SLAVE", new.addr().port()),
    )
    .unwrap();
    // The write waits (up to failover_timeout) until manifold has seen the promotion.
    writer
        .query("UPDATE t SET port = @@port WHERE id = 3")
        .unwrap();
    assert_eq!(server.shared.topology().primary(), 1);
    assert_eq!(
        server.shared.topology().failovers(),
        1,
        "Failovers counts it"
    );
    assert_eq!(
        t.sql_value(new, "SELECT port FROM fo_manual.t WHERE id = 3")
            .unwrap(),
        port(new),
        "the write ran on the promoted replica"
    );
    let (_, errors) = load.finish();
    assert!(errors.is_empty(), "reads went on: {errors:?}");
}

#[test]
fn auto_promote_replaces_a_killed_primary() {
    let _serial = serial();
    let t = topology("fo_auto");
    let mut cfg = config(&t);
    cfg.routing.auto_promote = true;
    cfg.routing.failover_timeout = Duration::from_secs(10);
    let server = start(&cfg);
    let mut writer = Client::connect(server.mysql_addr(), USER, PASSWORD, Some("fo_auto")).unwrap();
    writer
        .query("UPDATE t SET port = @@port WHERE id = 1")
        .unwrap();
    t.sql(&t.primary, "FLUSH TABLES").unwrap();
    t.wait_replicated(Duration::from_secs(10)).unwrap();
    t.kill_server(&t.primary).unwrap();
    // The statement waits while manifold promotes a replica, then runs there.
    writer
        .query("UPDATE t SET port = @@port WHERE id = 2")
        .unwrap();
    let topology = server.shared.topology();
    let new = topology.primary();
    assert_ne!(new, 0, "a replica was promoted");
    assert_eq!(topology.failovers(), 1, "Failovers counts it");
    let (promoted, other) = if new == 1 {
        (&t.replicas[0], &t.replicas[1])
    } else {
        (&t.replicas[1], &t.replicas[0])
    };
    assert_eq!(
        t.sql_value(promoted, "SELECT @@read_only").unwrap(),
        "0",
        "the promoted replica accepts writes"
    );
    assert_eq!(
        t.sql_value(promoted, "SELECT port FROM fo_auto.t WHERE id = 2")
            .unwrap(),
        port(promoted)
    );
    // The other replica now replicates from the new primary.
    wait_for(
        "the other replica to apply the write",
        Duration::from_secs(20),
        || {
            t.sql_value(other, "SELECT port FROM fo_auto.t WHERE id = 2")
                .ok()
                == Some(port(promoted))
        },
    );
}
