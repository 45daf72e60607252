//! One worker: a current-thread runtime with a `LocalSet`, its own listening sockets, an inbox
//! of connections other workers accepted for it, and the sessions it serves. Everything here
//! is `!Send` on purpose: a connection is handed over (as a plain socket) at most once, before
//! its handler starts, and never leaves the thread serving it, so per-connection state needs
//! no locks.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{oneshot, Notify};
use tokio::task::{JoinHandle, LocalSet};

use crate::balance::{Balance, Handoff};
use crate::blocking::{panic_message, BlockingPool};

/// Serves connections accepted on one front port of one worker.
///
/// Created once per worker (per port) by a [`HandlerFactory`] on that worker's thread, so it may
/// hold `Rc`/`RefCell` state shared by all the worker's sessions (backend pools, caches).
pub trait ConnectionHandler: 'static {
    /// Runs one client connection to completion. The future is spawned with `spawn_local` on the
    /// worker; when it resolves the connection counts as finished. It is dropped (aborted) if it
    /// outlives the shutdown deadline.
    fn handle(
        self: Rc<Self>,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn Future<Output = ()>>>;
}

/// Builds a worker's handler; called on the worker thread, inside its `LocalSet`.
pub type HandlerFactory =
    Arc<dyn Fn(&Rc<WorkerContext>) -> Rc<dyn ConnectionHandler> + Send + Sync>;

/// Wraps a closure building a concrete handler into a [`HandlerFactory`].
pub fn handler_factory<H, F>(make: F) -> HandlerFactory
where
    H: ConnectionHandler,
    F: Fn(&Rc<WorkerContext>) -> H + Send + Sync + 'static,
{
    Arc::new(move |ctx: &Rc<WorkerContext>| Rc::new(make(ctx)) as Rc<dyn ConnectionHandler>)
}

/// Hook run on each worker thread before it starts accepting, inside its `LocalSet`
/// (so `tokio::task::spawn_local` works), e.g. to pre-warm per-worker backend pools.
pub type WorkerStartHook = Arc<dyn Fn(&Rc<WorkerContext>) + Send + Sync>;

/// The worker's shutdown flag. Sessions `select!` on [`Drain::notified`] while idle between
/// client commands and check [`Drain::is_draining`] between statements, so that they end at a
/// clean boundary instead of being cut mid-transaction at the deadline.
#[derive(Debug, Default)]
pub struct Drain {
    draining: Cell<bool>,
    notify: Notify,
}

impl Drain {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_draining(&self) -> bool {
        self.draining.get()
    }

    /// Resolves once draining has begun (immediately if it already has).
    pub async fn notified(&self) {
        // Created before the check: `notify_waiters` reaches futures that exist, even unpolled.
        let notified = self.notify.notified();
        if self.draining.get() {
            return;
        }
        notified.await;
    }

    /// Starts draining; the engine calls this at shutdown. Public so that code driving a
    /// [`WorkerContext::standalone`] in tests can simulate it. Idempotent.
    pub fn begin(&self) {
        if !self.draining.replace(true) {
            self.notify.notify_waiters();
        }
    }
}

/// Per-worker handle given to services. `!Send`: it lives and dies on its worker thread.
pub struct WorkerContext {
    id: usize,
    workers: usize,
    drain: Drain,
    blocking: BlockingPool,
    /// Every worker's connection count, and where to send a connection another should serve.
    balance: Arc<Balance>,
    active: Cell<usize>,
    /// Most connections active at once since the last memory trim.
    peak_active: Cell<usize>,
    memory_trims: Cell<u64>,
    accepted: Cell<u64>,
    /// Connections accepted by other workers and handed to this one.
    handed_in: Cell<u64>,
    /// Woken when `active` drops to zero, so shutdown need not poll.
    idle: Notify,
}

impl std::fmt::Debug for WorkerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerContext")
            .field("id", &self.id)
            .field("workers", &self.workers)
            .field("draining", &self.drain.is_draining())
            .field("active", &self.active.get())
            .field("accepted", &self.accepted.get())
            .field("handed_in", &self.handed_in.get())
            .finish_non_exhaustive()
    }
}

