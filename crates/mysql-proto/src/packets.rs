//! Generic response packets (OK, ERR, EOF), column definitions and result rows in both the
//! text and the binary protocol.

use crate::codec::{put_lenenc_bytes, put_lenenc_int, put_u16, put_u32, Reader};
use crate::consts::{caps, column_type as ty, status};
use crate::errors::{ErrorCode, ProtoError};

/// OK packet (also the 0xFE-headed form that ends result sets under `CLIENT_DEPRECATE_EOF`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OkPacket {
    /// 0x00, or 0xFE when it terminates a result set.
    pub header: u8,
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: u16,
    pub warnings: u16,
    pub info: Vec<u8>,
    /// Raw session-state-change data (present when `SERVER_SESSION_STATE_CHANGED` is set).
    pub session_state: Vec<u8>,
}

impl OkPacket {
    pub fn encode(&self, out: &mut Vec<u8>, capabilities: u32) {
        out.push(self.header);
        put_lenenc_int(out, self.affected_rows);
        put_lenenc_int(out, self.last_insert_id);
        put_u16(out, self.status);
        put_u16(out, self.warnings);
        if capabilities & caps::SESSION_TRACK != 0 {
            if !self.info.is_empty() || self.status & status::SESSION_STATE_CHANGED != 0 {
                put_lenenc_bytes(out, &self.info);
            }
            if self.status & status::SESSION_STATE_CHANGED != 0 {
                put_lenenc_bytes(out, &self.session_state);
            }
        } else {
            out.extend_from_slice(&self.info);
        }
    }

    pub fn decode(payload: &[u8], capabilities: u32) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        let header = r.u8()?;
        if header != 0x00 && header != 0xFE {
            return Err(ProtoError::Malformed("not an OK packet"));
        }
        let affected_rows = r.lenenc_int()?;
        let last_insert_id = r.lenenc_int()?;
        let status = r.u16()?;
        let warnings = r.u16()?;
        let mut ok = OkPacket {
            header,
            affected_rows,
            last_insert_id,
            status,
            warnings,
            ..Default::default()
        };
        if capabilities & caps::SESSION_TRACK != 0 {
            if !r.is_empty() {
                ok.info = r.lenenc_bytes()?.to_vec();
            }
            if status & status::SESSION_STATE_CHANGED != 0 && !r.is_empty() {
                ok.session_state = r.lenenc_bytes()?.to_vec();
            }
        } else {
            ok.info = r.rest().to_vec();
        }
        Ok(ok)
    }
}

/// Only the fields of an OK packet that steer a relay: read without allocating.
pub fn ok_status(payload: &[u8]) -> Option<(u64, u64, u16, u16)> {
    let mut r = Reader::new(payload);
    r.u8().ok()?;
    let affected = r.lenenc_int().ok()?;
    let insert_id = r.lenenc_int().ok()?;
    Some((affected, insert_id, r.u16().ok()?, r.u16().ok()?))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrPacket {
    pub code: u16,
    pub sqlstate: [u8; 5],
    pub message: Vec<u8>,
}

impl ErrPacket {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let mut sqlstate = [b'H', b'Y', b'0', b'0', b'0'];
        sqlstate.copy_from_slice(&code.sqlstate.as_bytes()[..5]);
        Self {
            code: code.code,
            sqlstate,
            message: message.into().into_bytes(),
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(0xFF);
        put_u16(out, self.code);
        out.push(b'#');
        out.extend_from_slice(&self.sqlstate);
        out.extend_from_slice(&self.message);
    }

    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        if r.u8()? != 0xFF {
            return Err(ProtoError::Malformed("not an ERR packet"));
        }
        let code = r.u16()?;
        let mut sqlstate = *b"HY000";
        if r.peek() == Some(b'#') {
            r.u8()?;
            sqlstate.copy_from_slice(r.take(5)?);
        }
        Ok(Self {
            code,
            sqlstate,
            message: r.rest().to_vec(),
        })
    }

    pub fn message_lossy(&self) -> String {
        String::from_utf8_lossy(&self.message).into_owned()
    }
}

