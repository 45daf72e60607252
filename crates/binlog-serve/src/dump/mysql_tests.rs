//! The dump against MySQL-dialect files built here: GTID auto-positioning, skipping by the
//! replica's set, MySQL's errors, heartbeats of both versions, the other dialect refused.

use super::*;
use crate::mysql::{gtid_dump_flags, DumpGtidRequest};
use crate::sql::Value;
use manifold_binlog::event::mysql::{self as mysql_event, MysqlGtidEvent};
use manifold_binlog::gtid::{MysqlGtid, Uuid};

const SERVER_ID: u32 = 77;
/// manifold's UUID with server id 77: `BinlogConfig::uuid()`.
const M: &str = "6d616e69-666f-6c64-8000-00000000004d";
const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn set(s: &str) -> GtidSet {
    s.parse().unwrap()
}

fn message(e: &ErrPacket) -> String {
    String::from_utf8_lossy(&e.message).into_owned()
}

fn gtid(gno: u64) -> MysqlGtid {
    MysqlGtid {
        uuid: M.parse::<Uuid>().unwrap(),
        gno,
    }
}

/// A transaction as the MySQL dialect's files hold it: GTID, `BEGIN`, the origin's
/// rows-query event, XID.
fn transaction(gno: u64) -> Vec<Vec<u8>> {
    let e = MysqlGtidEvent {
        gtid: gtid(gno),
        ..MysqlGtidEvent::default()
    };
    vec![
        mysql_event::mysql_gtid(0, SERVER_ID, &e),
        event::query(0, SERVER_ID, b"", b"BEGIN"),
        mysql_event::rows_query(0, SERVER_ID, format!("# origin of {gno}").as_bytes()),
        event::xid(0, SERVER_ID, gno),
    ]
}

struct Binlog {
    _dir: tempfile::TempDir,
    shared: Arc<BinlogShared>,
}

/// MySQL-dialect files `(name, previous GTIDs, events)`, the last one current, the end
/// published with `executed`.
fn binlog(files: &[(&str, &str, Vec<Vec<u8>>)], executed: &str) -> Binlog {
    let dir = tempfile::tempdir().unwrap();
    let mut infos = Vec::new();
    for (name, previous, events) in files {
        let mut bytes = event::MAGIC.to_vec();
        let header = [
            mysql_event::mysql_format_description(0, SERVER_ID, false),
            mysql_event::previous_gtids(0, SERVER_ID, &set(previous)),
        ];
        for mut e in header.into_iter().chain(events.iter().cloned()) {
            let end = u32::try_from(bytes.len() + e.len()).unwrap();
            event::finish(&mut e, Some(SERVER_ID), end);
            bytes.extend_from_slice(&e);
        }
        std::fs::write(dir.path().join(name), &bytes).unwrap();
        infos.push(store::FileInfo {
            name: (*name).to_owned(),
            size: bytes.len() as u64,
        });
    }
    let names: Vec<&str> = infos.iter().map(|f| f.name.as_str()).collect();
    std::fs::write(
        dir.path().join("manifold-bin.index"),
        names.join("\n") + "\n",
    )
    .unwrap();
    let config = manifold_cdc::config::BinlogConfig {
        dir: dir.path().to_path_buf(),
        server_id: SERVER_ID,
        ..manifold_cdc::config::BinlogConfig::default()
    };
    assert_eq!(config.uuid().to_string(), M);
    let (shared, _requests) =
        BinlogShared::with_dialect(config, vec!["east".into()], Dialect::MySql);
    let last = infos.last().unwrap().clone();
    shared.set_files(infos);
    shared.publish_end(manifold_cdc::state::End {
        file: last.name,
        pos: last.size,
        gtid: GtidState::MySql(set(executed)),
    });
    Binlog { _dir: dir, shared }
}

/// A MySQL 9.7 replica's session: checksum declared as the source's, heartbeats asked for.
fn replica() -> BinlogSession {
    let mut s = BinlogSession::default();
    s.set("source_binlog_checksum", Value::Str("CRC32".into()));
    s.set("source_heartbeat_period", Value::Int(1_000_000_000_000));
    s
}

fn gtid_request(file: &str, gtids: &str, flags: u16) -> DumpGtidRequest {
    DumpGtidRequest {
        flags,
        server_id: 5,
        file: file.into(),
        pos: 4,
        gtids: set(gtids),
    }
}

