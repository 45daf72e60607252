//! Packet framing: 3-byte length + 1-byte sequence id + payload. Payloads of 16 MiB − 1 and
//! more are split into several packets (a full packet is followed by the next piece, and a
//! payload whose length is an exact multiple of 16 MiB − 1 ends with an empty packet).
//!
//! Scanning is "check, then split" (as in mini-redis): [`scan_logical`] only looks at headers
//! and reports how many bytes make one logical packet, so a partial packet costs nothing and
//! the bytes can be forwarded untouched.

use std::borrow::Cow;

use crate::consts::MAX_PAYLOAD;
use crate::errors::ProtoError;

pub const HEADER_LEN: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: usize,
    pub seq: u8,
}

impl Header {
    pub fn parse(b: &[u8]) -> Option<Header> {
        if b.len() < HEADER_LEN {
            return None;
        }
        Some(Header {
            len: usize::from(b[0]) | usize::from(b[1]) << 8 | usize::from(b[2]) << 16,
            seq: b[3],
        })
    }

    pub fn encode(self) -> [u8; 4] {
        [
            self.len as u8,
            (self.len >> 8) as u8,
            (self.len >> 16) as u8,
            self.seq,
        ]
    }
}

/// Where one logical packet (possibly split over several physical ones) lies in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogicalPacket {
    /// Bytes of the buffer the logical packet occupies, headers included.
    pub raw_len: usize,
    /// Payload bytes once joined.
    pub payload_len: usize,
    /// Number of physical packets.
    pub frames: usize,
    pub first_seq: u8,
    pub last_seq: u8,
}

impl LogicalPacket {
    /// The joined payload. Borrowed when the packet was not split (the common case).
    pub fn payload<'a>(&self, raw: &'a [u8]) -> Cow<'a, [u8]> {
        if self.frames == 1 {
            return Cow::Borrowed(&raw[HEADER_LEN..self.raw_len]);
        }
        let mut out = Vec::with_capacity(self.payload_len);
        let mut pos = 0;
        while pos < self.raw_len {
            let h = Header::parse(&raw[pos..]).expect("scanned header");
            out.extend_from_slice(&raw[pos + HEADER_LEN..pos + HEADER_LEN + h.len]);
            pos += HEADER_LEN + h.len;
        }
        Cow::Owned(out)
    }
}

/// Finds the first complete logical packet in `buf`. `Ok(None)` means more bytes are needed.
/// Sequence ids must increase by one (wrapping) from frame to frame; `max_payload` bounds the
/// joined size so a peer cannot make us buffer without limit.
pub fn scan_logical(buf: &[u8], max_payload: usize) -> Result<Option<LogicalPacket>, ProtoError> {
    let mut pos = 0;
    let mut payload_len = 0usize;
    let mut frames = 0usize;
    let mut first_seq = 0u8;
    let mut last_seq = 0u8;
    loop {
        let Some(h) = Header::parse(&buf[pos..]) else {
            return Ok(None);
        };
        if frames == 0 {
            first_seq = h.seq;
        } else if h.seq != last_seq.wrapping_add(1) {
            return Err(ProtoError::Sequence {
                expected: last_seq.wrapping_add(1),
                got: h.seq,
            });
        }
        last_seq = h.seq;
        payload_len += h.len;
        frames += 1;
        if payload_len > max_payload {
            return Err(ProtoError::TooLarge {
                size: payload_len,
                limit: max_payload,
            });
        }
        if buf.len() < pos + HEADER_LEN + h.len {
            return Ok(None);
        }
        pos += HEADER_LEN + h.len;
        if h.len < MAX_PAYLOAD {
            return Ok(Some(LogicalPacket {
                raw_len: pos,
                payload_len,
                frames,
                first_seq,
                last_seq,
            }));
        }
    }
}

/// Appends `payload` as one logical packet starting at sequence id `seq`, splitting it as
/// the protocol requires. Returns the sequence id the next packet must use.
pub fn write_packet(out: &mut Vec<u8>, mut seq: u8, payload: &[u8]) -> u8 {
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_PAYLOAD);
        out.extend_from_slice(&Header { len: n, seq }.encode());
        out.extend_from_slice(&rest[..n]);
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_PAYLOAD {
            return seq;
        }
    }
}

