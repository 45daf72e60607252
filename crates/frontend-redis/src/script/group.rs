//! Scripts of several clients in one transaction: group commit for `EVAL`, `EVALSHA` and
//! `FCALL`.
//!
//! A script alone costs the database a `START TRANSACTION` and a `COMMIT` (and a commit's
//! log write) besides its own statements: for a small script, half its statements. So the
//! scripts that a worker's connections send in the same turn of its loop (same backend
//! login) join one group, which runs them **one after the other** in one transaction and
//! commits once: each script still runs alone (nothing of another script runs between its
//! statements) and its writes are kept or lost with its own reply, as below.
//!
//! - The client whose script opened the group leads it, on its own task: one turn for the
//!   others to join, then a script place (held for the whole group, so no script of it
//!   waits for one while the transaction holds row locks; the group takes members until it
//!   has one, so it grows while every place is taken), then the scripts in order.
//!   The others wait for their reply (or to lead their script alone, below).
//! - Every reply waits for the commit (as a lone script's did); the messages a script
//!   publishes go out after it, in order.
//! - A script that raises an error keeps its writes (as in Redis). One that is stopped
//!   (`SCRIPT KILL`, the time limit, its client gone), or a command refused by the server
//!   in it, loses the whole transaction: its client gets its error, and the group runs again
//!   without it (none of the others was answered, so none is run twice as far as anyone can
//!   see). A deadlock or lock wait timeout runs the group again after a pause; past the
//!   retries the script it stopped fails alone. A lost connection or a refused commit fails
//!   every script of the group: none is acknowledged unless its commit was.
//! - A group's scripts may run [`PREEMPT_AFTER`] in all: the script running when that is
//!   spent is stopped and runs again alone, led by its own client's task (once alone it is
//!   never stopped for its time); the scripts after it go to a group of their own, and the
//!   ones before it run again. So a slow script (or one that never returns, until `SCRIPT
//!   KILL`) holds up the others of its group for no longer than that (plus a statement it
//!   may be waiting on).
//! - A group that meets [`SPLIT_AFTER`] conflicts (deadlocks, lock wait timeouts) runs each
//!   of its scripts alone, each with a lone script's retries.
//! - A client that tracks keys (`CLIENT TRACKING`) runs its script alone, as its batches
//!   (`crate::session::tracking`).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use manifold_backend::ConnKey;
use manifold_redis_proto::{Protocol, Reply};
use tokio::sync::Notify;

use super::{killed_waiting, Caller, Published, Ran, Script};
use crate::kill::ClientHandle;
use crate::server::RedisFrontend;
use crate::session::Session;
use crate::store::context::Cx;
use crate::store::replicas::Causal;
use crate::store::{now_ms, pause_before_retry, Attempts, Decision, Retry};

/// Most scripts in one group: each waits for the ones before it.
pub const MAX_MEMBERS: usize = 16;

/// A group's scripts may run this long in all (each run of the group): the script running
/// when it is spent is stopped and runs again alone, and the scripts after it go to a
/// group of their own.
const PREEMPT_AFTER: Duration = Duration::from_millis(100);

/// Conflicts (deadlocks, lock wait timeouts) after which a group's scripts each run alone,
/// with a lone script's retries.
const SPLIT_AFTER: usize = 2;

/// The open script groups of a worker (at most one per backend login).
#[derive(Default)]
pub struct OpenGroups {
    open: RefCell<Vec<Weak<Group>>>,
    /// The last group's number.
    last: Cell<u64>,
}

impl OpenGroups {
    fn new_group(&self, login: &Rc<ConnKey>, members: Vec<Rc<Member>>, closed: bool) -> Group {
        let id = self.last.get() + 1;
        self.last.set(id);
        for m in &members {
            m.owner.set(id);
        }
        Group {
            id,
            login: login.clone(),
            members: RefCell::new(members),
            closed: Cell::new(closed),
        }
    }
}

impl std::fmt::Debug for OpenGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenGroups").finish_non_exhaustive()
    }
}

