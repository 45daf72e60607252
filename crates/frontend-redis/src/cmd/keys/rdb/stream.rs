//! Streams in the `DUMP`/`RESTORE` payload: `STREAM_LISTPACKS_2` (19, what Redis 7.0
//! writes) read and written, `STREAM_LISTPACKS` (15, Redis 5 to 6.2) read (`rdbSaveObject`,
//! `rdbLoadObject` in `rdb.c`; the listpacks' layout in `t_stream.c`).
//!
//! The entries are listpacks keyed by a master ID (16 bytes, big endian): each opens with
//! its master entry (live count, deleted count, the master fields, a 0), then its entries
//! (flags, the ID as a difference from the master ID, the fields unless the `SAMEFIELDS`
//! flag says they are the master's, the values, the count of the entry's parts). Then the
//! length, the last ID, (19:) the first ID, the largest deleted ID, the entries ever added;
//! then each consumer group: its name, last delivered ID, (19:) entries read, its PEL (IDs
//! raw, delivery time, delivery count), its consumers (name, seen time, their PEL's IDs).
//!
//! Read as Redis reads it with `sanitize-dump-payload yes` (every listpack checked in
//! depth, every PEL entry owned by a consumer), and more strictly where the door's tables
//! need it: no entry ID twice, the length the count of live entries, the last ID not below
//! an entry's (else a later `XADD` would take an ID already there), the first ID the
//! first entry's, a group's entries read -1 (unknown) or a count. Bounded as the other
//! types ([`super::Budget`]), and in counts ([`MAX_ENTRIES`]...): a payload's groups,
//! consumers and pending entries are rows the door writes in one transaction.

use std::collections::{BTreeMap, HashSet};

use super::{rdb_type, Reader, Writer, ELEMENT_COST};
use crate::cmd::streams::StreamId;

/// Most entries a restored stream may have.
pub const MAX_ENTRIES: usize = 10_000_000;
/// Most consumer groups.
pub const MAX_GROUPS: usize = 10_000;
/// Most consumers, all groups together.
pub const MAX_CONSUMERS: usize = 1_000_000;
/// Most pending entries, all groups together.
pub const MAX_PENDING: usize = 10_000_000;

/// `RESTORE`'s text past one of the counts.
pub const TOO_MANY: &[u8] = b"stream too large to restore: more than 10000000 entries, 10000 groups, 1000000 consumers or 10000000 pending entries";

/// An entry's flags (`t_stream.c`).
const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

/// Entries per listpack written (Redis's `stream-node-max-entries`), and the bytes past
/// which a listpack takes no further entry (`stream-node-max-bytes`).
const NODE_ENTRIES: u64 = 100;
const NODE_BYTES: usize = 4096;

/// A stream read from a payload.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stream {
    /// The live entries in ID order: the ID, then field, value, field, value...
    pub entries: Vec<(StreamId, Vec<Vec<u8>>)>,
    pub last: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    pub groups: Vec<Group>,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Group {
    pub name: Vec<u8>,
    pub last: StreamId,
    /// `None`: unknown (Redis's -1).
    pub entries_read: Option<i64>,
    pub consumers: Vec<Consumer>,
    /// The PEL in ID order.
    pub pending: Vec<Pending>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Consumer {
    pub name: Vec<u8>,
    /// Unix ms.
    pub seen_ms: i64,
}

/// An entry delivered, not acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pending {
    pub id: StreamId,
    /// Unix ms of its last delivery.
    pub delivered_ms: i64,
    pub deliveries: u64,
    /// Its consumer: an index into the group's `consumers`.
    pub consumer: usize,
}

/// Why a stream was refused beyond the reader's own reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRefused {
    Format,
    TooMany,
}

/// The running counts checked against the `MAX_*` bounds.
#[derive(Default)]
struct Counts {
    consumers: usize,
    pending: usize,
}

fn raw_id(b: &[u8]) -> Option<StreamId> {
    let ms = u64::from_be_bytes(b.get(0..8)?.try_into().ok()?);
    let seq = u64::from_be_bytes(b.get(8..16)?.try_into().ok()?);
    Some(StreamId::new(ms, seq))
}

