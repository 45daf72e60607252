//! A client's session: its state ([`Session`]), the dispatch of its requests, and the
//! commands that act on it rather than on the keys (one module per family: [`connection`]
//! `PING`, `AUTH`, `HELLO`, `SELECT`, `CLIENT`...; [`server`] `COMMAND`, `CONFIG`, `TIME`,
//! and [`info`] `INFO`; [`pubsub`] the Pub/Sub commands).
//!
//! A request is first a typed command ([`crate::cmd::Command::parse`]). A data command of a
//! logged-in client waits for its batch ([`batched`], [`crate::exec`]); every other request
//! goes through [`handle`], which counts it ([`crate::metrics`]: a call, a failed call or a
//! rejected call, at its command's slot in the table), and through [`crate::multi`]
//! (transactions, queueing inside `MULTI`) to [`apply`].

pub mod connection;
pub mod diagnostics;
pub mod info;
pub mod pubsub;
pub mod server;
pub mod settings;
pub mod tracking;
pub mod wait;

use manifold_engine::clock;
use manifold_redis_proto::{Protocol, Reply};

use crate::cmd::{reject_reply, table, Command, Entry, Parsed, Reject, Spec};
use crate::errors;
use crate::server::{ClientInfo, RedisFrontend};

/// One client's state while its connection runs.
pub struct Session<'s> {
    pub fe: &'s RedisFrontend,
    pub info: &'s ClientInfo,
    pub authenticated: bool,
    /// The backend login the client's commands run as (set by `AUTH` / `HELLO AUTH`).
    pub login: Option<std::rc::Rc<manifold_backend::ConnKey>>,
    /// Commands queued since `MULTI`.
    pub multi: Option<crate::multi::Multi>,
    /// Keys under `WATCH`.
    pub watched: Vec<crate::multi::Watched>,
    /// Channels and patterns subscribed to, and the queue of what the client is sent
    /// besides replies (while it is subscribed or tracks keys).
    pub subs: Option<crate::pubsub::Subscription>,
    /// Tracking keys (`CLIENT TRACKING ON`).
    pub tracking: Option<Box<tracking::ClientTracking>>,
    pub proto: Protocol,
    /// Set by `QUIT`: close once the replies are written.
    pub quit: bool,
    /// The client's last write, which its reads on replicas must see.
    pub causal: crate::store::replicas::Causal,
    /// `AUTH` / `HELLO ... AUTH` refused on this connection: it closes at
    /// [`connection::MAX_AUTH_FAILURES`].
    pub auth_failures: u8,
    /// Set by [`connection::wait_before_login`] for the login about to be applied: its
    /// admission by the failed-logins table (`Err`: too many of its address waiting).
    pub login_attempt: Option<
        Result<
            manifold_engine::login_throttle::Attempt<'s>,
            manifold_engine::login_throttle::TooManyWaiting,
        >,
    >,
}

/// The data command of a request an authenticated client may run: it waits for its batch
/// ([`crate::exec`]) instead of being applied.
pub fn batched(
    session: &Session<'_>,
    parsed: &Result<Parsed<'_>, Reject<'_>>,
) -> Option<&'static Entry> {
    if !session.authenticated
        || session.login.is_none()
        || session.multi.is_some()
        || (session.proto == Protocol::Resp2 && crate::pubsub::subscribed(session))
    {
        return None;
    }
    let entry = parsed.as_ref().ok()?.entry;
    entry.spec()?;
    session.info.cmd.set(entry.name);
    Some(entry)
}