/// Scripts run in one transaction.
struct Group {
    /// Its number among the worker's groups.
    id: u64,
    login: Rc<ConnKey>,
    members: RefCell<Vec<Rc<Member>>>,
    /// No more members (its leader took them).
    closed: Cell<bool>,
}

/// What a member waits for.
enum Turn {
    Waiting,
    /// To lead these members (sent on from a group whose script ran long).
    Lead(Rc<Group>),
    /// Its reply.
    Done(Vec<u8>),
}

/// One client's script in a group.
struct Member {
    script: Script,
    /// The client's protocol, its reply's.
    proto: Protocol,
    db: u8,
    /// Bytes its reply may hold (the client's output limit).
    out_limit: usize,
    handle: Arc<ClientHandle>,
    /// The client remembers the keys it reads (alone in its group).
    remembers: Option<u64>,
    causal: Causal,
    /// The number of the group that answers it.
    owner: Cell<u64>,
    /// It runs on a script thread, not on the worker (it was moved: [`Ran::Moved`]).
    on_thread: Cell<bool>,
    turn: RefCell<Turn>,
    wake: Notify,
}

impl Member {
    fn answer(&self, reply: Vec<u8>) {
        *self.turn.borrow_mut() = Turn::Done(reply);
        self.wake.notify_one();
    }
}

/// Runs `script` for `session` in a group, and appends its reply to `out`.
pub(super) async fn run(session: &mut Session<'_>, script: Script, out: &mut Vec<u8>) {
    let proto = session.proto;
    let Some(login) = session.login.clone() else {
        Reply::new(out, proto).error(b"manifold: no backend login for this client");
        return;
    };
    let fe = session.fe;
    let caller = Caller::of(session);
    // A script's client is a normal one (not a subscriber, not a replica).
    let output_limit = fe.shared.output.normal.hard_bytes();
    let member = Rc::new(Member {
        script,
        proto,
        db: session.info.db.get(),
        out_limit: output_limit.saturating_sub(out.len()),
        handle: caller.handle,
        remembers: caller.remembers,
        causal: session.causal.clone(),
        owner: Cell::new(0),
        on_thread: Cell::new(false),
        turn: RefCell::new(Turn::Waiting),
        wake: Notify::new(),
    });
    let _led = LeadOnDrop(&member);
    if session.tracking.is_some() {
        let alone = fe
            .worker
            .scripts
            .new_group(&login, vec![member.clone()], true);
        Box::pin(lead(fe, &alone)).await;
    } else if let Some(group) = join(fe, &login, &member) {
        // One turn for the worker's other ready connections to join (and, while every
        // script place is taken, until one is free: `lead`).
        tokio::task::yield_now().await;
        Box::pin(lead(fe, &group)).await;
    }
    loop {
        let turn = std::mem::replace(&mut *member.turn.borrow_mut(), Turn::Waiting);
        match turn {
            Turn::Done(reply) => {
                out.extend_from_slice(&reply);
                return;
            }
            Turn::Lead(group) => Box::pin(lead(fe, &group)).await,
            Turn::Waiting => member.wake.notified().await,
        }
    }
}

/// A member's task ended while it was to lead a group (its task torn down): that group's
/// members are answered with an error instead of waiting forever (and the group, which
/// holds the member, is let go).
struct LeadOnDrop<'m>(&'m Rc<Member>);

impl Drop for LeadOnDrop<'_> {
    fn drop(&mut self) {
        let turn = std::mem::replace(&mut *self.0.turn.borrow_mut(), Turn::Waiting);
        if let Turn::Lead(group) = turn {
            drop(Unanswered {
                group: &group,
                taken: Vec::new(),
            });
        }
    }
}

