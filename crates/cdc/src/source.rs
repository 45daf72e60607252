//! One replication connection per cluster primary.
//!
//! OWNER: the source helper.
//!
//! A source reader logs in to its cluster's current primary as a replica would (MariaDB GTID
//! dump: `@slave_connect_state`, `COM_REGISTER_SLAVE`, `COM_BINLOG_DUMP`; MySQL:
//! `COM_REGISTER_SLAVE`, `COM_BINLOG_DUMP_GTID` with the GTID set read so far), verifies every
//! event's CRC32, groups the events into whole transactions ([`Assembler`]) and sends each to
//! the service. It remembers the GTID of the last whole transaction it sent: after any loss
//! (server gone, failover, checksum mismatch, silence) it drops the half-received one and
//! resumes from there on whichever node is the primary by then, so nothing is lost and
//! nothing repeated.

use std::sync::Arc;
use std::time::Duration;

use manifold_backend::{
    BackendConn, BackendTarget, ConnKey, ErrorKind as BackendErrorKind, ReadError, ServerFlavor,
};
use manifold_binlog::event;
use manifold_binlog::gtid::{Dialect, GtidPos, GtidState};
use manifold_binlog::spill::Budget;
use manifold_binlog::txn::{Assembler, SourceTxn, TxnError};
use manifold_mysql_proto::packets::ErrPacket;
use manifold_mysql_proto::Command;
use tokio::sync::mpsc;

use crate::errors::{CdcError, ErrorKind};
use crate::state::BinlogShared;

mod check;
mod mysql;

pub use check::{check_source, SourceVars};
pub use mysql::{check_mysql_source, MysqlSourceVars};

/// How long a login to a primary may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the primary sends a heartbeat event on an idle dump
/// (`@master_heartbeat_period`).
const HEARTBEAT_PERIOD: Duration = Duration::from_secs(1);

/// A dump silent for longer than this (three heartbeat periods and some slack) is taken as
/// lost: the primary, or the network to it, is gone without closing the connection.
const SILENCE_LIMIT: Duration = Duration::from_millis(3_500);

/// How often a streaming reader checks that it still reads the cluster's primary (GTID
/// resume makes moving at any point safe).
const PRIMARY_CHECK: Duration = Duration::from_secs(1);

/// The largest event a source may send: MariaDB's largest `max_allowed_packet` (1 GiB) and
/// the packet's leading status byte.
const MAX_EVENT_PACKET: usize = (1 << 30) + 1;

/// `COM_REGISTER_SLAVE`.
const COM_REGISTER_SLAVE: u8 = 0x15;
/// `COM_BINLOG_DUMP`: with `@slave_connect_state` set, MariaDB's GTID dump.
const COM_BINLOG_DUMP: u8 = 0x12;
/// Dump flag: send annotate events (the statement text, with manifold's stamp, before rows).
const BINLOG_SEND_ANNOTATE_ROWS_EVENT: u16 = 0x02;
/// `@mariadb_slave_capability`: MARIA_SLAVE_CAPABILITY_GTID (GTID events, GTID dump).
const SLAVE_CAPABILITY_GTID: u8 = 4;
/// The host name a source connection registers with (`SHOW SLAVE HOSTS`).
const REPORT_HOST: &[u8] = b"manifold";

/// A cluster whose primary is read.
#[derive(Clone)]
pub struct SourceTarget {
    /// The cluster's name (`SHOW BINLOG SOURCES`, messages).
    pub cluster: String,
    /// The cluster's nodes; its primary is read (the router's monitor follows failover and
    /// promotion, so a reconnect goes to the new primary).
    pub topology: Arc<manifold_router::Topology>,
    /// How to reach each node, in the topology's node order.
    pub targets: Vec<BackendTarget>,
}

/// What a source reader tells the service.
#[derive(Debug)]
pub enum SourceMsg {
    /// A whole transaction, in the source's order.
    Txn(SourceTxn),
    /// The dump from the primary at `addr` started, after the source position `from`.
    Connected { addr: String, from: GtidState },
    /// The connection was lost or refused, or the server is misconfigured: the reader tries
    /// again after the reconnect interval. (A reader that stops, [`ErrorKind::Fatal`], sends
    /// nothing: its state says `stopped: ...`.)
    Lost { error: String },
}

