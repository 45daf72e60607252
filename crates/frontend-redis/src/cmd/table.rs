//! The command table: every command and subcommand the door knows, once.
//!
//! Each [`Entry`] holds what Redis's command table holds for it: its full name
//! (`client|kill`), arity, flags, key positions (`COMMAND INFO`'s first, last, step), the
//! family the admin port groups it in, and its metrics slot (a dense index: the entries are
//! sorted by name and the slot is the place in that order). [`Command::parse`] finds a
//! request's entry here; `COMMAND`, `COMMAND COUNT` and `COMMAND INFO` answer from it; the
//! door's figures ([`crate::metrics`]) count each command at its slot.
//!
//! The connection, server, Pub/Sub and transaction commands are listed here; the data
//! commands are their families' [`Spec`]s ([`super::data::families`]), each with its entry.
//!
//! [`Command::parse`]: super::Command::parse

use std::collections::HashMap;
use std::sync::OnceLock;

use super::data::{self, Spec};

/// What an entry is, beyond its numbers (Redis's command flags the door acts on).
pub mod flags {
    /// It may write (a batch with one runs in a transaction).
    pub const WRITE: u8 = 1;
    /// Runs without authentication (Redis's `no-auth`).
    pub const NO_AUTH: u8 = 1 << 1;
    /// A RESP2 client may send it while subscribed.
    pub const SUBSCRIBED: u8 = 1 << 2;
    /// Redis's `admin`: it acts on other clients or the server's configuration.
    pub const ADMIN: u8 = 1 << 3;
}

/// Where a command's keys are, as `COMMAND INFO` gives them: first, last (negative: from
/// the end), step; all 0 for none (or keys after a count, `LMPOP numkeys key...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys {
    pub first: i64,
    pub last: i64,
    pub step: i64,
}

const NO_KEYS: Keys = Keys {
    first: 0,
    last: 0,
    step: 0,
};

/// The family a command is grouped in (the admin port's `family`, `COMMAND INFO`'s ACL
/// category for the data families).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Data(data::Family),
    Pubsub,
    Transactions,
    Connection,
    Scripting,
}

impl Group {
    /// Its name: the data families' (`strings`, `hashes`...), `pubsub`, `transactions` or
    /// `connection` (the server commands too: `INFO`, `CONFIG`, `COMMAND`, `TIME`).
    pub fn name(self) -> &'static str {
        use data::Family;
        match self {
            Group::Data(Family::Strings) => "strings",
            Group::Data(Family::Keys) => "keys",
            Group::Data(Family::Expiry) => "expiry",
            Group::Data(Family::Hashes) => "hashes",
            Group::Data(Family::Lists) => "lists",
            Group::Data(Family::Sets) => "sets",
            Group::Data(Family::ZSets) => "zsets",
            Group::Data(Family::Streams) => "streams",
            Group::Pubsub => "pubsub",
            Group::Transactions => "transactions",
            Group::Connection => "connection",
            Group::Scripting => "scripting",
        }
    }
}

/// Which typed [`super::Command`] an entry's requests become.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Ping,
    Echo,
    Quit,
    Reset,
    Select,
    Auth,
    Hello,
    ClientId,
    ClientSetName,
    ClientGetName,
    ClientSetInfo,
    ClientInfo,
    ClientList,
    ClientNoEvict,
    ClientKill,
    ClientHelp,
    /// `CLIENT TRACKING`, `CACHING`, `GETREDIR`, `TRACKINGINFO` (`crate::session::tracking`).
    ClientTracking,
    ClientCaching,
    ClientGetRedir,
    ClientTrackingInfo,
    CommandAll,
    CommandCount,
    CommandDocs,
    CommandInfo,
    CommandHelp,
    ConfigGet,
    ConfigHelp,
    ConfigSet,
    ConfigResetStat,
    ConfigRewrite,
    /// `SLOWLOG ...`, `LATENCY ...` (`crate::session::diagnostics`).
    Diagnostics,
    Info,
    Time,
    Wait,
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
    Subscribe,
    PSubscribe,
    Unsubscribe,
    PUnsubscribe,
    Publish,
    PubsubChannels,
    PubsubNumsub,
    PubsubNumpat,
    PubsubHelp,
    /// `EVAL`, `EVALSHA`, their `_RO`s and `SCRIPT`'s subcommands ([`crate::script`]).
    Script,
    /// A command that is only a container of subcommands (`CLIENT`, `CONFIG`, `PUBSUB`).
    Container,
    Data(&'static Spec),
}

