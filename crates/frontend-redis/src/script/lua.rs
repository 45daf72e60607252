//! A script thread's Lua state: the libraries Redis 7.0 loads, the `redis` table, the
//! globals protection, and running one [`Job`].
//!
//! Globals, as Redis 7.0.15 behaves: a script runs with an environment of its own that reads
//! the state's globals; reading an undefined global fails (`Script attempted to access
//! nonexistent global variable 'x'`); the globals and every table reachable from them or
//! from the string metatable are read-only: a write fails (`Attempt to modify a readonly
//! table`), through `rawset` and `table.insert` too (see `prelude.lua`); `print`, `dofile`,
//! `loadfile`, `setfenv`, `getfenv`, `newproxy`, `os`, `io`, `debug`, `package`,
//! `require`, `module` are not there.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

use manifold_redis_lua::cjson::Settings as CjsonSettings;
use manifold_redis_proto::frame::Frame;
use manifold_redis_proto::{Protocol, Reply};
use mlua::{
    Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, Variadic, VmState,
};
use sha1::{Digest, Sha1};

use super::convert::{error_table, frame_to_lua, lua_to_reply_until, Names, MAX_REPLY_VALUES};
use super::pool::{Answer, FromScript, Job, Outcome};

/// Redis's text for a script stopped by `SCRIPT KILL`.
pub const KILLED: &str = "Script killed by user with SCRIPT KILL...";
/// A script stopped by `script_time_limit`.
pub const TIMED_OUT: &str = "Script killed by manifold: it ran past script_time_limit...";
/// Raised in a script whose worker aborted it (it is run again, or fails, with no reply).
pub(super) const ABORTED: &str = "manifold: script aborted";
/// Raised in a script that runs on a worker and is to run again on a script thread.
pub(super) const MOVED: &str = "manifold: script moved to a script thread";
/// Marks an error `redis.call` raised: its text is the command's error, without `ERR `.
const RAISED: &str = "\u{1}redis.call:";

/// Compiled scripts a thread keeps (beyond it, they are compiled again).
const COMPILED_MAX: usize = 1024;

/// Compiled scripts live in the state's Lua memory, under `script_memory_limit`: once the
/// state holds more than this share of the limit between two scripts, the compiled scripts
/// are dropped (compiled again when next run), so that they never leave a script less than
/// half the limit.
const COMPILED_SHARE_DIVISOR: usize = 2;

/// How a running script's `redis.call`s reach its worker.
pub(super) enum Link {
    /// From a script thread: each call sent, its answer awaited.
    Thread {
        to_worker: tokio::sync::mpsc::UnboundedSender<FromScript>,
        answers: Receiver<Answer>,
    },
    /// On the worker itself, in a coroutine ([`super::inline`]): a call's arguments are
    /// staged and the coroutine yields; the worker resumes it with the answer.
    Inline {
        /// The arguments of the call the coroutine yields for, until the worker takes
        /// them: still here at the next call (or at the end), the yield failed (it was
        /// made across a C function, as inside `pcall`).
        staged: Option<Vec<Vec<u8>>>,
        /// The answer to the last call.
        answer: Option<Vec<u8>>,
        /// Past it, the script is moved to a script thread.
        slice_end: Instant,
        /// The script is to run again on a script thread.
        moved: bool,
    },
}

impl Link {
    /// The worker let the script go (its channel closed).
    fn worker_gone(&self) -> bool {
        match self {
            Link::Thread { to_worker, .. } => to_worker.is_closed(),
            Link::Inline { .. } => false,
        }
    }
}

/// The job running now, as the `redis` functions and the hook see it.
pub(super) struct Current {
    pub(super) link: Link,
    pub(super) killed: Arc<std::sync::atomic::AtomicBool>,
    pub(super) deadline: Option<Instant>,
    /// `redis.setresp`.
    pub(super) proto: Protocol,
    pub(super) aborted: bool,
    pub(super) timed_out: bool,
    /// The hook stopped the script (killed, timed out, its client gone): its writes are
    /// not kept.
    pub(super) stopped: bool,
    /// Where the hook stopped it: the script's chunk and line (for its error reply).
    pub(super) place: Option<(String, i64)>,
}

impl Current {
    pub(super) fn new(
        link: Link,
        killed: Arc<std::sync::atomic::AtomicBool>,
        deadline: Option<Instant>,
    ) -> Self {
        Current {
            link,
            killed,
            deadline,
            proto: Protocol::Resp2,
            aborted: false,
            timed_out: false,
            stopped: false,
            place: None,
        }
    }
}

