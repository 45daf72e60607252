//! `XCLAIM` and `XAUTOCLAIM`: pending entries moved to another consumer of their group.

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;

use super::{bump, id_of, load_group, nogroup, save_group, touch_consumer, Group};
use crate::cmd::checks;
use crate::cmd::streams::id::StreamId;
use crate::cmd::Args;
use crate::store::context::{bulk_size, Cx};
use crate::store::keys::{hash, kind, KeyRow};
use crate::store::{int, take_bytes, StoreError};

/// A pending row for a claim: its ID, delivery time and whether the entry is still there
/// (its fields then).
struct Claimable {
    id: StreamId,
    delivered_ms: i64,
    fields: Option<Vec<u8>>,
}

fn claimable(mut r: Vec<Value>) -> Claimable {
    Claimable {
        id: id_of(&r, 0),
        delivered_ms: r.get(2).and_then(int).unwrap_or(0),
        fields: match r.get_mut(3) {
            Some(Value::Null) | None => None,
            Some(v) => Some(take_bytes(v).unwrap_or_default()),
        },
    }
}

/// The key and group of a claim: `None` once `WRONGTYPE` or `NOGROUP` is replied.
async fn claim_target(
    cx: &mut Cx<'_>,
    key: &[u8],
    group: &[u8],
) -> Result<Option<(KeyRow, [u8; 32], Group)>, StoreError> {
    let Some(row) = checks::write(cx, key, kind::STREAM, false).await? else {
        return Ok(None);
    };
    let gh = hash(group);
    let g = match &row {
        Some(r) => load_group(cx, r.kid, &gh).await?,
        None => None,
    };
    let (Some(row), Some(g)) = (row, g) else {
        cx.reply().error(&nogroup("No such key ", key, group, ""));
        return Ok(None);
    };
    Ok(Some((row, gh, g)))
}

