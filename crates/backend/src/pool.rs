//! A worker's pool of connections to one backend.
//!
//! The pool lives on one worker thread (`Rc`/`RefCell`, no locks) and hands out [`Lease`]s,
//! borrowed per statement or per transaction by multiplexed sessions. A lease whose borrower
//! knows the connection's whole state ([`Lease::mark_clean`]) goes back as it is, and the pool
//! offers it first to a borrower wanting that state; any other is reset
//! (`COM_RESET_CONNECTION`) before it is offered again, so no session sees another's
//! variables, temporary tables or statements.
//!
//! How many connections a pool lends at once is an adaptive limit ([`limit`]) under
//! `pool.max_size`: it grows while the server keeps up and backs off when its latency rises,
//! so a pool holds the few connections its node can serve in parallel, not one per client.

mod limit;
mod pipeline;
mod shared;
#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::config::PoolConfig;
use crate::conn::{BackendConn, BackendTarget, ConnKey, Schema};
use crate::errors::{BackendError, ErrorKind};
use limit::ConcurrencyLimit;
use manifold_engine::clock;
pub use pipeline::Follower;
use pipeline::{Claim, FollowerSlot, FollowerState};
pub use shared::{BackendBudget, PoolLimits};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub idle: usize,
    pub in_use: usize,
    /// Being opened or reset.
    pub pending: usize,
    pub waiting: usize,
    pub opened_total: u64,
    /// Connects or logins to the backend that failed.
    pub failed_total: u64,
    /// Connections the pool may have busy now: its adaptive limit (`pool.max_size` when
    /// `pool.adaptive` is off).
    pub limit: usize,
}

impl PoolStats {
    /// Connections open or being opened: in use, idle and pending.
    pub fn open(&self) -> usize {
        self.in_use + self.idle + self.pending
    }
}

/// Sums pools' figures (the same backend's over workers, say).
impl std::ops::AddAssign<&PoolStats> for PoolStats {
    fn add_assign(&mut self, o: &PoolStats) {
        self.idle += o.idle;
        self.in_use += o.in_use;
        self.pending += o.pending;
        self.waiting += o.waiting;
        self.opened_total += o.opened_total;
        self.failed_total += o.failed_total;
        self.limit += o.limit;
    }
}

/// What [`Pool::acquire_or_follow`] got.
pub enum Acquired {
    /// A connection for the borrower to send its command on.
    Lease(Lease),
    /// A connection its command was already written to, behind others' whose answers have
    /// been read: the next answer on it is the borrower's. With the command, as it was sent.
    Followed(Lease, Vec<u8>),
}

/// How often a borrower starved by [`BackendBudget`] looks for budget another worker gave
/// back (that worker cannot wake it: it is another thread's runtime).
const STARVED_RECHECK: Duration = Duration::from_millis(5);

pub struct Pool {
    pub target: BackendTarget,
    pub config: PoolConfig,
    /// `max_size` and `min_idle` as they are now (the config's are those at start).
    pub limits: Arc<PoolLimits>,
    budget: Arc<BackendBudget>,
    idle: RefCell<VecDeque<BackendConn>>,
    /// Connections that exist or are being opened: idle + leased + resetting + connecting.
    total: Cell<usize>,
    in_use: Cell<usize>,
    waiting: Cell<usize>,
    opened: Cell<u64>,
    failed: Cell<u64>,
    released: Notify,
    /// What the pool keeps `min_idle` connections of, learned from the first session when not
    /// set up front.
    warm_key: RefCell<Option<ConnKey>>,
    closed: Cell<bool>,
    /// The backend is taken out of service (`BACKEND OFFLINE`): connections coming back
    /// close, and none is pre-opened.
    draining: Cell<bool>,
    /// Server version string seen in the last backend handshake.
    server_version: RefCell<Option<Vec<u8>>>,
    /// Borrowers waiting whose commands may follow another's (oldest first).
    followers: RefCell<VecDeque<Rc<Follower>>>,
    /// How many connections may be busy at once (`pool.adaptive`).
    limiter: ConcurrencyLimit,
    /// The clock's reading when the pool was made: the limiter's windows count from it.
    epoch: u64,
    /// Leases come back (given back or discarded): a waiter that sees none for a long
    /// while knows the busy connections are held, not serving.
    returned: Cell<u64>,
    /// Times the limit grew because borrowers waited with no connection coming back: one
    /// growth per stall, however many borrowers waited through it.
    stall_growths: Cell<u64>,
}

