//! Transaction replay (`routing.transaction_replay`), on one topology: the primary killed
//! and restarted under open transactions (one replayed unnoticed, one whose read changed
//! meanwhile, one caught in its `COMMIT`), then stopped and replaced by a replica promoted by
//! hand under another open transaction; one that changed its session and one killed on the
//! server, not replayed.

use super::*;

use std::sync::atomic::AtomicU64;

fn count(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// The replay counters, for failure messages.
fn counters(m: &manifold_frontend_mysql::FrontendMetrics) -> String {
    let declined: Vec<String> = manifold_frontend_mysql::REPLAY_DECLINES
        .iter()
        .map(|&r| format!("{}={}", r.name(), m.replay_declined(r)))
        .collect();
    format!(
        "replays={} mismatches={} commit_unknown={} declined: {}",
        count(&m.replays),
        count(&m.replay_mismatches),
        count(&m.commit_outcome_unknown),
        declined.join(" ")
    )
}

fn ids(t: &Topology, server: &manifold_testkit::Server) -> String {
    t.sql(
        server,
        "SELECT GROUP_CONCAT(id ORDER BY id) FROM fo_replay.r",
    )
    .unwrap()
    .trim_end()
    .to_owned()
}

#[test]
fn open_transactions_survive_a_lost_primary_and_commits_are_never_run_twice() {
    let _serial = serial();
    let t = topology("fo_replay");
    t.sql(&t.primary, "CREATE TABLE fo_replay.r (id INT PRIMARY KEY)")
        .unwrap();
    let mut cfg = config(&t);
    cfg.routing.failover_timeout = Duration::from_secs(20);
    let server = start(&cfg);
    let m = &server.shared.metrics;
    let addr = server.mysql_addr();
    let connect = || Client::connect(addr, USER, PASSWORD, Some("fo_replay")).unwrap();

    // F: its connection killed on the server (`KILL`): what was killed stays killed.
    // Uptime counts whole seconds: a server up for less than the transaction's age plus one
    // counts as restarted.
    wait_for("the primary to be up 3 s", Duration::from_secs(10), || {
        t.sql(&t.primary, "SHOW GLOBAL STATUS LIKE 'Uptime'")
            .ok()
            .and_then(|r| r.split_whitespace().nth(1)?.parse::<u64>().ok())
            .is_some_and(|u| u >= 3)
    });
    let mut f = connect();
    f.query("BEGIN").unwrap();
    f.query("INSERT INTO r VALUES (300)").unwrap();
    let thread = t
        .sql_value(
            &t.primary,
            "SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX",
        )
        .unwrap();
    t.sql(&t.primary, &format!("KILL {thread}")).unwrap();
    // MariaDB closes the connection without a word, as a crash would; but the server has
    // been up since before the transaction began.
    // F's client is closed, as when no transaction was open.
    if let Ok(r) = f.query("INSERT INTO r VALUES (301)") {
        panic!("{r:?}; {}", counters(m));
    }
    assert_eq!(
        m.replay_declined(manifold_frontend_mysql::ReplayDecline::Killed),
        1,
        "{}",
        counters(m)
    );
    assert_eq!(ids(&t, &t.primary), "NULL");

    // A: a transaction in the middle of its work.
    let mut a = connect();
    a.query("BEGIN").unwrap();
    for id in 1..=3 {
        a.query(&format!("INSERT INTO r VALUES ({id})")).unwrap();
    }
    assert_eq!(a.scalar("SELECT COUNT(*) FROM r").unwrap().unwrap(), "3");
    a.query("UPDATE t SET v = v + 1 WHERE id = 10").unwrap();
    assert_eq!(
        a.scalar("SELECT v FROM t WHERE id = 10").unwrap().unwrap(),
        "11"
    );
    // B: read a row another session changes (and commits) before the primary dies.
    let mut b = connect();
    b.query("BEGIN").unwrap();
    assert_eq!(
        b.scalar("SELECT v FROM t WHERE id = 50").unwrap().unwrap(),
        "50"
    );
    t.sql(&t.primary, "UPDATE fo_replay.t SET v = 999 WHERE id = 50")
        .unwrap();
    // C: its COMMIT is held by a global read lock when the primary dies.
    let mut c = connect();
    c.query("BEGIN").unwrap();
    c.query("INSERT INTO r VALUES (100)").unwrap();
    // E: changed its session inside the transaction: not replayed, and counted.
    let mut e_client = connect();
    e_client.query("BEGIN").unwrap();
    e_client.query("SET @x = 5").unwrap();
    e_client.query("INSERT INTO r VALUES (200)").unwrap();
    // G: a BEGIN inside its transaction committed the work before it and opened another:
    // what was kept is committed work, never to run again.
    let mut g = connect();
    g.query("BEGIN").unwrap();
    g.query("UPDATE t SET v = v + 1000 WHERE id = 70").unwrap();
    g.query("BEGIN").unwrap();
    g.query("UPDATE t SET v = v + 1 WHERE id = 71").unwrap();
    let mut lock = Client::connect(t.primary.addr(), USER, PASSWORD, None).unwrap();
    lock.query("FLUSH TABLES WITH READ LOCK").unwrap();
    let committing = std::thread::spawn(move || c.query("COMMIT"));
    wait_for(
        "the COMMIT to wait for the lock",
        Duration::from_secs(10),
        || {
            t.sql_value(
                &t.primary,
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'COMMIT'",
            )
            .ok()
                == Some("1".into())
        },
    );

    // B's next statement waits for the same lock: it is running when the primary dies.
    let updating = std::thread::spawn(move || b.query("UPDATE t SET v = v + 1 WHERE id = 60"));
    wait_for(
        "B's UPDATE to wait for the lock",
        Duration::from_secs(10),
        || {
            t.sql_value(
            &t.primary,
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'UPDATE t SET v = v + 1%'",
        )
        .ok()
            == Some("1".into())
        },
    );

    t.kill_server(&t.primary).unwrap();
    let e = committing.join().unwrap().unwrap_err();
    assert_eq!(e.code(), Some(7710), "{e}");
    assert!(e.to_string().contains("unknown"), "{e}");
    drop(lock);
    t.restart_server(&t.primary).unwrap();

    // A goes on as if nothing happened, and commits all its rows.
    if let Err(e) = a.query("INSERT INTO r VALUES (4)") {
        panic!("{e}; {}", counters(m));
    }
    assert_eq!(a.scalar("SELECT COUNT(*) FROM r").unwrap().unwrap(), "4");
    a.query("COMMIT").unwrap();
    assert_eq!(
        ids(&t, &t.primary),
        "1,2,3,4",
        "the COMMIT ran once, C's did not"
    );
    assert_eq!(
        t.sql_value(&t.primary, "SELECT v FROM fo_replay.t WHERE id = 10")
            .unwrap(),
        "11"
    );
    assert_eq!(count(&m.replays), 1);
    assert_eq!(count(&m.commit_outcome_unknown), 1);
    // E's session is gone with its transaction, as without replay.
    assert!(e_client.query("INSERT INTO r VALUES (201)").is_err());
    assert_eq!(
        m.replay_declined(manifold_frontend_mysql::ReplayDecline::SessionState),
        1,
        "{}",
        counters(m)
    );
    assert_eq!(ids(&t, &t.primary), "1,2,3,4");
    // G's session is gone with its transaction: the first UPDATE committed once, the
    // second never.
    assert!(g.query("UPDATE t SET v = v + 1 WHERE id = 72").is_err());
    assert_eq!(
        m.replay_declined(manifold_frontend_mysql::ReplayDecline::Command),
        1,
        "{}",
        counters(m)
    );
    assert_eq!(
        t.sql_value(
            &t.primary,
            "SELECT GROUP_CONCAT(v ORDER BY id) FROM fo_replay.t WHERE id IN (70, 71, 72)"
        )
        .unwrap(),
        "1070,71,72"
    );
    // B's replayed read gave another answer: its UPDATE gets the error, and its
    // transaction is gone.
    let e = updating.join().unwrap().unwrap_err();
    assert_eq!(e.code(), Some(7709), "{e}");
    assert_eq!(
        t.sql_value(&t.primary, "SELECT v FROM fo_replay.t WHERE id = 60")
            .unwrap(),
        "60"
    );
    assert_eq!(count(&m.replay_mismatches), 1);

    // D: the primary stopped and a replica promoted by hand while D's transaction is open.
    t.wait_replicated(Duration::from_secs(20)).unwrap();
    let mut d = connect();
    d.query("BEGIN").unwrap();
    d.query("INSERT INTO r VALUES (10)").unwrap();
    t.stop_server(&t.primary).unwrap();
    let (new, other) = (&t.replicas[0], &t.replicas[1]);
    t.sql(
        new,
        "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF",
    )
    .unwrap();
    t.sql(
        other,
        &format!("STOP SLAVE; CHANGE MASTER TO master_port = {}, master_use_gtid = slave_pos; START SLAVE", new.addr().port()),
    )
    .unwrap();
    d.query("INSERT INTO r VALUES (11)").unwrap();
    d.query("COMMIT").unwrap();
    assert_eq!(server.shared.topology().primary(), 1);
    assert_eq!(ids(&t, new), "1,2,3,4,10,11");
    assert_eq!(count(&m.replays), 2);
}
