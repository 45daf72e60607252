//! Statement digests: the text with its literals replaced by `?`, so that statements that
//! differ only in their values share one digest for routing rules and statistics.

use crate::lexer::{Lexer, Token, Visitor};
use crate::memo::Resumable;

/// Digest text is cut at this length, as statistics need no more to tell statements apart.
pub const MAX_DIGEST_TEXT: usize = 2048;

/// Writes the digest text of `sql` into `out` (cleared first; its capacity is reused, so a
/// caller keeping one buffer allocates nothing once it has grown) and returns its 64-bit hash.
///
/// - Strings and numbers become `?`; a sign right before a number belongs to it after
///   punctuation other than `)` (`id=-5` → `id=?`, `IN (-1)` → `IN (?)`), and is an
///   operator after a word or value (`a -1` → `a -?`).
/// - A list of literals becomes `?,...`: `IN (1,2,3)` and `IN (1)` differ, `IN (1,2)` and
///   `IN (1,2,3)` do not.
/// - Comments go; executable comments' contents stay, as the server runs them. Tokens keep
///   their spelling and are separated by one space where the text had any, none after `(`
///   or `,` or before `)` or `,`.
pub fn digest(sql: &[u8], out: &mut Vec<u8>) -> u64 {
    let mut writer = DigestWriter::new(sql, out);
    Lexer::new(sql).visit(&mut writer);
    writer.finish()
}

/// Builds a digest text token by token (so that [`scan_with_digest`](crate::scan_with_digest)
/// needs one pass over the text). Most of a statement is copied as it is: runs of tokens
/// the digest keeps, with the separators it would write, are copied as one slice when
/// something else comes.
pub(crate) struct DigestWriter<'s, 'o> {
    sql: &'s [u8],
    out: &'o mut Vec<u8>,
    /// `sql[span..prev_end]` is digest text not yet copied to `out`.
    span: usize,
    prev_end: usize,
    /// The digest text so far is empty or ends with `(` or `,`: no space follows.
    tight_after: bool,
    /// The previous token was a value or closed one (a sign after it is a binary minus).
    after_operand: bool,
    /// Where a `-` or `+` stands that starts a number if a number follows right after it
    /// ([`NO_SIGN`] when none does).
    sign: usize,
}

const NO_SIGN: usize = usize::MAX;

/// Where a [`DigestWriter`] stands between two tokens (see [`ScanMemo`](crate::ScanMemo)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DigestState {
    /// The length of the digest text written so far.
    pub(crate) out_len: usize,
    /// That text ends with `...,`, which the next value may shorten.
    pub(crate) ends_folded: bool,
    span: usize,
    prev_end: usize,
    tight_after: bool,
    after_operand: bool,
    sign: usize,
}

impl<'s, 'o> DigestWriter<'s, 'o> {
    /// Goes on from `state` in `sql`, whose text up to `state` is the one `state` was taken
    /// in, with `out` holding the digest text written up to there.
    pub(crate) fn resume(sql: &'s [u8], out: &'o mut Vec<u8>, state: DigestState) -> Self {
        debug_assert_eq!(out.len(), state.out_len);
        DigestWriter {
            sql,
            out,
            span: state.span,
            prev_end: state.prev_end,
            tight_after: state.tight_after,
            after_operand: state.after_operand,
            sign: state.sign,
        }
    }

    /// The digest text written so far.
    pub(crate) fn text(&self) -> &[u8] {
        self.out
    }

    pub(crate) fn new(sql: &'s [u8], out: &'o mut Vec<u8>) -> Self {
        out.clear();
        DigestWriter {
            sql,
            out,
            span: 0,
            prev_end: 0,
            tight_after: true,
            after_operand: false,
            sign: NO_SIGN,
        }
    }

    /// A token the digest keeps as it is spelled: a word, name or variable.
    #[inline]
    fn name(&mut self, t: &Token<'_>) {
        self.sign = NO_SIGN;
        self.keep(t.start, t.start + t.text.len(), false);
        self.tight_after = false;
        self.after_operand = true;
    }

    /// A token the digest keeps as it is spelled, at `sql[start..end]`; `tight` when no
    /// space goes before it.
    #[inline]
    fn keep(&mut self, start: usize, end: usize, tight: bool) {
        let prev_end = std::mem::replace(&mut self.prev_end, end);
        // Right after the previous token: written as it is.
        if start == prev_end {
            return;
        }
        let space = !tight && !self.tight_after;
        if space && start == prev_end + 1 && self.sql.get(prev_end) == Some(&b' ') {
            return;
        }
        self.flush_to(prev_end);
        if space && self.out.len() < MAX_DIGEST_TEXT {
            self.out.push(b' ');
        }
        self.span = start;
    }

