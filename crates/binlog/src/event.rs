//! Binlog v4 events: the 19-byte header, type codes, CRC32, and builders for the events
//! manifold writes itself.
//!
//! An event is `header (19 bytes) | post-header | body | [CRC32 of all before it]`. Events are
//! handled as raw bytes everywhere: manifold rewrites a few header fields and table ids and
//! never re-encodes a body it passes through. Layouts: MariaDB `sql/log_event.h`, and
//! <https://mariadb.com/kb/en/2-binlog-event-header/>.

use thiserror::Error;

pub mod mysql;

/// `\xfebin`: the first four bytes of every binlog file.
pub const MAGIC: [u8; 4] = [0xfe, b'b', b'i', b'n'];
pub const HEADER_LEN: usize = 19;
pub const CHECKSUM_LEN: usize = 4;

/// Event type codes (`Log_event_type`).
pub mod types {
    pub const QUERY: u8 = 2;
    pub const STOP: u8 = 3;
    pub const ROTATE: u8 = 4;
    pub const INTVAR: u8 = 5;
    pub const RAND: u8 = 13;
    pub const USER_VAR: u8 = 14;
    pub const FORMAT_DESCRIPTION: u8 = 15;
    pub const XID: u8 = 16;
    pub const TABLE_MAP: u8 = 19;
    pub const WRITE_ROWS_V1: u8 = 23;
    pub const UPDATE_ROWS_V1: u8 = 24;
    pub const DELETE_ROWS_V1: u8 = 25;
    pub const INCIDENT: u8 = 26;
    pub const HEARTBEAT: u8 = 27;
    pub const ROWS_QUERY: u8 = 29;
    pub const WRITE_ROWS_V2: u8 = 30;
    pub const UPDATE_ROWS_V2: u8 = 31;
    pub const DELETE_ROWS_V2: u8 = 32;
    pub const MYSQL_GTID: u8 = 33;
    pub const ANONYMOUS_GTID: u8 = 34;
    pub const PREVIOUS_GTIDS: u8 = 35;
    pub const XA_PREPARE: u8 = 38;
    pub const PARTIAL_UPDATE_ROWS: u8 = 39;
    pub const TRANSACTION_PAYLOAD: u8 = 40;
    pub const HEARTBEAT_V2: u8 = 41;
    /// MySQL 8.3+: a GTID with a tag (`uuid:tag:number`).
    pub const GTID_TAGGED: u8 = 42;
    pub const ANNOTATE_ROWS: u8 = 160;
    pub const BINLOG_CHECKPOINT: u8 = 161;
    pub const GTID: u8 = 162;
    pub const GTID_LIST: u8 = 163;
    pub const START_ENCRYPTION: u8 = 164;
    pub const QUERY_COMPRESSED: u8 = 165;
    pub const WRITE_ROWS_COMPRESSED_V1: u8 = 166;
    pub const UPDATE_ROWS_COMPRESSED_V1: u8 = 167;
    pub const DELETE_ROWS_COMPRESSED_V1: u8 = 168;
    pub const WRITE_ROWS_COMPRESSED: u8 = 169;
    pub const UPDATE_ROWS_COMPRESSED: u8 = 170;
    pub const DELETE_ROWS_COMPRESSED: u8 = 171;

    /// Rows events of every version and compression: they start with a 6-byte table id.
    pub fn is_rows(t: u8) -> bool {
        matches!(t, 23..=25 | 30..=32 | 39 | 166..=171)
    }
}

/// Header flags.
pub mod flags {
    /// Set in a format description while the file is open (cleared when it is closed).
    pub const BINLOG_IN_USE: u16 = 0x0001;
    /// Events whose statement needs no `USE db` (MariaDB GTID events carry it).
    pub const SUPPRESS_USE: u16 = 0x0008;
    /// An event the server made up (fake rotate): not in any file.
    pub const ARTIFICIAL: u16 = 0x0020;
}

