//! One client connection: read, parse every complete request, apply them in order, write
//! all their replies at once.
//!
//! The connection owns one input buffer and one output buffer, reused for its whole life.
//! Requests are parsed in place ([`Request::parse`]: arguments are ranges of the input
//! buffer), so a request costs no allocation beyond what its reply needs. A protocol error
//! gets Redis's reply after the replies of the requests before it, and ends this connection
//! only.
//!
//! Memory ([`crate::memory`]): replies are cut off past the client's output buffer limit
//! while they are produced, and the client is then closed without them (Redis's
//! `client-output-buffer-limit`); a write that makes no progress for `write_timeout`, or
//! stays above the soft limit for its seconds, closes the client; the request buffer is
//! bounded by `client_query_buffer_limit`; what the buffers hold is noted on the client's
//! handle for `max_memory_clients`.

use std::time::{Duration, Instant};

use manifold_redis_proto::{Protocol, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A client's connection: TCP, or TLS over TCP.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin {}
impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Stream for S {}

use crate::cmd::{Args, Command, Parsed, Reject, Spec};
use crate::server::{ClientInfo, RedisFrontend};
use crate::session::{self, Session};

/// What the buffers start with, and shrink back to after a large request.
const BUF_SIZE: usize = 16 * 1024;
/// Bytes read at least per read.
const READ_CHUNK: usize = 16 * 1024;
/// Unparsed bytes past which no more is read before the waiting batch runs.
const MAX_EXTRA_INPUT: usize = 1 << 20;
/// Replies held before they are written, whatever is still to be parsed.
const MAX_PENDING_OUTPUT: usize = 64 * 1024;

/// Serves `stream` until the client leaves, sends `QUIT`, breaks the protocol, stays idle
/// past `idle_timeout`, or the worker drains.
pub async fn serve<S: Stream>(fe: &RedisFrontend, stream: S, info: &ClientInfo) {
    let mut session = Session {
        fe,
        info,
        authenticated: false,
        login: None,
        multi: None,
        watched: Vec::new(),
        subs: None,
        tracking: None,
        proto: Protocol::Resp2,
        quit: false,
        causal: crate::store::replicas::Causal::default(),
        auth_failures: 0,
        login_attempt: None,
    };
    // Its subscriptions end with the connection, also when its task is dropped.
    let leave = Leave(&mut session);
    serve_session(leave.0, stream).await;
}

/// Ends a session's subscriptions when dropped.
struct Leave<'a, 's>(&'a mut Session<'s>);

impl Drop for Leave<'_, '_> {
    fn drop(&mut self) {
        crate::pubsub::leave(self.0);
    }
}

/// What a read of the client's socket waited for.
enum Woken {
    Read(usize),
    Message(Option<std::sync::Arc<crate::pubsub::Message>>),
    /// Idle past the timeout, a read error, or the worker drains.
    End,
}

async fn serve_session<S: Stream>(session: &mut Session<'_>, mut stream: S) {
    let fe = session.fe;
    let info = session.info;
    let limits = &fe.shared.limits;
    let idle_timeout = fe.shared.config.idle_timeout;
    let auth_timeout = fe.shared.config.auth_timeout;
    let metrics = fe.worker.metrics.clone(); // this worker's figures
                                             // What the buffers held when last noted for `max_memory_clients`.
    let mut noted = 0;
    let mut input: Vec<u8> = Vec::with_capacity(BUF_SIZE);
    let mut out: Vec<u8> = Vec::with_capacity(BUF_SIZE);
    let mut req = Request::new();
    // Data commands read together, waiting to run as one batch: each request with where
    // its bytes start in `input` and its command (kept for the connection's life, reused).
    let mut batch: Vec<Batched> = Vec::new();
    let mut batched = 0;
    loop {
        // Every complete request in the buffer, in order, until the replies pass
        // `MAX_PENDING_OUTPUT`: they are written first, so a client that sends and never
        // reads is held back by its own socket instead of growing manifold's memory.
        let mut start = 0;
        let mut failed = false;
        let mut more = false;
        loop {
            req.set_auth_required(!session.authenticated);
            let buf = &input[start..];
            match parse(&metrics, &mut req, buf, limits) {
                Ok(Some(used)) => {
                    if !req.is_empty() {
                        // The request's command, found once: batching, dispatch, `MULTI`
                        // and the figures all take it from here.
                        let parsed = Command::parse(Args::new(&req, buf));
                        let data =
                            session::batched(session, &parsed).and_then(|e| Some((e, e.spec()?)));
                        let entry = match &parsed {
                            Ok(p) => Some(p.entry),
                            Err(crate::cmd::Reject::Arity(e)) => Some(*e),
                            Err(_) => None,
                        };
                        if let Some((_, spec)) =
                            data.filter(|(_, s)| crate::blocking::is_blocking(s))
                        {
                            run_batch(session, &batch[..batched], &input, &mut out).await;
                            batched = 0;
                            // `XREAD` (without `BLOCK` too) reads: remembered first.
                            session::tracking::before_command(session, spec, Args::new(&req, buf));
                            let Some(side) = block(
                                session,
                                &mut stream,
                                spec,
                                Args::new(&req, &input[start..]),
                                &mut out,
                            )
                            .await
                            else {
                                return;
                            };
                            input.extend_from_slice(&side);
                        } else if let Some((entry, spec)) = data {
                            // A tracking client's keys are remembered before they are read.
                            if session.tracking.is_some() {
                                session::tracking::before_command(
                                    session,
                                    spec,
                                    Args::new(&req, buf),
                                );
                            }
                            if batched == batch.len() {
                                batch.push(Batched {
                                    req: Request::new(),
                                    at: 0,
                                    spec,
                                    slot: entry.slot,
                                });
                            }
                            let b = &mut batch[batched];
                            std::mem::swap(&mut req, &mut b.req);
                            (b.at, b.spec, b.slot) = (start, spec, entry.slot);
                            batched += 1;
                        } else if let Some(script) = runs_long(session, &parsed) {
                            run_batch(session, &batch[..batched], &input, &mut out).await;
                            batched = 0;
                            let side = if script {
                                until_script_ends(session, &mut stream, parsed, &mut out).await
                            } else {
                                until_answered(session, &mut stream, parsed, &mut out).await
                            };
                            let Some(side) = side else {
                                return;
                            };
                            input.extend_from_slice(&side);
                        } else {
                            run_batch(session, &batch[..batched], &input, &mut out).await;
                            batched = 0;
                            session::handle(session, parsed, &mut out).await;
                        }
                        if session.tracking.is_some() {
                            session::tracking::after_command(session, entry);
                            if batched == 0 {
                                session::tracking::flush_pushes(session, &mut out);
                            }
                        }
                    }
                    start += used;
                    if batched >= crate::store::context::RUN_MAX * 2 {
                        run_batch(session, &batch[..batched], &input, &mut out).await;
                        batched = 0;
                    }
                    if session.quit {
                        break;
                    }
                    if out.len() >= MAX_PENDING_OUTPUT {
                        more = true;
                        break;
                    }
                }
                Ok(None) => {
                    // Data commands wait for their batch: what the socket holds already
                    // joins them, so a pipeline larger than one read is one batch.
                    if batched > 0 && input.len() - start < MAX_EXTRA_INPUT {
                        input.reserve(READ_CHUNK);
                        if matches!(read_now(&mut stream, &mut input), Some(n) if n > 0) {
                            continue;
                        }
                    }
                    break;
                }
                Err(e) => {
                    run_batch(session, &batch[..batched], &input, &mut out).await;
                    batched = 0;
                    if let manifold_redis_proto::ProtocolError::QueryBufferLimit {
                        needed, ..
                    } = e
                    {
                        metrics.query_limit_closed.add(1); // metrics
                        tracing::warn!(target: "manifold::connections", client = %info.addr, id = info.id, needed, limit = limits.client_query_buffer_limit, "closing Redis client that reached max query buffer length (redis.client_query_buffer_limit)");
                    }
                    tracing::debug!(target: "manifold::connections", client = %info.addr, error = %e, "redis protocol error");
                    if let Some(reply) = e.reply() {
                        out.extend_from_slice(&reply);
                    }
                    failed = true;
                    break;
                }
            }
        }
        run_batch(session, &batch[..batched], &input, &mut out).await;
        batched = 0;
        // Replies past the output limit were cut off: the client is closed without them.
        if out.len() > output_class(session).hard_bytes() {
            over_output_limit(session, out.len());
            return;
        }
        note_memory(session, &input, &out, &mut noted);
        // A client that stops reading is let go after `write_timeout` (a drain lets replies
        // under way finish, until the shutdown deadline).
        if !out.is_empty() && !write_replies(session, &mut stream, &mut out).await {
            return;
        }
        if failed || session.quit {
            let _ = stream.shutdown().await;
            return;
        }
        input.drain(..start);
        if more {
            // The rest of what was read, after the other connections of the worker had a turn.
            tokio::task::yield_now().await;
            continue;
        }
        if input.is_empty() && input.capacity() > 4 * BUF_SIZE {
            input.shrink_to(BUF_SIZE);
        }
        let want = req.needed().saturating_sub(input.len()).max(READ_CHUNK);
        input.reserve(want);
        note_memory(session, &input, &out, &mut noted);
        let n = loop {
            // Subscribers are never idle (as in Redis): they wait for messages.
            if !session.authenticated
                && !auth_timeout.is_zero()
                && info.created.elapsed() >= auth_timeout
            {
                // Not logged in in time, however busy it keeps the connection.
                return;
            }
            let idle = if crate::pubsub::subscribed(session) {
                Duration::ZERO
            } else if !session.authenticated && !auth_timeout.is_zero() {
                // Not logged in yet: what is left of `auth_timeout` since it connected
                // (a moment at least, so that the read fails at once when it is past).
                let left = auth_timeout
                    .saturating_sub(info.created.elapsed())
                    .max(Duration::from_millis(1));
                if idle_timeout.is_zero() {
                    left
                } else {
                    left.min(idle_timeout)
                }
            } else {
                idle_timeout
            };
            let read = stream.read_buf(&mut input);
            let woken = tokio::select! {
                biased;
                () = fe.ctx.drain().notified() => Woken::End,
                () = info.handle.killed() => Woken::End,
                m = crate::pubsub::next_message(&mut session.subs) => Woken::Message(m),
                r = async {
                    if idle.is_zero() {
                        Some(read.await)
                    } else {
                        tokio::time::timeout(idle, read).await.ok()
                    }
                } => match r {
                    Some(Ok(n)) => Woken::Read(n),
                    // Idle past the timeout, or a read error: Redis closes without a word.
                    _ => Woken::End,
                },
            };
            match woken {
                Woken::Read(n) => break n,
                // Too slow a subscriber is let go.
                Woken::End | Woken::Message(None) => return,
                Woken::Message(Some(m)) => {
                    let subscribed = crate::pubsub::subscribed(session);
                    m.encode(&mut out, session.proto, subscribed);
                    if let Some(subs) = session.subs.as_mut() {
                        while out.len() < MAX_PENDING_OUTPUT {
                            let Some(m) = subs.try_next() else { break };
                            m.encode(&mut out, session.proto, subscribed);
                        }
                    }
                    if out.is_empty() {
                        // Nothing this client is sent (an invalidation to RESP2).
                        continue;
                    }
                    if !write_replies(session, &mut stream, &mut out).await {
                        return;
                    }
                }
            }
        };
        if n == 0 {
            return;
        }
        metrics.read(n);
        info.last_active.set(Instant::now());
    }
}

/// Parses one request with [`Request::parse`], timing it (`parse`) when one was complete.
#[inline]
pub fn parse(
    m: &crate::metrics::WorkerMetrics,
    req: &mut Request,
    buf: &[u8],
    limits: &manifold_redis_proto::Limits,
) -> Result<Option<usize>, manifold_redis_proto::ProtocolError> {
    let from = crate::metrics::now();
    let parsed = req.parse(buf, limits);
    if matches!(parsed, Ok(Some(_))) {
        m.record(crate::metrics::Stage::Parse, from);
    }
    parsed
}

/// Runs the blocking command `spec` until it answers, reading (and keeping) what the client
/// sends meanwhile; `None` when the client left or the worker drains (the wait is
/// abandoned: nothing was popped for it).
async fn block<S: Stream>(
    session: &mut Session<'_>,
    stream: &mut S,
    spec: &'static Spec,
    args: Args<'_>,
    out: &mut Vec<u8>,
) -> Option<Vec<u8>> {
    let fe = session.fe;
    let limit = fe.shared.limits.client_query_buffer_limit;
    let mut side = Vec::new();
    let Some(mut blocked) = crate::blocking::Blocked::start(session, spec, &args, out) else {
        return Some(side);
    };
    // An attempt is never cut short; between attempts the client leaving (what it sends
    // meanwhile is kept), a kill or a drain end the wait.
    while !blocked.attempt(session, spec, args, out).await {
        let woken = tokio::select! {
            biased;
            () = fe.ctx.drain().notified() => None,
            () = session.info.handle.killed() => None,
            () = client_gone(stream, &mut side, limit) => None,
            w = blocked.wait(session.proto, out) => Some(w),
        };
        match woken {
            None => return None,
            Some(false) => break,
            Some(true) => {}
        }
    }
    if session.info.handle.is_killed() {
        return None;
    }
    Some(side)
}

/// Ends when the client leaves; what it sends meanwhile goes to `side` (up to `limit`,
/// then it is held back by its own socket).
async fn client_gone<S: Stream>(stream: &mut S, side: &mut Vec<u8>, limit: usize) {
    read_aside(stream, side, limit, true).await;
}

/// Reads what the client sends into `side` (up to `limit`); ends on a broken connection,
/// and on the end of its input only when `eof_ends` (else it stops reading there: a client
/// that half-closed after its request still waits for the reply).
async fn read_aside<S: Stream>(stream: &mut S, side: &mut Vec<u8>, limit: usize, eof_ends: bool) {
    loop {
        if side.len() >= limit {
            std::future::pending::<()>().await;
        }
        side.reserve(READ_CHUNK);
        match stream.read_buf(side).await {
            Ok(0) if !eof_ends => std::future::pending::<()>().await,
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Runs a request that may wait long ([`runs_long`]) until it answers, reading (and keeping)
/// what the client sends meanwhile; `None` when the client left, was killed or the worker
/// drains (the wait is dropped: it changed nothing).
async fn until_answered<S: Stream>(
    session: &mut Session<'_>,
    stream: &mut S,
    parsed: Result<Parsed<'_>, Reject<'_>>,
    out: &mut Vec<u8>,
) -> Option<Vec<u8>> {
    let (fe, info) = (session.fe, session.info);
    let limit = fe.shared.limits.client_query_buffer_limit;
    let mut side = Vec::new();
    let answered = tokio::select! {
        biased;
        () = fe.ctx.drain().notified() => false,
        () = info.handle.killed() => false,
        () = client_gone(stream, &mut side, limit) => false,
        () = session::handle(session, parsed, out) => true,
    };
    answered.then_some(side)
}

/// The request may run long with the client watched meanwhile: `Some(true)` when it runs a
/// script (`EVAL`... outside `MULTI`, or an `EXEC` that queued one: [`until_script_ends`]),
/// `Some(false)` when it waits on something other than a key (`WAIT` outside `MULTI`:
/// [`until_answered`]).
fn runs_long(session: &Session<'_>, parsed: &Result<Parsed<'_>, Reject<'_>>) -> Option<bool> {
    if !session.authenticated {
        return None;
    }
    let Ok(parsed) = parsed else {
        return None;
    };
    match parsed.cmd {
        Command::Script(_) if session.multi.is_none() => Some(true),
        Command::Exec
            if session
                .multi
                .as_ref()
                .is_some_and(crate::multi::Multi::runs_script) =>
        {
            Some(true)
        }
        Command::Wait(_) if session.multi.is_none() => Some(false),
        _ => None,
    }
}

/// Runs a script's request to its end, reading (and keeping) what the client sends
/// meanwhile. A client whose connection breaks (reset) is marked killed, as `CLIENT KILL`
/// marks it, which stops its script and rolls it back at once ([`crate::script`]) rather
/// than letting it run on with no one to answer; one that only ends its input is still
/// answered. The script's end is always awaited (its transaction is ended, never dropped
/// half-way). `None` when the client left or was killed.
async fn until_script_ends<S: Stream>(
    session: &mut Session<'_>,
    stream: &mut S,
    parsed: Result<Parsed<'_>, Reject<'_>>,
    out: &mut Vec<u8>,
) -> Option<Vec<u8>> {
    let (fe, info) = (session.fe, session.info);
    let limit = fe.shared.limits.client_query_buffer_limit;
    let mut side = Vec::new();
    let mut run = std::pin::pin!(session::handle(session, parsed, out));
    let left = tokio::select! {
        biased;
        () = &mut run => false,
        // A reset connection stops the script; one that only ended its input (a client
        // that half-closed, or closed, after sending) lets it end and commit, as Redis
        // runs a script to its end.
        () = read_aside(stream, &mut side, limit, false) => true,
    };
    if left {
        info.handle.kill();
        run.await;
    }
    (!info.handle.is_killed()).then_some(side)
}

/// Reads what `stream` holds now, without waiting: `None` when nothing is there yet.
fn read_now<S: Stream>(stream: &mut S, input: &mut Vec<u8>) -> Option<usize> {
    use std::future::Future;
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut read = std::pin::pin!(stream.read_buf(input));
    match read.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(n)) => Some(n),
        _ => None,
    }
}

/// The output limit class of the client: `pubsub` while subscribed, else `normal`.
fn output_class(session: &Session<'_>) -> crate::memory::ClassLimit {
    let output = &session.fe.shared.output;
    if crate::pubsub::subscribed(session) {
        output.pubsub
    } else {
        output.normal
    }
}

/// Logs and counts a client closed for replies past its output limit.
fn over_output_limit(session: &Session<'_>, bytes: usize) {
    let info = session.info;
    session.fe.worker.metrics.output_limit_closed.add(1); // metrics
    tracing::warn!(target: "manifold::connections", client = %info.addr, id = info.id, bytes, "Redis client closed for overcoming of output buffer limits (redis.client_output_buffer_limit)");
}

/// Notes on the client's handle what its buffers hold (for `max_memory_clients`), when it
/// changed since `noted`.
fn note_memory(session: &Session<'_>, input: &Vec<u8>, out: &Vec<u8>, noted: &mut u64) {
    let multi = session.multi.as_ref().map_or(0, crate::multi::Multi::held);
    let now = (input.capacity() + out.capacity() + multi) as u64;
    if now != *noted {
        *noted = now;
        session.info.handle.note_memory(now);
    }
}

/// How long a write may make no progress: `write_timeout`, or `idle_timeout` when shorter
/// (a client stalled that way is idle too); 0: no limit.
fn write_timeout(config: &crate::RedisConfig) -> Duration {
    match (config.write_timeout, config.idle_timeout) {
        (w, i) if w.is_zero() => i,
        (w, i) if i.is_zero() => w,
        (w, i) => w.min(i),
    }
}

/// How a write of replies ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrote {
    All,
    /// The client is gone, or was killed.
    Gone,
    /// No progress for `write_timeout`.
    TimedOut,
    /// Above the soft output limit for its seconds.
    SoftLimit,
}

/// Writes `out` (timed and counted) and clears it; `false` when the client is to be closed
/// (logged and counted here).
async fn write_replies<S: Stream>(
    session: &Session<'_>,
    stream: &mut S,
    out: &mut Vec<u8>,
) -> bool {
    let fe = session.fe;
    let class = output_class(session);
    let metrics = &fe.worker.metrics;
    let wrote = metrics
        .write(
            out.len(),
            write_out(
                stream,
                out,
                write_timeout(&fe.shared.config),
                class,
                &session.info.handle,
            ),
        )
        .await;
    let info = session.info;
    match wrote {
        Wrote::All => return true,
        Wrote::Gone => {}
        Wrote::TimedOut => {
            metrics.write_timeout_closed.add(1); // metrics
            tracing::info!(target: "manifold::connections", client = %info.addr, id = info.id, "Redis client closed: it took none of its replies for redis.write_timeout");
        }
        Wrote::SoftLimit => over_output_limit(session, out.len()),
    }
    false
}

/// Writes `out` and clears it; stops (the client is to be closed) when it is gone or
/// killed, when a write makes no progress for `timeout` (0: no limit), or when more than
/// the soft limit of `class` stays unwritten for its seconds.
async fn write_out<S: Stream>(
    stream: &mut S,
    out: &mut Vec<u8>,
    timeout: Duration,
    class: crate::memory::ClassLimit,
    handle: &crate::kill::ClientHandle,
) -> Wrote {
    let soft_for = Duration::from_secs(class.soft_seconds);
    let mut written = 0;
    let mut soft_since: Option<Instant> = None;
    loop {
        let pending = out.len() - written;
        // The time this write may take: the write timeout, or less, what is left of the
        // soft limit's seconds.
        let mut wait = timeout;
        let mut soft_bound = false;
        match class.soft_bytes() {
            Some(soft) if pending > soft => {
                let since = *soft_since.get_or_insert_with(Instant::now);
                let left = soft_for.saturating_sub(since.elapsed());
                if left.is_zero() {
                    return Wrote::SoftLimit;
                }
                if wait.is_zero() || left < wait {
                    wait = left;
                    soft_bound = true;
                }
            }
            _ => soft_since = None,
        }
        let step = async {
            if pending == 0 {
                stream.flush().await.map(|()| 0)
            } else {
                stream.write(&out[written..]).await
            }
        };
        // A write that can go on goes first (a client that killed itself gets the reply
        // to its `CLIENT KILL`); a kill ends a write that waits.
        let result = tokio::select! {
            biased;
            r = async {
                if wait.is_zero() {
                    Some(step.await)
                } else {
                    tokio::time::timeout(wait, step).await.ok()
                }
            } => r,
            () = handle.killed() => return Wrote::Gone,
        };
        match result {
            Some(Ok(_)) if pending == 0 => break,
            Some(Ok(0) | Err(_)) => return Wrote::Gone,
            Some(Ok(n)) => written += n,
            // The soft limit's time is checked again above.
            None if soft_bound => {}
            None => return Wrote::TimedOut,
        }
    }
    out.clear();
    if out.capacity() > 4 * BUF_SIZE {
        out.shrink_to(BUF_SIZE);
    }
    Wrote::All
}

/// A data command waiting for its batch.
struct Batched {
    req: Request,
    /// Where its bytes start in the connection's input.
    at: usize,
    spec: &'static Spec,
    /// Its command's slot in the figures.
    slot: usize,
}

/// Runs the batched data commands `batch` (requests whose bytes start at the offsets given,
/// in `input`), appending their replies.
/// Runs the batch, then writes what the session was sent meanwhile (a tracking client's
/// invalidations, its own writes' among them).
async fn run_batch(session: &mut Session<'_>, batch: &[Batched], input: &[u8], out: &mut Vec<u8>) {
    if batch.is_empty() {
        return;
    }
    let Some(login) = session.login.clone() else {
        return;
    };
    let cmds: Vec<(&'static Spec, Args<'_>)> = batch
        .iter()
        .map(|b| (b.spec, Args::new(&b.req, &input[b.at..])))
        .collect();
    // metrics: the batch's time and size, its commands' calls.
    let (from, before) = (crate::metrics::now(), out.len());
    let out_limit = output_class(session).hard_bytes();
    crate::exec::run_batch(
        &session.fe.worker,
        &login,
        session.proto,
        session.info.db.get(),
        &session.causal,
        &cmds,
        out,
        out_limit,
        &*session.info.handle,
        session.tracking.is_some(),
    )
    .await;
    let slots = batch.iter().map(|b| b.slot);
    let replies = out.get(before..).unwrap_or_default();
    session.fe.worker.metrics.batch(slots, replies, from);
    session::tracking::flush_pushes(session, out);
}