/// How a connection ended.
enum Ended {
    /// The service stopped listening: the reader ends.
    Stopped,
    /// Failed: its kind says whether to retry.
    Failed(CdcError),
}

/// [`run_from`] with an empty `start` taken as "not started": from the primary's current
/// position. A source whose recorded start is the empty position (a fresh primary) must use
/// [`run_from`] with `Some`, or what it wrote since would be skipped.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    index: usize,
    target: SourceTarget,
    login: ConnKey,
    start: GtidState,
    heartbeat: (String, String),
    budget: Budget,
    server_id: u32,
    tx: mpsc::Sender<(usize, SourceMsg)>,
    shared: Arc<BinlogShared>,
    reconnect: Duration,
) {
    let start = (!start.is_empty()).then_some(start);
    run_from(
        index, target, login, start, heartbeat, budget, server_id, tx, shared, reconnect,
    )
    .await;
}

/// Reads the primary of `target` from `start` until `tx` is closed. `None`: the source was
/// never read; it starts at the primary's position of its first connection (the global
/// binlog begins when it is first turned on), and every reconnection resumes from there. A
/// `Some` position is resumed literally, the empty one included (from the beginning of the
/// primary's binlog: a primary that had written nothing when it was first read).
///
/// - `index`: the source's position in the configuration (sent with every message).
/// - `login`: needs `REPLICATION SLAVE` (and `SELECT` of the variables checked).
/// - `heartbeat`: `(schema, table)` of the heartbeat rows, which the assembler marks.
/// - `budget`: memory for transactions being received.
/// - `server_id`: the replica server id this reader registers with on every primary: unique
///   per manifold (a second replica with the same id would make the primary drop the first).
/// - `reconnect`: how long to wait after a lost or refused connection.
#[allow(clippy::too_many_arguments)]
pub async fn run_from(
    index: usize,
    target: SourceTarget,
    login: ConnKey,
    start: Option<GtidState>,
    heartbeat: (String, String),
    budget: Budget,
    server_id: u32,
    tx: mpsc::Sender<(usize, SourceMsg)>,
    shared: Arc<BinlogShared>,
    reconnect: Duration,
) {
    let mut assembler = Assembler::new(index, (&heartbeat.0, &heartbeat.1), &budget);
    for (schema, table) in &shared.config.also_own_tables {
        assembler.also_own(schema, table);
    }
    let mut reader = Reader {
        index,
        target,
        login,
        server_id,
        assembler,
        pos: start,
        tx,
        shared,
        checksum_errors: 0,
        forged_stamps: 0,
    };
    // The last misconfiguration reported: reported again only when it changes.
    let mut reported: Option<String> = None;
    loop {
        let error = match reader.connect_and_stream().await {
            Ended::Stopped => return,
            Ended::Failed(error) => error,
        };
        reader.assembler.reset();
        let cluster = &reader.target.cluster;
        let resume_from = reader.pos.clone().unwrap_or_default();
        let state = match error.kind {
            ErrorKind::Lost => {
                reported = None;
                tracing::error!(%cluster, %resume_from, retry_in = ?reconnect, "binlog: source lost: {error}");
                format!("error: {error}")
            }
            ErrorKind::Misconfigured => {
                if reported.as_deref() == Some(error.message.as_str()) {
                    tracing::debug!(%cluster, check_in = ?reconnect, "binlog: source still misconfigured: {error}");
                } else {
                    tracing::error!(%cluster, %resume_from, check_in = ?reconnect, "binlog: source misconfigured (checked again until fixed): {error}");
                    reported = Some(error.message.clone());
                }
                format!("error: {error}")
            }
            ErrorKind::Fatal => {
                tracing::error!(%cluster, %resume_from, "binlog: source stopped (the global order holds here until manifold is restarted): {error}");
                format!("stopped: {error}")
            }
        };
        reader.shared.update_source(index, |s| s.state = state);
        // Stopped: its state says so (the service's `Lost` handling would say `error: `).
        if error.kind == ErrorKind::Fatal {
            return;
        }
        let error = error.message;
        if reader
            .tx
            .send((index, SourceMsg::Lost { error }))
            .await
            .is_err()
        {
            return;
        }
        tokio::select! {
            () = reader.tx.closed() => return,
            () = tokio::time::sleep(reconnect) => {}
        }
    }
}

