//! The heartbeat row on every primary.
//!
//! OWNER: the source helper.
//!
//! Every `heartbeat_interval`, each cluster's primary gets one stamped write:
//! `/*manifold:hlc=N*/ INSERT ... ON DUPLICATE KEY UPDATE` of manifold's own row (id = its
//! binlog server id, so several manifolds sharing primaries keep to their own rows). The stamp
//! reaches the source's binlog in the annotate event (MariaDB) or the rows-query event
//! (MySQL); its transaction tells the merge that
//! this source has nothing older than N left to send, which is how an idle source stops
//! holding the global binlog back.

use std::io::Write as _;
use std::time::{Duration, Instant};

use manifold_backend::{BackendConn, ConnKey};
use manifold_binlog::stamp;
use manifold_mysql_proto::Command;
use tokio::sync::watch;

use crate::source::SourceTarget;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A failing heartbeat is logged at most this often (it is retried every tick).
const LOG_EVERY: Duration = Duration::from_secs(30);

/// Writes the heartbeat row of manifold `server_id` into `table` (`(schema, table)`, created
/// when missing) on `target`'s current primary every `interval`, until `stop` turns true or
/// its sender is dropped.
pub async fn run(
    target: SourceTarget,
    login: ConnKey,
    table: (String, String),
    server_id: u32,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut writer = Writer {
        target,
        login,
        create: create_sql(&table.0, &table.1),
        insert_head: insert_head(&table.0, &table.1),
        server_id,
        clock: stamp::Clock::default(),
        conn: None,
        sql: Vec::new(),
        last_logged: None,
        failures: 0,
    };
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
            _ = tick.tick() => {
                // A beat that takes longer than a tick (a primary gone) must still end when
                // asked to stop.
                tokio::select! {
                    () = writer.beat() => {}
                    changed = stop.changed() => {
                        if changed.is_err() || *stop.borrow() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

struct Writer {
    target: SourceTarget,
    login: ConnKey,
    create: [String; 2],
    /// The statement up to the stamp value's place.
    insert_head: String,
    server_id: u32,
    clock: stamp::Clock,
    /// Connected to this node (the primary when it was opened).
    conn: Option<(usize, BackendConn)>,
    sql: Vec<u8>,
    last_logged: Option<Instant>,
    /// Failures since the last one logged.
    failures: u64,
}

impl Writer {
    async fn beat(&mut self) {
        match self.try_beat().await {
            Ok(()) => {
                if self.failures > 0 {
                    tracing::info!(cluster = %self.target.cluster, "binlog: heartbeats written again");
                    self.failures = 0;
                    self.last_logged = None;
                }
            }
            Err(e) => {
                self.conn = None;
                self.failures += 1;
                let now = Instant::now();
                if self
                    .last_logged
                    .is_none_or(|t| now.duration_since(t) >= LOG_EVERY)
                {
                    self.last_logged = Some(now);
                    tracing::warn!(
                        cluster = %self.target.cluster,
                        failures = self.failures,
                        "binlog: heartbeat not written (retried every tick): {e}"
                    );
                }
            }
        }
    }

    async fn try_beat(&mut self) -> Result<(), String> {
        let primary = self.target.topology.primary();
        if self.conn.as_ref().is_some_and(|(node, _)| *node != primary) {
            // Failover: the old primary's connection may still answer, but heartbeats there
            // would never reach the new primary's binlog.
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
            for sql in &self.create {
                run_ok(&mut conn, sql.as_bytes()).await?;
            }
            self.conn = Some((primary, conn));
        }
        let Some((_, conn)) = self.conn.as_mut() else {
            return Ok(());
        };
        self.sql.clear();
        let hlc = self.clock.now();
        stamp::write(&mut self.sql, hlc);
        self.sql.extend_from_slice(self.insert_head.as_bytes());
        // Writing to a Vec cannot fail. The values are repeated rather than read back with
        // `VALUES()`, which MySQL deprecates.
        let _ = write!(
            self.sql,
            "{}, {hlc}, NOW(6)) ON DUPLICATE KEY UPDATE hlc={hlc}, at=NOW(6)",
            self.server_id
        );
        run_ok(conn, &self.sql).await
    }
}

async fn run_ok(conn: &mut BackendConn, sql: &[u8]) -> Result<(), String> {
    match conn.simple_command(&Command::Query(sql)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("{e} (running {})", String::from_utf8_lossy(sql))),
        Err(e) => Err(e.to_string()),
    }
}

/// `stamp::INTERNAL` as text: the global binlog leaves these statements out.
const INTERNAL: &str = "/*manifold:internal*/ ";

/// The statements that make the heartbeat table (names are checked by the configuration:
/// letters, digits and `_`).
fn create_sql(schema: &str, table: &str) -> [String; 2] {
    [
        format!("{INTERNAL}CREATE DATABASE IF NOT EXISTS `{schema}`"),
        format!(
            "{INTERNAL}CREATE TABLE IF NOT EXISTS `{schema}`.`{table}` (id INT UNSIGNED PRIMARY KEY, \
             hlc BIGINT UNSIGNED NOT NULL, at DATETIME(6) NOT NULL) ENGINE=InnoDB"
        ),
    ]
}

fn insert_head(schema: &str, table: &str) -> String {
    format!("INSERT INTO `{schema}`.`{table}` (id, hlc, at) VALUES (")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heartbeat_statement_names_the_table_and_keeps_one_row_per_manifold() {
        assert_eq!(
            insert_head("manifold", "binlog_heartbeat"),
            "INSERT INTO `manifold`.`binlog_heartbeat` (id, hlc, at) VALUES ("
        );
        let [db, table] = create_sql("m", "hb");
        assert_eq!(
            db,
            "/*manifold:internal*/ CREATE DATABASE IF NOT EXISTS `m`"
        );
        assert_eq!(INTERNAL.as_bytes(), manifold_binlog::stamp::INTERNAL);
        assert!(
            table.starts_with(
                "/*manifold:internal*/ CREATE TABLE IF NOT EXISTS `m`.`hb` (id INT UNSIGNED PRIMARY KEY"
            )
        );
    }
}
