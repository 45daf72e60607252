//! `BITFIELD` and `BITFIELD_RO`: integers of 1 to 64 bits (`u63` at most unsigned) at any
//! bit offset of a string value, read and written as Redis 7.0's `bitfieldGeneric` does:
//! every operation is parsed and checked before the key is read, the value grows (zero
//! bytes) to the farthest bit a write reaches, and `OVERFLOW WRAP|SAT|FAIL` applies to the
//! writes after it.

use super::spec;
use super::store_value;
use crate::cmd::data::Spec;
use crate::cmd::typed::{DataCommand, ParseError, SYNTAX};
use crate::cmd::{parse_i64, Args};
use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::kind;
use crate::store::StoreError;

const TYPE_ERROR: &[u8] =
    b"Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const OFFSET_ERROR: &[u8] = b"bit offset is not an integer or out of range";
const OVERFLOW_ERROR: &[u8] = b"Invalid OVERFLOW type specified";
const RO_ERROR: &[u8] = b"BITFIELD_RO only supports the GET subcommand";
const NOT_INTEGER: &[u8] = b"value is not an integer or out of range";

pub static COMMANDS: [Spec; 2] = [
    spec("bitfield", -2, true, |a| parse(a, false)),
    spec("bitfield_ro", -2, false, |a| parse(a, true)),
];

/// What `OVERFLOW` says of the writes after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One operation: an integer of `bits` bits (`signed` or not) at bit `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub op: Op,
    pub signed: bool,
    pub bits: u32,
    pub offset: u64,
    pub overflow: Overflow,
}

/// `BITFIELD key op...`, parsed.
#[derive(Debug, PartialEq)]
pub struct BitField<'a> {
    pub key: &'a [u8],
    pub fields: Vec<Field>,
    /// Some operation writes.
    pub writes: bool,
}

impl<'a> From<BitField<'a>> for DataCommand<'a> {
    fn from(c: BitField<'a>) -> Self {
        DataCommand::BitField(c)
    }
}

/// `i<bits>` (1 to 64) or `u<bits>` (1 to 63), as Redis's `getBitfieldTypeFromArgument`.
fn field_type(arg: &[u8]) -> Result<(bool, u32), ParseError> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(ParseError::Text(TYPE_ERROR)),
    };
    match parse_i64(&arg[1..]) {
        Some(n) if n >= 1 && n <= if signed { 64 } else { 63 } => Ok((signed, n as u32)),
        _ => Err(ParseError::Text(TYPE_ERROR)),
    }
}

/// An offset, `#n` meaning `n` times the type's width, within `proto-max-bulk-len` bytes, as
/// Redis's `getBitOffsetFromArgument` (its multiplication wraps as Redis's does).
fn field_offset(arg: &[u8], bits: u32) -> Result<u64, ParseError> {
    let (hash, digits) = match arg.strip_prefix(b"#") {
        Some(rest) => (true, rest),
        None => (false, arg),
    };
    let Some(mut n) = parse_i64(digits) else {
        return Err(ParseError::Text(OFFSET_ERROR));
    };
    if hash {
        n = n.wrapping_mul(i64::from(bits));
    }
    if n < 0 || ((n as u64) >> 3) >= super::max_value_len() {
        return Err(ParseError::Text(OFFSET_ERROR));
    }
    Ok(n as u64)
}

