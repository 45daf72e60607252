//! Consumer groups: `XGROUP`, `XREADGROUP`, `XACK`, `XPENDING`.
//!
//! A group is a row of `redis_stream_group (kid, gh, name, last_ms, last_seq,
//! entries_read)`, `gh` the SHA-256 of its name; its consumers rows of
//! `redis_stream_consumer (kid, gh, ch, name, seen_ms)`; its pending entries (delivered,
//! not acknowledged) rows of `redis_stream_pending (kid, gh, ms, seq, ch, consumer,
//! delivered_ms, deliveries)`, one per entry ID: the group's PEL, each row naming the
//! consumer whose PEL holds it. All of them go with the stream's key.

mod claim;
mod info;
pub mod parse;

pub use claim::{xautoclaim, xclaim};
pub use info::{parse as info_parse, xinfo};

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::Protocol;

use self::parse::{subcommand_error, GroupOp, PendingRange};
use super::id::StreamId;
use super::{entry_reply, load_meta, uint, Read};
use crate::cmd::checks;
use crate::cmd::sqltext::tuples;
use crate::cmd::Args;
use crate::store::context::Cx;
use crate::store::keys::{hash, kind, KeyRow};
use crate::store::{int, take_bytes, StoreError};

const REQUIRES_KEY: &[u8] = b"The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";
const BUSYGROUP: &[u8] = b"-BUSYGROUP Consumer Group name already exists";
const DOLLAR_IN_XREADGROUP: &[u8] = b"The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.";

const HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

/// Most pending rows in one `INSERT`.
const CHUNK: usize = 128;

/// A group's row.
#[derive(Debug, Clone, Copy)]
struct Group {
    last: StreamId,
    /// `None`: unknown (Redis's -1).
    entries_read: Option<i64>,
}

async fn load_group(cx: &mut Cx<'_>, kid: u64, gh: &[u8; 32]) -> Result<Option<Group>, StoreError> {
    let rows = cx
        .tx
        .rows(
            "SELECT last_ms, last_seq, entries_read FROM {s}.redis_stream_group WHERE kid = ? AND gh = ?",
            &[Param::UInt(kid), Param::Bytes(gh)],
        )
        .await?;
    Ok(rows.first().map(|r| Group {
        last: StreamId::new(
            r.first().and_then(uint).unwrap_or(0),
            r.get(1).and_then(uint).unwrap_or(0),
        ),
        entries_read: r.get(2).and_then(int),
    }))
}

async fn save_group(cx: &mut Cx<'_>, kid: u64, gh: &[u8; 32], g: Group) -> Result<(), StoreError> {
    cx.tx
        .exec(
            "UPDATE {s}.redis_stream_group SET last_ms = ?, last_seq = ?, entries_read = ? \
             WHERE kid = ? AND gh = ?",
            &[
                Param::UInt(g.last.ms),
                Param::UInt(g.last.seq),
                g.entries_read.map_or(Param::Null, Param::Int),
                Param::UInt(kid),
                Param::Bytes(gh),
            ],
        )
        .await?;
    Ok(())
}

/// Creates the consumer if it is not there (of the stream `key`, for its keyspace event),
/// and notes it was seen now; whether it was created.
async fn touch_consumer(
    cx: &mut Cx<'_>,
    (key, kid): (&[u8], u64),
    gh: &[u8; 32],
    name: &[u8],
) -> Result<bool, StoreError> {
    let ch = hash(name);
    let now = cx.now_ms();
    let n = cx
        .tx
        .affected(
            "INSERT INTO {s}.redis_stream_consumer (kid, gh, ch, name, seen_ms) VALUES (?, ?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE seen_ms = ?",
            &[
                Param::UInt(kid),
                Param::Bytes(gh),
                Param::Bytes(&ch),
                Param::Bytes(name),
                Param::Int(now),
                Param::Int(now),
            ],
        )
        .await?;
    // 1: inserted; 2: updated; 0: unchanged.
    if n == 1 {
        cx.tx.notify(
            crate::store::events::class::STREAM,
            "xgroup-createconsumer",
            cx.db,
            key,
        );
    }
    Ok(n == 1)
}

