#![forbid(unsafe_code)]
//! What assembling and merging cost per event: synthetic transactions of 5 small events
//! (GTID, stamped annotate, table map, one-row write, XID) from two sources, interleaved,
//! through each source's `Assembler` and one `Merger`, every transaction released. Run with
//! `cargo bench -p manifold-binlog --bench pipeline`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use manifold_binlog::event::{self, types, CHECKSUM_LEN, HEADER_LEN};
use manifold_binlog::gtid::Gtid;
use manifold_binlog::merge::Merger;
use manifold_binlog::spill::Budget;
use manifold_binlog::stamp;
use manifold_binlog::txn::{Assembler, SourceTxn};

const TXNS_PER_SOURCE: u64 = 5_000;
const SOURCES: usize = 2;
const EVENTS_PER_TXN: u64 = 5;

fn raw(type_code: u8, server_id: u32, body: &[u8]) -> Vec<u8> {
    let mut e = vec![0u8; HEADER_LEN + body.len() + CHECKSUM_LEN];
    event::Header {
        timestamp: 1_700_000_000,
        type_code,
        server_id,
        ..Default::default()
    }
    .write(&mut e);
    e[HEADER_LEN..HEADER_LEN + body.len()].copy_from_slice(body);
    event::finish(&mut e, None, 0);
    e
}

fn table_map(server_id: u32) -> Vec<u8> {
    let mut body = 70u64.to_le_bytes()[..6].to_vec();
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(b"\x06sbtest\0\x07sbtest1\0\x01\x03\0\0");
    raw(types::TABLE_MAP, server_id, &body)
}

fn write_rows(server_id: u32) -> Vec<u8> {
    let mut body = 70u64.to_le_bytes()[..6].to_vec();
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&[1, 0xff, 0, 7, 0, 0, 0]);
    raw(types::WRITE_ROWS_V1, server_id, &body)
}

/// `(source, event)` in arrival order: the sources' transactions alternate, stamps rising.
fn stream() -> Vec<(usize, Vec<u8>)> {
    let mut out = Vec::new();
    for seq in 1..=TXNS_PER_SOURCE {
        for source in 0..SOURCES {
            let server = u32::try_from(source).unwrap() + 1;
            let gtid = Gtid {
                domain: 0,
                server,
                seq,
            };
            let mut text = Vec::new();
            stamp::write(&mut text, seq * 1000 + source as u64);
            text.extend_from_slice(b"INSERT INTO sbtest1 VALUES (7)");
            out.push((
                source,
                event::mariadb_gtid(1, gtid, event::gtid_flags::TRANSACTIONAL),
            ));
            out.push((source, event::annotate(1, server, &text)));
            out.push((source, table_map(server)));
            out.push((source, write_rows(server)));
            out.push((source, event::xid(1, server, seq)));
        }
    }
    out
}

fn pipeline(c: &mut Criterion) {
    let events = stream();
    let budget = Budget::new(1 << 30, std::env::temp_dir());
    let mut group = c.benchmark_group("pipeline");
    group.throughput(Throughput::Elements(
        TXNS_PER_SOURCE * SOURCES as u64 * EVENTS_PER_TXN,
    ));
    group.bench_function("assemble_and_merge", |b| {
        b.iter(|| {
            let mut assemblers: Vec<Assembler> = (0..SOURCES)
                .map(|s| Assembler::new(s, ("manifold", "heartbeat"), &budget))
                .collect();
            let mut merger: Merger<SourceTxn> = Merger::new(vec![0; SOURCES]);
            let mut released = 0u64;
            for (source, e) in &events {
                if let Some(txn) = assemblers[*source].push(e).unwrap() {
                    merger.push(*source, txn.stamp, txn);
                    while let Some((_, _, txn)) = merger.pop() {
                        released += u64::from(txn.dml_events);
                        black_box(txn);
                    }
                }
            }
            for s in 0..SOURCES {
                merger.advance(s, u64::MAX);
            }
            while let Some((_, _, txn)) = merger.pop() {
                released += u64::from(txn.dml_events);
            }
            black_box(released)
        });
    });
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
