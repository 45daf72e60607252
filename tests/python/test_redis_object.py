"""OBJECT, MEMORY USAGE and SWAPDB on the Redis door against Debian's redis-server 7.0: the
same requests to both, the same replies expected byte for byte (pipelined and not, RESP2 and
RESP3), and a client blocked in a database SWAPDB fills woken as Redis wakes it.

Intended differences from redis-server (docs/REDIS.md):
- OBJECT ENCODING names the encoding Redis would give the value as it is now (Redis never
  converts back, and keeps strings APPEND made as `raw`); compared here on values written
  once.
- OBJECT IDLETIME is 0 (reads are not recorded): checked on the door alone (Redis's figure
  is a clock's).
- MEMORY USAGE is an estimate of Redis's layout, not its figure: only its errors, its nil
  and its growth are checked.
"""

import re
import time

from redisdiff import Conn, Err, byte_for_byte, cmd

P = "objcmd:"
S, I, LONG, H, BIGH, Z, BIGZ, SET, BIGSET, L, X, MISSING = (
    P + n for n in ("s", "i", "long", "h", "bigh", "z", "bigz", "set", "bigset", "l", "x", "missing"))
ALL = (S, I, LONG, H, BIGH, Z, BIGZ, SET, BIGSET, L, X, MISSING)


def values():
    """One key of each encoding Redis 7.0 picks by default."""
    return [
        cmd("DEL", *ALL),
        cmd("SET", S, "hello"), cmd("SET", I, "1234"), cmd("SET", LONG, "x" * 45),
        cmd("HSET", H, "f", "v"), cmd("HSET", BIGH, "f", "v" * 65),
        cmd("ZADD", Z, "1", "a"), cmd("ZADD", BIGZ, *[str(v) for i in range(129) for v in (i, f"m{i}")]),
        cmd("SADD", SET, "1", "2", "-3"), cmd("SADD", BIGSET, "1", "x"),
        cmd("RPUSH", L, "a"), cmd("XADD", X, "1-1", "f", "v"),
    ]


def test_object(redis_door, redis_reference):
    more = [
        cmd("SET", P + "int20", "-9223372036854775808"), cmd("SET", P + "notint", "012"),
        cmd("SET", P + "big", "99999999999999999999"), cmd("SET", P + "e44", "y" * 44),
        cmd("SET", P + "shared", "9999"), cmd("SET", P + "unshared", "10000"),
        cmd("SET", P + "neg", "-1"), cmd("SADD", P + "intset512", *map(str, range(512))),
        cmd("SADD", P + "set513", *map(str, range(513))), cmd("HSET", P + "hkey65", "k" * 65, "v"),
        cmd("ZADD", P + "z64", "1", "m" * 64), cmd("ZADD", P + "z65", "1", "m" * 65),
    ]
    names = [P + n for n in ("int20", "notint", "big", "e44", "shared", "unshared", "neg",
                             "intset512", "set513", "hkey65", "z64", "z65")]
    body = values() + more
    for k in (*ALL, *names):
        body += [cmd("OBJECT", "ENCODING", k), cmd("OBJECT", "REFCOUNT", k),
                 cmd("OBJECT", "FREQ", k)]
    body += [
        cmd("OBJECT", "IDLETIME", MISSING), cmd("OBJECT", "IDLETIME"),
        cmd("OBJECT", "HELP"), cmd("object", "help", "x"), cmd("OBJECT"), cmd("OBJECT", "foo"),
        cmd("OBJECT", "foo", S), cmd("OBJECT", "ENCODING"), cmd("OBJECT", "ENCODING", S, S),
        cmd("MEMORY", "HELP"), cmd("MEMORY"), cmd("MEMORY", "USAGE"), cmd("MEMORY", "USAGE", MISSING),
        cmd("MEMORY", "USAGE", MISSING, "SAMPLES", "0"), cmd("MEMORY", "USAGE", S, "SAMPLES", "-1"),
        cmd("MEMORY", "USAGE", S, "SAMPLES", "x"), cmd("MEMORY", "USAGE", S, "SAMPLES"),
        cmd("MEMORY", "USAGE", S, "FOO", "1"), cmd("MEMORY", "USAGE", MISSING, "SAMPLES", "1", "x"),
        cmd("MEMORY", "nope"), cmd("MEMORY", "HELP", "x"),
        # In a transaction and a script as anywhere.
        cmd("MULTI"), cmd("OBJECT", "ENCODING", I), cmd("OBJECT", "FREQ", I), cmd("EXEC"),
        cmd("EVAL", "return redis.call('OBJECT', 'ENCODING', KEYS[1])", "1", H),
        cmd("DEL", *ALL, *names),
    ]
    byte_for_byte(redis_door, redis_reference, body)


