//! The statements manifold answers itself while the global binlog is on: a small tolerant
//! parser (any case, any whitespace, comments) over `sql-lex`'s tokens that returns `None`
//! for anything else, which then goes to the backend as usual.

use manifold_sql_lex::{Lexer, TokenKind};

/// System variables the global binlog owns: what a replica or CDC tool asks the one server.
pub const OWNED_VARIABLES: &[&str] = &[
    "binlog_annotate_row_events",
    "binlog_checksum",
    "binlog_format",
    "binlog_row_image",
    "enforce_gtid_consistency",
    "gtid_binlog_pos",
    "gtid_current_pos",
    "gtid_domain_id",
    "gtid_executed",
    "gtid_mode",
    "gtid_purged",
    "gtid_strict_mode",
    "log_bin",
    "log_slave_updates",
    "server_id",
    "server_uuid",
];

/// Owned variables only MariaDB has: a MySQL-dialect binlog knows none of them.
pub const MARIADB_ONLY_VARIABLES: &[&str] = &[
    "binlog_annotate_row_events",
    "gtid_binlog_pos",
    "gtid_current_pos",
    "gtid_domain_id",
    "gtid_strict_mode",
];

/// Owned variables only MySQL has: a MariaDB-dialect binlog knows none of them.
pub const MYSQL_ONLY_VARIABLES: &[&str] = &[
    "enforce_gtid_consistency",
    "gtid_executed",
    "gtid_mode",
    "gtid_purged",
    "server_uuid",
];

/// Session user variables a replica sets before its dump, kept by manifold for the dump.
pub const REPLICATION_VARIABLES: &[&str] = &[
    "mariadb_slave_capability",
    "master_binlog_checksum",
    "master_heartbeat_period",
    "replica_uuid",
    "rpl_semi_sync_replica",
    "rpl_semi_sync_slave",
    "slave_connect_state",
    "slave_gtid_ignore_duplicates",
    "slave_gtid_strict_mode",
    "slave_uuid",
    "source_binlog_checksum",
    "source_heartbeat_period",
];

/// A value a `SET @var = ...` gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    Int(i64),
    Str(String),
}

