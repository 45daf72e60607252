//! Redis 7.0 functions: `FUNCTION LOAD|LIST|DELETE|FLUSH|STATS|KILL|HELP|DUMP|RESTORE`,
//! `FCALL` and `FCALL_RO`, on the script machinery of [`super`].
//!
//! - `FUNCTION LOAD` runs the library's code once in a fresh, bounded Lua state of its own
//!   (only `redis.register_function` and the table, string and math libraries; a memory and
//!   an instruction bound) to learn its functions and their flags, as Redis does.
//! - `FCALL` is a script run: its body is the library's code with a prelude that collects
//!   the registered callbacks, then calls the named one with `KEYS` and `ARGV`.
//! - Libraries are kept in this manifold's memory (not yet in a table: a restart forgets
//!   them, as a redis-server without persistence); at most [`LIBRARIES_MAX`] libraries of
//!   at most [`CODE_MAX`] bytes each. `FUNCTION DUMP|RESTORE` answer an error: the door
//!   does not write Redis's payload format.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use mlua::{HookTriggers, Lua, LuaOptions, StdLib, Value, VmState};

/// Most libraries one manifold keeps.
pub const LIBRARIES_MAX: usize = 1000;
/// Most bytes of one library's code (Redis's `proto-max-bulk-len` is larger; a library is
/// run on every `FCALL` here, so it is kept small).
pub const CODE_MAX: usize = 1 << 20;
/// Instructions a library's load may run (Redis bounds it by 500 ms).
const LOAD_INSTRUCTIONS: u32 = 10_000_000;
/// Memory a library's load may use.
const LOAD_MEMORY: usize = 64 << 20;

const NAME_TEXT: &str = "Library names can only contain letters, numbers, or underscores(_) \
                         and must be at least one character long";

pub const HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];

/// A registered function.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    pub no_writes: bool,
}

/// A loaded library.
#[derive(Debug)]
pub struct Library {
    pub code: Arc<Vec<u8>>,
    pub functions: Vec<Function>,
}