/// Checksum algorithm byte of a format description (`binlog_checksum`).
pub const CHECKSUM_ALG_OFF: u8 = 0;
pub const CHECKSUM_ALG_CRC32: u8 = 1;

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum EventError {
    #[error("binlog event truncated: {0}")]
    Truncated(&'static str),
    #[error("binlog event of type {type_code} has a bad CRC32 (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        type_code: u8,
        stored: u32,
        computed: u32,
    },
    #[error("binlog event of type {type_code} is malformed: {what}")]
    Malformed { type_code: u8, what: &'static str },
}

/// The common header of every event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    pub timestamp: u32,
    pub type_code: u8,
    pub server_id: u32,
    /// Whole event, header and checksum included.
    pub event_size: u32,
    /// Position of the next event in the file it was written to (0 for artificial events and,
    /// from MariaDB 11.4, for events inside a transaction).
    pub log_pos: u32,
    pub flags: u16,
}

impl Header {
    pub fn parse(event: &[u8]) -> Result<Header, EventError> {
        if event.len() < HEADER_LEN {
            return Err(EventError::Truncated("shorter than the 19-byte header"));
        }
        Ok(Header {
            timestamp: u32_at(event, 0),
            type_code: event[4],
            server_id: u32_at(event, 5),
            event_size: u32_at(event, 9),
            log_pos: u32_at(event, 13),
            flags: u16::from_le_bytes([event[17], event[18]]),
        })
    }

    pub fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.timestamp.to_le_bytes());
        out[4] = self.type_code;
        out[5..9].copy_from_slice(&self.server_id.to_le_bytes());
        out[9..13].copy_from_slice(&self.event_size.to_le_bytes());
        out[13..17].copy_from_slice(&self.log_pos.to_le_bytes());
        out[17..19].copy_from_slice(&self.flags.to_le_bytes());
    }
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

/// CRC32 (ISO-HDLC, as zlib's `crc32`) of `bytes`: the binlog checksum.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// Checks the CRC32 that ends `event` (an event with checksum).
pub fn verify_checksum(event: &[u8]) -> Result<(), EventError> {
    if event.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(EventError::Truncated("no room for a checksum"));
    }
    let (body, tail) = event.split_at(event.len() - CHECKSUM_LEN);
    let stored = u32_at(tail, 0);
    let computed =
        if body[4] == types::FORMAT_DESCRIPTION && body[17] & (flags::BINLOG_IN_USE as u8) != 0 {
            // MariaDB computes a format description's checksum with `BINLOG_IN_USE` clear and
            // sets or clears the flag in the file without touching the checksum.
            let mut header = [0u8; HEADER_LEN];
            header.copy_from_slice(&body[..HEADER_LEN]);
            header[17] &= !(flags::BINLOG_IN_USE as u8);
            let mut h = crc32fast::Hasher::new();
            h.update(&header);
            h.update(&body[HEADER_LEN..]);
            h.finalize()
        } else {
            crc32(body)
        };
    if stored == computed {
        Ok(())
    } else {
        Err(EventError::Checksum {
            type_code: event[4],
            stored,
            computed,
        })
    }
}

/// Sets the header's `event_size`, `log_pos`, `server_id` (when given) and the trailing CRC32
/// of `event`, which must already have its 4 checksum bytes (any value) at the end.
pub fn finish(event: &mut [u8], server_id: Option<u32>, log_pos: u32) {
    let len = event.len();
    event[9..13].copy_from_slice(&(len as u32).to_le_bytes());
    event[13..17].copy_from_slice(&log_pos.to_le_bytes());
    if let Some(id) = server_id {
        event[5..9].copy_from_slice(&id.to_le_bytes());
    }
    let crc = crc32(&event[..len - CHECKSUM_LEN]);
    event[len - CHECKSUM_LEN..].copy_from_slice(&crc.to_le_bytes());
}

/// The table id of a `TABLE_MAP` or rows event (6 bytes after the header; every MariaDB and
/// MySQL 5.6+ format description says so).
pub fn table_id(event: &[u8]) -> Result<u64, EventError> {
    if event.len() < HEADER_LEN + 6 {
        return Err(EventError::Truncated("table id"));
    }
    let b = &event[HEADER_LEN..HEADER_LEN + 6];
    Ok(u64::from(b[0])
        | u64::from(b[1]) << 8
        | u64::from(b[2]) << 16
        | u64::from(b[3]) << 24
        | u64::from(b[4]) << 32
        | u64::from(b[5]) << 40)
}

/// Replaces the table id of a `TABLE_MAP` or rows event (checksum not updated).
pub fn set_table_id(event: &mut [u8], id: u64) {
    event[HEADER_LEN..HEADER_LEN + 6].copy_from_slice(&id.to_le_bytes()[..6]);
}

