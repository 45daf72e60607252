//! The bytes of a dump: each event as one MySQL packet (`0x00` then the event, split in
//! `0xFFFFFF` chunks), the events a server makes up (fake rotate, fake GTID list, heartbeat),
//! and what MariaDB does to events an older replica would not understand.

use manifold_binlog::event::{self, flags, types, CHECKSUM_LEN, HEADER_LEN};
use manifold_binlog::gtid::GtidPos;
use manifold_mysql_proto::consts::MAX_PAYLOAD;

/// `@mariadb_slave_capability` levels (`MARIA_SLAVE_CAPABILITY_*`).
pub mod capability {
    /// MySQL replicas and MariaDB before 5.3: no MariaDB events at all.
    pub const UNKNOWN: i64 = 0;
    /// Understands (and can ignore) annotate-rows events.
    pub const ANNOTATE: i64 = 1;
    /// Tolerates events left out of the stream (no dummy needed to keep positions).
    pub const TOLERATE_HOLES: i64 = 2;
    pub const BINLOG_CHECKPOINT: i64 = 3;
    /// Understands MariaDB GTID and GTID list events.
    pub const GTID: i64 = 4;
}

/// `COM_BINLOG_DUMP` flags.
pub mod dump_flags {
    /// At the end of the binlog, send EOF instead of waiting.
    pub const NON_BLOCK: u16 = 1;
    /// Send annotate-rows events (else they are left out or replaced, by capability).
    pub const SEND_ANNOTATE_ROWS: u16 = 2;
}

/// Appends `0x00 event` as MySQL packets from sequence id `seq`; returns the next id. A payload
/// of exactly a multiple of `0xFFFFFF` bytes ends with an empty packet, as the protocol wants.
pub fn queue_event(out: &mut Vec<u8>, mut seq: u8, event: &[u8]) -> u8 {
    let total = event.len() + 1;
    out.reserve(total + 4 * (total / MAX_PAYLOAD + 1));
    let mut sent = 0usize; // payload bytes written so far (the 0x00 counts)
    loop {
        let n = (total - sent).min(MAX_PAYLOAD);
        let len = u32::try_from(n).unwrap_or(0).to_le_bytes();
        out.extend_from_slice(&[len[0], len[1], len[2], seq]);
        seq = seq.wrapping_add(1);
        let mut chunk_start = sent;
        if sent == 0 && n > 0 {
            out.push(0);
            chunk_start = 1;
        }
        // Event bytes of this chunk: payload offsets [chunk_start, sent + n) are event[-1..].
        if sent + n > chunk_start {
            out.extend_from_slice(&event[chunk_start - 1..sent + n - 1]);
        }
        sent += n;
        if n < MAX_PAYLOAD {
            return seq;
        }
    }
}

/// An event the server makes up: timestamp 0, flag `ARTIFICIAL`, with a CRC32 when
/// `checksum` (the algorithm in force for the replica says so).
fn fake(
    type_code: u8,
    server_id: u32,
    log_pos: u32,
    header_flags: u16,
    body: &[u8],
    checksum: bool,
) -> Vec<u8> {
    let len = HEADER_LEN + body.len() + if checksum { CHECKSUM_LEN } else { 0 };
    let mut e = Vec::with_capacity(len);
    e.resize(HEADER_LEN, 0);
    event::Header {
        timestamp: 0,
        type_code,
        server_id,
        event_size: u32::try_from(len).unwrap_or(u32::MAX),
        log_pos,
        flags: header_flags,
    }
    .write(&mut e);
    e.extend_from_slice(body);
    if checksum {
        let crc = event::crc32(&e);
        e.extend_from_slice(&crc.to_le_bytes());
    }
    e
}

/// The rotate a dump starts with, naming the file it reads and where (log_pos 0).
pub fn fake_rotate(server_id: u32, file: &str, position: u64, checksum: bool) -> Vec<u8> {
    let mut body = Vec::with_capacity(8 + file.len());
    body.extend_from_slice(&position.to_le_bytes());
    body.extend_from_slice(file.as_bytes());
    fake(
        types::ROTATE,
        server_id,
        0,
        flags::ARTIFICIAL,
        &body,
        checksum,
    )
}

