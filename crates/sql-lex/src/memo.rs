//! Scanning a statement from its first value on, when the text before that value is the text
//! the last statement began with: applications send the same statements over and over with
//! other values, and in a short statement the text before the first value is most of it.
//! When all of the text but the values is that of the last statement, the values are read
//! (to know where they end) and the last statement's results are the answer.

use crate::digest::{DigestState, DigestWriter};
use crate::lexer::{
    ends_any_token, ends_what_precedes, is_word_byte, Lexer, LexerState, Token, Visitor,
};
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
/// A statement is remembered whole (see [`ScanMemo`]) up to this length and this many values.
const MAX_SHAPE_TEXT: usize = 512;
const MAX_SHAPE_VALUES: usize = 64;

/// The beginning of the last statement scanned with this memo that had a value (a number or
/// a string) between [`MIN_PREFIX`] and [`MAX_PREFIX`] bytes in, and where the scan stood
/// there. A statement that begins with the same text is scanned from there on.
///
/// Also the last statement scanned from there (if short) whole, where its values were and
/// what its scan found (its shape): a statement that differs from it in its values only,
/// each a value of the same kind, has the same scan and digest, and needs its values read
/// but nothing else. A statement is kept whole only once its beginning came again, so that
/// statements that do not repeat pay little for the memo.
///
/// One per session: it is plain memory, never shared.
#[derive(Debug, Default)]
pub struct ScanMemo {
    /// The text before the first value.
    prefix: Vec<u8>,
    /// The digest text written before it, if the scan wrote one.
    digest_text: Vec<u8>,
    entry: Option<Entry>,
    shape: Shape,
    /// Values noted in the statement being scanned, to become `shape.values`.
    noted: Vec<ValueSpan>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    lexer: LexerState,
    scan: ScanState,
    digest: Option<DigestState>,
}

/// A statement remembered whole (see [`ScanMemo`]).
#[derive(Debug, Default)]
struct Shape {
    text: Vec<u8>,
    values: Vec<ValueSpan>,
    /// Its scan and, if taken, digest hash (its digest text in `digest_text`); `None` when
    /// no statement is remembered.
    result: Option<(Scan, Option<u64>)>,
    digest_text: Vec<u8>,
}

/// Where a value is in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ValueSpan {
    // Offsets in a text of at most `MAX_SHAPE_TEXT` bytes.
    start: u16,
    end: u16,
    /// Where the text after the value ends: the next value's start or the text's end.
    until: u16,
    kind: ValueKind,
    in_executable_comment: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    Number,
    String,
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

    /// Remembers `sql` whole with the values noted in it, if they allow (see [`fits_shape`]).
    fn remember_shape(&mut self, sql: &[u8], scan: Scan, digest: Option<(u64, &[u8])>) {
        if !fits_shape(sql, &self.noted) {
            return;
        }
        let shape = &mut self.shape;
        std::mem::swap(&mut shape.values, &mut self.noted);
        let mut until = sql.len() as u16;
        for value in shape.values.iter_mut().rev() {
            value.until = until;
            until = value.start;
        }
        shape.text.clear();
        shape.text.extend_from_slice(sql);
        shape.digest_text.clear();
        if let Some((_, text)) = digest {
            shape.digest_text.extend_from_slice(text);
        }
        shape.result = Some((scan, digest.map(|(hash, _)| hash)));
    }
}

impl Shape {
    /// The remembered statement's results, if `sql` is its text with other values: the
    /// same text before, between and after them, and at each place a value of the same
    /// kind, read as the lexer reads it there.
    // Called for every statement a memo is used for, so kept apart from the full passes.
    #[inline(never)]
    fn result_for(&self, sql: &[u8]) -> Option<(Scan, Option<u64>)> {
        let result = self.result?;
        let text = &self.text[..];
        let mut rest = sql.strip_prefix(&text[..usize::from(self.values.first()?.start)])?;
        for value in &self.values {
            let len = value_len(rest, *value)?;
            let between = &text[usize::from(value.end)..usize::from(value.until)];
            rest = strip_text(rest.get(len..)?, between)?;
        }
        rest.is_empty().then_some(result)
    }
}