/// What a `SELECT` item names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selected {
    /// `@@[global.|session.]name` of [`OWNED_VARIABLES`].
    System(&'static str),
    /// `@name` of [`REPLICATION_VARIABLES`].
    User(&'static str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectItem {
    pub selected: Selected,
    /// The column name: the alias, else the expression as written.
    pub column: String,
}

/// `SHOW BINLOG EVENTS [IN 'file'] [FROM pos] [LIMIT [offset,] count]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShowEvents {
    pub file: Option<String>,
    pub from: Option<u64>,
    pub offset: u64,
    pub limit: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `SHOW MASTER STATUS`, `SHOW BINLOG STATUS`, `SHOW BINARY LOG STATUS` (MySQL 8.4+).
    ShowMasterStatus,
    /// `SHOW BINARY LOGS`, `SHOW MASTER LOGS`.
    ShowBinaryLogs,
    ShowBinlogEvents(ShowEvents),
    PurgeTo(String),
    /// `PURGE BINARY LOGS BEFORE 'datetime'` (the literal as written).
    PurgeBefore(String),
    /// `PURGE BINARY LOGS BEFORE` something other than a literal.
    PurgeBeforeExpression,
    FlushBinaryLogs,
    ResetMaster,
    Select(Vec<SelectItem>),
    /// `SHOW [GLOBAL|SESSION] VARIABLES ...`: the owned variables it shows, in name order.
    ShowVariables(Vec<&'static str>),
    /// `SHOW [GLOBAL|SESSION] VARIABLES ...` that may show owned variables and the server's
    /// own (`LIKE` with `%`, a `WHERE` manifold does not evaluate, none): the server answers
    /// the statement (this text, as the client wrote it) and manifold's values replace those
    /// of the names it owns.
    ShowVariablesOfServer(String),
    /// `SET @var = value[, ...]` of replication variables only.
    Set(Vec<(&'static str, Value)>),
    /// Several statements in one query (`a; b`, from a client with `CLIENT_MULTI_STATEMENTS`)
    /// whose first is one manifold answers: refused whole, before any runs. manifold answers
    /// one statement per query; forwarding the text would run it against the server's binlog
    /// instead of the global one, and reading only the first of the server's answers would
    /// leave the others unread on a pooled connection for its next borrower.
    FirstOfSeveral,
}

/// A token as the parser reads it: one of `sql-lex`'s tokens, with its quotes and escapes
/// undone and its names lowercased.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A keyword or identifier (quoted or not), lowercased.
    Word(String),
    Str(String),
    Num(String),
    /// `@name` (or `@'name'`), lowercased.
    UserVar(String),
    /// `@@[scope.]name`, lowercased: (scope, name).
    SysVar(Option<String>, String),
    Sym(char),
}

/// The tokens of `sql`, split by `sql-lex`'s lexer as the server splits them (comments
/// skipped, executable comments' contents read); `None` when a string, quoted name or
/// comment never ends, or a variable has no name.
fn tokens(sql: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    for t in Lexer::new(sql.as_bytes()) {
        // The lexer splits only at ASCII bytes: every token of a `str` is one.
        let text = std::str::from_utf8(t.text).ok()?;
        out.push(match t.kind {
            TokenKind::Word => Token::Word(text.to_ascii_lowercase()),
            TokenKind::QuotedIdent => Token::Word(unquote(text)?.to_ascii_lowercase()),
            TokenKind::String => Token::Str(unquote(text)?),
            TokenKind::Number => Token::Num(text.to_owned()),
            TokenKind::UserVar => {
                let name = &text[1..];
                let name = if name.starts_with(['\'', '"', '`']) {
                    unquote(name)?
                } else {
                    name.to_owned()
                };
                if name.is_empty() {
                    return None;
                }
                Token::UserVar(name.to_ascii_lowercase())
            }
            TokenKind::SysVar => {
                let name = text[2..].to_ascii_lowercase();
                if name.is_empty() {
                    return None;
                }
                match name.split_once('.') {
                    Some((scope, n)) => Token::SysVar(Some(scope.to_owned()), n.to_owned()),
                    None => Token::SysVar(None, name),
                }
            }
            TokenKind::Punct => Token::Sym(char::from(t.text[0])),
            TokenKind::Unterminated => return None,
        });
    }
    // A trailing `;` is part of no statement.
    while out.last() == Some(&Token::Sym(';')) {
        out.pop();
    }
    Some(out)
}

/// The text of a quoted token (a string, or a name in backquotes), quotes included as the
/// lexer gives it: a doubled quote is one, and in strings a backslash escapes the next
/// character (`\n`, `\t`, `\r`, `\0`, `\b`, `\Z` as MariaDB reads them).
fn unquote(token: &str) -> Option<String> {
    let b = token.as_bytes();
    let q = *b.first()?;
    if b.len() < 2 || b[b.len() - 1] != q {
        return None;
    }
    let inner = &b[1..b.len() - 1];
    let escapes = q != b'`';
    let mut s = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        if c == q || (escapes && c == b'\\') {
            // The lexer ends the token only at a lone quote: this one is doubled.
            let next = *inner.get(i + 1)?;
            s.push(if c == q {
                q
            } else {
                match next {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'0' => 0,
                    b'b' => 8,
                    b'Z' => 0x1a,
                    other => other,
                }
            });
            i += 2;
            continue;
        }
        s.push(c);
        i += 1;
    }
    String::from_utf8(s).ok()
}

struct Parser {
    t: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.t.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.t.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn word(&mut self, w: &str) -> bool {
        if matches!(self.peek(), Some(Token::Word(x)) if x == w) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn words(&mut self, ws: &[&str]) -> bool {
        let save = self.at;
        if ws.iter().all(|w| self.word(w)) {
            true
        } else {
            self.at = save;
            false
        }
    }

    fn sym(&mut self, c: char) -> bool {
        if self.peek() == Some(&Token::Sym(c)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn done(&self) -> bool {
        self.at >= self.t.len()
    }

    fn string(&mut self) -> Option<String> {
        match self.next()? {
            Token::Str(s) => Some(s),
            _ => None,
        }
    }

    fn number(&mut self) -> Option<u64> {
        match self.next()? {
            Token::Num(n) => n.parse().ok(),
            _ => None,
        }
    }
}

/// The statement `sql` is, when manifold answers it; `None`: forward it. MariaDB's `SET
/// STATEMENT var = value [, ...] FOR` before it changes nothing manifold answers (a time limit,
/// mostly: MariaDB's Connector/J puts one before every query of a connection with a query
/// timeout), so the statement after `FOR` is what counts.
pub fn parse(sql: &str) -> Option<Statement> {
    let mut t = tokens(sql)?;
    // A `;` left inside (a trailing one is dropped): more statements follow the first.
    if let Some(end) = t.iter().position(|x| *x == Token::Sym(';')) {
        t.truncate(end);
        return parse_one(t, sql).map(|_| Statement::FirstOfSeveral);
    }
    parse_one(t, sql)
}

/// The statement of the tokens `t` (those of `sql`, one statement) when manifold answers it.
fn parse_one(t: Vec<Token>, sql: &str) -> Option<Statement> {
    let mut p = Parser { t, at: 0 };
    if p.words(&["set", "statement"]) {
        skip_to_for(&mut p)?;
    }
    let s = if p.word("show") {
        show(&mut p, sql)?
    } else if p.word("select") {
        Statement::Select(select(&mut p)?)
    } else if p.word("set") {
        Statement::Set(set(&mut p)?)
    } else if p.word("purge") {
        if !(p.word("binary") || p.word("master")) || !p.word("logs") {
            return None;
        }
        if p.word("to") {
            Statement::PurgeTo(p.string()?)
        } else if p.word("before") {
            match p.peek() {
                Some(Token::Str(_)) if p.t.len() == p.at + 1 => Statement::PurgeBefore(p.string()?),
                _ => {
                    p.at = p.t.len();
                    Statement::PurgeBeforeExpression
                }
            }
        } else {
            return None;
        }
    } else if p.word("flush") {
        // FLUSH [NO_WRITE_TO_BINLOG | LOCAL] BINARY LOGS
        let _ = p.word("no_write_to_binlog") || p.word("local");
        if !p.words(&["binary", "logs"]) {
            return None;
        }
        Statement::FlushBinaryLogs
    } else if p.words(&["reset", "master"]) || p.words(&["reset", "binary", "logs", "and", "gtids"])
    {
        // `RESET MASTER TO n` too: everything after is refused with it.
        p.at = p.t.len();
        Statement::ResetMaster
    } else {
        return None;
    };
    p.done().then_some(s)
}

/// Past the `FOR` of `SET STATEMENT var = value [, ...] FOR`: its assignments' values are
/// expressions, so the first `FOR` outside parentheses.
fn skip_to_for(p: &mut Parser) -> Option<()> {
    let mut depth = 0usize;
    loop {
        match p.next()? {
            Token::Sym('(') => depth += 1,
            Token::Sym(')') => depth = depth.checked_sub(1)?,
            Token::Word(w) if w == "for" && depth == 0 => return Some(()),
            _ => {}
        }
    }
}

fn show(p: &mut Parser, sql: &str) -> Option<Statement> {
    if p.words(&["master", "status"])
        || p.words(&["binlog", "status"])
        || p.words(&["binary", "log", "status"])
    {
        return Some(Statement::ShowMasterStatus);
    }
    if p.words(&["binary", "logs"]) || p.words(&["master", "logs"]) {
        return Some(Statement::ShowBinaryLogs);
    }
    if p.words(&["binlog", "events"]) {
        let mut q = ShowEvents::default();
        if p.word("in") {
            q.file = Some(p.string()?);
        }
        if p.word("from") {
            q.from = Some(p.number()?);
        }
        if p.word("limit") {
            let first = p.number()?;
            if p.sym(',') {
                q.offset = first;
                q.limit = Some(p.number()?);
            } else if p.word("offset") {
                q.limit = Some(first);
                q.offset = p.number()?;
            } else {
                q.limit = Some(first);
            }
        }
        return Some(Statement::ShowBinlogEvents(q));
    }
    let _ = p.word("global") || p.word("session") || p.word("local");
    if !p.word("variables") {
        return None;
    }
    // What only the server can answer whole: it does, and manifold's values replace its own.
    let of_server = || Some(Statement::ShowVariablesOfServer(sql.to_owned()));
    if p.done() {
        return of_server();
    }
    let names: Vec<&'static str> = if p.word("like") {
        let pattern = p.string()?;
        let owned: Vec<&'static str> = OWNED_VARIABLES
            .iter()
            .copied()
            .filter(|v| like(v, &pattern))
            .collect();
        // A `%` may match the server's variables too.
        if pattern.contains('%') {
            if owned.is_empty() || !p.done() {
                return None;
            }
            return of_server();
        }
        owned
    } else if p.word("where") {
        let Some(wanted) = where_names(p) else {
            // An expression manifold does not evaluate: the server does.
            p.at = p.t.len();
            return of_server();
        };
        if !p.done() {
            p.at = p.t.len();
            return of_server();
        }
        let mut names = Vec::new();
        let mut others = false;
        for w in wanted {
            match owned(&w.to_ascii_lowercase()) {
                Some(name) => names.push(name),
                None => others = true,
            }
        }
        if others {
            if names.is_empty() {
                // None of ours: the server's answer as it is.
                return None;
            }
            p.at = p.t.len();
            return of_server();
        }
        names.sort_unstable();
        names.dedup();
        names
    } else {
        return None;
    };
    (!names.is_empty()).then_some(Statement::ShowVariables(names))
}

/// The names `WHERE Variable_name = 'x'`, `IN ('x', ...)` or `LIKE 'x'` (without `%`) asks
/// for; `None` for any other condition.
fn where_names(p: &mut Parser) -> Option<Vec<String>> {
    if !p.word("variable_name") {
        return None;
    }
    if p.sym('=') {
        return Some(vec![p.string()?]);
    }
    if p.word("in") {
        if !p.sym('(') {
            return None;
        }
        let mut v = vec![p.string()?];
        while p.sym(',') {
            v.push(p.string()?);
        }
        return p.sym(')').then_some(v);
    }
    if p.word("like") {
        let pattern = p.string()?;
        if pattern.contains('%') {
            return None;
        }
        let owned: Vec<String> = OWNED_VARIABLES
            .iter()
            .filter(|v| like(v, &pattern))
            .map(|v| (*v).to_owned())
            .collect();
        // No owned name: one of the server's (or none), which it answers.
        return Some(if owned.is_empty() {
            vec![pattern]
        } else {
            owned
        });
    }
    None
}

fn owned(name: &str) -> Option<&'static str> {
    OWNED_VARIABLES.iter().copied().find(|v| *v == name)
}

fn replication(name: &str) -> Option<&'static str> {
    REPLICATION_VARIABLES.iter().copied().find(|v| *v == name)
}

/// SQL `LIKE` without escapes, case-insensitive: `%` any run, `_` any one character.
pub fn like(name: &str, pattern: &str) -> bool {
    fn go(n: &[u8], p: &[u8]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some((b'%', rest)) => (0..=n.len()).any(|i| go(&n[i..], rest)),
            Some((b'_', rest)) => !n.is_empty() && go(&n[1..], rest),
            Some((c, rest)) => n
                .split_first()
                .is_some_and(|(d, nrest)| d.eq_ignore_ascii_case(c) && go(nrest, rest)),
        }
    }
    go(name.as_bytes(), pattern.as_bytes())
}