def test_memory_usage_is_an_integer_that_grows_with_the_value(redis_door):
    c = Conn(redis_door)
    from conftest import PASSWORD, USER  # noqa: PLC0415
    c.call("AUTH", USER, PASSWORD)
    c.call("DEL", S, H, L)
    c.call("SET", S, "v")
    assert c.call("OBJECT", "IDLETIME", S) == 0
    c.call("SET", S, "v")
    small = c.call("MEMORY", "USAGE", S)
    c.call("SET", S, "v" * 10_000)
    big = c.call("MEMORY", "USAGE", S)
    assert isinstance(small, int) and 0 < small < big and big >= 10_000
    c.call("RPUSH", L, *["e" * 100] * 50)
    fifty = c.call("MEMORY", "USAGE", L, "SAMPLES", "0")
    c.call("RPUSH", L, *["e" * 100] * 50)
    assert c.call("MEMORY", "USAGE", L, "SAMPLES", "0") > fifty >= 5_000
    c.call("HSET", H, "f", "x" * 1000)
    assert c.call("MEMORY", "USAGE", H) >= 1000
    c.call("DEL", S, H, L)
    c.close()


A, B = "5", "6"


def test_swapdb(redis_door, redis_reference):
    clean = [cmd("SELECT", A), cmd("DEL", *ALL), cmd("SELECT", B), cmd("DEL", *ALL), cmd("SELECT", "0")]
    byte_for_byte(redis_door, redis_reference, clean + [
        cmd("SELECT", A), cmd("SET", S, "in-a"), cmd("RPUSH", L, "x", "y"), cmd("SET", I, "1", "EX", "1000"),
        cmd("SELECT", B), cmd("SET", S, "in-b"), cmd("HSET", H, "f", "v"),
        cmd("SWAPDB", A, B),
        # This client stays in database B, which now holds A's keys (values, members, TTLs).
        cmd("GET", S), cmd("LRANGE", L, "0", "-1"), cmd("TTL", I), cmd("EXISTS", H),
        cmd("SELECT", A), cmd("GET", S), cmd("HGETALL", H), cmd("EXISTS", L),
        cmd("SWAPDB", B, A), cmd("GET", S), cmd("SWAPDB", A, A), cmd("GET", S),
        # Errors, in Redis's order.
        cmd("SWAPDB", "x", B), cmd("SWAPDB", A, "x"), cmd("SWAPDB", "x", "y"), cmd("SWAPDB", "16", A),
        cmd("SWAPDB", A, "-1"), cmd("SWAPDB", "2147483648", A), cmd("SWAPDB", A, "99999999999"),
        cmd("SWAPDB", "1.5", A), cmd("SWAPDB", A), cmd("SWAPDB", A, B, "0"),
        # Queued in MULTI, and WATCH sees a swapped key as changed.
        cmd("MULTI"), cmd("SWAPDB", A, B), cmd("GET", S), cmd("SWAPDB", A, B), cmd("EXEC"),
        cmd("WATCH", S), cmd("SWAPDB", A, B), cmd("MULTI"), cmd("GET", S), cmd("EXEC"),
        cmd("SWAPDB", A, B),
    ] + clean)


def _blocked(probe):
    return int(re.search(r"blocked_clients:(\d+)", probe.call("INFO", "clients").decode()).group(1))


def test_swapdb_wakes_a_client_blocked_on_a_key_it_fills(redis_door):
    from conftest import PASSWORD, USER  # noqa: PLC0415
    probe, waiter = Conn(redis_door), Conn(redis_door)
    for c in (probe, waiter):
        assert c.call("AUTH", USER, PASSWORD) == "OK"
    for db in (A, B):
        probe.call("SELECT", db)
        probe.call("DEL", L, Z)
    base = _blocked(probe)
    waiter.call("SELECT", A)
    waiter.send(cmd("BLPOP", L, "0"))
    waiter.sock.settimeout(20)

    def wait_blocked(n):
        deadline = time.monotonic() + 10
        while _blocked(probe) != n:
            assert time.monotonic() < deadline
            time.sleep(0.02)

    wait_blocked(base + 1)
    # A sorted set arriving wakes no BLPOP; the list does.
    probe.call("SELECT", B)
    probe.call("ZADD", L, "1", "m")
    probe.call("SWAPDB", A, B)
    time.sleep(0.2)
    assert _blocked(probe) == base + 1
    probe.call("SWAPDB", A, B)
    probe.call("DEL", L)
    probe.call("RPUSH", L, "filled")
    assert probe.call("SWAPDB", A, B) == "OK"
    from redisdiff import read_reply  # noqa: PLC0415
    assert read_reply(waiter.f) == [L.encode(), b"filled"]
    wait_blocked(base)
    for db in (A, B):
        probe.call("SELECT", db)
        probe.call("DEL", L)
    assert not isinstance(probe.call("PING"), Err)
    probe.close()
    waiter.close()
