//! Requests turned into typed commands, then applied.
//!
//! [`Command::parse`] does what Redis's command table does before anything runs: it finds
//! the command and subcommand by name (any case) and checks the number of arguments. Those
//! errors ([`Reject`]) come before the authentication check, as in Redis. Arguments stay
//! slices of the request: parsing allocates nothing. [`apply`] then checks authentication
//! and runs the command, appending its reply.
//!
//! One module per command family: [`connection`] (`PING`, `AUTH`, `HELLO`, `CLIENT`...),
//! [`server`] (`INFO`, `CONFIG`, `COMMAND`, `TIME`); the data families ([`data`]) in theirs
//! (`DBSIZE` is [`keys`]'s: it counts the keys).

pub mod checks;
pub mod connection;
pub mod data;
pub mod expiry;
pub mod glob;
pub mod hashes;
pub mod info;
pub mod keys;
pub mod lists;
pub mod longdouble;
pub mod pubsub;
pub mod rename;
pub mod rng;
pub mod scan;
pub mod server;
pub mod sets;
pub mod sqltext;
pub mod strings;
pub mod typed;
pub mod zsets;

pub use data::{Family, Spec};

use manifold_redis_proto::{Protocol, Reply, Request};

use crate::errors;
use crate::server::{ClientInfo, RedisFrontend};

/// The arguments of one request (the command name is argument 0).
#[derive(Clone, Copy)]
pub struct Args<'a> {
    req: &'a Request,
    buf: &'a [u8],
}

impl<'a> Args<'a> {
    pub fn new(req: &'a Request, buf: &'a [u8]) -> Self {
        Self { req, buf }
    }

    pub fn len(&self) -> usize {
        self.req.len()
    }

    pub fn is_empty(&self) -> bool {
        self.req.is_empty()
    }

    /// Argument `i`, empty past the end.
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.req.arg(self.buf, i).unwrap_or_default()
    }

    /// Arguments from `from` on.
    pub fn from(&self, from: usize) -> impl Iterator<Item = &'a [u8]> + 'a {
        let this = *self;
        (from..this.len()).map(move |i| this.get(i))
    }
}

