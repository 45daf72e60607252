"""The Redis door's string commands (`GET`, `SET`, `MGET`, `MSET`, `MSETNX`, `SETNX`, `SETEX`,
`PSETEX`, `GETSET`, `GETDEL`, `GETEX`, `APPEND`, `STRLEN`, `INCR`, `DECR`, `INCRBY`, `DECRBY`,
`INCRBYFLOAT`, `GETRANGE`, `SUBSTR`, `SETRANGE`) against Debian's redis-server 7.0: the same
requests to both, the same replies expected, pipelined and one at a time; the RESP3 bytes;
TTLs kept or cleared; a seeded random sequence; redis-py in RESP2 and RESP3; the stored value
read back through SQL.

The wrong-type key `strings:h` is a hash, made with `HSET` on both servers.

No intended difference from redis-server in what these tests send.
"""

import random
import re
import time

import pytest

from conftest import USER, PASSWORD
from redisdiff import Conn, cmd, differential, raw, redis_py

SCHEMA = "manifold_redis"
KEYS = ["strings:a", "strings:b", "strings:c", "strings:n", "strings:f", "strings:e", "strings:h",
        "strings:x", "strings:y"] + [f"strings:r{i}" for i in range(5)]
DEL = cmd("DEL", *KEYS)
FAR = str(int(time.time()) + 10 ** 6)
FAR_MS = str((int(time.time()) + 10 ** 6) * 1000)


@pytest.fixture
def servers(redis_door, redis_reference):
    """The door and redis-server, each with `strings:h` a hash (and no other key of ours)."""
    def reset():
        for port in (redis_door, redis_reference):
            c = Conn(port)
            assert c.call("AUTH", USER, PASSWORD) == "OK"
            assert isinstance(c.call("DEL", *KEYS), int)
            assert c.call("HSET", "strings:h", "f", "v") == 1
            c.close()
    reset()
    return redis_door, redis_reference, reset


