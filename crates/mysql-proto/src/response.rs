//! Following a server's answer as it streams past, without decoding it.
//!
//! A relay forwards the backend's bytes to the client as they arrive; it only needs to know
//! where the answer ends (and whether the server asks for a LOCAL INFILE). [`ResponseTracker`]
//! reads each packet's header and its first few payload bytes, skips the rest, and reports
//! the byte offset where the answer is complete, so a 1 GB result passes through a 64 KiB
//! buffer untouched.

use crate::command::ResponseKind;
use crate::consts::{status, MAX_PAYLOAD};
use crate::errors::ProtoError;
use crate::packet::HEADER_LEN;
use crate::packets::{is_row_terminator, ok_status};

/// How many leading payload bytes a decision needs: an OK packet's status flags sit after
/// two length-encoded integers of at most 9 bytes each.
const PREFIX: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The first packet of a result (OK, ERR, LOCAL INFILE request or column count).
    First,
    Columns(u64),
    ColumnsEof,
    Rows,
    PrepareFirst,
    PrepareParams {
        params: u16,
        columns: u16,
    },
    PrepareParamsEof {
        columns: u16,
    },
    PrepareColumns(u16),
    PrepareColumnsEof,
    FieldList,
    Single,
    Done,
}

/// What the caller must do after the bytes reported as consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The answer goes on: forward what was consumed and feed more.
    More,
    /// The server sent a LOCAL INFILE request: relay the client's file packets up to the empty
    /// one, then call [`ResponseTracker::resume_after_infile`].
    LocalInfile,
    /// The answer is complete.
    Done,
    /// Bytes consumed so far stop short of a packet that must be seen whole (an OK carrying
    /// session-state changes, when capture is on): append more bytes and feed again from there.
    NeedMore,
    /// The last [`ResponseTracker::state_packet_len`] bytes consumed are one whole OK packet
    /// carrying session-state changes. Handle it, then feed again: the tracker then reports
    /// whatever follows it (possibly `Done` with nothing consumed).
    SessionState,
}

#[derive(Debug, Clone)]
pub struct ResponseTracker {
    state: State,
    deprecate_eof: bool,
    next_seq: u8,
    header: [u8; HEADER_LEN],
    header_have: usize,
    prefix: [u8; PREFIX],
    prefix_have: usize,
    /// Payload length of the physical packet being read.
    len: usize,
    /// Payload bytes of the current packet still to skip.
    skip: usize,
    /// The current physical packet continues a logical packet already classified.
    continuation: bool,
    pending: Progress,
    last_status: u16,
    last_warnings: u16,
    last_affected_rows: u64,
    last_insert_id: u64,
    /// Rows of the last result set so far, and whether the last result was one (not an OK).
    last_rows: u64,
    last_was_result_set: bool,
    saw_error: bool,
    capture_state: bool,
    /// The packet being read is an OK with session-state changes, wholly in this `feed`'s data.
    capturing: bool,
    state_packet_len: usize,
    /// What to report after a `SessionState`.
    after_state: Option<Progress>,
}

impl ResponseTracker {
    /// `first_seq` is the sequence id of the answer's first packet (the command's last + 1).
    pub fn new(kind: ResponseKind, deprecate_eof: bool, first_seq: u8) -> Self {
        let state = match kind {
            ResponseKind::None => State::Done,
            ResponseKind::Single | ResponseKind::Raw => State::Single,
            ResponseKind::ResultSets => State::First,
            ResponseKind::Rows => State::Rows,
            ResponseKind::Prepare => State::PrepareFirst,
            ResponseKind::FieldList => State::FieldList,
        };
        Self {
            state,
            deprecate_eof,
            next_seq: first_seq,
            header: [0; HEADER_LEN],
            header_have: 0,
            prefix: [0; PREFIX],
            prefix_have: 0,
            len: 0,
            skip: 0,
            continuation: false,
            pending: Progress::More,
            last_status: 0,
            last_warnings: 0,
            last_affected_rows: 0,
            last_insert_id: 0,
            last_rows: 0,
            last_was_result_set: false,
            saw_error: false,
            capture_state: false,
            capturing: false,
            state_packet_len: 0,
            after_state: None,
        }
    }

