//! What `FUNCTION LOAD` (and `FUNCTION RESTORE`, and a row of `redis_function` read
//! again) runs of a library, as Redis 7.0.15: its `#!` line's metadata
//! (`functionExtractLibMetaData`), then its code once in a fresh, bounded Lua state of its
//! own, to learn its functions and their flags.

use mlua::{HookTriggers, Lua, LuaOptions, StdLib, Value, VmState};

use super::functions::{Function, CODE_MAX, NAME_MAX};

/// Instructions a library's load may run (Redis bounds it by 500 ms).
const LOAD_INSTRUCTIONS: u32 = 10_000_000;
/// Memory a library's load may use.
const LOAD_MEMORY: usize = 64 << 20;

const NAME_TEXT: &str = "Library names can only contain letters, numbers, or underscores(_) \
                         and must be at least one character long";

/// Redis's `functionsVerifyName`: ASCII letters, digits and `_`, at least one.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The library name of a `#!lua name=<lib>` first line; `Err`: Redis's text, in Redis's
/// order (`functionExtractLibMetaData`, then the name's check, then the engine's).
fn library_name(code: &[u8]) -> Result<String, String> {
    const INVALID: &str = "Invalid library metadata";
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    // `strchr(payload, '\n')`: a NUL before the first newline ends the search.
    let end = match code.iter().position(|&b| b == b'\n' || b == 0) {
        Some(i) if code[i] == b'\n' => i,
        _ => return Err(INVALID.into()),
    };
    let parts = manifold_redis_proto::request::split_args_owned(&code[..end])
        .filter(|parts| !parts.is_empty())
        .ok_or_else(|| INVALID.to_string())?;
    let engine = parts[0].get(2..).unwrap_or_default();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(&part[5..]);
            continue;
        }
        // Redis prints the part as a C string: up to a NUL (a quoted `\x00`).
        let shown = part.split(|&b| b == 0).next().unwrap_or_default();
        return Err(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(shown)
        ));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    let name = match std::str::from_utf8(name) {
        Ok(n) if valid_name(n) => n.to_string(),
        _ => return Err(NAME_TEXT.into()),
    };
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(format!(
            "Engine '{}' not found",
            String::from_utf8_lossy(engine)
        ));
    }
    Ok(name)
}

/// The message of a Lua error, without mlua's wrapping.
fn message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => message(cause),
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        other => other.to_string(),
    }
}

/// The globals a library's code sees at `FUNCTION LOAD`: `redis` with `register_function`,
/// `log` (which logs nothing here) and its levels; reading another name or writing any is
/// an error, as Redis's.
fn load_globals(lua: &Lua, register: mlua::Function) -> mlua::Result<mlua::Table> {
    let redis = lua.create_table()?;
    redis.raw_set("register_function", register)?;
    redis.raw_set("log", lua.create_function(|_, _: mlua::MultiValue| Ok(()))?)?;
    for (name, level) in super::lua::LOG_LEVELS {
        redis.raw_set(name, level)?;
    }
    redis.set_metatable(Some(read_only(lua)?));
    let env = lua.create_table()?;
    env.raw_set("redis", redis)?;
    env.set_metatable(Some(read_only(lua)?));
    Ok(env)
}

/// Redis's error from inside a library's load: `ERR user_function:<line>: <text>`, the line
/// the library's code is at.
fn located(lua: &Lua, text: &str) -> mlua::Error {
    let line = lua.inspect_stack(1).map_or(0, |d| d.curr_line());
    mlua::Error::RuntimeError(format!("ERR user_function:{line}: {text}"))
}

/// A metatable refusing reads of absent names and every write, with Redis's texts.
fn read_only(lua: &Lua) -> mlua::Result<mlua::Table> {
    let meta = lua.create_table()?;
    meta.raw_set(
        "__index",
        lua.create_function(|lua, (_, name): (Value, Value)| -> mlua::Result<()> {
            let name = match name {
                Value::String(s) => s.to_string_lossy(),
                _ => String::from("?"),
            };
            Err(located(
                lua,
                &format!("Script attempted to access nonexistent global variable '{name}'"),
            ))
        })?,
    )?;
    meta.raw_set(
        "__newindex",
        lua.create_function(|lua, _: mlua::MultiValue| -> mlua::Result<()> {
            Err(located(lua, "Attempt to modify a readonly table"))
        })?,
    )?;
    Ok(meta)
}

