//! The store against its contract: rotation, table ids, recovery at every cut point with
//! byte-identical continuation, reading, locating, purging.

use std::path::Path;
use std::time::Instant;

use super::*;
use crate::event::{self, gtid_flags, types, Header};
use crate::gtid::{Gtid, GtidState};
use crate::origin::Origin;
use crate::spill::{Budget, TxnBody};

mod checkpoint;
mod mariadb;
mod mysql;
mod mysqlbinlog;

pub(super) const SERVER_ID: u32 = 77;

pub(super) fn options(dir: &Path, max_file_size: u64) -> StoreOptions {
    StoreOptions {
        dir: dir.to_path_buf(),
        base_name: "manifold-bin".into(),
        max_file_size,
        server_id: SERVER_ID,
        domain_id: 0,
        dialect: crate::gtid::Dialect::MariaDb,
        server_uuid: crate::gtid::Uuid::default(),
        clusters: vec!["east".into(), "west".into()],
    }
}

/// A `TABLE_MAP` of `schema.table (id INT)` under `table_id`, with checksum.
pub(super) fn table_map(table_id: u64, schema: &[u8], table: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&table_id.to_le_bytes()[..6]);
    body.extend_from_slice(&1u16.to_le_bytes()); // flags
    body.push(schema.len() as u8);
    body.extend_from_slice(schema);
    body.push(0);
    body.push(table.len() as u8);
    body.extend_from_slice(table);
    body.push(0);
    body.push(1); // one column
    body.push(3); // MYSQL_TYPE_LONG
    body.push(0); // no metadata
    body.push(1); // nullable bitmap
    raw_event(types::TABLE_MAP, &body)
}

/// A `WRITE_ROWS_V1` inserting `values` into the one-INT-column table `table_id`.
pub(super) fn write_rows(table_id: u64, values: &[i32]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&table_id.to_le_bytes()[..6]);
    body.extend_from_slice(&1u16.to_le_bytes()); // STMT_END_F
    body.push(1); // column count
    body.push(1); // columns present
    for v in values {
        body.push(0); // null bitmap
        body.extend_from_slice(&v.to_le_bytes());
    }
    raw_event(types::WRITE_ROWS_V1, &body)
}

/// An event as a source sent it: its own server id and positions.
pub(super) fn raw_event(type_code: u8, body: &[u8]) -> Vec<u8> {
    let mut e = vec![0u8; HEADER_LEN + body.len() + CHECKSUM_LEN];
    Header {
        timestamp: 1_700_000_000,
        type_code,
        server_id: 1,
        event_size: 0,
        log_pos: 0,
        flags: 0,
    }
    .write(&mut e);
    e[HEADER_LEN..HEADER_LEN + body.len()].copy_from_slice(body);
    event::finish(&mut e, None, 123_456);
    e
}

use crate::event::{CHECKSUM_LEN, HEADER_LEN};

pub(super) fn txn(
    budget: &Budget,
    source: usize,
    seq: u64,
    flags: u8,
    events: &[Vec<u8>],
) -> SourceTxn {
    let mut body = TxnBody::new(budget);
    for e in events {
        body.push(e).unwrap();
    }
    SourceTxn {
        source,
        gtid: Gtid {
            domain: 0,
            server: 10 + source as u32,
            seq,
        }
        .into(),
        mysql: None,
        gtid_flags: flags,
        timestamp: 1_700_000_000 + seq as u32,
        stamp: None,
        heartbeat: false,
        body,
        dml_events: 2,
        received: Instant::now(),
    }
}

