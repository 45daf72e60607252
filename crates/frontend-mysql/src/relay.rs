//! Forwarding one command to a backend and streaming the answer back.
//!
//! The command's packets go out exactly as the client sent them, and the answer's bytes go
//! back as read — one write to the client per read from the backend — while a
//! [`ResponseTracker`] watches packet boundaries to know where the answer ends. Sequence ids
//! need no rewriting because client and backend count from the same command packet.

use manifold_backend::{BackendConn, BackendError, ErrorKind, RetryType};
use manifold_io::{PacketIo, ReadError};
use std::borrow::Cow;

use manifold_engine::clock;

use manifold_mysql_proto::consts::{caps, status};
use manifold_mysql_proto::packet::HEADER_LEN;
use manifold_mysql_proto::packets::{ErrPacket, OkPacket};
use manifold_mysql_proto::{write_packet, Progress, ResponseKind, ResponseTracker};
use tokio::io::AsyncWriteExt;

#[derive(Debug, thiserror::Error)]
pub(crate) enum RelayError {
    /// The client went away; the backend connection's state is unknown.
    #[error("writing to client: {0}")]
    ClientWrite(std::io::Error),
    /// The client broke off or broke the protocol while sending a file's packets.
    #[error("reading LOCAL INFILE data: {0}")]
    ClientInfile(ReadError),
    /// The backend connection failed. The error says whether the command may go to another
    /// connection; while it may, the command is still at the front of the client's buffer.
    /// `err_seq` is where an ERR packet can still be injected cleanly, when the client stream
    /// is at a packet boundary.
    #[error("{error}")]
    Backend {
        error: BackendError,
        err_seq: Option<u8>,
    },
}

/// A backend failure under a relayed command, retried as `retry` says.
fn backend_failed(message: String, retry: RetryType, err_seq: Option<u8>) -> RelayError {
    let kind = ErrorKind::Lost;
    RelayError::Backend {
        error: BackendError::new(kind, message).with_retry(retry),
        err_seq,
    }
}

/// The backend's answer broke the protocol: nothing to retry, and the client stream may be in
/// the middle of a packet.
fn backend_broke_protocol(message: String) -> RelayError {
    RelayError::Backend {
        error: BackendError::new(ErrorKind::Protocol, message),
        err_seq: None,
    }
}

#[derive(Debug, Default)]
pub(crate) struct Relayed {
    pub last_status: u16,
    pub saw_error: bool,
    pub warnings: u16,
    pub affected_rows: u64,
    pub last_insert_id: u64,
    /// The last result was a result set (not an OK), of `rows` rows.
    pub result_set: bool,
    pub rows: u64,
    /// The ERR packet that ended the answer, when it came whole in the last read (an ERR
    /// packet is small): what `SHOW WARNINGS` lists when it cannot be asked.
    pub error: Option<ErrPacket>,
    /// When timing ([`clock`] ticks): the command written to the backend (unknown when
    /// another session wrote it), the answer's first and last bytes read, and its last byte
    /// written to the client.
    pub sent_at: Option<u64>,
    pub first_byte_at: Option<u64>,
    pub last_byte_at: Option<u64>,
    pub flushed_at: Option<u64>,
}

impl Relayed {
    /// The answer left something the next statement may ask the connection about: warnings,
    /// affected rows (`ROW_COUNT()`) or an insert id.
    pub fn leaves_info(&self) -> bool {
        self.warnings > 0 || self.affected_rows > 0 || self.last_insert_id != 0
    }
}

/// How the answer's session-state data is handled.
pub(crate) struct StateCapture<'a> {
    /// The session-state data of every OK packet in the answer, concatenated (the format is
    /// self-delimiting, so the whole decodes as one).
    pub data: &'a mut Vec<u8>,
    /// The client did not ask for `CLIENT_SESSION_TRACK`: OK packets reach it without the
    /// tracking data the backend connection reports.
    pub strip: bool,
}

/// A checksum of an answer as a backend sent it, for transaction replay: the bytes of every
/// packet, except that an OK packet carrying session-state data counts only its header and
/// its affected rows, insert id, status (less `SESSION_STATE_CHANGED`) and warnings: the
/// tracked GTIDs and variables may legitimately differ on another server. Streaming, so the
/// sum does not depend on how the answer was split over reads. CRC-32 (with the answer's
/// length), which runs at memory speed: a hash of every relayed byte is on the path of every
/// statement in a transaction.
#[derive(Debug, Default, Clone)]
pub(crate) struct AnswerChecksum {
    crc: crc32fast::Hasher,
    len: u64,
    /// The answer asked for a LOCAL INFILE file, which is not kept: it cannot run again.
    pub local_infile: bool,
}

