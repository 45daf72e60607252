//! Prepared statements, virtualised.
//!
//! A client's prepared statement is not a backend statement: the session knows it by an id
//! manifold gave it, pointing at a worker-wide [`StatementMeta`] (the SQL text and the schema
//! it was prepared in, under a worker-wide id). Whichever backend connection a session
//! borrows prepares the statement the first time it runs there, and keeps it for every
//! session of the worker that prepares the same text: sixty-four sessions preparing the same
//! query on eight connections cost eight prepares, not sixty-four times eight.
//!
//! What cannot move between connections pins the session (see [`crate::pins`]): an open
//! cursor, and parameter data sent with `COM_STMT_SEND_LONG_DATA` before the execute.

use std::collections::HashMap;
use std::rc::{Rc, Weak};

use manifold_sql_lex::Scan;

/// The statement id MariaDB clients use for "the statement prepared last" (execute-direct
/// sends the prepare and the execute without waiting for the id).
pub(crate) const LAST_PREPARED: u32 = u32::MAX;

/// A statement as the worker knows it, shared by the sessions that prepared the same text.
#[derive(Debug)]
pub(crate) struct StatementMeta {
    /// The key of this statement in every backend connection's [`PreparedOnConn`].
    ///
    /// [`PreparedOnConn`]: manifold_backend::stmts::PreparedOnConn
    pub global_id: u64,
    pub sql: Box<[u8]>,
    /// The schema current when the client prepared it: names in the text resolve there.
    pub schema: Option<Box<[u8]>>,
    pub params: u16,
    pub columns: u16,
    /// What the lexer sees in the text: what executing it does to the session.
    pub scan: Scan,
    /// The text's digest and its hash, for routing rules and digest statistics (computed
    /// in the same pass as `scan`, once per worker and text).
    pub digest: Box<[u8]>,
    pub digest_hash: u64,
}

type Key = (Option<Box<[u8]>>, Box<[u8]>);

/// The worker's statements by text, held weakly: a statement no session has open is gone.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    by_text: HashMap<Key, Weak<StatementMeta>>,
    next_id: u64,
    prune_at: usize,
}

impl Registry {
    /// The worker's statement for `sql` prepared in `schema`, made anew when none is open or
    /// the open one no longer has this shape (the table changed since).
    pub fn register(
        &mut self,
        schema: Option<&[u8]>,
        sql: &[u8],
        params: u16,
        columns: u16,
    ) -> Rc<StatementMeta> {
        let key: Key = (schema.map(Box::from), Box::from(sql));
        if let Some(meta) = self.by_text.get(&key).and_then(Weak::upgrade) {
            if meta.params == params && meta.columns == columns {
                return meta;
            }
        }
        self.next_id += 1;
        let mut digest = Vec::new();
        let (scan, digest_hash) = manifold_sql_lex::scan_with_digest(sql, &mut digest);
        let meta = Rc::new(StatementMeta {
            global_id: self.next_id,
            scan,
            digest: digest.into_boxed_slice(),
            digest_hash,
            sql: key.1.clone(),
            schema: key.0.clone(),
            params,
            columns,
        });
        self.by_text.insert(key, Rc::downgrade(&meta));
        if self.by_text.len() > self.prune_at {
            self.by_text.retain(|_, m| m.strong_count() > 0);
            self.prune_at = (self.by_text.len() * 2).max(64);
        }
        meta
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_text.len()
    }
}

/// One of the session's prepared statements.
#[derive(Debug)]
pub(crate) struct SessionStatement {
    pub meta: Rc<StatementMeta>,
    /// The parameter types the client last sent (two bytes each): a client sends them only
    /// when they change, and a backend connection that never saw them needs them.
    pub types: Vec<u8>,
    /// A cursor is open on the backend connection the session is pinned to.
    pub cursor: bool,
    /// Parameter data sent ahead of the execute sits on the backend connection.
    pub long_data: bool,
}

/// The session's prepared statements by the ids manifold gave the client.
#[derive(Debug, Default)]
pub(crate) struct SessionStatements {
    by_id: HashMap<u32, SessionStatement>,
    next_id: u32,
    last_prepared: Option<u32>,
}

impl SessionStatements {
    pub fn add(&mut self, meta: Rc<StatementMeta>) -> u32 {
        loop {
            self.next_id = self.next_id.wrapping_add(1);
            let id = self.next_id;
            if id != 0 && id != LAST_PREPARED && !self.by_id.contains_key(&id) {
                self.by_id.insert(
                    id,
                    SessionStatement {
                        meta,
                        types: Vec::new(),
                        cursor: false,
                        long_data: false,
                    },
                );
                self.last_prepared = Some(id);
                return id;
            }
        }
    }

    /// A failed prepare leaves no statement for [`LAST_PREPARED`] to name.
    pub fn prepare_failed(&mut self) {
        self.last_prepared = None;
    }

    /// The client's id, with [`LAST_PREPARED`] resolved.
    pub fn resolve(&self, id: u32) -> u32 {
        if id == LAST_PREPARED {
            self.last_prepared.unwrap_or(0)
        } else {
            id
        }
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut SessionStatement> {
        self.by_id.get_mut(&id)
    }

    pub fn remove(&mut self, id: u32) -> Option<SessionStatement> {
        if self.last_prepared == Some(id) {
            self.last_prepared = None;
        }
        self.by_id.remove(&id)
    }

    pub fn clear(&mut self) {
        *self = SessionStatements::default();
    }

    pub fn any_cursor(&self) -> bool {
        self.by_id.values().any(|s| s.cursor)
    }

    pub fn any_long_data(&self) -> bool {
        self.by_id.values().any(|s| s.long_data)
    }
}

/// Where the parts of a `COM_STMT_EXECUTE` payload are, for a statement with `params`
/// parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExecuteLayout {
    /// Cursor type requested (`flags` & 0x07).
    pub cursor: bool,
    /// Offset of the new-params-bound flag; `None` for a statement without parameters.
    pub bound_flag_at: Option<usize>,
    /// The client sent parameter types (2 × `params` bytes after the flag).
    pub has_types: bool,
}

