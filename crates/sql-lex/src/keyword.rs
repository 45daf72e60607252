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
    /// `JOIN`, `STRAIGHT_JOIN`.
    Join,
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
    Processlist,
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

/// Clears bit 5 of every byte: upper-cases ASCII letters, and maps no other byte a word
/// can hold (digits, `_`, `$`, bytes of multi-byte characters) onto a letter or `_`, so
/// that a folded word equals a keyword exactly when it is that keyword in some case.
const FOLD: u64 = 0xdfdf_dfdf_dfdf_dfdf;

/// A word of 1 to 16 bytes as two integers, folded (see [`FOLD`]). The bytes are read in
/// fixed-size, possibly overlapping loads (the first and last four or eight), which for a
/// given length still tell any two words apart: keys are compared together with lengths.
#[inline]
const fn key(word: &[u8]) -> (u64, u64) {
    let n = word.len();
    let (lo, hi) = if n >= 8 {
        (load8(word, 0), load8(word, n - 8))
    } else if n >= 4 {
        (
            (load4(word, 0) as u64) | ((load4(word, n - 4) as u64) << 32),
            0,
        )
    } else if n > 0 {
        (
            word[0] as u64 | (word[n / 2] as u64) << 8 | (word[n - 1] as u64) << 16,
            0,
        )
    } else {
        (0, 0)
    };
    (lo & FOLD, hi & FOLD)
}

#[inline]
const fn load8(w: &[u8], at: usize) -> u64 {
    u64::from_le_bytes([
        w[at],
        w[at + 1],
        w[at + 2],
        w[at + 3],
        w[at + 4],
        w[at + 5],
        w[at + 6],
        w[at + 7],
    ])
}

#[inline]
const fn load4(w: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([w[at], w[at + 1], w[at + 2], w[at + 3]])
}

/// Slot of a key in [`TABLE`].
#[inline]
const fn slot(len: usize, (lo, hi): (u64, u64)) -> usize {
    let h = (lo ^ hi.rotate_left(29) ^ len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - TABLE_BITS)) as usize
}

const TABLE_BITS: u32 = 8;

#[derive(Clone, Copy)]
struct Entry {
    /// 0 for an empty slot.
    len: u8,
    key: (u64, u64),
    kw: Kw,
}

const EMPTY: Entry = Entry {
    len: 0,
    key: (0, 0),
    kw: Kw::None,
};

/// An open-addressing table of the keywords up to 16 bytes long, built at compile time.
const fn build(words: &[(&[u8], Kw)]) -> [Entry; 1 << TABLE_BITS] {
    let mut table = [EMPTY; 1 << TABLE_BITS];
    let mut i = 0;
    while i < words.len() {
        let (word, kw) = words[i];
        assert!(!word.is_empty() && word.len() <= 16);
        let k = key(word);
        let mut at = slot(word.len(), k);
        while table[at].len != 0 {
            assert!(
                !(table[at].len as usize == word.len()
                    && table[at].key.0 == k.0
                    && table[at].key.1 == k.1),
                "keyword listed twice"
            );
            at = (at + 1) % (1 << TABLE_BITS);
        }
        table[at] = Entry {
            len: word.len() as u8,
            key: k,
            kw,
        };
        i += 1;
    }
    table
}

/// For each length up to 16, a bit per first letter of the keywords of that length in the
/// low half, and a bit per last letter in the high half (the letter's low five bits:
/// case-blind; other bytes share bits with letters, which only costs them the full lookup).
const fn edge_letters(words: &[(&[u8], Kw)]) -> [u64; 17] {
    let mut masks = [0u64; 17];
    let mut i = 0;
    while i < words.len() {
        let word = words[i].0;
        let n = word.len();
        masks[n] |= 1 << (word[0] & 31) | 1 << (32 + (word[n - 1] & 31));
        i += 1;
    }
    masks
}

/// Whether `word` (1 to 16 bytes) starts with a letter some keyword of its length starts
/// with, and ends with one some keyword of its length ends with.
#[inline]
fn maybe_keyword(word: &[u8], edges: &[u64; 17]) -> bool {
    let (Some(&first), Some(&last)) = (word.first(), word.last()) else {
        return false;
    };
    let mask = edges[word.len()];
    mask & (1 << (first & 31)) != 0 && mask & (1 << (32 + (last & 31))) != 0
}

macro_rules! keywords {
    ($($text:literal => $kw:expr,)*) => {
        /// Every keyword up to 16 bytes and what it is.
        const WORDS: &[(&[u8], Kw)] = &[$(($text, $kw),)*];
        const TABLE: [Entry; 1 << TABLE_BITS] = build(WORDS);
        const EDGE_LETTERS: [u64; 17] = edge_letters(WORDS);

        /// The keyword `word` (a run of word bytes: letters, digits, `_`, `$`, non-ASCII
        /// bytes) is, case-insensitively.
        // Called once per word: inlined, it costs a third fewer instructions.
        #[allow(clippy::inline_always)]
        #[inline(always)]
        pub(crate) fn keyword(word: &[u8]) -> Kw {
            let n = word.len();
            if n > 16 {
                return long_keyword(word);
            }
            // Most names (`c`, `sbtest1`, `WHERE`, `id`) have a length and first or last
            // letter no keyword has: answered without hashing.
            if !maybe_keyword(word, &EDGE_LETTERS) {
                return Kw::None;
            }
            let k = key(word);
            let mut at = slot(n, k);
            loop {
                let e = &TABLE[at];
                if e.len as usize == n && e.key == k {
                    return e.kw;
                }
                if e.len == 0 {
                    return Kw::None;
                }
                at = (at + 1) % (1 << TABLE_BITS);
            }
        }
    };
}

