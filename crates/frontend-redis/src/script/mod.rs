//! Scripts: `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO` and `SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP`,
//! as Redis 7.0.15 answers them.
//!
//! - A script runs on a script thread ([`pool`]), never on a worker: its client's session
//!   task hands it over and then serves its `redis.call`s. Each call comes back to the
//!   worker as the command's arguments; the worker finds it in the command table, refuses
//!   what a script may not call (Redis's texts), and applies the data command on the
//!   script's [`Cx`] inside the script's ONE SQL transaction; the reply's RESP bytes go back
//!   to the script thread, which turns them into Lua values ([`convert`]).
//! - Atomicity: the script's writes commit together when it returns; when it raises an
//!   error, the writes made before stay (committed, then the error reply), as in Redis. A
//!   deadlock or lock wait timeout runs the whole script again from the start (nothing was
//!   committed or answered). What it publishes is sent after its commit, in order, and only
//!   then (Redis sends at once; it never runs a script twice nor rolls one back).
//! - A script whose client leaves or is killed (`CLIENT KILL`) is stopped and rolled back
//!   at once (the connection marks a client that left as killed: `crate::conn`).
//! - `SCRIPT KILL` stops every running script of this manifold at once (Redis waits for
//!   `busy-reply-threshold`: here no other client waits for a script), and the killed
//!   script's transaction is rolled back, so even a script that wrote can be killed
//!   (Redis answers `UNKILLABLE`); its client gets Redis's text for a killed script.
//! - Bounds: each Lua state's memory (`script_memory_limit`), the reply through the
//!   client's output limit, and optionally a script's time (`script_time_limit`).

pub mod convert;
pub mod function_command;
mod function_load;
pub mod functions;
pub mod group;
pub mod inline;
pub mod lua;
pub mod pool;

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

use manifold_redis_proto::{Limits, Protocol, Reply, Request};

use crate::cmd::{self, parse_i64, Args, Command, Parsed, Reject};
use crate::kill::ClientHandle;
use crate::server::RedisFrontend;
use crate::session::{self, Session};
use crate::store::context::Cx;
use crate::store::StoreError;

pub use pool::Scripts;
use pool::{Answer, FromScript, Job, Outcome};

const NOSCRIPT: &[u8] = b"-NOSCRIPT No matching script. Please use EVAL.";
/// The reply (never read) of a script whose client was killed or left before it ran.
/// `FUNCTION LOAD|DELETE|FLUSH|RESTORE` queued in `MULTI`.
const FUNCTION_IN_MULTI: &[u8] =
    b"manifold: FUNCTION LOAD, DELETE, FLUSH and RESTORE are not served inside MULTI (send them on their own)";
const KILLED_WAITING: &[u8] = b"manifold: the client was killed before its script ran";
const NOT_ALLOWED: &[u8] = b"This Redis command is not allowed from script";

const HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];

/// `EVAL`'s arguments after the script: the keys and the other arguments.
#[derive(Debug, PartialEq, Eq)]
pub struct EvalArgs<'a> {
    pub body: &'a [u8],
    pub keys: Vec<&'a [u8]>,
    pub argv: Vec<&'a [u8]>,
}

/// Parses `EVAL script numkeys key... arg...` (any of the four), with Redis's texts.
pub fn parse_eval(args: Args<'_>) -> Result<EvalArgs<'_>, &'static [u8]> {
    let numkeys = parse_i64(args.get(2)).ok_or(&b"value is not an integer or out of range"[..])?;
    if numkeys < 0 {
        return Err(b"Number of keys can't be negative");
    }
    let rest = args.len() - 3;
    if numkeys as u64 > rest as u64 {
        return Err(b"Number of keys can't be greater than number of args");
    }
    let numkeys = numkeys as usize;
    Ok(EvalArgs {
        body: args.get(1),
        keys: args.from(3).take(numkeys).collect(),
        argv: args.from(3 + numkeys).collect(),
    })
}

/// The flags of a `#!lua flags=a,b` first line; `Err`: Redis's error text.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Shebang {
    pub no_writes: bool,
}

/// Parses a script's shebang line as Redis 7.0's `evalExtractShebangFlags`.
pub fn parse_shebang(body: &[u8]) -> Result<Option<Shebang>, String> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[2..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = Shebang::default();
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {part}"));
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => flags.no_writes = true,
                "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                other => return Err(format!("Unexpected flag in script shebang: {other}")),
            }
        }
    }
    Ok(Some(flags))
}