/// The `-NOGROUP ...` texts.
fn nogroup(head: &str, key: &[u8], group: &[u8], tail: &str) -> Vec<u8> {
    let mut t = format!("-NOGROUP {head}'").into_bytes();
    t.extend_from_slice(key);
    t.extend_from_slice(b"' or consumer group '");
    t.extend_from_slice(group);
    t.push(b'\'');
    t.extend_from_slice(tail.as_bytes());
    t
}

/// `XGROUP ...`.
pub async fn xgroup(cx: &mut Cx<'_>, op: GroupOp<'_>) -> Result<(), StoreError> {
    let (key, group) = match op {
        GroupOp::Help => {
            let mut r = cx.reply();
            r.array_len(HELP.len());
            for line in HELP {
                r.simple(line.as_bytes());
            }
            return Ok(());
        }
        GroupOp::Create { key, group, .. }
        | GroupOp::SetId { key, group, .. }
        | GroupOp::Destroy { key, group }
        | GroupOp::CreateConsumer { key, group, .. }
        | GroupOp::DelConsumer { key, group, .. } => (key, group),
    };
    let mkstream = matches!(op, GroupOp::Create { mkstream: true, .. });
    let Some(row) = checks::write(cx, key, kind::STREAM, false).await? else {
        return Ok(());
    };
    if row.is_none() && !mkstream {
        cx.reply().error(REQUIRES_KEY);
        return Ok(());
    }
    let gh = hash(group);
    let found = match &row {
        Some(r) => load_group(cx, r.kid, &gh).await?,
        None => None,
    };
    let needs_group = matches!(
        op,
        GroupOp::SetId { .. } | GroupOp::CreateConsumer { .. } | GroupOp::DelConsumer { .. }
    );
    if found.is_none() && needs_group {
        let mut t = b"-NOGROUP No such consumer group '".to_vec();
        t.extend_from_slice(group);
        t.extend_from_slice(b"' for key name '");
        t.extend_from_slice(key);
        t.push(b'\'');
        cx.reply().error(&t);
        return Ok(());
    }
    match op {
        GroupOp::Create {
            id,
            entries_read,
            argc_ok,
            sub,
            ..
        } => {
            if !argc_ok {
                cx.reply().error(&subcommand_error(sub));
                return Ok(());
            }
            let id = if id == b"$" {
                match &row {
                    Some(r) => load_meta(cx, r.kid).await?.last,
                    None => StreamId::ZERO,
                }
            } else {
                match super::parse::strict_id(id) {
                    Ok(id) => id,
                    Err(e) => {
                        e.reply(cx);
                        return Ok(());
                    }
                }
            };
            let row = match row {
                Some(r) => r,
                None => cx.tx.create_key(cx.db, key, kind::STREAM).await?,
            };
            let added = cx
                .tx
                .affected(
                    "INSERT IGNORE INTO {s}.redis_stream_group (kid, gh, name, last_ms, last_seq, entries_read) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                    &[
                        Param::UInt(row.kid),
                        Param::Bytes(&gh),
                        Param::Bytes(group),
                        Param::UInt(id.ms),
                        Param::UInt(id.seq),
                        entries_read.filter(|&n| n >= 0).map_or(Param::Null, Param::Int),
                    ],
                )
                .await?;
            if added == 0 {
                cx.reply().error(BUSYGROUP);
            } else {
                bump(cx, &row).await?;
                cx.reply().simple(b"OK");
            }
        }
        GroupOp::SetId {
            id,
            entries_read,
            argc_ok,
            sub,
            ..
        } => {
            let row = row.expect("checked above");
            if !argc_ok {
                cx.reply().error(&subcommand_error(sub));
                return Ok(());
            }
            let id = if id == b"$" {
                load_meta(cx, row.kid).await?.last
            } else {
                let Some((id, _)) = super::id::parse(id, 0, false, false) else {
                    cx.reply().error(super::parse::INVALID_ID);
                    return Ok(());
                };
                id
            };
            let g = Group {
                last: id,
                entries_read: entries_read.filter(|&n| n >= 0),
            };
            save_group(cx, row.kid, &gh, g).await?;
            bump(cx, &row).await?;
            cx.reply().simple(b"OK");
        }
        GroupOp::Destroy { .. } => {
            let row = row.expect("checked above");
            if found.is_none() {
                cx.reply().integer(0);
                return Ok(());
            }
            for sql in [
                "DELETE FROM {s}.redis_stream_pending WHERE kid = ? AND gh = ?",
                "DELETE FROM {s}.redis_stream_consumer WHERE kid = ? AND gh = ?",
                "DELETE FROM {s}.redis_stream_group WHERE kid = ? AND gh = ?",
            ] {
                cx.tx
                    .exec(sql, &[Param::UInt(row.kid), Param::Bytes(&gh)])
                    .await?;
            }
            bump(cx, &row).await?;
            cx.reply().integer(1);
        }
        GroupOp::CreateConsumer { consumer, .. } => {
            let row = row.expect("checked above");
            let ch = hash(consumer);
            let n = cx
                .tx
                .affected(
                    "INSERT IGNORE INTO {s}.redis_stream_consumer (kid, gh, ch, name, seen_ms) \
                     VALUES (?, ?, ?, ?, ?)",
                    &[
                        Param::UInt(row.kid),
                        Param::Bytes(&gh),
                        Param::Bytes(&ch),
                        Param::Bytes(consumer),
                        Param::Int(cx.now_ms()),
                    ],
                )
                .await?;
            if n > 0 {
                bump(cx, &row).await?;
            }
            cx.reply().integer(i64::from(n > 0));
        }
        GroupOp::DelConsumer { consumer, .. } => {
            let row = row.expect("checked above");
            let ch = hash(consumer);
            let params = [Param::UInt(row.kid), Param::Bytes(&gh), Param::Bytes(&ch)];
            let there = cx
                .tx
                .affected(
                    "DELETE FROM {s}.redis_stream_consumer WHERE kid = ? AND gh = ? AND ch = ?",
                    &params,
                )
                .await?;
            let pending = cx
                .tx
                .affected(
                    "DELETE FROM {s}.redis_stream_pending WHERE kid = ? AND gh = ? AND ch = ?",
                    &params,
                )
                .await?;
            if there > 0 {
                bump(cx, &row).await?;
            }
            cx.reply()
                .integer(i64::try_from(pending).unwrap_or(i64::MAX));
        }
        GroupOp::Help => {}
    }
    Ok(())
}

