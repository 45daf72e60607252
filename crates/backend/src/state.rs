//! Session state that can move between backend connections: the system variables a session
//! changed, as the server reported them through session tracking.
//!
//! A fresh connection and a fresh client session of the same [`crate::ConnKey`] start from the
//! same server defaults, so both sides record only what changed since. A connection can serve
//! a session when its changes equal the session's; it can be brought there with one `SET` when
//! its changed variables are a subset of the session's, and otherwise with a reset first.

use manifold_mysql_proto::packets::{decode_session_state, SessionTrack};

/// Name/value pairs sorted by name, with a hash of the whole so pools compare states in one
/// comparison (0 for none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct SortedPairs {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    signature: u64,
}

impl SortedPairs {
    fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.pairs
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()
            .map(|i| self.pairs[i].1.as_slice())
    }

    fn set(&mut self, name: &[u8], value: &[u8]) {
        match self.pairs.binary_search_by(|(n, _)| n.as_slice().cmp(name)) {
            Ok(i) if self.pairs[i].1 == value => return,
            Ok(i) => value.clone_into(&mut self.pairs[i].1),
            Err(i) => self.pairs.insert(i, (name.to_vec(), value.to_vec())),
        }
        // FNV-1a: stable, no allocation, and states are few.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (n, v) in &self.pairs {
            for b in n.iter().chain([&0u8]).chain(v.iter()).chain([&0u8]) {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        self.signature = h | 1;
    }

    fn clear(&mut self) {
        self.pairs.clear();
        self.signature = 0;
    }
}

/// Variables changed from the server's defaults, sorted by name. Names are stored lowercase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionVars {
    vars: SortedPairs,
}

/// What one OK packet's session-state data said.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TrackedChanges {
    pub vars: Vec<(Vec<u8>, Vec<u8>)>,
    pub schema: Option<Vec<u8>>,
    /// The server flagged a state change (`session_track_state_change`).
    pub state_changed: bool,
    /// GTIDs of the transactions the statement committed, from MySQL's
    /// `session_track_gtids=OWN_GTID` (MariaDB reports `last_gtid` as a variable instead).
    pub gtids: Option<Vec<u8>>,
}

impl TrackedChanges {
    /// Decodes session-state data; `None` if it is malformed.
    pub fn decode(data: &[u8]) -> Option<Self> {
        let mut out = Self::default();
        for item in decode_session_state(data).ok()? {
            match item {
                SessionTrack::SystemVariable { mut name, value } => {
                    name.make_ascii_lowercase();
                    out.vars.push((name, value));
                }
                SessionTrack::Schema(s) => out.schema = Some(s),
                SessionTrack::StateChange(c) => out.state_changed |= c,
                SessionTrack::Gtids(g) if !g.is_empty() => out.gtids = Some(g),
                _ => {}
            }
        }
        Some(out)
    }
}

/// Variables manifold sets on every backend connection for its own use; they are not session
/// state to carry.
pub fn is_tracking_variable(name: &[u8]) -> bool {
    name.starts_with(b"session_track_")
}

/// Variables the server reports but a session cannot set back: read-only ones that change
/// as statements run (`last_gtid` after each write) and one-shot values consumed by the next
/// statement. Carrying them would make every restore fail or replay a stale value.
pub fn is_carried(name: &[u8]) -> bool {
    const NOT_CARRIED: &[&[u8]] = &[
        b"last_gtid",
        b"in_transaction",
        b"warning_count",
        b"error_count",
        b"identity",
        b"last_insert_id",
        b"insert_id",
        b"rand_seed1",
        b"rand_seed2",
        b"gtid_seq_no",
        b"gtid_next",
        // MySQL reports it after every statement that reports anything.
        b"statement_id",
    ];
    !is_tracking_variable(name) && !NOT_CARRIED.contains(&name)
}

impl SessionVars {
    pub fn is_empty(&self) -> bool {
        self.vars.pairs.is_empty()
    }

