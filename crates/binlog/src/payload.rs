//! MySQL's compressed transactions: with `binlog_transaction_compression=ON` a transaction
//! is its GTID event and one `TRANSACTION_PAYLOAD` event (40) holding all its other events,
//! zstd-compressed. Layout (MySQL `libs/mysql/binlog/event/codecs/binary.cpp`,
//! `Transaction_payload::decode`): after the 19-byte header, fields of `type`, `length`,
//! `value`, each a length-encoded integer, up to an end mark (type 0), then the payload.
//!
//! The inner events are read one at a time while decompressing (a payload may be hundreds
//! of MiB once decompressed). They are written without checksums (the server writes them
//! with the binlog cache's checksum off and checks the payload event's own); [`PayloadEvents`]
//! gives them back with their CRC32 added, as every event manifold keeps has one.

use std::io::Read;

use ruzstd::decoding::{FrameDecoder, StreamingDecoder};

use crate::event::{self, mysql::packed_int, types, CHECKSUM_LEN, HEADER_LEN};

/// `OTW_PAYLOAD_HEADER_END_MARK`, `OTW_PAYLOAD_SIZE_FIELD`, ...
const FIELD_END: u64 = 0;
const FIELD_PAYLOAD_SIZE: u64 = 1;
const FIELD_COMPRESSION_TYPE: u64 = 2;
const FIELD_UNCOMPRESSED_SIZE: u64 = 3;

/// The most a payload may hold once decompressed: the global binlog cannot carry a
/// transaction that does not fit below 4 GiB (its files' 32-bit positions) anyway, and a
/// bound keeps a corrupt or hostile size from filling the spill directory.
pub const MAX_UNCOMPRESSED_SIZE: u64 = 4 << 30;

/// How a payload is compressed (`mysql::binlog::event::compression::type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// 0: one or more zstd frames.
    Zstd,
    /// 255: the events as they are.
    None,
}

/// What a payload event's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadHeader {
    /// Bytes of the payload after the header.
    pub payload_size: u64,
    pub compression: Compression,
    /// Bytes of the events once decompressed, when given (MySQL gives it for zstd).
    pub uncompressed_size: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("MySQL transaction payload event is malformed: {0}")]
    Malformed(&'static str),
    #[error("MySQL transaction payload uses compression type {0} (manifold reads zstd (0) and none (255))")]
    Compression(u64),
    #[error("MySQL transaction payload of {0} bytes decompressed is larger than manifold takes ({MAX_UNCOMPRESSED_SIZE})")]
    TooLarge(u64),
    #[error("MySQL transaction payload does not decompress: {0}")]
    Decompress(String),
    #[error("MySQL transaction payload holds a malformed event: {0}")]
    Inner(&'static str),
}

/// The header of a payload event (header to checksum, checksum verified) and its payload.
pub fn parse(event: &[u8]) -> Result<(PayloadHeader, &[u8]), PayloadError> {
    let body = event
        .get(HEADER_LEN..event.len().saturating_sub(CHECKSUM_LEN))
        .ok_or(PayloadError::Malformed("shorter than its header"))?;
    let mut cursor = Cursor { bytes: body, at: 0 };
    let (mut payload_size, mut compression, mut uncompressed_size) = (None, None, None);
    loop {
        let field = cursor.packed("header field runs past the event")?;
        if field == FIELD_END {
            break;
        }
        let length = cursor.packed("header field runs past the event")?;
        // Known fields hold one length-encoded integer, whatever their length says (as
        // MySQL reads them); unknown ones are skipped by their length.
        match field {
            FIELD_PAYLOAD_SIZE => payload_size = Some(cursor.packed("payload size")?),
            FIELD_COMPRESSION_TYPE => compression = Some(cursor.packed("compression type")?),
            FIELD_UNCOMPRESSED_SIZE => {
                uncompressed_size = Some(cursor.packed("uncompressed size")?);
            }
            _ => cursor.skip(length)?,
        }
    }
    let payload_size = payload_size.ok_or(PayloadError::Malformed("no payload size"))?;
    let compression = match compression.ok_or(PayloadError::Malformed("no compression type"))? {
        0 => Compression::Zstd,
        255 => Compression::None,
        other => return Err(PayloadError::Compression(other)),
    };
    let rest = &body[cursor.at..];
    let payload = usize::try_from(payload_size)
        .ok()
        .and_then(|n| rest.get(..n))
        .ok_or(PayloadError::Malformed("payload size past the event's end"))?;
    if payload.len() != rest.len() {
        return Err(PayloadError::Malformed("bytes after the payload"));
    }
    let header = PayloadHeader {
        payload_size,
        compression,
        uncompressed_size,
    };
    Ok((header, payload))
}

/// Reads the header's fields.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn packed(&mut self, what: &'static str) -> Result<u64, PayloadError> {
        let (v, used) = packed_int(self.bytes.get(self.at..).unwrap_or_default())
            .ok_or(PayloadError::Malformed(what))?;
        self.at += used;
        Ok(v)
    }

    fn skip(&mut self, length: u64) -> Result<(), PayloadError> {
        self.at = usize::try_from(length)
            .ok()
            .and_then(|n| self.at.checked_add(n))
            .filter(|&end| end <= self.bytes.len())
            .ok_or(PayloadError::Malformed("header field runs past the event"))?;
        Ok(())
    }
}