    /// Reports OK packets that carry session-state changes as [`Progress::SessionState`], each
    /// whole, so the caller can read (or rewrite) them before they go on.
    #[must_use]
    pub fn capturing_session_state(mut self) -> Self {
        self.capture_state = true;
        self
    }

    /// Length (header included) of the packet reported by the last [`Progress::SessionState`].
    pub fn state_packet_len(&self) -> usize {
        self.state_packet_len
    }

    /// Affected rows of the last OK packet seen.
    pub fn last_affected_rows(&self) -> u64 {
        self.last_affected_rows
    }

    /// Last-insert id of the last OK packet seen.
    pub fn last_insert_id(&self) -> u64 {
        self.last_insert_id
    }

    /// At the start of a packet that may be an OK: whether it must be captured, or more bytes
    /// are needed to tell. `None` when the packet can be read the ordinary way.
    fn check_state_packet(&self, rest: &[u8]) -> Option<Progress> {
        let ok_first = match self.state {
            State::First | State::Single => 0x00,
            State::Rows if self.deprecate_eof => 0xFE,
            _ => return None,
        };
        if rest.len() < HEADER_LEN + 1 {
            return Some(Progress::NeedMore);
        }
        let len = usize::from(rest[0]) | usize::from(rest[1]) << 8 | usize::from(rest[2]) << 16;
        if rest[HEADER_LEN] != ok_first || (ok_first == 0xFE && len >= MAX_PAYLOAD) {
            return None;
        }
        let need = len.min(PREFIX);
        if rest.len() < HEADER_LEN + need {
            return Some(Progress::NeedMore);
        }
        let (_, _, st, _) = ok_status(&rest[HEADER_LEN..HEADER_LEN + need])?;
        if st & status::SESSION_STATE_CHANGED == 0 {
            return None;
        }
        if rest.len() < HEADER_LEN + len {
            return Some(Progress::NeedMore);
        }
        Some(Progress::SessionState)
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done && self.at_boundary()
    }

    /// True between packets: an error packet can be injected here without corrupting the stream.
    pub fn at_boundary(&self) -> bool {
        self.header_have == 0 && self.skip == 0 && !self.continuation
    }

    /// Sequence id the next packet of this exchange carries.
    pub fn next_seq(&self) -> u8 {
        self.next_seq
    }

    /// Status flags of the last OK/EOF seen (e.g. `SERVER_STATUS_IN_TRANS`).
    pub fn last_status(&self) -> u16 {
        self.last_status
    }

    /// Rows the last result set of the answer had (0 if the last result was an OK).
    pub fn last_rows(&self) -> u64 {
        self.last_rows
    }

    /// The answer's last result was a result set, not an OK.
    pub fn last_was_result_set(&self) -> bool {
        self.last_was_result_set
    }

    pub fn last_warnings(&self) -> u16 {
        self.last_warnings
    }

    /// The answer ended with (or contained) an ERR packet.
    pub fn saw_error(&self) -> bool {
        self.saw_error
    }

    /// The length, header included, of the packet [`Self::feed`] last took whole: at
    /// [`Progress::Done`] after an error, the ERR packet's, which ends the bytes fed.
    pub fn last_packet_len(&self) -> usize {
        HEADER_LEN + self.len
    }

    /// After the client's file packets: the server's answer continues with the sequence id
    /// following the client's empty packet.
    pub fn resume_after_infile(&mut self, next_seq: u8) {
        self.state = State::First;
        self.next_seq = next_seq;
    }

