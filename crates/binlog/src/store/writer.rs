//! Appending transactions, rotation, purging.

use std::io::{BufWriter, Write as _};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::files::{create_file, file_name, file_number, set_in_use, write_index};
use super::{damaged, io_error, Appended, FileInfo, StoreError, TableIds, Writer};
use crate::event::mysql::{self, MysqlGtidEvent};
use crate::event::{self, types, CHECKSUM_LEN, HEADER_LEN};
use crate::gtid::{Dialect, Gtid, MysqlGtid, TxnGtid};
use crate::origin::Origin;
use crate::txn::{MysqlCommit, SourceTxn};

/// Writes go to the file in chunks of this size (or at [`Writer::flush`]).
pub(super) const WRITE_BUFFER: usize = 256 * 1024;

/// MariaDB's GTID event as manifold writes it (no commit id, no XID).
const GTID_EVENT_LEN: u64 = 42;

/// The most a MySQL GTID event takes (original timestamp and version apart, a 9-byte length).
const MYSQL_GTID_EVENT_MAX: u64 = 96;

/// The largest transaction written: what fits in a new file after its header, with room left
/// for the first transaction's full origin and the rotate event after it.
const MAX_TXN_BYTES: u64 = u32::MAX as u64 - (1 << 20);

/// Table ids MySQL uses for a dummy rows event: no table to map.
const DUMMY_TABLE_IDS: [u64; 2] = [0x00ff_ffff, 0xffff_ffff_ffff];

impl Writer {
    pub(super) fn current_path(&self) -> PathBuf {
        self.opts
            .dir
            .join(file_name(&self.opts.base_name, self.number))
    }

