#![forbid(unsafe_code)]
//! The global binlog in MySQL's dialect, served to a real MySQL 9.7 replica: two MySQL
//! topologies as two clusters behind one manifold with `[binlog]` on, and a third MySQL
//! server replicating from manifold with GTID auto-positioning (`COM_BINLOG_DUMP_GTID`)
//! ends with the same rows as the sources.

use std::path::Path;
use std::time::{Duration, Instant};

use manifold::config::{user_with_password, ClusterConfig, Config};
use manifold_testkit::{Flavor, Topology, TopologyConfig};
use manifold_tests::Client;

const USER: &str = "app";
const PASSWORD: &str = "app";

/// How long the replica may take to hold what the sources hold.
const WAIT: Duration = Duration::from_secs(90);

fn mysql(replicas: usize) -> Topology {
    let t = Topology::start(TopologyConfig {
        replicas,
        tls: false,
        flavor: Flavor::MySql,
        ..TopologyConfig::default()
    })
    .expect("a MySQL topology starts");
    t.create_user(USER, PASSWORD).expect("create test user");
    t
}

fn config(a: &Topology, b: &Topology, dir: &Path) -> Config {
    let mut cfg = Config {
        data_dir: Some(Path::new(env!("CARGO_TARGET_TMPDIR")).join("manifold-data-mysql")),
        ..Config::default()
    };
    cfg.admin.listen = "127.0.0.1:0".into();
    cfg.admin.http_listen = String::new();
    cfg.mysql.listen = "127.0.0.1:0".into();
    cfg.engine.threads = 2;
    cfg.backend.primary = a.primary.addr().to_string();
    cfg.clusters.push(ClusterConfig {
        name: "b".into(),
        primary: b.primary.addr().to_string(),
        replicas: Vec::new(),
        schemas: vec!["gb".into()],
        users: Vec::new(),
    });
    cfg.users.push(user_with_password(USER, PASSWORD));
    cfg.binlog.dir = dir.to_path_buf();
    cfg.binlog.users = Some(vec![USER.into()]);
    cfg.binlog.heartbeat_interval = Duration::from_millis(50);
    // Small files: the replica crosses rotations.
    cfg.binlog.max_file_size = 16 << 10;
    cfg
}

fn client(server: &manifold::Server, db: Option<&str>) -> Client {
    Client::connect(server.mysql_addr(), USER, PASSWORD, db).expect("login through manifold")
}

/// `CHECKSUM TABLE` of `table` on `server`.
fn checksum(t: &Topology, server: &manifold_testkit::Server, table: &str) -> String {
    t.sql_value(server, &format!("CHECKSUM TABLE {table}"))
        .unwrap_or_else(|e| panic!("CHECKSUM TABLE {table}: {e}"))
}

