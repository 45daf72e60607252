//! Statements naming a schema another cluster holds (what CDC consumers of the global binlog
//! ask, connected with no schema) run on that cluster, one statement at a time: the session
//! stays where its own schema and user put it.

use manifold_testkit::{Topology, TopologyConfig};
use manifold_tests::Client;

use super::support::start;
use super::{client, config, port_of, ports, schema, serial, topology, PASSWORD, USER};

/// Where `SELECT @@port` runs for `c`: on the default cluster (any of its three nodes), not
/// on `b_port`.
fn assert_on_default(c: &mut Client, b_port: &str, after: &str) {
    let port = c.scalar("SELECT @@port").unwrap().unwrap();
    assert_ne!(port, b_port, "after {after}: ran on cluster b");
    assert!(
        ports().contains(&port),
        "after {after}: {port} is no node of the default cluster"
    );
}

fn column(rows: &[Vec<Option<String>>], at: usize) -> Vec<String> {
    rows.iter()
        .map(|r| r.get(at).cloned().flatten().unwrap_or_default())
        .collect()
}

#[test]
fn statements_naming_another_cluster_s_schema_run_there_one_at_a_time() {
    let _serial = serial();
    let db = schema("qualified");
    let t = topology();
    t.sql(&t.primary, &format!("CREATE TABLE {db}.t (here INT)"))
        .unwrap();
    t.sql(&t.primary, &format!("INSERT INTO {db}.t VALUES (7)"))
        .unwrap();
    t.wait_replicated(std::time::Duration::from_secs(10))
        .unwrap();
    let b = Topology::start(TopologyConfig {
        replicas: 0,
        tls: false,
        ..TopologyConfig::default()
    })
    .expect("start a second cluster");
    b.create_user(USER, PASSWORD).unwrap();
    b.create_schema("qb").unwrap();
    b.sql(
        &b.primary,
        "CREATE TABLE qb.t (id INT PRIMARY KEY, v VARCHAR(10) COMMENT 'on b')",
    )
    .unwrap();
    let mut cfg = config([1, 1, 1]);
    cfg.clusters.push(manifold::config::ClusterConfig {
        name: "b".into(),
        primary: b.primary.addr().to_string(),
        replicas: Vec::new(),
        schemas: vec!["qb".into(), "qb_new".into()],
        users: Vec::new(),
    });
    let server = start(&cfg);
    let b_port = port_of(&b.primary);
    let addr = server.mysql_addr();

    // A CDC consumer: no schema of its own.
    let mut c = client(addr, None);
    assert_on_default(&mut c, &b_port, "login");
    let create = c.query("SHOW CREATE TABLE qb.t").unwrap();
    assert!(column(&create.rows, 1)[0].contains("'on b'"), "{create:?}");
    assert_on_default(&mut c, &b_port, "SHOW CREATE TABLE qb.t");
    let columns = c
        .query(
            "SELECT COLUMN_NAME, COLUMN_TYPE, COLUMN_KEY FROM information_schema.columns \
             WHERE table_schema = 'qb' AND table_name = 't' ORDER BY ORDINAL_POSITION",
        )
        .unwrap();
    assert_eq!(column(&columns.rows, 0), ["id", "v"], "{columns:?}");
    assert_on_default(&mut c, &b_port, "the information_schema query");
    let show = c.query("SHOW COLUMNS FROM t FROM qb").unwrap();
    assert_eq!(column(&show.rows, 0), ["id", "v"], "{show:?}");
    assert_on_default(&mut c, &b_port, "SHOW COLUMNS FROM t FROM qb");
    let inserted = c.query("INSERT INTO qb.t VALUES (1, 'x')").unwrap();
    assert_eq!(inserted.affected_rows, 1);
    assert_eq!(
        b.sql_value(&b.primary, "SELECT COUNT(*) FROM qb.t")
            .unwrap(),
        "1"
    );
    assert_on_default(&mut c, &b_port, "INSERT INTO qb.t");
    let read = c.query("SELECT v, @@port FROM qb.t WHERE id = 1").unwrap();
    assert_eq!(
        read.rows,
        [vec![Some("x".to_owned()), Some(b_port.clone())]]
    );
    assert_eq!(c.scalar("SELECT DATABASE()").unwrap(), None);
    // Database DDL goes where the schema is listed, creating it there.
    b.sql(&b.primary, "DROP DATABASE IF EXISTS qb_new").unwrap();
    c.query("CREATE DATABASE IF NOT EXISTS qb_new").unwrap();
    c.query("CREATE TABLE qb_new.t (a INT)").unwrap();
    assert_eq!(
        b.sql_value(
            &b.primary,
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'qb_new'"
        )
        .unwrap(),
        "1"
    );
    assert_on_default(&mut c, &b_port, "CREATE DATABASE qb_new");
    c.query("DROP DATABASE qb_new").unwrap();
    assert_eq!(
        b.sql_value(
            &b.primary,
            "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'qb_new'"
        )
        .unwrap(),
        "0"
    );

    // A session in a schema of the default cluster keeps it, and its unqualified statements
    // run there.
    let mut d = client(addr, Some(&db));
    assert_eq!(
        d.scalar("SELECT COUNT(*) FROM `qb`.`t`")
            .unwrap()
            .as_deref(),
        Some("1")
    );
    assert_eq!(
        d.scalar("SELECT here FROM t").unwrap().as_deref(),
        Some("7")
    );
    assert_eq!(d.scalar("SELECT DATABASE()").unwrap(), Some(db.clone()));
    assert_on_default(&mut d, &b_port, "SELECT COUNT(*) FROM qb.t");

    // A statement that leaves the session holding its connection keeps it there for the
    // next one, with the session's schema still its own.
    d.query("SELECT SQL_CALC_FOUND_ROWS id FROM qb.t LIMIT 0")
        .unwrap();
    assert_eq!(
        d.scalar("SELECT FOUND_ROWS()").unwrap().as_deref(),
        Some("1")
    );
    assert_eq!(
        d.scalar("SELECT here FROM t").unwrap().as_deref(),
        Some("7")
    );
    assert_eq!(d.scalar("SELECT DATABASE()").unwrap(), Some(db.clone()));

    // A transaction holds its connection: its statements stay on the default cluster.
    d.query("BEGIN").unwrap();
    d.query("SELECT * FROM qb.t")
        .expect_err("qb is not on the default cluster");
    d.query("ROLLBACK").unwrap();
    // One statement runs on one cluster: naming schemas of both, it stays on the session's.
    let e = d
        .query(&format!("SELECT * FROM qb.t JOIN {db}.t"))
        .expect_err("qb is not on the default cluster");
    assert!(e.to_string().contains("qb"), "{e}");
    assert_eq!(
        d.scalar("SELECT here FROM t").unwrap().as_deref(),
        Some("7")
    );
}