/// Adds `member` to the worker's open group for `login`, or opens one: `Some` when it
/// opened it (and so leads it).
fn join(fe: &RedisFrontend, login: &Rc<ConnKey>, member: &Rc<Member>) -> Option<Rc<Group>> {
    let groups = &fe.worker.scripts;
    let mut open = groups.open.borrow_mut();
    open.retain(|g| g.upgrade().is_some_and(|g| !g.closed.get()));
    let found = open
        .iter()
        .filter_map(Weak::upgrade)
        .find(|g| *g.login == **login && g.members.borrow().len() < MAX_MEMBERS);
    if let Some(group) = found {
        member.owner.set(group.id);
        group.members.borrow_mut().push(member.clone());
        return None;
    }
    let group = Rc::new(groups.new_group(login, vec![member.clone()], false));
    open.push(Rc::downgrade(&group));
    Some(group)
}

/// Where a member of the running group stands.
enum Fate {
    /// To run (again).
    Pending,
    /// Its final reply, sent once the group ends.
    Answered(Vec<u8>),
    /// Sent on to another group.
    Moved,
}

/// Answers the members with an error if their leader's task ends before it answered them
/// (the worker's tasks torn down): they would otherwise wait forever. The members sent on
/// to another group are that group's to answer.
struct Unanswered<'g> {
    group: &'g Group,
    /// The members the leader took (the others are still in the group).
    taken: Vec<Rc<Member>>,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        self.group.closed.set(true);
        let left = self.group.members.take();
        for m in self.taken.iter().chain(&left) {
            let waiting =
                m.owner.get() == self.group.id && matches!(*m.turn.borrow(), Turn::Waiting);
            if waiting {
                let mut reply = Vec::new();
                Reply::new(&mut reply, m.proto)
                    .error(b"manifold: the script's group did not finish");
                m.answer(reply);
            }
        }
    }
}