SEQUENCES = {
    "get_set_mget_mset": [
        cmd("GET", "strings:a"), cmd("SET", "strings:a", "1"), cmd("GET", "strings:a"),
        cmd("MGET", "strings:a", "strings:b", "strings:h", "strings:a"), cmd("MGET"),
        cmd("MSET", "strings:a", "x", "strings:b", "y", "strings:a", "z"),
        cmd("MGET", "strings:a", "strings:b"), cmd("MSET", "strings:a"), cmd("MSET", "strings:a", "1", "strings:b"),
        cmd("MSET"), cmd("GET", "strings:h"), cmd("SET", "strings:a", "v", "EX", "10", "EX", "20"),
        cmd("SET", "strings:a", "v", "EX", "10", "PX", "20"), cmd("SET", "strings:a", "v", "KEEPTTL", "EX", "1"),
        cmd("SET", "strings:a", "v", "EX", "0"), cmd("SET", "strings:a", "v", "EX", "x"),
        cmd("SET", "strings:a", "v", "NX", "XX"), cmd("SET", "strings:a", "v", "GET", "NX"),
        cmd("SET", "strings:h", "v", "GET"), cmd("SET", "strings:a", "w", "XX", "GET"),
        cmd("SET", "strings:a", "v", "PERSIST"), cmd("GET", "strings:a", "x"),
        cmd("MSET", "strings:h", "now a string"), cmd("GET", "strings:h"),
        cmd("MGET", *[f"strings:r{i % 5}" for i in range(300)]),
        cmd("MSET", *[a for i in range(300) for a in (f"strings:r{i % 5}", str(i))]),
        cmd("MGET", *[f"strings:r{i}" for i in range(5)]),
    ],
    "msetnx_setnx_setex": [
        cmd("MSETNX", "strings:a", "1", "strings:b", "2"), cmd("MGET", "strings:a", "strings:b"),
        cmd("MSETNX", "strings:c", "3", "strings:a", "x"), cmd("EXISTS", "strings:c"),
        cmd("MSETNX", "strings:c", "3", "strings:h", "x"), cmd("MSETNX", "strings:c"),
        cmd("MSETNX", "strings:x", "1", "strings:x", "2"), cmd("GET", "strings:x"),
        cmd("SETNX", "strings:a", "9"), cmd("SETNX", "strings:h", "9"), cmd("SETNX", "strings:y", "9"),
        cmd("GET", "strings:y"), cmd("SETNX", "strings:y"),
        cmd("SETEX", "strings:e", "100", "v"), cmd("GET", "strings:e"), cmd("SETEX", "strings:e", "0", "v"),
        cmd("SETEX", "strings:e", "-1", "v"), cmd("SETEX", "strings:e", "x", "v"),
        cmd("SETEX", "strings:e", "9223372036854775807", "v"), cmd("SETEX", "strings:e", "9223372036854776", "v"),
        cmd("SETEX", "strings:e", "10"), cmd("PSETEX", "strings:e", "100000", "w"), cmd("GET", "strings:e"),
        cmd("PSETEX", "strings:e", "0", "w"), cmd("PSETEX", "strings:e", "9223372036854775807", "w"),
        cmd("PSETEX", "strings:e", "1.5", "w"), cmd("SETEX", "strings:h", "100", "v"), cmd("GET", "strings:h"),
    ],
    "getset_getdel_getex": [
        cmd("GETSET", "strings:a", "1"), cmd("GETSET", "strings:a", "2"), cmd("GET", "strings:a"),
        cmd("GETSET", "strings:h", "1"), cmd("GETSET", "strings:a"),
        cmd("GETDEL", "strings:a"), cmd("GETDEL", "strings:a"), cmd("EXISTS", "strings:a"),
        cmd("GETDEL", "strings:h"), cmd("GETDEL"),
        cmd("GETEX", "strings:b"), cmd("SET", "strings:b", "v"), cmd("GETEX", "strings:b"),
        cmd("GETEX", "strings:b", "EX", "100"), cmd("GETEX", "strings:b", "PX", "100000"),
        cmd("GETEX", "strings:b", "EXAT", FAR), cmd("GETEX", "strings:b", "PXAT", FAR_MS),
        cmd("GETEX", "strings:b", "PERSIST"), cmd("GETEX", "strings:b", "PERSIST", "EX", "1"),
        cmd("GETEX", "strings:b", "EX", "1", "PX", "1"), cmd("GETEX", "strings:b", "EX", "1", "EX", "100"),
        cmd("GETEX", "strings:b", "EX"), cmd("GETEX", "strings:b", "KEEPTTL"), cmd("GETEX", "strings:b", "NX"),
        cmd("GETEX", "strings:b", "EX", "0"), cmd("GETEX", "strings:b", "EX", "x"),
        cmd("GETEX", "strings:b", "EXAT", "-5"), cmd("GETEX", "strings:b", "EX", "9223372036854775807"),
        cmd("GETEX", "strings:zz", "EX", "x"), cmd("GETEX", "strings:h", "EX", "x"), cmd("GETEX", "strings:h"),
        cmd("GETEX", "strings:b", "PXAT", "1"), cmd("GET", "strings:b"), cmd("EXISTS", "strings:b"),
        cmd("GETEX"),
    ],
    "incr_decr": [
        cmd("INCR", "strings:n"), cmd("INCR", "strings:n"), cmd("DECR", "strings:n"), cmd("DECR", "strings:n"),
        cmd("DECR", "strings:n"), cmd("INCRBY", "strings:n", "100"), cmd("DECRBY", "strings:n", "-5"),
        cmd("INCRBY", "strings:n", "x"), cmd("INCRBY", "strings:n", "1.5"), cmd("INCRBY", "strings:n", "01"),
        cmd("INCRBY", "strings:n", "-0"), cmd("INCRBY", "strings:n", "+1"), cmd("INCRBY", "strings:n", " 1"),
        cmd("INCRBY", "strings:n", "9223372036854775808"), cmd("DECRBY", "strings:n", "-9223372036854775808"),
        cmd("SET", "strings:n", "9223372036854775806"), cmd("INCR", "strings:n"), cmd("INCR", "strings:n"),
        cmd("GET", "strings:n"), cmd("SET", "strings:n", "-9223372036854775807"), cmd("DECR", "strings:n"),
        cmd("DECR", "strings:n"), cmd("INCRBY", "strings:n", "-1"), cmd("INCRBY", "strings:n", "9223372036854775807"),
        cmd("SET", "strings:n", "abc"), cmd("INCR", "strings:n"), cmd("SET", "strings:n", " 1"),
        cmd("INCR", "strings:n"), cmd("SET", "strings:n", "1.0"), cmd("DECR", "strings:n"),
        cmd("SET", "strings:n", ""), cmd("INCR", "strings:n"), cmd("SET", "strings:n", "007"),
        cmd("INCR", "strings:n"), cmd("INCR", "strings:h"), cmd("DECRBY", "strings:h", "1"),
        cmd("INCRBY", "strings:h", "x"), cmd("INCR"), cmd("INCRBY", "strings:n"), cmd("DECR", "a", "b"),
    ],
    "incrbyfloat": [
        cmd("INCRBYFLOAT", "strings:f", "10.5"), cmd("INCRBYFLOAT", "strings:f", "0.1"),
        cmd("INCRBYFLOAT", "strings:f", "-5"), cmd("INCRBYFLOAT", "strings:f", "1e3"),
        cmd("INCRBYFLOAT", "strings:f", "3.0e3"), cmd("INCRBYFLOAT", "strings:f", "0x10"),
        cmd("INCRBYFLOAT", "strings:f", "1.000000000000000000001"), cmd("INCRBYFLOAT", "strings:f", "-1e-20"),
        cmd("INCRBYFLOAT", "strings:f", "x"), cmd("INCRBYFLOAT", "strings:f", " 1"),
        cmd("INCRBYFLOAT", "strings:f", "1 "), cmd("INCRBYFLOAT", "strings:f", ""),
        cmd("INCRBYFLOAT", "strings:f", "nan"), cmd("INCRBYFLOAT", "strings:f", "inf"),
        cmd("INCRBYFLOAT", "strings:f", "-infinity"), cmd("INCRBYFLOAT", "strings:f", "1e5000"),
        cmd("INCRBYFLOAT", "strings:f", "1e-5000"), cmd("INCRBYFLOAT", "strings:f", "1e4000"),
        cmd("INCRBYFLOAT", "strings:f", "1e4932"), cmd("INCRBYFLOAT", "strings:f", "-2e4000"),
        cmd("GET", "strings:f"), cmd("SET", "strings:f", "abc"), cmd("INCRBYFLOAT", "strings:f", "1"),
        cmd("SET", "strings:f", "1e2"), cmd("INCRBYFLOAT", "strings:f", "0"), cmd("SET", "strings:f", "-0.0"),
        cmd("INCRBYFLOAT", "strings:f", "-0.0"), cmd("SET", "strings:f", "0.1"), cmd("INCRBYFLOAT", "strings:f", "0.2"),
        cmd("INCRBYFLOAT", "strings:f", "-0.30000000000000001"), cmd("INCRBYFLOAT", "strings:f", "1.5e-17"),
        cmd("INCRBYFLOAT", "strings:f", "123456789012345678901234567890"),
        cmd("INCRBYFLOAT", "strings:h", "1"), cmd("INCRBYFLOAT", "strings:h", "x"), cmd("INCRBYFLOAT", "strings:f"),
    ],
    "append_strlen_ranges": [
        cmd("APPEND", "strings:a", "Hello"), cmd("APPEND", "strings:a", " World"), cmd("GET", "strings:a"),
        cmd("APPEND", "strings:a", ""), cmd("STRLEN", "strings:a"), cmd("STRLEN", "strings:zz"),
        cmd("STRLEN", "strings:h"), cmd("APPEND", "strings:h", "x"), cmd("APPEND", "strings:a"),
        cmd("GETRANGE", "strings:a", "0", "4"), cmd("GETRANGE", "strings:a", "-5", "-1"),
        cmd("GETRANGE", "strings:a", "-1", "-5"), cmd("GETRANGE", "strings:a", "-100", "-200"),
        cmd("GETRANGE", "strings:a", "5", "1"),
        cmd("GETRANGE", "strings:a", "0", "-1"), cmd("GETRANGE", "strings:a", "-100", "100"),
        cmd("GETRANGE", "strings:a", "100", "200"), cmd("GETRANGE", "strings:a", "x", "1"),
        cmd("GETRANGE", "strings:a", "0", "9223372036854775808"), cmd("GETRANGE", "strings:zz", "0", "-1"),
        cmd("GETRANGE", "strings:zz", "x", "1"), cmd("GETRANGE", "strings:h", "0", "-1"),
        cmd("GETRANGE", "strings:a", "-9223372036854775808", "9223372036854775807"),
        cmd("SUBSTR", "strings:a", "1", "3"), cmd("GETRANGE", "strings:a", "0"),
        cmd("SETRANGE", "strings:a", "6", "Redis"), cmd("GET", "strings:a"),
        cmd("SETRANGE", "strings:b", "5", "xy"), cmd("GET", "strings:b"), cmd("STRLEN", "strings:b"),
        cmd("SETRANGE", "strings:c", "5", ""), cmd("EXISTS", "strings:c"), cmd("SETRANGE", "strings:a", "3", ""),
        cmd("SETRANGE", "strings:a", "-1", "x"), cmd("SETRANGE", "strings:a", "x", "x"),
        cmd("SETRANGE", "strings:a", "536870911", "xy"), cmd("SETRANGE", "strings:c", "536870912", "x"),
        cmd("SETRANGE", "strings:c", "9223372036854775807", "x"), cmd("SETRANGE", "strings:c", "9223372036854775807", ""),
        cmd("SETRANGE", "strings:h", "0", "x"), cmd("SETRANGE", "strings:h", "0", ""),
        cmd("SETRANGE", "strings:h", "-1", "x"), cmd("SETRANGE", "strings:a", "0"),
        cmd("SET", "strings:n", "12"), cmd("APPEND", "strings:n", "3"), cmd("INCR", "strings:n"),
        cmd("SETRANGE", "strings:n", "0", "9"), cmd("INCR", "strings:n"), cmd("STRLEN", "strings:n"),
    ],
    "expired_keys": [
        cmd("SET", "strings:a", "5", "PXAT", "1"), cmd("GET", "strings:a"), cmd("INCR", "strings:a"),
        cmd("SET", "strings:a", "5", "EXAT", "1"), cmd("APPEND", "strings:a", "x"), cmd("GET", "strings:a"),
        cmd("SET", "strings:a", "5", "PXAT", "1"), cmd("STRLEN", "strings:a"),
        cmd("GETRANGE", "strings:a", "0", "-1"), cmd("MGET", "strings:a", "strings:a"),
        cmd("SETNX", "strings:a", "n"), cmd("SET", "strings:a", "5", "PXAT", "1"),
        cmd("MSETNX", "strings:a", "m", "strings:b", "m"), cmd("SET", "strings:a", "5", "PXAT", "1"),
        cmd("GETSET", "strings:a", "g"), cmd("SET", "strings:a", "5", "PXAT", "1"), cmd("GETDEL", "strings:a"),
        cmd("GETEX", "strings:a", "PERSIST"), cmd("SET", "strings:a", "5", "PXAT", "1"),
        cmd("SETRANGE", "strings:a", "2", "r"), cmd("GET", "strings:a"), cmd("SET", "strings:a", "5", "PXAT", "1"),
        cmd("INCRBYFLOAT", "strings:a", "1.5"), cmd("SET", "strings:a", "5", "PXAT", "1"),
        cmd("SET", "strings:a", "n", "NX", "GET"), cmd("SET", "strings:a", "5", "PXAT", "1"),
        cmd("SET", "strings:a", "n", "XX"), cmd("EXISTS", "strings:a"),
    ],
}


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_same_replies_as_redis_server(servers, name, pipeline):
    door, reference, _ = servers
    differential(door, reference, SEQUENCES[name], pipeline=pipeline)


