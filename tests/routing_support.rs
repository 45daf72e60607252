//! What the routing tests share, whichever server they run against: waiting, counting where
//! reads ran, a replica held behind, and a steady writer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use manifold_testkit::{Server, Topology};
use manifold_tests::Client;

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
