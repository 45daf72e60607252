//! `CONFIG SET`, `CONFIG RESETSTAT`, `CONFIG REWRITE`: the settings clients set when they
//! start, kept per manifold ([`Settings`], in [`crate::server::RedisShared`]).
//!
//! Who may change what: every logged-in client may `CONFIG SET` (as Redis lets any client),
//! so only settings that change nothing another client is served are settable: they are
//! stored, checked as Redis 7.0.15 checks them (same texts), and read back by `CONFIG GET`
//! and `INFO`; `notify-keyspace-events` turns keyspace notifications on
//! ([`crate::store::events`]), the others act on nothing yet (`maxmemory-policy` evicts no
//! key: keys live in InnoDB). The operator's settings (`timeout`,
//! `maxclients`, the buffer limits..., from the `[redis]` section) and the persistence ones
//! (`save`, `appendonly`: durability is the database's) accept only their current value (a
//! client that sets what is already there starts as usual) and refuse any other with a
//! clear error. `CONFIG RESETSTAT` is refused: the figures are every client's and the
//! admin port's (`/metrics` counters never go back). `CONFIG REWRITE`: there is no Redis
//! configuration file; manifold's is the operator's.

use std::sync::{Mutex, MutexGuard};

use manifold_redis_proto::Reply;

use super::Session;
use crate::cmd::{parse_i64, Args};

use crate::store::events::class as notify;

/// Redis 7.0's `maxmemory-policy` values, in its error text's order.
const POLICIES: [&str; 8] = [
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// The settings a client may set, per manifold, with Redis 7.0's defaults.
#[derive(Debug, Clone)]
struct Values {
    notify_keyspace_events: u16,
    maxmemory_policy: &'static str,
    /// `busy-reply-threshold`, alias `lua-time-limit` (ms).
    busy_reply_threshold: i64,
    slowlog_log_slower_than: i64,
    slowlog_max_len: i64,
    latency_monitor_threshold: i64,
    latency_tracking: bool,
    /// Keys the tracking table holds at most (0: no count; its bytes are bounded anyway,
    /// [`crate::tracking::MAX_TABLE_BYTES`]).
    tracking_table_max_keys: i64,
}

impl Default for Values {
    fn default() -> Self {
        Self {
            notify_keyspace_events: 0,
            maxmemory_policy: "noeviction",
            busy_reply_threshold: 5000,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            latency_monitor_threshold: 0,
            latency_tracking: true,
            tracking_table_max_keys: crate::tracking::DEFAULT_MAX_KEYS as i64,
        }
    }
}

/// The settings clients set with `CONFIG SET`, shared by every worker (read and written
/// only by `CONFIG` and `INFO`, never on a data command's path).
#[derive(Debug, Default)]
pub struct Settings(Mutex<Values>);

impl Settings {
    fn lock(&self) -> MutexGuard<'_, Values> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `maxmemory-policy` now (`INFO memory`'s `maxmemory_policy`).
    pub fn maxmemory_policy(&self) -> &'static str {
        self.lock().maxmemory_policy
    }

    /// `busy-reply-threshold` now, in milliseconds.
    pub fn busy_reply_threshold_ms(&self) -> i64 {
        self.lock().busy_reply_threshold
    }

    /// `latency-monitor-threshold` now (0: off).
    pub fn latency_monitor_threshold(&self) -> i64 {
        self.lock().latency_monitor_threshold
    }

    /// The settable parameters with their values, for `CONFIG GET`.
    pub fn parameters(&self) -> Vec<(&'static str, String)> {
        let v = self.lock().clone();
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
        vec![
            (
                "notify-keyspace-events",
                notify::text(v.notify_keyspace_events),
            ),
            ("maxmemory-policy", v.maxmemory_policy.to_string()),
            ("busy-reply-threshold", v.busy_reply_threshold.to_string()),
            ("lua-time-limit", v.busy_reply_threshold.to_string()),
            (
                "slowlog-log-slower-than",
                v.slowlog_log_slower_than.to_string(),
            ),
            ("slowlog-max-len", v.slowlog_max_len.to_string()),
            (
                "latency-monitor-threshold",
                v.latency_monitor_threshold.to_string(),
            ),
            ("latency-tracking", yes_no(v.latency_tracking)),
            (
                "tracking-table-max-keys",
                v.tracking_table_max_keys.to_string(),
            ),
        ]
    }
}

/// How a parameter's value is checked, as Redis's config type checks it.
#[derive(Clone, Copy)]
enum Check {
    /// An integer in `min..=max` (`string2ll`).
    Int(i64, i64),
    Bool,
    Policy,
    Events,
    /// `save`'s "seconds changes" pairs.
    Save,
    /// Bytes, with Redis's units (`1k`, `1kb`, `1gb`...).
    Memory,
}

