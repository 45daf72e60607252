//! The store in the MySQL dialect: the MariaDB scenarios (rotation, recovery at every cut,
//! locating, purging) over MySQL-shaped transactions, and what only MySQL files have (the
//! previous-GTIDs header, GTID events with exact lengths and a per-file logical clock,
//! origins where MySQL's group parser keeps them, the dialect check).

use super::*;
use crate::event::mysql::{self, MysqlGtidEvent};
use crate::gtid::{Dialect, GtidSet, MysqlGtid, TxnGtid, Uuid};
use crate::txn::MysqlCommit;

/// manifold's UUID in these tests.
pub(super) const MANIFOLD_UUID: &str = "6d616e69-666f-6c64-8000-00000000004d";
/// The sources' server UUIDs, by source index.
pub(super) const SOURCE_UUIDS: [&str; 2] = [
    "3e11fa47-71ca-11e1-9e33-c80aa9429562",
    "4f22ab58-82db-22f2-8f44-d91bb5530673",
];

pub(super) fn mysql_options(dir: &Path, max_file_size: u64) -> StoreOptions {
    StoreOptions {
        dialect: Dialect::MySql,
        server_uuid: MANIFOLD_UUID.parse().unwrap(),
        ..options(dir, max_file_size)
    }
}

/// A `WRITE_ROWS_V2` (MySQL's, type 30) inserting `values` into the one-INT-column table
/// `table_id`.
pub(super) fn write_rows_v2(table_id: u64, values: &[i32]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&table_id.to_le_bytes()[..6]);
    body.extend_from_slice(&1u16.to_le_bytes()); // STMT_END_F
    body.extend_from_slice(&2u16.to_le_bytes()); // extra data: none (its own 2 bytes)
    body.push(1); // column count
    body.push(1); // columns present
    for v in values {
        body.push(0); // null bitmap
        body.extend_from_slice(&v.to_le_bytes());
    }
    raw_event(types::WRITE_ROWS_V2, &body)
}

/// A MySQL source's transaction `gno` (its body: the events after its GTID event).
pub(super) fn mysql_txn(budget: &Budget, source: usize, gno: u64, events: &[Vec<u8>]) -> SourceTxn {
    let mut t = txn(budget, source, gno, mysql::GTID_FLAG_MAY_HAVE_SBR, events);
    t.gtid = TxnGtid::MySql(MysqlGtid {
        uuid: SOURCE_UUIDS[source].parse().unwrap(),
        gno,
    });
    let us = u64::from(t.timestamp) * 1_000_000 + gno;
    t.mysql = Some(MysqlCommit {
        immediate_commit_us: us,
        // Every other one replicated to the source from elsewhere, earlier, by an 8.0.
        original_commit_us: if gno.is_multiple_of(2) { us - 7 } else { us },
        immediate_server_version: 90704,
        original_server_version: if gno.is_multiple_of(2) { 80036 } else { 90704 },
    });
    t
}

/// The `i`th transaction of the MySQL workload: alternating sources; now and then a DDL, an
/// XA transaction's prepared group or an `XA COMMIT` (one-statement groups but for the
/// prepare); else `BEGIN`, the statement's rows-query event, rows into two tables per source
/// under the sources' own table ids, and an XID or a `COMMIT` query.
fn mysql_workload(budget: &Budget, i: u64) -> SourceTxn {
    let source = (i % 2) as usize;
    let gno = i / 2 + 1;
    let begin = || event::query(1, 1, b"test", b"BEGIN");
    if i % 7 == 3 {
        let ddl = event::query(1, 1, b"test", b"CREATE TABLE x (id INT)");
        return mysql_txn(budget, source, gno, &[ddl]);
    }
    let source_table = 100 + i % 3 + source as u64 * 1000;
    let table = if i.is_multiple_of(3) {
        &b"a"[..]
    } else {
        &b"b"[..]
    };
    let values: Vec<i32> = (0..(i % 5 + 1) as i32).map(|v| v + i as i32 * 10).collect();
    if i % 13 == 6 {
        let prepare = raw_event(
            types::XA_PREPARE,
            &[0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, b'1'],
        );
        let events = [
            event::query(1, 1, b"test", b"XA START X'31',X'',1"),
            table_map(source_table, b"test", table),
            write_rows_v2(source_table, &values),
            event::query(1, 1, b"test", b"XA END X'31',X'',1"),
            prepare,
        ];
        return mysql_txn(budget, source, gno, &events);
    }
    if i % 13 == 7 {
        let commit = event::query(1, 1, b"test", b"XA COMMIT X'31',X'',1");
        return mysql_txn(budget, source, gno, &[commit]);
    }
    let mut events = vec![
        begin(),
        mysql::rows_query(1, 1, b"/*manifold:hlc=5*/ insert into t values (1)"),
        table_map(source_table, b"test", table),
        write_rows_v2(source_table, &values),
    ];
    if i % 4 == 1 {
        events.push(event::query(1, 1, b"test", b"COMMIT"));
    } else {
        events.push(event::xid(1, 1, i));
    }
    mysql_txn(budget, source, gno, &events)
}

