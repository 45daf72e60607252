//! The dump against files written here: skipping, the files' order, stopping.

use super::*;

#[test]
fn dump_requests_parse_and_short_ones_are_refused() {
    let mut p = vec![0x12];
    p.extend_from_slice(&256u32.to_le_bytes());
    p.extend_from_slice(&3u16.to_le_bytes());
    p.extend_from_slice(&77u32.to_le_bytes());
    p.extend_from_slice(b"manifold-bin.000002");
    assert_eq!(
        DumpRequest::parse(&p),
        Some(DumpRequest {
            pos: 256,
            flags: 3,
            server_id: 77,
            file: "manifold-bin.000002".into()
        })
    );
    assert_eq!(DumpRequest::parse(&p[..10]), None);
    assert_eq!(DumpRequest::parse(&[]), None);
}

fn pos(s: &str) -> GtidPos {
    s.parse().unwrap()
}

fn message(e: &ErrPacket) -> String {
    String::from_utf8_lossy(&e.message).into_owned()
}

#[test]
fn gtid_start_positions_are_checked_as_mariadb_does() {
    let binlog = pos("0-9-20");
    // Behind or at the end: fine. Other domains are not manifold's: ignored.
    check_start(&pos("0-9-5"), &binlog, 0, false).unwrap();
    check_start(&pos("0-9-20,3-1-100"), &binlog, 0, false).unwrap();
    check_start(&pos(""), &binlog, 0, false).unwrap();
    // Nothing written yet in the domain.
    check_start(&pos("0-9-5"), &GtidPos::default(), 0, false).unwrap();
    // Ahead of the binlog.
    let e = check_start(&pos("0-9-21"), &binlog, 0, false).unwrap_err();
    assert_eq!(e.code, 1236);
    assert_eq!(
        message(&e),
        "Error: connecting slave requested to start from GTID 0-9-21, which is not in the master's binlog"
    );
    // ...unless duplicates are ignored.
    check_start(&pos("0-9-21"), &binlog, 0, true).unwrap();
    // Another server's history in the domain, which the binlog passed: diverged.
    let e = check_start(&pos("0-1-5"), &binlog, 0, false).unwrap_err();
    assert!(message(&e).contains("diverged"), "{}", message(&e));
}

#[test]
fn transactions_end_at_xid_or_commit() {
    assert!(ends_transaction(&event::xid(0, 1, 5)));
    assert!(ends_transaction(&event::query(0, 1, b"", b"COMMIT")));
    assert!(ends_transaction(&event::query(0, 1, b"db", b" rollback ")));
    assert!(!ends_transaction(&event::query(0, 1, b"", b"BEGIN")));
    assert!(!ends_transaction(&event::annotate(0, 1, b"COMMIT")));
    assert!(ends_transaction(&xa_prepare()));
    assert!(ends_transaction(&event::query(0, 1, b"", b"XA COMMIT 'x'")));
    assert!(ends_transaction(&event::query(
        0,
        1,
        b"",
        b"xa  rollback 'x'"
    )));
    assert!(!ends_transaction(&event::query(0, 1, b"", b"XA START 'x'")));
    assert!(!ends_transaction(&event::query(0, 1, b"", b"XA COMMITTED")));
    assert!(part_of_group(types::TABLE_MAP));
    assert!(!part_of_group(types::QUERY));
}

const SERVER_ID: u32 = 77;
const ANNOTATE: u16 = dump_flags::SEND_ANNOTATE_ROWS;

fn gtid(seq: u64) -> Gtid {
    Gtid {
        domain: 0,
        server: SERVER_ID,
        seq,
    }
}

fn gtid_event(seq: u64, flags2: u8) -> Vec<u8> {
    event::mariadb_gtid(0, gtid(seq), flags2)
}

/// The events of a transaction (GTID, origin annotate, XID).
fn transaction(seq: u64) -> Vec<Vec<u8>> {
    vec![
        gtid_event(seq, event::gtid_flags::TRANSACTIONAL),
        event::annotate(0, SERVER_ID, format!("origin of {seq}").as_bytes()),
        event::xid(0, SERVER_ID, seq),
    ]
}

/// The events of a DDL (standalone GTID, origin annotate, the query).
fn ddl(seq: u64, text: &str) -> Vec<Vec<u8>> {
    vec![
        gtid_event(seq, event::gtid_flags::STANDALONE),
        event::annotate(0, SERVER_ID, b"origin of the ddl"),
        event::query(0, SERVER_ID, b"db", text.as_bytes()),
    ]
}