/// The GTID list a GTID-mode dump sends once it reached the replica's position, so the
/// replica learns where it is.
pub fn fake_gtid_list(server_id: u32, pos: &GtidPos, log_pos: u32, checksum: bool) -> Vec<u8> {
    let gtids: Vec<_> = pos.iter().collect();
    let mut body = Vec::with_capacity(4 + 16 * gtids.len());
    body.extend_from_slice(&u32::try_from(gtids.len()).unwrap_or(0).to_le_bytes());
    for g in gtids {
        body.extend_from_slice(&g.domain.to_le_bytes());
        body.extend_from_slice(&g.server.to_le_bytes());
        body.extend_from_slice(&g.seq.to_le_bytes());
    }
    fake(
        types::GTID_LIST,
        server_id,
        log_pos,
        flags::ARTIFICIAL,
        &body,
        checksum,
    )
}

/// A heartbeat: the file the dump is in as body, its position as `log_pos` (flags 0, as
/// MariaDB sends it).
pub fn heartbeat(server_id: u32, file: &str, log_pos: u64, checksum: bool) -> Vec<u8> {
    // Past 4 GiB MariaDB puts 0 in log_pos; files here rotate far earlier.
    let pos = u32::try_from(log_pos).unwrap_or(0);
    fake(
        types::HEARTBEAT,
        server_id,
        pos,
        0,
        file.as_bytes(),
        checksum,
    )
}

/// MySQL's `HEARTBEAT_LOG_EVENT_V2` (8.0.26+ replicas ask for it with the dump flag
/// `USE_HEARTBEAT_EVENT_V2`): the file and a 64-bit position as fields of type, length and
/// value (`Heartbeat` codec: 1 the file name, 2 the position as a packed integer, 0 the
/// end), `log_pos` 0 in the header.
pub fn heartbeat_v2(server_id: u32, file: &str, position: u64, checksum: bool) -> Vec<u8> {
    let mut pos = Vec::with_capacity(9);
    packed(&mut pos, position);
    let mut body = Vec::with_capacity(file.len() + pos.len() + 8);
    packed(&mut body, 1);
    packed(&mut body, file.len() as u64);
    body.extend_from_slice(file.as_bytes());
    packed(&mut body, 2);
    packed(&mut body, pos.len() as u64);
    body.extend_from_slice(&pos);
    packed(&mut body, 0);
    fake(types::HEARTBEAT_V2, server_id, 0, 0, &body, checksum)
}

/// A length-encoded integer (`net_store_length`).
fn packed(out: &mut Vec<u8>, v: u64) {
    let b = v.to_le_bytes();
    match v {
        0..=250 => out.push(b[0]),
        251..=0xffff => {
            out.push(252);
            out.extend_from_slice(&b[..2]);
        }
        0x1_0000..=0xff_ffff => {
            out.push(253);
            out.extend_from_slice(&b[..3]);
        }
        _ => {
            out.push(254);
            out.extend_from_slice(&b);
        }
    }
}

