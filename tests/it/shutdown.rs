//! Graceful shutdown: running statements finish, idle sessions close, new clients are refused.

use std::time::Duration;

use crate::harness::{client, config, start};

#[test]
fn shutdown_lets_running_statements_finish_and_closes_idle_sessions() {
    let server = start(&config());
    let addr = server.mysql_addr();
    let mut idle = client(addr, None);
    assert_eq!(idle.scalar("SELECT 1").unwrap().as_deref(), Some("1"));
    let mut busy = client(addr, None);
    let running = std::thread::spawn(move || {
        busy.scalar("SELECT SLEEP(1.5), 'finished'")
            .map(|_| busy.query("SELECT 'after'"))
    });
    // Let the statement reach the backend before shutdown begins.
    std::thread::sleep(Duration::from_millis(400));
    let stopper = std::thread::spawn(move || server.shutdown(Duration::from_secs(20)));
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "new connections are refused once shutdown begins"
    );
    assert!(
        idle.closed_within(Duration::from_secs(10)),
        "an idle session is closed at shutdown"
    );
    let first = running.join().unwrap();
    let after = first.expect("the running statement completes");
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
    let running = std::thread::spawn(move || busy.scalar("SELECT SLEEP(30)"));
    std::thread::sleep(Duration::from_millis(400));
    let report = server.shutdown(Duration::from_millis(500));
    assert_eq!(report.aborted, 1, "{report:?}");
    assert!(
        running.join().unwrap().is_err(),
        "the client sees its connection end"
    );
}
