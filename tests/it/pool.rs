//! Backend connections are borrowed from a per-worker pool and reset before reuse.

use std::time::Duration;

use crate::harness::{client, config, schema, start};

#[test]
fn sessions_never_see_state_left_by_earlier_sessions() {
    let db = schema("pool_reset");
    let mut cfg = config();
    cfg.engine.threads = 1;
    cfg.pool.min_idle = 0;
    cfg.pool.max_size = 1;
    let server = start(&cfg);
    let addr = server.mysql_addr();
    let backend_id;
    {
        let mut a = client(addr, Some(&db));
        a.query("SET @leftover = 42, SESSION sql_mode = 'ANSI_QUOTES'")
            .unwrap();
        a.query("CREATE TEMPORARY TABLE tmp_left (x INT)").unwrap();
        backend_id = a.scalar("SELECT @@pseudo_thread_id").unwrap();
        a.query("USE mysql").unwrap();
    }
    // Pool of one: the next session must get the same backend connection, once it is reset
    // (@@pseudo_thread_id is the backend connection's id; CONNECTION_ID() is manifold's).
    let mut b = client(addr, Some(&db));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut same = b.scalar("SELECT @@pseudo_thread_id").unwrap();
    while same != backend_id && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        b = client(addr, Some(&db));
        same = b.scalar("SELECT @@pseudo_thread_id").unwrap();
    }
    assert_eq!(same, backend_id, "the pooled backend connection is reused");
    assert_eq!(b.scalar("SELECT @leftover").unwrap(), None);
    assert!(!b
        .scalar("SELECT @@SESSION.sql_mode")
        .unwrap()
        .unwrap_or_default()
        .contains("ANSI_QUOTES"));
    assert_eq!(
        b.query("SELECT * FROM tmp_left").unwrap_err().code(),
        Some(1146)
    );
    assert_eq!(
        b.scalar("SELECT DATABASE()").unwrap().as_deref(),
        Some(db.as_str()),
        "the new session's schema, not the old USE"
    );
    drop(server);
}

#[test]
fn pool_keeps_min_idle_connections_ready() {
    let mut cfg = config();
    cfg.engine.threads = 1;
    cfg.pool.min_idle = 3;
    let server = start(&cfg);
    let t = crate::harness::topology();
    let count = || {
        t.sql_value(&t.primary, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'app' AND INFO IS NULL")
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    let before = count();
    // Pre-warming starts with the first session, which teaches the pool its clients' flags.
    let mut c = client(server.mysql_addr(), None);
    c.query("SELECT 1").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while count() < before + 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(count() >= before + 3, "min_idle connections were opened");
    drop(c);
    drop(server);
}

#[test]
fn unreachable_backend_is_an_error_naming_it_and_the_session_survives() {
    let mut cfg = config();
    let dead = manifold_testkit::free_port();
    cfg.backend.primary = format!("127.0.0.1:{dead}");
    cfg.pool.connect_timeout = Duration::from_secs(2);
    let server = start(&cfg);
    let mut c = client(server.mysql_addr(), None);
    let e = c.query("SELECT 1").unwrap_err();
    assert_eq!(e.code(), Some(7701), "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{dead}")), "{e}");
    // Same session, next statement: still a clean error, not a broken connection.
    assert_eq!(c.query("SELECT 1").unwrap_err().code(), Some(7701));
}

#[test]
fn idle_connections_the_server_closed_are_replaced_in_the_background() {
    let t = crate::harness::topology();
    // A login of its own, so that killing its connections touches no other test.
    t.create_user("pool_health", "pool_health").unwrap();
    let mut cfg = config();
    cfg.users = vec![manifold::config::user_with_password(
        "pool_health",
        "pool_health",
    )];
    cfg.engine.threads = 1;
    cfg.pool.min_idle = 2;
    // Maintenance runs every idle_timeout / 4 (at least every 100 ms).
    cfg.pool.idle_timeout = Duration::from_millis(400);
    let server = start(&cfg);
    let ids = || -> Vec<String> {
        let list = t
            .sql_value(
                &t.primary,
                "SELECT IFNULL(GROUP_CONCAT(ID ORDER BY ID), '') FROM information_schema.PROCESSLIST WHERE USER = 'pool_health'",
            )
            .unwrap();
        list.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let wait_for = |what: &str, ok: &dyn Fn(&[String]) -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let now = ids();
            if ok(&now) {
                return now;
            }
            assert!(std::time::Instant::now() < deadline, "{what}: {now:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // The first session teaches the pool what to keep ready.
    let mut c =
        manifold_tests::Client::connect(server.mysql_addr(), "pool_health", "pool_health", None)
            .unwrap();
    c.query("SELECT 1").unwrap();
    drop(c);
    let old = wait_for("min_idle connections opened", &|ids| ids.len() >= 2);
    for id in &old {
        t.sql(&t.primary, &format!("KILL {id}")).unwrap();
    }
    // No client does anything: maintenance finds them closed and opens others.
    let new = wait_for("killed idle connections replaced", &|ids| {
        ids.len() >= 2 && ids.iter().all(|id| !old.contains(id))
    });
    assert!(new.len() >= 2);
    drop(server);
}
