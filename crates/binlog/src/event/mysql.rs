//! MySQL's events: the GTID event (33) that begins every transaction, the format
//! description, `PREVIOUS_GTIDS` and `ROWS_QUERY` events manifold writes in the MySQL
//! dialect, and where MySQL's transactions begin and end. Layouts: MySQL
//! `libs/mysql/binlog/event/control_events.h`, `trx_boundary_parser.cpp`.

use super::{build, types, u64_at, EventError, HEADER_LEN};
use crate::gtid::{GtidSet, MysqlGtid, Uuid};
use crate::txn::MysqlCommit;

/// `Gtid_event::FLAG_MAY_HAVE_SBR`: the transaction may hold statement-based events.
pub const GTID_FLAG_MAY_HAVE_SBR: u8 = 1;

/// `LOGICAL_TIMESTAMP_TYPECODE`.
const LT_TYPECODE: u8 = 2;
/// Flag bit of the 7-byte immediate commit timestamp: the original one follows.
const ORIGINAL_TS_FOLLOWS: u64 = 1 << 55;
/// Flag bit of the 4-byte immediate server version: the original one follows.
const ORIGINAL_VERSION_FOLLOWS: u32 = 1 << 31;
/// flags (1) + SID (16) + GNO (8) + typecode (1) + last committed (8) + sequence number (8).
pub const GTID_POST_HEADER_LEN: usize = 42;

/// What a MySQL GTID event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MysqlGtidEvent {
    pub flags: u8,
    pub gtid: MysqlGtid,
    /// The logical clock of the source's group commit (for parallel appliers).
    pub last_committed: i64,
    pub sequence_number: i64,
    pub commit: MysqlCommit,
    /// Bytes of the whole transaction, this event included (0: not given).
    pub transaction_length: u64,
}

/// Reads a MySQL GTID event (header to checksum; servers before 8.0 end it after the
/// logical timestamps, and the fields they lack are 0).
pub fn parse_mysql_gtid(event: &[u8]) -> Result<MysqlGtidEvent, EventError> {
    let truncated = EventError::Truncated("MySQL GTID event");
    let body = event
        .get(HEADER_LEN..event.len().saturating_sub(super::CHECKSUM_LEN))
        .ok_or(truncated.clone())?;
    if body.len() < 25 {
        return Err(truncated);
    }
    let mut uuid = [0u8; 16];
    uuid.copy_from_slice(&body[1..17]);
    let mut e = MysqlGtidEvent {
        flags: body[0],
        gtid: MysqlGtid {
            uuid: Uuid(uuid),
            gno: u64_at(body, 17),
        },
        ..MysqlGtidEvent::default()
    };
    if body.len() >= GTID_POST_HEADER_LEN && body[25] == LT_TYPECODE {
        e.last_committed = u64_at(body, 26) as i64;
        e.sequence_number = u64_at(body, 34) as i64;
    }
    let mut at = GTID_POST_HEADER_LEN;
    let Some(ts) = uint_at(body, at, 7) else {
        return Ok(e);
    };
    at += 7;
    e.commit.immediate_commit_us = ts & !ORIGINAL_TS_FOLLOWS;
    e.commit.original_commit_us = if ts & ORIGINAL_TS_FOLLOWS != 0 {
        let original = uint_at(body, at, 7).ok_or(truncated.clone())?;
        at += 7;
        original
    } else {
        e.commit.immediate_commit_us
    };
    let Some((length, used)) = packed_int(body.get(at..).unwrap_or_default()) else {
        return Ok(e);
    };
    e.transaction_length = length;
    at += used;
    let Some(version) = uint_at(body, at, 4) else {
        return Ok(e);
    };
    at += 4;
    let version = version as u32;
    e.commit.immediate_server_version = version & !ORIGINAL_VERSION_FOLLOWS;
    e.commit.original_server_version = if version & ORIGINAL_VERSION_FOLLOWS != 0 {
        uint_at(body, at, 4).ok_or(truncated)? as u32
    } else {
        e.commit.immediate_server_version
    };
    Ok(e)
}

