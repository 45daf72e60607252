//! The `[redis]` section.

use std::net::SocketAddr;
use std::time::Duration;

use manifold_redis_proto::Limits;
use serde::Deserialize;

/// Where the door listens by default: the loopback only, as redis-server's `bind 127.0.0.1
/// -::1` and protected mode (an operator who wanted a MySQL gateway did not ask for a Redis
/// service on the network). `-`: skipped when the host has no IPv6 loopback.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:6380 -[::1]:6380";

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisConfig {
    /// Addresses Redis clients connect to (6380: next to a Redis's 6379), separated by
    /// commas or spaces (or a TOML array); an address written `-addr` is optional, as in
    /// redis.conf's `bind`: skipped, with a warning, when the host has no such address.
    /// Empty: no Redis door. The tables are created at the first data command, not before.
    #[serde(deserialize_with = "address_list")]
    pub listen: String,
    /// Largest argument of a request, in bytes (Redis's `proto-max-bulk-len`; Redis: 512
    /// MiB, here 64 MiB: a value must fit the backend's `max_allowed_packet` anyway).
    #[serde(deserialize_with = "manifold_engine::size_serde::deserialize")]
    pub proto_max_bulk_len: u64,
    /// Largest request a client may have buffered, in bytes (Redis's
    /// `client-query-buffer-limit`; Redis: 1 GiB, here 64 MiB). Raised to hold the largest
    /// argument (`proto_max_bulk_len` and 64 KiB).
    #[serde(deserialize_with = "manifold_engine::size_serde::deserialize")]
    pub client_query_buffer_limit: u64,
    /// Redis's `client-output-buffer-limit`, in Redis's syntax: `<class> <hard> <soft>
    /// <soft seconds>` for the classes `normal` and `pubsub` (sizes as Redis writes them:
    /// `32mb`, `8mb`); a class not named keeps its default ([`OutputLimits`]).
    pub client_output_buffer_limit: String,
    /// All Redis clients' buffers together (Redis 7's `maxmemory-clients`), in bytes; past
    /// it the largest clients are closed first. 0: no budget.
    #[serde(deserialize_with = "manifold_engine::size_serde::deserialize")]
    pub max_memory_clients: u64,
    /// A client that takes none of its replies for this long is disconnected; 0: never.
    #[serde(with = "manifold_engine::duration_serde")]
    pub write_timeout: Duration,
    /// Redis clients manifold accepts in all (Redis's `maxclients`); the next one gets
    /// `-ERR max number of clients reached` and is closed.
    pub max_clients: usize,
    /// A client idle this long is disconnected (Redis's `timeout`); 0: never.
    #[serde(with = "manifold_engine::duration_serde")]
    pub idle_timeout: Duration,
    /// A client that has not logged in (`AUTH`, `HELLO ... AUTH`) this long after it
    /// connected is disconnected; 0: never. (Redis has no such limit: the door has no
    /// password-less user, so such a connection can do nothing but hold a slot.)
    #[serde(with = "manifold_engine::duration_serde")]
    pub auth_timeout: Duration,
    /// The schema of the primary that keeps the keys' tables (created on first use).
    pub schema: String,
    /// Scripts (`EVAL`...) running at once, each on its own script thread; past it a script
    /// waits for one to end.
    pub max_running_scripts: usize,
    /// Memory one script's Lua state may use, in bytes; past it the script fails.
    #[serde(deserialize_with = "manifold_engine::size_serde::deserialize")]
    pub script_memory_limit: u64,
    /// A script running this long is stopped, its writes rolled back; 0: no limit (Redis
    /// has none, but blocks every client past `busy-reply-threshold`; here a script holds a
    /// script thread and its SQL transaction's locks, so it is bounded by default).
    #[serde(with = "manifold_engine::duration_serde")]
    pub script_time_limit: Duration,
    /// Addresses of the door's TLS port (as Redis's `tls-port`: TLS from the first byte, the
    /// MySQL port's certificate), written as `listen`; empty: none.
    #[serde(deserialize_with = "address_list")]
    pub tls_listen: String,
    /// Where read-only batches run: `"primary"` (every command on the primary), or
    /// `"replicas"`: the cluster's replicas, chosen as the MySQL door chooses (healthy,
    /// within `max_replication_lag`, by weight and load), once they have applied the
    /// client's last write (the primary otherwise). Writes, `MULTI`/`EXEC`, `WATCH` and
    /// blocking commands always run on the primary.
    pub read_from: String,
    /// The backend login manifold's own statements on the door's tables run as (the expiry
    /// sweeper), never a client's; unset: the monitor's (`routing.monitor.user`, else the
    /// first `[[users]]` entry's backend login).
    pub user: Option<String>,
    /// `user`'s password.
    pub password: String,
}

