//! The `[binlog]` section: the global binlog is on when `dir` is set (or `--binlog-dir`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// The largest `max_file_size`: MariaDB's largest `max_binlog_size`. A binlog position is
/// 32-bit, so a file must stay under 4 GiB with the transaction that rotates it; 1 GiB keeps
/// well clear of that and gives files a replica knows.
pub const MAX_FILE_SIZE: u64 = 1 << 30;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BinlogConfig {
    /// Where the global binlog's files go; empty: the global binlog is off.
    pub dir: PathBuf,
    /// File name stem (`manifold-bin.000001`, `manifold-bin.index`).
    pub base_name: String,
    /// manifold's server id in the global binlog (event headers, GTIDs).
    pub server_id: u32,
    /// The GTID domain of the global binlog's transactions (MariaDB dialect).
    pub domain_id: u32,
    /// The source UUID of the global binlog's GTIDs (MySQL dialect, `uuid:N`); empty: one
    /// made of the server id (`6d616e69-666f-6c64-8000-` and the id in 12 hex digits, the
    /// first bytes spelling "manifold"), stable across restarts.
    pub server_uuid: String,
    /// A heartbeat row is written on every primary this often: the longest an idle source
    /// holds the merge back.
    #[serde(with = "manifold_engine::duration_serde")]
    pub heartbeat_interval: Duration,
    /// `schema.table` of the heartbeat rows on every primary (created when missing).
    pub heartbeat_table: String,
    /// Other tables of manifold's own whose writes stay out of the global binlog, as the
    /// heartbeat table's do: the fleet's registry. Set by the wiring, not the file.
    #[serde(skip)]
    pub also_own_tables: Vec<(String, String)>,
    /// A file rotates before a transaction would take it past this size.
    #[serde(deserialize_with = "manifold_engine::size_serde::deserialize")]
    pub max_file_size: u64,
    /// Memory for buffered transactions; past 85 % new data spills to disk, past 95 % all.
    #[serde(deserialize_with = "manifold_engine::size_serde::deserialize")]
    pub memory_budget: u64,
    /// Oldest files are removed while all files together exceed this (0: no limit).
    #[serde(deserialize_with = "manifold_engine::size_serde::deserialize")]
    pub retention_size: u64,
    /// Files whose last write is older than this are removed (0: kept forever).
    #[serde(with = "manifold_engine::duration_serde")]
    pub retention_age: Duration,
    /// Login the source readers and heartbeats use on every primary (needs `REPLICATION
    /// SLAVE`, and write access to the heartbeat table); unset: the monitor's login.
    pub user: Option<String>,
    pub password: String,
    /// When set, only these `[[users]]` may use the global binlog (dumps and the binlog
    /// statements), and only with the grants the servers ask for; unset, every user whose
    /// backend login holds them on every source primary. A narrowing, never a widening.
    pub users: Option<Vec<String>>,
    /// How long a lost source connection waits before reconnecting.
    #[serde(with = "manifold_engine::duration_serde")]
    pub reconnect_interval: Duration,
}

impl Default for BinlogConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::new(),
            base_name: "manifold-bin".into(),
            server_id: 4_000_000_001,
            domain_id: 0,
            server_uuid: String::new(),
            heartbeat_interval: Duration::from_millis(100),
            heartbeat_table: "manifold.binlog_heartbeat".into(),
            also_own_tables: Vec::new(),
            max_file_size: 512 << 20,
            memory_budget: 512 << 20,
            retention_size: 0,
            retention_age: Duration::from_secs(7 * 24 * 3600),
            user: None,
            password: String::new(),
            users: None,
            reconnect_interval: Duration::from_secs(1),
        }
    }
}

impl BinlogConfig {
    pub fn enabled(&self) -> bool {
        !self.dir.as_os_str().is_empty()
    }

    /// Where transactions past the memory budget spill: `<dir>/spill`.
    pub fn spill_dir(&self) -> PathBuf {
        self.dir.join("spill")
    }

    /// The global binlog's MySQL source UUID (`server_uuid`, or the one made of the server
    /// id). `validate` checks that a configured one parses.
    pub fn uuid(&self) -> manifold_binlog::gtid::Uuid {
        self.server_uuid.parse().unwrap_or_else(|_| {
            format!("6d616e69-666f-6c64-8000-{:012x}", self.server_id)
                .parse()
                .unwrap_or_default()
        })
    }

    /// The heartbeat table as `(schema, table)`.
    pub fn heartbeat_names(&self) -> (&str, &str) {
        self.heartbeat_table
            .split_once('.')
            .unwrap_or(("manifold", self.heartbeat_table.as_str()))
    }

    /// Checks values, naming the key at fault.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled() {
            return Ok(());
        }
        if self.server_id == 0 {
            return Err("binlog.server_id must not be 0".into());
        }
        if !self.server_uuid.is_empty() {
            self.server_uuid
                .parse::<manifold_binlog::gtid::Uuid>()
                .map_err(|e| format!("binlog.server_uuid: {e}"))?;
        }
        if self.heartbeat_interval.is_zero() {
            return Err("binlog.heartbeat_interval must be > 0".into());
        }
        let ok_name =
            |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        match self.heartbeat_table.split_once('.') {
            Some((s, t)) if ok_name(s) && ok_name(t) => {}
            _ => {
                return Err(format!(
                    "binlog.heartbeat_table: '{}' is not schema.table (letters, digits, _)",
                    self.heartbeat_table
                ))
            }
        }
        if !(4096..=MAX_FILE_SIZE).contains(&self.max_file_size) {
            return Err("binlog.max_file_size must be between 4K and 1G".into());
        }
        if self.memory_budget < (1 << 20) {
            return Err("binlog.memory_budget must be at least 1M".into());
        }
        if self.base_name.is_empty()
            || !self
                .base_name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err("binlog.base_name: letters, digits, '-' and '_' only".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_file_size_is_bounded_below_4_gib() {
        let config = |max_file_size| BinlogConfig {
            dir: "/tmp/binlog".into(),
            max_file_size,
            ..BinlogConfig::default()
        };
        assert!(config(4096).validate().is_ok());
        assert!(config(MAX_FILE_SIZE).validate().is_ok());
        for bad in [4095, MAX_FILE_SIZE + 1, 5 << 30] {
            let e = config(bad).validate().unwrap_err();
            assert!(e.contains("binlog.max_file_size"), "{e}");
        }
    }
}
