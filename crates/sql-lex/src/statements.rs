//! Statements the gateway reads apart from the scan: the session values it answers in the
//! server's place (`CONNECTION_ID()`, `ROW_COUNT()`, ...), `SHOW WARNINGS|ERRORS`, `KILL`,
//! `USE` and `SET NAMES ... COLLATE`.

use crate::lexer::{Lexer, Token, TokenKind};
use crate::scan::AFTER_SELECT_LIST;

/// What a gateway answers in the server's place when a statement asks about its session:
/// the gateway's own connection id, and what the session's previous statement left (kept
/// by the gateway because the statement may run on another backend connection than the
/// previous one). `None` leaves the text as the server would read it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SessionValues {
    /// `CONNECTION_ID()`, everywhere in the text.
    pub connection_id: Option<u32>,
    /// `ROW_COUNT()` in the text's first statement (later ones follow a statement of the
    /// same text, on the same connection).
    pub row_count: Option<i64>,
    /// `FOUND_ROWS()` in the first statement.
    pub found_rows: Option<u64>,
    /// `@@warning_count` (`@@session.`, `@@local.`) in the first statement.
    pub warning_count: Option<u64>,
    /// `@@error_count` in the first statement.
    pub error_count: Option<u64>,
}

/// Appends `sql` to `out` with the calls and variables `values` covers replaced by their
/// values. A call or variable that is a whole item of the top-level select list keeps its
/// column name (`` 42 AS `CONNECTION_ID()` ``), as clients may read the column by name.
/// Returns whether anything was replaced.
pub fn replace_session_values(sql: &[u8], values: &SessionValues, out: &mut Vec<u8>) -> bool {
    let mut copied = 0;
    let mut depth = 0usize;
    let mut statement = 0usize;
    let mut in_select_list = false;
    let mut prev: Option<Token<'_>> = None;
    let mut tokens = Lexer::new(sql).peekable();
    let mut replaced = false;
    while let Some(t) = tokens.next() {
        if t.is_punct(b'(') {
            depth += 1;
        } else if t.is_punct(b')') {
            depth = depth.saturating_sub(1);
        } else if t.is_punct(b';') {
            statement += 1;
            depth = 0;
        }
        if depth == 0 {
            if t.is("SELECT") {
                in_select_list = true;
            } else if t.is_punct(b';') || AFTER_SELECT_LIST.iter().any(|k| t.is(k)) {
                in_select_list = false;
            }
        }
        let first = statement == 0;
        let value: Option<i128> = match t.kind {
            TokenKind::Word => {
                let empty_call = {
                    let mut ahead = tokens.clone();
                    ahead.next().is_some_and(|n| n.is_punct(b'('))
                        && ahead.next().is_some_and(|n| n.is_punct(b')'))
                };
                if !empty_call {
                    None
                } else if t.is("CONNECTION_ID") {
                    values.connection_id.map(i128::from)
                } else if t.is("ROW_COUNT") && first {
                    values.row_count.map(i128::from)
                } else if t.is("FOUND_ROWS") && first {
                    values.found_rows.map(i128::from)
                } else {
                    None
                }
            }
            TokenKind::SysVar
                if first
                    && !t
                        .text
                        .get(2..9)
                        .is_some_and(|p| p.eq_ignore_ascii_case(b"global.")) =>
            {
                let name = t.sysvar_name();
                if name.eq_ignore_ascii_case(b"warning_count") {
                    values.warning_count.map(i128::from)
                } else if name.eq_ignore_ascii_case(b"error_count") {
                    values.error_count.map(i128::from)
                } else {
                    None
                }
            }
            _ => None,
        };
        let Some(value) = value else {
            prev = Some(t);
            continue;
        };
        let last = if t.kind == TokenKind::Word {
            tokens.next();
            tokens.next().expect("checked above")
        } else {
            t
        };
        let end = last.start + last.text.len();
        let item_start = prev
            .is_some_and(|p| p.is("SELECT") || p.is("DISTINCT") || p.is("ALL") || p.is_punct(b','));
        let item_end = tokens.peek().is_none_or(|n| {
            n.is_punct(b',') || n.is_punct(b';') || AFTER_SELECT_LIST.iter().any(|k| n.is(k))
        });
        out.extend_from_slice(&sql[copied..t.start]);
        // Writing to a Vec cannot fail.
        let _ = std::io::Write::write_fmt(out, format_args!("{value}"));
        if depth == 0 && in_select_list && item_start && item_end {
            out.extend_from_slice(b" AS `");
            for &b in &sql[t.start..end] {
                if b == b'`' {
                    out.push(b'`');
                }
                out.push(b);
            }
            out.push(b'`');
        }
        copied = end;
        prev = Some(last);
        replaced = true;
    }
    out.extend_from_slice(&sql[copied..]);
    replaced
}

