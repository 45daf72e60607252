//! Requests turned into typed commands, once.
//!
//! [`Command::parse`] does what Redis's command table does before anything runs: it finds
//! the command and subcommand by name (any case) in the door's one table ([`table`]) and
//! checks the number of arguments. Those errors ([`Reject`]) come before the authentication
//! check, as in Redis. Arguments stay slices of the request: parsing allocates nothing. The
//! connection parses each request once and hands the [`Parsed`] command to its batch or to
//! the session ([`crate::session::apply`] checks authentication and runs it).
//!
//! One module per data family ([`data`]: `DBSIZE` is [`keys`]'s, it counts the keys); the
//! connection, server and Pub/Sub commands are the session's ([`crate::session`]).

pub mod checks;
pub mod data;
pub mod expiry;
pub mod glob;
pub mod hashes;
pub mod keys;
pub mod lists;
pub mod longdouble;
pub mod rename;
pub mod rng;
pub mod scan;
pub mod sets;
pub mod sqltext;
pub mod streams;
pub mod strings;
pub mod table;
pub mod typed;
pub mod zsets;

pub use data::{Family, Spec};
pub use table::{table, Entry, Kind};

use manifold_redis_proto::{Protocol, Reply, Request};

/// Databases a client may `SELECT` (0..15), as Redis's default `databases 16`.
pub const DATABASES: i64 = 16;