/// The key's version grows (a `WATCH` sees the change).
async fn bump(cx: &mut Cx<'_>, row: &KeyRow) -> Result<(), StoreError> {
    super::written(cx, row, 0).await
}

/// `XACK key group id...`.
pub async fn xack(
    cx: &mut Cx<'_>,
    key: &[u8],
    group: &[u8],
    args: Args<'_>,
) -> Result<(), StoreError> {
    let Some(row) = checks::write(cx, key, kind::STREAM, false).await? else {
        return Ok(());
    };
    let Some(row) = row else {
        cx.reply().integer(0);
        return Ok(());
    };
    let gh = hash(group);
    let ids: Result<Vec<StreamId>, _> = args.from(3).map(super::parse::strict_id).collect();
    let ids = match ids {
        Ok(ids) => ids,
        Err(e) => {
            // Redis answers 0 for a group that is not there before it reads the IDs: only
            // then is the group looked up (a group's rows are all there is to ack).
            if load_group(cx, row.kid, &gh).await?.is_some() {
                e.reply(cx);
            } else {
                cx.reply().integer(0);
            }
            return Ok(());
        }
    };
    // With no such group there is no pending row of it: 0 acked, as Redis answers.
    let mut acked = 0u64;
    for chunk in ids.chunks(CHUNK) {
        let sql = format!(
            "DELETE FROM {{s}}.redis_stream_pending WHERE kid = ? AND gh = ? AND (ms, seq) IN ({})",
            tuples("(?, ?)", chunk.len())
        );
        let mut params = Vec::with_capacity(2 + chunk.len() * 2);
        params.extend([Param::UInt(row.kid), Param::Bytes(&gh)]);
        for id in chunk {
            params.extend([Param::UInt(id.ms), Param::UInt(id.seq)]);
        }
        acked += cx.tx.affected(&sql, &params).await?;
    }
    if acked > 0 {
        bump(cx, &row).await?;
    }
    cx.reply().integer(i64::try_from(acked).unwrap_or(i64::MAX));
    Ok(())
}

/// The ID of the stream's first entry (`None`: it has none).
async fn first_id(cx: &mut Cx<'_>, kid: u64) -> Result<Option<StreamId>, StoreError> {
    Ok(cx
        .tx
        .rows(
            "SELECT ms, seq FROM {s}.redis_stream WHERE kid = ? ORDER BY ms, seq LIMIT 1",
            &[Param::UInt(kid)],
        )
        .await?
        .first()
        .map(|r| id_of(r, 0)))
}