/// A `SHOW WARNINGS` / `SHOW ERRORS` statement, which a gateway answers from the conditions
/// it kept for the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShowDiagnostics {
    /// `SHOW ERRORS`: conditions of level Error only.
    pub errors_only: bool,
    /// `SHOW COUNT(*) WARNINGS|ERRORS`.
    pub count: bool,
    pub offset: u64,
    pub limit: Option<u64>,
}

/// Reads `sql` as a whole `SHOW [COUNT(*)] WARNINGS|ERRORS [LIMIT [offset,] n]`; `None`
/// for anything else (including that statement followed by another).
pub fn parse_show_diagnostics(sql: &[u8]) -> Option<ShowDiagnostics> {
    let mut tokens = Lexer::new(sql).peekable();
    if !tokens.next()?.is("SHOW") {
        return None;
    }
    let mut count = false;
    if tokens.next_if(|t| t.is("COUNT")).is_some() {
        for want in [b'(', b'*', b')'] {
            if !tokens.next()?.is_punct(want) {
                return None;
            }
        }
        count = true;
    }
    let what = tokens.next()?;
    let errors_only = if what.is("ERRORS") {
        true
    } else if what.is("WARNINGS") {
        false
    } else {
        return None;
    };
    let number = |t: Option<Token<'_>>| -> Option<u64> {
        let t = t?;
        if t.kind != TokenKind::Number {
            return None;
        }
        std::str::from_utf8(t.text).ok()?.parse().ok()
    };
    let mut out = ShowDiagnostics {
        errors_only,
        count,
        offset: 0,
        limit: None,
    };
    if !count && tokens.next_if(|t| t.is("LIMIT")).is_some() {
        let a = number(tokens.next())?;
        if tokens.next_if(|t| t.is_punct(b',')).is_some() {
            out.offset = a;
            out.limit = Some(number(tokens.next())?);
        } else if tokens.next_if(|t| t.is("OFFSET")).is_some() {
            out.offset = number(tokens.next())?;
            out.limit = Some(a);
        } else {
            out.limit = Some(a);
        }
    }
    tokens.all(|t| t.is_punct(b';')).then_some(out)
}

/// A `KILL` statement, as a gateway with its own connection ids must handle it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// `KILL [HARD|SOFT] [CONNECTION] id`.
    Connection(u64),
    /// `KILL [HARD|SOFT] QUERY id`.
    Query(u64),
    /// Another form (`KILL USER`, `KILL QUERY ID`, an expression): the gateway cannot map it.
    Unsupported,
}

/// Reads `sql` as a `KILL` statement; `None` when it is not one.
pub fn parse_kill(sql: &[u8]) -> Option<Kill> {
    let mut tokens = Lexer::new(sql).peekable();
    if !tokens.next()?.is("KILL") {
        return None;
    }
    tokens.next_if(|t| t.is("HARD") || t.is("SOFT"));
    let query = tokens.next_if(|t| t.is("QUERY")).is_some();
    if !query {
        tokens.next_if(|t| t.is("CONNECTION"));
    }
    let id = match tokens.next() {
        Some(t) if t.kind == TokenKind::Number => std::str::from_utf8(t.text)
            .ok()
            .and_then(|n| n.parse::<u64>().ok()),
        _ => None,
    };
    let rest_is_empty = tokens.all(|t| t.is_punct(b';'));
    Some(match id {
        Some(id) if rest_is_empty && query => Kill::Query(id),
        Some(id) if rest_is_empty => Kill::Connection(id),
        _ => Kill::Unsupported,
    })
}