/// A global binlog on disk: `files` (name, GTID list, events) listed in the index and the
/// shared state, the last one current and its end published with `gtid`.
struct Binlog {
    /// Removed with the value.
    _dir: tempfile::TempDir,
    shared: Arc<BinlogShared>,
}

fn binlog(files: &[(&str, &str, Vec<Vec<u8>>)], gtid: &str) -> Binlog {
    let dir = tempfile::tempdir().unwrap();
    let mut infos = Vec::new();
    for (name, list, events) in files {
        let mut bytes = event::MAGIC.to_vec();
        let header = [
            event::format_description(0, SERVER_ID, false),
            event::mariadb_gtid_list(0, SERVER_ID, &pos(list)),
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
    let index = names.join("\n") + "\n";
    std::fs::write(dir.path().join("manifold-bin.index"), index).unwrap();
    let config = manifold_cdc::config::BinlogConfig {
        dir: dir.path().to_path_buf(),
        server_id: SERVER_ID,
        ..manifold_cdc::config::BinlogConfig::default()
    };
    let (shared, _requests) = BinlogShared::new(config, vec!["east".into()]);
    let last = infos.last().unwrap().clone();
    shared.set_files(infos);
    shared.publish_end(manifold_cdc::state::End {
        file: last.name,
        pos: last.size,
        gtid: pos(gtid).into(),
    });
    Binlog { _dir: dir, shared }
}

/// A MariaDB 10.11 replica's session: CRC32, GTID capable, `@slave_connect_state` when given.
fn replica(connect_state: Option<&str>) -> BinlogSession {
    use crate::sql::Value;
    let mut s = BinlogSession::default();
    s.set("master_binlog_checksum", Value::Str("CRC32".into()));
    s.set("mariadb_slave_capability", Value::Int(4));
    if let Some(state) = connect_state {
        s.set("slave_connect_state", Value::Str(state.into()));
    }
    s
}

fn request(file: &str, pos: u32, flags: u16) -> DumpRequest {
    DumpRequest {
        pos,
        flags,
        server_id: 5,
        file: file.into(),
    }
}

/// The events in `out` (packets of `0x00 event`).
fn sent(out: &[u8]) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut rest = out;
    while rest.len() >= 4 {
        let len = usize::from(rest[0]) | usize::from(rest[1]) << 8 | usize::from(rest[2]) << 16;
        let payload = &rest[4..4 + len];
        assert_eq!(payload[0], 0, "an event packet");
        events.push(payload[1..].to_vec());
        rest = &rest[4 + len..];
    }
    events
}

/// What an event is, for comparing streams: its type, and a GTID's sequence number.
fn describe(e: &[u8]) -> String {
    match e[4] {
        types::GTID => format!("gtid {}", event::parse_mariadb_gtid(e).unwrap().0.seq),
        types::ROTATE => "rotate".into(),
        types::FORMAT_DESCRIPTION => "fde".into(),
        types::GTID_LIST => "gtid list".into(),
        types::ANNOTATE_ROWS => "annotate".into(),
        types::QUERY => "query".into(),
        types::XID => "xid".into(),
        types::XA_PREPARE => "xa prepare".into(),
        types::HEARTBEAT => "heartbeat".into(),
        t => format!("type {t}"),
    }
}

/// Runs `dump` until it waits or ends; the events it sent.
fn drain(dump: &mut Dump) -> (Vec<String>, Step) {
    let mut out = Vec::new();
    let mut seq = 1;
    loop {
        let step = dump.fill(&mut out, &mut seq).unwrap();
        if step != Step::More {
            return (sent(&out).iter().map(|e| describe(e)).collect(), step);
        }
    }
}

fn start(b: &Binlog, request: &DumpRequest, session: &BinlogSession) -> Dump {
    Dump::start(
        b.shared.clone(),
        request,
        session,
        ConsumerStatus::default(),
    )
    .unwrap()
}

#[test]
fn a_ddl_the_replica_has_is_skipped_whole_gtid_first() {
    let events = [
        ddl(1, "CREATE TABLE t (a INT)"),
        transaction(2),
        transaction(3),
    ]
    .concat();
    let b = binlog(&[("manifold-bin.000001", "", events)], "0-77-3");
    let mut dump = start(&b, &request("", 4, ANNOTATE), &replica(Some("0-77-2")));
    let (events, step) = drain(&mut dump);
    assert_eq!(step, Step::Wait);
    // Nothing of 1 and 2 (the DDL's annotate and query were sent without their GTID), the
    // position the replica is at, then 3.
    assert_eq!(
        events,
        [
            "rotate",
            "fde",
            "gtid list",
            "gtid list",
            "gtid 3",
            "annotate",
            "xid"
        ]
    );
}

#[test]
fn the_next_file_is_found_by_number_after_the_current_one_is_purged() {
    let b = binlog(
        &[
            ("manifold-bin.000003", "", transaction(1)),
            ("manifold-bin.000004", "0-77-1", transaction(2)),
        ],
        "0-77-2",
    );
    let mut dump = start(&b, &request("manifold-bin.000003", 4, 0), &replica(None));
    // Files up to 3 purged while the dump reads 3 (its reader holds the file open).
    let files = b.shared.files();
    b.shared.set_files(files[1..].to_vec());
    let (events, step) = drain(&mut dump);
    assert_eq!(step, Step::Wait);
    assert_eq!(
        events,
        [
            "rotate",
            "fde",
            "gtid list",
            "gtid 1",
            "xid",
            "rotate",
            "fde",
            "gtid list",
            "gtid 2",
            "xid"
        ]
    );
    assert_eq!(dump.status().file, "manifold-bin.000004");
}

#[test]
fn next_files_go_by_number() {
    let files: Vec<_> = ["manifold-bin.000002", "manifold-bin.000010"]
        .iter()
        .map(|n| store::FileInfo {
            name: (*n).into(),
            size: 4,
        })
        .collect();
    assert_eq!(
        next_file(&files, "manifold-bin.000002").as_deref(),
        Some("manifold-bin.000010")
    );
    assert_eq!(
        next_file(&files, "manifold-bin.000001").as_deref(),
        Some("manifold-bin.000002")
    );
    assert_eq!(next_file(&files, "manifold-bin.000010"), None);
    assert_eq!(next_file(&files, "manifold-bin"), None);
}

/// MariaDB's `XA_PREPARE_LOG_EVENT` of `XA PREPARE 'x'`: one-phase flag, format id, the
/// lengths of gtrid and bqual, then the xid.
fn xa_prepare() -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.push(b'x');
    let mut e = vec![0u8; event::HEADER_LEN + body.len() + event::CHECKSUM_LEN];
    event::Header {
        type_code: types::XA_PREPARE,
        server_id: SERVER_ID,
        ..event::Header::default()
    }
    .write(&mut e);
    e[event::HEADER_LEN..event::HEADER_LEN + body.len()].copy_from_slice(&body);
    event::finish(&mut e, None, 0);
    e
}