fn int(e: &[u8]) -> Option<i64> {
    crate::cmd::parse_i64(e)
}

fn count(e: &[u8]) -> Option<usize> {
    usize::try_from(int(e)?).ok()
}

/// The live entries of one listpack of master ID `master` (its elements), appended to
/// `out`, as `streamValidateListpackIntegrity` checks them in depth. The master fields an
/// entry takes (`SAMEFIELDS`) are counted in `budget` again for each: a long field name in
/// the master entry would otherwise make many times its size once decoded.
fn node(
    master: StreamId,
    lp: &[Vec<u8>],
    out: &mut Vec<(StreamId, Vec<Vec<u8>>)>,
    budget: &mut super::Budget,
) -> Option<()> {
    let mut parts = lp.iter();
    let mut next = || parts.next().map(Vec::as_slice);
    let live = count(next()?)?;
    let deleted = count(next()?)?;
    let master_fields = count(next()?)?;
    let mut fields = Vec::with_capacity(master_fields.min(lp.len()));
    for _ in 0..master_fields {
        fields.push(next()?);
    }
    if int(next()?)? != 0 {
        return None;
    }
    let total = live.checked_add(deleted)?;
    let mut seen_live = 0usize;
    for _ in 0..total {
        let flags = int(next()?)?;
        let id = StreamId::new(
            master.ms.wrapping_add(int(next()?)? as u64),
            master.seq.wrapping_add(int(next()?)? as u64),
        );
        let same = flags & FLAG_SAMEFIELDS != 0;
        let n = if same { master_fields } else { count(next()?)? };
        // Refused before anything is allocated for more parts than the listpack has.
        if n > lp.len() {
            return None;
        }
        let mut pairs = Vec::with_capacity(2 * n);
        let mut master_names = fields.iter();
        for _ in 0..n {
            let field = if same {
                let f = *master_names.next()?;
                budget.element(f.len())?;
                f
            } else {
                next()?
            };
            pairs.push(field.to_vec());
            pairs.push(next()?.to_vec());
        }
        let parts = if same { n + 3 } else { 2 * n + 4 };
        if count(next()?)? != parts {
            return None;
        }
        if flags & FLAG_DELETED == 0 {
            seen_live += 1;
            out.push((id, pairs));
        }
    }
    // Nothing after the last entry; the live count as the flags tell.
    (next().is_none() && seen_live == live).then_some(())
}