impl WorkerContext {
    fn new(id: usize, balance: Arc<Balance>, blocking: BlockingPool) -> Self {
        Self {
            id,
            workers: balance.workers(),
            drain: Drain::new(),
            blocking,
            balance,
            active: Cell::new(0),
            peak_active: Cell::new(0),
            memory_trims: Cell::new(0),
            accepted: Cell::new(0),
            handed_in: Cell::new(0),
            idle: Notify::new(),
        }
    }

    /// A context not attached to any engine, for unit-testing services that take one.
    pub fn standalone(id: usize, blocking: BlockingPool) -> Rc<Self> {
        // Worker `id` of `id + 1`, so that its count has a place; nothing is ever steered.
        let (balance, _) = Balance::new(id + 1, false);
        let mut ctx = Self::new(id, balance, blocking);
        ctx.workers = 1;
        Rc::new(ctx)
    }

    /// This worker's index, `0..workers()`.
    pub fn id(&self) -> usize {
        self.id
    }

    /// How many workers the engine runs.
    pub fn workers(&self) -> usize {
        self.workers
    }

    pub fn drain(&self) -> &Drain {
        &self.drain
    }

    pub fn blocking(&self) -> &BlockingPool {
        &self.blocking
    }

    /// Connections of this worker whose handler has not finished yet.
    pub fn active_connections(&self) -> usize {
        self.active.get()
    }

    /// Times this worker returned free heap memory to the system after its connections fell
    /// well below their peak.
    pub fn memory_trims(&self) -> u64 {
        self.memory_trims.get()
    }

    /// Connections this worker has accepted from its own listening sockets since it started,
    /// whether it served them or handed them to a worker with fewer connections.
    pub fn accepted_connections(&self) -> u64 {
        self.accepted.get()
    }

    /// Connections other workers accepted and handed to this one since it started.
    pub fn handed_in_connections(&self) -> u64 {
        self.handed_in.get()
    }

    /// Counts a connection as active until the returned guard drops. The engine does this for
    /// every accepted connection; services can use it for connections they adopt themselves.
    pub fn track_connection(self: &Rc<Self>) -> ConnectionGuard {
        self.balance.arrived(self.id);
        self.track_counted()
    }

    /// [`Self::track_connection`] for a connection already in this worker's shared count (one
    /// another worker handed over).
    fn track_counted(self: &Rc<Self>) -> ConnectionGuard {
        let active = self.active.get() + 1;
        self.active.set(active);
        if active > self.peak_active.get() {
            self.peak_active.set(active);
        }
        ConnectionGuard {
            ctx: Rc::clone(self),
        }
    }
}

/// Keeps a connection counted as active; dropping it (also by abort) uncounts it.
pub struct ConnectionGuard {
    ctx: Rc<WorkerContext>,
}

impl std::fmt::Debug for ConnectionGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionGuard")
            .field("worker", &self.ctx.id)
            .finish()
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.ctx.balance.left(self.ctx.id);
        let left = self.ctx.active.get() - 1;
        self.ctx.active.set(left);
        if left == 0 {
            self.ctx.idle.notify_waiters();
        }
        let peak = self.ctx.peak_active.get();
        if peak - left >= crate::memory::TRIM_AFTER_CLOSED && left <= peak / 2 {
            self.ctx.peak_active.set(left);
            self.ctx.memory_trims.set(self.ctx.memory_trims.get() + 1);
            tracing::debug!(
                worker = self.ctx.id,
                peak,
                left,
                "connections fell well below their peak; returning free memory"
            );
            // Not awaited: nothing depends on it.
            drop(self.ctx.blocking.spawn(crate::memory::return_free_memory));
        }
    }
}