struct Reader {
    index: usize,
    target: SourceTarget,
    login: ConnKey,
    server_id: u32,
    assembler: Assembler,
    /// GTID position after the last whole transaction sent: where a reconnect resumes. `None`
    /// until the first connection read the primary's position (never read before); an empty
    /// position is a real one (nothing before it), not "not started".
    pos: Option<GtidState>,
    tx: mpsc::Sender<(usize, SourceMsg)>,
    shared: Arc<BinlogShared>,
    /// Events whose CRC32 did not match, since start.
    checksum_errors: u64,
    /// The assembler's forged-stamp count last published.
    forged_stamps: u64,
}

impl Reader {
    async fn connect_and_stream(&mut self) -> Ended {
        let node = self.target.topology.primary();
        let Some(backend) = self.target.targets.get(node) else {
            return Ended::Failed(CdcError::lost(format!(
                "source {}: the primary is node {node}, which has no address",
                self.target.cluster
            )));
        };
        let addr = backend.addr.clone();
        self.shared.update_source(self.index, |s| {
            s.addr.clone_from(&addr);
            "connecting".clone_into(&mut s.state);
        });
        let mut conn = tokio::select! {
            () = self.tx.closed() => return Ended::Stopped,
            c = BackendConn::connect(backend, &self.login, CONNECT_TIMEOUT) => match c {
                Ok(conn) => conn,
                Err(e) => {
                    let message = format!("source {} ({addr}): {e}", self.target.cluster);
                    // A login the server refuses is the configuration's to fix.
                    return Ended::Failed(match e.kind {
                        BackendErrorKind::Auth(_) => CdcError::misconfigured(message),
                        _ => CdcError::lost(message),
                    });
                }
            },
        };
        let source = format!("source {} ({addr})", self.target.cluster);
        if let Err(e) = self.start_dump(&mut conn, &source).await {
            return Ended::Failed(e);
        }
        let from = self.pos.clone().unwrap_or_default();
        tracing::info!(cluster = %self.target.cluster, %addr, %from, "binlog: source streaming");
        self.shared
            .update_source(self.index, |s| "streaming".clone_into(&mut s.state));
        if self
            .tx
            .send((self.index, SourceMsg::Connected { addr, from }))
            .await
            .is_err()
        {
            return Ended::Stopped;
        }
        self.stream(&mut conn, &source, node).await
    }

    /// Checks the server, sets the replica variables, registers and asks for the dump.
    async fn start_dump(&mut self, conn: &mut BackendConn, source: &str) -> Result<(), CdcError> {
        let dialect = match conn.flavor() {
            ServerFlavor::MariaDb => Dialect::MariaDb,
            ServerFlavor::MySql => Dialect::MySql,
        };
        let written = self.shared.dialect();
        if dialect != written {
            return Err(CdcError::misconfigured(format!(
                "{source} is a {dialect} server, but the global binlog is written in {written}'s \
                 dialect (its other primaries or its files are {written}): a mixed fleet is \
                 refused; point cluster {} at a {written} primary",
                self.target.cluster
            )));
        }
        match dialect {
            Dialect::MariaDb => self.start_mariadb_dump(conn, source).await,
            Dialect::MySql => self.start_mysql_dump(conn, source).await,
        }
    }

    /// Where the dump starts on a server of `dialect`: the position of the last whole
    /// transaction sent; when never read, `current` (the server's position now), kept from
    /// here on so that a reconnect resumes at this point even when it is empty.
    fn resume_pos(
        &mut self,
        dialect: Dialect,
        source: &str,
        current: impl FnOnce() -> Result<GtidState, String>,
    ) -> Result<GtidState, CdcError> {
        let pos = if let Some(pos) = &self.pos {
            pos.clone()
        } else {
            // The global binlog starts with what the primary writes from now on (its earlier
            // history is not replayed).
            let pos = current().map_err(CdcError::lost)?;
            self.pos = Some(pos.clone());
            pos
        };
        if pos.is_empty() {
            return Ok(GtidState::empty(dialect));
        }
        if pos.dialect() != Some(dialect) {
            return Err(CdcError::misconfigured(format!(
                "{source}: the position to resume from is {pos}, not a {dialect} position, but \
                 the server is {dialect}"
            )));
        }
        Ok(pos)
    }