/// The least a borrower stopped by the adaptive limit waits, with no connection coming
/// back, before the limit grows by one ([`ConcurrencyLimit::stalled`]).
const STALL_MIN: Duration = Duration::from_millis(100);

impl Pool {
    /// `budget` is shared by every worker's pool to the same backend.
    pub fn new(
        target: BackendTarget,
        config: PoolConfig,
        limits: Arc<PoolLimits>,
        budget: Arc<BackendBudget>,
    ) -> Rc<Pool> {
        budget.pools.fetch_add(1, Ordering::Relaxed);
        let limiter = ConcurrencyLimit::new(config.min_limit, limits.max_size());
        Rc::new(Pool {
            target,
            config,
            limits,
            budget,
            idle: RefCell::new(VecDeque::new()),
            total: Cell::new(0),
            in_use: Cell::new(0),
            waiting: Cell::new(0),
            opened: Cell::new(0),
            failed: Cell::new(0),
            released: Notify::new(),
            warm_key: RefCell::new(None),
            closed: Cell::new(false),
            draining: Cell::new(false),
            server_version: RefCell::new(None),
            followers: RefCell::new(VecDeque::new()),
            limiter,
            epoch: clock::now(),
            returned: Cell::new(0),
            stall_growths: Cell::new(0),
        })
    }

    /// Connections this pool may have busy (lent, opening or resetting) now: the adaptive
    /// limit, or `pool.max_size` with `pool.adaptive` off.
    pub fn limit(&self) -> usize {
        let max = self.limits.max_size();
        if self.config.adaptive {
            self.limiter.get(max)
        } else {
            max
        }
    }

    /// Connections lent, being opened or being reset: all but the idle ones.
    fn busy(&self) -> usize {
        self.total.get() - self.idle.borrow().len()
    }

    /// Most connections the pool keeps open: what its limit may use, or `min_idle`.
    fn open_cap(&self) -> usize {
        self.limit().max(self.limits.min_idle())
    }

    pub fn stats(&self) -> PoolStats {
        let idle = self.idle.borrow().len();
        PoolStats {
            idle,
            in_use: self.in_use.get(),
            pending: self.total.get() - idle - self.in_use.get(),
            waiting: self.waiting.get(),
            opened_total: self.opened.get(),
            failed_total: self.failed.get(),
            limit: self.limit(),
        }
    }

    /// Connections lent out now: the balancer's outstanding requests on this node.
    pub fn in_use(&self) -> usize {
        self.in_use.get()
    }

    pub fn server_version(&self) -> Option<Vec<u8>> {
        self.server_version.borrow().clone()
    }

    /// Borrows a connection matching `key`: an idle one if there is one (preferring one whose
    /// changed variables have the signature `vars`, [`crate::state::state_signature`], and
    /// then one in `schema`, so the borrower has the least to restore), else a new one if the
    /// pool has room, else waits up to `wait_timeout` for one to come back.
    pub async fn acquire(
        self: &Rc<Self>,
        key: &ConnKey,
        schema: Option<&[u8]>,
        vars: u64,
    ) -> Result<Lease, BackendError> {
        match self.acquire_inner(key, schema, vars, None).await? {
            Acquired::Lease(lease) => Ok(lease),
            Acquired::Followed(..) => unreachable!("no command to follow with"),
        }
    }

    /// Like [`Pool::acquire`], but while the borrower waits, its `command` may instead be
    /// written behind another borrower's on a connection already in state `vars` and
    /// `schema`, and the connection comes to it when its answer is next.
    pub async fn acquire_or_follow(
        self: &Rc<Self>,
        key: &ConnKey,
        schema: Option<&[u8]>,
        vars: u64,
        command: &[u8],
    ) -> Result<Acquired, BackendError> {
        self.acquire_inner(key, schema, vars, Some(command)).await
    }

