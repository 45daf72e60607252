//! Scripts run on their client's worker, in a coroutine of a worker's Lua state: no thread
//! hop per `redis.call`.
//!
//! On a script thread ([`super::pool`]), each `redis.call` wakes the worker (the call's
//! arguments) and then the script thread (its answer): with the script's start and end,
//! some six thread wake-ups and two channels per script, most of a small script's cost in
//! manifold. Here the worker runs the script itself in a Lua coroutine: `redis.call`
//! stages its arguments and yields, the worker applies the command on the script's
//! transaction, and resumes the coroutine with the answer.
//!
//! A script runs here only while that is as good as on a thread. It runs again from its
//! start on a script thread ([`Ran::Moved`]: nothing of it was answered, and its group
//! rolls back what it wrote) when
//! - it runs Lua longer than [`SLICE`] between two calls (a `while true do end` never holds
//!   a worker's other clients for longer);
//! - a call is made where a coroutine cannot yield (inside `pcall`, a `table.sort`
//!   comparator, a `string.gsub` callback): the failed yield is seen at the next call or
//!   at the end;
//! - an error ends it: the script thread reports it with its place, as Redis does (here
//!   it has no `xpcall` around it, which a yield could not cross);
//! - it needs more than a worker state's memory ([`WORKER_MEMORY`]: this also bounds what
//!   one Lua instruction can cost there, and the hook looks every
//!   [`super::lua::CHECK_ON_WORKER`] instructions);
//! - it is about to do C work the hook cannot interrupt, past a bound: a match that may
//!   take more than a million steps, a `string.rep` past 64 KiB (see `prelude.lua`), its
//!   source past [`MAX_SOURCE_BYTES`] (compiled on the worker), `KEYS` and `ARGV` past
//!   [`MAX_ARGUMENT_BYTES`], a call's reply past [`MAX_ANSWER_BYTES`] (made into Lua
//!   values on the worker).
//!
//! A script calling commands answered without a wait (`TIME`, `PING`) gives the worker's
//! other clients a turn once it has held the worker for [`SLICE`].
//!
//! Each worker keeps its own Lua states ([`LocalStates`]), one per script it runs at once
//! (a group runs its scripts one after the other: mostly one), each with the scripts'
//! sandbox, compiled scripts and memory limit of a script thread's.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use manifold_redis_proto::{Protocol, Reply};
use mlua::{Function, HookTriggers, Lua, MultiValue, Table, Thread, ThreadStatus, Value, Variadic};

use super::convert::error_table;
use super::lua::{
    answer_value, call_args, kill_check, raised, Current, Link, State, ABORTED, MOVED,
};
use super::pool::{Outcome, Scripts};
use super::{killed_waiting, Caller, Published, Ran, Script};
use crate::store::context::Cx;

/// Lua time a script may run on a worker between two calls before it moves to a script
/// thread; and the time it holds its worker before it lets the others run.
pub const SLICE: Duration = Duration::from_millis(1);

/// A worker's Lua state's memory at most (a fresh one takes some 200 KiB).
pub const WORKER_MEMORY: usize = 1 << 20;

/// Bytes of a script's source at most, for it to run on a worker.
pub const MAX_SOURCE_BYTES: usize = 64 << 10;

/// Bytes of a call's reply at most, for the script to go on on its worker.
pub const MAX_ANSWER_BYTES: usize = 256 << 10;

/// Idle Lua states a worker keeps: as many as scripts may run at once by default (a state
/// made again costs a millisecond or two; each holds at most [`WORKER_MEMORY`]).
const MAX_IDLE_STATES: usize = 16;

/// Bytes of `KEYS` and `ARGV` at most of a script run on a worker, each counting 40 more
/// (its slot in the table).
pub const MAX_ARGUMENT_BYTES: usize = 64 << 10;

/// A worker's state's coroutine, kept between scripts.
pub struct Coroutine {
    /// `function(f) return true, f() end` (see `prelude.lua`).
    script_body: Function,
    /// The same for a library's script (`FCALL`).
    library_body: Function,
    co: Option<Thread>,
    /// The compiled script, given at the first resume.
    first: Option<Function>,
    used_at_start: usize,
    /// A script was begun and has not reached [`State::finish`].
    begun: bool,
}