    pub fn signature(&self) -> u64 {
        self.vars.signature
    }

    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.vars.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.vars
            .pairs
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
    }

    /// Records a variable's new value. `name` must be lowercase.
    pub fn set(&mut self, name: &[u8], value: &[u8]) {
        self.vars.set(name, value);
    }

    pub fn clear(&mut self) {
        self.vars.clear();
    }

    /// Every variable this connection changed is also changed by `want` (maybe to another
    /// value), so `SET`ting `want`'s values is enough to match it.
    pub fn is_subset_of(&self, want: &SessionVars) -> bool {
        self.vars.pairs.iter().all(|(n, _)| want.get(n).is_some())
    }

    /// Appends `name=value` assignments for the variables of `self` that `current` lacks or
    /// holds with another value, comma-separated, to a `SET SESSION` statement being built.
    /// Returns how many were appended.
    pub fn write_assignments(&self, current: &SessionVars, out: &mut Vec<u8>) -> usize {
        let mut n = 0;
        for (name, value) in &self.vars.pairs {
            if current.get(name) == Some(value.as_slice()) {
                continue;
            }
            if !out.ends_with(b" ") {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(name);
            out.push(b'=');
            write_value(name, value, out);
            n += 1;
        }
        n
    }
}

/// User variables (`@x`) a session set, each as the SQL literal that recreates its value and
/// type on another connection, sorted by name (lowercase, as the server keys them). A
/// variable set to NULL is kept as a NULL of its type: it is not the same as an unset one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserVars {
    vars: SortedPairs,
}

impl UserVars {
    pub fn is_empty(&self) -> bool {
        self.vars.pairs.is_empty()
    }

    pub fn signature(&self) -> u64 {
        self.vars.signature
    }

    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.vars.get(name)
    }

    /// Records `name`'s value as a literal (see [`user_variable_literal`]).
    pub fn set(&mut self, name: &[u8], literal: &[u8]) {
        self.vars.set(name, literal);
    }

    pub fn clear(&mut self) {
        self.vars.clear();
    }

    /// Appends `@name=literal` assignments that turn `current` into `self`, comma-separated,
    /// to a `SET` statement being built. Variables only `current` has are set to NULL: no
    /// statement unsets a user variable, so another session's variable reads as NULL (of
    /// the type it had, where an unset one is a binary string).
    /// Returns how many were appended.
    pub fn write_assignments(&self, current: &UserVars, out: &mut Vec<u8>) -> usize {
        let mut n = 0;
        let mut assign = |name: &[u8], literal: &[u8], out: &mut Vec<u8>| {
            if !out.ends_with(b" ") {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(b"@`");
            for &b in name {
                if b == b'`' {
                    out.push(b'`');
                }
                out.push(b);
            }
            out.extend_from_slice(b"`=");
            out.extend_from_slice(literal);
            n += 1;
        };
        for (name, literal) in &self.vars.pairs {
            if current.get(name) != Some(literal.as_slice()) {
                assign(name, literal, out);
            }
        }
        for (name, _) in &current.vars.pairs {
            if self.get(name).is_none() {
                assign(name, b"NULL", out);
            }
        }
        n
    }
}

/// A user variable's value as a SQL literal of the same type, from what `SELECT @x,
/// COLLATION(@x), HEX(@x)` answered: the column type and flags of `@x`, its text (`None`
/// for NULL), its collation and its bytes in hex.
pub fn user_variable_literal(
    column_type: u8,
    column_flags: u16,
    text: Option<&[u8]>,
    collation: Option<&[u8]>,
    hex: Option<&[u8]>,
) -> Vec<u8> {
    use manifold_mysql_proto::consts::column_type as ty;
    const UNSIGNED_FLAG: u16 = 0x20;
    let Some(text) = text else {
        return typed_null(column_type, column_flags & UNSIGNED_FLAG != 0, collation);
    };
    let mut out = Vec::with_capacity(text.len() + 16);
    match column_type {
        ty::LONGLONG | ty::LONG | ty::INT24 | ty::SHORT | ty::TINY => {
            if column_flags & UNSIGNED_FLAG != 0 {
                out.extend_from_slice(b"CAST(");
                out.extend_from_slice(text);
                out.extend_from_slice(b" AS UNSIGNED)");
            } else {
                out.extend_from_slice(text);
            }
        }
        ty::NEWDECIMAL | ty::DECIMAL => out.extend_from_slice(text),
        ty::DOUBLE | ty::FLOAT => {
            out.extend_from_slice(text);
            if !text.iter().any(|b| *b == b'e' || *b == b'E') {
                // A bare `1.5` would be a DECIMAL.
                out.extend_from_slice(b"e0");
            }
        }
        _ => {
            let hex = hex.unwrap_or_default();
            match collation {
                Some(c) if c != b"binary" => {
                    let charset = c.split(|b| *b == b'_').next().unwrap_or(c);
                    out.push(b'_');
                    out.extend_from_slice(charset);
                    out.extend_from_slice(b" X'");
                    out.extend_from_slice(hex);
                    out.extend_from_slice(b"' COLLATE ");
                    out.extend_from_slice(c);
                }
                _ => {
                    // `X''` is not a valid hex literal in every server.
                    if hex.is_empty() {
                        out.extend_from_slice(b"BINARY ''");
                    } else {
                        out.extend_from_slice(b"X'");
                        out.extend_from_slice(hex);
                        out.push(b'\'');
                    }
                }
            }
        }
    }
    out
}

