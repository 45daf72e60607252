//! One source's event stream grouped into whole transactions.
//!
//! OWNER: the codec helper.
//!
//! MariaDB: a transaction is a GTID event, then its events (annotate, table maps, rows,
//! queries), ended by an XID event, a `COMMIT` query, or — for a GTID flagged standalone
//! (DDL) — the one query after the GTID. Events outside transactions (format description,
//! rotate, GTID list, binlog checkpoint, heartbeat) are not part of any. A non-transactional
//! group (a MyISAM write the server could not roll back) ends with a `ROLLBACK` query instead
//! of `COMMIT`; an XA transaction's groups end with `XA PREPARE`, `XA COMMIT` or `XA ROLLBACK`.
//!
//! MySQL (8.0+): a transaction is a GTID event (33), then either its events, or one
//! `TRANSACTION_PAYLOAD` event holding them compressed ([`crate::payload`]). MySQL's GTID
//! event has no standalone flag: as its transaction boundary parser
//! (`trx_boundary_parser.cpp`) does, the group's first query decides — `BEGIN` or
//! `XA START` opens a group that ends like MariaDB's (XID, `XA_PREPARE` event, `COMMIT`,
//! `ROLLBACK`, `XA ROLLBACK`); any other statement is the whole group, which `INTVAR`,
//! `RAND` and `USER_VAR` events may precede. `PREVIOUS_GTIDS` is framing.

use std::time::Instant;

use crate::event::{self, gtid_flags, types, EventError, Header};
use crate::gtid::TxnGtid;
use crate::payload::{PayloadError, PayloadEvents};
use crate::spill::{Budget, TxnBody};
use crate::stamp;

/// A whole transaction of one source.
#[derive(Debug)]
pub struct SourceTxn {
    /// Index of the source (the cluster's position in the configuration).
    pub source: usize,
    /// Its GTID on the source.
    pub gtid: TxnGtid,
    /// What a MySQL source's GTID event said of its commit (`None` from MariaDB).
    pub mysql: Option<MysqlCommit>,
    /// The source GTID event's flags: MariaDB's `event::gtid_flags`; from MySQL, its flags
    /// byte (`event::mysql::GTID_FLAG_MAY_HAVE_SBR`), which says nothing of standalone
    /// groups (the body's first event does: [`event::mysql::opens_group`]).
    pub gtid_flags: u8,
    /// Commit time on the source (header timestamp of the last event), seconds.
    pub timestamp: u32,
    /// The first ordering stamp found in its annotate events or statements (`stamp::parse`)
    /// that is not implausibly far ahead of the wall clock (`stamp::plausible`).
    pub stamp: Option<u64>,
    /// Only writes to the heartbeat table, or the heartbeat table's DDL as manifold sends it
    /// (marked `stamp::INTERNAL`): it advances the watermark (if stamped) and is not written
    /// out.
    pub heartbeat: bool,
    /// Events after the GTID event up to and including the one that ends it, as received
    /// (checksums included; `heartbeat` transactions may keep an empty body).
    pub body: TxnBody,
    /// Row-change events (table maps and rows) among them.
    pub dml_events: u32,
    /// When its last event arrived.
    pub received: Instant,
}

/// What a MySQL GTID event says of its transaction's commit besides the GTID, which the
/// global binlog's own GTID event repeats (MySQL's `Gtid_log_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MysqlCommit {
    /// Microseconds since the epoch: when the source committed it.
    pub immediate_commit_us: u64,
    /// When the server where it was first written committed it.
    pub original_commit_us: u64,
    /// `MAJOR*10000 + MINOR*100 + PATCH` of the source.
    pub immediate_server_version: u32,
    /// Of the server where it was first written.
    pub original_server_version: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    #[error(transparent)]
    Event(#[from] EventError),
    #[error("source stream out of order: {0}")]
    Sequence(String),
    #[error("spilling a transaction: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Payload(#[from] PayloadError),
}

