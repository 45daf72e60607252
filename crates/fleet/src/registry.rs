//! The registry: one row per live instance in a table on the first cluster's primary.
//!
//! An instance claims the lowest id that no live instance holds (in a transaction that
//! locks the table's rows, so two starting at once never take the same one), rewrites its row
//! every heartbeat, and deletes it when it stops. An instance whose heartbeat is older than
//! `member_timeout` is out: its id may be claimed again. Times are the primary's (`NOW(6)`),
//! so the instances' clocks need not agree. Every statement is marked as manifold's own, and
//! the global binlog leaves the registry's tables out.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use manifold_backend::{BackendConn, BackendTarget, ConnKey};
use manifold_mysql_proto::Command;

use crate::ids::MAX_INSTANCE;
use crate::{Addrs, Member};

/// How long connecting to the primary may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one round of statements may take.
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(5);

/// The marker of manifold's own statements (`manifold_binlog::stamp::INTERNAL`).
pub const INTERNAL: &str = "/*manifold:internal*/ ";

/// Where the registry lives.
#[derive(Clone)]
pub struct Target {
    pub topology: Arc<manifold_router::Topology>,
    pub targets: Vec<BackendTarget>,
}

/// The statements, names filled in (checked by the configuration: letters, digits, `_`).
pub struct Sql {
    pub schema: String,
    pub table: String,
    pub timeout_us: u128,
}

impl Sql {
    /// The secret's table: beside the registry.
    pub fn secret_table(&self) -> String {
        format!("{}_secret", self.table)
    }

    pub fn create(&self) -> [String; 4] {
        let (s, t) = (&self.schema, &self.table);
        [
            format!("{INTERNAL}CREATE DATABASE IF NOT EXISTS `{s}`"),
            format!(
                "{INTERNAL}CREATE TABLE IF NOT EXISTS `{s}`.`{t}` (id SMALLINT UNSIGNED PRIMARY KEY, \
                 incarnation BIGINT UNSIGNED NOT NULL, name VARCHAR(255) NOT NULL, \
                 peer VARCHAR(255) NOT NULL, mysql VARCHAR(255) NOT NULL, admin VARCHAR(255) NOT NULL, \
                 http VARCHAR(255) NOT NULL, redis VARCHAR(255) NOT NULL, version VARCHAR(64) NOT NULL, \
                 config_version BIGINT UNSIGNED NOT NULL, config_fault VARCHAR(1024) NOT NULL, \
                 started DATETIME(6) NOT NULL, heartbeat DATETIME(6) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
            ),
            format!(
                "{INTERNAL}CREATE TABLE IF NOT EXISTS `{s}`.`{}` (id TINYINT UNSIGNED PRIMARY KEY, \
                 secret VARCHAR(128) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
                self.secret_table()
            ),
            self.create_config(),
        ]
    }

    pub fn offer_secret(&self, secret: &str) -> String {
        format!(
            "{INTERNAL}INSERT IGNORE INTO `{}`.`{}` (id, secret) VALUES (1, '{secret}')",
            self.schema,
            self.secret_table()
        )
    }

    pub fn read_secret(&self) -> String {
        format!(
            "{INTERNAL}SELECT secret FROM `{}`.`{}` WHERE id = 1",
            self.schema,
            self.secret_table()
        )
    }

    /// Every row with whether it is out, and its incarnation.
    pub fn lock_rows(&self) -> String {
        format!(
            "{INTERNAL}SELECT id, heartbeat < NOW(6) - INTERVAL {} MICROSECOND, incarnation FROM `{}`.`{}` FOR UPDATE",
            self.timeout_us, self.schema, self.table
        )
    }

    /// Takes over the row of an instance that is out, unless it came back or another
    /// instance took it meanwhile (no row changed then).
    pub fn take_over(
        &self,
        id: u16,
        old: u64,
        incarnation: u64,
        addrs: &Addrs,
        config: (u64, &str),
    ) -> String {
        let mut sql = self.beat(id, old, addrs, config);
        let at = sql.find(" WHERE ").expect("the beat has a WHERE");
        sql.truncate(at);
        let _ = write!(
            sql,
            ", incarnation = {incarnation}, started = NOW(6) WHERE id = {id} AND incarnation = {old} AND heartbeat < NOW(6) - INTERVAL {} MICROSECOND",
            self.timeout_us
        );
        sql
    }

    /// Registers in a free id (a duplicate key: another instance took it first).
    pub fn claim(&self, id: u16, incarnation: u64, addrs: &Addrs, config: (u64, &str)) -> String {
        let mut sql = format!(
            "{INTERNAL}INSERT INTO `{}`.`{}` (id, incarnation, name, peer, mysql, admin, http, redis, version, config_version, config_fault, started, heartbeat) VALUES ({id}, {incarnation}",
            self.schema, self.table
        );
        for v in addrs.values() {
            sql.push_str(", ");
            quote(&mut sql, v);
        }
        let _ = write!(sql, ", {}, ", config.0);
        quote(&mut sql, config.1);
        sql.push_str(", NOW(6), NOW(6))");
        sql
    }

