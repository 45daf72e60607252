//! What routing costs per statement: `scan` (class, flags, hint) and `digest`, on the
//! statements sysbench's OLTP tests send. Run with `cargo bench -p manifold-sql-lex`.

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

fn classify(c: &mut Criterion) {
    let mut digest_text = Vec::with_capacity(manifold_sql_lex::MAX_DIGEST_TEXT);
    for (name, sql) in SYSBENCH {
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