fn mysql_write_all(dir: &Path, max: u64, n: u64, budget: &Budget) -> Vec<After> {
    write_run(mysql_options(dir, max), n, &|i| mysql_workload(budget, i))
}

/// The origin of a transaction's events (after its GTID event), where the writer put it.
fn origin_of(txn: &[Vec<u8>]) -> Origin {
    let first = &txn[0];
    assert_eq!(first[4], types::QUERY, "every workload group has a query");
    let text = if mysql::opens_group(first) {
        assert_eq!(txn[1][4], types::ROWS_QUERY, "the origin follows BEGIN");
        event::annotate_text(&txn[1])
    } else {
        mysql::trailing_comment(event::query_text(first).unwrap()).expect("a trailing comment")
    };
    Origin::parse(text).expect("an origin record")
}

#[test]
fn mysql_files_rotate_with_previous_gtids_exact_lengths_and_origins() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("binlog");
    let budget = budget(tmp.path());
    let after = mysql_write_all(&dir, 1500, 40, &budget);
    let files = list_files(&dir, "manifold-bin").unwrap();
    assert!(files.len() >= 4, "{files:?}");
    assert_eq!(
        file_dialect(&dir, "manifold-bin").unwrap(),
        Some(Dialect::MySql)
    );
    let manifold: Uuid = MANIFOLD_UUID.parse().unwrap();

    let mut gno = 0;
    let mut before = GtidSet::default();
    for (n, file) in files.iter().enumerate() {
        let events = events_of(&dir, &file.name);
        let mut at = 4u64;
        for e in &events {
            let h = Header::parse(e).unwrap();
            assert!(files::verify_file_checksum(&mut e.clone()), "checksum");
            at += e.len() as u64;
            assert_eq!(u64::from(h.log_pos), at);
            assert_eq!(h.server_id, SERVER_ID);
        }
        assert_eq!(at, file.size);
        assert!(mysql::is_mysql_format_description(&events[0]));
        assert_eq!(events[0].len(), 123);
        let in_use = Header::parse(&events[0]).unwrap().flags & event::flags::BINLOG_IN_USE;
        assert_eq!(in_use != 0, n + 1 == files.len());
        assert_eq!(events[1][4], types::PREVIOUS_GTIDS);
        assert_eq!(mysql::parse_previous_gtids(&events[1]).unwrap(), before);

        // Each transaction: from its GTID event to the next one (or the rotate, or the end).
        let starts: Vec<usize> = (0..events.len())
            .filter(|&i| events[i][4] == types::MYSQL_GTID)
            .collect();
        assert!(!starts.is_empty());
        for (k, &s) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or_else(|| {
                events.len() - usize::from(events.last().unwrap()[4] == types::ROTATE)
            });
            let g = mysql::parse_mysql_gtid(&events[s]).unwrap();
            gno += 1;
            assert_eq!(
                g.gtid,
                MysqlGtid {
                    uuid: manifold,
                    gno
                }
            );
            before.add(g.gtid);
            let k = k as i64 + 1;
            assert_eq!((g.last_committed, g.sequence_number), (k - 1, k));
            let bytes: usize = events[s..end].iter().map(Vec::len).sum();
            assert_eq!(g.transaction_length, bytes as u64, "transaction {gno}");
            assert_eq!(g.flags, mysql::GTID_FLAG_MAY_HAVE_SBR);
            assert_eq!(
                g.commit.immediate_server_version,
                mysql::MYSQL_SERVER_VERSION_ID
            );
            // The source's commit times and original server version are kept.
            let source_gno = (gno - 1) / 2 + 1;
            let origin_version = if source_gno.is_multiple_of(2) {
                80036
            } else {
                90704
            };
            assert_eq!(g.commit.original_server_version, origin_version);
            assert_eq!(
                g.commit.immediate_commit_us,
                u64::from(1_700_000_000 + source_gno as u32) * 1_000_000 + source_gno
            );
            let origin = origin_of(&events[s + 1..end]);
            assert_eq!(origin.key, 1000 + gno - 1);
            assert_eq!(
                origin.sources.is_some(),
                k == 1,
                "sources in the first only"
            );
            // A replica holds one rows-query event until rows follow it: never two in a row
            // before rows, and the statement's own text stays after the origin's line.
            let mut waiting_rows = false;
            for e in &events[s + 1..end] {
                match e[4] {
                    types::ROWS_QUERY => {
                        assert!(
                            !waiting_rows,
                            "two rows-query events before rows, transaction {gno}"
                        );
                        waiting_rows = true;
                    }
                    t if types::is_rows(t) => waiting_rows = false,
                    _ => {}
                }
            }
            if mysql::opens_group(&events[s + 1]) && events[s + 2][4] == types::ROWS_QUERY {
                let text = event::annotate_text(&events[s + 2]);
                if let Some(line) = text.iter().position(|&b| b == b'\n') {
                    assert_eq!(
                        &text[line + 1..],
                        b"/*manifold:hlc=5*/ insert into t values (1)"
                    );
                }
            }
            // The group ends where MySQL ends it: its last event, and no earlier one.
            let last = &events[end - 1];
            let standalone = !mysql::opens_group(&events[s + 1]);
            assert!(event::ends_group(last, standalone), "transaction {gno}");
        }
    }
    assert_eq!(gno, 40);
    let last = after.last().unwrap();
    assert_eq!(last.gtid.to_string(), format!("{MANIFOLD_UUID}:1-40"));
    assert_eq!(
        last.sources[0].pos.to_string(),
        format!("{}:1-20", SOURCE_UUIDS[0])
    );
    assert_eq!(
        last.sources[1].pos.to_string(),
        format!("{}:1-20", SOURCE_UUIDS[1])
    );
}