pub struct State {
    pub(super) lua: Lua,
    /// The scripts' environment (a read-only view of the globals).
    env: Table,
    /// What `env` reads: the globals as scripts see them (`KEYS` and `ARGV` set here).
    globals: Table,
    /// A worker's state: its scripts run in a coroutine ([`super::inline`]).
    pub(super) inline: Option<super::inline::Coroutine>,
    /// The prelude's check that no script changed what scripts share, a write past the
    /// read-only tables (see `prelude.lua`): one `next` per shared table.
    changed: Function,
    /// A script changed the state: it is not to run another script.
    tampered: bool,
    /// `function(f, h) return xpcall(f, h) end`
    runner: Function,
    /// The runner of a library's script (`FCALL`): it gets the library's `redis` and the
    /// table its callbacks are registered in (see `prelude.lua`).
    library_runner: Function,
    /// The error handler: the error as Redis's `{err=..., source=..., line=...}`.
    handler: Function,
    compiled: HashMap<String, Function>,
    /// `script_memory_limit` (0: none).
    memory_limit: usize,
    /// Scripts run since the collector's last explicit step (see [`State::collect`]).
    since_step: u32,
    /// The last script was stopped: the hook may check at every instruction since.
    pub(super) hook_changed: bool,
}

/// Scripts between two explicit steps of the collector, as Redis's `LUA_GC_CYCLE_PERIOD`.
const GC_CYCLE_PERIOD: u32 = 50;
/// Bytes a script may leave in its state beyond what it held at its start before they are
/// collected at once, at its end.
const GARBAGE_COLLECTED_AT_ONCE: usize = 1 << 20;

/// The SHA1 of `bytes`, lowercase hex.
pub fn sha1hex(bytes: &[u8]) -> String {
    let digest = Sha1::digest(bytes);
    let mut s = String::with_capacity(40);
    for b in digest {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The text of a Lua error raised in Rust (the innermost cause).
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(s) => s.clone(),
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::MemoryError(_) => "not enough memory".into(),
        other => other.to_string(),
    }
}

/// An error value as a script's `pcall` sees it: mlua's error object (a Rust function's
/// error) as its text, `redis.call`'s without its mark; any other value as it is.
fn error_value(lua: &Lua, v: Value) -> mlua::Result<Value> {
    match v {
        Value::Error(e) => {
            let text = error_text(&e);
            let text = text.strip_prefix(RAISED).unwrap_or(&text);
            Ok(Value::String(lua.create_string(text)?))
        }
        other => Ok(other),
    }
}

/// The Lua text of a script: a shebang line (`#!lua flags=...`) is not Lua, it is blanked
/// (the lines keep their numbers); a chunk starting with bytecode's mark is read as text, as
/// Redis does (a syntax error).
pub(super) fn script_text(source: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if source.starts_with(b"#!") {
        let end = source
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(source.len());
        let mut b = source.to_vec();
        b[..end].fill(b' ');
        b.into()
    } else if source.first() == Some(&0x1b) {
        let mut b = Vec::with_capacity(source.len() + 1);
        b.push(b' ');
        b.extend_from_slice(source);
        b.into()
    } else {
        source.into()
    }
}

/// Redis's reply to a script that does not compile.
fn compile_error(e: &mlua::Error) -> Vec<u8> {
    let text = match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => error_text(other),
    };
    let mut out = Vec::new();
    Reply::new(&mut out, Protocol::Resp2)
        .error(format!("Error compiling script (new function): {text}").as_bytes());
    out
}

/// Whether `source` compiles (`SCRIPT LOAD`), in a bare Lua state of its own with
/// `memory_limit` (0: none): the compiler's answer does not depend on the libraries, and
/// checking takes no script thread and runs nothing. `Err`: the error reply.
pub fn check_syntax(source: &[u8], memory_limit: usize) -> Result<(), Vec<u8>> {
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::new()).map_err(|e| compile_error(&e))?;
    if memory_limit > 0 {
        lua.set_memory_limit(memory_limit)
            .map_err(|e| compile_error(&e))?;
    }
    lua.load(&*script_text(source))
        .set_mode(mlua::ChunkMode::Text)
        .set_name(USER_SCRIPT)
        .into_function()
        .map(drop)
        .map_err(|e| compile_error(&e))
}

/// Redis's rand48 state (`redisLrand48`): one per process, as redis-server has one, so the
/// scripts of every thread draw from one sequence that no `EVAL` nor `SCRIPT FLUSH`
/// reseeds. Only `math.random`/`math.randomseed` touch it (not a hot path).
static RAND48: AtomicU64 = AtomicU64::new(RAND48_START);
const RAND48_START: u64 = 0x1234_ABCD_330E;
const RAND48_MASK: u64 = (1 << 48) - 1;

/// The next number of the sequence (31 bits), as `redisLrand48`.
fn lrand48() -> f64 {
    let step = |x: u64| x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB) & RAND48_MASK;
    let Ok(old) = RAND48.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| Some(step(x)))
    else {
        return 0.0;
    };
    (step(old) >> 17) as f64
}

/// `redisSrand48(seed)`.
fn srand48(seed: u32) {
    RAND48.store((u64::from(seed) << 16) | 0x330E, Ordering::Relaxed);
}

/// The chunk name of an `EVAL`'s script, as Redis's.
const USER_SCRIPT: &str = "@user_script";
/// The chunk name of a library's script (`FCALL`), as Redis's.
const USER_FUNCTION: &str = "@user_function";

