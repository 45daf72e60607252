use super::*;

#[test]
fn a_fleet_of_one_flavour_starts_and_a_mixed_one_is_refused() {
    assert!(check_flavours(&[]).is_ok());
    let (maria, mysql) = (Dialect::MariaDb, Dialect::MySql);
    assert!(check_flavours(&[(maria, "a"), (maria, "b")]).is_ok());
    assert!(check_flavours(&[(mysql, "a"), (mysql, "b")]).is_ok());
    let e = check_flavours(&[(maria, "east"), (mysql, "west"), (maria, "north")]).unwrap_err();
    assert!(
        e.contains("mixed fleet")
            && e.contains("cluster east has a MariaDB primary")
            && e.contains("cluster west a MySQL"),
        "{e}"
    );
}

mod pipeline {
    use std::time::{Duration, Instant};

    use manifold_binlog::event::{self, gtid_flags};
    use manifold_binlog::gtid::{Gtid, GtidState};
    use manifold_binlog::spill::{Budget, TxnBody};
    use manifold_binlog::txn::SourceTxn;
    use tokio::sync::oneshot;

    use super::super::pipeline::{Pipeline, HOLD_BACK_WARNING};
    use crate::config::BinlogConfig;
    use crate::state::{BinlogShared, ConsumerStatus, Purged, Request};

    fn shared(dir: &std::path::Path) -> std::sync::Arc<BinlogShared> {
        let config = BinlogConfig {
            dir: dir.to_path_buf(),
            ..BinlogConfig::default()
        };
        BinlogShared::new(config, vec!["east".into(), "west".into()]).0
    }

    /// A DDL transaction of `source` (its GTID `0-(10+source)-seq`) stamped `stamp`.
    fn ddl(budget: &Budget, source: usize, seq: u64, stamp: Option<u64>) -> SourceTxn {
        let mut body = TxnBody::new(budget);
        body.push(&event::query(1, 1, b"test", b"CREATE TABLE t (id INT)"))
            .unwrap();
        SourceTxn {
            source,
            gtid: Gtid {
                domain: 0,
                server: 10 + source as u32,
                seq,
            }
            .into(),
            mysql: None,
            gtid_flags: gtid_flags::STANDALONE | gtid_flags::DDL,
            timestamp: 1_700_000_000,
            stamp,
            heartbeat: false,
            body,
            dml_events: 0,
            received: Instant::now(),
        }
    }

    fn heartbeat(budget: &Budget, source: usize, seq: u64, stamp: u64) -> SourceTxn {
        SourceTxn {
            heartbeat: true,
            ..ddl(budget, source, seq, Some(stamp))
        }
    }

    #[test]
    fn a_transaction_waits_for_every_source_then_is_written_and_published() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let (mut p, recovered) = Pipeline::open(shared.clone()).unwrap();
        assert!(recovered.sources.iter().all(|s| s.pos.is_empty()));
        let budget = p.budget().clone();
        let start = shared.end();
        assert!(
            !start.file.is_empty(),
            "the first file is published at open"
        );

        // Committed 50 ms ago, to the microsecond (as a MySQL source's GTID event says).
        let mut first = ddl(&budget, 0, 1, Some(100));
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros();
        first.mysql = Some(manifold_binlog::txn::MysqlCommit {
            immediate_commit_us: u64::try_from(now_us).unwrap() - 50_000,
            ..Default::default()
        });
        p.on_txn(0, first);
        p.drain().unwrap();
        assert_eq!(shared.end(), start, "west has said nothing: east's waits");
        assert!(shared.sources()[1].holding_back);
        assert_eq!(shared.metrics.state(), "starting");

        p.on_txn(1, heartbeat(&budget, 1, 1, 200));
        p.drain().unwrap();
        let end = shared.end();
        assert!(end.pos > start.pos, "{end:?}");
        assert_eq!(end.gtid.as_mariadb().unwrap().iter().count(), 1);
        let m = &shared.metrics;
        assert_eq!(crate::metrics::Metrics::get(&m.transactions), 1);
        assert!(crate::metrics::Metrics::get(&m.events) >= 1);
        assert_eq!(m.stamped_delay().count(), 1);
        let commits = m.commit_delay();
        assert_eq!(commits.count(), 1, "its source commit → written delay");
        assert!(
            commits.quantile(0.5) >= 50_000_000,
            "{}",
            commits.quantile(0.5)
        );
        let sources = shared.sources();
        assert!(sources[0].written.contains(&"0-10-1".parse().unwrap()));
        // A heartbeat is not written but moves the source's position past it.
        assert_eq!(sources[1].written.to_string(), "0-11-1");
        assert_eq!(sources[1].received.to_string(), "0-11-1");
        assert!(!sources.iter().any(|s| s.holding_back));
        assert_eq!(shared.files().last().map(|f| f.size), Some(end.pos));
        drop(p);

