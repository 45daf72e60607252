//! MySQL source streams: GTID events (33), groups decided by their first query, and
//! compressed transactions.

use super::*;
use crate::event::mysql::{self as my, MysqlGtidEvent};
use crate::gtid::MysqlGtid;
use crate::payload::PayloadError;
use ruzstd::encoding::{compress_to_vec, CompressionLevel};

const COMMIT: MysqlCommit = MysqlCommit {
    immediate_commit_us: 1_700_000_000_000_001,
    original_commit_us: 1_700_000_000_000_000,
    immediate_server_version: 90704,
    original_server_version: 80400,
};

fn mysql_gtid(gno: u64) -> MysqlGtid {
    MysqlGtid {
        uuid: "3e11fa47-71ca-11e1-9e33-c80aa9429562".parse().unwrap(),
        gno,
    }
}

fn gtid_event(gno: u64) -> Vec<u8> {
    my::mysql_gtid(
        1,
        SERVER,
        &MysqlGtidEvent {
            flags: my::GTID_FLAG_MAY_HAVE_SBR,
            gtid: mysql_gtid(gno),
            last_committed: 1,
            sequence_number: 2,
            commit: COMMIT,
            transaction_length: 0,
        },
    )
}

fn query(text: &str) -> Vec<u8> {
    event::query(1, SERVER, b"app", text.as_bytes())
}

/// `XA_PREPARE` (38): one_phase, format id, gtrid and bqual lengths, data.
fn xa_prepare() -> Vec<u8> {
    let mut body = vec![0u8];
    for v in [1u32, 2, 0] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(b"x1");
    raw(types::XA_PREPARE, 7, &body)
}

fn user_var() -> Vec<u8> {
    raw(types::USER_VAR, 1, b"\x01\0\0\0a\x01")
}

/// A row transaction as MySQL writes it (after its GTID event).
fn row_txn(stamp_text: &str) -> Vec<Vec<u8>> {
    vec![
        query("BEGIN"),
        my::rows_query(1, SERVER, stamp_text.as_bytes()),
        table_map(70, "app", "t"),
        write_rows(70),
        event::xid(42, SERVER, 5),
    ]
}

#[test]
fn a_mysql_row_transaction_runs_from_its_gtid_to_its_xid() {
    let mut a = assembler();
    for framing in [
        my::mysql_format_description(1, SERVER, true),
        my::previous_gtids(
            1,
            SERVER,
            &"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-8".parse().unwrap(),
        ),
        raw(
            types::HEARTBEAT_V2,
            1,
            b"\x01\x0dbinlog.000001\x02\x02\xfc\x01\x00",
        ),
        event::rotate(SERVER, b"binlog.000002", 4, true),
    ] {
        assert!(a.push(&framing).unwrap().is_none());
        assert!(!a.in_transaction());
    }
    assert!(a.push(&gtid_event(9)).unwrap().is_none());
    assert!(a.in_transaction());
    let events = row_txn("/*manifold:hlc=777*/ INSERT INTO t VALUES (7)");
    let t = feed(&mut a, &events).pop().expect("the XID ends it");
    assert!(!a.in_transaction());
    assert_eq!(t.gtid, TxnGtid::MySql(mysql_gtid(9)));
    assert_eq!(t.mysql, Some(COMMIT));
    assert_eq!(t.gtid_flags, my::GTID_FLAG_MAY_HAVE_SBR);
    assert_eq!((t.stamp, t.timestamp, t.dml_events), (Some(777), 42, 2));
    assert!(!t.heartbeat);
    assert_eq!(body_events(&t), events);
}

