//! Which user variables a statement assigns, so a gateway can carry them to another backend
//! connection.

use crate::lexer::{Lexer, Token, TokenKind};

/// The name of a [`TokenKind::UserVar`] token as the server keys it: without `@`, unquoted,
/// ASCII-lowercased (user variable names are case-insensitive).
pub fn user_variable_name(t: &Token<'_>) -> Vec<u8> {
    let raw = t.text.get(1..).unwrap_or_default();
    let mut name = match raw.first() {
        Some(&q @ (b'\'' | b'"' | b'`')) if raw.len() >= 2 && raw.last() == Some(&q) => {
            let inner = &raw[1..raw.len() - 1];
            let mut out = Vec::with_capacity(inner.len());
            let mut i = 0;
            while i < inner.len() {
                let b = inner[i];
                if b == q && inner.get(i + 1) == Some(&q) {
                    i += 1;
                } else if b == b'\\' && q != b'`' && i + 1 < inner.len() {
                    i += 1;
                    out.push(inner[i]);
                    i += 1;
                    continue;
                }
                out.push(b);
                i += 1;
            }
            out
        }
        _ => raw.to_vec(),
    };
    name.make_ascii_lowercase();
    name
}

/// Appends to `out` the names (see [`user_variable_name`]) of the user variables `sql` may
/// assign: `SET @x = ...` (any item of a `SET` list), `@x := ...` anywhere, and the
/// variables of an `INTO @x, @y` list. Each name appears once. Reads are not reported.
/// Statements that assign variables the text does not name (`CALL`, a stored function) are
/// not seen here; the server's state-change flag is what reveals them.
pub fn assigned_user_variables(sql: &[u8], out: &mut Vec<Vec<u8>>) {
    let mut tokens = Lexer::new(sql).peekable();
    let mut depth = 0usize;
    // Per statement: whether it is a `SET`, and whether an INTO list is being read.
    let mut first_word = true;
    let mut is_set = false;
    let mut in_into = false;
    let mut prev: Option<Token<'_>> = None;
    while let Some(t) = tokens.next() {
        match t.kind {
            TokenKind::Punct if t.text == b";" => {
                first_word = true;
                is_set = false;
                in_into = false;
                depth = 0;
            }
            TokenKind::Punct if t.text == b"(" => depth += 1,
            TokenKind::Punct if t.text == b")" => depth = depth.saturating_sub(1),
            TokenKind::Word if first_word => {
                is_set = t.is("SET");
                first_word = false;
            }
            TokenKind::UserVar => {
                let assigned = in_into
                    || match tokens.peek() {
                        Some(n) if n.is_punct(b':') => {
                            let mut ahead = tokens.clone();
                            ahead.next();
                            ahead.next().is_some_and(|n| n.is_punct(b'='))
                        }
                        Some(n) if n.is_punct(b'=') => {
                            is_set
                                && depth == 0
                                && prev.is_some_and(|p| p.is("SET") || p.is_punct(b','))
                        }
                        _ => false,
                    };
                if assigned {
                    let name = user_variable_name(&t);
                    if !out.contains(&name) {
                        out.push(name);
                    }
                }
            }
            _ => {}
        }
        if t.is("INTO") {
            in_into = true;
        } else if !(t.kind == TokenKind::UserVar || t.is_punct(b',')) {
            in_into = false;
        }
        prev = Some(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assigned(sql: &str) -> Vec<String> {
        let mut out = Vec::new();
        assigned_user_variables(sql.as_bytes(), &mut out);
        out.into_iter()
            .map(|n| String::from_utf8(n).unwrap())
            .collect()
    }

    #[test]
    fn set_forms_assign() {
        assert_eq!(assigned("SET @a = 1"), ["a"]);
        assert_eq!(assigned("set @A:=1, @b = @a + 1"), ["a", "b"]);
        assert_eq!(
            assigned("SET sql_mode = '', @`Odd``Name` = 2, @'q''s' = 3, @\"d\" = 4"),
            ["odd`name", "q's", "d"]
        );
        assert_eq!(assigned("SET @a = (SELECT @b = 1)"), ["a"]);
        assert_eq!(assigned("/*!40101 SET @old = @@sql_mode */"), ["old"]);
    }

    #[test]
    fn select_assignments_and_into_lists_assign() {
        assert_eq!(assigned("SELECT @n := @n + 1 FROM t"), ["n"]);
        assert_eq!(assigned("SELECT a, b INTO @x, @y FROM t"), ["x", "y"]);
        assert_eq!(assigned("SELECT a FROM t INTO @x"), ["x"]);
        assert_eq!(assigned("SELECT 1; SET @z = 2"), ["z"]);
        assert_eq!(assigned("UPDATE t SET c = @v := c + 1"), ["v"]);
    }

    #[test]
    fn reads_do_not_assign() {
        assert!(assigned("SELECT @a, @b = 1, @c > 2 FROM t WHERE d = @e").is_empty());
        assert!(assigned("UPDATE t SET c = @v WHERE d = @w").is_empty());
        assert!(assigned("INSERT INTO t VALUES (@a)").is_empty());
        assert!(assigned("SELECT '@a := 1', `@b`").is_empty());
        assert!(assigned("SET sql_mode = @saved").is_empty());
    }
}