#[test]
fn a_mysql_replica_auto_positions_on_manifold_and_ends_with_the_sources_rows() {
    let a = mysql(0);
    let b = mysql(0);
    let replica = mysql(0);
    // The schemas exist before manifold reads the sources (the global binlog holds what
    // comes after), and on the replica as on the sources.
    for (t, schema) in [(&a, "ga"), (&b, "gb"), (&replica, "ga"), (&replica, "gb")] {
        t.create_schema(schema).expect("create schema");
        t.sql(
            &t.primary,
            &format!("CREATE TABLE {schema}.t (id INT PRIMARY KEY, note VARCHAR(64))"),
        )
        .expect("create table");
    }
    let dir = tempfile::tempdir().expect("a directory for the global binlog");
    let server = manifold::start(&config(&a, &b, dir.path()))
        .expect("manifold starts with the global binlog of MySQL sources");
    let addr = server.mysql_addr();

    let mut c = client(&server, None);
    let scalar = |c: &mut Client, sql: &str| {
        c.scalar(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap_or_else(|| panic!("{sql}: NULL"))
    };
    // What a MySQL replica asks first is manifold's, not a backend's.
    let uuid = scalar(&mut c, "SELECT @@GLOBAL.SERVER_UUID");
    assert!(uuid.starts_with("6d616e69-666f-6c64-8000-"), "{uuid}");
    assert_eq!(scalar(&mut c, "SELECT @@GLOBAL.GTID_MODE"), "ON");

    let mut id = 0;
    let mut insert = |c: &mut Client, schema: &str, n: usize| {
        for _ in 0..n {
            id += 1;
            let sql = format!(
                "INSERT INTO {schema}.t (id, note) VALUES ({id}, '{}')",
                "x".repeat(40)
            );
            c.query(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    };
    insert(&mut c, "ga", 50);
    insert(&mut c, "gb", 50);

    let change = format!(
        "CHANGE REPLICATION SOURCE TO SOURCE_HOST='{}', SOURCE_PORT={}, SOURCE_USER='{USER}', \
         SOURCE_PASSWORD='{PASSWORD}', SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1, \
         SOURCE_HEARTBEAT_PERIOD=1",
        addr.ip(),
        addr.port()
    );
    replica
        .sql(&replica.primary, &change)
        .expect("CHANGE REPLICATION SOURCE TO manifold");
    replica
        .sql(&replica.primary, "START REPLICA")
        .expect("START REPLICA");

    // More while it replicates, on both clusters.
    insert(&mut c, "ga", 100);
    insert(&mut c, "gb", 100);
    c.query("UPDATE ga.t SET note = 'changed' WHERE id % 3 = 0")
        .expect("an update");
    c.query("DELETE FROM gb.t WHERE id % 7 = 0")
        .expect("a delete");
    // Shapes whose origin goes elsewhere: a savepoint before the rows (the origin stays in the
    // rows-query event: MySQL recognises a SAVEPOINT by how its text starts), and an empty
    // transaction under an explicit GTID, written on the source directly (BEGIN, COMMIT and
    // nothing between: the origin is a rows-query event before the COMMIT).
    for sql in [
        "BEGIN",
        "SAVEPOINT s1",
        "INSERT INTO ga.t (id, note) VALUES (100001, 'after a savepoint')",
        "SAVEPOINT s2",
        "UPDATE ga.t SET note = 'rolled back' WHERE id = 100001",
        "ROLLBACK TO SAVEPOINT s2",
        "COMMIT",
    ] {
        c.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let a_uuid = a
        .sql_value(&a.primary, "SELECT @@server_uuid")
        .expect("the source's uuid");
    a.sql(
        &a.primary,
        &format!("SET GTID_NEXT='{a_uuid}:1000000'; BEGIN; COMMIT; SET GTID_NEXT='AUTOMATIC'"),
    )
    .expect("an empty transaction under an explicit GTID");
    insert(&mut c, "ga", 5);

    let want_a = checksum(&a, &a.primary, "ga.t");
    let want_b = checksum(&b, &b.primary, "gb.t");
    let deadline = Instant::now() + WAIT;
    loop {
        let status = replica
            .replica_status(&replica.primary)
            .expect("SHOW REPLICA STATUS");
        let io_error = status.get("Last_IO_Error").cloned().unwrap_or_default();
        let sql_error = status.get("Last_SQL_Error").cloned().unwrap_or_default();
        assert!(
            io_error.is_empty() && sql_error.is_empty(),
            "the replica failed: IO {io_error:?}, SQL {sql_error:?}"
        );
        let have_a = replica
            .sql_value(&replica.primary, "CHECKSUM TABLE ga.t")
            .ok();
        let have_b = replica
            .sql_value(&replica.primary, "CHECKSUM TABLE gb.t")
            .ok();
        if have_a.as_ref() == Some(&want_a) && have_b.as_ref() == Some(&want_b) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica does not hold the sources' rows after {WAIT:?}: {have_a:?}/{want_a}, {have_b:?}/{want_b}; status {status:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The replica's position is manifold's: it has every transaction written, nothing else
    // of manifold's UUID.
    let executed = replica
        .sql_value(&replica.primary, "SELECT @@GLOBAL.gtid_executed")
        .expect("the replica's gtid_executed");
    let end = scalar(&mut c, "SELECT @@GLOBAL.gtid_executed");
    let ours = |s: &str| {
        s.split(',')
            // The client prints the set's line breaks escaped, as `\n`.
            .map(|p| p.replace("\\n", "").replace('\n', "").trim().to_owned())
            .find(|p| p.starts_with(&uuid))
            .unwrap_or_default()
    };
    assert_eq!(ours(&executed), ours(&end));
    // The empty transaction is in the global binlog (its origin names its source GTID), so
    // the replica above applied that shape too.
    let written: Vec<u8> = std::fs::read_dir(dir.path())
        .expect("the binlog directory")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("manifold-bin.0")
        })
        .flat_map(|e| std::fs::read(e.path()).expect("a binlog file"))
        .collect();
    let needle = format!("gtid={a_uuid}:1000000 ");
    assert!(
        written
            .windows(needle.len())
            .any(|w| w == needle.as_bytes()),
        "the empty transaction's origin in the files"
    );
    drop(server);
}
