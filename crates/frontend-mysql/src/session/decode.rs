//! Decoding a command into what the session does with it: a pure function of the command's
//! first packet (and, for `COM_QUERY`, of its text and the lexer's scan), so that adding a
//! command is one arm here and one handler in the loop.

use manifold_mysql_proto::handshake::ChangeUser;
use manifold_mysql_proto::{Command, ProtoError, ResponseKind};
use manifold_sql_lex::{Kill, Scan, ShowDiagnostics, Verb};

use crate::statements::ExecuteLayout;

/// What a forwarded command does besides running, decided from its first packet.
#[derive(Debug, Clone, Copy)]
pub(super) enum Effect {
    None,
    /// `COM_QUERY`, with what the lexer saw in it.
    Query(Scan),
    /// `COM_STMT_EXECUTE` of the session's statement `id` (resolved), with what the lexer saw
    /// in the statement's text and where the parts of the command are.
    Execute {
        id: u32,
        scan: Scan,
        layout: ExecuteLayout,
    },
    /// `COM_STMT_FETCH` from the statement's open cursor.
    Fetch(u32),
    /// `COM_STMT_SEND_LONG_DATA`.
    LongData(u32),
    /// `COM_STMT_RESET` of a statement with a cursor or long data on the pinned connection.
    Reset(u32),
}

impl Effect {
    /// The session's prepared statement the command names, which must be ready on the
    /// backend connection before the command goes there.
    pub(super) fn statement(self) -> Option<u32> {
        match self {
            Effect::Execute { id, .. }
            | Effect::Fetch(id)
            | Effect::LongData(id)
            | Effect::Reset(id) => Some(id),
            Effect::None | Effect::Query(_) => None,
        }
    }

    pub(super) fn scan(self) -> Option<Scan> {
        match self {
            Effect::Query(scan) | Effect::Execute { scan, .. } => Some(scan),
            _ => None,
        }
    }
}

/// Prepared-statement commands other than `COM_STMT_PREPARE`, with the client's statement id.
#[derive(Debug, Clone, Copy)]
pub(super) enum StmtCommand {
    Execute(u32),
    LongData(u32),
    Fetch(u32),
    Reset(u32),
    Close(u32),
}

/// What the command loop does with a command, decided from its first packet.
#[derive(Debug)]
pub(super) enum Action {
    Quit,
    Ping,
    InitDb(Vec<u8>),
    ChangeUser(ChangeUser),
    ResetConnection,
    SetOption(u16),
    Forward(ResponseKind, Effect),
    Prepare,
    Stmt(StmtCommand),
    Kill(Kill),
    /// `SHOW WARNINGS` / `SHOW ERRORS` answered from what the session kept.
    ShowDiagnostics(ShowDiagnostics),
    /// `GET DIAGNOSTICS` with no connection that ran the previous statement.
    GetDiagnostics,
    /// `SHOW [FULL] PROCESSLIST` (true: `FULL`), answered from manifold's sessions.
    ShowProcesslist(bool),
    /// A command or statement about the global binlog, which manifold answers while it is on.
    Binlog(BinlogCommand),
    Unknown(u8),
}

/// What the global binlog answers (see `binlog.rs`).
#[derive(Debug)]
pub(super) enum BinlogCommand {
    /// `COM_BINLOG_DUMP`.
    Dump,
    /// `COM_BINLOG_DUMP_GTID` (MySQL's GTID dump).
    DumpGtid,
    /// `COM_REGISTER_SLAVE`.
    RegisterSlave,
    Statement(manifold_binlog_serve::Statement),
}