/// The schema `USE name` (or `` USE `name` ``) names, if that is the whole statement; `None`
/// for a quoted name with an escaped backtick.
pub fn parse_use(sql: &[u8]) -> Option<&[u8]> {
    let mut tokens = Lexer::new(sql);
    if !tokens.next()?.is("USE") {
        return None;
    }
    let name = tokens.next()?;
    if !tokens.all(|t| t.is_punct(b';')) {
        return None;
    }
    match name.kind {
        TokenKind::Word => Some(name.text),
        TokenKind::QuotedIdent => {
            let inner = &name.text[1..name.text.len() - 1];
            (!inner.contains(&b'`')).then_some(inner)
        }
        _ => None,
    }
}

/// The collation named by `SET NAMES cs COLLATE co` (unquoted), if that is the statement.
pub fn set_names_collation(sql: &[u8]) -> Option<&[u8]> {
    let mut tokens = Lexer::new(sql);
    if !tokens.next()?.is("SET") || !tokens.next()?.is("NAMES") {
        return None;
    }
    tokens.find(|t| t.is("COLLATE"))?;
    let t = tokens.next()?;
    match t.kind {
        TokenKind::Word => Some(t.text),
        TokenKind::String | TokenKind::QuotedIdent if t.text.len() >= 2 => {
            Some(&t.text[1..t.text.len() - 1])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{scan, Scan};

    #[test]
    fn use_names_its_schema() {
        assert_eq!(parse_use(b"USE shop"), Some(&b"shop"[..]));
        assert_eq!(parse_use(b"use `my db`;"), Some(&b"my db"[..]));
        assert_eq!(parse_use(b"USE `a``b`"), None);
        assert_eq!(parse_use(b"USE a; SELECT 1"), None);
        assert_eq!(parse_use(b"SELECT 1"), None);
        assert_eq!(parse_use(b"USE"), None);
    }

    #[test]
    fn connection_id_calls_are_replaced() {
        let mut out = Vec::new();
        let sql =
            b"SELECT CONNECTION_ID(), 'CONNECTION_ID()', connection_id ( ) /* CONNECTION_ID() */";
        assert!(scan(sql).has(Scan::CONNECTION_ID));
        replace_session_values(sql, &id(42), &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "SELECT 42 AS `CONNECTION_ID()`, 'CONNECTION_ID()', 42 AS `connection_id ( )` /* CONNECTION_ID() */"
        );
        let cases: &[(&str, &str)] = &[
            ("SELECT CONNECTION_ID() > 0", "SELECT 42 > 0"),
            ("SELECT CONNECTION_ID() AS me", "SELECT 42 AS me"),
            (
                "SELECT a FROM t WHERE b IN (1, CONNECTION_ID(), 3)",
                "SELECT a FROM t WHERE b IN (1, 42, 3)",
            ),
            (
                "SELECT a, CONNECTION_ID() FROM t ORDER BY a, CONNECTION_ID()",
                "SELECT a, 42 AS `CONNECTION_ID()` FROM t ORDER BY a, 42",
            ),
            (
                "SELECT CONCAT('x', CONNECTION_ID());",
                "SELECT CONCAT('x', 42);",
            ),
            ("DO CONNECTION_ID()", "DO 42"),
        ];
        for (sql, want) in cases {
            out.clear();
            replace_session_values(sql.as_bytes(), &id(42), &mut out);
            assert_eq!(String::from_utf8_lossy(&out), *want);
        }
        out.clear();
        assert!(!replace_session_values(
            b"SELECT CONNECTION_ID(1), CONNECTION_ID",
            &id(7),
            &mut out
        ));
        assert_eq!(out, b"SELECT CONNECTION_ID(1), CONNECTION_ID");
        assert!(!scan(b"SELECT 'CONNECTION_ID()'").has(Scan::CONNECTION_ID));
    }

    fn id(connection_id: u32) -> SessionValues {
        SessionValues {
            connection_id: Some(connection_id),
            ..SessionValues::default()
        }
    }

    #[test]
    fn previous_statement_values_are_replaced_in_the_first_statement_only() {
        let values = SessionValues {
            connection_id: Some(9),
            row_count: Some(-1),
            found_rows: Some(12),
            warning_count: Some(2),
            error_count: Some(0),
        };
        let cases: &[(&str, &str)] = &[
            (
                "SELECT ROW_COUNT(), found_rows(), @@warning_count, @@session.error_count",
                "SELECT -1 AS `ROW_COUNT()`, 12 AS `found_rows()`, 2 AS `@@warning_count`, 0 AS `@@session.error_count`",
            ),
            (
                "SELECT ROW_COUNT() + 1; SELECT ROW_COUNT(), CONNECTION_ID()",
                "SELECT -1 + 1; SELECT ROW_COUNT(), 9 AS `CONNECTION_ID()`",
            ),
            ("SET @n = @@local.warning_count", "SET @n = 2"),
            ("SELECT @@global.warning_count", "SELECT @@global.warning_count"),
            ("SELECT @@warning_count2", "SELECT @@warning_count2"),
        ];
        for (sql, want) in cases {
            let mut out = Vec::new();
            replace_session_values(sql.as_bytes(), &values, &mut out);
            assert_eq!(String::from_utf8_lossy(&out), *want);
        }
        let mut out = Vec::new();
        let only_id = id(9);
        assert!(!replace_session_values(
            b"SELECT ROW_COUNT()",
            &only_id,
            &mut out
        ));
        assert_eq!(out, b"SELECT ROW_COUNT()");
    }

    #[test]
    fn show_diagnostics_forms() {
        let show = |errors_only, count, offset, limit| {
            Some(ShowDiagnostics {
                errors_only,
                count,
                offset,
                limit,
            })
        };
        assert_eq!(
            parse_show_diagnostics(b"SHOW WARNINGS"),
            show(false, false, 0, None)
        );
        assert_eq!(
            parse_show_diagnostics(b"show errors;"),
            show(true, false, 0, None)
        );
        assert_eq!(
            parse_show_diagnostics(b"SHOW WARNINGS LIMIT 2, 3"),
            show(false, false, 2, Some(3))
        );
        assert_eq!(
            parse_show_diagnostics(b"SHOW WARNINGS LIMIT 3 OFFSET 2"),
            show(false, false, 2, Some(3))
        );
        assert_eq!(
            parse_show_diagnostics(b"SHOW COUNT(*) ERRORS"),
            show(true, true, 0, None)
        );
        assert_eq!(parse_show_diagnostics(b"SHOW WARNINGS; SELECT 1"), None);
        assert_eq!(parse_show_diagnostics(b"SHOW WARNINGS LIMIT x"), None);
        assert_eq!(parse_show_diagnostics(b"SHOW TABLES"), None);
    }

    #[test]
    fn kill_forms() {
        assert_eq!(parse_kill(b"SELECT 1"), None);
        assert_eq!(parse_kill(b"KILL 12"), Some(Kill::Connection(12)));
        assert_eq!(
            parse_kill(b"kill connection 12;"),
            Some(Kill::Connection(12))
        );
        assert_eq!(parse_kill(b"KILL HARD QUERY 7"), Some(Kill::Query(7)));
        assert_eq!(parse_kill(b"KILL SOFT 7"), Some(Kill::Connection(7)));
        assert_eq!(parse_kill(b"KILL QUERY ID 7"), Some(Kill::Unsupported));
        assert_eq!(parse_kill(b"KILL USER app"), Some(Kill::Unsupported));
        assert_eq!(parse_kill(b"KILL 1; SELECT 1"), Some(Kill::Unsupported));
        assert_eq!(parse_kill(b"KILL 1+1"), Some(Kill::Unsupported));
        assert_eq!(parse_kill(b"KILL"), Some(Kill::Unsupported));
        assert!(scan(b"SELECT 1; KILL 3").has(Scan::KILL));
        assert!(!scan(b"SELECT 'KILL 3'").has(Scan::KILL));
    }
}