#[test]
fn a_mysql_group_not_opened_by_begin_is_its_first_statement() {
    let mut a = assembler();
    a.push(&gtid_event(1)).unwrap();
    let ddl = query("/*manifold:hlc=55*/ CREATE TABLE t (a INT)");
    let t = a.push(&ddl).unwrap().expect("the DDL is the whole group");
    assert_eq!((t.stamp, t.dml_events, t.body.events()), (Some(55), 0, 1));

    // Pre-statement events come before the statement they go with.
    a.push(&gtid_event(2)).unwrap();
    assert!(a.push(&user_var()).unwrap().is_none());
    assert!(a
        .push(&raw(types::INTVAR, 1, &[2, 5, 0, 0, 0, 0, 0, 0, 0]))
        .unwrap()
        .is_none());
    let t = a
        .push(&query("CREATE TABLE u SELECT @a"))
        .unwrap()
        .expect("ends at the statement");
    assert_eq!(t.body.events(), 3);
    assert_eq!(
        body_events(&t).iter().map(|e| e[4]).collect::<Vec<_>>(),
        [types::USER_VAR, types::INTVAR, types::QUERY]
    );
}

/// MySQL 8.0.21+: `CREATE TABLE ... SELECT` is `BEGIN`, the DDL, its rows, then XID.
#[test]
fn create_table_select_runs_from_begin_to_its_xid() {
    let mut a = assembler();
    a.push(&gtid_event(1)).unwrap();
    let events = vec![
        query("BEGIN"),
        query("/*manifold:hlc=500*/ CREATE TABLE c (id INT) START TRANSACTION"),
        table_map(71, "app", "c"),
        write_rows(71),
        event::xid(3, SERVER, 9),
    ];
    let txns = feed(&mut a, &events);
    assert_eq!(txns.len(), 1, "only the XID ends it");
    let t = &txns[0];
    assert_eq!((t.stamp, t.dml_events, t.timestamp), (Some(500), 2, 3));
    assert_eq!(body_events(t), events);
}

#[test]
fn mysql_xa_groups_end_at_the_prepare_event_and_commit_or_rollback_stand_alone() {
    let mut a = assembler();
    a.push(&gtid_event(1)).unwrap();
    let events = vec![
        query("XA START X'7831',X'',1"),
        table_map(1, "app", "t"),
        write_rows(1),
        query("XA END X'7831',X'',1"),
        xa_prepare(),
    ];
    let t = feed(&mut a, &events).pop().expect("XA_PREPARE ends it");
    assert_eq!((t.gtid, t.dml_events), (TxnGtid::MySql(mysql_gtid(1)), 2));
    for (gno, text) in [
        (2, "XA COMMIT X'7831',X'',1"),
        (3, "XA ROLLBACK X'7832',X'',1"),
    ] {
        a.push(&gtid_event(gno)).unwrap();
        let t = a.push(&query(text)).unwrap().expect("a group of its own");
        assert_eq!(t.gtid, TxnGtid::MySql(mysql_gtid(gno)));
    }
}

#[test]
fn commit_and_rollback_end_a_mysql_group_and_rollback_to_a_savepoint_does_not() {
    let mut a = assembler();
    a.push(&gtid_event(1)).unwrap();
    for text in [
        "BEGIN",
        "SAVEPOINT `s`",
        "INSERT INTO m VALUES (1)",
        "ROLLBACK TO `s`",
    ] {
        assert!(a.push(&query(text)).unwrap().is_none(), "{text}");
    }
    let t = a.push(&query("COMMIT")).unwrap().expect("COMMIT ends it");
    assert_eq!(t.body.events(), 5);
    a.push(&gtid_event(2)).unwrap();
    a.push(&query("BEGIN")).unwrap();
    a.push(&table_map(1, "app", "m")).unwrap();
    a.push(&write_rows(1)).unwrap();
    let t = a
        .push(&query("ROLLBACK"))
        .unwrap()
        .expect("ROLLBACK ends it");
    assert_eq!(t.dml_events, 2);
}