/// Applies one request (parsed: a command, or its refusal), appending its reply to `out`; a
/// data command of an authenticated client is not run but returned, for its batch
/// ([`crate::exec`]).
pub fn apply(
    session: &mut Session<'_>,
    parsed: Result<Parsed<'_>, Reject<'_>>,
    out: &mut Vec<u8>,
) -> Option<&'static Spec> {
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(reject) => {
            reject_reply(reject, session.proto, out);
            return None;
        }
    };
    if !session.authenticated && !parsed.no_auth() {
        Reply::new(out, session.proto).error(errors::NOAUTH);
        return None;
    }
    let (entry, cmd) = (parsed.entry, parsed.cmd);
    session.info.cmd.set(entry.name);
    if session.proto == Protocol::Resp2
        && crate::pubsub::subscribed(session)
        && !entry.has(table::flags::SUBSCRIBED)
    {
        crate::pubsub::refuse_while_subscribed(entry.name, session.proto, out);
        return None;
    }
    match cmd {
        Command::Subscribe(_)
        | Command::PSubscribe(_)
        | Command::Unsubscribe(_)
        | Command::PUnsubscribe(_)
        | Command::Publish(..)
        | Command::PubsubChannels(_)
        | Command::PubsubNumsub(_)
        | Command::PubsubNumpat
        | Command::PubsubHelp => pubsub::apply(session, cmd, out),
        Command::CommandAll
        | Command::CommandCount
        | Command::CommandDocs
        | Command::CommandInfo(_)
        | Command::CommandHelp
        | Command::ConfigGet(_)
        | Command::ConfigHelp
        | Command::Info(_)
        | Command::Time => server::apply(session, cmd, out),
        Command::Diagnostics(name, args) => diagnostics::apply(session, name, args, out),
        Command::Wait(args) => wait::apply_now(session, args, out),
        Command::ConfigSet(_) | Command::ConfigResetStat | Command::ConfigRewrite => {
            settings::apply(session, cmd, out);
        }
        Command::Data(spec, _) => {
            if session.login.is_some() {
                return Some(spec);
            }
            Reply::new(out, session.proto).error(b"manifold: no backend login for this client");
        }
        // Handled by `crate::multi` before they get here (not queueable).
        Command::Multi | Command::Exec | Command::Discard | Command::Watch(_) => {
            Reply::new(out, session.proto).error(b"Command not allowed inside a transaction");
        }
        // Run by `crate::multi` before they get here (by `EXEC` when queued).
        Command::Script(_) => {
            Reply::new(out, session.proto).error(b"manifold: a script cannot run here");
        }
        Command::Unwatch => {
            session.watched.clear();
            Reply::new(out, session.proto).simple(b"OK");
        }
        _ => connection::apply(session, cmd, out),
    }
    None
}

/// Handles a request that is not batched (its command parsed once, by the connection),
/// through [`crate::multi::handle`], and counts it; `INFO` with its keyspace section reads
/// the keys' counts first.
pub async fn handle(
    session: &mut Session<'_>,
    parsed: Result<Parsed<'_>, Reject<'_>>,
    out: &mut Vec<u8>,
) {
    let m = session.fe.worker.metrics.clone();
    let from = clock::now();
    let before = out.len();
    match parsed {
        Ok(Parsed {
            cmd: Command::Info(info),
            ..
        }) if info::runs_async(session, info) => {
            info::reply_async(session, info, out).await;
        }
        Ok(Parsed {
            cmd: Command::Wait(args),
            ..
        }) if session.authenticated && session.multi.is_none() => {
            wait::apply(session, args, out).await;
        }
        Ok(Parsed { cmd: ref login, .. })
            if connection::is_login(login) && session.multi.is_none() =>
        {
            connection::wait_before_login(session, login).await;
            crate::multi::handle(session, parsed, out).await;
            session.login_attempt = None;
        }
        _ => crate::multi::handle(session, parsed, out).await,
    }
    let ns = clock::span_ns(from, clock::now());
    let reply = out.get(before..).unwrap_or_default();
    match parsed {
        Err(Reject::Arity(entry)) => m.rejected(Some(entry.slot)),
        Err(_) => m.rejected(None),
        Ok(_) if reply == b"+QUEUED\r\n" => {}
        Ok(Parsed { entry, cmd, .. }) => {
            let refused = reply.starts_with(crate::errors::NOAUTH)
                || (crate::metrics::is_error(reply) && reply.starts_with(b"-ERR Can't execute"));
            if refused {
                m.rejected_with(entry.slot, reply);
                return;
            }
            m.call(entry.slot, reply, ns);
            if let Command::Publish(..) = cmd {
                let receivers = reply
                    .strip_prefix(b":")
                    .and_then(|r| std::str::from_utf8(r).ok())
                    .and_then(|r| r.trim_end().parse::<u64>().ok())
                    .unwrap_or(0);
                m.published(receivers);
            }
        }
    }
}

/// The commands `EXEC` ran (`entries`), whose replies are `replies`, one each: calls of no
/// time of their own (`EXEC` has it).
pub fn exec_ran<'a>(
    m: &crate::metrics::WorkerMetrics,
    entries: impl Iterator<Item = &'a Entry>,
    replies: &[u8],
) {
    m.calls(entries.map(|e| e.slot), replies, 0);
}
