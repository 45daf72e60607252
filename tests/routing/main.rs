#![forbid(unsafe_code)]
//! Read/write splitting against a real primary with two GTID replicas: where statements
//! land (by `@@port` and by the servers' own `Com_select`), lag exclusion, causal reads.
//! The tests stop and start replication, so they run one at a time on this binary's
//! topology; each uses its own schema. `mysql` runs the same against MySQL.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use manifold::config::{user_with_password, Config};
use manifold_router::{ReplicaConfig, ReplicaEntry};
use manifold_testkit::Topology;
use manifold_tests::Client;

mod clusters;
mod mysql;
#[path = "../routing_support.rs"]
mod support;
use support::{count, start, tally, wait_for};

const USER: &str = "app";
const PASSWORD: &str = "app";

fn topology() -> &'static Topology {
    static READY: OnceLock<()> = OnceLock::new();
    let t = Topology::shared();
    READY.get_or_init(|| t.create_user(USER, PASSWORD).expect("create test user"));
    t
}

/// Tests here stop replicas' SQL threads: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// manifold in front of the topology, reads weighted `weights` (primary first), one worker
/// so that one session's reads follow one balancer.
fn config(weights: [u32; 3]) -> Config {
    let t = topology();
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
        .zip(&weights[1..])
        .map(|(r, w)| {
            ReplicaEntry::Node(ReplicaConfig {
                addr: r.addr().to_string(),
                read_weight: Some(*w),
                max_replication_lag: None,
            })
        })
        .collect();
    cfg.routing.primary_read_weight = weights[0];
    cfg.routing.monitor.interval = Duration::from_millis(100);
    cfg.routing.max_replication_lag = Duration::from_secs(2);
    cfg.routing.causal_read_timeout = Duration::from_millis(300);
    cfg.mysql.listen = "127.0.0.1:0".into();
    cfg.engine.threads = 1;
    cfg.pool.min_idle = 1;
    cfg.users.push(user_with_password(USER, PASSWORD));
    cfg
}

fn schema(name: &str) -> String {
    let name = format!("rt_{name}");
    topology().create_schema(&name).expect("create schema");
    name
}

/// A fresh schema with table `t (id INT AUTO_INCREMENT PRIMARY KEY, <column> INT)`, on the
/// replicas too.
fn schema_with_table(name: &str, column: &str) -> String {
    let db = schema(name);
    let t = topology();
    t.sql(
        &t.primary,
        &format!("CREATE TABLE {db}.t (id INT AUTO_INCREMENT PRIMARY KEY, {column} INT)"),
    )
    .unwrap();
    t.wait_replicated(Duration::from_secs(10)).unwrap();
    db
}

fn client(addr: SocketAddr, db: Option<&str>) -> Client {
    Client::connect(addr, USER, PASSWORD, db).expect("login through manifold")
}

fn port_of(server: &manifold_testkit::Server) -> String {
    server.addr().port().to_string()
}

fn ports() -> [String; 3] {
    let t = topology();
    [
        port_of(&t.primary),
        port_of(&t.replicas[0]),
        port_of(&t.replicas[1]),
    ]
}

fn com_select(server: &manifold_testkit::Server) -> u64 {
    let line = topology()
        .sql_value(server, "SHOW GLOBAL STATUS LIKE 'Com_select'")
        .unwrap();
    line.split('\t').nth(1).unwrap().parse().unwrap()
}

/// Runs `n` inserts of `@@port` into `db.t` and returns how many rows the primary has with
/// its own port.
fn writes_on_primary(c: &mut Client, db: &str, n: usize) -> usize {
    for _ in 0..n {
        c.query("INSERT INTO t (port) VALUES (@@port)").unwrap();
    }
    let t = topology();
    let primary = port_of(&t.primary);
    t.sql_value(
        &t.primary,
        &format!("SELECT COUNT(*) FROM {db}.t WHERE port = {primary}"),
    )
    .unwrap()
    .parse()
    .unwrap()
}