fn claim_error(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

/// `XCLAIM key group consumer min-idle-time id... [IDLE ms] [TIME ms] [RETRYCOUNT n]
/// [FORCE] [JUSTID] [LASTID id]`: every argument is checked (after the key and group)
/// before anything is claimed.
pub async fn xclaim(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let (key, group, consumer) = (args.get(1), args.get(2), args.get(3));
    let Some((row, gh, mut g)) = claim_target(cx, key, group).await? else {
        return Ok(());
    };
    let Some(min_idle) = crate::cmd::parse_i64(args.get(4)) else {
        cx.reply()
            .error(&claim_error("Invalid min-idle-time argument for XCLAIM"));
        return Ok(());
    };
    let min_idle = min_idle.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match super::super::id::parse(args.get(j), 0, true, false) {
            Some((id, _)) => ids.push(id),
            None => break,
        }
        j += 1;
    }
    let now = cx.now_ms();
    let (mut force, mut justid) = (false, false);
    let mut delivery: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = StreamId::ZERO;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        let int_opt = |j: usize, what: &str| -> Result<i64, Vec<u8>> {
            crate::cmd::parse_i64(args.get(j))
                .ok_or_else(|| claim_error(&format!("Invalid {what} option argument for XCLAIM")))
        };
        let step = if opt.eq_ignore_ascii_case(b"force") {
            force = true;
            Ok(())
        } else if opt.eq_ignore_ascii_case(b"justid") {
            justid = true;
            Ok(())
        } else if opt.eq_ignore_ascii_case(b"idle") && more > 0 {
            j += 1;
            int_opt(j, "IDLE").map(|ms| delivery = Some(now.wrapping_sub(ms)))
        } else if opt.eq_ignore_ascii_case(b"time") && more > 0 {
            j += 1;
            int_opt(j, "TIME").map(|t| delivery = Some(t))
        } else if opt.eq_ignore_ascii_case(b"retrycount") && more > 0 {
            j += 1;
            // A negative count is as none, as Redis takes it (`retrycount >= 0` only).
            int_opt(j, "RETRYCOUNT").map(|n| retry = (n >= 0).then_some(n))
        } else if opt.eq_ignore_ascii_case(b"lastid") && more > 0 {
            j += 1;
            match super::super::parse::strict_id(args.get(j)) {
                Ok(id) => {
                    last_id = id;
                    Ok(())
                }
                Err(e) => Err(e.text()),
            }
        } else {
            let mut t = b"Unrecognized XCLAIM option '".to_vec();
            t.extend_from_slice(opt);
            t.push(b'\'');
            Err(t)
        };
        if let Err(text) = step {
            cx.reply().error(&text);
            return Ok(());
        }
        j += 1;
    }
    if last_id > g.last {
        g.last = last_id;
        save_group(cx, row.kid, &gh, g).await?;
    }
    // Redis's -1 (no IDLE nor TIME) and bogus times are now.
    let delivery = delivery.filter(|&d| (0..=now).contains(&d)).unwrap_or(now);
    let ch = hash(consumer);
    let mut out: Vec<(StreamId, Option<Vec<u8>>)> = Vec::new();
    let mut consumer_made = false;
    for id in ids {
        let found = cx
            .tx
            .rows(
                "SELECT p.ms, p.seq, p.delivered_ms, s.fields FROM {s}.redis_stream_pending p \
                 LEFT JOIN {s}.redis_stream s ON s.kid = p.kid AND s.ms = p.ms AND s.seq = p.seq \
                 WHERE p.kid = ? AND p.gh = ? AND p.ms = ? AND p.seq = ?",
                &[
                    Param::UInt(row.kid),
                    Param::Bytes(&gh),
                    Param::UInt(id.ms),
                    Param::UInt(id.seq),
                ],
            )
            .await?;
        let pending = found.into_iter().next().map(claimable);
        let entry = match &pending {
            Some(p) => p.fields.clone(),
            None => entry_fields(cx, row.kid, id).await?,
        };
        let id_params = [
            Param::UInt(row.kid),
            Param::Bytes(&gh),
            Param::UInt(id.ms),
            Param::UInt(id.seq),
        ];
        let Some(fields) = entry else {
            // The entry is gone: so is its pending row.
            if pending.is_some() {
                cx.tx
                    .exec(
                        "DELETE FROM {s}.redis_stream_pending WHERE kid = ? AND gh = ? AND ms = ? AND seq = ?",
                        &id_params,
                    )
                    .await?;
            }
            continue;
        };
        let deliveries_sql = match (&pending, retry) {
            (_, Some(_)) => "?",
            (None, None) if justid => "1",
            (None, None) => "2",
            (Some(_), None) if justid => "deliveries",
            (Some(_), None) => "deliveries + 1",
        };
        if let Some(p) = &pending {
            if min_idle > 0 && now - p.delivered_ms < min_idle {
                continue;
            }
        } else if !force {
            continue;
        }
        if !consumer_made {
            touch_consumer(cx, (key, row.kid), &gh, consumer).await?;
            consumer_made = true;
        }
        let sql = format!(
            "INSERT INTO {{s}}.redis_stream_pending (kid, gh, ms, seq, ch, consumer, delivered_ms, deliveries) \
             VALUES (?, ?, ?, ?, ?, ?, ?, {ins}) ON DUPLICATE KEY UPDATE ch = ?, \
             consumer = ?, delivered_ms = ?, deliveries = {upd}",
            ins = if retry.is_some() { "?" } else if justid { "1" } else { "2" },
            upd = deliveries_sql,
        );
        let mut params = id_params.to_vec();
        for _ in 0..2 {
            params.extend([
                Param::Bytes(&ch),
                Param::Bytes(consumer),
                Param::Int(delivery),
            ]);
            if let Some(n) = retry {
                params.push(Param::Int(n));
            }
        }
        cx.tx.exec(&sql, &params).await?;
        out.push((id, Some(fields)));
    }
    bump(cx, &row).await?;
    let mut reply = cx.reply();
    reply.array_len(out.len());
    for (id, fields) in out {
        if justid {
            reply.bulk(id.text().as_bytes());
        } else {
            let strings = fields
                .as_deref()
                .map(super::super::decode_fields)
                .unwrap_or_default();
            reply
                .array_len(2)
                .bulk(id.text().as_bytes())
                .array_len(strings.len());
            for s in strings {
                reply.bulk(s);
            }
        }
    }
    Ok(())
}

/// The fields of the entry `id` of the stream `kid` (`None`: not there).
async fn entry_fields(
    cx: &mut Cx<'_>,
    kid: u64,
    id: StreamId,
) -> Result<Option<Vec<u8>>, StoreError> {
    let mut rows = cx
        .tx
        .rows(
            "SELECT fields FROM {s}.redis_stream WHERE kid = ? AND ms = ? AND seq = ?",
            &[Param::UInt(kid), Param::UInt(id.ms), Param::UInt(id.seq)],
        )
        .await?;
    Ok(rows
        .first_mut()
        .and_then(|r| r.first_mut())
        .map(|v| take_bytes(v).unwrap_or_default()))
}