/// `rest` without `text` at its start, if it starts with it. Most texts between values are
/// a byte or two, compared faster here than by a call to `memcmp`.
#[inline]
fn strip_text<'a>(rest: &'a [u8], text: &[u8]) -> Option<&'a [u8]> {
    let (head, tail) = rest.split_at_checked(text.len())?;
    let same = if text.len() <= 8 {
        head.iter().zip(text).all(|(a, b)| a == b)
    } else {
        head == text
    };
    same.then_some(tail)
}

/// The length of a value of `like`'s kind at the start of `rest`, if one is there.
#[inline]
fn value_len(rest: &[u8], like: ValueSpan) -> Option<usize> {
    if like.kind == ValueKind::Number {
        // Most numbers are plain integers. The lexer reads a number on over word bytes and
        // dots (`0x1F`, `1.5`, `1e3`); digits followed by anything else are the number.
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let ends = rest
            .get(digits)
            .is_none_or(|&b| !is_word_byte(b) && b != b'.');
        if digits > 0 && ends {
            return Some(digits);
        }
    }
    let mut probe = ValueProbe::default();
    // The lexer reads no byte before where it stands: `rest` reads as the text it is cut from.
    Lexer::resume(rest, LexerState::at(0, like.in_executable_comment)).step(&mut probe);
    let (start, end, kind) = probe.value?;
    (start == 0 && kind == like.kind).then_some(end)
}

/// The one token a lexer step read, if a value.
#[derive(Default)]
struct ValueProbe {
    value: Option<(usize, usize, ValueKind)>,
}

