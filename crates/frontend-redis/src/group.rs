//! Batches of different connections of one worker, run as one statement: group commit for
//! the commands that dominate Redis workloads.
//!
//! A batch that is only `GET`s, or only plain `SET`s, joins the worker's open group of its
//! kind (same backend login, same database) instead of running alone. The group's task
//! lets the worker's other ready connections join (one turn of the event loop), then runs
//! the whole group as one `SELECT ... IN` or one multi-row upsert, which commits itself:
//! 128 clients sending one `SET` each cost one statement and one commit, not 128. Each
//! member then answers its own client from its share of the result.
//!
//! The group runs in a task of its own, so a member whose client leaves does not stop it.
//! If the server refuses the group's statement (it did nothing: a statement is atomic),
//! every member runs its batch alone, so one client's bad request fails only itself. If
//! the connection is lost during a write, whether it committed is unknown: every member
//! answers the error (never a false `OK`).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use manifold_backend::ConnKey;
use manifold_redis_proto::Protocol;
use tokio::sync::Notify;

use crate::cmd::strings::{self, Found};
use crate::store::context::{Cx, RUN_MAX};
use crate::store::Retry;
use crate::worker::Worker;

/// What a group does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Get,
    Set,
}

/// How a group's statement ended, for its members.
enum Outcome {
    /// `GET`: what each key holds, in the group's order. `SET`: nothing to say.
    Done(Vec<Found>),
    /// The server refused the statement: each member runs alone.
    Refused,
    /// The statement may or may not have run: each member answers this error.
    Failed(Vec<u8>),
}

/// One group: the members' keys (and values) in order, until it runs.
pub struct Group {
    kind: Kind,
    login: Rc<ConnKey>,
    db: u8,
    /// Keys, and values for `SET`, one after the other in `bytes`: (key, value) ranges.
    bytes: RefCell<Vec<u8>>,
    items: RefCell<Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>>,
    /// The members' sessions: a `SET` group's commit is each one's last write; a `GET`
    /// group reads where every one's last write is applied.
    sessions: RefCell<Vec<crate::store::replicas::Causal>>,
    /// No more members (the group's task took it).
    closed: Cell<bool>,
    outcome: RefCell<Option<Outcome>>,
    done: Notify,
}

/// The open groups of a worker (at most one per kind, login and database).
#[derive(Default)]
pub struct Groups {
    open: RefCell<Vec<Weak<Group>>>,
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Groups").finish_non_exhaustive()
    }
}

/// The kind of a batch that may join a group: all `GET`s or all plain `SET`s, at most
/// [`RUN_MAX`] of them.
pub fn kind_of(cmds: &[(&'static crate::cmd::Spec, crate::cmd::Args<'_>)]) -> Option<Kind> {
    if cmds.is_empty() || cmds.len() > RUN_MAX {
        return None;
    }
    if cmds.iter().all(|(s, _)| s.name == "get") {
        Some(Kind::Get)
    } else if cmds.iter().all(|(s, a)| s.name == "set" && a.len() == 3) {
        Some(Kind::Set)
    } else {
        None
    }
}

/// Runs the batch `cmds` in a group and appends its replies; `false` when it must run alone
/// (it is of no group's kind, or the server refused the group's statement). `causal`: the
/// client's last write. `out_limit`: what `out` may hold (the client's output limit).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    worker: &Rc<Worker>,
    login: &Rc<ConnKey>,
    proto: Protocol,
    db: u8,
    causal: &crate::store::replicas::Causal,
    cmds: &[(&'static crate::cmd::Spec, crate::cmd::Args<'_>)],
    out: &mut Vec<u8>,
    out_limit: usize,
) -> bool {
    let Some(kind) = kind_of(cmds) else {
        return false;
    };
    let (group, first) = join(worker, login, db, kind, cmds);
    group.sessions.borrow_mut().push(causal.clone());
    loop {
        let notified = group.done.notified();
        if let Some(outcome) = group.outcome.borrow().as_ref() {
            return answer(outcome, kind, first, cmds.len(), proto, out, out_limit);
        }
        notified.await;
    }
}