/// A MySQL GTID event (with CRC32 room, `log_pos` 0: [`super::finish`] it when writing),
/// with every field of MySQL 8.0.14+. The original commit timestamp and server version are
/// written apart only when they differ from the immediate ones, as MySQL does.
pub fn mysql_gtid(timestamp: u32, server_id: u32, e: &MysqlGtidEvent) -> Vec<u8> {
    let mut body = Vec::with_capacity(GTID_POST_HEADER_LEN + 7 + 7 + 9 + 8);
    body.push(e.flags);
    body.extend_from_slice(&e.gtid.uuid.0);
    body.extend_from_slice(&e.gtid.gno.to_le_bytes());
    body.push(LT_TYPECODE);
    body.extend_from_slice(&e.last_committed.to_le_bytes());
    body.extend_from_slice(&e.sequence_number.to_le_bytes());
    let c = &e.commit;
    let differs = c.original_commit_us != c.immediate_commit_us;
    let ts = c.immediate_commit_us | if differs { ORIGINAL_TS_FOLLOWS } else { 0 };
    body.extend_from_slice(&ts.to_le_bytes()[..7]);
    if differs {
        body.extend_from_slice(&c.original_commit_us.to_le_bytes()[..7]);
    }
    put_packed_int(&mut body, e.transaction_length);
    let differs = c.original_server_version != c.immediate_server_version;
    let version = c.immediate_server_version | if differs { ORIGINAL_VERSION_FOLLOWS } else { 0 };
    body.extend_from_slice(&version.to_le_bytes());
    if differs {
        body.extend_from_slice(&c.original_server_version.to_le_bytes());
    }
    build(types::MYSQL_GTID, timestamp, server_id, 0, &body)
}

/// Bytes a MySQL GTID event takes with `e`'s fields (what [`mysql_gtid`] builds), for
/// computing the transaction length it carries.
pub fn mysql_gtid_len(e: &MysqlGtidEvent) -> usize {
    let c = &e.commit;
    HEADER_LEN
        + GTID_POST_HEADER_LEN
        + 7
        + if c.original_commit_us == c.immediate_commit_us {
            0
        } else {
            7
        }
        + packed_int_len(e.transaction_length)
        + 4
        + if c.original_server_version == c.immediate_server_version {
            0
        } else {
            4
        }
        + super::CHECKSUM_LEN
}

/// `LOG_EVENT_IGNORABLE_F`: a reader that does not know the event may skip it (MySQL sets it
/// on `PREVIOUS_GTIDS` and `ROWS_QUERY`).
pub const IGNORABLE: u16 = 0x0080;

/// The server version manifold's format descriptions announce in the MySQL dialect (and, as
/// `80400`, the immediate server version of its GTID events).
pub const MYSQL_SERVER_VERSION: &str = "8.4.0-manifold";
pub const MYSQL_SERVER_VERSION_ID: u32 = 80400;

/// The post-header lengths MySQL announces, one per event type from 1 to 42 (read off a
/// `mysqld` 9.7.4 binlog, the same since 8.3).
const MYSQL_POST_HEADER_LENGTHS: &[u8] = &[
    0x00, 0x0d, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x04, 0x00, 0x00, 0x00, 0x63, 0x00,
    0x04, 0x1a, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x0a, 0x0a, 0x0a,
    0x2a, 0x2a, 0x00, 0x12, 0x34, 0x00, 0x0a, 0x28, 0x00, 0x00,
];

/// A MySQL format description event (with CRC32, `log_pos` 0: [`super::finish`] it with the
/// position it ends at when writing it to a file).
pub fn mysql_format_description(timestamp: u32, server_id: u32, in_use: bool) -> Vec<u8> {
    super::format_description_of(
        MYSQL_SERVER_VERSION,
        MYSQL_POST_HEADER_LENGTHS,
        timestamp,
        server_id,
        in_use,
    )
}

/// Whether a format description (with checksum) announces MySQL events: its server version
/// does not name MariaDB.
pub fn is_mysql_format_description(event: &[u8]) -> bool {
    let version = event
        .get(HEADER_LEN + 2..HEADER_LEN + 52)
        .unwrap_or_default();
    !version
        .windows(7)
        .any(|w| w.eq_ignore_ascii_case(b"mariadb"))
}