    async fn acquire_inner(
        self: &Rc<Self>,
        key: &ConnKey,
        schema: Option<&[u8]>,
        vars: u64,
        mut command: Option<&[u8]>,
    ) -> Result<Acquired, BackendError> {
        if self.warm_key.borrow().is_none() {
            *self.warm_key.borrow_mut() = Some(key.clone());
        }
        let mut deadline = None;
        // First come, first served: while others wait, a newcomer queues behind them instead
        // of taking the connection a waiter was just woken for (`Notify` wakes in order).
        let mut woken = false;
        let mut starving = false;
        // Made only once the borrower has to wait: the fast path allocates nothing.
        let mut follower = FollowerSlot {
            pool: self,
            f: None,
        };
        let mut claimed_until = None;
        let result = loop {
            match follower.f.as_ref().map(|f| f.state.get()) {
                Some(FollowerState::Claimed) => {
                    let f = follower.f.clone().expect("matched");
                    let until = *claimed_until
                        .get_or_insert_with(|| tokio::time::Instant::now() + self.patience(&f));
                    let give_up = *deadline.get_or_insert_with(|| {
                        tokio::time::Instant::now() + self.config.wait_timeout
                    });
                    match self
                        .wait_claimed(&f, until, give_up, key, schema, vars)
                        .await
                    {
                        Claim::Followed(lease) => {
                            follower.f = None;
                            break Ok(Acquired::Followed(lease, f.take_command()));
                        }
                        Claim::Own(lease) => {
                            follower.f = None;
                            break Ok(Acquired::Lease(lease));
                        }
                        Claim::TimedOut => {
                            follower.f = None;
                            break Err(self.wait_timed_out(starving));
                        }
                        // Its connection broke: the state says what comes next.
                        Claim::Again => continue,
                    }
                }
                Some(FollowerState::Broken) => {
                    // Its command went nowhere useful: it is sent again on a borrowed one.
                    follower.f = None;
                    command = None;
                    woken = true;
                }
                Some(FollowerState::Waiting | FollowerState::Abandoned) | None => {}
            }
            let tried = woken || self.waiting.get() == 0;
            if tried {
                match self.take_or_open(key, schema, vars).await {
                    Ok(Some(lease)) => match follower.f.take() {
                        Some(f) if f.state.get() == FollowerState::Claimed => {
                            // Claimed while a connection was being opened: the claim stands,
                            // and the connection goes back as it is.
                            lease.unused();
                            follower.f = Some(f);
                            continue;
                        }
                        Some(f) => {
                            self.forget_follower(&f);
                            break Ok(Acquired::Lease(lease));
                        }
                        None => break Ok(Acquired::Lease(lease)),
                    },
                    Ok(None) => {}
                    Err(e) => match follower.f.take() {
                        // Claimed while a connection failed to open: its answer will come.
                        Some(f) if f.state.get() == FollowerState::Claimed => {
                            follower.f = Some(f);
                            continue;
                        }
                        Some(f) => {
                            self.forget_follower(&f);
                            break Err(e);
                        }
                        None => break Err(e),
                    },
                }
            }
            if follower.f.is_none() {
                if let Some(command) = command {
                    follower.f = Some(self.follow(key, schema, vars, command));
                }
            }
            let until = *deadline
                .get_or_insert_with(|| tokio::time::Instant::now() + self.config.wait_timeout);
            // Below max_size but out of budget: the other workers hold it all.
            let starved = self.budget.limit != 0
                && self.total.get() < self.limits.max_size()
                && self.budget.open() >= self.budget.limit;
            if starved != starving {
                starving = starved;
                if starved {
                    self.budget.starving.fetch_add(1, Ordering::Relaxed);
                    self.budget.wanted.notify_waiters();
                } else {
                    self.budget.starving.fetch_sub(1, Ordering::Relaxed);
                }
            }
            // Stopped by the adaptive limit, not by max_size: if nothing comes back for a
            // while, the limit grows. Only a borrower that just tried watches for that (the
            // first in line, or one woken): one timer per pool, not one per waiter.
            let gated = tried
                && self.config.adaptive
                && self.limit() < self.limits.max_size()
                && self.busy() >= self.limit();
            let wake_at = if starved {
                until.min(tokio::time::Instant::now() + STARVED_RECHECK)
            } else if gated {
                until.min(tokio::time::Instant::now() + self.stall_after())
            } else {
                until
            };
            let returned_before = self.returned.get();
            let growths_before = self.stall_growths.get();
            self.waiting.set(self.waiting.get() + 1);
            let released = tokio::select! {
                () = self.released.notified() => Some(true),
                () = tokio::time::sleep_until(wake_at) => Some(false),
                () = async {
                    match &follower.f {
                        Some(f) => f.wake.notified().await,
                        None => std::future::pending().await,
                    }
                } => None,
            };
            self.waiting.set(self.waiting.get() - 1);
            let still_waiting = follower
                .f
                .as_ref()
                .is_none_or(|f| f.state.get() == FollowerState::Waiting);
            if released == Some(true) && !still_waiting {
                // The connection released for a waiter is not this one's to take.
                self.wake_a_waiter();
            }
            woken = released.is_some();
            if released == Some(false)
                && gated
                && still_waiting
                && self.returned.get() == returned_before
                && tokio::time::Instant::now() < until
            {
                // No connection came back all this while: those busy are held, not serving.
                // The first waiter to see it grows the limit; the others look for the room.
                if self.stall_growths.get() == growths_before {
                    self.stall_growths.set(growths_before + 1);
                    self.limit_grew(self.limiter.stalled(self.limits.max_size()));
                }
                woken = true;
                continue;
            }
            if released == Some(false) && still_waiting && tokio::time::Instant::now() >= until {
                // A wake-up meant for this borrower may have come with the timeout: pass it on.
                self.wake_a_waiter();
                if let Some(f) = follower.f.take() {
                    self.forget_follower(&f);
                }
                break Err(self.wait_timed_out(starving));
            }
        };
        if starving {
            self.budget.starving.fetch_sub(1, Ordering::Relaxed);
        }
        result
    }

