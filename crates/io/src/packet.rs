//! MySQL packet framing over a [`Stream`]: a buffered reader that hands out whole logical
//! packets as ranges of one reusable buffer, and a write buffer flushed in one write.

use std::io;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use manifold_mysql_proto::{scan_logical, LogicalPacket, ProtoError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::stream::Stream;

/// Why reading a packet failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("connection closed by peer")]
    Closed,
    #[error("timed out")]
    Timeout,
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Proto(#[from] ProtoError),
}

fn cut_short() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "connection closed in the middle of a packet",
    )
}

const READ_CHUNK: usize = 64 * 1024;

/// Buffered packet I/O. Reads land in one reusable buffer; a packet is handed out as a range
/// of that buffer and dropped with [`PacketIo::consume`], so steady-state traffic allocates
/// nothing.
pub struct PacketIo {
    pub stream: Stream,
    pub rbuf: BytesMut,
    pub wbuf: Vec<u8>,
}

impl PacketIo {
    pub fn new(stream: Stream) -> Self {
        Self {
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: Vec::with_capacity(4096),
        }
    }

    /// Reads whatever is available (at least one byte). `Closed` on EOF.
    pub async fn fill(&mut self) -> Result<usize, ReadError> {
        if self.rbuf.capacity() - self.rbuf.len() < 1024 {
            self.rbuf.reserve(READ_CHUNK);
        }
        let n = self.stream.read_buf(&mut self.rbuf).await?;
        if n == 0 {
            return Err(ReadError::Closed);
        }
        Ok(n)
    }

    /// Waits until a whole logical packet sits at the front of `rbuf`.
    pub async fn read_packet(&mut self, max_payload: usize) -> Result<LogicalPacket, ReadError> {
        loop {
            if let Some(p) = scan_logical(&self.rbuf, max_payload)? {
                return Ok(p);
            }
            self.fill().await?;
        }
    }

    /// As [`PacketIo::read_packet`], noting in `first_byte` (when `clock` and not already
    /// set) when the first bytes of the packet arrived ([`manifold_engine::clock`] ticks),
    /// for timing how long a command takes to come in. A packet already buffered leaves it
    /// unset.
    pub async fn read_packet_timed(
        &mut self,
        max_payload: usize,
        clock: bool,
        first_byte: &mut Option<u64>,
    ) -> Result<LogicalPacket, ReadError> {
        loop {
            if let Some(p) = scan_logical(&self.rbuf, max_payload)? {
                return Ok(p);
            }
            self.fill().await?;
            if clock && first_byte.is_none() {
                *first_byte = Some(manifold_engine::clock::now());
            }
        }
    }

