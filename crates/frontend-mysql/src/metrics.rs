//! Counters of the front door. Relaxed atomics touched once per connection (not per
//! statement); per-statement figures belong in per-worker histograms.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct FrontendMetrics {
    pub connections_accepted: AtomicU64,
    pub auth_failures: AtomicU64,
    pub sha2_full_auths: AtomicU64,
    pub sha2_fast_auths: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub backend_errors: AtomicU64,
    /// Reads a replica could not serve in time for causal consistency, answered elsewhere.
    pub causal_fallbacks: AtomicU64,
    /// Commands sent again to another connection or node after a backend failed before
    /// answering them.
    pub retries: AtomicU64,
    /// Client connections closed, for any reason.
    pub connections_closed: AtomicU64,
}

impl FrontendMetrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