/// `(schema, table)` of a `TABLE_MAP` event (without checksum or with: the names come first).
pub fn table_map_names(event: &[u8]) -> Result<(&[u8], &[u8]), EventError> {
    let bad = EventError::Malformed {
        type_code: types::TABLE_MAP,
        what: "names",
    };
    // table id (6) + flags (2), then schema length, schema, NUL, table length, table, NUL.
    let mut at = HEADER_LEN + 8;
    let schema_len = *event.get(at).ok_or(EventError::Truncated("table map"))? as usize;
    at += 1;
    let schema = event.get(at..at + schema_len).ok_or(bad)?;
    at += schema_len + 1;
    let table_len = *event.get(at).ok_or(EventError::Truncated("table map"))? as usize;
    at += 1;
    let table = event
        .get(at..at + table_len)
        .ok_or(EventError::Truncated("table map"))?;
    Ok((schema, table))
}

/// The statement text of an `ANNOTATE_ROWS` event (with checksum) or MySQL `ROWS_QUERY`.
pub fn annotate_text(event: &[u8]) -> &[u8] {
    let end = event.len().saturating_sub(CHECKSUM_LEN);
    match event.get(4).copied().unwrap_or_default() {
        // MySQL's Rows_query: one length byte (ignored by the server; the text runs to the end).
        types::ROWS_QUERY => event.get(HEADER_LEN + 1..end).unwrap_or_default(),
        _ => event.get(HEADER_LEN..end).unwrap_or_default(),
    }
}

/// The statement text of a `QUERY` event (with checksum).
pub fn query_text(event: &[u8]) -> Result<&[u8], EventError> {
    // thread id (4), exec time (4), schema length (1), error code (2), status vars length (2).
    let post = HEADER_LEN + 13;
    if event.len() < post + CHECKSUM_LEN {
        return Err(EventError::Truncated("query"));
    }
    let schema_len = event[HEADER_LEN + 8] as usize;
    let status_len = u16::from_le_bytes([event[HEADER_LEN + 11], event[HEADER_LEN + 12]]) as usize;
    let start = post + status_len + schema_len + 1;
    let end = event.len() - CHECKSUM_LEN;
    event.get(start..end).ok_or(EventError::Malformed {
        type_code: types::QUERY,
        what: "status variables or schema past the end",
    })
}

/// Whether `event` (header to checksum) ends the group it is in, given whether the group's
/// GTID event is flagged standalone. A group ends with an XID; an `XA_PREPARE` event (an XA
/// transaction's first group, MariaDB 10.5+); a `COMMIT` or `ROLLBACK` query (the latter
/// for writes to non-transactional tables); the `XA COMMIT` / `XA ROLLBACK` query that is
/// a whole group of its own (or `XA PREPARE`, as older servers logged it); in a standalone
/// group (DDL), its first query. The assembler, recovery and the dump all decide with this,
/// so none of them waits for an end another saw.
pub fn ends_group(event: &[u8], standalone: bool) -> bool {
    match event.get(4).copied() {
        Some(types::XID | types::XA_PREPARE) => true,
        Some(types::QUERY | types::QUERY_COMPRESSED) if standalone => true,
        Some(types::QUERY) => query_text(event).is_ok_and(query_ends_group),
        _ => false,
    }
}

/// Whether a statement text ends its group: `COMMIT`, `ROLLBACK`, `XA PREPARE`, `XA COMMIT`
/// or `XA ROLLBACK` (any case, any blanks between the words).
pub fn query_ends_group(text: &[u8]) -> bool {
    let text = text.trim_ascii();
    if text.eq_ignore_ascii_case(b"COMMIT") || text.eq_ignore_ascii_case(b"ROLLBACK") {
        return true;
    }
    let Some(rest) = strip_word(text, b"XA") else {
        return false;
    };
    [&b"PREPARE"[..], b"COMMIT", b"ROLLBACK"]
        .iter()
        .any(|word| strip_word(rest, word).is_some())
}

/// `text` after `word` (any case) and the blanks following it, if it starts with that word.
fn strip_word<'a>(text: &'a [u8], word: &[u8]) -> Option<&'a [u8]> {
    let head = text.get(..word.len())?;
    let rest = &text[word.len()..];
    if !head.eq_ignore_ascii_case(word) || rest.first().is_some_and(|b| !b.is_ascii_whitespace()) {
        return None;
    }
    Some(rest.trim_ascii_start())
}

