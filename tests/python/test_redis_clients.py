"""The Redis door with real clients nobody here wrote, and its durability, against real
MariaDB topologies.

- redis-cli: `--pipe` mass insertion, `-3` (RESP3) with `--user/--pass`, `--scan --pattern`,
  `-r` repeat, `--csv`; each compared with the same against Debian's redis-server 7.0.
- redis-py in RESP2 and RESP3 (`HELLO 3 AUTH`): every family's reply types, pipelines with
  and without MULTI/EXEC, `WATCH` retry loops from several threads on one key (no lost
  update), Pub/Sub, `scan_iter`/`hscan_iter`/`sscan_iter`/`zscan_iter`; compared with
  redis-server.
- go-redis v9 (`tests/go-redis`, built from the Go module proxy): RESP3 with user and
  password, the families, pipelines, `TxPipelined`, `Watch`, Pub/Sub; its output against the
  door and against redis-server must be equal line for line.
- Durability: writes acknowledged before manifold is SIGKILLed are in the tables (checked
  in SQL on the primary); SIGKILL of the MariaDB primary mid-pipeline gives errors, never a
  false OK: every acknowledged write is there once the primary is back (a topology of its
  own, restarted by this file).
- Several clients at once on keys that do not exist yet: one `SET NX` wins, no `INCR`,
  `HINCRBY`, `RPUSH`, `SADD` or `APPEND` is lost.
- redis-benchmark as a client: its whole `-t` list runs without an error, and what it wrote
  reads back as on redis-server.

Intended differences from redis-server:
- scripting is not served: `EVAL`/`--eval` get `ERR unknown command 'EVAL', ...` (redis-server
  runs the script);
- hash and set iteration order (`HGETALL`, `SMEMBERS`, `SCAN`...) is unspecified: outputs are
  compared sorted.

Keys: `clients:` in database 0, redis-benchmark's own keys in database 12 (flushed before
and after, on both servers).
"""

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pymysql
import pytest

from conftest import PASSWORD, ROOT, USER, Manifold, free_port, start_testkit, wait_port
from redisdiff import Conn, Err, cmd, need, read_reply, redis_py

SCHEMA = "manifold_redis"
P = "clients:"


# --- helpers ---------------------------------------------------------------------------

def cli(port, *args, proto3=False, stdin=None, user=USER, password=PASSWORD, timeout=60):
    """redis-cli's stdout then stderr, and its exit code, for `args` against `port`."""
    argv = [need("redis-cli"), "-p", str(port), "--user", user, "--pass", password, "--no-auth-warning"]
    if proto3:
        argv.append("-3")
    out = subprocess.run(argv + [str(a) for a in args], input=stdin, capture_output=True, timeout=timeout)
    return (out.stdout + out.stderr).decode(errors="replace"), out.returncode


def both(servers, fn):
    """`fn(port)` on the door and on redis-server."""
    door, reference = servers
    return fn(door), fn(reference)


def client(port, protocol=2, **kw):
    redis = redis_py()
    return redis.Redis(port=port, username=USER, password=PASSWORD, protocol=protocol,
                       socket_timeout=20, **kw)


def clean(servers, *patterns):
    """Deletes the keys matching `patterns` on both servers."""
    for port in servers:
        r = client(port)
        for pattern in patterns:
            keys = list(r.scan_iter(match=pattern, count=500))
            if keys:
                r.delete(*keys)
        r.close()


@pytest.fixture
def servers(redis_door, redis_reference):
    return redis_door, redis_reference


# --- redis-cli --------------------------------------------------------------------------

def mass_insertion(n):
    """`n` each of SET, HSET and RPUSH in RESP, as `redis-cli --pipe` wants them."""
    out = []
    for i in range(n):
        out.append(cmd("SET", f"{P}pipe:s:{i}", f"v{i}"))
        out.append(cmd("HSET", f"{P}pipe:h", f"f{i}", i))
        out.append(cmd("RPUSH", f"{P}pipe:l", f"e{i}"))
    return b"".join(out)


def test_redis_cli_pipe_mass_insertion(servers):
    clean(servers, f"{P}pipe:*")
    n = 1500
    payload = mass_insertion(n)
    outs = both(servers, lambda port: cli(port, "--pipe", stdin=payload))
    for out, code in outs:
        assert code == 0, out
        assert f"errors: 0, replies: {3 * n}" in out, out
    assert outs[0] == outs[1]
    door = client(servers[0])
    values = door.mget([f"{P}pipe:s:{i}" for i in range(n)])
    assert values == [f"v{i}".encode() for i in range(n)]
    assert door.hlen(f"{P}pipe:h") == n
    assert door.hgetall(f"{P}pipe:h") == {f"f{i}".encode(): str(i).encode() for i in range(n)}
    assert door.lrange(f"{P}pipe:l", 0, -1) == [f"e{i}".encode() for i in range(n)]
    door.close()

    # Errors are counted as redis-server counts them, and the rest still applies.
    bad = cmd("INCR", f"{P}pipe:s:0") + cmd("SET", f"{P}pipe:x", "1") + cmd("LPUSH", f"{P}pipe:h", "x") \
        + cmd("NOSUCH") + cmd("GET", f"{P}pipe:x")
    outs = both(servers, lambda port: cli(port, "--pipe", stdin=bad))
    assert outs[0] == outs[1]
    assert "errors: 3, replies: 5" in outs[0][0], outs[0]
    clean(servers, f"{P}pipe:*")


