//! Which schema a statement is about, when its text names one: what a gateway in front of
//! several clusters needs to send `SHOW CREATE TABLE shop.t` or an `information_schema`
//! query about `shop` to the cluster that holds `shop`, whatever the session's own schema.
//!
//! Read, as far as a few tokens tell (it is not a parser; what it does not read it does not
//! report, and then the statement goes where the session's statements go):
//! - a table name qualified by its schema after `FROM`, `JOIN`, `INTO`, `UPDATE`, `TABLE`, a
//!   first `DESCRIBE`/`DESC`/`EXPLAIN`, and after the commas of a list of such names
//!   (`FROM shop.a AS x, shop.b`);
//! - the schema of the `SHOW` statements that take one: `SHOW [FULL] COLUMNS|FIELDS|INDEX|
//!   INDEXES|KEYS FROM t FROM shop`, `SHOW [FULL] TABLES|TRIGGERS|EVENTS FROM shop`,
//!   `SHOW TABLE STATUS FROM shop`, `SHOW OPEN TABLES FROM shop`, `SHOW CREATE DATABASE shop`,
//!   `SHOW CREATE TABLE|VIEW|... shop.t` (`IN` for `FROM` too);
//! - in a statement naming `information_schema`, the string a schema column is compared
//!   with: `table_schema = 'shop'`, `TABLE_SCHEMA IN ('shop')`, `c.index_schema = "shop"`
//!   (any column named `schema_name` or ending in `_schema`).
//!
//! Schemas every server has (`information_schema`, `performance_schema`, `mysql`, `sys`) are
//! left out: they say nothing about where the statement must run.

use crate::lexer::{Lexer, Token, TokenKind};

/// What [`schema_of`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaOf<'a> {
    /// The text names no schema (other than those every server has).
    Nothing,
    /// It names this one schema (as many times as it likes), unquoted.
    One(&'a [u8]),
    /// It names several, or one whose name it cannot read without unescaping (`` `a``b` ``,
    /// `'a\'b'`): no single schema decides.
    Several,
}

/// The schema `sql` (one statement) names (see the module's documentation). Costs one pass
/// over the text and no allocation; meant for statements [`scan`](crate::scan) marked with
/// [`Scan::QUALIFIED_TABLE`](crate::Scan::QUALIFIED_TABLE) or whose verb is `SHOW`.
pub fn schema_of(sql: &[u8]) -> SchemaOf<'_> {
    let mut read = Reader {
        tokens: Lexer::new(sql),
        names: Names::default(),
        compared: Names::default(),
        information_schema: false,
    };
    let Some(first) = read.tokens.next() else {
        return SchemaOf::Nothing;
    };
    if first.is("SHOW") {
        read.show();
    } else if first.is("CREATE") || first.is("DROP") || first.is("ALTER") {
        read.schema_ddl();
    } else {
        let mut next = Some(first);
        if first.is("DESCRIBE") || first.is("DESC") || first.is("EXPLAIN") {
            // `DESCRIBE shop.t`, not `EXPLAIN UPDATE shop.t ...` (read as any statement).
            let mut ahead = read.tokens.clone();
            if ahead.next().is_some_and(|t| is_name(&t))
                && ahead.next().is_some_and(|t| t.is_punct(b'.'))
            {
                next = read.table_list();
            }
        }
        read.statement(next);
    }
    if read.information_schema {
        read.names.merge(read.compared);
    }
    read.names.result()
}

/// Whether `sql` is `CREATE`, `DROP` or `ALTER` of a `DATABASE`/`SCHEMA`: the schema it names
/// may not exist (yet, or any more), so it cannot be the connection's current one meanwhile.
pub fn names_database(sql: &[u8]) -> bool {
    let mut tokens = Lexer::new(sql);
    tokens
        .next()
        .is_some_and(|t| t.is("CREATE") || t.is("DROP") || t.is("ALTER"))
        && tokens
            .next()
            .is_some_and(|t| t.is("DATABASE") || t.is("SCHEMA"))
}