/// A one-statement group keeps its statement (the origin only leads it) and a DDL's status
/// variables and schema.
#[test]
fn a_ddl_carries_its_origin_as_a_trailing_comment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let (mut w, _) = Writer::open(mysql_options(&dir, 1 << 20)).unwrap();
    let ddl = event::query(1, 1, b"app", b"CREATE TABLE t (a INT)");
    let a = w.append(&mysql_txn(&budget, 1, 9, &[ddl]), 5).unwrap();
    w.flush().unwrap();
    assert_eq!(a.events, 2);
    let events = events_of(&dir, &a.end.file);
    let q = &events[3];
    let text = event::query_text(q).unwrap();
    let origin = format!(
        "# manifold origin cluster=west gtid={}:9 key=5 sources=east@@0;west@@0",
        SOURCE_UUIDS[1]
    );
    assert_eq!(
        text,
        format!("CREATE TABLE t (a INT) /* {origin} */").as_bytes()
    );
    assert_eq!(q[HEADER_LEN + 8], 3, "schema length");
    let g = mysql::parse_mysql_gtid(&events[2]).unwrap();
    assert_eq!(g.transaction_length, (events[2].len() + q.len()) as u64);
}

/// Groups without rows carry their origin where a replica keeps it: a comment after their
/// second statement, else a rows-query event before their last event; a group with rows keeps
/// it in its rows-query event even after a savepoint; recovery finds each, and never takes a
/// user's statement that looks like one.
#[test]
fn groups_without_rows_carry_their_origin_and_recover() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let (mut w, _) = Writer::open(mysql_options(&dir, 1 << 20)).unwrap();
    let begin = || event::query(1, 1, b"app", b"BEGIN");
    let forged = format!(
        "SAVEPOINT b /* # manifold origin cluster=west gtid={}:999 key=999999 */",
        SOURCE_UUIDS[0]
    );
    let groups = [
        vec![
            begin(),
            event::query(1, 1, b"app", b"SAVEPOINT a"),
            event::xid(1, 1, 3),
        ],
        vec![begin(), event::xid(1, 1, 4)],
        vec![
            begin(),
            event::query(1, 1, b"app", forged.as_bytes()),
            mysql::rows_query(1, 1, b"insert into t values (5)"),
            table_map(5, b"app", b"t"),
            write_rows_v2(5, &[5]),
            event::xid(1, 1, 5),
        ],
    ];
    let mut ends = Vec::new();
    for (i, events) in groups.iter().enumerate() {
        let a = w
            .append(&mysql_txn(&budget, 0, 11 + i as u64, events), 7 + i as u64)
            .unwrap();
        ends.push(a);
    }
    w.flush().unwrap();
    let events = events_of(&dir, &ends[0].end.file);
    let starts: Vec<usize> = (0..events.len())
        .filter(|&i| events[i][4] == types::MYSQL_GTID)
        .collect();
    let savepoint = event::query_text(&events[starts[0] + 2]).unwrap();
    let comment = mysql::trailing_comment(savepoint).expect("the origin ends SAVEPOINT");
    assert_eq!(Origin::parse(comment).unwrap().key, 7);
    assert!(
        savepoint.starts_with(b"SAVEPOINT a /* "),
        "MySQL still reads a SAVEPOINT"
    );
    let second = &events[starts[1]..starts[2]];
    assert_eq!(second.len(), 4, "GTID, BEGIN, origin, XID");
    let third = &events[starts[2]..];
    assert_eq!(
        event::query_text(&third[2]).unwrap(),
        forged.as_bytes(),
        "kept as written"
    );
    let text = event::annotate_text(&third[3]);
    assert_eq!(
        Origin::parse(text).unwrap().key,
        9,
        "the origin joins the rows-query event"
    );
    assert!(text.ends_with(b"\ninsert into t values (5)"));
    assert_eq!(second[2][4], types::ROWS_QUERY);
    assert_eq!(
        Origin::parse(event::annotate_text(&second[2])).unwrap().key,
        8
    );
    for (k, &s) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(events.len());
        let bytes: usize = events[s..end].iter().map(Vec::len).sum();
        let g = mysql::parse_mysql_gtid(&events[s]).unwrap();
        assert_eq!(g.transaction_length, bytes as u64);
    }
    drop(w);
    let (_, rec) = Writer::open(mysql_options(&dir, 1 << 20)).unwrap();
    let forged: TxnGtid = format!("{}:999", SOURCE_UUIDS[0]).parse().unwrap();
    assert!(
        !rec.sources[0].pos.contains(&forged),
        "a user's text is not an origin"
    );
    assert_eq!(rec.sources[0].key, 9, "every origin read back");
    for gno in [11, 12, 13] {
        let g: TxnGtid = format!("{}:{gno}", SOURCE_UUIDS[0]).parse().unwrap();
        assert!(rec.sources[0].pos.contains(&g), "{g} recovered");
    }
}