/// One command or subcommand.
#[derive(Debug)]
pub struct Entry {
    /// Lowercase, `container|sub` for a subcommand: as `CLIENT LIST`'s `cmd=`, `INFO
    /// commandstats` and error texts show it.
    pub name: &'static str,
    /// Redis's arity: `n > 0` exactly `n` arguments (name included), `n < 0` at least `-n`.
    pub arity: i32,
    /// [`flags`].
    pub flags: u8,
    pub keys: Keys,
    pub group: Group,
    pub kind: Kind,
    /// A container of subcommands: its name as its unknown subcommand error writes it
    /// (`Try CLIENT HELP.`).
    pub container: Option<&'static str>,
    /// A subcommand (looked up only after its container).
    pub sub: bool,
    /// Its index among [`Table::entries`] (the metrics slot).
    pub slot: usize,
}

impl Entry {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub fn write(&self) -> bool {
        self.has(flags::WRITE)
    }

    /// The data command's spec (`None` for the others).
    pub fn spec(&self) -> Option<&'static Spec> {
        match self.kind {
            Kind::Data(spec) => Some(spec),
            _ => None,
        }
    }

    /// Whether `argc` arguments (the name included) fit its arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        if self.arity >= 0 {
            argc == i64::from(self.arity)
        } else {
            argc >= -i64::from(self.arity)
        }
    }
}

