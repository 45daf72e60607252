#![forbid(unsafe_code)]
//! The assembler over a binlog file a real MariaDB wrote: every kind of transaction the
//! global binlog meets comes out whole, with its GTID, stamp, heartbeat flag and end.

use std::io::Write;
use std::process::Stdio;

use manifold_binlog::event::{self, types, Header, HEADER_LEN};
use manifold_binlog::gtid::{Gtid, GtidPos};
use manifold_binlog::spill::Budget;
use manifold_binlog::txn::{Assembler, SourceTxn};
use manifold_testkit::{Topology, TopologyConfig};

/// Runs `sql` on the primary with its comments kept (the stamps are comments).
fn sql(topology: &Topology, sql: &str) -> String {
    let mut child = topology
        .client_command(&topology.primary)
        .args(["--comments", "-N", "-B"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the mariadb client starts");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(sql.as_bytes())
        .expect("the client reads its statements");
    let out = child.wait_with_output().expect("the client ends");
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The events of a binlog file, each whole (header to checksum).
fn file_events(bytes: &[u8]) -> Vec<&[u8]> {
    assert_eq!(&bytes[..4], &event::MAGIC);
    let mut at = 4;
    let mut events = Vec::new();
    while at < bytes.len() {
        let header = Header::parse(&bytes[at..]).expect("a whole header");
        let end = at + header.event_size as usize;
        events.push(&bytes[at..end]);
        at = end;
    }
    events
}

fn body_events(txn: &SourceTxn) -> Vec<Vec<u8>> {
    let mut reader = txn.body.reader().unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while reader.next_event(&mut buf).unwrap() {
        out.push(buf.clone());
    }
    out
}

/// What a transaction should look like.
struct Expected {
    what: &'static str,
    stamp: Option<u64>,
    heartbeat: bool,
    /// The type of its last event, and the statement text when it is a query.
    end: (u8, Option<&'static str>),
    dml_events: u32,
}

const XID: (u8, Option<&str>) = (types::XID, None);

fn ddl(what: &'static str, stamp: Option<u64>) -> Expected {
    Expected {
        what,
        stamp,
        heartbeat: false,
        end: (types::QUERY, None),
        dml_events: 0,
    }
}

fn dml(
    what: &'static str,
    stamp: Option<u64>,
    end: (u8, Option<&'static str>),
    dml_events: u32,
) -> Expected {
    Expected {
        what,
        stamp,
        heartbeat: false,
        end,
        dml_events,
    }
}

#[test]
fn a_mariadb_binlog_file_assembles_into_its_transactions() {
    let topology = Topology::start(TopologyConfig {
        replicas: 0,
        tls: false,
        ..Default::default()
    })
    .expect("a MariaDB server starts");
    // Start a fresh file so that only this test's transactions are in it.
    sql(&topology, "FLUSH BINARY LOGS");
    let file = sql(&topology, "SHOW MASTER STATUS");
    let file = file.split('\t').next().expect("a file name").to_string();
    let before: GtidPos = sql(&topology, "SELECT @@gtid_binlog_pos")
        .trim()
        .parse()
        .expect("a GTID position");
    let first_seq = before.get(0).map_or(1, |g| g.seq + 1);

    let workload = [
        "CREATE DATABASE app",
        "/*manifold:hlc=101*/ CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20), b LONGBLOB) ENGINE=InnoDB",
        "CREATE DATABASE manifold",
        "CREATE TABLE manifold.heartbeat (id INT PRIMARY KEY, hlc BIGINT UNSIGNED) ENGINE=InnoDB",
        "CREATE TABLE app.m (id INT PRIMARY KEY) ENGINE=MyISAM",
        "BEGIN; INSERT INTO app.t VALUES (1, 'a', NULL); \
         /*manifold:hlc=200*/ INSERT INTO app.t VALUES (2, 'b', NULL); \
         /*manifold:hlc=300*/ UPDATE app.t SET v = 'c' WHERE id = 1; COMMIT",
        "INSERT INTO app.t VALUES (3, 'd', NULL)",
        "/*manifold:hlc=777*/ INSERT INTO app.t VALUES (4, 'e', NULL)",
        "/*manifold:hlc=888*/ INSERT INTO manifold.heartbeat VALUES (1, 888) \
         ON DUPLICATE KEY UPDATE hlc = 888",
        "INSERT INTO app.t VALUES (5, 'blob', REPEAT('x', 100000))",
        "INSERT INTO app.m VALUES (1)",
        // The MyISAM row cannot be undone: the server logs it alone, committed.
        "BEGIN; INSERT INTO app.t VALUES (6, 'f', NULL); INSERT INTO app.m VALUES (2); ROLLBACK",
        // In ROW format even one statement on both engines logs its MyISAM rows alone.
        "BEGIN; INSERT INTO app.t VALUES (7, 'g', NULL); \
         UPDATE app.t JOIN app.m SET t.v = 'h', m.id = m.id + 100 WHERE t.id = 7 AND m.id = 2; \
         ROLLBACK",
        // A session in STATEMENT format logs the whole group, ended with ROLLBACK.
        "SET SESSION binlog_format = STATEMENT; BEGIN; \
         /*manifold:hlc=400*/ INSERT INTO app.t VALUES (8, 'i', NULL); \
         INSERT INTO app.m VALUES (3); ROLLBACK",
    ];
    for statement in workload {
        sql(&topology, statement);
    }
    let expected = [
        ddl("CREATE DATABASE app", None),
        ddl("CREATE TABLE app.t", Some(101)),
        ddl("CREATE DATABASE manifold", None),
        ddl("CREATE TABLE manifold.heartbeat", None),
        ddl("CREATE TABLE app.m", None),
        dml("multi-statement transaction", Some(200), XID, 6),
        dml("autocommit insert", None, XID, 2),
        dml("stamped insert", Some(777), XID, 2),
        Expected {
            what: "heartbeat",
            stamp: Some(888),
            heartbeat: true,
            end: XID,
            dml_events: 2,
        },
        dml("blob insert", None, XID, 2),
        dml("MyISAM insert", None, (types::QUERY, Some("COMMIT")), 2),
        // Only the MyISAM row is logged: the InnoDB one was undone.
        dml(
            "MyISAM row of a rolled-back transaction",
            None,
            (types::QUERY, Some("COMMIT")),
            2,
        ),
        dml(
            "statement on both engines, rolled back",
            None,
            (types::QUERY, Some("COMMIT")),
            2,
        ),
        dml(
            "statement-format group, rolled back",
            Some(400),
            (types::QUERY, Some("ROLLBACK")),
            0,
        ),
    ];
    sql(&topology, "FLUSH BINARY LOGS");

    let bytes = std::fs::read(topology.primary.datadir.join(&file)).expect("the binlog file");
    let events = file_events(&bytes);
    for e in &events {
        event::verify_checksum(e).expect("every event's CRC32 holds");
    }
    let spill = tempfile::tempdir().unwrap();
    let budget = Budget::new(1 << 30, spill.path().to_path_buf());
    let mut assembler = Assembler::new(0, ("manifold", "heartbeat"), &budget);
    let mut txns = Vec::new();
    for e in &events {
        if let Some(txn) = assembler.push(e).expect("a well-formed MariaDB stream") {
            txns.push(txn);
        }
    }
    assert!(
        !assembler.in_transaction(),
        "the file ends between transactions"
    );

    let listing: Vec<_> = txns
        .iter()
        .map(|t| {
            (
                t.gtid.seq(),
                t.stamp,
                t.heartbeat,
                t.dml_events,
                t.body.events(),
            )
        })
        .collect();
    assert_eq!(txns.len(), expected.len(), "{listing:?}");
    for (i, (txn, want)) in txns.iter().zip(&expected).enumerate() {
        let what = want.what;
        assert_eq!(
            txn.gtid,
            manifold_binlog::gtid::TxnGtid::MariaDb(Gtid {
                domain: 0,
                server: 1,
                seq: first_seq + i as u64
            }),
            "{what}"
        );
        assert_eq!(txn.stamp, want.stamp, "{what}");
        assert_eq!(txn.heartbeat, want.heartbeat, "{what}");
        assert_eq!(txn.dml_events, want.dml_events, "{what}");
        assert!(txn.timestamp > 1_700_000_000, "{what}: a commit time");
        let body = body_events(txn);
        let last = body.last().expect("a body");
        assert_eq!(last[4], want.end.0, "{what}: ends with the right event");
        if let Some(text) = want.end.1 {
            assert_eq!(event::query_text(last).unwrap(), text.as_bytes(), "{what}");
        }
        let standalone = txn.gtid_flags & event::gtid_flags::STANDALONE != 0;
        assert_eq!(
            standalone,
            want.end == (types::QUERY, None),
            "{what}: DDL is standalone"
        );
    }
    assert!(
        txns[9].body.bytes() > 100_000,
        "the blob is in the body whole"
    );

    // Every event of the file but the framing and the GTIDs is in a body, in file order.
    let in_bodies: Vec<Vec<u8>> = txns.iter().flat_map(body_events).collect();
    let in_file: Vec<Vec<u8>> = events
        .iter()
        .filter(|e| {
            !matches!(
                e[4],
                types::FORMAT_DESCRIPTION
                    | types::GTID_LIST
                    | types::BINLOG_CHECKPOINT
                    | types::ROTATE
                    | types::GTID
            )
        })
        .map(|e| e.to_vec())
        .collect();
    assert_eq!(in_bodies.len(), in_file.len());
    assert!(
        in_bodies == in_file,
        "bodies hold the file's events as written"
    );
    assert!(events.iter().all(|e| e.len() >= HEADER_LEN));
}