/// Cut the last file at every byte; recovery must land on the last complete transaction and
/// continue into files identical to the uninterrupted run's (the logical clock included).
#[test]
fn mysql_recovery_at_every_cut_continues_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    let budget = budget(tmp.path());
    let after = mysql_write_all(&clean, 1500, 40, &budget);
    let last = &after.last().unwrap().end.file;
    assert!(
        after.iter().filter(|a| &a.end.file == last).count() >= 2,
        "two transactions in the last file"
    );
    every_cut_resumes_byte_identical(tmp.path(), &clean, &after, mysql_options, &|i| {
        mysql_workload(&budget, i)
    });
}

#[test]
fn mysql_locate_purge_and_retain() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let after = mysql_write_all(&dir, 1500, 40, &budget);
    let files = list_files(&dir, "manifold-bin").unwrap();
    let manifold: Uuid = MANIFOLD_UUID.parse().unwrap();
    let last_gno = |s: &GtidState| s.as_mysql().unwrap().last_gno(&manifold).unwrap_or(0);
    for (i, a) in after.iter().enumerate() {
        // A client's set holds the global one and transactions of other servers too.
        let mut pos = a.gtid.as_mysql().unwrap().clone();
        pos.add_interval(SOURCE_UUIDS[0].parse().unwrap(), 1, 3);
        let (at, list) = locate_gtid(&dir, "manifold-bin", &GtidState::MySql(pos))
            .unwrap()
            .unwrap();
        assert_eq!(at.pos, 4);
        let gno = i as u64 + 1;
        assert!(last_gno(&list) <= gno);
        let n = files.iter().position(|f| f.name == at.file).unwrap();
        if let Some(next) = files.get(n + 1) {
            let h = files::read_header(&dir.join(&next.name)).unwrap().unwrap();
            assert_eq!(h.dialect, Dialect::MySql);
            assert!(last_gno(&h.gtid_list) > gno);
        }
    }
    // A set missing a transaction (2, in the first file) continues in the first file.
    let mut holed = GtidSet::default();
    holed.add_interval(manifold, 1, 1);
    holed.add_interval(manifold, 3, 40);
    let (at, _) = locate_gtid(&dir, "manifold-bin", &GtidState::MySql(holed))
        .unwrap()
        .unwrap();
    assert_eq!(at.file, files[0].name);
    let empty = GtidState::MySql(GtidSet::default());
    assert_eq!(
        locate_gtid(&dir, "manifold-bin", &empty)
            .unwrap()
            .unwrap()
            .0
            .file,
        files[0].name
    );

    let (mut w, _) = Writer::open(mysql_options(&dir, 1500)).unwrap();
    let removed = w.purge_to(&files[2].name).unwrap();
    assert_eq!(removed, vec![files[0].name.clone(), files[1].name.clone()]);
    assert!(
        locate_gtid(&dir, "manifold-bin", &empty).unwrap().is_none(),
        "purged"
    );
    let removed = w.retain(1, std::time::Duration::ZERO).unwrap();
    assert_eq!(removed.len(), files.len() - 3);
    assert_eq!(list_files(&dir, "manifold-bin").unwrap(), w.files());
    drop(w);
    // Recovery after the purge: the sources' sets come from the newest file's first origin.
    let (_, rec) = Writer::open(mysql_options(&dir, 1500)).unwrap();
    assert_eq!(rec.sources, after.last().unwrap().sources);
    assert_eq!(rec.gtid, after.last().unwrap().gtid);
}

