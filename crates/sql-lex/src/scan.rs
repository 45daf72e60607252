//! What a statement does to the session that runs it, read from its tokens.

use crate::digest::DigestWriter;
use crate::keyword::{keyword, Kw};
use crate::lexer::{Lexer, RouteHint, Token, Visitor};
use crate::memo::Resumable;

/// The first word of the (first) statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Empty,
    Select,
    Insert,
    Update,
    Delete,
    Replace,
    Set,
    Use,
    Begin,
    Start,
    Commit,
    Rollback,
    Lock,
    Unlock,
    Create,
    Drop,
    Alter,
    Show,
    Prepare,
    Execute,
    Deallocate,
    Handler,
    Xa,
    Call,
    Do,
    Flush,
    Kill,
    With,
    /// `DESCRIBE`, `DESC`.
    Describe,
    Explain,
    Help,
    Other,
}

/// What [`scan`] found. Flags are bits of [`Scan::flags`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    pub verb: Verb,
    pub flags: u32,
    /// Statements in the text (`;`-separated, empty ones not counted).
    pub statements: u32,
    /// A `/* manifold:primary */` or `/* manifold:replica */` comment.
    pub hint: Option<RouteHint>,
}

/// Where a statement may run, as far as its text tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Reads only: any node with the data may answer (`SELECT`, `SHOW`, `DESCRIBE`,
    /// `EXPLAIN`, `HELP`, a `WITH` query).
    Read,
    /// `SELECT ... FOR UPDATE`, `LOCK IN SHARE MODE`, `FOR SHARE`: takes row locks.
    LockingRead,
    /// Changes data or schema, or calls something with side effects (`GET_LOCK`,
    /// `NEXTVAL`, `LAST_INSERT_ID(expr)`, `INTO OUTFILE`).
    Write,
    /// `BEGIN`, `START TRANSACTION` (not read only), any `XA` statement.
    Begin,
    /// `START TRANSACTION READ ONLY`.
    BeginReadOnly,
    /// `COMMIT`, `ROLLBACK`.
    End,
    /// `SET`, `USE`: changes the session, which manifold tracks and carries to any node.
    Session,
    /// Several statements, `CALL`, `DO`, or anything not recognised.
    Unknown,
}