pub(super) fn id_of(r: &[Value], at: usize) -> StreamId {
    StreamId::new(
        r.get(at).and_then(uint).unwrap_or(0),
        r.get(at + 1).and_then(uint).unwrap_or(0),
    )
}

/// `XPENDING key group [[IDLE min-idle] start end count [consumer]]`.
pub async fn xpending(
    cx: &mut Cx<'_>,
    key: &[u8],
    group: &[u8],
    range: Option<PendingRange<'_>>,
) -> Result<(), StoreError> {
    let Some(row) = checks::read(cx, key, kind::STREAM).await? else {
        return Ok(());
    };
    let gh = hash(group);
    let found = match &row {
        Some(r) => load_group(cx, r.kid, &gh).await?.is_some(),
        None => false,
    };
    let (Some(row), true) = (row, found) else {
        cx.reply().error(&nogroup("No such key ", key, group, ""));
        return Ok(());
    };
    let kid = row.kid;
    let Some(range) = range else {
        let first = cx
            .tx
            .rows(
                "SELECT ms, seq FROM {s}.redis_stream_pending WHERE kid = ? AND gh = ? ORDER BY ms, seq LIMIT 1",
                &[Param::UInt(kid), Param::Bytes(&gh)],
            )
            .await?;
        let Some(first) = first.first().map(|r| id_of(r, 0)) else {
            cx.reply()
                .array_len(4)
                .integer(0)
                .null()
                .null()
                .null_array();
            return Ok(());
        };
        let last = cx
            .tx
            .rows(
                "SELECT ms, seq FROM {s}.redis_stream_pending WHERE kid = ? AND gh = ? \
                 ORDER BY ms DESC, seq DESC LIMIT 1",
                &[Param::UInt(kid), Param::Bytes(&gh)],
            )
            .await?;
        let last = last.first().map_or(first, |r| id_of(r, 0));
        let mut by_consumer = cx
            .tx
            .rows(
                "SELECT MIN(consumer), COUNT(*) FROM {s}.redis_stream_pending WHERE kid = ? AND gh = ? \
                 GROUP BY ch",
                &[Param::UInt(kid), Param::Bytes(&gh)],
            )
            .await?;
        let mut counts: Vec<(Vec<u8>, i64)> = by_consumer
            .iter_mut()
            .map(|r| {
                (
                    r.get_mut(0).and_then(take_bytes).unwrap_or_default(),
                    r.get(1).and_then(int).unwrap_or(0),
                )
            })
            .collect();
        counts.sort();
        let total: i64 = counts.iter().map(|c| c.1).sum();
        let mut r = cx.reply();
        r.array_len(4).integer(total);
        r.bulk(first.text().as_bytes()).bulk(last.text().as_bytes());
        r.array_len(counts.len());
        for (name, n) in counts {
            r.array_len(2).bulk(&name).bulk(n.to_string().as_bytes());
        }
        return Ok(());
    };
    let ch;
    let mut sql = String::from(
        "SELECT ms, seq, consumer, delivered_ms, deliveries FROM {s}.redis_stream_pending \
         WHERE kid = ? AND gh = ? AND (ms > ? OR (ms = ? AND seq >= ?)) \
         AND (ms < ? OR (ms = ? AND seq <= ?))",
    );
    let mut params = vec![
        Param::UInt(kid),
        Param::Bytes(&gh),
        Param::UInt(range.start.ms),
        Param::UInt(range.start.ms),
        Param::UInt(range.start.seq),
        Param::UInt(range.end.ms),
        Param::UInt(range.end.ms),
        Param::UInt(range.end.seq),
    ];
    if let Some(consumer) = range.consumer {
        ch = hash(consumer);
        let there = cx
            .tx
            .rows(
                "SELECT 1 FROM {s}.redis_stream_consumer WHERE kid = ? AND gh = ? AND ch = ?",
                &[Param::UInt(kid), Param::Bytes(&gh), Param::Bytes(&ch)],
            )
            .await?;
        if there.is_empty() {
            cx.reply().array_len(0);
            return Ok(());
        }
        sql.push_str(" AND ch = ?");
        params.push(Param::Bytes(&ch));
    }
    let now = cx.now_ms();
    if range.min_idle != 0 {
        // Kept when `now - delivered_ms >= min_idle`.
        sql.push_str(" AND delivered_ms <= ?");
        params.push(Param::Int(now.saturating_sub(range.min_idle)));
    }
    sql.push_str(" ORDER BY ms, seq LIMIT ?");
    params.push(Param::UInt(range.count));
    cx.stream_reply(
        &sql,
        &params,
        |r, n| {
            r.array_len(n);
        },
        |r, mut row| {
            let id = id_of(&row, 0);
            let consumer = row.get_mut(2).and_then(take_bytes).unwrap_or_default();
            let delivered = row.get(3).and_then(int).unwrap_or(now);
            let deliveries = row.get(4).and_then(int).unwrap_or(0);
            r.array_len(4).bulk(id.text().as_bytes()).bulk(&consumer);
            r.integer(now.saturating_sub(delivered).max(0))
                .integer(deliveries);
            1
        },
    )
    .await?;
    Ok(())
}