/// One address of `listen` / `tls_listen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddr {
    pub addr: SocketAddr,
    /// Written `-addr`: skipped when the host has no such address.
    pub optional: bool,
}

/// The addresses of a `listen` value (`key` names it in errors): none when it is empty.
pub fn listen_addrs(key: &str, value: &str) -> Result<Vec<ListenAddr>, String> {
    let mut out: Vec<ListenAddr> = Vec::new();
    for word in value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
    {
        let (optional, text) = match word.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, word),
        };
        let addr: SocketAddr = text
            .parse()
            .map_err(|e| format!("{key}: '{word}' is not an address (host:port): {e}"))?;
        if out.iter().any(|a| a.addr == addr) {
            return Err(format!("{key}: '{addr}' is listed twice"));
        }
        out.push(ListenAddr { addr, optional });
    }
    Ok(out)
}

/// A `listen` value: a string, or an array of strings (joined with spaces).
fn address_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => s,
        OneOrMany::Many(v) => v.join(" "),
    })
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.into(),
            proto_max_bulk_len: 64 << 20,
            client_query_buffer_limit: 64 << 20,
            client_output_buffer_limit: "normal 256mb 0 0 pubsub 32mb 8mb 60".into(),
            max_memory_clients: 1 << 30,
            write_timeout: Duration::from_secs(60),
            max_clients: 10_000,
            idle_timeout: Duration::ZERO,
            auth_timeout: Duration::from_secs(10),
            schema: "manifold_redis".into(),
            max_running_scripts: 16,
            script_memory_limit: 64 << 20,
            script_time_limit: Duration::from_secs(60),
            tls_listen: String::new(),
            read_from: "primary".into(),
            user: None,
            password: String::new(),
        }
    }
}

impl RedisConfig {
    /// Checks values, naming the key at fault.
    pub fn validate(&self) -> Result<(), String> {
        let plain = listen_addrs("redis.listen", &self.listen)?;
        let tls = listen_addrs("redis.tls_listen", &self.tls_listen)?;
        if let Some(a) = plain
            .iter()
            .find(|a| a.addr.port() != 0 && tls.iter().any(|t| t.addr == a.addr))
        {
            return Err(format!(
                "redis.tls_listen: '{}' is also in redis.listen",
                a.addr
            ));
        }
        // Redis accepts 1 MiB and more.
        if self.proto_max_bulk_len < 1 << 20 {
            return Err(format!(
                "redis.proto_max_bulk_len: {} is below 1048576 (1 MiB)",
                self.proto_max_bulk_len
            ));
        }
        if self.user.as_deref() == Some("") {
            return Err("redis.user: empty (remove it to use the monitor's login)".into());
        }
        // Redis accepts 1 MiB and more.
        if self.client_query_buffer_limit < 1 << 20 {
            return Err(format!(
                "redis.client_query_buffer_limit: {} is below 1048576 (1 MiB)",
                self.client_query_buffer_limit
            ));
        }
        OutputLimits::parse(&self.client_output_buffer_limit)
            .map_err(|e| format!("redis.client_output_buffer_limit: {e}"))?;
        if self.schema.is_empty() || self.schema.len() > 64 {
            return Err(format!(
                "redis.schema: '{}' is not a schema name (1 to 64 characters)",
                self.schema
            ));
        }
        if !matches!(self.read_from.as_str(), "primary" | "replicas") {
            return Err(format!(
                "redis.read_from: '{}' is neither \"primary\" nor \"replicas\"",
                self.read_from
            ));
        }
        if self.max_clients == 0 {
            return Err("redis.max_clients: must be at least 1".into());
        }
        Ok(())
    }

