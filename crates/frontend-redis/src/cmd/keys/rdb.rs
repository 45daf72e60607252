//! The `DUMP`/`RESTORE` payload: one value in Redis's RDB object format, then the RDB
//! version (2 bytes, little endian) and a CRC-64 (Jones, little endian) of everything before
//! it, as Redis 7.0 writes and reads it (`createDumpPayload`, `verifyDumpPayload` in
//! `cluster.c`; `rdbSaveObject`, `rdbLoadObject` in `rdb.c`). Pure: bytes in, bytes out.
//!
//! Read ([`decode`]): every encoding redis-server 7.0 (RDB 10) writes and those of 6.x (RDB
//! 9): strings (raw, integer, LZF-compressed), lists (`LIST`, `LIST_ZIPLIST`, `QUICKLIST`
//! of ziplists, `QUICKLIST_2` of listpacks and plain nodes), sets (`SET`, `SET_INTSET`),
//! sorted sets (`ZSET`, `ZSET_2`, `ZSET_ZIPLIST`, `ZSET_LISTPACK`), hashes (`HASH`,
//! `HASH_ZIPLIST`, `HASH_LISTPACK`), streams (`STREAM_LISTPACKS_2`, `STREAM_LISTPACKS`:
//! [`stream`]). Not read: modules, zipmaps (Redis 2.4).
//!
//! Bounded by the payload: every length is checked against the bytes left before anything
//! is allocated for it (a count of elements too: each takes a byte at least), and what LZF
//! decompresses is grown as it is written, never allocated at the size the payload claims.
//! And bounded in all ([`Budget`]): the decoded value (its bytes, what each element costs,
//! what LZF makes) may take `limit` bytes at most. Malformed input is an error, never a
//! panic.
//!
//! Written ([`Writer`]): the plainest encodings redis-server 7.0 loads (and converts to its
//! own): `STRING` (raw), `LIST`, `SET`, `ZSET_2`, `HASH`; and streams as Redis 7.0 writes
//! them, `STREAM_LISTPACKS_2` ([`stream::StreamWriter`]).
//!
//! `FUNCTION DUMP|RESTORE`'s payload is the same footer after each library's code
//! ([`functions_payload`], [`function_codes`]), read with the same bounds.

/// The RDB version written, and the newest read (Redis 7.0's `RDB_VERSION`).
pub const RDB_VERSION: u16 = 10;

/// RDB object types (`rdb.h`).
pub mod rdb_type {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// A value read from a payload (collections never empty, members never repeated).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    Stream(Box<stream::Stream>),
}

/// Why a payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Shorter than its footer, a newer RDB version, or a wrong checksum.
    Footer,
    /// The value is malformed, empty, or of a type not read here.
    Format,
    /// The value would take more memory than the limit once decoded.
    TooLarge,
    /// A stream past the counts of [`stream::MAX_ENTRIES`] and the others.
    StreamTooMany,
}

/// `RESTORE`'s texts for each.
impl Refused {
    pub fn text(self) -> &'static [u8] {
        match self {
            Refused::Footer => b"DUMP payload version or checksum are wrong",
            Refused::Format => b"Bad data format",
            Refused::TooLarge => {
                b"value too large to restore: it takes more than 4 times proto-max-bulk-len in memory"
            }
            Refused::StreamTooMany => stream::TOO_MANY,
        }
    }
}