/// What the engine tells a worker when shutting down.
pub(crate) struct ShutdownCmd {
    pub deadline: Instant,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WorkerReport {
    pub drained: usize,
    pub aborted: usize,
}

pub(crate) struct WorkerSetup {
    pub id: usize,
    pub balance: Arc<Balance>,
    /// Connections other workers hand to this one.
    pub inbox: UnboundedReceiver<Handoff>,
    pub core: Option<core_affinity::CoreId>,
    pub listeners: Vec<(std::net::TcpListener, HandlerFactory)>,
    pub on_start: Vec<WorkerStartHook>,
    pub blocking: BlockingPool,
    pub ready: mpsc::Sender<Result<usize, (usize, String)>>,
    pub shutdown: oneshot::Receiver<ShutdownCmd>,
}

/// Body of a worker thread.
pub(crate) fn run(setup: WorkerSetup) -> WorkerReport {
    let WorkerSetup {
        id,
        balance,
        inbox,
        core,
        listeners,
        on_start,
        blocking,
        ready,
        shutdown,
    } = setup;

    if let Some(core) = core {
        if core_affinity::set_for_current(core) {
            tracing::debug!(worker = id, core = core.id, "worker pinned");
        } else {
            tracing::warn!(worker = id, core = core.id, "cannot pin worker to core");
        }
    }

    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err((id, format!("cannot build runtime: {e}"))));
            return WorkerReport::default();
        }
    };
    let local = LocalSet::new();
    let ctx = Rc::new(WorkerContext::new(id, balance, blocking));

    let report = local.block_on(&rt, async {
        // Caught so that start() can name the worker and the cause instead of a lost thread.
        for hook in &on_start {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| hook(&ctx))) {
                let reason = format!("start hook panicked: {}", panic_message(panic.as_ref()));
                let _ = ready.send(Err((id, reason)));
                return None;
            }
        }
        let mut accepting = Vec::with_capacity(listeners.len());
        let mut handlers = Vec::with_capacity(listeners.len());
        for (std_listener, factory) in listeners {
            let listener = match TcpListener::from_std(std_listener) {
                Ok(l) => l,
                Err(e) => {
                    let _ = ready.send(Err((id, format!("cannot register listener: {e}"))));
                    return None;
                }
            };
            let handler = match catch_unwind(AssertUnwindSafe(|| factory(&ctx))) {
                Ok(h) => h,
                Err(panic) => {
                    let reason = format!(
                        "handler factory panicked: {}",
                        panic_message(panic.as_ref())
                    );
                    let _ = ready.send(Err((id, reason)));
                    return None;
                }
            };
            accepting.push(listener);
            handlers.push(handler);
        }
        // Started only once every handler exists: a handed-over connection may name any port.
        let handlers: Rc<[Rc<dyn ConnectionHandler>]> = handlers.into();
        let mut accept_tasks: Vec<_> = accepting
            .into_iter()
            .enumerate()
            .map(|(port, listener)| {
                tokio::task::spawn_local(accept_loop(
                    listener,
                    port,
                    Rc::clone(&handlers),
                    Rc::clone(&ctx),
                ))
            })
            .collect();
        accept_tasks.push(tokio::task::spawn_local(inbox_loop(
            inbox,
            handlers,
            Rc::clone(&ctx),
        )));
        let _ = ready.send(Ok(id));
        drop(ready);

        // A dropped sender means the engine went away without a shutdown: stop at once.
        let deadline = shutdown
            .await
            .map_or_else(|_| Instant::now(), |cmd| cmd.deadline);
        Some(drain(&ctx, accept_tasks, deadline).await)
    });

    // Dropping the LocalSet drops the sessions still running: that is the abort. Do it while
    // the runtime is alive so their sockets deregister cleanly.
    drop(local);
    drop(rt);
    let report = report.unwrap_or_default();
    tracing::debug!(
        worker = id,
        drained = report.drained,
        aborted = report.aborted,
        "worker stopped"
    );
    report
}