    /// Consumes bytes of the answer. Returns how many bytes of `data` belong to the answer so
    /// far and whether it is complete. Bytes past a `Done` are not consumed.
    pub fn feed(&mut self, data: &[u8]) -> Result<(usize, Progress), ProtoError> {
        if let Some(p) = self.after_state.take() {
            return Ok((0, p));
        }
        let mut pos = 0;
        loop {
            if self.skip > 0 {
                let n = self.skip.min(data.len() - pos);
                pos += n;
                self.skip -= n;
                if self.skip > 0 {
                    return Ok((pos, Progress::More));
                }
            }
            if self.header_have == HEADER_LEN
                && self.skip == 0
                && self.prefix_have >= self.len.min(PREFIX)
            {
                // Packet fully consumed.
                self.header_have = 0;
                self.prefix_have = 0;
                self.continuation = self.len == MAX_PAYLOAD;
                if self.capturing {
                    self.capturing = false;
                    self.state_packet_len = HEADER_LEN + self.len;
                    let p = std::mem::replace(&mut self.pending, Progress::More);
                    self.after_state = (p != Progress::More).then_some(p);
                    return Ok((pos, Progress::SessionState));
                }
                if !self.continuation && self.pending != Progress::More {
                    let p = std::mem::replace(&mut self.pending, Progress::More);
                    return Ok((pos, p));
                }
            }
            if pos == data.len() {
                return Ok((pos, Progress::More));
            }
            if self.state == State::Done && !self.continuation {
                return Err(ProtoError::Malformed("server sent more than the answer"));
            }
            if self.capture_state && self.header_have == 0 && !self.continuation {
                match self.check_state_packet(&data[pos..]) {
                    None => {}
                    Some(Progress::SessionState) => self.capturing = true,
                    Some(p) => return Ok((pos, p)),
                }
            }
            if self.header_have < HEADER_LEN {
                let n = (HEADER_LEN - self.header_have).min(data.len() - pos);
                self.header[self.header_have..self.header_have + n]
                    .copy_from_slice(&data[pos..pos + n]);
                self.header_have += n;
                pos += n;
                if self.header_have < HEADER_LEN {
                    return Ok((pos, Progress::More));
                }
                self.len = usize::from(self.header[0])
                    | usize::from(self.header[1]) << 8
                    | usize::from(self.header[2]) << 16;
                let seq = self.header[3];
                if seq != self.next_seq {
                    return Err(ProtoError::Sequence {
                        expected: self.next_seq,
                        got: seq,
                    });
                }
                self.next_seq = seq.wrapping_add(1);
                if self.continuation {
                    // Rest of a split packet already classified by its first piece.
                    self.prefix_have = PREFIX;
                    self.skip = self.len;
                    continue;
                }
            }
            let need = self.len.min(PREFIX);
            if self.prefix_have < need {
                let n = (need - self.prefix_have).min(data.len() - pos);
                self.prefix[self.prefix_have..self.prefix_have + n]
                    .copy_from_slice(&data[pos..pos + n]);
                self.prefix_have += n;
                pos += n;
                if self.prefix_have < need {
                    return Ok((pos, Progress::More));
                }
            }
            self.pending = self.classify()?;
            self.skip = self.len - need;
        }
    }

