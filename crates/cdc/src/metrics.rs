//! The global binlog's figures, as PolarDB-X publishes them: EPS, DML EPS, BPS, TPS, files
//! per minute, delay. Counters are totals since start (rates are taken by whoever reads them:
//! Prometheus, the dashboard, `SHOW BINLOG STATUS`); written by the service thread only.
//!
//! OWNER: the service helper (may add fields).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use manifold_engine::histogram::{bucket, Histogram};

#[derive(Debug, Default)]
pub struct Metrics {
    /// Events written to the global binlog.
    pub events: AtomicU64,
    /// Table map and rows events among them.
    pub dml_events: AtomicU64,
    pub bytes: AtomicU64,
    pub transactions: AtomicU64,
    /// Files started.
    pub files: AtomicU64,
    /// Bytes written to spill files.
    pub spilled_bytes: AtomicU64,
    /// Source commit → written, of the last transaction written, milliseconds.
    pub delay_ms: AtomicU64,
    /// Transactions received and waiting for the merge's watermark now.
    pub waiting: AtomicU64,
    /// Bytes of buffered transactions held in memory now.
    pub memory_used: AtomicU64,
    /// Files removed by retention or `PURGE BINARY LOGS`.
    pub purged_files: AtomicU64,
    /// Stamp (manifold's clock when the write went through it) → written, of every stamped
    /// transaction written: what a client's commit waits to be in the global binlog.
    stamped_delay: Mutex<Histogram>,
    /// Source commit → written, of every transaction whose source gives its commit time to
    /// the microsecond (MySQL's GTID events do; MariaDB's events have whole seconds).
    commit_delay: Mutex<Histogram>,
    /// `starting`, `running`, `stopped`, or `failed: <why>` (the service stopped writing).
    state: Mutex<String>,
}

impl Metrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub fn set(counter: &AtomicU64, n: u64) {
        counter.store(n, Ordering::Relaxed);
    }

    /// Records one stamped transaction's stamp → written delay.
    pub fn record_stamped_delay(&self, ns: u64) {
        record(&self.stamped_delay, ns);
    }

    /// The stamp → written delays so far (bucket bounds in nanoseconds).
    pub fn stamped_delay(&self) -> Histogram {
        read(&self.stamped_delay)
    }

    /// Records one transaction's source commit → written delay (microsecond commit times).
    pub fn record_commit_delay(&self, ns: u64) {
        record(&self.commit_delay, ns);
    }

    /// The source commit → written delays so far (empty with MariaDB sources).
    pub fn commit_delay(&self) -> Histogram {
        read(&self.commit_delay)
    }

    /// The service's state (`starting` before the thread has opened the files).
    pub fn state(&self) -> String {
        let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.is_empty() {
            "starting".into()
        } else {
            s.clone()
        }
    }

    pub fn set_state(&self, state: impl Into<String>) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state.into();
    }
}

fn record(histogram: &Mutex<Histogram>, ns: u64) {
    let mut h = histogram.lock().unwrap_or_else(PoisonError::into_inner);
    h.buckets[bucket(ns)] += 1;
    h.sum_ns = h.sum_ns.saturating_add(ns);
}

fn read(histogram: &Mutex<Histogram>) -> Histogram {
    histogram
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamped_delays_give_quantiles_and_state_starts_as_starting() {
        let m = Metrics::default();
        assert_eq!(m.state(), "starting");
        for ms in [1u64, 2, 3, 1000] {
            m.record_stamped_delay(ms * 1_000_000);
        }
        let h = m.stamped_delay();
        assert_eq!(h.count(), 4);
        let p50 = h.quantile(0.5);
        assert!((2_000_000..4_000_000).contains(&p50), "{p50}");
        assert!(h.quantile(0.99) >= 1_000_000_000);
        m.set_state("failed: disk full");
        assert_eq!(m.state(), "failed: disk full");
    }
}