impl ExecuteLayout {
    /// Reads the layout of `payload` (starting with the command byte); `None` when it is too
    /// short for `params` parameters.
    pub fn parse(payload: &[u8], params: u16) -> Option<ExecuteLayout> {
        // command, statement id (4), flags, iteration count (4)
        let flags = *payload.get(5)?;
        if payload.len() < 10 {
            return None;
        }
        let cursor = flags & 0x07 != 0;
        if params == 0 {
            return Some(ExecuteLayout {
                cursor,
                bound_flag_at: None,
                has_types: false,
            });
        }
        let at = 10 + usize::from(params).div_ceil(8);
        let has_types = *payload.get(at)? == 1;
        if has_types && payload.len() < at + 1 + 2 * usize::from(params) {
            return None;
        }
        Some(ExecuteLayout {
            cursor,
            bound_flag_at: Some(at),
            has_types,
        })
    }

    /// The parameter types in `payload`, when the client sent them.
    pub fn types<'a>(&self, payload: &'a [u8], params: u16) -> Option<&'a [u8]> {
        let at = self.bound_flag_at? + 1;
        self.has_types
            .then(|| &payload[at..at + 2 * usize::from(params)])
    }

    /// Appends to `out` the payload with `types` sent as bound (the flag set, the types
    /// inserted after it).
    pub fn with_types(&self, payload: &[u8], types: &[u8], out: &mut Vec<u8>) {
        let at = self.bound_flag_at.expect("a statement with parameters");
        out.extend_from_slice(&payload[..at]);
        out.push(1);
        out.extend_from_slice(types);
        out.extend_from_slice(&payload[at + 1..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execute(params: u16, types: Option<&[u8]>, values: &[u8]) -> Vec<u8> {
        let mut p = vec![0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0];
        if params > 0 {
            p.extend(std::iter::repeat_n(0, usize::from(params).div_ceil(8)));
            match types {
                Some(t) => {
                    p.push(1);
                    p.extend_from_slice(t);
                }
                None => p.push(0),
            }
            p.extend_from_slice(values);
        }
        p
    }

    #[test]
    fn types_are_found_and_inserted() {
        let with = execute(2, Some(&[8, 0, 253, 0]), b"\x01\0\0\0\0\0\0\0\x01x");
        let l = ExecuteLayout::parse(&with, 2).unwrap();
        assert!(l.has_types);
        assert_eq!(l.types(&with, 2), Some(&[8, 0, 253, 0][..]));
        let without = execute(2, None, b"\x01\0\0\0\0\0\0\0\x01x");
        let l = ExecuteLayout::parse(&without, 2).unwrap();
        assert!(!l.has_types);
        assert_eq!(l.types(&without, 2), None);
        let mut rebuilt = Vec::new();
        l.with_types(&without, &[8, 0, 253, 0], &mut rebuilt);
        assert_eq!(rebuilt, with);
    }

    #[test]
    fn short_payloads_are_refused() {
        assert_eq!(ExecuteLayout::parse(&[0x17, 1, 0, 0, 0], 0), None);
        assert_eq!(ExecuteLayout::parse(&execute(0, None, b"")[..9], 0), None);
        let with = execute(3, Some(&[8, 0, 8, 0, 8, 0]), b"");
        assert_eq!(ExecuteLayout::parse(&with[..with.len() - 1], 3), None);
        // The flag byte itself missing.
        assert_eq!(ExecuteLayout::parse(&execute(0, None, b""), 3), None);
        let l = ExecuteLayout::parse(&execute(0, None, b""), 0).unwrap();
        assert_eq!(l.bound_flag_at, None);
    }

    #[test]
    fn cursor_flag_is_read() {
        let mut p = execute(0, None, b"");
        p[5] = 1;
        assert!(ExecuteLayout::parse(&p, 0).unwrap().cursor);
    }

    #[test]
    fn the_same_text_in_the_same_schema_is_one_statement() {
        let mut r = Registry::default();
        let a = r.register(Some(b"db"), b"SELECT ?", 1, 1);
        let b = r.register(Some(b"db"), b"SELECT ?", 1, 1);
        assert_eq!(a.global_id, b.global_id);
        let other_schema = r.register(Some(b"db2"), b"SELECT ?", 1, 1);
        assert_ne!(a.global_id, other_schema.global_id);
        let reshaped = r.register(Some(b"db"), b"SELECT ?", 1, 2);
        assert_ne!(a.global_id, reshaped.global_id);
        drop((a, b, other_schema, reshaped));
        for i in 0..200 {
            r.register(None, format!("SELECT {i}").as_bytes(), 0, 1);
        }
        assert!(r.len() <= 128, "statements no session holds are pruned");
    }

    #[test]
    fn session_ids_resolve_the_last_prepared() {
        let mut r = Registry::default();
        let mut s = SessionStatements::default();
        let id = s.add(r.register(None, b"SELECT 1", 0, 1));
        assert_eq!(s.resolve(LAST_PREPARED), id);
        s.prepare_failed();
        assert_eq!(s.resolve(LAST_PREPARED), 0);
        assert!(s.get_mut(id).is_some());
        assert!(s.remove(id).is_some());
        assert!(s.get_mut(id).is_none());
    }
}