fn parse(a: Args<'_>, read_only: bool) -> Result<DataCommand<'_>, ParseError> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut writes = false;
    let mut j = 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        let sub = a.get(j);
        let op = if sub.eq_ignore_ascii_case(b"get") && left >= 2 {
            Op::Get
        } else if sub.eq_ignore_ascii_case(b"set") && left >= 3 {
            Op::Set(0)
        } else if sub.eq_ignore_ascii_case(b"incrby") && left >= 3 {
            Op::IncrBy(0)
        } else if sub.eq_ignore_ascii_case(b"overflow") && left >= 1 {
            let kind = a.get(j + 1);
            overflow = if kind.eq_ignore_ascii_case(b"wrap") {
                Overflow::Wrap
            } else if kind.eq_ignore_ascii_case(b"sat") {
                Overflow::Sat
            } else if kind.eq_ignore_ascii_case(b"fail") {
                Overflow::Fail
            } else {
                return Err(ParseError::Text(OVERFLOW_ERROR));
            };
            j += 2;
            continue;
        } else {
            return Err(SYNTAX);
        };
        let (signed, bits) = field_type(a.get(j + 1))?;
        let offset = field_offset(a.get(j + 2), bits)?;
        let op = match op {
            Op::Get => Op::Get,
            Op::Set(_) | Op::IncrBy(_) => {
                writes = true;
                let n = parse_i64(a.get(j + 3)).ok_or(ParseError::Text(NOT_INTEGER))?;
                if matches!(op, Op::Set(_)) {
                    Op::Set(n)
                } else {
                    Op::IncrBy(n)
                }
            }
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        j += if op == Op::Get { 3 } else { 4 };
    }
    if read_only && writes {
        return Err(ParseError::Text(RO_ERROR));
    }
    Ok(BitField {
        key: a.get(1),
        fields,
        writes,
    }
    .into())
}

/// The `bits`-bit unsigned integer at bit `offset` of `v` (zeros past its end).
fn get_unsigned(v: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |acc, j| {
        let at = offset + j;
        let byte = v.get((at >> 3) as usize).copied().unwrap_or(0);
        (acc << 1) | u64::from((byte >> (7 - (at & 7))) & 1)
    })
}

fn get_signed(v: &[u8], offset: u64, bits: u32) -> i64 {
    let u = get_unsigned(v, offset, bits) as i64;
    if bits < 64 && u & (1i64 << (bits - 1)) != 0 {
        u | (-1i64 << bits)
    } else {
        u
    }
}