/// Whether `name` is a schema every server has (compared as servers do: case-blind).
pub fn is_system_schema(name: &[u8]) -> bool {
    [
        &b"information_schema"[..],
        b"performance_schema",
        b"mysql",
        b"sys",
    ]
    .iter()
    .any(|s| name.eq_ignore_ascii_case(s))
}

/// The schemas named so far.
#[derive(Debug, Default, Clone, Copy)]
struct Names<'a> {
    one: Option<&'a [u8]>,
    several: bool,
}

impl<'a> Names<'a> {
    /// A name read from the text, `None` when it could not be read.
    fn add(&mut self, name: Option<&'a [u8]>) {
        match (name, self.one) {
            (Some(n), _) if is_system_schema(n) => {}
            (Some(n), None) => self.one = Some(n),
            (Some(n), Some(one)) if n == one => {}
            // Unreadable, or a second schema.
            (None, _) | (Some(_), Some(_)) => self.several = true,
        }
    }

    fn merge(&mut self, other: Names<'a>) {
        if other.several {
            self.several = true;
        }
        if other.one.is_some() {
            self.add(other.one);
        }
    }

    fn result(self) -> SchemaOf<'a> {
        match (self.several, self.one) {
            (true, _) => SchemaOf::Several,
            (false, Some(one)) => SchemaOf::One(one),
            (false, None) => SchemaOf::Nothing,
        }
    }
}

struct Reader<'a> {
    tokens: Lexer<'a>,
    /// Schemas of qualified names and of `SHOW`.
    names: Names<'a>,
    /// Strings schema columns are compared with: schemas only if the statement reads
    /// `information_schema`.
    compared: Names<'a>,
    information_schema: bool,
}

impl<'a> Reader<'a> {
    /// The rest of a statement other than `SHOW`, from `next` on.
    fn statement(&mut self, mut next: Option<Token<'a>>) {
        let mut after_key = false;
        while let Some(t) = next {
            // `ON DUPLICATE KEY UPDATE t.c = ...` names columns.
            let table_word = precedes_table(&t) && !(after_key && t.is("UPDATE"));
            after_key = t.is("KEY");
            next = if table_word {
                self.table_list()
            } else if is_schema_column(&t) {
                self.comparison()
            } else {
                self.tokens.next()
            };
        }
    }

