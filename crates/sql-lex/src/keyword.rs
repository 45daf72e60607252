//! The keywords [`scan`](crate::scan) looks for, recognised with one fold and one integer
//! match per word instead of a string comparison per keyword.

/// A word [`scan`](crate::scan) cares about; [`Kw::None`] for every other word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kw {
    None,
    // Statement verbs.
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
    Describe,
    Desc,
    Explain,
    Help,
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
    ($($text:literal => $kw:ident,)*) => {
        /// The keyword `word` is, case-insensitively.
        pub(crate) fn keyword(word: &[u8]) -> Kw {
            #[allow(non_upper_case_globals)]
            mod keys {
                $(pub(super) const $kw: u128 = super::pack($text);)*
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
                $(keys::$kw => Kw::$kw,)*
                _ => Kw::None,
            }
        }
    };
}

keywords! {
    b"SELECT" => Select,
    b"INSERT" => Insert,
    b"UPDATE" => Update,
    b"DELETE" => Delete,
    b"REPLACE" => Replace,
    b"SET" => Set,
    b"USE" => Use,
    b"BEGIN" => Begin,
    b"START" => Start,
    b"COMMIT" => Commit,
    b"ROLLBACK" => Rollback,
    b"LOCK" => Lock,
    b"UNLOCK" => Unlock,
    b"CREATE" => Create,
    b"DROP" => Drop,
    b"ALTER" => Alter,
    b"SHOW" => Show,
    b"PREPARE" => Prepare,
    b"EXECUTE" => Execute,
    b"DEALLOCATE" => Deallocate,
    b"HANDLER" => Handler,
    b"XA" => Xa,
    b"CALL" => Call,
    b"DO" => Do,
    b"FLUSH" => Flush,
    b"KILL" => Kill,
    b"WITH" => With,
    b"DESCRIBE" => Describe,
    b"DESC" => Desc,
    b"EXPLAIN" => Explain,
    b"HELP" => Help,
    b"FROM" => From,
    b"TABLES" => Tables,
    b"TABLE" => Table,
    b"TEMPORARY" => Temporary,
    b"TRANSACTION" => Transaction,
    b"ROLE" => Role,
    b"WARNINGS" => Warnings,
    b"ERRORS" => Errors,
    b"GET" => Get,
    b"DIAGNOSTICS" => Diagnostics,
    b"OR" => Or,
    b"READ" => Read,
    b"NAMES" => Names,
    b"COLLATE" => Collate,
    b"FOR" => For,
    b"SHARE" => Share,
    b"IN" => In,
    b"INTO" => Into,
    b"OUTFILE" => Outfile,
    b"DUMPFILE" => Dumpfile,
    b"NEXT" => Next,
    b"PREVIOUS" => Previous,
    b"VALUE" => Value,
    b"ONLY" => Only,
    b"KEY" => Key,
    b"LAST_INSERT_ID" => LastInsertId,
    b"GET_LOCK" => GetLock,
    b"RELEASE_LOCK" => ReleaseLock,
    b"ROW_COUNT" => RowCount,
    b"FOUND_ROWS" => FoundRows,
    b"CONNECTION_ID" => ConnectionId,
    b"NEXTVAL" => Nextval,
    b"SETVAL" => Setval,
    b"LASTVAL" => Lastval,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fold_case_and_others_are_none() {
        assert_eq!(keyword(b"select"), Kw::Select);
        assert_eq!(keyword(b"SeLeCt"), Kw::Select);
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
