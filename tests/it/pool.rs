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

/// With the pool's default settings, the adaptive limit opens connections while the load
/// needs them (statements whose latency does not rise with concurrency), lets them go once
/// the load is gone, and never goes above `pool.max_size`, here lowered at run time. Counted
/// from the backend's own processlist.
#[test]
fn adaptive_pool_grows_under_load_shrinks_after_and_respects_its_ceiling() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    const USER: &str = "pool_adaptive";
    const CLIENTS: usize = 40;
    const WORKERS: usize = 2;
    let t = crate::harness::topology();
    // A login of its own: the processlist count is this test's connections only.
    t.create_user(USER, USER).unwrap();
    let mut cfg = config();
    cfg.engine.threads = WORKERS;
    cfg.pool = manifold_backend::config::PoolConfig::default();
    cfg.users = vec![manifold::config::user_with_password(USER, USER)];
    // The monitor logs in as another user, so that its connection is not counted.
    cfg.routing.monitor.user = Some(crate::harness::USER.into());
    cfg.routing.monitor.password = crate::harness::PASSWORD.into();
    let defaults = cfg.pool.clone();
    assert!(defaults.adaptive, "the pool is adaptive by default");
    let server = start(&cfg);
    let addr = server.mysql_addr();
    let admin = std::cell::RefCell::new(
        manifold_tests::Client::connect(
            server.admin_addr().expect("admin port"),
            "admin",
            "admin",
            None,
        )
        .expect("admin login"),
    );
    // What the pools and the server say, for a failure's message.
    let explain = || {
        let pools = admin.borrow_mut().query("SHOW POOLS").unwrap().rows;
        let list = t
            .sql_value(
                &t.primary,
                &format!("SELECT GROUP_CONCAT(CONCAT_WS(' ', ID, COMMAND, TIME, IFNULL(INFO, '-')) SEPARATOR '; ') FROM information_schema.PROCESSLIST WHERE USER = '{USER}'"),
            )
            .unwrap();
        format!("SHOW POOLS {pools:?}; processlist {list}")
    };
    let count = || -> usize {
        t.sql_value(
            &t.primary,
            &format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '{USER}'"),
        )
        .unwrap()
        .parse()
        .unwrap()
    };
    // CLIENTS sessions run `SELECT SLEEP(0.02)` back to back until `stop`: the server's
    // latency stays at its minimum however many run at once, so the limit has every reason
    // to grow. Returns the threads, each with its count of statements.
    let load = |stop: &Arc<AtomicBool>| {
        (0..CLIENTS)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut c = manifold_tests::Client::connect(addr, USER, USER, None)
                        .expect("login through manifold");
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        c.query("SELECT SLEEP(0.02)").expect("statement under load");
                        n += 1;
                    }
                    n
                })
            })
            .collect::<Vec<_>>()
    };
    let wait_until = |what: &str, secs: u64, ok: &dyn Fn(usize) -> bool| -> usize {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let n = count();
            if ok(n) {
                return n;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: {n} backend connections; {}",
                explain()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let floor = WORKERS * defaults.min_limit.max(defaults.min_idle);

    // Grows: well above the floor every worker starts from.
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(&stop);
    let grown = wait_until("the pool grows under load", 60, &|n| n >= floor + 16);
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        assert!(c.join().expect("client thread") > 0);
    }

    // Shrinks: once the load is gone, the limit decays and the idle connections above it
    // close, down to what min_idle keeps.
    let shrunk = wait_until("the pool shrinks after the load", 90, &|n| {
        n <= WORKERS * defaults.min_idle
    });
    assert!(shrunk < grown);

    // A ceiling: pool.max_size lowered at run time holds under the same load.
    let ceiling = defaults.min_idle + 1;
    admin
        .borrow_mut()
        .query(&format!("SET GLOBAL pool.max_size = {ceiling}"))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(&stop);
    let mut peak = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // Until the pools reach the ceiling, and a while after.
    let mut samples_at_ceiling = 0;
    while samples_at_ceiling < 20 {
        let n = count();
        peak = peak.max(n);
        assert!(
            n <= WORKERS * ceiling,
            "{n} backend connections above the ceiling {WORKERS} × {ceiling}; {}",
            explain()
        );
        if n == WORKERS * ceiling {
            samples_at_ceiling += 1;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pools never reached their ceiling: peak {peak}; {}",
            explain()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        assert!(c.join().expect("client thread") > 0);
    }
    drop(server);
}