/// Handles `EVAL`... and `SCRIPT ...` (authenticated, not inside `MULTI`).
pub async fn handle(session: &mut Session<'_>, parsed: Parsed<'_>, out: &mut Vec<u8>) {
    if !session.authenticated {
        session::apply(session, Ok(parsed), out);
        return;
    }
    session.info.cmd.set(parsed.entry.name);
    let args = parsed.args;
    let proto = session.proto;
    let scripts = &session.fe.shared.scripts;
    match parsed.entry.name {
        "eval" => eval(session, args, false, false, out).await,
        "eval_ro" => eval(session, args, true, false, out).await,
        "evalsha" => eval(session, args, false, true, out).await,
        "evalsha_ro" => eval(session, args, true, true, out).await,
        "fcall" | "fcall_ro" => {
            if let Err(text) = function_command::learn(session, args.get(1)).await {
                Reply::new(out, proto).error(&text);
                return;
            }
            match Script::function(session, args, parsed.entry.name == "fcall_ro") {
                Ok(script) => group::run(session, script, out).await,
                Err(text) => {
                    Reply::new(out, proto).error(&text);
                }
            }
        }
        name if name.starts_with("function|") => {
            function_command::function_command(session, name, args, out).await;
        }
        "script|load" => {
            let body = args.get(2);
            let sha = lua::sha1hex(body);
            let source = Arc::new(body.to_vec());
            match scripts.check_syntax(source.clone()).await {
                Ok(()) => {
                    scripts.cache(sha.clone(), source);
                    Reply::new(out, proto).bulk(sha.as_bytes());
                }
                Err(reply) => out.extend_from_slice(&reply),
            }
        }
        "script|exists" => {
            let mut r = Reply::new(out, proto);
            r.array_len(args.len() - 2);
            for sha in args.from(2) {
                let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                r.integer(i64::from(scripts.exists(&sha)));
            }
        }
        "script|flush" => {
            let mode = args.get(2);
            if args.len() > 3
                || (args.len() == 3
                    && !mode.eq_ignore_ascii_case(b"sync")
                    && !mode.eq_ignore_ascii_case(b"async"))
            {
                Reply::new(out, proto).error(b"SCRIPT FLUSH only support SYNC|ASYNC option");
                return;
            }
            scripts.flush();
            Reply::new(out, proto).simple(b"OK");
        }
        "script|kill" => {
            if scripts.kill_all() {
                Reply::new(out, proto).simple(b"OK");
            } else {
                Reply::new(out, proto).error(b"-NOTBUSY No scripts in execution right now.");
            }
        }
        _ => {
            let mut r = Reply::new(out, proto);
            r.array_len(HELP.len());
            for line in HELP {
                r.simple(line.as_bytes());
            }
        }
    }
}

/// A script `EVAL`/`EVALSHA` (and their `_RO`s) names, found and checked before it runs.
struct Script {
    sha: String,
    source: Arc<Vec<u8>>,
    keys: Vec<Vec<u8>>,
    argv: Vec<Vec<u8>>,
    read_only: bool,
    /// Named by its SHA1 (`EVALSHA`): already cached.
    by_sha: bool,
    /// The function `FCALL` runs (see [`pool::Job::function`]).
    function: Option<String>,
}

impl Script {
    /// The script `args` name; `Err`: Redis's error text.
    fn find(
        session: &Session<'_>,
        args: Args<'_>,
        mut read_only: bool,
        by_sha: bool,
    ) -> Result<Self, Vec<u8>> {
        let parsed = parse_eval(args).map_err(<[u8]>::to_vec)?;
        let scripts = &session.fe.shared.scripts;
        let (sha, source) = if by_sha {
            let sha = String::from_utf8_lossy(parsed.body).to_ascii_lowercase();
            let Some(source) = (sha.len() == 40).then(|| scripts.source(&sha)).flatten() else {
                return Err(NOSCRIPT.to_vec());
            };
            (sha, source)
        } else {
            (lua::sha1hex(parsed.body), Arc::new(parsed.body.to_vec()))
        };
        match parse_shebang(&source) {
            Ok(Some(flags)) => read_only |= flags.no_writes,
            Ok(None) => {}
            Err(text) => return Err(text.into_bytes()),
        }
        Ok(Script {
            sha,
            source,
            keys: parsed.keys.iter().map(|k| k.to_vec()).collect(),
            argv: parsed.argv.iter().map(|a| a.to_vec()).collect(),
            read_only,
            by_sha,
            function: None,
        })
    }
}

