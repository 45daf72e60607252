"""The Redis door's scripts (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP)
against Debian's redis-server 7.0: the same requests to both, the same replies expected byte for
byte, RESP2 and RESP3, pipelined and one at a time; redis-py's Lock and register_script run the
same way against both; SCRIPT KILL of a script that never returns.

Intended differences from redis-server (avoided here):
- A killed script's writes are rolled back (Redis refuses to kill a script that wrote:
  UNKILLABLE); SCRIPT KILL kills at once (Redis waits for busy-reply-threshold) and other
  clients are never blocked meanwhile (Redis answers them BUSY).
- A script stopped inside EXEC (SCRIPT KILL, the time limit) rolls back the whole transaction
  and EXEC answers the script's error (Redis keeps the other commands' writes).
- PUBLISH inside a script is sent after the script commits (Redis sends at once); a script
  whose client leaves or is CLIENT KILLed is stopped and rolled back (Redis runs it on).
- The read-only tables are proxies (plain Lua 5.1): an argument error of `rawset`, `rawget`,
  `next`, `pairs`, `getmetatable`, `setmetatable`, `table.insert`, `table.foreach` or `load`
  called in a tail call (`return rawget(nil)`) lacks the script's place; a library table
  given to `cjson.encode`/`cmsgpack.pack` is seen empty; writing into a library function
  (a callable table: `cjson.encode.x = 1`) fails with `Attempt to modify a readonly table`.
"""

import asyncio
import random
import socket
import struct
import threading
import time

import pytest

from redisdiff import AUTH, Conn, byte_for_byte, cmd, read_reply, redis_py, replies, start_door, start_reference


P = "scripts:"
RESET = cmd("DEL", *[P + s for s in ("s", "h", "l", "set", "z", "n", "e", "x")])
SCRIPT_FLUSH = cmd("SCRIPT", "FLUSH")


def check(door, reference, body, hellos=(None, cmd("HELLO", "3"))):
    byte_for_byte(door, reference, body, hellos)

def ev(script, keys=(), args=()):
    return cmd("EVAL", script, len(keys), *keys, *args)


def test_families_through_scripts(redis_door, redis_reference):
    s, h, l, st, z = (P + x for x in ("s", "h", "l", "set", "z"))
    check(redis_door, redis_reference, [
        RESET,
        ev("return redis.call('SET', KEYS[1], ARGV[1])", [s], ["v1"]),
        ev("return redis.call('GET', KEYS[1])", [s]),
        ev("return redis.call('INCR', KEYS[1])", [P + "n"]),
        ev("return redis.call('INCRBY', KEYS[1], 5)", [P + "n"]),
        ev("return redis.call('APPEND', KEYS[1], 'x')", [s]),
        ev("return redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])", [s, P + "n", P + "e"]),
        ev("redis.call('HSET', KEYS[1], 'a', 1, 'b', 2) return redis.call('HMGET', KEYS[1], 'a', 'b', 'c')", [h]),
        ev("return redis.call('HINCRBY', KEYS[1], 'a', 10)", [h]),
        ev("return redis.call('HGET', KEYS[1], 'nope')", [h]),
        ev("redis.call('RPUSH', KEYS[1], 'a', 'b', 'c') return redis.call('LRANGE', KEYS[1], 0, -1)", [l]),
        ev("return redis.call('LPOP', KEYS[1])", [l]),
        ev("return redis.call('LPOP', KEYS[1], 5)", [P + "e"]),
        ev("return redis.call('SADD', KEYS[1], 'a', 'b', 'a')", [st]),
        ev("return redis.call('SISMEMBER', KEYS[1], 'a')", [st]),
        ev("return redis.call('SCARD', KEYS[1])", [st]),
        ev("redis.call('ZADD', KEYS[1], 1, 'a', 2.5, 'b') return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')", [z]),
        ev("return redis.call('ZSCORE', KEYS[1], 'b')", [z]),
        ev("return redis.call('ZINCRBY', KEYS[1], 0.5, 'a')", [z]),
        ev("return redis.call('EXPIRE', KEYS[1], 100)", [s]),
        ev("local t = redis.call('TTL', KEYS[1]) return t > 90 and t <= 100", [s]),
        ev("return redis.call('PERSIST', KEYS[1])", [s]),
        ev("return redis.call('TYPE', KEYS[1])", [h]),
        ev("return redis.call('EXISTS', KEYS[1], KEYS[2])", [s, P + "e"]),
        ev("return redis.call('DEL', KEYS[1])", [s]),
        ev("return redis.call('GET', KEYS[1])", [s]),
        ev("return redis.call('PING')"), ev("return redis.call('PING', 'x')"),
        ev("return redis.call('ECHO', 'hi')"),
        ev("redis.call('SELECT', 1) redis.call('SET', KEYS[1], 'in1') return redis.call('GET', KEYS[1])", [P + "x"]),
        cmd("GET", P + "x"), cmd("SELECT", "1"), cmd("GET", P + "x"), cmd("DEL", P + "x"), cmd("SELECT", "0"),
        # Wrong types through call (raises) and pcall (a table).
        ev("return redis.call('GET', KEYS[1])", [h]),
        ev("return redis.pcall('GET', KEYS[1])", [h]),
        ev("local r = redis.pcall('LPUSH', KEYS[1], 'x') return r.err", [h]),
        ev("return redis.pcall('INCR', KEYS[1])", [h]),
    ])