/// Groups events of one source into transactions.
#[derive(Debug)]
pub struct Assembler {
    pub source: usize,
    heartbeat_schema: Vec<u8>,
    heartbeat_table: Vec<u8>,
    /// manifold's DDL creating the heartbeat schema, exactly as the heartbeat writer sends it.
    internal_create_schema: Vec<u8>,
    /// What manifold's DDL creating the heartbeat table starts with.
    internal_create_table: Vec<u8>,
    /// Other tables of manifold's own ([`Assembler::also_own`]).
    also_own: Vec<OwnTable>,
    budget: Budget,
    open: Option<OpenTxn>,
    /// Stamps ignored since start for being too far ahead of the wall clock.
    forged_stamps: u64,
}

/// A table of manifold's own besides the heartbeat table ([`Assembler::also_own`]).
#[derive(Debug)]
struct OwnTable {
    schema: Vec<u8>,
    table: Vec<u8>,
    create_schema: Vec<u8>,
    create_table: Vec<u8>,
}

/// What is known of the transaction being received.
#[derive(Debug)]
struct OpenTxn {
    gtid: TxnGtid,
    mysql: Option<MysqlCommit>,
    gtid_flags: u8,
    group: Group,
    stamp: Option<u64>,
    table_maps: u32,
    /// Every table map so far named the heartbeat table.
    only_heartbeat_tables: bool,
    /// A statement manifold marked as its own (`stamp::INTERNAL`): the heartbeat table's DDL.
    internal: bool,
    dml_events: u32,
    body: TxnBody,
}

/// What kind of group the open transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// One statement (DDL): its query ends it.
    Standalone,
    /// `BEGIN` (or `XA START`, or MariaDB's transactional GTID) to its end.
    Multi,
    /// A MySQL group before its first query says which.
    Undecided,
}

impl Assembler {
    /// `heartbeat`: the `(schema, table)` manifold's heartbeat rows go to on this source.
    pub fn new(source: usize, heartbeat: (&str, &str), budget: &Budget) -> Assembler {
        let (schema, table) = heartbeat;
        let internal = |sql: String| [stamp::INTERNAL, sql.as_bytes()].concat();
        Assembler {
            source,
            heartbeat_schema: schema.as_bytes().to_vec(),
            heartbeat_table: table.as_bytes().to_vec(),
            internal_create_schema: internal(format!("CREATE DATABASE IF NOT EXISTS `{schema}`")),
            internal_create_table: internal(format!(
                "CREATE TABLE IF NOT EXISTS `{schema}`.`{table}` "
            )),
            budget: budget.clone(),
            open: None,
            forged_stamps: 0,
            also_own: Vec::new(),
        }
    }

    /// Treats `(schema, table)` as manifold's own too, as the heartbeat table is: its
    /// transactions (the fleet's registry) and its DDL as manifold sends it are left out of
    /// the global binlog.
    pub fn also_own(&mut self, schema: &str, table: &str) {
        let internal = |sql: String| [stamp::INTERNAL, sql.as_bytes()].concat();
        self.also_own.push(OwnTable {
            schema: schema.as_bytes().to_vec(),
            table: table.as_bytes().to_vec(),
            create_schema: internal(format!("CREATE DATABASE IF NOT EXISTS `{schema}`")),
            create_table: internal(format!("CREATE TABLE IF NOT EXISTS `{schema}`.`{table}` ")),
        });
    }

    /// Stamps ignored since start because they were further ahead of the wall clock than
    /// [`stamp::MAX_AHEAD`] when their event arrived: statements that begin like a stamped
    /// one without manifold having stamped them. Their transactions count as unstamped.
    pub fn forged_stamps(&self) -> u64 {
        self.forged_stamps
    }

