//! Pipelining across sessions: a borrower waiting for a connection may have its command
//! written right behind another borrower's on a connection already in its state, and the
//! connection comes to it once the answers before its own have been read.
//!
//! What keeps it safe for every client (the session decides which commands may follow: lone
//! autocommit `SELECT`s that could run twice):
//! - **A bounded wait.** A follower waits only for its answer until its patience runs out
//!   ([`Pool::patience`]: a few of the server's recent round trips per answer ahead of it,
//!   [`PATIENCE_MIN`] to [`PATIENCE_MAX`]); from then on, a free connection that comes before
//!   its answer serves it instead: it gives up its place ([`FollowerState::Abandoned`]) and
//!   sends its command again there. The answer it left is read off the wire and dropped
//!   before the connection goes on ([`Pool::give_back_or_pass`]).
//! - **Nobody reads an answer meant for another.** A connection breaking, or closed by its
//!   borrower, tells every follower still behind to send its command again elsewhere
//!   ([`Pool::break_followers`]): none of their answers reached a client yet.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use manifold_mysql_proto::Command;
use tokio::sync::Notify;

use super::{Lease, Pool};
use crate::conn::{BackendConn, ConnKey, Schema};

/// The least a follower waits for its answer before sending its command elsewhere.
const PATIENCE_MIN: Duration = Duration::from_millis(10);
/// The most a follower waits for its answer, however slow the answers ahead of it.
const PATIENCE_MAX: Duration = Duration::from_millis(100);

/// A borrower waiting for a connection whose command may ride behind another borrower's on
/// a connection already in its state. The borrower that writes it claims it; the connection
/// comes to it, command sent, once the answers before its own have been read
/// ([`super::Acquired::Followed`]). If the connection breaks first, the follower is told to
/// send its command again elsewhere: only statements safe to run twice follow.
pub struct Follower {
    key: ConnKey,
    schema: Option<Vec<u8>>,
    signature: u64,
    /// The command's packets, as the client sent them.
    command: RefCell<Vec<u8>>,
    pub(super) state: Cell<FollowerState>,
    /// Answers ahead of its own when it was claimed (the leader's is 1).
    ahead: Cell<usize>,
    pub(super) lease: RefCell<Option<Lease>>,
    pub(super) wake: Notify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FollowerState {
    Waiting,
    /// Its command was written; the connection will come.
    Claimed,
    /// The connection broke before its answer: send the command again.
    Broken,
    /// Its borrower stopped waiting (out of patience, or gone): the answer is dropped.
    Abandoned,
}

impl Follower {
    /// Its answer will not come: it sends its command again elsewhere.
    pub(crate) fn broken(&self) {
        self.state.set(FollowerState::Broken);
        self.wake.notify_one();
    }

    /// The command it sent, taken by its borrower with the connection.
    pub(super) fn take_command(&self) -> Vec<u8> {
        std::mem::take(&mut self.command.borrow_mut())
    }
}

/// How a claimed follower's wait ended ([`Pool::wait_claimed`]).
pub(super) enum Claim {
    /// Its turn: the connection, its answer next.
    Followed(Lease),
    /// Out of patience, it took a free connection: its command goes out again there.
    Own(Lease),
    /// Neither came within `pool.wait_timeout`: it gave up its place.
    TimedOut,
    /// The connection broke first: it sends its command again.
    Again,
}

/// The follower a borrower registered, if any. Should the borrower's future be dropped while
/// it waits, the follower leaves the queue, or if claimed, its answer is read and dropped
/// when it comes instead of being left for a reset to trip over.
pub(super) struct FollowerSlot<'a> {
    pub(super) pool: &'a Rc<Pool>,
    pub(super) f: Option<Rc<Follower>>,
}

impl Drop for FollowerSlot<'_> {
    fn drop(&mut self) {
        let Some(f) = self.f.take() else {
            return;
        };
        match f.state.get() {
            FollowerState::Waiting => self.pool.forget_follower(&f),
            FollowerState::Claimed => {
                f.state.set(FollowerState::Abandoned);
                let lease = f.lease.borrow_mut().take();
                if let Some(conn) = lease.and_then(|mut l| l.conn.take()) {
                    self.pool.in_use.set(self.pool.in_use.get() - 1);
                    self.pool.drop_answer_then_pass(conn);
                }
            }
            FollowerState::Broken | FollowerState::Abandoned => {}
        }
    }
}