/// CRC-64/Jones as Redis's `crc64` (reflected, polynomial 0xad93d23594c935a9, initial 0).
pub fn crc64(data: &[u8]) -> u64 {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9 reflected
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            *slot = c;
        }
        t
    });
    data.iter().fold(0u64, |crc, &b| {
        table[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// The payload's body (type byte and object) once its footer checks out.
pub fn verify(payload: &[u8]) -> Result<&[u8], Refused> {
    let Some(body_len) = payload.len().checked_sub(10) else {
        return Err(Refused::Footer);
    };
    let (body, footer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return Err(Refused::Footer);
    }
    let crc = crc64(&payload[..body_len + 2]);
    if crc.to_le_bytes() != footer[2..10] {
        return Err(Refused::Footer);
    }
    Ok(body)
}

/// What an element of a collection is counted for beside its bytes: its `Vec` and its
/// allocation.
pub const ELEMENT_COST: u64 = 48;

/// The memory a decoded value may still take (its elements' bytes, each
/// [`ELEMENT_COST`] more, and what LZF decompresses): small integers in a listpack or
/// intset take a few bytes of the payload each and many more once decoded.
pub struct Budget {
    left: u64,
    exceeded: bool,
}

impl Budget {
    /// Counts `n` bytes; `None` (and remembered) past the limit.
    pub fn charge(&mut self, n: u64) -> Option<()> {
        if let Some(left) = self.left.checked_sub(n) {
            self.left = left;
            Some(())
        } else {
            self.exceeded = true;
            None
        }
    }

    /// Counts one element of `len` bytes.
    fn element(&mut self, len: usize) -> Option<()> {
        self.charge((len as u64).saturating_add(ELEMENT_COST))
    }
}

/// Reads the value of a `DUMP` payload; `limit`: the most memory the decoded value may take
/// ([`Budget`]).
pub fn decode(payload: &[u8], limit: u64) -> Result<Value, Refused> {
    verify(payload)?;
    // Read over the whole payload, footer included, as Redis's `restoreCommand` reads it:
    // an object running into the footer is read as redis-server reads it.
    let mut r = Reader::new(payload, limit);
    match r.object() {
        Some(v) => Ok(v),
        None if r.budget.exceeded => Err(Refused::TooLarge),
        None if r.too_many => Err(Refused::StreamTooMany),
        None => Err(Refused::Format),
    }
}

/// A cursor over the payload's body.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    /// What the decoded value may still take.
    budget: Budget,
    /// A stream was refused for its counts.
    too_many: bool,
}

/// An RDB length, or the special encoding that follows (`RDB_ENCVAL`).
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    /// A reader of `buf` from its start, whose decoded value may take `limit` bytes.
    fn new(buf: &'a [u8], limit: u64) -> Self {
        Reader {
            buf,
            at: 0,
            budget: Budget {
                left: limit,
                exceeded: false,
            },
            too_many: false,
        }
    }

    fn left(&self) -> usize {
        self.buf.len() - self.at
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.buf.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }

    /// `rdbLoadLenByRef`.
    fn len_or_encoding(&mut self) -> Option<Len> {
        let b = self.byte()?;
        Some(match b >> 6 {
            0 => Len::Plain(u64::from(b & 0x3f)),
            1 => Len::Plain((u64::from(b & 0x3f) << 8) | u64::from(self.byte()?)),
            3 => Len::Encoded(b & 0x3f),
            _ if b == 0x80 => Len::Plain(u64::from(u32::from_be_bytes(
                self.take(4)?.try_into().ok()?,
            ))),
            _ if b == 0x81 => Len::Plain(u64::from_be_bytes(self.take(8)?.try_into().ok()?)),
            _ => return None,
        })
    }

    fn len(&mut self) -> Option<u64> {
        match self.len_or_encoding()? {
            Len::Plain(n) => Some(n),
            Len::Encoded(_) => None,
        }
    }

    /// A count of things each taking one byte at least: refused past the bytes left.
    fn count(&mut self) -> Option<usize> {
        let n = usize::try_from(self.len()?).ok()?;
        (n <= self.left()).then_some(n)
    }

    /// A string of a `FUNCTION RESTORE` payload; `Err`: `failed`, or manifold's text past
    /// the budget of `limit` bytes.
    fn field(&mut self, failed: &str, limit: u64) -> Result<Vec<u8>, String> {
        match self.string() {
            Some(s) => Ok(s),
            None if self.budget.exceeded => Err(format!(
                "manifold: the libraries' code is at most {limit} bytes in all"
            )),
            None => Err(failed.to_string()),
        }
    }

    /// `rdbGenericLoadStringObject`: raw, integer or LZF; counted in the budget.
    fn string(&mut self) -> Option<Vec<u8>> {
        let s = self.uncounted_string()?;
        self.budget.element(s.len())?;
        Some(s)
    }

    fn uncounted_string(&mut self) -> Option<Vec<u8>> {
        match self.len_or_encoding()? {
            Len::Plain(n) => Some(self.take(usize::try_from(n).ok()?)?.to_vec()),
            Len::Encoded(0) => Some((self.byte()? as i8).to_string().into_bytes()),
            Len::Encoded(1) => Some(
                i16::from_le_bytes(self.take(2)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Len::Encoded(2) => Some(
                i32::from_le_bytes(self.take(4)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Len::Encoded(3) => {
                let clen = usize::try_from(self.len()?).ok()?;
                let len = self.len()?;
                // Counted before it is decompressed (and again as the string it makes).
                self.budget.charge(len)?;
                let compressed = self.take(clen)?;
                lzf_decompress(compressed, usize::try_from(len).ok()?)
            }
            Len::Encoded(_) => None,
        }
    }

    /// The object after its type byte (`rdbLoadObject`).
    fn object(&mut self) -> Option<Value> {
        use rdb_type as t;
        let kind = self.byte()?;
        let value = match kind {
            t::STRING => return Some(Value::String(self.string()?)),
            t::STREAM_LISTPACKS | t::STREAM_LISTPACKS_2 => {
                return match self.stream(kind) {
                    Ok(s) => Some(Value::Stream(Box::new(s))),
                    Err(refused) => {
                        self.too_many = refused == stream::StreamRefused::TooMany;
                        None
                    }
                };
            }
            t::LIST => {
                let n = self.count()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.string()?);
                }
                Value::List(items)
            }
            t::SET => {
                let n = self.count()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.string()?);
                }
                Value::Set(items)
            }
            t::ZSET | t::ZSET_2 => {
                let n = self.count()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let member = self.string()?;
                    let score = if kind == t::ZSET_2 {
                        f64::from_le_bytes(self.take(8)?.try_into().ok()?)
                    } else {
                        self.text_double()?
                    };
                    items.push((member, score));
                }
                Value::ZSet(items)
            }
            t::HASH => {
                let n = self.count()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let field = self.string()?;
                    items.push((field, self.string()?));
                }
                Value::Hash(items)
            }
            t::LIST_QUICKLIST | t::LIST_QUICKLIST_2 => {
                let nodes = self.count()?;
                let mut items = Vec::new();
                for _ in 0..nodes {
                    // `QUICKLIST_2`: 1 a plain node (one element), 2 a listpack.
                    let container = if kind == t::LIST_QUICKLIST_2 {
                        self.len()?
                    } else {
                        2
                    };
                    let blob = self.string()?;
                    if blob.is_empty() {
                        return None;
                    }
                    match (container, kind) {
                        (1, _) => items.push(blob),
                        (2, t::LIST_QUICKLIST_2) => listpack(&blob, |e| {
                            self.budget.element(e.len())?;
                            items.push(e);
                            Some(())
                        })?,
                        (2, _) => ziplist(&blob, |e| {
                            self.budget.element(e.len())?;
                            items.push(e);
                            Some(())
                        })?,
                        _ => return None,
                    }
                }
                Value::List(items)
            }
            t::LIST_ZIPLIST => {
                let mut items = Vec::new();
                let blob = self.string()?;
                ziplist(&blob, |e| {
                    self.budget.element(e.len())?;
                    items.push(e);
                    Some(())
                })?;
                Value::List(items)
            }
            t::SET_INTSET => {
                let blob = self.string()?;
                Value::Set(intset(&blob, &mut self.budget)?)
            }
            t::ZSET_ZIPLIST | t::ZSET_LISTPACK | t::HASH_ZIPLIST | t::HASH_LISTPACK => {
                let blob = self.string()?;
                let mut flat = Vec::new();
                let each = |e: Vec<u8>| {
                    self.budget.element(e.len())?;
                    flat.push(e);
                    Some(())
                };
                if kind == t::ZSET_LISTPACK || kind == t::HASH_LISTPACK {
                    listpack(&blob, each)?;
                } else {
                    ziplist(&blob, each)?;
                }
                if flat.len() % 2 != 0 {
                    return None;
                }
                let mut pairs = Vec::with_capacity(flat.len() / 2);
                let mut it = flat.into_iter();
                while let (Some(a), Some(b)) = (it.next(), it.next()) {
                    pairs.push((a, b));
                }
                if kind == t::ZSET_ZIPLIST || kind == t::ZSET_LISTPACK {
                    let mut items = Vec::with_capacity(pairs.len());
                    for (member, score) in pairs {
                        let score = crate::cmd::zsets::score::parse_value(&score)?;
                        items.push((member, score));
                    }
                    Value::ZSet(items)
                } else {
                    Value::Hash(pairs)
                }
            }
            _ => return None,
        };
        well_formed(&value).then_some(value)
    }

    /// `rdbLoadDoubleValue` (`ZSET`, RDB 7 and older): a length byte, then the text
    /// (253 NaN, 254 +inf, 255 -inf).
    fn text_double(&mut self) -> Option<f64> {
        match self.byte()? {
            253 => None,
            254 => Some(f64::INFINITY),
            255 => Some(f64::NEG_INFINITY),
            n => {
                let text = std::str::from_utf8(self.take(usize::from(n))?).ok()?;
                text.trim().parse().ok()
            }
        }
    }
}