/// A command, its arguments checked in number.
#[derive(Clone, Copy)]
pub enum Command<'a> {
    /// `PING [message]`: the whole request (more arguments are refused when applied).
    Ping(Args<'a>),
    Echo(&'a [u8]),
    Quit,
    Reset,
    Select(&'a [u8]),
    /// `AUTH [user] pass`; `too_many` past two arguments (a syntax error).
    Auth {
        user: Option<&'a [u8]>,
        pass: &'a [u8],
        too_many: bool,
    },
    /// `HELLO [version [option...]]`: the whole request.
    Hello(Args<'a>),
    ClientId,
    ClientSetName(&'a [u8]),
    ClientGetName,
    ClientSetInfo(&'a [u8], &'a [u8]),
    ClientInfo,
    /// `CLIENT LIST [...]`: the whole request.
    ClientList(Args<'a>),
    ClientNoEvict(&'a [u8]),
    /// `CLIENT KILL ...`: the whole request.
    ClientKill(Args<'a>),
    ClientHelp,
    /// `COMMAND` alone.
    CommandAll,
    CommandCount,
    CommandDocs,
    /// `COMMAND INFO [name...]`: the whole request.
    CommandInfo(Args<'a>),
    CommandHelp,
    /// `CONFIG GET pattern...`: the whole request.
    ConfigGet(Args<'a>),
    ConfigHelp,
    /// `INFO [section...]`: the whole request.
    Info(Args<'a>),
    Time,
    /// A command on the keys (`GET`, `HSET`...): run in a batch, in SQL ([`crate::exec`]).
    Data(&'static Spec, Args<'a>),
    /// `MULTI`, `EXEC`, `DISCARD`, `WATCH key...`, `UNWATCH` ([`crate::multi`]).
    Multi,
    Exec,
    Discard,
    Watch(Args<'a>),
    Unwatch,
    /// Pub/Sub ([`crate::pubsub`]): the whole request where it names channels.
    Subscribe(Args<'a>),
    PSubscribe(Args<'a>),
    Unsubscribe(Args<'a>),
    PUnsubscribe(Args<'a>),
    Publish(&'a [u8], &'a [u8]),
    PubsubChannels(Option<&'a [u8]>),
    PubsubNumsub(Args<'a>),
    PubsubNumpat,
    PubsubHelp,
}

/// Refused before running, as Redis's command lookup refuses.
#[derive(Clone, Copy)]
pub enum Reject<'a> {
    UnknownCommand(Args<'a>),
    UnknownSubcommand {
        container: &'static str,
        sub: &'a [u8],
    },
    /// The command's full name (`echo`, `client|setname`).
    Arity(&'static str),
}

/// Redis's arity: `n > 0` exactly `n` arguments (name included), `n < 0` at least `-n`.
fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = argc as i64;
    if arity >= 0 {
        argc == i64::from(arity)
    } else {
        argc >= -i64::from(arity)
    }
}

/// Checks `args` against `arity`, refusing with `full_name`.
pub(crate) fn check(
    arity: i32,
    args: &Args<'_>,
    full_name: &'static str,
) -> Result<(), Reject<'static>> {
    if arity_ok(arity, args.len()) {
        Ok(())
    } else {
        Err(Reject::Arity(full_name))
    }
}

impl<'a> Command<'a> {
    /// Finds the command of a request with at least one argument.
    pub fn parse(args: Args<'a>) -> Result<Self, Reject<'a>> {
        let name = args.get(0);
        if let Some(cmd) = connection::parse(name, args)? {
            return Ok(cmd);
        }
        if let Some(cmd) = server::parse(name, args)? {
            return Ok(cmd);
        }
        if let Some(cmd) = pubsub::parse(name, args)? {
            return Ok(cmd);
        }
        if let Some(cmd) = transaction(name, args)? {
            return Ok(cmd);
        }
        if let Some(spec) = data::lookup(name) {
            check(spec.arity, &args, spec.name)?;
            return Ok(Command::Data(spec, args));
        }
        Err(Reject::UnknownCommand(args))
    }

    /// Runs without authentication (Redis's `no-auth` flag).
    pub fn no_auth(&self) -> bool {
        matches!(
            self,
            Self::Auth { .. } | Self::Hello(_) | Self::Quit | Self::Reset
        )
    }

    /// The name `CLIENT LIST` shows in `cmd=`.
    pub fn full_name(&self) -> &'static str {
        match self {
            Self::Ping(_) => "ping",
            Self::Echo(_) => "echo",
            Self::Quit => "quit",
            Self::Reset => "reset",
            Self::Select(_) => "select",
            Self::Auth { .. } => "auth",
            Self::Hello(_) => "hello",
            Self::ClientId => "client|id",
            Self::ClientSetName(_) => "client|setname",
            Self::ClientGetName => "client|getname",
            Self::ClientSetInfo(..) => "client|setinfo",
            Self::ClientInfo => "client|info",
            Self::ClientList(_) => "client|list",
            Self::ClientNoEvict(_) => "client|no-evict",
            Self::ClientKill(_) => "client|kill",
            Self::ClientHelp => "client|help",
            Self::CommandAll => "command",
            Self::CommandCount => "command|count",
            Self::CommandDocs => "command|docs",
            Self::CommandInfo(_) => "command|info",
            Self::CommandHelp => "command|help",
            Self::ConfigGet(_) => "config|get",
            Self::ConfigHelp => "config|help",
            Self::Info(_) => "info",
            Self::Time => "time",
            Self::Data(spec, _) => spec.name,
            Self::Multi => "multi",
            Self::Exec => "exec",
            Self::Discard => "discard",
            Self::Watch(_) => "watch",
            Self::Unwatch => "unwatch",
            Self::Subscribe(_) => "subscribe",
            Self::PSubscribe(_) => "psubscribe",
            Self::Unsubscribe(_) => "unsubscribe",
            Self::PUnsubscribe(_) => "punsubscribe",
            Self::Publish(..) => "publish",
            Self::PubsubChannels(_) => "pubsub|channels",
            Self::PubsubNumsub(_) => "pubsub|numsub",
            Self::PubsubNumpat => "pubsub|numpat",
            Self::PubsubHelp => "pubsub|help",
        }
    }
}

/// Connection and server commands the door knows (`COMMAND COUNT` adds the data commands).
pub const COMMAND_COUNT: i64 = 23;

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
    /// Channels and patterns subscribed to.
    pub subs: Option<crate::pubsub::Subscription>,
    pub proto: Protocol,
    /// Set by `QUIT`: close once the replies are written.
    pub quit: bool,
    /// The client's last write, which its reads on replicas must see.
    pub causal: crate::replicas::Causal,
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

/// Appends the error reply of a refused request.
pub fn reject_reply(reject: Reject<'_>, proto: Protocol, out: &mut Vec<u8>) {
    let mut text = Vec::with_capacity(64);
    match reject {
        Reject::UnknownCommand(args) => {
            errors::unknown_command(&mut text, args.get(0), args.from(1));
        }
        Reject::UnknownSubcommand { container, sub } => {
            errors::unknown_subcommand(&mut text, container, sub);
        }
        Reject::Arity(name) => errors::arity(&mut text, name),
    }
    Reply::new(out, proto).error(&text);
}

/// The transaction command named `name`, `Ok(None)` when it is not one.
fn transaction<'a>(name: &[u8], args: Args<'a>) -> Result<Option<Command<'a>>, Reject<'a>> {
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    Ok(Some(if is("multi") {
        check(1, &args, "multi")?;
        Command::Multi
    } else if is("exec") {
        check(1, &args, "exec")?;
        Command::Exec
    } else if is("discard") {
        check(1, &args, "discard")?;
        Command::Discard
    } else if is("watch") {
        check(-2, &args, "watch")?;
        Command::Watch(args)
    } else if is("unwatch") {
        check(1, &args, "unwatch")?;
        Command::Unwatch
    } else {
        return Ok(None);
    }))
}

/// The data command of a request an authenticated client may run: it waits for its batch
/// ([`crate::exec`]) instead of being applied.
pub fn batched(session: &Session<'_>, args: Args<'_>) -> Option<&'static Spec> {
    if !session.authenticated
        || session.login.is_none()
        || session.multi.is_some()
        || (session.proto == Protocol::Resp2 && crate::pubsub::subscribed(session))
    {
        return None;
    }
    match Command::parse(args) {
        Ok(Command::Data(spec, _)) => {
            session.info.cmd.set(spec.name);
            Some(spec)
        }
        _ => None,
    }
}

/// Applies one request (with at least one argument), appending its reply to `out`; a data
/// command of an authenticated client is not run but returned, for its batch
/// ([`crate::exec`]).
pub fn apply(
    session: &mut Session<'_>,
    args: Args<'_>,
    out: &mut Vec<u8>,
) -> Option<&'static Spec> {
    let cmd = match Command::parse(args) {
        Ok(cmd) => cmd,
        Err(reject) => {
            reject_reply(reject, session.proto, out);
            return None;
        }
    };
    if !session.authenticated && !cmd.no_auth() {
        Reply::new(out, session.proto).error(errors::NOAUTH);
        return None;
    }
    session.info.cmd.set(cmd.full_name());
    if session.proto == Protocol::Resp2
        && crate::pubsub::subscribed(session)
        && !crate::pubsub::allowed_while_subscribed(cmd.full_name())
    {
        crate::pubsub::refuse_while_subscribed(cmd.full_name(), session.proto, out);
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
        Command::Unwatch => {
            session.watched.clear();
            Reply::new(out, session.proto).simple(b"OK");
        }
        _ => connection::apply(session, cmd, out),
    }
    None
}

/// Redis's `string2ll`: an optional `-`, digits without a leading zero, fits an `i64`.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || digits[0] == b'0' {
        return None;
    }
    let mut v: i128 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i128::from(d - b'0');
    }
    i64::try_from(if neg { -v } else { v }).ok()
}

#[cfg(test)]
mod tests;