def test_conversions(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        ev("return 1"), ev("return 3.99"), ev("return -3.99"), ev("return 'x'"), ev("return true"),
        ev("return false"), ev("return nil"), ev("return {1,2,3.7,'x',nil,5}"), ev("return {}"),
        ev("return {ok='fine'}"), ev("return {err='My Error'}"), ev("return {err='ERR x\\ny'}"),
        ev("return redis.status_reply('GOOD')"), ev("return redis.error_reply('x y')"),
        ev("return redis.error_reply('ERR x')"), ev("return redis.error_reply('-E x')"),
        ev("return redis.error_reply()"), ev("return redis.status_reply(1)"),
        ev("return {1, {2, {3, 'deep'}}, false, true}"),
        ev("return {double=1.5}"), ev("return {big_number='1234567890123456789012'}"),
        ev("return {map={a=1}}"), ev("return {set={a=true}}"),
        ev("redis.setresp(3) return {double=1.5}"), ev("redis.setresp(3) return true"),
        ev("redis.setresp(3) return false"), ev("redis.setresp(3) return {map={k='v'}}"),
        ev("redis.setresp(3) return {set={m=true}}"),
        ev("redis.setresp(3) return {big_number='12345'}"),
        ev("return redis.call('SET', KEYS[1], 'v')", [P + "s"]),
        ev("local r = redis.call('SET', KEYS[1], 'v') return r.ok", [P + "s"]),
        ev("return type(redis.call('GET', KEYS[1]))", [P + "e"]),
        ev("redis.setresp(3) return type(redis.call('GET', KEYS[1]))", [P + "e"]),
        ev("redis.setresp(3) return redis.call('HGETALL', KEYS[1])", [P + "e"]),
        ev("redis.call('HSET', KEYS[1], 'f', 'v') redis.setresp(3) local m = redis.call('HGETALL', KEYS[1]) return m.map.f", [P + "h"]),
        ev("redis.call('HSET', KEYS[1], 'f', 'v') redis.setresp(3) return redis.call('HGETALL', KEYS[1])", [P + "h"]),
        ev("redis.call('ZADD', KEYS[1], 1.5, 'a') redis.setresp(3) local d = redis.call('ZSCORE', KEYS[1], 'a') return d.double", [P + "z"]),
        ev("redis.setresp(3) return redis.call('ZSCORE', KEYS[1], 'a')", [P + "z"]),
        ev("redis.call('SADD', KEYS[1], 'm') redis.setresp(3) local s = redis.call('SMEMBERS', KEYS[1]) return s.set.m", [P + "set"]),
        ev("return redis.sha1hex('')"), ev("return redis.sha1hex('abc')"), ev("return redis.sha1hex()"),
        ev("return redis.setresp(4)"), ev("return redis.setresp()"),
        ev("return redis.log(redis.LOG_WARNING, 'from a test')"), ev("return redis.log()"),
        ev("return redis.log(1)"), ev("return redis.log(99, 'x')"),
        ev("return redis.set_repl(redis.REPL_ALL)"), ev("return redis.set_repl(9)"), ev("return redis.set_repl()"),
        ev("return redis.replicate_commands()"), ev("return {redis.LOG_DEBUG, redis.LOG_NOTICE, redis.REPL_NONE, redis.REPL_AOF}"),
        ev("return #KEYS + #ARGV", ["a", "b"], ["c"]), ev("return {KEYS[1], ARGV[1], ARGV[2]}", ["k"], ["a1", "a2"]),
        ev("return ARGV[1] + 1", [], ["41"]),
    ])


def test_errors(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        ev("return x"), ev("x = 1"), ev("return os"), ev("return print"), ev("return dofile"),
        ev("return debug"), ev("return io"), ev("return require"), ev("return setfenv"),
        ev("return type(loadstring)"), ev("return type(unpack)"),
        ev("return type(_G)"), ev("_G.x = 1"),
        ev("error('boom')"), ev("\n\nerror('line three')"), ev("error({err='TABLE err'})"),
        ev("syntax error here"), ev("return"), ev("return redis.call('nosuch')"), ev("return redis.pcall('nosuch')"),
        ev("return redis.call('get')"), ev("return redis.pcall('get')"), ev("return redis.call()"),
        ev("return redis.call({})"), ev("return redis.call('get', {})"),
        ev("return redis.call('multi')"), ev("return redis.call('exec')"), ev("return redis.call('watch', 'a')"),
        ev("return redis.call('subscribe', 'a')"), ev("return redis.call('eval', 'return 1', 0)"),
        ev("return redis.call('script', 'load', 'return 1')"), ev("return redis.call('client', 'list')"),
        ev("return redis.call('blpop', 'scripts:nol', 0)"), ev("return redis.call('brpop', 'scripts:nol', 1)"),
        ev("return redis.call('incr', KEYS[1])", [P + "s"]),
        ev("redis.call('SET', KEYS[1], 'kept') error('after the write')", [P + "s"]),
        cmd("GET", P + "s"),
        cmd("EVAL", "return 1", "-1"), cmd("EVAL", "return 1", "2", "a"), cmd("EVAL", "return 1", "x"),
        cmd("EVAL", "return 1"), cmd("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"),
        cmd("EVALSHA", "abc", "0"), cmd("EVAL_RO", "return redis.call('set', KEYS[1], 'v')", "1", P + "s"),
        cmd("EVAL_RO", "return redis.call('get', KEYS[1])", "1", P + "s"),
        cmd("EVAL", "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 'v')", "1", P + "s"),
        cmd("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", P + "s"),
        cmd("EVAL", "#!lua\nreturn 1", "0"), cmd("EVAL", "#!lua flags=bogus\nreturn 1", "0"),
        cmd("EVAL", "#!lua flags=allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\nreturn 2", "0"),
    ])


def test_script_cache(redis_door, redis_reference):
    sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"  # return 1
    check(redis_door, redis_reference, [
        SCRIPT_FLUSH,
        cmd("EVALSHA", sha, "0"), cmd("SCRIPT", "EXISTS", sha, "nope"),
        cmd("SCRIPT", "LOAD", "return 1"), cmd("SCRIPT", "EXISTS", sha, sha.upper(), "nope"),
        cmd("EVALSHA", sha, "0"), cmd("EVALSHA", sha.upper(), "0"), cmd("EVALSHA_RO", sha, "0"),
        cmd("SCRIPT", "LOAD", "x x"), cmd("SCRIPT", "LOAD"), cmd("SCRIPT", "EXISTS"),
        cmd("SCRIPT", "FLUSH", "bad"), cmd("SCRIPT", "FLUSH", "ASYNC"), cmd("EVALSHA", sha, "0"),
        ev("return 2"), cmd("EVALSHA", "7f923f79fe76194c868d7e1d0820de36700eb649", "0"),
        cmd("SCRIPT", "FLUSH", "sync"), cmd("SCRIPT", "EXISTS", "7f923f79fe76194c868d7e1d0820de36700eb649"),
        cmd("SCRIPT", "KILL"), cmd("SCRIPT", "HELP"), cmd("SCRIPT", "NOPE"), cmd("SCRIPT"),
        cmd("EVAL", "bad script", "0"), cmd("SCRIPT", "EXISTS", "a3b8c31a0a2d3e0b3e2a1f17e0aeb1ae3ed6d0fb"),
        SCRIPT_FLUSH,
    ])