    /// How long a borrower stopped by the limit waits for a connection to come back before
    /// the limit grows by one: several of the server's recent round trips, at least
    /// [`STALL_MIN`].
    fn stall_after(&self) -> Duration {
        Duration::from_nanos(self.limiter.last_avg_ns().saturating_mul(4)).max(STALL_MIN)
    }

    /// The limit may have grown to `limit`: wake as many waiters as it has room for more.
    fn limit_grew(&self, limit: usize) {
        let room = limit.saturating_sub(self.busy()).min(self.waiting.get());
        for _ in 0..room {
            self.released.notify_one();
        }
    }

    /// A lease lent at `since` (clock ticks) came back: one sample for the limiter.
    fn sample(&self, since: u64) {
        let now = clock::now();
        let changed = self.limiter.sample(
            clock::span_ns(since, now),
            clock::span_ns(self.epoch, now),
            self.limits.max_size(),
        );
        if let Some(limit) = changed {
            self.limit_grew(limit);
        }
    }

    fn wait_timed_out(&self, starving: bool) -> BackendError {
        let limit = if starving {
            format!(
                "all workers hold pool.max_backend_connections ({})",
                self.budget.limit
            )
        } else {
            format!("pool.max_size {}", self.limits.max_size())
        };
        BackendError::new(
            ErrorKind::PoolTimeout,
            format!(
                "no free connection to backend {} within pool.wait_timeout ({:?}); {} in use here (adaptive limit {}, {limit})",
                self.target.addr,
                self.config.wait_timeout,
                self.in_use.get(),
                self.limit(),
            ),
        )
    }

    /// Counts a connection about to be opened, if this pool and the backend's budget have
    /// room for it.
    fn reserve_slot(&self) -> bool {
        if self.total.get() >= self.limits.max_size() || !self.budget.try_reserve() {
            return false;
        }
        self.total.set(self.total.get() + 1);
        true
    }

    /// `n` connections closed (or never opened).
    fn release_slots(&self, n: usize) {
        self.total.set(self.total.get() - n);
        self.budget.release(n);
    }

    /// An idle connection, else a new one if there is room; `None` when the pool is full.
    async fn take_or_open(
        self: &Rc<Self>,
        key: &ConnKey,
        schema: Option<&[u8]>,
        vars: u64,
    ) -> Result<Option<Lease>, BackendError> {
        if self.config.adaptive && self.busy() >= self.limit() {
            self.limiter.refused();
            return Ok(None);
        }
        if let Some(conn) = self.take_idle(key, schema, vars) {
            return Ok(Some(self.lease(conn, true)));
        }
        if self.reserve_slot() || self.evict_idle_other_key(key) {
            let guard = SlotGuard(self);
            let conn = BackendConn::connect(&self.target, key, self.config.connect_timeout)
                .await
                .inspect_err(|_| self.failed.set(self.failed.get() + 1))?;
            std::mem::forget(guard);
            self.opened.set(self.opened.get() + 1);
            *self.server_version.borrow_mut() = Some(conn.server_version.clone());
            return Ok(Some(self.lease(conn, false)));
        }
        Ok(None)
    }