/// The `i`th transaction of the test workload: alternating sources, a DDL now and then, rows
/// into two tables per source under the sources' own table ids.
fn workload(budget: &Budget, i: u64) -> SourceTxn {
    let source = (i % 2) as usize;
    let seq = i / 2 + 1;
    if i % 7 == 3 {
        let ddl = event::query(1, 1, b"test", b"CREATE TABLE x (id INT)");
        return txn(
            budget,
            source,
            seq,
            gtid_flags::STANDALONE | gtid_flags::DDL,
            &[ddl],
        );
    }
    let source_table = 100 + i % 3 + source as u64 * 1000;
    let table = if i.is_multiple_of(3) {
        &b"a"[..]
    } else {
        &b"b"[..]
    };
    let values: Vec<i32> = (0..(i % 5 + 1) as i32).map(|v| v + i as i32 * 10).collect();
    let mut events = vec![event::annotate(
        1,
        1,
        b"/*manifold:hlc=5*/ insert into t values (1)",
    )];
    events.push(table_map(source_table, b"test", table));
    events.push(write_rows(source_table, &values));
    if i % 4 == 1 {
        events.push(event::query(1, 1, b"test", b"COMMIT"));
    } else {
        events.push(event::xid(1, 1, i));
    }
    txn(budget, source, seq, gtid_flags::TRANSACTIONAL, &events)
}

fn budget(dir: &Path) -> Budget {
    Budget::new(64 << 20, dir.join("spill"))
}

#[derive(Debug, Clone)]
pub(super) struct After {
    end: Position,
    sources: Vec<SourceState>,
    gtid: GtidState,
}

fn write_all(dir: &Path, max: u64, n: u64, budget: &Budget) -> Vec<After> {
    write_run(options(dir, max), n, &|i| workload(budget, i))
}

/// Opens a fresh store with `opts` and appends `workload(i)` with key `1000 + i` for `i` in
/// `0..n`; what each append left, in order.
pub(super) fn write_run(
    opts: StoreOptions,
    n: u64,
    workload: &dyn Fn(u64) -> SourceTxn,
) -> Vec<After> {
    let dialect = opts.dialect;
    let (mut w, rec) = Writer::open(opts).unwrap();
    assert_eq!(rec.truncated, 0);
    assert_eq!(rec.gtid, GtidState::empty(dialect));
    let mut after = Vec::new();
    for i in 0..n {
        let a = w.append(&workload(i), 1000 + i).unwrap();
        assert_eq!(a.end, w.end());
        after.push(After {
            end: a.end,
            sources: w.sources().to_vec(),
            gtid: w.gtid_pos(),
        });
    }
    w.flush().unwrap();
    after
}