def random_requests(rng, n):
    keys = [P + "r1", P + "r2", P + "r3"]
    scripts = [
        ("return redis.call('SET', KEYS[1], ARGV[1])", 1, 1),
        ("return redis.call('GET', KEYS[1])", 1, 0),
        ("return redis.call('INCRBY', KEYS[1], ARGV[1])", 1, 1),
        ("return redis.call('RPUSH', KEYS[1], ARGV[1])", 1, 1),
        ("return redis.call('LRANGE', KEYS[1], 0, -1)", 1, 0),
        ("return redis.pcall('HSET', KEYS[1], 'f', ARGV[1])", 1, 1),
        ("return redis.call('SADD', KEYS[1], ARGV[1])", 1, 1),
        ("local v = redis.call('GET', KEYS[1]) if v then redis.call('SET', KEYS[2], v) end return v", 2, 0),
        ("return redis.call('DEL', KEYS[1])", 1, 0),
        ("return redis.call('TYPE', KEYS[1])", 1, 0),
        ("return {redis.pcall('GET', KEYS[1]), redis.call('EXISTS', KEYS[1])}", 1, 0),
    ]
    values = ["1", "2", "-3", "x", "", "10"]
    out = [cmd("DEL", *keys)]
    for _ in range(n):
        body, nk, na = rng.choice(scripts)
        out.append(ev(body, rng.sample(keys, nk), [rng.choice(values) for _ in range(na)]))
    return out


def test_random_sequences(redis_door, redis_reference):
    rng = random.Random(27)
    for _ in range(3):
        check(redis_door, redis_reference, random_requests(rng, 60), hellos=(None,))


def run_both(redis_door, redis_reference, fn):
    """Runs `fn(client)` with redis-py against the door and against redis-server; their
    results must be equal."""
    redis = redis_py()
    from conftest import USER, PASSWORD  # noqa: PLC0415
    got = fn(redis.Redis(port=redis_door, username=USER, password=PASSWORD))
    want = fn(redis.Redis(port=redis_reference, username=USER, password=PASSWORD))
    assert got == want
    return got


def lock_story(r):
    from redis.exceptions import LockError, LockNotOwnedError  # noqa: PLC0415
    r.delete(P + "lock")
    out = []
    lock = r.lock(P + "lock", timeout=30)
    out.append(lock.acquire(blocking=False))
    other = r.lock(P + "lock", timeout=30)
    out.append(other.acquire(blocking=False))
    out.append(other.acquire(blocking=True, blocking_timeout=0.2))
    out.append(lock.owned())
    out.append(other.owned())
    out.append(lock.extend(10))
    out.append(0 < r.pttl(P + "lock") <= 40_000)
    out.append(lock.extend(100, replace_ttl=True))
    out.append(90_000 < r.pttl(P + "lock") <= 100_000)
    try:
        other.release()
        out.append("released by another")
    except LockError as e:
        out.append(type(e).__name__)
    try:
        other.extend(10)
    except LockError as e:
        out.append(type(e).__name__)
    out.append(lock.reacquire())
    lock.release()
    out.append(r.exists(P + "lock"))
    try:
        lock.release()
    except LockNotOwnedError as e:
        out.append(type(e).__name__)
    except LockError as e:
        out.append(type(e).__name__)
    # A second client blocks until the first releases.
    lock = r.lock(P + "lock", timeout=30, thread_local=False)
    out.append(lock.acquire())
    threading.Timer(0.3, lock.release).start()
    waiter = r.lock(P + "lock", timeout=30, sleep=0.05)
    out.append(waiter.acquire(blocking=True, blocking_timeout=20))
    waiter.release()
    return out


def test_redis_py_lock(redis_door, redis_reference):
    got = run_both(redis_door, redis_reference, lock_story)
    assert got[0] is True and got[1] is False


def test_redis_py_lock_asyncio(redis_door, redis_reference):
    redis = redis_py()
    from conftest import USER, PASSWORD  # noqa: PLC0415

    async def story(port):
        r = redis.asyncio.Redis(port=port, username=USER, password=PASSWORD)
        await r.delete(P + "alock")
        out = []
        lock = r.lock(P + "alock", timeout=30)
        out.append(await lock.acquire(blocking=False))
        other = r.lock(P + "alock", timeout=30)
        out.append(await other.acquire(blocking=False))
        out.append(await lock.owned())
        out.append(await lock.extend(5))
        out.append(await lock.reacquire())
        try:
            await other.release()
        except redis.exceptions.LockError as e:
            out.append(type(e).__name__)
        await lock.release()
        out.append(await r.exists(P + "alock"))
        out.append(await other.acquire(blocking=True, blocking_timeout=5))
        await other.release()
        await r.aclose()
        return out

    got = asyncio.run(story(redis_door))
    want = asyncio.run(story(redis_reference))
    assert got == want
    assert got[0] is True and got[1] is False


def test_register_script(redis_door, redis_reference):
    def story(r):
        r.script_flush()
        s = r.register_script("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}")
        r.delete(P + "cnt")
        out = [s(keys=[P + "cnt"], args=["a"]), s(keys=[P + "cnt"], args=["b"])]
        r.script_flush()
        out.append(s(keys=[P + "cnt"], args=["c"]))  # NOSCRIPT, then EVAL
        out.append(r.script_exists(s.sha))
        # In a transactional pipeline (MULTI/EXEC): redis-py loads the script first, then
        # queues its EVALSHA among the other commands.
        r.script_flush()
        with r.pipeline(transaction=True) as p:
            p.set(P + "cnt", 40)
            s(keys=[P + "cnt"], args=["d"], client=p)
            s(keys=[P + "cnt"], args=["e"], client=p)
            p.get(P + "cnt")
            out.append(p.execute())
        return out

    run_both(redis_door, redis_reference, story)


def test_no_bytecode_is_ever_loaded(redis_door, redis_reference):
    """Precompiled Lua bytecode is never loaded (Lua 5.1 does not check it: crafted bytecode
    reads and writes memory): an EVAL body, `loadstring` and `load` read it as text and fail
    as Redis's patched Lua does."""
    c = Conn(redis_reference)
    c.call("AUTH", *args_auth())
    code = c.call("EVAL", "return string.dump(function() return 1 end)", "0")
    c.close()
    assert code[:4] == b"\x1bLua", code
    check(redis_door, redis_reference, [
        cmd("EVAL", code, "0"),
        ev("local f, e = loadstring(ARGV[1]) return {tostring(f), e}", [], [code]),
        ev("return loadstring('return 1 + 1')()"),
        ev("return loadstring(ARGV[1])", [], [b" " + code]),
    ], hellos=(None,))


