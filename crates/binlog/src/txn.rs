//! One source's event stream grouped into whole transactions.
//!
//! OWNER: the codec helper (API fixed here; bodies to build).
//!
//! MariaDB: a transaction is a GTID event, then its events (annotate, table maps, rows,
//! queries), ended by an XID event, a `COMMIT` query, or — for a GTID flagged standalone
//! (DDL) — the one query after the GTID. Events outside transactions (format description,
//! rotate, GTID list, binlog checkpoint, heartbeat) are not part of any.

use std::time::Instant;

use crate::event::EventError;
use crate::gtid::Gtid;
use crate::spill::{Budget, TxnBody};

/// A whole transaction of one source.
#[derive(Debug)]
pub struct SourceTxn {
    /// Index of the source (the cluster's position in the configuration).
    pub source: usize,
    /// Its GTID on the source.
    pub gtid: Gtid,
    /// The source GTID event's flags (`event::gtid_flags`).
    pub gtid_flags: u8,
    /// Commit time on the source (header timestamp of the last event), seconds.
    pub timestamp: u32,
    /// The first ordering stamp found in its annotate events (`stamp::parse`).
    pub stamp: Option<u64>,
    /// Only writes to the heartbeat table: it advances the watermark and is not written out.
    pub heartbeat: bool,
    /// Events after the GTID event up to and including the one that ends it, as received
    /// (checksums included; `heartbeat` transactions may keep an empty body).
    pub body: TxnBody,
    /// Row-change events (table maps and rows) among them.
    pub dml_events: u32,
    /// When its last event arrived.
    pub received: Instant,
}

#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    #[error(transparent)]
    Event(#[from] EventError),
    #[error("source stream out of order: {0}")]
    Sequence(String),
    #[error("spilling a transaction: {0}")]
    Io(#[from] std::io::Error),
}

/// Groups events of one source into transactions.
#[derive(Debug)]
pub struct Assembler {
    pub source: usize,
    heartbeat_schema: Vec<u8>,
    heartbeat_table: Vec<u8>,
    budget: Budget,
}

impl Assembler {
    /// `heartbeat`: the `(schema, table)` manifold's heartbeat rows go to on this source.
    pub fn new(source: usize, heartbeat: (&str, &str), budget: &Budget) -> Assembler {
        Assembler {
            source,
            heartbeat_schema: heartbeat.0.as_bytes().to_vec(),
            heartbeat_table: heartbeat.1.as_bytes().to_vec(),
            budget: budget.clone(),
        }
    }

    /// Takes one event (header to checksum, checksum already verified); returns the
    /// transaction it completes, if it does.
    pub fn push(&mut self, _event: &[u8]) -> Result<Option<SourceTxn>, TxnError> {
        let _ = (&self.heartbeat_schema, &self.heartbeat_table, &self.budget);
        todo!("codec helper")
    }

    /// A transaction is open (its GTID seen, not its end).
    pub fn in_transaction(&self) -> bool {
        todo!("codec helper")
    }

    /// Drops a half-received transaction (the source connection was lost).
    pub fn reset(&mut self) {
        todo!("codec helper")
    }
}