impl Scan {
    /// A user variable is read or written (`@x`, `SET @x = ...`, `INTO @x`).
    pub const USER_VARIABLE: u32 = 1;
    pub const GET_LOCK: u32 = 1 << 1;
    pub const RELEASE_LOCK: u32 = 1 << 2;
    pub const RELEASE_ALL_LOCKS: u32 = 1 << 3;
    /// `LOCK TABLES`, `FLUSH TABLES ... WITH READ LOCK`.
    pub const LOCK_TABLES: u32 = 1 << 4;
    pub const UNLOCK_TABLES: u32 = 1 << 5;
    pub const CREATE_TEMPORARY: u32 = 1 << 6;
    pub const DROP_TEMPORARY: u32 = 1 << 7;
    pub const CALC_FOUND_ROWS: u32 = 1 << 8;
    /// SQL-level `PREPARE`, `EXECUTE`, `DEALLOCATE PREPARE`.
    pub const SQL_PREPARE: u32 = 1 << 9;
    pub const HANDLER: u32 = 1 << 10;
    /// `SET TRANSACTION ...`: characteristics of the next transaction only, not a variable.
    pub const SET_TRANSACTION: u32 = 1 << 11;
    /// `SET ROLE`: changes privileges, which no variable reports.
    pub const SET_ROLE: u32 = 1 << 12;
    /// `LAST_INSERT_ID(expr)`: sets the value later `LAST_INSERT_ID()` calls return.
    pub const SETS_LAST_INSERT_ID: u32 = 1 << 13;
    pub const LAST_INSERT_ID: u32 = 1 << 14;
    pub const ROW_COUNT: u32 = 1 << 15;
    pub const FOUND_ROWS: u32 = 1 << 16;
    pub const WARNINGS: u32 = 1 << 17;
    /// The text ends inside a string, quoted name or comment.
    pub const UNTERMINATED: u32 = 1 << 18;
    /// `SET NAMES cs COLLATE co`: servers report the character sets it changes but not the
    /// collation (see [`set_names_collation`]).
    pub const SET_NAMES_COLLATE: u32 = 1 << 19;
    /// `CONNECTION_ID()`: a gateway answers with its own id for the session.
    pub const CONNECTION_ID: u32 = 1 << 20;
    /// A statement of the text is a `KILL`.
    pub const KILL: u32 = 1 << 21;
    /// The word `FROM` appears: the statement may read tables.
    pub const FROM: u32 = 1 << 22;
    /// `GET DIAGNOSTICS`.
    pub const GET_DIAGNOSTICS: u32 = 1 << 23;
    /// `FOR UPDATE`, `FOR SHARE`, `LOCK IN SHARE MODE`.
    pub const LOCKING_READ: u32 = 1 << 24;
    /// `NEXTVAL(`, `SETVAL(`, `LASTVAL(`, `NEXT VALUE FOR`, `PREVIOUS VALUE FOR`: sequences
    /// live on the primary.
    pub const SEQUENCE: u32 = 1 << 25;
    /// `INTO OUTFILE`, `INTO DUMPFILE`: writes a file on the server.
    pub const INTO_FILE: u32 = 1 << 26;
    /// `READ ONLY` after `START TRANSACTION`.
    pub const READ_ONLY: u32 = 1 << 27;
    /// `INSERT`, `UPDATE` or `DELETE` after the first word (a `WITH ... DELETE`; `REPLACE`
    /// is left out, being also a string function).
    pub const DML_WORD: u32 = 1 << 28;
    /// The word `PROCESSLIST` (or `` `PROCESSLIST` ``): `SHOW PROCESSLIST` or
    /// `information_schema.PROCESSLIST`, which a gateway with its own connection ids answers
    /// from its own sessions (see [`parse_show_processlist`], [`replace_processlist_tables`]).
    pub const PROCESSLIST: u32 = 1 << 29;
    /// A name qualified by a schema right after `FROM`, `JOIN`, `INTO`, `UPDATE`, `TABLE` or
    /// a first `DESCRIBE` (`FROM shop.t`): the statement may be about another schema than
    /// the session's (see [`schema_of`](crate::schema_of)).
    pub const QUALIFIED_TABLE: u32 = 1 << 30;

    /// What makes a `SELECT` need the primary.
    pub const NEEDS_PRIMARY: u32 = Self::LOCKING_READ
        | Self::SEQUENCE
        | Self::INTO_FILE
        | Self::GET_LOCK
        | Self::RELEASE_LOCK
        | Self::RELEASE_ALL_LOCKS
        | Self::SETS_LAST_INSERT_ID;

    /// What a gateway may answer in the server's place (see [`SessionValues`]).
    pub const SESSION_VALUES: u32 = Self::CONNECTION_ID
        | Self::ROW_COUNT
        | Self::FOUND_ROWS
        | Self::WARNINGS
        | Self::PROCESSLIST;

