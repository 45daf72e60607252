#![forbid(unsafe_code)]
//! The assembler over binlog files a real MySQL 9.7 wrote, with transaction compression off
//! and on: every kind of transaction the global binlog meets comes out whole, with its GTID,
//! stamp, heartbeat flag and end, and a compressed transaction holds the same events as the
//! plain one.

use std::collections::HashSet;
use std::io::Write;
use std::process::Stdio;

use manifold_binlog::event::{self, types, Header, HEADER_LEN};
use manifold_binlog::gtid::{GtidSet, MysqlGtid, TxnGtid, Uuid};
use manifold_binlog::spill::Budget;
use manifold_binlog::stamp;
use manifold_binlog::txn::{Assembler, SourceTxn};
use manifold_testkit::{Flavor, Topology, TopologyConfig};

/// Runs `sql` on the primary in one session with its comments kept (the stamps are
/// comments).
fn sql(topology: &Topology, sql: &str) -> String {
    let mut child = topology
        .client_command(&topology.primary)
        .args(["--comments", "-N", "-B"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the client starts");
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
    /// The type of its last event, and the start of the statement when it is a query.
    end: (u8, Option<&'static str>),
    dml_events: u32,
    /// Its first statement is the whole group (DDL, `XA COMMIT`, `XA ROLLBACK`).
    standalone: bool,
}

const XID: (u8, Option<&str>) = (types::XID, None);
const XA_PREPARE: (u8, Option<&str>) = (types::XA_PREPARE, None);

fn ddl(what: &'static str, stamp: Option<u64>, heartbeat: bool) -> Expected {
    Expected {
        what,
        stamp,
        heartbeat,
        end: (types::QUERY, None),
        dml_events: 0,
        standalone: true,
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
        standalone: false,
    }
}

fn xa_end(what: &'static str, statement: &'static str) -> Expected {
    Expected {
        what,
        stamp: None,
        heartbeat: false,
        end: (types::QUERY, Some(statement)),
        dml_events: 0,
        standalone: true,
    }
}

const BLOB_BYTES: usize = 3 << 20;

fn workload() -> Vec<String> {
    let internal = String::from_utf8(stamp::INTERNAL.to_vec()).unwrap();
    vec![
        "CREATE DATABASE app".into(),
        "/*manifold:hlc=101*/ CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20), b LONGBLOB) ENGINE=InnoDB".into(),
        format!("{internal}CREATE DATABASE IF NOT EXISTS `manifold`"),
        format!("{internal}CREATE TABLE IF NOT EXISTS `manifold`.`heartbeat` (id INT PRIMARY KEY, hlc BIGINT UNSIGNED) ENGINE=InnoDB"),
        "CREATE TABLE app.m (id INT PRIMARY KEY) ENGINE=MyISAM".into(),
        "BEGIN; INSERT INTO app.t VALUES (1, 'a', NULL); \
         /*manifold:hlc=200*/ INSERT INTO app.t VALUES (2, 'b', NULL); \
         /*manifold:hlc=300*/ UPDATE app.t SET v = 'c' WHERE id = 1; COMMIT".into(),
        "INSERT INTO app.t VALUES (3, 'd', NULL)".into(),
        "/*manifold:hlc=777*/ INSERT INTO app.t VALUES (4, 'e', NULL)".into(),
        "/*manifold:hlc=888*/ INSERT INTO manifold.heartbeat VALUES (1, 888) \
         ON DUPLICATE KEY UPDATE hlc = 888".into(),
        format!("INSERT INTO app.t VALUES (5, 'blob', REPEAT('x', {BLOB_BYTES}))"),
        "INSERT INTO app.m VALUES (1)".into(),
        "/*manifold:hlc=500*/ CREATE TABLE app.c ENGINE=InnoDB SELECT id, v FROM app.t".into(),
        "XA START 'x1'; /*manifold:hlc=600*/ INSERT INTO app.t VALUES (6, 'f', NULL); \
         XA END 'x1'; XA PREPARE 'x1'; XA COMMIT 'x1'".into(),
        "XA START 'x2'; INSERT INTO app.t VALUES (7, 'g', NULL); XA END 'x2'; \
         XA PREPARE 'x2'; XA ROLLBACK 'x2'".into(),
        "XA START 'x3'; INSERT INTO app.t VALUES (8, 'h', NULL); XA END 'x3'; \
         XA COMMIT 'x3' ONE PHASE".into(),
        "BEGIN; DELETE FROM app.t WHERE id = 3; SAVEPOINT s; \
         /*manifold:hlc=900*/ UPDATE app.t SET v = 'z' WHERE id = 4; ROLLBACK TO SAVEPOINT s; \
         UPDATE app.t SET v = 'y' WHERE id = 2; COMMIT".into(),
        "DROP TABLE app.c".into(),
    ]
}

fn expected() -> Vec<Expected> {
    vec![
        ddl("CREATE DATABASE app", None, false),
        ddl("CREATE TABLE app.t", Some(101), false),
        ddl("manifold's CREATE DATABASE", None, true),
        ddl("manifold's CREATE TABLE", None, true),
        ddl("CREATE TABLE app.m", None, false),
        dml("multi-statement transaction", Some(200), XID, 6),
        dml("autocommit insert", None, XID, 2),
        dml("stamped insert", Some(777), XID, 2),
        Expected {
            what: "heartbeat",
            stamp: Some(888),
            heartbeat: true,
            end: XID,
            dml_events: 2,
            standalone: false,
        },
        dml("blob insert", None, XID, 2),
        dml("MyISAM insert", None, (types::QUERY, Some("COMMIT")), 2),
        dml("CREATE TABLE ... SELECT", Some(500), XID, 2),
        dml("XA transaction, prepared", Some(600), XA_PREPARE, 2),
        xa_end("XA COMMIT", "XA COMMIT X'7831',X'',1"),
        dml("XA transaction rolled back, prepared", None, XA_PREPARE, 2),
        xa_end("XA ROLLBACK", "XA ROLLBACK X'7832',X'',1"),
        dml("XA COMMIT ONE PHASE", None, XA_PREPARE, 2),
        // What was rolled back to the savepoint is not logged, its stamp neither.
        dml("transaction with a savepoint rolled back to", None, XID, 4),
        ddl("DROP TABLE", None, false),
    ]
}

/// One run of the workload: the transactions the assembler made of the server's binlog
/// file, the GTIDs whose events the file held compressed, and the file's events.
struct Run {
    txns: Vec<SourceTxn>,
    compressed: Vec<MysqlGtid>,
    file_events: Vec<Vec<u8>>,
    first: MysqlGtid,
}

fn run(topology: &Topology, compression: bool, spill: &std::path::Path) -> Run {
    sql(
        topology,
        "DROP DATABASE IF EXISTS app; DROP DATABASE IF EXISTS manifold; FLUSH BINARY LOGS",
    );
    let status = sql(topology, "SHOW BINARY LOG STATUS");
    let file = status.split('\t').next().expect("a file name").to_string();
    let uuid: Uuid = sql(topology, "SELECT @@server_uuid")
        .trim()
        .parse()
        .expect("a server UUID");
    let executed: GtidSet = sql(topology, "SELECT @@gtid_executed")
        .replace("\\n", "")
        .trim()
        .parse()
        .expect("a GTID set");
    let first = MysqlGtid {
        uuid,
        gno: executed.last_gno(&uuid).unwrap_or(0) + 1,
    };
    let session = if compression {
        "SET SESSION binlog_transaction_compression = ON; "
    } else {
        "SET SESSION binlog_transaction_compression = OFF; "
    };
    for statement in workload() {
        sql(topology, &format!("{session}{statement}"));
    }
    sql(topology, "FLUSH BINARY LOGS");

    let bytes = std::fs::read(topology.primary.datadir.join(&file)).expect("the binlog file");
    let events = file_events(&bytes);
    assert_eq!(events[0][4], types::FORMAT_DESCRIPTION);
    assert_eq!(events[1][4], types::PREVIOUS_GTIDS);
    let mut compressed = Vec::new();
    let mut gtid = None;
    for e in &events {
        event::verify_checksum(e).expect("every event's CRC32 holds");
        match e[4] {
            types::MYSQL_GTID => {
                gtid = Some(event::mysql::parse_mysql_gtid(e).unwrap().gtid);
            }
            types::TRANSACTION_PAYLOAD => compressed.push(gtid.expect("a GTID before")),
            _ => {}
        }
    }
    let budget = Budget::new(1 << 30, spill.to_path_buf());
    let mut assembler = Assembler::new(0, ("manifold", "heartbeat"), &budget);
    let mut txns = Vec::new();
    for e in &events {
        if let Some(txn) = assembler.push(e).expect("a well-formed MySQL stream") {
            txns.push(txn);
        }
    }
    assert!(
        !assembler.in_transaction(),
        "the file ends between transactions"
    );
    Run {
        txns,
        compressed,
        file_events: events.iter().map(|e| e.to_vec()).collect(),
        first,
    }
}

fn check(run: &Run, label: &str) {
    let expected = expected();
    let listing: Vec<_> = run
        .txns
        .iter()
        .map(|t| {
            (
                t.gtid.seq(),
                t.stamp,
                t.heartbeat,
                t.dml_events,
                body_events(t).iter().map(|e| e[4]).collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(run.txns.len(), expected.len(), "{label}: {listing:#?}");
    for (i, (txn, want)) in run.txns.iter().zip(&expected).enumerate() {
        let what = format!("{label}: {}", want.what);
        assert_eq!(
            txn.gtid,
            TxnGtid::MySql(MysqlGtid {
                uuid: run.first.uuid,
                gno: run.first.gno + i as u64
            }),
            "{what}: GTIDs are consecutive"
        );
        let commit = txn.mysql.expect("a MySQL commit");
        assert!(commit.immediate_server_version >= 90700, "{what}");
        assert!(
            commit.immediate_commit_us > 1_700_000_000_000_000,
            "{what}: a commit time"
        );
        assert_eq!(txn.stamp, want.stamp, "{what}");
        assert_eq!(txn.heartbeat, want.heartbeat, "{what}");
        assert_eq!(txn.dml_events, want.dml_events, "{what}");
        assert!(txn.timestamp > 1_700_000_000, "{what}: a commit time");
        let body = body_events(txn);
        for e in &body {
            event::verify_checksum(e).expect("every body event has a valid CRC32");
            assert_eq!(Header::parse(e).unwrap().event_size as usize, e.len());
        }
        let last = body.last().expect("a body");
        assert_eq!(last[4], want.end.0, "{what}: ends with the right event");
        if let Some(text) = want.end.1 {
            let got = event::query_text(last).unwrap();
            assert!(
                got.starts_with(text.as_bytes()),
                "{what}: {}",
                String::from_utf8_lossy(got)
            );
        }
        assert_eq!(
            !event::mysql::opens_group(&body[0]),
            want.standalone,
            "{what}: standalone or not"
        );
    }
    assert!(
        run.txns[9].body.bytes() > BLOB_BYTES as u64,
        "{label}: the blob is in the body whole"
    );
}

/// What must be equal between a plain and a compressed run: each event's type, a query's
/// text, a rows event's rows (what follows its table id).
fn comparable(e: &[u8]) -> (u8, Vec<u8>) {
    let body = &e[HEADER_LEN..e.len() - 4];
    let what = match e[4] {
        types::QUERY => event::query_text(e).unwrap().to_vec(),
        t if types::is_rows(t) => body[6..].to_vec(),
        types::TABLE_MAP => body[6..].to_vec(),
        types::ROWS_QUERY => event::annotate_text(e).to_vec(),
        _ => Vec::new(),
    };
    (e[4], what)
}

#[test]
fn mysql_binlog_files_assemble_into_their_transactions_compressed_or_not() {
    let topology = Topology::start(TopologyConfig {
        replicas: 0,
        tls: false,
        flavor: Flavor::MySql,
        ..Default::default()
    })
    .expect("a MySQL server starts (scripts/setup-mysql installs it)");
    let spill = tempfile::tempdir().unwrap();

    let plain = run(&topology, false, spill.path());
    check(&plain, "uncompressed");
    assert!(plain.compressed.is_empty());
    // Every event of the file but the framing and the GTIDs is in a body, as written.
    let in_bodies: Vec<Vec<u8>> = plain.txns.iter().flat_map(body_events).collect();
    let in_file: Vec<Vec<u8>> = plain
        .file_events
        .iter()
        .filter(|e| {
            !matches!(
                e[4],
                types::FORMAT_DESCRIPTION
                    | types::PREVIOUS_GTIDS
                    | types::ROTATE
                    | types::MYSQL_GTID
            )
        })
        .cloned()
        .collect();
    assert_eq!(in_bodies.len(), in_file.len());
    assert!(
        in_bodies == in_file,
        "bodies hold the file's events as written"
    );

    let packed = run(&topology, true, spill.path());
    check(&packed, "compressed");
    let compressed: HashSet<u64> = packed
        .compressed
        .iter()
        .map(|g| g.gno - packed.first.gno)
        .collect();
    // Row transactions on InnoDB are compressed (the blob's too); DDL and MyISAM are not.
    for i in [5, 6, 7, 8, 9] {
        assert!(
            compressed.contains(&(i as u64)),
            "transaction {i} came compressed: {:?}",
            packed.compressed
        );
    }
    assert!(!compressed.contains(&0) && !compressed.contains(&10));
    for (i, (a, b)) in plain.txns.iter().zip(&packed.txns).enumerate() {
        let a: Vec<_> = body_events(a).iter().map(|e| comparable(e)).collect();
        let b: Vec<_> = body_events(b).iter().map(|e| comparable(e)).collect();
        assert!(
            a == b,
            "transaction {i}: the same events compressed as plain: {:?} vs {:?}",
            a.iter().map(|e| e.0).collect::<Vec<_>>(),
            b.iter().map(|e| e.0).collect::<Vec<_>>()
        );
    }
}
