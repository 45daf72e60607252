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
//!   "replicas"`, [`crate::replicas`]), once it has applied the client's last write; if it
//!   fails there, it runs again on the primary. Every other batch runs on the primary, and
//!   what it commits becomes the client's last write.
//! - A command the server refuses (say, a value over `max_allowed_packet`) gets that error
//!   alone: the transaction is rolled back and the batch runs again without it. A deadlock
//!   or lock wait timeout runs the whole batch again. A lost connection fails every
//!   command of the batch: none is acknowledged unless its commit was.

use std::ops::ControlFlow;
use std::rc::Rc;

use manifold_backend::{ConnKey, Param};
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::{Protocol, Reply};

use crate::cmd::strings::StringCommand;
use crate::cmd::typed::DataCommand;
use crate::cmd::{self, Args, Family, Spec};
use crate::kill::ClientHandle;
use crate::replicas::Causal;
use crate::store::{pause_before_retry, Attempts, Decision, StoreError, Tx};
use crate::worker::Worker;

/// Most keys in one batched statement.
pub const RUN_MAX: usize = 128;

/// What a command runs with: the batch's transaction, and the buffer its reply goes to.
pub struct Cx<'s> {
    pub tx: Tx<'s>,
    pub out: Vec<u8>,
    pub proto: Protocol,
    /// The client's `SELECT`ed database.
    pub db: u8,
    /// Bytes `out` may hold: what the client's output buffer limit leaves. Past it replies
    /// stop growing ([`Reply::limited`]) and the connection is closed once the batch ends.
    pub out_limit: usize,
    /// The client the replies are for (`None`: replies shared by several clients).
    pub client: Option<ReplyOwner<'s>>,
}

/// The client a batch's replies are for: while they grow, what they hold is published on
/// its handle, so the clients' memory budget (`max_memory_clients`) counts a reply under
/// way and not only one waiting to be written; and a client evicted (or killed) meanwhile
/// stops its replies there, as it is closed without them.
pub struct ReplyOwner<'s> {
    handle: &'s ClientHandle,
    /// What the client held before the batch (its request and reply buffers).
    base: u64,
    /// The reply buffer's capacity last published.
    noted: usize,
}

/// The batch's replies are the connection's to count again once it ends: what the client
/// held before is published back (the connection publishes what it holds next).
impl Drop for ReplyOwner<'_> {
    fn drop(&mut self) {
        if self.noted != 0 {
            self.handle.note_memory(self.base);
        }
    }
}

impl<'s> ReplyOwner<'s> {
    pub fn new(handle: &'s ClientHandle) -> Self {
        Self {
            handle,
            base: handle.memory(),
            noted: 0,
        }
    }

    /// Publishes what the client holds with a reply buffer of `capacity` bytes, when that
    /// changed (a plain store, at most once per doubling of the buffer); `false` once the
    /// client was killed.
    fn note(&mut self, capacity: usize) -> bool {
        if capacity != self.noted {
            self.noted = capacity;
            self.handle.note_memory(self.base + capacity as u64);
        }
        !self.handle.is_killed()
    }
}

