//! Read/write splitting in front of MySQL (from `scripts/setup-mysql`), where GTIDs are sets,
//! the session's writes arrive through `session_track_gtids`, replicas wait with
//! `WAIT_FOR_EXECUTED_GTID_SET` and report `SHOW REPLICA STATUS`. The tests stop replication,
//! so they run one at a time (with the MariaDB ones) on this module's topology; the promotion
//! test has its own.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use manifold::config::{user_with_password, Config};
use manifold_router::{CausalReads, ReadOnly, ReplicaEntry};
use manifold_testkit::{Flavor, Topology, TopologyConfig};
use manifold_tests::Client;

use super::serial;
use super::support::{self, count, start, tally, wait_for};

const USER: &str = "app";
const PASSWORD: &str = "app";

fn start_mysql() -> Topology {
    let t = Topology::start(TopologyConfig {
        tls: false,
        flavor: Flavor::MySql,
        ..TopologyConfig::default()
    })
    .unwrap_or_else(|e| panic!("cannot start a MySQL topology: {e}"));
    t.create_user(USER, PASSWORD).expect("create test user");
    t
}

fn topology() -> &'static Topology {
    static SHARED: OnceLock<Topology> = OnceLock::new();
    SHARED.get_or_init(start_mysql)
}

fn config(t: &Topology, primary_read_weight: u32) -> Config {
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
    cfg.routing.primary_read_weight = primary_read_weight;
    cfg.routing.monitor.interval = Duration::from_millis(100);
    cfg.routing.monitor.timeout = Duration::from_millis(500);
    cfg.routing.max_replication_lag = Duration::from_secs(2);
    cfg.routing.causal_read_timeout = Duration::from_millis(300);
    cfg.routing.failover_timeout = Duration::from_secs(3);
    cfg.pool.connect_timeout = Duration::from_secs(1);
    cfg.mysql.listen = "127.0.0.1:0".into();
    cfg.engine.threads = 1;
    cfg.pool.min_idle = 1;
    cfg.users.push(user_with_password(USER, PASSWORD));
    cfg
}

/// A fresh schema `my_<name>` with table `t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)`, on
/// the replicas too.
fn schema_with_table(t: &Topology, name: &str) -> String {
    let db = format!("my_{name}");
    t.create_schema(&db).expect("create schema");
    t.sql(
        &t.primary,
        &format!("CREATE TABLE {db}.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"),
    )
    .unwrap();
    t.wait_replicated(Duration::from_secs(10)).unwrap();
    db
}

fn client(addr: SocketAddr, db: &str) -> Client {
    Client::connect(addr, USER, PASSWORD, Some(db)).expect("login through manifold")
}

fn port(server: &manifold_testkit::Server) -> String {
    server.addr().port().to_string()
}

#[test]
fn reads_spread_over_mysql_replicas_and_writes_stay_on_the_primary() {
    let _serial = serial();
    let t = topology();
    let db = schema_with_table(t, "split");
    let server = start(&config(t, 1));
    let mut c = client(server.mysql_addr(), &db);
    let reads = tally(&mut c, "SELECT @@port", 90);
    for s in t.servers() {
        let got = count(&reads, &port(s));
        assert!(got.abs_diff(30) <= 3, "{}: {got} of 90: {reads:?}", s.name);
    }
    for i in 0..20 {
        c.query(&format!("INSERT INTO t (v) VALUES (@@port + {i} * 0)"))
            .unwrap();
    }
    let on_primary = t
        .sql_value(
            &t.primary,
            &format!("SELECT COUNT(*) FROM {db}.t WHERE v = {}", port(&t.primary)),
        )
        .unwrap();
    assert_eq!(on_primary, "20", "every write ran on the primary");
    let locking = tally(&mut c, "SELECT @@port FROM t LIMIT 1 FOR SHARE", 10);
    assert_eq!(count(&locking, &port(&t.primary)), 10, "{locking:?}");
}

#[test]
fn a_lagging_mysql_replica_gets_no_reads_until_it_catches_up() {
    let _serial = serial();
    let t = topology();
    let db = schema_with_table(t, "lag");
    let server = start(&config(t, 0));
    let mut c = client(server.mysql_addr(), &db);
    support::a_lagging_replica_gets_no_reads(t, &server, &mut c, &format!("{db}.t"), "v");
}