fn read_dir_sorted(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

fn events_of(dir: &Path, name: &str) -> Vec<Vec<u8>> {
    let mut r = Reader::open(dir, name, 4).unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while r.next_event(&mut buf, u64::MAX).unwrap() {
        out.push(buf.clone());
    }
    out
}

#[test]
fn files_rotate_with_headers_renumbered_tables_and_positions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("binlog");
    let budget = budget(tmp.path());
    let after = write_all(&dir, 1500, 40, &budget);
    let files = list_files(&dir, "manifold-bin").unwrap();
    assert!(files.len() >= 4, "{files:?}");
    let index = std::fs::read_to_string(dir.join("manifold-bin.index")).unwrap();
    let names: Vec<_> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(index.lines().collect::<Vec<_>>(), names);
    assert_eq!(after.last().unwrap().end.file, *names.last().unwrap());

    let mut seq = 0;
    for (n, file) in files.iter().enumerate() {
        let bytes = std::fs::read(dir.join(&file.name)).unwrap();
        assert_eq!(bytes.len() as u64, file.size);
        assert_eq!(&bytes[..4], &event::MAGIC);
        let events = events_of(&dir, &file.name);
        let mut at = 4u64;
        let mut table_ids = Vec::new();
        for e in &events {
            let h = Header::parse(e).unwrap();
            assert!(files::verify_file_checksum(&mut e.clone()), "checksum");
            at += e.len() as u64;
            assert_eq!(u64::from(h.log_pos), at);
            assert_eq!(h.server_id, SERVER_ID);
            if h.type_code == types::TABLE_MAP || types::is_rows(h.type_code) {
                table_ids.push(event::table_id(e).unwrap());
            }
            if h.type_code == types::GTID {
                let (g, _) = event::parse_mariadb_gtid(e).unwrap();
                seq += 1;
                assert_eq!(
                    g,
                    Gtid {
                        domain: 0,
                        server: SERVER_ID,
                        seq
                    }
                );
            }
        }
        assert_eq!(at, file.size);
        assert_eq!(events[0][4], types::FORMAT_DESCRIPTION);
        let in_use = Header::parse(&events[0]).unwrap().flags & event::flags::BINLOG_IN_USE;
        assert_eq!(
            in_use != 0,
            n + 1 == files.len(),
            "only the open file is in use"
        );
        assert_eq!(events[1][4], types::GTID_LIST);
        let last = events.last().unwrap();
        if n + 1 < files.len() {
            assert_eq!(last[4], types::ROTATE);
            assert_eq!(
                &last[HEADER_LEN + 8..last.len() - 4],
                files[n + 1].name.as_bytes()
            );
        }
        // Ids start at 1 in every file; at most 4 tables (2 names x 2 sources).
        assert!(table_ids.contains(&1));
        assert!(
            table_ids.iter().all(|&id| (1..=4).contains(&id)),
            "{table_ids:?}"
        );
        // The origin of the first transaction records the sources.
        let origin = Origin::parse(event::annotate_text(&events[3])).unwrap();
        assert!(origin.sources.is_some());
        if let Some(e) = events.get(3..).and_then(|rest| {
            rest.iter()
                .filter(|e| e[4] == types::ANNOTATE_ROWS)
                .filter_map(|e| Origin::parse(event::annotate_text(e)))
                .nth(1)
        }) {
            assert!(e.sources.is_none());
        }
    }
    assert_eq!(seq, 40);
    // Same table from two sources: two ids; the source's own ids are gone.
    let first = events_of(&dir, &files[0].name);
    let maps: Vec<_> = first
        .iter()
        .filter(|e| e[4] == types::TABLE_MAP)
        .map(|e| event::table_id(e).unwrap())
        .collect();
    assert!(maps.iter().all(|id| *id < 100));
    let last = after.last().unwrap();
    assert_eq!(last.gtid.to_string(), "0-77-40");
    assert_eq!(last.sources[0].pos.to_string(), "0-10-20");
    assert_eq!(last.sources[1].pos.to_string(), "0-11-20");
    assert_eq!(last.sources[1].key, 1039);
}

/// Cut the last file at every byte; recovery must land on the last complete transaction and
/// continue into files identical to the uninterrupted run's.
#[test]
fn recovery_at_every_cut_continues_byte_identical() {
    const N: u64 = 40;
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    let budget = budget(tmp.path());
    let after = write_all(&clean, 1500, N, &budget);
    every_cut_resumes_byte_identical(tmp.path(), &clean, &after, options, &|i| {
        workload(&budget, i)
    });
}