    /// Statements that change session state the server flags (`session_track_state_change`)
    /// without reporting what: a state change after one of these is accounted for.
    pub const UNREPORTED_STATE: u32 = Self::USER_VARIABLE
        | Self::CREATE_TEMPORARY
        | Self::DROP_TEMPORARY
        | Self::SQL_PREPARE
        | Self::HANDLER
        | Self::SET_ROLE
        | Self::SET_TRANSACTION
        | Self::LOCK_TABLES
        | Self::UNLOCK_TABLES
        | Self::GET_LOCK
        | Self::RELEASE_LOCK
        | Self::RELEASE_ALL_LOCKS
        | Self::SETS_LAST_INSERT_ID;

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// Where the statement may run (see [`Class`]). Several statements in one text are
    /// [`Class::Unknown`]: their order on one connection matters.
    pub fn class(&self) -> Class {
        if self.statements > 1 || self.has(Self::UNTERMINATED) {
            return Class::Unknown;
        }
        match self.verb {
            Verb::Select | Verb::With => {
                if self.has(Self::LOCKING_READ) {
                    Class::LockingRead
                } else if self.has(Self::NEEDS_PRIMARY)
                    || (self.verb == Verb::With && self.has(Self::DML_WORD))
                {
                    Class::Write
                } else {
                    Class::Read
                }
            }
            Verb::Show | Verb::Describe | Verb::Explain | Verb::Help => Class::Read,
            Verb::Insert
            | Verb::Update
            | Verb::Delete
            | Verb::Replace
            | Verb::Create
            | Verb::Drop
            | Verb::Alter
            | Verb::Lock
            | Verb::Unlock
            | Verb::Flush
            | Verb::Handler => Class::Write,
            Verb::Start if self.has(Self::READ_ONLY) => Class::BeginReadOnly,
            Verb::Begin | Verb::Start | Verb::Xa => Class::Begin,
            Verb::Commit | Verb::Rollback => Class::End,
            Verb::Set if self.has(Self::NEEDS_PRIMARY) => Class::Write,
            Verb::Set | Verb::Use => Class::Session,
            Verb::Empty
            | Verb::Prepare
            | Verb::Execute
            | Verb::Deallocate
            | Verb::Call
            | Verb::Do
            | Verb::Kill
            | Verb::Other => Class::Unknown,
        }
    }

    /// The statement leaves the session's list of warnings as it was when it raises none
    /// itself. The server clears the list only for statements that use tables: not
    /// `SHOW WARNINGS`/`SHOW ERRORS` (which read it), transaction control, `USE`, and a
    /// `SELECT`, `SET` or `DO` with no `FROM` (unless a stored function it calls uses one,
    /// which this cannot see). Anything else is taken to use tables.
    pub fn keeps_diagnostics(&self) -> bool {
        if self.statements > 1 {
            return false;
        }
        match self.verb {
            Verb::Show => self.has(Scan::WARNINGS),
            Verb::Select | Verb::Set | Verb::Do => !self.has(Scan::FROM),
            Verb::Begin
            | Verb::Start
            | Verb::Commit
            | Verb::Rollback
            | Verb::Use
            | Verb::Unlock
            | Verb::Xa
            | Verb::Kill
            | Verb::Empty => true,
            _ => false,
        }
    }
}

/// Reads a statement (or several, `;`-separated) for what it does to its session. Costs one
/// pass over the text and no allocation.
pub fn scan(sql: &[u8]) -> Scan {
    Scanner::run(sql, ()).0
}

/// [`scan`] and [`digest`](crate::digest()) in one pass over the text: what routing rules and
/// statistics need besides the scan. The digest text goes to `digest_text` (see
/// [`digest`](crate::digest())); its hash is returned.
pub fn scan_with_digest(sql: &[u8], digest_text: &mut Vec<u8>) -> (Scan, u64) {
    let (scan, writer) = Scanner::run(sql, DigestWriter::new(sql, digest_text));
    (scan, writer.finish())
}

/// What a [`scan`] pass knows between two tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScanState {
    out: Scan,
    /// The current statement's verb, once its first word is read.
    first: Option<Verb>,
    /// Its second word, once read.
    second: Option<Kw>,
    /// The previous token, if a word: `Kw::None` after anything that is not a keyword.
    prev: Kw,
    prev_word: bool,
    /// `LAST_INSERT_ID(` was the previous token: `)` next means the no-argument form.
    open_last_insert_id: bool,
    /// The previous token is a name right after a word a table name follows (`FROM shop`):
    /// a `.` next makes it a schema's.
    table_name: bool,
}

impl ScanState {
    pub(crate) const START: ScanState = ScanState {
        out: Scan {
            verb: Verb::Empty,
            flags: 0,
            statements: 0,
            hint: None,
        },
        first: None,
        second: None,
        prev: Kw::None,
        prev_word: false,
        open_last_insert_id: false,
        table_name: false,
    };
}