#[test]
fn reads_follow_weights_and_everything_else_stays_on_the_primary() {
    let _serial = serial();
    let db = schema_with_table("weights", "port");
    let t = topology();
    let server = start(&config([1, 1, 2]));
    let [primary, r1, r2] = ports();
    let mut c = client(server.mysql_addr(), Some(&db));

    let servers = [&t.primary, &t.replicas[0], &t.replicas[1]];
    let before: Vec<u64> = servers.iter().map(|s| com_select(s)).collect();
    let reads = tally(&mut c, "SELECT @@port", 400);
    let after: Vec<u64> = servers.iter().map(|s| com_select(s)).collect();
    // Weights 1:1:2 over 400 reads, spread by a weighted round robin.
    for (port, want) in [(&primary, 100), (&r1, 100), (&r2, 200)] {
        let got = count(&reads, port);
        assert!(
            got.abs_diff(want) <= 10,
            "port {port}: {got} reads, want ~{want}: {reads:?}"
        );
    }
    // The servers' own counters agree (the monitor's checks add a few).
    for (i, port) in [&primary, &r1, &r2].into_iter().enumerate() {
        let delta = after[i] - before[i];
        let routed = count(&reads, port) as u64;
        assert!(
            delta >= routed && delta <= routed + 60,
            "{port}: Com_select rose by {delta}, manifold sent {routed}"
        );
    }

    assert_eq!(
        writes_on_primary(&mut c, &db, 20),
        20,
        "every write ran on the primary"
    );

    let locking = tally(&mut c, "SELECT @@port FROM t LIMIT 1 FOR UPDATE", 20);
    assert_eq!(count(&locking, &primary), 20, "locking reads: {locking:?}");
    // A locking read that begins as the read before it does, up to its first value: the
    // session scans it from that value on (`ScanMemo`), and still sees its `FOR UPDATE`.
    let (mut plain, mut locking) = (BTreeMap::new(), BTreeMap::new());
    for i in 0..20 {
        let read = format!("SELECT @@port FROM t WHERE {i} = {i} LIMIT 1");
        for (sql, seen) in [
            (read.clone(), &mut plain),
            (read + " FOR UPDATE", &mut locking),
        ] {
            let port = c.scalar(&sql).unwrap().expect("a port");
            *seen.entry(port).or_insert(0) += 1;
        }
    }
    assert_eq!(count(&locking, &primary), 20, "locking reads: {locking:?}");
    assert!(
        count(&plain, &primary) < 20,
        "plain reads spread over the nodes: {plain:?}"
    );
    let show = c.query("SHOW VARIABLES LIKE 'port'").unwrap();
    assert_eq!(
        show.rows[0][1].as_deref(),
        Some(primary.as_str()),
        "SHOW runs on the primary"
    );

    c.query("BEGIN").unwrap();
    let in_tx = tally(&mut c, "SELECT @@port", 10);
    c.query("COMMIT").unwrap();
    assert_eq!(
        count(&in_tx, &primary),
        10,
        "a transaction stays on the primary: {in_tx:?}"
    );

    let mut read_only_on_replica = 0;
    for _ in 0..8 {
        c.query("START TRANSACTION READ ONLY").unwrap();
        let in_tx = tally(&mut c, "SELECT @@port", 5);
        c.query("COMMIT").unwrap();
        assert_eq!(
            in_tx.len(),
            1,
            "a read-only transaction stays on one node: {in_tx:?}"
        );
        if count(&in_tx, &primary) == 0 {
            read_only_on_replica += 1;
        }
    }
    assert!(
        read_only_on_replica > 0,
        "read-only transactions go to replicas too"
    );

    c.query("SET autocommit = 0").unwrap();
    let no_autocommit = tally(&mut c, "SELECT @@port", 10);
    c.query("COMMIT").unwrap();
    c.query("SET autocommit = 1").unwrap();
    assert_eq!(count(&no_autocommit, &primary), 10, "{no_autocommit:?}");

    let hinted = tally(&mut c, "/* manifold:primary */ SELECT @@port", 20);
    assert_eq!(count(&hinted, &primary), 20, "{hinted:?}");
    let hinted = tally(&mut c, "SELECT /* manifold:replica */ @@port", 20);
    assert_eq!(count(&hinted, &primary), 0, "{hinted:?}");

    // Off: everything on the primary.
    let mut cfg = config([1, 1, 2]);
    cfg.routing.read_write_split = false;
    let unsplit = manifold::start(&cfg).unwrap();
    let mut c = client(unsplit.mysql_addr(), Some(&db));
    let reads = tally(&mut c, "SELECT @@port", 20);
    assert_eq!(count(&reads, &primary), 20, "{reads:?}");
}