/// What one key of an `XREADGROUP` reads.
struct GroupRead {
    at: usize,
    kid: u64,
    /// The stream's length.
    len: i64,
    group: Group,
    /// The consumer's history after this ID, or (`None`) new entries (`>`).
    history: Option<StreamId>,
    /// The new entries, when they were read to learn whether there were any.
    fetched: Option<Vec<Vec<Value>>>,
}

/// One attempt of `XREADGROUP GROUP group consumer ... STREAMS key... id...`: replies with
/// each stream's entries (new ones, `>`, delivered to the consumer and added to its
/// pending entries unless `noack`; or its own pending history after an ID), or writes
/// nothing when there are no new entries anywhere.
#[allow(clippy::too_many_arguments)]
pub async fn read_group(
    cx: &mut Cx<'_>,
    args: Args<'_>,
    keys: std::ops::Range<usize>,
    count: u64,
    group: &[u8],
    consumer: &[u8],
    noack: bool,
) -> Result<Read, StoreError> {
    let n = keys.len();
    let gh = hash(group);
    let mut reads = Vec::with_capacity(n);
    for (i, ki) in keys.clone().enumerate() {
        let k = args.get(ki);
        let Some(row) = checks::write(cx, k, kind::STREAM, false).await? else {
            return Ok(Read::Answered);
        };
        let g = match &row {
            Some(r) => load_group(cx, r.kid, &gh).await?,
            None => None,
        };
        let (Some(row), Some(g)) = (row, g) else {
            cx.reply().error(&nogroup(
                "No such key ",
                k,
                group,
                " in XREADGROUP with GROUP option",
            ));
            return Ok(Read::Answered);
        };
        let arg = args.get(ki + n);
        let history = if arg == b"$" {
            cx.reply().error(DOLLAR_IN_XREADGROUP);
            return Ok(Read::Answered);
        } else if arg == b">" {
            None
        } else {
            match super::parse::strict_id(arg) {
                Ok(id) => Some(id),
                Err(e) => {
                    e.reply(cx);
                    return Ok(Read::Answered);
                }
            }
        };
        reads.push(GroupRead {
            at: i,
            kid: row.kid,
            len: row.len,
            group: g,
            history,
            fetched: None,
        });
    }
    let limit = if count == 0 { u64::MAX } else { count };
    let mut served = Vec::with_capacity(n);
    for mut r in reads {
        if r.history.is_some() {
            served.push(r);
            continue;
        }
        let Some(after) = r.group.last.next() else {
            continue;
        };
        if n == 1 {
            // One stream: its new entries are read now, once, instead of asked for first.
            let rows = fetch_new(cx, r.kid, after, limit).await?;
            if !rows.is_empty() {
                r.fetched = Some(rows);
                served.push(r);
            }
            continue;
        }
        let found = cx
            .tx
            .rows(
                "SELECT 1 FROM {s}.redis_stream WHERE kid = ? AND (ms > ? OR (ms = ? AND seq >= ?)) LIMIT 1",
                &[
                    Param::UInt(r.kid),
                    Param::UInt(after.ms),
                    Param::UInt(after.ms),
                    Param::UInt(after.seq),
                ],
            )
            .await?;
        if !found.is_empty() {
            served.push(r);
        }
    }
    if served.is_empty() {
        return Ok(Read::Nothing);
    }
    let resp3 = cx.proto == Protocol::Resp3;
    if resp3 {
        cx.reply().map_len(served.len());
    } else {
        cx.reply().array_len(served.len());
    }
    for r in served {
        if !resp3 {
            cx.reply().array_len(2);
        }
        let key = args.get(keys.start + r.at);
        cx.reply().bulk(key);
        touch_consumer(cx, (key, r.kid), &gh, consumer).await?;
        if let Some(after) = r.history {
            history(cx, r.kid, &gh, consumer, after, limit).await?;
        } else {
            let stream = (r.kid, r.len);
            new_entries(cx, stream, &gh, r.group, consumer, limit, noack, r.fetched).await?;
        }
        if cx.over_limit() {
            break;
        }
    }
    Ok(Read::Answered)
}