/// The events of one payload, decompressed as they are read.
pub struct PayloadEvents<'a> {
    header: PayloadHeader,
    source: Source<'a>,
    /// Decompressed bytes still allowed: the header's uncompressed size, or the bound.
    left: u64,
    /// The header gave the uncompressed size: the events must fill it exactly.
    exact: bool,
}

impl std::fmt::Debug for PayloadEvents<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadEvents")
            .field("header", &self.header)
            .field("left", &self.left)
            .finish_non_exhaustive()
    }
}

impl<'a> PayloadEvents<'a> {
    /// Reads the header of a payload event (header to checksum, checksum verified).
    pub fn new(event: &'a [u8]) -> Result<PayloadEvents<'a>, PayloadError> {
        let (header, payload) = parse(event)?;
        let (left, exact, source) = match header.compression {
            Compression::None => (payload.len() as u64, true, Source::Plain(payload)),
            Compression::Zstd => {
                let frames = ZstdFrames {
                    rest: payload,
                    frame: None,
                    idle: Some(FrameDecoder::new()),
                };
                match header.uncompressed_size {
                    Some(size) => (size, true, Source::Zstd(Box::new(frames))),
                    None => (MAX_UNCOMPRESSED_SIZE, false, Source::Zstd(Box::new(frames))),
                }
            }
        };
        if left > MAX_UNCOMPRESSED_SIZE {
            return Err(PayloadError::TooLarge(left));
        }
        Ok(PayloadEvents {
            header,
            source,
            left,
            exact,
        })
    }

    pub fn header(&self) -> PayloadHeader {
        self.header
    }

    /// Puts the next event in `buf`, whole, with its CRC32 computed; `false` once there are
    /// no more.
    pub fn next_event(&mut self, buf: &mut Vec<u8>) -> Result<bool, PayloadError> {
        buf.clear();
        let read = (&mut self.source)
            .take(HEADER_LEN as u64)
            .read_to_end(buf)
            .map_err(decompress)?;
        if read == 0 {
            if self.exact && self.left != 0 {
                return Err(PayloadError::Inner(
                    "the events end short of the uncompressed size the header gives",
                ));
            }
            return Ok(false);
        }
        if read < HEADER_LEN {
            return Err(PayloadError::Inner("an event header cut short"));
        }
        let header = event::Header::parse(buf).map_err(|_| PayloadError::Inner("header"))?;
        let size = u64::from(header.event_size);
        if size < HEADER_LEN as u64 {
            return Err(PayloadError::Inner("an event size smaller than its header"));
        }
        if size > self.left {
            return Err(PayloadError::Inner(
                "an event runs past the uncompressed size the header gives",
            ));
        }
        if size + CHECKSUM_LEN as u64 > u64::from(u32::MAX) {
            return Err(PayloadError::Inner("an event of 4 GiB or more"));
        }
        // Grows as the bytes come, so that a size no payload backs allocates nothing.
        let rest = size - HEADER_LEN as u64;
        let read = (&mut self.source)
            .take(rest)
            .read_to_end(buf)
            .map_err(decompress)?;
        if read as u64 != rest {
            return Err(PayloadError::Inner("an event cut short"));
        }
        self.left -= size;
        if header.type_code == types::FORMAT_DESCRIPTION {
            return Err(PayloadError::Inner("a format description inside a payload"));
        }
        buf.extend_from_slice(&[0; CHECKSUM_LEN]);
        event::finish(buf, None, header.log_pos);
        Ok(true)
    }
}

#[allow(clippy::needless_pass_by_value)] // used as `map_err(decompress)`
fn decompress(e: std::io::Error) -> PayloadError {
    PayloadError::Decompress(e.to_string())
}

enum Source<'a> {
    Plain(&'a [u8]),
    Zstd(Box<ZstdFrames<'a>>),
}

impl Read for Source<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Source::Plain(bytes) => bytes.read(buf),
            Source::Zstd(frames) => frames.read(buf),
        }
    }
}

/// zstd frames one after another (MySQL writes one per payload; the format allows more).
struct ZstdFrames<'a> {
    /// The compressed bytes after the frame being decoded.
    rest: &'a [u8],
    frame: Option<StreamingDecoder<&'a [u8], FrameDecoder>>,
    /// The decoder between frames (its buffers are kept).
    idle: Option<FrameDecoder>,
}

impl Read for ZstdFrames<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if let Some(frame) = self.frame.as_mut() {
                let n = frame.read(buf)?;
                if n > 0 {
                    return Ok(n);
                }
                let Some(frame) = self.frame.take() else {
                    return Ok(0);
                };
                let (rest, decoder) = frame.into_parts();
                if let (Some(stored), Some(computed)) = (
                    decoder.get_checksum_from_data(),
                    decoder.get_calculated_checksum(),
                ) {
                    if stored != computed {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            "a zstd frame's checksum does not match its content",
                        ));
                    }
                }
                self.rest = rest;
                self.idle = Some(decoder);
            }
            if self.rest.is_empty() {
                return Ok(0);
            }
            let decoder = self.idle.take().unwrap_or_default();
            let frame = StreamingDecoder::new_with_decoder(self.rest, decoder)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            self.frame = Some(frame);
        }
    }
}
