//! Statement texts with `?` lists, shared by the families: a batch of `n` keys, fields or
//! members is padded to a power of two (repeating an element), so each statement comes in
//! few shapes (1, 2, 4 ... [`RUN_MAX`] elements), each built once and prepared once per
//! connection. Only constants go into these texts: values are always bound.

use std::sync::OnceLock;

use crate::exec::RUN_MAX;

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
}
