#![forbid(unsafe_code)]
//! Source readers and heartbeats against a real MariaDB primary (testkit): transactions come
//! in order with their GTIDs and stamps, a killed dump or a restarted server loses and repeats
//! nothing, and a primary not logging rows is refused with what to set.

use std::time::Duration;

use manifold_binlog::gtid::{Gtid, GtidPos, MysqlGtid, TxnGtid};
use manifold_cdc::source::SourceMsg;
use manifold_testkit::{Flavor, Topology};

mod common;

use common::{insert, target, Running, USER, WAIT};

fn start_topology() -> Topology {
    start_topology_with(0)
}

fn start_topology_with(replicas: usize) -> Topology {
    common::start_topology(Flavor::MariaDb, replicas)
}

fn gtid_pos(t: &Topology) -> GtidPos {
    t.sql_value(&t.primary, "SELECT @@gtid_binlog_pos")
        .expect("gtid_binlog_pos")
        .parse()
        .expect("a GTID position")
}

fn next_gtid(g: TxnGtid) -> TxnGtid {
    match g {
        TxnGtid::MariaDb(g) => TxnGtid::MariaDb(Gtid {
            seq: g.seq + 1,
            ..g
        }),
        TxnGtid::MySql(g) => TxnGtid::MySql(MysqlGtid {
            gno: g.gno + 1,
            ..g
        }),
    }
}

#[test]
fn transactions_come_in_order_and_survive_a_killed_dump_and_a_restart() {
    let t = start_topology();
    t.sql(
        &t.primary,
        "CREATE DATABASE src_t; CREATE TABLE src_t.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;",
    )
    .expect("schema");
    let before = gtid_pos(&t);
    let mut last = TxnGtid::from(before.get(0).expect("setup wrote GTIDs in domain 0"));
    let running = Running::start(target(&t), 4_000_000_101, None);
    assert_eq!(running.connected(), t.primary.addr().to_string());

    // What was written before the reader started is not read: it begins at the primary's
    // position of then.
    insert(&t, 0, 5);
    let mut expect = |txn: manifold_binlog::txn::SourceTxn, id: u32| {
        assert_eq!(
            txn.gtid,
            next_gtid(last),
            "transactions in the source's order"
        );
        assert_eq!(
            txn.stamp,
            Some(1000 + u64::from(id)),
            "the stamp of its statement"
        );
        assert!(!txn.heartbeat);
        assert_eq!(txn.dml_events, 2, "one table map and one rows event");
        last = txn.gtid;
    };
    for id in 0..5 {
        expect(running.txn(), id);
    }
    assert_eq!(running.shared.sources()[0].state, "streaming");

    // The dump thread killed: written meanwhile, read after the reconnection, once.
    let dump = t
        .sql_value(
            &t.primary,
            "SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'",
        )
        .expect("dump thread");
    t.sql(&t.primary, &format!("KILL {dump}; ")).expect("kill");
    insert(&t, 5, 8);
    let error = running.lost_and_back();
    assert!(error.contains("source east"), "{error}");
    for id in 5..8 {
        expect(running.txn(), id);
    }

    // The server restarted.
    t.kill_server(&t.primary).expect("kill the primary");
    t.restart_server(&t.primary).expect("restart the primary");
    running.lost_and_back();
    insert(&t, 8, 10);
    for id in 8..10 {
        expect(running.txn(), id);
    }
    assert_eq!(
        gtid_pos(&t).get(0).map(TxnGtid::from),
        Some(last),
        "nothing else was written"
    );
    assert!(
        running
            .msgs
            .recv_timeout(Duration::from_millis(300))
            .is_err(),
        "no repeated transaction"
    );
}

#[test]
fn heartbeats_reach_the_reader_stamped_and_marked() {
    let t = start_topology();
    let running = Running::start(target(&t), 4_000_000_102, Some(Duration::from_millis(50)));
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
    assert_eq!(row, "4000000102", "one row, manifold's");
}

