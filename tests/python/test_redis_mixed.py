"""The Redis door's families together, against Debian's redis-server 7.0 (the same requests
to both, pipelined and one at a time): `WRONGTYPE` between every pair of families, a TTL
kept by every write to a key of each family, expired keys of each family absent to every
command, and a seeded random sequence over a handful of keys mixing every family with
`DEL`/`RENAME`/`COPY`/`EXPIRE`/`PERSIST`/`TYPE`/`EXISTS` and `MULTI`/`EXEC` with `WATCH`.

Intended differences, normalized here by `redisdiff.unordered` (and only those): the
replies whose order Redis leaves unspecified (`KEYS`, `SMEMBERS`, `SINTER`/`SUNION`/`SDIFF`,
`HGETALL`/`HKEYS`/`HVALS`, `*SCAN` pages: sorted), random picks (`SRANDMEMBER`,
`HRANDFIELD`, `RANDOMKEY`: their shape), TTLs (coarse buckets). The same normalization is
applied inside `EXEC`'s array, element by element. The sequences scan with a `COUNT` that
covers the whole key, so the cursors compare too.
"""

import random
import time

import pytest

from redisdiff import AUTH, Conn, cmd, differential, replies, unordered

P = "mixed:"
S, H, L, T, Z = P + "s", P + "h", P + "l", P + "t", P + "z"
KEYS = [S, H, L, T, Z, P + "x", P + "y"]
DEL = cmd("DEL", *KEYS)

MAKE = {
    "string": lambda k: [cmd("SET", k, "12")],
    "hash": lambda k: [cmd("HSET", k, "f", "1", "g", "x")],
    "list": lambda k: [cmd("RPUSH", k, "a", "b", "c")],
    "set": lambda k: [cmd("SADD", k, "a", "b", "c")],
    "zset": lambda k: [cmd("ZADD", k, "1", "a", "2", "b", "3", "c")],
}
HOME = {"string": S, "hash": H, "list": L, "set": T, "zset": Z}

# Every family's commands on `{k}` (another key of that family is `{o}`), reads first.
READS = {
    "string": ["GET {k}", "STRLEN {k}", "GETRANGE {k} 0 -1", "SUBSTR {k} 0 1", "MGET {k} {o}"],
    "hash": ["HGET {k} f", "HMGET {k} f g", "HLEN {k}", "HGETALL {k}", "HKEYS {k}", "HVALS {k}",
             "HEXISTS {k} f", "HSTRLEN {k} f", "HRANDFIELD {k}", "HRANDFIELD {k} 5",
             "HSCAN {k} 0 COUNT 100"],
    "list": ["LLEN {k}", "LRANGE {k} 0 -1", "LINDEX {k} 0", "LPOS {k} a"],
    "set": ["SMEMBERS {k}", "SISMEMBER {k} a", "SMISMEMBER {k} a z", "SCARD {k}", "SRANDMEMBER {k}",
            "SRANDMEMBER {k} 5", "SINTER {k} {o}", "SUNION {o} {k}", "SDIFF {k}", "SINTERCARD 2 {k} {o}",
            "SSCAN {k} 0 COUNT 100"],
    "zset": ["ZSCORE {k} a", "ZMSCORE {k} a z", "ZCARD {k}", "ZCOUNT {k} -inf +inf", "ZLEXCOUNT {k} - +",
             "ZRANGE {k} 0 -1 WITHSCORES", "ZRANGEBYSCORE {k} 1 2", "ZREVRANGE {k} 0 1", "ZRANK {k} a",
             "ZREVRANK {k} b", "ZSCAN {k} 0 COUNT 100"],
}
WRITES = {
    "string": ["APPEND {k} z", "INCR {k}", "DECRBY {k} 2", "INCRBYFLOAT {k} 1.5", "SETRANGE {k} 1 q",
               "GETEX {k} PERSIST", "GETSET {k} 7", "SETNX {k} v", "GETDEL {k}"],
    "hash": ["HSET {k} f 2", "HSETNX {k} n 1", "HINCRBY {k} f 3", "HINCRBYFLOAT {k} f 0.5",
             "HMSET {k} a 1", "HDEL {k} a"],
    "list": ["LPUSH {k} x", "RPUSHX {k} y", "LPUSHX {k} w", "LSET {k} 0 s", "LINSERT {k} BEFORE s r",
             "LREM {k} 1 y", "LTRIM {k} 0 10", "RPOP {k}", "LPOP {k}", "LMOVE {k} {k} LEFT RIGHT",
             "LMPOP 1 {k} LEFT"],
    "set": ["SADD {k} d", "SREM {k} d", "SMOVE {k} {o} a", "SMOVE {o} {k} a", "SINTERSTORE {o} {k}",
            "SPOP {k} 0"],
    "zset": ["ZADD {k} 5 e", "ZINCRBY {k} 1 e", "ZREM {k} e", "ZADD {k} GT CH 9 a", "ZPOPMIN {k} 0",
             "ZREMRANGEBYSCORE {k} 100 200", "ZRANGESTORE {o} {k} 0 -1", "ZREMRANGEBYRANK {k} 5 9"],
}


