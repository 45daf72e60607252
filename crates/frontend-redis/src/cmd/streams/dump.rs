//! `DUMP` and `RESTORE` of a stream: its rows read into Redis 7.0's payload
//! ([`rdb::stream`]), a payload's stream written as rows, all in the command's
//! transaction.
//!
//! Times are carried as they are: a pending entry's last delivery and a consumer's last
//! read are Unix ms in both Redis and the door's tables, so `XINFO STREAM FULL` shows the
//! same ones on both sides.

use std::collections::HashMap;
use std::ops::ControlFlow;

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;

use super::groups::id_of;
use super::{decode_fields, encode_fields, load_meta, uint, StreamId};
use crate::cmd::keys::rdb::stream::{Consumer, Group, Pending, Stream, StreamWriter};
use crate::cmd::sqltext::{insert_rows, statement, tuples};
use crate::store::context::Cx;
use crate::store::keys::{hash, KeyRow};
use crate::store::{int, take_bytes, StoreError};

/// `DUMP` of the stream `row`: the payload, built as the rows are read. Past what the
/// client's output limit leaves, the read stops and the (partial) reply passes the limit:
/// the client is closed without it.
pub async fn dump(cx: &mut Cx<'_>, row: &KeyRow) -> Result<(), StoreError> {
    let kid = row.kid;
    let meta = load_meta(cx, kid).await?;
    let budget = cx.out_limit.saturating_sub(cx.out.len());
    let mut w = StreamWriter::new();
    let mut length = 0u64;
    let mut first = None;
    cx.tx
        .exec_each(
            "SELECT ms, seq, fields FROM {s}.redis_stream WHERE kid = ? ORDER BY ms, seq",
            &[Param::UInt(kid)],
            |mut r: Vec<Value>| {
                let id = id_of(&r, 0);
                let fields = r.get_mut(2).and_then(take_bytes).unwrap_or_default();
                let mut pairs = decode_fields(&fields);
                // A damaged row (an odd count) loses its last string rather than the payload.
                pairs.truncate(pairs.len() & !1);
                w.entry(id, &pairs);
                first.get_or_insert(id);
                length += 1;
                if w.size() > budget {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        )
        .await?;
    if w.size() > budget {
        cx.reply().bulk(&w.finish());
        return Ok(());
    }
    let groups = cx
        .tx
        .rows(
            "SELECT gh, name, last_ms, last_seq, entries_read FROM {s}.redis_stream_group \
             WHERE kid = ?",
            &[Param::UInt(kid)],
        )
        .await?;
    let state = Stream {
        last: meta.last,
        max_deleted: meta.max_deleted,
        entries_added: meta.entries_added,
        ..Stream::default()
    };
    w.state(
        length,
        &state,
        first.unwrap_or(StreamId::ZERO),
        groups.len(),
    );
    for mut g in groups {
        let gh = g.first_mut().and_then(take_bytes).unwrap_or_default();
        let mut group = Group {
            name: g.get_mut(1).and_then(take_bytes).unwrap_or_default(),
            last: id_of(&g, 2),
            entries_read: g.get(4).and_then(int),
            ..Group::default()
        };
        load_group_rows(cx, kid, &gh, &mut group).await?;
        w.group(&group);
        if w.size() > budget {
            break;
        }
    }
    cx.reply().bulk(&w.finish());
    Ok(())
}

/// A group's consumers and PEL.
async fn load_group_rows(
    cx: &mut Cx<'_>,
    kid: u64,
    gh: &[u8],
    group: &mut Group,
) -> Result<(), StoreError> {
    let consumers = cx
        .tx
        .rows(
            "SELECT ch, name, seen_ms FROM {s}.redis_stream_consumer WHERE kid = ? AND gh = ?",
            &[Param::UInt(kid), Param::Bytes(gh)],
        )
        .await?;
    let mut by_hash: HashMap<Vec<u8>, usize> = HashMap::with_capacity(consumers.len());
    for mut c in consumers {
        by_hash.insert(
            c.first_mut().and_then(take_bytes).unwrap_or_default(),
            group.consumers.len(),
        );
        group.consumers.push(Consumer {
            name: c.get_mut(1).and_then(take_bytes).unwrap_or_default(),
            seen_ms: c.get(2).and_then(int).unwrap_or(0),
        });
    }
    let pending = cx
        .tx
        .rows(
            "SELECT ms, seq, ch, consumer, delivered_ms, deliveries FROM {s}.redis_stream_pending \
             WHERE kid = ? AND gh = ? ORDER BY ms, seq",
            &[Param::UInt(kid), Param::Bytes(gh)],
        )
        .await?;
    group.pending.reserve(pending.len());
    for mut p in pending {
        let ch = p.get_mut(2).and_then(take_bytes).unwrap_or_default();
        let delivered_ms = p.get(4).and_then(int).unwrap_or(0);
        // Every pending entry has its consumer in Redis's form: one the consumer table
        // lacks is written from its name here.
        let consumer = if let Some(&i) = by_hash.get(&ch) {
            i
        } else {
            let i = group.consumers.len();
            group.consumers.push(Consumer {
                name: p.get_mut(3).and_then(take_bytes).unwrap_or_default(),
                seen_ms: delivered_ms,
            });
            by_hash.insert(ch, i);
            i
        };
        group.pending.push(Pending {
            id: id_of(&p, 0),
            delivered_ms,
            deliveries: p.get(5).and_then(uint).unwrap_or(0),
            consumer,
        });
    }
    Ok(())
}

statement! {
    fn insert_entries = "INSERT INTO {{s}}.redis_stream (kid, ms, seq, fields) VALUES {}", |n| tuples("(?, ?, ?, ?)", n)
}
statement! {
    fn insert_groups = "INSERT INTO {{s}}.redis_stream_group (kid, gh, name, last_ms, last_seq, entries_read) VALUES {}", |n| tuples("(?, ?, ?, ?, ?, ?)", n)
}
statement! {
    fn insert_consumers = "INSERT INTO {{s}}.redis_stream_consumer (kid, gh, ch, name, seen_ms) VALUES {}", |n| tuples("(?, ?, ?, ?, ?)", n)
}
statement! {
    fn insert_pending = "INSERT INTO {{s}}.redis_stream_pending (kid, gh, ms, seq, ch, consumer, delivered_ms, deliveries) VALUES {}", |n| tuples("(?, ?, ?, ?, ?, ?, ?, ?)", n)
}

/// Entries whose `fields` are encoded at a time (the rest of the stream stays decoded).
const ENCODE_CHUNK: usize = 1024;

/// `RESTORE` of a stream: writes `s` under the new key `kid` (its key row written).
pub async fn restore(cx: &mut Cx<'_>, kid: u64, s: &Stream) -> Result<(), StoreError> {
    let meta = super::Meta {
        last: s.last,
        max_deleted: s.max_deleted,
        entries_added: s.entries_added,
    };
    super::save_meta(cx, kid, &meta).await?;
    for chunk in s.entries.chunks(ENCODE_CHUNK) {
        let rows: Vec<(StreamId, Vec<u8>)> = chunk
            .iter()
            .map(|(id, pairs)| (*id, encode_fields(pairs.iter().map(Vec::as_slice))))
            .collect();
        insert_rows(
            cx,
            &rows,
            |(_, f)| f.len(),
            4,
            insert_entries,
            |(id, f), p| {
                p.push(Param::UInt(kid));
                p.push(Param::UInt(id.ms));
                p.push(Param::UInt(id.seq));
                p.push(Param::Bytes(f));
            },
        )
        .await?;
    }
    let ghs: Vec<[u8; 32]> = s.groups.iter().map(|g| hash(&g.name)).collect();
    let groups: Vec<(&[u8; 32], &Group)> = ghs.iter().zip(&s.groups).collect();
    insert_rows(
        cx,
        &groups,
        |(_, g)| g.name.len(),
        6,
        insert_groups,
        |(gh, g), p| {
            p.push(Param::UInt(kid));
            p.push(Param::Bytes(*gh));
            p.push(Param::Bytes(&g.name));
            p.push(Param::UInt(g.last.ms));
            p.push(Param::UInt(g.last.seq));
            p.push(g.entries_read.map_or(Param::Null, Param::Int));
        },
    )
    .await?;
    for (gh, g) in groups {
        let chs: Vec<[u8; 32]> = g.consumers.iter().map(|c| hash(&c.name)).collect();
        let consumers: Vec<(&[u8; 32], &Consumer)> = chs.iter().zip(&g.consumers).collect();
        insert_rows(
            cx,
            &consumers,
            |(_, c)| c.name.len(),
            5,
            insert_consumers,
            |(ch, c), p| {
                p.push(Param::UInt(kid));
                p.push(Param::Bytes(gh));
                p.push(Param::Bytes(*ch));
                p.push(Param::Bytes(&c.name));
                p.push(Param::Int(c.seen_ms));
            },
        )
        .await?;
        let pending: Vec<(&[u8; 32], &Consumer, &Pending)> = g
            .pending
            .iter()
            .filter_map(|p| Some((chs.get(p.consumer)?, g.consumers.get(p.consumer)?, p)))
            .collect();
        insert_rows(
            cx,
            &pending,
            |(_, c, _)| c.name.len(),
            8,
            insert_pending,
            |(ch, c, pe), p| {
                p.push(Param::UInt(kid));
                p.push(Param::Bytes(gh));
                p.push(Param::UInt(pe.id.ms));
                p.push(Param::UInt(pe.id.seq));
                p.push(Param::Bytes(*ch));
                p.push(Param::Bytes(&c.name));
                p.push(Param::Int(pe.delivered_ms));
                p.push(Param::UInt(pe.deliveries));
            },
        )
        .await?;
    }
    Ok(())
}