/// Runs `code` in a fresh bounded Lua state and returns the functions it registers.
fn registered(code: &[u8]) -> Result<Vec<Function>, String> {
    // As Redis 7.0's load: no library at all (nothing a hook cannot interrupt), globals
    // of `redis` alone (`register_function`, `log`, its levels), read-only.
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::default()).map_err(|e| e.to_string())?;
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
    let found = std::rc::Rc::new(std::cell::RefCell::new(Vec::<Function>::new()));
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
    let env = load_globals(&lua, register).map_err(|e| e.to_string())?;
    let text = super::lua::script_text(code);
    let chunk = lua
        .load(&*text)
        .set_mode(mlua::ChunkMode::Text)
        .set_name("@user_function")
        .set_environment(env)
        .into_function()
        .map_err(|e| format!("Error compiling function: {}", message(&e)))?;
    chunk
        .call::<()>(())
        .map_err(|e| format!("Error registering functions: {}", message(&e)))?;
    let found = found.borrow().clone();
    Ok(found)
}

/// The name of the library `code` declares, or Redis's error text (or manifold's, for a
/// name or code beyond what it keeps).
pub fn checked_name(code: &[u8]) -> Result<String, String> {
    let name = library_name(code)?;
    if name.len() > NAME_MAX {
        return Err(format!(
            "manifold: a library's name is at most {NAME_MAX} characters"
        ));
    }
    if code.len() > CODE_MAX {
        return Err(format!(
            "manifold: a library's code is at most {CODE_MAX} bytes"
        ));
    }
    Ok(name)
}

/// The functions `code` registers when run as Redis runs a library at `FUNCTION LOAD`.
pub fn register(code: &[u8]) -> Result<Vec<Function>, String> {
    let functions = registered(code)?;
    if functions.is_empty() {
        return Err("No functions registered".into());
    }
    Ok(functions)
}

#[cfg(test)]
mod tests {
    use super::library_name;

    fn named(first_line: &str) -> Result<String, String> {
        library_name(
            format!("{first_line}\nredis.register_function('f', function() end)").as_bytes(),
        )
    }

    /// `functionExtractLibMetaData`'s texts and order, as redis-server 7.0.15 answers them.
    #[test]
    fn metadata_texts_are_redis() {
        let invalid = Err("Invalid library metadata".to_string());
        let name_text = Err(super::NAME_TEXT.to_string());
        assert_eq!(library_name(b""), Err("Missing library metadata".into()));
        assert_eq!(library_name(b"#!lua name=nonl"), invalid);
        assert_eq!(library_name(b"#!lua name=a\0x\nmore"), invalid);
        assert_eq!(named("#!lua name=\"unbalanced"), invalid);
        assert_eq!(named("#!lua name=\"a\"b"), invalid);
        assert_eq!(named("#!"), Err("Library name was not given".into()));
        assert_eq!(named("#!lua"), Err("Library name was not given".into()));
        assert_eq!(
            named("#!lua name=a NAME=b"),
            Err("Invalid metadata value, name argument was given multiple times".into())
        );
        assert_eq!(
            named("#!lua name=a foo=b"),
            Err("Invalid metadata value given: foo=b".into())
        );
        assert_eq!(
            named("#! lua name=a"),
            Err("Invalid metadata value given: lua".into())
        );
        assert_eq!(named("#!lua name="), name_text);
        assert_eq!(named("#!python name=a-b"), name_text);
        assert_eq!(
            named("#!python name=a"),
            Err("Engine 'python' not found".into())
        );
        // Quotes, escapes, any space and the key's case, as `sdssplitargs` reads them.
        assert_eq!(named("#!LUA NAME=up"), Ok("up".into()));
        assert_eq!(named("#!lua\tname=\"x\\x41y\"  \r"), Ok("xAy".into()));
        assert_eq!(named("#!lua 'name=sq'"), Ok("sq".into()));
    }
}