    pub(super) fn append_txn(&mut self, txn: &SourceTxn, key: u64) -> Result<Appended, StoreError> {
        if self.broken {
            return Err(damaged(
                &self.current_path(),
                "an earlier write failed; reopen the global binlog to recover it",
            ));
        }
        let Some(cluster) = self.opts.clusters.get(txn.source) else {
            return Err(io_error(
                &self.current_path(),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("transaction of unknown source {}", txn.source),
                ),
            ));
        };
        let mut origin = Origin {
            cluster: cluster.clone(),
            gtid: txn.gtid,
            key,
            sources: None,
        };
        // The estimate uses the short origin so that the decision depends on the input only.
        let gtid_len = match self.opts.dialect {
            Dialect::MariaDb => GTID_EVENT_LEN,
            Dialect::MySql => MYSQL_GTID_EVENT_MAX,
        };
        let estimate = gtid_len
            + (HEADER_LEN + CHECKSUM_LEN + origin.format().len()) as u64
            + txn.body.bytes();
        if estimate > MAX_TXN_BYTES {
            // Refused before a byte is written: the file stays whole and the writer usable.
            return Err(io_error(
                &self.current_path(),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "transaction {} of source {cluster} is {} bytes: a binlog file cannot hold it (positions are 32-bit, files stay under 4 GiB)",
                        txn.gtid,
                        txn.body.bytes()
                    ),
                ),
            ));
        }
        // Whatever the options say, a file never grows past what 32-bit positions reach.
        let max_file_size = self.opts.max_file_size.min(MAX_TXN_BYTES);
        let rotated = self.file_has_txn && self.size + estimate > max_file_size;
        if rotated {
            self.start_next_file(txn.timestamp)
                .inspect_err(|_| self.broken = true)?;
        }
        if !self.file_has_txn {
            origin.sources = Some(self.sources.clone());
        }
        let start = self.size;
        let gtid = match self.opts.dialect {
            Dialect::MariaDb => TxnGtid::MariaDb(Gtid {
                domain: self.opts.domain_id,
                server: self.opts.server_id,
                seq: self.next_seq,
            }),
            Dialect::MySql => TxnGtid::MySql(crate::gtid::MysqlGtid {
                uuid: self.opts.server_uuid,
                gno: self.next_seq,
            }),
        };
        let events = self
            .write_txn(txn, gtid, &origin)
            .inspect_err(|_| self.broken = true)?;
        let state = &mut self.sources[txn.source];
        state.pos.update(&txn.gtid);
        state.key = key;
        self.states_changed = true;
        self.gtid.update(&gtid);
        self.next_seq += 1;
        self.file_has_txn = true;
        self.file_txns += 1;
        Ok(Appended {
            end: self.end(),
            gtid,
            bytes: self.size - start,
            events,
            rotated,
        })
    }

    /// GTID, origin, then the body; returns the number of events.
    fn write_txn(
        &mut self,
        txn: &SourceTxn,
        gtid: TxnGtid,
        origin: &Origin,
    ) -> Result<u64, StoreError> {
        let text = origin.format();
        let (mut events, place) = match gtid {
            TxnGtid::MariaDb(g) => {
                let mut gtid_event = event::mariadb_gtid(txn.timestamp, g, txn.gtid_flags);
                self.write_event(&mut gtid_event)?;
                let mut annotate =
                    event::annotate(txn.timestamp, self.opts.server_id, text.as_bytes());
                self.write_event(&mut annotate)?;
                (2, None)
            }
            TxnGtid::MySql(g) => {
                let place = self.write_mysql_gtid(txn, g, text.as_bytes())?;
                (1, Some(place))
            }
        };
        let mut buf = std::mem::take(&mut self.event);
        let result = self.write_body(txn, &mut buf, &mut events, place, text.as_bytes());
        self.event = buf;
        result.map(|()| events)
    }

    /// A MySQL transaction's GTID event: `gtid`, the file's logical clock (serial: each
    /// transaction depends on the one before), the source's commit times and the exact length
    /// of everything written for the transaction. Returns where its origin goes.
    fn write_mysql_gtid(
        &mut self,
        txn: &SourceTxn,
        gtid: MysqlGtid,
        origin: &[u8],
    ) -> Result<OriginPlace, StoreError> {
        let path = self.current_path();
        let place = origin_place(txn).map_err(|e| io_error(&path, e))?;
        let origin_bytes = match place {
            OriginPlace::InStatement | OriginPlace::InLaterStatement(_) => {
                mysql::query_comment_len(origin)
            }
            OriginPlace::InRowsQuery => mysql::rows_query_prefix_len(origin),
            OriginPlace::First | OriginPlace::BeforeTableMap | OriginPlace::BeforeLast => {
                HEADER_LEN + 1 + origin.len() + CHECKSUM_LEN
            }
        } as u64;
        let commit = txn.mysql.map_or_else(
            || {
                let us = u64::from(txn.timestamp) * 1_000_000;
                MysqlCommit {
                    immediate_commit_us: us,
                    original_commit_us: us,
                    immediate_server_version: mysql::MYSQL_SERVER_VERSION_ID,
                    original_server_version: mysql::MYSQL_SERVER_VERSION_ID,
                }
            },
            |c| MysqlCommit {
                immediate_server_version: mysql::MYSQL_SERVER_VERSION_ID,
                ..c
            },
        );
        let k = i64::try_from(self.file_txns + 1).unwrap_or(i64::MAX);
        let rest = txn.body.bytes() + origin_bytes;
        let mut e = MysqlGtidEvent {
            flags: txn.gtid_flags,
            gtid,
            last_committed: k - 1,
            sequence_number: k,
            commit,
            transaction_length: rest,
        };
        // The length counts the GTID event, whose size depends on the length's encoding:
        // settles within three rounds (the encoding only grows).
        for _ in 0..4 {
            let total = rest + mysql::mysql_gtid_len(&e) as u64;
            if total == e.transaction_length {
                break;
            }
            e.transaction_length = total;
        }
        let mut bytes = mysql::mysql_gtid(txn.timestamp, self.opts.server_id, &e);
        self.write_event(&mut bytes)?;
        Ok(place)
    }

    /// The source's events; in the MySQL dialect (`place` given) with the origin `origin`
    /// where `place` says.
    fn write_body(
        &mut self,
        txn: &SourceTxn,
        buf: &mut Vec<u8>,
        events: &mut u64,
        place: Option<OriginPlace>,
        origin: &[u8],
    ) -> Result<(), StoreError> {
        let path = self.current_path();
        let mut body = txn.body.reader().map_err(|e| io_error(&path, e))?;
        self.tables.in_txn.clear();
        if place == Some(OriginPlace::First) {
            self.write_rows_query(txn.timestamp, origin, events)?;
        }
        // Where the origin goes is decided before (the GTID event carries the length); this
        // finds that spot again while the events stream past.
        let mut pending = place;
        let mut queries = 0u32;
        let mut index = 0usize;
        let last = txn.body.events().saturating_sub(1);
        while body.next_event(buf).map_err(|e| io_error(&path, e))? {
            if buf.len() < HEADER_LEN + CHECKSUM_LEN {
                return Err(damaged(&path, "a source event shorter than its header"));
            }
            let type_code = buf[4];
            if type_code == types::QUERY {
                queries += 1;
            }
            match pending {
                Some(OriginPlace::InStatement) if queries == 1 => {
                    *buf = mysql::query_with_comment(buf, origin)
                        .map_err(|e| damaged(&path, e.to_string()))?;
                    pending = None;
                }
                Some(OriginPlace::InLaterStatement(at)) if index == at => {
                    *buf = mysql::query_with_comment(buf, origin)
                        .map_err(|e| damaged(&path, e.to_string()))?;
                    pending = None;
                }
                Some(OriginPlace::InRowsQuery) if type_code == types::ROWS_QUERY => {
                    *buf = mysql::rows_query_with_prefix(buf, origin)
                        .map_err(|e| damaged(&path, e.to_string()))?;
                    pending = None;
                }
                Some(OriginPlace::BeforeTableMap) if type_code == types::TABLE_MAP => {
                    self.write_rows_query(txn.timestamp, origin, events)?;
                    pending = None;
                }
                Some(OriginPlace::BeforeLast) if index == last => {
                    self.write_rows_query(txn.timestamp, origin, events)?;
                    pending = None;
                }
                _ => {}
            }
            index += 1;
            if type_code == types::TABLE_MAP {
                let source_id = event::table_id(buf).map_err(|e| damaged(&path, e.to_string()))?;
                let (schema, table) =
                    event::table_map_names(buf).map_err(|e| damaged(&path, e.to_string()))?;
                let id = self.tables.id_for(txn.source, schema, table);
                self.tables.in_txn.push((source_id, id));
                event::set_table_id(buf, id);
            } else if types::is_rows(type_code) {
                let source_id = event::table_id(buf).map_err(|e| damaged(&path, e.to_string()))?;
                if let Some(&(_, id)) = self.tables.in_txn.iter().find(|(s, _)| *s == source_id) {
                    event::set_table_id(buf, id);
                } else if !DUMMY_TABLE_IDS.contains(&source_id) {
                    tracing::warn!(
                        source = txn.source,
                        gtid = %txn.gtid,
                        table_id = source_id,
                        "rows event without a table map in its transaction; table id kept"
                    );
                }
            }
            self.write_event(buf)?;
            *events += 1;
        }
        if pending.is_some_and(|p| p != OriginPlace::First) {
            // The body changed between deciding and writing: the length written is wrong.
            return Err(damaged(
                &path,
                "a transaction's origin found no place in it",
            ));
        }
        Ok(())
    }

    fn write_rows_query(
        &mut self,
        timestamp: u32,
        origin: &[u8],
        events: &mut u64,
    ) -> Result<(), StoreError> {
        let mut e = mysql::rows_query(timestamp, self.opts.server_id, origin);
        self.write_event(&mut e)?;
        *events += 1;
        Ok(())
    }

    /// Sets the event's server id, `log_pos` (its end here) and checksum, and writes it.
    fn write_event(&mut self, event: &mut [u8]) -> Result<(), StoreError> {
        let end = self.size + event.len() as u64;
        let Ok(log_pos) = u32::try_from(end) else {
            return Err(damaged(
                &self.current_path(),
                "a transaction takes the file past 4 GiB (binlog positions are 32-bit)",
            ));
        };
        event::finish(event, Some(self.opts.server_id), log_pos);
        if let Err(e) = self.out.write_all(event) {
            return Err(io_error(&self.current_path(), e));
        }
        self.size = end;
        Ok(())
    }

    pub(super) fn rotate_now(&mut self, timestamp: u32) -> Result<bool, StoreError> {
        if self.broken {
            return Err(damaged(
                &self.current_path(),
                "an earlier write failed; reopen the global binlog to recover it",
            ));
        }
        if !self.file_has_txn {
            return Ok(false);
        }
        self.start_next_file(timestamp)
            .inspect_err(|_| self.broken = true)?;
        Ok(true)
    }

    /// Ends the current file with a rotate event and starts the next one, whose header carries
    /// `timestamp` (the first transaction's).
    fn start_next_file(&mut self, timestamp: u32) -> Result<(), StoreError> {
        let next_name = file_name(&self.opts.base_name, self.number + 1);
        let mut rotate = event::rotate(self.opts.server_id, next_name.as_bytes(), 4, false);
        self.write_event(&mut rotate)?;
        let path = self.current_path();
        self.out.flush().map_err(|e| io_error(&path, e))?;
        set_in_use(self.out.get_ref(), &path, false)?;
        self.out
            .get_ref()
            .sync_all()
            .map_err(|e| io_error(&path, e))?;
        if let Some(current) = self.files.last_mut() {
            current.size = self.size;
        }

        let next_path = self.opts.dir.join(&next_name);
        let (file, size) = create_file(&next_path, &self.opts, timestamp, &self.gtid)?;
        let mut names: Vec<String> = self.files.iter().map(|f| f.name.clone()).collect();
        names.push(next_name.clone());
        write_index(&self.opts.dir, &self.opts.base_name, &names)?;
        self.files.push(FileInfo {
            name: next_name,
            size,
        });
        self.out = BufWriter::with_capacity(WRITE_BUFFER, file);
        self.number += 1;
        self.size = size;
        self.file_has_txn = false;
        self.file_txns = 0;
        self.tables = TableIds::new(self.opts.clusters.len());
        Ok(())
    }

    /// How many of the oldest files may go: all but the current one and — while the current
    /// one holds no transaction — the one before it, whose transactions carry the sources'
    /// positions that recovery needs.
    ///
    /// `in_use`: the oldest file a reader is in; neither it nor any later file may go.
    fn removable(&self, in_use: Option<&str>) -> usize {
        let keep = if self.file_has_txn { 1 } else { 2 };
        let mut removable = self.files.len().saturating_sub(keep);
        if let Some(in_use) = in_use.and_then(|name| file_number(&self.opts.base_name, name)) {
            let before_in_use = self
                .files
                .iter()
                .take_while(|f| {
                    file_number(&self.opts.base_name, &f.name).is_some_and(|n| n < in_use)
                })
                .count();
            removable = removable.min(before_in_use);
        }
        removable
    }

    pub(super) fn purge_to_file(
        &mut self,
        file: &str,
        in_use: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let Some(at) = self.files.iter().position(|f| f.name == file) else {
            return Err(io_error(
                &self.opts.dir.join(file),
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "target log not found in the binlog index",
                ),
            ));
        };
        self.remove_oldest(at.min(self.removable(in_use)))
    }

    pub(super) fn retain_files(
        &mut self,
        max_bytes: u64,
        max_age: Duration,
        in_use: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let removable = self.removable(in_use);
        let files = self.files();
        let mut total: u64 = files.iter().map(|f| f.size).sum();
        let now = SystemTime::now();
        let mut count = 0;
        while count < removable {
            let oldest = &files[count];
            let over_size = max_bytes > 0 && total > max_bytes;
            let over_age = !max_age.is_zero() && {
                let path = self.opts.dir.join(&oldest.name);
                let modified = std::fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .map_err(|e| io_error(&path, e))?;
                now.duration_since(modified).unwrap_or_default() > max_age
            };
            if !over_size && !over_age {
                break;
            }
            total -= oldest.size;
            count += 1;
        }
        self.remove_oldest(count)
    }

    /// Drops the `count` oldest files from the index (atomically), then from the disk.
    fn remove_oldest(&mut self, count: usize) -> Result<Vec<String>, StoreError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let names: Vec<String> = self.files[count..].iter().map(|f| f.name.clone()).collect();
        write_index(&self.opts.dir, &self.opts.base_name, &names)?;
        let removed: Vec<String> = self.files.drain(..count).map(|f| f.name).collect();
        for name in &removed {
            let path = self.opts.dir.join(name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&path, e)),
            }
        }
        Ok(removed)
    }
}