/// A collection Redis would keep: not empty, no member twice, no NaN score (`rdbLoadObject`
/// refuses the others: "Duplicate set members detected"...).
fn well_formed(value: &Value) -> bool {
    fn unique<'a>(items: impl ExactSizeIterator<Item = &'a [u8]>) -> bool {
        let n = items.len();
        let mut seen = std::collections::HashSet::with_capacity(n);
        n > 0 && items.into_iter().all(|m| seen.insert(m))
    }
    match value {
        Value::List(items) => !items.is_empty(),
        Value::Set(items) => unique(items.iter().map(Vec::as_slice)),
        Value::ZSet(items) => {
            items.iter().all(|(_, s)| !s.is_nan()) && unique(items.iter().map(|(m, _)| &m[..]))
        }
        Value::Hash(items) => unique(items.iter().map(|(f, _)| &f[..])),
        // A stream is checked as it is read.
        Value::String(_) | Value::Stream(_) => true,
    }
}

/// liblzf's `lzf_decompress` into exactly `len` bytes (`None`: malformed, or another
/// length). The output grows as it is written: a claimed length is never allocated ahead.
pub fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(len.min(input.len().saturating_mul(4)));
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            // A literal run of ctrl + 1 bytes.
            let run = input.get(i..i + ctrl + 1)?;
            if out.len() + run.len() > len {
                return None;
            }
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            // A back reference: length (3 bits, 7 = more in the next byte) + 2, offset.
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*input.get(i)?);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            n += 2;
            let from = out.len().checked_sub(back)?;
            if out.len() + n > len {
                return None;
            }
            for j in 0..n {
                let b = out[from + j];
                out.push(b);
            }
        }
    }
    (out.len() == len).then_some(out)
}

