//! `XINFO STREAM [FULL [COUNT n]]|GROUPS|CONSUMERS|HELP` (Redis 7.0.15's fields). `radix-tree-keys` and
//! `radix-tree-nodes` describe Redis's memory layout, which the tables do not have: they
//! are estimated as Redis's layout of nodes of 100 entries would give them.

use manifold_backend::Param;
use manifold_redis_proto::{Protocol, Reply};

use super::{estimate_read, first_id, id_of, load_group, Group};
use crate::cmd::checks::{self, Absent};
use crate::cmd::streams::id::StreamId;
use crate::cmd::streams::{entry_reply, load_meta, Meta};
use crate::cmd::typed::ParseError;
use crate::cmd::Args;
use crate::store::context::Cx;
use crate::store::keys::{hash, kind};
use crate::store::{int, take_bytes, StoreError};

const HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

/// `XINFO`'s subcommand, checked before the key (its name and count of arguments).
pub fn parse(args: &Args<'_>) -> Result<(), ParseError> {
    checks::subcommand(
        args,
        "XINFO",
        &[
            ("stream", "xinfo|stream", -3),
            ("groups", "xinfo|groups", 3),
            ("consumers", "xinfo|consumers", 4),
            ("help", "xinfo|help", 2),
        ],
    )
    .map(|_| ())
}

fn syntax(sub: &[u8]) -> Vec<u8> {
    let mut t = b"unknown subcommand or wrong number of arguments for '".to_vec();
    t.extend_from_slice(sub);
    t.extend_from_slice(b"'. Try XINFO HELP.");
    t
}

/// A map of `n` pairs in RESP3, a flat array in RESP2.
fn map(r: &mut Reply<'_>, n: usize) {
    if r.protocol() == Protocol::Resp3 {
        r.map_len(n);
    } else {
        r.array_len(n * 2);
    }
}

/// Redis's lag of a group (`streamReplyWithCGLag`): `None` when unknown.
fn lag(meta: &Meta, first: StreamId, length: i64, g: Group) -> Option<i64> {
    let added = i64::try_from(meta.entries_added).unwrap_or(i64::MAX);
    if meta.entries_added == 0 {
        return Some(0);
    }
    let tombstones = length > 0
        && meta.max_deleted != StreamId::ZERO
        && first <= meta.max_deleted
        && g.last <= meta.max_deleted;
    match g.entries_read {
        Some(n) if !tombstones => Some(added - n),
        _ => estimate_read(meta, first, length, g.last).map(|n| added - n),
    }
}