/// NULL of a user variable's type: a variable set to NULL keeps the type it had.
fn typed_null(column_type: u8, unsigned: bool, collation: Option<&[u8]>) -> Vec<u8> {
    use manifold_mysql_proto::consts::column_type as ty;
    let cast: &[u8] = match column_type {
        ty::LONGLONG | ty::LONG | ty::INT24 | ty::SHORT | ty::TINY if unsigned => b"UNSIGNED",
        ty::LONGLONG | ty::LONG | ty::INT24 | ty::SHORT | ty::TINY => b"SIGNED",
        ty::NEWDECIMAL | ty::DECIMAL => b"DECIMAL",
        ty::DOUBLE | ty::FLOAT => b"DOUBLE",
        _ => match collation {
            Some(c) if c != b"binary" => {
                let charset = c.split(|b| *b == b'_').next().unwrap_or(c);
                let mut out = b"CAST(NULL AS CHAR CHARACTER SET ".to_vec();
                out.extend_from_slice(charset);
                out.extend_from_slice(b") COLLATE ");
                out.extend_from_slice(c);
                return out;
            }
            _ => return b"NULL".to_vec(),
        },
    };
    let mut out = b"CAST(NULL AS ".to_vec();
    out.extend_from_slice(cast);
    out.push(b')');
    out
}

/// One number for a session's or connection's whole movable state, so a pool finds a
/// connection already in a session's state with one comparison per candidate.
pub fn state_signature(vars: &SessionVars, user: &UserVars) -> u64 {
    vars.signature() ^ user.signature().rotate_left(1)
}