    /// Table names separated by commas, each maybe with an alias (`a.t AS x, b.u y`).
    /// Returns the token after them.
    fn table_list(&mut self) -> Option<Token<'a>> {
        loop {
            let mut next = self.table_name();
            if next.is_some_and(|t| t.is("AS")) {
                next = self.tokens.next();
            }
            if next.is_some_and(|t| is_alias(&t)) {
                next = self.tokens.next();
            }
            if !next.is_some_and(|t| t.is_punct(b',')) {
                return next;
            }
        }
    }

    /// A table name next, `name` or `schema.name`, after the words that may come before it
    /// (`IGNORE`, `IF NOT EXISTS`...). Notes the schema; returns the token after the name.
    fn table_name(&mut self) -> Option<Token<'a>> {
        let mut t = self.tokens.next()?;
        while t.kind == TokenKind::Word && is_table_modifier(&t) {
            t = self.tokens.next()?;
        }
        if !is_name(&t) {
            return Some(t);
        }
        let after = self.tokens.next();
        if !after.is_some_and(|d| d.is_punct(b'.')) {
            return after;
        }
        match self.tokens.next() {
            Some(table) if is_name(&table) => {
                self.note_schema(&t);
                self.tokens.next()
            }
            other => other,
        }
    }

    /// After `CREATE`/`DROP`/`ALTER`: `DATABASE|SCHEMA [IF [NOT] EXISTS] name` names that
    /// schema; anything else is read as any statement (`CREATE TABLE shop.t ...`).
    fn schema_ddl(&mut self) {
        let mut ahead = self.tokens.clone();
        if !ahead
            .next()
            .is_some_and(|t| t.is("DATABASE") || t.is("SCHEMA"))
        {
            let next = self.tokens.next();
            self.statement(next);
            return;
        }
        let mut t = ahead.next();
        while t.is_some_and(|w| w.is("IF") || w.is("NOT") || w.is("EXISTS")) {
            t = ahead.next();
        }
        match t {
            Some(name) if is_name(&name) => self.note_schema(&name),
            _ => {}
        }
    }

    fn note_schema(&mut self, name: &Token<'a>) {
        let name = unquoted(name);
        if name.is_some_and(|n| n.eq_ignore_ascii_case(b"information_schema")) {
            self.information_schema = true;
        }
        self.names.add(name);
    }

    /// After a schema column: `= 'x'` or `IN ('x', ...)`. Returns the token after what it
    /// read.
    fn comparison(&mut self) -> Option<Token<'a>> {
        let t = self.tokens.next()?;
        if t.is_punct(b'=') {
            let value = self.tokens.next()?;
            if value.kind != TokenKind::String {
                return Some(value);
            }
            self.compared.add(unquoted(&value));
            return self.tokens.next();
        }
        if !t.is("IN") {
            return Some(t);
        }
        let open = self.tokens.next()?;
        if !open.is_punct(b'(') {
            return Some(open);
        }
        loop {
            let value = self.tokens.next()?;
            if value.kind != TokenKind::String {
                // `IN (SELECT ...)`, `IN (@x)`: which schemas, the text does not say.
                self.compared.add(None);
                return Some(value);
            }
            self.compared.add(unquoted(&value));
            let sep = self.tokens.next()?;
            if !sep.is_punct(b',') {
                return Some(sep);
            }
        }
    }

    /// After `SHOW`.
    fn show(&mut self) {
        let mut t = self.tokens.next();
        while t.is_some_and(|w| w.is("FULL") || w.is("EXTENDED")) {
            t = self.tokens.next();
        }
        let Some(what) = t else {
            return;
        };
        let word = |w: &str| what.is(w);
        if word("COLUMNS") || word("FIELDS") || word("INDEX") || word("INDEXES") || word("KEYS") {
            // `FROM [schema.]table [FROM schema]`.
            let Some(from) = self.tokens.next() else {
                return;
            };
            if !is_from_or_in(&from) {
                return;
            }
            if self.table_name().is_some_and(|t| is_from_or_in(&t)) {
                self.schema_name();
            }
        } else if word("TABLES") || word("TRIGGERS") || word("EVENTS") {
            self.schema_after_from();
        } else if word("TABLE") || word("OPEN") {
            // `SHOW TABLE STATUS FROM x`, `SHOW OPEN TABLES FROM x`.
            if self.tokens.next().is_some() {
                self.schema_after_from();
            }
        } else if word("CREATE") {
            let Some(kind) = self.tokens.next() else {
                return;
            };
            if kind.is("DATABASE") || kind.is("SCHEMA") {
                self.schema_name();
            } else {
                self.table_name();
            }
        }
    }

    /// `FROM schema` or `IN schema`, next.
    fn schema_after_from(&mut self) {
        if self.tokens.next().is_some_and(|t| is_from_or_in(&t)) {
            self.schema_name();
        }
    }

    /// A schema's name, next (after `IF NOT EXISTS`).
    fn schema_name(&mut self) {
        let mut t = self.tokens.next();
        while t.is_some_and(|w| w.kind == TokenKind::Word && is_table_modifier(&w)) {
            t = self.tokens.next();
        }
        if let Some(name) = t.filter(is_name) {
            self.note_schema(&name);
        }
    }
}

/// Words a table name follows (see [`Scan::QUALIFIED_TABLE`](crate::Scan::QUALIFIED_TABLE)).
fn precedes_table(t: &Token<'_>) -> bool {
    t.kind == TokenKind::Word
        && ["FROM", "JOIN", "STRAIGHT_JOIN", "INTO", "UPDATE", "TABLE"]
            .iter()
            .any(|w| t.is(w))
}

