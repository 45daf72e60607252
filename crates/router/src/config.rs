//! Routing settings (`[routing]`, `[routing.monitor]`) and the per-replica form of
//! `backend.replicas` entries.

use std::time::Duration;

use serde::Deserialize;

/// A `backend.replicas` entry: `"host:port"`, or a table naming its own read weight and lag
/// bound.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum ReplicaEntry {
    Addr(String),
    Node(ReplicaConfig),
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReplicaConfig {
    pub addr: String,
    /// Share of reads relative to the other nodes' weights; 0 = no reads.
    #[serde(default)]
    pub read_weight: Option<u32>,
    /// Overrides `routing.max_replication_lag` for this replica.
    #[serde(default, with = "manifold_engine::duration_serde::option")]
    pub max_replication_lag: Option<Duration>,
}

impl ReplicaEntry {
    pub fn addr(&self) -> &str {
        match self {
            ReplicaEntry::Addr(a) => a,
            ReplicaEntry::Node(n) => &n.addr,
        }
    }
}

/// What a session's reads wait for before a replica may answer them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CausalReads {
    /// Reads go to any node within the lag bound.
    None,
    /// A session's reads see its own writes: a replica answers only once it has applied the
    /// session's last write (`MASTER_GTID_WAIT`), else the primary answers.
    #[default]
    Session,
    /// Reads see every write committed before they started: a replica answers only once it
    /// has the primary's position as of the read.
    Global,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// Send reads to replicas (and to the primary, by weight); `false` sends everything to
    /// the primary.
    pub read_write_split: bool,
    /// The primary's share of reads, against each replica's `read_weight` (default 1);
    /// 0 = the primary reads only when no replica can.
    pub primary_read_weight: u32,
    /// A replica further behind the primary than this gets no reads until it catches up.
    #[serde(with = "manifold_engine::duration_serde")]
    pub max_replication_lag: Duration,
    pub causal_reads: CausalReads,
    /// How long a read waits for a replica to apply what it must see before the primary
    /// answers it instead.
    #[serde(with = "manifold_engine::duration_serde")]
    pub causal_read_timeout: Duration,
    /// While the primary is down, statements for it wait this long for it to come back or
    /// for a new one (a promoted replica) before they fail; reads go on from the replicas.
    #[serde(with = "manifold_engine::duration_serde")]
    pub failover_timeout: Duration,
    /// When the monitor shuns the primary, promote the most advanced replica and point the
    /// others at it. Never while the old primary still answers manifold.
    pub auto_promote: bool,
    /// A transaction whose backend connection is lost before its `COMMIT` is sent runs
    /// again on the primary once one answers (within `failover_timeout`), and goes on
    /// unnoticed when every answer sums as the client received it.
    pub transaction_replay: bool,
    /// What one session's open transaction may keep for its replay (its statements as sent
    /// and a checksum per answer); a transaction growing past it is not replayed.
    #[serde(deserialize_with = "manifold_engine::size_serde::deserialize")]
    pub transaction_replay_max_size: u64,
    pub monitor: MonitorConfig,
    /// Checked in order for each statement of a session holding no connection; the first
    /// rule whose conditions all hold decides (a hint in the statement decides first).
    pub rules: Vec<crate::rules::RuleConfig>,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            read_write_split: true,
            primary_read_weight: 1,
            max_replication_lag: Duration::from_secs(10),
            causal_reads: CausalReads::Session,
            causal_read_timeout: Duration::from_secs(1),
            failover_timeout: Duration::from_secs(10),
            auto_promote: false,
            transaction_replay: true,
            transaction_replay_max_size: 1 << 20,
            monitor: MonitorConfig::default(),
            rules: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MonitorConfig {
    /// Time between health checks of each node.
    #[serde(with = "manifold_engine::duration_serde")]
    pub interval: Duration,
    /// Limit for one check (connect, or one query).
    #[serde(with = "manifold_engine::duration_serde")]
    pub timeout: Duration,
    /// Consecutive failed checks before a node is shunned (gets no new statements).
    pub shun_after: u32,
    /// Login for the checks; unset: the first `[[users]]` entry's backend login. Needs
    /// `REPLICATION CLIENT` (or `SLAVE MONITOR`) to read replication status.
    pub user: Option<String>,
    pub password: String,
    /// `schema.table` the monitor keeps a heartbeat in: it writes `UTC_TIMESTAMP(6)` there on
    /// the primary at each check (creating both if missing) and reads its age on each
    /// replica, which then counts as lag when larger than what GTIDs and
    /// `Seconds_Behind_Master` say. Needs the nodes' clocks in sync.
    pub heartbeat_table: Option<String>,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
            shun_after: 3,
            user: None,
            password: String::new(),
            heartbeat_table: None,
        }
    }
}

impl RoutingConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(1 << 10..=1 << 30).contains(&self.transaction_replay_max_size) {
            return Err("routing.transaction_replay_max_size: must be between 1K and 1G".into());
        }
        if self.monitor.interval < Duration::from_millis(10) {
            return Err("routing.monitor.interval: must be at least 10ms".into());
        }
        if self.monitor.timeout.is_zero() {
            return Err("routing.monitor.timeout: must be greater than 0".into());
        }
        if self.monitor.shun_after == 0 {
            return Err("routing.monitor.shun_after: must be at least 1".into());
        }
        if let Some(t) = &self.monitor.heartbeat_table {
            let parts: Vec<&str> = t.split('.').collect();
            let plain = |p: &&str| {
                !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            };
            if parts.len() != 2 || !parts.iter().all(plain) {
                return Err(format!(
                    "routing.monitor.heartbeat_table: '{t}' is not schema.table (letters, digits, _)"
                ));
            }
        }
        if self.causal_read_timeout.is_zero() {
            return Err("routing.causal_read_timeout: must be greater than 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        replicas: Vec<ReplicaEntry>,
        #[serde(default)]
        routing: RoutingConfig,
    }

    #[test]
    fn replicas_are_addresses_or_tables() {
        let d: Doc = toml::from_str(
            r#"
            replicas = ["h:1", { addr = "h:2", read_weight = 3, max_replication_lag = "2s" }]
            [routing]
            causal_reads = "global"
            "#,
        )
        .unwrap();
        assert_eq!(d.replicas[0], ReplicaEntry::Addr("h:1".into()));
        assert_eq!(
            d.replicas[1],
            ReplicaEntry::Node(ReplicaConfig {
                addr: "h:2".into(),
                read_weight: Some(3),
                max_replication_lag: Some(Duration::from_secs(2)),
            })
        );
        assert_eq!(d.routing.causal_reads, CausalReads::Global);
        assert!(d.routing.read_write_split);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let e = toml::from_str::<Doc>("replicas = [{ addr = \"h:2\", weight = 3 }]")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("replicas"), "{e}");
        let e = toml::from_str::<Doc>("replicas = []\n[routing]\ncausal_reads = \"always\"")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("always"), "{e}");
        let mut r = RoutingConfig::default();
        r.monitor.shun_after = 0;
        assert!(r.validate().unwrap_err().contains("shun_after"));
    }
}
