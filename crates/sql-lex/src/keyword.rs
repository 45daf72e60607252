//! The keywords [`scan`](crate::scan) looks for, recognised with one fold and one integer
//! match per word instead of a string comparison per keyword.

use crate::scan::Verb;

/// A word [`scan`](crate::scan) cares about; [`Kw::None`] for every other word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kw {
    None,
    /// The first word of a statement.
    Verb(Verb),
    // Other words.
    From,
    SqlCalcFoundRows,
    Tables,
    Table,
    Temporary,
    Transaction,
    Role,
    Warnings,
    Errors,
    Get,
    Diagnostics,
    Or,
    Read,
    Names,
    Collate,
    For,
    Share,
    In,
    Into,
    Outfile,
    Dumpfile,
    Next,
    Previous,
    Value,
    Only,
    Key,
    // Functions (followed by `(`).
    LastInsertId,
    GetLock,
    ReleaseLock,
    ReleaseAllLocks,
    RowCount,
    FoundRows,
    ConnectionId,
    Nextval,
    Setval,
    Lastval,
}

/// `word` upper-cased and packed big-endian into an integer; words longer than 16 bytes do
/// not fit and are never keywords here but for the two long ones checked apart.
const fn pack(word: &[u8]) -> u128 {
    let mut key = 0u128;
    let mut i = 0;
    while i < word.len() {
        key = (key << 8) | word[i].to_ascii_uppercase() as u128;
        i += 1;
    }
    key
}

macro_rules! keywords {
    ($($name:ident = $text:literal => $kw:expr,)*) => {
        /// The keyword `word` is, case-insensitively.
        pub(crate) fn keyword(word: &[u8]) -> Kw {
            mod keys {
                $(pub(super) const $name: u128 = super::pack($text);)*
            }
            if word.len() > 16 {
                return if word.eq_ignore_ascii_case(b"SQL_CALC_FOUND_ROWS") {
                    Kw::SqlCalcFoundRows
                } else if word.eq_ignore_ascii_case(b"RELEASE_ALL_LOCKS") {
                    Kw::ReleaseAllLocks
                } else {
                    Kw::None
                };
            }
            match pack(word) {
                $(keys::$name => $kw,)*
                _ => Kw::None,
            }
        }
    };
}