impl Cx<'_> {
    pub fn reply(&mut self) -> Reply<'_> {
        Reply::limited(&mut self.out, self.proto, self.out_limit)
    }

    /// The replies passed the client's output limit, or the client was killed (evicted by
    /// the memory budget, `CLIENT KILL`): whatever follows is dropped, so a command may stop
    /// producing it.
    pub fn over_limit(&self) -> bool {
        self.out.len() > self.out_limit
            || self.client.as_ref().is_some_and(|c| c.handle.is_killed())
    }

    /// Publishes what the replies hold now ([`ReplyOwner`]).
    fn note_memory(&mut self) {
        if let Some(c) = self.client.as_mut() {
            c.note(self.out.capacity());
        }
    }

    /// The batch's clock, in Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.tx.now_ms
    }

    /// Replies with one aggregate (array, map, set) made of the rows of `sql`, written as
    /// they are read: `element` appends a row's elements and says how many units of the
    /// header it adds (0 for a row it skips); `header` then writes the aggregate's header for
    /// that many units in front of them (one move of this reply's bytes). Once the replies
    /// pass the client's output limit the rest of the rows are dropped unread by `element`
    /// (the client is closed without them), so a collection of any size costs about the
    /// output limit plus one row, never the whole result set. Returns the units counted.
    pub async fn stream_reply(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        header: impl FnOnce(&mut Reply<'_>, usize),
        element: impl FnMut(&mut Reply<'_>, Vec<Value>) -> usize,
    ) -> Result<usize, StoreError> {
        self.stream(sql, params, header, element).await
    }

    /// The rows of `sql` for a reply that writes each of them at least once, every column a
    /// bulk string, plus `row_extra` bytes per row (say a RESP3 pair's header): read until
    /// what those bulks take in the reply (their real RESP size, never more) passes what the
    /// client's output limit leaves, so they never cost much more than the limit. `false`
    /// with them when that stopped the read: then writing each row once passes the limit
    /// (the client is closed without that reply); the caller must not stand other rows in
    /// for the ones left unread.
    pub async fn rows_for_reply(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        row_extra: usize,
    ) -> Result<(Vec<Vec<Value>>, bool), StoreError> {
        let budget = self.out_limit.saturating_sub(self.out.len());
        let (mut rows, mut held, mut whole) = (Vec::new(), 0usize, true);
        self.tx
            .exec_each(sql, params, |row| {
                held += row_extra
                    + row
                        .iter()
                        .map(|v| match v {
                            Value::Bytes(b) => bulk_size(b.len()),
                            // A null is `_\r\n` in RESP3.
                            _ => 3,
                        })
                        .sum::<usize>();
                rows.push(row);
                if held > budget {
                    whole = false;
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .await?;
        Ok((rows, whole))
    }

    async fn stream(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        header: impl FnOnce(&mut Reply<'_>, usize),
        mut element: impl FnMut(&mut Reply<'_>, Vec<Value>) -> usize,
    ) -> Result<usize, StoreError> {
        let at = self.out.len();
        let (out, proto, limit) = (&mut self.out, self.proto, self.out_limit);
        let client = &mut self.client;
        let (mut units, mut killed) = (0usize, false);
        self.tx
            .exec_each(sql, params, |row| {
                let mut reply = Reply::limited(out, proto, limit);
                units += element(&mut reply, row);
                let over = reply.over_limit();
                killed = killed || client.as_mut().is_some_and(|c| !c.note(out.capacity()));
                if over || killed {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .await?;
        if killed {
            // The client goes without this reply: the replies before it stay whole.
            self.out.truncate(at);
        } else if self.out.len() <= self.out_limit {
            let mut head = Vec::with_capacity(24);
            header(&mut Reply::new(&mut head, proto), units);
            self.out.splice(at..at, head);
        }
        Ok(units)
    }
}

/// The bytes of a bulk string of `len` bytes in a reply: `$<len>\r\n<bytes>\r\n`.
pub fn bulk_size(len: usize) -> usize {
    let mut digits = 1;
    let mut rest = len / 10;
    while rest > 0 {
        digits += 1;
        rest /= 10;
    }
    len + digits + 5
}

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
    client: &ClientHandle,
) {
    // Only GETs, or only plain SETs: one statement with other connections' (group commit).
    if crate::group::run(worker, login, proto, db, causal, cmds, out, out_limit).await {
        return;
    }
    // One statement that commits itself needs no transaction around it.
    let one_statement = cmds.len() <= RUN_MAX
        && (cmds.iter().all(|(s, a)| plain_set(s, a)) || cmds.iter().all(|(s, _)| !s.write));
    let write = !one_statement && cmds.iter().any(|(s, _)| s.write);
    let read_only = cmds.iter().all(|(s, _)| !s.write);
    // A read that failed on a replica runs again on the primary.
    let mut replica = read_only;
    let mut attempts = Attempts::new(cmds.len());
    loop {
        let mut tx = worker.begin(login, write).noting(causal);
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
        let (at, e) = match run_all(&mut cx, cmds, attempts.failed()).await {
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
            Err((i, e)) => {
                cx.tx.abandon();
                (Some(i), e)
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
    command.apply(cx).await
}
