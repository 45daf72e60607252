//! Stamping write statements for the global binlog: with it on, each write or DDL statement a
//! client sends as `COM_QUERY` goes to the primary as `/*manifold:hlc=N*/ <text>`. MariaDB
//! keeps the comment in the annotate event before the statement's rows, where the source
//! reader finds N, the transaction's place in the global order (`manifold_binlog::stamp`).
//!
//! N comes from the worker's own clock (no lock, no shared atomic): strictly increasing per
//! worker, the machine's wall clock across workers. What is not stamped, and is ordered by
//! the heartbeats instead (a transaction inherits the previous key of its source):
//! - prepared statements (`COM_STMT_EXECUTE`): their packets carry no text;
//! - a statement whose stamped packet would no longer fit one packet (its payload would
//!   reach 16 MiB - 1): it is sent unstamped rather than split;
//! - reads, `SET`, `BEGIN`/`COMMIT`, and statements the lexer does not class (`CALL`,
//!   several statements in one packet).

use manifold_binlog::stamp;
use manifold_mysql_proto::consts::command;
use manifold_sql_lex::Class;

use super::decode::Effect;
use super::Session;

/// The largest payload one packet carries.
const MAX_ONE_PACKET: usize = 0xFF_FFFF;

impl Session {
    /// With stamping on and a write statement, puts the stamped command in `exec_buf`
    /// (taking the one already there when `rewritten`, else the client's packet, `raw_len`
    /// bytes at the front of its buffer); returns whether `exec_buf` holds the command to
    /// send. The buffer is the session's, reused: no allocation once it has grown.
    pub(super) fn stamp_write(&mut self, raw_len: usize, rewritten: bool, effect: Effect) -> bool {
        let Effect::Query(scan) = effect else {
            return rewritten;
        };
        let shared = &self.fe.shared;
        if !(shared.config.binlog_stamps || shared.binlog.is_some()) || scan.class() != Class::Write
        {
            return rewritten;
        }
        let hlc = self.fe.stamp_clock.borrow_mut().now();
        let stamped = if rewritten {
            stamp_packet(&mut self.exec_buf, hlc)
        } else {
            // Header, stamp and text written once each: a large statement is not copied and
            // then moved again to make room.
            stamped_copy(&self.io.rbuf[..raw_len], hlc, &mut self.exec_buf)
        };
        // Too large to stamp: the command goes as it was.
        stamped || rewritten
    }
}

/// The length of the `COM_QUERY` packet `packet` (header included) if it is one whole frame
/// that may grow by a stamp.
fn query_len(packet: &[u8]) -> Option<usize> {
    let header = packet.get(..5)?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    (header[4] == command::QUERY && len < MAX_ONE_PACKET && packet.len() == 4 + len).then_some(len)
}

/// Writes to `out` (emptied first) the `COM_QUERY` packet `packet` with the stamp comment for
/// `hlc` before its text, in one pass. False when `packet` is not one whole `COM_QUERY` frame
/// or the stamped payload would not fit one packet (`out` then holds nothing of use).
fn stamped_copy(packet: &[u8], hlc: u64, out: &mut Vec<u8>) -> bool {
    out.clear();
    let Some(len) = query_len(packet) else {
        return false;
    };
    out.reserve(packet.len() + stamp::MAX_LEN);
    out.extend_from_slice(&packet[..5]);
    stamp::write(out, hlc);
    let stamped_len = len + out.len() - 5;
    if stamped_len >= MAX_ONE_PACKET {
        out.clear();
        return false;
    }
    out.extend_from_slice(&packet[5..]);
    out[..3].copy_from_slice(&stamped_len.to_le_bytes()[..3]);
    true
}