    pub fn beat(&self, id: u16, incarnation: u64, addrs: &Addrs, config: (u64, &str)) -> String {
        let mut sql = format!(
            "{INTERNAL}UPDATE `{}`.`{}` SET heartbeat = NOW(6)",
            self.schema, self.table
        );
        for (column, v) in ["name", "peer", "mysql", "admin", "http", "redis", "version"]
            .iter()
            .zip(addrs.values())
        {
            let _ = write!(sql, ", {column} = ");
            quote(&mut sql, v);
        }
        let _ = write!(sql, ", config_version = {}, config_fault = ", config.0);
        quote(&mut sql, config.1);
        let _ = write!(sql, " WHERE id = {id} AND incarnation = {incarnation}");
        sql
    }

    pub fn members(&self) -> String {
        format!(
            "{INTERNAL}SELECT id, name, peer, mysql, admin, http, redis, version, \
             DATE_FORMAT(started, '%Y-%m-%d %H:%i:%s'), TIMESTAMPDIFF(MICROSECOND, heartbeat, NOW(6)), \
             config_version, config_fault \
             FROM `{}`.`{}` WHERE heartbeat >= NOW(6) - INTERVAL {} MICROSECOND ORDER BY id",
            self.schema, self.table, self.timeout_us
        )
    }

    pub fn leave(&self, id: u16, incarnation: u64) -> String {
        format!(
            "{INTERNAL}DELETE FROM `{}`.`{}` WHERE id = {id} AND incarnation = {incarnation}",
            self.schema, self.table
        )
    }
}

/// Appends `v` as a string literal no byte of it can escape from, whatever the server's
/// `sql_mode` (`NO_BACKSLASH_ESCAPES` or not): `_utf8mb4 X'…'`.
pub(crate) fn quote(sql: &mut String, v: &str) {
    sql.push_str("_utf8mb4 X'");
    for b in v.bytes() {
        let _ = write!(sql, "{b:02X}");
    }
    sql.push('\'');
}

/// The lowest id no live instance holds, given the rows (id, out, incarnation): with the
/// incarnation of the row that is out there, if one is.
pub fn free_id(rows: &[(u16, bool, u64)]) -> Option<(u16, Option<u64>)> {
    (1..=MAX_INSTANCE).find_map(|id| match rows.iter().find(|r| r.0 == id) {
        None => Some((id, None)),
        Some(&(_, true, old)) => Some((id, Some(old))),
        Some(_) => None,
    })
}

/// A connection to the current primary, kept between rounds.
pub struct Primary {
    target: Target,
    login: ConnKey,
    conn: Option<(usize, BackendConn)>,
}

impl Primary {
    pub fn new(target: Target, login: ConnKey) -> Primary {
        Primary {
            target,
            login,
            conn: None,
        }
    }

    /// The connection, opened (and `create` run) if there is none or the primary moved.
    pub async fn conn(&mut self, create: &[String]) -> Result<&mut BackendConn, String> {
        let primary = self.target.topology.primary();
        if self.conn.as_ref().is_some_and(|(node, _)| *node != primary) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let Some(backend) = self.target.targets.get(primary) else {
                return Err(format!(
                    "the primary is node {primary}, which has no address"
                ));
            };
            let mut conn = BackendConn::connect(backend, &self.login, CONNECT_TIMEOUT)
                .await
                .map_err(|e| format!("{}: {e}", backend.addr))?;
            for sql in create {
                exec(&mut conn, sql).await?;
            }
            self.conn = Some((primary, conn));
        }
        Ok(&mut self.conn.as_mut().expect("just set").1)
    }

    /// Forgets the connection (after a failure: it may be in a transaction or broken).
    pub fn drop_conn(&mut self) {
        self.conn = None;
    }
}

/// Runs a statement answered by OK; its affected rows.
pub async fn exec(conn: &mut BackendConn, sql: &str) -> Result<u64, String> {
    match conn.simple_command(&Command::Query(sql.as_bytes())).await {
        Ok(Ok(ok)) => Ok(ok.affected_rows),
        Ok(Err(e)) => Err(format!("{e} (running {sql})")),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs a query; its rows as text.
pub async fn rows(conn: &mut BackendConn, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    match conn.query_rows(sql.as_bytes()).await {
        Ok(Ok(r)) => Ok(r
            .rows
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
                    .collect()
            })
            .collect()),
        Ok(Err(e)) => Err(format!("{e} (running {sql})")),
        Err(e) => Err(e.to_string()),
    }
}

