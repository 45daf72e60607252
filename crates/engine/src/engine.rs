use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::balance::Balance;
use crate::blocking::BlockingPool;
use crate::config::EngineConfig;
use crate::errors::EngineError;
use crate::worker::{
    self, HandlerFactory, ShutdownCmd, WorkerReport, WorkerSetup, WorkerStartHook,
};

/// How long past the shutdown deadline we wait for a worker thread before giving up on it.
/// Only a handler that blocks its worker thread (a bug) can make a worker this late.
const JOIN_GRACE: Duration = Duration::from_secs(5);

/// Configures and starts an [`Engine`].
pub struct EngineBuilder {
    cfg: EngineConfig,
    listens: Vec<(SocketAddr, HandlerFactory)>,
    on_start: Vec<WorkerStartHook>,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("cfg", &self.cfg)
            .field(
                "listens",
                &self.listens.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
            )
            .field("on_start_hooks", &self.on_start.len())
            .finish()
    }
}

impl EngineBuilder {
    pub fn new(cfg: EngineConfig) -> Self {
        Self {
            cfg,
            listens: Vec::new(),
            on_start: Vec::new(),
        }
    }

    /// Adds a front port; every worker gets its own socket on it and its own handler from
    /// `factory`.
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr, factory: HandlerFactory) -> Self {
        self.listens.push((addr, factory));
        self
    }

    /// Adds a hook run on every worker thread before it accepts; hooks run in the order added.
    #[must_use]
    pub fn on_worker_start(mut self, f: WorkerStartHook) -> Self {
        self.on_start.push(f);
        self
    }

    /// Validates the config, binds every socket on this thread, starts the workers and waits
    /// until each is accepting. A bind error is returned here, and clients may connect as soon
    /// as this returns.
    pub fn start(self) -> Result<Engine, EngineError> {
        self.cfg.validate()?;
        // Before any worker times a request.
        crate::clock::calibrate(Duration::from_millis(20));
        let threads = self.cfg.effective_threads();

        let mut seen = HashSet::new();
        for (addr, _) in &self.listens {
            if addr.port() != 0 && !seen.insert(*addr) {
                return Err(EngineError::DuplicateListen(*addr));
            }
        }

        let mut addrs = Vec::with_capacity(self.listens.len());
        let mut groups = Vec::with_capacity(self.listens.len());
        for (addr, factory) in &self.listens {
            let (actual, sockets) =
                crate::listener::bind_group(*addr, threads, self.cfg.listen_backlog)?;
            addrs.push(actual);
            groups.push((sockets.into_iter(), factory));
        }

        let cores = if self.cfg.pin_threads {
            let cores = core_affinity::get_core_ids().filter(|c| !c.is_empty());
            if cores.is_none() {
                tracing::warn!("pin_threads is set but the usable cores are unknown; not pinning");
            }
            cores
        } else {
            None
        };

        let blocking = BlockingPool::new(self.cfg.blocking_config());
        let (balance, inboxes) = Balance::new(threads, self.cfg.balance_connections);
        let mut inboxes = inboxes.into_iter();
        let (ready_tx, ready_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let mut workers = Vec::with_capacity(threads);
        for id in 0..threads {
            let listeners = groups
                .iter_mut()
                .map(|(sockets, factory)| {
                    let socket = sockets.next().expect("one socket per worker");
                    (socket, HandlerFactory::clone(factory))
                })
                .collect();
            let (shutdown_tx, shutdown_rx) = oneshot::channel();
            let setup = WorkerSetup {
                id,
                balance: Arc::clone(&balance),
                inbox: inboxes.next().expect("one inbox per worker"),
                core: cores.as_ref().map(|c| c[id % c.len()]),
                listeners,
                on_start: self.on_start.clone(),
                blocking: blocking.clone(),
                ready: ready_tx.clone(),
                shutdown: shutdown_rx,
            };
            let done = done_tx.clone();
            let name = format!("mf-worker-{id}");
            let spawned = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    let report = worker::run(setup);
                    let _ = done.send(id);
                    report
                });
            match spawned {
                Ok(thread) => workers.push(WorkerHandle {
                    id,
                    thread,
                    shutdown: Some(shutdown_tx),
                }),
                Err(source) => {
                    abort_workers(workers, &blocking);
                    return Err(EngineError::ThreadSpawn { name, source });
                }
            }
        }
        drop(ready_tx);
        drop(done_tx);

        for _ in 0..threads {
            let failure = match ready_rx.recv() {
                Ok(Ok(_)) => continue,
                Ok(Err((worker, reason))) => EngineError::WorkerStart { worker, reason },
                // Every sender is gone without a report: a worker died outside the guarded steps.
                Err(mpsc::RecvError) => EngineError::WorkerStart {
                    worker: workers
                        .iter()
                        .find(|w| w.thread.is_finished())
                        .map_or(0, |w| w.id),
                    reason: "worker thread exited during startup without reporting why".to_owned(),
                },
            };
            abort_workers(workers, &blocking);
            return Err(failure);
        }

        tracing::info!(workers = threads, listen = ?addrs, "engine started");
        Ok(Engine {
            workers,
            done: done_rx,
            addrs,
            blocking,
            balance,
            cfg: self.cfg,
            threads,
        })
    }
}