/// A command that is not a data command: name, arity, flags, keys, group, kind.
struct Def(&'static str, i32, u8, Keys, Group, Kind);

use flags::{ADMIN, NO_AUTH, SUBSCRIBED};
use Group::{Connection, Pubsub, Scripting, Transactions};

/// Containers of subcommands, and the name their unknown subcommand error gives.
const CONTAINERS: [(&str, &str); 8] = [
    ("client", "CLIENT"),
    ("command", "COMMAND"),
    ("config", "CONFIG"),
    ("pubsub", "PUBSUB"),
    ("script", "SCRIPT"),
    ("slowlog", "SLOWLOG"),
    ("latency", "LATENCY"),
    ("function", "FUNCTION"),
];

/// Arities, flags and key positions are Redis 7.0.15's (`COMMAND INFO`), `client|setinfo`
/// Redis 7.2's.
const SESSION_COMMANDS: &[Def] = &[
    Def("ping", -1, SUBSCRIBED, NO_KEYS, Connection, Kind::Ping),
    Def("echo", 2, 0, NO_KEYS, Connection, Kind::Echo),
    Def(
        "quit",
        -1,
        NO_AUTH | SUBSCRIBED,
        NO_KEYS,
        Connection,
        Kind::Quit,
    ),
    Def(
        "reset",
        1,
        NO_AUTH | SUBSCRIBED,
        NO_KEYS,
        Connection,
        Kind::Reset,
    ),
    Def("select", 2, 0, NO_KEYS, Connection, Kind::Select),
    Def("auth", -2, NO_AUTH, NO_KEYS, Connection, Kind::Auth),
    Def("hello", -1, NO_AUTH, NO_KEYS, Connection, Kind::Hello),
    Def("client", -2, 0, NO_KEYS, Connection, Kind::Container),
    Def("client|id", 2, 0, NO_KEYS, Connection, Kind::ClientId),
    Def(
        "client|setname",
        3,
        0,
        NO_KEYS,
        Connection,
        Kind::ClientSetName,
    ),
    Def(
        "client|getname",
        2,
        0,
        NO_KEYS,
        Connection,
        Kind::ClientGetName,
    ),
    Def(
        "client|setinfo",
        4,
        0,
        NO_KEYS,
        Connection,
        Kind::ClientSetInfo,
    ),
    Def("client|info", 2, 0, NO_KEYS, Connection, Kind::ClientInfo),
    Def(
        "client|list",
        -2,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::ClientList,
    ),
    Def(
        "client|no-evict",
        3,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::ClientNoEvict,
    ),
    Def(
        "client|kill",
        -3,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::ClientKill,
    ),
    Def("client|help", 2, 0, NO_KEYS, Connection, Kind::ClientHelp),
    Def(
        "client|tracking",
        -3,
        0,
        NO_KEYS,
        Connection,
        Kind::ClientTracking,
    ),
    Def(
        "client|caching",
        3,
        0,
        NO_KEYS,
        Connection,
        Kind::ClientCaching,
    ),
    Def(
        "client|getredir",
        2,
        0,
        NO_KEYS,
        Connection,
        Kind::ClientGetRedir,
    ),
    Def(
        "client|trackinginfo",
        2,
        0,
        NO_KEYS,
        Connection,
        Kind::ClientTrackingInfo,
    ),
    Def("command", -1, 0, NO_KEYS, Connection, Kind::CommandAll),
    Def(
        "command|count",
        2,
        0,
        NO_KEYS,
        Connection,
        Kind::CommandCount,
    ),
    Def(
        "command|docs",
        -2,
        0,
        NO_KEYS,
        Connection,
        Kind::CommandDocs,
    ),
    Def(
        "command|info",
        -2,
        0,
        NO_KEYS,
        Connection,
        Kind::CommandInfo,
    ),
    Def("command|help", 2, 0, NO_KEYS, Connection, Kind::CommandHelp),
    Def("config", -2, 0, NO_KEYS, Connection, Kind::Container),
    Def(
        "config|get",
        -3,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::ConfigGet,
    ),
    Def("config|help", 2, 0, NO_KEYS, Connection, Kind::ConfigHelp),
    Def(
        "config|set",
        -4,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::ConfigSet,
    ),
    Def(
        "config|resetstat",
        2,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::ConfigResetStat,
    ),
    Def(
        "config|rewrite",
        2,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::ConfigRewrite,
    ),
    Def("info", -1, 0, NO_KEYS, Connection, Kind::Info),
    Def("slowlog", -2, 0, NO_KEYS, Connection, Kind::Container),
    Def(
        "slowlog|get",
        -2,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::Diagnostics,
    ),
    Def(
        "slowlog|len",
        2,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::Diagnostics,
    ),
    Def(
        "slowlog|reset",
        2,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::Diagnostics,
    ),
    Def("slowlog|help", 2, 0, NO_KEYS, Connection, Kind::Diagnostics),
    Def("latency", -2, 0, NO_KEYS, Connection, Kind::Container),
    Def(
        "latency|latest",
        2,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::Diagnostics,
    ),
    Def(
        "latency|history",
        3,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::Diagnostics,
    ),
    Def(
        "latency|reset",
        -2,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::Diagnostics,
    ),
    Def(
        "latency|doctor",
        2,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::Diagnostics,
    ),
    Def(
        "latency|graph",
        3,
        ADMIN,
        NO_KEYS,
        Connection,
        Kind::Diagnostics,
    ),
    Def("latency|help", 2, 0, NO_KEYS, Connection, Kind::Diagnostics),
    Def("time", 1, 0, NO_KEYS, Connection, Kind::Time),
    Def("wait", 3, 0, NO_KEYS, Connection, Kind::Wait),
    Def("multi", 1, 0, NO_KEYS, Transactions, Kind::Multi),
    Def("exec", 1, 0, NO_KEYS, Transactions, Kind::Exec),
    Def("discard", 1, 0, NO_KEYS, Transactions, Kind::Discard),
    Def(
        "watch",
        -2,
        0,
        Keys {
            first: 1,
            last: -1,
            step: 1,
        },
        Transactions,
        Kind::Watch,
    ),
    Def("unwatch", 1, 0, NO_KEYS, Transactions, Kind::Unwatch),
    Def(
        "subscribe",
        -2,
        SUBSCRIBED,
        NO_KEYS,
        Pubsub,
        Kind::Subscribe,
    ),
    Def(
        "psubscribe",
        -2,
        SUBSCRIBED,
        NO_KEYS,
        Pubsub,
        Kind::PSubscribe,
    ),
    Def(
        "unsubscribe",
        -1,
        SUBSCRIBED,
        NO_KEYS,
        Pubsub,
        Kind::Unsubscribe,
    ),
    Def(
        "punsubscribe",
        -1,
        SUBSCRIBED,
        NO_KEYS,
        Pubsub,
        Kind::PUnsubscribe,
    ),
    Def("publish", 3, 0, NO_KEYS, Pubsub, Kind::Publish),
    Def("pubsub", -2, 0, NO_KEYS, Pubsub, Kind::Container),
    Def(
        "pubsub|channels",
        -2,
        0,
        NO_KEYS,
        Pubsub,
        Kind::PubsubChannels,
    ),
    Def("pubsub|numsub", -2, 0, NO_KEYS, Pubsub, Kind::PubsubNumsub),
    Def("pubsub|numpat", 2, 0, NO_KEYS, Pubsub, Kind::PubsubNumpat),
    Def("pubsub|help", 2, 0, NO_KEYS, Pubsub, Kind::PubsubHelp),
    Def("eval", -3, 0, NO_KEYS, Scripting, Kind::Script),
    Def("evalsha", -3, 0, NO_KEYS, Scripting, Kind::Script),
    Def("eval_ro", -3, 0, NO_KEYS, Scripting, Kind::Script),
    Def("evalsha_ro", -3, 0, NO_KEYS, Scripting, Kind::Script),
    Def("script", -2, 0, NO_KEYS, Scripting, Kind::Container),
    Def("script|load", 3, 0, NO_KEYS, Scripting, Kind::Script),
    Def("script|exists", -3, 0, NO_KEYS, Scripting, Kind::Script),
    Def("script|flush", -2, 0, NO_KEYS, Scripting, Kind::Script),
    Def("script|kill", 2, 0, NO_KEYS, Scripting, Kind::Script),
    Def("script|help", 2, 0, NO_KEYS, Scripting, Kind::Script),
    Def("fcall", -3, 0, NO_KEYS, Scripting, Kind::Script),
    Def("fcall_ro", -3, 0, NO_KEYS, Scripting, Kind::Script),
    Def("function", -2, 0, NO_KEYS, Scripting, Kind::Container),
    Def(
        "function|load",
        -3,
        flags::WRITE,
        NO_KEYS,
        Scripting,
        Kind::Script,
    ),
    Def(
        "function|delete",
        3,
        flags::WRITE,
        NO_KEYS,
        Scripting,
        Kind::Script,
    ),
    Def(
        "function|flush",
        -2,
        flags::WRITE,
        NO_KEYS,
        Scripting,
        Kind::Script,
    ),
    Def("function|list", -2, 0, NO_KEYS, Scripting, Kind::Script),
    Def("function|stats", 2, 0, NO_KEYS, Scripting, Kind::Script),
    Def("function|kill", 2, 0, NO_KEYS, Scripting, Kind::Script),
    Def("function|help", 2, 0, NO_KEYS, Scripting, Kind::Script),
    Def("function|dump", 2, 0, NO_KEYS, Scripting, Kind::Script),
    Def(
        "function|restore",
        -3,
        flags::WRITE,
        NO_KEYS,
        Scripting,
        Kind::Script,
    ),
];

/// Where a data command's keys are (Redis 7.0's first, last, step).
fn data_keys(name: &str) -> Keys {
    let (first, last, step) = match name {
        "del" | "unlink" | "exists" | "touch" | "mget" | "sinter" | "sunion" | "sdiff"
        | "sinterstore" | "sunionstore" | "sdiffstore" | "pfcount" | "pfmerge" => (1, -1, 1),
        "mset" | "msetnx" => (1, -1, 2),
        "rename" | "renamenx" | "copy" | "lmove" | "rpoplpush" | "smove" | "brpoplpush"
        | "blmove" | "zrangestore" | "lcs" | "geosearchstore" => (1, 2, 1),
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => (1, -2, 1),
        "bitop" => (2, -1, 1),
        // Their keys follow a count (`LMPOP numkeys key...`), or they have none.
        "lmpop" | "blmpop" | "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard"
        | "keys" | "scan" | "randomkey" | "dbsize" | "flushdb" | "flushall" | "xread"
        | "xreadgroup" | "xgroup" | "xinfo" | "zmpop" | "bzmpop" | "object" | "memory"
        | "swapdb" => (0, 0, 0),
        _ => (1, 1, 1),
    };
    Keys { first, last, step }
}

/// Every entry, sorted by name, and where each name is.
pub struct Table {
    entries: Vec<Entry>,
    by_name: HashMap<&'static [u8], usize>,
}

/// The table (built on first use).
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(Table::build)
}

