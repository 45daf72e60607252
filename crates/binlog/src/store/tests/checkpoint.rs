//! Heartbeats noted in the sources' states and the sources checkpoint: a MySQL source's set
//! stays one interval, and recovery at any cut takes the checkpoint's exact states when its
//! point survived, and never a transaction that did not.

use super::mysql::{mysql_options, mysql_txn, write_rows_v2, SOURCE_UUIDS};
use super::*;
use crate::event::mysql;
use crate::gtid::{GtidSet, MysqlGtid, TxnGtid};

const MAX_FILE: u64 = 4000;

/// A `BEGIN` · rows query · table map · rows · XID transaction of MySQL source `source`.
fn rows_txn(budget: &Budget, source: usize, gno: u64) -> SourceTxn {
    let table = 100 + source as u64;
    mysql_txn(
        budget,
        source,
        gno,
        &[
            event::query(1, 1, b"test", b"BEGIN"),
            mysql::rows_query(1, 1, b"insert into t values (1)"),
            table_map(table, b"test", b"t"),
            write_rows_v2(table, &[gno as i32]),
            event::xid(1, 1, gno),
        ],
    )
}

fn source_gtid(source: usize, gno: u64) -> TxnGtid {
    TxnGtid::MySql(MysqlGtid {
        uuid: SOURCE_UUIDS[source].parse().unwrap(),
        gno,
    })
}

/// The set of one source as text, `uuid:1-N` when it has no hole.
fn set_of(state: &GtidState) -> &GtidSet {
    state.as_mysql().expect("a MySQL set")
}

/// One run: each step writes a transaction of one source, then both sources' heartbeats are
/// noted; every third step takes a checkpoint.
struct Run {
    /// `(source, gno)` of each written transaction, and the end after it.
    written: Vec<(usize, u64, Position)>,
    /// The checkpoint record after each checkpoint, with the sources' states it holds.
    checkpoints: Vec<(Position, Vec<u8>, Vec<SourceState>)>,
}

fn run(dir: &Path, budget: &Budget, steps: u64) -> Run {
    let (mut w, _) = Writer::open(mysql_options(dir, MAX_FILE)).unwrap();
    let mut next_gno = [1u64, 1];
    let mut out = Run {
        written: Vec::new(),
        checkpoints: Vec::new(),
    };
    for i in 0..steps {
        let source = (i % 2) as usize;
        let gno = next_gno[source];
        next_gno[source] += 1;
        let a = w.append(&rows_txn(budget, source, gno), 1000 + i).unwrap();
        out.written.push((source, gno, a.end));
        for (s, next) in next_gno.iter_mut().enumerate() {
            w.note_skipped(s, &source_gtid(s, *next), 1000 + i);
            *next += 1;
        }
        for state in w.sources() {
            let set = set_of(&state.pos);
            assert_eq!(set.iter().count(), 1, "one UUID: {set}");
            assert!(
                set.iter().all(|(_, intervals)| intervals.len() == 1),
                "heartbeats leave no hole: {set}"
            );
        }
        if i % 3 == 2 {
            assert!(w.write_checkpoint().unwrap());
            assert!(!w.write_checkpoint().unwrap(), "nothing changed since");
            let bytes = std::fs::read(dir.join("manifold-bin.sources")).unwrap();
            out.checkpoints.push((w.end(), bytes, w.sources().to_vec()));
        }
    }
    w.flush().unwrap();
    out
}