async fn drain(
    ctx: &Rc<WorkerContext>,
    accept_tasks: Vec<JoinHandle<()>>,
    deadline: Instant,
) -> WorkerReport {
    // Counted before the flag is raised: idle sessions close as soon as they see it.
    let in_flight = ctx.active.get();
    ctx.drain.begin();
    for task in accept_tasks {
        // An accept loop only ends by panicking or on drain; either way its listener is gone.
        let _ = task.await;
    }
    tracing::debug!(worker = ctx.id, in_flight, "worker stopped accepting");
    let deadline = tokio::time::Instant::from_std(deadline);
    loop {
        let idle = ctx.idle.notified();
        if ctx.active.get() == 0 {
            break;
        }
        tokio::select! {
            () = idle => {}
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    let aborted = ctx.active.get();
    WorkerReport {
        drained: in_flight - aborted,
        aborted,
    }
}

/// Pause after an accept error that does not go away by retrying at once (EMFILE, ENOBUFS):
/// long enough not to spin, short enough not to leave the backlog unattended.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

async fn accept_loop(
    listener: TcpListener,
    port: usize,
    handlers: Rc<[Rc<dyn ConnectionHandler>]>,
    ctx: Rc<WorkerContext>,
) {
    loop {
        // Biased: once draining, never take one more connection even if one is ready.
        let accepted = tokio::select! {
            biased;
            () = ctx.drain.notified() => break,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, peer)) => {
                ctx.accepted.set(ctx.accepted.get() + 1);
                tracing::trace!(worker = ctx.id, %peer, "connection accepted");
                let stream = match ctx.balance.steer(ctx.id) {
                    Some(to) => match hand_over(&ctx, to, port, stream, peer) {
                        Some(back) => back,
                        None => continue,
                    },
                    None => stream,
                };
                serve(&handlers[port], stream, peer, &ctx, ctx.track_connection());
            }
            Err(e) if is_per_connection_error(&e) => {
                // The peer gave up before we accepted; nothing wrong with the listener.
                tracing::debug!(worker = ctx.id, error = %e, "accept: connection lost");
            }
            Err(e) => {
                tracing::warn!(worker = ctx.id, error = %e, "accept failed; backing off");
                tokio::select! {
                    biased;
                    () = ctx.drain.notified() => break,
                    () = tokio::time::sleep(ACCEPT_ERROR_BACKOFF) => {}
                }
            }
        }
    }
    tracing::debug!(worker = ctx.id, "listener closed");
}

/// Sends a just-accepted connection to worker `to`. Returns it if it stays here (`to` no
/// longer takes connections), `None` once it is sent or lost.
fn hand_over(
    ctx: &Rc<WorkerContext>,
    to: usize,
    port: usize,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
) -> Option<tokio::net::TcpStream> {
    // Off this worker's epoll; the receiver registers it with its own.
    let stream = match stream.into_std() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(
                worker = ctx.id, %peer, error = %e,
                "cannot hand a connection over; closing it"
            );
            return None;
        }
    };
    let back = match ctx.balance.send(to, Handoff { port, stream, peer }) {
        Ok(()) => {
            tracing::trace!(worker = ctx.id, to, %peer, "connection handed over");
            return None;
        }
        Err(back) => back.stream,
    };
    match tokio::net::TcpStream::from_std(back) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(
                worker = ctx.id, %peer, error = %e,
                "cannot take a connection back; closing it"
            );
            None
        }
    }
}

/// Serves the connections other workers hand to this one, until draining begins.
async fn inbox_loop(
    mut inbox: UnboundedReceiver<Handoff>,
    handlers: Rc<[Rc<dyn ConnectionHandler>]>,
    ctx: Rc<WorkerContext>,
) {
    loop {
        let handoff = tokio::select! {
            biased;
            () = ctx.drain.notified() => break,
            h = inbox.recv() => match h {
                Some(h) => h,
                None => break,
            },
        };
        // Counted by the sender already.
        let guard = ctx.track_counted();
        ctx.handed_in.set(ctx.handed_in.get() + 1);
        match tokio::net::TcpStream::from_std(handoff.stream) {
            Ok(stream) => serve(&handlers[handoff.port], stream, handoff.peer, &ctx, guard),
            Err(e) => {
                tracing::warn!(
                    worker = ctx.id, peer = %handoff.peer, error = %e,
                    "cannot register a handed-over connection; closing it"
                );
            }
        }
    }
    // Connections still on their way were accepted but never served: close them, as the
    // kernel does with those left in the listen backlog.
    inbox.close();
    while let Ok(h) = inbox.try_recv() {
        ctx.balance.left(ctx.id);
        drop(h);
    }
}

/// Runs one connection's handler on this worker; `guard` keeps it counted until it ends.
fn serve(
    handler: &Rc<dyn ConnectionHandler>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    ctx: &Rc<WorkerContext>,
    guard: ConnectionGuard,
) {
    let fut = Rc::clone(handler).handle(stream, peer, Rc::clone(ctx));
    tokio::task::spawn_local(async move {
        let _guard = guard;
        fut.await;
    });
}

fn is_per_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || matches!(e.raw_os_error(), Some(libc::EPROTO | libc::EPERM))
}
