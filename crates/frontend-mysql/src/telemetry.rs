//! Where a request's time goes: per-worker stage histograms and statement counters.
//!
//! Each worker records into its own [`WorkerTelemetry`]; only that worker's thread writes
//! it, so a count goes up with a relaxed load and a relaxed store (two plain moves, no
//! locked instruction and no cache line shared with another writer). The admin thread reads
//! every worker's with relaxed loads and merges them: a figure may miss the request being
//! recorded at that moment, never more.
//!
//! Durations go into log-scale buckets: below 1 µs one bucket, then four per power of two up
//! to ~69 s (a quarter of the power of two wide each), so a percentile read off them (a
//! bucket's upper bound) overstates the truth by at most 25%.

use std::sync::atomic::{AtomicU64, Ordering};

use manifold_engine::clock;

/// A step of a request, as `PERF HIST` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// From accepting the TCP connection to the server greeting written.
    Connect,
    /// From the greeting to the login answered (OK or ERR).
    Auth,
    /// From the first byte of a command to its last.
    ClientRead,
    /// Classifying the statement and choosing its node.
    Route,
    /// Waiting for a backend connection (when the session held none).
    PoolWait,
    /// From the command written to the backend to the first byte of its answer.
    BackendFirstByte,
    /// From the command written to the backend to the last byte of its answer.
    BackendLastByte,
    /// From the answer's last byte read to its last byte written to the client.
    ClientWrite,
    /// From the command's last byte read to the answer's last byte written.
    Total,
}

impl Stage {
    pub const ALL: [Stage; 9] = [
        Stage::Connect,
        Stage::Auth,
        Stage::ClientRead,
        Stage::Route,
        Stage::PoolWait,
        Stage::BackendFirstByte,
        Stage::BackendLastByte,
        Stage::ClientWrite,
        Stage::Total,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Connect => "connect",
            Stage::Auth => "auth",
            Stage::ClientRead => "client_read",
            Stage::Route => "route",
            Stage::PoolWait => "pool_wait",
            Stage::BackendFirstByte => "backend_first_byte",
            Stage::BackendLastByte => "backend_last_byte",
            Stage::ClientWrite => "client_write",
            Stage::Total => "total",
        }
    }

    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

pub use manifold_engine::histogram::{bucket, bucket_upper, Histogram, BUCKETS};