/// Words between a table word and the name: `UPDATE LOW_PRIORITY IGNORE t`,
/// `DROP TABLE IF EXISTS t`, `CREATE TABLE IF NOT EXISTS t`.
fn is_table_modifier(t: &Token<'_>) -> bool {
    ["LOW_PRIORITY", "IGNORE", "IF", "NOT", "EXISTS"]
        .iter()
        .any(|w| t.is(w))
}

/// A word that may be a table's alias: not one that goes on with the statement after a
/// table name (`JOIN`, or a list's end, which a comma does not follow anyway).
fn is_alias(t: &Token<'_>) -> bool {
    match t.kind {
        TokenKind::QuotedIdent => true,
        TokenKind::Word => !precedes_table(t) && !t.is("ON") && !t.is("USING"),
        _ => false,
    }
}

fn is_from_or_in(t: &Token<'_>) -> bool {
    t.is("FROM") || t.is("IN")
}

fn is_name(t: &Token<'_>) -> bool {
    matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent)
}

/// `table_schema`, `schema_name`, `index_schema`... (also quoted with backticks).
fn is_schema_column(t: &Token<'_>) -> bool {
    const SUFFIX: &[u8] = b"_SCHEMA";
    let name = match t.kind {
        TokenKind::Word => t.text,
        TokenKind::QuotedIdent => &t.text[1..t.text.len() - 1],
        _ => return false,
    };
    name.eq_ignore_ascii_case(b"SCHEMA_NAME")
        || (name.len() > SUFFIX.len()
            && name[name.len() - SUFFIX.len()..].eq_ignore_ascii_case(SUFFIX))
}