/// Claims an id in one transaction; `Ok(None)` when all are held.
pub async fn claim(
    conn: &mut BackendConn,
    sql: &Sql,
    incarnation: u64,
    addrs: &Addrs,
    config: (u64, &str),
) -> Result<Option<u16>, String> {
    exec(conn, "START TRANSACTION").await?;
    let claimed = async {
        let held: Vec<(u16, bool, u64)> = rows(conn, &sql.lock_rows())
            .await?
            .into_iter()
            .filter_map(|r| {
                let id = r.first()?.as_deref()?.parse().ok()?;
                let out = r.get(1)?.as_deref() == Some("1");
                let old = r.get(2)?.as_deref()?.parse().ok()?;
                Some((id, out, old))
            })
            .collect();
        let Some((id, old)) = free_id(&held) else {
            return Ok(None);
        };
        // Checked by the primary key, or by the row's incarnation: whatever the isolation
        // level's locks, two instances never both take an id.
        match old {
            None => {
                exec(conn, &sql.claim(id, incarnation, addrs, config)).await?;
            }
            Some(old) => {
                let taken = sql.take_over(id, old, incarnation, addrs, config);
                if exec(conn, &taken).await? != 1 {
                    return Err(format!("instance id {id} was taken meanwhile"));
                }
            }
        }
        Ok(Some(id))
    }
    .await;
    match claimed {
        Ok(id) => {
            exec(conn, "COMMIT").await?;
            Ok(id)
        }
        Err(e) => {
            let _ = exec(conn, "ROLLBACK").await;
            Err(e)
        }
    }
}

/// The live rows.
pub async fn members(conn: &mut BackendConn, sql: &Sql, me: u16) -> Result<Vec<Member>, String> {
    Ok(rows(conn, &sql.members())
        .await?
        .into_iter()
        .filter_map(|r| {
            let text = |i: usize| r.get(i).cloned().flatten().unwrap_or_default();
            let id: u16 = text(0).parse().ok()?;
            Some(Member {
                id,
                name: text(1),
                peer: text(2),
                mysql: text(3),
                admin: text(4),
                http: text(5),
                redis: text(6),
                version: text(7),
                started: text(8),
                heartbeat_age: Duration::from_micros(text(9).parse().unwrap_or(0)),
                config_version: text(10).parse().unwrap_or(0),
                config_fault: text(11),
                me: id == me,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql() -> Sql {
        Sql {
            schema: "manifold".into(),
            table: "fleet".into(),
            timeout_us: 5_000_000,
        }
    }

    #[test]
    fn the_lowest_id_not_held_by_a_live_instance_is_claimed() {
        assert_eq!(free_id(&[]), Some((1, None)));
        assert_eq!(free_id(&[(1, false, 5), (2, false, 6)]), Some((3, None)));
        assert_eq!(free_id(&[(1, false, 5), (2, true, 6)]), Some((2, Some(6))));
        assert_eq!(free_id(&[(2, false, 5)]), Some((1, None)));
        let all: Vec<(u16, bool, u64)> = (1..=MAX_INSTANCE).map(|i| (i, false, 1)).collect();
        assert_eq!(free_id(&all), None);
    }

    #[test]
    fn statements_name_the_table_quote_values_and_are_marked_internal() {
        let s = sql();
        let addrs = Addrs {
            name: "it's".into(),
            peer: "127.0.0.1:1".into(),
            mysql: "a\\b".into(),
            ..Addrs::default()
        };
        let claim = s.claim(3, 9, &addrs, (4, ""));
        assert!(claim.starts_with(
            "/*manifold:internal*/ INSERT INTO `manifold`.`fleet` (id, incarnation, name,"
        ));
        // it's, 127.0.0.1:1, a\b: hex, so that no quote or backslash means anything.
        assert!(
            claim.contains("VALUES (3, 9, _utf8mb4 X'69742773', _utf8mb4 X'3132372E302E302E313A31', _utf8mb4 X'615C62'"),
            "{claim}"
        );
        let beat = s.beat(3, 9, &addrs, (4, "it's"));
        assert!(
            beat.contains("config_version = 4, config_fault = _utf8mb4 X'69742773'"),
            "{beat}"
        );
        assert!(beat.ends_with("WHERE id = 3 AND incarnation = 9"), "{beat}");
        let take = s.take_over(3, 9, 10, &addrs, (4, ""));
        assert!(
            take.ends_with(", incarnation = 10, started = NOW(6) WHERE id = 3 AND incarnation = 9 AND heartbeat < NOW(6) - INTERVAL 5000000 MICROSECOND"),
            "{take}"
        );
        for sql in s.create() {
            assert!(sql.starts_with(INTERNAL));
        }
        assert!(s.create()[2].contains("`manifold`.`fleet_secret`"));
        assert!(s.members().contains("INTERVAL 5000000 MICROSECOND"));
    }
}