/// The consumer's pending entries after `after` (a deleted entry as `[id, nil]`), their
/// delivery time and count renewed.
async fn history(
    cx: &mut Cx<'_>,
    kid: u64,
    gh: &[u8; 32],
    consumer: &[u8],
    after: StreamId,
    limit: u64,
) -> Result<(), StoreError> {
    let ch = hash(consumer);
    let Some(start) = after.next() else {
        cx.reply().array_len(0);
        return Ok(());
    };
    let (rows, _) = cx
        .rows_for_reply(
            "SELECT p.ms, p.seq, s.fields FROM {s}.redis_stream_pending p \
             LEFT JOIN {s}.redis_stream s ON s.kid = p.kid AND s.ms = p.ms AND s.seq = p.seq \
             WHERE p.kid = ? AND p.gh = ? AND p.ch = ? AND (p.ms > ? OR (p.ms = ? AND p.seq >= ?)) \
             ORDER BY p.ms, p.seq LIMIT ?",
            &[
                Param::UInt(kid),
                Param::Bytes(gh),
                Param::Bytes(&ch),
                Param::UInt(start.ms),
                Param::UInt(start.ms),
                Param::UInt(start.seq),
                Param::UInt(limit),
            ],
            8,
        )
        .await?;
    let last = rows.last().map(|r| id_of(r, 0));
    {
        let mut reply = cx.reply();
        reply.array_len(rows.len());
        for row in rows {
            if matches!(row.get(2), None | Some(Value::Null)) {
                reply
                    .array_len(2)
                    .bulk(id_of(&row, 0).text().as_bytes())
                    .null_array();
            } else {
                entry_reply(&mut reply, row);
            }
        }
    }
    if let Some(last) = last {
        cx.tx
            .exec(
                "UPDATE {s}.redis_stream_pending p JOIN {s}.redis_stream s \
                 ON s.kid = p.kid AND s.ms = p.ms AND s.seq = p.seq \
                 SET p.delivered_ms = ?, p.deliveries = p.deliveries + 1 \
                 WHERE p.kid = ? AND p.gh = ? AND p.ch = ? AND (p.ms > ? OR (p.ms = ? AND p.seq >= ?)) \
                 AND (p.ms < ? OR (p.ms = ? AND p.seq <= ?))",
                &[
                    Param::Int(cx.now_ms()),
                    Param::UInt(kid),
                    Param::Bytes(gh),
                    Param::Bytes(&ch),
                    Param::UInt(start.ms),
                    Param::UInt(start.ms),
                    Param::UInt(start.seq),
                    Param::UInt(last.ms),
                    Param::UInt(last.ms),
                    Param::UInt(last.seq),
                ],
            )
            .await?;
    }
    Ok(())
}

/// Entries past the group's last delivered ID: delivered to `consumer` (pending unless
/// `noack`, taken from any other consumer that had them), the group's last ID and read
/// counter moved past them.
#[allow(clippy::too_many_arguments)]
/// The entries of stream `kid` from `start` on, at most `limit`, as a reply reads them.
async fn fetch_new(
    cx: &mut Cx<'_>,
    kid: u64,
    start: StreamId,
    limit: u64,
) -> Result<Vec<Vec<Value>>, StoreError> {
    let (rows, _) = cx
        .rows_for_reply(
            "SELECT ms, seq, fields FROM {s}.redis_stream WHERE kid = ? \
             AND (ms > ? OR (ms = ? AND seq >= ?)) ORDER BY ms, seq LIMIT ?",
            &[
                Param::UInt(kid),
                Param::UInt(start.ms),
                Param::UInt(start.ms),
                Param::UInt(start.seq),
                Param::UInt(limit),
            ],
            8,
        )
        .await?;
    Ok(rows)
}

