//! One worker's part of the Redis door: its way to the tables ([`Store`], SQL state only)
//! and what else the worker keeps for its connections, which is not SQL: the open groups of
//! its batches ([`crate::group`]), its figures ([`crate::metrics`]), and its hold on the
//! clients blocked on lists ([`crate::blocking`], shared by every worker).
//!
//! A batch's transaction is begun here ([`Worker::begin`]): it runs its statements through
//! the store, and reports to the worker what is not SQL (the time its statements took, the
//! lists it pushed to, whose blocked clients are woken after its commit).

use std::sync::Arc;

use manifold_backend::ConnKey;

use crate::blocking::Waiters;
use crate::group::Groups;
use crate::metrics::WorkerMetrics;
use crate::store::events::{self, Event, Invalidator, Publisher};
use crate::store::{Store, Tx, TxHost};

/// One worker's door state, owned by its [`crate::RedisFrontend`] (shared with the expiry
/// sweeper on worker 0 and with the tasks of its groups).
pub struct Worker {
    /// The tables, reached through this worker's pools.
    pub store: Store,
    /// Batches of this worker's connections gathered into one statement.
    pub groups: Groups,
    /// Scripts of this worker's connections gathered into one transaction.
    pub scripts: crate::script::group::OpenGroups,
    /// The Lua states its scripts run in on the worker itself.
    pub lua: crate::script::inline::LocalStates,
    /// This worker's figures, the sweeper's included.
    pub metrics: Arc<WorkerMetrics>,
    /// Clients blocked on lists (`BLPOP`...), woken by pushes committed through any worker:
    /// the same for every worker ([`crate::RedisShared::waiters`]).
    pub waiters: Arc<Waiters>,
    /// Where keyspace notifications go: the Pub/Sub hub, every worker's.
    pub publisher: Arc<dyn Publisher + Send + Sync>,
    /// Where changed keys go while some client tracks keys: the tracking table, every
    /// worker's.
    pub invalidator: Arc<dyn Invalidator + Send + Sync>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("store", &self.store)
            .field("waiters", &self.waiters)
            .finish_non_exhaustive()
    }
}

impl Worker {
    pub fn new(
        store: Store,
        waiters: Arc<Waiters>,
        publisher: Arc<dyn Publisher + Send + Sync>,
        invalidator: Arc<dyn Invalidator + Send + Sync>,
    ) -> Self {
        Self {
            store,
            groups: Groups::default(),
            scripts: crate::script::group::OpenGroups::default(),
            lua: crate::script::inline::LocalStates::default(),
            metrics: Arc::default(),
            waiters,
            publisher,
            invalidator,
        }
    }

    /// A transaction for one batch, as `key`'s backend login; `write`: the batch writes, so
    /// its statements run in one transaction committed by [`Tx::commit`].
    pub fn begin<'s>(&'s self, key: &'s ConnKey, write: bool) -> Tx<'s> {
        Tx::new(self, key, write)
    }
}

/// A batch's transaction records its statements' time in the worker's figures and wakes
/// the clients blocked on the lists it pushed to.
impl TxHost for Worker {
    fn store(&self) -> &Store {
        &self.store
    }

    fn metrics(&self) -> &WorkerMetrics {
        &self.metrics
    }

    fn pushes_wanted(&self) -> bool {
        self.waiters.active()
    }

    fn pushed(&self, db: u8, key: &[u8], kind: u8) {
        self.waiters.wake(db, key, kind);
    }

    fn keyspace_events(&self, flags: u16, events: &[Event]) {
        events::publish(&*self.publisher, flags, events);
    }

    fn invalidate(&self, writer: u64, events: &[Event], all: bool) {
        self.invalidator.invalidate(writer, events, all);
    }

    fn blocked_keys(&self, db: u8) -> Vec<Vec<u8>> {
        self.waiters.keys_in(db)
    }
}
