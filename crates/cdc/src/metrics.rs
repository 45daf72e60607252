//! The global binlog's figures, as PolarDB-X publishes them: EPS, DML EPS, BPS, TPS, files
//! per minute, delay. Counters are totals since start (rates are taken by whoever reads them:
//! Prometheus, the dashboard, `SHOW BINLOG STATUS`); written by the service thread only.
//!
//! OWNER: the service helper (may add fields).

use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl Metrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