/// The elements of a listpack (`listpack.c`), integers as their decimal text.
/// `each` may stop the read (`None`).
pub fn listpack(lp: &[u8], mut each: impl FnMut(Vec<u8>) -> Option<()>) -> Option<()> {
    let total = usize::try_from(u32::from_le_bytes(lp.get(0..4)?.try_into().ok()?)).ok()?;
    let count = u16::from_le_bytes(lp.get(4..6)?.try_into().ok()?);
    if total != lp.len() || lp.last() != Some(&0xff) {
        return None;
    }
    let body = &lp[6..lp.len() - 1];
    let mut at = 0;
    let mut seen = 0usize;
    while at < body.len() {
        let b = body[at];
        let rest = &body[at..];
        // (header bytes, data bytes, element)
        let (head, data_len, element): (usize, usize, Vec<u8>) = match b {
            0x00..=0x7f => (1, 0, u64::from(b).to_string().into_bytes()),
            0x80..=0xbf => {
                let n = usize::from(b & 0x3f);
                (1, n, rest.get(1..1 + n)?.to_vec())
            }
            0xc0..=0xdf => {
                let raw = (u16::from(b & 0x1f) << 8) | u16::from(*rest.get(1)?);
                let v = if raw >= 1 << 12 {
                    i64::from(raw) - (1 << 13)
                } else {
                    i64::from(raw)
                };
                (2, 0, v.to_string().into_bytes())
            }
            0xe0..=0xef => {
                let n = (usize::from(b & 0x0f) << 8) | usize::from(*rest.get(1)?);
                (2, n, rest.get(2..2 + n)?.to_vec())
            }
            0xf0 => {
                let n =
                    usize::try_from(u32::from_le_bytes(rest.get(1..5)?.try_into().ok()?)).ok()?;
                (5, n, rest.get(5..5usize.checked_add(n)?)?.to_vec())
            }
            0xf1..=0xf4 => {
                let width = match b {
                    0xf1 => 2,
                    0xf2 => 3,
                    0xf3 => 4,
                    _ => 8,
                };
                let mut raw = [0u8; 8];
                raw[..width].copy_from_slice(rest.get(1..1 + width)?);
                // Sign-extend from `width` bytes.
                let shift = 64 - 8 * width as u32;
                let v = (i64::from_le_bytes(raw) << shift) >> shift;
                (1 + width, 0, v.to_string().into_bytes())
            }
            _ => return None,
        };
        let entry = head + data_len;
        let back = backlen(entry);
        let end = at.checked_add(entry)?.checked_add(back.len())?;
        if body.get(at + entry..end)? != &back[..] {
            return None;
        }
        each(element)?;
        seen += 1;
        at = end;
    }
    if count != u16::MAX && usize::from(count) != seen {
        return None;
    }
    Some(())
}