    async fn start_mariadb_dump(
        &mut self,
        conn: &mut BackendConn,
        source: &str,
    ) -> Result<(), CdcError> {
        let vars = SourceVars::read(conn)
            .await
            .map_err(|e| CdcError::lost(format!("{source}: reading its binlog settings: {e}")))?;
        check_source(&vars, source).map_err(CdcError::misconfigured)?;
        let pos = self.resume_pos(Dialect::MariaDb, source, || {
            vars.gtid_binlog_pos
                .parse::<GtidPos>()
                .map(GtidState::from)
                .map_err(|e| format!("{source}: its @@gtid_binlog_pos: {e}"))
        })?;
        let period_ns = HEARTBEAT_PERIOD.as_nanos();
        let setup = [
            "SET @master_binlog_checksum='CRC32'".to_owned(),
            format!("SET @mariadb_slave_capability={SLAVE_CAPABILITY_GTID}"),
            format!("SET @slave_connect_state='{pos}'"),
            "SET @slave_gtid_strict_mode=1".to_owned(),
            format!("SET @master_heartbeat_period={period_ns}"),
        ];
        run_setup(conn, &setup, source).await?;
        let mut payload = Vec::with_capacity(32);
        register_slave_payload(&mut payload, self.server_id);
        self.command_ok(conn, &payload, source, "registering as a replica")
            .await?;
        payload.clear();
        dump_payload(&mut payload, self.server_id);
        conn.io
            .send(0, &payload)
            .await
            .map_err(|e| CdcError::lost(format!("{source}: asking for the binlog dump: {e}")))?;
        Ok(())
    }

    /// A MySQL 8.4/9.x replica's handshake, then `COM_BINLOG_DUMP_GTID` with the set read so
    /// far: the server sends every transaction not in it.
    async fn start_mysql_dump(
        &mut self,
        conn: &mut BackendConn,
        source: &str,
    ) -> Result<(), CdcError> {
        let vars = MysqlSourceVars::read(conn)
            .await
            .map_err(|e| CdcError::lost(format!("{source}: reading its binlog settings: {e}")))?;
        check_mysql_source(&vars, source).map_err(CdcError::misconfigured)?;
        let pos = self.resume_pos(Dialect::MySql, source, || {
            vars.executed()
                .map(GtidState::from)
                .map_err(|e| format!("{source}: its @@gtid_executed: {e}"))
        })?;
        let Some(have) = pos.as_mysql() else {
            return Err(CdcError::misconfigured(format!(
                "{source}: the position to resume from is {pos}, not a MySQL GTID set"
            )));
        };
        let setup = mysql::replica_setup(mysql::replica_uuid(self.server_id), HEARTBEAT_PERIOD);
        run_setup(conn, &setup, source).await?;
        let mut payload = Vec::with_capacity(32 + have.encoded_len());
        register_slave_payload(&mut payload, self.server_id);
        self.command_ok(conn, &payload, source, "registering as a replica")
            .await?;
        payload.clear();
        mysql::dump_gtid_payload(&mut payload, self.server_id, have);
        conn.io
            .send(0, &payload)
            .await
            .map_err(|e| CdcError::lost(format!("{source}: asking for the binlog dump: {e}")))?;
        Ok(())
    }

    /// Sends a command answered by OK or ERR.
    async fn command_ok(
        &self,
        conn: &mut BackendConn,
        payload: &[u8],
        source: &str,
        what: &str,
    ) -> Result<(), CdcError> {
        conn.io
            .send(0, payload)
            .await
            .map_err(|e| CdcError::lost(format!("{source}: {what}: {e}")))?;
        let (answer, _) = conn
            .io
            .read_owned(64 * 1024)
            .await
            .map_err(|e| CdcError::lost(format!("{source}: {what}: {e}")))?;
        match answer.first() {
            Some(0x00) => Ok(()),
            // Refused (the login lacks REPLICATION SLAVE, say): the server's to change.
            Some(0xFF) => Err(CdcError::misconfigured(format!(
                "{source}: {what}: {}",
                err_payload_text(&answer)
            ))),
            _ => Err(CdcError::lost(format!(
                "{source}: {what}: unexpected answer"
            ))),
        }
    }