    /// Read-only batches may run on replicas (`read_from = "replicas"`).
    pub fn reads_from_replicas(&self) -> bool {
        self.read_from == "replicas"
    }

    /// The output limits (`client_output_buffer_limit`, checked by [`Self::validate`]).
    pub fn output_limits(&self) -> OutputLimits {
        OutputLimits::parse(&self.client_output_buffer_limit).unwrap_or_default()
    }

    /// The request limits: Redis's with `proto_max_bulk_len` and `client_query_buffer_limit`,
    /// the request buffer large enough for the largest argument.
    pub fn limits(&self) -> Limits {
        let mut limits = Limits {
            proto_max_bulk_len: self.proto_max_bulk_len,
            client_query_buffer_limit: usize::try_from(self.client_query_buffer_limit)
                .unwrap_or(usize::MAX),
            ..Limits::default()
        };
        let needed =
            usize::try_from(self.proto_max_bulk_len.saturating_add(64 << 10)).unwrap_or(usize::MAX);
        limits.client_query_buffer_limit = limits.client_query_buffer_limit.max(needed);
        limits
    }
}

/// One class's limits (`0`: no such limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

impl ClassLimit {
    /// The hard limit as a buffer length (`usize::MAX`: none).
    pub fn hard_bytes(&self) -> usize {
        if self.hard == 0 {
            usize::MAX
        } else {
            usize::try_from(self.hard).unwrap_or(usize::MAX)
        }
    }

    /// The soft limit as a buffer length (`None`: none).
    pub fn soft_bytes(&self) -> Option<usize> {
        (self.soft > 0).then(|| usize::try_from(self.soft).unwrap_or(usize::MAX))
    }
}

/// `client-output-buffer-limit` for the classes the door has (it has no replicas: a
/// `replica`/`slave` class is accepted and ignored, so that a line from redis.conf works).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: ClassLimit,
    pub pubsub: ClassLimit,
    /// What a `replica` class said (kept for `CONFIG GET`).
    pub replica: ClassLimit,
}

impl OutputLimits {
    /// Parses Redis's syntax: `<class> <hard> <soft> <soft seconds>`, repeated; classes not
    /// named keep the door's defaults. Sizes as Redis's `memtoull`: `1k` = 1000, `1kb` =
    /// 1024, `m`/`mb`, `g`/`gb`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut limits = Self::default();
        let words: Vec<&str> = s.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err(format!(
                "'{s}': expected <class> <hard limit> <soft limit> <soft seconds>, repeated"
            ));
        }
        for w in words.chunks(4) {
            let class = match w[0].to_ascii_lowercase().as_str() {
                "normal" => &mut limits.normal,
                "pubsub" => &mut limits.pubsub,
                "replica" | "slave" => &mut limits.replica,
                other => {
                    return Err(format!(
                        "'{other}' is not a class (normal, pubsub, replica)"
                    ))
                }
            };
            let hard = memtoull(w[1]).ok_or_else(|| format!("'{}' is not a size", w[1]))?;
            let soft = memtoull(w[2]).ok_or_else(|| format!("'{}' is not a size", w[2]))?;
            let soft_seconds: u64 = w[3]
                .parse()
                .map_err(|_| format!("'{}' is not a number of seconds", w[3]))?;
            *class = ClassLimit {
                hard,
                soft,
                soft_seconds,
            };
        }
        Ok(limits)
    }

    /// As `CONFIG GET client-output-buffer-limit` shows it (bytes, Redis's order).
    pub fn redis_form(&self) -> String {
        let c =
            |name: &str, l: &ClassLimit| format!("{name} {} {} {}", l.hard, l.soft, l.soft_seconds);
        format!(
            "{} {} {}",
            c("normal", &self.normal),
            c("slave", &self.replica),
            c("pubsub", &self.pubsub)
        )
    }
}