# A script that changes what scripts share, then one that looks: both fail or answer as
# Redis's, byte for byte. The globals and every table reachable from them (and the string
# metatable) are read-only, as in Redis: the change fails with Redis's error, however made.
TAMPERING = [
    ("string.upper = function() return 'owned' end return 1", "return string.upper('a')"),
    ("getmetatable('').__index = {upper = function() return 'owned' end} return 1", "return ('a'):upper()"),
    ("getmetatable('').__index.upper = function() return 'owned' end return 1", "return ('a'):upper()"),
    ("redis.call = function() return 'owned' end return 1", "return redis.call('PING')"),
    ("cjson.encode = function() return 'owned' end return 1", "return cjson.encode({1})"),
    ("rawset(_G, 'KEYS', {'victim'}) return 1", "return KEYS[1]"),
    ("rawset(_G, 'planted', 'x') return 1", "return rawget(_G, 'planted')"),
    ("string.upper = nil return 1", "return string.upper('a')"),
    ("rawset(math, 'floor', nil) rawset(math, 'planted', 1) return 1", "return math.floor(1.5)"),
    ("rawset(getmetatable(''), '__index', nil) return 1", "return ('a'):upper()"),
    ("rawset(string, 'upper', string.lower) return 1", "return string.upper('a')"),
    ("table.insert(string, 'x') return 1", "return #string"),
    ("table.insert(redis, 1, 'x') return 1", "return redis[1]"),
    ("table.insert(_G, 'x') return 1", "return rawget(_G, 1)"),
    ("setmetatable(string, {__index = function() return 'owned' end}) return 1", "return string.planted"),
    ("setmetatable(getmetatable(''), {}) return 1", "return ('a'):upper()"),
    ("getmetatable(_G).__index = nil return 1", "return type(getmetatable(_G).__index)"),
    ("local ok, e = pcall(rawset, string, 'x', 1) return {tostring(ok), e}", "return rawget(string, 'x')"),
    ("local ok, e = pcall(function() cjson.x = 1 end) return {tostring(ok), e}", "return rawget(cjson, 'x')"),
    ("KEYS[1] = 'mine' return KEYS[1]", "return KEYS[1]"),
]


@pytest.mark.parametrize("tamper,probe", TAMPERING)
def test_a_script_cannot_change_what_the_next_scripts_see(redis_door, redis_reference, tamper, probe):
    check(redis_door, redis_reference, [ev(tamper, [P + "k"]), ev(probe, [P + "mine"])], hellos=(None,))


def test_shared_tables_read_as_redis_s(redis_door, redis_reference):
    """Read-only tables still read as the libraries' own: pairs, next, rawget, foreach on
    them, and the string metatable (`getmetatable('')`, its `__index`)."""
    check(redis_door, redis_reference, [
        ev("local n = 0 for k, v in pairs(string) do n = n + 1 end return n"),
        ev("local n = 0 for k, v in next, math do n = n + 1 end return n"),
        ev("local n = 0 table.foreach(table, function() n = n + 1 end) return n"),
        ev("local ks = {} for k in pairs(table) do ks[#ks + 1] = k end table.sort(ks) return ks"),
        ev("return {type(rawget(string, 'find')), type(rawget(_G, 'redis')), rawget(_G, 'nothing')}"),
        ev("return {rawget(_G, 'KEYS')[1], #rawget(_G, 'ARGV')}", [P + "k"], ["a"]),
        ev("return next(string) ~= nil"),
        ev("local ok = pcall(ipairs, string) return {tostring(ok), #string, #_G, select('#', unpack(math))}"),
        ev("return {type(getmetatable('')), type(getmetatable('').__index)}"),
        ev("return {getmetatable('').__index == string, rawequal(getmetatable('x').__index, string)}"),
        ev("return {rawget(getmetatable(''), '__index') == string, getmetatable('') == getmetatable('x')}"),
        ev("return getmetatable('').__index.rep('ab', 2)"),
        ev("local n = 0 for k in pairs(getmetatable('')) do n = n + 1 end return n"),
        ev("return {getmetatable(string), getmetatable(getmetatable('')), type(getmetatable(_G))}"),
        ev("return setmetatable({}, {__index = string}).len('abc')"),
        ev("local t = setmetatable({}, {__index = redis}) return t.call('PING')"),
        ev("local t = {} table.insert(t, 'a') table.insert(t, 1, 'b') rawset(t, 3, 'c') return t"),
        ev("return string.gsub('abc', '%w', {a = 'x'})"),
        ev("return {table.remove(string), table.getn(string), table.maxn(math), table.concat(string)}"),
    ], hellos=(None,))


def test_wrapped_functions_fail_as_lua_s(redis_door, redis_reference):
    """`rawset`, `rawget`, `next`, `pairs`, `getmetatable`, `setmetatable`, `table.insert`,
    `table.foreach` and `load` are wrapped (they reach the tables past their metatables):
    their argument errors are Lua's, at the script's place, as Redis's."""
    check(redis_door, redis_reference, [
        ev("local x = pairs(nil)"),
        ev("local x = next()"),
        ev("local x = next({}, 'nokey')"),
        ev("local x = rawget({})"),
        ev("local x = rawset(1, 2, 3)"),
        ev("local x = rawset({}, 1)"),
        ev("local x = rawset({}, nil, 1)"),
        ev("local x = getmetatable()"),
        ev("local x = setmetatable({})"),
        ev("local x = setmetatable(1, {})"),
        ev("local x = setmetatable(setmetatable({}, {__metatable = 1}), {})"),
        ev("local x = table.insert(nil, 1)"),
        ev("local x = table.insert()"),
        ev("local x = table.insert({}, 1, 2, 3)"),
        ev("local x = table.insert({}, 'a', 2)"),
        ev("local x = table.insert(string, {}, 2)"),
        ev("local x = table.insert(string, 1, 2, 3)"),
        ev("local x = table.foreach({})"),
        ev("local x = load('return 1')"),
        ev("local x = load()"),
        ev("local ok, e = pcall(rawset, {}, nil, 1) return e"),
        ev("return type(load(function() return nil end))"),
    ], hellos=(None,))


def test_patterns_are_bounded_and_coroutines_absent(redis_door):
    """Lua 5.1's pattern matcher recurses per quantifier without a bound: a pattern of
    thousands overflows the script thread's stack. Past Lua 5.2's bound it is refused, and
    the door keeps serving. Coroutines are absent: the hook that stops scripts does not reach
    code running in one."""
    c = Conn(redis_door)
    c.call("AUTH", *args_auth())
    for fn in ("find", "match", "gmatch", "gsub"):
        extra = ", ''" if fn == "gsub" else ""
        r = c.call("EVAL", f"return string.{fn}('a', string.rep('a*', 100000){extra})", "0")
        assert "pattern too complex" in str(r), (fn, r)
    assert c.call("EVAL", "return string.find('aaa', string.rep('a?', 150))", "0") == 1
    assert c.call("EVAL", "return ('abc'):gsub('b', 'x')", "0") == b"axc"
    r = c.call("EVAL", "return coroutine.wrap(function() while true do end end)()", "0")
    assert "nonexistent global variable 'coroutine'" in str(r), r
    assert c.call("PING") == "PONG"
    c.close()