/// The loaded libraries, by name.
#[derive(Debug, Default)]
pub struct Libraries {
    libs: Mutex<BTreeMap<String, Library>>,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The library name of a `#!lua name=<lib>` first line; `Err`: Redis's text.
fn library_name(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let line = String::from_utf8_lossy(&code[2..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    if parts.next() != Some("lua") {
        return Err("Invalid library metadata".into());
    }
    let mut name = None;
    for part in parts {
        match part.strip_prefix("name=") {
            Some(n) if name.is_none() => name = Some(n.to_string()),
            _ => return Err("Invalid library metadata".into()),
        }
    }
    match name {
        Some(n) if valid_name(&n) => Ok(n),
        _ => Err("Invalid library metadata".into()),
    }
}

/// The message of a Lua error, without mlua's wrapping.
fn message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => message(cause),
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        other => other.to_string(),
    }
}

/// Runs `code` in a fresh bounded Lua state and returns the functions it registers.
fn registered(code: &[u8]) -> Result<Vec<Function>, String> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    let _ = lua.set_memory_limit(LOAD_MEMORY);
    let steps = std::cell::Cell::new(0u32);
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(10_000),
        move |_, _| {
            steps.set(steps.get() + 10_000);
            if steps.get() > LOAD_INSTRUCTIONS {
                Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()))
            } else {
                Ok(VmState::Continue)
            }
        },
    );
    let found: std::rc::Rc<std::cell::RefCell<Vec<Function>>> = Default::default();
    let sink = found.clone();
    let register = lua
        .create_function(move |_, args: mlua::MultiValue| {
            let err = |m: &str| Err(mlua::Error::RuntimeError(m.to_string()));
            let args: Vec<Value> = args.into_iter().collect();
            let (name, callback, flags) = match args.as_slice() {
                [Value::Table(t)] => {
                    let mut name = None;
                    let mut callback = None;
                    let mut flags = None;
                    for pair in t.clone().pairs::<Value, Value>() {
                        let (k, v) = pair?;
                        let Value::String(k) = k else {
                            return err("named argument key given to redis.register_function is not a string");
                        };
                        match &*k.to_str()? {
                            "function_name" => name = Some(v),
                            "callback" => callback = Some(v),
                            "flags" => flags = Some(v),
                            "description" => {}
                            _ => return err("unknown argument given to redis.register_function"),
                        }
                    }
                    let Some(name) = name else {
                        return err("redis.register_function must get a function name argument");
                    };
                    let Some(callback) = callback else {
                        return err("redis.register_function must get a callback argument");
                    };
                    (name, callback, flags)
                }
                [_] => return err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."),
                [name, callback] => (name.clone(), callback.clone(), None),
                _ => return err("wrong number of arguments to redis.register_function"),
            };
            let Value::String(name) = name else {
                return err("function name argument given to redis.register_function must be a string");
            };
            let Value::Function(_) = callback else {
                return err("callback argument given to redis.register_function must be a function");
            };
            let mut no_writes = false;
            match flags {
                None => {}
                Some(Value::Table(t)) => {
                    for flag in t.sequence_values::<Value>() {
                        let Value::String(flag) = flag? else {
                            return err("unknown flag given");
                        };
                        match &*flag.to_str()? {
                            "no-writes" => no_writes = true,
                            "allow-oom" | "allow-stale" | "no-cluster"
                            | "allow-cross-slot-keys" => {}
                            _ => return err("unknown flag given"),
                        }
                    }
                }
                Some(_) => return err("flags argument to redis.register_function must be a table representing function flags"),
            }
            let name = name.to_str()?.to_string();
            if !valid_name(&name) {
                return err(&format!("ERR {NAME_TEXT}"));
            }
            let mut found = sink.borrow_mut();
            if found.iter().any(|f| f.name == name) {
                return err("Function already exists in the library");
            }
            found.push(Function { name, no_writes });
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    let redis = lua.create_table().map_err(|e| e.to_string())?;
    redis
        .set("register_function", register)
        .map_err(|e| e.to_string())?;
    lua.globals()
        .set("redis", redis)
        .map_err(|e| e.to_string())?;
    let text = super::lua::script_text(code);
    let chunk = lua
        .load(&*text)
        .set_mode(mlua::ChunkMode::Text)
        .set_name("@user_function")
        .into_function()
        .map_err(|e| format!("Error compiling function: {}", message(&e)))?;
    chunk
        .call::<()>(())
        .map_err(|e| format!("Error registering functions: {}", message(&e)))?;
    let found = found.borrow().clone();
    Ok(found)
}

impl Libraries {
    /// `FUNCTION LOAD [REPLACE] code`: the library's name, or Redis's error text.
    pub fn load(&self, code: &[u8], replace: bool) -> Result<String, String> {
        let name = library_name(code)?;
        if code.len() > CODE_MAX {
            return Err(format!(
                "manifold: a library's code is at most {CODE_MAX} bytes"
            ));
        }
        if !replace && lock(&self.libs).contains_key(&name) {
            return Err(format!("Library '{name}' already exists"));
        }
        let functions = registered(code)?;
        if functions.is_empty() {
            return Err("No functions registered".into());
        }
        let mut libs = lock(&self.libs);
        if !replace && libs.contains_key(&name) {
            return Err(format!("Library '{name}' already exists"));
        }
        for (other, lib) in libs.iter() {
            if *other == name {
                continue;
            }
            if let Some(f) = functions
                .iter()
                .find(|f| lib.functions.iter().any(|g| g.name == f.name))
            {
                return Err(format!("Function {} already exists", f.name));
            }
        }
        if !libs.contains_key(&name) && libs.len() >= LIBRARIES_MAX {
            return Err(format!(
                "manifold: at most {LIBRARIES_MAX} libraries are loaded"
            ));
        }
        libs.insert(
            name.clone(),
            Library {
                code: Arc::new(code.to_vec()),
                functions,
            },
        );
        Ok(name)
    }

    /// The library code and flags of function `name`.
    pub fn find(&self, name: &[u8]) -> Option<(Arc<Vec<u8>>, bool)> {
        let libs = lock(&self.libs);
        libs.values().find_map(|lib| {
            lib.functions
                .iter()
                .find(|f| f.name.as_bytes() == name)
                .map(|f| (lib.code.clone(), f.no_writes))
        })
    }

    pub fn delete(&self, name: &[u8]) -> bool {
        let name = String::from_utf8_lossy(name);
        lock(&self.libs).remove(&*name).is_some()
    }

    pub fn flush(&self) {
        lock(&self.libs).clear();
    }

    /// Libraries and functions counts.
    pub fn counts(&self) -> (usize, usize) {
        let libs = lock(&self.libs);
        (libs.len(), libs.values().map(|l| l.functions.len()).sum())
    }

    /// `(name, code, functions)` of the libraries whose name matches `pattern`.
    pub fn list(&self, pattern: Option<&[u8]>) -> Vec<(String, Arc<Vec<u8>>, Vec<Function>)> {
        let glob = pattern.map(|p| crate::cmd::glob::Glob::new(p, false));
        lock(&self.libs)
            .iter()
            .filter(|(n, _)| glob.as_ref().is_none_or(|g| g.matches(n.as_bytes())))
            .map(|(n, l)| (n.clone(), l.code.clone(), l.functions.clone()))
            .collect()
    }
}

/// The script `FCALL` runs: the library's code with a prelude collecting the callbacks on
/// its first line (the shebang's, so lines keep their numbers), then the call.
pub fn wrapper(code: &[u8], function: &[u8]) -> Vec<u8> {
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let mut w = Vec::with_capacity(code.len() + 300);
    w.extend_from_slice(
        b"local __fns = {} local redis = setmetatable({register_function = function(a, b) \
          if type(a) == 'table' then __fns[a.function_name] = a.callback else __fns[a] = b end \
          end}, {__index = redis}) ",
    );
    w.extend_from_slice(&code[end..]);
    w.extend_from_slice(b"\nreturn __fns['");
    // A registered name has only letters, digits and `_`.
    w.extend_from_slice(function);
    w.extend_from_slice(b"'](KEYS, ARGV)\n");
    w
}