/// A `PREVIOUS_GTIDS` event: the transactions before the file's first one.
pub fn previous_gtids(timestamp: u32, server_id: u32, set: &GtidSet) -> Vec<u8> {
    let mut body = Vec::with_capacity(set.encoded_len());
    set.encode(&mut body);
    build(
        types::PREVIOUS_GTIDS,
        timestamp,
        server_id,
        IGNORABLE,
        &body,
    )
}

/// The set of a `PREVIOUS_GTIDS` event (with checksum).
pub fn parse_previous_gtids(event: &[u8]) -> Result<GtidSet, EventError> {
    let body = event
        .get(HEADER_LEN..event.len().saturating_sub(super::CHECKSUM_LEN))
        .ok_or(EventError::Truncated("previous GTIDs event"))?;
    GtidSet::decode(body)
        .map(|(set, _)| set)
        .map_err(|_| EventError::Malformed {
            type_code: types::PREVIOUS_GTIDS,
            what: "GTID set",
        })
}

/// A `ROWS_QUERY` event carrying `text` (shown by `mysqlbinlog -vv` as `# text`): one length
/// byte (the text's length, capped at 255, which readers ignore) and the text.
pub fn rows_query(timestamp: u32, server_id: u32, text: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(1 + text.len());
    body.push(u8::try_from(text.len()).unwrap_or(u8::MAX));
    body.extend_from_slice(text);
    build(types::ROWS_QUERY, timestamp, server_id, IGNORABLE, &body)
}

/// What separates manifold's origin record from the statement text when both share a
/// `ROWS_QUERY` event (`mysqlbinlog -vv` prints each line after a `#`).
pub const ROWS_QUERY_SEPARATOR: u8 = b'\n';

/// The `ROWS_QUERY` event `event` (with checksum) with `prefix` and a line break before its
/// text: header kept, size, length byte and checksum set (`log_pos` kept: the writer sets
/// it). A MySQL replica holds one rows-query event until the rows after it are applied, and a
/// second one before that would be lost (and trip a debug build's assertion), so manifold's
/// origin joins the statement's own event instead of preceding it.
pub fn rows_query_with_prefix(event: &[u8], prefix: &[u8]) -> Result<Vec<u8>, EventError> {
    if event.get(4) != Some(&types::ROWS_QUERY)
        || event.len() < HEADER_LEN + 1 + super::CHECKSUM_LEN
    {
        return Err(EventError::Malformed {
            type_code: event.get(4).copied().unwrap_or_default(),
            what: "not a rows-query event",
        });
    }
    let text = super::annotate_text(event);
    let mut out = Vec::with_capacity(event.len() + prefix.len() + 1);
    out.extend_from_slice(&event[..HEADER_LEN]);
    let len = prefix.len() + 1 + text.len();
    out.push(u8::try_from(len).unwrap_or(u8::MAX));
    out.extend_from_slice(prefix);
    out.push(ROWS_QUERY_SEPARATOR);
    out.extend_from_slice(text);
    out.extend_from_slice(&[0; super::CHECKSUM_LEN]);
    let log_pos = super::u32_at(&out, 13);
    super::finish(&mut out, None, log_pos);
    Ok(out)
}

/// Bytes [`rows_query_with_prefix`] adds for `prefix`.
pub fn rows_query_prefix_len(prefix: &[u8]) -> usize {
    prefix.len() + 1
}

/// Whether the first event after a MySQL GTID event opens a multi-event group: a `BEGIN` or
/// `XA START` query. Any other first statement (DDL, `XA COMMIT`, `XA ROLLBACK`) is the whole
/// group, as MySQL's transaction boundary parser decides.
pub fn opens_group(event: &[u8]) -> bool {
    if event.get(4) != Some(&types::QUERY) {
        return false;
    }
    super::query_text(event).is_ok_and(|text| text == b"BEGIN" || text.starts_with(b"XA START"))
}

/// What a statement ends with when manifold records a transaction's origin in it (MySQL ends
/// a group at the first statement after its GTID event, so no event can go between them):
/// ` /* TEXT */` after the statement. After, not before: MySQL recognises some statements by
/// how their text starts (`XA END`, `SAVEPOINT`, `CREATE TABLE` in a replica's row-format
/// check; `XA COMMIT` in its parallel applier).
const COMMENT_OPEN: &[u8] = b" /* ";
const COMMENT_CLOSE: &[u8] = b" */";

