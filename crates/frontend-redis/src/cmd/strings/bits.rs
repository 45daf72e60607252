//! Bitmaps: `SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`, `BITOP`, on string values as Redis
//! 7.0's `bitops.c` reads and writes them (bit 0 is the first byte's most significant bit).
//!
//! Each command reads the whole value (a write locks its row first), works on it in memory
//! and writes it back in the batch's transaction, as `SETRANGE` does. Checks come in Redis's
//! order: what `bitops.c` checks before it looks the key up is parsed first
//! ([`BitCommand`]); the rest (`BITCOUNT`'s and `BITPOS`'s range) after the key's type.

use super::spec;
use super::{store_value, write_values};
use crate::cmd::data::Spec;
use crate::cmd::typed::{DataCommand, ParseError, SYNTAX};
use crate::cmd::{parse_i64, Args};
use crate::errors;
use crate::errors::SYNTAX as SYNTAX_TEXT;
use crate::store::context::Cx;
use crate::store::keys::kind;
use crate::store::StoreError;

const OFFSET_ERROR: &[u8] = b"bit offset is not an integer or out of range";
const BIT_ERROR: &[u8] = b"bit is not an integer or out of range";
const BITPOS_BIT: &[u8] = b"The bit argument must be 1 or 0.";
const NOT_ONE_KEY: &[u8] = b"BITOP NOT must be called with a single source key.";
const NOT_INTEGER: &[u8] = b"value is not an integer or out of range";

pub static COMMANDS: [Spec; 5] = [
    spec("setbit", 4, true, |a| {
        let offset = bit_offset(a.get(2))?;
        let on = match parse_i64(a.get(3)) {
            Some(0) => false,
            Some(1) => true,
            _ => return Err(ParseError::Text(BIT_ERROR)),
        };
        Ok(BitCommand::SetBit {
            key: a.get(1),
            offset,
            on,
        }
        .into())
    }),
    spec("getbit", 3, false, |a| {
        Ok(BitCommand::GetBit {
            key: a.get(1),
            offset: bit_offset(a.get(2))?,
        }
        .into())
    }),
    spec("bitcount", -2, false, |a| {
        Ok(BitCommand::BitCount {
            key: a.get(1),
            args: a,
        }
        .into())
    }),
    spec("bitpos", -3, false, |a| {
        let bit = match parse_i64(a.get(2)) {
            None => return Err(ParseError::Text(NOT_INTEGER)),
            Some(0) => false,
            Some(1) => true,
            Some(_) => return Err(ParseError::Text(BITPOS_BIT)),
        };
        Ok(BitCommand::BitPos {
            key: a.get(1),
            bit,
            args: a,
        }
        .into())
    }),
    spec("bitop", -4, true, |a| {
        let name = a.get(1);
        let op = if name.eq_ignore_ascii_case(b"and") {
            BitOp::And
        } else if name.eq_ignore_ascii_case(b"or") {
            BitOp::Or
        } else if name.eq_ignore_ascii_case(b"xor") {
            BitOp::Xor
        } else if name.eq_ignore_ascii_case(b"not") {
            BitOp::Not
        } else {
            return Err(SYNTAX);
        };
        if op == BitOp::Not && a.len() != 4 {
            return Err(ParseError::Text(NOT_ONE_KEY));
        }
        Ok(BitCommand::BitOp { op, args: a }.into())
    }),
];

/// Redis's `getBitOffsetFromArgument` (no `#` form here): an offset within
/// `proto-max-bulk-len` bytes (the door's: 64 MiB by default).
fn bit_offset(arg: &[u8]) -> Result<u64, ParseError> {
    match parse_i64(arg) {
        Some(n) if n >= 0 && ((n as u64) >> 3) < super::max_value_len() => Ok(n as u64),
        _ => Err(ParseError::Text(OFFSET_ERROR)),
    }
}