use crate::errors;

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
    /// `CLIENT TRACKING ON|OFF [option...]`: the whole request.
    ClientTracking(Args<'a>),
    ClientCaching(&'a [u8]),
    ClientGetRedir,
    ClientTrackingInfo,
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
    /// `CONFIG SET name value...`: the whole request.
    ConfigSet(Args<'a>),
    ConfigResetStat,
    ConfigRewrite,
    /// `SLOWLOG ...`, `LATENCY ...`: the subcommand's full name and the whole request.
    Diagnostics(&'static str, Args<'a>),
    /// `INFO [section...]`: the whole request.
    Info(Args<'a>),
    Time,
    /// `WAIT numreplicas timeout` (`crate::session::wait`).
    Wait(Args<'a>),
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
    /// `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`, `SCRIPT ...`: the whole request
    /// ([`crate::script`]).
    Script(Args<'a>),
}

/// Refused before running, as Redis's command lookup refuses.
#[derive(Clone, Copy)]
pub enum Reject<'a> {
    UnknownCommand(Args<'a>),
    UnknownSubcommand {
        container: &'static str,
        sub: &'a [u8],
    },
    /// The command (`echo`, `client|setname`) refused for its number of arguments.
    Arity(&'static Entry),
}

/// A request's command, typed, with its entry in the table and its arguments (the name
/// included): what the connection hands to batching, dispatch, `MULTI` and counting.
#[derive(Clone, Copy)]
pub struct Parsed<'a> {
    pub entry: &'static Entry,
    pub cmd: Command<'a>,
    pub args: Args<'a>,
}

impl Parsed<'_> {
    /// Its full name (`get`, `client|list`), as `CLIENT LIST` shows it in `cmd=`.
    pub fn name(&self) -> &'static str {
        self.entry.name
    }

    /// Runs without authentication (Redis's `no-auth` flag).
    pub fn no_auth(&self) -> bool {
        self.entry.has(table::flags::NO_AUTH)
    }
}

impl<'a> Command<'a> {
    /// Finds the command of a request with at least one argument in the table ([`table`]:
    /// name and subcommand in any case) and checks its number of arguments.
    pub fn parse(args: Args<'a>) -> Result<Parsed<'a>, Reject<'a>> {
        let t = table();
        let Some(mut entry) = t.command(args.get(0)) else {
            return Err(Reject::UnknownCommand(args));
        };
        if !entry.arity_ok(args.len()) {
            return Err(Reject::Arity(entry));
        }
        if let (Some(container), true) = (entry.container, args.len() >= 2) {
            let sub = args.get(1);
            entry = t
                .subcommand(entry, sub)
                .ok_or(Reject::UnknownSubcommand { container, sub })?;
            if !entry.arity_ok(args.len()) {
                return Err(Reject::Arity(entry));
            }
        }
        Ok(Parsed {
            entry,
            cmd: Self::build(entry, args),
            args,
        })
    }

    /// The command of `entry` with `args` (their number checked).
    pub fn build(entry: &'static Entry, args: Args<'a>) -> Self {
        match entry.kind {
            Kind::Ping => Self::Ping(args),
            Kind::Echo => Self::Echo(args.get(1)),
            Kind::Quit => Self::Quit,
            Kind::Reset => Self::Reset,
            Kind::Select => Self::Select(args.get(1)),
            Kind::Auth => match args.len() {
                2 => Self::Auth {
                    user: None,
                    pass: args.get(1),
                    too_many: false,
                },
                n => Self::Auth {
                    user: Some(args.get(1)),
                    pass: args.get(2),
                    too_many: n > 3,
                },
            },
            Kind::Hello => Self::Hello(args),
            Kind::ClientId => Self::ClientId,
            Kind::ClientSetName => Self::ClientSetName(args.get(2)),
            Kind::ClientGetName => Self::ClientGetName,
            Kind::ClientSetInfo => Self::ClientSetInfo(args.get(2), args.get(3)),
            Kind::ClientInfo => Self::ClientInfo,
            Kind::ClientList => Self::ClientList(args),
            Kind::ClientNoEvict => Self::ClientNoEvict(args.get(2)),
            Kind::ClientKill => Self::ClientKill(args),
            Kind::ClientHelp => Self::ClientHelp,
            Kind::ClientTracking => Self::ClientTracking(args),
            Kind::ClientCaching => Self::ClientCaching(args.get(2)),
            Kind::ClientGetRedir => Self::ClientGetRedir,
            Kind::ClientTrackingInfo => Self::ClientTrackingInfo,
            Kind::CommandAll => Self::CommandAll,
            Kind::CommandCount => Self::CommandCount,
            Kind::CommandDocs => Self::CommandDocs,
            Kind::CommandInfo => Self::CommandInfo(args),
            Kind::CommandHelp => Self::CommandHelp,
            Kind::ConfigGet => Self::ConfigGet(args),
            Kind::ConfigHelp => Self::ConfigHelp,
            Kind::ConfigSet => Self::ConfigSet(args),
            Kind::ConfigResetStat => Self::ConfigResetStat,
            Kind::ConfigRewrite => Self::ConfigRewrite,
            Kind::Diagnostics => Self::Diagnostics(entry.name, args),
            Kind::Info => Self::Info(args),
            Kind::Time => Self::Time,
            Kind::Wait => Self::Wait(args),
            Kind::Multi => Self::Multi,
            Kind::Exec => Self::Exec,
            Kind::Discard => Self::Discard,
            Kind::Watch => Self::Watch(args),
            Kind::Unwatch => Self::Unwatch,
            Kind::Subscribe => Self::Subscribe(args),
            Kind::PSubscribe => Self::PSubscribe(args),
            Kind::Unsubscribe => Self::Unsubscribe(args),
            Kind::PUnsubscribe => Self::PUnsubscribe(args),
            Kind::Publish => Self::Publish(args.get(1), args.get(2)),
            Kind::PubsubChannels => Self::PubsubChannels((args.len() > 2).then(|| args.get(2))),
            Kind::PubsubNumsub => Self::PubsubNumsub(args),
            Kind::PubsubNumpat => Self::PubsubNumpat,
            Kind::PubsubHelp => Self::PubsubHelp,
            Kind::Script => Self::Script(args),
            // Its arity asks for a subcommand, so `parse` never builds it.
            Kind::Container => unreachable!("{} without a subcommand", entry.name),
            Kind::Data(spec) => Self::Data(spec, args),
        }
    }
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
        Reject::Arity(entry) => errors::arity(&mut text, entry.name),
    }
    Reply::new(out, proto).error(&text);
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

/// The keys of command `name` at its key positions (the command table's first, last,
/// step): none for a command whose keys follow a count or a word (`LMPOP numkeys key...`,
/// `XREAD ... STREAMS key...`).
pub fn positional_keys<'a>(name: &str, args: &Args<'a>) -> Vec<&'a [u8]> {
    let Some(entry) = table::table().get(name) else {
        return Vec::new();
    };
    let (k, n) = (entry.keys, args.len() as i64);
    if k.first <= 0 || k.step <= 0 {
        return Vec::new();
    }
    let last = if k.last < 0 {
        n + k.last
    } else {
        k.last.min(n - 1)
    };
    (k.first..=last)
        .step_by(k.step as usize)
        .map(|i| args.get(i as usize))
        .collect()
}
