//! `APPEND`, `STRLEN`, `GETRANGE` (and its old name `SUBSTR`), `SETRANGE`.

use manifold_backend::Param;

use super::{insert_value, store_value};
use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::{hash, kind};
use crate::store::{int, StoreError};

/// A result longer than `proto-max-bulk-len`.
const TOO_BIG: &[u8] = b"string exceeds maximum allowed size (proto-max-bulk-len)";
/// Redis's `checkStringLength`: `size + append` bytes are allowed (`proto-max-bulk-len`).
fn fits(size: u64, append: u64) -> bool {
    size.checked_add(append)
        .is_some_and(|t| t <= super::max_value_len())
}

/// `APPEND key value`: the new length.
pub async fn append(cx: &mut Cx<'_>, k: &[u8], tail: &[u8]) -> Result<(), StoreError> {
    let new = match cx.tx.key(cx.db, k, true).await? {
        None => {
            insert_value(cx, k, tail, None).await?;
            cx.reply().integer(tail.len() as i64);
            return Ok(());
        }
        Some(row) if row.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
            return Ok(());
        }
        Some(row) => {
            let mut v = row.v.unwrap_or_default();
            if !fits(v.len() as u64, tail.len() as u64) {
                cx.reply().error(TOO_BIG);
                return Ok(());
            }
            v.extend_from_slice(tail);
            v
        }
    };
    super::update_value(cx, k, &new).await?;
    cx.reply().integer(new.len() as i64);
    Ok(())
}

/// `STRLEN key`: the length, read by the server (`LENGTH(v)`).
pub async fn strlen(cx: &mut Cx<'_>, k: &[u8]) -> Result<(), StoreError> {
    let kh = hash(k);
    let rows = cx
        .tx
        .rows(
            "SELECT type, LENGTH(v), expire_at FROM {s}.redis_keys WHERE db = ? AND kh = ?",
            &[Param::UInt(u64::from(cx.db)), Param::Bytes(&kh)],
        )
        .await?;
    let now = cx.now_ms();
    match rows.first() {
        Some(r) if r.len() >= 3 && int(&r[2]).is_none_or(|at| at > now) => {
            if int(&r[0]) == Some(i64::from(kind::STRING)) {
                cx.reply().integer(int(&r[1]).unwrap_or(0));
            } else {
                cx.reply().error(errors::WRONGTYPE);
            }
        }
        _ => {
            cx.reply().integer(0);
        }
    }
    Ok(())
}

/// `GETRANGE key start end`: negative indexes count from the end, as Redis.
pub async fn getrange(cx: &mut Cx<'_>, k: &[u8], start: i64, end: i64) -> Result<(), StoreError> {
    let v = match cx.tx.key(cx.db, k, false).await? {
        None => {
            cx.reply().bulk(b"");
            return Ok(());
        }
        Some(row) if row.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
            return Ok(());
        }
        Some(row) => row.v.unwrap_or_default(),
    };
    cx.reply().bulk(range(&v, start, end));
    Ok(())
}

/// Redis's `getrangeCommand` arithmetic.
fn range(v: &[u8], start: i64, end: i64) -> &[u8] {
    let len = v.len() as i128;
    let (mut s, mut e) = (i128::from(start), i128::from(end));
    if s < 0 && e < 0 && s > e {
        return b"";
    }
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    s = s.max(0);
    e = e.max(0).min(len - 1);
    if s > e || len == 0 {
        return b"";
    }
    v.get(s as usize..=e as usize).unwrap_or_default()
}

/// `SETRANGE key offset value`: the new length.
pub async fn setrange(
    cx: &mut Cx<'_>,
    k: &[u8],
    offset: u64,
    part: &[u8],
) -> Result<(), StoreError> {
    let row = cx.tx.key(cx.db, k, true).await?;
    let mut v = match row {
        Some(ref r) if r.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
            return Ok(());
        }
        Some(ref r) => r.v.clone().unwrap_or_default(),
        None => Vec::new(),
    };
    if part.is_empty() {
        cx.reply().integer(v.len() as i64);
        return Ok(());
    }
    if !fits(offset, part.len() as u64) {
        cx.reply().error(TOO_BIG);
        return Ok(());
    }
    // Both fit in `proto-max-bulk-len`.
    let (at, end) = (offset as usize, offset as usize + part.len());
    if v.len() < end {
        v.resize(end, 0);
    }
    v[at..end].copy_from_slice(part);
    store_value(cx, k, row.is_some(), &v).await?;
    cx.reply().integer(v.len() as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::range;

    #[test]
    fn getrange_indexes() {
        let v = b"This is a string";
        assert_eq!(range(v, 0, 3), b"This");
        assert_eq!(range(v, -3, -1), b"ing");
        assert_eq!(range(v, 0, -1), v);
        assert_eq!(range(v, 10, 100), b"string");
        assert_eq!(range(v, -1, -5), b"");
        assert_eq!(range(v, 5, 3), b"");
        assert_eq!(range(v, i64::MIN, i64::MAX), v);
        assert_eq!(range(b"", 0, -1), b"");
    }
}