/// What the command whose first packet's payload is `first` asks for. `capabilities`: the
/// client's, which shape `COM_CHANGE_USER`. `moved`: the session holds no backend connection.
/// `scan` runs the lexer over a `COM_QUERY`'s text (the session's scan keeps a memo and maybe
/// a digest; any scan will do for deciding). `binlog`: the global binlog is on.
pub(super) fn decode(
    first: &[u8],
    capabilities: u32,
    moved: bool,
    binlog: bool,
    scan: impl FnOnce(&[u8]) -> Scan,
) -> Result<Action, ProtoError> {
    if binlog {
        use manifold_mysql_proto::consts::command as com;
        match first.first() {
            Some(&com::BINLOG_DUMP) => return Ok(Action::Binlog(BinlogCommand::Dump)),
            Some(&com::BINLOG_DUMP_GTID) => return Ok(Action::Binlog(BinlogCommand::DumpGtid)),
            Some(&com::REGISTER_SLAVE) => {
                return Ok(Action::Binlog(BinlogCommand::RegisterSlave));
            }
            _ => {}
        }
    }
    Ok(match Command::decode(first)? {
        Command::Quit => Action::Quit,
        Command::Ping => Action::Ping,
        Command::InitDb(s) => Action::InitDb(s.to_vec()),
        Command::ChangeUser => Action::ChangeUser(ChangeUser::decode(first, capabilities)?),
        Command::ResetConnection => Action::ResetConnection,
        Command::SetOption(o) => Action::SetOption(o),
        Command::Unsupported(c) => Action::Unknown(c),
        Command::ProcessKill(id) => Action::Kill(Kill::Connection(u64::from(id))),
        Command::Query(sql) => {
            let scan = scan(sql);
            match binlog.then(|| binlog_statement(sql, scan)).flatten() {
                Some(s) => Action::Binlog(BinlogCommand::Statement(s)),
                None => query_action(sql, scan, moved),
            }
        }
        Command::StmtPrepare(_) => Action::Prepare,
        Command::StmtExecute { statement_id, .. } => {
            Action::Stmt(StmtCommand::Execute(statement_id))
        }
        Command::StmtSendLongData { statement_id, .. } => {
            Action::Stmt(StmtCommand::LongData(statement_id))
        }
        Command::StmtFetch { statement_id, .. } => Action::Stmt(StmtCommand::Fetch(statement_id)),
        Command::StmtReset(id) => Action::Stmt(StmtCommand::Reset(id)),
        Command::StmtClose(id) => Action::Stmt(StmtCommand::Close(id)),
        c => Action::Forward(c.response_kind(), Effect::None),
    })
}

/// The binlog statement `sql` is, if any. Cheap for the statements of the hot path: only
/// texts whose first words a binlog statement can start with are parsed (see
/// [`may_be_binlog_statement`]).
fn binlog_statement(sql: &[u8], scan: Scan) -> Option<manifold_binlog_serve::Statement> {
    let ordinary = matches!(
        scan.verb,
        Verb::Insert
            | Verb::Update
            | Verb::Delete
            | Verb::Replace
            | Verb::Use
            | Verb::Begin
            | Verb::Start
            | Verb::Commit
            | Verb::Rollback
            | Verb::Create
            | Verb::Drop
            | Verb::Alter
            | Verb::Prepare
            | Verb::Execute
            | Verb::Deallocate
            | Verb::Call
            | Verb::With
    );
    if ordinary || !may_be_binlog_statement(sql) {
        return None;
    }
    manifold_binlog_serve::parse(std::str::from_utf8(sql).ok()?)
}

/// Whether the first two words of `sql` are those of a binlog statement: `SELECT @...`,
/// `SET @...`, `SHOW MASTER|BINLOG|BINARY|[GLOBAL|SESSION|LOCAL] VARIABLES`, `PURGE
/// BINARY|MASTER`, `FLUSH [NO_WRITE_TO_BINLOG|LOCAL] BINARY`, `RESET MASTER|BINARY`, or
/// one of these after MariaDB's `SET STATEMENT ... FOR`. Looks at a few bytes, without
/// allocating: `SELECT ... WHERE email = 'a@b.c'`, `SHOW TABLES`, `SAVEPOINT` and the like
/// never reach the parser.
fn may_be_binlog_statement(sql: &[u8]) -> bool {
    binlog_words(sql, true)
}