impl AnswerChecksum {
    pub fn bytes(&mut self, b: &[u8]) {
        self.crc.update(b);
        self.len += b.len() as u64;
    }

    /// An OK packet with session-state data: `header` is its 4-byte packet header.
    pub fn state_ok(&mut self, header: &[u8], ok: &OkPacket) {
        self.bytes(header);
        let mut fields = [0u8; 21];
        fields[0] = ok.header;
        fields[1..9].copy_from_slice(&ok.affected_rows.to_le_bytes());
        fields[9..17].copy_from_slice(&ok.last_insert_id.to_le_bytes());
        let status = ok.status & !status::SESSION_STATE_CHANGED;
        fields[17..19].copy_from_slice(&status.to_le_bytes());
        fields[19..21].copy_from_slice(&ok.warnings.to_le_bytes());
        self.bytes(&fields);
    }

    pub fn finish(&self) -> u64 {
        (u64::from(self.crc.clone().finalize()) << 32) | (self.len & 0xffff_ffff)
    }
}

/// What goes to the backend for the command at the front of the client's buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outgoing<'a> {
    /// The client's bytes as they are.
    Client,
    /// These bytes instead: the command as manifold changed it, maybe with other
    /// sessions' commands behind it (pipelining).
    Bytes(&'a [u8]),
    /// Already written (behind another session's command).
    Sent,
}