/// The prelude's chunk name, as the hook sees it.
const PRELUDE_NAME: &str = "=redis_prelude";

/// The Lua code that makes a state what scripts see (see `prelude.lua`).
const PRELUDE: &str = include_str!("prelude.lua");

impl State {
    /// A script thread's state, with `cjson` settings of its own.
    pub fn new(memory_limit: usize) -> mlua::Result<Self> {
        Self::with(memory_limit, false, &CjsonSettings::default())
    }

    /// A state whose `cjson` settings are `cjson` (every state of the scripts shares them,
    /// as Redis's one state has them); `inline`: a worker's, whose scripts run in a
    /// coroutine ([`super::inline`]).
    pub fn with(memory_limit: usize, inline: bool, cjson: &CjsonSettings) -> mlua::Result<Self> {
        // A worker's state is small: a script that needs more memory moves to a thread
        // (see `inline.rs`), which also bounds what one of its instructions can cost there.
        let memory_limit = if inline {
            match memory_limit {
                0 => super::inline::WORKER_MEMORY,
                m => m.min(super::inline::WORKER_MEMORY),
            }
        } else {
            memory_limit
        };
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new(),
        )?;
        manifold_redis_lua::install_libs_sharing(&lua, cjson)?;
        let g = lua.globals();
        let setfenv: Function = g.raw_get("setfenv")?;
        // A worker's state yields from `redis.call` (the coroutine library itself is not
        // the scripts').
        let inline_calls = if inline {
            let coroutine: Table = g.raw_get("coroutine")?;
            Some(super::inline::calls(
                &lua,
                coroutine.raw_get::<Function>("yield")?,
            )?)
        } else {
            None
        };
        // `coroutine` too, unlike Redis: mlua's instruction hook (`SCRIPT KILL`, the time
        // limit) does not reach code running in a coroutine, which could never be stopped.
        for name in [
            "print",
            "dofile",
            "loadfile",
            "setfenv",
            "getfenv",
            "newproxy",
            "os",
            "io",
            "debug",
            "package",
            "require",
            "module",
            "coroutine",
        ] {
            g.raw_remove(name)?;
        }
        let redis = redis_table(&lua)?;
        g.raw_set("redis", redis.clone())?;
        let pcall = lua.create_function(raw_call)?;
        // `redis.call` is a Rust function, not a Lua one: a script's `return
        // redis.call(...)` would be a tail call and lose the script's line in the error.
        redis.raw_set(
            "call",
            lua.create_function(|lua, args: Variadic<Value>| match raw_call(lua, args)? {
                (err, true) => Err(raised(&err)),
                (v, false) => Ok(v),
            })?,
        )?;
        let (env, globals, runner, library_runner, changed, script_body, library_body): (
            Table,
            Table,
            Function,
            Function,
            Function,
            Function,
            Function,
        ) = lua.load(PRELUDE).set_name(PRELUDE_NAME).call((
            pcall,
            redis,
            g.clone(),
            setfenv,
            lua.create_function(error_value)?,
            lua.create_function(|_, ()| Ok(lrand48()))?,
            lua.create_function(|_, seed: f64| {
                srand48(seed as u32);
                Ok(())
            })?,
            lua.create_function(|_, t: Table| Ok(t.metatable()))?,
            inline_calls,
        ))?;
        let handler = lua.create_function(error_handler)?;
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(CHECK_EVERY),
            check_hook,
        );
        lua.set_app_data(Names::new(&lua)?);
        if memory_limit > 0 {
            lua.set_memory_limit(memory_limit)?;
        }
        Ok(Self {
            lua,
            env,
            globals,
            inline: inline.then(|| super::inline::Coroutine::new(script_body, library_body)),
            runner,
            library_runner,
            changed,
            tampered: false,
            handler,
            compiled: HashMap::new(),
            memory_limit,
            since_step: 0,
            hook_changed: false,
        })
    }

    /// Frees what a script left (its tables, its strings). A full collection marks and
    /// sweeps the whole state (every library table, every compiled script): after each
    /// small script it was the largest part of the script's cost. So, as Redis does, the
    /// collector takes one explicit step every [`GC_CYCLE_PERIOD`] scripts (on top of the
    /// steps Lua takes as it allocates); a script that left more than
    /// [`GARBAGE_COLLECTED_AT_ONCE`] bytes is collected at once, so its garbage never
    /// takes the next script's memory or time.
    fn collect(&mut self, used_at_start: usize) {
        // A small state (a worker's) collects at once past a quarter of its memory.
        let at_once = match self.memory_limit {
            0 => GARBAGE_COLLECTED_AT_ONCE,
            limit => GARBAGE_COLLECTED_AT_ONCE.min(limit / 4),
        };
        if self.lua.used_memory() > used_at_start + at_once {
            self.lua.gc_collect().ok();
            self.since_step = 0;
            return;
        }
        self.since_step += 1;
        if self.since_step >= GC_CYCLE_PERIOD {
            self.since_step = 0;
            self.lua.gc_step_kbytes(GC_CYCLE_PERIOD as i32).ok();
        }
    }

    /// After a script that did not reach [`State::finish`] (moved to a thread, stopped by
    /// its worker): the same check of what scripts share and the same collection.
    pub(super) fn tidy(&mut self, used_at_start: usize) {
        self.tampered = self.tampered || !matches!(self.changed.call::<bool>(()), Ok(false));
        self.collect(used_at_start);
        self.bound_compiled();
    }

    pub fn forget_scripts(&mut self) {
        self.compiled.clear();
        self.lua.gc_collect().ok();
    }

    /// A script changed what the state's scripts share (see `prelude.lua`): the state must be
    /// replaced before the next script.
    pub fn tampered(&self) -> bool {
        self.tampered
    }

    /// The scripts' environment, for tests to reach past what scripts can.
    #[cfg(test)]
    pub fn env(&self) -> Table {
        self.env.clone()
    }

    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Drops the compiled scripts once the state holds more than its share of the memory
    /// limit ([`COMPILED_SHARE_DIVISOR`]).
    fn bound_compiled(&mut self) {
        if self.memory_limit > 0
            && !self.compiled.is_empty()
            && self.lua.used_memory() > self.memory_limit / COMPILED_SHARE_DIVISOR
        {
            // Garbage first: only what is still held counts.
            self.lua.gc_collect().ok();
            if self.lua.used_memory() > self.memory_limit / COMPILED_SHARE_DIVISOR {
                self.compiled.clear();
                self.lua.gc_collect().ok();
            }
        }
    }

    /// Compiles `source` as Redis names it (`@user_script`, or `@user_function` for a
    /// library's), or the error reply.
    pub(super) fn compile(
        &mut self,
        sha: &str,
        source: &[u8],
        library: bool,
    ) -> Result<Function, Vec<u8>> {
        // A library's script is kept apart from a script of the same text, which is
        // named otherwise.
        let key = if library {
            format!("{USER_FUNCTION}:{sha}")
        } else {
            sha.to_string()
        };
        if let Some(f) = self.compiled.get(&key) {
            return Ok(f.clone());
        }
        self.bound_compiled();
        match self
            .lua
            .load(&*script_text(source))
            .set_mode(mlua::ChunkMode::Text)
            .set_name(if library { USER_FUNCTION } else { USER_SCRIPT })
            .set_environment(self.env.clone())
            .into_function()
        {
            Ok(f) => {
                if self.compiled.len() >= COMPILED_MAX {
                    self.compiled.clear();
                }
                self.compiled.insert(key, f.clone());
                Ok(f)
            }
            Err(e) => Err(compile_error(&e)),
        }
    }

    /// Runs (or only compiles) `job`; returns its outcome, for the thread to send its worker
    /// once it is ready for the next script.
    pub fn run(&mut self, job: Job) -> Finished {
        let Job {
            sha,
            source,
            function,
            keys,
            argv,
            proto,
            out_limit,
            compile_only,
            to_worker,
            answers,
            killed,
            deadline,
        } = job;
        let f = match self.compile(&sha, &source, function.is_some()) {
            Ok(f) => f,
            Err(reply) => {
                return Finished {
                    to: to_worker,
                    outcome: Outcome::CompileError(reply),
                };
            }
        };
        if compile_only {
            return Finished {
                to: to_worker,
                outcome: Outcome::Compiled,
            };
        }
        let used_at_start = self.lua.used_memory();
        // What an error names: the function `FCALL` ran, or the script's SHA1.
        let named = function.as_deref().unwrap_or(&sha);
        let done = to_worker.clone();
        let kill_flag = killed.clone();
        // The previous script, stopped, may have left the check at every instruction.
        if self.hook_changed {
            self.lua.set_hook(
                HookTriggers::new().every_nth_instruction(CHECK_EVERY),
                check_hook,
            );
            self.hook_changed = false;
        }
        self.lua.set_app_data(Current::new(
            Link::Thread { to_worker, answers },
            killed,
            deadline,
        ));
        let result = self.set_lists(&keys, &argv).and_then(|()| {
            let runner = if function.is_some() {
                &self.library_runner
            } else {
                &self.runner
            };
            runner.call::<MultiValue>((f, self.handler.clone()))
        });
        let cur = self.lua.remove_app_data::<Current>();
        let stop = || {
            if done.is_closed() {
                Some(ABORTED)
            } else {
                kill_check(&kill_flag, deadline)
            }
        };
        let outcome = self.finish(cur, result, proto, out_limit, named, &stop, used_at_start);
        Finished { to: done, outcome }
    }

    /// `KEYS` and `ARGV`, for the script about to run.
    pub(super) fn set_lists(&self, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> mlua::Result<()> {
        let g = &self.globals;
        let set_list = |name: &str, items: &[Vec<u8>]| -> mlua::Result<()> {
            let t = self.lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, self.lua.create_string(item)?)?;
            }
            g.raw_set(name, t)
        };
        // A table's slot counts too (an argument of no bytes still takes one).
        let listed: usize = keys.iter().chain(argv.iter()).map(|a| a.len() + 40).sum();
        unlimited_if_small(&self.lua, listed, || {
            set_list("KEYS", keys).and_then(|()| set_list("ARGV", argv))
        })
    }

    /// How a script run with `cur` ended: `result` is its runner's (`true` and its value,
    /// or `false` and its error), its reply written in `proto` within `out_limit` bytes;
    /// `stop` tells a long conversion to stop. Then the state is tidied for the next.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        &mut self,
        cur: Option<Current>,
        result: mlua::Result<MultiValue>,
        proto: Protocol,
        out_limit: usize,
        named: &str,
        stop: &dyn Fn() -> Option<&'static str>,
        used_at_start: usize,
    ) -> Outcome {
        self.hook_changed = cur.as_ref().is_none_or(|c| {
            c.aborted || c.timed_out || c.stopped || c.killed.load(Ordering::Relaxed)
        });
        let aborted = cur.as_ref().is_some_and(|c| c.aborted);
        let mut stopped = cur.as_ref().is_some_and(|c| c.stopped);
        let script_proto = cur.as_ref().map_or(Protocol::Resp2, |c| c.proto);
        drop(cur);
        if aborted {
            return Outcome::Aborted;
        }
        let mut out = Vec::new();
        match result {
            Ok(values) => {
                let mut values = values.into_iter();
                let ok = matches!(values.next(), Some(Value::Boolean(true)));
                let value = values.next().unwrap_or(Value::Nil);
                let mut reply = Reply::limited(&mut out, proto, out_limit);
                if ok {
                    // The hook no longer watches: converting a big reply (seconds) asks
                    // `stop`.
                    let names = self.lua.app_data_ref::<Names>();
                    let converted = match names.as_deref() {
                        Some(names) => lua_to_reply_until(
                            names,
                            &value,
                            &mut reply,
                            script_proto,
                            MAX_REPLY_VALUES,
                            stop,
                        ),
                        None => Err("manifold: the script's state has no reply names"),
                    };
                    drop(names);
                    if let Err(text) = converted {
                        out.clear();
                        if text == ABORTED {
                            return Outcome::Aborted;
                        }
                        if text == KILLED || text == TIMED_OUT {
                            stopped = true;
                            Reply::new(&mut out, proto)
                                .error(format!("{text} script: {named}.").as_bytes());
                        } else {
                            Reply::new(&mut out, proto).error(text.as_bytes());
                        }
                    }
                } else {
                    error_value_reply(&value, named, &mut out);
                }
            }
            Err(e) => {
                Reply::new(&mut out, proto).error(error_text(&e).as_bytes());
            }
        }
        self.tampered = !matches!(self.changed.call::<bool>(()), Ok(false));
        self.collect(used_at_start);
        self.bound_compiled();
        if stopped {
            Outcome::Stopped(out)
        } else {
            Outcome::Reply(out)
        }
    }
}

