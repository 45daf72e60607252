//! `MULTI`/`EXEC`/`DISCARD`/`WATCH`/`UNWATCH`: a transaction is one SQL transaction.
//!
//! - Between `MULTI` and `EXEC` commands are checked (name, arity, authentication) and
//!   queued, as their request bytes; a refused one makes `EXEC` answer `EXECABORT`.
//! - `EXEC` runs the queue in one SQL transaction and commits once: the writes of the
//!   transaction are all committed or none is, and its replies (an array) go out after the
//!   commit. A command failing at run time (`WRONGTYPE`...) answers its error in place and
//!   the others still run, as in Redis.
//! - `WATCH` reads each key's identity and version (`kid`, `version`: every write bumps the
//!   version, a deletion or re-creation changes the row); `EXEC` reads them again with
//!   `FOR UPDATE` inside its transaction and answers a null array, writing nothing, when one
//!   changed (or expired) since.
//!
//! - A key `WATCH` saw absent is checked in repeatable read, which locks the gap the key
//!   would be in: no other client creates it until the commit. Two such `EXEC`s creating
//!   the key deadlock; the one rolled back answers a null array (as for a changed key), as
//!   does any `EXEC` with `WATCH` that meets a deadlock or lock wait timeout.
//!
//! Differences from Redis: other clients' commands may run between the statements of an
//!   `EXEC`; what it wrote is locked until its commit, and what it reads is the latest
//!   committed state (read committed), so it may see a commit that happened after its
//!   first read. An `EXEC` with `WATCH` may answer null after a deadlock though no watched
//!   key changed.

use manifold_redis_proto::{Limits, Reply, Request};

use crate::cmd::{reject_reply, Args, Command, Entry, Kind, Parsed, Reject, Spec};
use crate::errors;
use crate::exec;
use crate::script::{self, Published};
use crate::session::{self, Session};
use crate::store::context::Cx;
use crate::store::{pause_before_retry, Attempts, Decision, StoreError};

/// Commands queued since `MULTI`.
#[derive(Debug, Default)]
pub struct Multi {
    /// The queued requests, re-encoded as multibulk requests.
    buf: Vec<u8>,
    /// Each queued request's command (found when it was queued).
    entries: Vec<&'static Entry>,
    /// A command was refused while queueing: `EXEC` answers `EXECABORT`.
    dirty: bool,
}

impl Multi {
    /// A script is queued: its `EXEC` may run long (the connection watches the client).
    pub fn runs_script(&self) -> bool {
        self.entries.iter().any(|e| matches!(e.kind, Kind::Script))
    }

    /// Bytes the queue holds.
    pub fn held(&self) -> usize {
        self.buf.capacity() + self.entries.capacity() * std::mem::size_of::<&Entry>()
    }
}

/// A key under `WATCH`: what it was when watched.
#[derive(Debug, Clone)]
pub struct Watched {
    db: u8,
    key: Vec<u8>,
    /// Its `kid` and `version`; `None`: absent.
    seen: Option<(u64, u64)>,
}

