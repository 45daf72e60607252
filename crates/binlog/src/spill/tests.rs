//! Spilling keeps memory within the budget and gives the events back in order.

use super::*;
use crate::event::Header;

/// Event `n` of `len` bytes: a header with its size, then bytes that depend on `n`.
fn event(n: u64, len: usize) -> Vec<u8> {
    let mut e = vec![0u8; len];
    Header {
        timestamp: n as u32,
        type_code: 23,
        server_id: 1,
        event_size: len as u32,
        log_pos: 0,
        flags: 0,
    }
    .write(&mut e);
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for b in &mut e[HEADER_LEN..] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    e
}

fn read_all(body: &TxnBody) -> Vec<Vec<u8>> {
    let mut r = body.reader().unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while r.next_event(&mut buf).unwrap() {
        out.push(buf.clone());
    }
    out
}

#[test]
fn a_body_far_larger_than_the_budget_stays_within_it_and_reads_back_identical() {
    const BUDGET: u64 = 16 << 20;
    const TOTAL: u64 = 300 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let budget = Budget::new(BUDGET, tmp.path().join("spill"));
    // Another body holds some memory the whole time, as concurrent transactions do.
    let mut other = TxnBody::new(&budget);
    other.push(&event(0, 4 << 20)).unwrap();
    let mut body = TxnBody::new(&budget);
    let mut hasher = crc32fast::Hasher::new();
    let mut pushed = 0u64;
    let mut n = 1;
    while pushed < TOTAL {
        // Sizes from tiny to larger than the read buffer.
        let len = match n % 50 {
            0 => 3 << 20,
            k => 100 + (k as usize) * 1500,
        };
        let e = event(n, len);
        hasher.update(&e);
        body.push(&e).unwrap();
        assert!(
            budget.used() <= BUDGET,
            "used {} past the budget",
            budget.used()
        );
        pushed += len as u64;
        n += 1;
    }
    assert_eq!(body.bytes(), pushed);
    assert_eq!(body.events(), n as usize - 1);
    assert!(
        budget.spilled() >= pushed - BUDGET,
        "spilled {}",
        budget.spilled()
    );
    // The spill file is already unlinked: the directory holds nothing.
    assert_eq!(std::fs::read_dir(budget.dir()).unwrap().count(), 0);

    let mut back = crc32fast::Hasher::new();
    let mut r = body.reader().unwrap();
    let mut buf = Vec::new();
    let mut m = 1;
    while r.next_event(&mut buf).unwrap() {
        assert_eq!(
            &buf[..4],
            &(m as u32).to_le_bytes(),
            "event {m} out of order"
        );
        back.update(&buf);
        m += 1;
    }
    assert_eq!(m, n);
    assert_eq!(back.finalize(), hasher.finalize());
    let in_memory = budget.used();
    drop(body);
    assert!(budget.used() <= in_memory);
    drop(other);
    assert_eq!(budget.used(), 0);
}

#[test]
fn order_is_kept_across_memory_and_file_when_memory_moves_to_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let budget = Budget::new(100_000, tmp.path().join("spill"));
    let mut a = TxnBody::new(&budget);
    let mut b = TxnBody::new(&budget);
    let mut want_a = Vec::new();
    let mut want_b = Vec::new();
    // a: 60 % in memory.
    for n in 0..6 {
        let e = event(n, 10_000);
        a.push(&e).unwrap();
        want_a.push(e);
    }
    // b: 20 % in memory (80 % used), then past 85 %: b's new events go to its file.
    for n in 100..104 {
        let e = event(n, 5_000);
        b.push(&e).unwrap();
        want_b.push(e);
    }
    assert_eq!(budget.used(), 80_000);
    for n in 104..110 {
        let e = event(n, 6_000);
        b.push(&e).unwrap();
        want_b.push(e);
        // b's write buffer counts, sized to what it holds, until it is written out.
        assert_eq!(b.buffer_counted, 6_000);
        assert_eq!(budget.used(), 86_000);
        b.finish().unwrap();
        assert_eq!(budget.used(), 80_000);
    }
    assert_eq!(b.spilled_bytes(), 36_000);
    // a: fills memory to 85 %, spills new events, and past 95 % moves its memory out.
    let e = event(6, 5_000);
    a.push(&e).unwrap();
    want_a.push(e);
    assert_eq!(budget.used(), 85_000);
    assert_eq!(a.spilled_bytes(), 0);
    for n in 7..9 {
        let e = event(n, 7_000);
        a.push(&e).unwrap();
        want_a.push(e);
        assert_eq!(budget.used(), 92_000);
        a.finish().unwrap();
    }
    assert_eq!(a.spilled_bytes(), 14_000);
    assert_eq!(budget.used(), 85_000);
    // b's push at 85 % + 12 000 > 95 %: b's memory moves behind its spilled events in the
    // file, and still reads first.
    let e = event(110, 12_000);
    b.push(&e).unwrap();
    want_b.push(e);
    assert_eq!(budget.used(), 65_000 + b.buffer_counted as u64);
    b.finish().unwrap();
    assert_eq!(budget.used(), 65_000);
    assert_eq!(b.spilled_bytes(), 36_000 + 20_000 + 12_000);
    assert_eq!(read_all(&a), want_a);
    assert_eq!(read_all(&b), want_b);
    // Reading twice gives the same.
    assert_eq!(read_all(&b), want_b);
    assert_eq!(budget.spilled(), 14_000 + 36_000 + 32_000);
    drop(a);
    drop(b);
    assert_eq!(budget.used(), 0);
}

