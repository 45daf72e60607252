#![forbid(unsafe_code)]
//! Source readers and heartbeats against a real MySQL 9.7 primary (testkit, `Flavor::MySql`):
//! transactions come in order with their GTIDs and stamps (read from the rows-query events),
//! compressed ones too; a killed dump or a restarted server loses and repeats nothing; a
//! primary not logging its statements is refused with what to set; a promotion is followed;
//! a primary that had written nothing is read from its beginning; and a fleet mixing MariaDB
//! and MySQL primaries is refused.

use std::time::Duration;

use manifold_binlog::gtid::{Dialect, GtidSet, MysqlGtid, TxnGtid, Uuid};
use manifold_binlog::txn::SourceTxn;
use manifold_cdc::source::SourceMsg;
use manifold_cdc::BinlogConfig;
use manifold_testkit::{Flavor, Server, Topology};

mod common;

use common::{dump_thread, insert, login, target, target_named, Running, USER, WAIT};

fn start_topology(replicas: usize) -> Topology {
    let t = common::start_topology(Flavor::MySql, replicas);
    t.sql(
        &t.primary,
        "CREATE DATABASE src_t; CREATE TABLE src_t.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;",
    )
    .expect("schema");
    t.wait_replicated(WAIT).expect("schema replicated");
    t
}

fn reader(t: &Topology, server_id: u32, heartbeat_every: Option<Duration>) -> Running {
    Running::start_in(Dialect::MySql, target(t), server_id, heartbeat_every)
}

fn executed(t: &Topology, server: &Server) -> GtidSet {
    t.sql_value(server, "SELECT @@GLOBAL.gtid_executed")
        .expect("gtid_executed")
        .replace("\\n", "")
        .parse()
        .expect("a GTID set")
}

fn server_uuid(t: &Topology) -> Uuid {
    t.sql_value(&t.primary, "SELECT @@server_uuid")
        .expect("server_uuid")
        .parse()
        .expect("a UUID")
}

/// The primary's last GTID: what the next transaction follows.
fn last_gtid(t: &Topology) -> MysqlGtid {
    let uuid = server_uuid(t);
    let gno = executed(t, &t.primary)
        .last_gno(&uuid)
        .expect("the setup wrote GTIDs");
    MysqlGtid { uuid, gno }
}

fn next(g: TxnGtid) -> TxnGtid {
    match g {
        TxnGtid::MySql(g) => TxnGtid::MySql(MysqlGtid {
            gno: g.gno + 1,
            ..g
        }),
        TxnGtid::MariaDb(g) => panic!("a MariaDB GTID {g} from a MySQL source"),
    }
}

/// Checks each transaction follows the previous one with the stamp of row `id`.
struct Expect {
    last: TxnGtid,
}

impl Expect {
    fn row(&mut self, txn: &SourceTxn, id: u32) {
        assert_eq!(
            txn.gtid,
            next(self.last),
            "transactions in the source's order"
        );
        assert_eq!(
            txn.stamp,
            Some(1000 + u64::from(id)),
            "the stamp of its statement"
        );
        assert!(!txn.heartbeat);
        assert_eq!(txn.dml_events, 2, "one table map and one rows event");
        let commit = txn.mysql.expect("a MySQL transaction's commit details");
        assert!(commit.immediate_commit_us > 0);
        assert!(commit.original_server_version >= 90_000, "{commit:?}");
        self.last = txn.gtid;
    }
}

#[test]
fn transactions_come_in_order_and_survive_a_killed_dump_and_a_restart() {
    let t = start_topology(0);
    let mut expect = Expect {
        last: last_gtid(&t).into(),
    };
    let running = reader(&t, 4_000_000_201, None);
    assert_eq!(running.connected(), t.primary.addr().to_string());
    assert_eq!(running.shared.sources()[0].state, "streaming");

    // What was written before the reader started is not read: it begins at the primary's
    // @@gtid_executed of then.
    insert(&t, 0, 5);
    for id in 0..5 {
        expect.row(&running.txn(), id);
    }

    // The dump thread killed: written meanwhile, read after the reconnection, once.
    let dump = dump_thread(&t, &t.primary);
    t.sql(&t.primary, &format!("KILL {dump}")).expect("kill");
    insert(&t, 5, 8);
    let error = running.lost_and_back();
    assert!(error.contains("source east"), "{error}");
    for id in 5..8 {
        expect.row(&running.txn(), id);
    }

    // A transaction the server compresses (TRANSACTION_PAYLOAD, zstd) comes whole, stamped.
    let out = t
        .client_command(&t.primary)
        .args([
            "--comments",
            "-e",
            "SET SESSION binlog_transaction_compression=ON; \
             /*manifold:hlc=1008*/ INSERT INTO src_t.t VALUES (8, 8);",
        ])
        .output()
        .expect("run the client");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    expect.row(&running.txn(), 8);
    let events = t
        .sql(&t.primary, "SHOW BINLOG EVENTS")
        .expect("the primary's binlog");
    assert!(
        events.contains("Transaction_payload"),
        "the server compressed it: {events}"
    );

    // The server restarted.
    t.kill_server(&t.primary).expect("kill the primary");
    t.restart_server(&t.primary).expect("restart the primary");
    running.lost_and_back();
    insert(&t, 9, 11);
    for id in 9..11 {
        expect.row(&running.txn(), id);
    }
    assert_eq!(
        TxnGtid::from(last_gtid(&t)),
        expect.last,
        "nothing else was written"
    );
    // Idle for longer than the silence limit: the server's heartbeats keep the dump alive
    // (a loss would be a message too).
    assert!(
        running.msgs.recv_timeout(Duration::from_secs(5)).is_err(),
        "no repeated transaction, and no loss while idle"
    );
}