#[test]
fn a_primary_logging_statements_is_refused_with_what_to_set() {
    let t = start_topology();
    t.sql(&t.primary, "SET GLOBAL binlog_format='MIXED'")
        .expect("set MIXED");
    let running = Running::start(target(&t), 4_000_000_103, None);
    let addr = t.primary.addr();
    match running.next() {
        SourceMsg::Lost { error } => assert_eq!(
            error,
            format!(
                "source east ({addr}) has binlog_format=MIXED: the global binlog needs \
                 binlog_format=ROW (SET GLOBAL binlog_format=ROW and in the server's configuration)"
            )
        ),
        other => panic!("expected the refusal, got {other:?}"),
    }
    assert!(running.shared.sources()[0]
        .state
        .starts_with("error: source east"));
    // Fixed on the server: the next attempt streams.
    t.sql(&t.primary, "SET GLOBAL binlog_format='ROW'")
        .expect("set ROW");
    for _ in 0..100 {
        match running.next() {
            SourceMsg::Connected { .. } => return,
            SourceMsg::Lost { .. } => {}
            SourceMsg::Txn(txn) => panic!("transaction {} before connecting", txn.gtid),
        }
    }
    panic!("still refused after binlog_format=ROW");
}

#[test]
fn after_a_failover_the_reader_resumes_on_the_new_primary() {
    let t = start_topology_with(1);
    t.sql(
        &t.primary,
        "CREATE DATABASE src_t; CREATE TABLE src_t.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;",
    )
    .expect("schema");
    let source = target(&t);
    let router = source.topology.clone();
    let running = Running::start(source, 4_000_000_104, None);
    running.connected();
    insert(&t, 0, 2);
    let first = running.txn().gtid;
    let second = running.txn().gtid;
    assert_eq!(second, next_gtid(first));

    // The monitor saw the replica promoted; the old primary's dump breaks.
    router.set_primary(1);
    let dump = t
        .sql_value(
            &t.primary,
            "SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%' \
             AND host NOT LIKE 'localhost%' ORDER BY id DESC LIMIT 1",
        )
        .expect("dump thread");
    t.sql(&t.primary, &format!("KILL {dump}")).expect("kill");
    // Written on the old primary, replicated: read from the new one with the same GTIDs.
    insert(&t, 2, 4);
    t.wait_replicated(WAIT).expect("replicated");
    running.lost_and_back();
    assert_eq!(
        running.shared.sources()[0].addr,
        t.replicas[0].addr().to_string(),
        "read from the new primary"
    );
    let third = running.txn();
    assert_eq!(third.gtid, next_gtid(second), "nothing lost or repeated");
    assert_eq!(third.stamp, Some(1002));
    assert_eq!(running.txn().gtid, next_gtid(third.gtid));
}

#[test]
fn a_primary_that_had_written_nothing_is_resumed_from_its_beginning_after_a_loss() {
    let t = start_topology();
    t.sql(
        &t.primary,
        "CREATE DATABASE src_t; CREATE TABLE src_t.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; \
         RESET MASTER;",
    )
    .expect("schema, then an empty binlog");
    assert!(gtid_pos(&t).is_empty());
    let running = Running::start(target(&t), 4_000_000_105, None);
    running.connected();
    // The reader cannot log in again until the rows are written: its reconnection comes
    // after them, and must not take the primary's position of then as its start.
    t.sql(
        &t.primary,
        &format!("SET sql_log_bin=0; ALTER USER {USER} ACCOUNT LOCK"),
    )
    .expect("lock");
    let dump = t
        .sql_value(
            &t.primary,
            "SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'",
        )
        .expect("dump thread");
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
    assert_eq!(first.stamp, Some(1000), "the first row written while away");
    assert_eq!(running.txn().gtid, next_gtid(first.gtid));
}

#[test]
fn a_reader_moves_to_a_new_primary_while_the_old_one_is_still_up() {
    let t = start_topology_with(1);
    t.sql(
        &t.primary,
        "CREATE DATABASE src_t; CREATE TABLE src_t.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;",
    )
    .expect("schema");
    let source = target(&t);
    let router = source.topology.clone();
    let running = Running::start(source, 4_000_000_106, None);
    running.connected();
    insert(&t, 0, 1);
    let first = running.txn().gtid;
    // The monitor promoted the replica; the old primary stays up and its dump alive.
    router.set_primary(1);
    let error = running.lost_and_back();
    assert!(error.contains("no longer the primary"), "{error}");
    assert_eq!(
        running.shared.sources()[0].addr,
        t.replicas[0].addr().to_string(),
        "read from the new primary"
    );
    insert(&t, 1, 2);
    t.wait_replicated(WAIT).expect("replicated");
    let second = running.txn();
    assert_eq!(second.gtid, next_gtid(first), "nothing lost or repeated");
    assert_eq!(second.stamp, Some(1001));
}