/// A script's kill flag and deadline, as a long conversion asks them: the text to stop
/// with (the deadline sets the flag).
pub(super) fn kill_check(killed: &AtomicBool, deadline: Option<Instant>) -> Option<&'static str> {
    if deadline.is_some_and(|d| Instant::now() >= d) {
        killed.store(true, Ordering::Relaxed);
        Some(TIMED_OUT)
    } else if killed.load(Ordering::Relaxed) {
        Some(KILLED)
    } else {
        None
    }
}

/// The reply of a script that raised `err` (the handler's table, or a bare value when the
/// handler itself could not run): Redis's `<err> script: <name>, on <source>:<line>.`,
/// `name` the script's SHA1 or the function `FCALL` ran.
fn error_value_reply(err: &Value, name: &str, out: &mut Vec<u8>) {
    let mut text = Vec::new();
    match err {
        Value::Table(t) => {
            let msg = t
                .raw_get::<mlua::String>("err")
                .map_or_else(|_| b"ERR unknown error".to_vec(), |s| s.as_bytes().to_vec());
            text.extend_from_slice(&msg);
            let source = t.raw_get::<mlua::String>("source").ok();
            let line = t.raw_get::<i64>("line").ok();
            text.extend_from_slice(format!(" script: {name}").as_bytes());
            if let (Some(source), Some(line)) = (source, line) {
                text.extend_from_slice(b", on ");
                text.extend_from_slice(&source.as_bytes());
                text.extend_from_slice(format!(":{line}.").as_bytes());
            } else {
                text.push(b'.');
            }
        }
        Value::String(s) => {
            text.extend_from_slice(b"ERR ");
            text.extend_from_slice(&s.as_bytes());
        }
        Value::Error(e) => {
            text.extend_from_slice(b"ERR ");
            text.extend_from_slice(error_text(e).as_bytes());
        }
        _ => text.extend_from_slice(b"ERR unknown error"),
    }
    super::convert::error_reply(out, &text);
}