#[test]
fn a_prepared_xa_transaction_the_replica_has_is_skipped_to_its_prepare() {
    let mut prepared = vec![
        gtid_event(2, event::gtid_flags::PREPARED_XA),
        event::query(0, SERVER_ID, b"db", b"XA START 'x'"),
        event::query(0, SERVER_ID, b"db", b"XA END 'x'"),
    ];
    prepared.push(xa_prepare());
    let committed = vec![
        gtid_event(3, event::gtid_flags::COMPLETED_XA),
        event::query(0, SERVER_ID, b"db", b"XA COMMIT 'x'"),
    ];
    let events = [transaction(1), prepared, committed, transaction(4)].concat();
    let b = binlog(&[("manifold-bin.000001", "", events)], "0-77-4");
    let mut dump = start(&b, &request("", 4, ANNOTATE), &replica(Some("0-77-3")));
    let (events, step) = drain(&mut dump);
    assert_eq!(step, Step::Wait);
    assert_eq!(
        events,
        [
            "rotate",
            "fde",
            "gtid list",
            "gtid list",
            "gtid 4",
            "annotate",
            "xid"
        ]
    );
}

/// A consumer that reads what it is sent until the first flush, then stops reading: every
/// later write waits forever, and the first such write resolves `stopped` (as a KILL would
/// arrive while the session is stuck in it).
struct StopsReading {
    flushed: bool,
    stuck: Option<tokio::sync::oneshot::Sender<()>>,
}

impl StopsReading {
    fn new() -> (StopsReading, impl Future<Output = ()>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let consumer = StopsReading {
            flushed: false,
            stuck: Some(tx),
        };
        (consumer, async move {
            let _ = rx.await;
        })
    }
}