#[test]
fn stale_spill_files_are_removed_and_bad_events_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("spill");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("manifold-spill-1-2"), b"old").unwrap();
    std::fs::write(dir.join("keep.txt"), b"not ours").unwrap();
    let budget = Budget::new(0, dir.clone());
    assert!(!dir.join("manifold-spill-1-2").exists());
    assert!(dir.join("keep.txt").exists());
    let mut body = TxnBody::new(&budget);
    // No limit: everything stays in memory.
    for n in 0..100 {
        body.push(&event(n, 1000)).unwrap();
    }
    assert_eq!(budget.spilled(), 0);
    let mut short = event(1, 40);
    short[9] = 30;
    assert!(body.push(&short).is_err());
    assert!(body.push(&[0u8; HEADER_LEN - 1]).is_err());
    assert_eq!(body.events(), 100);
    assert_eq!(read_all(&body).len(), 100);
}

/// Many spilled bodies wait at once (a slow source holds the merge back): each must not keep
/// a write buffer the budget does not know of.
#[test]
fn the_write_buffer_grows_as_needed_counts_in_the_budget_and_goes_when_finished() {
    let tmp = tempfile::tempdir().unwrap();
    // Every event is past 85 % of the limit: all of them spill.
    let budget = Budget::new(100, tmp.path().join("spill"));
    let mut bodies = Vec::new();
    for n in 0..50 {
        let mut body = TxnBody::new(&budget);
        let e = event(n, 200);
        body.push(&e).unwrap();
        assert_eq!(body.spilled_bytes(), 200);
        assert_eq!(body.buffer_counted, 200, "sized to the event, not the cap");
        assert_eq!(budget.used(), 200);
        body.finish().unwrap();
        assert_eq!(budget.used(), 0);
        assert_eq!(read_all(&body), vec![e]);
        bodies.push(body);
    }
    // A body spilling many small events keeps at most the cap, counted.
    let mut body = TxnBody::new(&budget);
    let mut want = Vec::new();
    for n in 0..3000 {
        let e = event(n, 300);
        body.push(&e).unwrap();
        want.push(e);
        assert!(body.buffer_counted <= WRITE_BUFFER);
        assert_eq!(budget.used(), body.buffer_counted as u64);
    }
    assert_eq!(read_all(&body), want, "read before finishing");
    body.finish().unwrap();
    assert_eq!(budget.used(), 0);
    assert_eq!(read_all(&body), want, "read after finishing");
    // Pushing after finishing takes a buffer again; dropping the body gives it back.
    body.push(&event(9, 100)).unwrap();
    assert_eq!(budget.used(), 100);
    drop(body);
    assert_eq!(budget.used(), 0);
}

/// A spill file holds a transaction's rows: 0600 (readable through /proc/<pid>/fd while it
/// lives), in a 0700 directory.
#[test]
fn spill_files_and_their_directory_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("binlog/spill");
    let budget = Budget::new(100, dir.clone());
    let mut body = TxnBody::new(&budget);
    body.push(&event(1, 200)).unwrap();
    let file = &body.spill.as_ref().expect("spilled").file;
    assert_eq!(file.metadata().unwrap().permissions().mode() & 0o777, 0o600);
    for d in [&dir, &tmp.path().join("binlog")] {
        let mode = std::fs::metadata(d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }
}