/// The post-header lengths MariaDB 10.11 announces in its format description, one per event
/// type from 1 (read off a `mariadbd` 10.11.19 binlog; manifold writes events of these
/// layouts).
const MARIADB_POST_HEADER_LENGTHS: &[u8] = &[
    0x38, 0x0d, 0x00, 0x08, 0x00, 0x12, 0x00, 0x04, 0x04, 0x04, 0x04, 0x12, 0x00, 0x00, 0xe4, 0x00,
    0x04, 0x1a, 0x08, 0x00, 0x00, 0x00, 0x08, 0x08, 0x08, 0x02, 0x00, 0x00, 0x00, 0x0a, 0x0a, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x0a, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x13, 0x04, 0x00, 0x0d, 0x08, 0x08, 0x08, 0x0a, 0x0a, 0x0a,
];

/// The server version manifold's format descriptions announce in the MariaDB dialect.
/// Consumers read the flavour from it ("MariaDB" in it means MariaDB events).
pub const MARIADB_SERVER_VERSION: &str = "10.11.19-MariaDB-manifold";

/// An event with its header, built whole and finished with [`finish`].
pub(crate) fn build(
    type_code: u8,
    timestamp: u32,
    server_id: u32,
    flags: u16,
    body: &[u8],
) -> Vec<u8> {
    let mut e = vec![0u8; HEADER_LEN + body.len() + CHECKSUM_LEN];
    Header {
        timestamp,
        type_code,
        server_id,
        event_size: 0,
        log_pos: 0,
        flags,
    }
    .write(&mut e);
    e[HEADER_LEN..HEADER_LEN + body.len()].copy_from_slice(body);
    finish(&mut e, None, 0);
    e
}

/// A MariaDB format description event (with CRC32, `log_pos` 0: call [`finish`] with the
/// position it ends at when writing it to a file).
pub fn format_description(timestamp: u32, server_id: u32, in_use: bool) -> Vec<u8> {
    format_description_of(
        MARIADB_SERVER_VERSION,
        MARIADB_POST_HEADER_LENGTHS,
        timestamp,
        server_id,
        in_use,
    )
}

/// A format description announcing `version` and the post-header `lengths` of its dialect,
/// binlog v4, CRC32.
pub(crate) fn format_description_of(
    version: &str,
    lengths: &[u8],
    timestamp: u32,
    server_id: u32,
    in_use: bool,
) -> Vec<u8> {
    let mut body = Vec::with_capacity(2 + 50 + 4 + 1 + lengths.len() + 1);
    body.extend_from_slice(&4u16.to_le_bytes());
    let mut padded = [0u8; 50];
    let n = version.len().min(padded.len());
    padded[..n].copy_from_slice(&version.as_bytes()[..n]);
    body.extend_from_slice(&padded);
    body.extend_from_slice(&timestamp.to_le_bytes());
    body.push(HEADER_LEN as u8);
    body.extend_from_slice(lengths);
    body.push(CHECKSUM_ALG_CRC32);
    // The checksum is computed with the in-use flag clear (see `verify_checksum`).
    let mut e = build(types::FORMAT_DESCRIPTION, timestamp, server_id, 0, &body);
    if in_use {
        e[17..19].copy_from_slice(&flags::BINLOG_IN_USE.to_le_bytes());
    }
    e
}

/// A rotate event to `file` at `position` (MariaDB and MySQL alike).
pub fn rotate(server_id: u32, file: &[u8], position: u64, artificial: bool) -> Vec<u8> {
    let mut body = Vec::with_capacity(8 + file.len());
    body.extend_from_slice(&position.to_le_bytes());
    body.extend_from_slice(file);
    let flags = if artificial { flags::ARTIFICIAL } else { 0 };
    build(types::ROTATE, 0, server_id, flags, &body)
}

/// A heartbeat event naming the file and (in `log_pos`) the position the sender is at.
pub fn heartbeat(server_id: u32, file: &[u8], log_pos: u32) -> Vec<u8> {
    let mut e = build(types::HEARTBEAT, 0, server_id, flags::ARTIFICIAL, file);
    finish(&mut e, None, log_pos);
    e
}