impl Pool {
    /// Waits for a claimed follower's turn. Until `until` (its patience), only for that;
    /// then also for a free connection, and takes one if it comes first: the command goes
    /// out again there, and the answer left behind is dropped when it comes. Past
    /// `give_up` (the borrower's `pool.wait_timeout`), neither is waited for any more.
    pub(super) async fn wait_claimed(
        self: &Rc<Self>,
        f: &Rc<Follower>,
        until: tokio::time::Instant,
        give_up: tokio::time::Instant,
        key: &ConnKey,
        schema: Option<&[u8]>,
        vars: u64,
    ) -> Claim {
        let mut released = false;
        loop {
            if let Some(lease) = f.lease.borrow_mut().take() {
                if released {
                    // The connection released for this borrower goes to the next one.
                    self.wake_a_waiter();
                }
                return Claim::Followed(lease);
            }
            if f.state.get() != FollowerState::Claimed {
                if released {
                    self.wake_a_waiter();
                }
                return Claim::Again;
            }
            if tokio::time::Instant::now() < until {
                tokio::select! {
                    () = f.wake.notified() => {}
                    () = tokio::time::sleep_until(until) => {}
                }
                continue;
            }
            // First come, first served among those waiting for a connection.
            if released || self.waiting.get() == 0 {
                if let Ok(Some(lease)) = self.take_or_open(key, schema, vars).await {
                    if f.lease.borrow().is_none() && f.state.get() == FollowerState::Claimed {
                        f.state.set(FollowerState::Abandoned);
                        return Claim::Own(lease);
                    }
                    // Its turn came (or its connection broke) meanwhile.
                    lease.unused();
                    released = false;
                    continue;
                }
            }
            self.waiting.set(self.waiting.get() + 1);
            let woke = tokio::select! {
                () = f.wake.notified() => Some(false),
                () = self.released.notified() => Some(true),
                () = tokio::time::sleep_until(give_up) => None,
            };
            self.waiting.set(self.waiting.get() - 1);
            let Some(woke) = woke else {
                if f.lease.borrow().is_some() || f.state.get() != FollowerState::Claimed {
                    continue;
                }
                // A wake-up meant for this borrower may have come with the timeout.
                self.wake_a_waiter();
                f.state.set(FollowerState::Abandoned);
                return Claim::TimedOut;
            };
            released = woke;
        }
    }

    /// Queues a borrower about to wait whose `command` may follow another's.
    pub(super) fn follow(
        &self,
        key: &ConnKey,
        schema: Option<&[u8]>,
        vars: u64,
        command: &[u8],
    ) -> Rc<Follower> {
        let f = Rc::new(Follower {
            key: key.clone(),
            schema: schema.map(<[u8]>::to_vec),
            signature: vars,
            command: RefCell::new(command.to_vec()),
            state: Cell::new(FollowerState::Waiting),
            ahead: Cell::new(0),
            lease: RefCell::new(None),
            wake: Notify::new(),
        });
        self.followers.borrow_mut().push_back(f.clone());
        f
    }

    /// A follower that will not ride after all leaves the queue.
    pub(super) fn forget_follower(&self, f: &Rc<Follower>) {
        self.followers.borrow_mut().retain(|x| !Rc::ptr_eq(x, f));
    }

    /// How long a claimed follower waits for its answer: four of the server's recent round
    /// trips per answer ahead of its own, within [`PATIENCE_MIN`]..[`PATIENCE_MAX`].
    pub(super) fn patience(&self, f: &Follower) -> Duration {
        let per_answer = self.limiter.last_avg_ns().saturating_mul(4);
        Duration::from_nanos(per_answer.saturating_mul(f.ahead.get() as u64))
            .clamp(PATIENCE_MIN, PATIENCE_MAX)
    }

    /// Borrowers wait whose commands may follow another's.
    pub fn has_followers(&self) -> bool {
        !self.followers.borrow().is_empty()
    }

