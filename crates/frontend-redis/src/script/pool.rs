//! The script threads and the script cache, shared by every worker.
//!
//! A script never runs on a worker thread (a `while true do end` would stall every client of
//! that worker): each script thread owns one Lua state and runs one script at a time. Threads
//! start on demand, up to `max_running_scripts`; past it a script waits for one to end. A
//! thread goes back to the idle list after each script, whether or not its client is still
//! there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use manifold_redis_proto::Protocol;

use manifold_redis_lua::cjson::Settings as CjsonSettings;

use crate::config::RedisConfig;

/// What a script thread sends its client's worker.
#[derive(Debug)]
pub enum FromScript {
    /// `redis.call`/`redis.pcall`: the command's arguments, and the protocol the script
    /// reads replies in (`redis.setresp`).
    Call { args: Vec<Vec<u8>>, proto: Protocol },
    /// The script ended: its reply.
    Done(Outcome),
}

/// How a script ended.
#[derive(Debug)]
pub enum Outcome {
    /// Its reply (a value or an error), in the client's protocol.
    Reply(Vec<u8>),
    /// It was stopped (`SCRIPT KILL`, the time limit, its client gone): the error reply;
    /// its writes are rolled back.
    Stopped(Vec<u8>),
    /// It did not compile: the error reply; the script is not cached.
    CompileError(Vec<u8>),
    /// `SCRIPT LOAD`: it compiled.
    Compiled,
    /// Its worker answered a call with [`Answer::Abort`] (or went away).
    Aborted,
}

/// What the worker answers a call with.
#[derive(Debug)]
pub enum Answer {
    /// The command's reply, RESP bytes in the script's protocol.
    Reply(Vec<u8>),
    /// Stop the script without a reply (its transaction failed; it runs again or fails).
    Abort,
}

/// One script to run (or only compile) on a script thread.
pub struct Job {
    /// The script's SHA1, lowercase hex.
    pub sha: String,
    pub source: Arc<Vec<u8>>,
    /// The function an `FCALL` runs (the script is its library's): its chunk is named
    /// `@user_function` and its errors name the function, as Redis's (else
    /// `@user_script` and the SHA1).
    pub function: Option<String>,
    pub keys: Vec<Vec<u8>>,
    pub argv: Vec<Vec<u8>>,
    /// The client's protocol, the script's reply is written in.
    pub proto: Protocol,
    /// Bytes the reply may hold (the client's output limit).
    pub out_limit: usize,
    /// Only compile it (`SCRIPT LOAD`).
    pub compile_only: bool,
    pub to_worker: tokio::sync::mpsc::UnboundedSender<FromScript>,
    pub answers: mpsc::Receiver<Answer>,
    /// Set by `SCRIPT KILL` (or the time limit): the script stops at its next check.
    pub killed: Arc<AtomicBool>,
    /// Past it the script is killed (`script_time_limit`).
    pub deadline: Option<Instant>,
}

type ThreadInbox = mpsc::Sender<(Job, Option<OwnedSemaphorePermit>)>;

struct Inner {
    /// The script cache: SHA1 -> source (`EVAL`, `SCRIPT LOAD`).
    sources: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    /// Bumped by `SCRIPT FLUSH`: threads drop their compiled scripts.
    epoch: AtomicU64,
    idle: Mutex<Vec<ThreadInbox>>,
    permits: Arc<Semaphore>,
    threads: AtomicUsize,
    /// Running scripts' kill flags, by a number of their own.
    running: Mutex<HashMap<u64, Arc<AtomicBool>>>,
    next_id: AtomicU64,
    /// `SCRIPT KILL`s (and `FUNCTION KILL`s) so far.
    kills: AtomicU64,
    memory_limit: usize,
    time_limit: Duration,
    /// Lua memory of every script thread, summed at each script's end (`used_memory_lua`).
    lua_memory: AtomicUsize,
    /// `SCRIPT LOAD`s compiling at once (see [`Scripts::check_syntax`]).
    syntax_checks: Semaphore,
    /// `cjson`'s settings, every Lua state's (reset by `SCRIPT FLUSH`).
    cjson: CjsonSettings,
}

impl Inner {
    /// A Lua state's memory went from `before` to `after` bytes (`used_memory_lua`).
    fn count_lua_memory(&self, before: usize, after: usize) {
        if after > before {
            self.lua_memory.fetch_add(after - before, Ordering::Relaxed);
        } else if before > after {
            self.lua_memory.fetch_sub(before - after, Ordering::Relaxed);
        }
    }
}

/// Most `SCRIPT LOAD`s compiling at once; more wait for one to end.
const SYNTAX_CHECKS: usize = 2;