/// Writes the low `bits` bits of `value` at bit `offset` of `v` (long enough).
fn set_bits(v: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let bit = (value >> (u64::from(bits) - 1 - j)) & 1;
        let at = offset + j;
        let byte = &mut v[(at >> 3) as usize];
        let mask = 1u8 << (7 - (at & 7));
        if bit == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: `Some(new value)` unless `FAIL` refuses it.
fn unsigned_result(value: u64, incr: i64, bits: u32, overflow: Overflow) -> (bool, u64) {
    let max = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let high = value > max || (incr > 0 && incr > max_incr);
    let low = !high && incr < 0 && incr < min_incr;
    if !high && !low {
        return (false, value.wrapping_add(incr as u64));
    }
    let limit = match overflow {
        Overflow::Wrap | Overflow::Fail => value.wrapping_add(incr as u64) & max,
        Overflow::Sat if high => max,
        Overflow::Sat => 0,
    };
    (true, limit)
}

/// Redis's `checkSignedBitfieldOverflow`.
fn signed_result(value: i64, incr: i64, bits: u32, overflow: Overflow) -> (bool, i64) {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let high = value > max
        || (bits != 64 && incr > max_incr)
        || (value >= 0 && incr > 0 && incr > max_incr);
    let low = !high
        && (value < min
            || (bits != 64 && incr < min_incr)
            || (value < 0 && incr < 0 && incr < min_incr));
    if !high && !low {
        return (false, value.wrapping_add(incr));
    }
    let limit = match overflow {
        Overflow::Wrap | Overflow::Fail => {
            let mut c = (value as u64).wrapping_add(incr as u64);
            if bits < 64 {
                let mask = u64::MAX << bits;
                if c & (1u64 << (bits - 1)) != 0 {
                    c |= mask;
                } else {
                    c &= !mask;
                }
            }
            c as i64
        }
        Overflow::Sat if high => max,
        Overflow::Sat => min,
    };
    (true, limit)
}

impl BitField<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        let row = cx.tx.key(cx.db, self.key, self.writes).await?;
        if row.as_ref().is_some_and(|r| r.kind != kind::STRING) {
            cx.reply().error(errors::WRONGTYPE);
            return Ok(());
        }
        let existed = row.is_some();
        let mut v = row.and_then(|r| r.v).unwrap_or_default();
        let before = self.writes.then(|| v.clone());
        if self.writes {
            // Grown to the farthest bit a write reaches, as Redis's lookup does (before any
            // operation, so a write that FAIL refuses still leaves the key so long).
            let last = self
                .fields
                .iter()
                .filter(|f| f.op != Op::Get)
                .map(|f| f.offset + u64::from(f.bits) - 1)
                .max()
                .unwrap_or(0);
            let len = (last >> 3) as usize + 1;
            if v.len() < len {
                v.resize(len, 0);
            }
        }
        let mut r = cx.reply();
        r.array_len(self.fields.len());
        for f in &self.fields {
            match f.op {
                Op::Get if f.signed => {
                    r.integer(get_signed(&v, f.offset, f.bits));
                }
                Op::Get => {
                    r.integer(get_unsigned(&v, f.offset, f.bits) as i64);
                }
                Op::Set(n) | Op::IncrBy(n) => {
                    let incr = matches!(f.op, Op::IncrBy(_));
                    let (overflowed, new, answer) = if f.signed {
                        let old = get_signed(&v, f.offset, f.bits);
                        let (o, new) = if incr {
                            signed_result(old, n, f.bits, f.overflow)
                        } else {
                            signed_result(n, 0, f.bits, f.overflow)
                        };
                        (o, new as u64, if incr { new } else { old })
                    } else {
                        let old = get_unsigned(&v, f.offset, f.bits);
                        let (o, new) = if incr {
                            unsigned_result(old, n, f.bits, f.overflow)
                        } else {
                            unsigned_result(n as u64, 0, f.bits, f.overflow)
                        };
                        (o, new, if incr { new as i64 } else { old as i64 })
                    };
                    if overflowed && f.overflow == Overflow::Fail {
                        r.null();
                    } else {
                        r.integer(answer);
                        set_bits(&mut v, f.offset, f.bits, new);
                    }
                }
            }
        }
        if let Some(before) = before {
            if !existed || before != v {
                store_value(cx, self.key, existed, &v).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{signed_result, unsigned_result, Overflow};
    use crate::cmd::typed::testing::{command, error};

    #[test]
    fn parsed_and_checked_before_the_key() {
        assert!(
            command(b"bitfield k get u8 0 overflow fail incrby i5 #3 7\r\n")
                .contains("offset: 15, overflow: Fail")
        );
        assert!(command(b"bitfield_ro k overflow sat get i64 0\r\n").contains("writes: false"));
        let bad_type =
            "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
        assert_eq!(error(b"bitfield k get u64 0\r\n"), bad_type);
        assert_eq!(error(b"bitfield k get I8 0\r\n"), bad_type);
        assert_eq!(error(b"bitfield k get i0 0\r\n"), bad_type);
        assert_eq!(
            error(b"bitfield k get u8 -1\r\n"),
            "bit offset is not an integer or out of range"
        );
        assert_eq!(
            error(b"bitfield k set u8 0 x\r\n"),
            "value is not an integer or out of range"
        );
        assert_eq!(
            error(b"bitfield k overflow nope\r\n"),
            "Invalid OVERFLOW type specified"
        );
        assert_eq!(error(b"bitfield k get u8\r\n"), "syntax error");
        assert_eq!(
            error(b"bitfield_ro k get u8 0 set u8 0 1\r\n"),
            "BITFIELD_RO only supports the GET subcommand"
        );
    }

    #[test]
    fn overflows_as_redis() {
        assert_eq!(unsigned_result(250, 10, 8, Overflow::Wrap), (true, 4));
        assert_eq!(unsigned_result(250, 10, 8, Overflow::Sat), (true, 255));
        assert_eq!(unsigned_result(5, -10, 8, Overflow::Sat), (true, 0));
        assert_eq!(unsigned_result(5, -3, 8, Overflow::Wrap), (false, 2));
        assert_eq!(signed_result(120, 10, 8, Overflow::Wrap), (true, -126));
        assert_eq!(signed_result(-120, -10, 8, Overflow::Sat), (true, -128));
        assert_eq!(
            signed_result(i64::MAX, 1, 64, Overflow::Wrap),
            (true, i64::MIN)
        );
        assert_eq!(signed_result(200, 0, 8, Overflow::Sat), (true, 127));
    }
}