def test_ttl_kept_or_cleared(servers):
    """Writes that keep the TTL (INCR, APPEND, SETRANGE, GETEX...) leave the key expiring;
    the others (SET, GETSET, MSET, GETEX PERSIST) make it persist."""
    door, reference, _ = servers
    keep = {"r0": cmd("INCR", "strings:r0"), "r1": cmd("APPEND", "strings:r1", "x"),
            "r2": cmd("SETRANGE", "strings:r2", "0", "x"), "r3": cmd("INCRBYFLOAT", "strings:r3", "1.5"),
            "r4": cmd("DECRBY", "strings:r4", "3"), "a": cmd("GETEX", "strings:a"),
            "b": cmd("SET", "strings:b", "v", "KEEPTTL")}
    clear = {"c": cmd("SET", "strings:c", "v"), "n": cmd("GETSET", "strings:n", "v"),
             "f": cmd("MSET", "strings:f", "v"), "e": cmd("GETEX", "strings:e", "PERSIST"),
             "x": cmd("GETEX", "strings:x", "EX", "1000"), "y": cmd("SETEX", "strings:y", "1000", "v")}
    first = [cmd("SET", f"strings:{k}", "1", "PX", "400") for k in [*keep, *clear]]
    differential(door, reference, first + list(keep.values()) + list(clear.values()), pipeline=False)
    time.sleep(0.8)
    differential(door, reference, [cmd("MGET", *[f"strings:{k}" for k in [*keep, *clear]])], pipeline=False)
    c = Conn(door)
    c.call("AUTH", USER, PASSWORD)
    got = c.call("MGET", *[f"strings:{k}" for k in [*keep, *clear]])
    assert got[:len(keep)] == [None] * len(keep) and None not in got[len(keep):], got
    c.close()


