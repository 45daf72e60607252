//! The door's tables (`docs/REDIS.md` describes them for SQL users), created on first use
//! and migrated by version.
//!
//! Every key is one row of `redis_keys`, found by the SHA-256 of its bytes (`kh`, so keys of
//! any length fit the index; the full key is kept in `k`). A string's value is in that row.
//! A collection's members are rows of its type's table under the key's `kid`, which is new
//! each time the key is created, so members of a deleted key can never show through a new
//! one. A string written over a collection keeps the row (and its `kid`): the row's `gc`
//! then names the collection type whose members the sweeper deletes.

use manifold_backend::BackendConn;

use super::{StoreError, StoreShared};

/// The version these tables are at; `redis_meta` records the version a schema is at.
pub const VERSION: i64 = 1;

/// The tables of version 1, `{s}` standing for the schema.
const TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS {s}.redis_meta (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  value BIGINT NOT NULL
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_keys (
  db TINYINT UNSIGNED NOT NULL COMMENT 'SELECT index, 0..15',
  kh BINARY(32) NOT NULL COMMENT 'UNHEX(SHA2(k, 256))',
  k LONGBLOB NOT NULL COMMENT 'the key',
  kid BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'names the members of a collection; new at each creation',
  type TINYINT UNSIGNED NOT NULL COMMENT '0 string, 1 list, 2 set, 3 zset, 4 hash, 5 stream',
  v LONGBLOB NULL COMMENT 'a string''s value',
  expire_at BIGINT NULL COMMENT 'Unix time in ms; NULL: no expiry',
  len BIGINT NOT NULL DEFAULT 0 COMMENT 'members of a collection',
  lhead BIGINT NOT NULL DEFAULT 0 COMMENT 'a list''s first index',
  ltail BIGINT NOT NULL DEFAULT 0 COMMENT 'a list''s last index + 1',
  version BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'counts writes (WATCH)',
  gc TINYINT UNSIGNED NULL COMMENT 'a collection type whose members under kid await deletion',
  PRIMARY KEY (db, kh),
  UNIQUE KEY kid (kid),
  KEY expire_at (expire_at),
  KEY gc (gc)
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_hash (
  kid BIGINT UNSIGNED NOT NULL,
  fh BINARY(32) NOT NULL COMMENT 'UNHEX(SHA2(field, 256))',
  field LONGBLOB NOT NULL,
  v LONGBLOB NOT NULL,
  PRIMARY KEY (kid, fh)
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_set (
  kid BIGINT UNSIGNED NOT NULL,
  mh BINARY(32) NOT NULL COMMENT 'UNHEX(SHA2(member, 256))',
  member LONGBLOB NOT NULL,
  PRIMARY KEY (kid, mh)
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_zset (
  kid BIGINT UNSIGNED NOT NULL,
  mh BINARY(32) NOT NULL COMMENT 'UNHEX(SHA2(member, 256))',
  member LONGBLOB NOT NULL,
  score DOUBLE NULL COMMENT 'the score; NULL for +inf and -inf (the sign of sk tells which)',
  sk BIGINT NOT NULL COMMENT 'order key: the IEEE bits of the score, the 63 low bits flipped when negative (-0 as 0)',
  PRIMARY KEY (kid, mh),
  KEY by_score (kid, sk, member(255)) COMMENT 'Redis order: score, then member bytes'
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_gc (
  kid BIGINT UNSIGNED NOT NULL COMMENT 'a deleted key''s kid',
  type TINYINT UNSIGNED NOT NULL COMMENT 'the table of its members still to delete',
  PRIMARY KEY (kid, type)
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_list (
  kid BIGINT UNSIGNED NOT NULL,
  idx BIGINT NOT NULL COMMENT 'position; the key row''s lhead..ltail',
  v LONGBLOB NOT NULL,
  PRIMARY KEY (kid, idx)
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_stream (
  kid BIGINT UNSIGNED NOT NULL,
  ms BIGINT UNSIGNED NOT NULL COMMENT 'the entry ID''s milliseconds',
  seq BIGINT UNSIGNED NOT NULL COMMENT 'the entry ID''s sequence number',
  fields LONGBLOB NOT NULL COMMENT 'field, value, ... as netstrings: <length>:<bytes>, each',
  PRIMARY KEY (kid, ms, seq)
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_stream_meta (
  kid BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  last_ms BIGINT UNSIGNED NOT NULL COMMENT 'the last ID given (XADD, XSETID)',
  last_seq BIGINT UNSIGNED NOT NULL,
  max_deleted_ms BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the largest ID XDEL removed',
  max_deleted_seq BIGINT UNSIGNED NOT NULL DEFAULT 0,
  entries_added BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'entries ever added'
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_stream_group (
  kid BIGINT UNSIGNED NOT NULL,
  gh BINARY(32) NOT NULL COMMENT 'UNHEX(SHA2(name, 256))',
  name LONGBLOB NOT NULL COMMENT 'the consumer group',
  last_ms BIGINT UNSIGNED NOT NULL COMMENT 'the last ID delivered to the group',
  last_seq BIGINT UNSIGNED NOT NULL,
  entries_read BIGINT NULL COMMENT 'entries the group read; NULL: unknown',
  PRIMARY KEY (kid, gh)
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_stream_consumer (
  kid BIGINT UNSIGNED NOT NULL,
  gh BINARY(32) NOT NULL COMMENT 'the group',
  ch BINARY(32) NOT NULL COMMENT 'UNHEX(SHA2(name, 256))',
  name LONGBLOB NOT NULL COMMENT 'the consumer',
  seen_ms BIGINT NOT NULL COMMENT 'Unix ms of its last read',
  PRIMARY KEY (kid, gh, ch)
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_stream_pending (
  kid BIGINT UNSIGNED NOT NULL,
  gh BINARY(32) NOT NULL COMMENT 'the group',
  ms BIGINT UNSIGNED NOT NULL COMMENT 'the entry ID',
  seq BIGINT UNSIGNED NOT NULL,
  ch BINARY(32) NOT NULL COMMENT 'the consumer it was delivered to',
  consumer LONGBLOB NOT NULL COMMENT 'that consumer''s name',
  delivered_ms BIGINT NOT NULL COMMENT 'Unix ms of its last delivery',
  deliveries BIGINT UNSIGNED NOT NULL COMMENT 'times delivered',
  PRIMARY KEY (kid, gh, ms, seq),
  KEY by_consumer (kid, gh, ch, ms, seq)
) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS {s}.redis_function (
  name VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY COMMENT 'a library (FUNCTION LOAD)',
  code LONGBLOB NOT NULL COMMENT 'its code, as loaded',
  code_sha CHAR(40) CHARACTER SET ascii NOT NULL COMMENT 'SHA1 of code, hex',
  functions TEXT NOT NULL COMMENT 'its functions, one per line: the name, then '' no-writes'' when so flagged'
) ENGINE=InnoDB",
];

/// Creates the schema and its tables if they are missing, and checks their version.
pub async fn ensure(conn: &mut BackendConn, shared: &StoreShared) -> Result<(), StoreError> {
    let run = async |conn: &mut BackendConn, sql: &str| -> Result<(), StoreError> {
        match conn.run_ok(shared.expand(sql).as_bytes()).await? {
            Ok(_) => Ok(()),
            Err(e) => Err(StoreError::refused(e)),
        }
    };
    run(conn, "CREATE DATABASE IF NOT EXISTS {s}").await?;
    for t in TABLES {
        run(conn, t).await?;
    }
    run(
        conn,
        &format!("INSERT IGNORE INTO {{s}}.redis_meta (name, value) VALUES ('schema_version', {VERSION})"),
    )
    .await?;
    let rows = match conn
        .query_rows(
            shared
                .expand("SELECT value FROM {s}.redis_meta WHERE name = 'schema_version'")
                .as_bytes(),
        )
        .await?
    {
        Ok(r) => r,
        Err(e) => return Err(StoreError::refused(e)),
    };
    let found: i64 = rows
        .rows
        .first()
        .and_then(|r| r.first()?.as_deref())
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
        .unwrap_or(0);
    if found > VERSION {
        return Err(StoreError::from(manifold_backend::BackendError::new(
            manifold_backend::ErrorKind::Protocol,
            format!(
                "the Redis tables are at version {found}, newer than this manifold's {VERSION}"
            ),
        )));
    }
    Ok(())
}