#[test]
fn heartbeats_keep_each_files_record_one_interval_per_source() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let budget = budget(tmp.path());
    let run = run(&dir, &budget, 30);
    let files = list_files(&dir, "manifold-bin").unwrap();
    assert!(files.len() >= 3, "the run rotates: {files:?}");
    // Each later file's first transaction records both sources as `uuid:1-N`, N the last
    // GTID the source had sent (its heartbeats included) before that transaction.
    for file in &files[1..] {
        let events = events_of(&dir, &file.name);
        let record = events
            .iter()
            .filter(|e| e[4] == types::ROWS_QUERY)
            .find_map(|e| Origin::parse(event::annotate_text(e)))
            .expect("the first transaction's origin");
        let sources = record
            .sources
            .expect("the first origin records the sources");
        for (s, state) in sources.iter().enumerate() {
            let text = state.pos.to_string();
            let (uuid, range) = text.split_once(':').unwrap();
            assert_eq!(uuid, SOURCE_UUIDS[s]);
            assert!(
                range.starts_with("1-") && !range.contains(':') && !range.contains(','),
                "{file:?}: {text}"
            );
        }
    }
    assert!(!run.checkpoints.is_empty());
}

/// The newest file cut at every byte, recovered with the checkpoint an OS crash could leave
/// (the latest, maybe past the cut) and the one a process crash leaves (the latest whose
/// point survived): the checkpoint's states are taken whenever its point survived, and no
/// source ever counts a transaction that is not in the files.
#[test]
fn recovery_takes_the_checkpoint_when_its_point_survived() {
    const STEPS: u64 = 40;
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    let budget = budget(tmp.path());
    let run = run(&clean, &budget, STEPS);
    let expected: Vec<_> = read_dir_sorted(&clean)
        .into_iter()
        .filter(|(name, _)| !name.ends_with(".sources"))
        .collect();
    let last_name = run.written.last().unwrap().2.file.clone();
    let last_len = std::fs::metadata(clean.join(&last_name)).unwrap().len();
    let mut used = 0;
    for cut in 0..=last_len {
        let survives = |end: &Position| end.file != last_name || end.pos <= cut;
        let surviving: Vec<_> = run.written.iter().filter(|w| survives(&w.2)).collect();
        let latest = run.checkpoints.last().unwrap();
        let survived = run.checkpoints.iter().rev().find(|c| survives(&c.0));
        for checkpoint in [Some(latest), survived].into_iter().flatten() {
            let dir = tmp.path().join("cut");
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in &expected {
                let bytes = if *name == last_name {
                    &bytes[..cut as usize]
                } else {
                    &bytes[..]
                };
                std::fs::write(dir.join(name), bytes).unwrap();
            }
            std::fs::write(dir.join("manifold-bin.sources"), &checkpoint.1).unwrap();
            let (_, rec) = Writer::open(mysql_options(&dir, MAX_FILE)).unwrap();
            for (s, state) in rec.sources.iter().enumerate() {
                let set = set_of(&state.pos);
                // Every surviving transaction is counted; none that did not survive is.
                for (source, gno, end) in &run.written {
                    if *source == s {
                        assert_eq!(
                            set.contains(MysqlGtid {
                                uuid: SOURCE_UUIDS[s].parse().unwrap(),
                                gno: *gno
                            }),
                            survives(end),
                            "cut at {cut}, source {s}, gno {gno}: {set}"
                        );
                    }
                }
            }
            let point_in_newest = checkpoint.0.file == last_name && checkpoint.0.pos <= cut;
            if point_in_newest {
                used += 1;
                // Its exact states, advanced by the transactions after its point.
                for (s, state) in rec.sources.iter().enumerate() {
                    let mut want = set_of(&checkpoint.2[s].pos).clone();
                    for (source, gno, _) in surviving.iter().copied() {
                        if *source == s {
                            want.add(MysqlGtid {
                                uuid: SOURCE_UUIDS[s].parse().unwrap(),
                                gno: *gno,
                            });
                        }
                    }
                    assert_eq!(set_of(&state.pos), &want, "cut at {cut}, source {s}");
                }
            }
            // One past the cut is removed: later writes could reach its point again.
            let past_cut = checkpoint.0.file == last_name && checkpoint.0.pos > cut;
            if point_in_newest || past_cut {
                assert_eq!(
                    dir.join("manifold-bin.sources").exists(),
                    point_in_newest,
                    "cut at {cut}"
                );
            }
        }
    }
    assert!(used > 0, "some cuts keep a checkpoint's point");
}