/// Cuts the last file of the run in `clean` (which wrote `after`, transaction `i` being
/// `workload(i)` with key `1000 + i`, files of 1500 bytes) at every byte, recovers each cut with
/// `options`, and checks the recovered state and that writing the rest of the run gives the
/// same files, byte for byte.
pub(super) fn every_cut_resumes_byte_identical(
    tmp: &Path,
    clean: &Path,
    after: &[After],
    options: fn(&Path, u64) -> StoreOptions,
    workload: &dyn Fn(u64) -> SourceTxn,
) {
    let n = after.len() as u64;
    let expected = read_dir_sorted(clean);
    let last_name = after.last().unwrap().end.file.clone();
    let last_len = std::fs::metadata(clean.join(&last_name)).unwrap().len();
    let first_in_last = after.iter().position(|a| a.end.file == last_name).unwrap();
    for cut in 0..=last_len {
        let dir = tmp.join("cut");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &expected {
            let bytes = if *name == last_name {
                &bytes[..cut as usize]
            } else {
                &bytes[..]
            };
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        // The number of transactions that survive the cut.
        let done = after
            .iter()
            .rposition(|a| a.end.file == last_name && a.end.pos <= cut)
            .map_or(first_in_last, |i| i + 1);
        let (mut w, rec) = Writer::open(options(&dir, 1500)).unwrap();
        let want = &after[done - 1];
        assert_eq!(rec.sources, want.sources, "cut at {cut}");
        assert_eq!(rec.gtid, want.gtid, "cut at {cut}");
        assert_eq!(w.sources(), &want.sources[..]);
        if done > first_in_last {
            assert_eq!(w.end(), want.end, "cut at {cut}");
            assert_eq!(rec.truncated, cut - want.end.pos);
        }
        for i in done as u64..n {
            w.append(&workload(i), 1000 + i).unwrap();
        }
        w.flush().unwrap();
        drop(w);
        let got = read_dir_sorted(&dir);
        assert_eq!(got.len(), expected.len(), "cut at {cut}");
        for ((gn, gb), (en, eb)) in got.iter().zip(&expected) {
            assert_eq!(gn, en, "cut at {cut}");
            assert!(gb == eb, "cut at {cut}: {gn} differs");
        }
    }
}

#[test]
fn recovery_stops_at_a_damaged_event_and_without_an_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let after = write_all(&dir, 1500, 20, &budget);
    let last = &after.last().unwrap().end;
    let prev = &after[after.len() - 2];
    assert_eq!(
        prev.end.file, last.file,
        "two transactions in the last file"
    );
    // Flip a byte inside the last transaction: it is cut, the one before stays.
    let path = dir.join(&last.file);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = (prev.end.pos + last.pos) as usize / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    std::fs::remove_file(dir.join("manifold-bin.index")).unwrap();
    let (w, rec) = Writer::open(options(&dir, 1500)).unwrap();
    assert_eq!(rec.sources, prev.sources);
    assert_eq!(rec.gtid, prev.gtid);
    assert_eq!(w.end(), prev.end);
    assert_eq!(rec.truncated, last.pos - prev.end.pos);
    assert!(dir.join("manifold-bin.index").exists(), "index rebuilt");
    assert_eq!(list_files(&dir, "manifold-bin").unwrap(), w.files());
}

#[test]
fn new_sources_start_empty_and_unknown_sources_are_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let after = write_all(&dir, 1500, 10, &budget);
    let mut opts = options(&dir, 1500);
    opts.clusters = vec!["west".into(), "north".into()];
    let (_w, rec) = Writer::open(opts).unwrap();
    assert_eq!(rec.sources[0], after.last().unwrap().sources[1]);
    assert_eq!(
        rec.sources[1],
        SourceState {
            cluster: "north".into(),
            ..SourceState::default()
        }
    );
}