impl Reader<'_> {
    /// The stream after its type byte (`STREAM_LISTPACKS` or `STREAM_LISTPACKS_2`).
    pub(super) fn stream(&mut self, kind: u8) -> Result<Stream, StreamRefused> {
        let mut counts = Counts::default();
        let mut s = Stream::default();
        let f = StreamRefused::Format;
        let nodes = self.count().ok_or(f)?;
        let mut masters = HashSet::new();
        for _ in 0..nodes {
            let key = self.string().ok_or(f)?;
            if key.len() != 16 {
                return Err(f);
            }
            let master = raw_id(&key).ok_or(f)?;
            if !masters.insert(master) {
                return Err(f);
            }
            let blob = self.string().ok_or(f)?;
            let mut elements = Vec::new();
            super::listpack(&blob, |e| {
                self.budget.element(e.len())?;
                elements.push(e);
                Some(())
            })
            .ok_or(f)?;
            if elements.is_empty() {
                return Err(f);
            }
            node(master, &elements, &mut s.entries, &mut self.budget).ok_or(f)?;
            if s.entries.len() > MAX_ENTRIES {
                return Err(StreamRefused::TooMany);
            }
        }
        // Each entry is a row beside its fields.
        self.budget
            .charge((s.entries.len() as u64).saturating_mul(ELEMENT_COST))
            .ok_or(f)?;
        s.entries.sort_by_key(|e| e.0);
        if s.entries.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(f);
        }
        let length = self.len().ok_or(f)?;
        if length != s.entries.len() as u64 {
            return Err(f);
        }
        s.last = self.id().ok_or(f)?;
        if s.entries.last().is_some_and(|e| e.0 > s.last) {
            return Err(f);
        }
        let v2 = kind == rdb_type::STREAM_LISTPACKS_2;
        if v2 {
            // The first ID: the first live entry's, 0-0 for an empty stream (or the largest
            // ID: Redis 7.0's record of an empty stream it read from 6.x); the door takes it
            // from its entries, and Redis's counters from this one.
            let first = self.id().ok_or(f)?;
            let consistent = match s.entries.first() {
                Some(e) => first == e.0,
                None => first == StreamId::ZERO || first == StreamId::MAX,
            };
            if !consistent {
                return Err(f);
            }
            s.max_deleted = self.id().ok_or(f)?;
            s.entries_added = self.len().ok_or(f)?;
        } else {
            s.entries_added = length;
        }
        let groups = self.count().ok_or(f)?;
        if groups > MAX_GROUPS {
            return Err(StreamRefused::TooMany);
        }
        let mut names = HashSet::new();
        for _ in 0..groups {
            let g = self.group(&s, v2, &mut counts)?;
            if !names.insert(g.name.clone()) {
                return Err(f);
            }
            s.groups.push(g);
        }
        Ok(s)
    }

    /// An ID as two lengths.
    fn id(&mut self) -> Option<StreamId> {
        Some(StreamId::new(self.len()?, self.len()?))
    }

    fn millis(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn group(&mut self, s: &Stream, v2: bool, counts: &mut Counts) -> Result<Group, StreamRefused> {
        let f = StreamRefused::Format;
        let name = self.string().ok_or(f)?;
        let last = self.id().ok_or(f)?;
        let entries_read = if v2 {
            // Written as an unsigned length; -1 (unknown) as its 64-bit pattern, any other
            // negative count refused (Redis would keep it, and count on from it).
            match self.len().ok_or(f)? {
                u64::MAX => None,
                n => Some(i64::try_from(n).map_err(|_| f)?),
            }
        } else {
            let meta = crate::cmd::streams::Meta {
                last: s.last,
                max_deleted: StreamId::ZERO,
                entries_added: s.entries_added,
            };
            let first = s.entries.first().map_or(StreamId::MAX, |e| e.0);
            let length = i64::try_from(s.entries.len()).unwrap_or(i64::MAX);
            crate::cmd::streams::estimate_read(&meta, first, length, last)
        };
        self.budget.charge(ELEMENT_COST).ok_or(f)?;
        // The PEL: (delivery time, count, consumer) by ID.
        let n = self.count().ok_or(f)?;
        counts.pending = counts.pending.saturating_add(n);
        if counts.pending > MAX_PENDING {
            return Err(StreamRefused::TooMany);
        }
        let mut pel: BTreeMap<StreamId, Pending> = BTreeMap::new();
        for _ in 0..n {
            let id = raw_id(self.take(16).ok_or(f)?).ok_or(f)?;
            let delivered_ms = self.millis().ok_or(f)?;
            let deliveries = self.len().ok_or(f)?;
            self.budget.charge(ELEMENT_COST).ok_or(f)?;
            let p = Pending {
                id,
                delivered_ms,
                deliveries,
                consumer: usize::MAX,
            };
            if pel.insert(id, p).is_some() {
                return Err(f);
            }
        }
        let n = self.count().ok_or(f)?;
        counts.consumers = counts.consumers.saturating_add(n);
        if counts.consumers > MAX_CONSUMERS {
            return Err(StreamRefused::TooMany);
        }
        let mut consumers = Vec::with_capacity(n);
        let mut names = HashSet::new();
        for i in 0..n {
            let name = self.string().ok_or(f)?;
            let seen_ms = self.millis().ok_or(f)?;
            if !names.insert(name.clone()) {
                return Err(f);
            }
            let owned = self.count().ok_or(f)?;
            for _ in 0..owned {
                let id = raw_id(self.take(16).ok_or(f)?).ok_or(f)?;
                // Each pending row names its consumer.
                self.budget.charge(name.len() as u64).ok_or(f)?;
                // In the group's PEL, and no one else's.
                let p = pel.get_mut(&id).ok_or(f)?;
                if p.consumer != usize::MAX {
                    return Err(f);
                }
                p.consumer = i;
            }
            consumers.push(Consumer { name, seen_ms });
        }
        if pel.values().any(|p| p.consumer == usize::MAX) {
            return Err(f);
        }
        Ok(Group {
            name,
            last,
            entries_read: entries_read.filter(|&n| n >= 0),
            consumers,
            pending: pel.into_values().collect(),
        })
    }
}