    /// Reads the dump of node `node` until it ends, fails, `node` is no longer the primary,
    /// or the service stops.
    async fn stream(&mut self, conn: &mut BackendConn, source: &str, node: usize) -> Ended {
        // A fenced old primary that stays up keeps the dump alive with heartbeats while the
        // writes go to the new one: the topology is what says to move.
        let mut primary_check =
            tokio::time::interval_at(tokio::time::Instant::now() + PRIMARY_CHECK, PRIMARY_CHECK);
        primary_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let read = tokio::select! {
                () = self.tx.closed() => return Ended::Stopped,
                _ = primary_check.tick() => {
                    let primary = self.target.topology.primary();
                    if primary != node {
                        let to = self
                            .target
                            .targets
                            .get(primary)
                            .map_or("an unknown address", |t| t.addr.as_str());
                        return Ended::Failed(CdcError::lost(format!(
                            "{source}: no longer the primary (now {to}); resuming there"
                        )));
                    }
                    continue;
                }
                // The limit is on silence between bytes: one large rows event may take
                // longer than it to arrive without the dump being lost.
                r = conn.io.read_packet_idle(MAX_EVENT_PACKET, SILENCE_LIMIT) => r,
            };
            let packet = match read {
                Ok(p) => p,
                Err(ReadError::Timeout) => {
                    return Ended::Failed(CdcError::lost(format!(
                        "{source}: nothing received for {SILENCE_LIMIT:?} (heartbeats every {HEARTBEAT_PERIOD:?} were asked for)"
                    )))
                }
                Err(e) => {
                    return Ended::Failed(CdcError::lost(format!(
                        "{source}: reading the dump: {e}"
                    )))
                }
            };
            let step = {
                let payload = conn.io.payload(&packet);
                self.on_packet(&payload, source)
            };
            conn.io.consume(packet.raw_len);
            match step {
                Step::More => {}
                Step::Txn(txn) => {
                    if self
                        .tx
                        .send((self.index, SourceMsg::Txn(txn)))
                        .await
                        .is_err()
                    {
                        return Ended::Stopped;
                    }
                }
                Step::End(e) => return Ended::Failed(e),
            }
        }
    }

    /// One packet of the dump.
    fn on_packet(&mut self, payload: &[u8], source: &str) -> Step {
        match payload.first() {
            Some(0x00) => {}
            Some(0xFF) => {
                return Step::End(CdcError::lost(format!(
                    "{source}: the server stopped the dump: {}",
                    err_payload_text(payload)
                )))
            }
            Some(0xFE) if payload.len() < 9 => {
                return Step::End(CdcError::lost(format!(
                    "{source}: the server ended the dump"
                )))
            }
            _ => {
                return Step::End(CdcError::lost(format!(
                    "{source}: not a binlog event packet"
                )))
            }
        }
        let event = &payload[1..];
        if let Err(e) = event::verify_checksum(event) {
            self.checksum_errors += 1;
            return Step::End(CdcError::lost(format!(
                "{source}: {e} ({} checksum errors since start)",
                self.checksum_errors
            )));
        }
        match self.assembler.push(event) {
            Ok(Some(txn)) => {
                self.publish_forged_stamps(source);
                let pos = self.pos.get_or_insert_with(GtidState::default);
                if pos.contains(&txn.gtid) {
                    // Already sent before a reconnect; strict mode makes this impossible,
                    // but a repeat must never reach the global binlog.
                    tracing::warn!(gtid = %txn.gtid, %pos, "binlog: {source} sent a transaction already received; skipped");
                    return Step::More;
                }
                pos.update(&txn.gtid);
                Step::Txn(txn)
            }
            Ok(None) => Step::More,
            Err(e) => Step::End(assembly_failed(source, &e)),
        }
    }
}

impl Reader {
    /// Publishes the assembler's count of ignored stamps when it moved (rarely: a client
    /// writing statements that look stamped), and says so in the log.
    fn publish_forged_stamps(&mut self, source: &str) {
        let forged = self.assembler.forged_stamps();
        if forged == self.forged_stamps {
            return;
        }
        self.forged_stamps = forged;
        tracing::warn!(
            forged,
            "binlog: {source}: a statement began with an ordering stamp more than {:?} ahead of the clock; ignored (the transaction takes its source's previous key)",
            manifold_binlog::stamp::MAX_AHEAD
        );
        self.shared
            .update_source(self.index, |s| s.forged_stamps = forged);
    }
}