/// Adds the batch to the open group of its kind, or opens one (and starts its task);
/// returns the group and the index of the batch's first item in it.
fn join(
    worker: &Rc<Worker>,
    login: &Rc<ConnKey>,
    db: u8,
    kind: Kind,
    cmds: &[(&'static crate::cmd::Spec, crate::cmd::Args<'_>)],
) -> (Rc<Group>, usize) {
    let groups = &worker.groups;
    let found = {
        let mut open = groups.open.borrow_mut();
        open.retain(|g| g.upgrade().is_some_and(|g| !g.closed.get()));
        open.iter().filter_map(Weak::upgrade).find(|g| {
            g.kind == kind
                && g.db == db
                && *g.login == **login
                && g.items.borrow().len() + cmds.len() <= RUN_MAX
        })
    };
    let group = found.unwrap_or_else(|| {
        let g = Rc::new(Group {
            kind,
            login: login.clone(),
            db,
            bytes: RefCell::new(Vec::new()),
            items: RefCell::new(Vec::new()),
            sessions: RefCell::new(Vec::new()),
            closed: Cell::new(false),
            outcome: RefCell::new(None),
            done: Notify::new(),
        });
        groups.open.borrow_mut().push(Rc::downgrade(&g));
        tokio::task::spawn_local(execute(worker.clone(), g.clone()));
        g
    });
    let first = group.items.borrow().len();
    {
        let mut bytes = group.bytes.borrow_mut();
        let mut items = group.items.borrow_mut();
        for (_, args) in cmds {
            let k = args.get(1);
            let key = bytes.len()..bytes.len() + k.len();
            bytes.extend_from_slice(k);
            let v = if kind == Kind::Set {
                args.get(2)
            } else {
                &[][..]
            };
            let value = bytes.len()..bytes.len() + v.len();
            bytes.extend_from_slice(v);
            items.push((key, value));
        }
    }
    (group, first)
}

/// Answers a group's members with an error if its task ends without an outcome (the
/// worker's tasks torn down, a panic): they would otherwise wait forever.
struct Unfinished<'g>(&'g Group);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        let group = self.0;
        if group.outcome.borrow().is_none() {
            *group.outcome.borrow_mut() = Some(Outcome::Failed(
                b"manifold: the grouped statement did not finish".to_vec(),
            ));
            group.done.notify_waiters();
        }
    }
}

/// The group's task: one turn for others to join, then its statement.
async fn execute(worker: Rc<Worker>, group: Rc<Group>) {
    let _unfinished = Unfinished(&group);
    tokio::task::yield_now().await;
    group.closed.set(true);
    let outcome = {
        // Closed: nobody adds to them any more.
        let bytes = group.bytes.take();
        let items = group.items.take();
        let sessions = group.sessions.take();
        let mut tx = worker.begin(&group.login, false);
        match group.kind {
            Kind::Get => tx = tx.reading_after(sessions),
            Kind::Set => {
                for s in &sessions {
                    tx = tx.noting(s);
                }
            }
        }
        let mut cx = Cx {
            tx,
            out: Vec::new(),
            proto: Protocol::Resp2,
            db: group.db,
            out_limit: usize::MAX,
            client: None,
        };
        let result = match group.kind {
            Kind::Get => {
                let keys: Vec<&[u8]> = items.iter().map(|(k, _)| &bytes[k.clone()]).collect();
                strings::fetch(&mut cx, &keys).await
            }
            Kind::Set => {
                let pairs: Vec<(&[u8], &[u8])> = items
                    .iter()
                    .map(|(k, v)| (&bytes[k.clone()], &bytes[v.clone()]))
                    .collect();
                let written = strings::write_values(&mut cx, &pairs, None).await;
                if written.is_ok() {
                    for (k, _) in &pairs {
                        cx.tx
                            .notify(crate::store::events::class::STRING, "set", group.db, k);
                    }
                }
                written.map(|()| Vec::new())
            }
        };
        match result {
            Ok(found) => match cx.tx.commit().await {
                Ok(()) => Outcome::Done(found),
                Err(e) => Outcome::Failed(e.reply_text()),
            },
            Err(e) => {
                cx.tx.abandon();
                match e.retry() {
                    // Whether the write committed is unknown: no member may run it again.
                    Retry::Never if group.kind == Kind::Set => Outcome::Failed(e.reply_text()),
                    // A read may simply run again; a refused statement did nothing (a
                    // conflict too: each member's batch retries it).
                    Retry::Never | Retry::AfterPause | Retry::WithoutCommand | Retry::OnPrimary => {
                        Outcome::Refused
                    }
                }
            }
        }
    };
    *group.outcome.borrow_mut() = Some(outcome);
    group.done.notify_waiters();
}

/// Appends a member's replies from the group's outcome; `false`: run alone.
fn answer(
    outcome: &Outcome,
    kind: Kind,
    first: usize,
    n: usize,
    proto: Protocol,
    out: &mut Vec<u8>,
    out_limit: usize,
) -> bool {
    let mut reply = manifold_redis_proto::Reply::limited(out, proto, out_limit);
    match outcome {
        Outcome::Refused => return false,
        Outcome::Failed(text) => {
            for _ in 0..n {
                reply.error(text);
            }
        }
        Outcome::Done(found) if kind == Kind::Get => {
            for f in found.iter().skip(first).take(n) {
                match f {
                    Found::Nil => reply.null(),
                    Found::Value(v) => reply.bulk(v),
                    Found::WrongType => reply.error(crate::errors::WRONGTYPE),
                };
            }
        }
        Outcome::Done(_) => {
            for _ in 0..n {
                reply.simple(b"OK");
            }
        }
    }
    true
}
