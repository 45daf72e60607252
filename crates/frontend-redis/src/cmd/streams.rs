//! Streams: `XADD`, `XLEN`, `XRANGE`, `XREVRANGE`, `XDEL`, `XTRIM`, `XREAD` (and its
//! `BLOCK`, run by [`crate::blocking`]), `XSETID`.
//!
//! Entries are rows of `redis_stream (kid, ms, seq, fields)`, one per entry, its ID the
//! two unsigned columns (the primary key orders them as Redis does), its field/value pairs
//! in `fields` as netstrings (`<length>:<bytes>,` each, in order: `5:color,3:red,`), so SQL
//! users can read them. The stream's own state (the last ID given, the largest ID deleted,
//! the entries ever added) is its row of `redis_stream_meta`; the key row's `len` counts
//! the entries. A stream left empty keeps its key, as in Redis.
//!
//! Every command runs in its batch's transaction on the key row locked first (a write's
//! [`checks::write`]), so the stream's state and entries change with it or not at all.
//!
//! Intended differences from Redis 7.0 (documented in docs/REDIS.md):
//! - `MAXLEN ~`/`MINID ~` trim as `=` does, at most `LIMIT` entries (10000 by default):
//!   Redis removes only whole nodes of its radix tree, so it may trim fewer.
//! - `XADD`'s automatic IDs take the batch's clock (`ms` of the batch's start).

mod dump;
mod groups;
mod id;
mod parse;
#[cfg(test)]
mod tests;

pub use dump::{dump, restore};
pub(crate) use groups::estimate_read;
pub use id::StreamId;
pub use parse::{StreamCommand, COMMANDS};

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::{Protocol, Reply};

use super::checks::{self, Absent};
use super::lists::Served;
use super::typed::DataCommand;
use super::Args;
use crate::store::context::Cx;
use crate::store::keys::{kind, KeyRow};
use crate::store::{take_bytes, StoreError};
use parse::{AddId, Trim, TrimBy};

impl StreamCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        use parse::{
            XAck, XAdd, XAutoClaim, XClaim, XDel, XGroup, XInfo, XLen, XPending, XRange, XRead,
            XSetId, XTrim,
        };
        match self {
            XAdd {
                key,
                nomkstream,
                trim,
                id,
                args,
                fields,
            } => xadd(cx, key, nomkstream, trim, id, args, fields).await,
            XLen { key } => xlen(cx, key).await,
            XRange {
                key,
                start,
                end,
                count,
                rev,
            } => xrange(cx, key, start, end, count, rev).await,
            XDel { key, args } => xdel(cx, key, args).await,
            XTrim { key, trim } => xtrim(cx, key, trim).await,
            XRead {
                args,
                keys,
                count,
                group,
                noack,
                ..
            } => {
                let mut resolved = Vec::new();
                let read = match group {
                    Some((g, c)) => groups::read_group(cx, args, keys, count, g, c, noack).await?,
                    None => read(cx, args, keys, count, &mut resolved, false).await?,
                };
                if read == Read::Nothing {
                    cx.reply().null_array();
                }
                Ok(())
            }
            XGroup(op) => groups::xgroup(cx, op).await,
            XAck { key, group, args } => groups::xack(cx, key, group, args).await,
            XPending { key, group, range } => groups::xpending(cx, key, group, range).await,
            XClaim { args } => groups::xclaim(cx, args).await,
            XAutoClaim { args } => groups::xautoclaim(cx, args).await,
            XInfo { args } => groups::xinfo(cx, args).await,
            XSetId {
                key,
                last,
                entries_added,
                max_deleted,
            } => xsetid(cx, key, last, entries_added, max_deleted).await,
        }
    }
}

/// A stream's state beyond its entries (`redis_stream_meta`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) last: StreamId,
    pub(crate) max_deleted: StreamId,
    pub(crate) entries_added: u64,
}