    fn lease(self: &Rc<Self>, conn: BackendConn, reused: bool) -> Lease {
        self.in_use.set(self.in_use.get() + 1);
        let since = if self.config.adaptive {
            self.limiter.lent(self.busy());
            clock::now().max(1)
        } else {
            0
        };
        Lease {
            conn: Some(conn),
            pool: self.clone(),
            dirty: true,
            reused,
            since,
        }
    }

    fn take_idle(&self, key: &ConnKey, schema: Option<&[u8]>, vars: u64) -> Option<BackendConn> {
        let mut idle = self.idle.borrow_mut();
        let in_schema = |c: &BackendConn| match (&c.schema, schema) {
            (Schema::Known(have), Some(want)) => have == want,
            (Schema::None, None) => true,
            _ => false,
        };
        // Most recently returned first: warm caches, and the oldest age out via idle_timeout.
        // Same variables and schema first, then same variables, then any of the right key.
        loop {
            let i = idle
                .iter()
                .rposition(|c| {
                    c.key == *key
                        && crate::state::state_signature(&c.vars, &c.user_vars) == vars
                        && in_schema(c)
                })
                .or_else(|| {
                    idle.iter().rposition(|c| {
                        c.key == *key
                            && crate::state::state_signature(&c.vars, &c.user_vars) == vars
                    })
                })
                .or_else(|| idle.iter().rposition(|c| c.key == *key))?;
            let conn = idle.remove(i).expect("index in range");
            if conn.looks_alive() {
                return Some(conn);
            }
            self.release_slots(1);
        }
    }

    /// At `max_size` with idle connections of other keys: close one to make room. `true`:
    /// the caller opens its connection in the slot at once; `false` with a backend budget,
    /// where the slot is free only once the server let go (see [`Self::retire`]) and the
    /// caller waits to be woken.
    fn evict_idle_other_key(self: &Rc<Self>, key: &ConnKey) -> bool {
        let evicted = {
            let mut idle = self.idle.borrow_mut();
            let Some(i) = idle.iter().position(|c| c.key != *key) else {
                return false;
            };
            idle.remove(i).expect("index in range")
        };
        if self.budget.limit == 0 {
            // The slot is reused by the caller: `total` stays.
            drop(evicted);
            return true;
        }
        self.retire(evicted);
        false
    }

    fn give_back(self: &Rc<Self>, mut conn: BackendConn) {
        if self.closed.get() || self.draining.get() {
            // A waiter may open a connection in the slot freed (to another node's pool, it
            // is routed elsewhere; to this one, it is under the limit).
            self.forget_one();
            return;
        }
        if self.total.get() > self.limits.max_size() || self.owes_budget() {
            self.retire(conn);
            return;
        }
        conn.last_used = Instant::now();
        self.idle.borrow_mut().push_back(conn);
        self.wake_a_waiter();
    }

    /// Another worker's borrowers wait for budget this pool holds more than its share of (or
    /// holds with no borrower waiting here): a connection coming back or idle should go back
    /// to the backend instead. Even with borrowers waiting here, or they would keep it from
    /// the other worker for as long as they are busy.
    fn owes_budget(&self) -> bool {
        self.budget.limit != 0
            && self.budget.starving.load(Ordering::Relaxed) > 0
            && (self.waiting.get() == 0 || self.total.get() > self.budget.fair_share())
    }

    /// Closes idle connections while [`Self::owes_budget`].
    fn give_back_budget(self: &Rc<Self>) {
        while self.owes_budget() {
            let Some(conn) = self.idle.borrow_mut().pop_front() else {
                return;
            };
            self.retire(conn);
        }
    }

    /// Closes a connection that still works. It leaves this pool's count at once, but under
    /// a backend budget (`pool.max_backend_connections`) its share of the budget comes back
    /// only once the server has let go of it ([`BackendConn::quit`]): the server counts it
    /// until then, and one opened in its place at once would be one more than the budget
    /// there (refused by a `max_user_connections` set to the same figure).
    fn retire(self: &Rc<Self>, conn: BackendConn) {
        self.total.set(self.total.get() - 1);
        if self.budget.limit == 0 {
            drop(conn);
            self.wake_a_waiter();
            return;
        }
        let pool = self.clone();
        tokio::task::spawn_local(async move {
            conn.quit(pool.config.connect_timeout).await;
            pool.budget.release(1);
            pool.wake_a_waiter();
        });
    }

