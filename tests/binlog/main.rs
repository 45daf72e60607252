#![forbid(unsafe_code)]
//! The global binlog end to end: two independent MariaDB topologies as two clusters behind
//! one manifold with `[binlog]` on. Writes through manifold and directly on the primaries;
//! the global binlog's files are read back and must hold every transaction once, each
//! source's in its order, a write acknowledged on one cluster before another began on the
//! other cluster first; across a restart on the same directory nothing is lost or repeated;
//! `mariadb-binlog` verifies every file's checksums.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use manifold::config::{user_with_password, ClusterConfig, Config};
use manifold_binlog::event::{self, types};
use manifold_binlog::origin::Origin;
use manifold_binlog::store::{self, Reader};
use manifold_testkit::{Topology, TopologyConfig};
use manifold_tests::Client;

const USER: &str = "app";
const PASSWORD: &str = "app";

/// How long the global binlog may take to hold a write.
const WAIT: Duration = Duration::from_secs(60);

/// One transaction of the global binlog, as read back.
#[derive(Debug)]
struct Written {
    /// Its origin: the cluster and the GTID it had there.
    cluster: String,
    seq: u64,
    /// The statement texts of its annotate events (markers are found in them).
    statements: Vec<String>,
}

fn topology() -> Topology {
    let t = Topology::start(TopologyConfig {
        replicas: 1,
        tls: false,
        ..TopologyConfig::default()
    })
    .expect("a MariaDB topology starts");
    t.create_user(USER, PASSWORD).expect("create test user");
    t
}

fn config(a: &Topology, b: &Topology, dir: &Path) -> Config {
    let mut cfg = Config {
        data_dir: Some(Path::new(env!("CARGO_TARGET_TMPDIR")).join("manifold-data")),
        ..Config::default()
    };
    cfg.admin.listen = "127.0.0.1:0".into();
    cfg.admin.http_listen = String::new();
    cfg.mysql.listen = "127.0.0.1:0".into();
    cfg.engine.threads = 2;
    cfg.backend.primary = a.primary.addr().to_string();
    cfg.backend.replicas = a
        .replicas
        .iter()
        .map(|r| manifold_router::ReplicaEntry::Addr(r.addr().to_string()))
        .collect();
    cfg.clusters.push(ClusterConfig {
        name: "b".into(),
        primary: b.primary.addr().to_string(),
        replicas: b
            .replicas
            .iter()
            .map(|r| manifold_router::ReplicaEntry::Addr(r.addr().to_string()))
            .collect(),
        schemas: vec!["gb".into()],
        users: Vec::new(),
    });
    cfg.users.push(user_with_password(USER, PASSWORD));
    cfg.binlog.dir = dir.to_path_buf();
    cfg.binlog.users = Some(vec![USER.into()]);
    cfg.binlog.heartbeat_interval = Duration::from_millis(50);
    // Small files: the test crosses rotations.
    cfg.binlog.max_file_size = 16 << 10;
    cfg
}

fn client(server: &manifold::Server, db: &str) -> Client {
    Client::connect(server.mysql_addr(), USER, PASSWORD, Some(db)).expect("login through manifold")
}