    /// Copies the pending run up to `to` (short of its end when a sign turned out to start
    /// a value), no further than the digest's length limit.
    #[inline]
    fn flush_to(&mut self, to: usize) {
        let room = (MAX_DIGEST_TEXT + 1).saturating_sub(self.out.len());
        let to = to.min(self.span + room);
        if to > self.span {
            self.out.extend_from_slice(&self.sql[self.span..to]);
        }
        self.span = to;
    }

    /// A value at `t` becomes `?`, or folds into the list it continues.
    #[inline]
    fn value(&mut self, t: &Token<'_>) {
        self.sign = NO_SIGN;
        let gap = t.start != self.prev_end;
        self.flush_to(self.prev_end);
        self.literal(gap, t.start + t.text.len());
    }

    /// A value ending at `end` becomes `?`, or folds into the list it continues; `gap` when
    /// space or a comment came before it.
    fn literal(&mut self, gap: bool, end: usize) {
        self.after_operand = true;
        self.tight_after = false;
        self.span = end;
        self.prev_end = end;
        let out = &mut *self.out;
        if out.len() >= MAX_DIGEST_TEXT {
            return;
        }
        if out.ends_with(b"...,") {
            out.pop();
        } else if out.ends_with(b"?,") {
            out.extend_from_slice(b"...");
        } else {
            if gap && !matches!(out.last(), None | Some(b'(' | b',')) {
                out.push(b' ');
            }
            out.push(b'?');
        }
    }

    pub(crate) fn finish(mut self) -> u64 {
        self.flush_to(self.prev_end);
        self.out.truncate(MAX_DIGEST_TEXT);
        digest_hash(self.out)
    }
}

impl Resumable for DigestWriter<'_, '_> {
    type State = DigestState;

    fn state(&self) -> DigestState {
        DigestState {
            out_len: self.out.len(),
            ends_folded: self.out.ends_with(b"...,"),
            span: self.span,
            prev_end: self.prev_end,
            tight_after: self.tight_after,
            after_operand: self.after_operand,
            sign: self.sign,
        }
    }
}

impl<'a> Visitor<'a> for DigestWriter<'_, '_> {
    #[inline]
    fn word(&mut self, t: Token<'a>) {
        self.name(&t);
    }

    #[inline]
    fn quoted_ident(&mut self, t: Token<'a>) {
        self.name(&t);
    }

    #[inline]
    fn user_var(&mut self, t: Token<'a>) {
        self.name(&t);
    }

    #[inline]
    fn sys_var(&mut self, t: Token<'a>) {
        self.name(&t);
    }

    // Not inlined on its own, this is a call per comma and parenthesis.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn punct(&mut self, t: Token<'a>, c: u8) {
        self.sign = NO_SIGN;
        if matches!(c, b'-' | b'+') && !self.after_operand {
            self.keep(t.start, t.start + 1, false);
            self.sign = t.start;
            self.tight_after = false;
        } else {
            self.keep(t.start, t.start + 1, matches!(c, b')' | b','));
            self.tight_after = matches!(c, b'(' | b',');
            // After a word a sign is taken as a minus: telling keywords (`= -1`, `IN (-1)`
            // are after punctuation anyway) from names would cost a lookup per word, and
            // the digest only has to treat every value alike, which it does either way.
            self.after_operand = c == b')';
        }
    }

    #[inline]
    fn number(&mut self, t: Token<'a>) {
        let sign = std::mem::replace(&mut self.sign, NO_SIGN);
        if sign != NO_SIGN && t.start == self.prev_end {
            // The sign and the number are one value; what came before the sign stays.
            self.flush_to(sign);
            self.literal(false, t.start + t.text.len());
        } else {
            self.value(&t);
        }
    }

    #[inline]
    fn string(&mut self, t: Token<'a>) {
        self.value(&t);
    }

    #[inline]
    fn unterminated(&mut self, t: Token<'a>) {
        self.value(&t);
    }
}