/// The group's new entries of the stream (`kid`, its length) for `consumer` (`fetched`:
/// already read), delivered: the group's last ID and read counter move on, and (unless
/// `noack`) each entry is pending for the consumer.
#[allow(clippy::too_many_arguments)]
async fn new_entries(
    cx: &mut Cx<'_>,
    (kid, length): (u64, i64),
    gh: &[u8; 32],
    mut group: Group,
    consumer: &[u8],
    limit: u64,
    noack: bool,
    fetched: Option<Vec<Vec<Value>>>,
) -> Result<(), StoreError> {
    let Some(start) = group.last.next() else {
        cx.reply().array_len(0);
        return Ok(());
    };
    let rows = match fetched {
        Some(rows) => rows,
        None => fetch_new(cx, kid, start, limit).await?,
    };
    let ids: Vec<StreamId> = rows.iter().map(|r| id_of(r, 0)).collect();
    {
        let mut reply = cx.reply();
        reply.array_len(rows.len());
        for row in rows {
            entry_reply(&mut reply, row);
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    // The read counter, as Redis keeps it (`XINFO`'s lag). The first entry's ID counts only
    // once an entry was deleted, or to estimate an unknown counter: not read otherwise.
    let meta = load_meta(cx, kid).await?;
    let first = if meta.max_deleted != StreamId::ZERO || group.entries_read.is_none() {
        first_id(cx, kid).await?.unwrap_or_default()
    } else {
        StreamId::ZERO
    };
    for &id in &ids {
        if id > group.last {
            let tombstones = length > 0
                && meta.max_deleted != StreamId::ZERO
                && first <= meta.max_deleted
                && id <= meta.max_deleted;
            group.entries_read = match group.entries_read {
                Some(n) if !tombstones => Some(n + 1),
                _ if meta.entries_added > 0 => estimate_read(&meta, first, length, id),
                other => other,
            };
            group.last = id;
        }
    }
    save_group(cx, kid, gh, group).await?;
    if noack {
        return Ok(());
    }
    // Each entry is now pending for this consumer, delivered once, now: one another
    // consumer had pending (the group's ID was set back) moves to this one, as Redis's
    // `streamReplyWithRange` moves its NACK (pending rows of entries no longer in the
    // stream stay, as in Redis).
    let ch = hash(consumer);
    let now = cx.now_ms();
    for chunk in ids.chunks(CHUNK) {
        let sql = format!(
            "INSERT INTO {{s}}.redis_stream_pending (kid, gh, ms, seq, ch, consumer, delivered_ms, deliveries) VALUES {} \
             ON DUPLICATE KEY UPDATE ch = VALUES(ch), consumer = VALUES(consumer), \
             delivered_ms = VALUES(delivered_ms), deliveries = 1",
            tuples("(?, ?, ?, ?, ?, ?, ?, 1)", chunk.len())
        );
        let mut params = Vec::with_capacity(chunk.len() * 7);
        for id in chunk {
            params.extend([
                Param::UInt(kid),
                Param::Bytes(gh),
                Param::UInt(id.ms),
                Param::UInt(id.seq),
                Param::Bytes(&ch),
                Param::Bytes(consumer),
                Param::Int(now),
            ]);
        }
        cx.tx.exec(&sql, &params).await?;
    }
    Ok(())
}

/// Redis's `streamEstimateDistanceFromFirstEverEntry`: the read counter of `id`, `None`
/// when it cannot be known.
pub(crate) fn estimate_read(
    meta: &super::Meta,
    first: StreamId,
    length: i64,
    id: StreamId,
) -> Option<i64> {
    let added = i64::try_from(meta.entries_added).unwrap_or(i64::MAX);
    if meta.entries_added == 0 {
        return Some(0);
    }
    if length == 0 && id <= meta.last {
        return Some(added);
    }
    if id == meta.last {
        return Some(added);
    }
    if id > meta.last {
        return None;
    }
    if meta.max_deleted == StreamId::ZERO || meta.max_deleted < first {
        if id < first {
            return Some(added - length);
        }
        if id == first {
            return Some(added - length + 1);
        }
    }
    None
}
