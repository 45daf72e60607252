//! Commands on keys of any type: `DEL`, `UNLINK`, `EXISTS`, `TYPE`, `TOUCH`, `DBSIZE`,
//! `KEYS`, `SCAN`, `RANDOMKEY` here; `RENAME`, `RENAMENX`, `COPY`, `FLUSHDB`, `FLUSHALL` in
//! [`super::rename`]. Every one works on the client's `SELECT`ed database (the `db` column).
//!
//! Iteration (`SCAN`, and the cursor the `HSCAN`/`SSCAN`/`ZSCAN` of the other families
//! share): rows are visited in the order of their SHA-256 (`kh`, the index's order); the
//! cursor is the big-endian `u64` of the first 8 bytes of the next row's hash
//! ([`cursor_of`]), 0 once done; a page resumes at `kh >= ` that prefix followed by zeros
//! ([`cursor_bound`]). A key there at the start and the end of the iteration is returned
//! (at least once: two keys whose hashes share 8 bytes may come twice), as Redis promises.
//!
//! Costs: `KEYS`, `DBSIZE` read every row of the database (its index range); `SCAN` reads
//! `COUNT` + 1 rows of the index per call; `RANDOMKEY` one row at a random hash.
//!
//! Intended differences from Redis 7.0:
//! - `SCAN`'s cursors are other numbers than Redis's (its order is the hashes', not the
//!   hash table's), and a page holds `COUNT` keys before `MATCH`/`TYPE` filter them (at most
//!   10000 per call); the set of keys an iteration returns is Redis's;
//! - `KEYS` returns the keys in hash order, Redis in its table's order (both unspecified);
//! - `DBSIZE` counts live keys only; Redis counts the expired keys it did not reclaim yet;
//! - `RANDOMKEY` draws among the hashes: not every key with the same chance (as Redis's
//!   draw is not either).

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use manifold_backend::Param;

use super::data::{Family, Spec};
use super::glob::Glob;
use super::{parse_i64, Args};
use crate::errors;
use crate::exec::Cx;
use crate::store::keys::type_name;
use crate::store::{bytes, int, take_bytes, StoreError};

const fn spec(name: &'static str, arity: i32, write: bool) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Keys,
    }
}

pub static COMMANDS: [Spec; 14] = [
    spec("del", -2, true),
    spec("unlink", -2, true),
    spec("exists", -2, false),
    spec("type", 2, false),
    spec("touch", -2, false),
    spec("dbsize", 1, false),
    spec("keys", 2, false),
    spec("scan", -2, false),
    spec("randomkey", 1, false),
    spec("rename", 3, true),
    spec("renamenx", 3, true),
    spec("copy", -3, true),
    spec("flushdb", -1, true),
    spec("flushall", -1, true),
];

/// `SCAN` with a cursor `strtoul` refuses (`src/db.c`).
pub const INVALID_CURSOR: &[u8] = b"invalid cursor";

/// Most rows one `SCAN` page reads, whatever `COUNT` asks.
pub const SCAN_MAX: i64 = 10_000;

/// Runs one key command.
pub async fn run(cx: &mut Cx<'_>, spec: &'static Spec, args: Args<'_>) -> Result<(), StoreError> {
    match spec.name {
        "del" | "unlink" => {
            let mut n = 0;
            for k in args.from(1) {
                if let Some(row) = cx.tx.key_meta(cx.db, k, true).await? {
                    cx.tx.delete_key(cx.db, k, &row).await?;
                    n += 1;
                }
            }
            cx.reply().integer(n);
        }
        // `TOUCH` only counts here: there is no access time to update.
        "exists" | "touch" => {
            let mut n = 0;
            for k in args.from(1) {
                if cx.tx.key_meta(cx.db, k, false).await?.is_some() {
                    n += 1;
                }
            }
            cx.reply().integer(n);
        }
        "type" => {
            let t = cx
                .tx
                .key_meta(cx.db, args.get(1), false)
                .await?
                .map_or("none", |r| type_name(r.kind));
            cx.reply().simple(t.as_bytes());
        }
        "dbsize" => dbsize(cx).await?,
        "keys" => keys(cx, args.get(1)).await?,
        "scan" => scan(cx, args).await?,
        "randomkey" => randomkey(cx).await?,
        "rename" | "renamenx" => super::rename::rename(cx, args, spec.name == "renamenx").await?,
        "copy" => super::rename::copy(cx, args).await?,
        "flushdb" | "flushall" => super::rename::flush(cx, args, spec.name == "flushall").await?,
        other => unreachable!("{other} is not a key command"),
    }
    Ok(())
}

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

/// The live keys of the client's database, `COUNT(*)` over its index range.
async fn dbsize(cx: &mut Cx<'_>) -> Result<(), StoreError> {
    let rows = cx
        .tx
        .rows(
            "SELECT COUNT(*) FROM {s}.redis_keys WHERE db = ? AND (expire_at IS NULL OR expire_at > ?)",
            &[Param::UInt(u64::from(cx.db)), Param::Int(cx.now_ms())],
        )
        .await?;
    let n = rows
        .first()
        .and_then(|r| r.first())
        .and_then(int)
        .unwrap_or(0);
    cx.reply().integer(n);
    Ok(())
}