/// Where a MySQL transaction's origin goes. MySQL's boundary parser ends a group at any
/// statement right after its GTID event, so the origin cannot go between them; and a replica
/// holds one `ROWS_QUERY` event until the rows after it are applied (a second one before
/// those would be lost, and trips a debug build's assertion), so in a group the origin joins
/// the statement's own rows-query event, or has one of its own only where the rows follow it.
/// A comment goes after a statement's text, never before: MySQL recognises some statements
/// by how their text starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OriginPlace {
    /// A `ROWS_QUERY` event right after the GTID event (a body without a query).
    First,
    /// A comment after the text of the first query, the group's one statement (DDL,
    /// `XA COMMIT`).
    InStatement,
    /// In a group (`BEGIN` / `XA START` first): a line before the text of its first
    /// `ROWS_QUERY` event, which comes before its first table map.
    InRowsQuery,
    /// In a group without a rows-query event before its first table map (the source's
    /// session logged none): a `ROWS_QUERY` event of its own right before that table map.
    BeforeTableMap,
    /// In a group without rows: a comment after the text of the query at this index of the
    /// body (the first after the opening one that is not the group's last event: a `COMMIT`
    /// must stay exactly that).
    InLaterStatement(usize),
    /// In a group without rows or other statements: a `ROWS_QUERY` event before its last
    /// event.
    BeforeLast,
}

