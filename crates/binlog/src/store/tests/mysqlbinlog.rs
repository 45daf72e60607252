//! MySQL's own tools read the MySQL dialect's files: MySQL 9.7's `mysqlbinlog
//! --verify-binlog-checksum` decodes them, and its output replayed into a real MySQL server
//! gives the rows and manifold's GTIDs.

use manifold_testkit::{Flavor, MysqlInstall};

use super::mysql::{mysql_options, mysql_txn, write_rows_v2, MANIFOLD_UUID, SOURCE_UUIDS};
use super::*;
use crate::event::mysql;

/// Two sources whose table `mfx.t` has a different table id on each: a DDL transaction from
/// each, then inserts, some ended by XID and some by `COMMIT`, half with the source's own
/// rows-query event.
fn write_files(dir: &Path, budget: &Budget) -> Vec<FileInfo> {
    let (mut w, _) = Writer::open(mysql_options(dir, 1200)).unwrap();
    let ddl = [
        event::query(1, 1, b"", b"CREATE DATABASE mfx"),
        event::query(1, 1, b"mfx", b"CREATE TABLE t (id INT)"),
    ];
    let mut key = 1;
    for (gno, q) in ddl.iter().enumerate() {
        let t = mysql_txn(budget, 0, gno as u64 + 1, std::slice::from_ref(q));
        w.append(&t, key).unwrap();
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
        let mut events = vec![event::query(1, 1, b"mfx", b"BEGIN")];
        if source == 1 {
            let statement = format!("insert into t values ({}),({})", values[0], values[1]);
            events.push(mysql::rows_query(1, 1, statement.as_bytes()));
        }
        events.extend([
            table_map(source_table, b"mfx", b"t"),
            write_rows_v2(source_table, &values),
            end,
        ]);
        w.append(&mysql_txn(budget, source, i + 10, &events), key)
            .unwrap();
        key += 1;
    }
    w.flush().unwrap();
    w.files()
}

/// MySQL's `mysqlbinlog` on one file.
fn mysqlbinlog(install: &MysqlInstall, path: &Path) -> String {
    let out = install
        .command("usr/bin/mysqlbinlog")
        .arg("--verify-binlog-checksum")
        .arg("-vv")
        .arg(path)
        .output()
        .expect("MySQL's mysqlbinlog runs");
    assert!(
        out.status.success(),
        "mysqlbinlog failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn mysqlbinlog_reads_the_mysql_files_and_its_replay_gives_the_rows() {
    let install = MysqlInstall::find().expect("MySQL is unpacked (scripts/setup-mysql)");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("binlog");
    let budget = Budget::new(1 << 20, tmp.path().join("spill"));
    let files = write_files(&dir, &budget);
    assert!(files.len() >= 3, "rotated: {files:?}");

    let text: String = files
        .iter()
        .map(|f| mysqlbinlog(&install, &dir.join(&f.name)))
        .collect();
    for gno in 1..=22 {
        assert!(
            text.contains(&format!("SET @@SESSION.GTID_NEXT= '{MANIFOLD_UUID}:{gno}'")),
            "GTID {gno} in\n{text}"
        );
    }
    let a = SOURCE_UUIDS[0];
    assert!(
        text.contains(&format!(
            "# # manifold origin cluster=east gtid={a}:10 key=3"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "CREATE TABLE t (id INT) /* # manifold origin cluster=east gtid={a}:2 key=2 */"
        )),
        "{text}"
    );
    assert!(text.contains("# insert into t values (38),(39)"), "{text}");
    assert!(text.contains("### INSERT INTO `mfx`.`t`"), "{text}");
    assert!(text.contains("###   @1=39"), "{text}");
    assert!(
        !text.contains("table id 50") && !text.contains("table id 57"),
        "{text}"
    );

    // Replayed into a fresh MySQL server, as a replica would apply them.
    let topology = replay_into_a_fresh_server(Flavor::MySql, &text);
    let got = topology
        .sql_value(&topology.primary, "SELECT COUNT(*), SUM(id) FROM mfx.t")
        .unwrap();
    assert_eq!(got, "40\t780");
    let executed = topology
        .sql_value(&topology.primary, "SELECT @@gtid_executed")
        .unwrap()
        .replace("\\n", "");
    assert!(
        executed.contains(&format!("{MANIFOLD_UUID}:1-22")),
        "{executed}"
    );
}
