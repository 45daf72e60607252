//! Argument parsing and conversions, without a database.

use manifold_redis_proto::{Protocol, Reply, Request};

use super::convert::lua_to_reply;
use super::*;

fn with_args<R>(argv: &[&[u8]], f: impl FnOnce(Args<'_>) -> R) -> R {
    let mut buf = Vec::new();
    let owned: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
    encode_request(&mut buf, &owned);
    let mut req = Request::new();
    req.parse(&buf, &Limits::default()).unwrap().unwrap();
    f(Args::new(&req, &buf))
}

#[test]
fn eval_arguments() {
    with_args(&[b"EVAL", b"return 1", b"2", b"k1", b"k2", b"a"], |args| {
        let p = parse_eval(args).unwrap();
        assert_eq!(p.keys, vec![&b"k1"[..], b"k2"]);
        assert_eq!(p.argv, vec![&b"a"[..]]);
    });
    with_args(&[b"EVAL", b"return 1", b"-1"], |args| {
        assert_eq!(
            parse_eval(args).unwrap_err(),
            b"Number of keys can't be negative"
        );
    });
    with_args(&[b"EVAL", b"return 1", b"2", b"k"], |args| {
        assert_eq!(
            parse_eval(args).unwrap_err(),
            b"Number of keys can't be greater than number of args"
        );
    });
    with_args(&[b"EVAL", b"return 1", b"x"], |args| {
        assert_eq!(
            parse_eval(args).unwrap_err(),
            b"value is not an integer or out of range"
        );
    });
}

#[test]
fn shebang_flags() {
    assert_eq!(parse_shebang(b"return 1").unwrap(), None);
    assert_eq!(
        parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap(),
        Some(Shebang { no_writes: true })
    );
    assert_eq!(
        parse_shebang(b"#!lua\nreturn 1").unwrap(),
        Some(Shebang { no_writes: false })
    );
    assert!(parse_shebang(b"#!lua flags=bogus\n")
        .unwrap_err()
        .contains("bogus"));
    assert!(parse_shebang(b"#!python\n").is_err());
}

/// Evaluates `expr` in a plain Lua state and converts it to a reply.
fn reply_of(expr: &str, proto: Protocol, script_proto: Protocol) -> Vec<u8> {
    let lua = mlua::Lua::new();
    let v: mlua::Value = lua.load(expr).eval().unwrap();
    let mut out = Vec::new();
    lua_to_reply(
        &lua,
        &v,
        &mut Reply::new(&mut out, proto),
        script_proto,
        u64::MAX,
    )
    .unwrap();
    out
}

#[test]
fn lua_to_redis() {
    let r2 = Protocol::Resp2;
    let r3 = Protocol::Resp3;
    assert_eq!(reply_of("3.99", r2, r2), b":3\r\n");
    assert_eq!(reply_of("-3.99", r2, r2), b":-3\r\n");
    assert_eq!(reply_of("'x'", r2, r2), b"$1\r\nx\r\n");
    assert_eq!(reply_of("true", r2, r2), b":1\r\n");
    assert_eq!(reply_of("false", r2, r2), b"$-1\r\n");
    assert_eq!(reply_of("false", r3, r2), b"_\r\n");
    assert_eq!(reply_of("false", r3, r3), b"#f\r\n");
    assert_eq!(reply_of("nil", r2, r2), b"$-1\r\n");
    assert_eq!(
        reply_of("{1,'a',nil,4}", r2, r2),
        b"*2\r\n:1\r\n$1\r\na\r\n"
    );
    assert_eq!(reply_of("{ok='fine'}", r2, r2), b"+fine\r\n");
    assert_eq!(reply_of("{err='My Error'}", r2, r2), b"-My Error\r\n");
    assert_eq!(reply_of("{err='a\\nb'}", r2, r2), b"-a b\r\n");
    assert_eq!(reply_of("{map={a=1}}", r2, r2), b"*2\r\n$1\r\na\r\n:1\r\n");
    assert_eq!(reply_of("{map={a=1}}", r3, r2), b"%1\r\n$1\r\na\r\n:1\r\n");
    assert_eq!(reply_of("{set={a=true}}", r3, r2), b"~1\r\n$1\r\na\r\n");
    assert_eq!(reply_of("{double=1.5}", r3, r3), b",1.5\r\n");
    assert_eq!(reply_of("{big_number='123'}", r3, r3), b"(123\r\n");
    // A table inside itself stops at the depth limit.
    let lua = mlua::Lua::new();
    let v: mlua::Value = lua.load("local t = {} t[1] = t return t").eval().unwrap();
    let mut out = Vec::new();
    assert!(lua_to_reply(&lua, &v, &mut Reply::new(&mut out, r2), r2, u64::MAX).is_err());
    // A table shared at every level (2^40 leaves) stops at the values budget, at once.
    let v: mlua::Value = lua
        .load("local t = {} for i = 1, 40 do t = {t, t} end return t")
        .eval()
        .unwrap();
    let mut out = Vec::new();
    let err = lua_to_reply(&lua, &v, &mut Reply::new(&mut out, r2), r2, 1000).unwrap_err();
    assert!(err.contains("too many values"), "{err}");
    // A long array of strings and tables needs no Lua reference per element.
    let v: mlua::Value = lua
        .load("local t = {} for i = 1, 100000 do t[i] = {'s' .. i} end return t")
        .eval()
        .unwrap();
    let mut out = Vec::new();
    lua_to_reply(&lua, &v, &mut Reply::new(&mut out, r2), r2, u64::MAX).unwrap();
    assert!(out.starts_with(b"*100000\r\n*1\r\n$2\r\ns1\r\n"));
}

#[test]
fn redis_to_lua() {
    use manifold_redis_proto::frame::Frame;
    let lua = mlua::Lua::new();
    let g = lua.globals();
    let names = super::convert::Names::new(&lua).unwrap();
    let set = |name: &str, f: Frame| {
        g.set(name, super::convert::frame_to_lua(&lua, &names, f).unwrap())
            .unwrap();
    };
    set("a", Frame::Integer(7));
    set("b", Frame::NullBulk);
    set("c", Frame::Simple(b"OK".to_vec()));
    set("d", Frame::Error(b"ERR x".to_vec()));
    set(
        "e",
        Frame::Array(vec![Frame::Bulk(b"x".to_vec()), Frame::Integer(2)]),
    );
    set("f", Frame::Null);
    set("g", Frame::Double(b"2.5".to_vec()));
    set(
        "h",
        Frame::Map(vec![(
            Frame::Bulk(b"k".to_vec()),
            Frame::Bulk(b"v".to_vec()),
        )]),
    );
    let ok: bool = lua
        .load(
            "return a == 7 and b == false and c.ok == 'OK' and d.err == 'ERR x' \
             and e[1] == 'x' and e[2] == 2 and f == nil and g.double == 2.5 and h.map.k == 'v'",
        )
        .eval()
        .unwrap();
    assert!(ok);
}

#[test]
fn sha1_of_a_script() {
    assert_eq!(
        lua::sha1hex(b"return 1"),
        "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
    );
}

/// The job of running `source` as a script with no keys (RESP2), with where its outcome
/// goes and where its calls would be answered from.
fn script_job(
    source: &str,
    deadline: Option<std::time::Instant>,
) -> (
    pool::Job,
    tokio::sync::mpsc::UnboundedReceiver<pool::FromScript>,
    std::sync::mpsc::Sender<pool::Answer>,
) {
    let (to_worker, from_script) = tokio::sync::mpsc::unbounded_channel();
    let (answer, answers) = std::sync::mpsc::channel();
    let job = pool::Job {
        sha: lua::sha1hex(source.as_bytes()),
        source: std::sync::Arc::new(source.as_bytes().to_vec()),
        function: None,
        keys: Vec::new(),
        argv: Vec::new(),
        proto: Protocol::Resp2,
        out_limit: usize::MAX,
        compile_only: false,
        to_worker,
        answers,
        killed: std::sync::Arc::default(),
        deadline,
    };
    (job, from_script, answer)
}

/// Runs `source` on `state` as a script with no keys, its reply's bytes (RESP2).
fn run_script(state: &mut lua::State, source: &str) -> Vec<u8> {
    let (job, mut from_script, _answer) = script_job(source, None);
    state.run(job).send();
    match from_script.try_recv() {
        Ok(pool::FromScript::Done(pool::Outcome::Reply(r))) => r,
        other => panic!("unexpected outcome {other:?}"),
    }
}

/// Compiled scripts are kept in the state's Lua memory but never fill it: many distinct big
/// scripts (about 30 MiB of compiled code in all) each run under an 8 MiB limit.
#[test]
fn compiled_scripts_never_fill_the_state() {
    let mut state = lua::State::new(8 << 20).unwrap();
    let body = "1,".repeat(20_000);
    for i in 0..200 {
        let source = format!("-- {i}\nlocal t = {{{body}}} return #t");
        assert_eq!(run_script(&mut state, &source), b":20000\r\n", "script {i}");
        assert!(state.used_memory() <= 8 << 20);
    }
}

/// A big reply's conversion asks whether to stop (SCRIPT KILL, the time limit) as it goes,
/// and stops when told; a small one is never cut short.
#[test]
fn a_big_reply_stops_when_told() {
    let lua = mlua::Lua::new();
    let big: mlua::Value = lua
        .load("local t = {} for i = 1, 100000 do t[i] = i end return t")
        .eval()
        .unwrap();
    let asked = std::cell::Cell::new(0);
    let stop = || {
        asked.set(asked.get() + 1);
        Some("stopped")
    };
    let mut out = Vec::new();
    let names = super::convert::Names::new(&lua).unwrap();
    let r = super::convert::lua_to_reply_until(
        &names,
        &big,
        &mut Reply::new(&mut out, Protocol::Resp2),
        Protocol::Resp2,
        u64::MAX,
        &stop,
    );
    assert_eq!(r, Err("stopped"));
    assert_eq!(asked.get(), 1);
    let small: mlua::Value = lua.load("return {1, 2, 3}").eval().unwrap();
    let mut out = Vec::new();
    super::convert::lua_to_reply_until(
        &names,
        &small,
        &mut Reply::new(&mut out, Protocol::Resp2),
        Protocol::Resp2,
        u64::MAX,
        &stop,
    )
    .unwrap();
    assert_eq!(out, b"*3\r\n:1\r\n:2\r\n:3\r\n");
}

/// Small scripts leave their garbage to the collector's steps, yet scripts that each leave
/// most of the memory limit in garbage all run: a script's big garbage is collected at its
/// end, never left to fail the next one.
#[test]
fn garbage_never_fails_the_next_script() {
    let mut state = lua::State::new(16 << 20).unwrap();
    let baseline = state.used_memory();
    for i in 0..300 {
        let small = format!("local t = {{}} for j = 1, 100 do t[j] = {{j, {i}}} end return #t");
        assert_eq!(
            run_script(&mut state, &small),
            b":100\r\n",
            "small script {i}"
        );
    }
    // 300 small scripts' garbage is collected as they go (Lua's steps and ours).
    assert!(
        state.used_memory() < baseline + (4 << 20),
        "{} bytes held",
        state.used_memory()
    );
    for i in 0..20 {
        // About 10 MiB of tables each, under a 16 MiB limit: two at once would not fit.
        let big = format!("local t = {{}} for j = 1, 100000 do t[j] = {{j, {i}, j}} end return #t");
        assert_eq!(
            run_script(&mut state, &big),
            b":100000\r\n",
            "big script {i}"
        );
        assert!(
            state.used_memory() < baseline + (4 << 20),
            "{} bytes held",
            state.used_memory()
        );
    }
}

/// Runs a small script (a GET and an INCR, their replies given in advance) as many times as
/// `SCRIPT_RUNS` says (default 1): with `SCRIPT_RUNS` 1,000 and 11,000 under
/// `valgrind --tool=callgrind`, the difference is 10,000 scripts' instructions. A measure,
/// not a test (`--ignored`).
#[test]
#[ignore = "a measure, run under callgrind"]
fn small_script_runs() {
    let runs: usize = std::env::var("SCRIPT_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let mut state = lua::State::new(64 << 20).unwrap();
    let source = b"local v = redis.call('GET', KEYS[1]) return redis.call('INCR', KEYS[2])";
    let sha = lua::sha1hex(source);
    let source = std::sync::Arc::new(source.to_vec());
    let (to_worker, mut from_script) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..runs {
        let (answer, answers) = std::sync::mpsc::channel();
        answer
            .send(pool::Answer::Reply(b"$1\r\n7\r\n".to_vec()))
            .unwrap();
        answer
            .send(pool::Answer::Reply(b":8\r\n".to_vec()))
            .unwrap();
        state
            .run(pool::Job {
                sha: sha.clone(),
                source: source.clone(),
                function: None,
                keys: vec![b"k".to_vec(), b"c".to_vec()],
                argv: Vec::new(),
                proto: Protocol::Resp2,
                out_limit: usize::MAX,
                compile_only: false,
                to_worker: to_worker.clone(),
                answers,
                killed: std::sync::Arc::default(),
                deadline: None,
            })
            .send();
        let mut calls = 0;
        loop {
            match from_script.try_recv() {
                Ok(pool::FromScript::Call { .. }) => calls += 1,
                Ok(pool::FromScript::Done(pool::Outcome::Reply(r))) => {
                    assert_eq!(r, b":8\r\n");
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(calls, 2);
        assert!(!state.tampered());
    }
}

/// The shared tables are read-only as Redis 7.0.15's (its replies, byte for byte): writes
/// fail with its error, however made; reads see the libraries' entries; nothing a script
/// tried is left for the next (the state is not to be replaced).
#[test]
fn shared_tables_are_read_only() {
    let mut state = lua::State::new(8 << 20).unwrap();
    let refused = |sha: &str, place: bool| {
        format!(
            "-ERR {}Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n",
            if place { "user_script:1: " } else { "" }
        )
        .into_bytes()
    };
    for (script, place) in [
        ("string.x = 1 return 1", true),
        ("rawset(string, 'x', 1) return 1", false),
        ("table.insert(string, 1) return 1", false),
        ("table.insert(redis, 5, 1) return 1", false),
        ("getmetatable('').__index = nil return 1", true),
        ("getmetatable('').__index.foo = 1 return 1", true),
        ("setmetatable(string, {}) return 1", false),
        ("setmetatable(_G, {}) return 1", false),
        ("getmetatable(_G).__index = nil return 1", true),
        ("rawset(_G, 'x', 1) return 1", false),
        ("x = 1 return 1", true),
        ("_G.x = 1 return 1", true),
        ("redis.call = nil return 1", true),
        ("cjson.encode = nil return 1", true),
        ("math.pi = 3 return 1", true),
        ("ARGV = 1 return 1", true),
        // Unlike Redis (a library function is a callable table here, not a function, and
        // Redis fails on indexing a function value).
        ("cjson.encode.x = 1 return 1", true),
        ("rawset(cjson.decode, 'x', 1) return 1", false),
    ] {
        let sha = lua::sha1hex(script.as_bytes());
        assert_eq!(
            String::from_utf8_lossy(&run_script(&mut state, script)),
            String::from_utf8_lossy(&refused(&sha, place)),
            "{script}"
        );
        assert!(!state.tampered(), "{script}");
    }
    for (script, reply) in [
        ("return getmetatable('').__index == string", &b":1\r\n"[..]),
        (
            "return rawequal(getmetatable('').__index, string)",
            b":1\r\n",
        ),
        (
            "return rawget(getmetatable(''), '__index') == string",
            b":1\r\n",
        ),
        ("return type(getmetatable(''))", b"$5\r\ntable\r\n"),
        ("return type(getmetatable(_G))", b"$5\r\ntable\r\n"),
        ("return getmetatable(string)", b"$-1\r\n"),
        ("return getmetatable(cjson)", b"$-1\r\n"),
        (
            "local n = 0 for k, v in pairs(string) do n = n + 1 end return n",
            b":15\r\n",
        ),
        (
            "local n = 0 for k, v in next, string do n = n + 1 end return n",
            b":15\r\n",
        ),
        (
            "local n = 0 table.foreach(string, function() n = n + 1 end) return n",
            b":15\r\n",
        ),
        ("return type(rawget(string, 'find'))", b"$8\r\nfunction\r\n"),
        ("return next(string) ~= nil", b":1\r\n"),
        ("return rawget(_G, 'KEYS') ~= nil", b":1\r\n"),
        ("return #string", b":0\r\n"),
        ("return table.remove(string)", b"$-1\r\n"),
        (
            "local t = {} setmetatable(t, {}) t.x = 1 return t.x",
            b":1\r\n",
        ),
        (
            "local t = {} table.insert(t, 'a') rawset(t, 2, 'b') return t",
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        ),
        (
            "return setmetatable({}, {__index = string}).len('abc')",
            b":3\r\n",
        ),
        ("return ('abc'):upper()", b"$3\r\nABC\r\n"),
        (
            "return string.gsub('abc', '%w', {a = 'x'})",
            b"$3\r\nxbc\r\n",
        ),
        (
            "return {pcall(rawset, string, 'x', 1)}",
            b"*2\r\n$-1\r\n$34\r\nAttempt to modify a readonly table\r\n",
        ),
        (
            "return {select(2, pcall(function() string.x = 1 end))}",
            b"*1\r\n$49\r\nuser_script:1: Attempt to modify a readonly table\r\n",
        ),
    ] {
        assert_eq!(
            String::from_utf8_lossy(&run_script(&mut state, script)),
            String::from_utf8_lossy(reply),
            "{script}"
        );
        assert!(!state.tampered(), "{script}");
    }
}

/// The wrapped functions' argument errors are Lua's, at the script's place, as Redis's.
#[test]
fn wrapped_functions_fail_as_lua_s() {
    let mut state = lua::State::new(8 << 20).unwrap();
    for (script, text) in [
        (
            "local x = pairs(nil)",
            "bad argument #1 to 'pairs' (table expected, got nil)",
        ),
        (
            "local x = next()",
            "bad argument #1 to 'next' (table expected, got no value)",
        ),
        (
            "local x = rawget({})",
            "bad argument #2 to 'rawget' (value expected)",
        ),
        (
            "local x = rawset(1, 2, 3)",
            "bad argument #1 to 'rawset' (table expected, got number)",
        ),
        (
            "local x = rawset({}, 1)",
            "bad argument #3 to 'rawset' (value expected)",
        ),
        (
            "local x = getmetatable()",
            "bad argument #1 to 'getmetatable' (value expected)",
        ),
        (
            "local x = setmetatable({})",
            "bad argument #2 to 'setmetatable' (nil or table expected)",
        ),
        (
            "local x = setmetatable(1, {})",
            "bad argument #1 to 'setmetatable' (table expected, got number)",
        ),
        (
            "local x = setmetatable(setmetatable({}, {__metatable = 1}), {})",
            "cannot change a protected metatable",
        ),
        (
            "local x = table.insert(nil, 1)",
            "bad argument #1 to 'insert' (table expected, got nil)",
        ),
        (
            "local x = table.insert()",
            "bad argument #1 to 'insert' (table expected, got no value)",
        ),
        (
            "local x = table.insert({}, 1, 2, 3)",
            "wrong number of arguments to 'insert'",
        ),
        (
            "local x = table.insert({}, 'a', 2)",
            "bad argument #2 to 'insert' (number expected, got string)",
        ),
        (
            "local x = table.insert(string, {}, 2)",
            "bad argument #2 to 'insert' (number expected, got table)",
        ),
        (
            "local x = table.foreach({})",
            "bad argument #2 to 'foreach' (function expected, got no value)",
        ),
        (
            "local x = load('return 1')",
            "bad argument #1 to 'load' (function expected, got string)",
        ),
    ] {
        let sha = lua::sha1hex(script.as_bytes());
        assert_eq!(
            String::from_utf8_lossy(&run_script(&mut state, script)),
            format!("-ERR user_script:1: {text} script: {sha}, on @user_script:1.\r\n"),
            "{script}"
        );
    }
    let script = "local x = next({}, 'nokey')";
    assert_eq!(
        String::from_utf8_lossy(&run_script(&mut state, script)),
        format!(
            "-ERR invalid key to 'next' script: {}, on @user_script:1.\r\n",
            lua::sha1hex(script.as_bytes())
        )
    );
}

/// A write that got past the read-only tables (made here from Rust, as no script can) is
/// seen after the script: the state is to be replaced.
#[test]
fn a_write_past_the_read_only_tables_is_seen() {
    for (table, key) in [
        ("string", "planted"),
        ("_G", "planted"),
        ("cjson", "encode"),
    ] {
        let mut state = lua::State::new(8 << 20).unwrap();
        assert_eq!(run_script(&mut state, "return 1"), b":1\r\n");
        assert!(!state.tampered());
        let shared: mlua::Table = if table == "_G" {
            state.env()
        } else {
            state.env().get(table).unwrap()
        };
        let target: mlua::Table = if key == "encode" {
            shared.get(key).unwrap()
        } else {
            shared
        };
        target.raw_set("x", 1).unwrap();
        assert_eq!(run_script(&mut state, "return 1"), b":1\r\n");
        assert!(state.tampered(), "{table}.{key}");
    }
}

/// A script told to stop stops even when it spends most of its time in the prelude's
/// wrappers (where the check lets the prelude's own code run on): loops of several shapes,
/// each under a time limit already past.
#[test]
fn a_script_in_the_wrappers_still_stops() {
    let mut loops = Vec::new();
    for call in [
        "rawget(KEYS, 1)",
        "next(KEYS)",
        "rawset(t, 1, 1)",
        "getmetatable('')",
        "table.insert(t, 1) t[1] = nil",
        "string.find('a', 'a')",
    ] {
        for pad in 0..12 {
            loops.push(format!(
                "local t, a = {{}}, 0 while true do {}{call} end",
                "a = a + 1 ".repeat(pad)
            ));
        }
    }
    let count = loops.len();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut state = lua::State::new(8 << 20).unwrap();
        for script in loops {
            let script = script.as_str();
            let (job, mut from_script, _answer) =
                script_job(script, Some(std::time::Instant::now()));
            state.run(job).send();
            let stopped = matches!(
                from_script.try_recv(),
                Ok(pool::FromScript::Done(pool::Outcome::Stopped(_)))
            );
            done.send((script.to_string(), stopped)).unwrap();
        }
    });
    for _ in 0..count {
        let (script, stopped) = finished
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a script did not stop");
        assert!(stopped, "{script}");
    }
}

/// A script as `EVAL` gives it, for a worker's state.
fn eval_script(source: &str, keys: &[&str]) -> Script {
    Script {
        sha: lua::sha1hex(source.as_bytes()),
        source: std::sync::Arc::new(source.as_bytes().to_vec()),
        keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect(),
        argv: Vec::new(),
        read_only: false,
        by_sha: false,
        function: None,
    }
}

fn worker_state() -> lua::State {
    lua::State::with(
        8 << 20,
        true,
        &manifold_redis_lua::cjson::Settings::default(),
    )
    .unwrap()
}

/// Begins `script` on a worker's `state` and resumes it with `answers` in turn: the
/// calls it made, and how it ended.
fn run_inline(
    state: &mut lua::State,
    script: &Script,
    killed: bool,
    answers: &[&[u8]],
) -> (Vec<Vec<Vec<u8>>>, Result<pool::Outcome, &'static str>) {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(killed));
    if state.begin_inline(script, flag, None).is_err() {
        return (Vec::new(), Err("not begun"));
    }
    let mut calls = Vec::new();
    let mut answer = None;
    let mut answers = answers.iter();
    loop {
        match state.resume_inline(answer.take(), Protocol::Resp2, usize::MAX, "name") {
            inline::Step::Call(args, _) => {
                calls.push(args);
                answer = answers.next().map(|a| a.to_vec());
            }
            inline::Step::Done(outcome) => return (calls, Ok(outcome)),
            inline::Step::Moved => {
                state.abandon_inline();
                return (calls, Err("moved"));
            }
        }
    }
}

fn inline_reply(outcome: Result<pool::Outcome, &'static str>) -> Vec<u8> {
    match outcome {
        Ok(pool::Outcome::Reply(r)) => r,
        other => panic!("unexpected outcome {other:?}"),
    }
}

/// On a worker, each `redis.call` yields its arguments and gets the worker's answer; the
/// state runs the next script in the same coroutine.
#[test]
fn a_worker_s_script_yields_at_each_call() {
    let mut state = worker_state();
    let script = eval_script(
        "local v = redis.call('GET', KEYS[1]) return {v, redis.pcall('INCR', KEYS[2])}",
        &["k", "c"],
    );
    for _ in 0..3 {
        let (calls, outcome) = run_inline(&mut state, &script, false, &[b"$1\r\nv\r\n", b":7\r\n"]);
        assert_eq!(
            calls,
            [
                vec![b"GET".to_vec(), b"k".to_vec()],
                vec![b"INCR".to_vec(), b"c".to_vec()]
            ]
        );
        assert_eq!(inline_reply(outcome), b"*2\r\n$1\r\nv\r\n:7\r\n");
    }
    // `redis.pcall` gives an error reply as a table; `pcall` a raised one as its text.
    let script = eval_script(
        "local e = redis.pcall('INCR', KEYS[1]) local ok, f = pcall(function() error('boom') end) \
         return {e['err'], f}",
        &["k"],
    );
    let (_, outcome) = run_inline(&mut state, &script, false, &[b"-ERR not an integer\r\n"]);
    assert_eq!(
        inline_reply(outcome),
        b"*2\r\n$18\r\nERR not an integer\r\n$19\r\nuser_script:1: boom\r\n"
    );
}

/// What a coroutine cannot do, or what a script thread reports better, moves the script
/// there: a call where no yield can be made (inside `pcall`), an error that ends it (its
/// place is the thread's to say), Lua running past its slice.
#[test]
fn a_worker_s_script_moves_to_a_thread_when_it_must() {
    let mut state = worker_state();
    for source in [
        "local ok, v = pcall(redis.call, 'GET', KEYS[1]) return v",
        "return table.sort({2, 1}, function(a, b) return redis.call('GET', KEYS[1]) end)",
        "redis.call('GET', KEYS[1]) return redis.call('INCR', KEYS[1])",
        "error('boom')",
        "local i = 0 while true do i = i + 1 end",
        // C work past the worker's bounds.
        "return string.find(string.rep('a', 2000), '.-.-b')",
        "return #string.rep('ab', 600000)",
        "local n = 0 for w in string.gmatch(('x'):rep(1001), '.-y') do n = n + 1 end return n",
        "return string.match(('a'):rep(40), ('a?'):rep(40) .. ('a'):rep(40))",
        "return string.find(('('):rep(5000), '%b()')",
        "return string.find(('a'):rep(20000), 'b', 1, true)",
        "return string.find(('a'):rep(3000), ('a'):rep(400) .. 'b', 1, true)",
        "return #string.rep(7, '100000')",
        // Past a worker state's memory.
        "local s = ('x'):rep(60000) local t = {} for i = 1, 40 do t[i] = s .. i end return #t",
        // A move caught by `pcall` is a move all the same.
        "return pcall(function() while true do end end)",
        // Costs the pattern's items multiply.
        "return string.find(('a'):rep(1000), '.-' .. ('a'):rep(499) .. 'b')",
        "return string.find(('('):rep(1000), '.-%b()')",
        "return #string.rep('', 2^31 - 1)",
        // Out of a worker state's memory, caught: the answer is a thread's.
        "local ok, e = pcall(function() local t = {} for i = 1, 1e6 do t[i] = i end end) \
         return tostring(e)",
        "local ok, e = xpcall(function() local s = ('x'):rep(60000) local t = {} \
         for i = 1, 40 do t[i] = s .. i end end, function(e) return e end) return tostring(e)",
        "local p = {} for i = 1, 12000 do p[i] = i .. ',' end \
         local f, e = loadstring('return {' .. table.concat(p) .. '}') return tostring(e)",
        // A reply past a slice of conversion.
        "local t = {} for i = 1, 22 do t = {t, t} end return t",
    ] {
        let script = eval_script(source, &["k"]);
        let (_, outcome) = run_inline(
            &mut state,
            &script,
            false,
            &[b"$1\r\nv\r\n", b"-ERR no\r\n"],
        );
        assert_eq!(outcome.err(), Some("moved"), "{source}");
    }
    // The state serves the next script all the same; work within the bounds stays.
    let script = eval_script("return 1", &[]);
    assert_eq!(
        inline_reply(run_inline(&mut state, &script, false, &[]).1),
        b":1\r\n"
    );
    let script = eval_script(
        "return {string.match(('f'):rep(40), '^[0-9a-f]+$'), string.find('key:1:2', '^(.-):(.*)$')}",
        &[],
    );
    assert_eq!(
        inline_reply(run_inline(&mut state, &script, false, &[]).1),
        b"*5\r\n$40\r\nffffffffffffffffffffffffffffffffffffffff\r\n:1\r\n:7\r\n$3\r\nkey\r\n$3\r\n1:2\r\n"
    );
    let script = eval_script(
        "local s, e = string.find(string.rep('a', 200) .. 'b', '.-b') \
         return {s, e, #string.rep('ab', 1000), \
         (string.find(string.rep('a', 5000) .. 'a.-b', 'a.-b', 1, true))}",
        &[],
    );
    assert_eq!(
        inline_reply(run_inline(&mut state, &script, false, &[]).1),
        b"*4\r\n:1\r\n:201\r\n:2000\r\n:5001\r\n"
    );
}

/// A killed script on a worker stops with Redis's text and its place, as on a thread, even
/// when a `pcall` catches the kill's error.
#[test]
fn a_worker_s_killed_script_stops_with_its_place() {
    let mut state = worker_state();
    for source in [
        "local i = 0\nwhile true do i = i + 1 end",
        "local i = 0\nwhile true do pcall(function() i = i + 1 end) end",
    ] {
        let script = eval_script(source, &[]);
        match run_inline(&mut state, &script, true, &[]).1 {
            Ok(pool::Outcome::Stopped(r)) => assert_eq!(
                r,
                b"-ERR Script killed by user with SCRIPT KILL... script: name, on @user_script:2.\r\n"
            ),
            other => panic!("unexpected outcome {other:?}"),
        }
    }
}

/// `cjson`'s settings are every state's that shares them, as Redis's one state has them.
#[test]
fn cjson_settings_are_shared_between_states() {
    let settings = manifold_redis_lua::cjson::Settings::default();
    let mut a = lua::State::with(8 << 20, true, &settings).unwrap();
    let mut b = lua::State::with(8 << 20, false, &settings).unwrap();
    let set = eval_script("cjson.encode_number_precision(3) return 1", &[]);
    assert_eq!(
        inline_reply(run_inline(&mut a, &set, false, &[]).1),
        b":1\r\n"
    );
    assert_eq!(
        run_script(&mut b, "return cjson.encode(1/3)"),
        b"$5\r\n0.333\r\n"
    );
    settings.reset();
    assert_eq!(
        run_script(&mut b, "return cjson.encode(1/3)"),
        b"$16\r\n0.33333333333333\r\n"
    );
}