/// The two keywords longer than the table's keys.
#[cold]
fn long_keyword(word: &[u8]) -> Kw {
    if word.eq_ignore_ascii_case(b"SQL_CALC_FOUND_ROWS") {
        Kw::SqlCalcFoundRows
    } else if word.eq_ignore_ascii_case(b"RELEASE_ALL_LOCKS") {
        Kw::ReleaseAllLocks
    } else {
        Kw::None
    }
}

keywords! {
    b"SELECT" => Kw::Verb(Verb::Select),
    b"INSERT" => Kw::Verb(Verb::Insert),
    b"UPDATE" => Kw::Verb(Verb::Update),
    b"DELETE" => Kw::Verb(Verb::Delete),
    b"REPLACE" => Kw::Verb(Verb::Replace),
    b"SET" => Kw::Verb(Verb::Set),
    b"USE" => Kw::Verb(Verb::Use),
    b"BEGIN" => Kw::Verb(Verb::Begin),
    b"START" => Kw::Verb(Verb::Start),
    b"COMMIT" => Kw::Verb(Verb::Commit),
    b"ROLLBACK" => Kw::Verb(Verb::Rollback),
    b"LOCK" => Kw::Verb(Verb::Lock),
    b"UNLOCK" => Kw::Verb(Verb::Unlock),
    b"CREATE" => Kw::Verb(Verb::Create),
    b"DROP" => Kw::Verb(Verb::Drop),
    b"ALTER" => Kw::Verb(Verb::Alter),
    b"SHOW" => Kw::Verb(Verb::Show),
    b"PREPARE" => Kw::Verb(Verb::Prepare),
    b"EXECUTE" => Kw::Verb(Verb::Execute),
    b"DEALLOCATE" => Kw::Verb(Verb::Deallocate),
    b"HANDLER" => Kw::Verb(Verb::Handler),
    b"XA" => Kw::Verb(Verb::Xa),
    b"CALL" => Kw::Verb(Verb::Call),
    b"DO" => Kw::Verb(Verb::Do),
    b"FLUSH" => Kw::Verb(Verb::Flush),
    b"KILL" => Kw::Verb(Verb::Kill),
    b"WITH" => Kw::Verb(Verb::With),
    b"DESCRIBE" => Kw::Verb(Verb::Describe),
    b"DESC" => Kw::Verb(Verb::Describe),
    b"EXPLAIN" => Kw::Verb(Verb::Explain),
    b"HELP" => Kw::Verb(Verb::Help),
    b"FROM" => Kw::From,
    b"JOIN" => Kw::Join,
    b"STRAIGHT_JOIN" => Kw::Join,
    b"TABLES" => Kw::Tables,
    b"TABLE" => Kw::Table,
    b"TEMPORARY" => Kw::Temporary,
    b"TRANSACTION" => Kw::Transaction,
    b"ROLE" => Kw::Role,
    b"WARNINGS" => Kw::Warnings,
    b"ERRORS" => Kw::Errors,
    b"GET" => Kw::Get,
    b"DIAGNOSTICS" => Kw::Diagnostics,
    b"OR" => Kw::Or,
    b"READ" => Kw::Read,
    b"NAMES" => Kw::Names,
    b"COLLATE" => Kw::Collate,
    b"FOR" => Kw::For,
    b"SHARE" => Kw::Share,
    b"IN" => Kw::In,
    b"INTO" => Kw::Into,
    b"OUTFILE" => Kw::Outfile,
    b"DUMPFILE" => Kw::Dumpfile,
    b"NEXT" => Kw::Next,
    b"PREVIOUS" => Kw::Previous,
    b"VALUE" => Kw::Value,
    b"ONLY" => Kw::Only,
    b"KEY" => Kw::Key,
    b"PROCESSLIST" => Kw::Processlist,
    b"LAST_INSERT_ID" => Kw::LastInsertId,
    b"GET_LOCK" => Kw::GetLock,
    b"RELEASE_LOCK" => Kw::ReleaseLock,
    b"ROW_COUNT" => Kw::RowCount,
    b"FOUND_ROWS" => Kw::FoundRows,
    b"CONNECTION_ID" => Kw::ConnectionId,
    b"NEXTVAL" => Kw::Nextval,
    b"SETVAL" => Kw::Setval,
    b"LASTVAL" => Kw::Lastval,
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

    #[test]
    fn every_keyword_is_found_in_any_case_and_near_misses_are_not() {
        // What a word is by a plain comparison with the list.
        let listed = |w: &[u8]| {
            WORDS
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(w))
                .map_or(Kw::None, |&(_, kw)| kw)
        };
        for &(word, kw) in WORDS {
            let lower = word.to_ascii_lowercase();
            assert_eq!(keyword(word), kw);
            assert_eq!(keyword(&lower), kw);
            let longer = [word, b"S"].concat();
            assert_eq!(keyword(&longer), listed(&longer));
            assert_eq!(keyword(&word[1..]), listed(&word[1..]));
            // Same length, one byte off: a digit or `_` where a letter was, and the letter
            // with only bit 5 changed in a byte that is not a letter.
            for at in 0..word.len() {
                for other in [b'0', b'_', b'$', word[at] ^ 0x80] {
                    let mut w = word.to_vec();
                    w[at] = other;
                    assert_eq!(keyword(&w), listed(&w), "{}", String::from_utf8_lossy(&w));
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_a_plain_comparison(word in "[a-zA-Z_$0-9\u{e9}]{0,20}") {
            let w = word.as_bytes();
            let listed = WORDS
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(w))
                .map_or(Kw::None, |&(_, kw)| kw);
            if w.len() <= 16 {
                proptest::prop_assert_eq!(keyword(w), listed);
            }
        }
    }
}
