//! `OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ|HELP` and `MEMORY USAGE|HELP`: what Redis 7.0.15
//! says of a key's value, told from its rows.
//!
//! - `OBJECT ENCODING` names the encoding redis-server 7.0 would give the value as it is
//!   now, by its default limits: a string `int` (an integer of at most 20 characters),
//!   `embstr` (at most 44 bytes) or `raw`; a list `quicklist`; a set `intset` (at most 512
//!   integers) or `hashtable`; a sorted set `listpack` (at most 128 members of at most 64
//!   bytes) or `skiplist`; a hash `listpack` (at most 128 fields, fields and values of at
//!   most 64 bytes) or `hashtable`; a stream `stream`. Redis never converts back (a hash
//!   that grew past the limits stays `hashtable`), and writes `raw` for strings `APPEND` or
//!   `SETRANGE` made: those can differ.
//! - `OBJECT REFCOUNT` is Redis's: 2147483647 for an integer string of 0..9999 (a shared
//!   object), else 1.
//! - `OBJECT IDLETIME` is 0: reads are not recorded in the tables (a write per read would
//!   cost more than the read); `OBJECT FREQ` gives Redis's error without an LFU policy,
//!   the door having none.
//! - `MEMORY USAGE` estimates the bytes the key and its value take in Redis's layout (its
//!   per-entry overhead for the encoding `OBJECT ENCODING` names), from the key's row and,
//!   for a collection, the average size of `SAMPLES` members (5; 0: all) times its length,
//!   as Redis samples. It is not what the rows take in InnoDB.
//!
//! Costs: a key row read; `ENCODING` of a set, sorted set or hash within the small limits
//! reads the lengths of at most 512 members; `USAGE` reads `SAMPLES` lengths (every
//! member's with `SAMPLES 0`, as Redis walks them all).

use manifold_backend::Param;

use crate::cmd::checks;
use crate::cmd::data::{Family, Spec};
use crate::cmd::typed::{integer, DataCommand, ParseError, SYNTAX};
use crate::cmd::{parse_i64, Args};
use crate::store::context::Cx;
use crate::store::keys::{kind, KeyRow};
use crate::store::{int, take_bytes, StoreError};

const fn spec(name: &'static str, parse: crate::cmd::typed::Parse) -> Spec {
    Spec {
        name,
        arity: -2,
        write: false,
        family: Family::Keys,
        parse,
    }
}

pub static COMMANDS: [Spec; 2] = [spec("object", parse_object), spec("memory", parse_memory)];

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

/// Redis's text for `OBJECT FREQ` without an LFU `maxmemory-policy`.
const NO_LFU: &[u8] = b"An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// Redis's `OBJ_SHARED_REFCOUNT`: the count of its shared integers 0..9999.
const SHARED_REFCOUNT: i64 = 2_147_483_647;