/// What one run of a script came to on the transaction it was given, which it neither
/// commits nor rolls back.
enum Ran {
    /// It returned, or raised an error after writes that stay (as in Redis): commit, then
    /// answer this.
    Reply(Vec<u8>),
    /// It did not compile: nothing ran.
    CompileError(Vec<u8>),
    /// `SCRIPT KILL` or the time limit stopped it (or it ended with no reply): nothing it
    /// wrote is kept; its client gets this reply.
    Stopped(Vec<u8>),
    /// Its client was killed or left before or while it ran: nothing it wrote is kept,
    /// and no one reads the answer.
    ClientGone(Vec<u8>),
    /// A store error stopped it (its retry decision says what next).
    Failed(StoreError),
    /// It ran past the time it was given (`preempt_at`) and was stopped for it: nothing it
    /// wrote is kept, and it is to run again, alone.
    Preempted,
    /// Its client was killed or left while it waited for a script thread: it never ran.
    NotRun(Vec<u8>),
    /// It ran on its worker and is to run again on a script thread ([`inline`]): nothing
    /// it wrote is kept.
    Moved,
}

/// The client a script runs for, as its run and its `redis.call`s need it (the script may
/// run on another client's task: [`group`]).
pub struct Caller<'a> {
    pub fe: &'a RedisFrontend,
    /// Killed (`CLIENT KILL`, or the client left): its script stops.
    pub handle: Arc<ClientHandle>,
    /// The client's id while it remembers the keys it reads (client-side caching).
    pub remembers: Option<u64>,
}

impl<'a> Caller<'a> {
    pub fn of(session: &Session<'a>) -> Self {
        Caller {
            fe: session.fe,
            handle: session.info.handle.clone(),
            remembers: session::tracking::remembers(session).then_some(session.info.id),
        }
    }
}

/// Ready at `at` (never when `None`).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The reply of a script whose client was killed or left before it ran.
fn killed_waiting(proto: Protocol) -> Vec<u8> {
    let mut reply = Vec::new();
    Reply::new(&mut reply, proto).error(KILLED_WAITING);
    reply
}

/// `EVAL`/`EVALSHA` (and their `_RO`s): the script in a transaction of its group's
/// ([`group`]).
async fn eval(
    session: &mut Session<'_>,
    args: Args<'_>,
    read_only: bool,
    by_sha: bool,
    out: &mut Vec<u8>,
) {
    let proto = session.proto;
    let script = match Script::find(session, args, read_only, by_sha) {
        Ok(s) => s,
        Err(text) => {
            Reply::new(out, proto).error(&text);
            return;
        }
    };
    group::run(session, script, out).await;
}

