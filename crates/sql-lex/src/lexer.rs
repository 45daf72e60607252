//! Tokens of MySQL/MariaDB SQL text, as the server's own lexer would split them.

/// What a token is. Keywords are not told apart from identifiers: callers compare [`Token::text`]
/// case-insensitively where it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A keyword or an unquoted identifier.
    Word,
    /// `` `identifier` ``.
    QuotedIdent,
    /// `'text'` or `"text"`.
    String,
    Number,
    /// `@name`, `@'name'`, `` @`name` ``.
    UserVar,
    /// `@@name`, `@@session.name`, `@@global.name`, `@@local.name`.
    SysVar,
    /// Any other single byte: `(`, `)`, `,`, `;`, `=`, operators.
    Punct,
    /// A string, quoted identifier or comment that runs to the end of the text.
    Unterminated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    pub kind: TokenKind,
    pub text: &'a [u8],
    /// Byte offset of the token in the text.
    pub start: usize,
}

impl Token<'_> {
    /// Case-insensitive comparison with an ASCII keyword.
    pub fn is(&self, keyword: &str) -> bool {
        self.kind == TokenKind::Word && self.text.eq_ignore_ascii_case(keyword.as_bytes())
    }

    pub fn is_punct(&self, c: u8) -> bool {
        self.kind == TokenKind::Punct && self.text == [c]
    }

    /// The variable name of a [`TokenKind::SysVar`] without `@@` and scope prefix.
    pub fn sysvar_name(&self) -> &[u8] {
        let name = self.text.get(2..).unwrap_or_default();
        for scope in [&b"session."[..], b"global.", b"local."] {
            if name.len() > scope.len() && name[..scope.len()].eq_ignore_ascii_case(scope) {
                return &name[scope.len()..];
            }
        }
        name
    }
}

/// Splits SQL text into tokens, skipping whitespace and comments. The contents of executable
/// comments (`/*! ... */`, `/*!50001 ... */`, `/*M! ... */`) are tokens like any other, since
/// the server runs them.
#[derive(Debug, Clone)]
pub struct Lexer<'a> {
    sql: &'a [u8],
    pos: usize,
    in_executable_comment: bool,
    hint: Option<RouteHint>,
}

/// Where a comment asks manifold to send its statement: `/* manifold:primary */` or
/// `/* manifold:replica */` (also inside `/*+ ... */`). The last such comment wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteHint {
    Primary,
    Replica,
}

impl RouteHint {
    /// The hint in a comment's body, if it holds one.
    fn in_comment(body: &[u8]) -> Option<RouteHint> {
        const TAG: &[u8] = b"manifold:";
        let at = find(body, TAG)?;
        let word = &body[at + TAG.len()..];
        let end = word
            .iter()
            .position(|b| !b.is_ascii_alphanumeric() && *b != b'_')
            .unwrap_or(word.len());
        let word = &word[..end];
        if word.eq_ignore_ascii_case(b"primary") || word.eq_ignore_ascii_case(b"master") {
            Some(RouteHint::Primary)
        } else if word.eq_ignore_ascii_case(b"replica") || word.eq_ignore_ascii_case(b"slave") {
            Some(RouteHint::Replica)
        } else {
            None
        }
    }
}

/// Bytes that continue a word: ASCII letters and digits, `_`, `$`, and any byte of a
/// multi-byte character. A table, as this is asked once per byte of every word.
const WORD_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80;
        b += 1;
    }
    t
};

#[inline]
pub(crate) fn is_word_byte(b: u8) -> bool {
    WORD_BYTES[b as usize]
}

/// What the first byte of a token (or of what lies between tokens) can start: one table
/// lookup decides where every token goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lead {
    Space,
    Word,
    Digit,
    Quote,
    At,
    /// `#`, `-`, `/`, `*`: a comment, or the end of an executable one, or punctuation.
    MaybeComment,
    Punct,
}