fn sent(out: &[u8]) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut rest = out;
    while rest.len() >= 4 {
        let len = usize::from(rest[0]) | usize::from(rest[1]) << 8 | usize::from(rest[2]) << 16;
        events.push(rest[5..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
    events
}

fn describe(e: &[u8]) -> String {
    match e[4] {
        types::MYSQL_GTID => format!(
            "gtid {}",
            mysql_event::parse_mysql_gtid(e).unwrap().gtid.gno
        ),
        types::ROTATE => "rotate".into(),
        types::FORMAT_DESCRIPTION => "fde".into(),
        types::PREVIOUS_GTIDS => "previous gtids".into(),
        types::ROWS_QUERY => "rows query".into(),
        types::QUERY => "query".into(),
        types::XID => "xid".into(),
        types::HEARTBEAT => format!("heartbeat at {}", event::Header::parse(e).unwrap().log_pos),
        types::HEARTBEAT_V2 => "heartbeat v2".into(),
        t => format!("type {t}"),
    }
}

/// Runs `dump` until it waits or ends: the events it sent, the raw ones, and the step.
fn drain(dump: &mut Dump) -> (Vec<String>, Vec<Vec<u8>>, Step) {
    let mut out = Vec::new();
    let mut seq = 1;
    loop {
        let step = dump.fill(&mut out, &mut seq).unwrap();
        if step != Step::More {
            let events = sent(&out);
            return (events.iter().map(|e| describe(e)).collect(), events, step);
        }
    }
}

/// Where each event of a file starts (and the file's end, last).
fn starts(b: &Binlog, file: &str) -> Vec<u64> {
    let mut reader = Reader::open(&b.shared.config.dir, file, 4).unwrap();
    let mut buf = Vec::new();
    let mut at = vec![4];
    while reader.next_event(&mut buf, u64::MAX).unwrap() {
        buf.clear();
        at.push(reader.pos());
    }
    at
}

#[test]
fn a_named_file_is_read_with_the_replicas_transactions_left_out() {
    let events = [transaction(1), transaction(2), transaction(3)].concat();
    let b = binlog(&[("manifold-bin.000001", "", events)], &format!("{M}:1-3"));
    let request = gtid_request("manifold-bin.000001", &format!("{M}:1-2,{A}:1-9"), 0);
    let mut dump = Dump::start_gtid(
        b.shared.clone(),
        &request,
        &replica(),
        ConsumerStatus::default(),
    )
    .unwrap();
    let (events, raw, step) = drain(&mut dump);
    assert_eq!(step, Step::Wait);
    // After the header, the end of transaction 2 (the last skipped) is told by a heartbeat.
    let ends = starts(&b, "manifold-bin.000001");
    let end_of_2 = ends[2 + 8];
    assert_eq!(
        events,
        [
            "rotate".to_owned(),
            "fde".into(),
            "previous gtids".into(),
            format!("heartbeat at {end_of_2}"),
            "gtid 3".into(),
            "query".into(),
            "rows query".into(),
            "xid".into(),
        ]
    );
    // Events go as they are in the file.
    let file = std::fs::read(b.shared.config.dir.join("manifold-bin.000001")).unwrap();
    let at = usize::try_from(ends[10]).unwrap();
    assert_eq!(&raw[4][..], &file[at..at + raw[4].len()]);
    assert_eq!(dump.status().gtid, format!("{M}:1-3"));
}

#[test]
fn a_replica_that_has_everything_gets_a_heartbeat_at_the_end() {
    let events = [transaction(1), transaction(2)].concat();
    let b = binlog(&[("manifold-bin.000001", "", events)], &format!("{M}:1-2"));
    let request = gtid_request(
        "manifold-bin.000001",
        &format!("{M}:1-2"),
        gtid_dump_flags::USE_HEARTBEAT_EVENT_V2 | gtid_dump_flags::NON_BLOCK,
    );
    let mut dump = Dump::start_gtid(
        b.shared.clone(),
        &request,
        &replica(),
        ConsumerStatus::default(),
    )
    .unwrap();
    let (events, raw, step) = drain(&mut dump);
    assert_eq!(step, Step::Done, "a non-blocking dump ends");
    assert_eq!(events, ["rotate", "fde", "previous gtids", "heartbeat v2"]);
    // The v2 heartbeat names the file and the end of the last skipped transaction.
    let end = *starts(&b, "manifold-bin.000001").last().unwrap();
    let expected = packets::heartbeat_v2(SERVER_ID, "manifold-bin.000001", end, true);
    assert_eq!(raw[3], expected);
    // Idle heartbeats take the version the replica asked for.
    let mut out = Vec::new();
    let mut seq = 0;
    dump.heartbeat(&mut out, &mut seq);
    assert_eq!(sent(&out)[0][4], types::HEARTBEAT_V2);
}

#[test]
fn auto_positioning_starts_in_the_newest_file_the_replica_has_the_start_of() {
    let b = binlog(
        &[
            (
                "manifold-bin.000001",
                "",
                [transaction(1), transaction(2)].concat(),
            ),
            (
                "manifold-bin.000002",
                &format!("{M}:1-2"),
                [transaction(3), transaction(4)].concat(),
            ),
        ],
        &format!("{M}:1-4"),
    );
    let request = gtid_request("", &format!("{M}:1-3"), 0);
    let mut dump = Dump::start_gtid(
        b.shared.clone(),
        &request,
        &replica(),
        ConsumerStatus::default(),
    )
    .unwrap();
    let (events, raw, _) = drain(&mut dump);
    let ends = starts(&b, "manifold-bin.000002");
    assert_eq!(
        events,
        [
            "rotate".to_owned(),
            "fde".into(),
            "previous gtids".into(),
            format!("heartbeat at {}", ends[2 + 4]),
            "gtid 4".into(),
            "query".into(),
            "rows query".into(),
            "xid".into(),
        ]
    );
    assert_eq!(
        &raw[0][HEADER_LEN + 8..raw[0].len() - 4],
        b"manifold-bin.000002"
    );
    // The file's first transaction is skipped: its format description goes with log_pos
    // and created 0, so the replica keeps its position and temporary tables.
    assert_eq!(event::Header::parse(&raw[1]).unwrap().log_pos, 0);
    assert_eq!(&raw[1][HEADER_LEN + 52..HEADER_LEN + 56], &[0; 4]);
    // A new replica reads from the first file, everything.
    let request = gtid_request("", "", 0);
    let mut dump = Dump::start_gtid(
        b.shared.clone(),
        &request,
        &replica(),
        ConsumerStatus::default(),
    )
    .unwrap();
    let (events, _, _) = drain(&mut dump);
    let gtids: Vec<_> = events.iter().filter(|e| e.starts_with("gtid")).collect();
    assert_eq!(gtids, ["gtid 1", "gtid 2", "gtid 3", "gtid 4"]);
}

#[test]
fn replicas_ahead_of_the_binlog_or_behind_its_files_are_refused_as_mysql_refuses_them() {
    let b = binlog(
        &[(
            "manifold-bin.000002",
            &format!("{M}:1-2"),
            [transaction(3), transaction(4)].concat(),
        )],
        &format!("{M}:1-4"),
    );
    let refused = |gtids: &str| {
        Dump::start_gtid(
            b.shared.clone(),
            &gtid_request("", gtids, 0),
            &replica(),
            ConsumerStatus::default(),
        )
        .unwrap_err()
    };
    let e = refused(&format!("{M}:1-5"));
    assert_eq!(e.code, 1236);
    assert!(message(&e).starts_with(
        "Replica has more GTIDs than the source has, using the source's SERVER_UUID."
    ));
    // Transactions 1 and 2 were purged: a replica without them cannot be served.
    let e = refused(&format!("{A}:1"));
    assert_eq!(e.code, 1236);
    assert_eq!(message(&e), format!("Cannot replicate because the source purged required binary logs. Replicate the missing transactions from elsewhere, or provision a new replica from backup. Consider increasing the source's binary log expiration period. The GTID set sent by the replica is '{A}:1', and the missing transactions are '{M}:1-2'."));
}

#[test]
fn each_dialect_refuses_the_others_gtid_dump() {
    let b = binlog(
        &[("manifold-bin.000001", "", transaction(1))],
        &format!("{M}:1"),
    );
    let mut mariadb = replica();
    mariadb.set("slave_connect_state", Value::Str("0-77-1".into()));
    let e = Dump::start(
        b.shared.clone(),
        &DumpRequest {
            pos: 4,
            flags: 0,
            server_id: 5,
            file: String::new(),
        },
        &mariadb,
        ConsumerStatus::default(),
    )
    .unwrap_err();
    assert_eq!(e.code, 1236);
    assert!(message(&e).contains("MySQL's dialect"), "{}", message(&e));
    let config = manifold_cdc::config::BinlogConfig::default();
    let (shared, _requests) = BinlogShared::new(config, vec!["east".into()]);
    let e = Dump::start_gtid(
        shared,
        &gtid_request("", "", 0),
        &replica(),
        ConsumerStatus::default(),
    )
    .unwrap_err();
    assert_eq!(e.code, 1236);
    assert!(message(&e).contains("MariaDB's dialect"), "{}", message(&e));
}

#[test]
fn a_dump_by_position_sends_mysql_events_as_they_are() {
    let b = binlog(
        &[(
            "manifold-bin.000001",
            "",
            [transaction(1), transaction(2)].concat(),
        )],
        &format!("{M}:1-2"),
    );
    let ends = starts(&b, "manifold-bin.000001");
    let from = u32::try_from(ends[2 + 4]).unwrap();
    // Flag 2 is MariaDB's "send annotate rows", MySQL's "heartbeats v2": nothing is adapted.
    let request = DumpRequest {
        pos: from,
        flags: 2,
        server_id: 5,
        file: "manifold-bin.000001".into(),
    };
    let mut dump = Dump::start(
        b.shared.clone(),
        &request,
        &replica(),
        ConsumerStatus::default(),
    )
    .unwrap();
    let (events, _, step) = drain(&mut dump);
    assert_eq!(step, Step::Wait);
    assert_eq!(
        events,
        ["rotate", "fde", "gtid 2", "query", "rows query", "xid"]
    );
    let mut out = Vec::new();
    let mut seq = 0;
    dump.heartbeat(&mut out, &mut seq);
    assert_eq!(sent(&out)[0][4], types::HEARTBEAT_V2);
    assert_eq!(dump.status().gtid, format!("{M}:2"));
}
