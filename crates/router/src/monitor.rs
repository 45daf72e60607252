//! The background monitor: one thread, one check loop per node.
//!
//! Each check logs in (once; the connection is kept), reads `@@read_only` and the node's GTID
//! positions and, on replicas, `SHOW SLAVE STATUS`. A node failing `shun_after` checks in a
//! row is shunned; its next good check takes it back. A replica's lag is how long ago the
//! primary first had a transaction the replica still lacks (from GTID positions, so it is
//! right even when the SQL thread is stopped and `Seconds_Behind_Master` is NULL), or
//! `Seconds_Behind_Master` when that is larger. When the primary turns `read_only` (or stops
//! answering) and exactly one other node answers with `read_only=OFF`, that node becomes the
//! primary. With `routing.auto_promote`, a shunned primary is replaced by the most advanced
//! replica, which manifold promotes itself.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use manifold_backend::{BackendConn, BackendError, BackendTarget, ConnKey, Rows, ServerFlavor};

use crate::gtid::GtidPos;
use crate::topology::{NodeId, ReadOnly, Topology};

/// Primary positions kept to date replicas' lag against (each first seen at its instant).
const HISTORY: usize = 4096;

/// Why a health check, the heartbeat or a promotion step failed. The messages are the text
/// the log and a shunned node's reason have always shown.
#[derive(Debug, thiserror::Error)]
enum CheckError {
    /// Connecting to the node or talking to it failed.
    #[error("{0}")]
    Backend(#[from] BackendError),
    /// The node answered a statement with an ERR packet.
    #[error("{sql} answered {code}: {message}")]
    Server {
        sql: String,
        code: u16,
        message: String,
    },
    #[error("no answer within routing.monitor.timeout ({0:?})")]
    Timeout(Duration),
    #[error("no row for @@read_only")]
    NoReadOnlyRow,
    /// `@@gtid_current_pos`/`@@gtid_binlog_pos` (or `@@gtid_executed`) did not parse.
    #[error("bad GTID position")]
    BadPosition,
    /// The replica's received GTIDs in its replication status did not parse.
    #[error("bad received GTID position")]
    BadReceivedPosition,
    /// The replica to promote has relay logs not applied within the timeout.
    #[error("it has not applied what it received ({0}) within routing.monitor.timeout")]
    NotCaughtUp(GtidPos),
}

/// The running monitor; dropping it stops the thread.
pub struct Monitor {
    stop: Arc<tokio::sync::Notify>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Monitor")
    }
}

