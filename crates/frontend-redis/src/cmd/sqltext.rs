//! Statement texts with `?` lists, shared by the families: a batch of `n` keys, fields or
//! members is padded to a power of two (repeating an element), so each statement comes in
//! few shapes (1, 2, 4 ... [`RUN_MAX`] elements), each built once and prepared once per
//! connection. Only constants go into these texts: values are always bound.

use std::sync::OnceLock;

use manifold_backend::Param;

use crate::store::context::{Cx, RUN_MAX};
use crate::store::StoreError;

/// `n` rounded up to a power of two (1 for 0).
pub fn padded(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

/// `?, ?, ...`: `n` marks.
pub fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// `tuple, tuple, ...`: `n` times the row `tuple` (e.g. `(?, ?, ?)`).
pub fn tuples(tuple: &str, n: usize) -> String {
    vec![tuple; n].join(", ")
}

/// The statement `make(n)` for `n` (a power of two up to [`RUN_MAX`]) elements, built once
/// into `cell`.
pub fn shape(
    cell: &'static OnceLock<Vec<String>>,
    make: fn(usize) -> String,
    n: usize,
) -> &'static str {
    let all = cell.get_or_init(|| {
        (0..=RUN_MAX.trailing_zeros())
            .map(|p| make(1 << p))
            .collect()
    });
    all.get(n.trailing_zeros() as usize)
        .or(all.last())
        .map_or("", String::as_str)
}

/// Defines `fn name(n: usize) -> &'static str`: the statement `text` whose `{}` is `list`
/// (`marks(n)`, `tuples(row, n)`) for `n` elements, built once per shape ([`shape`]):
///
/// ```ignore
/// statement! {
///     /// Which of `n` fields are there.
///     fn present_in = "SELECT fh FROM {{s}}.redis_hash WHERE kid = ? AND fh IN ({})", |n| marks(n)
/// }
/// ```
macro_rules! statement {
    ($(#[$doc:meta])* $vis:vis fn $name:ident = $text:literal, |$n:ident| $list:expr) => {
        $(#[$doc])*
        $vis fn $name(n: usize) -> &'static str {
            static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
            $crate::cmd::sqltext::shape(&SQL, |$n| format!($text, $list), n)
        }
    };
}
pub(crate) use statement;

/// The parameters of a statement `... WHERE kid = ? AND xh IN (?, ...)` of `n` marks: `head`,
/// then the hashes of `chunk` (not empty), padded to `n` by repeating its last.
pub fn in_params<'a>(head: Param<'a>, chunk: &'a [[u8; 32]], n: usize) -> Vec<Param<'a>> {
    let mut params = Vec::with_capacity(n + 1);
    params.push(head);
    let last = chunk.len().saturating_sub(1);
    params.extend((0..n).filter_map(|i| chunk.get(i.min(last)).map(|h| Param::Bytes(h))));
    params
}

/// Most rows in one `INSERT` (statement shapes: the powers of two up to this).
pub const INSERT_MAX: usize = 64;
/// Bytes of values past which an `INSERT` takes no further row.
pub const INSERT_BYTES: usize = 1 << 22;

/// Inserts `rows` in statements of a power-of-two count of rows (few shapes), at most
/// [`INSERT_MAX`] rows and about [`INSERT_BYTES`] each; `push` adds a row's `width`
/// parameters.
pub async fn insert_rows<'r, T>(
    cx: &mut Cx<'_>,
    rows: &'r [T],
    size: impl Fn(&T) -> usize,
    width: usize,
    sql: fn(usize) -> &'static str,
    push: impl Fn(&'r T, &mut Vec<Param<'r>>),
) -> Result<(), StoreError> {
    let mut rest = rows;
    while !rest.is_empty() {
        let mut n = 0;
        let mut bytes = 0usize;
        while n < rest.len()
            && n < INSERT_MAX
            && (n == 0 || bytes.saturating_add(size(&rest[n])) <= INSERT_BYTES)
        {
            bytes = bytes.saturating_add(size(&rest[n]));
            n += 1;
        }
        let n = 1usize << n.ilog2();
        let (chunk, tail) = rest.split_at(n);
        let mut params = Vec::with_capacity(n * width);
        for row in chunk {
            push(row, &mut params);
        }
        cx.tx.exec(sql(n), &params).await?;
        rest = tail;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        static SQL: OnceLock<Vec<String>> = OnceLock::new();
        assert_eq!(padded(0), 1);
        assert_eq!(padded(3), 4);
        assert_eq!(padded(128), 128);
        assert_eq!(marks(3), "?, ?, ?");
        assert_eq!(tuples("(?, ?)", 2), "(?, ?), (?, ?)");
        let make = |n| format!("IN ({})", marks(n));
        assert_eq!(shape(&SQL, make, 1), "IN (?)");
        assert_eq!(shape(&SQL, make, 4), "IN (?, ?, ?, ?)");
    }

    statement! {
        /// A test statement.
        fn deletes = "DELETE FROM t WHERE x IN ({})", |n| marks(n)
    }

    #[test]
    fn statements_and_their_parameters() {
        assert_eq!(deletes(2), "DELETE FROM t WHERE x IN (?, ?)");
        assert_eq!(deletes(1), "DELETE FROM t WHERE x IN (?)");
        let hashes = [[1u8; 32], [2u8; 32], [3u8; 32]];
        let params = in_params(Param::UInt(7), &hashes, 4);
        assert_eq!(params.len(), 5);
        assert!(matches!(params[0], Param::UInt(7)));
        assert!(matches!(params[3], Param::Bytes(b) if b == [3u8; 32]));
        assert!(matches!(params[4], Param::Bytes(b) if b == [3u8; 32]));
    }
}
