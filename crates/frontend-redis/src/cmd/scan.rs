//! What `SCAN`, `HSCAN`, `SSCAN` and `ZSCAN` share: the cursor, the options, the page.
//!
//! Rows are visited in the order of their SHA-256 (`kh`, `fh`, `mh`: the index's order);
//! the cursor is the big-endian `u64` of the first 8 bytes of the next row's hash
//! ([`cursor_of`]), 0 once done; a page resumes at `hash >= ` that prefix followed by zeros
//! ([`cursor_bound`]), reads `COUNT` + 1 rows (at most [`SCAN_MAX`] + 1, [`page_len`]), and
//! `MATCH` (and `SCAN`'s `TYPE`) filter the page after the read, so a page may come back
//! short or empty with a nonzero cursor, as Redis's may. An element there at the start and
//! the end of the iteration is returned (at least once: two whose hashes share 8 bytes may
//! come twice), as Redis promises.
//!
//! Intended differences from Redis 7.0: the cursors are other numbers; `COUNT` is honoured
//! on any collection (Redis returns a small listpack/intset one whole, whatever `COUNT`)
//! and bounded by [`SCAN_MAX`].

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::Reply;

use super::glob::Glob;
use super::typed::ParseError;
use super::{parse_i64, Args};
use crate::errors;
use crate::store::context::Cx;
use crate::store::{bytes, StoreError};

/// A `*SCAN` cursor `strtoul` refuses (`src/db.c`).
pub const INVALID_CURSOR: &[u8] = b"invalid cursor";

/// Most rows one `*SCAN` page reads, whatever `COUNT` asks.
pub const SCAN_MAX: i64 = 10_000;

/// The cursor that resumes an iteration at the row whose hash is `hash` (a `kh`, `fh` or
/// `mh`): the big-endian `u64` of its first 8 bytes; never 0 (which ends an iteration), 1
/// in its place.
pub fn cursor_of(hash: &[u8]) -> u64 {
    let mut first = [0u8; 8];
    for (d, s) in first.iter_mut().zip(hash) {
        *d = *s;
    }
    u64::from_be_bytes(first).max(1)
}

/// The least hash an iteration resumed at `cursor` visits: `WHERE kh >= ?` with this.
pub fn cursor_bound(cursor: u64) -> [u8; 32] {
    let mut bound = [0u8; 32];
    bound[..8].copy_from_slice(&cursor.to_be_bytes());
    bound
}

/// A `SCAN`-family cursor as Redis reads it (`parseScanCursorOrReply`: `strtoul` in base
/// 10, no leading space, nothing after the digits): `None` for `ERR invalid cursor`. A sign
/// is allowed (`-1` is the largest cursor), an empty cursor is 0.
pub fn parse_cursor(s: &[u8]) -> Option<u64> {
    let Some(&first) = s.first() else {
        return Some(0);
    };
    // C's isspace.
    if matches!(first, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        return None;
    }
    let (negative, digits) = match first {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        // No conversion: strtoul points at the start, which is not the end of the text.
        return None;
    }
    // What follows the digits must be the end of the C string.
    if digits.get(end).is_some_and(|&b| b != 0) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in &digits[..end] {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

/// What `SCAN`'s options ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOptions<'a> {
    pub count: i64,
    /// `MATCH`'s pattern (`None` for none or `*`), compiled by [`ScanOptions::glob`].
    pub pattern: Option<&'a [u8]>,
    pub kind: Option<&'a [u8]>,
}

impl ScanOptions<'_> {
    /// The `MATCH` pattern's matcher.
    pub fn glob(&self) -> Option<Glob> {
        self.pattern.map(|p| Glob::new(p, false))
    }
}

/// Parses `[MATCH p] [COUNT n]` (and `[TYPE t]` for `SCAN`: `with_type`) from argument
/// `from` on, in Redis's order of checks; the error text on failure. `MATCH *` is no
/// pattern. `COUNT` is returned as asked: [`page_len`] bounds it.
pub fn scan_options<'a>(
    args: &Args<'a>,
    from: usize,
    with_type: bool,
) -> Result<ScanOptions<'a>, &'static [u8]> {
    let mut o = ScanOptions {
        count: 10,
        pattern: None,
        kind: None,
    };
    let mut i = from;
    while i < args.len() {
        let a = args.get(i);
        let more = i + 1 < args.len();
        if a.eq_ignore_ascii_case(b"count") && more {
            let n = parse_i64(args.get(i + 1)).ok_or(errors::NOT_INTEGER)?;
            if n < 1 {
                return Err(errors::SYNTAX);
            }
            o.count = n;
        } else if a.eq_ignore_ascii_case(b"match") && more {
            let p = args.get(i + 1);
            o.pattern = (p != b"*").then_some(p);
        } else if with_type && a.eq_ignore_ascii_case(b"type") && more {
            o.kind = Some(args.get(i + 1));
        } else {
            return Err(errors::SYNTAX);
        }
        i += 2;
    }
    Ok(o)
}