def test_redis_cli_pipe_rows_in_sql(redis_door, topology):
    """What `--pipe` wrote is in the tables, lengths exact."""
    key = f"{P}pipesql:h"
    payload = b"".join(cmd("HSET", key, f"f{i}", i) for i in range(700)) + cmd("HDEL", key, "f0", "f1")
    out, code = cli(redis_door, "--pipe", stdin=payload)
    assert code == 0 and "errors: 0, replies: 701" in out, out
    with topology.root() as c:
        cur = c.cursor()
        cur.execute(f"SELECT kid, type, len FROM {SCHEMA}.redis_keys WHERE db = 0 AND kh = UNHEX(SHA2(%s, 256))",
                    (key,))
        kid, kind, length = cur.fetchone()
        assert (kind, length) == (4, 698)
        cur.execute(f"SELECT COUNT(*) FROM {SCHEMA}.redis_hash WHERE kid = %s", (kid,))
        assert cur.fetchone()[0] == 698
    cli(redis_door, "DEL", key)


def sorted_lines(text):
    return sorted(text.splitlines())


CLI_CALLS = [
    # (arguments, compare sorted)
    (("DEL", f"{P}r3:s", f"{P}r3:h", f"{P}r3:l", f"{P}r3:set", f"{P}r3:z", f"{P}r3:n"), False),
    (("SET", f"{P}r3:s", "hello world"), False),
    (("GET", f"{P}r3:s"), False),
    (("GET", f"{P}r3:missing"), False),
    (("SET", f"{P}r3:s", "x", "NX"), False),
    (("SET", f"{P}r3:s", "hello", "GET"), False),
    (("INCR", f"{P}r3:n"), False),
    (("INCRBYFLOAT", f"{P}r3:n", "1.25"), False),
    (("INCR", f"{P}r3:n"), False),
    (("MGET", f"{P}r3:s", f"{P}r3:missing", f"{P}r3:n"), False),
    (("HSET", f"{P}r3:h", "a", "1", "b", "2", "c", "3"), False),
    (("HGETALL", f"{P}r3:h"), True),
    (("HGET", f"{P}r3:h", "b"), False),
    (("HMGET", f"{P}r3:h", "a", "nope"), False),
    (("HINCRBYFLOAT", f"{P}r3:h", "a", "0.5"), False),
    (("HRANDFIELD", f"{P}r3:h", "-2", "WITHVALUES"), None),  # random: counted only
    (("LPUSH", f"{P}r3:l", "a", "b", "c"), False),
    (("LRANGE", f"{P}r3:l", "0", "-1"), False),
    (("LPOS", f"{P}r3:l", "a"), False),
    (("LPOP", f"{P}r3:l", "2"), False),
    (("SADD", f"{P}r3:set", "x", "y", "z"), False),
    (("SMEMBERS", f"{P}r3:set"), True),
    (("SISMEMBER", f"{P}r3:set", "y"), False),
    (("SMISMEMBER", f"{P}r3:set", "y", "q"), False),
    (("ZADD", f"{P}r3:z", "1.5", "a", "-2", "b", "inf", "c"), False),
    (("ZRANGE", f"{P}r3:z", "0", "-1", "WITHSCORES"), False),
    (("ZREVRANGEBYSCORE", f"{P}r3:z", "+inf", "-inf", "WITHSCORES", "LIMIT", "0", "2"), False),
    (("ZSCORE", f"{P}r3:z", "a"), False),
    (("ZSCORE", f"{P}r3:z", "c"), False),
    (("ZMSCORE", f"{P}r3:z", "a", "nope"), False),
    (("ZPOPMIN", f"{P}r3:z"), False),
    (("ZRANK", f"{P}r3:z", "c"), False),
    (("TYPE", f"{P}r3:z"), False),
    (("EXPIRE", f"{P}r3:h", "100"), False),
    (("TTL", f"{P}r3:h"), False),
    (("EXISTS", f"{P}r3:s", f"{P}r3:h", f"{P}r3:missing"), False),
    (("GET", f"{P}r3:h"), False),
    (("INCR", f"{P}r3:s"), False),
    (("HSET", f"{P}r3:h"), False),
    (("ZADD", f"{P}r3:z", "x", "a"), False),
    (("DEL", f"{P}r3:s", f"{P}r3:h", f"{P}r3:l", f"{P}r3:set", f"{P}r3:z", f"{P}r3:n"), False),
]


@pytest.mark.parametrize("proto3", [True, False], ids=["resp3", "resp2"])
def test_redis_cli_commands(servers, proto3):
    """`redis-cli [-3] --user --pass CMD...`: the same output as redis-server's."""
    for args, sort in CLI_CALLS:
        (door, dcode), (ref, rcode) = both(servers, lambda port: cli(port, *args, proto3=proto3))
        assert dcode == rcode, (args, door, ref)
        if sort is None:
            assert len(door.splitlines()) == len(ref.splitlines()), (args, door, ref)
        elif sort:
            assert sorted_lines(door) == sorted_lines(ref), (args, door, ref)
        else:
            assert door == ref, (args, door, ref)
    # A wrong password: redis-cli says so the same way.
    outs = both(servers, lambda port: cli(port, "PING", proto3=proto3, password="wrong"))
    assert outs[0] == outs[1]
    assert "WRONGPASS" in outs[0][0]


