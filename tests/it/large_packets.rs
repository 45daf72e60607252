//! Payloads of 16 MiB and more cross manifold split into several packets, both ways.

use crate::harness::{client, config, schema, start};

#[test]
fn payloads_over_16_mib_round_trip() {
    let db = schema("large");
    let server = start(&config());
    let mut c = client(server.mysql_addr(), Some(&db));
    c.query("CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB)")
        .unwrap();
    // 20 MiB statement: the client splits it, manifold must forward every piece.
    let value = "x".repeat(20 << 20);
    c.query(&format!("INSERT INTO blobs VALUES (1, '{value}')"))
        .unwrap();
    // 20 MiB row: the server splits it, the relay must follow the pieces.
    let r = c
        .query("SELECT b, LENGTH(b) FROM blobs WHERE id = 1")
        .unwrap();
    assert_eq!(r.rows[0][1].as_deref(), Some("20971520"));
    assert!(
        r.rows[0][0].as_deref() == Some(value.as_str()),
        "row content survived"
    );
    // Exactly 16 MiB - 1 of payload ends with an empty packet.
    let exact = (1 << 24) - 1 - "SELECT ''".len() - 1;
    let r = c.query(&format!("SELECT '{}'", "y".repeat(exact))).unwrap();
    assert_eq!(r.rows[0][0].as_ref().map(String::len), Some(exact));
}