/// Handles a request that is not batched: the transaction commands, queueing inside
/// `MULTI`, and anything else through [`session::apply`].
pub async fn handle(
    session: &mut Session<'_>,
    parsed: Result<Parsed<'_>, Reject<'_>>,
    out: &mut Vec<u8>,
) {
    // A refused `EXEC` ends the transaction, saying why (Redis's `execCommandAbort`).
    let refused_exec = match &parsed {
        Err(Reject::Arity(entry)) if matches!(entry.kind, Kind::Exec) => {
            let mut text = Vec::new();
            errors::arity(&mut text, "exec");
            Some(text)
        }
        Ok(p) if matches!(p.cmd, Command::Exec) && !session.authenticated => {
            Some(errors::NOAUTH[1..].to_vec())
        }
        _ => None,
    };
    if let Some(reason) = refused_exec {
        session.multi = None;
        session.watched.clear();
        let mut text = b"-EXECABORT Transaction discarded because of: ".to_vec();
        text.extend_from_slice(&reason);
        Reply::new(out, session.proto).error(&text);
        return;
    }
    if session.multi.is_none() {
        match parsed {
            Ok(p) if session.authenticated || p.no_auth() => match p.cmd {
                Command::Multi => {
                    session.info.cmd.set("multi");
                    session.multi = Some(Multi::default());
                    Reply::new(out, session.proto).simple(b"OK");
                }
                Command::Exec => {
                    Reply::new(out, session.proto).error(b"EXEC without MULTI");
                }
                Command::Discard => {
                    Reply::new(out, session.proto).error(b"DISCARD without MULTI");
                }
                Command::Watch(keys) => watch(session, keys, out).await,
                Command::Script(_) => script::handle(session, p, out).await,
                Command::Unwatch => {
                    session.watched.clear();
                    Reply::new(out, session.proto).simple(b"OK");
                }
                _ => {
                    session::apply(session, parsed, out);
                }
            },
            _ => {
                session::apply(session, parsed, out);
            }
        }
        return;
    }
    let parsed = match parsed {
        Err(reject) => {
            reject_reply(reject, session.proto, out);
            flag(session);
            return;
        }
        Ok(p) if !session.authenticated && !p.no_auth() => {
            Reply::new(out, session.proto).error(errors::NOAUTH);
            flag(session);
            return;
        }
        Ok(p) => p,
    };
    match parsed.cmd {
        // Boxed: its future (the queued commands, scripts among them) is larger than the rest
        // of a connection's, and EXEC is rarer than the commands it would weigh on.
        Command::Exec => Box::pin(exec(session, out)).await,
        Command::Discard => {
            session.multi = None;
            session.watched.clear();
            Reply::new(out, session.proto).simple(b"OK");
        }
        Command::Multi => {
            Reply::new(out, session.proto).error(b"MULTI calls can not be nested");
        }
        Command::Watch(_) => {
            Reply::new(out, session.proto).error(b"WATCH inside MULTI is not allowed");
        }
        Command::Quit | Command::Reset => {
            session::apply(session, Ok(parsed), out);
        }
        _ => {
            let multi = session.multi.as_mut().expect("in MULTI");
            let args = parsed.args;
            if multi.buf.len() + args.from(0).map(<[u8]>::len).sum::<usize>()
                > session.fe.shared.limits.client_query_buffer_limit
            {
                Reply::new(out, session.proto)
                    .error(b"manifold: the transaction's queued commands are too large");
                flag(session);
                return;
            }
            encode_request(&mut multi.buf, args);
            multi.entries.push(parsed.entry);
            Reply::new(out, session.proto).simple(b"QUEUED");
        }
    }
}

/// Puts back the database and protocol the session had at `EXEC` (before a try, and when
/// the transaction failed): queued `SELECT`s and `HELLO`s count only in a try that commits.
fn restore(session: &mut Session<'_>, db: u8, proto: manifold_redis_proto::Protocol) {
    session.info.db.set(db);
    session::connection::set_proto(session, proto);
}

/// A refused command inside `MULTI` aborts the transaction at `EXEC`.
fn flag(session: &mut Session<'_>) {
    if let Some(m) = session.multi.as_mut() {
        m.dirty = true;
    }
}

