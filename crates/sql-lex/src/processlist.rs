//! `SHOW [FULL] PROCESSLIST` and `information_schema.PROCESSLIST`: the server's list of its
//! connections, which a gateway with connection ids of its own answers from its own sessions.
//! Both are found only in statements whose [`scan`](crate::scan) carries
//! [`Scan::PROCESSLIST`](crate::Scan::PROCESSLIST), so this slower, token-by-token reading
//! costs nothing to other statements.

use crate::lexer::{Lexer, Token, TokenKind};

/// Reads `sql` as a whole `SHOW [FULL] PROCESSLIST`: `Some(full)`, else `None` (including
/// that statement followed by another).
pub fn parse_show_processlist(sql: &[u8]) -> Option<bool> {
    let mut tokens = Lexer::new(sql).peekable();
    if !tokens.next()?.is("SHOW") {
        return None;
    }
    let full = tokens.next_if(|t| t.is("FULL")).is_some();
    if !tokens.next()?.is("PROCESSLIST") {
        return None;
    }
    tokens.all(|t| t.is_punct(b';')).then_some(full)
}

/// The statement with the process list in place would be longer than the limit given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong;

/// Words that may follow a table reference and are not an alias of it.
const NOT_AN_ALIAS: &[&str] = &[
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "OFFSET",
    "FETCH",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "CROSS",
    "NATURAL",
    "STRAIGHT_JOIN",
    "FULL",
    "ON",
    "USING",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "MINUS",
    "FOR",
    "LOCK",
    "WINDOW",
    "INTO",
    "USE",
    "IGNORE",
    "FORCE",
    "PARTITION",
    "PROCEDURE",
    "RETURNING",
    "SET",
];

/// Words after which a name in a `FROM` clause is a table.
const BEFORE_TABLE: &[&str] = &["FROM", "JOIN", "STRAIGHT_JOIN"];

/// Words after which `TABLE` starts a query of its own (MySQL 8's `TABLE t`).
const BEFORE_TABLE_QUERY: &[&str] = &["UNION", "ALL", "DISTINCT", "EXCEPT", "INTERSECT"];

/// Words that start a clause: a `,` after `FROM` (and its joins' `ON` conditions) separates
/// tables, after any other clause word it separates something else.
const CLAUSES: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "SET",
    "VALUES",
    "WINDOW",
    "RETURNING",
    "INTO",
];

/// An unquoted or `` `quoted` `` name equal to `name`, case-blind (quoted names with an
/// escaped backtick never match).
fn names(t: &Token<'_>, name: &str) -> bool {
    match t.kind {
        TokenKind::Word => t.text.eq_ignore_ascii_case(name.as_bytes()),
        TokenKind::QuotedIdent => {
            t.text.len() == name.len() + 2
                && t.text[1..=name.len()].eq_ignore_ascii_case(name.as_bytes())
        }
        _ => false,
    }
}