/// A listpack entry's trailing length (`lpEncodeBacklen`): 7 bits a byte, the highest
/// first and unflagged, each following one with its top bit set.
pub fn backlen(len: usize) -> Vec<u8> {
    let n = match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    };
    (0..n)
        .map(|i| {
            let v = ((len >> (7 * (n - 1 - i))) & 0x7f) as u8;
            if i == 0 {
                // The highest byte keeps every bit above (at most 4 in the 5-byte form).
                ((len >> (7 * (n - 1))) & 0xff) as u8
            } else {
                v | 0x80
            }
        })
        .collect()
}

/// The elements of a ziplist (`ziplist.c`, Redis 6 and older), integers as their text.
/// `each` may stop the read (`None`).
pub fn ziplist(zl: &[u8], mut each: impl FnMut(Vec<u8>) -> Option<()>) -> Option<()> {
    let total = usize::try_from(u32::from_le_bytes(zl.get(0..4)?.try_into().ok()?)).ok()?;
    let count = u16::from_le_bytes(zl.get(8..10)?.try_into().ok()?);
    if total != zl.len() || zl.last() != Some(&0xff) {
        return None;
    }
    let body = &zl[10..zl.len() - 1];
    let mut at = 0;
    let mut seen = 0usize;
    while at < body.len() {
        // The previous entry's length: 1 byte, or 0xfe and 4 bytes.
        at += match body[at] {
            0xfe => 5,
            0xff => return None,
            _ => 1,
        };
        let b = *body.get(at)?;
        let rest = &body[at..];
        let int = |width: usize| -> Option<i64> {
            let mut raw = [0u8; 8];
            raw[..width].copy_from_slice(rest.get(1..1 + width)?);
            let shift = 64 - 8 * width as u32;
            Some((i64::from_le_bytes(raw) << shift) >> shift)
        };
        let (used, element) = match b {
            0x00..=0x3f => {
                let n = usize::from(b);
                (1 + n, rest.get(1..1 + n)?.to_vec())
            }
            0x40..=0x7f => {
                let n = (usize::from(b & 0x3f) << 8) | usize::from(*rest.get(1)?);
                (2 + n, rest.get(2..2 + n)?.to_vec())
            }
            0x80 => {
                let n =
                    usize::try_from(u32::from_be_bytes(rest.get(1..5)?.try_into().ok()?)).ok()?;
                (5 + n, rest.get(5..5usize.checked_add(n)?)?.to_vec())
            }
            0xc0 => (3, int(2)?.to_string().into_bytes()),
            0xd0 => (5, int(4)?.to_string().into_bytes()),
            0xe0 => (9, int(8)?.to_string().into_bytes()),
            0xf0 => (4, int(3)?.to_string().into_bytes()),
            0xfe => (2, int(1)?.to_string().into_bytes()),
            0xf1..=0xfd => (1, (i64::from(b & 0x0f) - 1).to_string().into_bytes()),
            _ => return None,
        };
        each(element)?;
        seen += 1;
        at += used;
    }
    if count != u16::MAX && usize::from(count) != seen {
        return None;
    }
    Some(())
}