/// Reads the fields of the `claimed` entries (all still in the stream: the scan saw them),
/// in ID order, up to the client's output limit: returns how many got theirs.
async fn claimed_fields(
    cx: &mut Cx<'_>,
    kid: u64,
    claimed: &mut [Claimable],
) -> Result<usize, StoreError> {
    // The claimed IDs by chunks of point reads (entries between them may be many and not
    // claimed); the first entry past the output limit is the last one read.
    let budget = cx.out_limit.saturating_sub(cx.out.len());
    let mut held = 0usize;
    let mut at = 0;
    for chunk in (0..claimed.len()).step_by(FIELDS_CHUNK) {
        let ids = &claimed[chunk..claimed.len().min(chunk + FIELDS_CHUNK)];
        let mut sql =
            String::from("SELECT ms, seq, fields FROM {s}.redis_stream WHERE kid = ? AND (");
        let mut params = vec![Param::UInt(kid)];
        for (n, p) in ids.iter().enumerate() {
            sql.push_str(if n == 0 {
                "(ms = ? AND seq = ?)"
            } else {
                " OR (ms = ? AND seq = ?)"
            });
            params.extend([Param::UInt(p.id.ms), Param::UInt(p.id.seq)]);
        }
        sql.push_str(") ORDER BY ms, seq");
        for mut r in cx.tx.rows(&sql, &params).await? {
            if at == claimed.len() || held > budget {
                return Ok(at);
            }
            if id_of(&r, 0) == claimed[at].id {
                let fields = r.get_mut(2).and_then(take_bytes).unwrap_or_default();
                held += 24 + bulk_size(fields.len());
                claimed[at].fields = Some(fields);
                at += 1;
            }
        }
        if held > budget {
            break;
        }
    }
    Ok(at)
}

/// How many claimed entries' fields one query reads.
const FIELDS_CHUNK: usize = 256;

