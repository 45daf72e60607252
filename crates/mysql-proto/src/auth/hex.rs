//! Hex digits of the stored hashes' text forms (`*HEX` for native, `sha2:hex` for sha2).

pub(super) const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";
pub(super) const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

pub(super) fn push_hex(out: &mut String, bytes: &[u8], digits: &[u8; 16]) {
    for &b in bytes {
        out.push(char::from(digits[usize::from(b >> 4)]));
        out.push(char::from(digits[usize::from(b & 0x0f)]));
    }
}

pub(super) fn decode_hex<const N: usize>(hex: &str) -> Option<[u8; N]> {
    let hex = hex.as_bytes();
    if hex.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *o = (hex_value(pair[0])? << 4) | hex_value(pair[1])?;
    }
    Some(out)
}

pub(super) fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}