/// `KEYS pattern`: every live key of the database, matched here.
async fn keys(cx: &mut Cx<'_>, pattern: &[u8]) -> Result<(), StoreError> {
    let rows = cx
        .tx
        .rows(
            "SELECT k FROM {s}.redis_keys WHERE db = ? AND (expire_at IS NULL OR expire_at > ?)",
            &[Param::UInt(u64::from(cx.db)), Param::Int(cx.now_ms())],
        )
        .await?;
    // `*` alone matches every key, the empty one too (Redis skips the matcher).
    let glob = (pattern != b"*").then(|| Glob::new(pattern, false));
    let found: Vec<Vec<u8>> = rows
        .into_iter()
        .filter_map(|mut r| r.get_mut(0).and_then(take_bytes))
        .filter(|k| glob.as_ref().is_none_or(|g| g.matches(k)))
        .collect();
    let mut r = cx.reply();
    r.array_len(found.len());
    for k in &found {
        r.bulk(k);
    }
    Ok(())
}

/// What `SCAN`'s options ask.
struct ScanOptions<'a> {
    count: i64,
    pattern: Option<&'a [u8]>,
    kind: Option<&'a [u8]>,
}

/// Parses `SCAN cursor [MATCH p] [COUNT n] [TYPE t]` options from argument `from` on, in
/// Redis's order of checks; the error text on failure.
fn scan_options<'a>(args: &Args<'a>, from: usize) -> Result<ScanOptions<'a>, &'static [u8]> {
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
        } else if a.eq_ignore_ascii_case(b"type") && more {
            o.kind = Some(args.get(i + 1));
        } else {
            return Err(errors::SYNTAX);
        }
        i += 2;
    }
    Ok(o)
}

/// `SCAN cursor [MATCH p] [COUNT n] [TYPE t]`: `COUNT` live rows from the cursor on in hash
/// order, filtered by `MATCH` and `TYPE` after the read (a page may be empty).
async fn scan(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let Some(cursor) = parse_cursor(args.get(1)) else {
        cx.reply().error(INVALID_CURSOR);
        return Ok(());
    };
    let o = match scan_options(&args, 2) {
        Ok(o) => o,
        Err(text) => {
            cx.reply().error(text);
            return Ok(());
        }
    };
    let count = o.count.min(SCAN_MAX);
    let bound = cursor_bound(cursor);
    let mut rows = cx
        .tx
        .rows(
            "SELECT kh, k, type FROM {s}.redis_keys WHERE db = ? AND kh >= ? \
             AND (expire_at IS NULL OR expire_at > ?) ORDER BY kh LIMIT ?",
            &[
                Param::UInt(u64::from(cx.db)),
                Param::Bytes(&bound),
                Param::Int(cx.now_ms()),
                Param::Int(count + 1),
            ],
        )
        .await?;
    let page = usize::try_from(count).unwrap_or(usize::MAX);
    let next = match rows.get(page) {
        Some(row) => row.first().and_then(bytes).map_or(0, |kh| cursor_of(&kh)),
        None => 0,
    };
    rows.truncate(page);
    let glob = o.pattern.map(|p| Glob::new(p, false));
    let found: Vec<Vec<u8>> = rows
        .into_iter()
        .filter_map(|mut r| {
            let t = r
                .get(2)
                .and_then(int)
                .map_or("none", |t| u8::try_from(t).map_or("none", type_name));
            let k = r.get_mut(1).and_then(take_bytes)?;
            let wanted = glob.as_ref().is_none_or(|g| g.matches(&k))
                && o.kind
                    .is_none_or(|want| want.eq_ignore_ascii_case(t.as_bytes()));
            wanted.then_some(k)
        })
        .collect();
    let next = next.to_string();
    let mut r = cx.reply();
    r.array_len(2).bulk(next.as_bytes()).array_len(found.len());
    for k in &found {
        r.bulk(k);
    }
    Ok(())
}

/// A number no two calls of a process share, for `RANDOMKEY`'s draws.
fn random_u64() -> u64 {
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static STATE: RandomState = RandomState::new();
    }
    let n = DRAWS.fetch_add(1, Ordering::Relaxed);
    STATE.with(|s| s.hash_one(n))
}

/// `RANDOMKEY`: the first live key from a random hash on (from the start if none follows).
async fn randomkey(cx: &mut Cx<'_>) -> Result<(), StoreError> {
    let bound = cursor_bound(random_u64());
    let db = u64::from(cx.db);
    let now = cx.now_ms();
    let mut rows = cx
        .tx
        .rows(
            "SELECT k FROM {s}.redis_keys WHERE db = ? AND kh >= ? \
             AND (expire_at IS NULL OR expire_at > ?) ORDER BY kh LIMIT 1",
            &[Param::UInt(db), Param::Bytes(&bound), Param::Int(now)],
        )
        .await?;
    if rows.is_empty() {
        rows = cx
            .tx
            .rows(
                "SELECT k FROM {s}.redis_keys WHERE db = ? \
                 AND (expire_at IS NULL OR expire_at > ?) ORDER BY kh LIMIT 1",
                &[Param::UInt(db), Param::Int(now)],
            )
            .await?;
    }
    match rows
        .into_iter()
        .next()
        .and_then(|mut r| r.get_mut(0).and_then(take_bytes))
    {
        Some(k) => cx.reply().bulk(&k),
        None => cx.reply().null(),
    };
    Ok(())
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