const LEADS: [Lead; 256] = {
    let mut t = [Lead::Punct; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = match c {
            // `u8::is_ascii_whitespace`: no vertical tab.
            b' ' | b'\t' | b'\n' | b'\r' | 0x0c => Lead::Space,
            b'0'..=b'9' => Lead::Digit,
            b'\'' | b'"' | b'`' => Lead::Quote,
            b'@' => Lead::At,
            b'#' | b'-' | b'/' | b'*' => Lead::MaybeComment,
            _ if WORD_BYTES[b] => Lead::Word,
            _ => Lead::Punct,
        };
        b += 1;
    }
    t
};

/// Whether a token that ends with `b` ends there whatever follows: punctuation of one byte
/// that never starts a comment, and not a dot (numbers and variables take dots).
pub(crate) fn ends_any_token(b: u8) -> bool {
    LEADS[b as usize] == Lead::Punct && b != b'.'
}

/// Whether what a lexer read up to byte `b` (included) reads the same whatever follows `b`:
/// `b` is a space (which ends any token or comment it follows) or [`ends_any_token`].
pub(crate) fn ends_what_precedes(b: u8) -> bool {
    LEADS[b as usize] == Lead::Space || ends_any_token(b)
}

/// What [`Lexer::comment_at`] found.
enum Trivia {
    /// A comment (or an executable comment's delimiter) ends right before this position.
    Skipped(usize),
    /// The byte is punctuation after all.
    Punct,
    /// A comment that never closes.
    Unterminated,
}

/// Where a [`Lexer`] stands (see [`ScanMemo`](crate::ScanMemo)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LexerState {
    pos: usize,
    in_executable_comment: bool,
    hint: Option<RouteHint>,
}

impl LexerState {
    /// The position: the end of the last token passed.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// At `pos`, inside an executable comment or not, with no route hint seen.
    pub(crate) fn at(pos: usize, in_executable_comment: bool) -> Self {
        LexerState {
            pos,
            in_executable_comment,
            hint: None,
        }
    }
}

impl<'a> Lexer<'a> {
    /// Whether the lexer stands inside an executable comment (`/*! ... */`).
    pub(crate) fn in_executable_comment(&self) -> bool {
        self.in_executable_comment
    }

    /// Where this lexer stands.
    pub(crate) fn state(&self) -> LexerState {
        LexerState {
            pos: self.pos,
            in_executable_comment: self.in_executable_comment,
            hint: self.hint,
        }
    }

    /// A lexer of `sql` at `state`, taken in a text that begins as `sql` does up to there.
    pub(crate) fn resume(sql: &'a [u8], state: LexerState) -> Self {
        Self {
            sql,
            pos: state.pos,
            in_executable_comment: state.in_executable_comment,
            hint: state.hint,
        }
    }

    pub fn new(sql: &'a [u8]) -> Self {
        Self {
            sql,
            pos: 0,
            in_executable_comment: false,
            hint: None,
        }
    }

    /// The routing hint of the comments passed so far (see [`RouteHint`]).
    pub fn hint(&self) -> Option<RouteHint> {
        self.hint
    }

    /// What starts at `pos`, whose byte is one of `#-/*`.
    fn comment_at(&mut self, pos: usize) -> Trivia {
        let s = self.sql;
        let rest = &s[pos..];
        if rest[0] == b'#'
            || (rest.starts_with(b"--")
                && rest
                    .get(2)
                    .is_none_or(|b| b.is_ascii_whitespace() || *b < 0x20))
        {
            return Trivia::Skipped(
                rest.iter()
                    .position(|&b| b == b'\n')
                    .map_or(s.len(), |i| pos + i),
            );
        }
        if rest.starts_with(b"/*!") || rest.starts_with(b"/*M!") {
            let mut end = pos + if rest[2] == b'!' { 3 } else { 4 };
            while end < s.len() && s[end].is_ascii_digit() {
                end += 1;
            }
            self.in_executable_comment = true;
            return Trivia::Skipped(end);
        }
        if rest.starts_with(b"/*") {
            return match find(&rest[2..], b"*/") {
                Some(i) => {
                    if let Some(h) = RouteHint::in_comment(&rest[2..2 + i]) {
                        self.hint = Some(h);
                    }
                    Trivia::Skipped(pos + 2 + i + 2)
                }
                None => Trivia::Unterminated,
            };
        }
        if self.in_executable_comment && rest.starts_with(b"*/") {
            self.in_executable_comment = false;
            return Trivia::Skipped(pos + 2);
        }
        Trivia::Punct
    }

