//! Rows of `redis_keys`: the lookups every command family starts with.
//!
//! Expiry is applied here, once for all: a read treats a key past its `expire_at` (by the
//! batch's clock) as absent; a locking read (a write's) deletes it, members included, and
//! then treats it as absent, so the write starts from nothing as in Redis.

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use sha2::{Digest, Sha256};

use super::{int, take_bytes, StoreError, Tx};

/// `redis_keys.type`.
pub mod kind {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const STREAM: u8 = 5;
}

/// What `TYPE` answers for a `redis_keys.type`.
pub fn type_name(t: u8) -> &'static str {
    match t {
        kind::STRING => "string",
        kind::LIST => "list",
        kind::SET => "set",
        kind::ZSET => "zset",
        kind::HASH => "hash",
        kind::STREAM => "stream",
        _ => "none",
    }
}

/// The table keeping a collection's members, `None` for a string.
pub fn members_table(t: u8) -> Option<&'static str> {
    match t {
        kind::LIST => Some("redis_list"),
        kind::SET => Some("redis_set"),
        kind::ZSET => Some("redis_zset"),
        kind::HASH => Some("redis_hash"),
        kind::STREAM => Some("redis_stream"),
        _ => None,
    }
}

/// A stream's rows beside its entries (`redis_stream`), deleted with them: its state, its
/// consumer groups, their consumers and pending entries.
pub const STREAM_STATE_DELETES: [&str; 4] = [
    "DELETE FROM {s}.redis_stream_pending WHERE kid = ?",
    "DELETE FROM {s}.redis_stream_consumer WHERE kid = ?",
    "DELETE FROM {s}.redis_stream_group WHERE kid = ?",
    "DELETE FROM {s}.redis_stream_meta WHERE kid = ?",
];

/// SHA-256 of a key, field or member: what the tables index (`UNHEX(SHA2(x, 256))` in SQL).
pub fn hash(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

/// A live key's row.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRow {
    pub kid: u64,
    pub kind: u8,
    /// A string's value (`None` for collections, or when not read).
    pub v: Option<Vec<u8>>,
    pub expire_at: Option<i64>,
    pub len: i64,
    pub lhead: i64,
    pub ltail: i64,
    pub version: u64,
    /// A collection type whose members under `kid` await deletion (a string was written
    /// over the collection).
    pub gc: Option<u8>,
}

/// The columns [`KeyRow::from_row`] reads, in its order.
pub const KEY_COLUMNS: &str = "kid, type, v, expire_at, len, lhead, ltail, version, gc";
/// [`KEY_COLUMNS`] without the value (`NULL` in its place).
pub const KEY_COLUMNS_NO_VALUE: &str = "kid, type, NULL, expire_at, len, lhead, ltail, version, gc";

impl KeyRow {
    /// A row of [`KEY_COLUMNS`].
    pub fn from_row(mut row: Vec<Value>) -> Option<KeyRow> {
        if row.len() < 9 {
            return None;
        }
        Some(KeyRow {
            kid: u64::try_from(int(&row[0])?).ok()?,
            kind: u8::try_from(int(&row[1])?).ok()?,
            v: take_bytes(&mut row[2]),
            expire_at: int(&row[3]),
            len: int(&row[4]).unwrap_or(0),
            lhead: int(&row[5]).unwrap_or(0),
            ltail: int(&row[6]).unwrap_or(0),
            version: int(&row[7]).map_or(0, |v| v as u64),
            gc: int(&row[8]).and_then(|t| u8::try_from(t).ok()),
        })
    }

    /// Past its expiry at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expire_at.is_some_and(|at| at <= now_ms)
    }
}

/// The key `k` is of another type than the command's: `WRONGTYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongType;

/// Locks the rows of `n` keys in key-hash order (`n` a power of two: few statement shapes).
fn lock_in(n: usize) -> String {
    format!(
        "SELECT kid FROM {{s}}.redis_keys WHERE db = ? AND kh IN ({}) ORDER BY kh FOR UPDATE",
        vec!["?"; n].join(", ")
    )
}

/// The hashes of `keys`, sorted, each once: the order [`Tx::lock_keys`] takes them in.
pub fn lock_order<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Vec<[u8; 32]> {
    let mut hashes: Vec<[u8; 32]> = keys.into_iter().map(hash).collect();
    hashes.sort_unstable();
    hashes.dedup();
    hashes
}