/// A [`scan`] pass, which also hands every token to `also`.
pub(crate) struct Scanner<V: Resumable> {
    st: ScanState,
    also: V,
    /// Set to have the state before the first value token (a number or string) recorded in
    /// `at_first_value`, for a [`ScanMemo`](crate::ScanMemo).
    pub(crate) record_first_value: bool,
    pub(crate) at_first_value: Option<(usize, ScanState, V::State)>,
}

impl<V: Resumable> Scanner<V> {
    #[inline]
    fn run<'a>(sql: &'a [u8], also: V) -> (Scan, V)
    where
        V: Visitor<'a>,
    {
        let mut scanner = Scanner::new(ScanState::START, also);
        let mut lexer = Lexer::new(sql);
        lexer.visit(&mut scanner);
        scanner.st.out.hint = lexer.hint();
        (scanner.st.out, scanner.also)
    }

    pub(crate) fn new(st: ScanState, also: V) -> Self {
        Scanner {
            st,
            also,
            record_first_value: false,
            at_first_value: None,
        }
    }

    /// The result, once `lexer` has passed every token of the text.
    pub(crate) fn finish(mut self, lexer: &Lexer<'_>) -> (Scan, V) {
        self.st.out.hint = lexer.hint();
        (self.st.out, self.also)
    }

    /// A value token starts at `start`: its state before it is recorded if asked for.
    #[inline]
    fn before_value(&mut self, start: usize) {
        if self.record_first_value {
            self.record_first_value = false;
            self.at_first_value = Some((start, self.st, self.also.state()));
        }
    }

    /// A token after `LAST_INSERT_ID(` that is not `)`: the call sets the value.
    #[inline]
    fn after_open_last_insert_id(&mut self) {
        if self.st.open_last_insert_id {
            self.st.open_last_insert_id = false;
            self.st.out.flags |= Scan::SETS_LAST_INSERT_ID;
        }
    }

    /// A token that is neither a word nor punctuation the scan looks at.
    #[inline]
    fn other(&mut self, flags: u32) {
        self.after_open_last_insert_id();
        self.st.out.flags |= flags;
        self.st.prev = Kw::None;
        self.st.prev_word = false;
        self.st.table_name = false;
    }

    /// What a keyword tells, with the word before it.
    #[inline]
    fn keyword(&mut self, kw: Kw) {
        let first = self.st.first;
        self.st.out.flags |= match (self.st.prev, kw) {
            (_, Kw::SqlCalcFoundRows) => Scan::CALC_FOUND_ROWS,
            (_, Kw::From) => Scan::FROM,
            (_, Kw::Processlist) => Scan::PROCESSLIST,
            (Kw::For, Kw::Verb(Verb::Update) | Kw::Share) | (Kw::In, Kw::Share) => {
                Scan::LOCKING_READ
            }
            (Kw::Into, Kw::Outfile | Kw::Dumpfile) => Scan::INTO_FILE,
            (Kw::Next | Kw::Previous, Kw::Value) => Scan::SEQUENCE,
            (Kw::Read, Kw::Only) if first == Some(Verb::Start) => Scan::READ_ONLY,
            (p, Kw::Verb(Verb::Insert | Verb::Update | Verb::Delete))
                if first.is_some() && p != Kw::For && p != Kw::Key =>
            {
                Scan::DML_WORD
            }
            _ => 0,
        };
    }

    /// The first or second word of a statement, or a keyword after them.
    fn leading_word(&mut self, kw: Kw) {
        let prev = self.st.prev;
        match (self.st.first, self.st.second) {
            (None, _) => {
                let verb = match kw {
                    Kw::Verb(v) => v,
                    _ => Verb::Other,
                };
                self.st.first = Some(verb);
                self.st.out.statements += 1;
                if self.st.out.verb == Verb::Empty {
                    self.st.out.verb = verb;
                }
                self.st.out.flags |= match verb {
                    Verb::Prepare | Verb::Execute | Verb::Deallocate => Scan::SQL_PREPARE,
                    Verb::Handler => Scan::HANDLER,
                    Verb::Kill => Scan::KILL,
                    _ => 0,
                };
            }
            (Some(verb), None) => {
                self.st.second = Some(kw);
                self.st.out.flags |= match (verb, kw) {
                    (Verb::Lock, Kw::Tables | Kw::Table) => Scan::LOCK_TABLES,
                    (Verb::Unlock, Kw::Tables | Kw::Table) => Scan::UNLOCK_TABLES,
                    (Verb::Create, Kw::Temporary) => Scan::CREATE_TEMPORARY,
                    (Verb::Drop, Kw::Temporary) => Scan::DROP_TEMPORARY,
                    (Verb::Set, Kw::Transaction) => Scan::SET_TRANSACTION,
                    (Verb::Set, Kw::Role) => Scan::SET_ROLE,
                    (Verb::Show, Kw::Warnings | Kw::Errors) => Scan::WARNINGS,
                    (Verb::Other, Kw::Diagnostics) if prev == Kw::Get => Scan::GET_DIAGNOSTICS,
                    _ => 0,
                };
            }
            (Some(verb), Some(second)) => {
                self.st.out.flags |= match (verb, second, kw) {
                    (Verb::Create, Kw::Or, Kw::Temporary) => Scan::CREATE_TEMPORARY,
                    (Verb::Flush, _, Kw::Verb(Verb::Lock)) if prev == Kw::Read => Scan::LOCK_TABLES,
                    (Verb::Show, _, Kw::Warnings | Kw::Errors) => Scan::WARNINGS,
                    (Verb::Set, Kw::Names, Kw::Collate) => Scan::SET_NAMES_COLLATE,
                    _ => 0,
                };
            }
        }
    }
}