/// Where the origin of `txn` (a MySQL source's) goes: decided by its first query event and,
/// in a group, by what comes first of a rows-query event and a table map, else by its other
/// statements.
fn origin_place(txn: &SourceTxn) -> std::io::Result<OriginPlace> {
    let mut body = txn.body.reader()?;
    let mut buf = Vec::new();
    let mut opened = false;
    let mut index = 0usize;
    let mut later_query = None;
    let last = txn.body.events().saturating_sub(1);
    while body.next_event(&mut buf)? {
        let at = index;
        index += 1;
        let type_code = buf.get(4).copied();
        if !opened {
            if type_code != Some(types::QUERY) {
                continue;
            }
            if !mysql::opens_group(&buf) {
                return Ok(if event::query_text(&buf).is_ok() {
                    OriginPlace::InStatement
                } else {
                    OriginPlace::First
                });
            }
            opened = true;
            continue;
        }
        match type_code {
            Some(types::ROWS_QUERY) => return Ok(OriginPlace::InRowsQuery),
            Some(types::TABLE_MAP) => return Ok(OriginPlace::BeforeTableMap),
            Some(types::QUERY) if at != last && event::query_text(&buf).is_ok() => {
                later_query.get_or_insert(at);
            }
            _ => {}
        }
    }
    Ok(match (opened, later_query) {
        (true, Some(at)) => OriginPlace::InLaterStatement(at),
        (true, None) => OriginPlace::BeforeLast,
        (false, _) => OriginPlace::First,
    })
}