    /// Position after a quoted run whose opening quote is at `open`, or `None` if it never
    /// closes. A doubled quote is part of the text; so is a backslash-escaped byte in
    /// strings.
    fn quoted_end(&self, open: usize, quote: u8) -> Option<usize> {
        let s = self.sql;
        let escapes = quote != b'`';
        let mut i = open + 1;
        loop {
            i = self.next_quote_or_escape(i, quote, escapes)?;
            // An escaped byte, or a doubled quote.
            if s[i] == b'\\' || s.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return Some(i + 1);
            }
        }
    }

    /// The first `quote` (or, with `escapes`, backslash) at or after `from`. Strings are
    /// the longest tokens statements carry: `memchr` looks at 16 or 32 bytes per step.
    #[inline]
    fn next_quote_or_escape(&self, from: usize, quote: u8, escapes: bool) -> Option<usize> {
        let rest = self.sql.get(from..)?;
        let at = if escapes {
            memchr::memchr2(quote, b'\\', rest)
        } else {
            memchr::memchr(quote, rest)
        };
        at.map(|at| from + at)
    }

    /// Where a run of word bytes (and dots, with `dots`) starting at `from` ends.
    #[inline]
    fn word_end(&self, from: usize, dots: bool) -> usize {
        let s = self.sql;
        let ends = |b: u8| !(is_word_byte(b) || (dots && b == b'.'));
        let mut i = from;
        // Eight bytes per bounds check.
        while let Some(chunk) = s.get(i..i + 8) {
            if let Some(at) = chunk.iter().position(|&b| ends(b)) {
                return i + at;
            }
            i += 8;
        }
        let rest = &s[i..];
        i + rest.iter().position(|&b| ends(b)).unwrap_or(rest.len())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Receives the tokens of a pass over the text, one call per token, each kind to its own
/// method: the lexer has already told the kinds apart, and a pass that handles each kind
/// differently (the scan and the digest) need not match on it again.
pub(crate) trait Visitor<'a> {
    /// A keyword or an unquoted identifier.
    fn word(&mut self, t: Token<'a>);
    /// Punctuation: `c` is `t.text[0]`, its only byte.
    fn punct(&mut self, t: Token<'a>, c: u8);
    fn number(&mut self, t: Token<'a>);
    fn string(&mut self, t: Token<'a>);
    fn quoted_ident(&mut self, t: Token<'a>);
    fn user_var(&mut self, t: Token<'a>);
    fn sys_var(&mut self, t: Token<'a>);
    fn unterminated(&mut self, t: Token<'a>);
}

/// Nothing to do with the tokens.
impl<'a> Visitor<'a> for () {
    fn word(&mut self, _: Token<'a>) {}
    fn punct(&mut self, _: Token<'a>, _: u8) {}
    fn number(&mut self, _: Token<'a>) {}
    fn string(&mut self, _: Token<'a>) {}
    fn quoted_ident(&mut self, _: Token<'a>) {}
    fn user_var(&mut self, _: Token<'a>) {}
    fn sys_var(&mut self, _: Token<'a>) {}
    fn unterminated(&mut self, _: Token<'a>) {}
}

impl<'a> Lexer<'a> {
    /// Hands every token to `visitor`.
    #[inline]
    pub(crate) fn visit(&mut self, visitor: &mut impl Visitor<'a>) {
        while self.step(visitor) {}
    }

    /// Reads the next token and hands it to `visitor`; `false` at the end of the text.
    // Inlined into each pass's loop, so that each token's kind is matched once, in
    // `LEADS`, and every call below goes straight to the pass's code for that kind.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub(crate) fn step(&mut self, visitor: &mut impl Visitor<'a>) -> bool {
        let s = self.sql;
        let mut start = self.pos;
        loop {
            let Some(&b) = s.get(start) else {
                return false;
            };
            match LEADS[b as usize] {
                Lead::Space => {
                    start += 1;
                    continue;
                }
                Lead::Word => {
                    let end = self.word_end(start + 1, false);
                    visitor.word(self.take(TokenKind::Word, start, end));
                }
                Lead::Digit => {
                    let end = self.word_end(start + 1, true);
                    visitor.number(self.take(TokenKind::Number, start, end));
                }
                Lead::Punct => visitor.punct(self.take(TokenKind::Punct, start, start + 1), b),
                Lead::Quote => match self.quoted_end(start, b) {
                    Some(end) if b == b'`' => {
                        visitor.quoted_ident(self.take(TokenKind::QuotedIdent, start, end));
                    }
                    Some(end) => visitor.string(self.take(TokenKind::String, start, end)),
                    None => visitor.unterminated(self.take_rest(start)),
                },
                Lead::At => match s.get(start + 1) {
                    Some(b'@') => {
                        let end = self.word_end(start + 2, true);
                        visitor.sys_var(self.take(TokenKind::SysVar, start, end));
                    }
                    Some(&q @ (b'\'' | b'"' | b'`')) => match self.quoted_end(start + 1, q) {
                        Some(end) => visitor.user_var(self.take(TokenKind::UserVar, start, end)),
                        None => visitor.unterminated(self.take_rest(start)),
                    },
                    _ => {
                        let end = self.word_end(start + 1, true);
                        visitor.user_var(self.take(TokenKind::UserVar, start, end));
                    }
                },
                Lead::MaybeComment => match self.comment_at(start) {
                    Trivia::Skipped(next) => {
                        start = next;
                        continue;
                    }
                    Trivia::Punct => {
                        visitor.punct(self.take(TokenKind::Punct, start, start + 1), b);
                    }
                    // The token runs from where this call began, as the text between is
                    // only trivia.
                    Trivia::Unterminated => visitor.unterminated(self.take_rest(self.pos)),
                },
            }
            return true;
        }
    }

    /// The token at `sql[start..end]`, which the lexer moves past.
    #[inline]
    fn take(&mut self, kind: TokenKind, start: usize, end: usize) -> Token<'a> {
        self.pos = end;
        Token {
            kind,
            text: &self.sql[start..end],
            start,
        }
    }

    /// An unterminated token from `start` to the end of the text.
    #[inline]
    fn take_rest(&mut self, start: usize) -> Token<'a> {
        self.take(TokenKind::Unterminated, start, self.sql.len())
    }
}

/// Keeps the token it is handed, whatever its kind.
struct NextToken<'a>(Option<Token<'a>>);

impl<'a> Visitor<'a> for NextToken<'a> {
    fn word(&mut self, t: Token<'a>) {
        self.0 = Some(t);
    }
    fn punct(&mut self, t: Token<'a>, _: u8) {
        self.0 = Some(t);
    }
    fn number(&mut self, t: Token<'a>) {
        self.0 = Some(t);
    }
    fn string(&mut self, t: Token<'a>) {
        self.0 = Some(t);
    }
    fn quoted_ident(&mut self, t: Token<'a>) {
        self.0 = Some(t);
    }
    fn user_var(&mut self, t: Token<'a>) {
        self.0 = Some(t);
    }
    fn sys_var(&mut self, t: Token<'a>) {
        self.0 = Some(t);
    }
    fn unterminated(&mut self, t: Token<'a>) {
        self.0 = Some(t);
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Token<'a>;

    #[inline]
    fn next(&mut self) -> Option<Token<'a>> {
        let mut next = NextToken(None);
        self.step(&mut next);
        next.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str) -> Vec<(TokenKind, String)> {
        Lexer::new(sql.as_bytes())
            .map(|t| (t.kind, String::from_utf8_lossy(t.text).into_owned()))
            .collect()
    }

    #[test]
    fn splits_words_strings_and_punctuation() {
        use TokenKind::*;
        assert_eq!(
            kinds("SELECT a,'x''y\\'z' FROM `t``1` WHERE b=1.5e3"),
            vec![
                (Word, "SELECT".into()),
                (Word, "a".into()),
                (Punct, ",".into()),
                (String, "'x''y\\'z'".into()),
                (Word, "FROM".into()),
                (QuotedIdent, "`t``1`".into()),
                (Word, "WHERE".into()),
                (Word, "b".into()),
                (Punct, "=".into()),
                (Number, "1.5e3".into()),
            ]
        );
    }

    #[test]
    fn comments_are_skipped_but_executable_comments_are_read() {
        use TokenKind::*;
        assert_eq!(
            kinds("/* c */ SELECT -- x\n 1 # y\n /*!40101 SET */ /*M!100100 NAMES */--"),
            vec![
                (Word, "SELECT".into()),
                (Number, "1".into()),
                (Word, "SET".into()),
                (Word, "NAMES".into()),
            ]
        );
        // `--` not followed by a space is two minus signs.
        assert_eq!(kinds("1--2").len(), 4);
    }

    #[test]
    fn routing_hints_come_from_comments() {
        let hint = |sql: &str| {
            let mut lx = Lexer::new(sql.as_bytes());
            for _ in lx.by_ref() {}
            lx.hint()
        };
        assert_eq!(hint("SELECT 1"), None);
        assert_eq!(
            hint("/* manifold:primary */ SELECT 1"),
            Some(RouteHint::Primary)
        );
        assert_eq!(
            hint("SELECT /*+ manifold:replica */ 1"),
            Some(RouteHint::Replica)
        );
        assert_eq!(
            hint("SELECT 1 /* x manifold:MASTER y */"),
            Some(RouteHint::Primary)
        );
        assert_eq!(hint("SELECT 1 /* manifold:elsewhere */"), None);
        // Not a comment: inside a string, or the text of a line comment.
        assert_eq!(hint("SELECT '/* manifold:primary */'"), None);
        assert_eq!(hint("SELECT 1 -- manifold:primary"), None);
    }

    #[test]
    fn long_strings_end_at_their_quote_wherever_escapes_fall() {
        // Strings are searched 16 or 32 bytes at a time: put the escapes and the closing
        // quote at every offset within and across those steps.
        for len in 0..80 {
            for at in 0..len {
                for escape in ["\\'", "''", "\\\\"] {
                    let mut body = "x".repeat(len);
                    body.replace_range(at..=at, escape);
                    let sql = format!("SELECT '{body}' , `a{body}`");
                    let t: Vec<_> = Lexer::new(sql.as_bytes()).collect();
                    assert_eq!(t[1].kind, TokenKind::String, "{sql}");
                    assert_eq!(t[1].text, format!("'{body}'").as_bytes(), "{sql}");
                    assert!(t[2].is_punct(b','), "{sql}");
                }
            }
        }
        let t: Vec<_> = Lexer::new(b"SELECT 'abcdefghijklmnop\\'").collect();
        assert_eq!(t[1].kind, TokenKind::Unterminated);
    }

    #[test]
    fn variables() {
        let t: Vec<_> = Lexer::new(b"@a @'b c' @@session.sql_mode @@x").collect();
        assert_eq!(t[0].kind, TokenKind::UserVar);
        assert_eq!(t[1].kind, TokenKind::UserVar);
        assert_eq!(t[1].text, b"@'b c'");
        assert_eq!(t[2].kind, TokenKind::SysVar);
        assert_eq!(t[2].sysvar_name(), b"sql_mode");
        assert_eq!(t[3].sysvar_name(), b"x");
    }

    #[test]
    fn unterminated_runs_to_the_end() {
        let t: Vec<_> = Lexer::new(b"SELECT 'abc").collect();
        assert_eq!(t[1].kind, TokenKind::Unterminated);
        let t: Vec<_> = Lexer::new(b"SELECT /* abc").collect();
        assert_eq!(t[1].kind, TokenKind::Unterminated);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_tokens_are_in_order(sql in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let mut last = 0;
            for t in Lexer::new(&sql) {
                proptest::prop_assert!(t.start >= last);
                proptest::prop_assert!(t.start + t.text.len() <= sql.len());
                last = t.start + t.text.len();
            }
        }
    }
}