/// Bytes [`query_with_comment`] adds to a query event for `comment`.
pub fn query_comment_len(comment: &[u8]) -> usize {
    COMMENT_OPEN.len() + comment.len() + COMMENT_CLOSE.len()
}

/// The `QUERY` event `event` (with checksum) with the comment ` /* comment */` after its
/// statement: thread id, status variables and schema kept, size set, checksum recomputed
/// (`log_pos` kept: the writer sets it). `comment` must not hold `*/`.
pub fn query_with_comment(event: &[u8], comment: &[u8]) -> Result<Vec<u8>, EventError> {
    if event.get(4) != Some(&types::QUERY) {
        return Err(EventError::Malformed {
            type_code: event.get(4).copied().unwrap_or_default(),
            what: "not a query event",
        });
    }
    super::query_text(event)?;
    let end = event.len() - super::CHECKSUM_LEN;
    let mut out = Vec::with_capacity(event.len() + query_comment_len(comment));
    out.extend_from_slice(&event[..end]);
    out.extend_from_slice(COMMENT_OPEN);
    out.extend_from_slice(comment);
    out.extend_from_slice(COMMENT_CLOSE);
    out.extend_from_slice(&event[end..]);
    let log_pos = super::u32_at(&out, 13);
    super::finish(&mut out, None, log_pos);
    Ok(out)
}

/// The comment a statement ends with as [`query_with_comment`] writes it, if it does (the
/// last ` /* ` of the text opens it: the comment holds none).
pub fn trailing_comment(text: &[u8]) -> Option<&[u8]> {
    let body = text.strip_suffix(COMMENT_CLOSE)?;
    let open = body
        .windows(COMMENT_OPEN.len())
        .rposition(|w| w == COMMENT_OPEN)?;
    Some(&body[open + COMMENT_OPEN.len()..])
}

/// `len` little-endian bytes at `at`, if there.
fn uint_at(b: &[u8], at: usize, len: usize) -> Option<u64> {
    let bytes = b.get(at..at + len)?;
    let mut v = [0u8; 8];
    v[..len].copy_from_slice(bytes);
    Some(u64::from_le_bytes(v))
}

/// A length-encoded integer (`net_field_length`): the value and the bytes it took.
pub fn packed_int(b: &[u8]) -> Option<(u64, usize)> {
    match *b.first()? {
        v @ 0..=250 => Some((u64::from(v), 1)),
        252 => Some((uint_at(b, 1, 2)?, 3)),
        253 => Some((uint_at(b, 1, 3)?, 4)),
        254 => Some((uint_at(b, 1, 8)?, 9)),
        _ => None,
    }
}

fn packed_int_len(v: u64) -> usize {
    match v {
        0..=250 => 1,
        251..=0xffff => 3,
        0x1_0000..=0xff_ffff => 4,
        _ => 9,
    }
}

