//! Graceful shutdown: running statements finish, idle sessions close, new clients are refused.

use std::time::{Duration, Instant};

use manifold_tests::Client;

use crate::harness::{client, config, start, topology, PASSWORD, USER};

/// The backend thread running `statement` on the primary, once it runs there (polled).
fn backend_thread_running(statement: &str) -> String {
    let t = topology();
    let lookup = format!(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = '{}'",
        statement.replace('\'', "''")
    );
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        let id = t.sql_value(&t.primary, &lookup).unwrap();
        if !id.is_empty() {
            return id;
        }
        assert!(
            Instant::now() < give_up,
            "`{statement}` never reached the backend"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shutdown_lets_running_statements_finish_and_closes_idle_sessions() {
    let server = start(&config());
    let addr = server.mysql_addr();
    let mut idle = client(addr, None);
    assert_eq!(idle.scalar("SELECT 1").unwrap().as_deref(), Some("1"));
    // The statement waits for a lock the test holds on the primary directly, so it runs
    // until the test lets it finish: shutdown surely begins while it runs.
    let t = topology();
    let mut holder = Client::connect(t.primary.addr(), USER, PASSWORD, None).unwrap();
    let running_sql = "SELECT GET_LOCK('it_shutdown_finishes', 60)";
    assert_eq!(holder.scalar(running_sql).unwrap().as_deref(), Some("1"));
    let mut busy = client(addr, None);
    let running = std::thread::spawn(move || {
        busy.scalar(running_sql)
            .map(|locked| (locked, busy.query("SELECT 'after'")))
    });
    backend_thread_running(running_sql);
    let stopper = std::thread::spawn(move || server.shutdown(Duration::from_secs(60)));
    let give_up = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(
            Instant::now() < give_up,
            "new connections are still accepted after shutdown began"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        idle.closed_within(Duration::from_secs(10)),
        "an idle session is closed at shutdown"
    );
    assert!(
        !stopper.is_finished(),
        "shutdown waits for the running statement"
    );
    holder
        .query("SELECT RELEASE_LOCK('it_shutdown_finishes')")
        .unwrap();
    let (locked, after) = running
        .join()
        .unwrap()
        .expect("the running statement completes");
    assert_eq!(locked.as_deref(), Some("1"), "it got the lock");
    assert!(
        after.is_err(),
        "the session ends after its statement instead of taking new ones"
    );
    let report = stopper.join().unwrap();
    assert_eq!(report.aborted, 0, "nothing had to be cut off: {report:?}");
    assert!(report.drained >= 2, "{report:?}");
}

#[test]
fn shutdown_cuts_statements_that_outlive_the_timeout() {
    let server = start(&config());
    let addr = server.mysql_addr();
    let mut busy = client(addr, None);
    let running_sql = "SELECT SLEEP(30) AS it_shutdown_cut";
    let running = std::thread::spawn(move || busy.scalar(running_sql));
    let thread = backend_thread_running(running_sql);
    let report = server.shutdown(Duration::from_millis(500));
    assert_eq!(report.aborted, 1, "{report:?}");
    assert!(
        running.join().unwrap().is_err(),
        "the client sees its connection end"
    );
    // The server does not notice the closed connection while it sleeps.
    let t = topology();
    let _ = t.sql(&t.primary, &format!("KILL QUERY {thread}"));
}