impl<'a, V: Visitor<'a> + Resumable> Visitor<'a> for Scanner<V> {
    // Called for most tokens: inlined into every pass's loop, also where the compiler's
    // estimate would keep it a call (the memo's recording pass).
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn word(&mut self, t: Token<'a>) {
        self.also.word(t);
        self.after_open_last_insert_id();
        let kw = keyword(t.text);
        // Most words are names after a statement's first two words: nothing to note.
        if kw != Kw::None {
            self.keyword(kw);
            self.leading_word(kw);
        } else if self.st.second.is_none() {
            self.leading_word(kw);
        }
        self.st.table_name = names_table(self.st.prev);
        self.st.prev = kw;
        self.st.prev_word = true;
    }

    // Not inlined on its own, this is a call per comma and parenthesis.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn punct(&mut self, t: Token<'a>, c: u8) {
        self.also.punct(t, c);
        match c {
            b'.' if self.st.table_name => self.other(Scan::QUALIFIED_TABLE),
            b';' => {
                self.after_open_last_insert_id();
                self.st.first = None;
                self.st.second = None;
                self.st.prev = Kw::None;
                self.st.prev_word = false;
                self.st.table_name = false;
            }
            b'(' => {
                self.after_open_last_insert_id();
                if self.st.prev_word {
                    self.st.out.flags |= match self.st.prev {
                        Kw::LastInsertId => {
                            self.st.open_last_insert_id = true;
                            0
                        }
                        Kw::GetLock => Scan::GET_LOCK,
                        Kw::ReleaseLock => Scan::RELEASE_LOCK,
                        Kw::ReleaseAllLocks => Scan::RELEASE_ALL_LOCKS,
                        Kw::RowCount => Scan::ROW_COUNT,
                        Kw::FoundRows => Scan::FOUND_ROWS,
                        Kw::ConnectionId => Scan::CONNECTION_ID,
                        Kw::Nextval | Kw::Setval | Kw::Lastval => Scan::SEQUENCE,
                        _ => 0,
                    };
                }
                self.st.prev = Kw::None;
                self.st.prev_word = false;
                self.st.table_name = false;
            }
            b')' if self.st.open_last_insert_id => {
                self.st.open_last_insert_id = false;
                self.other(Scan::LAST_INSERT_ID);
            }
            _ => self.other(0),
        }
    }

    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn number(&mut self, t: Token<'a>) {
        self.before_value(t.start);
        self.also.number(t);
        self.other(0);
    }

    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn string(&mut self, t: Token<'a>) {
        self.before_value(t.start);
        self.also.string(t);
        self.other(0);
    }

    #[inline]
    fn quoted_ident(&mut self, t: Token<'a>) {
        self.also.quoted_ident(t);
        // `` `PROCESSLIST` ``: the length rules out nearly every other name at once.
        let flags = if t.text.len() == 13 && t.text[1..12].eq_ignore_ascii_case(b"PROCESSLIST") {
            Scan::PROCESSLIST
        } else {
            0
        };
        let table_name = names_table(self.st.prev);
        self.other(flags);
        self.st.table_name = table_name;
    }

    #[inline]
    fn user_var(&mut self, t: Token<'a>) {
        self.also.user_var(t);
        self.other(Scan::USER_VARIABLE);
    }

    #[inline]
    fn sys_var(&mut self, t: Token<'a>) {
        self.also.sys_var(t);
        let name = t.sysvar_name();
        let flags = if name.eq_ignore_ascii_case(b"warning_count")
            || name.eq_ignore_ascii_case(b"error_count")
        {
            Scan::WARNINGS
        } else if name.eq_ignore_ascii_case(b"identity")
            || name.eq_ignore_ascii_case(b"last_insert_id")
        {
            Scan::LAST_INSERT_ID
        } else {
            0
        };
        self.other(flags);
    }

    #[inline]
    fn unterminated(&mut self, t: Token<'a>) {
        self.also.unterminated(t);
        self.other(Scan::UNTERMINATED);
    }
}