    fn classify(&mut self) -> Result<Progress, ProtoError> {
        let p = &self.prefix[..self.len.min(PREFIX)];
        let first = p.first().copied();
        if first == Some(0xFF)
            && !matches!(
                self.state,
                State::Columns(_) | State::PrepareParams { .. } | State::PrepareColumns(_)
            )
        {
            self.saw_error = true;
            self.state = State::Done;
            return Ok(Progress::Done);
        }
        let bad = ProtoError::Malformed("unexpected packet in server answer");
        match self.state {
            State::Done => Err(bad),
            State::Single => {
                if let (Some(0x00 | 0xFE), Some((affected, id, st, w))) = (first, ok_status(p)) {
                    self.last_status = st;
                    self.last_warnings = w;
                    self.last_affected_rows = affected;
                    self.last_insert_id = id;
                }
                self.state = State::Done;
                Ok(Progress::Done)
            }
            State::First => match first {
                Some(0x00) => {
                    let (affected, id, st, w) = ok_status(p).ok_or(bad)?;
                    self.last_was_result_set = false;
                    self.last_status = st;
                    self.last_warnings = w;
                    self.last_affected_rows = affected;
                    self.last_insert_id = id;
                    Ok(self.after_result(st))
                }
                Some(0xFB) => {
                    self.state = State::Done;
                    Ok(Progress::LocalInfile)
                }
                Some(_) => {
                    let n = crate::codec::Reader::new(p).lenenc_int().map_err(|_| bad)?;
                    if n == 0 {
                        return Err(ProtoError::Malformed("result set with zero columns"));
                    }
                    self.state = State::Columns(n);
                    self.last_was_result_set = true;
                    self.last_rows = 0;
                    Ok(Progress::More)
                }
                None => Err(bad),
            },
            State::Columns(n) => {
                self.state = match n - 1 {
                    0 if self.deprecate_eof => State::Rows,
                    0 => State::ColumnsEof,
                    left => State::Columns(left),
                };
                Ok(Progress::More)
            }
            State::ColumnsEof => {
                if first != Some(0xFE) {
                    return Err(bad);
                }
                let st = eof_status(p);
                self.last_status = st;
                if st & status::CURSOR_EXISTS != 0 {
                    // A cursor was opened: rows come later through COM_STMT_FETCH.
                    self.state = State::Done;
                    return Ok(Progress::Done);
                }
                self.state = State::Rows;
                Ok(Progress::More)
            }
            State::Rows => {
                if first.is_some_and(|f| is_row_terminator(f, self.len, self.deprecate_eof)) {
                    let (st, w) = if self.deprecate_eof && self.len >= 7 {
                        let (_, _, st, w) = ok_status(p).ok_or(bad)?;
                        (st, w)
                    } else {
                        (eof_status(p), eof_warnings(p))
                    };
                    self.last_status = st;
                    self.last_warnings = w;
                    return Ok(self.after_result(st));
                }
                self.last_rows += 1;
                Ok(Progress::More)
            }
            State::PrepareFirst => {
                if first != Some(0x00) || p.len() < 9 {
                    return Err(bad);
                }
                let columns = u16::from_le_bytes([p[5], p[6]]);
                let params = u16::from_le_bytes([p[7], p[8]]);
                self.state = Self::prepare_next(params, columns);
                Ok(if self.state == State::Done {
                    Progress::Done
                } else {
                    Progress::More
                })
            }
            State::PrepareParams { params, columns } => {
                self.state = if params > 1 {
                    State::PrepareParams {
                        params: params - 1,
                        columns,
                    }
                } else if self.deprecate_eof {
                    Self::prepare_next(0, columns)
                } else {
                    State::PrepareParamsEof { columns }
                };
                Ok(if self.state == State::Done {
                    Progress::Done
                } else {
                    Progress::More
                })
            }
            State::PrepareParamsEof { columns } => {
                if first != Some(0xFE) {
                    return Err(bad);
                }
                self.state = Self::prepare_next(0, columns);
                Ok(if self.state == State::Done {
                    Progress::Done
                } else {
                    Progress::More
                })
            }
            State::PrepareColumns(n) => {
                self.state = if n > 1 {
                    State::PrepareColumns(n - 1)
                } else if self.deprecate_eof {
                    State::Done
                } else {
                    State::PrepareColumnsEof
                };
                Ok(if self.state == State::Done {
                    Progress::Done
                } else {
                    Progress::More
                })
            }
            State::PrepareColumnsEof => {
                if first != Some(0xFE) {
                    return Err(bad);
                }
                self.state = State::Done;
                Ok(Progress::Done)
            }
            State::FieldList => {
                if first.is_some_and(|f| is_row_terminator(f, self.len, self.deprecate_eof)) {
                    self.state = State::Done;
                    return Ok(Progress::Done);
                }
                Ok(Progress::More)
            }
        }
    }

    fn prepare_next(params: u16, columns: u16) -> State {
        if params > 0 {
            State::PrepareParams { params, columns }
        } else if columns > 0 {
            State::PrepareColumns(columns)
        } else {
            State::Done
        }
    }

    fn after_result(&mut self, st: u16) -> Progress {
        if st & status::MORE_RESULTS_EXISTS != 0 {
            self.state = State::First;
            Progress::More
        } else {
            self.state = State::Done;
            Progress::Done
        }
    }
}

fn eof_status(p: &[u8]) -> u16 {
    if p.len() >= 5 {
        u16::from_le_bytes([p[3], p[4]])
    } else {
        0
    }
}