/// `BITOP`'s operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// A bitmap command, its arguments checked as far as Redis checks them before the key.
#[derive(Debug, PartialEq)]
pub enum BitCommand<'a> {
    SetBit {
        key: &'a [u8],
        offset: u64,
        on: bool,
    },
    GetBit {
        key: &'a [u8],
        offset: u64,
    },
    /// `BITCOUNT key [start end [BYTE|BIT]]`: the range is read after the key.
    BitCount {
        key: &'a [u8],
        args: Args<'a>,
    },
    /// `BITPOS key bit [start [end [BYTE|BIT]]]`: the range is read after the key.
    BitPos {
        key: &'a [u8],
        bit: bool,
        args: Args<'a>,
    },
    /// `BITOP op destkey key...`: the keys from argument 2 on (the destination first).
    BitOp {
        op: BitOp,
        args: Args<'a>,
    },
}

impl<'a> From<BitCommand<'a>> for DataCommand<'a> {
    fn from(c: BitCommand<'a>) -> Self {
        DataCommand::Bits(c)
    }
}

impl BitCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        match self {
            BitCommand::SetBit { key, offset, on } => setbit(cx, key, offset, on).await,
            BitCommand::GetBit { key, offset } => {
                let Some(v) = read(cx, key, 0).await? else {
                    return Ok(());
                };
                let byte = v.get((offset >> 3) as usize).copied().unwrap_or(0);
                let bit = byte & (1 << (7 - (offset & 7))) != 0;
                cx.reply().integer(i64::from(bit));
                Ok(())
            }
            BitCommand::BitCount { key, args } => {
                let Some(v) = read(cx, key, 0).await? else {
                    return Ok(());
                };
                match bitcount(&v, args) {
                    Ok(n) => cx.reply().integer(n),
                    Err(text) => cx.reply().error(text),
                };
                Ok(())
            }
            BitCommand::BitPos { key, bit, args } => {
                let Some(v) = read(cx, key, if bit { -1 } else { 0 }).await? else {
                    return Ok(());
                };
                match bitpos(&v, bit, args) {
                    Ok(n) => cx.reply().integer(n),
                    Err(text) => cx.reply().error(text),
                };
                Ok(())
            }
            BitCommand::BitOp { op, args } => bitop(cx, op, args).await,
        }
    }
}

/// The string `k`'s value (empty: absent), or `None` once `WRONGTYPE` or, for an absent
/// key, `absent` is replied.
async fn read(cx: &mut Cx<'_>, k: &[u8], absent: i64) -> Result<Option<Vec<u8>>, StoreError> {
    match cx.tx.key(cx.db, k, false).await? {
        None => {
            cx.reply().integer(absent);
            Ok(None)
        }
        Some(row) if row.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
            Ok(None)
        }
        Some(row) => Ok(Some(row.v.unwrap_or_default())),
    }
}

/// `SETBIT key offset 0|1`: the bit's old value; the value grows (zero bytes) to hold it.
async fn setbit(cx: &mut Cx<'_>, k: &[u8], offset: u64, on: bool) -> Result<(), StoreError> {
    let row = cx.tx.key(cx.db, k, true).await?;
    let mut v = match row {
        Some(ref r) if r.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
            return Ok(());
        }
        Some(ref r) => r.v.clone().unwrap_or_default(),
        None => Vec::new(),
    };
    // Below `proto-max-bulk-len` (`bit_offset`).
    let byte = (offset >> 3) as usize;
    let grew = v.len() <= byte;
    if grew {
        v.resize(byte + 1, 0);
    }
    let mask = 1u8 << (7 - (offset & 7));
    let was = v[byte] & mask != 0;
    if grew || row.is_none() || was != on {
        if on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        store_value(cx, k, row.is_some(), &v).await?;
    }
    cx.reply().integer(i64::from(was));
    Ok(())
}

/// An index of `BITCOUNT`'s or `BITPOS`'s range.
fn index(arg: &[u8]) -> Result<i64, &'static [u8]> {
    parse_i64(arg).ok_or(NOT_INTEGER)
}