keywords! {
    SELECT = b"SELECT" => Kw::Verb(Verb::Select),
    INSERT = b"INSERT" => Kw::Verb(Verb::Insert),
    UPDATE = b"UPDATE" => Kw::Verb(Verb::Update),
    DELETE = b"DELETE" => Kw::Verb(Verb::Delete),
    REPLACE = b"REPLACE" => Kw::Verb(Verb::Replace),
    SET = b"SET" => Kw::Verb(Verb::Set),
    USE = b"USE" => Kw::Verb(Verb::Use),
    BEGIN = b"BEGIN" => Kw::Verb(Verb::Begin),
    START = b"START" => Kw::Verb(Verb::Start),
    COMMIT = b"COMMIT" => Kw::Verb(Verb::Commit),
    ROLLBACK = b"ROLLBACK" => Kw::Verb(Verb::Rollback),
    LOCK = b"LOCK" => Kw::Verb(Verb::Lock),
    UNLOCK = b"UNLOCK" => Kw::Verb(Verb::Unlock),
    CREATE = b"CREATE" => Kw::Verb(Verb::Create),
    DROP = b"DROP" => Kw::Verb(Verb::Drop),
    ALTER = b"ALTER" => Kw::Verb(Verb::Alter),
    SHOW = b"SHOW" => Kw::Verb(Verb::Show),
    PREPARE = b"PREPARE" => Kw::Verb(Verb::Prepare),
    EXECUTE = b"EXECUTE" => Kw::Verb(Verb::Execute),
    DEALLOCATE = b"DEALLOCATE" => Kw::Verb(Verb::Deallocate),
    HANDLER = b"HANDLER" => Kw::Verb(Verb::Handler),
    XA = b"XA" => Kw::Verb(Verb::Xa),
    CALL = b"CALL" => Kw::Verb(Verb::Call),
    DO = b"DO" => Kw::Verb(Verb::Do),
    FLUSH = b"FLUSH" => Kw::Verb(Verb::Flush),
    KILL = b"KILL" => Kw::Verb(Verb::Kill),
    WITH = b"WITH" => Kw::Verb(Verb::With),
    DESCRIBE = b"DESCRIBE" => Kw::Verb(Verb::Describe),
    DESC = b"DESC" => Kw::Verb(Verb::Describe),
    EXPLAIN = b"EXPLAIN" => Kw::Verb(Verb::Explain),
    HELP = b"HELP" => Kw::Verb(Verb::Help),
    FROM = b"FROM" => Kw::From,
    TABLES = b"TABLES" => Kw::Tables,
    TABLE = b"TABLE" => Kw::Table,
    TEMPORARY = b"TEMPORARY" => Kw::Temporary,
    TRANSACTION = b"TRANSACTION" => Kw::Transaction,
    ROLE = b"ROLE" => Kw::Role,
    WARNINGS = b"WARNINGS" => Kw::Warnings,
    ERRORS = b"ERRORS" => Kw::Errors,
    GET = b"GET" => Kw::Get,
    DIAGNOSTICS = b"DIAGNOSTICS" => Kw::Diagnostics,
    OR = b"OR" => Kw::Or,
    READ = b"READ" => Kw::Read,
    NAMES = b"NAMES" => Kw::Names,
    COLLATE = b"COLLATE" => Kw::Collate,
    FOR = b"FOR" => Kw::For,
    SHARE = b"SHARE" => Kw::Share,
    IN = b"IN" => Kw::In,
    INTO = b"INTO" => Kw::Into,
    OUTFILE = b"OUTFILE" => Kw::Outfile,
    DUMPFILE = b"DUMPFILE" => Kw::Dumpfile,
    NEXT = b"NEXT" => Kw::Next,
    PREVIOUS = b"PREVIOUS" => Kw::Previous,
    VALUE = b"VALUE" => Kw::Value,
    ONLY = b"ONLY" => Kw::Only,
    KEY = b"KEY" => Kw::Key,
    LAST_INSERT_ID = b"LAST_INSERT_ID" => Kw::LastInsertId,
    GET_LOCK = b"GET_LOCK" => Kw::GetLock,
    RELEASE_LOCK = b"RELEASE_LOCK" => Kw::ReleaseLock,
    ROW_COUNT = b"ROW_COUNT" => Kw::RowCount,
    FOUND_ROWS = b"FOUND_ROWS" => Kw::FoundRows,
    CONNECTION_ID = b"CONNECTION_ID" => Kw::ConnectionId,
    NEXTVAL = b"NEXTVAL" => Kw::Nextval,
    SETVAL = b"SETVAL" => Kw::Setval,
    LASTVAL = b"LASTVAL" => Kw::Lastval,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fold_case_and_others_are_none() {
        assert_eq!(keyword(b"select"), Kw::Verb(Verb::Select));
        assert_eq!(keyword(b"SeLeCt"), Kw::Verb(Verb::Select));
        assert_eq!(keyword(b"desc"), Kw::Verb(Verb::Describe));
        assert_eq!(keyword(b"sql_calc_found_rows"), Kw::SqlCalcFoundRows);
        assert_eq!(keyword(b"Release_All_Locks"), Kw::ReleaseAllLocks);
        assert_eq!(keyword(b"connection_id"), Kw::ConnectionId);
        assert_eq!(keyword(b"selects"), Kw::None);
        assert_eq!(keyword(b"sbtest1"), Kw::None);
        assert_eq!(keyword(b"a_much_longer_identifier_name"), Kw::None);
        assert_eq!(keyword(b""), Kw::None);
        // Non-ASCII bytes never fold into a keyword.
        assert_eq!(keyword("sélect".as_bytes()), Kw::None);
    }
}
