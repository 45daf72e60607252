use super::*;
use crate::event::{self, types, CHECKSUM_LEN, HEADER_LEN};
use crate::gtid::{Gtid, TxnGtid};
use proptest::prelude::*;

const SERVER: u32 = 1;
const HEARTBEAT: (&str, &str) = ("manifold", "heartbeat");

fn budget() -> Budget {
    Budget::new(1 << 20, std::env::temp_dir())
}

fn assembler() -> Assembler {
    Assembler::new(3, HEARTBEAT, &budget())
}

fn gtid(seq: u64) -> Gtid {
    Gtid {
        domain: 0,
        server: SERVER,
        seq,
    }
}

/// An event of `type_code` with `body`, its size and checksum set.
fn raw(type_code: u8, timestamp: u32, body: &[u8]) -> Vec<u8> {
    let mut e = vec![0u8; HEADER_LEN + body.len() + CHECKSUM_LEN];
    event::Header {
        timestamp,
        type_code,
        server_id: SERVER,
        ..Default::default()
    }
    .write(&mut e);
    e[HEADER_LEN..HEADER_LEN + body.len()].copy_from_slice(body);
    event::finish(&mut e, None, 0);
    e
}

/// A table map of `schema.table` (one INT column) for table id `id`.
fn table_map(id: u64, schema: &str, table: &str) -> Vec<u8> {
    let mut body = id.to_le_bytes()[..6].to_vec();
    body.extend_from_slice(&1u16.to_le_bytes());
    for name in [schema, table] {
        body.push(u8::try_from(name.len()).unwrap());
        body.extend_from_slice(name.as_bytes());
        body.push(0);
    }
    body.extend_from_slice(&[1, 3, 0, 0]); // 1 column, LONG, no metadata, null bitmap
    raw(types::TABLE_MAP, 1, &body)
}

/// A write-rows v1 event for table id `id` (one row, one INT column).
fn write_rows(id: u64) -> Vec<u8> {
    let mut body = id.to_le_bytes()[..6].to_vec();
    body.extend_from_slice(&1u16.to_le_bytes()); // end of statement
    body.extend_from_slice(&[1, 0xff, 0, 7, 0, 0, 0]);
    raw(types::WRITE_ROWS_V1, 1, &body)
}

fn gtid_event(seq: u64, flags: u8) -> Vec<u8> {
    event::mariadb_gtid(1, gtid(seq), flags)
}