#[test]
fn a_lagging_replica_gets_no_reads_until_it_catches_up() {
    let _serial = serial();
    let db = schema_with_table("lag", "port");
    let server = start(&config([0, 1, 1]));
    let mut c = client(server.mysql_addr(), Some(&db));
    support::a_lagging_replica_gets_no_reads(
        topology(),
        &server,
        &mut c,
        &format!("{db}.t"),
        "port",
    );
}

#[test]
fn a_session_always_reads_its_own_writes() {
    let _serial = serial();
    let db = schema_with_table("causal", "v");
    let server = start(&config([1, 1, 1]));
    let mut c = client(server.mysql_addr(), Some(&db));
    support::a_session_reads_its_own_writes(topology(), &server, &mut c);
}

#[test]
fn rules_route_by_digest_schema_and_user_and_hints_beat_them() {
    let _serial = serial();
    let db = schema_with_table("rules", "port");
    let other = schema("rules_billing");
    let t = topology();
    let [primary, r1, r2] = ports();
    let mut cfg = config([1, 1, 1]);
    let rule = |digest: Option<&str>, schema: Option<&str>, user: Option<&str>, target: &str| {
        manifold_router::RuleConfig {
            digest: digest.map(str::to_owned),
            schema: schema.map(str::to_owned),
            user: user.map(str::to_owned),
            target: target.to_owned(),
        }
    };
    cfg.routing.rules = vec![
        rule(
            Some("AS rule_probe$"),
            None,
            None,
            &t.replicas[1].addr().to_string(),
        ),
        rule(None, Some(&other), None, "primary"),
        rule(None, None, Some(USER), "replicas"),
    ];
    let server = start(&cfg);
    let mut c = client(server.mysql_addr(), Some(&db));

    let probe = tally(&mut c, "SELECT @@port AS rule_probe", 20);
    assert_eq!(count(&probe, &r2), 20, "digest rule to one node: {probe:?}");
    let by_user = tally(&mut c, "SELECT @@port", 20);
    assert_eq!(
        count(&by_user, &primary),
        0,
        "user rule to the replicas: {by_user:?}"
    );
    assert!(
        count(&by_user, &r1) > 0 && count(&by_user, &r2) > 0,
        "{by_user:?}"
    );
    let hinted = tally(&mut c, "/* manifold:primary */ SELECT @@port", 10);
    assert_eq!(
        count(&hinted, &primary),
        10,
        "a hint beats the rules: {hinted:?}"
    );
    assert_eq!(
        writes_on_primary(&mut c, &db, 10),
        10,
        "a rule never sends writes to replicas"
    );
    c.query(&format!("USE {other}")).unwrap();
    let by_schema = tally(&mut c, "SELECT @@port", 10);
    assert_eq!(
        count(&by_schema, &primary),
        10,
        "schema rule: {by_schema:?}"
    );
}