impl std::fmt::Display for ErrPacket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ERROR {} ({}): {}",
            self.code,
            String::from_utf8_lossy(&self.sqlstate),
            String::from_utf8_lossy(&self.message)
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EofPacket {
    pub warnings: u16,
    pub status: u16,
}

impl EofPacket {
    pub fn encode(self, out: &mut Vec<u8>) {
        out.push(0xFE);
        put_u16(out, self.warnings);
        put_u16(out, self.status);
    }

    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        if r.u8()? != 0xFE || payload.len() >= 9 {
            return Err(ProtoError::Malformed("not an EOF packet"));
        }
        Ok(Self {
            warnings: r.u16()?,
            status: r.u16()?,
        })
    }
}

/// True for a packet that ends a row stream: EOF (short 0xFE) or, under
/// `CLIENT_DEPRECATE_EOF`, an OK packet with the 0xFE header. A row can only start with 0xFE
/// when its first value is 16 MiB or longer, which makes the packet full-sized.
pub fn is_row_terminator(first: u8, payload_len: usize, deprecate_eof: bool) -> bool {
    first == 0xFE
        && if deprecate_eof {
            payload_len < crate::consts::MAX_PAYLOAD
        } else {
            payload_len < 9
        }
}

/// `ColumnDefinition41`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ColumnDefinition {
    pub schema: Vec<u8>,
    pub table: Vec<u8>,
    pub org_table: Vec<u8>,
    pub name: Vec<u8>,
    pub org_name: Vec<u8>,
    pub charset: u16,
    pub column_length: u32,
    pub column_type: u8,
    pub flags: u16,
    pub decimals: u8,
}

impl ColumnDefinition {
    /// A column of manifold's own result sets.
    pub fn new(name: &str, column_type: u8) -> Self {
        let (charset, column_length) = match column_type {
            ty::LONGLONG | ty::LONG | ty::TINY | ty::SHORT | ty::INT24 => {
                (u16::from(crate::consts::BINARY_COLLATION), 21)
            }
            _ => (u16::from(crate::consts::UTF8MB4_GENERAL_CI), 1024),
        };
        Self {
            name: name.as_bytes().to_vec(),
            org_name: name.as_bytes().to_vec(),
            charset,
            column_length,
            column_type,
            ..Default::default()
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_lenenc_bytes(out, b"def");
        put_lenenc_bytes(out, &self.schema);
        put_lenenc_bytes(out, &self.table);
        put_lenenc_bytes(out, &self.org_table);
        put_lenenc_bytes(out, &self.name);
        put_lenenc_bytes(out, &self.org_name);
        out.push(0x0C);
        put_u16(out, self.charset);
        put_u32(out, self.column_length);
        out.push(self.column_type);
        put_u16(out, self.flags);
        out.push(self.decimals);
        out.extend_from_slice(&[0, 0]);
    }

    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        r.lenenc_bytes()?;
        let schema = r.lenenc_bytes()?.to_vec();
        let table = r.lenenc_bytes()?.to_vec();
        let org_table = r.lenenc_bytes()?.to_vec();
        let name = r.lenenc_bytes()?.to_vec();
        let org_name = r.lenenc_bytes()?.to_vec();
        r.lenenc_int()?;
        Ok(Self {
            schema,
            table,
            org_table,
            name,
            org_name,
            charset: r.u16()?,
            column_length: r.u32()?,
            column_type: r.u8()?,
            flags: r.u16()?,
            decimals: r.u8()?,
        })
    }
}

/// Text-protocol row: each value a length-encoded string, NULL as 0xFB.
pub fn encode_text_row<'a>(out: &mut Vec<u8>, values: impl IntoIterator<Item = Option<&'a [u8]>>) {
    for v in values {
        match v {
            Some(b) => put_lenenc_bytes(out, b),
            None => out.push(0xFB),
        }
    }
}