/// The longest name looked up; longer ones are unknown.
const NAME_MAX: usize = 32;

impl Table {
    fn build() -> Self {
        let session = SESSION_COMMANDS.iter().map(|d| Entry {
            name: d.0,
            arity: d.1,
            flags: d.2,
            keys: d.3,
            group: d.4,
            kind: d.5,
            container: CONTAINERS
                .iter()
                .find(|(n, _)| *n == d.0)
                .map(|(_, upper)| *upper),
            sub: d.0.contains('|'),
            slot: 0,
        });
        let data = data::families().map(|spec| Entry {
            name: spec.name,
            arity: spec.arity,
            flags: if spec.write { flags::WRITE } else { 0 },
            keys: data_keys(spec.name),
            group: Group::Data(spec.family),
            kind: Kind::Data(spec),
            container: None,
            sub: false,
            slot: 0,
        });
        let mut entries: Vec<Entry> = session.chain(data).collect();
        entries.sort_unstable_by_key(|e| e.name);
        let mut by_name = HashMap::with_capacity(entries.len());
        for (i, e) in entries.iter_mut().enumerate() {
            e.slot = i;
            let known = by_name.insert(e.name.as_bytes(), i);
            assert!(known.is_none(), "{} is listed twice", e.name);
        }
        Self { entries, by_name }
    }

