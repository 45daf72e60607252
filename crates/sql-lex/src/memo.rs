//! Scanning a statement from its first value on, when the text before that value is the text
//! the last statement began with: applications send the same statements over and over with
//! other values, and in a short statement the text before the first value is most of it.

use crate::digest::{DigestState, DigestWriter};
use crate::lexer::{ends_any_token, Lexer, LexerState, Visitor};
use crate::scan::{Scan, ScanState, Scanner};

/// A pass whose state between two tokens can be taken, to go on from it later.
pub(crate) trait Resumable {
    type State: Copy;
    fn state(&self) -> Self::State;
}

impl Resumable for () {
    type State = ();
    fn state(&self) {}
}

/// Statements whose first value comes earlier are scanned in full: there is little to save.
const MIN_PREFIX: usize = 16;
/// Nor are those whose first value comes later, to bound what a memo holds.
const MAX_PREFIX: usize = 512;

/// The beginning of the last statement scanned with this memo that had a value (a number or
/// a string) between [`MIN_PREFIX`] and [`MAX_PREFIX`] bytes in, and where the scan stood
/// there. A statement that begins with the same text is scanned from there on. One per
/// session: it is plain memory, never shared.
#[derive(Debug, Default)]
pub struct ScanMemo {
    /// The text before the first value.
    prefix: Vec<u8>,
    /// The digest text written before it, if the scan wrote one.
    digest_text: Vec<u8>,
    entry: Option<Entry>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    lexer: LexerState,
    scan: ScanState,
    digest: Option<DigestState>,
}

/// Where a pass stood before the first value of a text, at byte `at`.
struct FirstValue<S> {
    at: usize,
    lexer: LexerState,
    scan: ScanState,
    also: S,
}

impl ScanMemo {
    pub fn new() -> Self {
        Self::default()
    }

    /// The remembered entry, if `sql` begins with its text.
    fn entry_for(&self, sql: &[u8]) -> Option<Entry> {
        let entry = self.entry?;
        (sql.get(..self.prefix.len()) == Some(&self.prefix[..])).then_some(entry)
    }

    fn remember(&mut self, prefix: &[u8], entry: Entry, digest_text: &[u8]) {
        self.prefix.clear();
        self.prefix.extend_from_slice(prefix);
        self.digest_text.clear();
        self.digest_text.extend_from_slice(digest_text);
        self.entry = Some(entry);
    }
}

/// Whether a pass over any text that begins with `sql[..at]`, taken up at `from` (where the
/// token before the value at `at` ended), reads what the pass over `sql` read up to there.
/// It does when the text between is spaces or comments (they are read again, and the token
/// before them ended where `sql` has them); when there is none, when that token ends there
/// whatever follows: punctuation of one byte, but not a word or number (they could go on),
/// a quote (it could be doubled), `-`, `/`, `*` (a comment could start or end there), `@` or
/// `.` (numbers and variables take dots).
fn resumable_at(sql: &[u8], from: usize, at: usize) -> bool {
    (MIN_PREFIX..=MAX_PREFIX).contains(&at) && (from < at || ends_any_token(sql[at - 1]))
}

/// A full pass over `sql` that also notes where it stood before the first value.
fn run_noting_first_value<'a, V: Visitor<'a> + Resumable>(
    sql: &'a [u8],
    also: V,
) -> (Scan, V, Option<FirstValue<V::State>>) {
    let mut scanner = Scanner::new(ScanState::START, also);
    scanner.record_first_value = true;
    let mut lexer = Lexer::new(sql);
    let mut first = None;
    // Before the step that reads the first value: right after the token before it, as what
    // lies between (spaces, comments) is read as part of the step.
    let mut before = lexer.state();
    while lexer.step(&mut scanner) {
        if let Some((at, scan, also)) = scanner.at_first_value {
            first = Some(FirstValue {
                at,
                lexer: before,
                scan,
                also,
            });
            // The rest without looking.
            lexer.visit(&mut scanner);
            break;
        }
        before = lexer.state();
    }
    let (scan, also) = scanner.finish(&lexer);
    (
        scan,
        also,
        first.filter(|f| resumable_at(sql, f.lexer.pos(), f.at)),
    )
}

/// [`scan`](crate::scan), from the memo's remembered state when `sql` begins with its text.
/// Returns what `scan` returns.
pub fn scan_memo(sql: &[u8], memo: &mut ScanMemo) -> Scan {
    if let Some(entry) = memo.entry_for(sql) {
        let mut scanner = Scanner::new(entry.scan, ());
        let mut lexer = Lexer::resume(sql, entry.lexer);
        lexer.visit(&mut scanner);
        return scanner.finish(&lexer).0;
    }
    let (scan, (), first) = run_noting_first_value(sql, ());
    if let Some(f) = first {
        let entry = Entry {
            lexer: f.lexer,
            scan: f.scan,
            digest: None,
        };
        memo.remember(&sql[..f.at], entry, &[]);
    }
    scan
}