    fn forget_one(&self) {
        self.release_slots(1);
        self.wake_a_waiter();
    }

    /// Per-statement borrowing returns a connection per statement: skip `Notify`'s lock when
    /// nobody waits. Waiters count themselves before they first poll, on this same thread, so
    /// none is missed.
    fn wake_a_waiter(&self) {
        if self.waiting.get() > 0 {
            self.released.notify_one();
        }
    }

    /// Keeps `min_idle` connections ready and closes idle ones past `idle_timeout`; runs on
    /// the worker until [`Pool::close`].
    pub fn spawn_maintenance(self: &Rc<Self>, warm_key: Option<ConnKey>) {
        if warm_key.is_some() {
            *self.warm_key.borrow_mut() = warm_key;
        }
        let pool = self.clone();
        tokio::task::spawn_local(async move {
            let tick = (pool.config.idle_timeout / 4)
                .clamp(Duration::from_millis(100), Duration::from_secs(5));
            let mut failures = 0u32;
            while !pool.closed.get() {
                if pool.config.adaptive {
                    pool.limiter.decay(pool.limits.max_size());
                }
                pool.expire_idle(tick);
                let key = pool.warm_key.borrow().clone();
                if let Some(key) = key {
                    let ready = pool.idle.borrow().iter().filter(|c| c.key == key).count();
                    // Not while another worker waits for budget: it would take it back.
                    let starving = pool.budget.starving.load(Ordering::Relaxed) > 0;
                    // Not beyond what the limit lets borrowers use: it would only idle.
                    if ready < pool.limits.min_idle()
                        && pool.total.get() < pool.open_cap()
                        && !starving
                        && !pool.draining.get()
                        && pool.reserve_slot()
                    {
                        match BackendConn::connect(&pool.target, &key, pool.config.connect_timeout)
                            .await
                        {
                            Ok(conn) => {
                                failures = 0;
                                pool.opened.set(pool.opened.get() + 1);
                                *pool.server_version.borrow_mut() =
                                    Some(conn.server_version.clone());
                                pool.give_back(conn);
                                continue;
                            }
                            Err(e) => {
                                pool.failed.set(pool.failed.get() + 1);
                                pool.forget_one();
                                failures += 1;
                                if failures == 1 || failures.is_multiple_of(60) {
                                    tracing::warn!(backend = %pool.target.addr, error = %e, "cannot pre-open backend connection");
                                }
                            }
                        }
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(tick) => {}
                    () = pool.budget.wanted.notified() => {}
                }
                pool.give_back_budget();
            }
        });
    }

    /// Closes idle connections past `idle_timeout` (beyond `min_idle`), those unused for
    /// `trim_after` while the pool holds more than its limit lets borrowers use
    /// ([`Self::open_cap`]), and, whatever their age, those the server has closed (its
    /// `wait_timeout`, a `KILL`, a restart), so that the refill that follows replaces them
    /// before a session needs one.
    fn expire_idle(self: &Rc<Self>, trim_after: Duration) {
        let now = Instant::now();
        let mut retired = Vec::new();
        let mut dead = 0;
        {
            let mut idle = self.idle.borrow_mut();
            let mut keep = self.limits.min_idle();
            // Newest are at the back; walk from the back and keep `min_idle` regardless of age.
            let mut kept = VecDeque::with_capacity(idle.len());
            while let Some(c) = idle.pop_back() {
                if !c.looks_alive() {
                    dead += 1;
                } else if keep > 0 || now.duration_since(c.last_used) < self.config.idle_timeout {
                    keep = keep.saturating_sub(1);
                    kept.push_front(c);
                } else {
                    retired.push(c);
                }
            }
            // Above a lowered `max_size`: idle connections close first, oldest first.
            let over =
                (self.total.get() - dead - retired.len()).saturating_sub(self.limits.max_size());
            for _ in 0..over.min(kept.len()) {
                retired.extend(kept.pop_front());
            }
            // Above the adaptive limit: idle ones unused for a while close, oldest first, so
            // the backend's count follows the load down.
            let mut above =
                (self.total.get() - dead - retired.len()).saturating_sub(self.open_cap());
            while above > 0
                && kept
                    .front()
                    .is_some_and(|c| now.duration_since(c.last_used) >= trim_after)
            {
                retired.extend(kept.pop_front());
                above -= 1;
            }
            *idle = kept;
        }
        // The server closed these already.
        self.release_slots(dead);
        for c in retired {
            self.retire(c);
        }
    }

    /// Takes the backend out of service (`true`: idle connections close now, leased ones
    /// when they come back, none is pre-opened) or puts it back.
    pub fn set_draining(&self, on: bool) {
        self.draining.set(on);
        if on {
            let n = {
                let mut idle = self.idle.borrow_mut();
                let n = idle.len();
                idle.clear();
                n
            };
            self.release_slots(n);
        }
    }

    /// Stops maintenance and closes idle connections; leased ones close when returned.
    pub fn close(&self) {
        self.closed.set(true);
        let n = self.idle.borrow().len();
        self.idle.borrow_mut().clear();
        self.release_slots(n);
    }
}

/// Undoes a slot reservation if opening the connection fails or is cancelled.
struct SlotGuard<'a>(&'a Pool);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.0.forget_one();
    }
}