    /// Every entry, in slot order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry at `slot`.
    pub fn at(&self, slot: usize) -> &Entry {
        &self.entries[slot]
    }

    /// The entry of the full name `name` (lowercase), command or subcommand.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name.as_bytes()).map(|&i| &self.entries[i])
    }

    /// The command (not a subcommand) named `name`, in any case.
    pub fn command(&self, name: &[u8]) -> Option<&Entry> {
        let mut lower = [0u8; NAME_MAX];
        let lower = lower.get_mut(..name.len())?;
        for (l, b) in lower.iter_mut().zip(name) {
            *l = b.to_ascii_lowercase();
        }
        let e = &self.entries[*self.by_name.get(&*lower)?];
        (!e.sub).then_some(e)
    }

    /// The subcommand `sub` (any case) of `container`.
    pub fn subcommand(&self, container: &Entry, sub: &[u8]) -> Option<&Entry> {
        let mut full = [0u8; 2 * NAME_MAX];
        let head = container.name.len();
        let full = full.get_mut(..head + 1 + sub.len())?;
        full[..head].copy_from_slice(container.name.as_bytes());
        full[head] = b'|';
        for (l, b) in full[head + 1..].iter_mut().zip(sub) {
            *l = b.to_ascii_lowercase();
        }
        self.by_name.get(&*full).map(|&i| &self.entries[i])
    }

    /// Commands the door knows, subcommands not counted (`COMMAND COUNT`).
    pub fn count(&self) -> usize {
        self.entries.iter().filter(|e| !e.sub).count()
    }
}

#[cfg(test)]
mod tests;