/// Stops workers that never finished starting (their shutdown sender is dropped, which they
/// treat as "stop now") and waits for them.
fn abort_workers(workers: Vec<WorkerHandle>, blocking: &BlockingPool) {
    for w in workers {
        drop(w.shutdown);
        let _ = w.thread.join();
    }
    blocking.shutdown(Duration::ZERO);
}

struct WorkerHandle {
    id: usize,
    thread: JoinHandle<WorkerReport>,
    shutdown: Option<oneshot::Sender<ShutdownCmd>>,
}

/// What happened to connections that were in flight when shutdown began.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Finished on their own before the deadline.
    pub drained: usize,
    /// Still running at the deadline and dropped.
    pub aborted: usize,
}

/// Running workers. Dropping it without [`Engine::shutdown`] aborts every connection at once.
pub struct Engine {
    workers: Vec<WorkerHandle>,
    done: mpsc::Receiver<usize>,
    addrs: Vec<SocketAddr>,
    blocking: BlockingPool,
    balance: Arc<Balance>,
    cfg: EngineConfig,
    threads: usize,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("threads", &self.threads)
            .field("addrs", &self.addrs)
            .field("blocking", &self.blocking)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Bound addresses (port 0 resolved), in `listen()` order.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.addrs.clone()
    }

    /// Number of workers.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Each worker's client connections (of every front port), by worker index: those it
    /// serves and those another worker is handing to it.
    pub fn connections_per_worker(&self) -> Vec<usize> {
        self.balance.counts()
    }

    pub fn blocking(&self) -> BlockingPool {
        self.blocking.clone()
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Stops accepting on every worker now, flags every worker's [`crate::Drain`], waits up to
    /// `timeout` for in-flight connections to end, aborts the rest, joins the workers and shuts
    /// the blocking pool down. Blocks the calling thread; do not call it from a worker.
    pub fn shutdown(mut self, timeout: Duration) -> ShutdownReport {
        self.shutdown_inner(timeout)
    }

    /// Blocks until SIGTERM or SIGINT, then shuts down with the configured `shutdown_timeout`.
    pub fn run_until_signal(self) -> ShutdownReport {
        let signal = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|rt| rt.block_on(wait_for_signal()));
        match signal {
            Ok(name) => tracing::info!(signal = name, "shutdown requested"),
            // Without signal handling nothing could stop us gracefully; stop now rather than
            // run unstoppable.
            Err(e) => tracing::error!(error = %e, "cannot wait for signals; shutting down"),
        }
        let timeout = self.cfg.shutdown_timeout;
        self.shutdown(timeout)
    }

    fn shutdown_inner(&mut self, timeout: Duration) -> ShutdownReport {
        if self.workers.is_empty() {
            return ShutdownReport::default();
        }
        let started = Instant::now();
        let deadline = started + timeout;
        for w in &mut self.workers {
            if let Some(tx) = w.shutdown.take() {
                // A worker that is already gone has nothing left to drain.
                let _ = tx.send(ShutdownCmd { deadline });
            }
        }
        tracing::info!(
            timeout = %crate::duration_serde::format_duration(timeout),
            "shutdown: stopped accepting, draining connections"
        );

        let hard_deadline = deadline + JOIN_GRACE;
        let mut finished = HashSet::new();
        while finished.len() < self.workers.len() {
            let wait = hard_deadline.saturating_duration_since(Instant::now());
            match self.done.recv_timeout(wait) {
                Ok(id) => {
                    finished.insert(id);
                }
                // Disconnected: the remaining workers died without reporting (panicked).
                Err(_) => break,
            }
        }

        let mut report = ShutdownReport::default();
        for w in self.workers.drain(..) {
            if !finished.contains(&w.id) && !w.thread.is_finished() {
                tracing::error!(
                    worker = w.id,
                    "worker did not stop (its thread is blocked); leaving it behind"
                );
                continue;
            }
            if let Ok(r) = w.thread.join() {
                report.drained += r.drained;
                report.aborted += r.aborted;
            } else {
                tracing::error!(worker = w.id, "worker thread panicked");
            }
        }

        // Queued blocking jobs get what is left of the deadline, but at least a moment.
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100));
        if !self.blocking.shutdown(left) {
            tracing::warn!("blocking pool threads still busy after shutdown; leaving them");
        }
        tracing::info!(
            drained = report.drained,
            aborted = report.aborted,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "shutdown complete"
        );
        report
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if !self.workers.is_empty() {
            self.shutdown_inner(Duration::ZERO);
        }
    }
}

/// Resolves on the first SIGTERM or SIGINT with the signal's name. For binaries that stop on
/// other triggers too (an admin command) and so cannot use [`Engine::run_until_signal`].
pub async fn wait_for_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}