def test_redis_cli_scan_pattern(servers):
    clean(servers, f"{P}scan:*")
    keys = [f"{P}scan:{i}" for i in range(60)]
    for port in servers:
        r = client(port)
        r.mset({k: "v" for k in keys})
        r.set(f"{P}scanother", "x")
        r.hset(f"{P}scan:h", "f", "v")
        r.close()
    want = sorted(keys + [f"{P}scan:h"])
    outs = both(servers, lambda port: cli(port, "--scan", "--pattern", f"{P}scan:*"))
    for out, code in outs:
        assert code == 0, out
        assert sorted(out.split()) == want
    outs = both(servers, lambda port: cli(port, "--scan", "--pattern", f"{P}scan:1?"))
    assert sorted(outs[0][0].split()) == sorted(outs[1][0].split()) == [f"{P}scan:1{i}" for i in range(10)]
    clean(servers, f"{P}scan*")


def test_redis_cli_eval_runs_scripts_as_redis_does(servers, tmp_path):
    script = tmp_path / "script.lua"
    script.write_text("redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])")
    outs = both(servers, lambda port: cli(port, "--eval", str(script), f"{P}eval", ",", "from-lua"))
    assert outs[0] == outs[1] == ("from-lua\n", 0), outs
    outs = both(servers, lambda port: cli(port, "EVAL", "return redis.call('NOPE')", "0"))
    assert outs[0] == outs[1], outs
    # A function through redis-cli: loaded, called, deleted, as on redis-server.
    lib = "#!lua name=clilib\nredis.register_function('cli_fn', function(k, a) return a[1] end)"
    for args in (("FUNCTION", "LOAD", "REPLACE", lib), ("FCALL", "cli_fn", "0", "hi"),
                 ("FUNCTION", "DELETE", "clilib"), ("FCALL", "cli_fn", "0", "hi")):
        outs = both(servers, lambda port: cli(port, *args))
        assert outs[0] == outs[1], (args, outs)
    clean(servers, f"{P}eval*")


def test_redis_cli_repeat_and_csv(servers):
    clean(servers, f"{P}rep*", f"{P}csv*")
    outs = both(servers, lambda port: cli(port, "-r", "5", "INCR", f"{P}rep"))
    assert outs[0] == outs[1] == ("1\n2\n3\n4\n5\n", 0)
    outs = both(servers, lambda port: cli(port, "-r", "3", "-i", "0.01", "RPUSH", f"{P}rep:l", "x"))
    assert outs[0] == outs[1] == ("1\n2\n3\n", 0)
    for port in servers:
        r = client(port)
        r.rpush(f"{P}csv:l", "a", "b,c", 'd"e', "")
        r.hset(f"{P}csv:h", mapping={"f1": "1", "f2": "two"})
        r.sadd(f"{P}csv:set", "m1", "m2")
        r.zadd(f"{P}csv:z", {"a": 1.5, "b": 2})
        r.set(f"{P}csv:s", "plain")
        r.close()
    calls = [
        (("LRANGE", f"{P}csv:l", "0", "-1"), False), (("GET", f"{P}csv:s"), False),
        (("GET", f"{P}csv:missing"), False), (("INCR", f"{P}csv:n"), False),
        (("ZRANGE", f"{P}csv:z", "0", "-1", "WITHSCORES"), False), (("ZSCORE", f"{P}csv:z", "a"), False),
        (("GET", f"{P}csv:l"), False), (("HGETALL", f"{P}csv:h"), "pairs"), (("SMEMBERS", f"{P}csv:set"), "fields"),
        (("EXISTS", f"{P}csv:l", f"{P}csv:nope"), False),
    ]
    for args, how in calls:
        for proto3 in (False, True):
            (door, dc), (ref, rc) = both(servers, lambda port: cli(port, "--csv", *args, proto3=proto3))
            assert dc == rc, (args, door, ref)
            if how == "pairs":
                def pairs(t):
                    f = t.strip().split(",")
                    return sorted(zip(f[::2], f[1::2]))
                door, ref = pairs(door), pairs(ref)
            elif how == "fields":
                door, ref = sorted(door.strip().split(",")), sorted(ref.strip().split(","))
            assert door == ref, (args, proto3, door, ref)
    clean(servers, f"{P}rep*", f"{P}csv*")


# --- concurrent clients on new keys ---------------------------------------------------

def test_concurrent_creation_of_one_key(redis_door):
    """Several clients at once on a key that does not exist yet: one `SET NX` wins, no
    `INCR`/`HINCRBY`/`RPUSH`/`SADD`/`APPEND` is lost (each creator's read of the absent key
    must not let another's creation be overwritten)."""
    clients, each, rounds = 6, 4, 6
    conns = [Conn(redis_door) for _ in range(clients)]
    for c in conns:
        assert c.call("AUTH", USER, PASSWORD) == "OK"
    try:
        for rnd in range(rounds):
            k = f"{P}race{rnd}:"
            conns[0].call("DEL", *[k + x for x in ("lock", "n", "h", "l", "s", "a")])
            barrier = threading.Barrier(clients)
            results = [None] * clients

            def work(i):
                c = conns[i]
                barrier.wait(timeout=30)
                # Pipelined: each client's batch creates the keys in one transaction.
                reqs = [cmd("SET", k + "lock", f"owner{i}", "NX")]
                for j in range(each):
                    reqs += [cmd("INCR", k + "n"), cmd("HINCRBY", k + "h", "f", 1), cmd("RPUSH", k + "l", f"{i}.{j}"),
                             cmd("SADD", k + "s", f"{i}.{j}"), cmd("APPEND", k + "a", "x")]
                c.send(b"".join(reqs))
                results[i] = [read_reply(c.f) for _ in reqs]

            ts = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(timeout=60)
            errors = [r for rs in results for r in rs if isinstance(r, Err)]
            assert not errors, errors[:3]
            winners = [i for i, rs in enumerate(results) if rs[0] == "OK"]
            assert len(winners) == 1, f"round {rnd}: SET NX answered OK to clients {winners}"
            c = conns[0]
            assert c.call("GET", k + "lock") == f"owner{winners[0]}".encode()
            total = clients * each
            assert c.call("GET", k + "n") == str(total).encode(), f"round {rnd}: INCR lost updates"
            assert c.call("HGET", k + "h", "f") == str(total).encode(), f"round {rnd}: HINCRBY lost updates"
            assert c.call("LLEN", k + "l") == total
            assert c.call("SCARD", k + "s") == total
            assert c.call("STRLEN", k + "a") == total
            # Every client saw its own INCR replies strictly increasing.
            for rs in results:
                incrs = rs[1::5]
                assert incrs == sorted(incrs) and len(set(incrs)) == each, incrs
            c.call("DEL", *[k + x for x in ("lock", "n", "h", "l", "s", "a")])
    finally:
        for c in conns:
            c.close()