/// A borrowed backend connection. Dropping it returns the connection to its pool, which resets
/// the session state in the background before offering it again; [`Lease::discard`] closes it.
pub struct Lease {
    conn: Option<BackendConn>,
    pool: Rc<Pool>,
    /// The session may have changed server state on this connection.
    dirty: bool,
    reused: bool,
    /// Clock ticks when it was lent, for the limiter; 0: no sample (a follower's, or the
    /// pool is not adaptive).
    since: u64,
}

impl Lease {
    pub fn conn(&mut self) -> &mut BackendConn {
        self.conn
            .as_mut()
            .expect("lease holds a connection until dropped")
    }

    /// The borrower knows the connection's whole session state (it is all in
    /// [`BackendConn::vars`] and [`BackendConn::schema`]): it goes back to the pool as it is,
    /// for a borrower that wants that state, instead of being reset.
    /// The connection sat in the pool before this borrow (it was not opened for it), so the
    /// server may have closed it meanwhile.
    pub fn reused(&self) -> bool {
        self.reused
    }

    pub fn mark_clean(&mut self) {
        self.dirty = false;
    }

    /// Goes back as it is, untouched: no sample for the limiter either.
    fn unused(mut self) {
        self.since = 0;
        self.dirty = false;
    }

    /// Closes the connection instead of returning it (it broke, or its state is unknown).
    pub fn discard(mut self) {
        if let Some(mut conn) = self.conn.take() {
            Pool::break_followers(&mut conn);
            self.pool.returned.set(self.pool.returned.get() + 1);
            self.pool.in_use.set(self.pool.in_use.get() - 1);
            self.pool.forget_one();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let pool = self.pool.clone();
        pool.in_use.set(pool.in_use.get() - 1);
        pool.returned.set(pool.returned.get() + 1);
        if self.since != 0 {
            pool.sample(self.since);
        }
        if conn.answer_pending {
            // Its borrower stopped waiting for an answer still on its way: resetting it
            // would read that answer as the reset's.
            Pool::break_followers(&mut conn);
            pool.forget_one();
            return;
        }
        if !self.dirty {
            pool.give_back_or_pass(conn);
            return;
        }
        if conn.has_followers() {
            // Unknown state cannot be reset under answers still on their way.
            Pool::break_followers(&mut conn);
            pool.forget_one();
            return;
        }
        // Reset off the session's path; the pool counts the connection meanwhile.
        tokio::task::spawn_local(async move {
            match conn.reset().await {
                Ok(Ok(())) => {
                    // COM_RESET_CONNECTION keeps the current schema.
                    conn.last_used = Instant::now();
                    pool.give_back(conn);
                }
                Ok(Err(e)) => {
                    tracing::debug!(backend = %pool.target.addr, error = %e, "reset refused; closing backend connection");
                    pool.forget_one();
                }
                Err(e) => {
                    tracing::debug!(backend = %pool.target.addr, error = %e, "reset failed; closing backend connection");
                    pool.forget_one();
                }
            }
        });
    }
}
