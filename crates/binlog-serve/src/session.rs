//! What a session keeps for the global binlog: the replication `@vars` a replica sets before
//! its dump, and the server id it registered.

use crate::sql::Value;

/// The replication user variables a session set (`SET @master_binlog_checksum = ...`), kept
/// by manifold for the session's dump instead of on a backend connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BinlogSession {
    vars: Vec<(&'static str, Value)>,
    /// `COM_REGISTER_SLAVE`'s server id.
    pub registered_server_id: Option<u32>,
}

impl BinlogSession {
    pub fn set(&mut self, name: &'static str, value: Value) {
        match self.vars.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name, value)),
        }
    }

    /// The value of `@name`; `None` when never set (NULL when set to NULL).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    fn string(&self, name: &str) -> Option<String> {
        match self.get(name)? {
            Value::Null => None,
            Value::Int(i) => Some(i.to_string()),
            Value::Str(s) => Some(s.clone()),
        }
    }

    fn int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            Value::Null => None,
            Value::Int(i) => Some(*i),
            // MariaDB reads a string's leading number, 0 when there is none.
            Value::Str(s) => {
                let s = s.trim();
                let end = s
                    .char_indices()
                    .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
                    .map_or(s.len(), |(i, _)| i);
                Some(s[..end].parse().unwrap_or(0))
            }
        }
    }

    /// The replica did the checksum handshake (`@master_binlog_checksum` is set, to anything).
    pub fn checksum_aware(&self) -> bool {
        self.get("master_binlog_checksum").is_some() || self.get("source_binlog_checksum").is_some()
    }

    /// The replica declared CRC32: the events made up before the first format description
    /// carry a checksum.
    pub fn declared_crc32(&self) -> bool {
        self.string("master_binlog_checksum")
            .or_else(|| self.string("source_binlog_checksum"))
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("CRC32"))
    }

    /// `@mariadb_slave_capability` (0 when unset: MySQL and old MariaDB replicas).
    pub fn capability(&self) -> i64 {
        self.int("mariadb_slave_capability").unwrap_or(0)
    }

    /// `@slave_connect_state`: the replica asks for a GTID-positioned dump.
    pub fn connect_state(&self) -> Option<String> {
        self.string("slave_connect_state")
    }

    pub fn gtid_strict_mode(&self) -> bool {
        self.int("slave_gtid_strict_mode").is_some_and(|v| v != 0)
    }

    pub fn gtid_ignore_duplicates(&self) -> bool {
        self.int("slave_gtid_ignore_duplicates")
            .is_some_and(|v| v != 0)
    }

    /// `@master_heartbeat_period` in nanoseconds (0: no heartbeats).
    pub fn heartbeat_period_ns(&self) -> u64 {
        self.int("master_heartbeat_period")
            .or_else(|| self.int("source_heartbeat_period"))
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_reads_its_variables_as_mariadb_does() {
        let mut s = BinlogSession::default();
        assert!(!s.checksum_aware());
        assert_eq!(s.capability(), 0);
        s.set(
            "master_binlog_checksum",
            Value::Str("@@global.binlog_checksum".into()),
        );
        // Set to something that is not an algorithm: aware, but no checksum on fake events.
        assert!(s.checksum_aware());
        assert!(!s.declared_crc32());
        s.set("master_binlog_checksum", Value::Str("crc32".into()));
        assert!(s.declared_crc32());
        s.set("mariadb_slave_capability", Value::Str("4".into()));
        assert_eq!(s.capability(), 4);
        s.set("master_heartbeat_period", Value::Int(500_000_000));
        assert_eq!(s.heartbeat_period_ns(), 500_000_000);
        s.set("slave_connect_state", Value::Null);
        assert_eq!(s.connect_state(), None);
        s.set("slave_connect_state", Value::Str("0-1-5".into()));
        assert_eq!(s.connect_state().as_deref(), Some("0-1-5"));
    }
}