def test_big_replies_both_ways(redis_door, redis_reference):
    """Large tables cross between Lua and Redis one element at a time (mlua has room for
    some 8,000 references: holding one per element panicked the script thread), as
    redis-server answers them; a table shared at every level (2^31 values to write) is
    refused after a bounded walk instead of taking the script thread for hours."""
    big = ["local t = {} for i = 1, 50000 do t[i] = 's' .. i end return t",
           "local t = {} for i = 1, 50000 do t[i] = {i} end return t",
           "redis.setresp(3) "
           "local n = 0 for _ in pairs(redis.call('HGETALL', KEYS[1])['map']) do n = n + 1 end "
           "return {n, #redis.call('LRANGE', KEYS[2], 0, -1)}"]
    for port in (redis_door, redis_reference):
        c = Conn(port)
        c.call("AUTH", *args_auth())
        c.call("DEL", P + "bigh", P + "bigl")
        c.call("HSET", P + "bigh", *[x for i in range(20000) for x in (f"f{i}", "v")])
        c.call("RPUSH", P + "bigl", *range(20000))
        c.close()
    for script in big:
        got = [None, None]
        for i, port in enumerate((redis_door, redis_reference)):
            c = Conn(port)
            c.call("AUTH", *args_auth())
            got[i] = c.call("EVAL", script, "2", P + "bigh", P + "bigl")
            c.close()
        assert got[0] == got[1], script
        assert len(got[0]) in (2, 50000)
    c = Conn(redis_door)
    c.call("AUTH", *args_auth())
    r = c.call("EVAL", "local t = {} for i = 1, 30 do t = {t, t} end return t", "0")
    assert "too many values" in str(r), r
    assert c.call("PING") == "PONG"
    c.close()


def test_pcall_gives_redis_s_error_values(redis_door, redis_reference):
    """A script's pcall of redis.call (or of a library function) gets the error as the string
    Redis gives, not the door's internal error object."""
    s = P + "pcall-s"
    check(redis_door, redis_reference, [
        cmd("SET", s, "x"),
        ev("return {pcall(redis.call, 'nosuchcmd')}"),
        ev("local ok, e = pcall(redis.call, 'nosuchcmd') return type(e)"),
        ev("local ok, e = pcall(redis.call, 'GET') return e"),
        ev("local ok, e = pcall(redis.call, 'INCR', KEYS[1]) return {type(e), tostring(e), e}", [s]),
        ev("local ok, e = pcall(function() return redis.call('INCR', KEYS[1]) end) return {type(e), e}", [s]),
        ev("local ok, e = pcall(cjson.decode, '{') return {type(e), tostring(e)}"),
        ev("local ok, e = pcall(error, 'plain') return {ok, e}"),
        ev("return pcall(function() return 1, 2 end)"),
    ], hellos=(None,))


def test_math_random_is_redis_s(redis_door, redis_reference):
    """math.random and math.randomseed are Redis's (its rand48): the same seed gives the same
    numbers as redis-server, and the same argument errors."""
    check(redis_door, redis_reference, [
        ev("math.randomseed(-77) local t = {} for i = 1, 50 do t[i] = math.random(1000000) end "
           "t[51] = tostring(math.random()) t[52] = math.random(-5, -1) t[53] = math.random(3, 3) return t"),
        ev("math.randomseed(2^40) local t = {math.random(10), math.random('7'), math.random(2.7), "
           "math.random(-2.7, 3), math.random(1e10)} return t"),
        ev("math.randomseed(7.9) local x = math.random(0) return x"),
        ev("math.randomseed(7) local x = math.random(5, 2) return x"),
        ev("local x = math.random(1, 2, 3) return x"),
        ev("local x = math.random('x') return x"),
        ev("local x = math.random(nil) return x"),
        ev("math.randomseed()"), ev("math.randomseed('x')"), ev("return math.randomseed(3)"),
        ev("return type(math.random)"),
    ], hellos=(None,))


LOOPS = [
    "redis.call('SET', KEYS[1], 'w') while true do end",
    # A Lua pcall catches the kill's error: the script must end all the same.
    "redis.call('SET', KEYS[1], 'w') while true do pcall(function() local x = 0 "
    "for i = 1, 50 do x = x + i end end) end",
]


@pytest.mark.parametrize("loop", LOOPS, ids=["plain", "inside-pcall"])
def test_script_kill(redis_door, loop):
    """A script that never returns is killed by SCRIPT KILL from another client; its client
    gets Redis's text, its writes are rolled back, and other clients run meanwhile."""
    busy = Conn(redis_door)
    busy.call("AUTH", *args_auth())
    other = Conn(redis_door)
    other.call("AUTH", *args_auth())
    other.call("DEL", P + "killed")
    assert other.call("SCRIPT", "KILL") == "NOTBUSY No scripts in execution right now."
    busy.send(ev(loop, [P + "killed"]))
    # Other clients keep running; poll until the script is there to kill.
    for _ in range(1000):
        assert other.call("PING") == "PONG"
        assert other.call("SET", P + "x", "free") == "OK"
        r = other.call("SCRIPT", "KILL")
        if r == "OK":
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the script never ran")
    from redisdiff import read_reply  # noqa: PLC0415
    reply = read_reply(busy.f)
    assert reply.startswith("ERR Script killed by user with SCRIPT KILL... script: "), reply
    assert reply.endswith(", on @user_script:1."), reply
    assert other.call("EXISTS", P + "killed") == 0
    assert busy.call("PING") == "PONG"
    busy.close()
    other.close()


def args_auth():
    from conftest import USER, PASSWORD  # noqa: PLC0415
    return USER, PASSWORD


