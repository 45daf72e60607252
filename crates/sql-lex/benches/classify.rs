#![forbid(unsafe_code)]
//! What routing costs per statement: `scan` (class, flags, hint) and `digest`, on the
//! statements sysbench's OLTP tests send, alone and sent again with other values (with and
//! without a `ScanMemo`). Run with `cargo bench -p manifold-sql-lex`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};

const SYSBENCH: &[(&str, &str)] = &[
    ("point_select", "SELECT c FROM sbtest1 WHERE id=50123"),
    (
        "simple_range",
        "SELECT c FROM sbtest1 WHERE id BETWEEN 5012 AND 5111",
    ),
    (
        "sum_range",
        "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 5012 AND 5111",
    ),
    (
        "order_range",
        "SELECT c FROM sbtest1 WHERE id BETWEEN 5012 AND 5111 ORDER BY c",
    ),
    (
        "distinct_range",
        "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 5012 AND 5111 ORDER BY c",
    ),
    ("index_update", "UPDATE sbtest1 SET k=k+1 WHERE id=50123"),
    (
        "non_index_update",
        "UPDATE sbtest1 SET c='83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330' WHERE id=50123",
    ),
    ("delete", "DELETE FROM sbtest1 WHERE id=50123"),
    (
        "insert",
        "INSERT INTO sbtest1 (id, k, c, pad) VALUES (50123, 49929, '83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330', '67847967377-48000963322-62604785301-91415491898-96926520291')",
    ),
    ("begin", "BEGIN"),
    ("commit", "COMMIT"),
];

/// `sql` eight times, its numbers changed each time: a statement as an application sends it
/// again and again.
fn with_other_values(sql: &str) -> Vec<Vec<u8>> {
    (0..8u64)
        .map(|i| {
            let mut out = Vec::new();
            let mut bytes = sql.bytes().peekable();
            while let Some(b) = bytes.next() {
                if b.is_ascii_digit() && !out.last().is_some_and(u8::is_ascii_alphanumeric) {
                    let mut n = u64::from(b - b'0');
                    while let Some(d) = bytes.next_if(u8::is_ascii_digit) {
                        n = n * 10 + u64::from(d - b'0');
                    }
                    out.extend_from_slice((n + i * 977).to_string().as_bytes());
                } else {
                    out.push(b);
                }
            }
            out
        })
        .collect()
}

fn classify(c: &mut Criterion) {
    let mut digest_text = Vec::with_capacity(manifold_sql_lex::MAX_DIGEST_TEXT);
    for (name, sql) in SYSBENCH {
        let variants = with_other_values(sql);
        c.bench_function(&format!("scan+class+digest, other values/{name}"), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                let sql = &variants[i & 7];
                let (scan, hash) =
                    manifold_sql_lex::scan_with_digest(black_box(sql), &mut digest_text);
                (scan.class(), hash)
            });
        });
        c.bench_function(
            &format!("memo: scan+class+digest, other values/{name}"),
            |b| {
                let mut memo = manifold_sql_lex::ScanMemo::new();
                let mut i = 0;
                b.iter(|| {
                    i += 1;
                    let sql = &variants[i & 7];
                    let (scan, hash) = manifold_sql_lex::scan_with_digest_memo(
                        black_box(sql),
                        &mut digest_text,
                        &mut memo,
                    );
                    (scan.class(), hash)
                });
            },
        );
        c.bench_function(&format!("memo: scan+class, other values/{name}"), |b| {
            let mut memo = manifold_sql_lex::ScanMemo::new();
            let mut i = 0;
            b.iter(|| {
                i += 1;
                manifold_sql_lex::scan_memo(black_box(&variants[i & 7]), &mut memo).class()
            });
        });
        c.bench_function(&format!("lex/{name}"), |b| {
            b.iter(|| manifold_sql_lex::Lexer::new(black_box(sql.as_bytes())).count());
        });
        c.bench_function(&format!("scan+class/{name}"), |b| {
            b.iter(|| manifold_sql_lex::scan(black_box(sql.as_bytes())).class());
        });
        c.bench_function(&format!("scan+class+digest/{name}"), |b| {
            b.iter(|| {
                let (scan, hash) =
                    manifold_sql_lex::scan_with_digest(black_box(sql.as_bytes()), &mut digest_text);
                (scan.class(), hash)
            });
        });
    }
}

criterion_group!(benches, classify);
criterion_main!(benches);