fn encode_request(out: &mut Vec<u8>, args: Args<'_>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args.from(0) {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// `WATCH key...`: remembers each key's identity and version now.
async fn watch(session: &mut Session<'_>, keys: Args<'_>, out: &mut Vec<u8>) {
    session.info.cmd.set("watch");
    let Some(login) = session.login.clone() else {
        Reply::new(out, session.proto).error(b"manifold: no backend login for this client");
        return;
    };
    let db = session.info.db.get();
    let fe = session.fe;
    let mut tx = fe.worker.begin(&login, false);
    let mut seen = Vec::new();
    for k in keys.from(1) {
        match tx.key_meta(db, k, false).await {
            Ok(row) => seen.push(Watched {
                db,
                key: k.to_vec(),
                seen: row.map(|r| (r.kid, r.version)),
            }),
            Err(e) => {
                tx.abandon();
                Reply::new(out, session.proto).error(&e.reply_text());
                return;
            }
        }
    }
    if let Err(e) = tx.commit().await {
        Reply::new(out, session.proto).error(&e.reply_text());
        return;
    }
    session.watched.extend(seen);
    Reply::new(out, session.proto).simple(b"OK");
}

/// One queued command.
enum Step<'a> {
    Data(&'static Spec, Args<'a>),
    /// A connection or server command (`SELECT`, `PING`...): applied in its place.
    Session(Parsed<'a>),
}

/// `EXEC`: the queue as one SQL transaction.
async fn exec(session: &mut Session<'_>, out: &mut Vec<u8>) {
    session.info.cmd.set("exec");
    let multi = session.multi.take().unwrap_or_default();
    let watched = std::mem::take(&mut session.watched);
    if multi.dirty {
        Reply::new(out, session.proto)
            .error(b"-EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    let Some(login) = session.login.clone() else {
        Reply::new(out, session.proto).error(b"manifold: no backend login for this client");
        return;
    };
    // Its scripts' place is taken before its transaction begins (see `script::reserve`).
    let _slot = if multi.runs_script() {
        match script::reserve(session).await {
            Ok(slot) => slot,
            Err(reply) => {
                out.extend_from_slice(&reply);
                return;
            }
        }
    } else {
        None
    };
    // The queued requests' arguments, from their own buffer (their commands were found
    // when they were queued).
    let limits = Limits {
        client_query_buffer_limit: usize::MAX,
        ..session.fe.shared.limits
    };
    let mut requests = Vec::with_capacity(multi.entries.len());
    let mut at = 0;
    while at < multi.buf.len() {
        let mut req = Request::new();
        match req.parse(&multi.buf[at..], &limits) {
            Ok(Some(used)) => {
                requests.push((req, at));
                at += used;
            }
            // Bytes this module encoded: cannot fail.
            _ => break,
        }
    }
    let steps: Vec<Step<'_>> = requests
        .iter()
        .zip(&multi.entries)
        .map(|((req, at), &entry)| {
            let args = Args::new(req, &multi.buf[*at..]);
            match entry.spec() {
                Some(spec) => Step::Data(spec, args),
                None => Step::Session(Parsed {
                    entry,
                    cmd: Command::build(entry, args),
                    args,
                }),
            }
        })
        .collect();
    // A tracking client's reads are remembered before the transaction's first statement:
    // with gap locks (repeatable read) its snapshot is taken there.
    for step in &steps {
        if let Step::Data(spec, args) = *step {
            session::tracking::before_command(session, spec, args);
        }
    }
    let fe = session.fe;
    let db0 = session.info.db.get();
    let proto0 = session.proto;
    // With WATCH, a conflict with another transaction (a deadlock: two EXECs creating a key
    // both saw absent) answers as a changed watched key does: nothing was written, and the
    // client's retry loop reads the key again.
    let mut attempts = Attempts::new(steps.len()).watching(!watched.is_empty());
    // As a batch's (`exec::run_batch`): the keys the write commands name (and the watched
    // ones), locked first in one order, so concurrent EXECs wait for each other instead of
    // deadlocking. Only when every step is a data command of the database at EXEC (no
    // `SELECT`, no script, whose keys are not known here), and in read committed: with
    // gap locks (a watched key seen absent) a locking read of an absent key would lock
    // its gap, which other transactions' inserts then wait for.
    let gap_locks = watched.iter().any(|w| w.seen.is_none());
    let lock_first = match steps
        .iter()
        .map(|step| match step {
            Step::Data(spec, args) => Some((*spec, *args)),
            Step::Session(_) => None,
        })
        .collect::<Option<Vec<_>>>()
    {
        Some(cmds) if !gap_locks && watched.iter().all(|w| w.db == db0) => {
            let mut order = exec::write_key_order(&cmds);
            order.extend(watched.iter().map(|w| crate::store::keys::hash(&w.key)));
            order.sort_unstable();
            order.dedup();
            order
        }
        _ => Vec::new(),
    };
    loop {
        // Each try starts from the session as it was at EXEC.
        restore(session, db0, proto0);
        let mut cx = Cx {
            tx: fe
                .worker
                .begin(&login, true)
                .noting(&session.causal)
                .by(session.info.id),
            out: Vec::new(),
            proto: session.proto,
            db: db0,
            out_limit: fe
                .shared
                .output
                .normal
                .hard_bytes()
                .saturating_sub(out.len()),
            client: Some(crate::store::context::ReplyOwner::new(
                &*session.info.handle,
            )),
        };
        // A key WATCH saw absent must stay absent until the commit: its check locks the gap
        // (in read committed another EXEC could create it between this one's check and its
        // own write, which would then overwrite it: a lost update).
        if gap_locks {
            cx.tx.gap_locks();
        }
        let mut published = Published::default();
        let locked = if lock_first.len() > 1 {
            cx.tx.lock_keys(db0, &lock_first).await.map(drop)
        } else {
            Ok(())
        };
        let result = match locked {
            Ok(()) => {
                run_steps(
                    session,
                    &mut cx,
                    &steps,
                    &watched,
                    attempts.failed(),
                    &mut published,
                )
                .await
            }
            Err(e) => Err((None, e)),
        };
        let (at, e) = match result {
            Ok(Ran::WatchedChanged) => {
                cx.tx.abandon();
                Reply::new(out, proto0).null_array();
                return;
            }
            Ok(Ran::ScriptStopped(reply)) => {
                cx.tx.abandon();
                restore(session, db0, proto0);
                out.extend_from_slice(&reply);
                return;
            }
            Ok(Ran::All) => {
                let Cx {
                    tx, out: replies, ..
                } = cx;
                match tx.commit().await {
                    Ok(()) => {
                        published.deliver(session.fe);
                        // metrics: the calls EXEC ran.
                        session::exec_ran(
                            &fe.worker.metrics,
                            multi.entries.iter().copied(),
                            &replies,
                        );
                        Reply::new(out, proto0).array_len(steps.len());
                        out.extend_from_slice(&replies);
                        return;
                    }
                    Err(e) => (None, e),
                }
            }
            Err((i, e)) => {
                cx.tx.abandon();
                (i, e)
            }
        };
        match attempts.next(at, &e) {
            Decision::Again(pause) => pause_before_retry(pause).await,
            Decision::WatchConflict => {
                restore(session, db0, proto0);
                Reply::new(out, proto0).null_array();
                return;
            }
            // An EXEC never runs on a replica: it writes.
            Decision::OnPrimary | Decision::FailAll => {
                restore(session, db0, proto0);
                Reply::new(out, proto0).error(&e.reply_text());
                return;
            }
        }
    }
}

/// How far an `EXEC`'s steps ran.
enum Ran {
    /// Every step: commit.
    All,
    /// None: a watched key changed.
    WatchedChanged,
    /// A script was stopped (`SCRIPT KILL`, the time limit, its client gone): the
    /// transaction is rolled back and `EXEC` answers this error.
    ScriptStopped(Vec<u8>),
}

/// Checks the watched keys, then runs the steps; what scripts and `PUBLISH`es publish
/// waits in `published` for the commit.
async fn run_steps(
    session: &mut Session<'_>,
    cx: &mut Cx<'_>,
    steps: &[Step<'_>],
    watched: &[Watched],
    failed: &[Option<Vec<u8>>],
    published: &mut Published,
) -> Result<Ran, (Option<usize>, StoreError)> {
    for w in watched {
        let now = cx
            .tx
            .key_meta(w.db, &w.key, true)
            .await
            .map_err(|e| (None, e))?
            .map(|r| (r.kid, r.version));
        if now != w.seen {
            return Ok(Ran::WatchedChanged);
        }
    }
    for (i, step) in steps.iter().enumerate() {
        if let Some(text) = &failed[i] {
            cx.reply().error(text);
            continue;
        }
        match *step {
            Step::Data(spec, args) => {
                exec::run_one(cx, spec, args)
                    .await
                    .map_err(|e| (Some(i), e))?;
            }
            // `INFO` with its keyspace reads it in the transaction.
            Step::Session(parsed) if session::info::needs_keyspace(&parsed) => {
                session::info::reply_in(session, &mut cx.tx, parsed.args, &mut cx.out)
                    .await
                    .map_err(|e| (Some(i), e))?;
            }
            Step::Session(parsed) if matches!(parsed.cmd, Command::Script(_)) => {
                let ran = script::in_exec(session, cx, parsed, published)
                    .await
                    .map_err(|e| (Some(i), e))?;
                if let Err(reply) = ran {
                    return Ok(Ran::ScriptStopped(reply));
                }
            }
            // Sent after the commit, as a script's (never for a transaction rolled back,
            // once when it runs again).
            Step::Session(Parsed {
                cmd: Command::Publish(channel, message),
                ..
            }) => {
                let proto = cx.proto;
                published.publish(session.fe, channel, message, &mut cx.out, proto);
            }
            Step::Session(parsed) => {
                session::apply(session, Ok(parsed), &mut cx.out);
                cx.db = session.info.db.get();
                cx.proto = session.proto;
            }
        }
    }
    Ok(Ran::All)
}