/// An unsigned column.
fn uint(v: &Value) -> Option<u64> {
    match *v {
        Value::UInt(u) => Some(u),
        Value::Int(i) => u64::try_from(i).ok(),
        Value::Bytes(ref b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

async fn load_meta(cx: &mut Cx<'_>, kid: u64) -> Result<Meta, StoreError> {
    let rows = cx
        .tx
        .rows(
            "SELECT last_ms, last_seq, max_deleted_ms, max_deleted_seq, entries_added \
             FROM {s}.redis_stream_meta WHERE kid = ?",
            &[Param::UInt(kid)],
        )
        .await?;
    let Some(r) = rows.first() else {
        return Ok(Meta::default());
    };
    let u = |i: usize| r.get(i).and_then(uint).unwrap_or(0);
    Ok(Meta {
        last: StreamId::new(u(0), u(1)),
        max_deleted: StreamId::new(u(2), u(3)),
        entries_added: u(4),
    })
}

async fn save_meta(cx: &mut Cx<'_>, kid: u64, m: &Meta) -> Result<(), StoreError> {
    let v = [
        m.last.ms,
        m.last.seq,
        m.max_deleted.ms,
        m.max_deleted.seq,
        m.entries_added,
    ];
    let mut params = Vec::with_capacity(11);
    params.push(Param::UInt(kid));
    params.extend(v.iter().map(|&x| Param::UInt(x)));
    params.extend(v.iter().map(|&x| Param::UInt(x)));
    cx.tx
        .exec(
            "INSERT INTO {s}.redis_stream_meta \
             (kid, last_ms, last_seq, max_deleted_ms, max_deleted_seq, entries_added) \
             VALUES (?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE last_ms = ?, last_seq = ?, \
             max_deleted_ms = ?, max_deleted_seq = ?, entries_added = ?",
            &params,
        )
        .await?;
    Ok(())
}

/// Records a write to the stream: its entry count changes by `delta`, its version grows
/// (an empty stream stays).
async fn written(cx: &mut Cx<'_>, row: &KeyRow, delta: i64) -> Result<(), StoreError> {
    cx.tx
        .exec(
            "UPDATE {s}.redis_keys SET len = len + ?, version = version + 1 WHERE kid = ?",
            &[Param::Int(delta), Param::UInt(row.kid)],
        )
        .await?;
    Ok(())
}

/// The field/value pairs as `redis_stream.fields` keeps them (netstrings).
fn encode_fields<'a>(pairs: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for f in pairs {
        out.extend_from_slice(f.len().to_string().as_bytes());
        out.push(b':');
        out.extend_from_slice(f);
        out.push(b',');
    }
    out
}

/// The strings of a `fields` column (a damaged one ends where it stops making sense).
fn decode_fields(mut b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some(colon) = b.iter().position(|&c| c == b':') {
        let Some(len) = std::str::from_utf8(&b[..colon])
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
        else {
            break;
        };
        let start = colon + 1;
        let Some(end) = start.checked_add(len).filter(|&e| e < b.len()) else {
            break;
        };
        out.push(&b[start..end]);
        b = &b[end + 1..];
    }
    out
}

/// Writes one entry (`[id, [field, value, ...]]`) of a `(ms, seq, fields)` row.
fn entry_reply(r: &mut Reply<'_>, mut row: Vec<Value>) -> usize {
    let id = StreamId::new(
        row.first().and_then(uint).unwrap_or(0),
        row.get(1).and_then(uint).unwrap_or(0),
    );
    let fields = row.get_mut(2).and_then(take_bytes).unwrap_or_default();
    let strings = decode_fields(&fields);
    r.array_len(2).bulk(id.text().as_bytes());
    r.array_len(strings.len());
    for s in strings {
        r.bulk(s);
    }
    1
}

const RANGE_SQL: &str = "SELECT ms, seq, fields FROM {s}.redis_stream WHERE kid = ? \
     AND (ms > ? OR (ms = ? AND seq >= ?)) AND (ms < ? OR (ms = ? AND seq <= ?)) \
     ORDER BY ms, seq LIMIT ?";
const REV_RANGE_SQL: &str = "SELECT ms, seq, fields FROM {s}.redis_stream WHERE kid = ? \
     AND (ms > ? OR (ms = ? AND seq >= ?)) AND (ms < ? OR (ms = ? AND seq <= ?)) \
     ORDER BY ms DESC, seq DESC LIMIT ?";

/// Replies with the entries of `kid` from `start` to `end` (both included), at most
/// `count` (0: all), as an array.
async fn reply_range(
    cx: &mut Cx<'_>,
    kid: u64,
    start: StreamId,
    end: StreamId,
    count: u64,
    rev: bool,
) -> Result<(), StoreError> {
    let limit = if count == 0 { u64::MAX } else { count };
    let params = [
        Param::UInt(kid),
        Param::UInt(start.ms),
        Param::UInt(start.ms),
        Param::UInt(start.seq),
        Param::UInt(end.ms),
        Param::UInt(end.ms),
        Param::UInt(end.seq),
        Param::UInt(limit),
    ];
    let sql = if rev { REV_RANGE_SQL } else { RANGE_SQL };
    cx.stream_reply(
        sql,
        &params,
        |r, n| {
            r.array_len(n);
        },
        entry_reply,
    )
    .await?;
    Ok(())
}

/// The ID of the stream's last entry (`None`: empty).
async fn last_entry(cx: &mut Cx<'_>, kid: u64) -> Result<Option<StreamId>, StoreError> {
    let rows = cx
        .tx
        .rows(
            "SELECT ms, seq FROM {s}.redis_stream WHERE kid = ? ORDER BY ms DESC, seq DESC LIMIT 1",
            &[Param::UInt(kid)],
        )
        .await?;
    Ok(rows.first().map(|r| {
        StreamId::new(
            r.first().and_then(uint).unwrap_or(0),
            r.get(1).and_then(uint).unwrap_or(0),
        )
    }))
}

/// `XADD key [NOMKSTREAM] [trim] id field value [field value ...]`.
async fn xadd(
    cx: &mut Cx<'_>,
    k: &[u8],
    nomkstream: bool,
    trim: Option<Trim>,
    add: AddId,
    args: Args<'_>,
    fields: usize,
) -> Result<(), StoreError> {
    let Some(found) = checks::write(cx, k, kind::STREAM, !nomkstream).await? else {
        return Ok(());
    };
    let Some(row) = found else {
        cx.reply().null();
        return Ok(());
    };
    let mut meta = load_meta(cx, row.kid).await?;
    if meta.last == StreamId::MAX {
        cx.reply().error(parse::EXHAUSTED);
        return Ok(());
    }
    let id = match add {
        AddId::Auto => {
            let now = u64::try_from(cx.now_ms()).unwrap_or(0);
            if now > meta.last.ms {
                Some(StreamId::new(now, 0))
            } else {
                meta.last.next()
            }
        }
        AddId::Explicit(id) => Some(id),
        AddId::Ms(ms) if ms == meta.last.ms => {
            (meta.last.seq < u64::MAX).then(|| StreamId::new(ms, meta.last.seq + 1))
        }
        AddId::Ms(ms) => Some(StreamId::new(ms, 0)),
    };
    let Some(id) = id.filter(|&id| id > meta.last) else {
        cx.reply().error(parse::ID_TOO_SMALL);
        return Ok(());
    };
    let blob = encode_fields(args.from(fields));
    cx.tx
        .exec(
            "INSERT INTO {s}.redis_stream (kid, ms, seq, fields) VALUES (?, ?, ?, ?)",
            &[
                Param::UInt(row.kid),
                Param::UInt(id.ms),
                Param::UInt(id.seq),
                Param::Bytes(&blob),
            ],
        )
        .await?;
    meta.last = id;
    meta.entries_added += 1;
    save_meta(cx, row.kid, &meta).await?;
    let mut delta = 1;
    if let Some(trim) = trim {
        let removed = trim_entries(cx, row.kid, row.len + 1, trim).await?;
        if removed > 0 {
            // Keyspace notifications: `xtrim` after the command's `xadd`, as Redis.
            cx.tx
                .notify_after(crate::store::events::class::STREAM, "xtrim", cx.db, k);
        }
        delta -= removed;
    }
    written(cx, &row, delta).await?;
    cx.tx.note_push(cx.db, k);
    cx.reply().bulk(id.text().as_bytes());
    Ok(())
}

/// Removes the entries `trim` asks for from the stream `kid` of `len` entries; how many.
async fn trim_entries(cx: &mut Cx<'_>, kid: u64, len: i64, trim: Trim) -> Result<i64, StoreError> {
    let limit = if trim.limit == 0 {
        u64::MAX
    } else {
        trim.limit
    };
    let removed = match trim.by {
        TrimBy::MaxLen(max) => {
            let len = u64::try_from(len).unwrap_or(0);
            let n = len.saturating_sub(max).min(limit);
            if n == 0 {
                return Ok(0);
            }
            cx.tx
                .affected(
                    "DELETE FROM {s}.redis_stream WHERE kid = ? ORDER BY ms, seq LIMIT ?",
                    &[Param::UInt(kid), Param::UInt(n)],
                )
                .await?
        }
        TrimBy::MinId(min) => {
            cx.tx
                .affected(
                    "DELETE FROM {s}.redis_stream WHERE kid = ? \
                     AND (ms < ? OR (ms = ? AND seq < ?)) ORDER BY ms, seq LIMIT ?",
                    &[
                        Param::UInt(kid),
                        Param::UInt(min.ms),
                        Param::UInt(min.ms),
                        Param::UInt(min.seq),
                        Param::UInt(limit),
                    ],
                )
                .await?
        }
    };
    Ok(i64::try_from(removed).unwrap_or(i64::MAX))
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`.
async fn xtrim(cx: &mut Cx<'_>, k: &[u8], trim: Trim) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::STREAM, Absent::Zero).await? else {
        return Ok(());
    };
    let removed = trim_entries(cx, row.kid, row.len, trim).await?;
    if removed > 0 {
        written(cx, &row, -removed).await?;
    }
    cx.reply().integer(removed);
    Ok(())
}

/// `XLEN key`.
async fn xlen(cx: &mut Cx<'_>, k: &[u8]) -> Result<(), StoreError> {
    if let Some(row) = checks::read(cx, k, kind::STREAM).await? {
        cx.reply().integer(row.map_or(0, |r| r.len));
    }
    Ok(())
}

/// `XRANGE key start end [COUNT n]`, `XREVRANGE key end start [COUNT n]`.
async fn xrange(
    cx: &mut Cx<'_>,
    k: &[u8],
    start: StreamId,
    end: StreamId,
    count: Option<u64>,
    rev: bool,
) -> Result<(), StoreError> {
    let Some(row) = checks::read_or(cx, k, kind::STREAM, Absent::EmptyArray).await? else {
        return Ok(());
    };
    match count {
        Some(0) => {
            cx.reply().null_array();
            Ok(())
        }
        count => reply_range(cx, row.kid, start, end, count.unwrap_or(0), rev).await,
    }
}

/// `XDEL key id [id ...]`: the IDs are checked once the key is found, all before any is
/// deleted.
async fn xdel(cx: &mut Cx<'_>, k: &[u8], args: Args<'_>) -> Result<(), StoreError> {
    let Some(row) = checks::write_or(cx, k, kind::STREAM, Absent::Zero).await? else {
        return Ok(());
    };
    let mut ids = Vec::with_capacity(args.len() - 2);
    for a in args.from(2) {
        match parse::strict_id(a) {
            Ok(id) => ids.push(id),
            Err(e) => {
                e.reply(cx);
                return Ok(());
            }
        }
    }
    let mut meta = load_meta(cx, row.kid).await?;
    let mut deleted = 0i64;
    for id in ids {
        let n = cx
            .tx
            .affected(
                "DELETE FROM {s}.redis_stream WHERE kid = ? AND ms = ? AND seq = ?",
                &[
                    Param::UInt(row.kid),
                    Param::UInt(id.ms),
                    Param::UInt(id.seq),
                ],
            )
            .await?;
        if n > 0 {
            deleted += 1;
            meta.max_deleted = meta.max_deleted.max(id);
        }
    }
    if deleted > 0 {
        save_meta(cx, row.kid, &meta).await?;
        written(cx, &row, -deleted).await?;
    }
    cx.reply().integer(deleted);
    Ok(())
}

const SETID_BELOW_TOP: &[u8] =
    b"The ID specified in XSETID is smaller than the target stream top item";
const SETID_ADDED_BELOW_LEN: &[u8] =
    b"The entries_added specified in XSETID is smaller than the target stream length";

/// `XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]`.
async fn xsetid(
    cx: &mut Cx<'_>,
    k: &[u8],
    last: StreamId,
    entries_added: Option<u64>,
    max_deleted: Option<StreamId>,
) -> Result<(), StoreError> {
    let absent = Absent::Error(crate::cmd::rename::NO_SUCH_KEY);
    let Some(row) = checks::write_or(cx, k, kind::STREAM, absent).await? else {
        return Ok(());
    };
    let mut meta = load_meta(cx, row.kid).await?;
    // (Redis 7.0.15 does not compare it with the stream's own max_deleted_entry_id.)
    if row.len > 0 {
        if let Some(top) = last_entry(cx, row.kid).await? {
            if last < top {
                cx.reply().error(SETID_BELOW_TOP);
                return Ok(());
            }
        }
        if entries_added.is_some_and(|n| n < row.len as u64) {
            cx.reply().error(SETID_ADDED_BELOW_LEN);
            return Ok(());
        }
    }
    meta.last = last;
    if let Some(n) = entries_added {
        meta.entries_added = n;
    }
    if let Some(m) = max_deleted.filter(|&m| m != StreamId::ZERO) {
        meta.max_deleted = m;
    }
    save_meta(cx, row.kid, &meta).await?;
    written(cx, &row, 0).await?;
    cx.reply().simple(b"OK");
    Ok(())
}

/// What a read attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// It replied (entries or an error).
    Answered,
    /// Nothing to serve: nothing written.
    Nothing,
}

/// One attempt of `XREAD ... STREAMS key... id...` (keys at `keys` of `args`, their IDs
/// after them): the IDs are resolved on the first attempt into `resolved` (`$` the
/// stream's last ID then), which later attempts (a blocked client's) keep. Replies with the
/// entries after each ID, or writes nothing when there are none.
///
/// With `lock` (a blocking read) each key row is read locked, so the attempt waits for an
/// `XADD` not yet committed: that `XADD` may have found no waiter to note when it ran, and
/// its commit would wake nobody (see [`crate::blocking`]).
pub async fn read(
    cx: &mut Cx<'_>,
    args: Args<'_>,
    keys: std::ops::Range<usize>,
    count: u64,
    resolved: &mut Vec<StreamId>,
    lock: bool,
) -> Result<Read, StoreError> {
    let n = keys.len();
    let first_attempt = resolved.is_empty();
    let mut rows = Vec::with_capacity(n);
    for ki in keys.clone() {
        let k = args.get(ki);
        let found = cx.tx.typed_key(cx.db, k, kind::STREAM, lock).await?;
        let Some(row) = checks::or_wrongtype(cx, found) else {
            return Ok(Read::Answered);
        };
        if first_attempt {
            let arg = args.get(ki + n);
            let id = if arg == b"$" {
                match &row {
                    Some(r) => load_meta(cx, r.kid).await?.last,
                    None => StreamId::ZERO,
                }
            } else if arg == b">" {
                cx.reply().error(parse::GT_ONLY_XREADGROUP);
                return Ok(Read::Answered);
            } else {
                match parse::strict_id(arg) {
                    Ok(id) => id,
                    Err(e) => {
                        e.reply(cx);
                        return Ok(Read::Answered);
                    }
                }
            };
            resolved.push(id);
        }
        rows.push(row);
    }
    // The streams with an entry past their ID.
    let mut served = Vec::with_capacity(n);
    for (i, row) in rows.iter().enumerate() {
        let Some(row) = row else { continue };
        let Some(after) = resolved[i].next() else {
            continue;
        };
        let found = cx
            .tx
            .rows(
                "SELECT 1 FROM {s}.redis_stream WHERE kid = ? \
                 AND (ms > ? OR (ms = ? AND seq >= ?)) LIMIT 1",
                &[
                    Param::UInt(row.kid),
                    Param::UInt(after.ms),
                    Param::UInt(after.ms),
                    Param::UInt(after.seq),
                ],
            )
            .await?;
        if !found.is_empty() {
            served.push((i, row.kid, after));
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
    for (i, kid, after) in served {
        if !resp3 {
            cx.reply().array_len(2);
        }
        cx.reply().bulk(args.get(keys.start + i));
        reply_range(cx, kid, after, StreamId::MAX, count, false).await?;
        if cx.over_limit() {
            break;
        }
    }
    Ok(Read::Answered)
}

/// A blocking read's timeout (`None`: forever) and keys.
pub type BlockingKeys<'a> = (Option<std::time::Duration>, Vec<&'a [u8]>);

/// What [`crate::blocking`] needs of `XREAD` before its first attempt: its timeout (`None`
/// forever) and the keys it waits on (none without `BLOCK`: it answers at once), or the
/// error it is refused with.
pub fn blocking_keys<'a>(
    spec: &'static crate::cmd::Spec,
    args: &Args<'a>,
) -> Result<BlockingKeys<'a>, Vec<u8>> {
    match (spec.parse)(*args) {
        Ok(DataCommand::Streams(StreamCommand::XRead {
            args,
            keys,
            block: Some(timeout),
            ..
        })) => Ok((timeout, keys.map(|i| args.get(i)).collect())),
        Ok(_) => Ok((None, Vec::new())),
        Err(e) => Err(e.text()),
    }
}

/// One attempt of a blocking stream command (timeout and syntax already checked), run by
/// [`crate::blocking`]: [`Served::No`] (nothing written) when it would wait.
pub async fn try_blocking(
    cx: &mut Cx<'_>,
    spec: &'static crate::cmd::Spec,
    args: Args<'_>,
    resolved: &mut Vec<StreamId>,
) -> Result<Served, StoreError> {
    match (spec.parse)(args) {
        Ok(DataCommand::Streams(StreamCommand::XRead {
            args,
            keys,
            count,
            block,
            group,
            noack,
        })) => match match group {
            Some((g, c)) => groups::read_group(cx, args, keys, count, g, c, noack).await?,
            None => read(cx, args, keys, count, resolved, block.is_some()).await?,
        } {
            Read::Answered => Ok(Served::Yes),
            Read::Nothing if block.is_some() => Ok(Served::No),
            Read::Nothing => {
                cx.reply().null_array();
                Ok(Served::Yes)
            }
        },
        Ok(other) => {
            other.apply(cx).await?;
            Ok(Served::Yes)
        }
        Err(e) => {
            e.reply(cx);
            Ok(Served::Yes)
        }
    }
}