def request(template, k, o):
    return cmd(*[{"{k}": k, "{o}": o}.get(w, w) for w in template.split(" ")])


def diff(door, reference, requests, pipeline):
    differential(door, reference, requests, pipeline=pipeline, normalize=unordered)


def read_back():
    """Every key of ours read back, whatever its type."""
    out = [cmd("TYPE", k) for k in KEYS]
    for k in KEYS:
        out += [cmd("GET", k), cmd("HGETALL", k), cmd("LRANGE", k, 0, -1), cmd("SMEMBERS", k),
                cmd("ZRANGE", k, 0, -1, "WITHSCORES"), cmd("PTTL", k)]
    return out


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
def test_wrongtype_between_every_pair_of_families(redis_door, redis_reference, pipeline):
    reqs = [DEL]
    for family, k in HOME.items():
        reqs += MAKE[family](k)
    for family in HOME:
        for other, k in HOME.items():
            if other == family:
                continue
            # `{o}` a key of the family the command is for, so only `k`'s type is wrong.
            o = HOME[family]
            reqs += [request(t, k, o) for t in READS[family] + WRITES[family]]
            reqs += [request(t, o, k) for t in READS[family] + WRITES[family] if "{o}" in t]
            reqs += [cmd("TYPE", k)]
        reqs += [DEL] + [r for fam, key in HOME.items() for r in MAKE[fam](key)]
    diff(redis_door, redis_reference, reqs + read_back() + [DEL], pipeline)


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
def test_writes_keep_the_ttl_of_every_family(redis_door, redis_reference, pipeline):
    reqs = [DEL]
    for family, k in HOME.items():
        o = P + "x"
        reqs += MAKE[family](k) + MAKE[family](o) + [cmd("PEXPIRE", k, 3_600_000), cmd("PEXPIRE", o, 7_200_000)]
        for t in WRITES[family]:
            reqs += [request(t, k, o), cmd("PTTL", k), cmd("PTTL", o)]
        reqs += [cmd("DEL", k, o)]
    diff(redis_door, redis_reference, reqs + read_back() + [DEL], pipeline)


def test_expired_keys_are_absent_to_every_family(redis_door, redis_reference):
    for pipeline in (True, False):
        setup = [DEL]
        for family, k in HOME.items():
            setup += MAKE[family](k) + MAKE[family](P + "x") + [cmd("PEXPIRE", k, 40)]
        diff(redis_door, redis_reference, setup, pipeline)
        time.sleep(0.12)
        reqs = []
        for family, k in HOME.items():
            o = P + "x"
            reqs += [cmd("EXISTS", k), cmd("TYPE", k), cmd("PTTL", k)]
            reqs += [request(t, k, o) for t in READS[family]]
            reqs += [request(t, o, k) for t in READS[family] if "{o}" in t]
            # Writes make the key anew, without the old TTL or members.
            reqs += [request(t, k, o) for t in WRITES[family][:1]] + [cmd("PTTL", k)]
            reqs += [request(t, k, o) for t in READS[family]] + [cmd("DEL", k, o)]
        diff(redis_door, redis_reference, reqs + read_back() + [DEL], pipeline)