#[test]
fn the_schema_or_the_user_chooses_the_cluster() {
    let _serial = serial();
    let db = schema("clusters");
    let b = Topology::start(manifold_testkit::TopologyConfig {
        replicas: 0,
        tls: false,
        ..manifold_testkit::TopologyConfig::default()
    })
    .expect("start a second cluster");
    b.create_user(USER, PASSWORD).unwrap();
    b.create_user("bob", "bob").unwrap();
    b.create_schema("cl_b").unwrap();
    let mut cfg = config([1, 1, 1]);
    cfg.clusters.push(manifold::config::ClusterConfig {
        name: "b".into(),
        primary: b.primary.addr().to_string(),
        replicas: Vec::new(),
        schemas: vec!["cl_b".into()],
        users: vec!["bob".into()],
    });
    cfg.users.push(user_with_password("bob", "bob"));
    let server = start(&cfg);
    let b_port = port_of(&b.primary);
    let addr = server.mysql_addr();
    let mut c = client(addr, Some(&db));

    let on_default = tally(&mut c, "SELECT @@port", 10);
    assert_eq!(count(&on_default, &b_port), 0, "{on_default:?}");
    c.query("USE cl_b").unwrap();
    let on_b = tally(&mut c, "SELECT @@port", 10);
    assert_eq!(count(&on_b, &b_port), 10, "after USE cl_b: {on_b:?}");
    c.query("CREATE TABLE x (id INT)").unwrap();
    c.query("INSERT INTO x VALUES (1)").unwrap();
    assert_eq!(
        b.sql_value(&b.primary, "SELECT COUNT(*) FROM cl_b.x")
            .unwrap(),
        "1"
    );
    c.query(&format!("USE {db}")).unwrap();
    let back = tally(&mut c, "SELECT @@port", 10);
    assert_eq!(
        count(&back, &b_port),
        0,
        "back on the default cluster: {back:?}"
    );

    let mut by_login_schema = client(addr, Some("cl_b"));
    assert_eq!(
        by_login_schema.scalar("SELECT @@port").unwrap(),
        Some(b_port.clone())
    );
    let mut bob = Client::connect(addr, "bob", "bob", None).unwrap();
    assert_eq!(bob.scalar("SELECT @@port").unwrap(), Some(b_port.clone()));
    let e = bob.query(&format!("USE {db}")).unwrap_err();
    assert!(
        e.to_string().contains(&db),
        "bob's cluster has no {db}: {e}"
    );
}

#[test]
fn the_monitor_keeps_a_heartbeat_when_configured() {
    let _serial = serial();
    let t = topology();
    let mut cfg = config([1, 1, 1]);
    cfg.routing.monitor.heartbeat_table = Some("rt_heartbeat.beat".into());
    let server = start(&cfg);
    let read = |s: &manifold_testkit::Server| {
        t.sql_value(s, "SELECT ts FROM rt_heartbeat.beat WHERE id = 1")
            .unwrap_or_default()
    };
    wait_for(
        "the heartbeat on every replica",
        Duration::from_secs(10),
        || t.replicas.iter().all(|r| !read(r).is_empty()),
    );
    let first = read(&t.replicas[0]);
    wait_for("the heartbeat to move on", Duration::from_secs(10), || {
        read(&t.replicas[0]) > first
    });
    let node = &server.shared.topology().nodes[1];
    assert!(
        node.lag().is_some_and(|l| l < Duration::from_secs(2)),
        "{:?}",
        node.lag()
    );
    drop(server);
    t.sql(&t.primary, "DROP DATABASE rt_heartbeat").unwrap();
}

#[test]
fn global_causal_reads_see_every_session_s_writes() {
    let _serial = serial();
    let db = schema_with_table("global", "v");
    let mut cfg = config([0, 1, 1]);
    cfg.routing.causal_reads = manifold_router::CausalReads::Global;
    let server = start(&cfg);
    let mut writer = client(server.mysql_addr(), Some(&db));
    let mut reader = client(server.mysql_addr(), Some(&db));
    support::global_reads_see_other_sessions_writes(topology(), &server, &mut writer, &mut reader);
}

#[test]
fn a_session_held_on_a_replica_for_its_next_statement_still_writes_on_the_primary() {
    let _serial = serial();
    let db = schema_with_table("held", "port");
    let server = start(&config([0, 1, 1]));
    let [primary, _, _] = ports();
    let mut c = client(server.mysql_addr(), Some(&db));
    assert_eq!(writes_on_primary(&mut c, &db, 3), 3);
    topology().wait_replicated(Duration::from_secs(10)).unwrap();
    // SQL_CALC_FOUND_ROWS holds the replica that ran it for the next statement...
    let read = c
        .query("SELECT SQL_CALC_FOUND_ROWS @@port FROM t LIMIT 1")
        .unwrap();
    assert_ne!(
        read.scalar(),
        Some(primary.clone()),
        "the read ran on a replica"
    );
    assert_eq!(
        c.scalar("SELECT FOUND_ROWS()").unwrap().as_deref(),
        Some("3")
    );
    // ...but a write after it goes to the primary.
    c.query("SELECT SQL_CALC_FOUND_ROWS @@port FROM t LIMIT 1")
        .unwrap();
    assert_eq!(
        writes_on_primary(&mut c, &db, 1),
        4,
        "the write ran on the primary"
    );
}