impl Coroutine {
    pub(super) fn new(script_body: Function, library_body: Function) -> Self {
        Coroutine {
            script_body,
            library_body,
            co: None,
            first: None,
            used_at_start: 0,
            begun: false,
        }
    }
}

/// The functions a worker's state's `redis.call` and `redis.pcall` are made of (see
/// `prelude.lua`): `stage(raise, ...)`, `answer(raise)` and the coroutines' `yield`.
pub(super) fn calls(lua: &Lua, yield_: Function) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "stage",
        lua.create_function(|lua, (raise, args): (bool, Variadic<Value>)| {
            let argv = call_args(lua, &args)?;
            let Some(mut cur) = lua.app_data_mut::<Current>() else {
                return Err(move_error());
            };
            let Link::Inline { staged, moved, .. } = &mut cur.link else {
                return Err(move_error());
            };
            if staged.is_some() {
                // The last call's yield failed: the script is to run on a thread.
                *moved = true;
                return Err(move_error());
            }
            match argv {
                Ok(argv) => {
                    *staged = Some(argv);
                    Ok(Value::Nil)
                }
                Err(text) => {
                    drop(cur);
                    let err = Value::Table(error_table(lua, text.as_bytes())?);
                    if raise {
                        Err(raised(&err))
                    } else {
                        Ok(err)
                    }
                }
            }
        })?,
    )?;
    t.raw_set(
        "answer",
        lua.create_function(|lua, raise: bool| {
            let answer = {
                let Some(mut cur) = lua.app_data_mut::<Current>() else {
                    return Err(move_error());
                };
                let Link::Inline { answer, moved, .. } = &mut cur.link else {
                    return Err(move_error());
                };
                let Some(a) = answer.take() else {
                    *moved = true;
                    return Err(move_error());
                };
                a
            };
            match answer_value(lua, &answer)? {
                (err, true) if raise => Err(raised(&err)),
                (v, _) => Ok(v),
            }
        })?,
    )?;
    t.raw_set(
        "heavy",
        lua.create_function(|lua, ()| -> mlua::Result<()> {
            if let Some(mut cur) = lua.app_data_mut::<Current>() {
                if let Link::Inline { moved, .. } = &mut cur.link {
                    *moved = true;
                }
            }
            Err(move_error())
        })?,
    )?;
    t.raw_set("yield", yield_)?;
    Ok(t)
}

/// The error raised in a script that is to run on a script thread.
fn move_error() -> mlua::Error {
    mlua::Error::RuntimeError(MOVED.into())
}

/// What a script's coroutine did when resumed.
pub(super) enum Step {
    /// A call, for the worker to apply: its arguments and the protocol of its answer.
    Call(Vec<Vec<u8>>, Protocol),
    /// It ended.
    Done(Outcome),
    /// It is to run again on a script thread.
    Moved,
}

impl State {
    /// Readies `script` to run in the state's coroutine; `Err`: how it ended already (it
    /// did not compile), or `None` when it is to run on a script thread.
    pub(super) fn begin_inline(
        &mut self,
        script: &Script,
        killed: Arc<AtomicBool>,
        deadline: Option<Instant>,
    ) -> Result<(), Option<Outcome>> {
        // Out of a worker state's memory while compiling: a thread compiles it.
        let f = self
            .compile(&script.sha, &script.source, script.function.is_some())
            .map_err(|reply| {
                let out_of_memory = reply.windows(17).any(|w| w == b"not enough memory");
                (!out_of_memory).then_some(Outcome::CompileError(reply))
            })?;
        self.set_lists(&script.keys, &script.argv)
            .map_err(|_| None)?;
        let used = self.lua.used_memory();
        let hook_changed = std::mem::take(&mut self.hook_changed);
        let lua = self.lua.clone();
        let Some(c) = self.inline.as_mut() else {
            return Err(None);
        };
        let body = if script.function.is_some() {
            c.library_body.clone()
        } else {
            c.script_body.clone()
        };
        let reused = match c.co.take() {
            Some(co) if co.status() == ThreadStatus::Finished => {
                co.reset(body.clone()).ok().map(|()| co)
            }
            _ => None,
        };
        let (co, fresh) = match reused {
            Some(co) => (co, false),
            None => (lua.create_thread(body).map_err(|_| None)?, true),
        };
        if fresh || hook_changed {
            co.set_hook(
                HookTriggers::new().every_nth_instruction(super::lua::CHECK_ON_WORKER),
                super::lua::check_hook,
            );
        }
        c.co = Some(co);
        c.first = Some(f);
        c.used_at_start = used;
        c.begun = true;
        lua.set_app_data(Current::new(
            Link::Inline {
                staged: None,
                answer: None,
                slice_end: Instant::now() + SLICE,
                moved: false,
            },
            killed,
            deadline,
        ));
        Ok(())
    }