impl Default for OutputLimits {
    /// Redis's `pubsub 32mb 8mb 60` and `replica 256mb 64mb 60`; `normal` is bounded (Redis:
    /// `0 0 0`, unlimited) at 256 MiB hard, no soft limit: a reply larger than that is
    /// refused the way Redis refuses one past a configured limit.
    fn default() -> Self {
        Self {
            normal: ClassLimit {
                hard: 256 << 20,
                soft: 0,
                soft_seconds: 0,
            },
            pubsub: ClassLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60,
            },
            replica: ClassLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60,
            },
        }
    }
}

/// Redis's `memtoull`: a number with an optional unit, `b`, `k` (1000), `kb` (1024), `m`,
/// `mb`, `g`, `gb`, any case.
pub fn memtoull(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::RedisConfig;

    #[test]
    fn on_by_default_and_checked() {
        let cfg = RedisConfig::default();
        // The loopback only, IPv6's if the host has it.
        let addrs = super::listen_addrs("redis.listen", &cfg.listen).unwrap();
        let shown: Vec<(String, bool)> = addrs
            .iter()
            .map(|a| (a.addr.to_string(), a.optional))
            .collect();
        assert_eq!(
            shown,
            [
                ("127.0.0.1:6380".into(), false),
                ("[::1]:6380".into(), true)
            ]
        );
        assert!(addrs.iter().all(|a| a.addr.ip().is_loopback()));
        cfg.validate().unwrap();
        let bad = |f: fn(&mut RedisConfig)| {
            let mut c = RedisConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.listen = "nowhere".into()).starts_with("redis.listen"));
        assert!(bad(|c| c.listen = "127.0.0.1:1 -[::1]:x".into()).starts_with("redis.listen"));
        assert!(bad(|c| c.listen = "127.0.0.1:1,127.0.0.1:1".into()).contains("twice"));
        assert!(bad(|c| c.tls_listen = "127.0.0.1:6380".into()).starts_with("redis.tls_listen"));
        assert!(bad(|c| c.user = Some(String::new())).starts_with("redis.user"));
        assert!(bad(|c| c.max_clients = 0).starts_with("redis.max_clients"));
        assert!(bad(|c| c.read_from = "replica".into()).starts_with("redis.read_from"));
        assert!(!cfg.reads_from_replicas());
        let replicas = RedisConfig {
            read_from: "replicas".into(),
            ..RedisConfig::default()
        };
        replicas.validate().unwrap();
        assert!(replicas.reads_from_replicas());
        assert!(bad(|c| c.proto_max_bulk_len = 10).starts_with("redis.proto_max_bulk_len"));
        assert!(bad(|c| c.client_query_buffer_limit = 10)
            .starts_with("redis.client_query_buffer_limit"));
        assert!(bad(|c| c.client_output_buffer_limit = "normal 1".into())
            .starts_with("redis.client_output_buffer_limit"));
        // Bounded by default (Redis: a 1 GiB query buffer, unlimited normal replies).
        assert_eq!(
            cfg.limits().client_query_buffer_limit,
            (64 << 20) + (64 << 10)
        );
        assert_eq!(cfg.output_limits().normal.hard, 256 << 20);
        assert_eq!(cfg.max_memory_clients, 1 << 30);
        // The request buffer holds the largest argument.
        let limits = RedisConfig {
            proto_max_bulk_len: 2 << 30,
            ..RedisConfig::default()
        }
        .limits();
        assert!(limits.client_query_buffer_limit as u64 > 2 << 30);
    }
}

#[cfg(test)]
mod list_tests {
    use super::listen_addrs;

    #[test]
    fn a_list_is_separated_by_commas_or_spaces() {
        let commas = listen_addrs("l", "127.0.0.1:1, [::1]:1,192.0.2.1:1").unwrap();
        assert_eq!(commas.len(), 3);
        assert!(listen_addrs("l", "").unwrap().is_empty());
        assert!(listen_addrs("l", " , ").unwrap().is_empty());
    }
}
