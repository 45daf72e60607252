//! Elastic pool for work that may block or burn CPU (RSA, file I/O, spill files), kept off the
//! workers so one slow job cannot stall every session of a core.
//!
//! Elasticity follows XRPC: start with `min_threads`, add a thread when the jobs nobody is about
//! to pick up exceed `grow_ratio * live threads` (up to `max_threads`), and let threads that
//! stayed idle for `idle_timeout` exit down to `min_threads`. A mutex-guarded queue is fine here:
//! this is not the per-request path.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::errors::BlockingError;

/// Sizing of a [`BlockingPool`]; see [`crate::EngineConfig`] for the meaning of each figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockingConfig {
    pub min_threads: usize,
    pub max_threads: usize,
    pub grow_ratio: usize,
    pub idle_timeout: Duration,
}

impl Default for BlockingConfig {
    fn default() -> Self {
        Self {
            min_threads: 0,
            max_threads: 16,
            grow_ratio: 1,
            idle_timeout: Duration::from_secs(10),
        }
    }
}

/// A snapshot of the pool, for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockingStats {
    /// Live threads (busy or idle).
    pub threads: usize,
    /// Jobs waiting for a thread.
    pub queued: usize,
    /// Threads running a job right now.
    pub busy: usize,
}

type Job = Box<dyn FnOnce() + Send + 'static>;

struct State {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
    busy: usize,
    shutdown: bool,
    next_id: usize,
}

struct Shared {
    cfg: BlockingConfig,
    state: Mutex<State>,
    work: Condvar,
    exited: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and inside catch_unwind, so poison carries no broken state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Owned by the `BlockingPool` clones only (threads hold `Shared`), so dropping the last clone
/// tells the threads to finish rather than leaking `min_threads` forever.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        begin_shutdown(&self.shared);
    }
}

/// Cheap to clone, `Send + Sync`; all clones share one set of threads.
#[derive(Clone)]
pub struct BlockingPool {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for BlockingPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingPool")
            .field("cfg", &self.handle.shared.cfg)
            .field("stats", &self.stats())
            .finish()
    }
}

impl BlockingPool {
    /// Starts `min_threads` threads at once. Out-of-range figures are clamped (max ≥ 1,
    /// min ≤ max, ratio ≥ 1); use [`crate::EngineConfig::validate`] to report them instead.
    pub fn new(cfg: BlockingConfig) -> Self {
        let max_threads = cfg.max_threads.max(1);
        let cfg = BlockingConfig {
            min_threads: cfg.min_threads.min(max_threads),
            max_threads,
            grow_ratio: cfg.grow_ratio.max(1),
            idle_timeout: if cfg.idle_timeout.is_zero() {
                Duration::from_millis(1)
            } else {
                cfg.idle_timeout
            },
        };
        let shared = Arc::new(Shared {
            cfg,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                threads: 0,
                idle: 0,
                busy: 0,
                shutdown: false,
                next_id: 0,
            }),
            work: Condvar::new(),
            exited: Condvar::new(),
        });
        {
            let mut st = shared.lock();
            for _ in 0..cfg.min_threads {
                if let Err(e) = start_thread(&shared, &mut st) {
                    tracing::warn!(error = %e, "blocking pool: cannot start a minimum thread");
                    break;
                }
            }
        }
        Self {
            handle: Arc::new(Handle { shared }),
        }
    }

    /// Runs `f` on a pool thread; the future resolves to its result.
    ///
    /// The job is queued when `spawn` is called, not when the future is first polled, and
    /// dropping the future does not cancel it (a blocking call cannot be interrupted anyway).
    pub fn spawn<F, R>(
        &self,
        f: F,
    ) -> impl Future<Output = Result<R, BlockingError>> + Send + 'static
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let result = catch_unwind(AssertUnwindSafe(f))
                .map_err(|payload| BlockingError::Panicked(panic_message(payload.as_ref())));
            // The caller may have stopped waiting; the result is then simply discarded.
            let _ = tx.send(result);
        });
        let submitted = self.submit(job);
        async move {
            submitted?;
            rx.await.unwrap_or(Err(BlockingError::Canceled))
        }
    }

    pub fn stats(&self) -> BlockingStats {
        let st = self.handle.shared.lock();
        BlockingStats {
            threads: st.threads,
            queued: st.queue.len(),
            busy: st.busy,
        }
    }

    pub fn config(&self) -> BlockingConfig {
        self.handle.shared.cfg
    }

    /// Refuses new jobs, lets threads finish what is queued, and waits up to `timeout` for them
    /// to exit. Returns whether they all did; stragglers keep running detached.
    pub fn shutdown(&self, timeout: Duration) -> bool {
        let shared = &self.handle.shared;
        begin_shutdown(shared);
        let deadline = Instant::now() + timeout;
        let mut st = shared.lock();
        while st.threads > 0 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = shared
                .exited
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    fn submit(&self, job: Job) -> Result<(), BlockingError> {
        let shared = &self.handle.shared;
        let cfg = shared.cfg;
        let mut st = shared.lock();
        if st.shutdown {
            return Err(BlockingError::Shutdown);
        }
        st.queue.push_back(job);
        if st.idle > 0 {
            shared.work.notify_one();
        }
        // Idle threads are about to take jobs, so only the rest count as backlog.
        let backlog = st.queue.len().saturating_sub(st.idle);
        if st.threads < cfg.max_threads && backlog > cfg.grow_ratio * st.threads {
            if let Err(e) = start_thread(shared, &mut st) {
                tracing::warn!(error = %e, threads = st.threads, "blocking pool: cannot grow");
                if st.threads == 0 {
                    // Nobody would ever run it; the lock is held, so the last job is ours.
                    st.queue.pop_back();
                    return Err(BlockingError::Canceled);
                }
            }
        }
        Ok(())
    }
}

fn begin_shutdown(shared: &Shared) {
    let mut st = shared.lock();
    st.shutdown = true;
    drop(st);
    shared.work.notify_all();
}

fn start_thread(shared: &Arc<Shared>, st: &mut State) -> std::io::Result<()> {
    let id = st.next_id;
    st.next_id += 1;
    let worker_shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name(format!("mf-blocking-{id}"))
        .spawn(move || run_thread(&worker_shared))?;
    st.threads += 1;
    tracing::debug!(threads = st.threads, "blocking pool: thread started");
    Ok(())
}

fn run_thread(shared: &Shared) {
    let cfg = shared.cfg;
    let mut st = shared.lock();
    let mut idle_since = Instant::now();
    loop {
        if let Some(job) = st.queue.pop_front() {
            st.busy += 1;
            drop(st);
            job();
            st = shared.lock();
            st.busy -= 1;
            idle_since = Instant::now();
            continue;
        }
        if st.shutdown {
            break;
        }
        let mut waited = idle_since.elapsed();
        if waited >= cfg.idle_timeout {
            if st.threads > cfg.min_threads {
                break;
            }
            // A kept-alive minimum thread starts a fresh idle period instead of spinning.
            idle_since = Instant::now();
            waited = Duration::ZERO;
        }
        st.idle += 1;
        st = shared
            .work
            .wait_timeout(st, cfg.idle_timeout.saturating_sub(waited))
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        st.idle -= 1;
    }
    st.threads -= 1;
    tracing::debug!(threads = st.threads, "blocking pool: thread exited");
    drop(st);
    shared.exited.notify_all();
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