/// What to do with an event for a replica of some capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adapted {
    Send,
    /// Left out of the stream.
    Drop,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AdaptError(pub &'static str);

/// MariaDB's rules for events a replica did not ask for or would not understand, applied to
/// `event` (with checksum when `checksum`) in place. `capability`: `@mariadb_slave_capability`;
/// `dump_flags`: the `COM_BINLOG_DUMP` flags.
pub fn adapt(
    event: &mut [u8],
    capability: i64,
    dump_flags: u16,
    checksum: bool,
) -> Result<Adapted, AdaptError> {
    let Some(&type_code) = event.get(4) else {
        return Err(AdaptError("event shorter than its header"));
    };
    match type_code {
        types::ANNOTATE_ROWS if dump_flags & dump_flags::SEND_ANNOTATE_ROWS == 0 => {
            if capability >= capability::TOLERATE_HOLES {
                Ok(Adapted::Drop)
            } else if capability >= capability::ANNOTATE {
                // It understands the event and ignores it; leaving it out would break its
                // position arithmetic.
                Ok(Adapted::Send)
            } else {
                dummy(event, checksum).map_err(|()| {
                    AdaptError("Failed to replace row annotate event with dummy: too small event.")
                })?;
                Ok(Adapted::Send)
            }
        }
        types::GTID if capability < capability::GTID => {
            let standalone = event
                .get(HEADER_LEN + 12)
                .is_some_and(|f| f & event::gtid_flags::STANDALONE != 0);
            let failed = AdaptError(
                "Failed to replace GTID event with backwards-compatible event: currupt event.",
            );
            if standalone {
                // No COMMIT follows a DDL: no BEGIN either.
                if capability >= capability::TOLERATE_HOLES {
                    return Ok(Adapted::Drop);
                }
                dummy(event, checksum).map_err(|()| failed)?;
            } else {
                begin(event, checksum).map_err(|()| failed)?;
            }
            Ok(Adapted::Send)
        }
        types::BINLOG_CHECKPOINT | types::GTID_LIST
            if (type_code == types::GTID_LIST && capability < capability::GTID)
                || capability < capability::BINLOG_CHECKPOINT =>
        {
            if capability >= capability::TOLERATE_HOLES {
                return Ok(Adapted::Drop);
            }
            dummy(event, checksum).map_err(|()| {
                AdaptError(
                    "Failed to replace binlog checkpoint or gtid list event with dummy: too small event.",
                )
            })?;
            Ok(Adapted::Send)
        }
        _ => Ok(Adapted::Send),
    }
}

/// Rewrites `event` as a query event of the same size running `text` padded with spaces (the
/// header's timestamp, server id, `log_pos` kept; flags cleared). Err when it does not fit.
fn query_in_place(event: &mut [u8], text: &[u8], checksum: bool) -> Result<(), ()> {
    let tail = if checksum { CHECKSUM_LEN } else { 0 };
    // Post-header 13 bytes, no status variables, empty schema and its NUL.
    let room = event
        .len()
        .checked_sub(HEADER_LEN + 13 + 1 + tail)
        .ok_or(())?;
    if room == 0 {
        return Err(());
    }
    event[4] = types::QUERY;
    event[17] = 0;
    event[18] = 0;
    let body = &mut event[HEADER_LEN..];
    body[..14].fill(0); // thread id, exec time, schema length, error code, status length, NUL
    let text_area = &mut body[14..14 + room];
    let n = text.len().min(room);
    text_area[..n].copy_from_slice(&text[..n]);
    text_area[n..].fill(b' ');
    if checksum {
        let end = event.len() - CHECKSUM_LEN;
        let crc = event::crc32(&event[..end]);
        event[end..].copy_from_slice(&crc.to_le_bytes());
    }
    Ok(())
}

/// MariaDB's "dummy event": a comment query of the same size, a no-op on the replica.
fn dummy(event: &mut [u8], checksum: bool) -> Result<(), ()> {
    let text = b"# Dummy event replacing event that slave cannot handle.";
    query_in_place(event, text, checksum)
}

/// A GTID event as the `BEGIN` an older replica expects (the sizes match: 42 bytes with
/// checksum); a larger GTID event gets `BEGIN` padded with spaces.
fn begin(event: &mut [u8], checksum: bool) -> Result<(), ()> {
    query_in_place(event, b"BEGIN", checksum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifold_binlog::gtid::Gtid;

    /// Splits `wire` back into (seq, payload) packets.
    fn packets(wire: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < wire.len() {
            let len = usize::from(wire[at])
                | usize::from(wire[at + 1]) << 8
                | usize::from(wire[at + 2]) << 16;
            out.push((wire[at + 3], wire[at + 4..at + 4 + len].to_vec()));
            at += 4 + len;
        }
        out
    }

    fn joined(p: &[(u8, Vec<u8>)]) -> Vec<u8> {
        p.iter().flat_map(|(_, b)| b.clone()).collect()
    }

    #[test]
    fn a_small_event_is_one_packet_with_a_leading_zero() {
        let mut out = Vec::new();
        let next = queue_event(&mut out, 7, b"abc");
        assert_eq!(next, 8);
        assert_eq!(packets(&out), vec![(7, b"\0abc".to_vec())]);
    }

    #[test]
    fn large_events_split_at_the_packet_limit_and_an_exact_multiple_ends_empty() {
        for event_len in [
            MAX_PAYLOAD - 2,
            MAX_PAYLOAD - 1, // payload exactly 0xFFFFFF: an empty packet follows
            MAX_PAYLOAD,
            2 * MAX_PAYLOAD - 1, // payload exactly twice the limit
            2 * MAX_PAYLOAD + 5,
        ] {
            let event: Vec<u8> = (0..event_len).map(|i| (i % 251) as u8).collect();
            let mut out = Vec::new();
            let next = queue_event(&mut out, 255, &event);
            let p = packets(&out);
            let payload = event_len + 1;
            let expected_packets = payload / MAX_PAYLOAD + 1;
            assert_eq!(p.len(), expected_packets, "event of {event_len} bytes");
            assert!(p[..p.len() - 1].iter().all(|(_, b)| b.len() == MAX_PAYLOAD));
            assert!(p.last().unwrap().1.len() < MAX_PAYLOAD);
            // Sequence ids continue and wrap.
            for (i, (seq, _)) in p.iter().enumerate() {
                assert_eq!(*seq, 255u8.wrapping_add(i as u8));
            }
            assert_eq!(next, 255u8.wrapping_add(p.len() as u8));
            let body = joined(&p);
            assert_eq!(body[0], 0);
            assert_eq!(&body[1..], &event[..]);
        }
    }

    #[test]
    fn fake_events_carry_a_checksum_only_when_asked() {
        let with = fake_rotate(9, "manifold-bin.000002", 4, true);
        let without = fake_rotate(9, "manifold-bin.000002", 4, false);
        assert_eq!(with.len(), without.len() + 4);
        event::verify_checksum(&with).unwrap();
        let h = event::Header::parse(&without).unwrap();
        assert_eq!(h.event_size as usize, without.len());
        assert_eq!((h.timestamp, h.log_pos, h.flags), (0, 0, flags::ARTIFICIAL));
        assert_eq!(&without[HEADER_LEN..HEADER_LEN + 8], &4u64.to_le_bytes());
        let pos: GtidPos = "0-4-9".parse().unwrap();
        let list = fake_gtid_list(4, &pos, 1234, true);
        assert_eq!(event::parse_mariadb_gtid_list(&list).unwrap(), pos);
        assert_eq!(event::Header::parse(&list).unwrap().log_pos, 1234);
        let hb = heartbeat(4, "manifold-bin.000001", 777, true);
        event::verify_checksum(&hb).unwrap();
        assert_eq!(event::Header::parse(&hb).unwrap().log_pos, 777);
        assert_eq!(&hb[HEADER_LEN..hb.len() - 4], b"manifold-bin.000001");
    }

    #[test]
    fn a_v2_heartbeat_carries_the_file_and_a_packed_position() {
        let hb = heartbeat_v2(4, "manifold-bin.000001", 5_000_000_000, true);
        event::verify_checksum(&hb).unwrap();
        let h = event::Header::parse(&hb).unwrap();
        assert_eq!(
            (h.type_code, h.log_pos, h.flags),
            (types::HEARTBEAT_V2, 0, 0)
        );
        let mut expected = vec![1, 19];
        expected.extend_from_slice(b"manifold-bin.000001");
        expected.extend_from_slice(&[2, 9, 254]);
        expected.extend_from_slice(&5_000_000_000u64.to_le_bytes());
        expected.push(0);
        assert_eq!(&hb[HEADER_LEN..hb.len() - 4], &expected[..]);
        let small = heartbeat_v2(4, "f.1", 1234, false);
        assert_eq!(
            &small[HEADER_LEN..],
            &[1, 3, b'f', b'.', b'1', 2, 3, 252, 0xd2, 0x04, 0]
        );
    }

    fn gtid_event(flags2: u8) -> Vec<u8> {
        let g = Gtid {
            domain: 0,
            server: 4,
            seq: 12,
        };
        event::mariadb_gtid(1000, g, flags2)
    }

    #[test]
    fn an_old_replica_gets_begin_in_place_of_a_gtid_event() {
        let mut e = gtid_event(event::gtid_flags::TRANSACTIONAL);
        let before = e.len();
        assert_eq!(adapt(&mut e, 0, 0, true), Ok(Adapted::Send));
        assert_eq!(e.len(), before);
        let h = event::Header::parse(&e).unwrap();
        assert_eq!(h.type_code, types::QUERY);
        assert_eq!(h.timestamp, 1000);
        event::verify_checksum(&e).unwrap();
        assert_eq!(event::query_text(&e).unwrap(), b"BEGIN");
        // A GTID-aware replica gets it as is.
        let mut e = gtid_event(event::gtid_flags::TRANSACTIONAL);
        let original = e.clone();
        assert_eq!(adapt(&mut e, capability::GTID, 0, true), Ok(Adapted::Send));
        assert_eq!(e, original);
    }

    #[test]
    fn a_standalone_gtid_is_left_out_or_made_a_dummy() {
        let mut e = gtid_event(event::gtid_flags::STANDALONE);
        assert_eq!(adapt(&mut e, 3, 0, true), Ok(Adapted::Drop));
        let mut e = gtid_event(event::gtid_flags::STANDALONE);
        assert_eq!(adapt(&mut e, 1, 0, true), Ok(Adapted::Send));
        assert_eq!(e[4], types::QUERY);
        // Room for five characters: a comment, a no-op.
        assert_eq!(event::query_text(&e).unwrap(), b"# Dum");
        event::verify_checksum(&e).unwrap();
    }

    #[test]
    fn annotate_rows_follow_the_dump_flag_and_capability() {
        let ann = event::annotate(
            1,
            4,
            b"/*manifold:hlc=1*/ insert into t values (1), (2), (3)",
        );
        for (cap, flags, expected_type, outcome) in [
            (
                4,
                dump_flags::SEND_ANNOTATE_ROWS,
                types::ANNOTATE_ROWS,
                Adapted::Send,
            ),
            (4, 0, types::ANNOTATE_ROWS, Adapted::Drop),
            (2, 0, types::ANNOTATE_ROWS, Adapted::Drop),
            (1, 0, types::ANNOTATE_ROWS, Adapted::Send),
            (0, 0, types::QUERY, Adapted::Send),
        ] {
            let mut e = ann.clone();
            assert_eq!(
                adapt(&mut e, cap, flags, true),
                Ok(outcome),
                "capability {cap}"
            );
            assert_eq!(e[4], expected_type, "capability {cap}");
            assert_eq!(e.len(), ann.len());
            event::verify_checksum(&e).unwrap();
        }
    }

    #[test]
    fn gtid_lists_are_hidden_from_replicas_without_gtid() {
        let list = event::mariadb_gtid_list(0, 4, &"0-4-3".parse().unwrap());
        let mut e = list.clone();
        assert_eq!(adapt(&mut e, 2, 0, true), Ok(Adapted::Drop));
        let mut e = list.clone();
        assert_eq!(adapt(&mut e, 0, 0, true), Ok(Adapted::Send));
        assert_eq!(e[4], types::QUERY);
        let mut e = list.clone();
        assert_eq!(adapt(&mut e, 4, 0, true), Ok(Adapted::Send));
        assert_eq!(e, list);
        // Too small for a dummy: an error, not a panic.
        let mut tiny = vec![0u8; HEADER_LEN + 4];
        tiny[4] = types::GTID_LIST;
        assert!(adapt(&mut tiny, 0, 0, true).is_err());
        assert!(adapt(&mut [], 0, 0, true).is_err());
    }
}