def test_a_script_s_messages_go_out_when_it_commits(redis_door, redis_reference):
    """PUBLISH inside a script answers the subscribers it reaches, as redis-server; the
    messages go out once the script's writes commit: a killed script (rolled back) sends
    none, one that failed after its writes (kept, as in Redis) sends them."""
    from redisdiff import read_reply  # noqa: PLC0415
    ch = P + "chan"
    check(redis_door, redis_reference, [
        ev("return redis.call('PUBLISH', KEYS[1], 'nobody')", [P + "nobody-listens"]),
    ], hellos=(None,))
    sub = Conn(redis_door)
    sub.call("AUTH", *args_auth())
    sub.send(cmd("SUBSCRIBE", ch))
    assert read_reply(sub.f) == [b"subscribe", ch.encode(), 1]
    busy = Conn(redis_door)
    busy.call("AUTH", *args_auth())
    other = Conn(redis_door)
    other.call("AUTH", *args_auth())
    # Killed after publishing: the message never goes out.
    busy.send(ev("redis.call('SET', KEYS[1], 'w') redis.call('PUBLISH', KEYS[2], 'killed') while true do end",
                 [P + "pub-w", ch]))
    for _ in range(1000):
        if other.call("SCRIPT", "KILL") == "OK":
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the script never ran")
    assert read_reply(busy.f).startswith("ERR Script killed by user")
    # A runtime error after the write and the publish: both kept, as in Redis.
    r = busy.call("EVAL", "redis.call('SET', KEYS[1], 'kept') redis.call('PUBLISH', KEYS[2], 'after-error') "
                          "error('boom')", "2", P + "pub-w", ch)
    assert "boom" in str(r), r
    assert busy.call("EVAL", "return redis.call('PUBLISH', KEYS[1], 'committed')", "1", ch) == 1
    assert read_reply(sub.f) == [b"message", ch.encode(), b"after-error"]
    assert read_reply(sub.f) == [b"message", ch.encode(), b"committed"]
    assert other.call("GET", P + "pub-w") == b"kept"
    for c in (sub, busy, other):
        c.close()


@pytest.fixture(scope="module")
def small_door(topology, tmp_path_factory):
    """A door with one worker (so that CLIENT LIST, which lists its worker's clients, sees
    every client) and one script thread."""
    cfg = tmp_path_factory.mktemp("scripts") / "small.toml"
    cfg.write_text("[engine]\nthreads = 1\n[redis]\nmax_running_scripts = 1\n")
    with start_door(topology, ["--config", str(cfg)]) as port:
        yield port


def poll(what, check, seconds=30):
    """Polls `check` until it is true (a behaviour, not a timing: the bound is generous)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


def client_line(conn, name):
    """`name`'s line of CLIENT LIST, or None."""
    listing = conn.call("CLIENT", "LIST")
    listing = listing.decode() if isinstance(listing, bytes) else listing
    return next((line for line in listing.splitlines() if f" name={name} " in line), None)


def subscriber(port, channel):
    s = Conn(port)
    s.call("AUTH", *args_auth())
    assert s.call("SUBSCRIBE", channel) == [b"subscribe", channel.encode(), 1]
    return s


def test_publish_in_a_script(redis_door, redis_reference):
    """PUBLISH inside a script answers the subscribers it reaches, as redis-server does; the
    messages of a script that raised an error after them are delivered too (its writes
    before stay, as in Redis)."""
    ch = P + "pub"
    for port in (redis_door, redis_reference):
        s = subscriber(port, ch)
        c = Conn(port)
        c.call("AUTH", *args_auth())
        assert c.call("EVAL", "local n = redis.call('PUBLISH', KEYS[1], 'one') "
                      "return {n, redis.call('PUBLISH', KEYS[1] .. 'x', 'nobody')}", "1", ch) == [1, 0]
        r = c.call("EVAL", "redis.call('PUBLISH', KEYS[1], 'two') return redis.call('INCR', 'x', 'y')", "1", ch)
        assert r.startswith("ERR Wrong number of args"), r
        assert read_reply(s.f) == [b"message", ch.encode(), b"one"]
        assert read_reply(s.f) == [b"message", ch.encode(), b"two"]
        s.close()
        c.close()


def test_a_killed_script_publishes_nothing(redis_door):
    """What a script publishes is sent when its transaction commits, in order: a script killed
    (rolled back) after publishing sends nothing (Redis has sent it at once, but would refuse
    to kill a script that wrote), and the next script's messages arrive in order."""
    ch = P + "pub-killed"
    s = subscriber(redis_door, ch)
    busy = Conn(redis_door)
    busy.call("AUTH", *args_auth())
    other = Conn(redis_door)
    other.call("AUTH", *args_auth())
    busy.send(ev("redis.call('PUBLISH', KEYS[1], 'from the killed script') while true do end", [ch]))
    poll("the script runs", lambda: other.call("SCRIPT", "KILL") == "OK")
    assert read_reply(busy.f).startswith("ERR Script killed by user with SCRIPT KILL...")
    assert other.call("EVAL", "redis.call('PUBLISH', KEYS[1], 'a') redis.call('PUBLISH', KEYS[1], 'b') "
                      "return redis.call('PUBLISH', KEYS[1], 'c')", "1", ch) == 1
    for m in (b"a", b"b", b"c"):
        assert read_reply(s.f) == [b"message", ch.encode(), m]
    for c in (s, busy, other):
        c.close()


@pytest.mark.parametrize("how", ["disconnect", "client-kill", "exec-disconnect"])
def test_a_script_stops_when_its_client_goes(small_door, how):
    """A script whose client's connection is reset, or which is CLIENT KILLed, is stopped and
    rolled back at once (Redis runs it to its end): the client leaves CLIENT LIST, no script is left to
    SCRIPT KILL, and what it wrote is gone."""
    redis_door = small_door
    name = f"script-{how}"
    key = P + "gone-" + how
    busy = Conn(redis_door)
    busy.call("AUTH", *args_auth())
    busy.call("CLIENT", "SETNAME", name)
    other = Conn(redis_door)
    other.call("AUTH", *args_auth())
    other.call("DEL", key)
    if how == "exec-disconnect":
        # Queued in MULTI, the script runs inside EXEC's transaction: the same holds.
        busy.send(cmd("MULTI") + cmd("SET", key + "-queued", "q")
                  + ev("redis.call('SET', KEYS[1], 'w') while true do end", [key]))
        assert [read_reply(busy.f) for _ in range(3)] == ["OK", "QUEUED", "QUEUED"]
        busy.send(cmd("EXEC"))
    else:
        busy.send(ev("redis.call('SET', KEYS[1], 'w') while true do end", [key]))
    try:
        poll("the script runs", lambda: " cmd=eval " in (client_line(other, name) or ""))
        if how != "client-kill":
            # An abortive close (a reset): the connection is broken, not just ended.
            busy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            busy.close()
        else:
            client_id = client_line(other, name).split(" ")[0].split("=")[1]
            assert other.call("CLIENT", "KILL", "ID", client_id) == 1
        poll("the client is gone", lambda: client_line(other, name) is None)
        assert other.call("SCRIPT", "KILL") == "NOTBUSY No scripts in execution right now."
        assert other.call("EXISTS", key, key + "-queued") == 0
        if how == "client-kill":
            assert busy.closed()
    finally:
        other.call("SCRIPT", "KILL")
        busy.close()
        other.close()