#[test]
fn locate_purge_and_retain() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let after = write_all(&dir, 1500, 40, &budget);
    let files = list_files(&dir, "manifold-bin").unwrap();
    // A consumer at global seq s continues in the newest file whose list is at or before s.
    for (i, a) in after.iter().enumerate() {
        let pos = a.gtid.clone();
        let (at, list) = locate_gtid(&dir, "manifold-bin", &pos).unwrap().unwrap();
        assert_eq!(at.pos, 4);
        let seq = i as u64 + 1;
        let list_seq = list.as_mariadb().unwrap().get(0).map_or(0, |g| g.seq);
        assert!(list_seq <= seq);
        // The next file's list is past it (or there is no next file).
        let n = files.iter().position(|f| f.name == at.file).unwrap();
        if let Some(next) = files.get(n + 1) {
            let h = files::read_header(&dir.join(&next.name)).unwrap().unwrap();
            assert!(h.gtid_list.as_mariadb().unwrap().get(0).unwrap().seq > seq);
        }
    }
    let empty = GtidState::default();
    assert_eq!(
        locate_gtid(&dir, "manifold-bin", &empty)
            .unwrap()
            .unwrap()
            .0
            .file,
        files[0].name
    );

    let (mut w, _) = Writer::open(options(&dir, 1500)).unwrap();
    let removed = w.purge_to(&files[2].name).unwrap();
    assert_eq!(removed, vec![files[0].name.clone(), files[1].name.clone()]);
    assert!(!dir.join(&files[0].name).exists());
    assert_eq!(list_files(&dir, "manifold-bin").unwrap()[0], files[2]);
    assert!(
        locate_gtid(&dir, "manifold-bin", &empty).unwrap().is_none(),
        "purged"
    );
    assert!(w.purge_to("manifold-bin.999999").is_err());
    // Retention by size keeps at least the current file.
    let removed = w.retain(1, std::time::Duration::ZERO).unwrap();
    assert_eq!(removed.len(), files.len() - 3);
    assert_eq!(w.files().len(), 1);
    assert_eq!(list_files(&dir, "manifold-bin").unwrap(), w.files());
    // Nothing to remove by age when the files are new.
    assert!(w
        .retain(0, std::time::Duration::from_secs(3600))
        .unwrap()
        .is_empty());
}

#[test]
fn purge_keeps_the_file_before_a_current_file_without_transactions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let after = write_all(&dir, 1500, 40, &budget);
    // Cut the newest file to its header: recovery needs the previous file's origins.
    let last = &after.last().unwrap().end.file;
    let h = files::read_header(&dir.join(last)).unwrap().unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(last))
        .unwrap()
        .set_len(h.end)
        .unwrap();
    let (mut w, rec) = Writer::open(options(&dir, 1500)).unwrap();
    w.purge_to(last).unwrap();
    assert_eq!(w.files().len(), 2);
    drop(w);
    let (_, again) = Writer::open(options(&dir, 1500)).unwrap();
    assert_eq!(again.sources, rec.sources);
    assert!(again.sources.iter().all(|s| !s.pos.is_empty()));
}

#[test]
fn reader_stops_at_the_limit_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let (mut w, _) = Writer::open(options(&dir, 1 << 20)).unwrap();
    w.flush().unwrap();
    let start = w.end();
    let mut r = Reader::open(&dir, &start.file, 4).unwrap();
    let mut buf = Vec::new();
    assert!(r.next_event(&mut buf, start.pos).unwrap());
    assert_eq!(buf[4], types::FORMAT_DESCRIPTION);
    assert!(r.next_event(&mut buf, start.pos).unwrap());
    assert!(!r.next_event(&mut buf, start.pos).unwrap());
    let a = w.append(&workload(&budget, 0), 1).unwrap();
    w.flush().unwrap();
    // A limit inside the transaction gives only the events that end before it.
    assert!(r.next_event(&mut buf, start.pos + 50).unwrap());
    assert_eq!(buf[4], types::GTID);
    assert!(!r.next_event(&mut buf, start.pos + 50).unwrap());
    let mut n = 1;
    while r.next_event(&mut buf, a.end.pos).unwrap() {
        n += 1;
    }
    assert_eq!(n, a.events);
    assert_eq!(r.pos(), a.end.pos);
}

#[test]
fn flush_binary_logs_starts_a_file_only_after_a_transaction() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let (mut w, _) = Writer::open(options(&dir, 1 << 20)).unwrap();
    assert!(!w.rotate(7).unwrap(), "an empty file is not rotated");
    w.append(&workload(&budget, 0), 1000).unwrap();
    assert!(w.rotate(7).unwrap());
    assert!(!w.rotate(7).unwrap(), "nor is the new, still empty one");
    assert_eq!(w.files().len(), 2);
    w.append(&workload(&budget, 1), 1001).unwrap();
    w.flush().unwrap();
    let (sources, gtid) = (w.sources().to_vec(), w.gtid_pos());
    drop(w);
    let (w, rec) = Writer::open(options(&dir, 1 << 20)).unwrap();
    assert_eq!((rec.sources, rec.gtid, rec.truncated), (sources, gtid, 0));
    assert_eq!(w.files().len(), 2);
}