/// `XINFO ...`.
pub async fn xinfo(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let sub = args.get(1);
    if sub.eq_ignore_ascii_case(b"help") {
        let mut r = cx.reply();
        r.array_len(HELP.len());
        for line in HELP {
            r.simple(line.as_bytes());
        }
        return Ok(());
    }
    let key = args.get(2);
    let absent = Absent::Error(crate::cmd::rename::NO_SUCH_KEY);
    let Some(row) = checks::read_or(cx, key, kind::STREAM, absent).await? else {
        return Ok(());
    };
    let kid = row.kid;
    if sub.eq_ignore_ascii_case(b"consumers") {
        let group = args.get(3);
        let gh = hash(group);
        if load_group(cx, kid, &gh).await?.is_none() {
            let mut t = b"-NOGROUP No such consumer group '".to_vec();
            t.extend_from_slice(group);
            t.extend_from_slice(b"' for key name '");
            t.extend_from_slice(key);
            t.push(b'\'');
            cx.reply().error(&t);
            return Ok(());
        }
        let now = cx.now_ms();
        let rows = cx
            .tx
            .rows(
                "SELECT c.name, c.seen_ms, (SELECT COUNT(*) FROM {s}.redis_stream_pending p \
                 WHERE p.kid = c.kid AND p.gh = c.gh AND p.ch = c.ch) \
                 FROM {s}.redis_stream_consumer c WHERE c.kid = ? AND c.gh = ?",
                &[Param::UInt(kid), Param::Bytes(&gh)],
            )
            .await?;
        let mut consumers: Vec<(Vec<u8>, i64, i64)> = rows
            .into_iter()
            .map(|mut r| {
                (
                    r.get_mut(0).and_then(take_bytes).unwrap_or_default(),
                    r.get(1).and_then(int).unwrap_or(now),
                    r.get(2).and_then(int).unwrap_or(0),
                )
            })
            .collect();
        consumers.sort();
        let mut r = cx.reply();
        r.array_len(consumers.len());
        for (name, seen, pending) in consumers {
            map(&mut r, 3);
            r.bulk(b"name").bulk(&name);
            r.bulk(b"pending").integer(pending);
            r.bulk(b"idle").integer(now.saturating_sub(seen).max(0));
        }
        return Ok(());
    }
    let meta = load_meta(cx, kid).await?;
    let first = first_id(cx, kid).await?;
    let length = row.len;
    if sub.eq_ignore_ascii_case(b"groups") {
        let rows = cx
            .tx
            .rows(
                "SELECT g.name, g.last_ms, g.last_seq, g.entries_read, \
                 (SELECT COUNT(*) FROM {s}.redis_stream_consumer c WHERE c.kid = g.kid AND c.gh = g.gh), \
                 (SELECT COUNT(*) FROM {s}.redis_stream_pending p WHERE p.kid = g.kid AND p.gh = g.gh) \
                 FROM {s}.redis_stream_group g WHERE g.kid = ?",
                &[Param::UInt(kid)],
            )
            .await?;
        let mut groups: Vec<(Vec<u8>, Group, i64, i64)> = rows
            .into_iter()
            .map(|mut r| {
                (
                    r.get_mut(0).and_then(take_bytes).unwrap_or_default(),
                    Group {
                        last: id_of(&r, 1),
                        entries_read: r.get(3).and_then(int),
                    },
                    r.get(4).and_then(int).unwrap_or(0),
                    r.get(5).and_then(int).unwrap_or(0),
                )
            })
            .collect();
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        let first = first.unwrap_or_default();
        let mut r = cx.reply();
        r.array_len(groups.len());
        for (name, g, consumers, pending) in groups {
            map(&mut r, 6);
            r.bulk(b"name").bulk(&name);
            r.bulk(b"consumers").integer(consumers);
            r.bulk(b"pending").integer(pending);
            r.bulk(b"last-delivered-id").bulk(g.last.text().as_bytes());
            r.bulk(b"entries-read");
            match g.entries_read {
                Some(n) => r.integer(n),
                None => r.null(),
            };
            r.bulk(b"lag");
            match lag(&meta, first, length, g) {
                Some(n) => r.integer(n),
                None => r.null(),
            };
        }
        return Ok(());
    }
    // STREAM [FULL [COUNT n]].
    if args.len() > 3 {
        let full_ok = args.get(3).eq_ignore_ascii_case(b"full")
            && (args.len() == 4 || (args.len() == 6 && args.get(4).eq_ignore_ascii_case(b"count")));
        if !full_ok {
            cx.reply().error(&syntax(sub));
            return Ok(());
        }
        let mut count = 10u64;
        if args.len() == 6 {
            let Some(n) = crate::cmd::parse_i64(args.get(5)) else {
                cx.reply().error(crate::errors::NOT_INTEGER);
                return Ok(());
            };
            count = if n < 0 { 10 } else { n as u64 };
        }
        let first = first.unwrap_or_default();
        return full(cx, kid, &meta, first, length, count).await;
    }
    let groups = cx
        .tx
        .int(
            "SELECT COUNT(*) FROM {s}.redis_stream_group WHERE kid = ?",
            &[Param::UInt(kid)],
        )
        .await?
        .unwrap_or(0);
    let edge = |desc: bool| {
        if desc {
            "SELECT ms, seq, fields FROM {s}.redis_stream WHERE kid = ? ORDER BY ms DESC, seq DESC LIMIT 1"
        } else {
            "SELECT ms, seq, fields FROM {s}.redis_stream WHERE kid = ? ORDER BY ms, seq LIMIT 1"
        }
    };
    let first_entry = cx.tx.rows(edge(false), &[Param::UInt(kid)]).await?;
    let last_entry = cx.tx.rows(edge(true), &[Param::UInt(kid)]).await?;
    let mut r = cx.reply();
    map(&mut r, 10);
    stream_head(&mut r, &meta, length, first.unwrap_or_default());
    r.bulk(b"groups").integer(groups);
    for (name, rows) in [
        (&b"first-entry"[..], first_entry),
        (b"last-entry", last_entry),
    ] {
        r.bulk(name);
        match rows.into_iter().next() {
            Some(row) => {
                entry_reply(&mut r, row);
            }
            None => {
                r.null();
            }
        }
    }
    Ok(())
}

/// The fields `XINFO STREAM` and its `FULL` form open with: the length, Redis's radix tree
/// figures (a node per 100 entries, its default `stream-node-max-entries`) and the IDs and
/// counters of the stream's meta row.
fn stream_head(r: &mut Reply<'_>, meta: &Meta, length: i64, first: StreamId) {
    let nodes = (length.max(0) + 99) / 100;
    r.bulk(b"length").integer(length);
    r.bulk(b"radix-tree-keys").integer(nodes);
    r.bulk(b"radix-tree-nodes").integer(nodes + 1);
    r.bulk(b"last-generated-id")
        .bulk(meta.last.text().as_bytes());
    r.bulk(b"max-deleted-entry-id")
        .bulk(meta.max_deleted.text().as_bytes());
    r.bulk(b"entries-added")
        .integer(i64::try_from(meta.entries_added).unwrap_or(i64::MAX));
    r.bulk(b"recorded-first-entry-id")
        .bulk(first.text().as_bytes());
}

