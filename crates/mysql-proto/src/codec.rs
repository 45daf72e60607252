//! Primitive wire encodings: little-endian integers, length-encoded integers and strings,
//! NUL-terminated strings. Readers work on a byte slice cursor and never panic on short input.

use crate::errors::ProtoError;

/// A cursor over a packet payload. Every read checks bounds and returns
/// [`ProtoError::Truncated`] instead of panicking, because payloads come from the network.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        if self.remaining() < n {
            return Err(ProtoError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    pub fn u8(&mut self) -> Result<u8, ProtoError> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, ProtoError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u24(&mut self) -> Result<u32, ProtoError> {
        let b = self.take(3)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], 0]))
    }

    pub fn u32(&mut self) -> Result<u32, ProtoError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, ProtoError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Length-encoded integer. `0xFB` (NULL in rows) is reported as an error here; row
    /// decoders check for it before calling.
    pub fn lenenc_int(&mut self) -> Result<u64, ProtoError> {
        match self.u8()? {
            b @ 0..=0xFA => Ok(u64::from(b)),
            0xFC => Ok(u64::from(self.u16()?)),
            0xFD => Ok(u64::from(self.u24()?)),
            0xFE => self.u64(),
            b => Err(ProtoError::Malformed(if b == 0xFB {
                "unexpected NULL marker where a length was expected"
            } else {
                "invalid length-encoded integer prefix 0xFF"
            })),
        }
    }

    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8], ProtoError> {
        let n = self.lenenc_int()?;
        let n = usize::try_from(n).map_err(|_| ProtoError::Truncated)?;
        self.take(n)
    }

    /// Bytes up to (not including) the next NUL; the NUL is consumed.
    pub fn nul_bytes(&mut self) -> Result<&'a [u8], ProtoError> {
        let rest = &self.buf[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(ProtoError::Malformed("missing NUL terminator"))?;
        self.pos += end + 1;
        Ok(&rest[..end])
    }

    /// A NUL-terminated string if a NUL is present, else everything that is left: several
    /// clients omit the final NUL of the last field (e.g. the auth plugin name).
    pub fn nul_or_rest(&mut self) -> &'a [u8] {
        let rest = &self.buf[self.pos..];
        if let Some(end) = rest.iter().position(|&b| b == 0) {
            self.pos += end + 1;
            &rest[..end]
        } else {
            self.pos = self.buf.len();
            rest
        }
    }
}

pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u24(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes()[..3]);
}

pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_lenenc_int(out: &mut Vec<u8>, v: u64) {
    if v < 0xFB {
        out.push(v as u8);
    } else if v <= 0xFFFF {
        out.push(0xFC);
        put_u16(out, v as u16);
    } else if v <= 0xFF_FFFF {
        out.push(0xFD);
        put_u24(out, v as u32);
    } else {
        out.push(0xFE);
        put_u64(out, v);
    }
}

pub fn lenenc_int_len(v: u64) -> usize {
    if v < 0xFB {
        1
    } else if v <= 0xFFFF {
        3
    } else if v <= 0xFF_FFFF {
        4
    } else {
        9
    }
}

pub fn put_lenenc_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_lenenc_int(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub fn put_nul_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(b);
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lenenc_int_round_trips(v in any::<u64>()) {
            let mut out = Vec::new();
            put_lenenc_int(&mut out, v);
            prop_assert_eq!(out.len(), lenenc_int_len(v));
            let mut r = Reader::new(&out);
            prop_assert_eq!(r.lenenc_int().unwrap(), v);
            prop_assert!(r.is_empty());
        }

        #[test]
        fn lenenc_bytes_round_trips(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut out = Vec::new();
            put_lenenc_bytes(&mut out, &b);
            let mut r = Reader::new(&out);
            prop_assert_eq!(r.lenenc_bytes().unwrap(), &b[..]);
        }

        #[test]
        fn readers_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut r = Reader::new(&b);
            let _ = r.lenenc_bytes();
            let _ = r.nul_bytes();
            let _ = r.u64();
            let _ = r.lenenc_int();
        }
    }

    #[test]
    fn lenenc_boundaries() {
        for (v, len) in [
            (0xFA, 1),
            (0xFB, 3),
            (0xFFFF, 3),
            (0x1_0000, 4),
            (0xFF_FFFF, 4),
            (0x100_0000, 9),
        ] {
            assert_eq!(lenenc_int_len(v), len, "{v:#x}");
        }
        assert!(Reader::new(&[0xFB]).lenenc_int().is_err());
        assert!(Reader::new(&[0xFF]).lenenc_int().is_err());
        assert!(Reader::new(&[0xFC, 1]).lenenc_int().is_err());
    }
}