#[test]
fn a_session_always_reads_its_own_writes_on_mysql() {
    let _serial = serial();
    let t = topology();
    let db = schema_with_table(t, "causal");
    let server = start(&config(t, 1));
    let mut c = client(server.mysql_addr(), &db);
    support::a_session_reads_its_own_writes(t, &server, &mut c);
}

#[test]
fn global_causal_reads_on_mysql_see_every_session_s_writes() {
    let _serial = serial();
    let t = topology();
    let db = schema_with_table(t, "global");
    let mut cfg = config(t, 0);
    cfg.routing.causal_reads = CausalReads::Global;
    let server = start(&cfg);
    let mut writer = client(server.mysql_addr(), &db);
    let mut reader = client(server.mysql_addr(), &db);
    support::global_reads_see_other_sessions_writes(t, &server, &mut writer, &mut reader);
}

#[test]
fn auto_promote_on_mysql_picks_a_replica_and_repoints_the_other() {
    let _serial = serial();
    let t = start_mysql();
    let db = "my_promote";
    t.create_schema(db).unwrap();
    t.sql(
        &t.primary,
        &format!("CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)"),
    )
    .unwrap();
    t.wait_replicated(Duration::from_secs(10)).unwrap();
    let mut cfg = config(&t, 1);
    cfg.routing.auto_promote = true;
    cfg.routing.failover_timeout = Duration::from_secs(20);
    let server = start(&cfg);
    let mut c = client(server.mysql_addr(), db);
    c.query("INSERT INTO t VALUES (1, 1)").unwrap();
    // Replication is asynchronous: a write the replicas have not received when the primary
    // dies is lost whoever is promoted. The test is about the promotion.
    t.wait_replicated(Duration::from_secs(10)).unwrap();

    t.kill_server(&t.primary).unwrap();
    // The write waits for the promotion, then runs on the new primary.
    c.query("INSERT INTO t VALUES (2, 2)")
        .expect("the write runs once a replica is promoted");
    let topology = server.shared.topology();
    let new = topology.primary();
    assert_ne!(new, 0, "a replica is the primary now");
    let promoted = &t.replicas[new - 1];
    let other = &t.replicas[2 - new];
    assert_eq!(t.sql_value(promoted, "SELECT @@read_only").unwrap(), "0");
    assert_eq!(
        t.sql_value(promoted, &format!("SELECT COUNT(*) FROM {db}.t"))
            .unwrap(),
        "2"
    );
    let status = t.replica_status(other).unwrap();
    assert_eq!(
        status.get("Source_Port").map(String::as_str),
        Some(port(promoted).as_str()),
        "the other replica follows the new primary: {status:?}"
    );
    wait_for(
        "the other replica to apply the new write",
        Duration::from_secs(10),
        || {
            t.sql_value(other, &format!("SELECT COUNT(*) FROM {db}.t"))
                .is_ok_and(|n| n == "2")
        },
    );
}

#[test]
fn a_mysql_replica_without_gtids_gets_no_reads() {
    let _serial = serial();
    let t = topology();
    let db = schema_with_table(t, "nogtid");
    // A server with gtid_mode=OFF listed as a replica: nothing tells what it has applied.
    let plain = Topology::start(TopologyConfig {
        replicas: 0,
        tls: false,
        flavor: Flavor::MySql,
        extra_server_args: vec!["--gtid-mode=OFF".into()],
        ..TopologyConfig::default()
    })
    .expect("start a MySQL server without GTIDs");
    plain.create_user(USER, PASSWORD).unwrap();
    plain.create_schema(&db).unwrap();
    let mut cfg = config(t, 1);
    cfg.backend.replicas = vec![ReplicaEntry::Addr(plain.primary.addr().to_string())];
    let server = manifold::start(&cfg).expect("manifold starts");
    let node = &server.shared.topology().nodes[1];
    wait_for(
        "the monitor to check the node",
        Duration::from_secs(10),
        || node.read_only() == ReadOnly::Off,
    );
    // Were its lag measured from GTIDs, it would count from now and stay within the 2 s
    // bound for a while: reads would go there.
    std::thread::sleep(Duration::from_millis(500));
    let mut c = client(server.mysql_addr(), &db);
    let reads = tally(&mut c, "SELECT @@port", 30);
    assert_eq!(count(&reads, &port(&t.primary)), 30, "{reads:?}");
    assert!(node.lag().is_none(), "its lag is unknown: {:?}", node.lag());
}