    /// Resumes the script begun by [`State::begin_inline`] with `answer` (its last call's),
    /// until its next call or its end; its reply is in `proto` within `out_limit` bytes.
    pub(super) fn resume_inline(
        &mut self,
        answer: Option<Vec<u8>>,
        proto: Protocol,
        out_limit: usize,
        named: &str,
    ) -> Step {
        let Some(c) = self.inline.as_mut() else {
            return Step::Moved;
        };
        let Some(co) = c.co.clone() else {
            return Step::Moved;
        };
        let first = c.first.take();
        let used_at_start = c.used_at_start;
        {
            let Some(mut cur) = self.lua.app_data_mut::<Current>() else {
                return Step::Moved;
            };
            if let Link::Inline {
                answer: slot,
                slice_end,
                ..
            } = &mut cur.link
            {
                *slot = answer;
                *slice_end = Instant::now() + SLICE;
            }
        }
        let result = match first {
            Some(f) => co.resume::<MultiValue>(f),
            None => co.resume::<MultiValue>(()),
        };
        let status = co.status();
        if result.is_ok() && status == ThreadStatus::Resumable {
            let Some(mut cur) = self.lua.app_data_mut::<Current>() else {
                return Step::Moved;
            };
            let call_proto = cur.proto;
            return match &mut cur.link {
                Link::Inline {
                    staged: staged @ Some(_),
                    moved: false,
                    ..
                } => match staged.take() {
                    Some(args) => Step::Call(args, call_proto),
                    None => Step::Moved,
                },
                _ => Step::Moved,
            };
        }
        let cur = self.lua.remove_app_data::<Current>();
        let failed_yield = cur.as_ref().is_none_or(|c| match &c.link {
            Link::Inline { staged, moved, .. } => *moved || staged.is_some(),
            Link::Thread { .. } => true,
        });
        if failed_yield {
            self.abandon_inline();
            return Step::Moved;
        }
        let Some(cur) = cur else {
            return Step::Moved;
        };
        let result = match result {
            Ok(values) => Ok(values),
            // Stopped by the hook (`SCRIPT KILL`, the time limit): Redis's error, at the
            // place the hook stopped it.
            Err(_) if cur.stopped => {
                if let Some(c) = self.inline.as_mut() {
                    c.co = None;
                }
                match stopped_error(&self.lua, &cur) {
                    Ok(err) => Ok(MultiValue::from_iter([Value::Boolean(false), err])),
                    Err(_) => return Step::Moved,
                }
            }
            // Its own error: reported from a script thread, with its place.
            Err(_) => {
                self.abandon_inline();
                return Step::Moved;
            }
        };
        // Its reply is converted on the worker for a slice at most: past it, a thread
        // does it (the script is moved).
        let (killed, deadline, started) = (cur.killed.clone(), cur.deadline, Instant::now());
        let stop = move || {
            kill_check(&killed, deadline)
                .or_else(|| (started.elapsed() >= SLICE).then_some(ABORTED))
        };
        let outcome = self.finish(
            Some(cur),
            result,
            proto,
            out_limit,
            named,
            &stop,
            used_at_start,
        );
        if matches!(outcome, Outcome::Aborted) {
            self.abandon_inline();
            return Step::Moved;
        }
        if let Some(c) = self.inline.as_mut() {
            c.begun = false;
        }
        Step::Done(outcome)
    }