/// `BYTE` (false) or `BIT` (true).
fn unit(arg: &[u8]) -> Result<bool, &'static [u8]> {
    if arg.eq_ignore_ascii_case(b"bit") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"byte") {
        Ok(false)
    } else {
        Err(SYNTAX_TEXT)
    }
}

/// The range `start..=end` in bits (of a `total`-unit value, units bits when `bits`) as
/// Redis converts it: negative indexes from the end, clamped; `None`: empty.
fn bit_range(len: usize, start: i64, end: i64, bits: bool) -> Option<(u64, u64)> {
    let total = if bits { len as i64 * 8 } else { len as i64 };
    let (mut s, mut e) = (start, end);
    if s < 0 {
        s = s.saturating_add(total);
    }
    if e < 0 {
        e = e.saturating_add(total);
    }
    s = s.max(0);
    e = e.max(0).min(total - 1);
    if s > e {
        return None;
    }
    let (s, e) = (s as u64, e as u64);
    Some(if bits { (s, e) } else { (s * 8, e * 8 + 7) })
}

/// `BITCOUNT`'s count of set bits in `v`, with its range arguments (`args` from 2 on).
fn bitcount(v: &[u8], args: Args<'_>) -> Result<i64, &'static [u8]> {
    let range = match args.len() {
        2 => bit_range(v.len(), 0, -1, false),
        4 | 5 => {
            let start = index(args.get(2))?;
            let end = index(args.get(3))?;
            let bits = if args.len() == 5 {
                unit(args.get(4))?
            } else {
                false
            };
            if start < 0 && end < 0 && start > end {
                return Ok(0);
            }
            bit_range(v.len(), start, end, bits)
        }
        _ => return Err(SYNTAX_TEXT),
    };
    let Some((s, e)) = range else {
        return Ok(0);
    };
    let (first, last) = ((s / 8) as usize, (e / 8) as usize);
    let mut n: u64 = v[first..=last]
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    // The edge bytes' bits outside the range.
    n -= u64::from((v[first] & !(0xffu8 >> (s % 8))).count_ones());
    n -= u64::from((v[last] & ((1u16 << (7 - e % 8)) - 1) as u8).count_ones());
    Ok(n as i64)
}

/// `BITPOS`'s first `bit` in `v`, with its range arguments (`args` from 3 on): -1 when there
/// is none; looking for a clear bit with no end given, the bit past the value (as if it
/// went on with zeros).
fn bitpos(v: &[u8], bit: bool, args: Args<'_>) -> Result<i64, &'static [u8]> {
    let (range, end_given) = match args.len() {
        3 => (bit_range(v.len(), 0, -1, false), false),
        4..=6 => {
            let start = index(args.get(3))?;
            let bits = if args.len() == 6 {
                unit(args.get(5))?
            } else {
                false
            };
            let (end, given) = if args.len() >= 5 {
                (index(args.get(4))?, true)
            } else {
                (-1, false)
            };
            (bit_range(v.len(), start, end, bits), given)
        }
        _ => return Err(SYNTAX_TEXT),
    };
    let Some((s, e)) = range else {
        return Ok(-1);
    };
    // Whole bytes holding no such bit are skipped at once.
    let skip = if bit { 0x00 } else { 0xff };
    let mut found = None;
    let mut i = s;
    while i <= e {
        let b = v[(i / 8) as usize];
        if i % 8 == 0 && i + 7 <= e && b == skip {
            i += 8;
            continue;
        }
        if (b & (0x80 >> (i % 8)) != 0) == bit {
            found = Some(i);
            break;
        }
        i += 1;
    }
    Ok(match found {
        Some(i) => i as i64,
        None if bit || end_given => -1,
        // Past the range's last byte, as Redis's byte-wise search answers.
        None => ((e / 8 + 1) * 8) as i64,
    })
}

/// `BITOP op destkey key...`: the destination gets the result (its TTL and type gone), or
/// is deleted when every source is empty; the reply is the result's length.
async fn bitop(cx: &mut Cx<'_>, op: BitOp, args: Args<'_>) -> Result<(), StoreError> {
    // Each source is folded into the result as it is read, so the command holds the result
    // and one source, however many sources (or repeats of one big key) it names.
    let mut result: Option<Vec<u8>> = None;
    for k in args.from(3) {
        let source = match cx.tx.key(cx.db, k, false).await? {
            None => Vec::new(),
            Some(row) if row.kind != kind::STRING => {
                cx.reply().error(errors::WRONGTYPE);
                return Ok(());
            }
            Some(row) => row.v.unwrap_or_default(),
        };
        result = Some(match result {
            None if op == BitOp::Not => source.iter().map(|b| !b).collect(),
            None => source,
            Some(mut r) => {
                // Past a value's end its bytes count as zeros.
                if r.len() < source.len() {
                    r.resize(source.len(), 0);
                }
                for (i, b) in r.iter_mut().enumerate() {
                    let s = source.get(i).copied().unwrap_or(0);
                    match op {
                        BitOp::And => *b &= s,
                        BitOp::Or => *b |= s,
                        BitOp::Xor | BitOp::Not => *b ^= s,
                    }
                }
                r
            }
        });
    }
    let result = result.unwrap_or_default();
    let dest = args.get(2);
    if result.is_empty() {
        if let Some(row) = cx.tx.key_meta(cx.db, dest, true).await? {
            cx.tx.delete_key(cx.db, dest, &row).await?;
        }
        cx.reply().integer(0);
        return Ok(());
    }
    write_values(cx, &[(dest, &result)], None).await?;
    cx.reply().integer(result.len() as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::bit_range;
    use crate::cmd::typed::testing::{command, error};

    #[test]
    fn checks_before_the_key_in_redis_order() {
        // Within the door's proto-max-bulk-len (64 MiB by default), as Redis checks its own.
        assert!(command(b"setbit k 536870911 1\r\n").contains("offset: 536870911, on: true"));
        assert_eq!(
            error(b"setbit k 536870912 1\r\n"),
            "bit offset is not an integer or out of range"
        );
        assert_eq!(
            error(b"setbit k -1 x\r\n"),
            "bit offset is not an integer or out of range"
        );
        assert_eq!(
            error(b"setbit k 1 2\r\n"),
            "bit is not an integer or out of range"
        );
        assert_eq!(
            error(b"*3\r\n$6\r\nGETBIT\r\n$1\r\nk\r\n$3\r\n1.5\r\n"),
            "bit offset is not an integer or out of range"
        );
        assert_eq!(error(b"bitpos k 2\r\n"), "The bit argument must be 1 or 0.");
        assert_eq!(
            error(b"bitpos k x\r\n"),
            "value is not an integer or out of range"
        );
        assert_eq!(error(b"bitop nand d a\r\n"), "syntax error");
        assert_eq!(
            error(b"bitop not d a b\r\n"),
            "BITOP NOT must be called with a single source key."
        );
        assert_eq!(
            error(b"bitop and d\r\n"),
            "wrong number of arguments for 'bitop' command"
        );
        // BITCOUNT's range is read after the key (a missing key answers 0 first).
        assert!(command(b"bitcount k x y\r\n").starts_with("Bits(BitCount"));
    }

    #[test]
    fn ranges_as_redis_converts_them() {
        assert_eq!(bit_range(6, 0, -1, false), Some((0, 47)));
        assert_eq!(bit_range(6, -2, -1, false), Some((32, 47)));
        assert_eq!(bit_range(6, 5, 30, true), Some((5, 30)));
        assert_eq!(bit_range(6, 5, 2, false), None);
        assert_eq!(bit_range(0, 0, -1, false), None);
        assert_eq!(bit_range(6, i64::MIN, i64::MAX, true), Some((0, 47)));
    }
}