#[test]
fn purge_and_retention_keep_the_files_readers_are_in() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    write_all(&dir, 1500, 40, &budget);
    let files = list_files(&dir, "manifold-bin").unwrap();
    assert!(files.len() >= 5, "{files:?}");
    let (mut w, _) = Writer::open(options(&dir, 1500)).unwrap();
    // A reader in the third file: purge stops before it, whatever it was asked.
    let removed = w
        .purge_to_keeping(&files[4].name, Some(&files[2].name))
        .unwrap();
    assert_eq!(removed, vec![files[0].name.clone(), files[1].name.clone()]);
    assert!(dir.join(&files[2].name).exists());
    // Retention by size too.
    let removed = w
        .retain_keeping(1, std::time::Duration::ZERO, Some(&files[2].name))
        .unwrap();
    assert!(removed.is_empty(), "{removed:?}");
    assert_eq!(w.files()[0], files[2]);
    // A reader further on lets the files before it go; a name not of this binlog limits
    // nothing.
    let removed = w
        .retain_keeping(1, std::time::Duration::ZERO, Some(&files[3].name))
        .unwrap();
    assert_eq!(removed, vec![files[2].name.clone()]);
    let removed = w
        .purge_to_keeping(&files[4].name, Some("other-bin.000001"))
        .unwrap();
    assert_eq!(removed, vec![files[3].name.clone()]);
}

/// A fresh server of `flavor` from the test kit with `text` (a decoder's output: SQL) run
/// through its command-line client, as a replica would apply the events.
pub(super) fn replay_into_a_fresh_server(
    flavor: manifold_testkit::Flavor,
    text: &str,
) -> manifold_testkit::Topology {
    use std::io::Write as _;
    use std::process::Stdio;
    let topology = manifold_testkit::Topology::start(manifold_testkit::TopologyConfig {
        replicas: 0,
        tls: false,
        flavor,
        ..manifold_testkit::TopologyConfig::default()
    })
    .unwrap();
    let mut client = topology
        .client_command(&topology.primary)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    client
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = client.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "replay failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    topology
}

/// Every cluster's rows are in these files: the directory (and its missing parents) 0700,
/// every file 0600 — files, index, sources checkpoint, each rewritten through a temporary
/// file, and a file started afresh over one a crash left with another mode.
#[test]
fn the_directory_and_every_file_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("made/binlog");
    let budget = budget(tmp.path());
    let opts = options(&dir, 1500);
    let (mut w, _) = Writer::open(opts.clone()).unwrap();
    for i in 0..20 {
        w.append(&workload(&budget, i), 1000 + i).unwrap();
        w.note_skipped(0, &source_gtid_of(0, 100 + i), 2000 + i);
        assert!(w.write_checkpoint().unwrap());
    }
    w.flush().unwrap();
    drop(w);
    assert!(list_files(&dir, "manifold-bin").unwrap().len() >= 3);
    assert!(dir.join("manifold-bin.sources").exists());
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&tmp.path().join("made")), 0o700);
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 5, "{seen} files");

    // A crash left the only file without a header, mode 0644: started afresh, it is 0600.
    let fresh = tmp.path().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    let only = fresh.join("manifold-bin.000001");
    std::fs::write(&only, b"\xfebin").unwrap();
    std::fs::set_permissions(&only, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (w, _) = Writer::open(options(&fresh, 1500)).unwrap();
    drop(w);
    assert_eq!(mode(&only), 0o600);
    assert_eq!(mode(&fresh.join("manifold-bin.index")), 0o600);
}

fn source_gtid_of(source: usize, seq: u64) -> TxnGtid {
    Gtid {
        domain: 0,
        server: 10 + source as u32,
        seq,
    }
    .into()
}