#[test]
fn heartbeats_reach_the_reader_stamped_and_marked() {
    let t = start_topology(0);
    let running = reader(&t, 4_000_000_202, Some(Duration::from_millis(50)));
    running.connected();
    let mut stamps = Vec::new();
    while stamps.len() < 3 {
        match running.next() {
            // Creating the heartbeat table.
            SourceMsg::Txn(txn) if txn.dml_events == 0 => {}
            SourceMsg::Txn(txn) => {
                assert!(txn.heartbeat, "only heartbeats are written");
                stamps.push(txn.stamp.expect("a heartbeat carries its stamp"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    let row = t
        .sql_value(&t.primary, "SELECT id FROM manifold.binlog_heartbeat")
        .expect("heartbeat row");
    assert_eq!(row, "4000000202", "one row, manifold's");
}

#[test]
fn a_primary_not_logging_its_statements_is_refused_with_what_to_set() {
    let t = start_topology(0);
    t.sql(&t.primary, "SET GLOBAL binlog_rows_query_log_events=OFF")
        .expect("turn rows-query events off");
    let running = reader(&t, 4_000_000_203, None);
    let addr = t.primary.addr();
    match running.next() {
        SourceMsg::Lost { error } => assert_eq!(
            error,
            format!(
                "source east ({addr}) has binlog_rows_query_log_events=OFF: the global binlog \
                 needs binlog_rows_query_log_events=ON (SET PERSIST \
                 binlog_rows_query_log_events=ON, or in the server's configuration)"
            )
        ),
        other => panic!("expected the refusal, got {other:?}"),
    }
    assert!(running.shared.sources()[0]
        .state
        .starts_with("error: source east"));
    // Fixed on the server: the next attempt streams.
    t.sql(&t.primary, "SET GLOBAL binlog_rows_query_log_events=ON")
        .expect("turn them on");
    running.lost_and_back_after_refusals();
}

#[test]
fn a_reader_follows_a_promotion() {
    let t = start_topology(1);
    let source = target(&t);
    let router = source.topology.clone();
    let running = Running::start_in(Dialect::MySql, source, 4_000_000_204, None);
    running.connected();
    insert(&t, 0, 2);
    let first = running.txn().gtid;
    let second = running.txn().gtid;
    assert_eq!(second, next(first));

    // The monitor promoted the replica while the old primary stays up, its dump alive.
    router.set_primary(1);
    let error = running.lost_and_back();
    assert!(error.contains("no longer the primary"), "{error}");
    assert_eq!(
        running.shared.sources()[0].addr,
        t.replicas[0].addr().to_string(),
        "read from the new primary"
    );
    // Written on the old primary, replicated: read from the new one with the same GTIDs (a
    // MySQL replica logs them under the origin's UUID).
    insert(&t, 2, 4);
    t.wait_replicated(WAIT).expect("replicated");
    let third = running.txn();
    assert_eq!(third.gtid, next(second), "nothing lost or repeated");
    assert_eq!(third.stamp, Some(1002));
    assert_eq!(running.txn().gtid, next(third.gtid));
    // The dump on the old primary was ended by the reconnection (same replica UUID).
    assert!(
        running
            .msgs
            .recv_timeout(Duration::from_millis(300))
            .is_err(),
        "no repeated transaction"
    );
}

#[test]
fn a_primary_that_had_written_nothing_is_resumed_from_its_beginning_after_a_loss() {
    let t = start_topology(0);
    t.sql(&t.primary, "RESET BINARY LOGS AND GTIDS")
        .expect("an empty binlog");
    assert!(executed(&t, &t.primary).is_empty());
    let running = reader(&t, 4_000_000_205, None);
    running.connected();
    // The reader cannot log in again until the rows are written: its reconnection comes
    // after them, and must not take the primary's position of then as its start.
    t.sql(
        &t.primary,
        &format!("SET sql_log_bin=0; ALTER USER {USER} ACCOUNT LOCK"),
    )
    .expect("lock");
    let dump = dump_thread(&t, &t.primary);
    t.sql(&t.primary, &format!("KILL {dump}")).expect("kill");
    match running.next() {
        SourceMsg::Lost { .. } => {}
        other => panic!("expected the loss, got {other:?}"),
    }
    insert(&t, 0, 2);
    t.sql(
        &t.primary,
        &format!("SET sql_log_bin=0; ALTER USER {USER} ACCOUNT UNLOCK"),
    )
    .expect("unlock");
    running.lost_and_back_after_refusals();
    let first = running.txn();
    assert_eq!(
        first.gtid,
        TxnGtid::MySql(MysqlGtid {
            uuid: server_uuid(&t),
            gno: 1
        }),
        "the primary's first transaction"
    );
    assert_eq!(first.stamp, Some(1000), "the first row written while away");
    assert_eq!(running.txn().gtid, next(first.gtid));
}

#[test]
fn a_mysql_primary_in_a_mariadb_global_binlog_is_refused_as_a_mixed_fleet() {
    let t = common::start_topology(Flavor::MySql, 0);
    let running = Running::start(target(&t), 4_000_000_206, None);
    match running.next() {
        SourceMsg::Lost { error } => assert_eq!(
            error,
            format!(
                "source east ({}) is a MySQL server, but the global binlog is written in \
                 MariaDB's dialect (its other primaries or its files are MariaDB): a mixed \
                 fleet is refused; point cluster east at a MariaDB primary",
                t.primary.addr()
            )
        ),
        other => panic!("expected the refusal, got {other:?}"),
    }
    // Refused again at every attempt, never read.
    match running.next() {
        SourceMsg::Lost { error } => assert!(error.contains("mixed fleet"), "{error}"),
        other => panic!("expected the refusal again, got {other:?}"),
    }
}

#[test]
fn the_service_refuses_a_fleet_of_mariadb_and_mysql_primaries() {
    let maria = common::start_topology(Flavor::MariaDb, 0);
    let mysql = common::start_topology(Flavor::MySql, 0);
    let dir = tempfile::tempdir().expect("binlog dir");
    let config = BinlogConfig {
        dir: dir.path().to_path_buf(),
        ..BinlogConfig::default()
    };
    let sources = vec![target_named(&maria, "east"), target_named(&mysql, "west")];
    let error = manifold_cdc::service::start(config, sources, login())
        .expect_err("a mixed fleet must not start");
    assert_eq!(
        error,
        "binlog: a mixed fleet: cluster east has a MariaDB primary and cluster west a MySQL \
         one; the global binlog is written in one dialect, so every cluster's primary must be \
         MariaDB or every one MySQL"
    );
    assert!(
        std::fs::read_dir(dir.path())
            .expect("the dir")
            .next()
            .is_none(),
        "nothing was written"
    );
}

/// A first start whose primary is not up yet: manifold starts (the gateway does not wait for
/// it), the global binlog writes nothing until the primary tells the fleet's dialect, then
/// opens its files in that dialect.
#[test]
fn a_first_start_waits_for_a_primary_to_tell_the_dialect_and_writes_no_guess() {
    use std::io::Write as _;
    // A port nothing listens on yet.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("its address").to_string()
    };
    let topology =
        manifold_router::Topology::new(&addr, &[], manifold_router::RoutingConfig::default())
            .expect("topology");
    let targets = vec![manifold_backend::BackendTarget {
        addr: addr.clone(),
        tls_mode: manifold_backend::TlsMode::Disabled,
        tls: None,
        max_packet: 1 << 30,
    }];
    let source = manifold_cdc::source::SourceTarget {
        cluster: "east".into(),
        topology: std::sync::Arc::new(topology),
        targets,
    };
    let dir = tempfile::tempdir().expect("binlog dir");
    let config = BinlogConfig {
        dir: dir.path().to_path_buf(),
        reconnect_interval: Duration::from_millis(50),
        ..BinlogConfig::default()
    };
    let mut service = manifold_cdc::service::start(config, vec![source], login())
        .expect("the start does not wait for the primaries");
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        service.shared.metrics.state().starts_with("waiting"),
        "{}",
        service.shared.metrics.state()
    );
    assert!(
        std::fs::read_dir(dir.path())
            .expect("the dir")
            .next()
            .is_none(),
        "no file of a guessed dialect"
    );
    // The "primary" comes up: a MySQL 8.4 greeting is all the dialect needs.
    let listener = std::net::TcpListener::bind(&addr).expect("the port again");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut payload = Vec::new();
            manifold_mysql_proto::handshake::HandshakeV10 {
                server_version: b"8.4.0".to_vec(),
                connection_id: 1,
                auth_data: vec![1; 20],
                capabilities: 0xffff_ffff,
                charset: 45,
                status: 2,
                auth_plugin: b"caching_sha2_password".to_vec(),
            }
            .encode(&mut payload);
            let mut packet = (payload.len() as u32).to_le_bytes()[..3].to_vec();
            packet.push(0);
            packet.extend_from_slice(&payload);
            let _ = conn.write_all(&packet);
        }
    });
    let deadline = std::time::Instant::now() + WAIT;
    while service.shared.metrics.state() != "running" {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            service.shared.metrics.state()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(service.shared.dialect(), Dialect::MySql);
    assert_eq!(
        manifold_binlog::store::file_dialect(dir.path(), "manifold-bin").unwrap(),
        Some(Dialect::MySql),
        "the files are in the dialect the primary told"
    );
    service.stop();
}