/// Sends the command occupying the first `raw_len` bytes of `client.rbuf` to `backend` (as
/// `outgoing` says) and relays the answer. `first_seq` is the sequence id of the answer's
/// first packet. The command is consumed from `client.rbuf` once the answer starts. With
/// `timed`, the answer says when each step happened.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn forward(
    client: &mut PacketIo,
    backend: &mut BackendConn,
    raw_len: usize,
    outgoing: Outgoing<'_>,
    kind: ResponseKind,
    deprecate_eof: bool,
    first_seq: u8,
    max_packet: usize,
    state: StateCapture<'_>,
    timed: bool,
    mut checksum: Option<&mut AnswerChecksum>,
) -> Result<Relayed, RelayError> {
    let now = || timed.then(clock::now);
    // The command stays in the client's buffer until the answer starts: a pooled connection
    // the server closed while it sat idle fails here, and the command can go elsewhere.
    let command = match outgoing {
        Outgoing::Client => Some(&client.rbuf[..raw_len]),
        Outgoing::Bytes(b) => Some(b),
        Outgoing::Sent => None,
    };
    if let Some(command) = command {
        if let Err(e) = backend.io.stream.write_all(command).await {
            // Nothing ran: the connection may have been closed by its server while pooled.
            let message = format!("sending to backend: {e}");
            return Err(backend_failed(
                message,
                RetryType::ReusedOnly,
                Some(first_seq),
            ));
        }
    }
    let sent_at = if command.is_some() { now() } else { None };
    let mut first_byte_at = None;
    let mut last_read_at = None;
    let mut command_pending = true;
    let mut tracker = ResponseTracker::new(kind, deprecate_eof, first_seq);
    if backend.tracking {
        tracker = tracker.capturing_session_state();
    }
    if kind == ResponseKind::None {
        client.consume(raw_len);
        return Ok(Relayed::default());
    }
    let mut need_more = false;
    let mut error = None;
    // After a SessionState the tracker may have the end of the answer still to report.
    let mut report_pending = false;
    loop {
        if (backend.io.rbuf.is_empty() && !report_pending) || need_more {
            need_more = false;
            if let Err(e) = backend.io.fill().await {
                // A reset (not an orderly close) before any answer means the server no longer
                // had the connection when the command arrived: it never ran. A close may come
                // after the server read (and ran) it.
                // No byte of an answer reached the client while the command is pending.
                let never_ran = command_pending
                    && matches!(&e, ReadError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionReset);
                let retry = if never_ran {
                    RetryType::ReusedOnly
                } else if command_pending {
                    RetryType::Idempotent
                } else {
                    RetryType::Decided(false)
                };
                let message = match e {
                    ReadError::Closed => {
                        "backend closed the connection during the query".to_owned()
                    }
                    e => format!("reading from backend: {e}"),
                };
                let err_seq = tracker.at_boundary().then(|| tracker.next_seq());
                return Err(backend_failed(message, retry, err_seq));
            }
            last_read_at = now();
        }
        if command_pending {
            client.consume(raw_len);
            command_pending = false;
            first_byte_at = last_read_at;
        }
        let (n, progress) = tracker.feed(&backend.io.rbuf).map_err(|e| {
            backend_broke_protocol(format!("backend answer does not follow the protocol: {e}"))
        })?;
        if progress == Progress::SessionState {
            let start = n - tracker.state_packet_len();
            let packet = &backend.io.rbuf[start..n];
            let mut ok =
                OkPacket::decode(&packet[HEADER_LEN..], caps::SESSION_TRACK).map_err(|e| {
                    backend_broke_protocol(format!("backend sent a malformed OK packet: {e}"))
                })?;
            state.data.extend_from_slice(&ok.session_state);
            if let Some(sum) = checksum.as_deref_mut() {
                sum.bytes(&backend.io.rbuf[..start]);
                sum.state_ok(&packet[..HEADER_LEN], &ok);
            }
            let out = if state.strip {
                ok.status &= !status::SESSION_STATE_CHANGED;
                ok.session_state.clear();
                let mut out = Vec::with_capacity(start + 32);
                out.extend_from_slice(&backend.io.rbuf[..start]);
                let mut payload = Vec::with_capacity(32);
                ok.encode(&mut payload, 0);
                write_packet(&mut out, packet[3], &payload);
                Cow::Owned(out)
            } else {
                Cow::Borrowed(&backend.io.rbuf[..n])
            };
            client
                .stream
                .write_all(&out)
                .await
                .map_err(RelayError::ClientWrite)?;
            backend.io.consume(n);
            report_pending = true;
            continue;
        }
        report_pending = false;
        if progress == Progress::Done && tracker.saw_error() {
            let len = tracker.last_packet_len();
            error = n
                .checked_sub(len)
                .and_then(|start| ErrPacket::decode(&backend.io.rbuf[start + HEADER_LEN..n]).ok());
        }
        if n > 0 {
            if let Some(sum) = checksum.as_deref_mut() {
                sum.bytes(&backend.io.rbuf[..n]);
            }
            client
                .stream
                .write_all(&backend.io.rbuf[..n])
                .await
                .map_err(RelayError::ClientWrite)?;
            backend.io.consume(n);
        }
        match progress {
            Progress::More | Progress::SessionState => {}
            Progress::NeedMore => need_more = true,
            Progress::Done => break,
            Progress::LocalInfile => {
                if let Some(sum) = checksum.as_deref_mut() {
                    sum.local_infile = true;
                }
                client
                    .stream
                    .flush()
                    .await
                    .map_err(RelayError::ClientWrite)?;
                let next = relay_infile(client, backend, max_packet).await?;
                tracker.resume_after_infile(next);
            }
        }
    }
    // The answer's last byte was read before the write that just relayed it.
    let last_byte_at = last_read_at;
    client
        .stream
        .flush()
        .await
        .map_err(RelayError::ClientWrite)?;
    let flushed_at = now();
    // Other sessions' answers may follow this one when their commands rode behind it.
    if !backend.io.rbuf.is_empty() && !backend.has_followers() {
        return Err(backend_broke_protocol(
            "backend sent bytes past the end of its answer".into(),
        ));
    }
    Ok(Relayed {
        last_status: tracker.last_status(),
        saw_error: tracker.saw_error(),
        warnings: tracker.last_warnings(),
        affected_rows: tracker.last_affected_rows(),
        last_insert_id: tracker.last_insert_id(),
        result_set: tracker.last_was_result_set(),
        rows: tracker.last_rows(),
        error,
        sent_at,
        first_byte_at,
        last_byte_at,
        flushed_at,
    })
}

/// `LOAD DATA LOCAL INFILE`: the client's file packets go to the backend up to the empty packet
/// that ends them. Returns the sequence id the server's answer starts with.
async fn relay_infile(
    client: &mut PacketIo,
    backend: &mut BackendConn,
    max_packet: usize,
) -> Result<u8, RelayError> {
    loop {
        let p = client
            .read_packet(max_packet)
            .await
            .map_err(RelayError::ClientInfile)?;
        let sent = backend.io.stream.write_all(&client.rbuf[..p.raw_len]).await;
        client.consume(p.raw_len);
        sent.map_err(|e| {
            let message = format!("sending LOCAL INFILE data to backend: {e}");
            backend_failed(message, RetryType::Decided(false), None)
        })?;
        if p.payload_len == 0 {
            return Ok(p.last_seq.wrapping_add(1));
        }
    }
}