/// The 64-bit hash of a digest text: eight bytes per multiply, then a final mix so that
/// every bit of the text reaches every bit of the hash. Quick on the short texts digests
/// are and good enough to key a statistics table; not for anything an attacker may aim at.
pub fn digest_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let load8 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    let load4 = |at: usize| {
        u64::from(u32::from_le_bytes(
            bytes[at..at + 4].try_into().expect("four bytes"),
        ))
    };
    let n = bytes.len();
    let mut h = (n as u64).wrapping_mul(K);
    let mut at = 0;
    while at + 8 < n {
        h = (h.rotate_left(23) ^ load8(at)).wrapping_mul(K);
        at += 8;
    }
    // The last one to eight bytes, read in fixed-size loads that may overlap bytes already
    // hashed (the length, hashed first, keeps texts apart).
    let last = match n {
        0 => 0,
        1..=3 => u64::from(bytes[0]) | u64::from(bytes[n / 2]) << 8 | u64::from(bytes[n - 1]) << 16,
        4..=7 => load4(0) | load4(n - 4) << 32,
        _ => load8(n - 8),
    };
    h = (h.rotate_left(23) ^ last).wrapping_mul(K);
    // The finaliser of MurmurHash3.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(sql: &str) -> String {
        let mut out = Vec::new();
        digest(sql.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn literals_become_placeholders() {
        assert_eq!(
            d("SELECT c FROM sbtest1 WHERE id=5001"),
            "SELECT c FROM sbtest1 WHERE id=?"
        );
        assert_eq!(
            d("SELECT  c\n FROM t /* note */ WHERE a = 'x''y' AND b=-1.5e3 AND c = d - 1"),
            "SELECT c FROM t WHERE a = ? AND b=? AND c = d - ?"
        );
        assert_eq!(
            d("UPDATE t SET k=k+1 WHERE id=7"),
            "UPDATE t SET k=k+? WHERE id=?"
        );
        assert_eq!(d("SELECT f( 1 , 'a' ), g(x)"), "SELECT f(?,...),g(x)");
        assert_eq!(d("SELECT -1"), "SELECT -?");
        assert_eq!(d("SELECT @a, @@sql_mode"), "SELECT @a,@@sql_mode");
    }

    #[test]
    fn lists_fold() {
        assert_eq!(
            d("SELECT * FROM t WHERE id IN (1)"),
            "SELECT * FROM t WHERE id IN (?)"
        );
        assert_eq!(
            d("SELECT * FROM t WHERE id IN (1, 2, 3, 4)"),
            d("SELECT * FROM t WHERE id IN (5,6)")
        );
        assert_eq!(
            d("INSERT INTO t VALUES (1,'a'),(2,'b')"),
            "INSERT INTO t VALUES (?,...),(?,...)"
        );
    }

    #[test]
    fn same_shape_same_hash() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        assert_eq!(
            digest(b"SELECT c FROM t WHERE id=1", &mut a),
            digest(b"SELECT c FROM t WHERE id=22", &mut b)
        );
        assert_ne!(
            digest(b"SELECT c FROM t WHERE id=1", &mut a),
            digest(b"SELECT d FROM t WHERE id=1", &mut b)
        );
    }

    #[test]
    fn scan_with_digest_matches_both() {
        for sql in [
            "SELECT c FROM sbtest1 WHERE id=5001",
            "SELECT a - -1, b-1, -c, f(-2, +3) FROM t WHERE x IN (-1, -2) AND y = - 4",
            "INSERT INTO t VALUES (1,'a'),(2,'b') ON DUPLICATE KEY UPDATE a=1",
            "/* manifold:primary */ SELECT * FROM t FOR UPDATE; SELECT 'x",
            "SELECT 1 -",
        ] {
            let mut a = Vec::new();
            let mut b = Vec::new();
            let (s, h) = crate::scan_with_digest(sql.as_bytes(), &mut a);
            assert_eq!(s, crate::scan(sql.as_bytes()), "{sql}");
            assert_eq!(h, digest(sql.as_bytes(), &mut b), "{sql}");
            assert_eq!(a, b, "{sql}");
        }
        assert_eq!(
            d("SELECT a - -1, b-1, -c, f(-2, +3) FROM t WHERE x IN (-1, -2) AND y = - 4"),
            "SELECT a - ?,b-?,-c,f(?,...) FROM t WHERE x IN (?,...) AND y = - ?"
        );
        assert_eq!(d("SELECT 1 -"), "SELECT ? -");
    }

    #[test]
    fn hashes_differ_by_any_byte_and_length() {
        let text = b"SELECT c FROM sbtest1 WHERE id=? AND k IN (?,...)";
        let mut seen = std::collections::HashSet::new();
        for len in 0..=text.len() {
            assert!(seen.insert(digest_hash(&text[..len])), "prefix {len}");
        }
        for at in 0..text.len() {
            let mut t = text.to_vec();
            t[at] ^= 1;
            assert!(seen.insert(digest_hash(&t)), "byte {at}");
        }
        // A zero byte at the end is not the same as no byte.
        assert_ne!(digest_hash(b"SELECT"), digest_hash(b"SELECT\0"));
    }

    #[test]
    fn long_text_is_cut() {
        let sql = format!("SELECT {}", "a, ".repeat(2000));
        assert!(d(&sql).len() <= MAX_DIGEST_TEXT);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(sql in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let mut out = Vec::new();
            digest(&sql, &mut out);
            proptest::prop_assert!(out.len() <= MAX_DIGEST_TEXT);
        }
    }
}