/// A place among the `max_running_scripts`, held while it lives ([`Scripts::reserve`]).
#[derive(Debug)]
pub struct Slot(#[allow(dead_code)] OwnedSemaphorePermit);

/// The script cache and the script threads.
pub struct Scripts {
    inner: Arc<Inner>,
    /// The function libraries (`FUNCTION LOAD`).
    pub functions: super::functions::Libraries,
}

impl std::fmt::Debug for Scripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripts").finish_non_exhaustive()
    }
}

/// A running script's registration; unregistered when dropped.
pub struct Running<'a> {
    scripts: &'a Scripts,
    id: u64,
    pub killed: Arc<AtomicBool>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        lock(&self.scripts.inner.running).remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Scripts {
    pub fn new(config: &RedisConfig) -> Self {
        let max = config.max_running_scripts.max(1);
        Self {
            inner: Arc::new(Inner {
                sources: Mutex::default(),
                epoch: AtomicU64::new(0),
                idle: Mutex::default(),
                permits: Arc::new(Semaphore::new(max)),
                threads: AtomicUsize::new(0),
                running: Mutex::default(),
                next_id: AtomicU64::new(1),
                kills: AtomicU64::new(0),
                memory_limit: usize::try_from(config.script_memory_limit).unwrap_or(usize::MAX),
                time_limit: config.script_time_limit,
                lua_memory: AtomicUsize::new(0),
                syntax_checks: Semaphore::new(SYNTAX_CHECKS),
                cjson: CjsonSettings::default(),
            }),
            functions: super::functions::Libraries::default(),
        }
    }

    /// The cached source of `sha` (lowercase hex).
    pub fn source(&self, sha: &str) -> Option<Arc<Vec<u8>>> {
        lock(&self.inner.sources).get(sha).cloned()
    }

    pub fn cache(&self, sha: String, source: Arc<Vec<u8>>) {
        lock(&self.inner.sources).entry(sha).or_insert(source);
    }

    pub fn exists(&self, sha: &str) -> bool {
        lock(&self.inner.sources).contains_key(sha)
    }

    /// Scripts cached (`INFO`'s `number_of_cached_scripts`).
    pub fn cached(&self) -> usize {
        lock(&self.inner.sources).len()
    }

    /// Bytes of Lua memory the script threads held at their last script's end.
    pub fn lua_memory(&self) -> usize {
        self.inner.lua_memory.load(Ordering::Relaxed)
    }

    /// Bumped by each `SCRIPT FLUSH`: a Lua state made before is not to run scripts.
    pub fn epoch(&self) -> u64 {
        self.inner.epoch.load(Ordering::Relaxed)
    }

    /// A Lua state's memory went from `before` to `after` bytes (`used_memory_lua`).
    pub fn count_lua_memory(&self, before: usize, after: usize) {
        self.inner.count_lua_memory(before, after);
    }

    /// A new Lua state for scripts (`inline`: a worker's, see [`super::inline`]).
    pub fn new_state(&self, inline: bool) -> mlua::Result<super::lua::State> {
        super::lua::State::with(self.inner.memory_limit, inline, &self.inner.cjson)
    }

    /// `SCRIPT FLUSH`.
    pub fn flush(&self) {
        lock(&self.inner.sources).clear();
        self.inner.cjson.reset();
        self.inner.epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// `SCRIPT KILL`: kills every running script; `false` if none runs.
    pub fn kill_all(&self) -> bool {
        let running = lock(&self.inner.running);
        self.inner.kills.fetch_add(1, Ordering::Relaxed);
        for flag in running.values() {
            flag.store(true, Ordering::Relaxed);
        }
        !running.is_empty()
    }

    /// `SCRIPT KILL`s and `FUNCTION KILL`s so far: a script stopped while it changed was
    /// stopped by one (or may have been).
    pub fn kills(&self) -> u64 {
        self.inner.kills.load(Ordering::Relaxed)
    }

    /// `SCRIPT LOAD`'s check that `source` compiles (`Err`: the error reply). It runs on a
    /// blocking thread (parsing a big script must not stall a worker), at most
    /// [`SYNTAX_CHECKS`] at once, in a Lua state of its own: it takes no script thread and
    /// is no running script (`SCRIPT KILL` does not see it), as Redis only compiles it.
    pub async fn check_syntax(&self, source: Arc<Vec<u8>>) -> Result<(), Vec<u8>> {
        let limit = self.inner.memory_limit;
        self.off_thread(move || super::lua::check_syntax(&source, limit))
            .await
            .unwrap_or_else(|| Err(b"-ERR manifold: the script could not be compiled\r\n".to_vec()))
    }

    /// Runs `job` (a compile, a library's registration) on a blocking thread, at most
    /// [`SYNTAX_CHECKS`] at once, so no client's Lua holds a worker thread; `None`: it
    /// panicked.
    pub async fn off_thread<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let _permit = self.inner.syntax_checks.acquire().await;
        tokio::task::spawn_blocking(job).await.ok()
    }

    /// Registers a script about to run, for `SCRIPT KILL`.
    pub fn register(&self) -> Running<'_> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let killed = Arc::new(AtomicBool::new(false));
        lock(&self.inner.running).insert(id, killed.clone());
        Running {
            scripts: self,
            id,
            killed,
        }
    }

    /// The deadline of a script starting now.
    pub fn deadline(&self) -> Option<Instant> {
        (!self.inner.time_limit.is_zero()).then(|| Instant::now() + self.inner.time_limit)
    }

    /// One of the `max_running_scripts` places, held before a transaction that will run
    /// scripts begins (an `EXEC` queuing them), so that no script of it waits for a place
    /// while the transaction holds row locks another running script may wait for.
    pub async fn reserve(&self) -> Option<Slot> {
        self.inner
            .permits
            .clone()
            .acquire_owned()
            .await
            .ok()
            .map(Slot)
    }

    /// Hands `job` to an idle script thread (or a new one), waiting for one while
    /// `max_running_scripts` run, unless its caller holds a [`Slot`] (`reserved`).
    pub async fn start(&self, job: Job, reserved: bool) {
        let permit = if reserved {
            None
        } else {
            match self.inner.permits.clone().acquire_owned().await {
                Ok(permit) => Some(permit),
                Err(_) => return,
            }
        };
        let mut job = (job, permit);
        loop {
            let inbox = lock(&self.inner.idle).pop();
            let inbox = match inbox {
                Some(inbox) => inbox,
                None => match self.spawn() {
                    Some(inbox) => inbox,
                    // No thread could start: the job's channel closes, the worker sees
                    // the script aborted.
                    None => return,
                },
            };
            match inbox.send(job) {
                Ok(()) => return,
                // A thread that ended (cannot happen but by a panic): try another.
                Err(mpsc::SendError(back)) => job = back,
            }
        }
    }

    fn spawn(&self) -> Option<ThreadInbox> {
        let (tx, rx) = mpsc::channel::<(Job, Option<OwnedSemaphorePermit>)>();
        let inner = self.inner.clone();
        let me = tx.clone();
        let n = inner.threads.fetch_add(1, Ordering::Relaxed);
        std::thread::Builder::new()
            .name(format!("redis-script-{n}"))
            .spawn(move || {
                let mut state = match super::lua::State::with(inner.memory_limit, false, &inner.cjson) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(error = %e, "redis: a Lua state could not be made");
                        return;
                    }
                };
                let mut epoch = inner.epoch.load(Ordering::Relaxed);
                let mut own_memory = 0usize;
                while let Ok((job, permit)) = rx.recv() {
                    let now = inner.epoch.load(Ordering::Relaxed);
                    if now != epoch {
                        // `SCRIPT FLUSH` gives scripts a new Lua state, as Redis's does: what
                        // earlier scripts left in it (the libraries' settings, say
                        // `cjson.encode_number_precision`) is gone too.
                        match super::lua::State::with(inner.memory_limit, false, &inner.cjson) {
                            Ok(fresh) => state = fresh,
                            Err(_) => state.forget_scripts(),
                        }
                        epoch = now;
                    }
                    // A panic inside a run (a bug: none is known) costs that script its
                    // reply (its client hears it stopped, its writes are rolled back) and
                    // the state, never the thread nor the permit.
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        state.run(job)
                    }));
                    let Ok(finished) = run else {
                        tracing::error!("redis: a script's run failed inside manifold; its Lua state is replaced");
                        match super::lua::State::with(inner.memory_limit, false, &inner.cjson) {
                            Ok(fresh) => state = fresh,
                            Err(_) => return,
                        }
                        lock(&inner.idle).push(me.clone());
                        drop(permit);
                        continue;
                    };
                    if state.tampered() {
                        // A script changed what scripts share: the next gets a new state.
                        if let Ok(fresh) = super::lua::State::with(inner.memory_limit, false, &inner.cjson) {
                            state = fresh;
                        }
                    }
                    let used = state.used_memory();
                    inner.count_lua_memory(own_memory, used);
                    own_memory = used;
                    lock(&inner.idle).push(me.clone());
                    finished.send();
                    drop(permit);
                }
            })
            .ok()?;
        Some(tx)
    }
}