/// `XAUTOCLAIM`'s most attempts per entry asked for (Redis's `attempts_factor`).
const ATTEMPTS_FACTOR: u64 = 10;

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT n] [JUSTID]`: the pending
/// entries from `start` idle long enough move to `consumer`; replies with the next cursor,
/// the claimed entries and the IDs of entries no longer in the stream (their pending rows
/// deleted), as Redis 7.0.
pub async fn xautoclaim(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let (key, group, consumer) = (args.get(1), args.get(2), args.get(3));
    let Some(min_idle) = crate::cmd::parse_i64(args.get(4)) else {
        cx.reply()
            .error(b"Invalid min-idle-time argument for XAUTOCLAIM");
        return Ok(());
    };
    let min_idle = min_idle.max(0);
    let start = match super::super::parse::interval(args.get(5), 0) {
        Ok((id, false)) => id,
        Ok((id, true)) => {
            let Some(id) = id.next() else {
                cx.reply().error(super::super::parse::BAD_START);
                return Ok(());
            };
            id
        }
        Err(e) => {
            e.reply(cx);
            return Ok(());
        }
    };
    let mut count: u64 = 100;
    let mut justid = false;
    let mut j = 6;
    let max_count = (i64::MAX as u64) / 16;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        if opt.eq_ignore_ascii_case(b"count") && more > 0 {
            match crate::cmd::parse_i64(args.get(j + 1)) {
                Some(n) if n >= 1 && (n as u64) <= max_count => count = n as u64,
                _ => {
                    cx.reply().error(b"COUNT must be > 0");
                    return Ok(());
                }
            }
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            cx.reply().error(crate::errors::SYNTAX);
            return Ok(());
        }
        j += 1;
    }
    let Some((row, gh, _)) = claim_target(cx, key, group).await? else {
        return Ok(());
    };
    let attempts = count.saturating_mul(ATTEMPTS_FACTOR);
    // The scan reads IDs only (up to COUNT × 10 of them, most maybe not idle enough): the
    // fields are read for the claimed entries alone, below. Past the client's output limit
    // it stops early, and the cursor resumes where it stopped.
    let (rows, whole) = cx
        .rows_for_reply(
            "SELECT p.ms, p.seq, p.delivered_ms, s.ms IS NOT NULL FROM {s}.redis_stream_pending p \
             LEFT JOIN {s}.redis_stream s ON s.kid = p.kid AND s.ms = p.ms AND s.seq = p.seq \
             WHERE p.kid = ? AND p.gh = ? AND (p.ms > ? OR (p.ms = ? AND p.seq >= ?)) \
             ORDER BY p.ms, p.seq LIMIT ?",
            &[
                Param::UInt(row.kid),
                Param::Bytes(&gh),
                Param::UInt(start.ms),
                Param::UInt(start.ms),
                Param::UInt(start.seq),
                Param::UInt(attempts.saturating_add(1)),
            ],
            if justid { 8 } else { 24 },
        )
        .await?;
    let now = cx.now_ms();
    let scanned = rows.len();
    let mut rows = rows.into_iter().map(|r| {
        let present = r.get(3).and_then(int) == Some(1);
        (id_of(&r, 0), r.get(2).and_then(int).unwrap_or(0), present)
    });
    let (mut left, mut room) = (attempts, count);
    let mut claimed: Vec<Claimable> = Vec::new();
    let mut deleted = Vec::new();
    let mut next = None;
    loop {
        // The last row read when the scan stopped early is where the next call resumes.
        let stopped = !whole && scanned - (attempts - left) as usize <= 1;
        if left == 0 || room == 0 || stopped {
            next = rows.next().map(|(id, _, _)| id);
            break;
        }
        left -= 1;
        let Some((id, delivered_ms, present)) = rows.next() else {
            break;
        };
        if !present {
            deleted.push(id);
            room -= 1;
        } else if min_idle == 0 || now - delivered_ms >= min_idle {
            claimed.push(Claimable {
                id,
                delivered_ms,
                fields: None,
            });
            room -= 1;
        }
    }
    if !justid && !claimed.is_empty() {
        let cut = claimed_fields(cx, row.kid, &mut claimed).await?;
        if cut < claimed.len() {
            // The fields of the rest would pass the output limit: they stay for the next call.
            next = Some(claimed[cut].id);
            claimed.truncate(cut);
        }
    }
    for id in &deleted {
        cx.tx
            .exec(
                "DELETE FROM {s}.redis_stream_pending WHERE kid = ? AND gh = ? AND ms = ? AND seq = ?",
                &[
                    Param::UInt(row.kid),
                    Param::Bytes(&gh),
                    Param::UInt(id.ms),
                    Param::UInt(id.seq),
                ],
            )
            .await?;
    }
    if !claimed.is_empty() {
        touch_consumer(cx, (key, row.kid), &gh, consumer).await?;
        let ch = hash(consumer);
        let sql = if justid {
            "UPDATE {s}.redis_stream_pending SET ch = ?, consumer = ?, delivered_ms = ? \
             WHERE kid = ? AND gh = ? AND ms = ? AND seq = ?"
        } else {
            "UPDATE {s}.redis_stream_pending SET ch = ?, consumer = ?, delivered_ms = ?, \
             deliveries = deliveries + 1 WHERE kid = ? AND gh = ? AND ms = ? AND seq = ?"
        };
        for p in &claimed {
            cx.tx
                .exec(
                    sql,
                    &[
                        Param::Bytes(&ch),
                        Param::Bytes(consumer),
                        Param::Int(now),
                        Param::UInt(row.kid),
                        Param::Bytes(&gh),
                        Param::UInt(p.id.ms),
                        Param::UInt(p.id.seq),
                    ],
                )
                .await?;
        }
    }
    if !claimed.is_empty() || !deleted.is_empty() {
        bump(cx, &row).await?;
    }
    let cursor = next.unwrap_or(StreamId::ZERO);
    let mut reply = cx.reply();
    reply.array_len(3).bulk(cursor.text().as_bytes());
    reply.array_len(claimed.len());
    for p in claimed {
        if justid {
            reply.bulk(p.id.text().as_bytes());
        } else {
            let fields = p.fields.unwrap_or_default();
            let strings = super::super::decode_fields(&fields);
            reply
                .array_len(2)
                .bulk(p.id.text().as_bytes())
                .array_len(strings.len());
            for s in strings {
                reply.bulk(s);
            }
        }
    }
    reply.array_len(deleted.len());
    for id in deleted {
        reply.bulk(id.text().as_bytes());
    }
    Ok(())
}