/// A name or string without its quotes; `None` when reading it would take unescaping.
fn unquoted<'a>(t: &Token<'a>) -> Option<&'a [u8]> {
    match t.kind {
        TokenKind::Word => Some(t.text),
        TokenKind::QuotedIdent | TokenKind::String => {
            let quote = t.text[0];
            let inner = &t.text[1..t.text.len() - 1];
            // A doubled quote; in a string, a backslash escape too.
            let escaped = inner.contains(&quote) || (quote != b'`' && inner.contains(&b'\\'));
            (!escaped).then_some(inner)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{scan, Scan, Verb};

    fn of(sql: &str) -> SchemaOf<'_> {
        schema_of(sql.as_bytes())
    }

    fn one(name: &str) -> SchemaOf<'_> {
        SchemaOf::One(name.as_bytes())
    }

    /// What a gateway asks before reading the text: marked by the scan, a `SHOW`, or DDL.
    fn marked(sql: &str) -> bool {
        let s = scan(sql.as_bytes());
        s.has(Scan::QUALIFIED_TABLE)
            || matches!(s.verb, Verb::Show | Verb::Create | Verb::Drop | Verb::Alter)
    }

    #[test]
    fn database_ddl_names_its_schema() {
        for sql in [
            "CREATE DATABASE shop",
            "create schema if not exists `shop`",
            "DROP DATABASE IF EXISTS shop",
            "ALTER DATABASE shop CHARACTER SET utf8mb4",
            "CREATE TABLE shop.t (a INT)",
            "CREATE TABLE IF NOT EXISTS shop.t (a INT)",
            "DROP TABLE shop.t",
        ] {
            assert!(marked(sql), "{sql}");
            assert_eq!(schema_of(sql.as_bytes()), one("shop"), "{sql}");
        }
        assert_eq!(schema_of(b"CREATE DATABASE mysql"), SchemaOf::Nothing);
        assert!(names_database(b"/* x */ create Schema shop"));
        assert!(!names_database(b"CREATE TABLE shop.t (a INT)"));
        assert_eq!(schema_of(b"CREATE TABLE t (a INT)"), SchemaOf::Nothing);
    }

    #[test]
    fn qualified_table_names() {
        let cases = [
            "SELECT * FROM shop.t",
            "select a, b from shop.t where a = 1",
            "SELECT * FROM `shop`.`t` AS x",
            "SELECT * FROM `shop` . t",
            "SELECT * FROM\n\tshop.t",
            "SELECT * FROM /* other.t */ shop.t -- other.u",
            "SELECT * FROM t1 JOIN shop.t ON t1.a = t.a",
            "SELECT * FROM shop.a x, shop.b AS y WHERE x.i = y.i",
            "SELECT * FROM x STRAIGHT_JOIN shop.t",
            "INSERT INTO shop.t VALUES (1)",
            "insert ignore into shop.t (a) values (2)",
            "REPLACE INTO shop.t SET a = 1",
            "UPDATE shop.t SET a = 2 WHERE b = 'other.t'",
            "DELETE FROM shop.t WHERE a = 3",
            "INSERT INTO shop.t VALUES (1) ON DUPLICATE KEY UPDATE t.a = 2",
            "CREATE TABLE shop.t (a INT)",
            "ALTER TABLE shop.t ADD COLUMN b INT",
            "DESCRIBE shop.t",
            "desc `shop`.t",
            "EXPLAIN shop.t",
            "EXPLAIN SELECT * FROM shop.t",
            "/*manifold:hlc=1*/ SELECT * FROM shop.t",
            "SELECT * FROM shop.t;",
        ];
        for sql in cases {
            assert_eq!(of(sql), one("shop"), "{sql}");
            assert!(marked(sql), "{sql}");
        }
        // Read here, but the scan looks one word back only: a gateway asking it first
        // leaves these where the session's statements go (DDL is always asked: below).
        let sql = "UPDATE LOW_PRIORITY shop.t SET a = 2";
        assert_eq!(of(sql), one("shop"), "{sql}");
        assert!(!marked(sql), "{sql}");
    }

    #[test]
    fn show_statements_with_a_schema() {
        let cases = [
            "SHOW CREATE TABLE shop.t",
            "show create table `shop`.`t`",
            "SHOW COLUMNS FROM t FROM shop",
            "SHOW FULL COLUMNS FROM shop.t",
            "SHOW FIELDS IN t IN `shop`",
            "SHOW INDEX FROM t FROM shop",
            "SHOW KEYS FROM shop.t",
            "SHOW FULL TABLES FROM shop",
            "SHOW TABLES IN shop LIKE 't%'",
            "SHOW TABLE STATUS FROM shop",
            "SHOW TABLE STATUS FROM shop LIKE 't'",
            "SHOW TRIGGERS FROM shop",
            "SHOW OPEN TABLES FROM shop",
            "SHOW CREATE DATABASE shop",
            "SHOW CREATE SCHEMA IF NOT EXISTS shop",
            "SHOW CREATE VIEW shop.v",
        ];
        for sql in cases {
            assert_eq!(of(sql), one("shop"), "{sql}");
            assert!(marked(sql), "{sql}");
        }
        for sql in [
            "SHOW TABLES",
            "SHOW COLUMNS FROM t",
            "SHOW CREATE TABLE t",
            "SHOW MASTER STATUS",
            "SHOW BINLOG EVENTS IN 'bin.000001' FROM 4",
            "SHOW VARIABLES LIKE 'x'",
            "SHOW",
        ] {
            assert_eq!(of(sql), SchemaOf::Nothing, "{sql}");
        }
    }

    #[test]
    fn information_schema_comparisons() {
        let cases = [
            "SELECT COLUMN_NAME, COLLATION_NAME, CHARACTER_SET_NAME, COLUMN_COMMENT, COLUMN_TYPE, COLUMN_KEY, ORDINAL_POSITION, DATA_TYPE, CHARACTER_OCTET_LENGTH FROM information_schema.columns WHERE table_schema = 'shop' AND table_name = 't' ORDER BY ORDINAL_POSITION",
            "SELECT * FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA IN ('shop')",
            "SELECT * FROM information_schema.statistics s WHERE s.index_schema = \"shop\"",
            "SELECT * FROM information_schema.KEY_COLUMN_USAGE WHERE `TABLE_SCHEMA`='shop' AND REFERENCED_TABLE_SCHEMA = 'shop'",
            "SELECT SCHEMA_NAME FROM information_schema.schemata WHERE schema_name = 'shop'",
            "SELECT * FROM information_schema.tables WHERE table_schema IN ('shop', 'shop')",
        ];
        for sql in cases {
            assert_eq!(of(sql), one("shop"), "{sql}");
            assert!(marked(sql), "{sql}");
        }
        // Not about information_schema: a column that happens to have the name.
        assert_eq!(
            of("SELECT * FROM app.t WHERE table_schema = 'shop'"),
            one("app")
        );
        assert_eq!(
            of("SELECT * FROM information_schema.tables WHERE table_schema = DATABASE()"),
            SchemaOf::Nothing
        );
        assert_eq!(
            of("SELECT * FROM information_schema.tables WHERE table_schema IN ('a', 'b')"),
            SchemaOf::Several
        );
        assert_eq!(
            of("SELECT * FROM information_schema.tables WHERE table_schema IN (SELECT 1)"),
            SchemaOf::Several
        );
        assert_eq!(
            of("SELECT * FROM information_schema.tables WHERE table_schema <> 'a'"),
            SchemaOf::Nothing
        );
    }

    #[test]
    fn several_schemas_or_unreadable_names_decide_nothing() {
        for sql in [
            "SELECT * FROM shop.a JOIN other.b",
            "SELECT * FROM shop.a, other.b",
            "INSERT INTO shop.t SELECT * FROM other.t",
            "SHOW COLUMNS FROM shop.t FROM other",
            "SELECT * FROM `sh``op`.t",
            "SELECT * FROM information_schema.tables WHERE table_schema = 'sh\\'op'",
            "SELECT * FROM information_schema.tables WHERE table_schema = 'sh''op'",
        ] {
            assert_eq!(of(sql), SchemaOf::Several, "{sql}");
        }
    }

    #[test]
    fn names_are_case_sensitive_but_system_schemas_are_left_out() {
        assert_eq!(of("SELECT * FROM Shop.t JOIN shop.u"), SchemaOf::Several);
        assert_eq!(
            of("SELECT * FROM shop.t JOIN mysql.user JOIN performance_schema.threads"),
            one("shop")
        );
        assert_eq!(of("SELECT * FROM SYS.x"), SchemaOf::Nothing);
        assert!(is_system_schema(b"INFORMATION_SCHEMA"));
        assert!(!is_system_schema(b"shop"));
    }

    #[test]
    fn unqualified_names_and_column_qualifiers_name_no_schema() {
        for sql in [
            "SELECT * FROM t",
            "SELECT t.a, u.b FROM t JOIN u ON t.a = u.a WHERE t.c = 1 ORDER BY t.a, u.b",
            "SELECT 1.5, a.b FROM dual",
            "SELECT 'FROM shop.t'",
            "SELECT * FROM t /* FROM shop.t */",
            "UPDATE t SET t.a = 1",
            "SELECT * FROM t ORDER BY a DESC",
            "",
        ] {
            assert_eq!(of(sql), SchemaOf::Nothing, "{sql}");
        }
        // The scan marks none of these (the gateway reads no further).
        for sql in [
            "SELECT * FROM t",
            "SELECT t.a, u.b FROM t JOIN u ON t.a = u.a WHERE t.c = 1 ORDER BY t.a, u.b",
            "SELECT 'FROM shop.t'",
            "UPDATE t SET t.a = 1",
            "INSERT INTO t VALUES (1.5)",
        ] {
            assert!(!scan(sql.as_bytes()).has(Scan::QUALIFIED_TABLE), "{sql}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(sql in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = schema_of(&sql);
        }

        #[test]
        fn never_panics_on_sql_like_text(sql in "(SHOW|SELECT|FROM|JOIN|IN|=|'s'|`q`|\\.|,|\\(|\\)|a|table_schema|information_schema| ){0,30}") {
            let _ = schema_of(sql.as_bytes());
        }
    }
}
