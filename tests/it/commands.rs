//! Every command a client can send, through manifold and directly against MariaDB: the answers
//! must have the same packets (sequence ids and kinds), and the session must go on working.
//! The oracle is the server's own answer, read up to the answer of a marker query sent right
//! behind each command, not manifold's notion of where an answer ends.

use manifold_tests::Client;

use crate::harness::{config, schema, start, topology, PASSWORD, USER};

/// (sequence id, first byte) of each packet: what identifies an answer's shape.
type Shape = Vec<(u8, Option<u8>)>;

fn shape(packets: &[(u8, Vec<u8>)]) -> Shape {
    packets
        .iter()
        .map(|(seq, p)| (*seq, p.first().copied()))
        .collect()
}

fn stmt_execute(id: u32, cursor: bool, param: i32) -> Vec<u8> {
    let mut p = vec![0x17];
    p.extend_from_slice(&id.to_le_bytes());
    p.push(u8::from(cursor));
    p.extend_from_slice(&1u32.to_le_bytes());
    p.push(0); // NULL bitmap for one parameter
    p.push(1); // types follow
    p.extend_from_slice(&[0x03, 0x00]); // MYSQL_TYPE_LONG, signed
    p.extend_from_slice(&param.to_le_bytes());
    p
}

/// Runs the command script on one connection and returns each step's answer shape.
fn script(c: &mut Client, db: &str) -> Vec<(&'static str, Shape)> {
    let mut steps = Vec::new();
    let mut step = |c: &mut Client, name: &'static str, payload: &[u8]| {
        let answer = c
            .exchange(payload)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        steps.push((name, shape(&answer)));
        answer
    };
    step(c, "COM_FIELD_LIST", b"\x04t\x00");
    step(c, "COM_STATISTICS", b"\x09");
    step(c, "COM_SET_OPTION off", b"\x1b\x01\x00");
    step(c, "multi-statement refused", b"\x03SELECT 1; SELECT 2");
    step(c, "COM_SET_OPTION on", b"\x1b\x00\x00");
    step(c, "multi-statement", b"\x03SELECT 1; SELECT 2");
    let prepared = step(c, "COM_STMT_PREPARE", b"\x16SELECT a, b FROM t WHERE a > ?");
    let id = u32::from_le_bytes(prepared[0].1[1..5].try_into().unwrap());
    let mut long = vec![0x18];
    long.extend_from_slice(&id.to_le_bytes());
    long.extend_from_slice(&0u16.to_le_bytes());
    long.extend_from_slice(b"ignored");
    step(c, "COM_STMT_SEND_LONG_DATA", &long);
    let mut reset = vec![0x1a];
    reset.extend_from_slice(&id.to_le_bytes());
    step(c, "COM_STMT_RESET", &reset);
    step(c, "COM_STMT_EXECUTE", &stmt_execute(id, false, 1));
    step(
        c,
        "COM_STMT_EXECUTE with cursor",
        &stmt_execute(id, true, 0),
    );
    let mut fetch = vec![0x1c];
    fetch.extend_from_slice(&id.to_le_bytes());
    fetch.extend_from_slice(&2u32.to_le_bytes());
    step(c, "COM_STMT_FETCH", &fetch);
    step(c, "COM_STMT_FETCH rest", &fetch);
    let mut close = vec![0x19];
    close.extend_from_slice(&id.to_le_bytes());
    step(c, "COM_STMT_CLOSE", &close);
    step(
        c,
        "COM_STMT_EXECUTE after close",
        &stmt_execute(id, false, 1),
    );
    step(c, "COM_PING", b"\x0e");
    step(c, "COM_RESET_CONNECTION", b"\x1f");
    let mut init = vec![0x02];
    init.extend_from_slice(db.as_bytes());
    step(c, "COM_INIT_DB", &init);
    step(c, "COM_INIT_DB unknown", b"\x02no_such_schema_here");
    step(c, "COM_QUERY error", b"\x03SELEC 1");
    step(c, "COM_QUERY after all", b"\x03SELECT COUNT(*) FROM t");
    steps
}

#[test]
fn every_command_answers_as_mariadb_does() {
    let db = schema("commands");
    let t = topology();
    t.sql(&t.primary, &format!("CREATE TABLE {db}.t (a INT PRIMARY KEY, b TEXT); INSERT INTO {db}.t VALUES (1,'x'),(2,'y'),(3,'z'),(4,'w')"))
        .unwrap();
    let server = start(&config());
    let mut direct = Client::connect(t.primary.addr(), USER, PASSWORD, Some(&db)).unwrap();
    let mut via = Client::connect(server.mysql_addr(), USER, PASSWORD, Some(&db)).unwrap();
    let want = script(&mut direct, &db);
    let got = script(&mut via, &db);
    for ((name, w), (_, g)) in want.iter().zip(&got) {
        assert_eq!(
            g, w,
            "{name}: answer through manifold differs from MariaDB's"
        );
    }
    // Sanity: the oracle saw real answers (not everything empty).
    assert!(
        want.iter().filter(|(_, s)| !s.is_empty()).count() >= 15,
        "{want:?}"
    );
}
