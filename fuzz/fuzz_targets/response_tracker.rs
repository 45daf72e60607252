#![no_main]
//! The relay's view of a backend answer, fed in arbitrary chunk sizes.
use libfuzzer_sys::fuzz_target;
use manifold_mysql_proto::{ResponseKind, ResponseTracker};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let kinds = [ResponseKind::Single, ResponseKind::ResultSets, ResponseKind::Rows, ResponseKind::Prepare, ResponseKind::FieldList, ResponseKind::Raw];
    let mut t = ResponseTracker::new(kinds[usize::from(selector) % kinds.len()], selector & 0x80 != 0, 1);
    let chunk = usize::from(selector % 7) + 1;
    let mut pos = 0;
    while pos < rest.len() {
        let end = (pos + chunk).min(rest.len());
        match t.feed(&rest[pos..end]) {
            Ok((n, _)) if n > 0 => pos += n,
            _ => break,
        }
    }
});