/// Pushes every event; returns the transactions completed, in order.
fn feed(a: &mut Assembler, events: &[Vec<u8>]) -> Vec<SourceTxn> {
    events
        .iter()
        .filter_map(|e| a.push(e).expect("a valid event"))
        .collect()
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

#[test]
fn a_row_transaction_runs_from_its_gtid_to_its_xid() {
    let mut a = assembler();
    let events = vec![
        event::annotate(1, SERVER, b"/*manifold:hlc=777*/ INSERT INTO t VALUES (7)"),
        table_map(70, "app", "t"),
        write_rows(70),
        event::annotate(1, SERVER, b"/*manifold:hlc=999*/ INSERT INTO t VALUES (8)"),
        table_map(70, "app", "t"),
        write_rows(70),
        event::xid(42, SERVER, 5),
    ];
    assert!(a
        .push(&gtid_event(9, gtid_flags::TRANSACTIONAL))
        .unwrap()
        .is_none());
    assert!(a.in_transaction());
    let txns = feed(&mut a, &events);
    assert!(!a.in_transaction());
    assert_eq!(txns.len(), 1);
    let t = &txns[0];
    assert_eq!(t.source, 3);
    assert_eq!(t.gtid, TxnGtid::from(gtid(9)));
    assert_eq!(t.gtid_flags, gtid_flags::TRANSACTIONAL);
    assert_eq!(t.stamp, Some(777), "the first stamp counts");
    assert_eq!(t.timestamp, 42);
    assert_eq!(t.dml_events, 4);
    assert!(!t.heartbeat);
    assert_eq!(body_events(t), events, "the body is the events as received");
}

#[test]
fn framing_events_belong_to_no_transaction() {
    let mut a = assembler();
    let pos = "0-1-3".parse().unwrap();
    for e in [
        event::format_description(1, SERVER, true),
        event::rotate(SERVER, b"binlog.000002", 4, true),
        event::mariadb_gtid_list(1, SERVER, &pos),
        raw(types::BINLOG_CHECKPOINT, 1, b"\x0d\0\0\0binlog.000001"),
        event::heartbeat(SERVER, b"binlog.000001", 400),
        raw(types::STOP, 1, b""),
    ] {
        assert!(a.push(&e).unwrap().is_none());
        assert!(!a.in_transaction());
    }
}

#[test]
fn a_standalone_gtid_ends_at_its_statement_which_may_carry_the_stamp() {
    let mut a = assembler();
    a.push(&gtid_event(1, gtid_flags::STANDALONE | gtid_flags::DDL))
        .unwrap();
    let ddl = event::query(
        5,
        SERVER,
        b"app",
        b"/*manifold:hlc=55*/ CREATE TABLE t (a INT)",
    );
    let t = a.push(&ddl).unwrap().expect("the DDL ends its group");
    assert_eq!(
        (t.gtid, t.stamp, t.timestamp, t.dml_events),
        (TxnGtid::from(gtid(1)), Some(55), 5, 0)
    );
    assert!(!t.heartbeat);

    // A compressed statement ends a standalone group too.
    a.push(&gtid_event(2, gtid_flags::STANDALONE)).unwrap();
    let t = a
        .push(&raw(types::QUERY_COMPRESSED, 6, &[0u8; 20]))
        .unwrap()
        .expect("ends");
    assert_eq!(t.gtid, TxnGtid::from(gtid(2)));
}

#[test]
fn commit_and_rollback_queries_end_a_group_and_other_statements_do_not() {
    let mut a = assembler();
    a.push(&gtid_event(1, 0)).unwrap();
    let insert = event::query(1, SERVER, b"app", b"INSERT INTO m VALUES (1)");
    assert!(a.push(&insert).unwrap().is_none());
    // A compressed statement inside a group does not end it.
    assert!(a
        .push(&raw(types::QUERY_COMPRESSED, 1, &[0u8; 20]))
        .unwrap()
        .is_none());
    let t = a
        .push(&event::query(8, SERVER, b"app", b" commit "))
        .unwrap()
        .expect("COMMIT ends the group");
    assert_eq!(
        (t.gtid, t.timestamp, t.body.events()),
        (TxnGtid::from(gtid(1)), 8, 3)
    );

    a.push(&gtid_event(2, 0)).unwrap();
    a.push(&table_map(1, "app", "m")).unwrap();
    a.push(&write_rows(1)).unwrap();
    let t = a
        .push(&event::query(9, SERVER, b"app", b"ROLLBACK"))
        .unwrap()
        .expect("ROLLBACK ends the group");
    assert_eq!((t.gtid, t.dml_events), (TxnGtid::from(gtid(2)), 2));
}

#[test]
fn an_xa_group_ends_at_its_prepare_and_its_commit_is_a_group_of_its_own() {
    let mut a = assembler();
    a.push(&gtid_event(1, gtid_flags::PREPARED_XA)).unwrap();
    a.push(&table_map(1, "app", "t")).unwrap();
    a.push(&write_rows(1)).unwrap();
    let end = event::query(1, SERVER, b"app", b"XA END X'31',X'',1");
    assert!(a.push(&end).unwrap().is_none());
    let prepare = event::query(1, SERVER, b"app", b"XA PREPARE X'31',X'',1");
    assert_eq!(
        a.push(&prepare).unwrap().map(|t| t.gtid),
        Some(TxnGtid::from(gtid(1)))
    );
    a.push(&gtid_event(2, gtid_flags::COMPLETED_XA)).unwrap();
    let commit = event::query(1, SERVER, b"app", b"xa  commit X'31',X'',1");
    assert_eq!(
        a.push(&commit).unwrap().map(|t| t.gtid),
        Some(TxnGtid::from(gtid(2)))
    );
}

/// MariaDB 10.5+ logs `XA PREPARE` as an event of its own (type 38), which ends the group;
/// the `XA COMMIT` that follows later is a group of its own.
#[test]
fn an_xa_prepare_event_ends_its_group_and_the_next_gtid_opens_one() {
    let mut a = assembler();
    a.push(&gtid_event(1, gtid_flags::PREPARED_XA)).unwrap();
    a.push(&event::query(1, SERVER, b"app", b"XA START X'31',X'',1"))
        .unwrap();
    a.push(&table_map(1, "app", "t")).unwrap();
    a.push(&write_rows(1)).unwrap();
    a.push(&event::query(1, SERVER, b"app", b"XA END X'31',X'',1"))
        .unwrap();
    // one_phase (1), format id (4), gtrid length (4), bqual length (4), data.
    let mut prepare = vec![0u8];
    prepare.extend_from_slice(&1u32.to_le_bytes());
    prepare.extend_from_slice(&1u32.to_le_bytes());
    prepare.extend_from_slice(&0u32.to_le_bytes());
    prepare.push(b'1');
    let prepare = raw(types::XA_PREPARE, 7, &prepare);
    let t = a
        .push(&prepare)
        .unwrap()
        .expect("XA_PREPARE ends the group");
    assert_eq!(
        (t.gtid, t.timestamp, t.dml_events),
        (TxnGtid::from(gtid(1)), 7, 2)
    );
    assert_eq!(body_events(&t).last(), Some(&prepare));
    assert!(!a.in_transaction());
    a.push(&gtid_event(2, gtid_flags::COMPLETED_XA)).unwrap();
    let rollback = event::query(1, SERVER, b"app", b"XA ROLLBACK X'31',X'',1");
    assert_eq!(
        a.push(&rollback).unwrap().map(|t| t.gtid),
        Some(TxnGtid::from(gtid(2)))
    );
}

#[test]
fn only_heartbeat_table_writes_make_a_heartbeat() {
    let mut a = assembler();
    let txn = |a: &mut Assembler, seq, tables: &[(&str, &str)]| {
        let mut events = vec![gtid_event(seq, gtid_flags::TRANSACTIONAL)];
        for (i, (schema, table)) in (1u64..).zip(tables) {
            events.push(table_map(i, schema, table));
            events.push(write_rows(i));
        }
        events.push(event::xid(1, SERVER, seq));
        let mut txns = feed(a, &events);
        assert_eq!(txns.len(), 1);
        txns.pop().unwrap()
    };
    assert!(txn(&mut a, 1, &[HEARTBEAT]).heartbeat);
    assert!(txn(&mut a, 2, &[HEARTBEAT, HEARTBEAT]).heartbeat);
    assert!(!txn(&mut a, 3, &[HEARTBEAT, ("app", "t")]).heartbeat);
    assert!(!txn(&mut a, 4, &[("manifold", "heartbeats")]).heartbeat);
    assert!(!txn(&mut a, 5, &[("manifol", "dheartbeat")]).heartbeat);
    assert!(!txn(&mut a, 6, &[]).heartbeat, "no table map, no heartbeat");
    // The fleet's registry is manifold's own too, once named; its DDL as manifold sends it.
    assert!(!txn(&mut a, 7, &[("manifold", "fleet")]).heartbeat);
    a.also_own("manifold", "fleet");
    assert!(txn(&mut a, 8, &[("manifold", "fleet")]).heartbeat);
    assert!(txn(&mut a, 9, &[HEARTBEAT, ("manifold", "fleet")]).heartbeat);
    assert!(!txn(&mut a, 10, &[("manifold", "fleet"), ("app", "t")]).heartbeat);
    a.push(&gtid_event(11, gtid_flags::STANDALONE | gtid_flags::DDL))
        .unwrap();
    let mut ddl = stamp::INTERNAL.to_vec();
    ddl.extend_from_slice(b"CREATE TABLE IF NOT EXISTS `manifold`.`fleet` (id SMALLINT)");
    let t = a
        .push(&event::query(5, SERVER, b"", &ddl))
        .unwrap()
        .expect("ends");
    assert!(t.heartbeat);
}

#[test]
fn out_of_sequence_events_are_errors_and_reset_drops_the_open_transaction() {
    let mut a = assembler();
    assert!(matches!(
        a.push(&event::xid(1, SERVER, 1)),
        Err(TxnError::Sequence(_))
    ));
    assert!(matches!(
        a.push(&table_map(1, "app", "t")),
        Err(TxnError::Sequence(_))
    ));
    a.push(&gtid_event(1, 0)).unwrap();
    a.push(&table_map(1, "app", "t")).unwrap();
    assert!(matches!(
        a.push(&gtid_event(2, 0)),
        Err(TxnError::Sequence(_))
    ));
    a.reset();
    assert!(!a.in_transaction());
    a.push(&gtid_event(2, 0)).unwrap();
    let t = a.push(&event::xid(1, SERVER, 2)).unwrap().unwrap();
    assert_eq!((t.gtid, t.body.events()), (TxnGtid::from(gtid(2)), 1));
}

#[test]
fn unsupported_streams_are_refused_with_a_reason() {
    let mut a = assembler();
    let err = a
        .push(&raw(types::START_ENCRYPTION, 1, &[0u8; 17]))
        .unwrap_err();
    assert!(err.to_string().contains("encrypted"), "{err}");
    let err = a
        .push(&raw(types::ANONYMOUS_GTID, 1, &[0u8; 42]))
        .unwrap_err();
    assert!(err.to_string().contains("gtid_mode=ON"), "{err}");
    let err = a.push(&raw(types::GTID_TAGGED, 1, &[0u8; 60])).unwrap_err();
    assert!(err.to_string().contains("tagged GTIDs"), "{err}");
    let err = a.push(&raw(types::INCIDENT, 1, &[1, 0, 0])).unwrap_err();
    assert!(matches!(err, TxnError::Sequence(_)));
}

#[test]
fn malformed_events_are_errors() {
    let mut a = assembler();
    let mut short = event::xid(1, SERVER, 1);
    short.pop();
    assert!(matches!(a.push(&short), Err(TxnError::Event(_))));
    assert!(matches!(a.push(&[0u8; 5]), Err(TxnError::Event(_))));
    a.push(&gtid_event(1, 0)).unwrap();
    // A table map cut inside its names.
    let mut map = table_map(1, "app", "t")[..HEADER_LEN + 10].to_vec();
    map.extend_from_slice(&[0; 4]);
    event::finish(&mut map, None, 0);
    assert!(matches!(a.push(&map), Err(TxnError::Event(_))));
    // A query whose status variables run past its end.
    let mut q = event::query(1, SERVER, b"app", b"COMMIT");
    q[HEADER_LEN + 11] = 0xff;
    assert!(matches!(a.push(&q), Err(TxnError::Event(_))));
}

mod mysql;

proptest! {
    #[test]
    fn random_bytes_never_panic(events in prop::collection::vec(
        (any::<u8>(), prop::collection::vec(any::<u8>(), 0..80)), 0..30)) {
        let mut a = assembler();
        for (type_code, body) in events {
            let _ = a.push(&raw(type_code, 1, &body));
            let mut truncated = raw(type_code, 1, &body);
            truncated.truncate(body.len() / 2);
            let _ = a.push(&truncated);
        }
    }
}

#[test]
fn manifolds_own_ddl_is_kept_out_like_a_heartbeat() {
    let mut a = assembler();
    a.push(&gtid_event(1, gtid_flags::STANDALONE | gtid_flags::DDL))
        .unwrap();
    let mut text = stamp::INTERNAL.to_vec();
    text.extend_from_slice(b"CREATE DATABASE IF NOT EXISTS `manifold`");
    let t = a
        .push(&event::query(5, SERVER, b"", &text))
        .unwrap()
        .expect("ends");
    assert!(t.heartbeat);
    // The marker anywhere but at the start of a DDL is the user's text.
    a.push(&gtid_event(2, gtid_flags::STANDALONE | gtid_flags::DDL))
        .unwrap();
    let t = a
        .push(&event::query(
            5,
            SERVER,
            b"",
            b"CREATE TABLE t (a INT) /*manifold:internal*/",
        ))
        .unwrap()
        .expect("ends");
    assert!(!t.heartbeat);
}

#[test]
fn only_the_heartbeat_tables_own_ddl_is_internal() {
    let mut a = assembler();
    let mut ddl = |seq, text: &[u8]| {
        a.push(&gtid_event(seq, gtid_flags::STANDALONE | gtid_flags::DDL))
            .unwrap();
        let mut sql = stamp::INTERNAL.to_vec();
        sql.extend_from_slice(text);
        a.push(&event::query(5, SERVER, b"", &sql))
            .unwrap()
            .expect("ends")
            .heartbeat
    };
    assert!(ddl(
        1,
        b"CREATE TABLE IF NOT EXISTS `manifold`.`heartbeat` (id INT UNSIGNED PRIMARY KEY)"
    ));
    // A user's statement carrying the marker is the user's, and stays in the binlog.
    assert!(!ddl(2, b"TRUNCATE TABLE t"));
    assert!(!ddl(3, b"RENAME TABLE `manifold`.`heartbeat` TO t"));
    assert!(!ddl(4, b"CREATE DATABASE IF NOT EXISTS `manifold2`"));
    assert!(!ddl(5, b"CREATE DATABASE IF NOT EXISTS `manifold`; DROP"));
    assert!(!ddl(
        6,
        b"CREATE TABLE IF NOT EXISTS `manifold`.`heartbeats` (id INT)"
    ));
    assert!(!ddl(
        7,
        b"CREATE TABLE IF NOT EXISTS `app`.`heartbeat` (id INT)"
    ));
}

#[test]
fn a_stamp_far_ahead_of_the_wall_clock_is_ignored_and_counted() {
    let mut a = assembler();
    let far = stamp::wall_now() + 3_600_000_000_000;
    let mut text = Vec::new();
    stamp::write(&mut text, far);
    text.extend_from_slice(b"INSERT INTO t VALUES (1)");
    let mut honest = Vec::new();
    let now = stamp::Clock::default().now();
    stamp::write(&mut honest, now);
    honest.extend_from_slice(b"INSERT INTO t VALUES (2)");
    let events = vec![
        gtid_event(1, gtid_flags::TRANSACTIONAL),
        event::annotate(1, SERVER, &text),
        table_map(1, "app", "t"),
        write_rows(1),
        // A later, plausible stamp of the same transaction counts.
        event::annotate(1, SERVER, &honest),
        table_map(1, "app", "t"),
        write_rows(1),
        event::xid(1, SERVER, 1),
    ];
    let t = feed(&mut a, &events).pop().unwrap();
    assert_eq!(t.stamp, Some(now));
    assert_eq!(a.forged_stamps(), 1);
    // A statement the user wrote starting like a stamped one, in a DDL.
    a.push(&gtid_event(2, gtid_flags::STANDALONE | gtid_flags::DDL))
        .unwrap();
    let mut ddl = Vec::new();
    stamp::write(&mut ddl, u64::MAX);
    ddl.extend_from_slice(b"CREATE TABLE u (a INT)");
    let t = a
        .push(&event::query(1, SERVER, b"app", &ddl))
        .unwrap()
        .unwrap();
    assert_eq!(t.stamp, None, "treated as unstamped");
    assert_eq!(a.forged_stamps(), 2);
}

#[test]
fn a_completed_transaction_keeps_no_spill_write_buffer() {
    let tmp = tempfile::tempdir().unwrap();
    // Every event spills.
    let budget = Budget::new(10, tmp.path().join("spill"));
    let mut a = Assembler::new(0, HEARTBEAT, &budget);
    a.push(&gtid_event(1, gtid_flags::TRANSACTIONAL)).unwrap();
    a.push(&table_map(1, "app", "t")).unwrap();
    a.push(&write_rows(1)).unwrap();
    assert!(budget.used() > 0, "the open transaction's buffer counts");
    let t = a.push(&event::xid(1, SERVER, 1)).unwrap().unwrap();
    assert_eq!(budget.used(), 0);
    assert!(t.body.spilled_bytes() > 0);
    assert_eq!(body_events(&t).len(), 3);
}