impl Monitor {
    /// Starts checking every node of `topology`. `targets[n]` is how to reach node `n`;
    /// `login` the monitor's backend login. The error is the message an operator reads when
    /// manifold does not start, hence a `String`.
    pub fn start(
        topology: Arc<Topology>,
        targets: Vec<BackendTarget>,
        login: ConnKey,
    ) -> Result<Monitor, String> {
        let stop = Arc::new(tokio::sync::Notify::new());
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("manifold-monitor".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(error = %e, "monitor cannot start its runtime");
                        return;
                    }
                };
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    let history = Rc::new(RefCell::new(VecDeque::new()));
                    for (node, target) in targets.iter().enumerate() {
                        let check = NodeCheck {
                            topology: topology.clone(),
                            node,
                            target: target.clone(),
                            login: login.clone(),
                            history: history.clone(),
                            heartbeat_failing: std::cell::Cell::new(false),
                            no_gtids_logged: std::cell::Cell::new(false),
                        };
                        tokio::task::spawn_local(check.run());
                    }
                    tokio::task::spawn_local(follow_promotions(topology, targets, login));
                    stopped.notified().await;
                });
            })
            .map_err(|e| format!("cannot start the monitor thread: {e}"))?;
        Ok(Monitor {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What one check found.
struct Observed {
    read_only: bool,
    /// The server has GTIDs (MySQL: `gtid_mode=ON`).
    gtids: bool,
    /// `@@gtid_current_pos`: what the node has applied.
    current: GtidPos,
    /// `@@gtid_binlog_pos`: what the node has written to its binlog (the primary's commits).
    binlog: GtidPos,
    seconds_behind: Option<u64>,
    /// Age of the heartbeat row (replicas, with `heartbeat_table`).
    heartbeat_age: Option<Duration>,
}

struct NodeCheck {
    topology: Arc<Topology>,
    node: NodeId,
    target: BackendTarget,
    login: ConnKey,
    /// The primary's positions, oldest first, each with when it was first seen.
    history: Rc<RefCell<VecDeque<(Instant, GtidPos)>>>,
    /// The last heartbeat write failed (logged once until one succeeds).
    heartbeat_failing: std::cell::Cell<bool>,
    /// A replica without GTIDs was reported (once).
    no_gtids_logged: std::cell::Cell<bool>,
}

impl NodeCheck {
    async fn run(self) {
        let cfg = &self.topology.config.monitor;
        let node = &self.topology.nodes[self.node];
        let mut conn: Option<BackendConn> = None;
        let mut failures = 0u32;
        loop {
            let started = Instant::now();
            match tokio::time::timeout(cfg.timeout, self.check(&mut conn)).await {
                Ok(Ok(seen)) => {
                    failures = 0;
                    self.record(&seen);
                    node.restore();
                }
                outcome => {
                    conn = None;
                    failures += 1;
                    let why = match outcome {
                        Ok(Err(e)) => e,
                        _ => CheckError::Timeout(cfg.timeout),
                    };
                    if failures == 1 {
                        tracing::info!(node = %node.addr, error = %why, "health check failed");
                    }
                    if failures >= cfg.shun_after {
                        node.shun(&format!("{failures} health checks failed in a row: {why}"));
                    }
                }
            }
            tokio::time::sleep(cfg.interval.saturating_sub(started.elapsed())).await;
        }
    }

    async fn check(&self, conn: &mut Option<BackendConn>) -> Result<Observed, CheckError> {
        if conn.is_none() {
            let c = BackendConn::connect(
                &self.target,
                &self.login,
                self.topology.config.monitor.timeout,
            )
            .await?;
            *conn = Some(c);
        }
        let c = conn.as_mut().expect("just connected");
        let flavor = c.flavor();
        // MySQL has one set for both: `gtid_executed` holds what the server applied, its own
        // commits included.
        let positions: &[u8] = match flavor {
            ServerFlavor::MariaDb => b"SELECT @@read_only, @@gtid_current_pos, @@gtid_binlog_pos",
            ServerFlavor::MySql => {
                b"SELECT @@read_only, @@gtid_executed, @@gtid_executed, @@gtid_mode"
            }
        };
        let rows = query(c, positions).await?;
        let row = rows.rows.first().ok_or(CheckError::NoReadOnlyRow)?;
        let text = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
        let read_only = text(0) == b"1";
        let current = GtidPos::parse(&text(1)).ok_or(CheckError::BadPosition)?;
        let binlog = GtidPos::parse(&text(2)).ok_or(CheckError::BadPosition)?;
        // Without GTIDs nothing tells what a MySQL server has applied: neither its lag nor
        // whether it has a session's write.
        let gtids = flavor == ServerFlavor::MariaDb || text(3) == b"ON";
        let mut seconds_behind = None;
        let mut heartbeat_age = None;
        let heartbeat = self.topology.config.monitor.heartbeat_table.as_deref();
        if self.node == self.topology.primary() {
            if let Some(table) = heartbeat {
                // The primary's health does not depend on it.
                match beat(c, table).await {
                    Ok(()) => self.heartbeat_failing.set(false),
                    Err(e) => {
                        if !self.heartbeat_failing.replace(true) {
                            tracing::warn!(node = %self.topology.nodes[self.node].addr, error = %e, "cannot write the heartbeat");
                        }
                    }
                }
            }
        } else {
            // Without the privilege the lag comes from GTID positions alone.
            let (status, lag_column): (&[u8], &[u8]) = match flavor {
                ServerFlavor::MariaDb => (b"SHOW SLAVE STATUS", b"Seconds_Behind_Master"),
                ServerFlavor::MySql => (b"SHOW REPLICA STATUS", b"Seconds_Behind_Source"),
            };
            if let Ok(status) = query(c, status).await {
                seconds_behind = column(&status, lag_column)
                    .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok());
            }
            if let Some(table) = heartbeat {
                // Not there yet (not replicated, or no primary wrote it): no figure.
                let sql = format!(
                    "SELECT TIMESTAMPDIFF(MICROSECOND, ts, UTC_TIMESTAMP(6)) FROM {table} WHERE id = 1"
                );
                if let Ok(rows) = query(c, sql.as_bytes()).await {
                    heartbeat_age = rows
                        .rows
                        .first()
                        .and_then(|r| r.first().cloned().flatten())
                        .and_then(|v| std::str::from_utf8(&v).ok()?.parse::<i64>().ok())
                        .map(|us| Duration::from_micros(us.max(0) as u64));
                }
            }
        }
        Ok(Observed {
            read_only,
            gtids,
            current,
            binlog,
            seconds_behind,
            heartbeat_age,
        })
    }

    fn record(&self, seen: &Observed) {
        let node = &self.topology.nodes[self.node];
        node.set_read_only(seen.read_only);
        node.set_position(seen.current.clone());
        let now = Instant::now();
        let mut history = self.history.borrow_mut();
        if self.node == self.topology.primary() {
            if history.back().is_none_or(|(_, p)| *p != seen.binlog) {
                if history.len() == HISTORY {
                    history.pop_front();
                }
                history.push_back((now, seen.binlog.clone()));
            }
            node.set_lag(Some(Duration::ZERO));
            return;
        }
        if !seen.gtids {
            if !self.no_gtids_logged.replace(true) {
                tracing::warn!(node = %node.addr, "replica without GTIDs (gtid_mode is not ON): its lag and what it has applied are unknown, so it serves no reads");
            }
            node.set_lag(None);
            return;
        }
        // The first of the primary's positions this replica does not cover: it has lacked a
        // transaction since then.
        let missing_since = history
            .iter()
            .rev()
            .take_while(|(_, p)| !seen.current.covers(p))
            .last()
            .map(|(t, _)| *t);
        let by_gtid = missing_since.map_or(Duration::ZERO, |t| now.duration_since(t));
        let by_status = seen
            .seconds_behind
            .map_or(Duration::ZERO, Duration::from_secs);
        let by_heartbeat = seen.heartbeat_age.unwrap_or(Duration::ZERO);
        node.set_lag(Some(by_gtid.max(by_status).max(by_heartbeat)));
    }
}

/// Writes the heartbeat on the primary, creating its schema and table the first time.
async fn beat(conn: &mut BackendConn, table: &str) -> Result<(), CheckError> {
    let write = format!("REPLACE INTO {table} (id, ts) VALUES (1, UTC_TIMESTAMP(6))");
    if query(conn, write.as_bytes()).await.is_ok() {
        return Ok(());
    }
    let schema = table.split('.').next().unwrap_or(table);
    query(
        conn,
        format!("CREATE DATABASE IF NOT EXISTS {schema}").as_bytes(),
    )
    .await?;
    query(
        conn,
        format!("CREATE TABLE IF NOT EXISTS {table} (id INT PRIMARY KEY, ts DATETIME(6) NOT NULL)")
            .as_bytes(),
    )
    .await?;
    query(conn, write.as_bytes()).await.map(|_| ())
}

async fn query(conn: &mut BackendConn, sql: &[u8]) -> Result<Rows, CheckError> {
    match conn.query_rows(sql).await? {
        Ok(rows) => Ok(rows),
        Err(e) => Err(CheckError::Server {
            sql: String::from_utf8_lossy(sql).into_owned(),
            code: e.code,
            message: e.message_lossy(),
        }),
    }
}

/// The first row's value of the column named `name`.
fn column(rows: &Rows, name: &[u8]) -> Option<Vec<u8>> {
    let i = rows.columns.iter().position(|c| c.name == name)?;
    rows.rows.first()?.get(i).cloned().flatten()
}

/// Follows a promotion done outside manifold: when the primary is `read_only` or shunned and
/// exactly one other node is up with `read_only=OFF`, writes go there from then on. With
/// `auto_promote`, promotes a replica itself once the primary is shunned (`shun_after`
/// failed checks), so that writes waiting `failover_timeout` find the new one.
async fn follow_promotions(topology: Arc<Topology>, targets: Vec<BackendTarget>, login: ConnKey) {
    loop {
        tokio::time::sleep(topology.config.monitor.interval).await;
        let primary = topology.primary();
        let old = &topology.nodes[primary];
        if old.is_up() && old.read_only() != ReadOnly::On {
            continue;
        }
        if !old.is_up() && topology.config.auto_promote {
            promote(&topology, &targets, &login).await;
            continue;
        }
        let mut writable = (0..topology.nodes.len()).filter(|&n| {
            n != primary
                && topology.nodes[n].is_up()
                && topology.nodes[n].read_only() == ReadOnly::Off
        });
        if let (Some(new), None) = (writable.next(), writable.next()) {
            topology.set_primary(new);
            tracing::warn!(old = %old.addr, new = %topology.nodes[new].addr, "primary changed: writes now go to the node that turned read_only=OFF");
        }
    }
}

/// Promotes the most advanced replica that is up, after making sure the primary does not
/// answer (two primaries taking writes would be worse than none), and points the other
/// replicas at it.
async fn promote(topology: &Topology, targets: &[BackendTarget], login: &ConnKey) {
    let timeout = topology.config.monitor.timeout;
    let old = topology.primary();
    if BackendConn::connect(&targets[old], login, timeout)
        .await
        .is_ok()
    {
        tracing::warn!(primary = %topology.nodes[old].addr, "not promoting a replica: the primary answers manifold again");
        return;
    }
    let up: Vec<NodeId> = (0..topology.nodes.len())
        .filter(|&n| n != old && topology.nodes[n].is_up())
        .collect();
    // The replica whose position includes the most others' (ties: configuration order).
    let Some(&new) = up.iter().max_by_key(|&&c| {
        let pos = topology.nodes[c].position();
        let covered = up
            .iter()
            .filter(|&&o| pos.covers(&topology.nodes[o].position()))
            .count();
        (covered, std::cmp::Reverse(c))
    }) else {
        tracing::error!("primary down and no replica up to promote");
        return;
    };
    let new_addr = &topology.nodes[new].addr;
    tracing::warn!(old = %topology.nodes[old].addr, new = %new_addr, "primary down; promoting a replica");
    let steps = async {
        let mut c = BackendConn::connect(&targets[new], login, timeout).await?;
        let sql = Dialect::of(&c);
        // Apply what was received before the primary died, then stop replicating.
        query(&mut c, sql.stop_io).await?;
        let status = query(&mut c, sql.status).await?;
        if let Some(received) = column(&status, sql.received_column) {
            let pos = GtidPos::parse(&received).ok_or(CheckError::BadReceivedPosition)?;
            let wait = format!(
                "SELECT {}('{pos}', {})",
                sql.wait,
                timeout.as_secs_f64().max(0.001)
            );
            // Resetting replication drops relay logs not applied yet: promote only a
            // replica that has applied everything it received (a later check tries again).
            let answer = query(&mut c, wait.as_bytes()).await?;
            let reached = answer
                .rows
                .first()
                .and_then(|r| r.first().cloned().flatten());
            if reached.as_deref() != Some(b"0") {
                return Err(CheckError::NotCaughtUp(pos));
            }
        }
        for step in sql.become_primary {
            query(&mut c, step).await?;
        }
        Ok::<(), CheckError>(())
    };
    if let Err(e) = steps.await {
        tracing::error!(node = %new_addr, error = %e, "promotion failed");
        return;
    }
    topology.set_primary(new);
    let Some((host, Ok(port))) = new_addr
        .rsplit_once(':')
        .map(|(h, p)| (h, p.parse::<u16>()))
    else {
        return;
    };
    let host = host.replace(['\'', '\\'], "");
    for &other in up.iter().filter(|&&n| n != new) {
        let outcome = async {
            let mut c = BackendConn::connect(&targets[other], login, timeout).await?;
            let sql = Dialect::of(&c);
            query(&mut c, sql.stop).await?;
            query(&mut c, sql.repoint(&host, port).as_bytes()).await?;
            query(&mut c, sql.start).await?;
            Ok::<(), CheckError>(())
        }
        .await;
        match outcome {
            Ok(()) => {
                tracing::info!(node = %topology.nodes[other].addr, primary = %new_addr, "replica now replicates from the new primary");
            }
            Err(e) => {
                tracing::error!(node = %topology.nodes[other].addr, error = %e, "could not point replica at the new primary");
            }
        }
    }
}

/// Replication statements of each server.
struct Dialect {
    flavor: ServerFlavor,
    stop_io: &'static [u8],
    stop: &'static [u8],
    start: &'static [u8],
    status: &'static [u8],
    /// The status column with the GTIDs the replica has received.
    received_column: &'static [u8],
    /// The function waiting until a position is applied.
    wait: &'static str,
    /// What turns a replica whose replication stopped into a primary.
    become_primary: &'static [&'static [u8]],
}

