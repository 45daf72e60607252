//! With the global binlog on, write statements reach the primary stamped with manifold's
//! ordering clock (the comment MariaDB keeps in its binlog, where the source readers find it),
//! and reads go as the client sent them.

use manifold_binlog::stamp;

use crate::harness::{client, config, schema, start, topology};

/// The stamps of the primary's binlog events (current file) whose text mentions `marker`, in
/// binlog order.
fn stamped_events(marker: &str) -> Vec<(String, u64)> {
    let t = topology();
    let file = t
        .sql_rows(&t.primary, "SHOW MASTER STATUS")
        .expect("SHOW MASTER STATUS")
        .remove(0)
        .remove("File")
        .expect("a binlog file");
    t.sql_rows(&t.primary, &format!("SHOW BINLOG EVENTS IN '{file}'"))
        .expect("SHOW BINLOG EVENTS")
        .into_iter()
        .filter(|e| {
            matches!(e["Event_type"].as_str(), "Query" | "Annotate_rows")
                && e["Info"].contains(marker)
        })
        .map(|e| {
            let info = &e["Info"];
            // A DDL's query event may start with `use `db`; `.
            let text = info.find("/*manifold:hlc=").map_or("", |at| &info[at..]);
            let hlc =
                stamp::parse(text.as_bytes()).unwrap_or_else(|| panic!("not stamped: {info}"));
            (e["Event_type"].clone(), hlc)
        })
        .collect()
}

#[test]
fn writes_are_stamped_and_reads_are_not() {
    let db = schema("binlog_stamps");
    let mut cfg = config();
    cfg.mysql.binlog_stamps = true;
    let server = start(&cfg);
    let mut c = client(server.mysql_addr(), Some(&db));
    c.query("CREATE TABLE stamp_marker_t (id INT PRIMARY KEY, v INT)")
        .unwrap();
    c.query("INSERT INTO stamp_marker_t VALUES (1, 10)")
        .unwrap();
    c.query("UPDATE stamp_marker_t SET v = 11 WHERE id = 1")
        .unwrap();
    let events = stamped_events("stamp_marker_t");
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        ["Query", "Annotate_rows", "Annotate_rows"],
        "{events:?}"
    );
    assert!(
        events.windows(2).all(|w| w[0].1 < w[1].1),
        "stamps increase: {events:?}"
    );

    // A read goes as the client sent it (the server's general log shows what it received).
    let t = topology();
    t.sql(
        &t.primary,
        "SET GLOBAL log_output='TABLE'; SET GLOBAL general_log=ON;",
    )
    .unwrap();
    c.query("SELECT v FROM stamp_marker_t WHERE id = 1")
        .unwrap();
    c.query("DELETE FROM stamp_marker_t WHERE id = 1").unwrap();
    let seen = t
        .sql(
            &t.primary,
            "SET GLOBAL general_log=OFF; \
             SELECT argument FROM mysql.general_log WHERE argument LIKE '%FROM stamp_marker_t%';",
        )
        .unwrap();
    assert!(
        seen.lines()
            .any(|l| l == "SELECT v FROM stamp_marker_t WHERE id = 1"),
        "{seen}"
    );
    assert!(
        seen.lines().any(|l| l.starts_with("/*manifold:hlc=")
            && l.ends_with("*/ DELETE FROM stamp_marker_t WHERE id = 1")),
        "{seen}"
    );

    // Off, nothing is stamped.
    drop(c);
    drop(server);
    let server = start(&config());
    let mut c = client(server.mysql_addr(), Some(&db));
    c.query("INSERT INTO stamp_marker_t VALUES (2, 20)")
        .unwrap();
    let unstamped = stamped_or_not("VALUES (2, 20)");
    assert_eq!(unstamped, ["INSERT INTO stamp_marker_t VALUES (2, 20)"]);
}

/// The text of the primary's binlog events (current file) that mention `marker`.
fn stamped_or_not(marker: &str) -> Vec<String> {
    let t = topology();
    let file = t
        .sql_rows(&t.primary, "SHOW MASTER STATUS")
        .unwrap()
        .remove(0)
        .remove("File")
        .unwrap();
    t.sql_rows(&t.primary, &format!("SHOW BINLOG EVENTS IN '{file}'"))
        .unwrap()
        .into_iter()
        .map(|mut e| e.remove("Info").unwrap_or_default())
        .filter(|info| info.contains(marker))
        .collect()
}