/// A table name follows `prev` (`FROM`, `JOIN`, `INTO`, `UPDATE`, `TABLE`, a first
/// `DESCRIBE`/`EXPLAIN`; a later `DESC` of an `ORDER BY` is never followed by `name.`).
#[inline]
fn names_table(prev: Kw) -> bool {
    matches!(
        prev,
        Kw::From
            | Kw::Join
            | Kw::Into
            | Kw::Table
            | Kw::Verb(Verb::Update | Verb::Describe | Verb::Explain)
    )
}

/// Words that end a top-level select list.
pub(crate) const AFTER_SELECT_LIST: &[&str] = &[
    "FROM",
    "INTO",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "UNION",
    "WINDOW",
    "FOR",
    "LOCK",
    "EXCEPT",
    "INTERSECT",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::set_names_collation;

    /// Flags other than [`Scan::FROM`], which most statements under test carry.
    fn flags(sql: &str) -> u32 {
        scan(sql.as_bytes()).flags & !Scan::FROM
    }

    #[test]
    fn verbs() {
        assert_eq!(scan(b"  select 1").verb, Verb::Select);
        assert_eq!(scan(b"/* x */ INSERT INTO t VALUES (1)").verb, Verb::Insert);
        assert_eq!(scan(b"").verb, Verb::Empty);
        assert_eq!(scan(b"-- only a comment").verb, Verb::Empty);
        assert_eq!(scan(b"(SELECT 1)").verb, Verb::Select);
        assert_eq!(scan(b"SELECT 1; SELECT 2;").statements, 2);
    }

    #[test]
    fn locks_and_temporary_tables() {
        assert_eq!(flags("LOCK TABLES t READ"), Scan::LOCK_TABLES);
        assert_eq!(flags("lock table t write"), Scan::LOCK_TABLES);
        assert_eq!(flags("UNLOCK TABLES"), Scan::UNLOCK_TABLES);
        assert_eq!(flags("FLUSH TABLES WITH READ LOCK"), Scan::LOCK_TABLES);
        assert_eq!(flags("FLUSH TABLES t"), 0);
        assert_eq!(flags("SELECT GET_LOCK('a', 1)"), Scan::GET_LOCK);
        assert_eq!(flags("SELECT RELEASE_LOCK('a')"), Scan::RELEASE_LOCK);
        assert_eq!(flags("SELECT release_all_locks()"), Scan::RELEASE_ALL_LOCKS);
        assert_eq!(flags("SELECT 'GET_LOCK(1)'"), 0);
        assert_eq!(flags("SELECT `get_lock`(1)"), 0);
        assert_eq!(
            flags("CREATE TEMPORARY TABLE t (a int)"),
            Scan::CREATE_TEMPORARY
        );
        assert_eq!(
            flags("CREATE OR REPLACE TEMPORARY TABLE t (a int)"),
            Scan::CREATE_TEMPORARY
        );
        assert_eq!(flags("DROP TEMPORARY TABLE t"), Scan::DROP_TEMPORARY);
        assert_eq!(flags("CREATE TABLE temporary (a int)"), 0);
    }

    #[test]
    fn session_functions() {
        assert_eq!(flags("SELECT LAST_INSERT_ID()"), Scan::LAST_INSERT_ID);
        assert_eq!(flags("SELECT last_insert_id ( )"), Scan::LAST_INSERT_ID);
        assert_eq!(
            flags("UPDATE t SET id=LAST_INSERT_ID(id+1)"),
            Scan::SETS_LAST_INSERT_ID
        );
        assert_eq!(flags("SELECT @@identity"), Scan::LAST_INSERT_ID);
        assert_eq!(flags("SELECT ROW_COUNT()"), Scan::ROW_COUNT);
        assert_eq!(flags("SELECT FOUND_ROWS()"), Scan::FOUND_ROWS);
        assert_eq!(
            flags("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1"),
            Scan::CALC_FOUND_ROWS
        );
        assert_eq!(flags("SHOW WARNINGS"), Scan::WARNINGS);
        assert_eq!(flags("SHOW COUNT(*) ERRORS"), Scan::WARNINGS);
        assert_eq!(flags("SELECT @@session.warning_count"), Scan::WARNINGS);
        assert_eq!(
            flags("GET DIAGNOSTICS @n = NUMBER"),
            Scan::GET_DIAGNOSTICS | Scan::USER_VARIABLE
        );
        assert!(scan(b"SELECT 1").keeps_diagnostics());
        assert!(scan(b"SET @x = @@warning_count").keeps_diagnostics());
        assert!(!scan(b"SELECT a FROM t").keeps_diagnostics());
        assert!(!scan(b"SELECT 1; SELECT 2").keeps_diagnostics());
        assert!(!scan(b"INSERT INTO t VALUES (1)").keeps_diagnostics());
        assert!(scan(b"SHOW WARNINGS LIMIT 1").keeps_diagnostics());
        assert!(!scan(b"SHOW TABLES").keeps_diagnostics());
        assert!(scan(b"COMMIT").keeps_diagnostics());
        assert!(!scan(b"TRUNCATE t").keeps_diagnostics());
    }

    #[test]
    fn variables_and_set() {
        assert_eq!(flags("SET @a = 1"), Scan::USER_VARIABLE);
        assert_eq!(flags("SELECT 1 INTO @x"), Scan::USER_VARIABLE);
        assert_eq!(flags("SET @@session.sql_mode = ''"), 0);
        assert_eq!(flags("SET sql_mode = '@x'"), 0);
        assert_eq!(
            flags("SET TRANSACTION ISOLATION LEVEL READ COMMITTED"),
            Scan::SET_TRANSACTION
        );
        assert_eq!(flags("SET SESSION TRANSACTION READ ONLY"), 0);
        assert_eq!(flags("SET ROLE r"), Scan::SET_ROLE);
        assert_eq!(flags("PREPARE s FROM 'SELECT 1'"), Scan::SQL_PREPARE);
        assert_eq!(flags("HANDLER t OPEN"), Scan::HANDLER);
        assert_eq!(flags("SET NAMES latin1"), 0);
        assert_eq!(
            flags("SET NAMES latin1 COLLATE latin1_bin"),
            Scan::SET_NAMES_COLLATE
        );
        assert_eq!(
            set_names_collation(b"set names 'latin1' collate 'latin1_bin'"),
            Some(&b"latin1_bin"[..])
        );
        assert_eq!(set_names_collation(b"SET NAMES latin1"), None);
    }

    #[test]
    fn executable_comments_count_and_later_statements_are_read() {
        assert_eq!(
            flags("/*!40101 SET @OLD = @@sql_mode */"),
            Scan::USER_VARIABLE
        );
        assert_eq!(flags("SELECT 1; LOCK TABLES t WRITE"), Scan::LOCK_TABLES);
        assert_eq!(flags("SELECT 'x"), Scan::UNTERMINATED);
    }

    #[test]
    fn classes() {
        use crate::RouteHint;
        let class = |sql: &str| scan(sql.as_bytes()).class();
        for sql in [
            "SELECT c FROM sbtest1 WHERE id=5",
            "select 1",
            "SELECT SLEEP(0)",
            "SELECT @x",
            "SELECT a INTO @x FROM t",
            "SHOW TABLES",
            "DESC t",
            "DESCRIBE t",
            "EXPLAIN SELECT 1",
            "HELP 'select'",
            "WITH x AS (SELECT 1) SELECT * FROM x",
            "WITH x AS (SELECT REPLACE(a, 'b', 'c') FROM t) SELECT * FROM x",
            "/* manifold:primary */ SELECT 1",
            "SELECT * FROM t WHERE `update` = 1",
        ] {
            assert_eq!(class(sql), Class::Read, "{sql}");
        }
        for sql in [
            "SELECT * FROM t FOR UPDATE",
            "SELECT * FROM t LOCK IN SHARE MODE",
            "select * from t for share",
        ] {
            assert_eq!(class(sql), Class::LockingRead, "{sql}");
        }
        for sql in [
            "INSERT INTO t VALUES (1)",
            "INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE a=1",
            "UPDATE t SET a=1",
            "DELETE FROM t",
            "REPLACE INTO t VALUES (1)",
            "CREATE TABLE t (a int)",
            "DROP TABLE t",
            "ALTER TABLE t ADD b int",
            "LOCK TABLES t READ",
            "SELECT GET_LOCK('a', 1)",
            "SELECT RELEASE_LOCK('a')",
            "SELECT NEXTVAL(s)",
            "SELECT NEXT VALUE FOR s",
            "SELECT LAST_INSERT_ID(5)",
            "SELECT * FROM t INTO OUTFILE '/tmp/x'",
            "WITH x AS (SELECT 1) DELETE FROM t",
            "SET @x = NEXTVAL(s)",
        ] {
            assert_eq!(class(sql), Class::Write, "{sql}");
        }
        assert_eq!(class("BEGIN"), Class::Begin);
        assert_eq!(class("START TRANSACTION"), Class::Begin);
        assert_eq!(class("START TRANSACTION READ WRITE"), Class::Begin);
        assert_eq!(class("start transaction read only"), Class::BeginReadOnly);
        assert_eq!(
            class("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"),
            Class::BeginReadOnly
        );
        assert_eq!(class("COMMIT"), Class::End);
        assert_eq!(class("ROLLBACK"), Class::End);
        assert_eq!(class("SET NAMES utf8mb4"), Class::Session);
        assert_eq!(class("SET @a := 1"), Class::Session);
        assert_eq!(class("USE db"), Class::Session);
        for sql in [
            "SELECT 1; SELECT 2",
            "CALL p()",
            "DO 1",
            "PREPARE s FROM 'SELECT 1'",
            "",
            "SELECT 'x",
            "FROBNICATE",
        ] {
            assert_eq!(class(sql), Class::Unknown, "{sql}");
        }
        assert_eq!(
            scan(b"/* manifold:replica */ SELECT 1").hint,
            Some(RouteHint::Replica)
        );
        assert_eq!(scan(b"SELECT 1").hint, None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(sql in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = scan(&sql);
        }
    }
}