/// Every transaction in the global binlog's files, in file order.
fn read_all(dir: &Path) -> Vec<Written> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for file in store::list_files(dir, "manifold-bin").expect("list the global binlog") {
        let mut reader = Reader::open(dir, &file.name, 4).expect("open a global binlog file");
        while reader
            .next_event(&mut buf, file.size)
            .expect("read the global binlog")
        {
            let header = event::Header::parse(&buf).expect("an event header");
            if header.type_code != types::ANNOTATE_ROWS {
                continue;
            }
            let text = event::annotate_text(&buf);
            if let Some(origin) = Origin::parse(text) {
                out.push(Written {
                    cluster: origin.cluster,
                    seq: origin.gtid.seq(),
                    statements: Vec::new(),
                });
            } else if let Some(current) = out.last_mut() {
                current
                    .statements
                    .push(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
    out
}

/// Where each marker is: the index of the transaction holding it; panics on a marker held
/// twice.
fn positions(written: &[Written]) -> HashMap<String, usize> {
    let mut at = HashMap::new();
    for (i, t) in written.iter().enumerate() {
        for s in &t.statements {
            if let Some(marker) = marker_in(s) {
                if let Some(before) = at.insert(marker.clone(), i) {
                    panic!(
                        "{marker} is in the global binlog twice (transactions {before} and {i})"
                    );
                }
            }
        }
    }
    at
}

/// `m_<name>` out of a statement `... 'm_<name>' ...` (a value: the `mariadb` client drops
/// comments).
fn marker_in(statement: &str) -> Option<String> {
    let start = statement.find("'m_")? + 1;
    let end = start + statement[start..].find('\'')?;
    Some(statement[start..end].to_owned())
}

/// Waits until the files (as published) hold every marker; returns what they hold.
fn wait_for(server: &manifold::Server, dir: &Path, markers: &[String]) -> Vec<Written> {
    let shared = &server
        .binlog
        .as_ref()
        .expect("the global binlog is on")
        .shared;
    let deadline = Instant::now() + WAIT;
    loop {
        let written = read_all(dir);
        let at = positions(&written);
        let missing: Vec<&String> = markers.iter().filter(|m| !at.contains_key(*m)).collect();
        if missing.is_empty() {
            return written;
        }
        assert!(
            Instant::now() < deadline,
            "not in the global binlog after {WAIT:?}: {missing:?}; state {}, sources {:?}",
            shared.metrics.state(),
            shared.sources()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Each source's transactions are in its GTID order, none twice.
fn assert_source_order(written: &[Written]) {
    let mut last: HashMap<&str, u64> = HashMap::new();
    for t in written {
        if let Some(prev) = last.insert(&t.cluster, t.seq) {
            assert!(
                t.seq > prev,
                "cluster {}: GTID sequence {} after {prev}",
                t.cluster,
                t.seq
            );
        }
    }
}

fn write(c: &mut Client, table: &str, id: u32, marker: &str, markers: &mut Vec<String>) {
    c.query(&format!(
        "INSERT INTO {table} (id, note) VALUES ({id}, '{marker}')"
    ))
    .unwrap_or_else(|e| panic!("{marker}: {e}"));
    markers.push(marker.to_owned());
}

fn write_direct(t: &Topology, table: &str, id: u32, marker: &str, markers: &mut Vec<String>) {
    t.sql(
        &t.primary,
        &format!("INSERT INTO {table} (id, note) VALUES ({id}, '{marker}')"),
    )
    .unwrap_or_else(|e| panic!("{marker}: {e}"));
    markers.push(marker.to_owned());
}

#[test]
fn two_clusters_merge_into_one_ordered_global_binlog_across_a_restart() {
    let a = topology();
    let b = topology();
    for (t, schema) in [(&a, "ga"), (&b, "gb")] {
        t.create_schema(schema).expect("create schema");
        t.sql(
            &t.primary,
            &format!("CREATE TABLE {schema}.t (id INT PRIMARY KEY, note VARCHAR(32))"),
        )
        .expect("create table");
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cfg = config(&a, &b, dir.path());
    let mut markers = Vec::new();

    let server = manifold::start(&cfg).expect("manifold starts with the global binlog");
    let mut on_a = client(&server, "ga");
    let mut on_b = client(&server, "gb");
    let mut id = 0;
    let mut chains = Vec::new();
    for i in 0..20 {
        id += 1;
        write(&mut on_a, "t", id, &format!("m_a{i}"), &mut markers);
        id += 1;
        write(&mut on_b, "t", id, &format!("m_b{i}"), &mut markers);
        id += 1;
        write_direct(&a, "ga.t", id, &format!("m_da{i}"), &mut markers);
        id += 1;
        write_direct(&b, "gb.t", id, &format!("m_db{i}"), &mut markers);
        // A causal chain: acknowledged on one cluster, then written on the other.
        let (first, second) = (format!("m_ca{i}"), format!("m_cb{i}"));
        id += 1;
        write(&mut on_a, "t", id, &first, &mut markers);
        id += 1;
        write(&mut on_b, "t", id, &second, &mut markers);
        chains.push((first, second));
        let (first, second) = (format!("m_rb{i}"), format!("m_ra{i}"));
        id += 1;
        write(&mut on_b, "t", id, &first, &mut markers);
        id += 1;
        write(&mut on_a, "t", id, &second, &mut markers);
        chains.push((first, second));
    }
    let written = wait_for(&server, dir.path(), &markers);
    assert_source_order(&written);
    let at = positions(&written);
    for (first, second) in &chains {
        assert!(
            at[first] < at[second],
            "{first} was acknowledged before {second} was sent, yet comes after it"
        );
    }
    drop(on_a);
    drop(on_b);
    server.shutdown(Duration::from_secs(5));

    // Written while manifold is down: read when it is back.
    for i in 0..5 {
        id += 1;
        write_direct(&a, "ga.t", id, &format!("m_downa{i}"), &mut markers);
        id += 1;
        write_direct(&b, "gb.t", id, &format!("m_downb{i}"), &mut markers);
    }
    let server = manifold::start(&cfg).expect("manifold starts again on the same directory");
    let mut on_a = client(&server, "ga");
    let mut on_b = client(&server, "gb");
    for i in 0..5 {
        id += 1;
        write(&mut on_a, "t", id, &format!("m_aftera{i}"), &mut markers);
        id += 1;
        write(&mut on_b, "t", id, &format!("m_afterb{i}"), &mut markers);
    }
    let written = wait_for(&server, dir.path(), &markers);
    assert_source_order(&written);
    let at = positions(&written);
    for (first, second) in &chains {
        assert!(
            at[first] < at[second],
            "{first} / {second} after the restart"
        );
    }
    let files = server
        .binlog
        .as_ref()
        .expect("the global binlog is on")
        .shared
        .files();
    assert!(files.len() > 1, "16K files rotated: {files:?}");
    drop(on_a);
    drop(on_b);
    server.shutdown(Duration::from_secs(5));

    for file in store::list_files(dir.path(), "manifold-bin").expect("list the files") {
        let out = std::process::Command::new("mariadb-binlog")
            .arg("--verify-binlog-checksum")
            .arg(dir.path().join(&file.name))
            .output()
            .expect("mariadb-binlog runs");
        assert!(
            out.status.success(),
            "mariadb-binlog rejects {}: {}",
            file.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A source read for the first time starts at its primary's position then; stopped before
/// any of its transactions reached a file, manifold must resume it from that position, not
/// from the primary's position at the next start (which would skip what was written
/// meanwhile).
#[test]
fn a_new_source_resumes_where_it_first_started_even_with_nothing_written() {
    let a = topology();
    let b = topology();
    for (t, schema) in [(&a, "ga"), (&b, "gb")] {
        t.create_schema(schema).expect("create schema");
        t.sql(
            &t.primary,
            &format!("CREATE TABLE {schema}.t (id INT PRIMARY KEY, note VARCHAR(32))"),
        )
        .expect("create table");
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cfg = config(&a, &b, dir.path());
    let server = manifold::start(&cfg).expect("manifold starts with the global binlog");
    let shared = server.binlog.as_ref().expect("on").shared.clone();
    let deadline = Instant::now() + WAIT;
    while !shared.sources().iter().all(|s| s.state == "streaming") {
        assert!(Instant::now() < deadline, "sources: {:?}", shared.sources());
        std::thread::sleep(Duration::from_millis(50));
    }
    server.shutdown(Duration::from_secs(5));
    assert!(read_all(dir.path()).is_empty(), "nothing was written yet");

    let mut markers = Vec::new();
    write_direct(&b, "gb.t", 1, "m_while_down", &mut markers);
    let server = manifold::start(&cfg).expect("manifold starts again on the same directory");
    let mut on_a = client(&server, "ga");
    write(&mut on_a, "t", 2, "m_after", &mut markers);
    let written = wait_for(&server, dir.path(), &markers);
    assert_source_order(&written);
    drop(on_a);
    server.shutdown(Duration::from_secs(5));
}