/// A whole text result set of the server's own (column count, definitions, rows and their
/// terminators in the client's EOF convention), as packets appended to `out` from sequence
/// id `seq`. Returns the next sequence id.
pub fn encode_text_result_set<'a, R, V>(
    out: &mut Vec<u8>,
    seq: u8,
    columns: &[ColumnDefinition],
    rows: R,
    capabilities: u32,
    eof: EofPacket,
) -> u8
where
    R: IntoIterator<Item = V>,
    V: IntoIterator<Item = Option<&'a [u8]>>,
{
    let deprecate_eof = capabilities & caps::DEPRECATE_EOF != 0;
    let mut payload = Vec::with_capacity(128);
    let mut seq = seq;
    put_lenenc_int(&mut payload, columns.len() as u64);
    seq = crate::write_packet(out, seq, &payload);
    for c in columns {
        payload.clear();
        c.encode(&mut payload);
        seq = crate::write_packet(out, seq, &payload);
    }
    if !deprecate_eof {
        payload.clear();
        eof.encode(&mut payload);
        seq = crate::write_packet(out, seq, &payload);
    }
    for row in rows {
        payload.clear();
        encode_text_row(&mut payload, row);
        seq = crate::write_packet(out, seq, &payload);
    }
    payload.clear();
    if deprecate_eof {
        OkPacket {
            header: 0xFE,
            warnings: eof.warnings,
            status: eof.status,
            ..Default::default()
        }
        .encode(&mut payload, capabilities);
    } else {
        eof.encode(&mut payload);
    }
    crate::write_packet(out, seq, &payload)
}

pub fn decode_text_row(payload: &[u8], columns: usize) -> Result<Vec<Option<Vec<u8>>>, ProtoError> {
    let mut r = Reader::new(payload);
    let mut row = Vec::with_capacity(columns.min(4096));
    for _ in 0..columns {
        if r.peek() == Some(0xFB) {
            r.u8()?;
            row.push(None);
        } else {
            row.push(Some(r.lenenc_bytes()?.to_vec()));
        }
    }
    if !r.is_empty() {
        return Err(ProtoError::Malformed("trailing bytes after text row"));
    }
    Ok(row)
}

/// A value in the binary protocol (prepared-statement parameters and binary result rows).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    Bytes(Vec<u8>),
    /// year, month, day, hour, minute, second, microsecond
    Date(u16, u8, u8, u8, u8, u8, u32),
    /// negative, days, hours, minutes, seconds, microseconds
    Time(bool, u32, u8, u8, u8, u32),
}

/// Encodes one non-NULL binary value of column type `t` (`unsigned` from the column flags).
pub fn encode_binary_value(out: &mut Vec<u8>, t: u8, v: &Value) {
    match *v {
        Value::Null => {}
        Value::Int(i) => match t {
            ty::TINY => out.push(i as u8),
            ty::SHORT | ty::YEAR => put_u16(out, i as u16),
            ty::LONG | ty::INT24 => put_u32(out, i as u32),
            _ => out.extend_from_slice(&i.to_le_bytes()),
        },
        Value::UInt(u) => match t {
            ty::TINY => out.push(u as u8),
            ty::SHORT | ty::YEAR => put_u16(out, u as u16),
            ty::LONG | ty::INT24 => put_u32(out, u as u32),
            _ => out.extend_from_slice(&u.to_le_bytes()),
        },
        Value::Float(f) => out.extend_from_slice(&f.to_le_bytes()),
        Value::Double(d) => out.extend_from_slice(&d.to_le_bytes()),
        Value::Bytes(ref b) => put_lenenc_bytes(out, b),
        Value::Date(y, mo, d, h, mi, s, us) => {
            let len: u8 = if us != 0 {
                11
            } else if h != 0 || mi != 0 || s != 0 {
                7
            } else if y != 0 || mo != 0 || d != 0 {
                4
            } else {
                0
            };
            out.push(len);
            if len >= 4 {
                put_u16(out, y);
                out.extend_from_slice(&[mo, d]);
            }
            if len >= 7 {
                out.extend_from_slice(&[h, mi, s]);
            }
            if len == 11 {
                put_u32(out, us);
            }
        }
        Value::Time(neg, days, h, mi, s, us) => {
            let len: u8 = if us != 0 {
                12
            } else if neg || days != 0 || h != 0 || mi != 0 || s != 0 {
                8
            } else {
                0
            };
            out.push(len);
            if len >= 8 {
                out.push(u8::from(neg));
                put_u32(out, days);
                out.extend_from_slice(&[h, mi, s]);
            }
            if len == 12 {
                put_u32(out, us);
            }
        }
    }
}

