//! Session state that can move between backend connections: the system variables a session
//! changed, as the server reported them through session tracking.
//!
//! A fresh connection and a fresh client session of the same [`crate::ConnKey`] start from the
//! same server defaults, so both sides record only what changed since. A connection can serve
//! a session when its changes equal the session's; it can be brought there with one `SET` when
//! its changed variables are a subset of the session's, and otherwise with a reset first.

use manifold_mysql_proto::packets::{decode_session_state, SessionTrack};

/// Variables changed from the server's defaults, sorted by name. Names are stored lowercase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionVars {
    vars: Vec<(Vec<u8>, Vec<u8>)>,
    /// Hash of `vars`, so pools compare states in one comparison.
    signature: u64,
}

/// What one OK packet's session-state data said.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TrackedChanges {
    pub vars: Vec<(Vec<u8>, Vec<u8>)>,
    pub schema: Option<Vec<u8>>,
    /// The server flagged a state change (`session_track_state_change`).
    pub state_changed: bool,
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
    ];
    !is_tracking_variable(name) && !NOT_CARRIED.contains(&name)
}

impl SessionVars {
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    pub fn signature(&self) -> u64 {
        self.signature
    }

    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.vars
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()
            .map(|i| self.vars[i].1.as_slice())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.vars.iter().map(|(n, v)| (n.as_slice(), v.as_slice()))
    }

    /// Records a variable's new value. `name` must be lowercase.
    pub fn set(&mut self, name: &[u8], value: &[u8]) {
        match self.vars.binary_search_by(|(n, _)| n.as_slice().cmp(name)) {
            Ok(i) => {
                if self.vars[i].1 == value {
                    return;
                }
                self.vars[i].1 = value.to_vec();
            }
            Err(i) => self.vars.insert(i, (name.to_vec(), value.to_vec())),
        }
        self.signature = self.hash();
    }

    pub fn clear(&mut self) {
        self.vars.clear();
        self.signature = 0;
    }

    /// Every variable this connection changed is also changed by `want` (maybe to another
    /// value), so `SET`ting `want`'s values is enough to match it.
    pub fn is_subset_of(&self, want: &SessionVars) -> bool {
        self.vars.iter().all(|(n, _)| want.get(n).is_some())
    }

    fn hash(&self) -> u64 {
        // FNV-1a: stable, no allocation, and states are few.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (n, v) in &self.vars {
            for b in n.iter().chain([&0u8]).chain(v.iter()).chain([&0u8]) {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h | 1 // 0 is the empty state
    }

    /// Appends `name=value` assignments for the variables of `self` that `current` lacks or
    /// holds with another value, comma-separated, to a `SET SESSION` statement being built.
    /// Returns how many were appended.
    pub fn write_assignments(&self, current: &SessionVars, out: &mut Vec<u8>) -> usize {
        let mut n = 0;
        for (name, value) in &self.vars {
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