def test_random_sequence(servers):
    door, reference, reset = servers
    rnd = random.Random(20240607)
    keys = [f"strings:r{i}" for i in range(4)] + ["strings:h"]
    values = ["0", "1", "-7", "10.5", "abc", "", "9223372036854775807", "-9223372036854775808",
              "3.0e3", "0x10", "hello world", "1e-3", "007", " 2"]
    ints = ["1", "-1", "0", "100", "x", "9223372036854775807", "-9223372036854775808", "1.5", "01"]

    def one():
        k = rnd.choice(keys)
        v = rnd.choice(values)
        n = rnd.choice(ints)
        c = rnd.randrange(24)
        if c == 0:
            return cmd("GET", k)
        if c == 1:
            opts = rnd.choice([[], ["NX"], ["XX"], ["GET"], ["KEEPTTL"], ["EX", "1000"], ["PX", "900000"],
                               ["EXAT", FAR], ["PXAT", "1"], ["XX", "GET"], ["NX", "EX", "0"], ["EX", "x"]])
            return cmd("SET", k, v, *opts)
        if c == 2:
            return cmd("MGET", *rnd.sample(keys, rnd.randint(1, 5)))
        if c == 3:
            return cmd("MSET", *[a for kk in rnd.sample(keys, rnd.randint(1, 3)) for a in (kk, rnd.choice(values))])
        if c == 4:
            return cmd("MSETNX", *[a for kk in rnd.sample(keys, rnd.randint(1, 3)) for a in (kk, rnd.choice(values))])
        if c == 5:
            return cmd("SETNX", k, v)
        if c == 6:
            return cmd(rnd.choice(["SETEX", "PSETEX"]), k, rnd.choice(["1000000", "0", "x", "-3"]), v)
        if c == 7:
            return cmd("GETSET", k, v)
        if c == 8:
            return cmd("GETDEL", k)
        if c == 9:
            opts = rnd.choice([[], ["PERSIST"], ["EX", "1000"], ["PXAT", "1"], ["EXAT", FAR], ["EX", "0"], ["PX"]])
            return cmd("GETEX", k, *opts)
        if c == 10:
            return cmd("APPEND", k, v)
        if c == 11:
            return cmd("STRLEN", k)
        if c in (12, 13):
            return cmd(rnd.choice(["INCR", "DECR"]), k)
        if c == 14:
            return cmd(rnd.choice(["INCRBY", "DECRBY"]), k, n)
        if c in (15, 16):
            return cmd("INCRBYFLOAT", k, rnd.choice(["0.1", "-1.5", "1e3", "x", "3", "-0.25", "1e-5", "inf"]))
        if c == 17:
            return cmd("GETRANGE", k, rnd.choice(["0", "-3", "2", "x"]), rnd.choice(["-1", "3", "-10", "100"]))
        if c == 18:
            return cmd("SETRANGE", k, rnd.choice(["0", "3", "10", "-1", "x"]), rnd.choice(["", "ab", "Z"]))
        if c == 19:
            return cmd("EXISTS", k)
        if c == 20:
            return cmd("DEL", k)
        if c == 21:
            return cmd("TYPE", k)
        return cmd("GET", k)

    for round_ in range(3):
        reset()
        requests = [one() for _ in range(150)]
        differential(door, reference, requests, pipeline=round_ % 2 == 0)


