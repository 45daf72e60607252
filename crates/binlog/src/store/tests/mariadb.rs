//! MariaDB's own tools read the files: `mariadb-binlog --verify-binlog-checksum` decodes
//! them, and its output replayed into a real server gives the rows.

use std::process::Command;

use manifold_testkit::Flavor;

use super::*;

/// Two sources whose table `mfx.t` has a different table id on each: a DDL transaction from
/// each, then inserts, some ended by XID and some by `COMMIT`.
fn write_files(dir: &Path, budget: &Budget) -> Vec<FileInfo> {
    let mut opts = options(dir, 1200);
    // A domain of its own: the replay server's strict mode would refuse manifold's sequence
    // numbers in the server's domain 0.
    opts.domain_id = 9;
    let (mut w, _) = Writer::open(opts).unwrap();
    let ddl = [
        event::query(1, 1, b"", b"CREATE DATABASE mfx"),
        event::query(1, 1, b"mfx", b"CREATE TABLE t (id INT)"),
    ];
    let flags = gtid_flags::STANDALONE | gtid_flags::DDL;
    let mut key = 1;
    for (seq, q) in ddl.iter().enumerate() {
        w.append(
            &txn(budget, 0, seq as u64 + 1, flags, std::slice::from_ref(q)),
            key,
        )
        .unwrap();
        key += 1;
    }
    for i in 0..20u64 {
        let source = (i % 2) as usize;
        let source_table = 50 + source as u64 * 7;
        let values = [i as i32 * 2, i as i32 * 2 + 1];
        let end = if i % 3 == 0 {
            event::query(1, 1, b"mfx", b"COMMIT")
        } else {
            event::xid(1, 1, 1000 + i)
        };
        // Half of them with the source's own annotate: mariadb-binlog shows the last
        // annotate before a table map, so the origin shows where the source wrote none.
        let mut events = Vec::new();
        if source == 1 {
            let statement = format!("insert into t values ({}),({})", values[0], values[1]);
            events.push(event::annotate(1, 1, statement.as_bytes()));
        }
        events.extend([
            table_map(source_table, b"mfx", b"t"),
            write_rows(source_table, &values),
            end,
        ]);
        let seq = i + 10;
        w.append(
            &txn(budget, source, seq, gtid_flags::TRANSACTIONAL, &events),
            key,
        )
        .unwrap();
        key += 1;
    }
    w.flush().unwrap();
    w.files()
}

/// `mariadb-binlog` on one file. (Given several files at once, 10.11's GTID validation
/// refuses any set whose first file has an empty GTID list.)
fn mariadb_binlog(path: &Path) -> String {
    let out = Command::new("mariadb-binlog")
        .arg("--verify-binlog-checksum")
        .arg("-vv")
        .arg(path)
        .output()
        .expect("mariadb-binlog is installed");
    assert!(
        out.status.success(),
        "mariadb-binlog failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn mariadb_binlog_reads_the_files_and_its_replay_gives_the_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("binlog");
    let budget = Budget::new(1 << 20, tmp.path().join("spill"));
    let files = write_files(&dir, &budget);
    assert!(files.len() >= 3, "rotated: {files:?}");
    let names: Vec<String> = files.into_iter().map(|f| f.name).collect();

    let text: String = names.iter().map(|n| mariadb_binlog(&dir.join(n))).collect();
    for seq in 1..=22 {
        assert!(
            text.contains(&format!("GTID 9-{SERVER_ID}-{seq} ")),
            "GTID {seq} in\n{text}"
        );
    }
    assert!(
        text.contains("#Q> # manifold origin cluster=east gtid=0-10-10 key=3"),
        "{text}"
    );
    assert!(
        text.contains("#Q> insert into t values (38),(39)"),
        "{text}"
    );
    assert!(text.contains("### INSERT INTO `mfx`.`t`"), "{text}");
    assert!(text.contains("###   @1=39"), "{text}");
    assert!(text.contains("CREATE TABLE t (id INT)"), "{text}");
    assert!(
        !text.contains("table id 50") && !text.contains("table id 57"),
        "{text}"
    );

    // Replayed into a fresh server, as a replica would apply them.
    let topology = replay_into_a_fresh_server(Flavor::MariaDb, &text);
    let got = topology
        .sql_value(&topology.primary, "SELECT COUNT(*), SUM(id) FROM mfx.t")
        .unwrap();
    assert_eq!(got, "40\t780");
    let pos = topology
        .sql_value(&topology.primary, "SELECT @@gtid_binlog_pos")
        .unwrap();
    assert!(pos.contains(&format!("9-{SERVER_ID}-22")), "{pos}");
}