/// Runs `script` once on `cx`'s transaction, serving its `redis.call`s there; its reply is
/// in `proto`, within `cx.out_limit` bytes. `cx.out`, `cx.proto` and `cx.db` are the
/// script's meanwhile (each call's reply, the protocol it set, the database it selected).
/// Past `preempt_at`, it is stopped ([`Ran::Preempted`]). `on_worker`: it runs on the
/// worker, unless it must run on a script thread ([`Ran::Moved`], see [`inline`]).
#[allow(clippy::too_many_arguments)]
async fn run(
    caller: &Caller<'_>,
    cx: &mut Cx<'_>,
    script: &Script,
    proto: Protocol,
    published: &mut Published,
    reserved: bool,
    preempt_at: Option<tokio::time::Instant>,
    on_worker: bool,
) -> Ran {
    if on_worker && reserved {
        return inline::run(caller, cx, script, proto, published, preempt_at).await;
    }
    let scripts = &caller.fe.shared.scripts;
    let (to_worker, mut from_script) = tokio::sync::mpsc::unbounded_channel();
    let (answer, answers) = mpsc::channel();
    // Kills counted before it can be killed: one meanwhile is told from a preemption.
    let (kills, deadline) = (scripts.kills(), scripts.deadline());
    let running = scripts.register();
    let start = scripts.start(
        Job {
            sha: script.sha.clone(),
            source: script.source.clone(),
            function: script.function.clone(),
            keys: script.keys.clone(),
            argv: script.argv.clone(),
            proto,
            out_limit: cx.out_limit,
            compile_only: false,
            to_worker,
            answers,
            killed: running.killed.clone(),
            deadline,
        },
        reserved,
    );
    // A client killed (or gone) while its script waits for a script thread: it never
    // runs.
    tokio::select! {
        biased;
        () = start => {}
        () = caller.handle.killed() => return Ran::NotRun(killed_waiting(proto)),
    }
    let mut failed: Option<StoreError> = None;
    let handle = &caller.handle;
    let mut client_gone = handle.is_killed();
    let mut preempted = false;
    let outcome = loop {
        if client_gone {
            // Its client was killed (`CLIENT KILL`) or left (the connection marks it
            // killed): the script is stopped and rolled back now, not left running
            // with no one to answer.
            running.killed.store(true, Ordering::Relaxed);
        }
        let from = tokio::select! {
            biased;
            from = from_script.recv() => from,
            () = handle.killed(), if !client_gone => {
                client_gone = true;
                continue;
            }
            () = sleep_until(preempt_at), if !preempted && preempt_at.is_some() => {
                preempted = true;
                running.killed.store(true, Ordering::Relaxed);
                continue;
            }
        };
        match from {
            Some(FromScript::Call { args, proto }) => {
                // A script calling without pause keeps the channel ready: the timer above
                // may never win the select.
                if !preempted && preempt_at.is_some_and(|at| tokio::time::Instant::now() >= at) {
                    preempted = true;
                    running.killed.store(true, Ordering::Relaxed);
                }
                if failed.is_some() || client_gone {
                    let _ = answer.send(Answer::Abort);
                    continue;
                }
                cx.proto = proto;
                match call(caller, cx, &args, script, published).await {
                    Ok(reply) => {
                        let _ = answer.send(Answer::Reply(reply));
                    }
                    Err(e) => {
                        failed = Some(e);
                        let _ = answer.send(Answer::Abort);
                    }
                }
            }
            Some(FromScript::Done(o)) => break o,
            None => break Outcome::Aborted,
        }
    };
    let killed_meanwhile = scripts.kills() != kills;
    drop(running);
    // Only a script the hook stopped loses its writes: one that returned before a
    // `SCRIPT KILL` reached it commits, as its client is told.
    let (reply, stopped) = match outcome {
        Outcome::CompileError(reply) => return Ran::CompileError(reply),
        Outcome::Reply(reply) => (reply, false),
        Outcome::Stopped(reply) => (reply, true),
        Outcome::Compiled | Outcome::Aborted => (Vec::new(), true),
    };
    if !script.by_sha {
        scripts.cache(script.sha.clone(), script.source.clone());
    }
    match failed {
        Some(e) if client_gone => {
            let mut reply = Vec::new();
            Reply::new(&mut reply, proto).error(&e.reply_text());
            Ran::ClientGone(reply)
        }
        Some(e) => Ran::Failed(e),
        None if reply.is_empty() => {
            let mut reply = Vec::new();
            Reply::new(&mut reply, proto).error(b"manifold: the script stopped without a reply");
            Ran::Stopped(reply)
        }
        // Stopped for running past `preempt_at`, and by nothing else.
        None if stopped
            && preempted
            && !client_gone
            && !killed_meanwhile
            && deadline.is_none_or(|d| std::time::Instant::now() < d) =>
        {
            Ran::Preempted
        }
        // Killed (`SCRIPT KILL`, the time limit): nothing it wrote is kept.
        None if stopped => Ran::Stopped(reply),
        None => Ran::Reply(reply),
    }
}