/// Who answers for a parameter.
#[derive(Clone, Copy)]
enum Owner {
    /// Clients: stored in [`Settings`].
    Client,
    /// The operator (`[redis]`) or the database: only the value it has now is accepted; the
    /// reason given for any other.
    Fixed(&'static str),
}

const OPERATOR: &str = "set by manifold's operator (the [redis] section), not by clients";
const INNODB_SAVE: &str =
    "not supported by manifold: keys are kept in InnoDB tables, there are no snapshots";
const INNODB_AOF: &str =
    "not supported by manifold: keys are kept in InnoDB tables, durability is the database's";

/// Every parameter `CONFIG SET` knows: its name, how its value is checked, who owns it.
const PARAMS: &[(&str, Check, Owner)] = &[
    ("notify-keyspace-events", Check::Events, Owner::Client),
    ("maxmemory-policy", Check::Policy, Owner::Client),
    (
        "busy-reply-threshold",
        Check::Int(0, i64::MAX),
        Owner::Client,
    ),
    ("lua-time-limit", Check::Int(0, i64::MAX), Owner::Client),
    (
        "slowlog-log-slower-than",
        Check::Int(-1, i64::MAX),
        Owner::Client,
    ),
    ("slowlog-max-len", Check::Int(0, i64::MAX), Owner::Client),
    (
        "latency-monitor-threshold",
        Check::Int(0, i64::MAX),
        Owner::Client,
    ),
    ("latency-tracking", Check::Bool, Owner::Client),
    (
        "tracking-table-max-keys",
        Check::Int(0, i64::MAX),
        Owner::Client,
    ),
    (
        "timeout",
        Check::Int(0, i32::MAX as i64),
        Owner::Fixed(OPERATOR),
    ),
    (
        "maxclients",
        Check::Int(1, u32::MAX as i64),
        Owner::Fixed(OPERATOR),
    ),
    ("maxmemory", Check::Memory, Owner::Fixed(OPERATOR)),
    ("port", Check::Int(0, 65535), Owner::Fixed(OPERATOR)),
    ("save", Check::Save, Owner::Fixed(INNODB_SAVE)),
    ("appendonly", Check::Bool, Owner::Fixed(INNODB_AOF)),
];

/// Redis 7.0's immutable parameters among those `CONFIG GET` shows.
const IMMUTABLE: [&str; 2] = ["databases", "daemonize"];

/// A value checked: the stored form of a client's setting, or the text to compare with an
/// owner's current value.
enum Checked {
    Int(i64),
    Bool(bool),
    Policy(&'static str),
    Events(u16),
    Save(Vec<i64>),
}

fn check(how: Check, value: &[u8]) -> Result<Checked, String> {
    match how {
        Check::Int(min, max) => {
            let n = parse_i64(value)
                .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
            if n < min || n > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(Checked::Int(n))
        }
        Check::Bool => {
            if value.eq_ignore_ascii_case(b"yes") {
                Ok(Checked::Bool(true))
            } else if value.eq_ignore_ascii_case(b"no") {
                Ok(Checked::Bool(false))
            } else {
                Err("argument must be 'yes' or 'no'".into())
            }
        }
        Check::Policy => POLICIES
            .iter()
            .find(|p| value.eq_ignore_ascii_case(p.as_bytes()))
            .map(|p| Checked::Policy(p))
            .ok_or_else(|| {
                format!(
                    "argument(s) must be one of the following: {}",
                    POLICIES.join(", ")
                )
            }),
        Check::Events => notify::parse(value)
            .map(Checked::Events)
            .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()),
        Check::Memory => memory(value)
            .map(Checked::Int)
            .ok_or_else(|| "argument must be a memory value".to_string()),
        Check::Save => {
            let words: Vec<&[u8]> = value
                .split(u8::is_ascii_whitespace)
                .filter(|w| !w.is_empty())
                .collect();
            let numbers: Option<Vec<i64>> = words
                .iter()
                .map(|w| std::str::from_utf8(w).ok()?.parse::<i64>().ok())
                .collect();
            match numbers {
                Some(n) if n.len() % 2 == 0 => Ok(Checked::Save(n)),
                _ => Err("Invalid save parameters".into()),
            }
        }
    }
}

/// Redis's `memtoull`: digits and an optional unit (`b`, `k`, `kb`, `m`, `mb`, `g`, `gb`, in
/// any case; `k` is 1000, `kb` 1024).
fn memory(value: &[u8]) -> Option<i64> {
    let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
    let (number, unit) = value.split_at(digits);
    let mul: i64 = match unit.to_ascii_lowercase().as_slice() {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1000 * 1000,
        b"mb" => 1024 * 1024,
        b"g" => 1000 * 1000 * 1000,
        b"gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    std::str::from_utf8(number)
        .ok()?
        .parse::<i64>()
        .ok()?
        .checked_mul(mul)
}

/// The value the operator's (or the database's) parameter `name` has now, checked.
fn current(session: &Session<'_>, name: &str) -> Checked {
    let cfg = &session.fe.shared.config;
    match name {
        "timeout" => Checked::Int(i64::try_from(cfg.idle_timeout.as_secs()).unwrap_or(i64::MAX)),
        "maxclients" => Checked::Int(i64::try_from(cfg.max_clients).unwrap_or(i64::MAX)),
        "port" => Checked::Int(i64::from(session.info.laddr.port())),
        "save" => Checked::Save(Vec::new()),
        // "maxmemory", "appendonly": 0 and no.
        "appendonly" => Checked::Bool(false),
        _ => Checked::Int(0),
    }
}

fn same(a: &Checked, b: &Checked) -> bool {
    match (a, b) {
        (Checked::Int(a), Checked::Int(b)) => a == b,
        (Checked::Bool(a), Checked::Bool(b)) => a == b,
        (Checked::Save(a), Checked::Save(b)) => a == b,
        _ => false,
    }
}

/// `CONFIG SET name value [name value...]`: every pair checked first, in order (an unknown
/// name before anything else, as Redis), then all set at once, or none.
fn set(session: &Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    let mut r = Reply::new(out, session.proto);
    if args.len() % 2 == 1 {
        r.error(crate::errors::SYNTAX);
        return;
    }
    let pairs: Vec<(&[u8], &[u8])> = (2..args.len())
        .step_by(2)
        .map(|i| (args.get(i), args.get(i + 1)))
        .collect();
    let found = |name: &[u8]| {
        PARAMS
            .iter()
            .find(|(n, ..)| name.eq_ignore_ascii_case(n.as_bytes()))
    };
    let failed = |name: &[u8], why: &str| {
        let mut text = b"CONFIG SET failed (possibly related to argument '".to_vec();
        text.extend_from_slice(name);
        text.extend_from_slice(b"') - ");
        text.extend_from_slice(why.as_bytes());
        text
    };
    // Names first, the first problem in order winning, as Redis's first pass.
    for (i, (name, _)) in pairs.iter().enumerate() {
        let text = if found(name).is_some() {
            if !pairs[..i].iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                continue;
            }
            failed(name, "duplicate parameter")
        } else if IMMUTABLE
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
        {
            failed(name, "can't set immutable config")
        } else {
            let mut text = b"Unknown option or number of arguments for CONFIG SET - '".to_vec();
            text.extend_from_slice(name);
            text.push(b'\'');
            text
        };
        r.error(&text);
        return;
    }
    let mut new = Vec::with_capacity(pairs.len());
    for (name, value) in &pairs {
        let Some(&(canonical, how, owner)) = found(name) else {
            continue;
        };
        let checked = match check(how, value) {
            Ok(c) => c,
            Err(why) => {
                r.error(&failed(name, &why));
                return;
            }
        };
        if let Owner::Fixed(why) = owner {
            if !same(&checked, &current(session, canonical)) {
                r.error(&failed(name, why));
                return;
            }
            continue;
        }
        new.push((canonical, checked));
    }
    let mut v = session.fe.shared.settings.lock();
    for (name, checked) in new {
        match (name, checked) {
            ("notify-keyspace-events", Checked::Events(f)) => {
                v.notify_keyspace_events = f;
                // What the workers read when their commands run.
                session.fe.worker.store.shared.keyspace_events.set(f);
            }
            ("maxmemory-policy", Checked::Policy(p)) => v.maxmemory_policy = p,
            ("busy-reply-threshold" | "lua-time-limit", Checked::Int(n)) => {
                v.busy_reply_threshold = n;
            }
            ("slowlog-log-slower-than", Checked::Int(n)) => v.slowlog_log_slower_than = n,
            ("slowlog-max-len", Checked::Int(n)) => v.slowlog_max_len = n,
            ("latency-monitor-threshold", Checked::Int(n)) => v.latency_monitor_threshold = n,
            ("latency-tracking", Checked::Bool(b)) => v.latency_tracking = b,
            ("tracking-table-max-keys", Checked::Int(n)) => {
                v.tracking_table_max_keys = n;
                session.fe.shared.tracker.set_max_keys(n as u64);
            }
            _ => {}
        }
    }
    drop(v);
    r.simple(b"OK");
}

/// `CONFIG SET`, `CONFIG RESETSTAT`, `CONFIG REWRITE`.
pub fn apply(session: &Session<'_>, cmd: crate::cmd::Command<'_>, out: &mut Vec<u8>) {
    use crate::cmd::Command;
    match cmd {
        Command::ConfigSet(args) => set(session, args, out),
        Command::ConfigResetStat => {
            Reply::new(out, session.proto).error(
                b"CONFIG RESETSTAT is not supported by manifold: the figures are every client's and the admin port's",
            );
        }
        Command::ConfigRewrite => {
            Reply::new(out, session.proto).error(
                b"CONFIG REWRITE is not supported by manifold: its configuration file is the operator's",
            );
        }
        _ => {}
    }
}