def mask(data):
    return re.sub(rb"(\$2\r\nid\r\n):\d+\r\n", rb"\1:ID\r\n", data)


def test_resp3_bytes(servers):
    """Nulls, integers and bulk replies as RESP3 writes them, byte for byte."""
    door, reference, _ = servers
    payload = b"".join([
        cmd("HELLO", "3", "AUTH", USER, PASSWORD), cmd("GET", "strings:a"), cmd("MGET", "strings:a", "strings:h"),
        cmd("SET", "strings:a", "1"), cmd("INCR", "strings:a"), cmd("INCRBYFLOAT", "strings:a", "0.5"),
        cmd("GETEX", "strings:zz"), cmd("GETDEL", "strings:zz"), cmd("GETSET", "strings:zz", "v"),
        cmd("SET", "strings:zz", "w", "GET"), cmd("SET", "strings:zz", "w", "NX"), cmd("SETNX", "strings:zz", "w"),
        cmd("GETRANGE", "strings:none", "0", "1"), cmd("STRLEN", "strings:none"), cmd("DEL", "strings:zz"),
        cmd("QUIT"),
    ])
    want = raw(reference, payload)
    got = raw(door, payload)
    assert mask(got) == mask(want), f"\nredis-server: {want!r}\nmanifold:     {got!r}"


