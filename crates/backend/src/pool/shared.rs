//! What every worker's pool to a backend shares: the backend's connection budget and the
//! limits an operator may change while manifold runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::PoolConfig;

/// The connections all workers' pools may open to one backend
/// (`pool.max_backend_connections`). Touched only when a connection opens or closes, and
/// read (a relaxed load) when one goes back to its pool: never per statement otherwise.
#[derive(Debug, Default)]
pub struct BackendBudget {
    pub(super) limit: usize,
    open: AtomicUsize,
    /// Workers with a borrower waiting because the others hold the whole budget: pools
    /// above their fair share give budget back (close a returned connection) while any is.
    pub(super) starving: AtomicUsize,
    /// Pools sharing the budget (one per worker).
    pub(super) pools: AtomicUsize,
    /// Wakes the other workers' pools when one starts starving, so they give back idle
    /// connections at once instead of at their next maintenance tick.
    pub(super) wanted: Notify,
}

impl BackendBudget {
    /// `limit` 0: no limit beyond each pool's own `max_size`.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            ..Self::default()
        })
    }

    pub(super) fn try_reserve(&self) -> bool {
        if self.limit == 0 {
            return true;
        }
        self.open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .is_ok()
    }

    pub(super) fn release(&self, n: usize) {
        if self.limit != 0 && n > 0 {
            self.open.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Connections open (or opening) now, when limited.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// What one pool may keep while another worker starves: an equal share, at least one.
    pub(super) fn fair_share(&self) -> usize {
        (self.limit / self.pools.load(Ordering::Relaxed).max(1)).max(1)
    }
}

/// The pool settings an operator may change while manifold runs (`SET GLOBAL`), shared by
/// every worker's pool to every backend and read with relaxed loads where the pool decides.
#[derive(Debug)]
pub struct PoolLimits {
    max_size: AtomicUsize,
    min_idle: AtomicUsize,
}

impl PoolLimits {
    pub fn new(config: &PoolConfig) -> Arc<Self> {
        Arc::new(PoolLimits {
            max_size: AtomicUsize::new(config.max_size),
            min_idle: AtomicUsize::new(config.min_idle),
        })
    }

    /// Most connections each worker opens to one backend (`pool.max_size`).
    pub fn max_size(&self) -> usize {
        self.max_size.load(Ordering::Relaxed)
    }

    /// Idle connections each worker keeps open (`pool.min_idle`).
    pub fn min_idle(&self) -> usize {
        self.min_idle.load(Ordering::Relaxed)
    }

    /// Sets both; `min_idle` must not exceed `max_size`. A smaller `max_size` closes no
    /// connection in use: pools shrink as connections come back. The error is the message
    /// the operator's `SET` gets back, hence a `String`.
    pub fn set(&self, max_size: usize, min_idle: usize) -> Result<(), String> {
        if max_size == 0 {
            return Err("pool.max_size: must be at least 1".into());
        }
        if min_idle > max_size {
            return Err(format!(
                "pool.min_idle: {min_idle} exceeds pool.max_size {max_size}"
            ));
        }
        self.max_size.store(max_size, Ordering::Relaxed);
        self.min_idle.store(min_idle, Ordering::Relaxed);
        Ok(())
    }
}