impl<'a> Visitor<'a> for ValueProbe {
    fn word(&mut self, _: Token<'a>) {}
    fn punct(&mut self, _: Token<'a>, _: u8) {}
    fn number(&mut self, t: Token<'a>) {
        self.value = Some((t.start, t.start + t.text.len(), ValueKind::Number));
    }
    fn string(&mut self, t: Token<'a>) {
        self.value = Some((t.start, t.start + t.text.len(), ValueKind::String));
    }
    fn quoted_ident(&mut self, _: Token<'a>) {}
    fn user_var(&mut self, _: Token<'a>) {}
    fn sys_var(&mut self, _: Token<'a>) {}
    fn unterminated(&mut self, _: Token<'a>) {}
}

/// Whether a statement whose values are at `values` can be remembered whole: a statement
/// read value by value as [`Shape::result_for`] reads it must read as a full pass would.
/// It does when the text before each value reads the same whatever the value is: the byte
/// before it is a space or ends any token ([`ends_what_precedes`]). What follows a value is
/// read as the full pass read it, as the lexer stands there as it stood then. Nothing may
/// be left unterminated, which the values' kinds (the same in both) would not show.
fn fits_shape(sql: &[u8], values: &[ValueSpan]) -> bool {
    !values.is_empty()
        && values.iter().all(|v| {
            let start = usize::from(v.start);
            start == 0 || ends_what_precedes(sql[start - 1])
        })
}

/// Hands each token on to a scanner, noting where values are, while `fits`: until a token
/// is unterminated (its kind would not show) or values are too many, in a text no longer
/// than [`MAX_SHAPE_TEXT`].
struct NotingValues<'r, V: Resumable> {
    scanner: &'r mut Scanner<V>,
    values: &'r mut Vec<ValueSpan>,
    fits: bool,
}

impl<V: Resumable> NotingValues<'_, V> {
    #[inline]
    fn note(&mut self, t: &Token<'_>, kind: ValueKind) {
        if !self.fits {
            return;
        }
        if self.values.len() == MAX_SHAPE_VALUES {
            self.fits = false;
            return;
        }
        // Within `MAX_SHAPE_TEXT`, as `fits`.
        let start = t.start as u16;
        self.values.push(ValueSpan {
            start,
            end: start + t.text.len() as u16,
            until: 0,
            kind,
            // Set once the lexer has passed the value.
            in_executable_comment: false,
        });
    }
}

impl<'a, V: Visitor<'a> + Resumable> Visitor<'a> for NotingValues<'_, V> {
    #[inline]
    fn word(&mut self, t: Token<'a>) {
        self.scanner.word(t);
    }
    #[inline]
    fn punct(&mut self, t: Token<'a>, c: u8) {
        self.scanner.punct(t, c);
    }
    #[inline]
    fn number(&mut self, t: Token<'a>) {
        self.note(&t, ValueKind::Number);
        self.scanner.number(t);
    }
    #[inline]
    fn string(&mut self, t: Token<'a>) {
        self.note(&t, ValueKind::String);
        self.scanner.string(t);
    }
    #[inline]
    fn quoted_ident(&mut self, t: Token<'a>) {
        self.scanner.quoted_ident(t);
    }
    #[inline]
    fn user_var(&mut self, t: Token<'a>) {
        self.scanner.user_var(t);
    }
    #[inline]
    fn sys_var(&mut self, t: Token<'a>) {
        self.scanner.sys_var(t);
    }
    #[inline]
    fn unterminated(&mut self, t: Token<'a>) {
        self.fits = false;
        self.scanner.unterminated(t);
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

/// Passes `lexer` over the rest of `sql`, handing the tokens to `scanner` and noting the
/// values in `values` (cleared first; left empty when a shape cannot be remembered).
fn run_noting_values<'a, V: Visitor<'a> + Resumable>(
    sql: &[u8],
    lexer: &mut Lexer<'a>,
    scanner: &mut Scanner<V>,
    values: &mut Vec<ValueSpan>,
) {
    values.clear();
    let mut noting = NotingValues {
        scanner,
        values,
        fits: sql.len() <= MAX_SHAPE_TEXT,
    };
    let mut noted = 0;
    while lexer.step(&mut noting) {
        if noting.values.len() > noted {
            // The step may have opened an executable comment before the value, never after.
            noting.values[noted].in_executable_comment = lexer.in_executable_comment();
            noted += 1;
        }
    }
    if !noting.fits {
        noting.values.clear();
    }
}

/// A full pass over `sql` that also notes where it stood before the first value.
// It notes no values: a statement is remembered whole only once its beginning came again
// (see `scan_memo`), so that statements that do not repeat pay little for the memo.
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
    match memo.shape.result_for(sql) {
        Some((scan, _)) => scan,
        None => scan_memo_passing(sql, memo),
    }
}

/// [`scan_memo`] for a statement not remembered whole: a pass over it, or over its end.
// Apart, so that a statement remembered whole is answered without this one's frame.
#[inline(never)]
fn scan_memo_passing(sql: &[u8], memo: &mut ScanMemo) -> Scan {
    if let Some(entry) = memo.entry_for(sql) {
        let mut scanner = Scanner::new(entry.scan, ());
        let mut lexer = Lexer::resume(sql, entry.lexer);
        run_noting_values(sql, &mut lexer, &mut scanner, &mut memo.noted);
        let scan = scanner.finish(&lexer).0;
        memo.remember_shape(sql, scan, None);
        return scan;
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
    if let Some((scan, Some(hash))) = memo.shape.result_for(sql) {
        digest_text.clear();
        digest_text.extend_from_slice(&memo.shape.digest_text);
        return (scan, hash);
    }
    scan_with_digest_memo_passing(sql, digest_text, memo)
}

/// [`scan_with_digest_memo`] for a statement not remembered whole with its digest.
#[inline(never)]
fn scan_with_digest_memo_passing(
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
        run_noting_values(sql, &mut lexer, &mut scanner, &mut memo.noted);
        let (scan, writer) = scanner.finish(&lexer);
        let hash = writer.finish();
        memo.remember_shape(sql, scan, Some((hash, digest_text)));
        return (scan, hash);
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
    fn a_statement_with_other_values_of_the_same_kinds_is_answered_from_the_last_one() {
        let mut memo = ScanMemo::new();
        let mut text = Vec::new();
        let first = b"UPDATE sbtest1 SET c='abc', k = k + 1 WHERE id=5 /* manifold:primary */";
        scan_with_digest_memo(first, &mut text, &mut memo);
        // Kept whole once it comes again.
        assert!(memo.shape.result.is_none());
        scan_with_digest_memo(first, &mut text, &mut memo);
        for again in [
            &b"UPDATE sbtest1 SET c='', k = k + 1 WHERE id=123456 /* manifold:primary */"[..],
            b"UPDATE sbtest1 SET c='x''y\\'z', k = k + 1 WHERE id=0x1F /* manifold:primary */",
            b"UPDATE sbtest1 SET c=\"dq\", k = k + 1 WHERE id=2.5e3 /* manifold:primary */",
        ] {
            let answered = memo.shape.result_for(again);
            assert!(answered.is_some(), "{}", String::from_utf8_lossy(again));
            let mut plain = Vec::new();
            let expected = crate::scan_with_digest(again, &mut plain);
            assert_eq!(answered, Some((expected.0, Some(expected.1))));
            assert_eq!(scan_with_digest_memo(again, &mut text, &mut memo), expected);
            assert_eq!(text, plain);
        }
    }

    #[test]
    fn a_statement_that_differs_in_more_than_its_values_is_scanned() {
        let first = b"SELECT c FROM t WHERE a = 'x' AND id=5";
        for second in [
            // Another kind of value, or no value, in a value's place.
            &b"SELECT c FROM t WHERE a = 7 AND id=5"[..],
            b"SELECT c FROM t WHERE a = 'x' AND id=@v",
            b"SELECT c FROM t WHERE a = 'x' AND id=-5",
            b"SELECT c FROM t WHERE a = 'x' AND id='open",
            // Other text around the values.
            b"SELECT c FROM t WHERE a = 'x' AND id= 5",
            b"SELECT c FROM t WHERE a = 'x' AND id=5 FOR UPDATE",
            b"SELECT c FROM t WHERE a = 'x' AND id=5,6",
            b"SELECT c FROM t WHERE a = 'x'AND id=5",
            b"SELECT c FROM t WHERE a = 'x' AND id=",
        ] {
            let mut memo = ScanMemo::new();
            let mut text = Vec::new();
            scan_with_digest_memo(first, &mut text, &mut memo);
            scan_with_digest_memo(first, &mut text, &mut memo);
            assert!(memo.shape.result.is_some());
            assert!(
                memo.shape.result_for(second).is_none(),
                "{}",
                String::from_utf8_lossy(second)
            );
            let mut plain = Vec::new();
            let expected = crate::scan_with_digest(second, &mut plain);
            assert_eq!(
                scan_with_digest_memo(second, &mut text, &mut memo),
                expected
            );
            assert_eq!(text, plain);
        }
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

    /// What may stand where a value stood: values of either kind and of other lengths, and
    /// text that is no value or reads as more or less than one.
    const OTHER_VALUES: &[&str] = &[
        "1", "22", "2.5e3", ".5", "1.", "1e", "1e+", "0x1F", "x'ab'", "X'ab'", "b'01'", "N'x'",
        "_utf8'x'", "'x'", "''", "'a''b'", "'x\\'y'", "\"dq\"", "'open", "1a", "-1", "@v", "`q`",
        "", " ", "a", "x", "/* c */1", "1/*", "'*/'", "1 ", "1,2", "'a' 'b'", "?",
    ];

    /// A statement with places for values: the texts between them (each ending in what
    /// usually comes before a value), the first one long enough to be remembered.
    fn template() -> impl Strategy<Value = Vec<Vec<u8>>> {
        let word = (
            prop::sample::select(PIECES),
            prop::sample::select(&[" ", " ", " ", ""][..]),
        )
            .prop_map(|(p, space)| [p, space].concat());
        let piece = (
            prop::collection::vec(word, 0..5),
            prop_oneof![
                3 => prop::sample::select(&[" ", "=", "(", ",", "+", "<", "\n"][..]),
                1 => prop::sample::select(&["", "-", "a", ".", "*", "@"][..]),
            ],
        )
            .prop_map(|(p, sep)| [p.concat().as_bytes(), sep.as_bytes()].concat());
        prop::collection::vec(piece, 1..6).prop_map(|mut pieces| {
            pieces[0].splice(0..0, b"SELECT c FROM t WHERE ".iter().copied());
            pieces
        })
    }

    fn fill(template: &[Vec<u8>], values: &[&str]) -> Vec<u8> {
        let mut sql = template[0].clone();
        for (piece, value) in template[1..].iter().zip(values) {
            sql.extend_from_slice(value.as_bytes());
            sql.extend_from_slice(piece);
        }
        sql
    }

    /// A statement with its values replaced reads as a full scan reads it, whether or not
    /// the memo took it for the last one with other values; and many do.
    #[test]
    fn a_remembered_shape_never_changes_a_result() {
        use proptest::test_runner::{Config, TestRunner};
        let cases = 20_000;
        let mut runner = TestRunner::new(Config {
            cases,
            ..Config::default()
        });
        // The first statement's values, numbers or strings; the second's are mostly others
        // of the same kind, now and then anything.
        let strategy = (
            template(),
            prop::collection::vec(any::<bool>(), 5),
            prop::collection::vec((0..8usize, prop::sample::select(OTHER_VALUES)), 5),
            any::<bool>(),
        )
            .prop_map(|(template, numbers, others, with_digest)| {
                let first: Vec<&str> = numbers
                    .iter()
                    .map(|&number| if number { "1" } else { "'x'" })
                    .collect();
                let second: Vec<&str> = numbers
                    .iter()
                    .zip(others)
                    .map(|(&number, (pick, other))| match pick {
                        7 => other,
                        _ if number => ["7", "123456", "0", "99"][pick % 4],
                        _ => ["'y'", "'a''b'", "''", "'\\''"][pick % 4],
                    })
                    .collect();
                (
                    fill(&template, &first),
                    fill(&template, &second),
                    with_digest,
                )
            });
        let taken = std::cell::Cell::new(0u32);
        runner
            .run(&strategy, |(first, second, with_digest)| {
                let mut memo = ScanMemo::new();
                let mut text = Vec::new();
                // Twice: a statement is kept whole when its beginning comes again.
                for _ in 0..2 {
                    if with_digest {
                        scan_with_digest_memo(&first, &mut text, &mut memo);
                    } else {
                        scan_memo(&first, &mut memo);
                    }
                }
                if memo.shape.result_for(&second).is_some() {
                    taken.set(taken.get() + 1);
                }
                let mut plain = Vec::new();
                let expected = crate::scan_with_digest(&second, &mut plain);
                if with_digest {
                    prop_assert_eq!(
                        scan_with_digest_memo(&second, &mut text, &mut memo),
                        expected
                    );
                    prop_assert_eq!(&text, &plain);
                }
                prop_assert_eq!(scan_memo(&second, &mut memo), expected.0);
                Ok(())
            })
            .unwrap();
        // Most templates have a value where a statement can be remembered whole.
        assert!(
            taken.get() > cases / 4,
            "only {} of {cases} statements were taken for the one before",
            taken.get()
        );
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
