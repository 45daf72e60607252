//! Batches: the data commands a connection read together run as batched SQL in one
//! transaction, and their replies go out in request order once it committed.
//!
//! - A run of `GET`s is one `SELECT ... WHERE kh IN (...)`; a run of plain `SET`s one
//!   multi-row upsert ([`crate::cmd::strings`]); every other command runs its own statements,
//!   in request order, inside the same transaction, so a read sees the batch's earlier
//!   writes.
//! - A batch that writes commits once, after its last command; its replies are held until
//!   then. A batch that is one statement (a lone `SET`, a run of them, reads) needs no
//!   transaction: the statement commits itself.
//! - A batch without a write command may run on a replica (`redis.read_from =
//!   "replicas"`, [`crate::store::replicas`]), once it has applied the client's last write; if it
//!   fails there, it runs again on the primary. Every other batch runs on the primary, and
//!   what it commits becomes the client's last write.
//! - A command the server refuses (say, a value over `max_allowed_packet`) gets that error
//!   alone: the transaction is rolled back and the batch runs again without it. A deadlock
//!   or lock wait timeout runs the whole batch again. A lost connection fails every
//!   command of the batch: none is acknowledged unless its commit was.

use std::rc::Rc;

use manifold_backend::ConnKey;
use manifold_redis_proto::{Protocol, Reply};

use crate::cmd::strings::StringCommand;
use crate::cmd::typed::DataCommand;
use crate::cmd::{self, Args, Family, Spec};
use crate::store::context::{Cx, ReplyClient, ReplyOwner, RUN_MAX};
use crate::store::keys::lock_order;
use crate::store::replicas::Causal;
use crate::store::{pause_before_retry, Attempts, Decision, StoreError};
use crate::worker::Worker;

/// A plain `SET key value` (no option): it may join a multi-row upsert. (Only a string
/// command is parsed here: the string parsers allocate nothing.)
fn plain_set(spec: &Spec, args: &Args<'_>) -> bool {
    spec.family == Family::Strings
        && matches!((spec.parse)(*args), Ok(DataCommand::Strings(StringCommand::Set(set))) if set.is_plain())
}

/// A `GET`: it may join a run read with one statement.
fn is_get(spec: &Spec, args: &Args<'_>) -> bool {
    spec.family == Family::Strings
        && matches!(
            (spec.parse)(*args),
            Ok(DataCommand::Strings(StringCommand::Get { .. }))
        )
}

/// Runs `cmds` (data commands, arity checked) as one batch and appends their replies, in
/// order, to `out` (`out_limit`: what `out` may hold, the client's output limit).
/// `tracking`: the client tracks keys (`CLIENT TRACKING`), so the batch runs alone, on the
/// primary (`crate::session::tracking` says why).
#[allow(clippy::too_many_arguments)]
pub async fn run_batch(
    worker: &Rc<Worker>,
    login: &Rc<ConnKey>,
    proto: Protocol,
    db: u8,
    causal: &Causal,
    cmds: &[(&'static Spec, Args<'_>)],
    out: &mut Vec<u8>,
    out_limit: usize,
    client: &dyn ReplyClient,
    tracking: bool,
) {
    // Only GETs, or only plain SETs: one statement with other connections' (group commit).
    if !tracking && crate::group::run(worker, login, proto, db, causal, cmds, out, out_limit).await
    {
        return;
    }
    // One statement that commits itself needs no transaction around it.
    let one_statement = cmds.len() <= RUN_MAX
        && (cmds.iter().all(|(s, a)| plain_set(s, a)) || cmds.iter().all(|(s, _)| !s.write));
    let write = !one_statement && cmds.iter().any(|(s, _)| s.write);
    let read_only = cmds.iter().all(|(s, _)| !s.write);
    // A read that failed on a replica runs again on the primary.
    let mut replica = read_only && !tracking;
    // The keys the write commands name, locked first in one order (`Tx::lock_keys`): two
    // pipelines writing the same keys in different orders then wait for each other instead
    // of deadlocking. One key needs no such lock: a batch waiting for it holds no other.
    let lock_first = if write {
        write_key_order(cmds)
    } else {
        Vec::new()
    };
    let mut attempts = Attempts::new(cmds.len());
    // The most of those keys a try found existing (`Attempts::progressed`).
    let mut most_found: Option<usize> = None;
    loop {
        let mut tx = worker.begin(login, write).noting(causal).by(client.id());
        if replica {
            tx = tx.reading_after(vec![causal.clone()]);
        }
        let mut cx = Cx {
            tx,
            out: Vec::new(),
            proto,
            db,
            out_limit: out_limit.saturating_sub(out.len()),
            client: Some(ReplyOwner::new(client)),
        };
        let ran = if lock_first.len() > 1 {
            match cx.tx.lock_keys(db, &lock_first).await {
                Ok(found) => {
                    match most_found {
                        Some(most) if found > most => attempts.progressed(),
                        _ => {}
                    }
                    most_found = Some(most_found.map_or(found, |most| most.max(found)));
                    Ok(())
                }
                Err(e) => Err((None, e)),
            }
        } else {
            Ok(())
        };
        let ran = match ran {
            Ok(()) => run_all(&mut cx, cmds, attempts.failed())
                .await
                .map_err(|(i, e)| (Some(i), e)),
            Err(e) => Err(e),
        };
        let (at, e) = match ran {
            Ok(()) => {
                let Cx {
                    tx, out: replies, ..
                } = cx;
                match tx.commit().await {
                    Ok(()) => {
                        if out.is_empty() {
                            // A large reply is not copied.
                            *out = replies;
                        } else {
                            out.extend_from_slice(&replies);
                        }
                        return;
                    }
                    Err(e) => (None, e),
                }
            }
            Err((at, e)) => {
                cx.tx.abandon();
                (at, e)
            }
        };
        match attempts.next(at, &e) {
            Decision::Again(pause) => pause_before_retry(pause).await,
            Decision::OnPrimary => {
                tracing::debug!(error = %e.reply_text().escape_ascii(), "redis read failed on a replica; the primary serves it");
                replica = false;
            }
            // No `WATCH` here.
            Decision::WatchConflict | Decision::FailAll => {
                let text = e.reply_text();
                for _ in cmds {
                    Reply::new(out, proto).error(&text);
                }
                return;
            }
        }
    }
}