/// `OBJECT ...` or `MEMORY ...`, parsed.
#[derive(Debug, PartialEq)]
pub enum ObjectCommand<'a> {
    Encoding(&'a [u8]),
    RefCount(&'a [u8]),
    IdleTime(&'a [u8]),
    Freq(&'a [u8]),
    Help(&'static [&'static str]),
    /// `MEMORY USAGE key [SAMPLES n]` (`samples`: `u64::MAX` for all).
    Usage {
        key: &'a [u8],
        samples: u64,
    },
}

impl<'a> From<ObjectCommand<'a>> for DataCommand<'a> {
    fn from(c: ObjectCommand<'a>) -> Self {
        DataCommand::Object(c)
    }
}

fn parse_object(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let name = checks::subcommand(
        &args,
        "OBJECT",
        &[
            ("encoding", "object|encoding", 3),
            ("refcount", "object|refcount", 3),
            ("idletime", "object|idletime", 3),
            ("freq", "object|freq", 3),
            ("help", "object|help", 2),
        ],
    )?;
    let key = args.get(2);
    Ok(match name {
        "object|encoding" => ObjectCommand::Encoding(key),
        "object|refcount" => ObjectCommand::RefCount(key),
        "object|idletime" => ObjectCommand::IdleTime(key),
        "object|freq" => ObjectCommand::Freq(key),
        _ => ObjectCommand::Help(OBJECT_HELP),
    }
    .into())
}

/// `MEMORY USAGE|HELP` (the other subcommands are not served: unknown here).
fn parse_memory(args: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let name = checks::subcommand(
        &args,
        "MEMORY",
        &[("usage", "memory|usage", -3), ("help", "memory|help", 2)],
    )?;
    if name == "memory|help" {
        return Ok(ObjectCommand::Help(MEMORY_HELP).into());
    }
    let mut samples = 5;
    let mut i = 3;
    while i < args.len() {
        if !args.get(i).eq_ignore_ascii_case(b"samples") || i + 1 >= args.len() {
            return Err(SYNTAX);
        }
        samples = match integer(args.get(i + 1))? {
            n if n < 0 => return Err(SYNTAX),
            0 => u64::MAX,
            n => n.unsigned_abs(),
        };
        i += 2;
    }
    Ok(ObjectCommand::Usage {
        key: args.get(2),
        samples,
    }
    .into())
}

impl ObjectCommand<'_> {
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        let key = match self {
            ObjectCommand::Help(lines) => {
                let mut r = cx.reply();
                r.array_len(lines.len());
                for line in lines {
                    r.simple(line.as_bytes());
                }
                return Ok(());
            }
            ObjectCommand::Encoding(k)
            | ObjectCommand::RefCount(k)
            | ObjectCommand::IdleTime(k)
            | ObjectCommand::Freq(k)
            | ObjectCommand::Usage { key: k, .. } => k,
        };
        let Some(row) = cx.tx.key_meta(cx.db, key, false).await? else {
            cx.reply().null();
            return Ok(());
        };
        match self {
            ObjectCommand::Encoding(_) => {
                let encoding = encoding(cx, &row).await?;
                cx.reply().bulk(encoding.as_bytes());
            }
            ObjectCommand::RefCount(_) => {
                let shared = row.kind == kind::STRING
                    && matches!(string_head(cx, &row).await?, (_, Some(n)) if (0..10_000).contains(&n));
                cx.reply().integer(if shared { SHARED_REFCOUNT } else { 1 });
            }
            ObjectCommand::IdleTime(_) => {
                cx.reply().integer(0);
            }
            ObjectCommand::Freq(_) => {
                cx.reply().error(NO_LFU);
            }
            ObjectCommand::Usage { key, samples } => {
                let usage = usage(cx, key, &row, samples).await?;
                cx.reply().integer(i64::try_from(usage).unwrap_or(i64::MAX));
            }
            ObjectCommand::Help(_) => {}
        }
        Ok(())
    }
}

/// A string's length and, when it is an integer Redis would keep as one (at most 20
/// characters, `string2ll`'s form), its value; the value itself is read only when short.
async fn string_head(cx: &mut Cx<'_>, row: &KeyRow) -> Result<(u64, Option<i64>), StoreError> {
    let rows = cx
        .tx
        .rows(
            "SELECT LENGTH(v), IF(LENGTH(v) <= 20, v, NULL) FROM {s}.redis_keys WHERE kid = ?",
            &[Param::UInt(row.kid)],
        )
        .await?;
    let Some(mut first) = rows.into_iter().next() else {
        return Ok((0, None));
    };
    let len = first.first().and_then(int).unwrap_or(0).unsigned_abs();
    let value = first.get_mut(1).and_then(take_bytes);
    Ok((len, value.and_then(|v| parse_i64(&v))))
}

/// The most members a small encoding holds, and the longest member (or field, value) it
/// holds, by Redis 7.0's defaults (`set-max-intset-entries`, `zset-max-listpack-*`,
/// `hash-max-listpack-*`).
const INTSET_ENTRIES: i64 = 512;
const LISTPACK_ENTRIES: i64 = 128;
const LISTPACK_VALUE: i64 = 64;