fn select(p: &mut Parser) -> Option<Vec<SelectItem>> {
    let mut items = Vec::new();
    loop {
        let (selected, written) = match p.next()? {
            Token::SysVar(scope, name) => {
                let written = match &scope {
                    Some(s) => format!("@@{s}.{name}"),
                    None => format!("@@{name}"),
                };
                if scope
                    .as_deref()
                    .is_some_and(|s| !matches!(s, "global" | "session" | "local"))
                {
                    return None;
                }
                (Selected::System(owned(&name)?), written)
            }
            Token::UserVar(name) => {
                let written = format!("@{name}");
                (Selected::User(replication(&name)?), written)
            }
            _ => return None,
        };
        let column = if p.word("as") {
            match p.next()? {
                Token::Word(w) | Token::Str(w) => w,
                _ => return None,
            }
        } else if let Some(Token::Word(w)) = p.peek() {
            if w == "from" || w == "limit" {
                return None;
            }
            let w = w.clone();
            p.at += 1;
            w
        } else {
            written
        };
        items.push(SelectItem { selected, column });
        if !p.sym(',') {
            break;
        }
    }
    Some(items)
}

fn set(p: &mut Parser) -> Option<Vec<(&'static str, Value)>> {
    let mut out = Vec::new();
    loop {
        let Token::UserVar(name) = p.next()? else {
            return None;
        };
        let name = replication(&name)?;
        if !(p.sym('=') || (p.sym(':') && p.sym('='))) {
            return None;
        }
        let value = match p.next()? {
            Token::Str(s) => Value::Str(s),
            Token::Num(n) => Value::Int(n.parse().ok()?),
            Token::Sym('-') => match p.next()? {
                Token::Num(n) => Value::Int(-n.parse::<i64>().ok()?),
                _ => return None,
            },
            Token::Word(w) if w == "null" => Value::Null,
            Token::Word(w) if w == "true" => Value::Int(1),
            Token::Word(w) if w == "false" => Value::Int(0),
            Token::SysVar(scope, v)
                if v == "binlog_checksum" && scope.as_deref().is_none_or(|s| s == "global") =>
            {
                Value::Str("CRC32".into())
            }
            _ => return None,
        };
        out.push((name, value));
        if !p.sym(',') {
            break;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binlog_statements_in_any_case_and_spacing() {
        for s in [
            "SHOW MASTER STATUS",
            "show  binlog\n status;",
            "/* tool */ Show Master Status",
        ] {
            assert_eq!(parse(s), Some(Statement::ShowMasterStatus), "{s}");
        }
        assert_eq!(parse("SHOW BINARY LOGS"), Some(Statement::ShowBinaryLogs));
        assert_eq!(
            parse("show binary log status"),
            Some(Statement::ShowMasterStatus)
        );
        assert_eq!(parse("show master logs"), Some(Statement::ShowBinaryLogs));
        assert_eq!(parse("FLUSH BINARY LOGS"), Some(Statement::FlushBinaryLogs));
        assert_eq!(
            parse("flush local binary logs"),
            Some(Statement::FlushBinaryLogs)
        );
        assert_eq!(parse("RESET MASTER"), Some(Statement::ResetMaster));
        assert_eq!(parse("reset master to 5"), Some(Statement::ResetMaster));
        assert_eq!(
            parse("PURGE BINARY LOGS TO 'manifold-bin.000003'"),
            Some(Statement::PurgeTo("manifold-bin.000003".into()))
        );
        assert_eq!(
            parse("purge master logs before '2024-01-02 03:04:05'"),
            Some(Statement::PurgeBefore("2024-01-02 03:04:05".into()))
        );
        assert_eq!(
            parse("PURGE BINARY LOGS BEFORE NOW() - INTERVAL 1 DAY"),
            Some(Statement::PurgeBeforeExpression)
        );
        // Not ours: forwarded.
        for s in [
            "SHOW SLAVE STATUS",
            "SHOW MASTER STATUS extra",
            "SELECT 1",
            "FLUSH TABLES",
            "PURGE BINARY LOGS",
            "SHOW BINLOG EVENTS IN",
            "select '/* unterminated",
        ] {
            assert_eq!(parse(s), None, "{s}");
        }
    }

    #[test]
    fn comments_as_the_server_reads_them() {
        for s in [
            "SHOW /* a */ MASTER -- b\n STATUS # c",
            "SHOW#\nMASTER--\tx\nSTATUS",
            // Executable comments: the server runs what is inside.
            "/*!40101 SHOW MASTER STATUS */",
            "/*M!100100 SHOW */ MASTER STATUS",
        ] {
            assert_eq!(parse(s), Some(Statement::ShowMasterStatus), "{s:?}");
        }
        // `--` without a space after is two minus signs; a comment that never ends.
        for s in ["SHOW MASTER STATUS --x", "SHOW MASTER STATUS /* x"] {
            assert_eq!(parse(s), None, "{s:?}");
        }
        // A `;` in a comment ends no statement.
        assert_eq!(
            parse("SHOW BINARY LOGS /* ; */"),
            Some(Statement::ShowBinaryLogs)
        );
    }

    #[test]
    fn quoting_and_case_as_the_server_reads_them() {
        // Double-quoted strings, doubled quotes and escapes.
        assert_eq!(
            parse("PURGE BINARY LOGS TO \"manifold-bin.000003\""),
            Some(Statement::PurgeTo("manifold-bin.000003".into()))
        );
        assert_eq!(
            parse(r"SET @master_binlog_checksum = 'it''s', @slave_connect_state = '0-1-5\n'"),
            Some(Statement::Set(vec![
                ("master_binlog_checksum", Value::Str("it's".into())),
                ("slave_connect_state", Value::Str("0-1-5\n".into())),
            ]))
        );
        assert_eq!(
            parse(r#"SHOW BINLOG EVENTS IN 'a\'b''c"d'"#),
            Some(Statement::ShowBinlogEvents(ShowEvents {
                file: Some("a'b'c\"d".into()),
                ..ShowEvents::default()
            }))
        );
        // Variable names quoted or in any case; a backquoted alias.
        assert_eq!(
            parse("SET @'Master_Binlog_Checksum' = 'NONE', @`SLAVE_GTID_STRICT_MODE` = 1"),
            Some(Statement::Set(vec![
                ("master_binlog_checksum", Value::Str("NONE".into())),
                ("slave_gtid_strict_mode", Value::Int(1)),
            ]))
        );
        assert_eq!(
            parse("select @@Session.Server_Id as `sid`"),
            Some(Statement::Select(vec![SelectItem {
                selected: Selected::System("server_id"),
                column: "sid".into()
            }]))
        );
        assert_eq!(
            parse("ShOw VaRiAbLeS wHeRe VARIABLE_NAME = 'LOG_BIN'"),
            Some(Statement::ShowVariables(vec!["log_bin"]))
        );
        // A keyword in quotes is a string, not the keyword; a variable without a name.
        assert_eq!(parse("SHOW MASTER 'STATUS'"), None);
        assert_eq!(parse("SET @ = 1"), None);
        assert_eq!(parse("SELECT @@"), None);
        // Text that never ends: a string, a quoted name, a quoted variable name.
        for s in [
            "PURGE BINARY LOGS TO 'manifold-bin.000003",
            "SELECT @@server_id AS `sid",
            "SET @'master_binlog_checksum = 1",
        ] {
            assert_eq!(parse(s), None, "{s}");
        }
    }

    #[test]
    fn show_binlog_events_with_its_clauses() {
        assert_eq!(
            parse("SHOW BINLOG EVENTS"),
            Some(Statement::ShowBinlogEvents(ShowEvents::default()))
        );
        assert_eq!(
            parse("show binlog events in 'manifold-bin.000002' from 256 limit 2, 10"),
            Some(Statement::ShowBinlogEvents(ShowEvents {
                file: Some("manifold-bin.000002".into()),
                from: Some(256),
                offset: 2,
                limit: Some(10),
            }))
        );
        assert_eq!(
            parse("SHOW BINLOG EVENTS LIMIT 3"),
            Some(Statement::ShowBinlogEvents(ShowEvents {
                limit: Some(3),
                ..ShowEvents::default()
            }))
        );
    }

    #[test]
    fn selects_of_owned_variables_only() {
        let Some(Statement::Select(items)) =
            parse("SELECT @@global.server_id AS sid, @@GTID_BINLOG_POS, @master_binlog_checksum")
        else {
            panic!("a select of owned variables");
        };
        assert_eq!(
            items,
            vec![
                SelectItem {
                    selected: Selected::System("server_id"),
                    column: "sid".into()
                },
                SelectItem {
                    selected: Selected::System("gtid_binlog_pos"),
                    column: "@@gtid_binlog_pos".into()
                },
                SelectItem {
                    selected: Selected::User("master_binlog_checksum"),
                    column: "@master_binlog_checksum".into()
                },
            ]
        );
        // One variable the backend owns: the whole statement goes there.
        assert_eq!(parse("SELECT @@server_id, @@version"), None);
        assert_eq!(parse("SELECT @@version_comment LIMIT 1"), None);
        assert_eq!(parse("SELECT @app_var"), None);
        assert_eq!(parse("SELECT @@server_id FROM dual"), None);
        assert_eq!(parse("SELECT @@foo.server_id"), None);
    }

    #[test]
    fn show_variables_when_every_name_is_owned() {
        assert_eq!(
            parse("SHOW GLOBAL VARIABLES LIKE 'binlog_checksum'"),
            Some(Statement::ShowVariables(vec!["binlog_checksum"]))
        );
        assert_eq!(
            parse("show variables like 'SERVER_ID'"),
            Some(Statement::ShowVariables(vec!["server_id"]))
        );
        assert_eq!(
            parse("SHOW VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'log_bin')"),
            Some(Statement::ShowVariables(vec!["binlog_format", "log_bin"]))
        );
        assert_eq!(
            parse("SHOW SESSION VARIABLES WHERE variable_name = 'gtid_domain_id'"),
            Some(Statement::ShowVariables(vec!["gtid_domain_id"]))
        );
        // `_` is a wildcard.
        assert_eq!(
            parse("SHOW VARIABLES LIKE 'gtid_binlog_po_'"),
            Some(Statement::ShowVariables(vec!["gtid_binlog_pos"]))
        );
        // None of ours: the server's answer.
        assert_eq!(parse("SHOW VARIABLES LIKE 'version'"), None);
        assert_eq!(parse("SHOW VARIABLES LIKE 'innodb%'"), None);
        assert_eq!(
            parse("SHOW VARIABLES WHERE Variable_name IN ('version', 'port')"),
            None
        );
    }

    fn of_server(sql: &str) -> Statement {
        Statement::ShowVariablesOfServer(sql.to_owned())
    }

    #[test]
    fn show_variables_of_ours_and_the_servers_go_to_the_server() {
        // `%` may match the server's variables too (case-insensitive, `_` a wildcard).
        for s in [
            "SHOW GLOBAL VARIABLES LIKE 'GTID_%'",
            "show variables like '%bin%'",
            "SHOW VARIABLES LIKE 'server%'",
        ] {
            assert_eq!(parse(s), Some(of_server(s)), "{s}");
        }
        // A condition manifold does not evaluate, names of both, or none at all.
        for s in [
            "SHOW VARIABLES",
            "SHOW SESSION VARIABLES",
            "SHOW VARIABLES WHERE Variable_name IN ('log_bin', 'version')",
            "SHOW GLOBAL VARIABLES WHERE Variable_name LIKE 'gtid%'",
            "SHOW VARIABLES WHERE Variable_name = 'server_id' OR Variable_name = 'port'",
            "SHOW VARIABLES WHERE Value = 'ON'",
        ] {
            assert_eq!(parse(s), Some(of_server(s)), "{s}");
        }
        assert_eq!(parse("SHOW VARIABLES LIKE 'gtid%' junk"), None);
    }

    #[test]
    fn a_statement_of_ours_before_others_is_refused_whole() {
        for s in [
            "SHOW VARIABLES WHERE Value = 'ON'; SELECT 1",
            "SHOW GLOBAL VARIABLES LIKE 'gtid%';SELECT 1;",
            "SHOW MASTER STATUS; DELETE FROM t",
            "SELECT @@gtid_binlog_pos ; SELECT 1",
            "SET @master_binlog_checksum = 'NONE'; SET @x = 1",
        ] {
            assert_eq!(parse(s), Some(Statement::FirstOfSeveral), "{s}");
        }
        // A trailing `;` ends the one statement.
        let s = "SHOW VARIABLES WHERE Value = 'ON';";
        assert_eq!(parse(s), Some(of_server(s)));
        assert_eq!(
            parse("SHOW MASTER STATUS ; ;"),
            Some(Statement::ShowMasterStatus)
        );
        // Others first (a procedure's body too), or a `;` inside a string: not ours.
        for s in [
            "SELECT 1; SHOW MASTER STATUS",
            "CREATE PROCEDURE p() BEGIN SELECT 1; SHOW MASTER STATUS; END",
        ] {
            assert_eq!(parse(s), None, "{s}");
        }
        let s = "SHOW VARIABLES WHERE Value = 'a;b'";
        assert_eq!(parse(s), Some(of_server(s)));
    }

    #[test]
    fn set_statement_for_is_the_statement_after_for() {
        assert_eq!(
            parse("SET STATEMENT max_statement_time=60 FOR SHOW MASTER STATUS"),
            Some(Statement::ShowMasterStatus)
        );
        assert_eq!(
            parse("set statement max_statement_time = 1.5, sql_mode = CONCAT(@@sql_mode, ',ANSI') for show binary logs"),
            Some(Statement::ShowBinaryLogs)
        );
        for inner in ["SHOW BINLOG STATUS", "SHOW MASTER LOGS"] {
            let s = format!("SET STATEMENT max_statement_time=60 FOR {inner}");
            assert!(parse(&s).is_some(), "{s}");
        }
        assert_eq!(
            parse("SET STATEMENT max_statement_time=60 FOR SHOW BINLOG EVENTS LIMIT 2"),
            Some(Statement::ShowBinlogEvents(ShowEvents {
                limit: Some(2),
                ..ShowEvents::default()
            }))
        );
        assert!(matches!(
            parse("SET STATEMENT max_statement_time=60 FOR SELECT @@global.gtid_binlog_pos"),
            Some(Statement::Select(_))
        ));
        assert_eq!(
            parse("SET STATEMENT max_statement_time=60 FOR SHOW GLOBAL VARIABLES LIKE 'GTID_BINLOG_POS'"),
            Some(Statement::ShowVariables(vec!["gtid_binlog_pos"]))
        );
        // The server runs a SHOW VARIABLES of both with its wrapper.
        let s = "SET STATEMENT max_statement_time=60 FOR SHOW VARIABLES LIKE 'gtid%'";
        assert!(
            matches!(parse(s), Some(Statement::ShowVariablesOfServer(v)) if v == s),
            "{s}"
        );
        // Anything else wrapped, or no `FOR`: forwarded.
        for s in [
            "SET STATEMENT max_statement_time=60 FOR SELECT 1",
            "SET STATEMENT max_statement_time=60 FOR INSERT INTO t VALUES (1)",
            "SET STATEMENT max_statement_time=60",
            "SET STATEMENT x = (1 FOR SHOW MASTER STATUS",
            "SET STATEMENT max_statement_time=60 FOR SHOW MASTER STATUS junk",
        ] {
            assert_eq!(parse(s), None, "{s}");
        }
    }

    #[test]
    fn like_patterns() {
        assert!(like("server_id", "SERVER_ID"));
        assert!(like("server_id", "server%"));
        assert!(like("server_id", "%_id"));
        assert!(like("log_bin", "log_bi_"));
        assert!(!like("log_bin", "log_bi"));
        assert!(!like("log_bin", "log_bin_"));
        assert!(like("", "%"));
    }

    #[test]
    fn replication_variables_set_in_one_statement() {
        assert_eq!(
            parse("SET @master_binlog_checksum= @@global.binlog_checksum, @mariadb_slave_capability=4"),
            Some(Statement::Set(vec![
                ("master_binlog_checksum", Value::Str("CRC32".into())),
                ("mariadb_slave_capability", Value::Int(4)),
            ]))
        );
        assert_eq!(
            parse("set @slave_connect_state='0-1-5', @slave_gtid_strict_mode=1, @master_heartbeat_period = 1000000000;"),
            Some(Statement::Set(vec![
                ("slave_connect_state", Value::Str("0-1-5".into())),
                ("slave_gtid_strict_mode", Value::Int(1)),
                ("master_heartbeat_period", Value::Int(1_000_000_000)),
            ]))
        );
        assert_eq!(
            parse("SET @master_binlog_checksum='NONE'"),
            Some(Statement::Set(vec![(
                "master_binlog_checksum",
                Value::Str("NONE".into())
            )]))
        );
        // Anything else in the SET, or a value manifold does not compute: forwarded.
        assert_eq!(parse("SET @slave_uuid=uuid()"), None);
        assert_eq!(parse("SET @master_binlog_checksum='CRC32', @app=1"), None);
        assert_eq!(parse("SET NAMES utf8"), None);
        assert_eq!(parse("SET @@session.wait_timeout=5"), None);
    }
}