def test_script_load_takes_no_script_thread(small_door):
    """SCRIPT LOAD only compiles: it answers while every script thread is busy (the door here
    has one) and is no running script for SCRIPT KILL."""
    busy = Conn(small_door)
    busy.call("AUTH", *args_auth())
    busy.call("CLIENT", "SETNAME", "script-load-busy")
    other = Conn(small_door)
    other.call("AUTH", *args_auth())
    busy.send(ev("while true do end"))
    try:
        poll("the script runs", lambda: " cmd=eval " in (client_line(other, "script-load-busy") or ""))
        sha = other.call("SCRIPT", "LOAD", "return 'loaded'")
        assert sha == b"b534286061d4b9e4026607613b95c06c06015ae8", sha
        r = other.call("SCRIPT", "LOAD", "return +")
        assert r.startswith("ERR Error compiling script (new function): user_script:1:"), r
        assert other.call("SCRIPT", "KILL") == "OK"
        assert read_reply(busy.f).startswith("ERR Script killed by user with SCRIPT KILL...")
        assert other.call("SCRIPT", "KILL") == "NOTBUSY No scripts in execution right now."
        assert other.call("EVALSHA", sha, "0") == b"loaded"
    finally:
        other.call("SCRIPT", "KILL")
        busy.close()
        other.close()


def test_exec_takes_its_script_place_before_its_locks(small_door):
    """An EXEC that queued a script waits for a script place before its transaction takes
    any row lock: while the one place is busy, another client's write to a key the EXEC
    will write is not held up behind it (it would be until InnoDB's lock wait timeout, the
    running script waiting for that same lock meanwhile)."""
    key = P + "exec-slot"
    busy, queued, writer = Conn(small_door), Conn(small_door), Conn(small_door)
    for c in (busy, queued, writer):
        c.call("AUTH", *args_auth())
    queued.call("CLIENT", "SETNAME", "exec-slot-queued")
    busy.call("CLIENT", "SETNAME", "exec-slot-busy")
    busy.send(ev("while true do end"))
    try:
        poll("the script runs", lambda: " cmd=eval " in (client_line(writer, "exec-slot-busy") or ""))
        assert queued.call("MULTI") == "OK"
        assert queued.call("SET", key, "from-exec") == "QUEUED"
        assert queued.call("EVAL", "return redis.call('GET', KEYS[1])", "1", key) == "QUEUED"
        queued.send(cmd("EXEC"))
        poll("EXEC waits", lambda: " cmd=exec " in (client_line(writer, "exec-slot-queued") or ""))
        time.sleep(0.3)  # room for a wrong EXEC to have locked the key: the write below shows it
        writer.sock.settimeout(20)
        assert writer.call("SET", key, "from-writer") == "OK"
        assert writer.call("SCRIPT", "KILL") == "OK"
        assert read_reply(busy.f).startswith("ERR Script killed by user with SCRIPT KILL...")
        assert read_reply(queued.f) == ["OK", b"from-exec"]
        # CLIENT LIST names EXEC again once it ran its script, as Redis's.
        assert " cmd=exec " in client_line(writer, "exec-slot-queued")
        assert writer.call("GET", key) == b"from-exec"
    finally:
        writer.call("SCRIPT", "KILL")
        writer.call("DEL", key)
        for c in (busy, queued, writer):
            c.close()


def test_200k_values_both_ways(redis_door, redis_reference):
    """200,000 values cross between Lua and Redis both ways (a reply table, nested tables, a
    redis.call reply of a 200,000-element list returned as it is), as redis-server answers."""
    key = P + "list200k"
    scripts = [
        "local t = {} for i = 1, 200000 do t[i] = i end return t",
        "local t = {} for i = 1, 1000 do local r = {} for j = 1, 200 do r[j] = 's' .. j end t[i] = r end return t",
        "return redis.call('LRANGE', KEYS[1], 0, -1)",
        "local l = redis.call('LRANGE', KEYS[1], 0, -1) return {#l, l[1], l[200000]}",
    ]
    got = {}
    for port in (redis_door, redis_reference):
        c = Conn(port)
        c.call("AUTH", *args_auth())
        c.call("DEL", key)
        for start in range(0, 200000, 50000):
            c.call("RPUSH", key, *range(start, start + 50000))
        got[port] = [c.call("EVAL", s, "1", key) for s in scripts]
        assert c.call("PING") == "PONG"
        c.call("DEL", key)
        c.close()
    for i, s in enumerate(scripts):
        assert got[redis_door][i] == got[redis_reference][i], s
    assert len(got[redis_door][0]) == 200000
    assert got[redis_door][3] == [200000, b"0", b"199999"]


def test_math_random_is_one_sequence_as_in_redis(topology):
    """Unseeded, math.random draws from one sequence per process from Redis's start value, as
    redis-server 7.0 does: neither an EVAL nor SCRIPT FLUSH reseeds it (a fresh door and a
    fresh redis-server give the same numbers), and a script's math.randomseed goes on for the
    scripts after it."""
    draw = ev("return {tostring(math.random()), math.random(1000000)}")
    requests = [draw, draw, cmd("SCRIPT", "FLUSH"), draw, draw,
                ev("math.randomseed(42) return math.random(1000)"), draw]
    with start_door(topology) as door, start_reference() as reference:
        door_replies = replies(door, [AUTH, *requests], pipeline=False)
        reference_replies = replies(reference, [AUTH, *requests], pipeline=False)
    assert door_replies[1:] == reference_replies[1:]
    assert door_replies[1] != door_replies[2]