/// A listpack element: a string (`lpEncodeString`).
fn lp_string(out: &mut Vec<u8>, s: &[u8]) {
    let start = out.len();
    let n = s.len();
    if n < 64 {
        out.push(0x80 | n as u8);
    } else if n < 4096 {
        out.push(0xe0 | (n >> 8) as u8);
        out.push(n as u8);
    } else {
        out.push(0xf0);
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    out.extend_from_slice(s);
    let len = out.len() - start;
    out.extend_from_slice(&super::backlen(len));
}

/// A listpack element: an integer in its shortest encoding (`lpEncodeIntegerGetType`).
fn lp_int(out: &mut Vec<u8>, v: i64) {
    let start = out.len();
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = if v < 0 { (1 << 13) + v } else { v } as u16;
        out.push(0xc0 | (u >> 8) as u8);
        out.push(u as u8);
    } else {
        let (tag, width) = if i16::try_from(v).is_ok() {
            (0xf1, 2)
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            (0xf2, 3)
        } else if i32::try_from(v).is_ok() {
            (0xf3, 4)
        } else {
            (0xf4, 8)
        };
        out.push(tag);
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    let len = out.len() - start;
    out.extend_from_slice(&super::backlen(len));
}

/// The listpack being filled with entries.
struct Node {
    master: StreamId,
    master_fields: Vec<Vec<u8>>,
    /// The entries' elements, encoded.
    body: Vec<u8>,
    elements: usize,
    entries: u64,
}

impl Node {
    /// The listpack: header, master entry, entries, terminator.
    fn listpack(&self) -> Vec<u8> {
        let mut head = Vec::new();
        lp_int(&mut head, self.entries as i64);
        lp_int(&mut head, 0);
        lp_int(&mut head, self.master_fields.len() as i64);
        for f in &self.master_fields {
            lp_string(&mut head, f);
        }
        lp_int(&mut head, 0);
        let elements = self.elements + 4 + self.master_fields.len();
        let total = 6 + head.len() + self.body.len() + 1;
        let mut lp = Vec::with_capacity(total);
        lp.extend_from_slice(&(total as u32).to_le_bytes());
        lp.extend_from_slice(&(elements.min(usize::from(u16::MAX)) as u16).to_le_bytes());
        lp.extend_from_slice(&head);
        lp.extend_from_slice(&self.body);
        lp.push(0xff);
        lp
    }
}

/// Writes a stream payload (`STREAM_LISTPACKS_2`): [`StreamWriter::entry`] for each entry
/// in ID order, [`StreamWriter::state`], [`StreamWriter::group`] for each group (as many
/// as `state` said), then [`StreamWriter::finish`].
pub struct StreamWriter {
    w: Writer,
    node: Option<Node>,
    nodes: u64,
}

impl Default for StreamWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamWriter {
    pub fn new() -> Self {
        let mut w = Writer::new(rdb_type::STREAM_LISTPACKS_2);
        w.count_ahead();
        StreamWriter {
            w,
            node: None,
            nodes: 0,
        }
    }

    /// The bytes written so far (the listpack being filled not counted).
    pub fn size(&self) -> usize {
        self.w.size() + self.node.as_ref().map_or(0, |n| n.body.len())
    }

    /// The next entry (IDs ascending): `pairs` field, value, field, value...
    pub fn entry(&mut self, id: StreamId, pairs: &[&[u8]]) {
        let node = self.node.get_or_insert_with(|| Node {
            master: id,
            master_fields: pairs.iter().step_by(2).map(|f| f.to_vec()).collect(),
            body: Vec::new(),
            elements: 0,
            entries: 0,
        });
        let n = pairs.len() / 2;
        let same = n == node.master_fields.len()
            && pairs
                .iter()
                .step_by(2)
                .zip(&node.master_fields)
                .all(|(a, b)| *a == &b[..]);
        let body = &mut node.body;
        lp_int(body, if same { FLAG_SAMEFIELDS } else { 0 });
        lp_int(body, id.ms.wrapping_sub(node.master.ms) as i64);
        lp_int(body, id.seq.wrapping_sub(node.master.seq) as i64);
        if !same {
            lp_int(body, n as i64);
        }
        for pair in pairs.chunks_exact(2) {
            if !same {
                lp_string(body, pair[0]);
            }
            lp_string(body, pair[1]);
        }
        let parts = if same { n + 3 } else { 2 * n + 4 };
        lp_int(body, parts as i64);
        node.elements += parts + 1;
        node.entries += 1;
        if node.entries >= NODE_ENTRIES || node.body.len() >= NODE_BYTES {
            self.close_node();
        }
    }

    fn close_node(&mut self) {
        if let Some(node) = self.node.take() {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&node.master.ms.to_be_bytes());
            key[8..].copy_from_slice(&node.master.seq.to_be_bytes());
            self.w.string(&key);
            self.w.string(&node.listpack());
            self.nodes += 1;
        }
    }

    fn id(&mut self, id: StreamId) {
        self.w.len(id.ms);
        self.w.len(id.seq);
    }

    /// After the entries: the stream's length, IDs, counters and its number of groups.
    pub fn state(&mut self, length: u64, s: &Stream, first: StreamId, groups: usize) {
        self.close_node();
        self.w.len(length);
        self.id(s.last);
        self.id(first);
        self.id(s.max_deleted);
        self.w.len(s.entries_added);
        self.w.len(groups as u64);
    }

    /// A group (its PEL in ID order).
    pub fn group(&mut self, g: &Group) {
        self.w.string(&g.name);
        self.id(g.last);
        self.w.len(g.entries_read.map_or(u64::MAX, |n| n as u64));
        self.w.len(g.pending.len() as u64);
        for p in &g.pending {
            self.raw_id(p.id);
            self.w.out.extend_from_slice(&p.delivered_ms.to_le_bytes());
            self.w.len(p.deliveries);
        }
        let mut owned = vec![Vec::new(); g.consumers.len()];
        for p in &g.pending {
            if let Some(ids) = owned.get_mut(p.consumer) {
                ids.push(p.id);
            }
        }
        self.w.len(g.consumers.len() as u64);
        for (c, ids) in g.consumers.iter().zip(owned) {
            self.w.string(&c.name);
            self.w.out.extend_from_slice(&c.seen_ms.to_le_bytes());
            self.w.len(ids.len() as u64);
            for id in ids {
                self.raw_id(id);
            }
        }
    }

    fn raw_id(&mut self, id: StreamId) {
        self.w.out.extend_from_slice(&id.ms.to_be_bytes());
        self.w.out.extend_from_slice(&id.seq.to_be_bytes());
    }

    /// The payload.
    pub fn finish(self) -> Vec<u8> {
        let nodes = self.nodes;
        self.w.finish(nodes)
    }
}

/// A whole payload of `s` (tests, and callers holding the stream in memory).
pub fn encode(s: &Stream) -> Vec<u8> {
    let mut w = StreamWriter::new();
    for (id, pairs) in &s.entries {
        let pairs: Vec<&[u8]> = pairs.iter().map(Vec::as_slice).collect();
        w.entry(*id, &pairs);
    }
    let first = s.entries.first().map_or(StreamId::ZERO, |e| e.0);
    w.state(s.entries.len() as u64, s, first, s.groups.len());
    for g in &s.groups {
        w.group(g);
    }
    w.finish()
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