    /// Takes up to `max` waiting followers whose state is `conn`'s, for their commands to be
    /// written right behind the current borrower's; returns how many were taken. Their
    /// commands are appended to `out`, and the connection will go to each in turn.
    pub fn claim_followers(&self, conn: &mut BackendConn, max: usize, out: &mut Vec<u8>) -> usize {
        let mut followers = self.followers.borrow_mut();
        if followers.is_empty() || !conn.tracking {
            return 0;
        }
        let signature = crate::state::state_signature(&conn.vars, &conn.user_vars);
        let mut taken = 0;
        let already = conn.followers.len();
        followers.retain(|f| {
            let same_schema = match (&conn.schema, &f.schema) {
                (Schema::Known(have), Some(want)) => have == want,
                (Schema::None, None) => true,
                _ => false,
            };
            let fits = taken < max && same_schema && f.key == conn.key && f.signature == signature;
            if fits {
                taken += 1;
                f.state.set(FollowerState::Claimed);
                f.ahead.set(already + taken);
                // It stops waiting for a connection, and its patience starts.
                f.wake.notify_one();
                out.extend_from_slice(&f.command.borrow());
                conn.followers.push_back(f.clone());
            }
            !fits
        });
        taken
    }

    /// The connection comes back: if others' answers are still to come on it, it goes to the
    /// first of them instead (still counted in use); an answer nobody waits for any more is
    /// read and dropped first.
    pub(super) fn give_back_or_pass(self: &Rc<Self>, mut conn: BackendConn) {
        let Some(next) = conn.followers.pop_front() else {
            self.give_back(conn);
            return;
        };
        // Only the connection holds it: its borrower's future was dropped.
        if next.state.get() == FollowerState::Abandoned || Rc::strong_count(&next) == 1 {
            drop(next);
            self.drop_answer_then_pass(conn);
            return;
        }
        // The followers after `next` stay with the connection.
        self.in_use.set(self.in_use.get() + 1);
        // Its answer was already on its way: how long it holds the connection says nothing
        // about the server's queue, so it is no sample for the limiter.
        *next.lease.borrow_mut() = Some(Lease {
            conn: Some(conn),
            pool: self.clone(),
            dirty: true,
            reused: true,
            since: 0,
        });
        next.wake.notify_one();
    }

    /// Reads the next answer on `conn` off the wire (its borrower gave up waiting for it),
    /// then passes the connection on; one that fails meanwhile closes, and the followers
    /// behind send their commands again.
    fn drop_answer_then_pass(self: &Rc<Self>, mut conn: BackendConn) {
        let pool = self.clone();
        tokio::task::spawn_local(async move {
            match conn.skip_answer().await {
                Ok(()) => pool.give_back_or_pass(conn),
                Err(e) => {
                    tracing::debug!(backend = %pool.target.addr, error = %e, "reading an abandoned pipelined answer failed; closing backend connection");
                    Pool::break_followers(&mut conn);
                    pool.forget_one();
                }
            }
        });
    }

    /// The connection is closing with followers' answers unread: each sends its command again.
    pub(crate) fn break_followers(conn: &mut BackendConn) {
        for f in conn.followers.drain(..) {
            f.broken();
        }
    }

    /// Ends backend connection `thread` (`KILL CONNECTION`, sent on another connection of
    /// `key` in the background): the statement a killed session left running there stops
    /// with it. The caller has already closed its own end.
    pub fn kill_connection_later(self: &Rc<Self>, key: ConnKey, thread: u32) {
        let pool = self.clone();
        tokio::task::spawn_local(async move {
            let sql = format!("KILL CONNECTION {thread}");
            let killed = match pool.acquire(&key, None, 0).await {
                Ok(mut lease) => {
                    let r = lease
                        .conn()
                        .simple_command(&Command::Query(sql.as_bytes()))
                        .await;
                    if matches!(r, Ok(Ok(_))) {
                        // KILL changes nothing of the connection's own state.
                        lease.mark_clean();
                    }
                    r.map(|r| r.map(|_| ()).map_err(|e| e.message_lossy()))
                }
                Err(e) => Err(e),
            };
            tracing::debug!(backend = %pool.target.addr, thread, ?killed, "killed the connection of an interrupted pipelined statement");
        });
    }
}