/// MariaDB GTID event flags (`Gtid_log_event::FL_*`).
pub mod gtid_flags {
    pub const STANDALONE: u8 = 1;
    pub const GROUP_COMMIT_ID: u8 = 2;
    pub const TRANSACTIONAL: u8 = 4;
    pub const ALLOW_PARALLEL: u8 = 8;
    pub const WAITED: u8 = 16;
    pub const DDL: u8 = 32;
    pub const PREPARED_XA: u8 = 64;
    pub const COMPLETED_XA: u8 = 128;
}

/// A MariaDB GTID event (`seq_no, domain_id, flags`, 6 zero bytes), the first event of a
/// transaction. The server id of the GTID is the event header's.
pub fn mariadb_gtid(timestamp: u32, gtid: crate::gtid::Gtid, flags2: u8) -> Vec<u8> {
    let mut body = [0u8; 19];
    body[0..8].copy_from_slice(&gtid.seq.to_le_bytes());
    body[8..12].copy_from_slice(&gtid.domain.to_le_bytes());
    body[12] = flags2
        & !(gtid_flags::GROUP_COMMIT_ID | gtid_flags::PREPARED_XA | gtid_flags::COMPLETED_XA);
    build(
        types::GTID,
        timestamp,
        gtid.server,
        flags::SUPPRESS_USE,
        &body,
    )
}

/// What a MariaDB GTID event says: the GTID (server id from the header) and its flags.
pub fn parse_mariadb_gtid(event: &[u8]) -> Result<(crate::gtid::Gtid, u8), EventError> {
    if event.len() < HEADER_LEN + 13 {
        return Err(EventError::Truncated("GTID event"));
    }
    let h = Header::parse(event)?;
    Ok((
        crate::gtid::Gtid {
            domain: u32_at(event, HEADER_LEN + 8),
            server: h.server_id,
            seq: u64_at(event, HEADER_LEN),
        },
        event[HEADER_LEN + 12],
    ))
}

/// A MariaDB GTID list event: the position before the file's first transaction.
pub fn mariadb_gtid_list(timestamp: u32, server_id: u32, pos: &crate::gtid::GtidPos) -> Vec<u8> {
    let gtids: Vec<_> = pos.iter().collect();
    let mut body = Vec::with_capacity(4 + 16 * gtids.len());
    body.extend_from_slice(&(gtids.len() as u32).to_le_bytes());
    for g in gtids {
        body.extend_from_slice(&g.domain.to_le_bytes());
        body.extend_from_slice(&g.server.to_le_bytes());
        body.extend_from_slice(&g.seq.to_le_bytes());
    }
    build(types::GTID_LIST, timestamp, server_id, 0, &body)
}

/// The GTIDs of a MariaDB GTID list event.
pub fn parse_mariadb_gtid_list(event: &[u8]) -> Result<crate::gtid::GtidPos, EventError> {
    let bad = EventError::Truncated("GTID list event");
    let count = event.get(HEADER_LEN..HEADER_LEN + 4).ok_or(bad.clone())?;
    // The top 4 bits of the count are flags.
    let count = (u32_at(count, 0) & 0x0fff_ffff) as usize;
    let mut pos = crate::gtid::GtidPos::default();
    for i in 0..count {
        let at = HEADER_LEN + 4 + i * 16;
        let g = event.get(at..at + 16).ok_or(bad.clone())?;
        pos.update(crate::gtid::Gtid {
            domain: u32_at(g, 0),
            server: u32_at(g, 4),
            seq: u64_at(g, 8),
        });
    }
    Ok(pos)
}

/// A MariaDB annotate-rows event carrying `text` (shown by `mariadb-binlog` as `#Q> text`).
pub fn annotate(timestamp: u32, server_id: u32, text: &[u8]) -> Vec<u8> {
    build(types::ANNOTATE_ROWS, timestamp, server_id, 0, text)
}

/// An XID event committing a transaction.
pub fn xid(timestamp: u32, server_id: u32, xid: u64) -> Vec<u8> {
    build(types::XID, timestamp, server_id, 0, &xid.to_le_bytes())
}

