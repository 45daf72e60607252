//! The stream codec: a payload redis-server 7.0.15 wrote, round trips of streams built
//! here, the older `STREAM_LISTPACKS`, and malformed payloads (refused, never a panic).

use super::super::tests::{b, hex};
use super::super::{decode, rdb_type, Refused, Value, Writer, RDB_VERSION};
use super::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

const LIMIT: u64 = 256 << 20;

/// A payload of `body` with its footer.
fn payload(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = super::super::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn stream_of(payload: &[u8]) -> Result<Stream, Refused> {
    match decode(payload, LIMIT)? {
        Value::Stream(s) => Ok(*s),
        other => panic!("not a stream: {other:?}"),
    }
}

/// redis-server 7.0.15: `XADD s 1-1 f v n 5`, `XADD s 1-2 f w n 6`, `XADD s 2-0 other x`,
/// `XDEL s 1-2`, `XGROUP CREATE s g 0`, `XREADGROUP GROUP g alice COUNT 1 STREAMS s >`,
/// `XGROUP CREATECONSUMER s g bob`, `DUMP s`.
const REDIS_DUMP: &str = "130110000000000000000100000000000000014044440000001900020101010201816602816e020001020100010001817602050105010301000101018177020601050100010101dfff020101856f74686572068178020601ff0202000101010203010167010181ffffffffffffffff01000000000000000100000000000000013ef1d125a2010000010205616c6963653ef1d125a2010000010000000000000001000000000000000103626f6242f1d125a2010000000a0046c7a20255f8c8b7";

#[test]
fn reads_what_redis_7_0_dumps() {
    let s = stream_of(&hex(REDIS_DUMP)).unwrap();
    // The deleted entry (1-2) is a tombstone in its listpack: not read.
    assert_eq!(
        s.entries,
        vec![
            (id(1, 1), vec![b("f"), b("v"), b("n"), b("5")]),
            (id(2, 0), vec![b("other"), b("x")]),
        ]
    );
    assert_eq!(s.last, id(2, 0));
    assert_eq!(s.max_deleted, id(1, 2));
    assert_eq!(s.entries_added, 3);
    assert_eq!(s.groups.len(), 1);
    let g = &s.groups[0];
    assert_eq!(g.name, b("g"));
    assert_eq!(g.last, id(1, 1));
    assert_eq!(g.entries_read, None);
    assert_eq!(
        g.consumers
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>(),
        vec![b("alice"), b("bob")]
    );
    assert_eq!(g.pending.len(), 1);
    let p = g.pending[0];
    assert_eq!((p.id, p.deliveries, p.consumer), (id(1, 1), 1, 0));
    assert_eq!(p.delivered_ms, g.consumers[0].seen_ms);
    // Written back and read again, the same.
    assert_eq!(stream_of(&encode(&s)), Ok(s));
}

/// A stream of `n` entries over several listpacks: fields as the master's or not, values
/// long and short, IDs whose sequence falls as the milliseconds grow.
fn sample(n: u64) -> Stream {
    let mut entries = Vec::new();
    for i in 0..n {
        let pairs = match i % 4 {
            0 | 1 => vec![
                b("f"),
                format!("v{i}").into_bytes(),
                b("n"),
                i.to_string().into_bytes(),
            ],
            2 => vec![b("other"), vec![b'x'; (i as usize * 37) % 5000]],
            _ => vec![
                b("a"),
                b(""),
                b("b"),
                b("-12345678901"),
                b("c"),
                vec![0, 255, 7],
            ],
        };
        entries.push((id(1000 + i / 3, (i % 3 + 1) * 1_000_000_000_000), pairs));
    }
    let last = entries.last().map_or(id(5, 5), |e| e.0);
    Stream {
        entries,
        last,
        max_deleted: id(3, 9),
        entries_added: n + 4,
        groups: vec![
            Group {
                name: b("readers"),
                last: id(1001, 0),
                entries_read: Some(3),
                consumers: vec![
                    Consumer {
                        name: b("alice"),
                        seen_ms: 1_700_000_000_123,
                    },
                    Consumer {
                        name: b("bob"),
                        seen_ms: -5,
                    },
                    Consumer {
                        name: b("idle"),
                        seen_ms: 0,
                    },
                ],
                pending: vec![
                    Pending {
                        id: id(1, 1),
                        delivered_ms: 1_700_000_000_000,
                        deliveries: 3,
                        consumer: 1,
                    },
                    Pending {
                        id: id(1000, 3_000_000_000_000),
                        delivered_ms: 42,
                        deliveries: u64::MAX,
                        consumer: 0,
                    },
                    Pending {
                        id: id(u64::MAX, u64::MAX),
                        delivered_ms: i64::MIN,
                        deliveries: 0,
                        consumer: 1,
                    },
                ],
            },
            Group {
                name: b("empty"),
                last: StreamId::ZERO,
                entries_read: None,
                ..Group::default()
            },
        ],
    }
}

#[test]
fn streams_written_here_read_back_the_same() {
    for n in [0, 1, 2, 99, 100, 101, 250, 1000] {
        let s = sample(n);
        let data = encode(&s);
        assert_eq!(data[0], rdb_type::STREAM_LISTPACKS_2);
        assert_eq!(stream_of(&data), Ok(s), "{n} entries");
    }
    // IDs at the ends of the range, deltas that wrap.
    let s = Stream {
        entries: vec![
            (id(0, 1), vec![b("a"), b("1")]),
            (id(0, u64::MAX), vec![b("a"), b("2")]),
            (id(u64::MAX, 0), vec![b("a"), b("3")]),
        ],
        last: id(u64::MAX, u64::MAX),
        ..Stream::default()
    };
    assert_eq!(stream_of(&encode(&s)), Ok(s));
}

#[test]
fn listpacks_hold_100_entries_or_4096_bytes() {
    let mut w = StreamWriter::new();
    for i in 0..250 {
        w.entry(id(i, 0), &[b"f", b"v"]);
    }
    assert_eq!(w.nodes, 2);
    for i in 250..254 {
        w.entry(id(i, 0), &[b"f", &[b'x'; 1000]]);
    }
    // 50 small entries, then 4 of 1000 bytes closed the third listpack.
    assert_eq!(w.nodes, 3);
}

#[test]
fn integers_take_listpack_encodings_redis_reads() {
    for v in [
        0,
        127,
        128,
        -1,
        -4096,
        4095,
        4096,
        -4097,
        32767,
        -32768,
        32768,
        (1 << 23) - 1,
        -(1 << 23),
        1 << 23,
        i64::from(i32::MAX),
        i64::from(i32::MIN),
        i64::from(i32::MAX) + 1,
        i64::MAX,
        i64::MIN,
    ] {
        let mut body = Vec::new();
        lp_int(&mut body, v);
        let mut lp = Vec::new();
        lp.extend_from_slice(&((6 + body.len() + 1) as u32).to_le_bytes());
        lp.extend_from_slice(&1u16.to_le_bytes());
        lp.extend_from_slice(&body);
        lp.push(0xff);
        let mut got = Vec::new();
        super::super::listpack(&lp, |e| {
            got.push(e);
            Some(())
        })
        .unwrap();
        assert_eq!(got, vec![v.to_string().into_bytes()], "{v}");
    }
}

/// `s` as Redis 5 to 6.2 write it (`STREAM_LISTPACKS`): no first ID, largest deleted ID,
/// entries added, nor groups' entries read.
fn v1_payload(s: &Stream) -> Vec<u8> {
    let mut sw = StreamWriter::new();
    sw.w.out[0] = rdb_type::STREAM_LISTPACKS;
    for (i, pairs) in &s.entries {
        let pairs: Vec<&[u8]> = pairs.iter().map(Vec::as_slice).collect();
        sw.entry(*i, &pairs);
    }
    sw.close_node();
    sw.w.len(s.entries.len() as u64);
    sw.id(s.last);
    sw.w.len(s.groups.len() as u64);
    for g in &s.groups {
        let mut v2 = StreamWriter::new();
        v2.group(g);
        // The group as 19 writes it (after the type and node count), less its entries read
        // (1 byte for a small count, 9 for -1).
        let written = &v2.w.out[10..];
        let mut head = Writer::new(0);
        head.string(&g.name);
        head.len(g.last.ms);
        head.len(g.last.seq);
        let head = head.out.len() - 1;
        let read = if g.entries_read.is_some() { 1 } else { 9 };
        sw.w.out.extend_from_slice(&written[..head]);
        sw.w.out.extend_from_slice(&written[head + read..]);
    }
    let nodes = sw.nodes;
    sw.w.finish(nodes)
}

#[test]
fn reads_redis_6_streams() {
    let mut s = sample(150);
    s.groups[0].entries_read = Some(1);
    let got = stream_of(&v1_payload(&s)).unwrap();
    // Entries added: the length; no deleted ID; a group's entries read estimated as
    // Redis does (`streamEstimateDistanceFromFirstEverEntry`).
    assert_eq!(got.entries, s.entries);
    assert_eq!(got.entries_added, 150);
    assert_eq!(got.max_deleted, StreamId::ZERO);
    assert_eq!(got.groups[0].pending, s.groups[0].pending);
    assert_eq!(got.groups[0].consumers, s.groups[0].consumers);
    // The group at 1001-0, inside the stream: not known.
    assert_eq!(got.groups[0].entries_read, None);
    // At 0-0, before the first entry: none read.
    assert_eq!(got.groups[1].entries_read, Some(0));
    // At the last ID: all read.
    s.groups[1].last = s.last;
    let got = stream_of(&v1_payload(&s)).unwrap();
    assert_eq!(got.groups[1].entries_read, Some(150));
}

/// Builds a type-19 payload by hand: `nodes` (master ID, listpack elements), then `tail`.
fn hand(nodes: &[(StreamId, Vec<Element>)], tail: &[u8]) -> Vec<u8> {
    let mut w = Writer::new(rdb_type::STREAM_LISTPACKS_2);
    w.len(nodes.len() as u64);
    for (master, elements) in nodes {
        let mut key = master.ms.to_be_bytes().to_vec();
        key.extend_from_slice(&master.seq.to_be_bytes());
        w.string(&key);
        let mut body = Vec::new();
        for e in elements {
            match e {
                Element::I(v) => lp_int(&mut body, *v),
                Element::S(s) => lp_string(&mut body, s.as_bytes()),
            }
        }
        let mut lp = ((6 + body.len() + 1) as u32).to_le_bytes().to_vec();
        lp.extend_from_slice(&(elements.len() as u16).to_le_bytes());
        lp.extend_from_slice(&body);
        lp.push(0xff);
        w.string(&lp);
    }
    w.out.extend_from_slice(tail);
    w.finish(0)
}

#[derive(Clone)]
enum Element {
    I(i64),
    S(&'static str),
}
use Element::{I, S};

/// A listpack of one entry `f v` at the master ID, its fields the master's.
fn one_entry() -> Vec<Element> {
    vec![
        I(1),
        I(0),
        I(1),
        S("f"),
        I(0),
        I(2),
        I(0),
        I(0),
        S("v"),
        I(4),
    ]
}

/// length 1, last 5-0, first 5-0, max deleted 0-0, added 1, no groups.
const TAIL_ONE: &[u8] = &[1, 5, 0, 5, 0, 0, 0, 1, 0];

#[test]
fn hand_built_payloads_read_as_redis_reads_them() {
    let ok = hand(&[(id(5, 0), one_entry())], TAIL_ONE);
    let s = stream_of(&ok).unwrap();
    assert_eq!(s.entries, vec![(id(5, 0), vec![b("f"), b("v")])]);
    // Integers written as strings are integers to Redis (`lpGetIntegerIfValid`).
    let mut e = one_entry();
    e[0] = S("1");
    e[9] = S("4");
    assert!(stream_of(&hand(&[(id(5, 0), e)], TAIL_ONE)).is_ok());
    // An entry with its own fields.
    let e = vec![
        I(1),
        I(0),
        I(1),
        S("f"),
        I(0),
        I(0),
        I(0),
        I(0),
        I(2),
        S("x"),
        S("1"),
        S("y"),
        S("2"),
        I(8),
    ];
    let s = stream_of(&hand(&[(id(5, 0), e)], TAIL_ONE)).unwrap();
    assert_eq!(s.entries[0].1, vec![b("x"), b("1"), b("y"), b("2")]);
}

#[test]
fn malformed_streams_are_refused() {
    let f = Err(Refused::Format);
    let bad = |elements: Vec<Element>| stream_of(&hand(&[(id(5, 0), elements)], TAIL_ONE));
    // A wrong entry part count, live count, trailing element, master terminator, flags.
    let mut e = one_entry();
    e[9] = I(5);
    assert_eq!(bad(e), f);
    let mut e = one_entry();
    e[0] = I(2);
    assert_eq!(bad(e), f);
    let mut e = one_entry();
    e.push(I(0));
    assert_eq!(bad(e), f);
    let mut e = one_entry();
    e[4] = I(1);
    assert_eq!(bad(e), f);
    let mut e = one_entry();
    e[5] = S("x");
    assert_eq!(bad(e), f);
    // Negative counts, a count of fields past the listpack.
    let mut e = one_entry();
    e[2] = I(-1);
    assert_eq!(bad(e), f);
    let mut e = one_entry();
    e[2] = I(1 << 40);
    assert_eq!(bad(e), f);
    // An empty listpack.
    assert_eq!(bad(vec![]), f);
    // The length not the live entries'.
    let tail = [2, 5, 0, 5, 0, 0, 0, 1, 0];
    assert_eq!(stream_of(&hand(&[(id(5, 0), one_entry())], &tail)), f);
    // The last ID below an entry's.
    let tail = [1, 4, 0, 5, 0, 0, 0, 1, 0];
    assert_eq!(stream_of(&hand(&[(id(5, 0), one_entry())], &tail)), f);
    // The first ID not the first entry's; an empty stream's 0-0 or the largest ID.
    let tail = [1, 5, 0, 4, 0, 0, 0, 1, 0];
    assert_eq!(stream_of(&hand(&[(id(5, 0), one_entry())], &tail)), f);
    let mut tail = vec![0, 5, 0, 0x81];
    tail.extend_from_slice(&[0xff; 8]);
    tail.push(0x81);
    tail.extend_from_slice(&[0xff; 8]);
    tail.extend_from_slice(&[0, 0, 1, 0]);
    assert!(stream_of(&hand(&[], &tail)).is_ok());
    assert_eq!(stream_of(&hand(&[], &[0, 5, 0, 1, 0, 0, 0, 1, 0])), f);
    assert!(stream_of(&hand(&[], &[0, 5, 0, 0, 0, 0, 0, 1, 0])).is_ok());
    // The same entry twice (in two listpacks: 6-0 less 1 ms), the same master ID twice.
    let mut e = one_entry();
    e[6] = I(-1);
    let tail = [2, 6, 0, 5, 0, 0, 0, 2, 0];
    assert_eq!(
        stream_of(&hand(&[(id(5, 0), one_entry()), (id(6, 0), e)], &tail)),
        f
    );
    let ok = hand(&[(id(5, 0), one_entry()), (id(6, 0), one_entry())], &tail);
    assert_eq!(stream_of(&ok).unwrap().entries.len(), 2);
    assert_eq!(
        stream_of(&hand(
            &[(id(5, 0), one_entry()), (id(5, 0), one_entry())],
            &tail
        )),
        f
    );
    // A master key not 16 bytes.
    let mut data = hand(&[(id(5, 0), one_entry())], TAIL_ONE);
    data[2] = 15;
    data.remove(3);
    assert_eq!(stream_of(&payload(&data[..data.len() - 10])), f);
}

#[test]
fn groups_are_checked_as_redis_checks_them_in_depth() {
    let s = sample(10);
    let f = Err(Refused::Format);
    let with = |edit: &dyn Fn(&mut Stream)| {
        let mut s = s.clone();
        edit(&mut s);
        stream_of(&encode(&s))
    };
    // A PEL entry no consumer owns.
    assert_eq!(with(&|s| s.groups[0].pending[0].consumer = 9), f);
    // The same group twice, the same consumer twice.
    assert_eq!(with(&|s| s.groups[1].name = b("readers")), f);
    assert_eq!(with(&|s| s.groups[0].consumers[2].name = b("bob")), f);
    // The same PEL ID twice.
    assert_eq!(
        with(&|s| {
            let p = s.groups[0].pending[0];
            s.groups[0].pending.insert(0, p);
        }),
        f
    );
    // A consumer owning an ID the group's PEL lacks: its PEL written by hand.
    let mut data = encode(&s);
    let at = data
        .windows(16)
        .rposition(|w| w == [&u64::MAX.to_be_bytes()[..], &u64::MAX.to_be_bytes()[..]].concat())
        .unwrap();
    data[at] = 0;
    let body = data[..data.len() - 10].to_vec();
    assert_eq!(stream_of(&payload(&body)), f);
}

#[test]
fn streams_are_bounded_in_memory_and_counts() {
    let data = encode(&sample(1000));
    assert_eq!(decode(&data, 10_000), Err(Refused::TooLarge));
    let many = Stream {
        groups: (0..=MAX_GROUPS)
            .map(|i| Group {
                name: i.to_string().into_bytes(),
                ..Group::default()
            })
            .collect(),
        ..Stream::default()
    };
    assert_eq!(decode(&encode(&many), LIMIT), Err(Refused::StreamTooMany));
    assert_eq!(Refused::StreamTooMany.text(), TOO_MANY);
}

#[test]
fn random_and_truncated_stream_payloads_never_panic() {
    let seeds = [
        hex(REDIS_DUMP),
        encode(&sample(30)),
        v1_payload(&sample(12)),
    ];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for seed in &seeds {
        let body = &seed[..seed.len() - 10];
        for cut in 0..body.len() {
            let _ = decode(&payload(&body[..cut]), LIMIT);
        }
        for _ in 0..3000 {
            let mut b = body.to_vec();
            for _ in 0..=(next() % 4) {
                let i = (next() as usize) % b.len();
                b[i] = next() as u8;
            }
            let _ = decode(&payload(&b), LIMIT);
        }
    }
}

#[test]
fn master_fields_and_consumer_names_count_for_each_use() {
    // One master field of 1000 bytes taken by 300 entries of one value each: 300,000 bytes
    // once decoded, from a payload of a few thousand.
    let field: &'static str = Box::leak("f".repeat(1000).into_boxed_str());
    let mut e = vec![I(300), I(0), I(1), S(field), I(0)];
    for i in 0..300 {
        e.extend([I(2), I(0), I(i), S("v"), I(4)]);
    }
    let tail = [0x41, 0x2c, 5, 0x41, 0x2b, 5, 0, 0, 0, 0x41, 0x2c, 0];
    let data = hand(&[(id(5, 0), e)], &tail);
    assert!(data.len() < 5000);
    assert_eq!(stream_of(&data).unwrap().entries.len(), 300);
    assert_eq!(decode(&data, 200_000), Err(Refused::TooLarge));
    // A consumer name of 10,000 bytes owning 100 pending entries: written with each.
    let mut s = sample(0);
    s.groups[0].consumers[0].name = vec![b'c'; 10_000];
    s.groups[0].pending = (0..100)
        .map(|i| Pending {
            id: id(i, 0),
            consumer: 0,
            ..Pending::default()
        })
        .collect();
    let data = encode(&s);
    assert!(decode(&data, 2 * data.len() as u64).is_err());
    assert!(decode(&data, LIMIT).is_ok());
}

#[test]
fn a_group_reads_minus_one_or_a_count() {
    let mut s = sample(3);
    s.groups[0].entries_read = Some(-1);
    // -1 is written as unknown, and read so.
    assert_eq!(stream_of(&encode(&s)).unwrap().groups[0].entries_read, None);
    s.groups[0].entries_read = Some(-2);
    assert_eq!(stream_of(&encode(&s)), Err(Refused::Format));
    s.groups[0].entries_read = Some(i64::MAX);
    assert_eq!(
        stream_of(&encode(&s)).unwrap().groups[0].entries_read,
        Some(i64::MAX)
    );
}