pub fn decode_binary_value(r: &mut Reader<'_>, t: u8, unsigned: bool) -> Result<Value, ProtoError> {
    Ok(match t {
        ty::TINY => {
            let b = r.u8()?;
            if unsigned {
                Value::UInt(u64::from(b))
            } else {
                Value::Int(i64::from(b as i8))
            }
        }
        ty::SHORT | ty::YEAR => {
            let v = r.u16()?;
            if unsigned {
                Value::UInt(u64::from(v))
            } else {
                Value::Int(i64::from(v as i16))
            }
        }
        ty::LONG | ty::INT24 => {
            let v = r.u32()?;
            if unsigned {
                Value::UInt(u64::from(v))
            } else {
                Value::Int(i64::from(v as i32))
            }
        }
        ty::LONGLONG => {
            let v = r.u64()?;
            if unsigned {
                Value::UInt(v)
            } else {
                Value::Int(v as i64)
            }
        }
        ty::FLOAT => Value::Float(f32::from_bits(r.u32()?)),
        ty::DOUBLE => Value::Double(f64::from_bits(r.u64()?)),
        ty::NULL => Value::Null,
        ty::DATE | ty::DATETIME | ty::TIMESTAMP | ty::NEWDATE => {
            let len = r.u8()?;
            let (mut y, mut mo, mut d, mut h, mut mi, mut s, mut us) = (0, 0, 0, 0, 0, 0, 0);
            if len >= 4 {
                y = r.u16()?;
                mo = r.u8()?;
                d = r.u8()?;
            }
            if len >= 7 {
                h = r.u8()?;
                mi = r.u8()?;
                s = r.u8()?;
            }
            if len >= 11 {
                us = r.u32()?;
            }
            if !matches!(len, 0 | 4 | 7 | 11) {
                return Err(ProtoError::Malformed("bad binary date length"));
            }
            Value::Date(y, mo, d, h, mi, s, us)
        }
        ty::TIME => {
            let len = r.u8()?;
            let (mut neg, mut days, mut h, mut mi, mut s, mut us) = (false, 0, 0, 0, 0, 0);
            if len >= 8 {
                neg = r.u8()? != 0;
                days = r.u32()?;
                h = r.u8()?;
                mi = r.u8()?;
                s = r.u8()?;
            }
            if len >= 12 {
                us = r.u32()?;
            }
            if !matches!(len, 0 | 8 | 12) {
                return Err(ProtoError::Malformed("bad binary time length"));
            }
            Value::Time(neg, days, h, mi, s, us)
        }
        _ => Value::Bytes(r.lenenc_bytes()?.to_vec()),
    })
}

/// Binary-protocol row: 0x00, NULL bitmap (offset 2), then the non-NULL values.
pub fn encode_binary_row(out: &mut Vec<u8>, columns: &[ColumnDefinition], values: &[Value]) {
    out.push(0x00);
    let bitmap_at = out.len();
    out.extend(std::iter::repeat_n(0, (columns.len() + 7 + 2) / 8));
    for (i, (c, v)) in columns.iter().zip(values).enumerate() {
        if *v == Value::Null {
            out[bitmap_at + (i + 2) / 8] |= 1 << ((i + 2) % 8);
        } else {
            encode_binary_value(out, c.column_type, v);
        }
    }
}