        // Reopened: east resumes after what was written, with its key.
        let (_, recovered) = Pipeline::open(self::shared(dir.path())).unwrap();
        assert!(recovered.sources[0]
            .pos
            .contains(&"0-10-1".parse().unwrap()));
        assert_eq!(recovered.sources[0].key, 100);
    }

    /// A heartbeat behind a transaction still waiting in the merge is noted only once that
    /// transaction is written (a MariaDB position is the last GTID per domain: noting it
    /// first would let a crash skip the waiting one); the checkpoint taken then gives a
    /// restart the exact positions, heartbeats included.
    #[test]
    fn heartbeats_are_noted_after_the_transactions_before_them() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let (mut p, _) = Pipeline::open(shared.clone()).unwrap();
        let budget = p.budget().clone();

        p.on_txn(0, ddl(&budget, 0, 1, Some(100)));
        p.on_txn(0, heartbeat(&budget, 0, 2, 150));
        p.drain().unwrap();
        assert!(
            shared.sources()[0].written.is_empty(),
            "east's heartbeat waits behind its transaction: {}",
            shared.sources()[0].written
        );

        p.on_txn(1, heartbeat(&budget, 1, 1, 200));
        p.drain().unwrap();
        let sources = shared.sources();
        assert_eq!(sources[0].written.to_string(), "0-10-2");
        assert_eq!(
            sources[1].written.to_string(),
            "0-11-1",
            "nothing of west waited"
        );
        assert_eq!(
            crate::metrics::Metrics::get(&shared.metrics.transactions),
            1
        );
        p.checkpoint();
        drop(p);

        let (_, recovered) = Pipeline::open(self::shared(dir.path())).unwrap();
        assert_eq!(recovered.sources[0].pos.to_string(), "0-10-2");
        assert_eq!(recovered.sources[0].key, 150);
        assert_eq!(recovered.sources[1].pos.to_string(), "0-11-1");
        assert_eq!(recovered.sources[1].key, 200);
    }

    #[test]
    fn a_source_holding_the_merge_back_is_warned_of_once() {
        let dir = tempfile::tempdir().unwrap();
        let (mut p, _) = Pipeline::open(shared(dir.path())).unwrap();
        let budget = p.budget().clone();
        let t0 = Instant::now();
        assert_eq!(p.check_held_back(t0), None);
        p.on_txn(0, ddl(&budget, 0, 1, Some(100)));
        assert_eq!(p.check_held_back(t0), None);
        let later = t0 + HOLD_BACK_WARNING + Duration::from_secs(1);
        assert_eq!(p.check_held_back(later), Some(1));
        assert_eq!(p.check_held_back(later + HOLD_BACK_WARNING), None);
        // Released, then held again: a new episode.
        p.on_txn(1, heartbeat(&budget, 1, 1, 200));
        p.drain().unwrap();
        assert_eq!(p.check_held_back(later), None);
        p.on_txn(0, ddl(&budget, 0, 2, Some(300)));
        assert_eq!(p.check_held_back(later), None);
        assert_eq!(p.check_held_back(later + HOLD_BACK_WARNING), Some(1));
    }

    #[test]
    fn purge_and_rotate_requests_are_answered() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let (mut p, _) = Pipeline::open(shared.clone()).unwrap();
        let ask = |p: &mut Pipeline, r: fn(_) -> Request| {
            let (tx, mut rx) = oneshot::channel();
            p.request(r(tx));
            rx.try_recv().unwrap()
        };
        let rotated: Result<(), String> = {
            let (tx, mut rx) = oneshot::channel();
            p.request(Request::Rotate(tx));
            rx.try_recv().unwrap()
        };
        // A file without a transaction is not rotated (recovery reads positions from one).
        rotated.unwrap();
        assert_eq!(shared.files().len(), 1, "{:?}", shared.files());
        let unknown = ask(&mut p, |tx| Request::PurgeTo("nope.000009".into(), tx));
        assert!(unknown.unwrap_err().contains("nope.000009"));
        let current = shared.end().file;
        let none = {
            let (tx, mut rx) = oneshot::channel();
            p.request(Request::PurgeTo(current, tx));
            rx.try_recv().unwrap()
        };
        assert_eq!(
            none.unwrap().removed,
            Vec::<String>::new(),
            "never the current file"
        );
        let before = ask(&mut p, |tx| {
            Request::PurgeBefore(std::time::SystemTime::now(), tx)
        });
        assert_eq!(before.unwrap(), Purged::default());
        assert_eq!(shared.files().len(), 1);
    }

    #[test]
    fn purge_and_retention_keep_the_file_a_dump_reads() {
        let dir = tempfile::tempdir().unwrap();
        let config = BinlogConfig {
            dir: dir.path().to_path_buf(),
            retention_size: 1,
            retention_age: Duration::ZERO,
            ..BinlogConfig::default()
        };
        let shared = BinlogShared::new(config, vec!["east".into(), "west".into()]).0;
        let (mut p, _) = Pipeline::open(shared.clone()).unwrap();
        let budget = p.budget().clone();
        // Four files, each with a transaction.
        for seq in 1..=4 {
            p.on_txn(0, ddl(&budget, 0, seq, Some(100 * seq)));
            p.on_txn(1, heartbeat(&budget, 1, seq, 100 * seq + 50));
            p.drain().unwrap();
            let (tx, mut rx) = oneshot::channel();
            p.request(Request::Rotate(tx));
            rx.try_recv().unwrap().unwrap();
        }
        let files: Vec<String> = shared.files().into_iter().map(|f| f.name).collect();
        assert_eq!(files.len(), 5, "{files:?}");
        shared.update_consumer(ConsumerStatus {
            id: 7,
            file: files[1].clone(),
            ..ConsumerStatus::default()
        });
        shared.update_consumer(ConsumerStatus {
            id: 8,
            file: files[3].clone(),
            ..ConsumerStatus::default()
        });
        let (tx, mut rx) = oneshot::channel();
        p.request(Request::PurgeTo(files[3].clone(), tx));
        let purged = rx.try_recv().unwrap().unwrap();
        assert_eq!(
            purged.removed,
            vec![files[0].clone()],
            "the purge stops at the file dump 7 reads"
        );
        let stop = purged.stopped_at.expect("the client is told");
        assert_eq!(
            (stop.file.as_str(), stop.readers, stop.wanted),
            (files[1].as_str(), 1, 3)
        );
        assert_eq!(
            stop.message(purged.removed.len(), manifold_binlog::gtid::Dialect::MariaDb),
            format!(
                "file {} was not purged because it was being read by 1 thread(s), purged only 1 out of 3 files",
                files[1]
            )
        );
        p.retain().unwrap();
        assert_eq!(shared.files()[0].name, files[1], "retention too");
        let (tx, mut rx) = oneshot::channel();
        p.request(Request::PurgeBefore(
            std::time::SystemTime::now() + Duration::from_secs(60),
            tx,
        ));
        assert!(rx.try_recv().unwrap().unwrap().removed.is_empty());
        // Dump 7 moved on: retention goes up to the file dump 8 reads.
        shared.remove_consumer(7);
        p.retain().unwrap();
        assert_eq!(shared.files()[0].name, files[3]);
    }

    #[test]
    fn a_source_first_read_at_an_empty_position_resumes_from_it_not_from_now() {
        let dir = tempfile::tempdir().unwrap();
        let (mut p, recovered) = Pipeline::open(shared(dir.path())).unwrap();
        assert_eq!(p.start_of(0, &recovered), None, "never read");
        // east's primary had written nothing when it was first read.
        p.on_connected(0, "east:3306".into(), &GtidState::default());
        drop(p);
        let (mut p, recovered) = Pipeline::open(shared(dir.path())).unwrap();
        assert_eq!(
            p.start_of(0, &recovered),
            Some(GtidState::default()),
            "from the beginning of its binlog, not its position now"
        );
        assert_eq!(p.start_of(1, &recovered), None);
    }
}