/// Gives the whole packets in `buf` consecutive sequence ids from `first_seq`, for an answer
/// obtained under one command and relayed under another.
pub fn renumber(buf: &mut [u8], first_seq: u8) {
    let mut seq = first_seq;
    let mut at = 0;
    while let Some(h) = buf.get(at..).and_then(Header::parse) {
        buf[at + 3] = seq;
        seq = seq.wrapping_add(1);
        at += HEADER_LEN + h.len;
    }
}

/// Builds a packet in place: reserve the header, let the caller append the payload, then fix
/// the header up. Saves the copy `write_packet` would make for packets built field by field.
#[derive(Debug)]
pub struct PacketBuilder {
    start: usize,
}

impl PacketBuilder {
    pub fn begin(out: &mut Vec<u8>) -> Self {
        let start = out.len();
        out.extend_from_slice(&[0; HEADER_LEN]);
        Self { start }
    }

    /// Writes the header; splits the payload if it turned out 16 MiB or larger.
    pub fn finish(self, out: &mut Vec<u8>, seq: u8) -> u8 {
        let len = out.len() - self.start - HEADER_LEN;
        if len < MAX_PAYLOAD {
            out[self.start..self.start + HEADER_LEN].copy_from_slice(&Header { len, seq }.encode());
            return seq.wrapping_add(1);
        }
        let payload = out.split_off(self.start + HEADER_LEN);
        out.truncate(self.start);
        write_packet(out, seq, &payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_multiple_of_max_payload_ends_with_empty_packet() {
        let payload = vec![7u8; MAX_PAYLOAD];
        let mut out = Vec::new();
        let next = write_packet(&mut out, 3, &payload);
        assert_eq!(next, 5);
        assert_eq!(out.len(), MAX_PAYLOAD + 2 * HEADER_LEN);
        let lp = scan_logical(&out, usize::MAX).unwrap().unwrap();
        assert_eq!(lp.frames, 2);
        assert_eq!(lp.payload_len, MAX_PAYLOAD);
        assert_eq!(lp.payload(&out).len(), MAX_PAYLOAD);
    }

    #[test]
    fn large_payload_splits_and_joins() {
        let payload: Vec<u8> = (0..(2 * MAX_PAYLOAD + 10)).map(|i| i as u8).collect();
        let mut out = Vec::new();
        assert_eq!(write_packet(&mut out, 0, &payload), 3);
        let lp = scan_logical(&out, usize::MAX).unwrap().unwrap();
        assert_eq!((lp.frames, lp.first_seq, lp.last_seq), (3, 0, 2));
        assert_eq!(lp.payload(&out).as_ref(), &payload[..]);
        // Partial input asks for more instead of failing.
        assert_eq!(
            scan_logical(&out[..out.len() - 1], usize::MAX).unwrap(),
            None
        );
        // And the size limit is enforced before the whole payload has arrived.
        assert!(matches!(
            scan_logical(&out[..MAX_PAYLOAD], MAX_PAYLOAD - 1),
            Err(ProtoError::TooLarge { .. })
        ));
    }

    #[test]
    fn wrong_sequence_between_frames_is_rejected() {
        let mut out = Vec::new();
        let payload = vec![1u8; MAX_PAYLOAD + 1];
        write_packet(&mut out, 0, &payload);
        out[HEADER_LEN + MAX_PAYLOAD + 3] = 9;
        assert_eq!(
            scan_logical(&out, usize::MAX),
            Err(ProtoError::Sequence {
                expected: 1,
                got: 9
            })
        );
    }

    #[test]
    fn builder_matches_write_packet() {
        let mut a = Vec::new();
        let b0 = PacketBuilder::begin(&mut a);
        a.extend_from_slice(b"hello");
        assert_eq!(b0.finish(&mut a, 4), 5);
        let mut b = Vec::new();
        write_packet(&mut b, 4, b"hello");
        assert_eq!(a, b);
    }

    proptest! {
        #[test]
        fn small_packets_round_trip(payload in proptest::collection::vec(any::<u8>(), 0..2000), seq in any::<u8>()) {
            let mut out = Vec::new();
            let next = write_packet(&mut out, seq, &payload);
            prop_assert_eq!(next, seq.wrapping_add(1));
            let lp = scan_logical(&out, usize::MAX).unwrap().unwrap();
            prop_assert_eq!(lp.raw_len, out.len());
            let joined = lp.payload(&out);
            prop_assert_eq!(joined.as_ref(), &payload[..]);
        }

        #[test]
        fn scanning_garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64), max in 0usize..100) {
            let _ = scan_logical(&b, max);
        }
    }
}