/// A tracked value as SQL: numbers bare, `NULL` for the one variable whose empty value means
/// NULL, everything else as a quoted string (enums, sets, booleans as `ON`/`OFF`, time zones).
fn write_value(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let numeric = !value.is_empty()
        && value
            .iter()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || (*b == b'-' && i == 0) || *b == b'.')
        && value.iter().any(u8::is_ascii_digit);
    if numeric {
        out.extend_from_slice(value);
    } else if value.is_empty() && name == b"character_set_results" {
        out.extend_from_slice(b"NULL");
    } else {
        out.push(b'\'');
        for &b in value {
            match b {
                b'\'' => out.extend_from_slice(b"''"),
                b'\\' => out.extend_from_slice(b"\\\\"),
                _ => out.push(b),
            }
        }
        out.push(b'\'');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_variables_restore_the_difference_and_unset_the_rest() {
        let mut want = UserVars::default();
        want.set(b"a", b"1");
        want.set(b"odd`name", b"X'00'");
        let mut have = UserVars::default();
        have.set(b"a", b"1");
        have.set(b"other", b"2");
        let mut sql = b"SET ".to_vec();
        assert_eq!(want.write_assignments(&have, &mut sql), 2);
        assert_eq!(
            String::from_utf8(sql).unwrap(),
            "SET @`odd``name`=X'00', @`other`=NULL"
        );
        assert_ne!(want.signature(), have.signature());
        have.clone_from(&want);
        assert_eq!(want.signature(), have.signature());
        have.clear();
        assert_eq!(have.signature(), 0);
    }

    #[test]
    fn user_variable_literals_keep_the_type() {
        use manifold_mysql_proto::consts::column_type as ty;
        let lit = |t, f, text: Option<&str>, coll: Option<&str>, hex: Option<&str>| {
            String::from_utf8(user_variable_literal(
                t,
                f,
                text.map(str::as_bytes),
                coll.map(str::as_bytes),
                hex.map(str::as_bytes),
            ))
            .unwrap()
        };
        assert_eq!(lit(ty::LONGLONG, 0, Some("-5"), None, None), "-5");
        assert_eq!(
            lit(ty::LONGLONG, 0x20, Some("5"), None, None),
            "CAST(5 AS UNSIGNED)"
        );
        assert_eq!(lit(ty::NEWDECIMAL, 0, Some("1.50"), None, None), "1.50");
        assert_eq!(lit(ty::DOUBLE, 0, Some("1.5"), None, None), "1.5e0");
        assert_eq!(lit(ty::DOUBLE, 0, Some("1e20"), None, None), "1e20");
        assert_eq!(
            lit(ty::VAR_STRING, 0, Some("é"), Some("latin1_bin"), Some("E9")),
            "_latin1 X'E9' COLLATE latin1_bin"
        );
        assert_eq!(
            lit(ty::BLOB, 0, Some("x"), Some("binary"), Some("78")),
            "X'78'"
        );
        assert_eq!(
            lit(ty::VAR_STRING, 0, Some(""), Some("binary"), Some("")),
            "BINARY ''"
        );
        assert_eq!(
            lit(ty::LONGLONG, 0x20, None, Some("binary"), None),
            "CAST(NULL AS UNSIGNED)"
        );
        assert_eq!(
            lit(ty::DOUBLE, 0, None, Some("binary"), None),
            "CAST(NULL AS DOUBLE)"
        );
        assert_eq!(
            lit(ty::VAR_STRING, 0, None, Some("latin1_bin"), None),
            "CAST(NULL AS CHAR CHARACTER SET latin1) COLLATE latin1_bin"
        );
        assert_eq!(lit(ty::LONG_BLOB, 0, None, Some("binary"), None), "NULL");
    }

    fn vars(pairs: &[(&str, &str)]) -> SessionVars {
        let mut v = SessionVars::default();
        for (n, x) in pairs {
            v.set(n.as_bytes(), x.as_bytes());
        }
        v
    }

    #[test]
    fn signature_follows_content_not_order() {
        let a = vars(&[("sql_mode", "ANSI"), ("time_zone", "+01:00")]);
        let b = vars(&[("time_zone", "+01:00"), ("sql_mode", "ANSI")]);
        assert_eq!(a, b);
        assert_eq!(a.signature(), b.signature());
        assert_ne!(a.signature(), vars(&[("sql_mode", "ANSI")]).signature());
        assert_eq!(SessionVars::default().signature(), 0);
    }

    #[test]
    fn assignments_cover_only_the_difference() {
        let want = vars(&[
            ("autocommit", "OFF"),
            ("sql_mode", "it's"),
            ("wait_timeout", "100"),
            ("character_set_results", ""),
        ]);
        let have = vars(&[("wait_timeout", "100")]);
        let mut sql = b"SET SESSION ".to_vec();
        assert_eq!(want.write_assignments(&have, &mut sql), 3);
        assert_eq!(
            String::from_utf8(sql).unwrap(),
            "SET SESSION autocommit='OFF', character_set_results=NULL, sql_mode='it''s'"
        );
        assert!(have.is_subset_of(&want));
        assert!(!want.is_subset_of(&have));
    }

    #[test]
    fn tracked_changes_decode() {
        // SESSION_TRACK_SYSTEM_VARIABLES autocommit=OFF, SESSION_TRACK_SCHEMA "db",
        // SESSION_TRACK_STATE_CHANGE "1".
        let data = [
            0, 15, 10, b'A', b'U', b'T', b'O', b'C', b'O', b'M', b'M', b'I', b'T', 3, b'O', b'F',
            b'F', 1, 3, 2, b'd', b'b', 2, 1, b'1',
        ];
        let t = TrackedChanges::decode(&data).unwrap();
        assert_eq!(t.vars, vec![(b"autocommit".to_vec(), b"OFF".to_vec())]);
        assert_eq!(t.schema.as_deref(), Some(&b"db"[..]));
        assert!(t.state_changed);
        assert!(TrackedChanges::decode(&[0, 5, 1]).is_none());
    }
}