# --- a random sequence over every family ----------------------------------------------------

def random_sequence(rng, n):
    names = [S, H, L, T, Z, P + "x", P + "y"]
    fields = ["a", "b", "c", "f", "g", "1"]
    out = [DEL]

    def pick():
        return rng.choice(names)

    def one():
        family = rng.choice(list(HOME))
        r = rng.random()
        k, o = pick(), pick()
        if r < 0.10:
            return MAKE[family](k)[0]
        if r < 0.50:
            return request(rng.choice(WRITES[family]), k, o)
        if r < 0.75:
            return request(rng.choice(READS[family]), k, o)
        if r < 0.80:
            return rng.choice([cmd("DEL", k), cmd("DEL", k, o), cmd("EXISTS", k, o), cmd("TYPE", k)])
        if r < 0.86:
            return cmd(rng.choice(["RENAME", "RENAMENX"]), k, o)
        if r < 0.90:
            return cmd("COPY", k, o, *rng.choice([[], ["REPLACE"]]))
        if r < 0.94:
            return rng.choice([cmd("EXPIRE", k, rng.choice([100, 1000])), cmd("PERSIST", k), cmd("PTTL", k),
                               cmd("PEXPIRE", k, 1000, rng.choice(["NX", "XX", "GT", "LT"]))])
        if r < 0.96:
            return cmd(rng.choice(["SADD", "ZADD", "HSET", "RPUSH"]), k, *rng.sample(fields, 2))
        return cmd("KEYS", P + "*")

    for _ in range(n):
        r = rng.random()
        if r < 0.06:
            # A transaction, sometimes spoiled by a write to a watched key before MULTI.
            w = pick()
            out += [cmd("WATCH", w)]
            if rng.random() < 0.4:
                out += [rng.choice([cmd("SET", w, "1"), cmd("DEL", w), cmd("EXPIRE", w, 100), one()])]
            out += [cmd("MULTI")] + [one() for _ in range(rng.randint(1, 4))] + [cmd("EXEC")]
        elif r < 0.07:
            out += [cmd("MULTI"), one(), cmd("DISCARD")]
        else:
            out.append(one())
    return out + read_back() + [DEL]


def normalize_exec(door, reference, requests, pipeline):
    """The differential check, with `EXEC`'s replies normalized as the commands they answer."""
    requests = [AUTH, *requests]
    got = replies(door, requests, pipeline)
    want = replies(reference, requests, pipeline)
    queued = []
    for i, (req, g, w) in enumerate(zip(requests, got, want)):
        name = req.split(b"\r\n")[2].upper() if req.count(b"\r\n") > 2 else b""
        if name == b"MULTI":
            queued = []
        elif name == b"EXEC" and isinstance(g, list) and isinstance(w, list) and len(g) == len(w):
            g = [unordered(q, x) for q, x in zip(queued, g)]
            w = [unordered(q, x) for q, x in zip(queued, w)]
            queued = []
        elif g == "QUEUED":
            queued.append(req)
        else:
            g, w = unordered(req, g), unordered(req, w)
        assert g == w, f"request {i} {req!r}: manifold {g!r}, redis-server {w!r}"


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
def test_random_sequence_over_every_family(redis_door, redis_reference, pipeline):
    rng = random.Random(20240611 + pipeline)
    normalize_exec(redis_door, redis_reference, random_sequence(rng, 400), pipeline)
    c = Conn(redis_door)
    c.call("AUTH", "app", "app")
    assert c.call("EXISTS", *KEYS) == 0
    c.close()