    /// Lets the script begun by [`State::begin_inline`] go, wherever it is (moved, or
    /// stopped by its worker): the state is checked and tidied as after any script, and
    /// its coroutine (suspended, or left with the hook at every instruction) dropped.
    pub(super) fn abandon_inline(&mut self) {
        self.lua.remove_app_data::<Current>();
        let Some(c) = self.inline.as_mut() else {
            return;
        };
        c.first = None;
        if std::mem::take(&mut c.begun) {
            c.co = None;
            let used_at_start = c.used_at_start;
            self.tidy(used_at_start);
        }
    }
}

/// The error of a script the hook stopped, as the thread's handler makes it: `{err =
/// "ERR <why>", source =, line =}`.
fn stopped_error(lua: &Lua, cur: &Current) -> mlua::Result<Value> {
    let why = if cur.timed_out {
        super::lua::TIMED_OUT
    } else {
        super::lua::KILLED
    };
    let t = error_table(lua, format!("ERR {why}").as_bytes())?;
    if let Some((source, line)) = &cur.place {
        t.raw_set("source", source.as_str())?;
        t.raw_set("line", *line)?;
    }
    Ok(Value::Table(t))
}

/// A worker's Lua states for the scripts it runs ([`run`]), each taken by one script at a
/// time.
pub struct LocalStates {
    idle: RefCell<Vec<Held>>,
    /// When the worker last let its other clients run, as far as its scripts know (a call
    /// that waited, or a yield of theirs).
    turn: Cell<Instant>,
}

impl Default for LocalStates {
    fn default() -> Self {
        LocalStates {
            idle: RefCell::default(),
            turn: Cell::new(Instant::now()),
        }
    }
}

impl std::fmt::Debug for LocalStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalStates").finish_non_exhaustive()
    }
}

struct Held {
    state: State,
    /// The scripts' epoch it was made in (`SCRIPT FLUSH` gives scripts a new state).
    epoch: u64,
    /// Its memory as last added to `used_memory_lua`.
    counted: usize,
}

/// A state taken from a worker's, given back when dropped.
struct Taken<'w> {
    states: &'w LocalStates,
    scripts: &'w Scripts,
    held: Option<Held>,
    /// Not to be used again (a run of it panicked).
    discard: bool,
}

impl LocalStates {
    /// Lets the worker's other clients run once scripts have held it for a [`SLICE`].
    async fn yield_if_held(&self) {
        if self.turn.get().elapsed() >= SLICE {
            tokio::task::yield_now().await;
            self.turn.set(Instant::now());
        }
    }

    /// An idle state of this epoch, or a new one (`None`: none could be made).
    fn take<'w>(&'w self, scripts: &'w Scripts) -> Option<Taken<'w>> {
        let epoch = scripts.epoch();
        let found = {
            let mut idle = self.idle.borrow_mut();
            // States of before a `SCRIPT FLUSH` go, all of them.
            idle.retain(|h| {
                let current = h.epoch == epoch;
                if !current {
                    scripts.count_lua_memory(h.counted, 0);
                }
                current
            });
            idle.pop()
        };
        let held = match found {
            Some(h) => h,
            None => Held {
                state: scripts.new_state(true).ok()?,
                epoch,
                counted: 0,
            },
        };
        Some(Taken {
            states: self,
            scripts,
            held: Some(held),
            discard: false,
        })
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let Some(mut held) = self.held.take() else {
            return;
        };
        if !self.discard {
            held.state.abandon_inline();
        }
        let mut idle = self.states.idle.borrow_mut();
        // A script changed what scripts share (the next gets a new state), or enough wait.
        if self.discard || held.state.tampered() || idle.len() >= MAX_IDLE_STATES {
            self.scripts.count_lua_memory(held.counted, 0);
            return;
        }
        let used = held.state.used_memory();
        self.scripts.count_lua_memory(held.counted, used);
        held.counted = used;
        idle.push(held);
    }
}

