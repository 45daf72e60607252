//! Statement digests: the text with its literals replaced by `?`, so that statements that
//! differ only in their values share one digest for routing rules and statistics.

use crate::lexer::{Lexer, Token, TokenKind};

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
    let mut writer = DigestWriter::new(out);
    for t in Lexer::new(sql) {
        writer.push(&t);
    }
    writer.finish()
}

/// Builds a digest text token by token (so that [`scan_with_digest`](crate::scan_with_digest)
/// needs one pass over the text).
pub(crate) struct DigestWriter<'o> {
    out: &'o mut Vec<u8>,
    prev_end: usize,
    /// The previous token was a value or closed one (a sign after it is a binary minus).
    after_operand: bool,
    /// A `-` or `+` that starts a number if a number follows right after it.
    sign: Option<u8>,
}

impl<'o> DigestWriter<'o> {
    pub(crate) fn new(out: &'o mut Vec<u8>) -> Self {
        out.clear();
        DigestWriter {
            out,
            prev_end: 0,
            after_operand: false,
            sign: None,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, t: &Token<'_>) {
        if self.out.len() >= MAX_DIGEST_TEXT {
            return;
        }
        let gap = t.start > self.prev_end;
        self.prev_end = t.start + t.text.len();
        if let Some(sign) = self.sign.take() {
            if t.kind == TokenKind::Number && !gap {
                // The space before the sign is written.
                self.literal(false);
                return;
            }
            // Not a signed number after all: the sign goes out as punctuation.
            self.out.push(sign);
        }
        if t.kind == TokenKind::Punct && (t.text == b"-" || t.text == b"+") && !self.after_operand {
            space(self.out, gap);
            self.sign = Some(t.text[0]);
            self.after_operand = false;
            return;
        }
        if matches!(
            t.kind,
            TokenKind::String | TokenKind::Number | TokenKind::Unterminated
        ) {
            self.literal(gap);
            return;
        }
        let tight = t.kind == TokenKind::Punct && matches!(t.text, b")" | b",");
        space(self.out, gap && !tight);
        self.out.extend_from_slice(t.text);
        // After a word a sign is taken as a minus: telling keywords (`= -1`, `IN (-1)` are
        // after punctuation anyway) from names would cost a lookup per word, and the digest
        // only has to treat every value alike, which it does either way.
        self.after_operand = t.kind != TokenKind::Punct || t.text == b")";
    }

    fn literal(&mut self, gap: bool) {
        let out = &mut *self.out;
        if out.ends_with(b"...,") {
            out.pop();
        } else if out.ends_with(b"?,") {
            out.extend_from_slice(b"...");
        } else {
            space(out, gap);
            out.push(b'?');
        }
        self.after_operand = true;
    }

    pub(crate) fn finish(self) -> u64 {
        if let Some(sign) = self.sign {
            self.out.push(sign);
        }
        self.out.truncate(MAX_DIGEST_TEXT);
        fnv1a(self.out)
    }
}

fn space(out: &mut Vec<u8>, gap: bool) {
    if gap && !out.is_empty() && !out.ends_with(b"(") && !out.ends_with(b",") {
        out.push(b' ');
    }
}

/// FNV-1a, 64 bits: quick on short texts and good enough to key a statistics table.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
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