/// One worker's histogram of one stage.
#[derive(Debug)]
struct StageHistogram {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

impl Default for StageHistogram {
    fn default() -> Self {
        StageHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

/// Adds `n` to a counter only this thread writes.
#[inline]
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// One worker's figures. Written by its worker only (see the module note).
#[derive(Debug, Default)]
pub struct WorkerTelemetry {
    stages: [StageHistogram; Stage::ALL.len()],
    /// Statements the clients sent that went to a backend.
    statements: AtomicU64,
    /// Of those, the ones answered with an error.
    statement_errors: AtomicU64,
    /// Statements slower than `slow_query_threshold`.
    slow_statements: AtomicU64,
    /// Prepared statements found ready on the backend connection an execute got.
    stmt_cache_hits: AtomicU64,
    /// ...and those that had to be prepared on it first.
    stmt_cache_misses: AtomicU64,
    /// Prepared statements closed on a backend connection to make room.
    stmt_cache_evictions: AtomicU64,
}

impl WorkerTelemetry {
    #[inline]
    pub fn record_ns(&self, stage: Stage, ns: u64) {
        let h = &self.stages[stage as usize];
        bump(&h.buckets[bucket(ns)], 1);
        bump(&h.sum_ns, ns);
    }

    /// Records `from`..`to` ([`clock`] ticks) when both were taken (`None` when timing is
    /// off).
    #[inline]
    pub fn record_span(&self, stage: Stage, from: Option<u64>, to: Option<u64>) {
        if let (Some(from), Some(to)) = (from, to) {
            self.record_ns(stage, clock::span_ns(from, to));
        }
    }

    #[inline]
    pub fn count_statement(&self, error: bool) {
        bump(&self.statements, 1);
        if error {
            bump(&self.statement_errors, 1);
        }
    }

    #[inline]
    pub fn count_slow(&self) {
        bump(&self.slow_statements, 1);
    }

    /// A prepared statement was found on the connection (`hit`) or prepared there,
    /// evicting `evicted` others.
    #[inline]
    pub fn count_stmt_cache(&self, hit: bool, evicted: u64) {
        bump(
            if hit {
                &self.stmt_cache_hits
            } else {
                &self.stmt_cache_misses
            },
            1,
        );
        bump(&self.stmt_cache_evictions, evicted);
    }

    /// Empties the histograms (`PERF HIST RESET`). Run by the admin thread: a request
    /// recorded at the same moment by the worker may survive the reset or be lost.
    pub fn reset(&self) {
        for h in &self.stages {
            for b in &h.buckets {
                b.store(0, Ordering::Relaxed);
            }
            h.sum_ns.store(0, Ordering::Relaxed);
        }
    }
}

/// Every worker's figures, summed when read.
#[derive(Debug, Default)]
pub struct Telemetry {
    workers: std::sync::Mutex<Vec<std::sync::Arc<WorkerTelemetry>>>,
}

impl Telemetry {
    /// A new worker's figures, registered for reading.
    pub fn register(&self) -> std::sync::Arc<WorkerTelemetry> {
        let t = std::sync::Arc::<WorkerTelemetry>::default();
        self.workers.lock().expect("telemetry").push(t.clone());
        t
    }

    fn each(&self) -> Vec<std::sync::Arc<WorkerTelemetry>> {
        self.workers.lock().expect("telemetry").clone()
    }

    /// `stage`'s histogram over all workers.
    pub fn histogram(&self, stage: Stage) -> Histogram {
        let mut out = Histogram::default();
        for w in self.each() {
            let h = &w.stages[stage as usize];
            for (o, b) in out.buckets.iter_mut().zip(&h.buckets) {
                *o += b.load(Ordering::Relaxed);
            }
            out.sum_ns += h.sum_ns.load(Ordering::Relaxed);
        }
        out
    }

    pub fn reset(&self) {
        for w in self.each() {
            w.reset();
        }
    }

    fn sum(&self, field: fn(&WorkerTelemetry) -> &AtomicU64) -> u64 {
        self.each()
            .iter()
            .map(|w| field(w).load(Ordering::Relaxed))
            .sum()
    }

    /// Statements sent to a backend, over all workers.
    pub fn statements(&self) -> u64 {
        self.sum(|w| &w.statements)
    }

    pub fn statement_errors(&self) -> u64 {
        self.sum(|w| &w.statement_errors)
    }

    pub fn slow_statements(&self) -> u64 {
        self.sum(|w| &w.slow_statements)
    }

    /// Prepared-statement cache hits, misses and evictions on backend connections.
    pub fn stmt_cache(&self) -> (u64, u64, u64) {
        (
            self.sum(|w| &w.stmt_cache_hits),
            self.sum(|w| &w.stmt_cache_misses),
            self.sum(|w| &w.stmt_cache_evictions),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_durations_in_order() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1023), 0);
        assert_eq!(bucket(1024), 1);
        let mut last = 0;
        for ns in (1024..10_000_000u64).step_by(997) {
            let b = bucket(ns);
            assert!(b >= last, "{ns}");
            assert!(ns < bucket_upper(b), "{ns} in {b}");
            assert!(b == 0 || ns >= bucket_upper(b - 1), "{ns} in {b}");
            last = b;
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_come_from_the_right_bucket() {
        let w = WorkerTelemetry::default();
        for _ in 0..90 {
            w.record_ns(Stage::Total, 100_000);
        }
        for _ in 0..10 {
            w.record_ns(Stage::Total, 10_000_000);
        }
        let t = Telemetry::default();
        t.workers.lock().unwrap().push(std::sync::Arc::new(w));
        let h = t.histogram(Stage::Total);
        assert_eq!(h.count(), 100);
        let p50 = h.quantile(0.5);
        assert!((100_000..=120_000).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((10_000_000..=12_000_000).contains(&p99), "{p99}");
        assert_eq!(h.max(), p99);
        assert_eq!(t.histogram(Stage::Auth).count(), 0);
        t.reset();
        assert_eq!(t.histogram(Stage::Total).count(), 0);
    }
}