pub fn decode_binary_row(
    payload: &[u8],
    columns: &[ColumnDefinition],
) -> Result<Vec<Value>, ProtoError> {
    let mut r = Reader::new(payload);
    if r.u8()? != 0x00 {
        return Err(ProtoError::Malformed("binary row does not start with 0x00"));
    }
    let bitmap = r.take((columns.len() + 7 + 2) / 8)?;
    let mut row = Vec::with_capacity(columns.len());
    for (i, c) in columns.iter().enumerate() {
        if bitmap[(i + 2) / 8] & (1 << ((i + 2) % 8)) != 0 {
            row.push(Value::Null);
        } else {
            row.push(decode_binary_value(
                &mut r,
                c.column_type,
                c.flags & crate::consts::column_flag::UNSIGNED != 0,
            )?);
        }
    }
    if !r.is_empty() {
        return Err(ProtoError::Malformed("trailing bytes after binary row"));
    }
    Ok(row)
}

/// One entry of `CLIENT_SESSION_TRACK` state-change data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionTrack {
    SystemVariable { name: Vec<u8>, value: Vec<u8> },
    Schema(Vec<u8>),
    StateChange(bool),
    Gtids(Vec<u8>),
    TransactionCharacteristics(Vec<u8>),
    TransactionState(Vec<u8>),
    Other(u8, Vec<u8>),
}

