#![forbid(unsafe_code)]
//! Blocking-pool elasticity. Assertions are on `stats()`, waiting for a state with a generous
//! bound rather than sleeping for a fixed time.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use manifold_engine::{BlockingConfig, BlockingError, BlockingPool, BlockingStats};

/// Jobs block on this until `open()`.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn wait(&self) {
        let (open, cv) = &*self.0;
        let mut g = open.lock().unwrap();
        while !*g {
            g = cv.wait(g).unwrap();
        }
    }

    fn open(&self) {
        let (open, cv) = &*self.0;
        *open.lock().unwrap() = true;
        cv.notify_all();
    }
}

fn wait_for(pool: &BlockingPool, what: &str, ok: impl Fn(BlockingStats) -> bool) -> BlockingStats {
    let give_up = Instant::now() + Duration::from_secs(3);
    loop {
        let s = pool.stats();
        if ok(s) {
            return s;
        }
        assert!(
            Instant::now() < give_up,
            "timed out waiting for {what}; last {s:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn grows_under_queued_work_and_shrinks_when_idle() {
    let pool = BlockingPool::new(BlockingConfig {
        min_threads: 0,
        max_threads: 4,
        grow_ratio: 1,
        idle_timeout: Duration::from_millis(150),
    });
    assert_eq!(pool.stats().threads, 0);

    let gate = Gate::default();
    let jobs: Vec<_> = (0..16)
        .map(|i| {
            let gate = gate.clone();
            pool.spawn(move || {
                gate.wait();
                i * 2
            })
        })
        .collect();

    let s = wait_for(&pool, "4 busy threads", |s| s.busy == 4);
    assert_eq!(
        s,
        BlockingStats {
            threads: 4,
            queued: 12,
            busy: 4
        }
    );

    gate.open();
    let results: Vec<_> = block_on(async {
        let mut out = Vec::new();
        for j in jobs {
            out.push(j.await.unwrap());
        }
        out
    });
    assert_eq!(results, (0..16).map(|i| i * 2).collect::<Vec<_>>());
    assert!(pool.stats().threads <= 4);

    wait_for(&pool, "threads to exit", |s| s.threads == 0);
    assert_eq!(pool.stats(), BlockingStats::default());

    // And it grows again from nothing.
    assert_eq!(block_on(pool.spawn(|| "again")).unwrap(), "again");
}

#[test]
fn grow_ratio_limits_growth() {
    let pool = BlockingPool::new(BlockingConfig {
        min_threads: 0,
        max_threads: 8,
        grow_ratio: 4,
        idle_timeout: Duration::from_secs(10),
    });
    let gate = Gate::default();
    let jobs: Vec<_> = (0..8)
        .map(|_| {
            let gate = gate.clone();
            pool.spawn(move || gate.wait())
        })
        .collect();
    // 1st job starts a thread; a 2nd needs a backlog above 4; a 3rd above 8, which 8 jobs
    // cannot reach.
    let s = wait_for(&pool, "2 busy threads", |s| s.busy == 2);
    assert_eq!(s.threads, 2, "{s:?}");
    assert_eq!(s.queued, 6, "{s:?}");
    gate.open();
    block_on(async {
        for j in jobs {
            j.await.unwrap();
        }
    });
    assert!(pool.shutdown(Duration::from_secs(2)));
}

#[test]
fn keeps_min_threads_when_idle() {
    let pool = BlockingPool::new(BlockingConfig {
        min_threads: 2,
        max_threads: 3,
        grow_ratio: 1,
        idle_timeout: Duration::from_millis(100),
    });
    assert_eq!(pool.stats().threads, 2);
    let gate = Gate::default();
    let jobs: Vec<_> = (0..6)
        .map(|_| {
            let gate = gate.clone();
            pool.spawn(move || gate.wait())
        })
        .collect();
    let s = wait_for(&pool, "3 busy threads", |s| s.busy == 3);
    assert_eq!(s.threads, 3);
    gate.open();
    block_on(async {
        for j in jobs {
            j.await.unwrap();
        }
    });
    wait_for(&pool, "shrink to min", |s| s.threads == 2);
    // Several idle periods later the minimum is still there.
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(pool.stats().threads, 2);
}

#[test]
fn panics_are_reported_and_the_pool_survives() {
    let pool = BlockingPool::new(BlockingConfig {
        max_threads: 1,
        ..BlockingConfig::default()
    });
    let err = block_on(pool.spawn(|| -> u8 { panic!("boom") })).unwrap_err();
    assert_eq!(err, BlockingError::Panicked("boom".into()));
    assert_eq!(block_on(pool.spawn(|| 7)).unwrap(), 7);
}

#[test]
fn shutdown_finishes_queued_jobs_then_refuses() {
    let pool = BlockingPool::new(BlockingConfig {
        max_threads: 1,
        ..BlockingConfig::default()
    });
    let gate = Gate::default();
    let blocked = {
        let gate = gate.clone();
        pool.spawn(move || gate.wait())
    };
    let queued = pool.spawn(|| 5);
    wait_for(&pool, "one busy, one queued", |s| {
        s.busy == 1 && s.queued == 1
    });
    let clone = pool.clone();
    let stopper = std::thread::spawn(move || clone.shutdown(Duration::from_secs(3)));
    // New work is refused as soon as shutdown begins, even before the threads are gone.
    // A refused job resolves at once; an accepted one would wait behind the gate, so only peek.
    let refused = loop {
        let peek =
            block_on(async { tokio::time::timeout(Duration::ZERO, pool.spawn(|| ())).await });
        match peek {
            Ok(Err(e)) => break e,
            Ok(Ok(())) => panic!("a job ran while the only thread is blocked"),
            Err(_pending) => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    assert_eq!(refused, BlockingError::Shutdown);
    gate.open();
    assert!(stopper.join().unwrap(), "threads did not exit");
    block_on(blocked).unwrap();
    assert_eq!(block_on(queued).unwrap(), 5);
    assert_eq!(pool.stats().threads, 0);
}