/// Closes `group` once it has a script place, runs its scripts in one transaction (again, as
/// their failures say), then answers each member.
async fn lead(fe: &RedisFrontend, group: &Group) {
    let mut unanswered = Unanswered {
        group,
        taken: Vec::new(),
    };
    // A script place for the whole group, taken before its transaction begins. The group
    // takes members until it has one: while every place is taken, it grows.
    let slot = fe.shared.scripts.reserve().await;
    group.closed.set(true);
    unanswered.taken = group.members.take();
    let members = &unanswered.taken;
    let mut fates: Vec<Fate> = members.iter().map(|_| Fate::Pending).collect();
    let mut attempts = Attempts::new(members.len());
    loop {
        let started = tokio::time::Instant::now();
        let mut tx = fe.worker.begin(&group.login, true);
        for (m, fate) in members.iter().zip(&fates) {
            if matches!(fate, Fate::Pending) {
                tx = tx.noting(&m.causal);
            }
        }
        if let [alone] = &members[..] {
            // Its own writes, for `CLIENT TRACKING ... NOLOOP`.
            tx = tx.by(alone.handle.id);
        }
        let mut cx = Cx {
            tx,
            out: Vec::new(),
            proto: Protocol::Resp2,
            db: 0,
            out_limit: 0,
            client: None,
        };
        // Replies of the scripts that returned, kept until the commit, with what they
        // published.
        let mut returned: Vec<(usize, Vec<u8>, Published)> = Vec::new();
        // The script that lost the transaction, and the store error that did.
        let mut lost = None;
        for i in 0..members.len() {
            if !matches!(fates[i], Fate::Pending) {
                continue;
            }
            let m = &members[i];
            if let Some(text) = &attempts.failed()[i] {
                let mut reply = Vec::new();
                Reply::new(&mut reply, m.proto).error(text);
                fates[i] = Fate::Answered(reply);
                continue;
            }
            if m.handle.is_killed() {
                fates[i] = Fate::Answered(killed_waiting(m.proto));
                continue;
            }
            cx.out.clear();
            cx.proto = Protocol::Resp2;
            cx.db = m.db;
            cx.out_limit = m.out_limit;
            // A script's clock starts with it.
            cx.tx.now_ms = now_ms();
            let caller = Caller {
                fe,
                handle: m.handle.clone(),
                remembers: m.remembers,
            };
            let mut published = Published::default();
            // With others in the transaction, the script running when the group's time is
            // spent is sent to run alone.
            let others = !returned.is_empty()
                || fates
                    .iter()
                    .enumerate()
                    .any(|(j, f)| j != i && matches!(f, Fate::Pending));
            let preempt_at = others.then(|| started + PREEMPT_AFTER);
            let ran = super::run(
                &caller,
                &mut cx,
                &m.script,
                m.proto,
                &mut published,
                true,
                preempt_at,
                !m.on_thread.get(),
            )
            .await;
            match ran {
                Ran::Reply(reply) => returned.push((i, reply, published)),
                // Nothing ran.
                Ran::CompileError(reply) | Ran::NotRun(reply) => fates[i] = Fate::Answered(reply),
                Ran::Stopped(reply) | Ran::ClientGone(reply) => {
                    // Nothing it wrote is kept: the others run again without it.
                    fates[i] = Fate::Answered(reply);
                    lost = Some((i, None));
                    break;
                }
                Ran::Failed(e) => {
                    lost = Some((i, Some(e)));
                    break;
                }
                Ran::Moved => {
                    // Nothing it wrote is kept: the group runs again, it on a script thread
                    // (once each member at most).
                    m.on_thread.set(true);
                    lost = Some((i, None));
                    break;
                }
                Ran::Preempted => {
                    // Nothing it wrote is kept: it runs again alone, the scripts after it
                    // in a group of their own, the ones before it again, here.
                    send_on(fe, &group.login, &members[i..=i], &mut fates[i..=i]);
                    send_on(fe, &group.login, &members[i + 1..], &mut fates[i + 1..]);
                    lost = Some((i, None));
                    break;
                }
            }
        }
        let (at, e) = match lost {
            Some((_, None)) => {
                cx.tx.abandon();
                continue;
            }
            Some((i, Some(e))) => {
                cx.tx.abandon();
                (Some(i), e)
            }
            None => match cx.tx.commit().await {
                Ok(()) => {
                    for (i, reply, published) in returned {
                        published.deliver(fe);
                        fates[i] = Fate::Answered(reply);
                    }
                    break;
                }
                Err(e) => (None, e),
            },
        };
        let pending = fates.iter().filter(|f| matches!(f, Fate::Pending)).count();
        if e.retry() == Retry::AfterPause && pending > 1 && attempts.conflicts() >= SPLIT_AFTER {
            // Conflicting again and again: each script runs alone, with its own retries.
            for j in 0..members.len() {
                send_on(fe, &group.login, &members[j..=j], &mut fates[j..=j]);
            }
            break;
        }
        match attempts.next(at, &e) {
            Decision::Again(pause) => pause_before_retry(pause).await,
            Decision::OnPrimary | Decision::WatchConflict | Decision::FailAll => {
                let text = e.reply_text();
                for (m, fate) in members.iter().zip(fates.iter_mut()) {
                    if matches!(fate, Fate::Pending) {
                        let mut reply = Vec::new();
                        Reply::new(&mut reply, m.proto).error(&text);
                        *fate = Fate::Answered(reply);
                    }
                }
                break;
            }
        }
    }
    drop(slot);
    for (m, fate) in members.iter().zip(fates) {
        if let Fate::Answered(reply) = fate {
            m.answer(reply);
        }
    }
}

/// Sends the `members` still to run to a group of their own, closed, led by the first of
/// them.
fn send_on(fe: &RedisFrontend, login: &Rc<ConnKey>, members: &[Rc<Member>], fates: &mut [Fate]) {
    let mut moved = Vec::new();
    for (m, fate) in members.iter().zip(fates.iter_mut()) {
        if matches!(fate, Fate::Pending) {
            *fate = Fate::Moved;
            moved.push(m.clone());
        }
    }
    let Some(first) = moved.first().cloned() else {
        return;
    };
    let group = fe.worker.scripts.new_group(login, moved, true);
    *first.turn.borrow_mut() = Turn::Lead(Rc::new(group));
    first.wake.notify_one();
}
