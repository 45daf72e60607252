//! What serving the global binlog in MySQL's dialect adds: `COM_BINLOG_DUMP_GTID`'s request
//! and the checks MySQL's dump thread makes of the replica's GTID set before it starts
//! (`Binlog_sender::check_start_file`, error texts of mysqld 9.7), and what `SHOW BINLOG
//! EVENTS` prints for MySQL's own events.

use std::path::Path;

use manifold_binlog::event::{self, mysql as mysql_event, types, HEADER_LEN};
use manifold_binlog::gtid::{GtidSet, MysqlGtid, Uuid};
use manifold_binlog::store::Reader;
use manifold_mysql_proto::packets::ErrPacket;
use manifold_mysql_proto::{codes, ErrorCode};

use crate::answer::err;

/// `ER_SOURCE_FATAL_ERROR_READING_BINLOG`: the replica's receiver stops and does not retry.
const FATAL: ErrorCode = codes::MASTER_FATAL_READING_BINLOG;

/// `COM_BINLOG_DUMP_GTID` flags (`enum_binlog_dump_flags`, `mysql.h`).
pub mod gtid_dump_flags {
    /// At the end of the binlog, send EOF instead of waiting.
    pub const NON_BLOCK: u16 = 0x01;
    /// Read by file and position (MySQL 5.6). The same bit, since 8.0.26: heartbeats as
    /// `HEARTBEAT_LOG_EVENT_V2` (`USE_HEARTBEAT_EVENT_V2`), which every 8.0.26+ replica sets.
    pub const THROUGH_POSITION: u16 = 0x02;
    pub const USE_HEARTBEAT_EVENT_V2: u16 = 0x02;
    /// The request carries a GTID set.
    pub const THROUGH_GTID: u16 = 0x04;
}

/// `COM_BINLOG_DUMP_GTID`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpGtidRequest {
    pub flags: u16,
    pub server_id: u32,
    /// A file to start in (mysqlbinlog `--exclude-gtids` names one); empty: where the GTID
    /// set says.
    pub file: String,
    pub pos: u64,
    /// The transactions the replica has (received or applied): never sent to it.
    pub gtids: GtidSet,
}

impl DumpGtidRequest {
    /// From the command's payload (command byte first): flags (2), server id (4), file name
    /// length (4), file name, position (8), SID block length (4), SID block. A request that
    /// ends after the position carries the empty set.
    pub fn parse(payload: &[u8]) -> Result<DumpGtidRequest, String> {
        let b = payload.get(1..).unwrap_or_default();
        let short = || "Malformed COM_BINLOG_DUMP_GTID packet".to_owned();
        let flags = b.get(0..2).ok_or_else(short)?;
        let flags = u16::from_le_bytes([flags[0], flags[1]]);
        let server_id = u32_le(b.get(2..6).ok_or_else(short)?);
        let name_len = u32_le(b.get(6..10).ok_or_else(short)?) as usize;
        let name = b
            .get(10..10usize.saturating_add(name_len))
            .ok_or_else(short)?;
        let at = 10 + name_len;
        let pos = b.get(at..at + 8).ok_or_else(short)?;
        let pos = u64::from_le_bytes(pos.try_into().map_err(|_| short())?);
        let at = at + 8;
        let gtids = match b.get(at..at + 4) {
            None => GtidSet::default(),
            Some(len) => {
                let len = u32_le(len) as usize;
                let block = b
                    .get(at + 4..(at + 4).saturating_add(len))
                    .ok_or_else(short)?;
                if block.is_empty() {
                    GtidSet::default()
                } else {
                    GtidSet::decode(block)
                        .map_err(|e| format!("Malformed GTID set in COM_BINLOG_DUMP_GTID: {e}"))?
                        .0
                }
            }
        };
        Ok(DumpGtidRequest {
            flags,
            server_id,
            file: String::from_utf8_lossy(name)
                .trim_end_matches('\0')
                .to_owned(),
            pos,
            gtids,
        })
    }
}

/// Four little-endian bytes (`b` has four).
fn u32_le(b: &[u8]) -> u32 {
    b.iter()
        .take(4)
        .rev()
        .fold(0, |v, &byte| (v << 8) | u32::from(byte))
}

/// The transactions of `a` not in `b`.
pub fn subtract(a: &GtidSet, b: &GtidSet) -> GtidSet {
    let mut out = GtidSet::default();
    for (uuid, intervals) in a.iter() {
        let theirs: Vec<(u64, u64)> = b
            .iter()
            .find(|(u, _)| *u == uuid)
            .map(|(_, i)| i.to_vec())
            .unwrap_or_default();
        for &(start, end) in intervals {
            let mut next = start;
            for &(s, e) in theirs.iter().filter(|&&(s, e)| e >= start && s <= end) {
                if s > next {
                    out.add_interval(*uuid, next, s - 1);
                }
                next = next.max(e.saturating_add(1));
            }
            if next <= end {
                out.add_interval(*uuid, next, end);
            }
        }
    }
    out
}