def test_scripts_inside_multi(redis_door, redis_reference):
    """EVAL, EVALSHA and SCRIPT queued in MULTI run in EXEC's transaction, in their place, as
    redis-server runs them: they see the writes queued before them, their errors (NOSCRIPT,
    a runtime error, a script's error reply) answer in place, and the other commands run."""
    k = P + "multi"
    body = "redis.call('INCR', KEYS[1]) return redis.call('GET', KEYS[1])"
    sha = "%040x" % 0
    check(redis_door, redis_reference, [
        SCRIPT_FLUSH, cmd("DEL", k),
        *[ev("return redis.error_reply(ARGV[1])", [], [e])
          for e in ("mine", "-mine", "MY code", "-MY code\r\n", "two words\r\n", "", "-", "- x", "a\r\nb c")],
        cmd("MULTI"), cmd("SET", k, "10"), ev(body, [k]), cmd("SCRIPT", "LOAD", body),
        cmd("EVALSHA", "c0b7ba3ea0ba5b4ba1fe82c3fc4b4d6eeac6f1ec", "1", k), cmd("EVALSHA", sha, "0"),
        ev("return redis.call('NOSUCH')"), ev("return redis.error_reply('mine')"),
        ev("redis.call('SET', KEYS[1], 'kept') error('boom')", [k]), cmd("GET", k),
        cmd("EVAL_RO", "return redis.call('SET', KEYS[1], 'x')", "1", k), ev("return +"),
        cmd("EVAL", "return 1", "-1"), cmd("SCRIPT", "EXISTS", sha), cmd("SELECT", "2"),
        ev("redis.call('SELECT', 1) return 'selected'"), cmd("GET", k), cmd("SELECT", "0"),
        ev("redis.setresp(3) return redis.call('HGETALL', KEYS[1])", [k + "h"]),
        cmd("EXEC"), cmd("GET", k),
        cmd("MULTI"), cmd("EVAL", "return 1"), cmd("EXEC"),
        cmd("WATCH", k), cmd("SET", k, "changed"), cmd("MULTI"), ev(body, [k]), cmd("EXEC"), cmd("GET", k),
        cmd("DEL", k, k + "h"),
    ])


def test_publish_inside_multi_goes_out_at_exec(redis_door, redis_reference):
    """PUBLISH queued in MULTI, directly or from a script, answers the subscribers it reaches
    and is delivered by EXEC, in order, as redis-server delivers it."""
    ch = P + "multi-pub"
    for port in (redis_door, redis_reference):
        s = subscriber(port, ch)
        c = Conn(port)
        c.call("AUTH", *args_auth())
        c.send(cmd("MULTI") + cmd("PUBLISH", ch, "one")
               + ev("return redis.call('PUBLISH', KEYS[1], 'two')", [ch]) + cmd("PUBLISH", ch, "three")
               + cmd("EXEC"))
        assert [read_reply(c.f) for _ in range(5)] == ["OK", "QUEUED", "QUEUED", "QUEUED", [1, 1, 1]], port
        for m in (b"one", b"two", b"three"):
            assert read_reply(s.f) == [b"message", ch.encode(), m]
        s.close()
        c.close()


def test_a_script_killed_inside_exec_rolls_the_transaction_back(redis_door):
    """A script stopped inside EXEC takes the whole transaction with it: EXEC answers the kill's
    error, no write of the transaction stays and nothing it published goes out; the
    connection goes on."""
    k = P + "multi-killed"
    ch = P + "multi-killed-pub"
    s = subscriber(redis_door, ch)
    busy = Conn(redis_door)
    busy.call("AUTH", *args_auth())
    other = Conn(redis_door)
    other.call("AUTH", *args_auth())
    other.call("DEL", k, k + "2")
    busy.send(cmd("MULTI") + cmd("SET", k + "2", "before") + cmd("PUBLISH", ch, "never")
              + ev("redis.call('SET', KEYS[1], 'w') while true do end", [k]))
    assert [read_reply(busy.f) for _ in range(4)] == ["OK", "QUEUED", "QUEUED", "QUEUED"]
    busy.send(cmd("EXEC"))
    poll("the script runs", lambda: other.call("SCRIPT", "KILL") == "OK")
    assert read_reply(busy.f).startswith("ERR Script killed by user with SCRIPT KILL...")
    assert other.call("EXISTS", k, k + "2") == 0
    assert busy.call("PUBLISH", ch, "after") == 1
    assert read_reply(s.f) == [b"message", ch.encode(), b"after"]
    for c in (s, busy, other):
        c.close()


@pytest.mark.parametrize("queued", [False, True], ids=["eval", "exec"])
def test_a_client_that_half_closes_gets_its_script_s_reply(redis_door, redis_reference, queued):
    """A client that sends a script and ends its input (shutdown of its sending side, as
    `nc -N` does) still waits for the reply: the script runs to its end and its writes
    commit, as redis-server does."""
    key = P + "half-closed-" + str(queued)
    body = ev("redis.call('SET', KEYS[1], 'kept') return redis.call('GET', KEYS[1])", [key])
    request = cmd("MULTI") + body + cmd("EXEC") if queued else body
    for port in (redis_door, redis_reference):
        other = Conn(port)
        other.call("AUTH", *args_auth())
        other.call("DEL", key)
        c = Conn(port)
        c.send(cmd("AUTH", *args_auth()) + request)
        c.sock.shutdown(socket.SHUT_WR)
        got = [read_reply(c.f) for _ in range(4 if queued else 2)]
        assert got[-1] == ([b"kept"] if queued else b"kept"), (port, got)
        assert other.call("GET", key) == b"kept", port
        c.close()
        other.close()


def test_redis_version_in_scripts(redis_door, redis_reference):
    """`redis.REDIS_VERSION` and `redis.REDIS_VERSION_NUM` as Redis 7.0 sets them, for a
    script and read-only."""
    check(redis_door, redis_reference, [
        ev("return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM, type(redis.REDIS_VERSION_NUM)}"),
        ev("redis.REDIS_VERSION = 'x' return 1"),
    ], hellos=(None,))


def test_cjson_settings_hold_for_every_client_until_script_flush(redis_door, redis_reference):
    """cjson's settings belong to the scripts, as in Redis's one Lua state: a setting one
    client's script makes holds for every client's later scripts (whichever Lua state of
    manifold's runs them, on a worker or a script thread) until SCRIPT FLUSH."""
    seen = {}
    for name, port in (("door", redis_door), ("redis-server", redis_reference)):
        a, b = Conn(port), Conn(port)
        for c in (a, b):
            assert c.call("AUTH", *args_auth()) == "OK"
        assert a.call("SCRIPT", "FLUSH") == "OK"
        got = [a.call("EVAL", "cjson.encode_number_precision(3) return 1", "0")]
        # Plain, inside pcall (a script thread's on the door) and after an error (the same).
        for script in ("return cjson.encode(1/3)",
                       "local ok, v = pcall(cjson.encode, 2/3) return v",
                       "return {cjson.encode(1/7), redis.pcall('INCR', 'k', 'x')['err']}"):
            got += [b.call("EVAL", script, "0") for _ in range(5)]
        assert a.call("SCRIPT", "FLUSH") == "OK"
        got.append(b.call("EVAL", "return cjson.encode(1/3)", "0"))
        seen[name] = got
        a.close()
        b.close()
    assert seen["door"] == seen["redis-server"], seen
    assert seen["door"][1] == b"0.333" and seen["door"][-1] == b"0.33333333333333", seen