fn eof_warnings(p: &[u8]) -> u16 {
    if p.len() >= 3 {
        u16::from_le_bytes([p[1], p[2]])
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::write_packet;
    use crate::packets::{ColumnDefinition, EofPacket, ErrPacket, OkPacket};
    use proptest::prelude::*;

    fn ok(status: u16, header: u8) -> Vec<u8> {
        let mut v = Vec::new();
        OkPacket {
            header,
            status,
            ..Default::default()
        }
        .encode(&mut v, 0);
        v
    }

    /// A text result set as a server would send it, starting at sequence id `seq`.
    fn result_set(
        out: &mut Vec<u8>,
        seq: &mut u8,
        rows: &[Vec<u8>],
        deprecate_eof: bool,
        more: bool,
    ) {
        *seq = write_packet(out, *seq, &[2]);
        for name in ["a", "b"] {
            let mut c = Vec::new();
            ColumnDefinition::new(name, crate::consts::column_type::VAR_STRING).encode(&mut c);
            *seq = write_packet(out, *seq, &c);
        }
        if !deprecate_eof {
            let mut e = Vec::new();
            EofPacket {
                warnings: 0,
                status: 2,
            }
            .encode(&mut e);
            *seq = write_packet(out, *seq, &e);
        }
        for r in rows {
            *seq = write_packet(out, *seq, r);
        }
        let st = 2 | if more { status::MORE_RESULTS_EXISTS } else { 0 };
        let end = if deprecate_eof {
            ok(st, 0xFE)
        } else {
            let mut e = Vec::new();
            EofPacket {
                warnings: 1,
                status: st,
            }
            .encode(&mut e);
            e
        };
        *seq = write_packet(out, *seq, &end);
    }

    /// Feeds `data` in `chunk`-sized arrivals the way a relay does (keeping unconsumed bytes
    /// on `NeedMore`) and returns the forwarded bytes and the captured state packets.
    fn relay_capturing(
        kind: ResponseKind,
        deprecate: bool,
        data: &[u8],
        chunk: usize,
    ) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut t = ResponseTracker::new(kind, deprecate, 1).capturing_session_state();
        let (mut buf, mut forwarded, mut captured) = (Vec::new(), Vec::new(), Vec::new());
        let mut arrived = 0;
        loop {
            let (n, p) = t.feed(&buf).unwrap();
            forwarded.extend_from_slice(&buf[..n]);
            if p == Progress::SessionState {
                captured.push(buf[n - t.state_packet_len()..n].to_vec());
            }
            buf.drain(..n);
            match p {
                Progress::Done => break,
                Progress::SessionState => continue,
                Progress::More if !buf.is_empty() => continue,
                _ => {}
            }
            assert!(
                arrived < data.len(),
                "tracker wants more than the answer ({p:?})"
            );
            let end = (arrived + chunk).min(data.len());
            buf.extend_from_slice(&data[arrived..end]);
            arrived = end;
        }
        assert!(buf.is_empty() && arrived == data.len());
        (forwarded, captured)
    }

    #[test]
    fn session_state_oks_are_reported_whole_in_any_chunking() {
        let tracked = |st: u16, header: u8| {
            let mut v = Vec::new();
            OkPacket {
                header,
                status: st | status::SESSION_STATE_CHANGED,
                info: b"info".to_vec(),
                session_state: vec![1, 5, 4, b't', b'e', b's', b't'],
                ..Default::default()
            }
            .encode(&mut v, crate::consts::caps::SESSION_TRACK);
            v
        };
        // Multi-results: a plain OK, a tracked OK with more results, a result set ending in a
        // tracked OK (DEPRECATE_EOF).
        let mut data = Vec::new();
        let mut seq = 1;
        seq = write_packet(&mut data, seq, &ok(status::MORE_RESULTS_EXISTS, 0));
        seq = write_packet(&mut data, seq, &tracked(status::MORE_RESULTS_EXISTS, 0));
        seq = write_packet(&mut data, seq, &[1]);
        let mut c = Vec::new();
        ColumnDefinition::new("a", crate::consts::column_type::VAR_STRING).encode(&mut c);
        seq = write_packet(&mut data, seq, &c);
        seq = write_packet(&mut data, seq, &[1, b'x']);
        write_packet(&mut data, seq, &tracked(2, 0xFE));
        for chunk in [1, 2, 3, 5, 7, 11, 64, 4096] {
            let (forwarded, captured) =
                relay_capturing(ResponseKind::ResultSets, true, &data, chunk);
            assert_eq!(forwarded, data, "chunk {chunk}");
            assert_eq!(captured.len(), 2, "chunk {chunk}");
            assert_eq!(captured[0][4], 0x00);
            assert_eq!(captured[1][4], 0xFE);
            assert!(data.ends_with(&captured[1]));
        }
        // Off by default: the same bytes pass without being reported.
        assert_eq!(
            run(ResponseKind::ResultSets, true, &data, 3).1,
            Progress::Done
        );
    }

    #[test]
    fn rows_of_the_last_result_set_are_counted() {
        let mut c = Vec::new();
        ColumnDefinition::new("a", crate::consts::column_type::VAR_STRING).encode(&mut c);
        // An OK with more results, then a result set of three rows (one split over two
        // packets, which counts once).
        let mut data = Vec::new();
        let mut seq = write_packet(&mut data, 1, &ok(status::MORE_RESULTS_EXISTS, 0));
        seq = write_packet(&mut data, seq, &[1]);
        seq = write_packet(&mut data, seq, &c);
        seq = write_packet(&mut data, seq, &[1, b'x']);
        let mut big = vec![0xFC, 0xFF, 0xFF, 0xFF];
        big.resize(MAX_PAYLOAD + 10, b'y');
        seq = write_packet(&mut data, seq, &big);
        seq = write_packet(&mut data, seq, &[0xFB]);
        write_packet(&mut data, seq, &ok(2, 0xFE));
        let mut t = ResponseTracker::new(ResponseKind::ResultSets, true, 1);
        let mut pos = 0;
        loop {
            let end = (pos + 4096).min(data.len());
            let (n, p) = t.feed(&data[pos..end]).unwrap();
            pos += n;
            if p == Progress::Done {
                break;
            }
        }
        assert_eq!(pos, data.len());
        assert!(t.last_was_result_set());
        assert_eq!(t.last_rows(), 3);
        // An OK alone is no result set.
        let mut data = Vec::new();
        write_packet(&mut data, 1, &ok(0, 0));
        let mut t = ResponseTracker::new(ResponseKind::ResultSets, true, 1);
        assert_eq!(t.feed(&data).unwrap().1, Progress::Done);
        assert!(!t.last_was_result_set());
    }

    fn run(kind: ResponseKind, deprecate: bool, data: &[u8], chunk: usize) -> (usize, Progress) {
        let mut t = ResponseTracker::new(kind, deprecate, 1);
        let mut pos = 0;
        while pos < data.len() {
            let end = (pos + chunk).min(data.len());
            let (n, p) = t.feed(&data[pos..end]).unwrap();
            pos += n;
            if p != Progress::More {
                return (pos, p);
            }
        }
        (pos, Progress::More)
    }

    fn multi_result(deprecate: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut seq = 1;
        let big_row = {
            let mut r = Vec::new();
            crate::codec::put_lenenc_bytes(&mut r, &vec![b'x'; MAX_PAYLOAD + 5]);
            crate::codec::put_lenenc_bytes(&mut r, b"y");
            r
        };
        let short_fe_row = {
            // A row whose first value is NULL-free and short cannot start with 0xFE; use a
            // normal row followed by the large one that does start with 0xFE.
            let mut r = Vec::new();
            crate::codec::put_lenenc_bytes(&mut r, b"1");
            crate::codec::put_lenenc_bytes(&mut r, b"2");
            r
        };
        result_set(
            &mut out,
            &mut seq,
            &[short_fe_row.clone(), big_row],
            deprecate,
            true,
        );
        seq = write_packet(&mut out, seq, &ok(2 | status::MORE_RESULTS_EXISTS, 0));
        result_set(&mut out, &mut seq, &[short_fe_row], deprecate, false);
        out
    }

    #[test]
    fn multi_results_end_exactly_at_the_last_packet() {
        for deprecate in [false, true] {
            let data = multi_result(deprecate);
            for chunk in [1, 3, 7, 4096, usize::MAX] {
                if chunk == 1 && data.len() > 100_000 {
                    continue;
                }
                let mut extra = data.clone();
                extra.extend_from_slice(b"next");
                let (n, p) = run(
                    ResponseKind::ResultSets,
                    deprecate,
                    &extra,
                    chunk.min(extra.len()),
                );
                assert_eq!(
                    (n, p),
                    (data.len(), Progress::Done),
                    "deprecate={deprecate} chunk={chunk}"
                );
            }
        }
    }

    #[test]
    fn error_mid_rows_ends_the_answer() {
        let mut out = Vec::new();
        let mut seq = 1;
        seq = write_packet(&mut out, seq, &[1]);
        let mut c = Vec::new();
        ColumnDefinition::new("a", 0xfd).encode(&mut c);
        seq = write_packet(&mut out, seq, &c);
        let mut e = Vec::new();
        EofPacket {
            warnings: 0,
            status: 0,
        }
        .encode(&mut e);
        seq = write_packet(&mut out, seq, &e);
        seq = write_packet(&mut out, seq, b"\x01a");
        let mut err = Vec::new();
        ErrPacket::new(crate::errors::codes::BACKEND_PROTOCOL, "killed").encode(&mut err);
        write_packet(&mut out, seq, &err);
        let mut t = ResponseTracker::new(ResponseKind::ResultSets, false, 1);
        assert_eq!(t.feed(&out).unwrap(), (out.len(), Progress::Done));
        assert!(t.saw_error());
    }

    #[test]
    fn local_infile_then_ok() {
        let mut out = Vec::new();
        write_packet(&mut out, 1, b"\xfb/tmp/file");
        let mut t = ResponseTracker::new(ResponseKind::ResultSets, false, 1);
        assert_eq!(t.feed(&out).unwrap(), (out.len(), Progress::LocalInfile));
        t.resume_after_infile(4);
        let mut ok_bytes = Vec::new();
        write_packet(&mut ok_bytes, 4, &ok(2, 0));
        assert_eq!(t.feed(&ok_bytes).unwrap(), (ok_bytes.len(), Progress::Done));
    }

    #[test]
    fn prepare_ok_with_params_and_columns() {
        for deprecate in [false, true] {
            let mut out = Vec::new();
            let mut seq = write_packet(&mut out, 1, &[0, 1, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0]);
            let mut c = Vec::new();
            ColumnDefinition::new("?", 0xfd).encode(&mut c);
            for _ in 0..3 {
                seq = write_packet(&mut out, seq, &c);
            }
            if !deprecate {
                seq = write_packet(&mut out, seq, &[0xFE, 0, 0, 2, 0]);
            }
            for _ in 0..2 {
                seq = write_packet(&mut out, seq, &c);
            }
            if !deprecate {
                write_packet(&mut out, seq, &[0xFE, 0, 0, 2, 0]);
            }
            assert_eq!(
                run(ResponseKind::Prepare, deprecate, &out, 5),
                (out.len(), Progress::Done)
            );
        }
    }

    #[test]
    fn wrong_sequence_is_an_error() {
        let mut out = Vec::new();
        write_packet(&mut out, 5, &ok(2, 0));
        let mut t = ResponseTracker::new(ResponseKind::Single, false, 1);
        assert!(matches!(
            t.feed(&out),
            Err(ProtoError::Sequence {
                expected: 1,
                got: 5
            })
        ));
    }

    #[test]
    fn cursor_open_ends_after_column_eof() {
        let mut out = Vec::new();
        let mut seq = write_packet(&mut out, 1, &[1]);
        let mut c = Vec::new();
        ColumnDefinition::new("a", 0xfd).encode(&mut c);
        seq = write_packet(&mut out, seq, &c);
        write_packet(
            &mut out,
            seq,
            &[0xFE, 0, 0, (status::CURSOR_EXISTS | 2) as u8, 0],
        );
        assert_eq!(
            run(ResponseKind::ResultSets, false, &out, 2),
            (out.len(), Progress::Done)
        );
    }

    proptest! {
        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200), kind in 0usize..6, dep in any::<bool>()) {
            let kinds = [ResponseKind::Single, ResponseKind::ResultSets, ResponseKind::Rows, ResponseKind::Prepare, ResponseKind::FieldList, ResponseKind::Raw];
            let mut t = ResponseTracker::new(kinds[kind], dep, b.first().copied().unwrap_or(0).wrapping_add(0));
            let _ = t.feed(&b);
        }
    }
}