impl Dialect {
    fn of(conn: &BackendConn) -> Dialect {
        match conn.flavor() {
            ServerFlavor::MariaDb => Dialect {
                flavor: ServerFlavor::MariaDb,
                stop_io: b"STOP SLAVE IO_THREAD",
                stop: b"STOP SLAVE",
                start: b"START SLAVE",
                status: b"SHOW SLAVE STATUS",
                received_column: b"Gtid_IO_Pos",
                wait: "MASTER_GTID_WAIT",
                become_primary: &[
                    b"STOP SLAVE",
                    b"RESET SLAVE ALL",
                    b"SET GLOBAL read_only = OFF",
                ],
            },
            ServerFlavor::MySql => Dialect {
                flavor: ServerFlavor::MySql,
                stop_io: b"STOP REPLICA IO_THREAD",
                stop: b"STOP REPLICA",
                start: b"START REPLICA",
                status: b"SHOW REPLICA STATUS",
                received_column: b"Retrieved_Gtid_Set",
                wait: "WAIT_FOR_EXECUTED_GTID_SET",
                become_primary: &[
                    b"STOP REPLICA",
                    b"RESET REPLICA ALL",
                    b"SET GLOBAL super_read_only = OFF",
                    b"SET GLOBAL read_only = OFF",
                ],
            },
        }
    }

    /// Points a replica at a new primary, from the position the replica has (its
    /// credentials stay).
    fn repoint(&self, host: &str, port: u16) -> String {
        match self.flavor {
            ServerFlavor::MariaDb => format!(
                "CHANGE MASTER TO master_host='{host}', master_port={port}, master_use_gtid=slave_pos"
            ),
            ServerFlavor::MySql => format!(
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST='{host}', SOURCE_PORT={port}, SOURCE_AUTO_POSITION=1"
            ),
        }
    }
}
