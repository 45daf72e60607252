use super::*;
use proptest::prelude::*;

#[test]
fn a_transaction_waits_for_every_other_source_to_pass_its_key() {
    let mut m = Merger::new(vec![0, 0]);
    assert_eq!(m.push(0, Some(10), "a10"), 10);
    assert_eq!(m.pop().map(|(_, _, i)| i), None);
    assert_eq!(m.held_back_by(), Some(1));
    m.advance(1, 10);
    // (10, 1) > (10, 0): source 1 can only send keys that sort after.
    assert_eq!(m.pop(), Some((10, 0, "a10")));
    assert!(m.is_empty());
    assert_eq!(m.held_back_by(), None);

    assert_eq!(m.push(1, Some(12), "b12"), 12);
    // Source 0 is at (10, 0) < (12, 1).
    assert_eq!(m.pop(), None);
    assert_eq!(m.held_back_by(), Some(0));
    // An unstamped transaction inherits its source's key.
    assert_eq!(m.push(0, None, "a-"), 10);
    assert_eq!(m.pop(), Some((10, 0, "a-")));
    assert_eq!(m.pop(), None);
    m.advance(0, 12);
    // (12, 0) < (12, 1): source 0 may still send key 12, which would go first.
    assert_eq!(m.pop(), None);
    m.advance(0, 13);
    assert_eq!(m.pop(), Some((12, 1, "b12")));
    assert_eq!(m.last_keys(), &[13, 12]);
}

#[test]
fn keys_never_go_back_within_a_source_and_recovery_keys_count() {
    let mut m = Merger::new(vec![100, 0]);
    assert_eq!(m.push(0, Some(5), 1), 100);
    m.advance(0, 50);
    assert_eq!(m.last_keys(), &[100, 0]);
    assert_eq!(m.len(), 1);
    assert_eq!(m.held_back_by(), Some(1));
    m.advance(1, 101);
    assert_eq!(m.pop(), Some((100, 0, 1)));
}

#[test]
fn the_smallest_blocking_source_is_named() {
    let mut m = Merger::new(vec![0, 0, 0, 0]);
    m.push(3, Some(20), ());
    m.advance(0, 7);
    m.advance(1, 3);
    m.advance(2, 30);
    assert_eq!(m.held_back_by(), Some(1));
    m.advance(1, 25);
    assert_eq!(m.held_back_by(), Some(0));
    m.advance(0, 20);
    // (20, 0) < (20, 3) still blocks.
    assert_eq!(m.held_back_by(), Some(0));
    m.advance(0, 21);
    assert_eq!(m.held_back_by(), None);
    assert_eq!(m.pop(), Some((20, 3, ())));
}

#[test]
fn a_source_beyond_the_known_ones_starts_at_zero() {
    let mut m = Merger::new(vec![0]);
    m.push(0, Some(4), 'x');
    m.advance(2, 9);
    // Source 1 appeared implicitly at key 0 and holds the item back.
    assert_eq!(m.last_keys(), &[4, 0, 9]);
    assert_eq!(m.held_back_by(), Some(1));
    m.advance(1, 5);
    assert_eq!(m.pop(), Some((4, 0, 'x')));
}

/// One source's input: a transaction (with or without a stamp) or a heartbeat.
#[derive(Debug, Clone, Copy)]
enum Op {
    Txn(Option<u64>),
    Heartbeat(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u64..40).prop_map(|s| Op::Txn(Some(s))),
        1 => Just(Op::Txn(None)),
        1 => (1u64..40).prop_map(Op::Heartbeat),
    ]
}

/// What came out: `(key, source, index in its source's ops, stamp)`.
type Released = (u64, usize, usize, Option<u64>);