def _redis_py_session(redis, port, protocol):
    """What redis-py's string methods return on `port`, in order (errors as their class and
    text)."""
    r = redis.Redis(port=port, username=USER, password=PASSWORD, protocol=protocol)
    out = []

    def run(fn, *args, **kw):
        try:
            out.append(fn(*args, **kw))
        except redis.ResponseError as e:
            out.append((type(e).__name__, str(e)))
    run(r.mset, {"strings:a": "1", "strings:b": "x"})
    run(r.mget, ["strings:a", "strings:b", "strings:none", "strings:h"])
    run(r.incr, "strings:a")
    run(r.decrby, "strings:a", 5)
    run(r.incrbyfloat, "strings:a", "0.5")
    run(r.append, "strings:b", "yz")
    run(r.strlen, "strings:b")
    run(r.getrange, "strings:b", 1, -1)
    run(r.setrange, "strings:b", 1, "Q")
    run(r.getset, "strings:b", "new")
    run(r.getdel, "strings:b")
    run(r.setnx, "strings:b", "1")
    run(r.setnx, "strings:b", "2")
    run(r.execute_command, "SETEX", "strings:c", 100, "v")
    run(r.getex, "strings:c", persist=True)
    run(r.getex, "strings:c", px=100000)
    run(r.msetnx, {"strings:c": "1", "strings:n": "2"})
    run(r.incr, "strings:h")
    run(r.incr, "strings:c")
    r.close()
    return out


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py(servers, protocol):
    door, reference, _ = servers
    redis = redis_py()
    got = _redis_py_session(redis, door, protocol)
    assert got == _redis_py_session(redis, reference, protocol)
    # What both return, as redis-py gives it.
    assert got[:3] == [True, [b"1", b"x", None, None], 2] and got[4] == -2.5 and got[11:13] == [True, False]
    assert got[-2][1].startswith("WRONGTYPE") and got[-1] == ("ResponseError", "value is not an integer or out of range")


def test_value_readable_through_sql(servers, topology):
    door, _, _ = servers
    c = Conn(door)
    assert c.call("AUTH", USER, PASSWORD) == "OK"
    assert c.call("SET", "strings:a", b"bin\x00\xffary") == "OK"
    assert c.call("APPEND", "strings:a", "!") == 9
    assert c.call("SET", "strings:n", "41", "EX", "1000") == "OK"
    assert c.call("INCR", "strings:n") == 42
    c.close()
    db = topology.root(database=SCHEMA)
    with db.cursor() as cur:
        cur.execute("SELECT v FROM redis_keys WHERE db = 0 AND kh = UNHEX(SHA2('strings:a', 256))")
        assert cur.fetchall() == ((b"bin\x00\xffary!",),)
        cur.execute("SELECT v, expire_at IS NOT NULL, type, version FROM redis_keys "
                    "WHERE db = 0 AND kh = UNHEX(SHA2('strings:n', 256))")
        assert cur.fetchall() == ((b"42", 1, 0, 1),)
    db.close()
