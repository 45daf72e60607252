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
//!   committed or answered).
//! - `SCRIPT KILL` stops every running script of this manifold at once (Redis waits for
//!   `busy-reply-threshold`: here no other client waits for a script), and the killed
//!   script's transaction is rolled back, so even a script that wrote can be killed
//!   (Redis answers `UNKILLABLE`); its client gets Redis's text for a killed script.
//! - Bounds: each Lua state's memory (`script_memory_limit`), the reply through the
//!   client's output limit, and optionally a script's time (`script_time_limit`).

pub mod convert;
pub mod lua;
pub mod pool;

use std::sync::{mpsc, Arc};

use manifold_redis_proto::{Limits, Protocol, Reply, Request};

use crate::cmd::{self, parse_i64, Args, Command, Parsed, Reject};
use crate::session::{self, Session};
use crate::store::context::Cx;
use crate::store::{pause_before_retry, Attempts, Decision, StoreError};

pub use pool::Scripts;
use pool::{Answer, FromScript, Job, Outcome};

const NOSCRIPT: &[u8] = b"-NOSCRIPT No matching script. Please use EVAL.";
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
        "script|load" => {
            let body = args.get(2);
            let sha = lua::sha1hex(body);
            let source = Arc::new(body.to_vec());
            if let Ok(Outcome::CompileError(reply)) = run_job(
                session,
                &sha,
                source.clone(),
                Vec::new(),
                Vec::new(),
                true,
                false,
            )
            .await
            {
                out.extend_from_slice(&reply);
            } else {
                session.fe.shared.scripts.cache(sha.clone(), source);
                Reply::new(out, proto).bulk(sha.as_bytes());
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

/// Runs a job to its end, serving no call (compiling only).
async fn run_job(
    session: &Session<'_>,
    sha: &str,
    source: Arc<Vec<u8>>,
    keys: Vec<Vec<u8>>,
    argv: Vec<Vec<u8>>,
    compile_only: bool,
    _read_only: bool,
) -> Result<Outcome, ()> {
    let scripts = &session.fe.shared.scripts;
    let (to_worker, mut from_script) = tokio::sync::mpsc::unbounded_channel();
    let (_answer, answers) = mpsc::channel();
    let running = scripts.register();
    scripts
        .start(Job {
            sha: sha.to_string(),
            source,
            keys,
            argv,
            proto: session.proto,
            out_limit: usize::MAX,
            compile_only,
            to_worker,
            answers,
            killed: running.killed.clone(),
            deadline: None,
        })
        .await;
    loop {
        match from_script.recv().await {
            Some(FromScript::Done(o)) => return Ok(o),
            Some(FromScript::Call { .. }) => {}
            None => return Err(()),
        }
    }
}

/// `EVAL`/`EVALSHA` (and their `_RO`s).
async fn eval(
    session: &mut Session<'_>,
    args: Args<'_>,
    mut read_only: bool,
    by_sha: bool,
    out: &mut Vec<u8>,
) {
    let proto = session.proto;
    let parsed = match parse_eval(args) {
        Ok(p) => p,
        Err(text) => {
            Reply::new(out, proto).error(text);
            return;
        }
    };
    let fe = session.fe;
    let scripts = &fe.shared.scripts;
    let (sha, source) = if by_sha {
        let sha = String::from_utf8_lossy(parsed.body).to_ascii_lowercase();
        let Some(source) = (sha.len() == 40).then(|| scripts.source(&sha)).flatten() else {
            Reply::new(out, proto).error(NOSCRIPT);
            return;
        };
        (sha, source)
    } else {
        (lua::sha1hex(parsed.body), Arc::new(parsed.body.to_vec()))
    };
    match parse_shebang(&source) {
        Ok(Some(flags)) => read_only |= flags.no_writes,
        Ok(None) => {}
        Err(text) => {
            Reply::new(out, proto).error(text.as_bytes());
            return;
        }
    }
    let Some(login) = session.login.clone() else {
        Reply::new(out, proto).error(b"manifold: no backend login for this client");
        return;
    };
    let keys: Vec<Vec<u8>> = parsed.keys.iter().map(|k| k.to_vec()).collect();
    let argv: Vec<Vec<u8>> = parsed.argv.iter().map(|a| a.to_vec()).collect();
    let db0 = session.info.db.get();
    let out_limit = fe
        .shared
        .output
        .normal
        .hard_bytes()
        .saturating_sub(out.len());
    let mut attempts = Attempts::new(1);
    loop {
        let (to_worker, mut from_script) = tokio::sync::mpsc::unbounded_channel();
        let (answer, answers) = mpsc::channel();
        let running = scripts.register();
        scripts
            .start(Job {
                sha: sha.clone(),
                source: source.clone(),
                keys: keys.clone(),
                argv: argv.clone(),
                proto,
                out_limit,
                compile_only: false,
                to_worker,
                answers,
                killed: running.killed.clone(),
                deadline: scripts.deadline(),
            })
            .await;
        let mut cx = Cx {
            tx: fe.worker.begin(&login, true).noting(&session.causal),
            out: Vec::new(),
            proto: Protocol::Resp2,
            db: db0,
            out_limit,
            client: None,
        };
        let mut failed: Option<StoreError> = None;
        let mut published = Published::default();
        let outcome = loop {
            match from_script.recv().await {
                Some(FromScript::Call { args, proto }) => {
                    if failed.is_some() {
                        let _ = answer.send(Answer::Abort);
                        continue;
                    }
                    cx.proto = proto;
                    match call(session, &mut cx, &args, read_only, &mut published).await {
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
        drop(running);
        // Only a script the hook stopped loses its writes: one that returned before a
        // `SCRIPT KILL` reached it commits, as its client is told.
        let (reply, stopped) = match outcome {
            Outcome::CompileError(reply) => {
                cx.tx.abandon();
                out.extend_from_slice(&reply);
                return;
            }
            Outcome::Reply(reply) => (reply, false),
            Outcome::Stopped(reply) => (reply, true),
            Outcome::Compiled | Outcome::Aborted => (Vec::new(), true),
        };
        if !by_sha {
            scripts.cache(sha.clone(), source.clone());
        }
        let e = match failed {
            Some(e) => {
                cx.tx.abandon();
                e
            }
            None if stopped || reply.is_empty() => {
                // Killed (`SCRIPT KILL`, the time limit): nothing it wrote is kept.
                cx.tx.abandon();
                if reply.is_empty() {
                    Reply::new(out, proto).error(b"manifold: the script stopped without a reply");
                } else {
                    out.extend_from_slice(&reply);
                }
                return;
            }
            None => match cx.tx.commit().await {
                Ok(()) => {
                    published.deliver(session);
                    out.extend_from_slice(&reply);
                    return;
                }
                Err(e) => e,
            },
        };
        if let Decision::Again(pause) = attempts.next(None, &e) {
            pause_before_retry(pause).await;
        } else {
            Reply::new(out, proto).error(&e.reply_text());
            return;
        }
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
struct Published {
    messages: Vec<(Vec<u8>, Vec<u8>)>,
    bytes: usize,
}

/// Most bytes of messages one script may hold back until it commits.
const MAX_PUBLISHED: usize = 16 << 20;

impl Published {
    /// `PUBLISH` from a script: the subscribers it reaches now (as Redis answers); the
    /// message is kept for the commit only when there are some, as Redis would have
    /// delivered it to them alone.
    fn publish(
        &mut self,
        session: &Session<'_>,
        channel: &[u8],
        message: &[u8],
        out: &mut Vec<u8>,
        proto: Protocol,
    ) {
        let n = session.fe.shared.pubsub.receivers(channel);
        if n > 0 {
            let size = channel.len() + message.len();
            if self.bytes + size > MAX_PUBLISHED {
                Reply::new(out, proto).error(
                    b"manifold: a script may hold back at most 16 MiB of messages until it commits",
                );
                return;
            }
            self.bytes += size;
            self.messages.push((channel.to_vec(), message.to_vec()));
        }
        Reply::new(out, proto).integer(n);
    }

    /// Delivers the messages, in order, once the script's writes are committed.
    fn deliver(self, session: &Session<'_>) {
        let m = &session.fe.worker.metrics;
        for (channel, message) in self.messages {
            let receivers = session.fe.shared.pubsub.publish(&channel, &message);
            m.published(u64::try_from(receivers).unwrap_or(0));
        }
    }
}

async fn call(
    session: &mut Session<'_>,
    cx: &mut Cx<'_>,
    argv: &[Vec<u8>],
    read_only: bool,
    published: &mut Published,
) -> Result<Vec<u8>, StoreError> {
    let mut buf = Vec::new();
    encode_request(&mut buf, argv);
    let limits = Limits {
        client_query_buffer_limit: usize::MAX,
        proto_max_bulk_len: u64::MAX,
        ..session.fe.shared.limits
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
            published.publish(session, channel, message, &mut reply, cx.proto);
            Ok(reply)
        }
        Command::Ping(_)
        | Command::Echo(_)
        | Command::Time
        | Command::PubsubChannels(_)
        | Command::PubsubNumsub(_)
        | Command::PubsubNumpat => {
            // Applied as the client's, answered in the script's protocol.
            let proto = session.proto;
            session.proto = cx.proto;
            session::apply(session, Ok(parsed), &mut reply);
            session.proto = proto;
            Ok(reply)
        }
        _ => {
            err(NOT_ALLOWED, &mut reply);
            Ok(reply)
        }
    }
}

fn encode_request(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests;