    /// Takes one event (header to checksum, checksum already verified); returns the
    /// transaction it completes, if it does.
    pub fn push(&mut self, event: &[u8]) -> Result<Option<SourceTxn>, TxnError> {
        let header = Header::parse(event)?;
        if header.event_size as usize != event.len() {
            return Err(EventError::Malformed {
                type_code: header.type_code,
                what: "event size in the header differs from the event's length",
            }
            .into());
        }
        match header.type_code {
            types::GTID => {
                let (gtid, flags) = event::parse_mariadb_gtid(event)?;
                let group = if flags & gtid_flags::STANDALONE == 0 {
                    Group::Multi
                } else {
                    Group::Standalone
                };
                self.open_txn(TxnGtid::MariaDb(gtid), None, flags, group)?;
                Ok(None)
            }
            types::MYSQL_GTID => {
                let e = event::mysql::parse_mysql_gtid(event)?;
                self.open_txn(
                    TxnGtid::MySql(e.gtid),
                    Some(e.commit),
                    e.flags,
                    Group::Undecided,
                )?;
                Ok(None)
            }
            // Outside any transaction: file and stream framing.
            types::FORMAT_DESCRIPTION
            | types::ROTATE
            | types::STOP
            | types::GTID_LIST
            | types::BINLOG_CHECKPOINT
            | types::PREVIOUS_GTIDS
            | types::HEARTBEAT
            | types::HEARTBEAT_V2 => Ok(None),
            types::START_ENCRYPTION => Err(EventError::Malformed {
                type_code: types::START_ENCRYPTION,
                what: "encrypted binlogs are not supported (turn encrypt_binlog off)",
            }
            .into()),
            types::ANONYMOUS_GTID => Err(TxnError::Sequence(
                "the source writes transactions without GTIDs: it needs gtid_mode=ON \
                 (and enforce_gtid_consistency=ON)"
                    .to_string(),
            )),
            types::GTID_TAGGED => Err(TxnError::Sequence(
                "the source wrote a tagged GTID (uuid:tag:number): tagged GTIDs are not supported"
                    .to_string(),
            )),
            types::TRANSACTION_PAYLOAD => self.payload(event),
            types::INCIDENT => Err(TxnError::Sequence(
                "the source logged an incident (events were lost on it)".to_string(),
            )),
            _ => self.body_event(&header, event),
        }
    }

    fn open_txn(
        &mut self,
        gtid: TxnGtid,
        mysql: Option<MysqlCommit>,
        gtid_flags: u8,
        group: Group,
    ) -> Result<(), TxnError> {
        if let Some(open) = &self.open {
            return Err(TxnError::Sequence(format!(
                "GTID {gtid} began while transaction {} was still open",
                open.gtid
            )));
        }
        self.open = Some(OpenTxn {
            gtid,
            mysql,
            gtid_flags,
            group,
            stamp: None,
            table_maps: 0,
            only_heartbeat_tables: true,
            internal: false,
            dml_events: 0,
            body: TxnBody::new(&self.budget),
        });
        Ok(())
    }

    /// A MySQL compressed transaction: every event in it goes the way a plain one goes, and
    /// the last one must end the transaction (MySQL's parser takes a payload as a whole
    /// transaction).
    fn payload(&mut self, event: &[u8]) -> Result<Option<SourceTxn>, TxnError> {
        match &self.open {
            Some(open) if open.group == Group::Undecided && open.body.events() == 0 => {}
            Some(open) => {
                return Err(TxnError::Sequence(format!(
                    "a transaction payload inside transaction {} (after other events)",
                    open.gtid
                )))
            }
            None => {
                return Err(TxnError::Sequence(
                    "a transaction payload outside a transaction (no GTID event before it)"
                        .to_string(),
                ))
            }
        }
        let mut inner = PayloadEvents::new(event)?;
        let mut buf = Vec::new();
        let mut done = None;
        while inner.next_event(&mut buf)? {
            let header = Header::parse(&buf)?;
            if done.is_some() {
                return Err(TxnError::Sequence(format!(
                    "a transaction payload holds events (type {}) after its transaction's end",
                    header.type_code
                )));
            }
            if !is_body_event(header.type_code) {
                return Err(TxnError::Sequence(format!(
                    "a transaction payload holds an event of type {}, which no transaction has",
                    header.type_code
                )));
            }
            done = self.body_event(&header, &buf)?;
        }
        if done.is_none() {
            let gtid = self.open.take().map(|o| o.gtid).unwrap_or_default();
            return Err(TxnError::Sequence(format!(
                "the transaction payload of {gtid} ends before its transaction does"
            )));
        }
        Ok(done)
    }