/// Appends `sql` to `out` with every reference to the table `information_schema.PROCESSLIST`
/// (any case, quoted or not; also a bare `PROCESSLIST` when `in_information_schema`, the
/// session's current schema) replaced by what `derived` returns, a parenthesised query giving
/// its rows; `derived` is called once, at the first reference, and not at all without one.
/// The derived table is named as the reference was written, unless the statement gives it
/// an alias of its own; a column named through the table (`information_schema.PROCESSLIST.ID`)
/// loses the schema. Statements that describe the table rather than read it (`SHOW`,
/// `DESCRIBE`) are left as they are. A table in parentheses (`FROM (t, PROCESSLIST)`) counts
/// too, and MySQL 8's `TABLE information_schema.PROCESSLIST` becomes `SELECT * FROM` the
/// derived table. Returns whether anything was replaced, or [`TooLong`] (and `out` holds a
/// part) as soon as a replacement makes `out` longer than `limit` bytes: a derived table of
/// many sessions, perhaps several times over, is not built past it.
///
/// # Errors
///
/// [`TooLong`] when the rewritten statement does not fit in `limit`.
pub fn replace_processlist_tables(
    sql: &[u8],
    in_information_schema: bool,
    derived: impl FnOnce() -> Vec<u8>,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<bool, TooLong> {
    let derived = std::cell::LazyCell::new(derived);
    let tokens: Vec<Token<'_>> = Lexer::new(sql).collect();
    let mut copied = 0;
    let mut replaced = false;
    // The clause word last seen at each parenthesis depth (innermost last).
    let mut clause: Vec<&[u8]> = vec![b""];
    let mut describes = false;
    let mut statement_start = true;
    // Whether the token before `at` is where a table reference goes: after `FROM` or a join,
    // or after a `,` or `(` among a `FROM` clause's tables.
    let table_follows = |at: usize, clause: &[&[u8]]| {
        let in_from = clause
            .last()
            .is_some_and(|c| c.eq_ignore_ascii_case(b"FROM"));
        at.checked_sub(1).map(|p| tokens[p]).is_some_and(|p| {
            BEFORE_TABLE.iter().any(|w| p.is(w))
                || ((p.is_punct(b',') || p.is_punct(b'(')) && in_from)
        })
    };
    // Whether the token at `at` starts a query: a statement's first, or after `(` or a set
    // operation.
    let query_starts = |at: usize| {
        at.checked_sub(1).map(|p| tokens[p]).is_none_or(|p| {
            p.is_punct(b';') || p.is_punct(b'(') || BEFORE_TABLE_QUERY.iter().any(|w| p.is(w))
        })
    };
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        if statement_start {
            describes = t.is("SHOW") || t.is("DESCRIBE") || t.is("DESC") || t.is("HELP");
            statement_start = false;
        }
        if t.is_punct(b';') {
            statement_start = true;
            clause.clear();
            clause.push(b"");
        } else if t.is_punct(b'(') {
            // `FROM (a, b)`: the parentheses hold tables.
            let tables = table_follows(i, &clause);
            clause.push(if tables { b"FROM" } else { b"" });
        } else if t.is_punct(b')') {
            if clause.len() > 1 {
                clause.pop();
            }
        } else if CLAUSES.iter().any(|c| t.is(c)) {
            *clause.last_mut().expect("never empty") = t.text;
        }
        let prev = i.checked_sub(1).map(|p| tokens[p]);
        let after_dot = prev.is_some_and(|p| p.is_punct(b'.'));
        // `information_schema . PROCESSLIST`, or a bare `PROCESSLIST` in that schema.
        let table_at = if names(&t, "information_schema")
            && !after_dot
            && tokens.get(i + 1).is_some_and(|d| d.is_punct(b'.'))
            && tokens.get(i + 2).is_some_and(|n| names(n, "PROCESSLIST"))
        {
            Some(i + 2)
        } else if in_information_schema && names(&t, "PROCESSLIST") && !after_dot {
            Some(i)
        } else {
            None
        };
        let Some(name_at) = table_at else {
            i += 1;
            continue;
        };
        let name = tokens[name_at];
        let end = name.start + name.text.len();
        let next = tokens.get(name_at + 1);
        if next.is_some_and(|n| n.is_punct(b'.')) {
            // A column named through the table: the derived table keeps the table's name.
            if name_at != i {
                out.extend_from_slice(&sql[copied..t.start]);
                out.extend_from_slice(name.text);
                copied = end;
                replaced = true;
            }
            i = name_at + 1;
            continue;
        }
        // `TABLE information_schema.PROCESSLIST`, a query of its own.
        let table_query = prev.is_some_and(|p| p.is("TABLE")) && query_starts(i - 1);
        let is_table = !describes && (table_follows(i, &clause) || table_query);
        if !is_table {
            i = name_at + 1;
            continue;
        }
        let aliased = !table_query
            && next.is_some_and(|n| {
                n.kind == TokenKind::QuotedIdent
                    || (n.kind == TokenKind::Word && !NOT_AN_ALIAS.iter().any(|w| n.is(w)))
            });
        if table_query {
            out.extend_from_slice(&sql[copied..tokens[i - 1].start]);
            out.extend_from_slice(b"SELECT * FROM ");
        } else {
            out.extend_from_slice(&sql[copied..t.start]);
        }
        out.extend_from_slice(&derived);
        if !aliased {
            out.extend_from_slice(b" AS ");
            out.extend_from_slice(name.text);
        }
        copied = end;
        replaced = true;
        if out.len() > limit {
            return Err(TooLong);
        }
        i = name_at + 1;
    }
    out.extend_from_slice(&sql[copied..]);
    if replaced && out.len() > limit {
        return Err(TooLong);
    }
    Ok(replaced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{scan, Scan};

    fn rewrite(sql: &str, in_is: bool) -> Option<String> {
        let mut out = Vec::new();
        replace_processlist_tables(
            sql.as_bytes(),
            in_is,
            || b"(D)".to_vec(),
            usize::MAX,
            &mut out,
        )
        .unwrap()
        .then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn show_processlist_is_read_whole() {
        assert_eq!(parse_show_processlist(b"SHOW PROCESSLIST"), Some(false));
        assert_eq!(
            parse_show_processlist(b"show full processlist;"),
            Some(true)
        );
        assert_eq!(
            parse_show_processlist(b" SHOW /* x */ FULL `PROCESSLIST`"),
            None
        );
        assert_eq!(parse_show_processlist(b"SHOW PROCESSLIST; SELECT 1"), None);
        assert_eq!(parse_show_processlist(b"SHOW TABLES"), None);
        assert_eq!(parse_show_processlist(b"SELECT 'SHOW PROCESSLIST'"), None);
        assert_eq!(parse_show_processlist(b""), None);
    }

    #[test]
    fn the_scan_flags_the_word_in_any_form() {
        for sql in [
            "SHOW PROCESSLIST",
            "show full processlist",
            "SELECT * FROM information_schema.PROCESSLIST",
            "select id from `information_schema`.`processlist`",
            "SELECT * FROM ProcessList",
        ] {
            assert!(scan(sql.as_bytes()).has(Scan::PROCESSLIST), "{sql}");
        }
        for sql in [
            "SELECT 'PROCESSLIST'",
            "SELECT processlists FROM t",
            "SELECT `processlist_id` FROM t",
            "SELECT 1 /* PROCESSLIST */",
        ] {
            assert!(!scan(sql.as_bytes()).has(Scan::PROCESSLIST), "{sql}");
        }
    }

    #[test]
    fn table_references_become_the_derived_table() {
        assert_eq!(
            rewrite(
                "SELECT * FROM information_schema.PROCESSLIST WHERE ID = 5",
                false
            )
            .unwrap(),
            "SELECT * FROM (D) AS PROCESSLIST WHERE ID = 5"
        );
        assert_eq!(
            rewrite("select id from `INFORMATION_SCHEMA`.`processlist`", false).unwrap(),
            "select id from (D) AS `processlist`"
        );
        assert_eq!(
            rewrite(
                "SELECT p.ID FROM information_schema . processlist p ORDER BY 1",
                false
            )
            .unwrap(),
            "SELECT p.ID FROM (D) p ORDER BY 1"
        );
        assert_eq!(
            rewrite("SELECT * FROM information_schema.PROCESSLIST AS p", false).unwrap(),
            "SELECT * FROM (D) AS p"
        );
        assert_eq!(
            rewrite(
                "SELECT information_schema.PROCESSLIST.ID FROM information_schema.PROCESSLIST",
                false
            )
            .unwrap(),
            "SELECT PROCESSLIST.ID FROM (D) AS PROCESSLIST"
        );
        assert_eq!(
            rewrite(
                "SELECT * FROM t JOIN information_schema.PROCESSLIST ON t.id = PROCESSLIST.ID, information_schema.processlist q",
                false
            )
            .unwrap(),
            "SELECT * FROM t JOIN (D) AS PROCESSLIST ON t.id = PROCESSLIST.ID, (D) q"
        );
        assert_eq!(
            rewrite(
                "SELECT * FROM (SELECT 1 FROM t WHERE a) x, information_schema.PROCESSLIST",
                false
            )
            .unwrap(),
            "SELECT * FROM (SELECT 1 FROM t WHERE a) x, (D) AS PROCESSLIST"
        );
        assert_eq!(
            rewrite(
                "SELECT (SELECT COUNT(*) FROM information_schema.PROCESSLIST) AS n",
                false
            )
            .unwrap(),
            "SELECT (SELECT COUNT(*) FROM (D) AS PROCESSLIST) AS n"
        );
    }

    #[test]
    fn parenthesised_tables_and_table_queries_count() {
        assert_eq!(
            rewrite("SELECT * FROM (information_schema.PROCESSLIST)", false).unwrap(),
            "SELECT * FROM ((D) AS PROCESSLIST)"
        );
        assert_eq!(
            rewrite(
                "SELECT * FROM ((t, information_schema.PROCESSLIST p)) JOIN (processlist) ON 1",
                true
            )
            .unwrap(),
            "SELECT * FROM ((t, (D) p)) JOIN ((D) AS processlist) ON 1"
        );
        assert_eq!(
            rewrite("TABLE information_schema.PROCESSLIST ORDER BY ID", false).unwrap(),
            "SELECT * FROM (D) AS PROCESSLIST ORDER BY ID"
        );
        assert_eq!(
            rewrite(
                "SELECT 1; (TABLE processlist) UNION ALL TABLE `processlist`",
                true
            )
            .unwrap(),
            "SELECT 1; (SELECT * FROM (D) AS processlist) UNION ALL SELECT * FROM (D) AS `processlist`"
        );
        // Parentheses that hold no tables, and TABLE that starts no query.
        for sql in [
            "SELECT * FROM t WHERE x IN (processlist)",
            "SELECT * FROM a JOIN b USING (processlist)",
            "SELECT f(a, processlist) FROM t",
            "INSERT INTO t (processlist) VALUES (1)",
            "ANALYZE TABLE information_schema.PROCESSLIST",
            "LOCK TABLE processlist READ",
        ] {
            assert_eq!(rewrite(sql, true), None, "{sql}");
        }
    }

    #[test]
    fn the_derived_table_is_built_only_for_a_reference() {
        let mut built = 0;
        let mut out = Vec::new();
        for sql in [
            "SELECT * FROM performance_schema.processlist",
            "SELECT * FROM sys.processlist",
            "SELECT processlist FROM app.processlist",
            "SHOW COLUMNS FROM information_schema.PROCESSLIST",
        ] {
            out.clear();
            let replaced = replace_processlist_tables(
                sql.as_bytes(),
                false,
                || {
                    built += 1;
                    b"(D)".to_vec()
                },
                0,
                &mut out,
            );
            assert_eq!(replaced, Ok(false), "{sql}");
        }
        assert_eq!(built, 0);
        out.clear();
        let sql =
            "SELECT * FROM information_schema.PROCESSLIST a, information_schema.PROCESSLIST b";
        let replaced = replace_processlist_tables(
            sql.as_bytes(),
            false,
            || {
                built += 1;
                b"(D)".to_vec()
            },
            usize::MAX,
            &mut out,
        );
        assert_eq!(replaced, Ok(true));
        assert_eq!(out, b"SELECT * FROM (D) a, (D) b");
        assert_eq!(built, 1);
    }

    #[test]
    fn a_rewrite_stops_at_its_limit() {
        let sql =
            b"SELECT * FROM information_schema.PROCESSLIST a, information_schema.PROCESSLIST b";
        let whole = b"SELECT * FROM (DD) a, (DD) b";
        let mut out = Vec::new();
        let mut run = |limit| {
            out.clear();
            replace_processlist_tables(sql, false, || b"(DD)".to_vec(), limit, &mut out)
        };
        assert_eq!(run(whole.len()), Ok(true));
        assert_eq!(run(whole.len() - 1), Err(TooLong));
        // Past the limit at the first table: the second is never appended.
        assert_eq!(run(10), Err(TooLong));
        assert_eq!(out, b"SELECT * FROM (DD)");
    }

    #[test]
    fn a_bare_name_counts_only_in_information_schema() {
        let sql = "SELECT ID FROM PROCESSLIST WHERE ID = 3";
        assert_eq!(rewrite(sql, false), None);
        assert_eq!(
            rewrite(sql, true).unwrap(),
            "SELECT ID FROM (D) AS PROCESSLIST WHERE ID = 3"
        );
        assert_eq!(
            rewrite("SELECT PROCESSLIST.ID FROM processlist", true).unwrap(),
            "SELECT PROCESSLIST.ID FROM (D) AS processlist"
        );
        // Other schemas' tables of that name are theirs.
        assert_eq!(
            rewrite("SELECT * FROM performance_schema.processlist", true),
            None
        );
        assert_eq!(rewrite("SELECT * FROM sys.processlist", false), None);
    }

    #[test]
    fn descriptions_and_other_places_of_the_word_are_left_alone() {
        for sql in [
            "SHOW COLUMNS FROM information_schema.PROCESSLIST",
            "DESCRIBE information_schema.PROCESSLIST",
            "SHOW CREATE TABLE information_schema.PROCESSLIST",
            "SELECT 'information_schema.PROCESSLIST'",
            "SELECT processlist FROM t",
            "SELECT a, processlist FROM t",
        ] {
            assert_eq!(rewrite(sql, true), None, "{sql}");
        }
        // A statement after a SHOW is read on its own.
        assert_eq!(
            rewrite(
                "SHOW COLUMNS FROM information_schema.PROCESSLIST; SELECT * FROM information_schema.PROCESSLIST",
                false
            )
            .unwrap(),
            "SHOW COLUMNS FROM information_schema.PROCESSLIST; SELECT * FROM (D) AS PROCESSLIST"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_copied_when_nothing_matches(sql in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let mut out = Vec::new();
            let replaced = replace_processlist_tables(&sql, true, || b"(D)".to_vec(), usize::MAX, &mut out).unwrap();
            if !replaced {
                proptest::prop_assert_eq!(out, sql);
            }
        }
    }
}