/// The transactions of `uuid` in `set`.
fn of_uuid(set: &GtidSet, uuid: &Uuid) -> GtidSet {
    let mut out = GtidSet::default();
    for (u, intervals) in set.iter().filter(|(u, _)| *u == uuid) {
        for &(s, e) in intervals {
            out.add_interval(*u, s, e);
        }
    }
    out
}

/// MySQL's checks of a GTID-positioned replica (`check_start_file`), in its order: it must
/// hold no transaction of manifold's UUID the global binlog lacks (`executed`: everything
/// written), and must have every transaction no longer in the files (`purged`: the previous
/// GTIDs of the oldest file kept).
pub fn check_start(
    client: &GtidSet,
    executed: &GtidSet,
    purged: &GtidSet,
    uuid: &Uuid,
) -> Result<(), ErrPacket> {
    if !executed.includes(&of_uuid(client, uuid)) {
        return Err(err(FATAL, "Replica has more GTIDs than the source has, using the source's SERVER_UUID. This may indicate that the the last binary log file was truncated or lost, e.g., after a power failure when sync_binlog != 1. The source may have rolled back transactions that were already replicated to the replica. Replicate any transactions that source has rolled back from replica to source, and/or commit empty transactions on source to account for transactions that have been committed on source but are not included in GTID_EXECUTED."));
    }
    if !client.includes(purged) {
        return Err(purged_error(client, &subtract(purged, client)));
    }
    Ok(())
}

/// `ER_SOURCE_HAS_PURGED_REQUIRED_GTIDS` as the dump thread sends it (code 1236).
pub fn purged_error(client: &GtidSet, missing: &GtidSet) -> ErrPacket {
    err(FATAL, format!("Cannot replicate because the source purged required binary logs. Replicate the missing transactions from elsewhere, or provision a new replica from backup. Consider increasing the source's binary log expiration period. The GTID set sent by the replica is '{client}', and the missing transactions are '{missing}'."))
}

/// What a MySQL-dialect file starts with: its previous GTIDs and the GTID of its first
/// transaction (none yet: `None`). `limit`: where the file's readable bytes end.
pub fn file_start(
    dir: &Path,
    file: &str,
    limit: u64,
) -> Result<(GtidSet, Option<MysqlGtid>), String> {
    let mut reader = Reader::open(dir, file, 4).map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(256);
    let mut previous = GtidSet::default();
    while reader
        .next_event(&mut buf, limit)
        .map_err(|e| e.to_string())?
    {
        match buf.get(4).copied() {
            Some(types::PREVIOUS_GTIDS) => {
                previous = mysql_event::parse_previous_gtids(&buf).map_err(|e| e.to_string())?;
            }
            Some(types::MYSQL_GTID) => {
                let g = mysql_event::parse_mysql_gtid(&buf).map_err(|e| e.to_string())?;
                return Ok((previous, Some(g.gtid)));
            }
            Some(types::FORMAT_DESCRIPTION) => {}
            // Past the header without a GTID event: no transaction to look at.
            _ => break,
        }
        buf.clear();
    }
    Ok((previous, None))
}

/// MySQL's name of a MySQL-only event type in `SHOW BINLOG EVENTS` (`get_type_str`).
pub fn type_name(t: u8) -> Option<&'static str> {
    Some(match t {
        types::ROWS_QUERY => "Rows_query",
        types::MYSQL_GTID => "Gtid",
        types::ANONYMOUS_GTID => "Anonymous_Gtid",
        types::PREVIOUS_GTIDS => "Previous_gtids",
        types::XA_PREPARE => "XA_prepare",
        types::PARTIAL_UPDATE_ROWS => "Update_rows_partial",
        types::TRANSACTION_PAYLOAD => "Transaction_payload",
        types::HEARTBEAT_V2 => "Heartbeat_v2",
        _ => return None,
    })
}