/// [`scan_with_digest`](crate::scan_with_digest), from the memo's remembered state when `sql`
/// begins with its text. Returns what `scan_with_digest` returns.
pub fn scan_with_digest_memo(
    sql: &[u8],
    digest_text: &mut Vec<u8>,
    memo: &mut ScanMemo,
) -> (Scan, u64) {
    if let Some(Entry {
        lexer,
        scan,
        digest: Some(digest),
    }) = memo.entry_for(sql)
    {
        digest_text.clear();
        digest_text.extend_from_slice(&memo.digest_text);
        let mut scanner = Scanner::new(scan, DigestWriter::resume(sql, digest_text, digest));
        let mut lexer = Lexer::resume(sql, lexer);
        lexer.visit(&mut scanner);
        let (scan, writer) = scanner.finish(&lexer);
        return (scan, writer.finish());
    }
    let (scan, writer, first) = run_noting_first_value(sql, DigestWriter::new(sql, digest_text));
    // A value after `...,` may shorten the text written before it (see `digest`).
    if let Some(f) = first.filter(|f| !f.also.ends_folded) {
        if let Some(text) = writer.text().get(..f.also.out_len) {
            let entry = Entry {
                lexer: f.lexer,
                scan: f.scan,
                digest: Some(f.also),
            };
            memo.remember(&sql[..f.at], entry, text);
        }
    }
    (scan, writer.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_statement_sent_again_with_other_values_is_scanned_from_its_first_value() {
        let mut memo = ScanMemo::new();
        let mut text = Vec::new();
        let first = b"SELECT c FROM sbtest1 WHERE id=50123";
        let (scan, hash) = scan_with_digest_memo(first, &mut text, &mut memo);
        assert_eq!(memo.prefix, b"SELECT c FROM sbtest1 WHERE id=");
        assert_eq!(memo.digest_text, b"");
        assert_eq!(
            (scan, hash),
            crate::scan_with_digest(first, &mut Vec::new())
        );
        let again = b"SELECT c FROM sbtest1 WHERE id=7 FOR UPDATE";
        assert!(memo.entry_for(again).is_some());
        let (scan, hash) = scan_with_digest_memo(again, &mut text, &mut memo);
        assert_eq!(scan.class(), crate::Class::LockingRead);
        assert_eq!(text, b"SELECT c FROM sbtest1 WHERE id=? FOR UPDATE");
        assert_eq!(hash, crate::digest(again, &mut Vec::new()));
        // Another table: scanned in full, and remembered instead.
        let other = b"SELECT c FROM sbtest2 WHERE id=1";
        assert!(memo.entry_for(other).is_none());
        scan_with_digest_memo(other, &mut text, &mut memo);
        assert_eq!(memo.prefix, b"SELECT c FROM sbtest2 WHERE id=");
    }

    #[test]
    fn text_that_could_run_on_is_not_remembered() {
        for sql in [
            // A word, a quoted name, a sign and a variable right before the value.
            &b"SELECT abcdefghijklmnop'x'"[..],
            b"SELECT `abcdefghijklmnop`'x'",
            b"SELECT abcdefghijklmnop -1",
            b"SELECT abcdefghijklmnop @@a.'x'",
            // Too short before its value.
            b"SELECT 1",
        ] {
            let mut memo = ScanMemo::new();
            scan_with_digest_memo(sql, &mut Vec::new(), &mut memo);
            assert!(memo.entry.is_none(), "{}", String::from_utf8_lossy(sql));
        }
    }

    /// Pairs of statements where the second begins with the text before the first one's
    /// first value, and reads differently from there: the byte before that value is not one
    /// a scan may go on from.
    #[test]
    fn text_before_a_value_that_could_read_differently_is_not_taken_up() {
        for (first, second) in [
            // A word could go on: `FO` + `R` is `FOR`.
            (
                "SELECT c FROM t WHERE a = FO'x'",
                "SELECT c FROM t WHERE a = FOR UPDATE",
            ),
            // `-` could start a comment.
            (
                "SELECT c FROM t WHERE a = b -1",
                "SELECT c FROM t WHERE a = b -- \n FOR UPDATE",
            ),
            // A variable takes dots.
            (
                "SELECT c FROM t WHERE a = @@session.'x'",
                "SELECT c FROM t WHERE a = @@session.warning_count",
            ),
            // `*` could end an executable comment.
            (
                "/*! SELECT c FROM t WHERE a=*'x' */",
                "/*! SELECT c FROM t WHERE a=*/ 1",
            ),
        ] {
            let mut memo = ScanMemo::new();
            let mut text = Vec::new();
            scan_with_digest_memo(first.as_bytes(), &mut text, &mut memo);
            let mut plain = Vec::new();
            let expected = crate::scan_with_digest(second.as_bytes(), &mut plain);
            let got = scan_with_digest_memo(second.as_bytes(), &mut text, &mut memo);
            assert_eq!((got, &text), (expected, &plain), "{first} / {second}");
        }
    }

    const PIECES: &[&str] = &[
        "<",
        ">",
        "!",
        "%",
        "&",
        "|",
        "^",
        "~",
        "?",
        ":",
        "[",
        "]",
        "{",
        "}",
        "\u{c}",
        "/*M!1 ",
        "SELECT",
        "c",
        "FROM",
        "sbtest1",
        "WHERE",
        "id",
        " ",
        "  ",
        "\n",
        "(",
        ")",
        ",",
        ";",
        "=",
        "-",
        "+",
        "*",
        "/",
        ".",
        "1",
        "22",
        "2.5e3",
        "'a''b'",
        "'x\\'y'",
        "\"dq\"",
        "`q``i`",
        "@v",
        "@@session.x",
        "/* manifold:primary */",
        "/*!50001 ",
        "*/",
        "-- c\n",
        "#c\n",
        "FOR",
        "UPDATE",
        "SHARE",
        "LOCK",
        "IN",
        "LAST_INSERT_ID",
        "GET_LOCK",
        "INTO",
        "OUTFILE",
        "NEXT",
        "VALUE",
        "START",
        "TRANSACTION",
        "READ",
        "ONLY",
        "WITH",
        "INSERT",
        "SET",
        "'unterminated",
        "/* open",
        "...",
        "é",
        "abcdefghijklmnopqrstu",
    ];

    fn sqlish() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop_oneof![
                8 => prop::sample::select(PIECES).prop_map(|p| p.as_bytes().to_vec()),
                1 => prop::collection::vec(any::<u8>(), 0..4),
            ],
            0..30,
        )
        .prop_map(|v| v.concat())
    }

    /// A statement with a value some way in, and how far into it a second statement keeps
    /// its text: mostly past that value's start, so that most second statements can be
    /// scanned from the memo.
    fn remembered_and_kept() -> impl Strategy<Value = (Vec<u8>, usize)> {
        (
            sqlish(),
            prop::sample::select(
                &[
                    " ", "=", "(", ",", "-", "a", "/* c */", "\n", "+", "<", ")", "!", "*", "/*!",
                    "@", ".",
                ][..],
            ),
            prop::sample::select(&["1", "'x'", "\"y\"", "2.5", "'open"][..]),
            sqlish(),
            -3isize..30,
        )
            .prop_map(|(head, sep, value, rest, delta)| {
                let head = [b"SELECT c FROM t WHERE ".as_slice(), &head].concat();
                let keep = (head.len() + sep.len()).saturating_add_signed(delta);
                (
                    [&head, sep.as_bytes(), value.as_bytes(), &rest].concat(),
                    keep,
                )
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]
        /// Whatever was remembered, a scan with a memo says what a scan without one says.
        #[test]
        fn a_memo_never_changes_a_result(
            (first, keep) in prop_oneof![
                3 => remembered_and_kept(),
                1 => (sqlish(), 0usize..200),
            ],
            second in sqlish(),
            with_digest in any::<bool>(),
        ) {
            let mut memo = ScanMemo::new();
            let mut text = Vec::new();
            if with_digest {
                scan_with_digest_memo(&first, &mut text, &mut memo);
            } else {
                scan_memo(&first, &mut memo);
            }
            // A second statement that begins as the first one does, up to some byte.
            let sql = [&first[..keep.min(first.len())], &second[..]].concat();
            let mut plain = Vec::new();
            let expected = crate::scan_with_digest(&sql, &mut plain);
            prop_assert_eq!(scan_memo(&sql, &mut memo), expected.0);
            prop_assert_eq!(scan_with_digest_memo(&sql, &mut text, &mut memo), expected);
            prop_assert_eq!(&text, &plain);
            // And once more, now that it may be the one remembered.
            prop_assert_eq!(scan_with_digest_memo(&sql, &mut text, &mut memo), expected);
            prop_assert_eq!(&text, &plain);
            prop_assert_eq!(scan_memo(&sql, &mut memo), expected.0);
        }
    }
}