/// Feeds the sources' ops in the order `picks` chooses (a pick names a source; exhausted
/// sources are skipped), draining after each op, then releases everything. Checks on the way
/// that every release was allowed and every hold-back named a blocker.
fn run(sources: &[Vec<Op>], picks: &[usize]) -> Vec<Released> {
    let n = sources.len();
    let mut m: Merger<(usize, Option<u64>)> = Merger::new(vec![0; n]);
    let mut next = vec![0usize; n];
    let mut out = Vec::new();
    let drain = |m: &mut Merger<(usize, Option<u64>)>, out: &mut Vec<Released>| loop {
        let before = m.last_keys().to_vec();
        let Some((key, source, (index, stamp))) = m.pop() else {
            if !m.is_empty() {
                let s = m.held_back_by().expect("a waiting item names its blocker");
                let head = m.smallest_head().expect("items wait");
                assert!((m.last_keys()[s], s) < head);
            }
            break;
        };
        // (e) released only once every other source is past it.
        for (s, &last) in before.iter().enumerate() {
            if s != source {
                assert!((last, s) > (key, source), "released {key}/{source} early");
            }
        }
        out.push((key, source, index, stamp));
    };
    // Feeds `source`'s next op; false when it has none left.
    let feed = |source: usize, next: &mut [usize], m: &mut Merger<_>| {
        let Some(&op) = sources[source].get(next[source]) else {
            return false;
        };
        let i = next[source];
        next[source] += 1;
        match op {
            Op::Txn(stamp) => {
                m.push(source, stamp, (i, stamp));
            }
            Op::Heartbeat(stamp) => m.advance(source, stamp),
        }
        true
    };
    for &pick in picks {
        if feed(pick % n, &mut next, &mut m) {
            drain(&mut m, &mut out);
        }
    }
    for source in 0..n {
        while feed(source, &mut next, &mut m) {
            drain(&mut m, &mut out);
        }
    }
    for source in 0..n {
        m.advance(source, u64::MAX);
    }
    drain(&mut m, &mut out);
    assert!(m.is_empty());
    out
}

fn inputs() -> impl Strategy<Value = (Vec<Vec<Op>>, Vec<usize>, Vec<usize>)> {
    (2usize..6).prop_flat_map(|n| {
        (
            prop::collection::vec(prop::collection::vec(op(), 0..25), n),
            prop::collection::vec(0usize..n, 0..150),
            prop::collection::vec(0usize..n, 0..150),
        )
    })
}

proptest! {
    #[test]
    fn the_merge_is_ordered_complete_and_independent_of_arrival((sources, picks_a, picks_b) in inputs()) {
        let out = run(&sources, &picks_a);
        // Nothing lost, nothing duplicated.
        let txns: usize = sources
            .iter()
            .map(|ops| ops.iter().filter(|o| matches!(o, Op::Txn(_))).count())
            .sum();
        prop_assert_eq!(out.len(), txns);
        // (a) per-source order kept.
        for s in 0..sources.len() {
            let indexes: Vec<usize> = out.iter().filter(|r| r.1 == s).map(|r| r.2).collect();
            prop_assert!(indexes.windows(2).all(|w| w[0] < w[1]), "source {} reordered", s);
        }
        // (b) keys, then sources, never go back.
        prop_assert!(out.windows(2).all(|w| (w[0].0, w[0].1) <= (w[1].0, w[1].1)));
        // (c) the same output whatever the interleaving across sources.
        prop_assert_eq!(&out, &run(&sources, &picks_b));
        // (d) causality: an item whose key is its own stamp a precedes every item of another
        // source stamped b > a.
        for (i, x) in out.iter().enumerate() {
            if x.3 != Some(x.0) {
                continue;
            }
            for (j, y) in out.iter().enumerate() {
                if y.1 != x.1 && y.3.is_some_and(|b| b > x.0) {
                    prop_assert!(i < j, "{:?} stamped later came before {:?}", y, x);
                }
            }
        }
    }

    #[test]
    fn a_silent_source_holds_back_everything_past_it(
        stamps in prop::collection::vec(1u64..1000, 1..40),
        silent_at in 0u64..1000,
    ) {
        let mut m = Merger::new(vec![0, 0, 0]);
        m.advance(2, silent_at);
        for &s in &stamps {
            m.push(0, Some(s), s);
            m.advance(1, u64::MAX);
        }
        let mut released = Vec::new();
        while let Some((key, _, _)) = m.pop() {
            released.push(key);
        }
        // Source 2 (silent at `silent_at`) lets out only keys it is past.
        prop_assert!(released.iter().all(|&k| (k, 0) < (silent_at, 2)));
        prop_assert_eq!(released.len() + m.len(), stamps.len());
        if !m.is_empty() {
            prop_assert_eq!(m.held_back_by(), Some(2));
        }
    }
}
