//! Blocking list commands: `BLPOP`, `BRPOP`, `BRPOPLPUSH`, `BLMOVE`, `BLMPOP`; and
//! `XREAD` (with `BLOCK`, woken by `XADD`; without it, one attempt); and the sorted set
//! pops `BZPOPMIN`, `BZPOPMAX`, `BZMPOP`, woken by a sorted set created at their keys.
//!
//! As in Redis 7.0 (`signalKeyAsReady` with the key's type), a key made ready wakes only
//! the clients waiting for its type: a sorted set wakes `BZ*` clients, a list or stream the
//! others (so a `ZADD` never answers a `BLPOP` waiting on that key with `WRONGTYPE`).
//!
//! A blocked client registers on its keys in [`Waiters`] (shared by every worker) *before*
//! each attempt, then tries the command in a transaction of its own
//! ([`crate::cmd::lists::try_blocking`]); with nothing to pop it waits to be woken or for
//! its timeout. A push (through any worker of this manifold) notes its key on its
//! transaction while some client is blocked, and wakes that key's waiters after its commit.
//!
//! No wake-up is lost: a push that committed before the waiter registered is seen by its
//! attempt, and a push still uncommitted holds the list's key row locked, which the
//! attempt's locking read waits for. Pushes made elsewhere (another manifold, SQL) wake
//! nobody: the database is not polled (documented).
//!
//! Redis serves the client blocked longest first; here every waiter of a key is woken and
//! the first attempt to commit wins, the others wait again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use manifold_redis_proto::Reply;
use tokio::sync::Notify;

use crate::cmd::lists::{timeout, timeout_error, try_blocking, Served};
use crate::cmd::{Args, Spec};
use crate::session::Session;
use crate::store::context::Cx;
use crate::store::{pause_before_retry, Attempts, Decision};

/// The clients blocked on each `(db, key)`: their ids, whether they wait for a sorted
/// set, and wake-ups.
type ByKey = HashMap<(u8, Vec<u8>), Vec<(u64, bool, Arc<Notify>)>>;

/// Clients blocked on lists, by `(db, key)`.
#[derive(Default)]
pub struct Waiters {
    /// Registrations now; read by every push (a load) before anything else.
    active: AtomicUsize,
    /// Clients waiting for a push now (their attempt found nothing), for `INFO`.
    waiting: AtomicUsize,
    by_key: Mutex<ByKey>,
}