impl AsyncWrite for StopsReading {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if !self.flushed {
            return std::task::Poll::Ready(Ok(buf.len()));
        }
        if let Some(stuck) = self.stuck.take() {
            let _ = stuck.send(());
        }
        std::task::Poll::Pending
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.flushed = true;
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Runs `dump` to a consumer that stops reading after the first flush; how it ended. Without
/// a stop honoured in every write it never ends: the guard turns that into a failure.
async fn run_to_a_consumer_that_stops_reading(dump: &mut Dump) -> DumpOutcome {
    let (mut consumer, stop) = StopsReading::new();
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        run(&mut consumer, 1, dump, stop, 0),
    )
    .await;
    outcome.expect("the dump ended when stopped")
}

#[tokio::test]
async fn a_stop_ends_a_dump_stuck_writing_a_heartbeat() {
    let b = binlog(&[("manifold-bin.000001", "", transaction(1))], "0-77-1");
    let mut session = replica(None);
    session.set("master_heartbeat_period", crate::sql::Value::Int(1_000_000));
    let mut dump = start(&b, &request("", 4, 0), &session);
    assert_eq!(
        run_to_a_consumer_that_stops_reading(&mut dump).await,
        DumpOutcome::Stopped
    );
    assert!(b.shared.consumers().is_empty());
}

#[tokio::test]
async fn a_stop_ends_a_dump_stuck_writing_its_eof() {
    let b = binlog(&[("manifold-bin.000001", "", transaction(1))], "0-77-1");
    let mut dump = start(&b, &request("", 4, dump_flags::NON_BLOCK), &replica(None));
    assert_eq!(
        run_to_a_consumer_that_stops_reading(&mut dump).await,
        DumpOutcome::Stopped
    );
}

#[tokio::test]
async fn a_stop_ends_a_dump_stuck_writing_its_error() {
    let b = binlog(&[("manifold-bin.000001", "", transaction(1))], "0-77-1");
    // Past the transaction, an event header with an impossible size.
    let path = b.shared.config.dir.join("manifold-bin.000001");
    let mut bytes = std::fs::read(&path).unwrap();
    let mut garbage = [0u8; event::HEADER_LEN];
    garbage[9] = 5;
    bytes.extend_from_slice(&garbage);
    std::fs::write(&path, &bytes).unwrap();
    let mut end = b.shared.end();
    end.pos = bytes.len() as u64;
    b.shared.publish_end(end);
    let mut dump = start(&b, &request("", 4, 0), &replica(None));
    assert_eq!(
        run_to_a_consumer_that_stops_reading(&mut dump).await,
        DumpOutcome::Stopped
    );
}

#[test]
fn a_dump_from_inside_an_event_is_refused_as_bogus_data() {
    let b = binlog(
        &[
            ("manifold-bin.000001", "", transaction(1)),
            ("manifold-bin.000002", "0-77-1", transaction(2)),
        ],
        "0-77-2",
    );
    for file in ["manifold-bin.000001", "manifold-bin.000002"] {
        // One byte into the file's first transaction (its GTID event).
        let header = 4
            + event::format_description(0, 0, false).len()
            + event::mariadb_gtid_list(0, 0, &pos(if file.ends_with('1') { "" } else { "0-77-1" }))
                .len();
        let at = u32::try_from(header + 1).unwrap();
        let mut dump = start(&b, &request(file, at, 0), &replica(None));
        let mut out = Vec::new();
        let mut seq = 1;
        let e = loop {
            match dump.fill(&mut out, &mut seq) {
                Ok(Step::More) => {}
                Ok(step) => panic!("{file} at {at}: {step:?} instead of an error"),
                Err(e) => break e,
            }
        };
        assert_eq!(e.code, 1236);
        assert!(
            message(&e).starts_with("bogus data in log event;"),
            "{}",
            message(&e)
        );
    }
}

/// A file started empty has a format description of time 0; a dump sends it with a time, as
/// a server's (Debezium takes its clock from it and fails on 0), its checksum still right.
#[test]
fn the_format_description_is_sent_with_a_time() {
    let b = binlog(&[("manifold-bin.000001", "", transaction(1))], "0-77-1");
    let mut dump = start(&b, &request("", 4, ANNOTATE), &replica(Some("")));
    let mut out = Vec::new();
    let mut seq = 1;
    while dump.fill(&mut out, &mut seq).unwrap() == Step::More {}
    let events = sent(&out);
    let fde = events
        .iter()
        .find(|e| e[4] == types::FORMAT_DESCRIPTION)
        .expect("a format description");
    let h = event::Header::parse(fde).unwrap();
    assert!(h.timestamp > 1_700_000_000, "{}", h.timestamp);
    assert!(event::verify_checksum(fde).is_ok());
}