/// The members of an intset (`intset.c`): its width (2, 4 or 8 bytes), its length, then the
/// integers in ascending order, little endian.
pub fn intset(blob: &[u8], budget: &mut Budget) -> Option<Vec<Vec<u8>>> {
    let width = u32::from_le_bytes(blob.get(0..4)?.try_into().ok()?);
    let n = usize::try_from(u32::from_le_bytes(blob.get(4..8)?.try_into().ok()?)).ok()?;
    let width = match width {
        2 | 4 | 8 => width as usize,
        _ => return None,
    };
    if Some(blob.len() - 8) != n.checked_mul(width) {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    let mut last = None;
    for raw in blob[8..].chunks_exact(width) {
        let mut b = [0u8; 8];
        b[..width].copy_from_slice(raw);
        let shift = 64 - 8 * width as u32;
        let v = (i64::from_le_bytes(b) << shift) >> shift;
        if last.is_some_and(|l| l >= v) {
            return None;
        }
        last = Some(v);
        let text = v.to_string().into_bytes();
        budget.element(text.len())?;
        out.push(text);
    }
    Some(out)
}

/// Builds a payload: [`Writer::new`] with the RDB type, the object's parts, then
/// [`Writer::finish`].
pub struct Writer {
    out: Vec<u8>,
    /// Where a count written ahead ([`Writer::count_ahead`]) goes.
    count_at: Option<usize>,
}

impl Writer {
    pub fn new(kind: u8) -> Self {
        Writer {
            out: vec![kind],
            count_at: None,
        }
    }

    /// An RDB length in its shortest form (`rdbSaveLen`).
    pub fn len(&mut self, n: u64) {
        if n < 1 << 6 {
            self.out.push(n as u8);
        } else if n < 1 << 14 {
            self.out.push(0x40 | (n >> 8) as u8);
            self.out.push(n as u8);
        } else if let Ok(n) = u32::try_from(n) {
            self.out.push(0x80);
            self.out.extend_from_slice(&n.to_be_bytes());
        } else {
            self.out.push(0x81);
            self.out.extend_from_slice(&n.to_be_bytes());
        }
    }

    /// Room for a count known once the elements are written: its 64-bit form (any length
    /// may take it), filled by [`Writer::finish`] with `count`.
    pub fn count_ahead(&mut self) {
        self.count_at = Some(self.out.len());
        self.out.extend_from_slice(&[0x81, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    /// The bytes written so far.
    pub fn size(&self) -> usize {
        self.out.len()
    }

    /// A string, raw.
    pub fn string(&mut self, s: &[u8]) {
        self.len(s.len() as u64);
        self.out.extend_from_slice(s);
    }

    /// A score in binary (`ZSET_2`).
    pub fn double(&mut self, d: f64) {
        self.out.extend_from_slice(&d.to_le_bytes());
    }

    /// The payload: the count written ahead (if any), the version and the checksum.
    pub fn finish(mut self, count: u64) -> Vec<u8> {
        if let Some(at) = self.count_at {
            self.out[at + 1..at + 9].copy_from_slice(&count.to_be_bytes());
        }
        self.out.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let crc = crc64(&self.out);
        self.out.extend_from_slice(&crc.to_le_bytes());
        self.out
    }
}

/// `FUNCTION DUMP|RESTORE`'s opcodes of a library (`rdb.h`): Redis 7.0's (its code), and
/// 7.0-rc1/rc2's (name, engine, description, code).
pub const RDB_OPCODE_FUNCTION2: u8 = 245;
pub const RDB_OPCODE_FUNCTION: u8 = 246;

/// `FUNCTION DUMP`'s payload of the libraries' `codes` (`functionDumpCommand`): each code
/// after [`RDB_OPCODE_FUNCTION2`], then the version and the checksum.
pub fn functions_payload<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut w = Writer {
        out: Vec::new(),
        count_at: None,
    };
    for code in codes {
        w.out.push(RDB_OPCODE_FUNCTION2);
        w.string(code);
    }
    w.finish(0)
}

/// The libraries' codes of a `FUNCTION DUMP` payload, in its order, as
/// `functionRestoreCommand` reads them (`rdbFunctionLoad`); `Err`: Redis's text (or
/// manifold's: more than `most` libraries, or more than `limit` bytes decoded in all).
/// Bounded by the payload as [`decode`], never a panic.
pub fn function_codes(payload: &[u8], most: usize, limit: u64) -> Result<Vec<Vec<u8>>, String> {
    verify(payload).map_err(|r| String::from_utf8_lossy(r.text()).into_owned())?;
    let mut r = Reader::new(payload, limit);
    let mut codes = Vec::new();
    // As Redis: read until the last 10 bytes (a library's code may run into them).
    while payload.len() - r.at > 10 {
        let kind = r.byte().ok_or("can not read data type")?;
        if kind != RDB_OPCODE_FUNCTION2 && kind != RDB_OPCODE_FUNCTION {
            return Err("given type is not a function".into());
        }
        if codes.len() >= most {
            return Err(format!("manifold: at most {most} libraries are loaded"));
        }
        let code = if kind == RDB_OPCODE_FUNCTION2 {
            r.field("Failed loading library payload", limit)?
        } else {
            let name = r.field("Failed loading library name", limit)?;
            let engine = r.field("Failed loading engine name", limit)?;
            let has_desc = match r.len_or_encoding() {
                Some(Len::Plain(n)) => n,
                Some(Len::Encoded(n)) => u64::from(n),
                None => return Err("Failed loading library description indicator".into()),
            };
            if has_desc != 0 {
                r.field("Failed loading library description", limit)?;
            }
            let blob = r.field("Failed loading library blob", limit)?;
            // Redis 7.0's form of it: the engine and name in the code's first line.
            let mut code = Vec::with_capacity(blob.len() + name.len() + engine.len() + 9);
            code.extend_from_slice(b"#!");
            code.extend_from_slice(&engine);
            code.extend_from_slice(b" name=");
            code.extend_from_slice(&name);
            code.push(b'\n');
            code.extend_from_slice(&blob);
            code
        };
        codes.push(code);
    }
    Ok(codes)
}

#[path = "rdb/stream.rs"]
pub mod stream;

#[cfg(test)]
#[path = "rdb/tests.rs"]
mod tests;