/// Redis's `__redis__err__handler`: the error as a table `{err=, source=, line=}`, `ERR `
/// before a message that is not already such a table, the place being the script's frame
/// that was running.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let raised = match &err {
        Value::Error(e) => error_text(e).strip_prefix(RAISED).map(str::to_string),
        _ => None,
    };
    let t = match err {
        _ if raised.is_some() => error_table(lua, raised.unwrap_or_default().as_bytes())?,
        Value::Table(t) if t.raw_get::<Value>("err").is_ok_and(|v| !v.is_nil()) => t,
        other => {
            let msg = match &other {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Error(e) => error_text(e).into_bytes(),
                Value::Nil => b"nil".to_vec(),
                v => v.to_string().unwrap_or_default().into_bytes(),
            };
            let mut text = b"ERR ".to_vec();
            text.extend_from_slice(&msg);
            error_table(lua, &text)?
        }
    };
    if let Some((source, line)) = script_place(lua, 1) {
        t.raw_set("source", source)?;
        t.raw_set("line", line)?;
    }
    Ok(t)
}

/// The chunk and line of the innermost frame of the script (or library) from stack level
/// `from` up: where an error is said to be raised.
fn script_place(lua: &Lua, from: usize) -> Option<(String, i64)> {
    for level in from..64 {
        let d = lua.inspect_stack(level)?;
        let source = d.source();
        if let Some(name @ (USER_SCRIPT | USER_FUNCTION)) = source.source.as_deref() {
            return Some((name.to_string(), i64::from(d.curr_line())));
        }
    }
    None
}