/// A transaction that could not be assembled. Spilling it failed (a full disk, say): try
/// again. Events that passed their checksum and still cannot be read would come the same way
/// again: stop.
fn assembly_failed(source: &str, e: &TxnError) -> CdcError {
    let message = format!("{source}: {e}");
    match e {
        TxnError::Io(_) => CdcError::lost(message),
        TxnError::Event(_) | TxnError::Sequence(_) | TxnError::Payload(_) => {
            CdcError::fatal(message)
        }
    }
}

// A step lives on the stack for one packet: boxing the transaction would cost an allocation
// per transaction for nothing.
#[allow(clippy::large_enum_variant)]
enum Step {
    More,
    Txn(SourceTxn),
    End(CdcError),
}

/// Runs the replica's `SET` statements, each answered by OK.
async fn run_setup(conn: &mut BackendConn, setup: &[String], source: &str) -> Result<(), CdcError> {
    for sql in setup {
        match conn.simple_command(&Command::Query(sql.as_bytes())).await {
            Ok(Ok(_)) => {}
            // Refused by the server: what it is set to, not the connection.
            Ok(Err(e)) => {
                return Err(CdcError::misconfigured(format!(
                    "{source}: {sql}: {}",
                    err_text(&e)
                )))
            }
            Err(e) => return Err(CdcError::lost(format!("{source}: {sql}: {e}"))),
        }
    }
    Ok(())
}

fn err_text(e: &ErrPacket) -> String {
    format!("{} {}", e.code, String::from_utf8_lossy(&e.message))
}

/// The text of an ERR packet's payload (`0xFF`, code, `#` and SQLSTATE, message).
fn err_payload_text(payload: &[u8]) -> String {
    match ErrPacket::decode(payload) {
        Ok(e) => err_text(&e),
        Err(_) => "a malformed error packet".to_owned(),
    }
}

/// `COM_REGISTER_SLAVE`: server id, report host, user, password (empty), port, rank,
/// master id.
fn register_slave_payload(out: &mut Vec<u8>, server_id: u32) {
    out.push(COM_REGISTER_SLAVE);
    out.extend_from_slice(&server_id.to_le_bytes());
    // The host name is a constant shorter than 256 bytes.
    out.push(REPORT_HOST.len() as u8);
    out.extend_from_slice(REPORT_HOST);
    out.push(0); // user
    out.push(0); // password
    out.extend_from_slice(&0u16.to_le_bytes()); // port
    out.extend_from_slice(&0u32.to_le_bytes()); // replication rank
    out.extend_from_slice(&0u32.to_le_bytes()); // master id
}

/// `COM_BINLOG_DUMP` from position 4 of no file: the server starts where
/// `@slave_connect_state` says.
fn dump_payload(out: &mut Vec<u8>, server_id: u32) {
    out.push(COM_BINLOG_DUMP);
    out.extend_from_slice(&4u32.to_le_bytes());
    out.extend_from_slice(&BINLOG_SEND_ANNOTATE_ROWS_EVENT.to_le_bytes());
    out.extend_from_slice(&server_id.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_events_stop_the_reader_and_a_failed_spill_is_retried() {
        let source = "source east (10.0.0.1:3306)";
        let spill = TxnError::Io(std::io::Error::other("disk full"));
        let e = assembly_failed(source, &spill);
        assert_eq!(e.kind, ErrorKind::Lost);
        assert_eq!(
            e.to_string(),
            "source east (10.0.0.1:3306): spilling a transaction: disk full"
        );
        let out_of_order = TxnError::Sequence("rows before a GTID".into());
        let e = assembly_failed(source, &out_of_order);
        assert_eq!(e.kind, ErrorKind::Fatal);
        assert_eq!(
            e.message,
            "source east (10.0.0.1:3306): source stream out of order: rows before a GTID"
        );
    }

    #[test]
    fn replication_commands_are_laid_out_as_the_server_reads_them() {
        let mut p = Vec::new();
        register_slave_payload(&mut p, 0x0102_0304);
        assert_eq!(
            p,
            [
                &[0x15, 4, 3, 2, 1, 8][..],
                b"manifold",
                &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
            ]
            .concat()
        );
        p.clear();
        dump_payload(&mut p, 7);
        assert_eq!(p, [0x12, 4, 0, 0, 0, 2, 0, 7, 0, 0, 0]);
    }
}