/// [`may_be_binlog_statement`]; `wrapped`: a `SET STATEMENT ... FOR` may lead. Only one may
/// (MariaDB allows no second inside), so a text of many `SET STATEMENT for` costs a bounded
/// number of words, never a search through every way to nest them.
fn binlog_words(sql: &[u8], wrapped: bool) -> bool {
    let (first, rest) = next_word(sql);
    let (second, after_second) = next_word(rest);
    let is = |w: &[u8], of: &[&str]| of.iter().any(|o| w.eq_ignore_ascii_case(o.as_bytes()));
    if is(first, &["set"]) && is(second, &["statement"]) {
        return wrapped && after_set_statement_for(after_second);
    }
    if is(first, &["select", "set"]) {
        return second.first() == Some(&b'@');
    }
    if is(first, &["show"]) {
        return is(
            second,
            &[
                "master",
                "binlog",
                "binary",
                "variables",
                "global",
                "session",
                "local",
            ],
        );
    }
    if is(first, &["purge"]) {
        return is(second, &["binary", "master"]);
    }
    if is(first, &["flush"]) {
        return is(second, &["binary", "no_write_to_binlog", "local"]);
    }
    if is(first, &["reset"]) {
        return is(second, &["master", "binary"]);
    }
    false
}

/// Whether a binlog statement may follow a `FOR` of `SET STATEMENT var = value, ... FOR`
/// (`rest` starts after `STATEMENT`). Every `FOR` among the first words is tried, since one
/// may be in a string value; the parser decides.
fn after_set_statement_for(mut rest: &[u8]) -> bool {
    const WORDS: usize = 256;
    for _ in 0..WORDS {
        let (word, after) = next_word(rest);
        if word.is_empty() {
            return false;
        }
        if word.eq_ignore_ascii_case(b"for") && binlog_words(after, false) {
            return true;
        }
        rest = after;
    }
    false
}

/// The first token of `sql` after white space and comments (a word, or else one byte; a
/// `@` with the word after it) and the text after it.
fn next_word(sql: &[u8]) -> (&[u8], &[u8]) {
    let word_byte = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'$';
    let mut rest = sql;
    loop {
        rest = rest.trim_ascii_start();
        if let Some(after) = rest.strip_prefix(b"/*") {
            let Some(end) = after.windows(2).position(|w| w == b"*/") else {
                return (&[], &[]);
            };
            rest = &after[end + 2..];
        } else if rest.first() == Some(&b'#')
            || (rest.starts_with(b"--") && rest.get(2).is_none_or(u8::is_ascii_whitespace))
        {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            rest = &rest[end..];
        } else {
            break;
        }
    }
    let start = usize::from(rest.first() == Some(&b'@'));
    let len = start + rest[start..].iter().take_while(|c| word_byte(c)).count();
    let len = if len == 0 { rest.len().min(1) } else { len };
    rest.split_at(len)
}