/// The arguments of a `redis.call` as bytes; `Err`: Redis's error for them.
pub(super) fn call_args(
    lua: &Lua,
    args: &[Value],
) -> mlua::Result<Result<Vec<Vec<u8>>, &'static str>> {
    if args.is_empty() {
        return Ok(Err(
            "ERR Please specify at least one argument for this redis lib call",
        ));
    }
    let mut argv = Vec::with_capacity(args.len());
    for a in args {
        match a {
            Value::String(s) => argv.push(s.as_bytes().to_vec()),
            Value::Number(_) | Value::Integer(_) => match lua.coerce_string(a.clone())? {
                Some(s) => argv.push(s.as_bytes().to_vec()),
                None => {
                    return Ok(Err(
                        "ERR Lua redis lib command arguments must be strings or integers",
                    ))
                }
            },
            _ => {
                return Ok(Err(
                    "ERR Lua redis lib command arguments must be strings or integers",
                ))
            }
        }
    }
    Ok(Ok(argv))
}

/// `redis.call`/`redis.pcall`'s work on a script thread: the command's reply as a Lua
/// value, and whether it is an error (`redis.call` raises it).
#[allow(clippy::needless_pass_by_value)] // mlua hands the arguments over by value
fn raw_call(lua: &Lua, args: Variadic<Value>) -> mlua::Result<(Value, bool)> {
    let argv = match call_args(lua, &args)? {
        Ok(argv) => argv,
        Err(text) => return Ok((Value::Table(error_table(lua, text.as_bytes())?), true)),
    };
    let answer = {
        let Some(mut cur) = lua.app_data_mut::<Current>() else {
            return Err(mlua::Error::RuntimeError(ABORTED.into()));
        };
        let proto = cur.proto;
        let answer = match &cur.link {
            Link::Thread { to_worker, answers } if !cur.aborted => {
                if to_worker
                    .send(FromScript::Call { args: argv, proto })
                    .is_err()
                {
                    None
                } else {
                    match answers.recv() {
                        Ok(Answer::Reply(bytes)) => Some(bytes),
                        Ok(Answer::Abort) | Err(_) => None,
                    }
                }
            }
            _ => None,
        };
        let Some(answer) = answer else {
            cur.aborted = true;
            return Err(mlua::Error::RuntimeError(ABORTED.into()));
        };
        answer
    };
    answer_value(lua, &answer)
}

/// A command's reply (RESP bytes) as the Lua value a script gets, and whether it is an
/// error.
pub(super) fn answer_value(lua: &Lua, answer: &[u8]) -> mlua::Result<(Value, bool)> {
    let Ok(Some((frame, _))) = Frame::parse(answer) else {
        return Ok((
            Value::Table(error_table(lua, b"ERR manifold: an unreadable reply")?),
            true,
        ));
    };
    let failed = matches!(frame, Frame::Error(_) | Frame::BlobError(_));
    // A small reply is made without the memory limit: under it, mlua makes each value in a
    // protected call of its own (most of a small script's cost); a large one stays under it.
    let names = lua
        .app_data_ref::<Names>()
        .ok_or_else(|| mlua::Error::RuntimeError(ABORTED.into()))?;
    let value = unlimited_if_small(lua, answer.len(), || frame_to_lua(lua, &names, frame))?;
    Ok((value, failed))
}

/// `redis.call`'s error, raised: its text marked as a command's error.
pub(super) fn raised(err: &Value) -> mlua::Error {
    let text = match err {
        Value::Table(t) => t
            .raw_get::<mlua::String>("err")
            .map(|s| s.to_string_lossy())
            .unwrap_or_default(),
        _ => String::new(),
    };
    mlua::Error::RuntimeError(format!("{RAISED}{text}"))
}