pub fn decode_session_state(data: &[u8]) -> Result<Vec<SessionTrack>, ProtoError> {
    let mut r = Reader::new(data);
    let mut out = Vec::new();
    while !r.is_empty() {
        let kind = r.u8()?;
        let body = r.lenenc_bytes()?;
        let mut b = Reader::new(body);
        out.push(match kind {
            0 => SessionTrack::SystemVariable {
                name: b.lenenc_bytes()?.to_vec(),
                value: b.lenenc_bytes()?.to_vec(),
            },
            1 => SessionTrack::Schema(b.lenenc_bytes()?.to_vec()),
            // The servers send the flag bare ("1"), not as a length-encoded string.
            2 => SessionTrack::StateChange(body == b"1"),
            3 => {
                b.u8()?; // encoding specification
                SessionTrack::Gtids(b.lenenc_bytes()?.to_vec())
            }
            4 => SessionTrack::TransactionCharacteristics(b.lenenc_bytes()?.to_vec()),
            5 => SessionTrack::TransactionState(b.lenenc_bytes()?.to_vec()),
            k => SessionTrack::Other(k, body.to_vec()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ok_round_trips(affected in any::<u64>(), id in any::<u64>(), st in any::<u16>(), w in any::<u16>(),
                          info in proptest::collection::vec(any::<u8>(), 0..30), state in proptest::collection::vec(any::<u8>(), 0..30), track in any::<bool>()) {
            let capabilities = if track { caps::SESSION_TRACK } else { 0 };
            let mut ok = OkPacket { header: 0, affected_rows: affected, last_insert_id: id, status: st, warnings: w, info, session_state: state };
            if !track || st & status::SESSION_STATE_CHANGED == 0 { ok.session_state.clear(); }
            let mut out = Vec::new();
            ok.encode(&mut out, capabilities);
            prop_assert_eq!(OkPacket::decode(&out, capabilities).unwrap(), ok.clone());
            prop_assert_eq!(ok_status(&out), Some((affected, id, st, w)));
        }

        #[test]
        fn err_round_trips(code in any::<u16>(), msg in proptest::collection::vec(any::<u8>(), 0..60)) {
            let e = ErrPacket { code, sqlstate: *b"42S02", message: msg };
            let mut out = Vec::new();
            e.encode(&mut out);
            prop_assert_eq!(ErrPacket::decode(&out).unwrap(), e);
        }

        #[test]
        fn eof_round_trips(w in any::<u16>(), s in any::<u16>()) {
            let e = EofPacket { warnings: w, status: s };
            let mut out = Vec::new();
            e.encode(&mut out);
            prop_assert!(is_row_terminator(out[0], out.len(), false));
            prop_assert_eq!(EofPacket::decode(&out).unwrap(), e);
        }

        #[test]
        fn column_round_trips(name in proptest::collection::vec(any::<u8>(), 0..30), t in any::<u8>(), flags in any::<u16>(), cs in any::<u16>(), len in any::<u32>(), dec in any::<u8>()) {
            let c = ColumnDefinition { schema: b"s".to_vec(), table: b"t".to_vec(), org_table: b"ot".to_vec(), name: name.clone(), org_name: name,
                                       charset: cs, column_length: len, column_type: t, flags, decimals: dec };
            let mut out = Vec::new();
            c.encode(&mut out);
            prop_assert_eq!(ColumnDefinition::decode(&out).unwrap(), c);
        }

        #[test]
        fn text_row_round_trips(row in proptest::collection::vec(proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)), 0..10)) {
            let mut out = Vec::new();
            encode_text_row(&mut out, row.iter().map(|v| v.as_deref()));
            prop_assert_eq!(decode_text_row(&out, row.len()).unwrap(), row);
        }

        #[test]
        fn binary_row_round_trips(i in any::<i64>(), u in any::<u64>(), d in any::<f64>().prop_filter("nan", |d| !d.is_nan()),
                                  b in proptest::collection::vec(any::<u8>(), 0..50), nulls in any::<u8>(),
                                  date in (0u16..9999, 1u8..13, 1u8..29, 0u8..24, 0u8..60, 0u8..60, 0u32..1_000_000),
                                  time in (any::<bool>(), 0u32..34, 0u8..24, 0u8..60, 0u8..60, 0u32..1_000_000)) {
            let mut uc = ColumnDefinition::new("u", ty::LONGLONG);
            uc.flags = crate::consts::column_flag::UNSIGNED;
            let cols = vec![ColumnDefinition::new("i", ty::LONGLONG), uc, ColumnDefinition::new("d", ty::DOUBLE),
                            ColumnDefinition::new("b", ty::VAR_STRING), ColumnDefinition::new("dt", ty::DATETIME), ColumnDefinition::new("t", ty::TIME)];
            let mut vals = vec![Value::Int(i), Value::UInt(u), Value::Double(d), Value::Bytes(b),
                                Value::Date(date.0, date.1, date.2, date.3, date.4, date.5, date.6), Value::Time(time.0, time.1, time.2, time.3, time.4, time.5)];
            for (k, v) in vals.iter_mut().enumerate() { if nulls & (1 << k) != 0 { *v = Value::Null; } }
            // A zero TIME has no sign on the wire.
            if let Value::Time(neg, 0, 0, 0, 0, 0) = vals[5] { if neg { vals[5] = Value::Time(false, 0, 0, 0, 0, 0); } }
            let mut out = Vec::new();
            encode_binary_row(&mut out, &cols, &vals);
            prop_assert_eq!(decode_binary_row(&out, &cols).unwrap(), vals);
        }

        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = OkPacket::decode(&b, caps::SESSION_TRACK);
            let _ = OkPacket::decode(&b, 0);
            let _ = ErrPacket::decode(&b);
            let _ = EofPacket::decode(&b);
            let _ = ColumnDefinition::decode(&b);
            let _ = decode_text_row(&b, 3);
            let cols = vec![ColumnDefinition::new("a", ty::DATETIME), ColumnDefinition::new("b", ty::TIME), ColumnDefinition::new("c", ty::BLOB)];
            let _ = decode_binary_row(&b, &cols);
            let _ = decode_session_state(&b);
            let _ = ok_status(&b);
        }
    }

    #[test]
    fn session_state_decodes_mariadb_example() {
        // schema "test" + system variable autocommit=OFF
        let mut data = vec![1u8];
        let mut body = Vec::new();
        put_lenenc_bytes(&mut body, b"test");
        put_lenenc_bytes(&mut data, &body);
        data.push(0);
        let mut body = Vec::new();
        put_lenenc_bytes(&mut body, b"autocommit");
        put_lenenc_bytes(&mut body, b"OFF");
        put_lenenc_bytes(&mut data, &body);
        // State change, as MariaDB 10.11 sends it after SET NAMES: type 2, length 1, "1".
        data.extend_from_slice(&[2, 1, b'1']);
        assert_eq!(
            decode_session_state(&data).unwrap(),
            vec![
                SessionTrack::Schema(b"test".to_vec()),
                SessionTrack::SystemVariable {
                    name: b"autocommit".to_vec(),
                    value: b"OFF".to_vec()
                },
                SessionTrack::StateChange(true),
            ]
        );
    }
}