/// A query event (no status variables) of `text` in `schema`.
pub fn query(timestamp: u32, server_id: u32, schema: &[u8], text: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(13 + schema.len() + 1 + text.len());
    body.extend_from_slice(&0u32.to_le_bytes()); // thread id
    body.extend_from_slice(&0u32.to_le_bytes()); // execution time
    body.push(schema.len() as u8);
    body.extend_from_slice(&0u16.to_le_bytes()); // error code
    body.extend_from_slice(&0u16.to_le_bytes()); // status variables length
    body.extend_from_slice(schema);
    body.push(0);
    body.extend_from_slice(text);
    build(types::QUERY, timestamp, server_id, 0, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gtid::{Gtid, GtidPos};

    #[test]
    fn built_events_carry_their_size_and_a_valid_checksum() {
        for e in [
            format_description(1, 7, true),
            format_description(1, 7, false),
            rotate(7, b"manifold-bin.000002", 4, true),
            heartbeat(7, b"manifold-bin.000001", 1234),
            annotate(1, 7, b"hello"),
            xid(1, 7, 99),
            query(1, 7, b"db", b"BEGIN"),
        ] {
            let h = Header::parse(&e).unwrap();
            assert_eq!(h.event_size as usize, e.len());
            verify_checksum(&e).unwrap();
        }
        let mut e = xid(1, 7, 99);
        e[HEADER_LEN] ^= 1;
        assert!(matches!(
            verify_checksum(&e),
            Err(EventError::Checksum {
                type_code: types::XID,
                ..
            })
        ));
    }

    #[test]
    fn group_ends_at_xid_xa_prepare_commit_rollback_and_a_standalone_query() {
        let q = |text: &[u8]| query(1, 7, b"app", text);
        let xa_prepare = build(types::XA_PREPARE, 1, 7, 0, &[0u8; 12]);
        for (e, standalone) in [
            (xid(1, 7, 3), false),
            (xa_prepare, false),
            (q(b"COMMIT"), false),
            (q(b" rollback "), false),
            (q(b"XA PREPARE X'31',X'',1"), false),
            (q(b"xa  commit X'31',X'',1"), false),
            (q(b"XA ROLLBACK X'31',X'',1"), false),
            (q(b"CREATE TABLE t (a INT)"), true),
            (build(types::QUERY_COMPRESSED, 1, 7, 0, &[0u8; 20]), true),
        ] {
            assert!(ends_group(&e, standalone), "type {}", e[4]);
        }
        for (e, standalone) in [
            (q(b"INSERT INTO t VALUES (1)"), false),
            (q(b"XA END X'31',X'',1"), false),
            (q(b"XA ENDING"), false),
            (q(b"XACOMMIT"), false),
            (q(b"COMMITTED"), false),
            (build(types::QUERY_COMPRESSED, 1, 7, 0, &[0u8; 20]), false),
            (annotate(1, 7, b"COMMIT"), true),
            (build(types::TABLE_MAP, 1, 7, 0, &[0u8; 12]), true),
            (Vec::new(), false),
        ] {
            assert!(!ends_group(&e, standalone), "{e:?}");
        }
    }

    #[test]
    fn format_description_has_mariadbs_length() {
        // 19 header + 2 + 50 + 4 + 1 + lengths + 1 alg + 4 crc = 252 bytes as mariadbd writes.
        assert_eq!(format_description(0, 1, false).len(), 252);
    }

    #[test]
    fn gtid_and_gtid_list_round_trip() {
        let g = Gtid {
            domain: 3,
            server: 9,
            seq: 1 << 40,
        };
        let e = mariadb_gtid(5, g, gtid_flags::TRANSACTIONAL);
        assert_eq!(e.len(), 42);
        assert_eq!(
            parse_mariadb_gtid(&e).unwrap(),
            (g, gtid_flags::TRANSACTIONAL)
        );
        let pos: GtidPos = "0-1-5,3-9-7".parse().unwrap();
        let e = mariadb_gtid_list(0, 1, &pos);
        assert_eq!(parse_mariadb_gtid_list(&e).unwrap(), pos);
    }

    #[test]
    fn table_ids_and_query_text() {
        let mut e = vec![0u8; HEADER_LEN + 8 + CHECKSUM_LEN];
        set_table_id(&mut e, 0x0102_0304_0506);
        assert_eq!(table_id(&e).unwrap(), 0x0102_0304_0506);
        let q = query(0, 1, b"test", b"CREATE TABLE t (a INT)");
        assert_eq!(query_text(&q).unwrap(), b"CREATE TABLE t (a INT)");
        assert_eq!(annotate_text(&annotate(0, 1, b"x y")), b"x y");
        assert_eq!(annotate_text(&[]), b"");
    }
}