/// Bytes of Lua values made from Rust at most, for [`unlimited_if_small`].
const SMALL_VALUES: usize = 64 << 10;

/// Runs `f`, which makes Lua values of about `bytes` bytes from Rust, with the state's
/// memory limit lifted when they are few ([`SMALL_VALUES`]): under a limit, mlua makes
/// each string and table in a protected call (a `pcall` and a closure each), which was the
/// larger part of a small script's conversions. Without a limit nothing they allocate can
/// fail; the limit is back before any script code runs, and a large conversion stays
/// under it.
fn unlimited_if_small<R>(lua: &Lua, bytes: usize, f: impl FnOnce() -> R) -> R {
    if bytes > SMALL_VALUES {
        return f();
    }
    match lua.set_memory_limit(0) {
        Ok(0) | Err(_) => f(),
        Ok(limit) => {
            let r = f();
            let _ = lua.set_memory_limit(limit);
            r
        }
    }
}

/// `redis.error_reply(text)`'s error, as Redis's `luaPushErrorBuff`: a first word after an
/// optional `-` is the code when a space follows it, else the code is `ERR`; the message's
/// line breaks at either end are trimmed.
fn error_reply_text(text: &[u8]) -> Vec<u8> {
    let text = text.strip_prefix(b"-").unwrap_or(text);
    let (code, message) = match text.iter().position(|&b| b == b' ') {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (&b"ERR"[..], text),
    };
    let start = message
        .iter()
        .position(|b| !b"\r\n".contains(b))
        .unwrap_or(message.len());
    let end = message
        .iter()
        .rposition(|b| !b"\r\n".contains(b))
        .map_or(start, |i| i + 1);
    let mut out = code.to_vec();
    out.push(b' ');
    out.extend_from_slice(&message[start..end]);
    out
}

