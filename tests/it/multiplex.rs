//! Pin reasons are counted per reason, once per time a session becomes pinned for it.

use manifold_frontend_mysql::PinReason;

use crate::harness::{client, config, schema, start};

#[test]
fn pins_are_counted_per_reason_and_released() {
    let db = schema("mux_pins");
    let mut cfg = config();
    cfg.engine.threads = 1;
    let server = start(&cfg);
    let pins = |r| server.shared.pins(r);
    let mut c = client(server.mysql_addr(), Some(&db));
    c.query("SELECT 1").unwrap();
    c.query("SET SESSION sql_mode = 'ANSI'").unwrap();
    assert_eq!(pins(PinReason::Transaction), 0);
    assert_eq!(
        pins(PinReason::UntrackedState),
        0,
        "SET of a variable is tracked"
    );

    c.query("BEGIN").unwrap();
    let in_tx = c.scalar("SELECT @@pseudo_thread_id").unwrap();
    c.query("SELECT 1").unwrap();
    assert_eq!(c.scalar("SELECT @@pseudo_thread_id").unwrap(), in_tx);
    c.query("COMMIT").unwrap();
    c.query("BEGIN").unwrap();
    c.query("COMMIT").unwrap();
    assert_eq!(pins(PinReason::Transaction), 2);

    c.query("CREATE TEMPORARY TABLE tmp (x INT)").unwrap();
    c.query("INSERT INTO tmp VALUES (1)").unwrap();
    assert_eq!(
        c.scalar("SELECT COUNT(*) FROM tmp").unwrap().as_deref(),
        Some("1")
    );
    assert_eq!(pins(PinReason::TemporaryTable), 1);
    c.query("DROP TEMPORARY TABLE tmp").unwrap();

    c.query("SELECT GET_LOCK('it-mux', 1)").unwrap();
    c.query("SELECT RELEASE_LOCK('it-mux')").unwrap();
    assert_eq!(pins(PinReason::NamedLock), 1);

    c.query("SET @v = 7").unwrap();
    assert_eq!(c.scalar("SELECT @v").unwrap().as_deref(), Some("7"));
    assert_eq!(
        pins(PinReason::UserVariable),
        0,
        "user variables are read back and carried, not pinned"
    );
    assert_eq!(pins(PinReason::UntrackedState), 0);
    drop(c);
    drop(server);
}

/// Pipelining across sessions: one backend connection, 16 sessions at once. Statements of
/// sessions waiting for it ride behind the holder's, and each session reads back exactly its
/// own answers; sessions in another state (their own `sql_mode`) never ride behind one that
/// is not in theirs.
#[test]
fn pipelined_statements_get_their_own_answers() {
    let db = schema("mux_pipeline");
    let mut cfg = config();
    cfg.engine.threads = 1;
    cfg.pool.min_idle = 1;
    cfg.pool.max_size = 1;
    cfg.pool.pipeline_depth = 8;
    let server = start(&cfg);
    let addr = server.mysql_addr();
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut c = client(addr, Some(&db));
                let mode = if t % 4 == 0 { "ANSI_QUOTES" } else { "" };
                c.query(&format!("SET SESSION sql_mode = '{mode}'"))
                    .unwrap();
                for k in 0..100 {
                    let got = c.scalar(&format!("SELECT CONCAT({t}, '-', {k}, '-', @@sql_mode)"));
                    assert_eq!(
                        got.unwrap().as_deref(),
                        Some(format!("{t}-{k}-{mode}").as_str())
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("session thread");
    }
    assert!(
        server.shared.pipelined() > 0,
        "16 sessions on one connection: some statements must have ridden behind others"
    );
    drop(server);
}
