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

/// The message of a Lua error, without mlua's wrapping (nor the traceback mlua's handler
/// adds to a Lua runtime error's).
fn message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => message(cause),
        mlua::Error::RuntimeError(m) => m
            .split_once("\nstack traceback:")
            .map_or_else(|| m.clone(), |(m, _)| m.to_string()),
        mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        other => other.to_string(),
    }
}

/// The globals a library's code sees at `FUNCTION LOAD`: `redis` with `register_function`,
/// `log` (which logs nothing here), its levels and the version; reading another name or writing any
/// (one they have too) is an error, as Redis's.
fn load_globals(lua: &Lua, register: mlua::Function) -> mlua::Result<mlua::Table> {
    let redis = lua.create_table()?;
    redis.raw_set("register_function", register)?;
    redis.raw_set("log", lua.create_function(|_, _: mlua::MultiValue| Ok(()))?)?;
    for (name, level) in super::lua::LOG_LEVELS {
        redis.raw_set(name, level)?;
    }
    super::lua::set_version(&redis)?;
    let globals = lua.create_table()?;
    globals.raw_set("redis", read_only(lua, redis)?)?;
    read_only(lua, globals)
}

/// Redis's error from inside a library's load: `ERR user_function:<line>: <text>`, the line
/// the library's code is at.
fn located(lua: &Lua, text: &str) -> mlua::Error {
    let line = lua.inspect_stack(1).map_or(0, |d| d.curr_line());
    mlua::Error::RuntimeError(format!("ERR user_function:{line}: {text}"))
}

/// A read-only view of `entries`: an empty table whose metatable answers the names
/// `entries` has, and refuses any other read and every write, with Redis's texts.
fn read_only(lua: &Lua, entries: mlua::Table) -> mlua::Result<mlua::Table> {
    let meta = lua.create_table()?;
    meta.raw_set(
        "__index",
        lua.create_function(
            move |lua, (_, name): (Value, Value)| -> mlua::Result<Value> {
                let found: Value = entries.raw_get(name.clone())?;
                if !found.is_nil() {
                    return Ok(found);
                }
                let name = match name {
                    Value::String(s) => s.to_string_lossy(),
                    _ => String::from("?"),
                };
                Err(located(
                    lua,
                    &format!("Script attempted to access nonexistent global variable '{name}'"),
                ))
            },
        )?,
    )?;
    meta.raw_set(
        "__newindex",
        lua.create_function(|lua, _: mlua::MultiValue| -> mlua::Result<()> {
            Err(located(lua, "Attempt to modify a readonly table"))
        })?,
    )?;
    let view = lua.create_table()?;
    view.set_metatable(Some(meta));
    Ok(view)
}

/// An error a library's load raises, as Redis's `luaPushError`: `ERR ` and the text.
fn raised(text: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("ERR {text}"))
}

/// A value Lua takes as a string (`lua_isstring`: a string or a number), as a string.
fn string_like(lua: &Lua, v: &Value) -> mlua::Result<Option<String>> {
    match v {
        Value::String(_) | Value::Integer(_) | Value::Number(_) => {
            Ok(lua.coerce_string(v.clone())?.map(|s| s.to_string_lossy()))
        }
        _ => Ok(None),
    }
}

/// The function name and whether it is flagged `no-writes`, of `redis.register_function`'s
/// arguments, with Redis's texts in Redis's order (`luaRegisterFunctionReadArgs`): named
/// arguments (keys and flags in any case) checked as they come, then the name and the
/// callback; or a name and a callback.
fn registration(lua: &Lua, args: &[Value]) -> mlua::Result<(String, bool)> {
    let fail = |text: &str| Err(raised(text));
    match args {
        [Value::Table(t)] => {
            let (mut name, mut callback, mut no_writes) = (None, false, false);
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Some(key) = string_like(lua, &k)? else {
                    return fail("named argument key given to redis.register_function is not a string");
                };
                match key.to_ascii_lowercase().as_str() {
                    "function_name" => match string_like(lua, &v)? {
                        Some(n) => name = Some(n),
                        None => return fail("function_name argument given to redis.register_function must be a string"),
                    },
                    "description" => {
                        if string_like(lua, &v)?.is_none() {
                            return fail("description argument given to redis.register_function must be a string");
                        }
                    }
                    "callback" => {
                        if !matches!(v, Value::Function(_)) {
                            return fail("callback argument given to redis.register_function must be a function");
                        }
                        callback = true;
                    }
                    "flags" => {
                        let Value::Table(flags) = v else {
                            return fail("flags argument to redis.register_function must be a table representing function flags");
                        };
                        // `luaRegisterFunctionReadFlags`: 1, 2... up to the first nil.
                        for i in 1.. {
                            let flag: Value = flags.get(i)?;
                            if flag.is_nil() {
                                break;
                            }
                            let flag = string_like(lua, &flag)?.unwrap_or_default();
                            match flag.to_ascii_lowercase().as_str() {
                                "no-writes" => no_writes = true,
                                "allow-oom" | "allow-stale" | "no-cluster"
                                | "allow-cross-slot-keys" => {}
                                _ => return fail("unknown flag given"),
                            }
                        }
                    }
                    _ => return fail("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else {
                return fail("redis.register_function must get a function name argument");
            };
            if !callback {
                return fail("redis.register_function must get a callback argument");
            }
            Ok((name, no_writes))
        }
        [_] => fail("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."),
        [name, callback] => {
            let Some(name) = string_like(lua, name)? else {
                return fail("first argument to redis.register_function must be a string");
            };
            if !matches!(callback, Value::Function(_)) {
                return fail("second argument to redis.register_function must be a function");
            }
            Ok((name, false))
        }
        _ => fail("wrong number of arguments to redis.register_function"),
    }
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
        .create_function(move |lua, args: mlua::MultiValue| {
            let (name, no_writes) = registration(lua, &args.into_iter().collect::<Vec<_>>())?;
            if !valid_name(&name) {
                return Err(raised(NAME_TEXT));
            }
            let mut found = sink.borrow_mut();
            if found.iter().any(|f| f.name == name) {
                return Err(raised("Function already exists in the library"));
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
    chunk.call::<()>(()).map_err(|e| {
        // Redis's `luaExtractErrorInformation`: `ERR ` before a plain message (the
        // errors `redis` raises have it already).
        let text = message(&e);
        let code = if text.starts_with("ERR ") { "" } else { "ERR " };
        format!("Error registering functions: {code}{text}")
    })?;
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