/// The `redis` table but `call`/`pcall` (the prelude adds them).
fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, v: Variadic<Value>| match v.first() {
            Some(Value::String(s)) if v.len() == 1 => {
                error_table(lua, &error_reply_text(&s.as_bytes()))
            }
            // Returned, not raised, as Redis does.
            _ => error_table(lua, b"ERR wrong number or type of arguments"),
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, v: Variadic<Value>| match v.first() {
            Some(Value::String(s)) if v.len() == 1 => {
                let t = lua.create_table()?;
                t.raw_set("ok", s.clone())?;
                Ok(t)
            }
            _ => error_table(lua, b"ERR wrong number or type of arguments"),
        })?,
    )?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, v: Variadic<Value>| {
            if v.len() != 1 {
                return Err(mlua::Error::RuntimeError(
                    "wrong number of arguments".into(),
                ));
            }
            let bytes = match lua.coerce_string(v[0].clone())? {
                Some(s) => s.as_bytes().to_vec(),
                None => Vec::new(),
            };
            Ok(sha1hex(&bytes))
        })?,
    )?;
    for (name, level) in LOG_LEVELS {
        redis.raw_set(name, level)?;
    }
    set_version(&redis)?;
    redis.raw_set(
        "log",
        lua.create_function(|lua, v: Variadic<Value>| {
            if v.len() < 2 {
                return Err(mlua::Error::RuntimeError(
                    "redis.log() requires two arguments or more.".into(),
                ));
            }
            let level = match &v[0] {
                Value::Number(n) => *n as i64,
                Value::Integer(n) => *n,
                _ => -1,
            };
            if !(0..=3).contains(&level) {
                return Err(mlua::Error::RuntimeError("Invalid debug level.".into()));
            }
            let mut msg = String::new();
            for (i, a) in v.iter().skip(1).enumerate() {
                if i > 0 {
                    msg.push(' ');
                }
                if let Some(s) = lua.coerce_string(a.clone())? {
                    msg.push_str(&s.to_string_lossy());
                }
            }
            match level {
                0 | 1 => tracing::debug!(target: "redis_script", "{msg}"),
                2 => tracing::info!(target: "redis_script", "{msg}"),
                _ => tracing::warn!(target: "redis_script", "{msg}"),
            }
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "setresp",
        lua.create_function(|lua, v: Variadic<Value>| {
            if v.len() != 1 {
                return Err(mlua::Error::RuntimeError(
                    "redis.setresp() requires one argument.".into(),
                ));
            }
            // Redis reads it as an int (`lua_tonumber`, truncated).
            let version = match &v[0] {
                Value::Number(n) => *n as i64,
                Value::Integer(n) => *n,
                _ => 0,
            };
            let proto = match version {
                2 => Protocol::Resp2,
                3 => Protocol::Resp3,
                _ => {
                    return Err(mlua::Error::RuntimeError(
                        "RESP version must be 2 or 3.".into(),
                    ))
                }
            };
            if let Some(mut cur) = lua.app_data_mut::<Current>() {
                cur.proto = proto;
            }
            Ok(())
        })?,
    )?;
    for (name, flag) in [
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(name, flag)?;
    }
    redis.raw_set(
        "set_repl",
        lua.create_function(|_, v: Variadic<Value>| {
            if v.len() != 1 {
                return Err(mlua::Error::RuntimeError(
                    "redis.set_repl() requires two arguments.".into(),
                ));
            }
            let flags = match &v[0] {
                Value::Number(n) => *n as i64,
                Value::Integer(n) => *n,
                _ => -1,
            };
            if !(0..=3).contains(&flags) {
                return Err(mlua::Error::RuntimeError(
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                        .into(),
                ));
            }
            Ok(())
        })?,
    )?;
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.raw_set(
        "debug",
        lua.create_function(|_, _: Variadic<Value>| Ok(()))?,
    )?;
    Ok(redis)
}

/// Instructions between two checks of a running script (killed, timed out, its client gone).
pub(super) const CHECK_EVERY: u32 = 10_000;
/// The same on a worker, where the check also ends its slice: no more than a thousand
/// instructions (each over at most the worker state's memory) run past it.
pub(super) const CHECK_ON_WORKER: u32 = 1_000;

/// The check made every [`CHECK_EVERY`] instructions. A script told to stop gets an error;
/// and since a Lua `pcall` in the script could catch it (`while true do pcall(f) end`),
/// the check is then made at every instruction: each one raises the error again, so the
/// first instruction outside any `pcall` ends the script.
#[allow(clippy::needless_pass_by_value)] // mlua's hook signature
pub(super) fn check_hook(lua: &Lua, debug: mlua::Debug<'_>) -> mlua::Result<VmState> {
    let stop = {
        let Some(mut cur) = lua.app_data_mut::<Current>() else {
            return Ok(VmState::Continue);
        };
        if cur.aborted || cur.link.worker_gone() {
            cur.aborted = true;
            ABORTED
        } else if cur.timed_out || cur.deadline.is_some_and(|d| Instant::now() >= d) {
            cur.timed_out = true;
            cur.killed.store(true, Ordering::Relaxed);
            TIMED_OUT
        } else if cur.killed.load(Ordering::Relaxed) {
            // Before a move: a kill is never lost to it.
            KILLED
        } else if let Link::Inline {
            slice_end, moved, ..
        } = &mut cur.link
        {
            // On a worker, past its slice: it runs again on a script thread.
            if *moved || Instant::now() >= *slice_end {
                *moved = true;
                MOVED
            } else {
                return Ok(VmState::Continue);
            }
        } else {
            return Ok(VmState::Continue);
        }
    };
    // Not in the prelude's own code: the runner that catches the script's error must be
    // let return it (with its position) rather than fail itself. The check is then made at
    // every instruction, so the script's next one stops it: a script spending most of its
    // time in the prelude's wrappers (`while true do next(t) end`) could otherwise be found
    // there at every check, and never stop.
    if debug.source().source.as_deref() == Some(PRELUDE_NAME) {
        lua.set_hook(HookTriggers::new().every_nth_instruction(1), check_hook);
        return Ok(VmState::Continue);
    }
    if stop != MOVED {
        let place = script_place(lua, 0);
        if let Some(mut cur) = lua.app_data_mut::<Current>() {
            cur.stopped = true;
            cur.place = place;
        }
    }
    // On the running thread (a worker's coroutine, or the state's own).
    lua.set_hook(HookTriggers::new().every_nth_instruction(1), check_hook);
    Err(mlua::Error::RuntimeError(stop.into()))
}

/// A script's outcome, sent to its worker by [`Finished::send`] once its thread is back
/// among the idle ones: the client's next script then finds that thread (and the state
/// this one left, as one Lua state in Redis) rather than starting another.
pub struct Finished {
    to: tokio::sync::mpsc::UnboundedSender<FromScript>,
    outcome: Outcome,
}

impl Finished {
    pub fn send(self) {
        let _ = self.to.send(FromScript::Done(self.outcome));
    }
}

/// `redis.REDIS_VERSION` and `redis.REDIS_VERSION_NUM` (`0x00MMmmpp`), as Redis 7.0's
/// `luaRegisterVersion` sets them for scripts and for a library's load: the version the
/// door announces.
pub fn set_version(redis: &Table) -> mlua::Result<()> {
    let num = crate::REDIS_VERSION
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0))
        .chain(std::iter::repeat(0))
        .take(3)
        .fold(0u32, |n, p| (n << 8) | (p & 0xff));
    redis.raw_set("REDIS_VERSION_NUM", f64::from(num))?;
    redis.raw_set("REDIS_VERSION", crate::REDIS_VERSION)
}

/// `redis.LOG_*`: the levels `redis.log` takes (scripts and a library's load alike).
pub const LOG_LEVELS: [(&str, i64); 4] = [
    ("LOG_DEBUG", 0),
    ("LOG_VERBOSE", 1),
    ("LOG_NOTICE", 2),
    ("LOG_WARNING", 3),
];