/// `HSCAN`/`SSCAN`/`ZSCAN key cursor [MATCH p] [COUNT n]`, parsed.
#[derive(Debug, PartialEq)]
pub struct CollectionScan<'a> {
    pub key: &'a [u8],
    pub cursor: u64,
    /// The options, or their refusal, which is answered only after the key's type (Redis's
    /// order: cursor, key, options; a missing key's scan is empty whatever they say).
    pub options: Result<ScanOptions<'a>, ParseError>,
}

impl<'a> CollectionScan<'a> {
    /// Parses the request; refuses a bad cursor at once (Redis's first check).
    pub fn parse(args: Args<'a>) -> Result<Self, ParseError> {
        let cursor = parse_cursor(args.get(2)).ok_or(ParseError::Text(INVALID_CURSOR))?;
        Ok(Self {
            key: args.get(1),
            cursor,
            options: scan_options(&args, 3, false).map_err(ParseError::Text),
        })
    }
}

/// Starts a `*SCAN` reply: `[next cursor, [n elements...]]` (the elements to follow).
pub fn start_reply(r: &mut Reply<'_>, next: u64, n: usize) {
    r.array_len(2)
        .bulk(next.to_string().as_bytes())
        .array_len(n);
}

/// The `LIMIT` of a page of `count` rows: one more, to know where the next page starts.
pub fn page_len(count: i64) -> usize {
    usize::try_from(count.clamp(1, SCAN_MAX)).unwrap_or(1)
}

/// Cuts `rows` (read with `LIMIT page + 1`, ordered by the hash in column `col`) to `page`
/// rows: the cursor of the next page, 0 when there is none.
pub fn split_page(rows: &mut Vec<Vec<Value>>, page: usize, col: usize) -> u64 {
    let next = rows
        .get(page)
        .and_then(|r| r.get(col))
        .and_then(bytes)
        .map_or(0, |h| cursor_of(&h));
    rows.truncate(page);
    next
}

/// What a collection's `*SCAN` read: the next cursor, the page's rows, the `MATCH` pattern.
pub struct Page {
    pub next: u64,
    pub rows: Vec<Vec<Value>>,
    pub pattern: Option<Glob>,
}

/// A collection's `*SCAN` (of type `kind`), in Redis's order of checks (cursor, key type,
/// options): reads one page with `sql`, a `SELECT <hash>, ... WHERE kid = ? AND <hash> >= ?
/// ORDER BY <hash> LIMIT ?`. `None` once replied (an error, or the empty scan of a missing
/// key).
pub async fn collection_scan(
    cx: &mut Cx<'_>,
    scan: CollectionScan<'_>,
    kind: u8,
    sql: &str,
) -> Result<Option<Page>, StoreError> {
    let Some(row) = super::checks::read(cx, scan.key, kind).await? else {
        return Ok(None);
    };
    let Some(row) = row else {
        start_reply(&mut cx.reply(), 0, 0);
        return Ok(None);
    };
    let o = match scan.options {
        Ok(o) => o,
        Err(e) => {
            e.reply(cx);
            return Ok(None);
        }
    };
    let page = page_len(o.count);
    let mut rows = cx
        .tx
        .rows(
            sql,
            &[
                Param::UInt(row.kid),
                Param::Bytes(&cursor_bound(scan.cursor)),
                Param::UInt(page as u64 + 1),
            ],
        )
        .await?;
    let next = split_page(&mut rows, page, 0);
    Ok(Some(Page {
        next,
        rows,
        pattern: o.glob(),
    }))
}

#[cfg(test)]
mod tests {
    use super::{cursor_bound, cursor_of, parse_cursor};

    #[test]
    fn cursors() {
        let mut h = [0u8; 32];
        h[..8].copy_from_slice(&0x0102_0304_0506_0708_u64.to_be_bytes());
        h[8] = 0xff;
        assert_eq!(cursor_of(&h), 0x0102_0304_0506_0708);
        assert_eq!(&cursor_bound(cursor_of(&h))[..8], &h[..8]);
        assert!(cursor_bound(cursor_of(&h))[..] <= h[..]);
        assert_eq!(
            cursor_of(&[0u8; 32]),
            1,
            "0 ends an iteration: never a cursor"
        );
        assert_eq!(cursor_of(&[]), 1);
        assert_eq!(cursor_bound(0), [0u8; 32]);
    }

    #[test]
    fn cursors_as_strtoul_reads_them() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"007"), Some(7));
        assert_eq!(parse_cursor(b"+5"), Some(5));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"-0"), Some(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"5\0junk"), Some(5), "C stops at the NUL");
        for bad in [
            &b"18446744073709551616"[..],
            b" 1",
            b"\x0b1",
            b"1 ",
            b"x",
            b"-",
            b"+",
            b"0x10",
            b"--1",
            b"1.5",
        ] {
            assert_eq!(parse_cursor(bad), None, "{bad:?}");
        }
    }
}