# --- redis-py ---------------------------------------------------------------------------

def run_calls(r, calls):
    """Each call's result, or its error's type and text."""
    redis = redis_py()
    out = []
    for name, fn in calls:
        try:
            v = fn(r)
        except redis.ResponseError as e:
            v = ("error", type(e).__name__, str(e))
        out.append((name, v))
    return out


def family_calls(p):
    def k(s):
        return p + s
    return [
        ("del", lambda r: r.delete(*[k(x) for x in "s n f h l l2 set set2 z".split()])),
        ("set", lambda r: r.set(k("s"), "hello")),
        ("set get", lambda r: r.set(k("s"), "hi", get=True)),
        ("get", lambda r: r.get(k("s"))),
        ("get missing", lambda r: r.get(k("missing"))),
        ("set nx", lambda r: r.set(k("s"), "x", nx=True)),
        ("set ex", lambda r: r.set(k("f"), "1.5", ex=100)),
        ("ttl", lambda r: 95 <= r.ttl(k("f")) <= 100),
        ("pttl", lambda r: 95000 <= r.pttl(k("f")) <= 100000),
        ("incrbyfloat", lambda r: r.incrbyfloat(k("f"), 2)),
        ("incr", lambda r: r.incr(k("n"))),
        ("incrby", lambda r: r.incrby(k("n"), -5)),
        ("decr", lambda r: r.decr(k("n"))),
        ("incr overflow", lambda r: (r.set(k("n"), 2**63 - 1), r.incr(k("n")))),
        ("incr not integer", lambda r: r.incr(k("s"))),
        ("append", lambda r: r.append(k("s"), " there")),
        ("strlen", lambda r: r.strlen(k("s"))),
        ("getrange", lambda r: r.getrange(k("s"), 1, -2)),
        ("mset", lambda r: r.mset({k("m1"): "1", k("m2"): "2"})),
        ("msetnx", lambda r: r.msetnx({k("m1"): "1", k("m3"): "3"})),
        ("mget", lambda r: r.mget(k("m1"), k("m2"), k("m3"), k("missing"))),
        ("getdel", lambda r: r.getdel(k("m2"))),
        ("getex", lambda r: r.getex(k("m1"), persist=True)),
        ("hset", lambda r: r.hset(k("h"), mapping={"a": "1", "b": "2", "c": "3.5"})),
        ("hgetall", lambda r: r.hgetall(k("h"))),
        ("hget", lambda r: r.hget(k("h"), "b")),
        ("hmget", lambda r: r.hmget(k("h"), ["a", "nope", "c"])),
        ("hincrby", lambda r: r.hincrby(k("h"), "a", 10)),
        ("hincrbyfloat", lambda r: r.hincrbyfloat(k("h"), "c", 0.25)),
        ("hincrby not integer", lambda r: r.hincrby(k("h"), "c", 1)),
        ("hkeys", lambda r: sorted(r.hkeys(k("h")))),
        ("hvals", lambda r: sorted(r.hvals(k("h")))),
        ("hlen", lambda r: r.hlen(k("h"))),
        ("hexists", lambda r: (r.hexists(k("h"), "a"), r.hexists(k("h"), "zz"))),
        ("hstrlen", lambda r: r.hstrlen(k("h"), "c")),
        ("hsetnx", lambda r: (r.hsetnx(k("h"), "a", "9"), r.hsetnx(k("h"), "d", "9"))),
        ("hdel", lambda r: r.hdel(k("h"), "d", "nope")),
        ("hrandfield", lambda r: sorted(r.hrandfield(k("h"), 10))),
        ("hrandfield withvalues", lambda r: len(r.hrandfield(k("h"), -5, withvalues=True))),
        ("lpush", lambda r: r.lpush(k("l"), "a", "b", "c")),
        ("rpush", lambda r: r.rpush(k("l"), "z", "a")),
        ("lrange", lambda r: r.lrange(k("l"), 0, -1)),
        ("llen", lambda r: r.llen(k("l"))),
        ("lindex", lambda r: (r.lindex(k("l"), -1), r.lindex(k("l"), 99))),
        ("lpos", lambda r: (r.lpos(k("l"), "a"), r.lpos(k("l"), "a", count=0), r.lpos(k("l"), "q"))),
        ("linsert", lambda r: r.linsert(k("l"), "BEFORE", "z", "y")),
        ("lset", lambda r: r.lset(k("l"), 0, "C")),
        ("lset out of range", lambda r: r.lset(k("l"), 99, "C")),
        ("lrem", lambda r: r.lrem(k("l"), 0, "a")),
        ("lpop count", lambda r: r.lpop(k("l"), 2)),
        ("rpop", lambda r: r.rpop(k("l"))),
        ("lmove", lambda r: r.lmove(k("l"), k("l2"), "LEFT", "RIGHT")),
        ("ltrim", lambda r: r.ltrim(k("l2"), 0, 0)),
        ("lrange after", lambda r: (r.lrange(k("l"), 0, -1), r.lrange(k("l2"), 0, -1))),
        ("sadd", lambda r: r.sadd(k("set"), "x", "y", "z", "x")),
        ("smembers", lambda r: r.smembers(k("set"))),
        ("sismember", lambda r: (r.sismember(k("set"), "x"), r.sismember(k("set"), "q"))),
        ("smismember", lambda r: r.smismember(k("set"), ["x", "q"])),
        ("scard", lambda r: r.scard(k("set"))),
        ("srem", lambda r: r.srem(k("set"), "z", "q")),
        ("sadd2", lambda r: r.sadd(k("set2"), "y", "w")),
        ("sinter", lambda r: r.sinter(k("set"), k("set2"))),
        ("sunion", lambda r: r.sunion(k("set"), k("set2"))),
        ("sdiff", lambda r: r.sdiff(k("set"), k("set2"))),
        ("sintercard", lambda r: r.sintercard(2, [k("set"), k("set2")])),
        ("srandmember", lambda r: sorted(r.srandmember(k("set"), 5))),
        ("spop", lambda r: len(r.spop(k("set2"), 5))),
        ("zadd", lambda r: r.zadd(k("z"), {"a": 1.5, "b": -2, "c": 10, "d": float("inf")})),
        ("zadd incr", lambda r: r.zadd(k("z"), {"a": 1}, incr=True)),
        ("zrange withscores", lambda r: r.zrange(k("z"), 0, -1, withscores=True)),
        ("zrange desc withscores", lambda r: r.zrange(k("z"), 0, 1, desc=True, withscores=True)),
        ("zrangebyscore", lambda r: r.zrangebyscore(k("z"), "-inf", 5, withscores=True)),
        ("zrevrangebyscore", lambda r: r.zrevrangebyscore(k("z"), "+inf", "(1", withscores=True)),
        ("zrangebylex", lambda r: r.zrangebylex(k("z"), "-", "+")),
        ("zscore", lambda r: (r.zscore(k("z"), "a"), r.zscore(k("z"), "d"), r.zscore(k("z"), "q"))),
        ("zmscore", lambda r: r.zmscore(k("z"), ["a", "q"])),
        ("zincrby", lambda r: r.zincrby(k("z"), 0.25, "b")),
        ("zrank", lambda r: (r.zrank(k("z"), "c"), r.zrevrank(k("z"), "c"), r.zrank(k("z"), "q"))),
        ("zcard", lambda r: r.zcard(k("z"))),
        ("zcount", lambda r: r.zcount(k("z"), 0, "+inf")),
        ("zpopmin", lambda r: r.zpopmin(k("z"))),
        ("zpopmax", lambda r: r.zpopmax(k("z"), 2)),
        ("zadd nan", lambda r: r.execute_command("ZADD", k("z"), "nan", "x")),
        ("type", lambda r: [r.type(k(x)) for x in "s h l set z missing".split()]),
        ("exists", lambda r: r.exists(k("s"), k("h"), k("missing"))),
        ("expire persist", lambda r: (r.expire(k("h"), 50), r.persist(k("h")), r.ttl(k("h")))),
        ("rename", lambda r: r.rename(k("l2"), k("l3"))),
        ("copy", lambda r: r.copy(k("l3"), k("l4"))),
        ("keys", lambda r: sorted(r.keys(p + "l*"))),
        ("wrongtype get", lambda r: r.get(k("h"))),
        ("wrongtype hget", lambda r: r.hget(k("s"), "a")),
        ("wrongtype lpush", lambda r: r.lpush(k("set"), "a")),
        ("wrongtype sadd", lambda r: r.sadd(k("z"), "a")),
        ("wrongtype zadd", lambda r: r.zadd(k("l"), {"a": 1})),
        ("del all", lambda r: r.delete(*[k(x) for x in "s n f h l l2 l3 l4 set set2 z m1 m2 m3".split()])),
    ]


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_reply_types(servers, protocol):
    """Every family's replies as redis-py converts them (floats, bools, dicts, sets...)."""
    calls = family_calls(f"{P}py{protocol}:")
    got = [run_calls(client(port, protocol), calls) for port in servers]
    for (name, door), (_, ref) in zip(*got):
        assert door == ref, f"{name}: manifold {door!r}, redis-server {ref!r}"


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("transaction", [True, False], ids=["multi", "pipeline"])
def test_redis_py_pipelines(servers, protocol, transaction):
    p = f"{P}pl{protocol}{int(transaction)}:"

    def run(port):
        r = client(port, protocol)
        r.delete(p + "a", p + "h", p + "l", p + "z")
        pipe = r.pipeline(transaction=transaction)
        pipe.set(p + "a", "1").incr(p + "a").incrbyfloat(p + "a", 0.5).get(p + "a")
        pipe.hset(p + "h", mapping={"x": "1", "y": "2"}).hgetall(p + "h").hincrby(p + "h", "x", 2)
        pipe.rpush(p + "l", "a", "b").lrange(p + "l", 0, -1).lpush(p + "h", "bad")
        pipe.zadd(p + "z", {"m": 2.5}).zrange(p + "z", 0, -1, withscores=True).incr(p + "l")
        pipe.exists(p + "a", p + "nope").type(p + "h").delete(p + "a", p + "h", p + "l", p + "z")
        res = pipe.execute(raise_on_error=False)
        r.close()
        return [("error", str(x)) if isinstance(x, Exception) else x for x in res]

    door, ref = both(servers, run)
    assert door == ref
    assert sum(1 for x in door if isinstance(x, tuple) and x and x[0] == "error") == 2


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_watch_contention(redis_door, protocol):
    """`r.transaction(fn, key)`: WATCH, read, MULTI, write, EXEC, retried on WatchError,
    from several threads on one key: no increment is lost."""
    key = f"{P}watch{protocol}"
    threads, each = 4, 15
    r = client(redis_door, protocol)
    r.delete(key, key + ":log")
    retries = [0]
    lock = threading.Lock()
    errors = []

    def worker():
        c = client(redis_door, protocol)

        def incr(pipe):
            v = int(pipe.get(key) or 0)
            pipe.multi()
            pipe.set(key, v + 1)
            pipe.rpush(key + ":log", v + 1)

        try:
            for _ in range(each):
                calls = [0]

                def counted(pipe):
                    calls[0] += 1
                    incr(pipe)

                c.transaction(counted, key)
                with lock:
                    retries[0] += calls[0] - 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            c.close()

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=90)
    assert not errors, [str(e) for e in errors]
    assert int(r.get(key)) == threads * each
    # Every EXEC that committed saw the value the previous one left: 1, 2, 3... in order.
    assert [int(x) for x in r.lrange(key + ":log", 0, -1)] == list(range(1, threads * each + 1))
    print(f"WATCH retries under contention: {retries[0]}")
    r.delete(key, key + ":log")
    r.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_pubsub(servers, protocol):
    ch = f"{P}ps{protocol}"

    def run(port):
        r = client(port, protocol)
        ps = r.pubsub()
        ps.subscribe(ch + ":a", ch + ":b")
        ps.psubscribe(ch + ":p*")
        seen = [ps.get_message(timeout=5) for _ in range(3)]
        n = [r.publish(ch + ":a", "one"), r.publish(ch + ":pq", "two"), r.publish(ch + ":none", "x"),
             r.pubsub_numsub(ch + ":a", ch + ":none"), r.pubsub_numpat()]
        seen += [ps.get_message(timeout=5) for _ in range(2)]
        ps.unsubscribe(ch + ":a")
        seen.append(ps.get_message(timeout=5))
        r.publish(ch + ":b", "three")
        seen.append(ps.get_message(timeout=5))
        ps.close()
        r.close()
        return n, seen

    door, ref = both(servers, run)
    assert door == ref


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_scan_iterators(servers, protocol):
    p = f"{P}it{protocol}:"
    clean(servers, p + "*")

    def run(port):
        r = client(port, protocol)
        r.mset({f"{p}k{i}": i for i in range(45)})
        r.hset(p + "h", mapping={f"f{i}": i for i in range(80)})
        r.sadd(p + "s", *[f"m{i}" for i in range(70)])
        r.zadd(p + "z", {f"z{i}": i / 4 for i in range(60)})
        out = (
            sorted(r.scan_iter(match=p + "k*", count=7)),
            sorted(r.scan_iter(match=p + "*", count=1000, _type="hash")),
            dict(r.hscan_iter(p + "h", count=9)),
            dict(r.hscan_iter(p + "h", match="f1*")),
            sorted(r.sscan_iter(p + "s", count=5)),
            sorted(r.zscan_iter(p + "z", match="z1*")),
        )
        r.close()
        return out

    door, ref = both(servers, run)
    assert door == ref
    assert len(door[0]) == 45 and len(door[2]) == 80 and len(door[4]) == 70
    clean(servers, p + "*")