/// Puts the stamp comment for `hlc` before the text of the `COM_QUERY` packet in `packet`
/// (header included, one frame) and fixes its length. False, with `packet` as it was, when it
/// is not one whole `COM_QUERY` frame or the stamped payload would not fit one packet.
fn stamp_packet(packet: &mut Vec<u8>, hlc: u64) -> bool {
    let Some(len) = query_len(packet) else {
        return false;
    };
    let before = packet.len();
    stamp::write(packet, hlc);
    let added = packet.len() - before;
    let stamped_len = len + added;
    if stamped_len >= MAX_ONE_PACKET {
        packet.truncate(before);
        return false;
    }
    // The comment went to the end: move it between the command byte and the text.
    packet[5..].rotate_right(added);
    packet[..3].copy_from_slice(&stamped_len.to_le_bytes()[..3]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query_packet(seq: u8, text: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        manifold_mysql_proto::write_packet(&mut p, seq, &[&[command::QUERY][..], text].concat());
        p
    }

    #[test]
    fn the_stamp_goes_before_the_text_and_the_length_follows() {
        let mut p = query_packet(0, b"INSERT INTO t VALUES (1)");
        assert!(stamp_packet(&mut p, 1_234));
        assert_eq!(
            p,
            query_packet(0, b"/*manifold:hlc=1234*/ INSERT INTO t VALUES (1)")
        );
        assert_eq!(stamp::parse(&p[5..]), Some(1_234));
    }

    /// Both ways of stamping: in place, and copying from the client's buffer.
    fn stamp_both_ways(packet: &[u8], hlc: u64) -> Option<Vec<u8>> {
        let mut in_place = packet.to_vec();
        let mut copy = vec![0xAA; 3];
        let stamped = stamp_packet(&mut in_place, hlc);
        assert_eq!(stamped_copy(packet, hlc, &mut copy), stamped);
        if !stamped {
            assert_eq!(in_place, packet, "left as it was");
            return None;
        }
        assert_eq!(copy, in_place);
        Some(copy)
    }

    #[test]
    fn a_copy_from_the_clients_buffer_is_stamped_as_in_place() {
        assert_eq!(
            stamp_both_ways(&query_packet(7, b"UPDATE t SET a = 1"), 99).unwrap(),
            query_packet(7, b"/*manifold:hlc=99*/ UPDATE t SET a = 1")
        );
        let room = MAX_ONE_PACKET - 1 - 1 - stamp::MAX_LEN;
        let p = stamp_both_ways(&query_packet(3, &vec![b'y'; room]), u64::MAX).unwrap();
        assert_eq!(p.len(), 4 + MAX_ONE_PACKET - 1);
        assert_eq!(
            stamp_both_ways(&query_packet(0, &vec![b'x'; room + 1]), u64::MAX),
            None
        );
        assert_eq!(stamp_both_ways(&[1, 0, 0, 0, 0x0e], 1), None);
        assert_eq!(stamp_both_ways(&[], 1), None);
    }

    #[test]
    fn what_cannot_be_stamped_goes_as_it_was() {
        // Stamped, the payload would need a second packet.
        let text = vec![b'x'; MAX_ONE_PACKET - 1 - 10];
        let mut big = query_packet(0, &text);
        let before = big.clone();
        assert!(!stamp_packet(&mut big, u64::MAX));
        assert_eq!(big, before);
        // Already split over several packets.
        let text = vec![b'x'; MAX_ONE_PACKET + 5];
        let mut split = query_packet(0, &text);
        let before = split.clone();
        assert!(!stamp_packet(&mut split, 1));
        assert_eq!(split, before);
        // Not a COM_QUERY, or cut short.
        let mut ping = vec![1, 0, 0, 0, 0x0e];
        assert!(!stamp_packet(&mut ping, 1));
        assert_eq!(ping, [1, 0, 0, 0, 0x0e]);
        let mut short = query_packet(0, b"INSERT");
        short.pop();
        assert!(!stamp_packet(&mut short, 1));
        assert!(!stamp_packet(&mut Vec::new(), 1));
    }

    #[test]
    fn a_statement_just_under_the_packet_limit_is_still_stamped() {
        let room = MAX_ONE_PACKET - 1 - 1 - stamp::MAX_LEN;
        let mut p = query_packet(3, &vec![b'y'; room]);
        assert!(stamp_packet(&mut p, u64::MAX));
        assert_eq!(p.len(), 4 + MAX_ONE_PACKET - 1);
        assert_eq!(p[3], 3, "the client's sequence id stays");
        assert_eq!(stamp::parse(&p[5..]), Some(u64::MAX));
    }
}