#[test]
fn mysql_heartbeats_and_manifolds_own_ddl_are_marked() {
    let mut a = assembler();
    a.push(&gtid_event(1)).unwrap();
    let mut events = row_txn("/*manifold:hlc=888*/ INSERT INTO manifold.heartbeat VALUES (1)");
    events[2] = table_map(70, "manifold", "heartbeat");
    let t = feed(&mut a, &events).pop().unwrap();
    assert!(t.heartbeat);
    assert_eq!(t.stamp, Some(888));

    let internal = |sql: &str| [stamp::INTERNAL, sql.as_bytes()].concat();
    a.push(&gtid_event(2)).unwrap();
    let ddl = event::query(
        1,
        SERVER,
        b"",
        &internal("CREATE DATABASE IF NOT EXISTS `manifold`"),
    );
    assert!(a.push(&ddl).unwrap().unwrap().heartbeat);
    // Inside a BEGIN group the marker is the user's text.
    a.push(&gtid_event(3)).unwrap();
    a.push(&query("BEGIN")).unwrap();
    a.push(&event::query(
        1,
        SERVER,
        b"",
        &internal("CREATE TABLE IF NOT EXISTS `manifold`.`heartbeat` SELECT 1"),
    ))
    .unwrap();
    let t = a.push(&event::xid(1, SERVER, 1)).unwrap().unwrap();
    assert!(!t.heartbeat);
}

#[test]
fn mysql_events_out_of_place_are_errors() {
    let mut a = assembler();
    a.push(&gtid_event(1)).unwrap();
    // Rows need BEGIN first.
    let err = a.push(&table_map(1, "app", "t")).unwrap_err();
    assert!(matches!(err, TxnError::Sequence(_)), "{err}");
    a.reset();
    a.push(&gtid_event(1)).unwrap();
    a.push(&query("BEGIN")).unwrap();
    assert!(matches!(a.push(&gtid_event(2)), Err(TxnError::Sequence(_))));
    // A payload after BEGIN, or with no GTID before it.
    let payload = payload_event(Some(0), None, &zstd(&strip(&row_txn("x"))));
    assert!(matches!(a.push(&payload), Err(TxnError::Sequence(_))));
    a.reset();
    assert!(matches!(a.push(&payload), Err(TxnError::Sequence(_))));
}

// Compressed transactions.

/// An event as MySQL writes it inside a payload: without its checksum.
fn without_checksum(e: &[u8]) -> Vec<u8> {
    let mut e = e[..e.len() - CHECKSUM_LEN].to_vec();
    let len = e.len() as u32;
    e[9..13].copy_from_slice(&len.to_le_bytes());
    e
}

fn strip(events: &[Vec<u8>]) -> Vec<u8> {
    events.iter().flat_map(|e| without_checksum(e)).collect()
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    compress_to_vec(bytes, CompressionLevel::Fastest)
}