    /// Reads one packet without reading a byte past it, for the packet before a TLS upgrade:
    /// a client may send its TLS ClientHello right behind its SSL request, and those bytes
    /// belong to the TLS layer. Only for single-frame packets (login packets are small).
    pub async fn read_packet_exact(
        &mut self,
        max_payload: usize,
    ) -> Result<LogicalPacket, ReadError> {
        debug_assert!(self.rbuf.is_empty());
        let mut header = [0u8; 4];
        let mut got = 0;
        while got < header.len() {
            match self.stream.read(&mut header[got..]).await? {
                0 if got == 0 => return Err(ReadError::Closed),
                0 => return Err(ReadError::Io(cut_short())),
                n => got += n,
            }
        }
        let h = manifold_mysql_proto::Header::parse(&header).expect("four bytes");
        if h.len > max_payload || h.len >= manifold_mysql_proto::consts::MAX_PAYLOAD {
            return Err(ReadError::Proto(ProtoError::TooLarge {
                size: h.len,
                limit: max_payload,
            }));
        }
        self.rbuf.extend_from_slice(&header);
        let start = self.rbuf.len();
        self.rbuf.resize(start + h.len, 0);
        self.stream
            .read_exact(&mut self.rbuf[start..])
            .await
            .map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    ReadError::Io(cut_short())
                } else {
                    ReadError::Io(e)
                }
            })?;
        Ok(LogicalPacket {
            raw_len: 4 + h.len,
            payload_len: h.len,
            frames: 1,
            first_seq: h.seq,
            last_seq: h.seq,
        })
    }

    /// Reads one packet and hands out a copy of its payload with the sequence id that answers
    /// it, for the small packets of logins and manifold's own commands.
    pub async fn read_owned(&mut self, max_payload: usize) -> Result<(Vec<u8>, u8), ReadError> {
        let p = self.read_packet(max_payload).await?;
        let payload = self.payload(&p).into_owned();
        self.consume(p.raw_len);
        Ok((payload, p.last_seq.wrapping_add(1)))
    }

    /// Like [`PacketIo::read_packet`] with a deadline.
    pub async fn read_packet_timeout(
        &mut self,
        max_payload: usize,
        timeout: Duration,
    ) -> Result<LogicalPacket, ReadError> {
        match tokio::time::timeout(timeout, self.read_packet(max_payload)).await {
            Ok(r) => r,
            Err(_) => Err(ReadError::Timeout),
        }
    }

    /// Like [`PacketIo::read_packet`], failing with `Timeout` only when no byte arrives for
    /// `idle`: a peer that goes silent is caught, a large packet that keeps arriving is not
    /// (however long it takes as a whole). Cancel-safe: what was read stays buffered.
    pub async fn read_packet_idle(
        &mut self,
        max_payload: usize,
        idle: Duration,
    ) -> Result<LogicalPacket, ReadError> {
        loop {
            if let Some(p) = scan_logical(&self.rbuf, max_payload)? {
                return Ok(p);
            }
            match tokio::time::timeout(idle, self.fill()).await {
                Ok(filled) => {
                    filled?;
                }
                Err(_) => return Err(ReadError::Timeout),
            }
        }
    }

    /// The joined payload of the packet at the front of the buffer.
    pub fn payload(&self, p: &LogicalPacket) -> std::borrow::Cow<'_, [u8]> {
        p.payload(&self.rbuf)
    }

    pub fn consume(&mut self, n: usize) {
        self.rbuf.advance(n);
    }

    /// Queues a packet for [`PacketIo::flush`]; returns the next sequence id.
    pub fn queue(&mut self, seq: u8, payload: &[u8]) -> u8 {
        manifold_mysql_proto::write_packet(&mut self.wbuf, seq, payload)
    }

    pub async fn flush(&mut self) -> io::Result<()> {
        if !self.wbuf.is_empty() {
            self.stream.write_all(&self.wbuf).await?;
            self.wbuf.clear();
        }
        self.stream.flush().await
    }

    pub async fn send(&mut self, seq: u8, payload: &[u8]) -> io::Result<u8> {
        let next = self.queue(seq, payload);
        self.flush().await?;
        Ok(next)
    }

    /// Takes the stream out for a TLS upgrade. Bytes already buffered would be lost, which is
    /// why callers check `rbuf` is empty: a client must not pipeline past the SSL request.
    pub fn into_stream(self) -> Stream {
        self.stream
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    /// A connected pair: the reading side framed, the writing side raw.
    async fn pair() -> (PacketIo, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (
            PacketIo::new(Stream::Tcp(client.unwrap())),
            accepted.unwrap().0,
        )
    }

    fn packet(len: usize) -> Vec<u8> {
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut out = Vec::new();
        manifold_mysql_proto::write_packet(&mut out, 3, &payload);
        out
    }

    #[tokio::test]
    async fn a_packet_arriving_slowly_is_read_and_a_silent_peer_is_not_waited_for() {
        let (mut io, mut peer) = pair().await;
        let idle = Duration::from_millis(500);
        let bytes = packet(64 * 1024);
        // The whole packet takes longer than `idle`; no gap between its pieces does.
        let sender = tokio::spawn(async move {
            for chunk in bytes.chunks(bytes.len() / 40 + 1) {
                peer.write_all(chunk).await.unwrap();
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            // Half a packet, then silence with the connection open.
            peer.write_all(&packet(100)[..50]).await.unwrap();
            peer
        });
        let p = io.read_packet_idle(1 << 20, idle).await.unwrap();
        assert_eq!(p.payload_len, 64 * 1024);
        assert_eq!(io.payload(&p)[1000], (1000 % 256) as u8);
        io.consume(p.raw_len);
        let _peer = sender.await.unwrap();
        assert!(matches!(
            io.read_packet_idle(1 << 20, idle).await,
            Err(ReadError::Timeout)
        ));
    }
}