/// The hashes of the keys the write commands of `cmds` name (their key positions), in the
/// order [`crate::store::Tx::lock_keys`] locks them.
pub(crate) fn write_key_order(cmds: &[(&'static Spec, Args<'_>)]) -> Vec<[u8; 32]> {
    lock_order(
        cmds.iter()
            .filter(|(spec, _)| spec.write)
            .flat_map(|(spec, args)| cmd::positional_keys(spec.name, args)),
    )
}

/// Runs every command not in `failed` (which get their error), in order; on a store error,
/// the index of the command it stopped at.
async fn run_all(
    cx: &mut Cx<'_>,
    cmds: &[(&'static Spec, Args<'_>)],
    failed: &[Option<Vec<u8>>],
) -> Result<(), (usize, StoreError)> {
    let mut i = 0;
    while i < cmds.len() {
        if cx.over_limit() {
            // Past the client's output limit: it is closed without these replies, so the
            // rest of the batch is not run (as if it had left mid-pipeline), and reads of
            // more rows stop here.
            return Ok(());
        }
        if let Some(text) = &failed[i] {
            cx.reply().error(text);
            i += 1;
            continue;
        }
        let (spec, args) = cmds[i];
        let run_end = |pred: &dyn Fn(&Spec, &Args<'_>) -> bool, most: usize| {
            let mut j = i;
            while j < cmds.len()
                && j - i < most
                && failed[j].is_none()
                && pred(cmds[j].0, &cmds[j].1)
            {
                j += 1;
            }
            j
        };
        if is_get(spec, &args) {
            let j = run_end(&|s, a| is_get(s, a), RUN_MAX);
            let keys: Vec<&[u8]> = cmds[i..j].iter().map(|(_, a)| a.get(1)).collect();
            cmd::strings::get_run(cx, &keys).await.map_err(|e| (i, e))?;
            i = j;
            continue;
        }
        if plain_set(spec, &args) {
            // The whole run at once: its rows are written in one order across statements,
            // so concurrent pipelines of SETs cannot deadlock each other.
            let j = run_end(&|s, a| plain_set(s, a), usize::MAX);
            let pairs: Vec<(&[u8], &[u8])> = cmds[i..j]
                .iter()
                .map(|(_, a)| (a.get(1), a.get(2)))
                .collect();
            cmd::strings::set_run(cx, &pairs)
                .await
                .map_err(|e| (i, e))?;
            for (k, _) in &pairs {
                cx.tx
                    .notify(crate::store::events::class::STRING, "set", cx.db, k);
            }
            i = j;
            continue;
        }
        run_one(cx, spec, args).await.map_err(|e| (i, e))?;
        cx.note_memory();
        i += 1;
    }
    Ok(())
}

/// Runs one command: its arguments parsed into the typed command (a refusal is its reply,
/// in its place), then applied by its family.
pub(crate) async fn run_one(
    cx: &mut Cx<'_>,
    spec: &'static Spec,
    args: Args<'_>,
) -> Result<(), StoreError> {
    let command = match (spec.parse)(args) {
        Ok(command) => command,
        Err(e) => {
            e.reply(cx);
            return Ok(());
        }
    };
    // Keyspace notifications: the command's events, once it ran (none while off).
    let Some(mark) = cx.tx.events_mark(cx.out.len()) else {
        return command.apply(cx).await;
    };
    command.apply(cx).await?;
    crate::notify::after_command(cx, spec, args, mark);
    Ok(())
}
