//! One configuration for the fleet: runtime changes made on any instance's admin port are
//! stored as numbered versions in `<table>_config` on the first cluster's primary, each the
//! whole shared state (every runtime tunable and which nodes are offline), and every instance
//! applies the newest within a heartbeat; a restarted instance applies it at start.
//!
//! A change is stored as the version after the one its instance last applied: when another
//! instance stored that version first, the insert fails on the primary key and the change is
//! refused (its instance applies the newer version instead), so two concurrent changes never
//! silently overwrite each other.

use std::future::Future;
use std::pin::Pin;

use manifold_backend::BackendConn;
use manifold_mysql_proto::Command;

use crate::registry::{self, INTERNAL};

/// What the server does with the shared state.
pub trait Applier: Send + Sync {
    /// The shared state now, as text (lines, in a stable order).
    fn snapshot(&self) -> String;
    /// Applies `state` where it differs from what runs; what could not be applied, if any.
    fn apply<'a>(
        &'a self,
        state: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;
}

/// A stored version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub version: u64,
    /// The instance that made the change.
    pub instance: u16,
    /// The admin command that made it.
    pub what: String,
    pub state: String,
}

/// Why a change was not shared.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    /// Another instance stored the next version first; it is applied here now.
    #[error("another change was stored first: version {} by manifold {} ({}); it is applied here now, and this change is not: run it again if it still stands", .0.version, .0.instance, .0.what)]
    Conflict(Version),
    /// The registry could not be written: the change holds on this instance only.
    #[error("{0}")]
    Unshared(String),
}

impl crate::registry::Sql {
    pub fn config_table(&self) -> String {
        format!("{}_config", self.table)
    }

    pub fn create_config(&self) -> String {
        format!(
            "{INTERNAL}CREATE TABLE IF NOT EXISTS `{}`.`{}` (version BIGINT UNSIGNED PRIMARY KEY, \
             instance SMALLINT UNSIGNED NOT NULL, at DATETIME(6) NOT NULL, what VARCHAR(1024) NOT NULL, \
             state MEDIUMTEXT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
            self.schema,
            self.config_table()
        )
    }

    pub fn latest_config(&self) -> String {
        format!(
            "{INTERNAL}SELECT version, instance, what, state FROM `{}`.`{}` ORDER BY version DESC LIMIT 1",
            self.schema,
            self.config_table()
        )
    }

    pub fn store_config(&self, v: &Version) -> String {
        let mut sql = format!(
            "{INTERNAL}INSERT INTO `{}`.`{}` (version, instance, at, what, state) VALUES ({}, {}, NOW(6), ",
            self.schema,
            self.config_table(),
            v.version,
            v.instance
        );
        registry::quote(&mut sql, &v.what);
        sql.push_str(", ");
        registry::quote(&mut sql, &v.state);
        sql.push(')');
        sql
    }
}

/// The newest stored version, if any.
pub async fn latest(
    conn: &mut BackendConn,
    sql: &registry::Sql,
) -> Result<Option<Version>, String> {
    let rows = registry::rows(conn, &sql.latest_config()).await?;
    Ok(rows.into_iter().next().and_then(|r| {
        let text = |i: usize| r.get(i).cloned().flatten().unwrap_or_default();
        Some(Version {
            version: text(0).parse().ok()?,
            instance: text(1).parse().ok()?,
            what: text(2),
            state: text(3),
        })
    }))
}

/// Stores `v`; `Ok(false)` when that version exists already (another change came first).
pub async fn store(
    conn: &mut BackendConn,
    sql: &registry::Sql,
    v: &Version,
) -> Result<bool, String> {
    let text = sql.store_config(v);
    match conn.simple_command(&Command::Query(text.as_bytes())).await {
        Ok(Ok(_)) => Ok(true),
        // ER_DUP_ENTRY
        Ok(Err(e)) if e.code == 1062 => Ok(false),
        Ok(Err(e)) => Err(format!("{e} (storing configuration version {})", v.version)),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_stored_quoted_in_its_own_table() {
        let sql = registry::Sql {
            schema: "manifold".into(),
            table: "fleet".into(),
            timeout_us: 1,
        };
        let v = Version {
            version: 7,
            instance: 2,
            what: "SET GLOBAL log.level = 'debug'".into(),
            state: "set log.level=debug\n".into(),
        };
        let text = sql.store_config(&v);
        assert!(text.starts_with(
            "/*manifold:internal*/ INSERT INTO `manifold`.`fleet_config` (version, instance, at, what, state) VALUES (7, 2, NOW(6), _utf8mb4 X'"
        ), "{text}");
        assert!(
            text.ends_with("_utf8mb4 X'736574206C6F672E6C6576656C3D64656275670A')"),
            "{text}"
        );
        assert!(sql
            .create_config()
            .contains("`manifold`.`fleet_config` (version BIGINT UNSIGNED PRIMARY KEY"));
    }
}