fn put_packed(out: &mut Vec<u8>, v: u64) {
    if v < 251 {
        out.push(v as u8);
    } else {
        out.push(254);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn field(out: &mut Vec<u8>, kind: u64, value: u64) {
    put_packed(out, kind);
    put_packed(out, if value < 251 { 1 } else { 9 });
    put_packed(out, value);
}

/// A payload event: compression type 0 (zstd) or 255 (none) when given, the uncompressed
/// size when given, then the payload.
fn payload_event(compression: Option<u64>, uncompressed: Option<u64>, payload: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(c) = compression {
        field(&mut body, 2, c);
    }
    if let Some(u) = uncompressed {
        field(&mut body, 3, u);
    }
    field(&mut body, 1, payload.len() as u64);
    body.push(0);
    body.extend_from_slice(payload);
    raw(types::TRANSACTION_PAYLOAD, 1, &body)
}

#[test]
fn a_compressed_transaction_gives_the_events_of_the_plain_one_with_checksums() {
    let events = row_txn("/*manifold:hlc=321*/ INSERT INTO t VALUES (1)");
    let plain = strip(&events);
    // zstd, zstd in two frames, and no compression.
    let mut two_frames = zstd(&plain[..40]);
    two_frames.extend_from_slice(&zstd(&plain[40..]));
    for (what, compression, payload) in [
        ("zstd", 0, zstd(&plain)),
        ("two zstd frames", 0, two_frames),
        ("none", 255, plain.clone()),
    ] {
        let mut a = assembler();
        a.push(&gtid_event(4)).unwrap();
        let size = (compression == 0).then_some(plain.len() as u64);
        let t = a
            .push(&payload_event(Some(compression), size, &payload))
            .unwrap()
            .expect("the payload is the whole transaction");
        assert!(!a.in_transaction());
        assert_eq!(t.gtid, TxnGtid::MySql(mysql_gtid(4)), "{what}");
        assert_eq!(t.mysql, Some(COMMIT));
        assert_eq!((t.stamp, t.dml_events, t.timestamp), (Some(321), 2, 42));
        assert_eq!(body_events(&t), events, "{what}: the events, CRC32 added");
    }
}

#[test]
fn a_compressed_ddl_or_heartbeat_is_read_like_a_plain_one() {
    let mut a = assembler();
    a.push(&gtid_event(1)).unwrap();
    let mut events = row_txn("/*manifold:hlc=9*/ INSERT INTO manifold.heartbeat VALUES (1)");
    events[2] = table_map(70, "manifold", "heartbeat");
    let plain = strip(&events);
    let t = a
        .push(&payload_event(
            Some(0),
            Some(plain.len() as u64),
            &zstd(&plain),
        ))
        .unwrap()
        .unwrap();
    assert!(t.heartbeat);
    a.push(&gtid_event(2)).unwrap();
    let plain = strip(&[user_var(), query("CREATE TABLE u (a INT)")]);
    let t = a
        .push(&payload_event(Some(255), None, &plain))
        .unwrap()
        .unwrap();
    assert_eq!(t.body.events(), 2);
}

#[test]
fn malformed_payloads_are_errors() {
    let events = row_txn("INSERT INTO t VALUES (1)");
    let plain = strip(&events);
    let len = plain.len() as u64;
    let packed = zstd(&plain);
    let mut cut = packed.clone();
    cut.truncate(packed.len() - 5);
    let mut flipped = packed.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    let mut after_end = events.clone();
    after_end.push(event::xid(1, SERVER, 6));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "no compression type",
            payload_event(None, Some(len), &packed),
        ),
        (
            "unknown compression",
            payload_event(Some(1), Some(len), &packed),
        ),
        (
            "size above the bound",
            payload_event(Some(0), Some(5 << 30), &packed),
        ),
        (
            "larger than it says",
            payload_event(Some(0), Some(len - 1), &packed),
        ),
        (
            "smaller than it says",
            payload_event(Some(0), Some(len + 1), &packed),
        ),
        ("cut zstd", payload_event(Some(0), Some(len), &cut)),
        ("corrupt zstd", payload_event(Some(0), Some(len), &flipped)),
        ("garbage", payload_event(Some(0), Some(len), &[7u8; 64])),
        (
            "cut event",
            payload_event(Some(255), None, &plain[..plain.len() - 3]),
        ),
        (
            "the transaction not ended",
            payload_event(Some(255), None, &strip(&events[..4])),
        ),
        (
            "events after the end",
            payload_event(Some(255), None, &strip(&after_end)),
        ),
        (
            "a GTID inside",
            payload_event(Some(255), None, &strip(&[gtid_event(5)])),
        ),
        ("payload size past the end", {
            let mut body = Vec::new();
            field(&mut body, 2, 255);
            field(&mut body, 1, len + 1);
            body.push(0);
            body.extend_from_slice(&plain);
            raw(types::TRANSACTION_PAYLOAD, 1, &body)
        }),
    ];
    for (what, payload) in cases {
        let mut a = assembler();
        a.push(&gtid_event(1)).unwrap();
        let err = a.push(&payload);
        assert!(err.is_err(), "{what}: {:?}", err.map(|t| t.map(|t| t.gtid)));
    }
    let mut a = assembler();
    a.push(&gtid_event(1)).unwrap();
    assert!(matches!(
        a.push(&payload_event(Some(0), Some(5 << 30), &packed)),
        Err(TxnError::Payload(PayloadError::TooLarge(_)))
    ));
}

proptest! {
    #[test]
    fn random_payloads_never_panic(
        header in prop::collection::vec(any::<u8>(), 0..24),
        payload in prop::collection::vec(any::<u8>(), 0..200),
        zstd_it in any::<bool>(),
    ) {
        let mut a = assembler();
        a.push(&gtid_event(1)).unwrap();
        let mut body = header;
        body.extend_from_slice(&if zstd_it { zstd(&payload) } else { payload });
        let _ = a.push(&raw(types::TRANSACTION_PAYLOAD, 1, &body));
    }
}