/// What a `COM_QUERY` of text `sql`, which the lexer scanned as `scan`, asks for. A session
/// that `moved` holds no connection that ran its previous statement, so manifold answers
/// questions about that statement itself.
fn query_action(sql: &[u8], scan: Scan, moved: bool) -> Action {
    if scan.has(Scan::KILL) {
        return Action::Kill(manifold_sql_lex::parse_kill(sql).unwrap_or(Kill::Unsupported));
    }
    if moved && scan.has(Scan::WARNINGS) && scan.verb == Verb::Show {
        if let Some(show) = manifold_sql_lex::parse_show_diagnostics(sql) {
            return Action::ShowDiagnostics(show);
        }
    }
    if moved && scan.has(Scan::GET_DIAGNOSTICS) {
        return Action::GetDiagnostics;
    }
    if scan.has(Scan::PROCESSLIST) && scan.verb == Verb::Show {
        if let Some(full) = manifold_sql_lex::parse_show_processlist(sql) {
            return Action::ShowProcesslist(full);
        }
    }
    Action::Forward(ResponseKind::ResultSets, Effect::Query(scan))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(command: u8, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![command];
        p.extend_from_slice(rest);
        p
    }

    /// Decodes a command of a session holding no connection.
    fn decode(first: &[u8]) -> Result<Action, ProtoError> {
        super::decode(first, 0, true, false, manifold_sql_lex::scan)
    }

    fn query(sql: &str, moved: bool) -> Action {
        let payload = packet(0x03, sql.as_bytes());
        super::decode(&payload, 0, moved, false, manifold_sql_lex::scan).expect("a query decodes")
    }

    fn binlog_query(sql: &str) -> Action {
        let payload = packet(0x03, sql.as_bytes());
        super::decode(&payload, 0, true, true, manifold_sql_lex::scan).expect("a query decodes")
    }

    #[test]
    fn with_the_global_binlog_on_manifold_answers_replication() {
        use manifold_binlog_serve::Statement;
        let on = |first: &[u8]| super::decode(first, 0, true, true, manifold_sql_lex::scan);
        assert!(matches!(
            on(&[0x12, 4, 0, 0, 0]),
            Ok(Action::Binlog(BinlogCommand::Dump))
        ));
        assert!(matches!(
            on(&[0x1e]),
            Ok(Action::Binlog(BinlogCommand::DumpGtid))
        ));
        assert!(matches!(
            on(&[0x15]),
            Ok(Action::Binlog(BinlogCommand::RegisterSlave))
        ));
        assert!(matches!(
            binlog_query("SHOW MASTER STATUS"),
            Action::Binlog(BinlogCommand::Statement(Statement::ShowMasterStatus))
        ));
        assert!(matches!(
            binlog_query("SELECT @@gtid_binlog_pos"),
            Action::Binlog(BinlogCommand::Statement(Statement::Select(_)))
        ));
        assert!(matches!(
            binlog_query("PURGE BINARY LOGS TO 'manifold-bin.000002'"),
            Action::Binlog(BinlogCommand::Statement(Statement::PurgeTo(_)))
        ));
        // Everything else is forwarded as before.
        assert!(matches!(
            binlog_query("SELECT @@version"),
            Action::Forward(..)
        ));
        assert!(matches!(
            binlog_query("INSERT INTO t VALUES (1)"),
            Action::Forward(..)
        ));
        assert!(matches!(
            binlog_query("SHOW PROCESSLIST"),
            Action::ShowProcesslist(false)
        ));
        // With the binlog off, the same commands and statements are not manifold's.
        assert!(matches!(
            decode(&[0x12, 4, 0, 0, 0]),
            Ok(Action::Unknown(0x12))
        ));
        assert!(matches!(
            query("SHOW MASTER STATUS", true),
            Action::Forward(..)
        ));
    }

    #[test]
    fn only_the_first_words_of_a_binlog_statement_reach_the_parser() {
        use manifold_binlog_serve::parse;
        for sql in [
            "SHOW MASTER STATUS",
            "show binlog status",
            "SHOW BINARY LOGS",
            "SHOW MASTER LOGS",
            "SHOW BINLOG EVENTS IN 'manifold-bin.000001' FROM 4 LIMIT 2",
            "SHOW GLOBAL VARIABLES LIKE 'gtid_binlog_pos'",
            "SHOW VARIABLES LIKE 'gtid_binlog_pos'",
            "PURGE BINARY LOGS TO 'manifold-bin.000002'",
            "PURGE MASTER LOGS BEFORE '2024-01-01'",
            "FLUSH BINARY LOGS",
            "FLUSH LOCAL BINARY LOGS",
            "flush no_write_to_binlog binary logs",
            "RESET MASTER",
            "RESET BINARY LOGS AND GTIDS",
            "SELECT @@gtid_binlog_pos",
            "/* a comment */ SELECT/**/@@global.server_id",
            "SELECT@@gtid_binlog_pos",
            "# a comment\nSHOW MASTER STATUS",
            "-- a comment\n  show master status",
            "SET @master_binlog_checksum = 'CRC32'",
            "SET STATEMENT max_statement_time=60 FOR SHOW MASTER STATUS",
            "set statement max_statement_time=60 for select @@gtid_binlog_pos",
            "SET STATEMENT sql_mode='a for b', max_statement_time=1 FOR SHOW BINARY LOGS",
            "SHOW GLOBAL VARIABLES LIKE 'GTID_%'",
            "SET STATEMENT max_statement_time=60 FOR SHOW VARIABLES WHERE Variable_name LIKE 'gtid%'",
        ] {
            assert!(parse(sql).is_some(), "{sql} is a binlog statement");
            assert!(may_be_binlog_statement(sql.as_bytes()), "{sql}");
            assert!(matches!(binlog_query(sql), Action::Binlog(_)), "{sql}");
        }
        for sql in [
            "SELECT * FROM users WHERE email = 'a@b.c'",
            "SELECT id, @rownum := @rownum + 1 FROM t",
            "SET NAMES utf8mb4, @x = 1",
            "SET autocommit = 0",
            "SHOW TABLES",
            "SHOW CREATE TABLE t",
            "SAVEPOINT a",
            "DO SLEEP(0)",
            "EXPLAIN SELECT @a",
            "SELECT",
            "",
            "/* unterminated",
            "PURGE",
            "FLUSH TABLES",
            "RESET QUERY CACHE",
            "SET STATEMENT max_statement_time=60 FOR SELECT * FROM t",
        ] {
            assert!(!may_be_binlog_statement(sql.as_bytes()), "{sql}");
            assert!(!matches!(binlog_query(sql), Action::Binlog(_)), "{sql}");
        }
        // Words in a string may look like one: the parser tells.
        let sql =
            "SET STATEMENT max_statement_time=60 FOR INSERT INTO t VALUES ('for show master')";
        assert!(matches!(binlog_query(sql), Action::Forward(..)), "{sql}");
    }

    #[test]
    fn commands_without_a_body() {
        assert!(matches!(decode(&[0x01]), Ok(Action::Quit)));
        assert!(matches!(decode(&[0x0e]), Ok(Action::Ping)));
        assert!(matches!(decode(&[0x1f]), Ok(Action::ResetConnection)));
        // Commands manifold only relays, each with the answer's shape.
        assert!(matches!(
            decode(&[0x09]),
            Ok(Action::Forward(ResponseKind::Raw, Effect::None))
        ));
        assert!(matches!(
            decode(&packet(0x04, b"t\0")),
            Ok(Action::Forward(ResponseKind::FieldList, Effect::None))
        ));
    }

    #[test]
    fn commands_with_arguments() {
        let Ok(Action::InitDb(schema)) = decode(&packet(0x02, b"shop")) else {
            panic!("COM_INIT_DB");
        };
        assert_eq!(schema, b"shop");
        assert!(matches!(decode(&[0x1b, 1, 0]), Ok(Action::SetOption(1))));
        assert!(matches!(
            decode(&packet(0x0c, &7u32.to_le_bytes())),
            Ok(Action::Kill(Kill::Connection(7)))
        ));
        assert!(matches!(
            decode(&packet(0x16, b"SELECT ?")),
            Ok(Action::Prepare)
        ));
    }

    #[test]
    fn prepared_statement_commands_name_the_clients_id() {
        let mut execute = packet(0x17, &9u32.to_le_bytes());
        execute.extend_from_slice(&[0, 1, 0, 0, 0]);
        assert!(matches!(
            decode(&execute),
            Ok(Action::Stmt(StmtCommand::Execute(9)))
        ));
        let mut long_data = packet(0x18, &3u32.to_le_bytes());
        long_data.extend_from_slice(&[0, 0, b'x']);
        assert!(matches!(
            decode(&long_data),
            Ok(Action::Stmt(StmtCommand::LongData(3)))
        ));
        let mut fetch = packet(0x1c, &4u32.to_le_bytes());
        fetch.extend_from_slice(&10u32.to_le_bytes());
        assert!(matches!(
            decode(&fetch),
            Ok(Action::Stmt(StmtCommand::Fetch(4)))
        ));
        assert!(matches!(
            decode(&packet(0x1a, &5u32.to_le_bytes())),
            Ok(Action::Stmt(StmtCommand::Reset(5)))
        ));
        assert!(matches!(
            decode(&packet(0x19, &6u32.to_le_bytes())),
            Ok(Action::Stmt(StmtCommand::Close(6)))
        ));
    }

    #[test]
    fn malformed_and_unknown_commands() {
        assert!(decode(&[]).is_err());
        // A statement id cut short.
        assert!(decode(&[0x19, 1, 0]).is_err());
        assert!(decode(&[0x0c]).is_err());
        assert!(matches!(decode(&[0x42]), Ok(Action::Unknown(0x42))));
    }

    #[test]
    fn queries_go_to_the_backend_unless_manifold_answers_them() {
        assert!(matches!(
            query("SELECT 1", true),
            Action::Forward(ResponseKind::ResultSets, Effect::Query(_))
        ));
        assert!(matches!(
            query("KILL QUERY 12", false),
            Action::Kill(Kill::Query(12))
        ));
        assert!(matches!(
            query("KILL USER app", true),
            Action::Kill(Kill::Unsupported)
        ));
    }

    #[test]
    fn the_previous_statement_is_asked_about_where_it_ran() {
        // A session that moved: manifold kept the conditions.
        let Action::ShowDiagnostics(show) = query("SHOW WARNINGS LIMIT 2", true) else {
            panic!("SHOW WARNINGS of a session that moved");
        };
        assert_eq!(show.limit, Some(2));
        assert!(matches!(
            query("GET DIAGNOSTICS @n = NUMBER", true),
            Action::GetDiagnostics
        ));
        // A session still on the connection that ran it: that connection answers.
        assert!(matches!(
            query("SHOW WARNINGS", false),
            Action::Forward(_, Effect::Query(_))
        ));
        assert!(matches!(
            query("GET DIAGNOSTICS @n = NUMBER", false),
            Action::Forward(_, Effect::Query(_))
        ));
    }

    #[test]
    fn the_process_list_is_manifolds_whether_or_not_the_session_moved() {
        for moved in [true, false] {
            assert!(matches!(
                query("SHOW PROCESSLIST", moved),
                Action::ShowProcesslist(false)
            ));
            assert!(matches!(
                query("show full processlist", moved),
                Action::ShowProcesslist(true)
            ));
        }
        // Read from information_schema: rewritten on the way, run by the server.
        assert!(matches!(
            query("SELECT ID FROM information_schema.PROCESSLIST", true),
            Action::Forward(ResponseKind::ResultSets, Effect::Query(s)) if s.has(Scan::PROCESSLIST)
        ));
    }

    /// Nested wrappers are no binlog question (MariaDB refuses them), and looking at many
    /// of them costs a bounded number of words: before, each `FOR` was tried with every
    /// later one, exponential in their count.
    #[test]
    fn nested_set_statement_wrappers_cost_a_bounded_look() {
        let nested = "SET STATEMENT for ".repeat(5000) + "SHOW MASTER STATUS";
        assert!(!may_be_binlog_statement(nested.as_bytes()));
        let once = "SET STATEMENT max_statement_time=1 FOR SHOW MASTER STATUS";
        assert!(may_be_binlog_statement(once.as_bytes()));
    }
}