#[test]
fn a_directory_of_the_other_dialect_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let budget = budget(tmp.path());
    let mariadb = tmp.path().join("mariadb");
    write_all(&mariadb, 1500, 3, &budget);
    let err = Writer::open(mysql_options(&mariadb, 1500)).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Dialect {
                found: Dialect::MariaDb,
                want: Dialect::MySql,
                ..
            }
        ),
        "{err}"
    );
    let mysql = tmp.path().join("mysql");
    mysql_write_all(&mysql, 1500, 3, &budget);
    let err = Writer::open(options(&mysql, 1500)).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Dialect {
                found: Dialect::MySql,
                want: Dialect::MariaDb,
                ..
            }
        ),
        "{err}"
    );
    // Refused without a change: each still opens in its own dialect, whole.
    assert_eq!(
        Writer::open(mysql_options(&mysql, 1500))
            .unwrap()
            .1
            .truncated,
        0
    );
    assert_eq!(
        file_dialect(&mariadb, "manifold-bin").unwrap(),
        Some(Dialect::MariaDb)
    );
}

/// A transaction's origin and sources survive a restart when the file holds only its header
/// (the previous file's first origin is read), with MySQL sets as positions.
#[test]
fn mysql_flush_binary_logs_and_recovery_from_the_previous_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let (mut w, _) = Writer::open(mysql_options(&dir, 1 << 20)).unwrap();
    w.set_start(1, &format!("{}:1-100", SOURCE_UUIDS[1]).parse().unwrap());
    w.append(&mysql_workload(&budget, 0), 1000).unwrap();
    w.append(&mysql_workload(&budget, 1), 1001).unwrap();
    assert!(w.rotate(7).unwrap());
    w.flush().unwrap();
    let (sources, gtid) = (w.sources().to_vec(), w.gtid_pos());
    assert_eq!(
        sources[1].pos.to_string(),
        format!("{}:1-100", SOURCE_UUIDS[1])
    );
    drop(w);
    let (mut w, rec) = Writer::open(mysql_options(&dir, 1 << 20)).unwrap();
    assert_eq!(
        (&rec.sources, &rec.gtid, rec.truncated),
        (&sources, &gtid, 0)
    );
    // The new file's first transaction records every source's set.
    let a = w.append(&mysql_workload(&budget, 2), 1002).unwrap();
    w.flush().unwrap();
    let events = events_of(&dir, &a.end.file);
    assert_eq!(
        mysql::parse_previous_gtids(&events[1]).unwrap().to_string(),
        format!("{MANIFOLD_UUID}:1-2")
    );
    let g: MysqlGtidEvent = mysql::parse_mysql_gtid(&events[2]).unwrap();
    assert_eq!((g.gtid.gno, g.last_committed, g.sequence_number), (3, 0, 1));
    let origin = origin_of(&events[3..]);
    assert_eq!(origin.sources.unwrap(), sources);
}