/// `XINFO STREAM key FULL [COUNT n]`: the stream's fields, then up to `count` entries (0:
/// all), and each group with up to `count` of its pending entries and its consumers with
/// up to `count` of theirs.
async fn full(
    cx: &mut Cx<'_>,
    kid: u64,
    meta: &Meta,
    first: StreamId,
    length: i64,
    count: u64,
) -> Result<(), StoreError> {
    let limit = if count == 0 { u64::MAX } else { count };
    let (entries, _) = cx
        .rows_for_reply(
            "SELECT ms, seq, fields FROM {s}.redis_stream WHERE kid = ? ORDER BY ms, seq LIMIT ?",
            &[Param::UInt(kid), Param::UInt(limit)],
            8,
        )
        .await?;
    let groups = cx
        .tx
        .rows(
            "SELECT g.gh, g.name, g.last_ms, g.last_seq, g.entries_read, \
             (SELECT COUNT(*) FROM {s}.redis_stream_pending p WHERE p.kid = g.kid AND p.gh = g.gh) \
             FROM {s}.redis_stream_group g WHERE g.kid = ?",
            &[Param::UInt(kid)],
        )
        .await?;
    let mut groups: Vec<(Vec<u8>, Vec<u8>, Group, i64)> = groups
        .into_iter()
        .map(|mut r| {
            (
                r.get_mut(1).and_then(take_bytes).unwrap_or_default(),
                r.get_mut(0).and_then(take_bytes).unwrap_or_default(),
                Group {
                    last: id_of(&r, 2),
                    entries_read: r.get(4).and_then(int),
                },
                r.get(5).and_then(int).unwrap_or(0),
            )
        })
        .collect();
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    {
        let mut r = cx.reply();
        map(&mut r, 9);
        stream_head(&mut r, meta, length, first);
        r.bulk(b"entries").array_len(entries.len());
        for e in entries {
            entry_reply(&mut r, e);
        }
        r.bulk(b"groups").array_len(groups.len());
    }
    for (name, gh, g, pel) in groups {
        let pending = cx
            .tx
            .rows(
                "SELECT ms, seq, consumer, delivered_ms, deliveries FROM {s}.redis_stream_pending \
                 WHERE kid = ? AND gh = ? ORDER BY ms, seq LIMIT ?",
                &[Param::UInt(kid), Param::Bytes(&gh), Param::UInt(limit)],
            )
            .await?;
        let consumers = cx
            .tx
            .rows(
                "SELECT c.ch, c.name, c.seen_ms, (SELECT COUNT(*) FROM {s}.redis_stream_pending p \
                 WHERE p.kid = c.kid AND p.gh = c.gh AND p.ch = c.ch) \
                 FROM {s}.redis_stream_consumer c WHERE c.kid = ? AND c.gh = ?",
                &[Param::UInt(kid), Param::Bytes(&gh)],
            )
            .await?;
        let mut consumers: Vec<(Vec<u8>, Vec<u8>, i64, i64)> = consumers
            .into_iter()
            .map(|mut r| {
                (
                    r.get_mut(1).and_then(take_bytes).unwrap_or_default(),
                    r.get_mut(0).and_then(take_bytes).unwrap_or_default(),
                    r.get(2).and_then(int).unwrap_or(0),
                    r.get(3).and_then(int).unwrap_or(0),
                )
            })
            .collect();
        consumers.sort_by(|a, b| a.0.cmp(&b.0));
        {
            let mut r = cx.reply();
            map(&mut r, 7);
            r.bulk(b"name").bulk(&name);
            r.bulk(b"last-delivered-id").bulk(g.last.text().as_bytes());
            r.bulk(b"entries-read");
            match g.entries_read {
                Some(n) => r.integer(n),
                None => r.null(),
            };
            r.bulk(b"lag");
            match lag(meta, first, length, g) {
                Some(n) => r.integer(n),
                None => r.null(),
            };
            r.bulk(b"pel-count").integer(pel);
            r.bulk(b"pending").array_len(pending.len());
            for mut p in pending {
                let consumer = p.get_mut(2).and_then(take_bytes).unwrap_or_default();
                r.array_len(4)
                    .bulk(id_of(&p, 0).text().as_bytes())
                    .bulk(&consumer);
                r.integer(p.get(3).and_then(int).unwrap_or(0));
                r.integer(p.get(4).and_then(int).unwrap_or(0));
            }
            r.bulk(b"consumers").array_len(consumers.len());
        }
        for (cname, ch, seen, cpel) in consumers {
            let theirs = cx
                .tx
                .rows(
                    "SELECT ms, seq, delivered_ms, deliveries FROM {s}.redis_stream_pending \
                     WHERE kid = ? AND gh = ? AND ch = ? ORDER BY ms, seq LIMIT ?",
                    &[
                        Param::UInt(kid),
                        Param::Bytes(&gh),
                        Param::Bytes(&ch),
                        Param::UInt(limit),
                    ],
                )
                .await?;
            let mut r = cx.reply();
            map(&mut r, 4);
            r.bulk(b"name").bulk(&cname);
            r.bulk(b"seen-time").integer(seen);
            r.bulk(b"pel-count").integer(cpel);
            r.bulk(b"pending").array_len(theirs.len());
            for p in theirs {
                r.array_len(3).bulk(id_of(&p, 0).text().as_bytes());
                r.integer(p.get(2).and_then(int).unwrap_or(0));
                r.integer(p.get(3).and_then(int).unwrap_or(0));
            }
        }
        if cx.over_limit() {
            break;
        }
    }
    Ok(())
}