fn put_packed_int(out: &mut Vec<u8>, v: u64) {
    match packed_int_len(v) {
        1 => out.push(v as u8),
        3 => {
            out.push(252);
            out.extend_from_slice(&v.to_le_bytes()[..2]);
        }
        4 => {
            out.push(253);
            out.extend_from_slice(&v.to_le_bytes()[..3]);
        }
        _ => {
            out.push(254);
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_rows_query_events_are_as_mysql_writes_them() {
        // 19 + 2 + 50 + 4 + 1 + 42 + 1 + 4 = 123 bytes, as mysqld 9.7 writes.
        let fde = mysql_format_description(0, 1, true);
        assert_eq!(fde.len(), 123);
        super::super::verify_checksum(&fde).unwrap();
        assert!(is_mysql_format_description(&fde));
        assert!(!is_mysql_format_description(
            &super::super::format_description(0, 1, false)
        ));
        let set: GtidSet = "6d616e69-666f-6c64-8000-0000ee6b2801:1-9".parse().unwrap();
        let e = previous_gtids(0, 1, &set);
        assert_eq!(parse_previous_gtids(&e).unwrap(), set);
        assert_eq!(previous_gtids(0, 1, &GtidSet::default()).len(), 19 + 8 + 4);
        let q = rows_query(0, 1, b"# manifold origin");
        assert_eq!(super::super::annotate_text(&q), b"# manifold origin");
        assert!(opens_group(&super::super::query(0, 1, b"", b"BEGIN")));
        assert!(opens_group(&super::super::query(
            0,
            1,
            b"",
            b"XA START X'31',X'',1"
        )));
        assert!(!opens_group(&super::super::query(
            0,
            1,
            b"d",
            b"CREATE TABLE t (a INT)"
        )));
        assert!(!opens_group(&q));
    }

    #[test]
    fn an_origin_joins_a_rows_query_event_on_a_line_of_its_own() {
        let q = rows_query(7, 1, b"insert into t values (1)");
        let joined = rows_query_with_prefix(&q, b"# manifold origin x").unwrap();
        assert_eq!(
            joined.len(),
            q.len() + rows_query_prefix_len(b"# manifold origin x")
        );
        super::super::verify_checksum(&joined).unwrap();
        assert_eq!(
            super::super::annotate_text(&joined),
            b"# manifold origin x\ninsert into t values (1)"
        );
        assert_eq!(joined[HEADER_LEN], 44);
        assert_eq!(&joined[..5], &q[..5]);
        assert!(rows_query_with_prefix(&super::super::xid(0, 1, 2), b"x").is_err());
    }

    #[test]
    fn gtid_events_round_trip_with_and_without_original_fields() {
        let gtid: MysqlGtid = "3e11fa47-71ca-11e1-9e33-c80aa9429562:77".parse().unwrap();
        for (original_us, original_version, length) in [
            (1_700_000_000_000_000, 80400, 250),
            (5, 80036, 70_000),
            (1_700_000_000_000_000, 90704, 1 << 33),
        ] {
            let e = MysqlGtidEvent {
                flags: GTID_FLAG_MAY_HAVE_SBR,
                gtid,
                last_committed: 4,
                sequence_number: 5,
                commit: MysqlCommit {
                    immediate_commit_us: 1_700_000_000_000_000,
                    original_commit_us: original_us,
                    immediate_server_version: 80400,
                    original_server_version: original_version,
                },
                transaction_length: length,
            };
            let bytes = mysql_gtid(9, 1, &e);
            assert_eq!(bytes.len(), mysql_gtid_len(&e));
            super::super::verify_checksum(&bytes).unwrap();
            assert_eq!(parse_mysql_gtid(&bytes).unwrap(), e);
        }
        assert!(parse_mysql_gtid(&[0u8; 30]).is_err());
    }

    #[test]
    fn a_comment_goes_after_the_statement_and_reads_back() {
        // A query with status variables (2 bytes of them) in schema `app`.
        let mut body = vec![7, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 2, 0];
        body.extend_from_slice(&[0x00, 0x00]);
        body.extend_from_slice(b"app\0CREATE TABLE t (a INT)");
        let q = super::super::build(types::QUERY, 5, 1, 0, &body);
        let c = b"# manifold origin cluster=a gtid=x:1 key=3";
        let with = query_with_comment(&q, c).unwrap();
        assert_eq!(with.len(), q.len() + query_comment_len(c));
        super::super::verify_checksum(&with).unwrap();
        assert_eq!(super::super::u32_at(&with, 9) as usize, with.len());
        let text = super::super::query_text(&with).unwrap();
        assert_eq!(
            text,
            &b"CREATE TABLE t (a INT) /* # manifold origin cluster=a gtid=x:1 key=3 */"[..]
        );
        assert_eq!(trailing_comment(text), Some(&c[..]));
        // Thread id, status variables and schema are kept.
        assert_eq!(
            with[..super::super::HEADER_LEN + 18],
            {
                let mut h = q[..super::super::HEADER_LEN + 18].to_vec();
                h[9..13].copy_from_slice(&(with.len() as u32).to_le_bytes());
                h
            }[..]
        );
        assert_eq!(trailing_comment(b"CREATE TABLE t (a INT)"), None);
        assert_eq!(trailing_comment(b"closed */"), None);
        assert_eq!(
            trailing_comment(b"SELECT '/* x */' /* mine */"),
            Some(&b"mine"[..]),
            "the last comment is manifold's"
        );
        assert!(query_with_comment(&super::super::xid(0, 1, 2), c).is_err());
    }
}