    fn body_event(&mut self, header: &Header, event: &[u8]) -> Result<Option<SourceTxn>, TxnError> {
        let Some(open) = self.open.as_mut() else {
            return Err(TxnError::Sequence(format!(
                "event of type {} outside a transaction (no GTID event before it)",
                header.type_code
            )));
        };
        if open.group == Group::Undecided {
            match header.type_code {
                types::QUERY => {
                    open.group = if event::mysql::opens_group(event) {
                        Group::Multi
                    } else {
                        Group::Standalone
                    };
                }
                // Pre-statement events: the statement they go with follows.
                types::INTVAR | types::RAND | types::USER_VAR => {}
                t => {
                    return Err(TxnError::Sequence(format!(
                        "event of type {t} right after the GTID event of {}, where MySQL \
                         writes BEGIN or a statement",
                        open.gtid
                    )))
                }
            }
        }
        let standalone = open.group == Group::Standalone;
        match header.type_code {
            types::QUERY => {
                let text = event::query_text(event)?;
                if open.stamp.is_none() {
                    open.stamp = plausible_stamp(text, &mut self.forged_stamps);
                }
                // Only the heartbeat table's own DDL: the marker on any other statement is
                // the user's text, and that statement belongs in the global binlog.
                open.internal |= standalone
                    && (text == self.internal_create_schema.as_slice()
                        || text.starts_with(&self.internal_create_table)
                        || self.also_own.iter().any(|o| {
                            text == o.create_schema.as_slice() || text.starts_with(&o.create_table)
                        }));
            }
            types::ANNOTATE_ROWS | types::ROWS_QUERY if open.stamp.is_none() => {
                open.stamp = plausible_stamp(event::annotate_text(event), &mut self.forged_stamps);
            }
            types::TABLE_MAP => {
                let (schema, table) = event::table_map_names(event)?;
                open.table_maps += 1;
                open.only_heartbeat_tables &= (schema == self.heartbeat_schema
                    && table == self.heartbeat_table)
                    || self
                        .also_own
                        .iter()
                        .any(|o| schema == o.schema && table == o.table);
                open.dml_events += 1;
            }
            t if types::is_rows(t) => open.dml_events += 1,
            _ => {}
        }
        // A compressed query ends only a standalone group (DDL): COMMIT and ROLLBACK are too
        // short for the server to compress.
        let ends = event::ends_group(event, standalone);
        open.body.push(event)?;
        if ends {
            self.close(header.timestamp)
        } else {
            Ok(None)
        }
    }

    /// Ends the open transaction at an event stamped `timestamp`.
    fn close(&mut self, timestamp: u32) -> Result<Option<SourceTxn>, TxnError> {
        let Some(mut open) = self.open.take() else {
            return Ok(None);
        };
        // It may wait long for the other sources: its spill write buffer goes now.
        open.body.finish()?;
        Ok(Some(SourceTxn {
            source: self.source,
            gtid: open.gtid,
            mysql: open.mysql,
            gtid_flags: open.gtid_flags,
            timestamp,
            stamp: open.stamp,
            heartbeat: open.internal || (open.table_maps > 0 && open.only_heartbeat_tables),
            body: open.body,
            dml_events: open.dml_events,
            received: Instant::now(),
        }))
    }

    /// A transaction is open (its GTID seen, not its end).
    pub fn in_transaction(&self) -> bool {
        self.open.is_some()
    }

    /// Drops a half-received transaction (the source connection was lost).
    pub fn reset(&mut self) {
        self.open = None;
    }
}

/// Whether an event of this type can be inside a transaction (not framing, not a GTID).
fn is_body_event(type_code: u8) -> bool {
    !matches!(
        type_code,
        types::GTID
            | types::MYSQL_GTID
            | types::ANONYMOUS_GTID
            | types::GTID_TAGGED
            | types::TRANSACTION_PAYLOAD
            | types::FORMAT_DESCRIPTION
            | types::ROTATE
            | types::STOP
            | types::GTID_LIST
            | types::BINLOG_CHECKPOINT
            | types::PREVIOUS_GTIDS
            | types::HEARTBEAT
            | types::HEARTBEAT_V2
            | types::START_ENCRYPTION
            | types::INCIDENT
    )
}

/// The stamp `text` starts with, unless it is too far ahead of the wall clock to be one
/// manifold wrote (counted in `forged`).
fn plausible_stamp(text: &[u8], forged: &mut u64) -> Option<u64> {
    let value = stamp::parse(text)?;
    if stamp::plausible(value, stamp::wall_now()) {
        Some(value)
    } else {
        *forged += 1;
        None
    }
}

#[cfg(test)]
mod tests;
