//! What the routing tests share, whichever server they run against: waiting, counting where
//! reads ran, a replica held behind, and a steady writer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use manifold_testkit::{Server, Topology};
use manifold_tests::Client;

/// Starts manifold and waits until the monitor has measured every node that serves reads.
pub fn start(cfg: &manifold::config::Config) -> manifold::Server {
    let server = manifold::start(cfg).expect("manifold starts");
    let topology = server.shared.topology();
    wait_for("every node readable", Duration::from_secs(15), || {
        (0..topology.nodes.len())
            .all(|n| topology.nodes[n].read_weight == 0 || topology.can_read(n))
    });
    server
}

pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Where `n` runs of `sql` (which returns `@@port` first) ran: port → count.
pub fn tally(c: &mut Client, sql: &str, n: usize) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for _ in 0..n {
        let port = c.scalar(sql).unwrap().expect("a port");
        *seen.entry(port).or_insert(0) += 1;
    }
    seen
}

pub fn count(t: &BTreeMap<String, usize>, port: &str) -> usize {
    t.get(port).copied().unwrap_or(0)
}

/// Reads that went elsewhere because a replica had not applied what they must see.
pub fn causal_fallbacks(server: &manifold::Server) -> u64 {
    server
        .shared
        .metrics
        .causal_fallbacks
        .load(Ordering::Relaxed)
}

/// A replica whose SQL thread is stopped until this is dropped, so that a failing test
/// leaves the topology replicating.
pub struct SqlThreadStopped {
    topology: &'static Topology,
    replica: &'static Server,
}

impl SqlThreadStopped {
    pub fn stop(topology: &'static Topology, replica: &'static Server) -> Self {
        topology.stop_sql_thread(replica).unwrap();
        SqlThreadStopped { topology, replica }
    }
}

impl Drop for SqlThreadStopped {
    fn drop(&mut self) {
        let _ = self.topology.start_sql_thread(self.replica);
    }
}

/// Writes `INSERT INTO <table> (<column>) VALUES (0)` on the primary every 50 ms until
/// dropped, so a stopped replica falls behind.
pub struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    pub fn start(topology: &'static Topology, table: &str, column: &str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let sql = format!("INSERT INTO {table} ({column}) VALUES (0)");
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                topology.sql(&topology.primary, &sql).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Writer {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn port(server: &Server) -> String {
    server.addr().port().to_string()
}

/// The session on `c` reads only from the replicas (weights 1:1, `max_replication_lag` 2 s).
/// The second replica's SQL thread stops while `table` (`db.t`, with `column`) takes writes:
/// once its lag passes the bound it gets no reads; started again, it gets them back.
pub fn a_lagging_replica_gets_no_reads(
    t: &'static Topology,
    server: &manifold::Server,
    c: &mut Client,
    table: &str,
    column: &str,
) {
    let (r1, r2) = (port(&t.replicas[0]), port(&t.replicas[1]));
    let reads = tally(c, "SELECT @@port", 20);
    assert_eq!(
        (count(&reads, &r1), count(&reads, &r2)),
        (10, 10),
        "{reads:?}"
    );
    let stopped = SqlThreadStopped::stop(t, &t.replicas[1]);
    let writer = Writer::start(t, table, column);
    let node = &server.shared.topology().nodes[2];
    wait_for(
        "the stopped replica to pass its lag bound",
        Duration::from_secs(20),
        || node.lag().is_some_and(|l| l > Duration::from_secs(2)),
    );
    let reads = tally(c, "SELECT @@port", 40);
    assert_eq!(count(&reads, &r2), 0, "beyond its lag bound: {reads:?}");
    assert_eq!(count(&reads, &r1), 40);

    drop(stopped);
    wait_for("the replica to catch up", Duration::from_secs(20), || {
        node.lag().is_some_and(|l| l <= Duration::from_secs(2))
    });
    let reads = tally(c, "SELECT @@port", 40);
    assert!(count(&reads, &r2) >= 10, "back within bounds: {reads:?}");
    drop(writer);
}

/// 2,000 times, the session on `c` writes a row of `t (id AUTO_INCREMENT, v)` and reads it
/// back at once, the first replica applying nothing for the first 500: never stale, the
/// replicas still serve reads, and the first serves some again once it applies again.
pub fn a_session_reads_its_own_writes(
    t: &'static Topology,
    server: &manifold::Server,
    c: &mut Client,
) {
    let mut by_port: BTreeMap<String, usize> = BTreeMap::new();
    let first_replica = port(&t.replicas[0]);
    let mut first_replica_after_restart = 0;
    let mut stopped = Some(SqlThreadStopped::stop(t, &t.replicas[0]));
    for i in 0..2000 {
        if i == 500 {
            drop(stopped.take());
        }
        let ok = c.query(&format!("INSERT INTO t (v) VALUES ({i})")).unwrap();
        let row = c
            .query(&format!(
                "SELECT v, @@port FROM t WHERE id = {}",
                ok.last_insert_id
            ))
            .unwrap();
        assert_eq!(
            row.rows.first().and_then(|r| r[0].clone()),
            Some(i.to_string()),
            "read {i} did not see its own write: {row:?}"
        );
        let at = row.rows[0][1].clone().unwrap();
        if i >= 500 && at == first_replica {
            first_replica_after_restart += 1;
        }
        *by_port.entry(at).or_insert(0) += 1;
    }
    assert!(
        first_replica_after_restart > 0,
        "the first replica, applying again, served none of the last 1,500 reads: {by_port:?}"
    );
    let on_replicas =
        count(&by_port, &port(&t.replicas[0])) + count(&by_port, &port(&t.replicas[1]));
    assert!(on_replicas >= 200, "replicas served reads too: {by_port:?}");
    assert!(
        causal_fallbacks(server) > 0,
        "the stopped replica made some reads go elsewhere"
    );
}

/// With `causal_reads = "global"` and reads on the replicas only: 300 times, `writer` inserts
/// into `t (id AUTO_INCREMENT, v)` and `reader` reads the row, the first replica applying
/// nothing meanwhile. Every read sees the write, and the second replica serves many of them
/// (after waiting for the primary's position).
pub fn global_reads_see_other_sessions_writes(
    t: &'static Topology,
    server: &manifold::Server,
    writer: &mut Client,
    reader: &mut Client,
) {
    let stopped = SqlThreadStopped::stop(t, &t.replicas[0]);
    let running = port(&t.replicas[1]);
    let mut on_running_replica = 0;
    for i in 0..300 {
        let id = writer
            .query(&format!("INSERT INTO t (v) VALUES ({i})"))
            .unwrap()
            .last_insert_id;
        let row = reader
            .query(&format!("SELECT v, @@port FROM t WHERE id = {id}"))
            .unwrap();
        assert_eq!(
            row.rows.first().and_then(|r| r[0].clone()),
            Some(i.to_string()),
            "read {i} missed another session's write: {row:?}"
        );
        if row.rows[0][1].as_deref() == Some(running.as_str()) {
            on_running_replica += 1;
        }
    }
    drop(stopped);
    assert!(
        on_running_replica >= 50,
        "the replica that kept applying served reads after waiting: {on_running_replica} of 300"
    );
    assert!(
        causal_fallbacks(server) > 0,
        "the stopped replica made some reads go elsewhere"
    );
}