/// `EVAL`... or `SCRIPT ...` queued in `MULTI`, run by `EXEC` on its transaction `cx`: the
/// script's reply goes in its place in `EXEC`'s array and what it publishes waits with
/// `published` for `EXEC`'s commit. A store error stops the whole `EXEC` (its retry
/// decision says what next), as for any queued command. A script stopped (`SCRIPT KILL`,
/// the time limit, its client gone) rolls back the whole transaction, so `EXEC` answers
/// the script's error alone (`Err`'s bytes): Redis would keep the rest, but nothing here
/// can undo the script's writes alone.
pub async fn in_exec(
    session: &mut Session<'_>,
    cx: &mut Cx<'_>,
    parsed: Parsed<'_>,
    published: &mut Published,
) -> Result<Result<(), Vec<u8>>, StoreError> {
    let (read_only, by_sha) = match parsed.entry.name {
        "eval" => (false, false),
        "eval_ro" => (true, false),
        "evalsha" => (false, true),
        "evalsha_ro" => (true, true),
        "fcall" | "fcall_ro" => (parsed.entry.name == "fcall_ro", false),
        // A library change commits on its own: inside EXEC it could not roll back with it.
        "function|load" | "function|delete" | "function|flush" | "function|restore" => {
            cx.reply().error(FUNCTION_IN_MULTI);
            return Ok(Ok(()));
        }
        _ => {
            handle(session, parsed, &mut cx.out).await;
            return Ok(Ok(()));
        }
    };
    session.info.cmd.set(parsed.entry.name);
    let found = if parsed.entry.name.starts_with("fcall") {
        // Learnt on a transaction of its own: EXEC's snapshot may be older than this
        // manifold's libraries.
        if let Err(text) = function_command::learn(session, parsed.args.get(1)).await {
            cx.reply().error(&text);
            return Ok(Ok(()));
        }
        Script::function(session, parsed.args, read_only)
    } else {
        Script::find(session, parsed.args, read_only, by_sha)
    };
    let script = match found {
        Ok(s) => s,
        Err(text) => {
            cx.reply().error(&text);
            return Ok(Ok(()));
        }
    };
    // The script's calls use `cx` as their own: EXEC's replies so far, its protocol and
    // database are put back after it.
    let replies = std::mem::take(&mut cx.out);
    let (proto, db, limit) = (cx.proto, cx.db, cx.out_limit);
    cx.out_limit = limit.saturating_sub(replies.len());
    // `EXEC` holds a script place for its scripts ([`reserve`]).
    let caller = Caller::of(session);
    let ran = run(&caller, cx, &script, proto, published, true, None, false).await;
    // `CLIENT LIST` shows the script while it runs, then `EXEC` again, as Redis's does.
    session.info.cmd.set("exec");
    cx.out = replies;
    (cx.proto, cx.db, cx.out_limit) = (proto, db, limit);
    match ran {
        Ran::Reply(reply) | Ran::CompileError(reply) => {
            cx.out.extend_from_slice(&reply);
            Ok(Ok(()))
        }
        Ran::Stopped(reply) | Ran::ClientGone(reply) | Ran::NotRun(reply) => Ok(Err(reply)),
        Ran::Failed(e) => Err(e),
        // Not given a time (`None` above): never preempted; on a script thread: never
        // moved.
        Ran::Preempted | Ran::Moved => {
            let mut reply = Vec::new();
            Reply::new(&mut reply, proto).error(b"manifold: the script was stopped");
            Ok(Err(reply))
        }
    }
}

/// A script place for an `EXEC` that queued scripts, taken before its transaction begins
/// ([`pool::Scripts::reserve`]); `Err`: the reply when its client was killed meanwhile.
pub async fn reserve(session: &Session<'_>) -> Result<Option<pool::Slot>, Vec<u8>> {
    tokio::select! {
        biased;
        slot = session.fe.shared.scripts.reserve() => Ok(slot),
        () = session.info.handle.killed() => Err(killed_waiting(session.proto)),
    }
}

/// Commands a script may not call (Redis 7.0's `noscript` flag: the blocking commands but
/// `BLMPOP` and `BZMPOP`, which a script calls as their non-blocking forms).
fn refused_in_scripts(name: &str) -> bool {
    matches!(
        name,
        "blpop" | "brpop" | "brpoplpush" | "blmove" | "bzpopmin" | "bzpopmax"
    )
}

/// One `redis.call`: its reply bytes in the script's protocol, or the store error that
/// stops the script.
/// The messages a script publishes, held until its transaction commits: a script rolled
/// back (killed, timed out, failed) delivers none, and one run again after a deadlock
/// delivers only its last run's. Redis delivers at once, and never rolls back.
#[derive(Default)]
pub struct Published {
    messages: Vec<(Vec<u8>, Vec<u8>)>,
    bytes: usize,
}

/// Most bytes of messages one script may hold back until it commits.
const MAX_PUBLISHED: usize = 16 << 20;

impl Published {
    /// `PUBLISH` from a script: the subscribers it reaches now (as Redis answers); the
    /// message is kept for the commit only when there are some, as Redis would have
    /// delivered it to them alone.
    pub fn publish(
        &mut self,
        fe: &RedisFrontend,
        channel: &[u8],
        message: &[u8],
        out: &mut Vec<u8>,
        proto: Protocol,
    ) {
        let n = fe.shared.pubsub.receivers(channel);
        if n > 0 {
            let size = channel.len() + message.len();
            if self.bytes + size > MAX_PUBLISHED {
                Reply::new(out, proto).error(
                    b"manifold: a script or transaction may hold back at most 16 MiB of messages until it commits",
                );
                return;
            }
            self.bytes += size;
            self.messages.push((channel.to_vec(), message.to_vec()));
        }
        Reply::new(out, proto).integer(n);
    }