/// The encoding Redis 7.0 would give the value now (see the module's comment).
async fn encoding(cx: &mut Cx<'_>, row: &KeyRow) -> Result<&'static str, StoreError> {
    let kid = [Param::UInt(row.kid)];
    Ok(match row.kind {
        kind::STRING => match string_head(cx, row).await? {
            (_, Some(_)) => "int",
            (len, None) if len <= 44 => "embstr",
            _ => "raw",
        },
        kind::LIST => "quicklist",
        kind::SET if row.len <= INTSET_ENTRIES => {
            // Every member an integer of at most 20 characters: a longer one is `NULL`.
            let members = cx
                .tx
                .rows(
                    "SELECT IF(LENGTH(member) <= 20, member, NULL) FROM {s}.redis_set WHERE kid = ?",
                    &kid,
                )
                .await?;
            let all_integers = members.into_iter().all(|mut m| {
                m.get_mut(0)
                    .and_then(take_bytes)
                    .is_some_and(|v| parse_i64(&v).is_some())
            });
            if all_integers {
                "intset"
            } else {
                "hashtable"
            }
        }
        kind::ZSET if row.len <= LISTPACK_ENTRIES => {
            let longest = cx
                .tx
                .int(
                    "SELECT COALESCE(MAX(LENGTH(member)), 0) FROM {s}.redis_zset WHERE kid = ?",
                    &kid,
                )
                .await?;
            if longest.unwrap_or(0) <= LISTPACK_VALUE {
                "listpack"
            } else {
                "skiplist"
            }
        }
        kind::ZSET => "skiplist",
        kind::HASH if row.len <= LISTPACK_ENTRIES => {
            let longest = cx
                .tx
                .int(
                    "SELECT COALESCE(GREATEST(MAX(LENGTH(field)), MAX(LENGTH(v))), 0) \
                     FROM {s}.redis_hash WHERE kid = ?",
                    &kid,
                )
                .await?;
            if longest.unwrap_or(0) <= LISTPACK_VALUE {
                "listpack"
            } else {
                "hashtable"
            }
        }
        kind::SET | kind::HASH => "hashtable",
        _ => "stream",
    })
}

/// `MEMORY USAGE`'s estimate (see the module's comment): the key's entry (Redis's
/// `dictEntry`, `robj` and key string), then the value's bytes and its encoding's overhead
/// per element.
async fn usage(cx: &mut Cx<'_>, key: &[u8], row: &KeyRow, samples: u64) -> Result<u64, StoreError> {
    // dictEntry (24), robj (16), the key's sds (3-byte header, NUL).
    let entry = 24 + 16 + sds(key.len() as u64);
    if row.kind == kind::STRING {
        let (len, integer) = string_head(cx, row).await?;
        let value = match integer {
            Some(_) => 0,
            None => sds(len),
        };
        return Ok(entry + value);
    }
    let (table, bytes) = match row.kind {
        kind::LIST => ("redis_list", "LENGTH(v)"),
        kind::SET => ("redis_set", "LENGTH(member)"),
        kind::ZSET => ("redis_zset", "LENGTH(member) + 8"),
        kind::HASH => ("redis_hash", "LENGTH(field) + LENGTH(v)"),
        _ => ("redis_stream", "LENGTH(fields) + 16"),
    };
    let len = row.len.unsigned_abs();
    let sampled = samples.min(len);
    let sql = format!(
        "SELECT COALESCE(SUM(b), 0) FROM (SELECT {bytes} AS b FROM {{s}}.{table} WHERE kid = ? LIMIT ?) AS sampled"
    );
    let sum = cx
        .tx
        .int(&sql, &[Param::UInt(row.kid), Param::UInt(sampled)])
        .await?
        .unwrap_or(0)
        .unsigned_abs();
    let average = sum.checked_div(sampled).unwrap_or(0);
    let encoding = encoding(cx, row).await?;
    // Per element: a listpack's header and back-length (about 2 bytes); a hash table's
    // dictEntry and sds (about 32); a skiplist's node and dict entry (about 56); a
    // quicklist's listpack entries; a stream's radix tree node share.
    let (overhead, per_element) = match encoding {
        "listpack" | "intset" => (24, 2),
        "quicklist" => (48, 2),
        "skiplist" => (128, 56),
        "stream" => (128, 16),
        _ => (96, 32),
    };
    Ok(entry + overhead + len.saturating_mul(average + per_element))
}

/// The bytes of an sds string of `len` bytes (its 3-byte header and NUL), rounded to 8 as
/// the allocator does.
fn sds(len: u64) -> u64 {
    (len + 4).div_ceil(8) * 8
}