impl std::fmt::Debug for Waiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiters")
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, ByKey> {
        self.by_key
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether any client is blocked (pushes note their keys only then).
    pub fn active(&self) -> bool {
        // SeqCst: pairs with the registration's increment (see the module's comment).
        self.active.load(Ordering::SeqCst) > 0
    }

    /// Wakes the clients blocked on `key` of `db` for a value of type `kind` (a sorted
    /// set wakes the `BZ*` pops, another type the other commands).
    pub fn wake(&self, db: u8, key: &[u8], kind: u8) {
        let zset = kind == crate::store::keys::kind::ZSET;
        let map = self.lock();
        if let Some(list) = map.get(&(db, key.to_vec())) {
            for (_, for_zset, n) in list {
                if *for_zset == zset {
                    n.notify_one();
                }
            }
        }
    }

    /// The keys of `db` some client is blocked on.
    pub fn keys_in(&self, db: u8) -> Vec<Vec<u8>> {
        let map = self.lock();
        map.keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// Registrations now (one per key of each blocked client).
    pub fn registrations(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Clients waiting for a push or their timeout, as `INFO`'s `blocked_clients` counts
    /// them (and as a test can wait for one to be blocked, as Redis's own tests do).
    pub fn blocked_clients(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// One client counted in [`Waiters::blocked_clients`] while it lives (a wait may be
/// cancelled: the count follows the drop).
struct Waiting<'w>(&'w AtomicUsize);

impl<'w> Waiting<'w> {
    fn new(count: &'w AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A client's registration on its keys; dropping it unregisters.
struct Registration<'w> {
    waiters: &'w Waiters,
    id: u64,
    keys: Vec<(u8, Vec<u8>)>,
    notify: Arc<Notify>,
}

impl<'w> Registration<'w> {
    fn new(waiters: &'w Waiters, id: u64, db: u8, keys: &[&[u8]], zset: bool) -> Self {
        let notify = Arc::new(Notify::new());
        let keys: Vec<(u8, Vec<u8>)> = keys.iter().map(|k| (db, k.to_vec())).collect();
        {
            let mut map = waiters.lock();
            for k in &keys {
                map.entry(k.clone())
                    .or_default()
                    .push((id, zset, notify.clone()));
            }
        }
        waiters.active.fetch_add(keys.len(), Ordering::SeqCst);
        Self {
            waiters,
            id,
            keys,
            notify,
        }
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut map = self.waiters.lock();
        for k in &self.keys {
            if let Some(list) = map.get_mut(k) {
                list.retain(|(id, _, n)| *id != self.id || !Arc::ptr_eq(n, &self.notify));
                if list.is_empty() {
                    map.remove(k);
                }
            }
        }
        self.waiters
            .active
            .fetch_sub(self.keys.len(), Ordering::SeqCst);
    }
}

/// Whether `spec` is a blocking list command.
pub fn is_blocking(spec: &Spec) -> bool {
    matches!(
        spec.name,
        "blpop"
            | "brpop"
            | "brpoplpush"
            | "blmove"
            | "blmpop"
            | "xread"
            | "xreadgroup"
            | "bzpopmin"
            | "bzpopmax"
            | "bzmpop"
    )
}

/// The keys a blocking command waits on.
fn keys<'a>(args: &Args<'a>, name: &str) -> Vec<&'a [u8]> {
    match name {
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => {
            (1..args.len() - 1).map(|i| args.get(i)).collect()
        }
        "brpoplpush" | "blmove" => vec![args.get(1)],
        // BLMPOP/BZMPOP timeout numkeys key...: a bad numkeys is answered by the first
        // attempt.
        _ => {
            let n = crate::cmd::parse_i64(args.get(2))
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(0);
            (3..args.len().min(3 + n)).map(|i| args.get(i)).collect()
        }
    }
}

/// A blocking command between its attempts: registered on its keys until dropped.
pub struct Blocked<'w> {
    registration: Registration<'w>,
    deadline: Option<tokio::time::Instant>,
    login: std::rc::Rc<manifold_backend::ConnKey>,
    db: u8,
    /// The conflicts of this wake-up's attempt.
    attempts: Attempts,
    /// `XREAD`'s IDs as its first attempt resolved them (`$`).
    stream_ids: Vec<crate::cmd::streams::StreamId>,
}

impl<'w> Blocked<'w> {
    /// Checks the command's timeout and registers it on its keys; `None` when it has
    /// answered already (a bad timeout).
    pub fn start(
        session: &Session<'w>,
        spec: &'static Spec,
        args: &Args<'_>,
        out: &mut Vec<u8>,
    ) -> Option<Blocked<'w>> {
        let proto = session.proto;
        let zset = spec.family == crate::cmd::data::Family::ZSets;
        if zset || spec.name == "blmpop" {
            // `BZMPOP` and `BLMPOP` check their numkeys, side and count before their timeout.
            if let Err(e) = (spec.parse)(*args) {
                Reply::new(out, proto).error(&e.text());
                return None;
            }
        }
        let (timeout, keys) = if spec.family == crate::cmd::data::Family::Streams {
            match crate::cmd::streams::blocking_keys(spec, args) {
                Ok(found) => found,
                Err(text) => {
                    Reply::new(out, proto).error(&text);
                    return None;
                }
            }
        } else {
            let Ok(timeout) = timeout(args, spec.name) else {
                Reply::new(out, proto).error(timeout_error(args, spec.name));
                return None;
            };
            (timeout, keys(args, spec.name))
        };
        let Some(login) = session.login.clone() else {
            Reply::new(out, proto).error(b"manifold: no backend login for this client");
            return None;
        };
        let db = session.info.db.get();
        let fe: &'w crate::server::RedisFrontend = session.fe;
        Some(Blocked {
            registration: Registration::new(&fe.worker.waiters, session.info.id, db, &keys, zset),
            // A deadline past what the clock can hold is no deadline.
            deadline: timeout.and_then(|t| tokio::time::Instant::now().checked_add(t)),
            login,
            db,
            attempts: Attempts::new(0),
            stream_ids: Vec::new(),
        })
    }

    /// One attempt, in a transaction of its own, never to be cut short (its statements and
    /// commit finish). `true` when the command has answered.
    pub async fn attempt(
        &mut self,
        session: &Session<'_>,
        spec: &'static Spec,
        args: Args<'_>,
        out: &mut Vec<u8>,
    ) -> bool {
        let proto = session.proto;
        let worker = &session.fe.worker;
        loop {
            let mut cx = Cx {
                tx: worker
                    .begin(&self.login, true)
                    .noting(&session.causal)
                    .by(session.info.id),
                out: Vec::new(),
                proto,
                db: self.db,
                // A pop with a huge count is cut at the client's output limit as any reply
                // (the client is then closed); what it popped is still removed.
                out_limit: session
                    .fe
                    .shared
                    .output
                    .normal
                    .hard_bytes()
                    .saturating_sub(out.len()),
                client: Some(crate::store::context::ReplyOwner::new(
                    &*session.info.handle,
                )),
            };
            let mark = cx.tx.events_mark(0);
            let tried = if spec.family == crate::cmd::data::Family::Streams {
                crate::cmd::streams::try_blocking(&mut cx, spec, args, &mut self.stream_ids).await
            } else if spec.family == crate::cmd::data::Family::ZSets {
                crate::cmd::zsets::try_blocking(&mut cx, spec, args).await
            } else {
                try_blocking(&mut cx, spec, args).await
            };
            if let (Ok(Served::Yes), Some(mark)) = (&tried, mark) {
                crate::notify::after_command(&mut cx, spec, args, mark);
            }
            let e = match tried {
                Ok(served) => {
                    let Cx { tx, out: reply, .. } = cx;
                    if served == Served::Yes && session.info.handle.is_killed() {
                        // Killed during the attempt: what it popped goes back.
                        tx.abandon();
                        return true;
                    }
                    match tx.commit().await {
                        Ok(()) if served == Served::Yes => {
                            out.extend_from_slice(&reply);
                            return true;
                        }
                        Ok(()) => {
                            self.attempts = Attempts::new(0);
                            return false;
                        }
                        Err(e) => e,
                    }
                }
                Err(e) => {
                    cx.tx.abandon();
                    e
                }
            };
            // The command is the attempt's only one: nothing runs without it.
            match self.attempts.next(None, &e) {
                Decision::Again(pause) => pause_before_retry(pause).await,
                Decision::OnPrimary | Decision::WatchConflict | Decision::FailAll => {
                    Reply::new(out, proto).error(&e.reply_text());
                    return true;
                }
            }
        }
    }

    /// Waits for a push on one of the keys (`true`) or the timeout (`false`, the null
    /// array answered). Cancel-safe: a push while nobody waits is kept for the next wait.
    pub async fn wait(&self, proto: manifold_redis_proto::Protocol, out: &mut Vec<u8>) -> bool {
        let notified = self.registration.notify.notified();
        let _waiting = Waiting::new(&self.registration.waiters.waiting);
        let woken = if let Some(at) = self.deadline {
            tokio::time::timeout_at(at, notified).await.is_ok()
        } else {
            notified.await;
            true
        };
        if !woken {
            Reply::new(out, proto).null_array();
        }
        woken
    }
}