    /// Delivers the messages, in order, once the script's writes are committed.
    pub fn deliver(self, fe: &RedisFrontend) {
        let m = &fe.worker.metrics;
        for (channel, message) in self.messages {
            let receivers = fe.shared.pubsub.publish(&channel, &message);
            m.published(u64::try_from(receivers).unwrap_or(0));
        }
    }
}

async fn call(
    caller: &Caller<'_>,
    cx: &mut Cx<'_>,
    argv: &[Vec<u8>],
    script: &Script,
    published: &mut Published,
) -> Result<Vec<u8>, StoreError> {
    let read_only = script.read_only;
    let mut buf = Vec::new();
    encode_request(&mut buf, argv);
    let limits = Limits {
        client_query_buffer_limit: usize::MAX,
        proto_max_bulk_len: u64::MAX,
        ..caller.fe.shared.limits
    };
    let mut req = Request::new();
    let mut reply = Vec::new();
    let err = |text: &[u8], reply: &mut Vec<u8>| {
        Reply::new(reply, cx.proto).error(text);
    };
    if !matches!(req.parse(&buf, &limits), Ok(Some(_))) {
        err(b"Unknown Redis command called from script", &mut reply);
        return Ok(reply);
    }
    let args = Args::new(&req, &buf);
    let parsed = match Command::parse(args) {
        Ok(p) => p,
        Err(Reject::UnknownCommand(_) | Reject::UnknownSubcommand { .. }) => {
            err(b"Unknown Redis command called from script", &mut reply);
            return Ok(reply);
        }
        Err(Reject::Arity(_)) => {
            err(
                b"Wrong number of args calling Redis command from script",
                &mut reply,
            );
            return Ok(reply);
        }
    };
    match parsed.cmd {
        Command::Data(spec, args) if !refused_in_scripts(spec.name) => {
            if read_only && spec.write {
                err(
                    b"Write commands are not allowed from read-only scripts.",
                    &mut reply,
                );
                return Ok(reply);
            }
            if let (false, Some(id)) = (spec.write, caller.remembers) {
                // Its caller's declared keys, as Redis remembers them for a tracking client.
                caller
                    .fe
                    .shared
                    .tracker
                    .remember(id, script.keys.iter().map(Vec::as_slice));
            }
            cx.out.clear();
            crate::exec::run_one(cx, spec, args).await?;
            Ok(std::mem::take(&mut cx.out))
        }
        Command::Select(db) => {
            match parse_i64(db) {
                None => err(b"value is not an integer or out of range", &mut reply),
                Some(n) if !(0..cmd::DATABASES).contains(&n) => {
                    err(b"DB index is out of range", &mut reply);
                }
                Some(n) => {
                    cx.db = n as u8;
                    Reply::new(&mut reply, cx.proto).simple(b"OK");
                }
            }
            Ok(reply)
        }
        Command::Publish(channel, message) => {
            published.publish(caller.fe, channel, message, &mut reply, cx.proto);
            Ok(reply)
        }
        // As the client's, but answered in the script's protocol, and never as to a
        // subscriber (a script's calls are not the client's subscriptions).
        Command::Ping(args) => {
            session::connection::ping(args, cx.proto, false, &mut reply);
            Ok(reply)
        }
        Command::Echo(msg) => {
            Reply::new(&mut reply, cx.proto).bulk(msg);
            Ok(reply)
        }
        Command::Time => {
            session::server::time(cx.proto, &mut reply);
            Ok(reply)
        }
        cmd @ (Command::PubsubChannels(_) | Command::PubsubNumsub(_) | Command::PubsubNumpat) => {
            session::pubsub::introspect(&caller.fe.shared.pubsub, cmd, cx.proto, &mut reply);
            Ok(reply)
        }
        _ => {
            err(NOT_ALLOWED, &mut reply);
            Ok(reply)
        }
    }
}

/// `args` as one request's bytes (an array of bulk strings, as a client sends it).
fn encode_request(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    let mut r = Reply::new(out, Protocol::Resp2);
    r.array_len(args.len());
    for a in args {
        r.bulk(a);
    }
}

#[cfg(test)]
mod tests;