# --- go-redis ---------------------------------------------------------------------------

def test_go_redis(servers, tmp_path):
    """tests/go-redis: go-redis v9 with Protocol 3 and user/password; the same output from
    the door as from redis-server."""
    exe = tmp_path / "go-redis-check"
    build = subprocess.run(["bash", str(ROOT / "tests" / "go-redis" / "run.sh"), "build", str(exe)],
                           capture_output=True, text=True, timeout=600)
    if build.returncode != 0:
        pytest.fail("building tests/go-redis (go-redis v9 from the Go module proxy) failed: "
                    f"exit {build.returncode}\n{build.stderr[-3000:]}")
    outs = []
    for port in servers:
        run = subprocess.run([str(exe), f"127.0.0.1:{port}", USER, PASSWORD, f"{P}go:"],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, f"port {port}: exit {run.returncode}\n{run.stdout}\n{run.stderr}"
        outs.append(run.stdout.splitlines())
    door, ref = outs
    assert len(door) > 60
    for d, r in zip(door, ref):
        assert d == r
    assert len(door) == len(ref)
    assert "watch increments: 40 of 40, errors []" in door
    # Scripts, streams with a group (a blocked reader woken by an XADD), HLL, geo and the
    # sorted-set algebra ran, not only answered errors alike.
    for line in ["script run: [5 string WRONGTYPE", "script exists: [true]", "xpending: 2 1-1 2-1 map[c1:2]",
                 "xreadgroup block: [{" + P + "go:x [{3-1", "pfcount: 403", "geodist: 166.2742",
                 "zunion result: [{2 a} {14 b} {20 c}]"]:
        assert any(d.startswith(line) for d in door), line


# --- redis-benchmark --------------------------------------------------------------------

BENCH_DB = 12


def test_redis_benchmark(servers):
    tests = "set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,lrange_100,mset"
    results = []
    for port in servers:
        r = client(port, db=BENCH_DB)
        r.flushdb()
        run = subprocess.run(
            [need("redis-benchmark"), "-p", str(port), "--user", USER, "-a", PASSWORD, "--dbnum", str(BENCH_DB),
             "-t", tests, "-n", "2000", "-c", "8", "-P", "4", "-q"],
            capture_output=True, text=True, timeout=120)
        out = run.stdout.replace("\r", "\n") + run.stderr
        assert run.returncode == 0, out
        assert "Error" not in out and "ERR" not in out, out
        done = [line.split(":")[0].strip() for line in out.splitlines() if "requests per second" in line]
        assert len(done) == 14, done  # the 13 tests and LRANGE's own LPUSH
        # What it wrote reads back.
        results.append((
            r.get("counter:__rand_int__"), r.get("key:__rand_int__"), r.llen("mylist"),
            r.lrange("mylist", 0, 2), r.hgetall("myhash"), r.zrange("myzset", 0, -1, withscores=True),
            r.scard("myset"), sorted(r.keys("*")),
        ))
        r.flushdb()
        r.close()
    door, ref = results
    assert door == ref
    assert door[0] == b"2000" and door[2] > 0


# --- durability -------------------------------------------------------------------------

def write_stream(n):
    """`n` writes, each with a value of its own: (request bytes, how to find it in SQL)."""
    out = []
    for i in range(n):
        v = f"v{i}"
        if i % 3 == 0:
            out.append((cmd("SET", f"{P}dur:s:{i}", v), ("string", f"{P}dur:s:{i}", v)))
        elif i % 3 == 1:
            out.append((cmd("HSET", f"{P}dur:h:{i % 7}", f"f{i}", v), ("hash", f"{P}dur:h:{i % 7}", v)))
        else:
            out.append((cmd("RPUSH", f"{P}dur:l:{i % 5}", v), ("list", f"{P}dur:l:{i % 5}", v)))
    return out


def stored_values(conn):
    """Every value of the `dur:` keys in the tables, by kind."""
    cur = conn.cursor()
    found = set()
    like = f"{P}dur:%"
    cur.execute(f"SELECT k, v FROM {SCHEMA}.redis_keys WHERE db = 0 AND type = 0 AND k LIKE %s", (like,))
    found |= {("string", k.decode(), v.decode()) for k, v in cur.fetchall()}
    cur.execute(f"SELECT k.k, h.v FROM {SCHEMA}.redis_keys k JOIN {SCHEMA}.redis_hash h ON h.kid = k.kid "
                "WHERE k.db = 0 AND k.k LIKE %s", (like,))
    found |= {("hash", k.decode(), v.decode()) for k, v in cur.fetchall()}
    cur.execute(f"SELECT k.k, l.v, k.len FROM {SCHEMA}.redis_keys k JOIN {SCHEMA}.redis_list l ON l.kid = k.kid "
                "WHERE k.db = 0 AND k.k LIKE %s ORDER BY k.k, l.idx", (like,))
    lists = {}
    for k, v, length in cur.fetchall():
        lists.setdefault(k.decode(), (length, []))[1].append(v.decode())
        found.add(("list", k.decode(), v.decode()))
    for k, (length, values) in lists.items():
        assert length == len(values), f"{k}: len {length}, {len(values)} rows"
        # RPUSH order is kept: values in index order are in write order.
        assert values == sorted(values, key=lambda s: int(s[1:])), (k, values)
    return found


def delete_dur_rows(conn):
    """Removes the `dur:` keys of an earlier run (nothing if the door never made its schema)."""
    cur = conn.cursor()
    if not cur.execute("SHOW DATABASES LIKE %s", (SCHEMA,)):
        return
    conn.select_db(SCHEMA)
    like = f"{P}dur:%"
    for table in ("redis_hash", "redis_list"):
        cur.execute(f"DELETE m FROM {table} m JOIN redis_keys k ON k.kid = m.kid WHERE k.k LIKE %s", (like,))
    cur.execute("DELETE FROM redis_keys WHERE k LIKE %s", (like,))


def pipelined_writer(port, stream, batch, window, on_reply):
    """Sends `stream`'s requests in batches of `batch` (at most `window` unanswered) on one
    connection and reads the replies in order; `on_reply(i, reply)` is called for each (an
    Err for an error); stops at the connection's end or once `on_reply` returns True (no
    more sending). Returns the replies read."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    f = sock.makefile("rb")
    sock.sendall(cmd("AUTH", USER, PASSWORD))
    assert read_reply(f) == "OK"
    state = {"sent": 0, "stop": False}
    cond = threading.Condition()
    got = []

    def send():
        try:
            while state["sent"] < len(stream):
                with cond:
                    while not state["stop"] and state["sent"] - len(got) >= window:
                        cond.wait(1)
                    if state["stop"]:
                        return
                    chunk = stream[state["sent"]:state["sent"] + batch]
                    state["sent"] += len(chunk)
                sock.sendall(b"".join(req for req, _ in chunk))
        except OSError:
            pass

    t = threading.Thread(target=send)
    t.start()
    try:
        while len(got) < len(stream):
            with cond:
                if state["stop"] and len(got) >= state["sent"]:
                    break
            try:
                reply = read_reply(f)
            except (OSError, AssertionError, ValueError) as e:
                # The connection ended (mid-reply or at a boundary): nothing more comes. A
                # malformed reply on a live connection is not taken for an end.
                try:
                    rest = f.read()
                except ConnectionError:
                    rest = b""
                assert rest == b"", f"{e!r}, then {rest[:200]!r}"
                break
            with cond:
                got.append(reply)
                cond.notify_all()
            if on_reply(len(got) - 1, reply):
                with cond:
                    state["stop"] = True
                    cond.notify_all()
    finally:
        with cond:
            state["stop"] = True
            cond.notify_all()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        t.join(timeout=30)
        f.close()
        sock.close()
    return got


def check_acknowledged(stream, replies, found):
    """Every acknowledged write is in `found`; what is there is a prefix of the stream (one
    connection's batches commit in order)."""
    acked = [i for i, rep in enumerate(replies) if not isinstance(rep, Err)]
    missing = [stream[i][1] for i in acked if stream[i][1] not in found]
    assert not missing, f"{len(missing)} acknowledged writes are not in the tables: {missing[:5]}"
    present = [(where in found) for _, where in stream]
    m = present.index(False) if False in present else len(present)
    assert not any(present[m:]), f"writes after #{m} are in the tables without #{m}"
    assert len(acked) <= m
    return acked, m


def test_durability_manifold_sigkill(topology):
    """Writes acknowledged before manifold is SIGKILLed mid-stream are all in the tables."""
    with topology.root() as c:
        delete_dur_rows(c)
    port = free_port()
    m = Manifold(topology, ["--redis-listen", f"127.0.0.1:{port}"], log_name="redis-clients-kill9")
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        stream = write_stream(3000)
        kill_at = 900

        def on_reply(i, reply):
            assert not isinstance(reply, Err) or i >= kill_at, (i, reply)
            if i == kill_at:
                m.proc.send_signal(signal.SIGKILL)
            return False

        replies = pipelined_writer(port, stream, batch=40, window=400, on_reply=on_reply)
        m.proc.wait(timeout=10)
        assert m.proc.returncode == -signal.SIGKILL
    finally:
        m.stop()
    assert kill_at < len(replies) < len(stream), len(replies)
    with topology.root() as c:
        acked, m_present = check_acknowledged(stream, replies, stored_values(c))
        print(f"acknowledged {len(acked)} of {len(stream)}; in the tables: the first {m_present}")
        delete_dur_rows(c)


def test_durability_primary_killed(tmp_path):
    """SIGKILL of the MariaDB primary mid-pipeline: errors, never a false OK; every OK'd
    write is in the tables once the primary is back, and the door serves again."""
    with start_testkit(0) as info:
        pid = int(info["pids"].split(",")[0])
        topo = SimpleNamespace(primary=info["primary"], cert=info["cert"], key=info["key"])
        primary_port = int(info["primary"].split(":")[1])
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        cwd = os.readlink(f"/proc/{pid}/cwd")
        pid_files = [p for p in Path(info["dir"]).glob("*/testkit.pid") if p.read_text().strip() == str(pid)]
        cfg = tmp_path / "short-failover.toml"
        cfg.write_text('[routing]\nfailover_timeout = "1s"\n')
        port = free_port()
        m = Manifold(topo, ["--redis-listen", f"127.0.0.1:{port}", "--config", str(cfg)],
                     log_name="redis-clients-primary-kill")
        restarted = None
        try:
            wait_port(port, m.proc, "manifold's Redis door")
            stream = write_stream(2400)
            kill_at = 700
            first_error = []

            def on_reply(i, reply):
                if isinstance(reply, Err):
                    assert i >= kill_at - 40, (i, reply)  # an error only once the kill is near
                    assert reply.startswith("ERR manifold: backend"), reply
                    if not first_error:
                        first_error.append(i)
                    return True  # stop sending; read what is in flight
                if i == kill_at:
                    os.kill(pid, signal.SIGKILL)
                return False

            replies = pipelined_writer(port, stream, batch=20, window=100, on_reply=on_reply)
            assert first_error, f"no error after the primary was killed ({len(replies)} replies)"
            errors = [i for i, rep in enumerate(replies) if isinstance(rep, Err)]
            # After the first error nothing more is acknowledged: the primary stays down.
            assert all(isinstance(rep, Err) for rep in replies[first_error[0]:]), replies[first_error[0]:]
            print(f"{len(replies)} replies, {len(errors)} errors from #{first_error[0]}")

            # The primary comes back on its port with its data.
            while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/cmdline").read_bytes():
                time.sleep(0.05)
            log = open(Path(info["dir"]) / "restart.log", "ab")
            restarted = subprocess.Popen([a.decode() for a in argv], cwd=cwd, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, process_group=0)
            for p in pid_files:  # the testkit's watchdog cleans up this one too
                p.write_text(f"{restarted.pid}\n")
            wait_port(primary_port, restarted, "the restarted MariaDB primary", timeout=60)
            root = pymysql.connect(host="127.0.0.1", port=primary_port, user="root",
                                   password=info["root_password"], autocommit=True)
            acked, m_present = check_acknowledged(stream, replies, stored_values(root))
            assert len(acked) >= kill_at - 40
            print(f"acknowledged {len(acked)} of {len(stream)}; in the tables: the first {m_present}")
            root.close()

            # The door serves again once its pool reconnects.
            i = acked[-1]
            kind, key, value = stream[i][1]
            r = client(port)
            deadline = time.time() + 30
            while True:
                try:
                    if kind == "string":
                        assert r.get(key) == value.encode()
                    elif kind == "hash":
                        assert value.encode() in r.hvals(key)
                    else:
                        assert value.encode() in r.lrange(key, 0, -1)
                    break
                except redis_py().ResponseError:
                    assert time.time() < deadline, "the door did not serve again within 30 s"
                    time.sleep(0.2)
            assert r.set(f"{P}dur:after", "1")
            r.close()
        finally:
            m.stop()
            if restarted is not None:
                restarted.kill()
                restarted.wait(timeout=30)
        assert "panicked" not in m.log_path.read_text()