impl Tx<'_> {
    /// Locks the rows of the existing keys of `db` whose hashes are `sorted` ([`lock_order`])
    /// in that order, before a transaction's commands lock them in theirs: transactions that
    /// take their keys this way wait for each other instead of deadlocking (each holds only
    /// keys ordered before the one it waits for). A key that does not exist yet locks
    /// nothing (read committed: no gap lock). Returns how many of the keys exist; the
    /// transaction's clock starts again once they are held.
    pub async fn lock_keys(&mut self, db: u8, sorted: &[[u8; 32]]) -> Result<usize, StoreError> {
        let mut found = 0;
        for chunk in sorted.chunks(crate::store::context::RUN_MAX) {
            // Padded by repeating the last hash.
            let n = chunk.len().next_power_of_two();
            let mut params = vec![Param::UInt(u64::from(db))];
            params.extend((0..n).map(|i| Param::Bytes(&chunk[i.min(chunk.len() - 1)])));
            found += self.rows(&lock_in(n), &params).await?.len();
        }
        // The batch happens once it holds its keys: its clock is read again, so that a key
        // the sweeper deleted while the batch waited for another is past its expiry at the
        // batch's time too, not alive on a clock read before the wait.
        self.now_ms = super::now_ms();
        Ok(found)
    }

    /// The live key `k` of `db`, value included, or `None` (absent or expired). With `lock`
    /// (a write's read: `FOR UPDATE`) an expired key is deleted, members included.
    pub async fn key(
        &mut self,
        db: u8,
        k: &[u8],
        lock: bool,
    ) -> Result<Option<KeyRow>, StoreError> {
        self.key_with(db, k, lock, true).await
    }

    /// [`Tx::key`] without reading a string's value.
    pub async fn key_meta(
        &mut self,
        db: u8,
        k: &[u8],
        lock: bool,
    ) -> Result<Option<KeyRow>, StoreError> {
        self.key_with(db, k, lock, false).await
    }

    async fn key_with(
        &mut self,
        db: u8,
        k: &[u8],
        lock: bool,
        value: bool,
    ) -> Result<Option<KeyRow>, StoreError> {
        let kh = hash(k);
        let sql = match (lock, value) {
            (false, true) => "SELECT kid, type, v, expire_at, len, lhead, ltail, version, gc FROM {s}.redis_keys WHERE db = ? AND kh = ?",
            (false, false) => "SELECT kid, type, NULL, expire_at, len, lhead, ltail, version, gc FROM {s}.redis_keys WHERE db = ? AND kh = ?",
            (true, true) => "SELECT kid, type, v, expire_at, len, lhead, ltail, version, gc FROM {s}.redis_keys WHERE db = ? AND kh = ? FOR UPDATE",
            (true, false) => "SELECT kid, type, NULL, expire_at, len, lhead, ltail, version, gc FROM {s}.redis_keys WHERE db = ? AND kh = ? FOR UPDATE",
        };
        let rows = self
            .rows(sql, &[Param::UInt(u64::from(db)), Param::Bytes(&kh)])
            .await?;
        let Some(row) = rows.into_iter().next().and_then(KeyRow::from_row) else {
            return Ok(None);
        };
        if row.expired(self.now_ms) {
            if lock {
                // Not the command's write: it wrote only if it changes more.
                let changed = self.changed;
                self.delete_key_quietly(db, k, &row).await?;
                self.changed = changed;
                self.notify(super::events::class::EXPIRED, "expired", db, k);
            }
            return Ok(None);
        }
        Ok(Some(row))
    }

    /// Deletes the key `k` (whose row is `row`) and its members: a `del` event (`DEL`, a
    /// collection left empty, an expiry set in the past), after the command's own.
    pub async fn delete_key(&mut self, db: u8, k: &[u8], row: &KeyRow) -> Result<(), StoreError> {
        self.delete_key_quietly(db, k, row).await?;
        self.notify_after(super::events::class::GENERIC, "del", db, k);
        Ok(())
    }

    /// [`Tx::delete_key`] without an event: a key written over (`RENAME`'s destination)
    /// or found expired.
    pub async fn delete_key_quietly(
        &mut self,
        db: u8,
        k: &[u8],
        row: &KeyRow,
    ) -> Result<(), StoreError> {
        let kh = hash(k);
        self.exec(
            "DELETE FROM {s}.redis_keys WHERE db = ? AND kh = ?",
            &[Param::UInt(u64::from(db)), Param::Bytes(&kh)],
        )
        .await?;
        self.delete_members(row).await
    }

    /// Deletes a collection's members (nothing for a string), and those of a collection a
    /// string was written over.
    pub async fn delete_members(&mut self, row: &KeyRow) -> Result<(), StoreError> {
        if let Some(old) = row.gc {
            self.delete_members_of(old, row.kid).await?;
        }
        self.delete_members_of(row.kind, row.kid).await
    }

    async fn delete_members_of(&mut self, t: u8, kid: u64) -> Result<(), StoreError> {
        let sql = match t {
            kind::LIST => "DELETE FROM {s}.redis_list WHERE kid = ?",
            kind::SET => "DELETE FROM {s}.redis_set WHERE kid = ?",
            kind::ZSET => "DELETE FROM {s}.redis_zset WHERE kid = ?",
            kind::HASH => "DELETE FROM {s}.redis_hash WHERE kid = ?",
            kind::STREAM => {
                // The stream's state and groups first, then its entries.
                for sql in STREAM_STATE_DELETES {
                    self.exec(sql, &[Param::UInt(kid)]).await?;
                }
                "DELETE FROM {s}.redis_stream WHERE kid = ?"
            }
            _ => return Ok(()),
        };
        self.exec(sql, &[Param::UInt(kid)]).await?;
        Ok(())
    }

    /// Creates the absent key `k` as an empty collection of type `t` (no expiry).
    pub async fn create_key(&mut self, db: u8, k: &[u8], t: u8) -> Result<KeyRow, StoreError> {
        let kh = hash(k);
        let done = self
            .exec(
                "INSERT INTO {s}.redis_keys (db, kh, k, type) VALUES (?, ?, ?, ?)",
                &[
                    Param::UInt(u64::from(db)),
                    Param::Bytes(&kh),
                    Param::Bytes(k),
                    Param::UInt(u64::from(t)),
                ],
            )
            .await?;
        if t == kind::ZSET {
            // Clients blocked in `BZPOPMIN`... on `k` are woken once this commits.
            self.note_ready(db, k, t);
        }
        Ok(KeyRow {
            kid: done.last_insert_id,
            kind: t,
            v: None,
            expire_at: None,
            len: 0,
            lhead: 0,
            ltail: 0,
            version: 0,
            gc: None,
        })
    }

    /// The live collection `k` of type `t`, locked for this write; created empty when absent
    /// and `create`; `WrongType` when it holds another type.
    pub async fn collection(
        &mut self,
        db: u8,
        k: &[u8],
        t: u8,
        create: bool,
    ) -> Result<Result<Option<KeyRow>, WrongType>, StoreError> {
        match self.typed_key(db, k, t, true).await? {
            Ok(None) if create => Ok(Ok(Some(self.create_key(db, k, t).await?))),
            found => Ok(found),
        }
    }

    /// The live key `k` (without a string's value) if it holds type `t`: `None` when absent
    /// or expired, `WrongType` when it holds another type. With `lock`, as [`Tx::key`].
    pub async fn typed_key(
        &mut self,
        db: u8,
        k: &[u8],
        t: u8,
        lock: bool,
    ) -> Result<Result<Option<KeyRow>, WrongType>, StoreError> {
        Ok(match self.key_meta(db, k, lock).await? {
            Some(row) if row.kind != t => Err(WrongType),
            found => Ok(found),
        })
    }

    /// Records a write to a collection: its length changes by `delta` and its version
    /// grows; a collection left empty is deleted, as Redis deletes empty collections.
    /// Returns whether the key still exists.
    pub async fn collection_written(
        &mut self,
        db: u8,
        k: &[u8],
        row: &KeyRow,
        delta: i64,
    ) -> Result<bool, StoreError> {
        if row.len + delta <= 0 {
            self.delete_key(db, k, row).await?;
            return Ok(false);
        }
        self.exec(
            "UPDATE {s}.redis_keys SET len = len + ?, version = version + 1 WHERE kid = ?",
            &[Param::Int(delta), Param::UInt(row.kid)],
        )
        .await?;
        Ok(true)
    }
}
