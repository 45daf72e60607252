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
fn is_word_byte(b: u8) -> bool {
    WORD_BYTES[b as usize]
}

impl<'a> Lexer<'a> {
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

    /// Skips whitespace and comments; returns false at an unterminated comment.
    fn skip_trivia(&mut self) -> bool {
        let s = self.sql;
        loop {
            while self.pos < s.len() && s[self.pos].is_ascii_whitespace() {
                self.pos += 1;
            }
            let rest = &s[self.pos..];
            // Most tokens start with none of the bytes a comment can start with.
            if !matches!(rest.first(), Some(b'#' | b'-' | b'/' | b'*')) {
                return true;
            }
            if rest.first() == Some(&b'#')
                || (rest.starts_with(b"--")
                    && rest
                        .get(2)
                        .is_none_or(|b| b.is_ascii_whitespace() || *b < 0x20))
            {
                while self.pos < s.len() && s[self.pos] != b'\n' {
                    self.pos += 1;
                }
            } else if rest.starts_with(b"/*!") || rest.starts_with(b"/*M!") {
                self.pos += if rest[2] == b'!' { 3 } else { 4 };
                while self.pos < s.len() && s[self.pos].is_ascii_digit() {
                    self.pos += 1;
                }
                self.in_executable_comment = true;
            } else if rest.starts_with(b"/*") {
                match find(&rest[2..], b"*/") {
                    Some(i) => {
                        if let Some(h) = RouteHint::in_comment(&rest[2..2 + i]) {
                            self.hint = Some(h);
                        }
                        self.pos += 2 + i + 2;
                    }
                    None => return false,
                }
            } else if self.in_executable_comment && rest.starts_with(b"*/") {
                self.pos += 2;
                self.in_executable_comment = false;
            } else {
                return true;
            }
        }
    }

    /// Position after a quoted run starting at `self.pos` (the opening quote), or `None` if
    /// it never closes. A doubled quote is part of the text; so is a backslash-escaped byte
    /// in strings.
    fn quoted_end(&self, quote: u8) -> Option<usize> {
        let s = self.sql;
        let mut i = self.pos + 1;
        while i < s.len() {
            let b = s[i];
            if b == b'\\' && quote != b'`' {
                i += 2;
                continue;
            }
            if b == quote {
                if s.get(i + 1) == Some(&quote) {
                    i += 2;
                    continue;
                }
                return Some(i + 1);
            }
            i += 1;
        }
        None
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let s = self.sql;
        let start = self.pos;
        if !self.skip_trivia() {
            self.pos = s.len();
            return Some(Token {
                kind: TokenKind::Unterminated,
                text: &s[start..],
                start,
            });
        }
        let start = self.pos;
        let b = *s.get(start)?;
        let (kind, end) = match b {
            b'\'' | b'"' | b'`' => {
                let kind = if b == b'`' {
                    TokenKind::QuotedIdent
                } else {
                    TokenKind::String
                };
                match self.quoted_end(b) {
                    Some(end) => (kind, end),
                    None => (TokenKind::Unterminated, s.len()),
                }
            }
            b'@' => {
                if s.get(start + 1) == Some(&b'@') {
                    let mut end = start + 2;
                    while end < s.len() && (is_word_byte(s[end]) || s[end] == b'.') {
                        end += 1;
                    }
                    (TokenKind::SysVar, end)
                } else if let Some(&q @ (b'\'' | b'"' | b'`')) = s.get(start + 1) {
                    self.pos = start + 1;
                    match self.quoted_end(q) {
                        Some(end) => (TokenKind::UserVar, end),
                        None => (TokenKind::Unterminated, s.len()),
                    }
                } else {
                    let mut end = start + 1;
                    while end < s.len() && (is_word_byte(s[end]) || s[end] == b'.') {
                        end += 1;
                    }
                    (TokenKind::UserVar, end)
                }
            }
            b'0'..=b'9' => {
                let mut end = start + 1;
                while end < s.len() && (is_word_byte(s[end]) || s[end] == b'.') {
                    end += 1;
                }
                (TokenKind::Number, end)
            }
            b if is_word_byte(b) => {
                let mut end = start + 1;
                while end < s.len() && is_word_byte(s[end]) {
                    end += 1;
                }
                (TokenKind::Word, end)
            }
            _ => (TokenKind::Punct, start + 1),
        };
        self.pos = end;
        Some(Token {
            kind,
            text: &s[start..end],
            start,
        })
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