/// Runs `script` on the worker (see the module's text) on `cx`'s transaction, as
/// [`super::run`] runs it on a script thread: [`Ran::Moved`] when it is to run there
/// instead.
pub(super) async fn run(
    caller: &Caller<'_>,
    cx: &mut Cx<'_>,
    script: &Script,
    proto: Protocol,
    published: &mut Published,
    preempt_at: Option<tokio::time::Instant>,
) -> Ran {
    // Big arguments or source make big work out of the hook's reach (one C call).
    let listed: usize = script
        .keys
        .iter()
        .chain(&script.argv)
        .map(|a| a.len() + 40)
        .sum();
    if listed > MAX_ARGUMENT_BYTES || script.source.len() > MAX_SOURCE_BYTES {
        return Ran::Moved;
    }
    let scripts = &caller.fe.shared.scripts;
    let Some(mut taken) = caller.fe.worker.lua.take(scripts) else {
        return Ran::Moved;
    };
    let Some(held) = taken.held.as_mut() else {
        return Ran::Moved;
    };
    let state = &mut held.state;
    // Scripts run one after another on one task (a group's) let the worker's other
    // clients run between them too.
    caller.fe.worker.lua.yield_if_held().await;
    let deadline = scripts.deadline();
    let running = scripts.register();
    // A panic inside a run (a bug: none is known) costs the state, and the script runs
    // again on a thread (which answers one that panics there too as stopped).
    let begun = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        state.begin_inline(script, running.killed.clone(), deadline)
    }));
    match begun {
        Ok(Ok(())) => {}
        Ok(Err(Some(Outcome::CompileError(reply)))) => return Ran::CompileError(reply),
        Ok(Err(_)) => return Ran::Moved,
        Err(_) => {
            taken.discard = true;
            return Ran::Moved;
        }
    }
    let named = script.function.as_deref().unwrap_or(&script.sha);
    // A script to move, unless it was killed (or ran past its time) meanwhile: the kill is
    // not lost to the move.
    let moved = || {
        let Some(why) = kill_check(&running.killed, deadline) else {
            return Ran::Moved;
        };
        if !script.by_sha {
            scripts.cache(script.sha.clone(), script.source.clone());
        }
        let mut reply = Vec::new();
        Reply::new(&mut reply, proto).error(format!("{why} script: {named}.").as_bytes());
        Ran::Stopped(reply)
    };
    let states = &caller.fe.worker.lua;
    let mut answer = None;
    let outcome = loop {
        if caller.handle.is_killed() {
            // Its client was killed or left: nothing it wrote is kept.
            return Ran::ClientGone(killed_waiting(proto));
        }
        let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            state.resume_inline(answer.take(), proto, cx.out_limit, named)
        }));
        let Ok(step) = resumed else {
            taken.discard = true;
            return moved();
        };
        match step {
            Step::Call(args, call_proto) => {
                if preempt_at.is_some_and(|at| tokio::time::Instant::now() >= at) {
                    return Ran::Preempted;
                }
                cx.proto = call_proto;
                // A call answered without a wait (`TIME`, `PING`, `PUBLISH`) gives no turn
                // to the worker's other clients: a script calling them in a loop lets them
                // run once it has held the worker for a slice.
                let mut waited = false;
                let mut calling = std::pin::pin!(super::call(caller, cx, &args, script, published));
                let called = std::future::poll_fn(|task| {
                    let poll = calling.as_mut().poll(task);
                    waited |= poll.is_pending();
                    poll
                })
                .await;
                if waited {
                    states.turn.set(Instant::now());
                } else {
                    states.yield_if_held().await;
                }
                match called {
                    // A big reply is made into Lua values on a thread.
                    Ok(reply) if reply.len() > MAX_ANSWER_BYTES => return moved(),
                    Ok(reply) => answer = Some(reply),
                    Err(e) if caller.handle.is_killed() => {
                        let mut reply = Vec::new();
                        Reply::new(&mut reply, proto).error(&e.reply_text());
                        return Ran::ClientGone(reply);
                    }
                    Err(e) => return Ran::Failed(e),
                }
            }
            Step::Done(outcome) => break outcome,
            Step::Moved => return moved(),
        }
    };
    drop(running);
    if !script.by_sha {
        scripts.cache(script.sha.clone(), script.source.clone());
    }
    match outcome {
        Outcome::CompileError(reply) => Ran::CompileError(reply),
        Outcome::Reply(reply) => Ran::Reply(reply),
        // Killed (`SCRIPT KILL`, the time limit): nothing it wrote is kept (a worker's
        // script is never preempted through its kill flag).
        Outcome::Stopped(reply) => Ran::Stopped(reply),
        Outcome::Compiled | Outcome::Aborted => Ran::Moved,
    }
}