/// The `Info` of a MySQL-only event as mysqld prints it; `None` for the events both dialects
/// print alike.
pub fn info(e: &[u8]) -> Option<String> {
    match e.get(4).copied()? {
        types::MYSQL_GTID => mysql_event::parse_mysql_gtid(e)
            .ok()
            .map(|g| format!("SET @@SESSION.GTID_NEXT= '{}'", g.gtid)),
        types::ANONYMOUS_GTID => Some("SET @@SESSION.GTID_NEXT= 'ANONYMOUS'".into()),
        types::PREVIOUS_GTIDS => mysql_event::parse_previous_gtids(e)
            .ok()
            .map(|s| s.to_string()),
        types::ROWS_QUERY => {
            // One length byte (ignored by readers), then the statement.
            let body = e.get(HEADER_LEN + 1..e.len().saturating_sub(event::CHECKSUM_LEN))?;
            Some(format!("# {}", String::from_utf8_lossy(body)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const M: &str = "6d616e69-666f-6c64-8000-0000ee6b2801";

    fn set(s: &str) -> GtidSet {
        s.parse().unwrap()
    }

    fn message(e: &ErrPacket) -> String {
        String::from_utf8_lossy(&e.message).into_owned()
    }

    #[test]
    fn a_dump_gtid_request_parses_as_mysql_sends_it() {
        let gtids = set(&format!("{A}:1-5,{M}:1-9"));
        let mut p = vec![0x1e];
        p.extend_from_slice(&(gtid_dump_flags::THROUGH_GTID | 0x02).to_le_bytes());
        p.extend_from_slice(&42u32.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&4u64.to_le_bytes());
        let mut block = Vec::new();
        gtids.encode(&mut block);
        p.extend_from_slice(&u32::try_from(block.len()).unwrap().to_le_bytes());
        p.extend_from_slice(&block);
        let r = DumpGtidRequest::parse(&p).unwrap();
        assert_eq!(
            r,
            DumpGtidRequest {
                flags: 0x06,
                server_id: 42,
                file: String::new(),
                pos: 4,
                gtids,
            }
        );
        // A named file, and no SID block at all.
        let mut p = vec![0x1e, 1, 0];
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(&3u32.to_le_bytes());
        p.extend_from_slice(b"f.1");
        p.extend_from_slice(&120u64.to_le_bytes());
        let r = DumpGtidRequest::parse(&p).unwrap();
        assert_eq!(
            (r.file.as_str(), r.pos, r.gtids.is_empty()),
            ("f.1", 120, true)
        );
        // Cut anywhere: an error, never a panic.
        for n in 0..p.len() - 8 {
            assert!(DumpGtidRequest::parse(&p[..n]).is_err(), "{n} bytes");
        }
        let mut bad = p.clone();
        bad.extend_from_slice(&100u32.to_le_bytes());
        bad.extend_from_slice(&[1, 2, 3]);
        assert!(DumpGtidRequest::parse(&bad).is_err());
        let mut huge = vec![0x1e, 0, 0, 0, 0, 0, 0];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(DumpGtidRequest::parse(&huge).is_err());
    }

    #[test]
    fn sets_subtract() {
        let a = set(&format!("{A}:1-10:20-30,{M}:1-3"));
        let b = set(&format!("{A}:3-4:9-22,{M}:1-3"));
        assert_eq!(subtract(&a, &b).to_string(), format!("{A}:1-2:5-8:23-30"));
        assert_eq!(subtract(&b, &b), GtidSet::default());
        assert_eq!(subtract(&a, &GtidSet::default()), a);
    }

    #[test]
    fn the_replica_is_checked_as_mysql_checks_it() {
        let m: Uuid = M.parse().unwrap();
        let executed = set(&format!("{M}:1-10"));
        let purged = set(&format!("{M}:1-4"));
        // Transactions of other servers the replica has are its own business.
        check_start(&set(&format!("{A}:1-100,{M}:1-10")), &executed, &purged, &m).unwrap();
        check_start(&set(&format!("{M}:1-4")), &executed, &purged, &m).unwrap();
        let e = check_start(&set(&format!("{M}:1-11")), &executed, &purged, &m).unwrap_err();
        assert_eq!(e.code, 1236);
        assert!(
            message(&e).starts_with("Replica has more GTIDs than the source has"),
            "{}",
            message(&e)
        );
        let e = check_start(&set(&format!("{A}:1-5,{M}:1-2")), &executed, &purged, &m).unwrap_err();
        assert_eq!(e.code, 1236);
        assert!(message(&e)
            .starts_with("Cannot replicate because the source purged required binary logs."));
        assert!(
            message(&e).ends_with(&format!(
                "The GTID set sent by the replica is '{A}:1-5,{M}:1-2', and the missing transactions are '{M}:3-4'."
            )),
            "{}",
            message(&e)
        );
    }

    #[test]
    fn mysql_events_print_as_mysqld_prints_them() {
        let gtid: MysqlGtid = format!("{A}:77").parse().unwrap();
        let e = mysql_event::mysql_gtid(
            0,
            1,
            &mysql_event::MysqlGtidEvent {
                gtid,
                ..Default::default()
            },
        );
        assert_eq!(
            info(&e).unwrap(),
            format!("SET @@SESSION.GTID_NEXT= '{A}:77'")
        );
        assert_eq!(type_name(e[4]), Some("Gtid"));
        let p = mysql_event::previous_gtids(0, 1, &set(&format!("{A}:1-5")));
        assert_eq!(info(&p).unwrap(), format!("{A}:1-5"));
        assert_eq!(type_name(p[4]), Some("Previous_gtids"));
        let q = mysql_event::rows_query(0, 1, b"/*manifold:hlc=1*/ insert into t values (1)");
        assert_eq!(
            info(&q).unwrap(),
            "# /*manifold:hlc=1*/ insert into t values (1)"
        );
        assert_eq!(type_name(q[4]), Some("Rows_query"));
        assert_eq!(info(&event::xid(0, 1, 3)), None);
        assert_eq!(type_name(types::XID), None);
    }
}
