"""The Redis door's hash commands (HSET, HGET, HMGET, HMSET, HSETNX, HGETALL, HKEYS, HVALS,
HDEL, HEXISTS, HLEN, HSTRLEN, HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN), differentially
against Debian's redis-server 7.0: the same requests to both, the same replies expected,
pipelined and one at a time, in RESP2 and RESP3.

Intended differences, normalised away before comparing:
- HGETALL, HKEYS, HVALS, HSCAN order fields by SHA-256 (Redis: unspecified): sorted here;
- HRANDFIELD picks at random on both sides: only the reply's shape and length are compared
  (or the whole set, when the count covers the hash); `test_hrandfield_picks` checks the
  door's picks themselves;
- HSCAN honours COUNT on small hashes (Redis returns a small hash whole): the differential
  sequences scan with a COUNT covering the hash; `test_hscan_pages` walks a large one.
"""

import random

import pytest

from redisdiff import Conn, Err, args_of, cmd, differential, scan_pages

P = "hashes:"
H, H2, S, E, MISSING = P + "h", P + "h2", P + "s", P + "e", P + "missing"
RESET = cmd("DEL", H, H2, S, E, MISSING, P + "r1", P + "r2", P + "rs", P + "big")


def shape(reply):
    return [len(x) if isinstance(x, list) else type(x).__name__ for x in reply]


def pairs(flat):
    return sorted(zip(flat[0::2], flat[1::2]))


def normalize(req, reply):
    if isinstance(reply, Err):
        return reply
    args = args_of(req)
    name = args[0].lower()
    if name == b"hello":
        return None
    if name in (b"hkeys", b"hvals") and isinstance(reply, list):
        return sorted(reply)
    if name == b"hgetall":
        return ("map", sorted(reply.items())) if isinstance(reply, dict) else ("array", pairs(reply))
    if name == b"hscan" and isinstance(reply, list):
        return [reply[0], pairs(reply[1])]
    if name == b"hrandfield":
        if len(args) == 2:
            return "a field" if isinstance(reply, bytes) else reply
        if isinstance(reply, list):
            if int(args[2]) >= 50:
                return sorted(map(repr, reply))
            return ("picks", len(reply), shape(reply))
    return reply


BASICS = [
    RESET,
    cmd("HSET", H, "f1", "v1"), cmd("HSET", H, "f1", "v1b", "f2", "v2", "f3", "v3"),
    cmd("HSET", H, "f4", "a", "f4", "b"), cmd("HGET", H, "f4"), cmd("HSET", H),
    cmd("HSET", H, "f"), cmd("HSET", H, "f", "v", "x"), cmd("HMSET", H, "f5", "v5", "f1", "z"),
    cmd("HMSET", H, "f"), cmd("HMSET", H, "a", "b", "c"), cmd("HGET", H, "f1"),
    cmd("HGET", H, "nope"), cmd("HGET", MISSING, "f"), cmd("HGET", H),
    cmd("HMGET", H, "f1", "nope", "f2", "f1"), cmd("HMGET", MISSING, "a", "b"), cmd("HMGET", H),
    cmd("HLEN", H), cmd("HLEN", MISSING), cmd("HLEN"), cmd("HSTRLEN", H, "f1"),
    cmd("HSTRLEN", H, "nope"), cmd("HSTRLEN", MISSING, "f"), cmd("HSTRLEN", H),
    cmd("HEXISTS", H, "f1"), cmd("HEXISTS", H, "nope"), cmd("HEXISTS", MISSING, "f"),
    cmd("HEXISTS", H, "a", "b"), cmd("HGETALL", H), cmd("HKEYS", H), cmd("HVALS", H),
    cmd("HGETALL", MISSING), cmd("HKEYS", MISSING), cmd("HVALS", MISSING), cmd("HGETALL"),
    cmd("HKEYS", H, "x"), cmd("HVALS"), cmd("HSETNX", H, "f1", "x"), cmd("HSETNX", H, "new", "y"),
    cmd("HSETNX", H2, "a", "b"), cmd("HSETNX", H2, "a"), cmd("HGET", H, "new"),
    cmd("HDEL", H, "f1", "f1", "nope"), cmd("HDEL", MISSING, "a"), cmd("HDEL", H),
    cmd("HDEL", H2, "a"), cmd("EXISTS", H2), cmd("TYPE", H), cmd("HLEN", H),
    cmd("HSET", H, b"a\x00b", b"\r\n", "", ""), cmd("HGET", H, b"a\x00b"), cmd("HGET", H, ""),
    cmd("HSTRLEN", H, b"a\x00b"), cmd("HEXISTS", H, ""), cmd("HGETALL", H),
    cmd("HSET", H2, "x", "1", "y", "2"), cmd("HDEL", H2, "x", "y", "z"), cmd("EXISTS", H2),
    cmd("HSET", H2, "long", "v" * 3000), cmd("HSTRLEN", H2, "long"), cmd("HGET", H2, "long"),
    cmd("hset", H2, "f" * 5000, "w"), cmd("HGET", H2, "f" * 5000), cmd("HKEYS", H2),
    # Another type at the key.
    cmd("SET", S, "str"), cmd("HSET", S, "a", "b"), cmd("HSETNX", S, "a", "b"), cmd("HGET", S, "a"),
    cmd("HMGET", S, "a"), cmd("HMSET", S, "a", "b"), cmd("HGETALL", S), cmd("HDEL", S, "a"),
    cmd("HEXISTS", S, "a"), cmd("HINCRBY", S, "a", "1"), cmd("HINCRBYFLOAT", S, "a", "1"),
    cmd("HKEYS", S), cmd("HVALS", S), cmd("HLEN", S), cmd("HSTRLEN", S, "a"), cmd("HRANDFIELD", S),
    cmd("HRANDFIELD", S, "1"), cmd("HRANDFIELD", S, "0"), cmd("HSCAN", S, "0"),
    cmd("HSET", S, "a"), cmd("HINCRBY", S, "a", "x"), cmd("HINCRBYFLOAT", S, "a", "x"),
    cmd("HRANDFIELD", S, "x"), cmd("HSCAN", S, "x"), cmd("GET", S),
    # An expired key is absent.
    cmd("SET", E, "v", "PXAT", "1"), cmd("HGET", E, "f"), cmd("HLEN", E), cmd("HGETALL", E),
    cmd("HDEL", E, "f"), cmd("HSET", E, "f", "v"), cmd("TYPE", E), cmd("HGETALL", E),
    cmd("SET", E, "v", "PXAT", "1"), cmd("HINCRBY", E, "n", "2"), cmd("HGETALL", E),
]

INCREMENTS = [
    RESET,
    cmd("HINCRBY", H, "n", "5"), cmd("HINCRBY", H, "n", "-10"), cmd("HINCRBY", H, "n", "x"),
    cmd("HINCRBY", H, "n", "1.5"), cmd("HINCRBY", H, "n", "9223372036854775807"),
    cmd("HINCRBY", H, "n", "10"), cmd("HINCRBY", H, "n", "9223372036854775808"),
    cmd("HINCRBY", H, "n", "-0"), cmd("HINCRBY", H, "n", "007"), cmd("HINCRBY", H, "n", ""),
    cmd("HINCRBY", H, "n", " 1"), cmd("HINCRBY", H, "n", "0"), cmd("HSET", H, "s", "notnum"),
    cmd("HINCRBY", H, "s", "1"), cmd("HSET", H, "big", "9223372036854775807"),
    cmd("HINCRBY", H, "big", "1"), cmd("HSET", H, "neg", "-9223372036854775808"),
    cmd("HINCRBY", H, "neg", "-1"), cmd("HINCRBY", H, "neg", "0"), cmd("HINCRBY", H, "neg", "1"),
    cmd("HSET", H, "sp", " 1"), cmd("HINCRBY", H, "sp", "1"), cmd("HSET", H, "lz", "01"),
    cmd("HINCRBY", H, "lz", "1"), cmd("HINCRBY", H2, "f", "3"), cmd("HGETALL", H2),
    cmd("HINCRBY", H, "n"), cmd("HINCRBY", H, "n", "1", "2"), cmd("HLEN", H),
    cmd("HSET", H, "fl", "10.50"), cmd("HINCRBYFLOAT", H, "fl", "0.1"),
    cmd("HSET", H, "fl2", "5.0e3"), cmd("HINCRBYFLOAT", H, "fl2", "2.0e2"),
    cmd("HINCRBYFLOAT", H, "fl2", "-5.2"), cmd("HINCRBYFLOAT", H, "fl", "abc"),
    cmd("HINCRBYFLOAT", H, "fl", "inf"), cmd("HINCRBYFLOAT", H, "fl", "-Infinity"),
    cmd("HINCRBYFLOAT", H, "fl", "nan"), cmd("HINCRBYFLOAT", H, "fl", ""),
    cmd("HINCRBYFLOAT", H, "fl", "1e"), cmd("HINCRBYFLOAT", H, "fl", " 1"),
    cmd("HSET", H, "fs", "abc"), cmd("HINCRBYFLOAT", H, "fs", "1"),
    cmd("HSET", H, "finf", "inf"), cmd("HINCRBYFLOAT", H, "finf", "1"),
    cmd("HINCRBYFLOAT", H, "n", "1.5"), cmd("HSET", H, "huge", "1e4932"),
    cmd("HINCRBYFLOAT", H, "huge", "1e4932"), cmd("HINCRBYFLOAT", H, "huge", "-1e4932"),
    cmd("HINCRBYFLOAT", H, "hex", "0x10"), cmd("HINCRBYFLOAT", H, "hex", "0x1.8p-3"),
    cmd("HINCRBYFLOAT", H, "tiny", "1e-20"), cmd("HINCRBYFLOAT", H, "tiny", "-1e-20"),
    cmd("HINCRBYFLOAT", H, "z", "-0.0"), cmd("HINCRBYFLOAT", H, "z", ".5"),
    cmd("HINCRBYFLOAT", H, "z", "5."), cmd("HINCRBYFLOAT", H, "z", "+1E2"),
    cmd("HINCRBYFLOAT", H, "third", "0.333333333333333333333333"),
    cmd("HINCRBYFLOAT", H, "third", "0.333333333333333333333333"),
    cmd("HINCRBYFLOAT", H, "e20", "1e20"), cmd("HINCRBYFLOAT", H, "e20", "1"),
    cmd("HINCRBYFLOAT", H, "e300", "1.5e300"), cmd("HINCRBYFLOAT", H, "small", "1e-4940"),
    cmd("HINCRBYFLOAT", H, "small", "1e-5000"), cmd("HINCRBYFLOAT", H, "big", "1"),
    cmd("HINCRBYFLOAT", H2, "g", "2.5"), cmd("HINCRBYFLOAT", H, "fl"), cmd("HGETALL", H),
    cmd("HGETALL", H2), cmd("HLEN", H),
]

RANDOM_AND_SCAN = [
    RESET,
    cmd("HSET", H, "a", "1", "b", "2", "c", "3", "d", "4", "e", "5"),
    cmd("HRANDFIELD", H), cmd("HRANDFIELD", H, "0"), cmd("HRANDFIELD", H, "3"),
    cmd("HRANDFIELD", H, "1"), cmd("HRANDFIELD", H, "100"), cmd("HRANDFIELD", H, "-7"),
    cmd("HRANDFIELD", H, "-1"), cmd("HRANDFIELD", H, "3", "WITHVALUES"),
    cmd("HRANDFIELD", H, "-7", "withvalues"), cmd("HRANDFIELD", H, "100", "WithValues"),
    cmd("HRANDFIELD", H, "0", "WITHVALUES"), cmd("HRANDFIELD", H, "1", "foo"),
    cmd("HRANDFIELD", H, "1", "withvalues", "x"), cmd("HRANDFIELD", H, "x"),
    cmd("HRANDFIELD", H, "-9223372036854775808"), cmd("HRANDFIELD", H, "-9223372036854775809"),
    cmd("HRANDFIELD", H, "4611686018427387904", "WITHVALUES"),
    cmd("HRANDFIELD", H, "-4611686018427387904", "WITHVALUES"),
    cmd("HRANDFIELD", H, "4611686018427387903", "WITHVALUES"), cmd("HRANDFIELD", H, "9223372036854775807"),
    cmd("HRANDFIELD", MISSING), cmd("HRANDFIELD", MISSING, "5"),
    cmd("HRANDFIELD", MISSING, "5", "WITHVALUES"), cmd("HRANDFIELD", MISSING, "0"),
    cmd("HRANDFIELD", MISSING, "x"), cmd("HRANDFIELD", MISSING, "1", "x"), cmd("HRANDFIELD"),
    cmd("HSET", H2, "f10", "x", "f11", "y", "g1", "z", "f2", "w", "[x]", "q", "a*b", "r"),
    cmd("HSCAN", H2, "0"), cmd("HSCAN", H2, "0", "COUNT", "100"), cmd("HSCAN", H2, "0", "MATCH", "f1*"),
    cmd("HSCAN", H2, "0", "match", "*", "count", "20"), cmd("HSCAN", H2, "0", "MATCH", "f?"),
    cmd("HSCAN", H2, "0", "MATCH", "[fg]1"), cmd("HSCAN", H2, "0", "MATCH", "[^f]*"),
    cmd("HSCAN", H2, "0", "MATCH", "\\[x\\]"), cmd("HSCAN", H2, "0", "MATCH", "a\\*b"),
    cmd("HSCAN", H2, "0", "MATCH", "[a-f]*"), cmd("HSCAN", H2, "0", "MATCH", "nothing"),
    cmd("HSCAN", H2, "0", "MATCH", "f*", "MATCH", "g*"), cmd("HSCAN", H2, "0", "COUNT", "0"),
    cmd("HSCAN", H2, "0", "COUNT", "-1"), cmd("HSCAN", H2, "0", "COUNT", "x"),
    cmd("HSCAN", H2, "0", "FOO"), cmd("HSCAN", H2, "0", "MATCH"), cmd("HSCAN", H2, "x"),
    cmd("HSCAN", H2, "0", "TYPE", "string"), cmd("HSCAN", H2, ""), cmd("HSCAN", H2, "+0"),
    cmd("HSCAN", H2, "-"), cmd("HSCAN", H2, " 0"), cmd("HSCAN", H2, "18446744073709551616"),
    cmd("HSCAN", MISSING, "0", "COUNT", "0"), cmd("HSCAN", MISSING, "x"), cmd("HSCAN", H2),
    cmd("HSCAN", MISSING, "7"),
]

RESP3 = [
    RESET, cmd("HELLO", "3"),
    cmd("HSET", H, "a", "1", "b", "2", "c", "3"), cmd("HGETALL", H), cmd("HGETALL", MISSING),
    cmd("HKEYS", H), cmd("HVALS", MISSING), cmd("HMGET", H, "a", "zz"), cmd("HMGET", MISSING, "a"),
    cmd("HGET", H, "zz"), cmd("HRANDFIELD", MISSING), cmd("HRANDFIELD", MISSING, "3"),
    cmd("HRANDFIELD", H, "2", "WITHVALUES"), cmd("HRANDFIELD", H, "-5", "WITHVALUES"),
    cmd("HRANDFIELD", H, "100", "WITHVALUES"), cmd("HRANDFIELD", H, "1", "WITHVALUES"),
    cmd("HINCRBYFLOAT", H, "a", "1.25"), cmd("HEXISTS", H, "a"), cmd("HSCAN", H, "0"),
    cmd("HSCAN", MISSING, "0"), cmd("SET", S, "x"), cmd("HGETALL", S),
]

SEQUENCES = {"basics": BASICS, "increments": INCREMENTS, "random_and_scan": RANDOM_AND_SCAN,
             "resp3": RESP3}


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_same_replies_as_redis_server(redis_door, redis_reference, name, pipeline):
    differential(redis_door, redis_reference, SEQUENCES[name], pipeline=pipeline,
                 normalize=normalize)


def random_sequence(seed, n=400):
    r = random.Random(seed)
    keys = [P + "r1", P + "r2", P + "rs"]
    fields = ["f0", "f1", "f2", "f3", "f4", "f5"]

    def value():
        return r.choice([str(r.randint(-100, 100)), f"{r.uniform(-50, 50):.{r.randint(0, 4)}f}",
                         "x" * r.randint(0, 3), "9223372036854775807", "1e3"])

    reqs = [RESET]
    for _ in range(n):
        k, f = r.choice(keys), r.choice(fields)
        c = r.randrange(19)
        if c == 0:
            flat = [x for _ in range(r.randint(1, 4)) for x in (r.choice(fields), value())]
            reqs.append(cmd(r.choice(["HSET", "HMSET"]), k, *flat))
        elif c == 1:
            reqs.append(cmd("HSETNX", k, f, value()))
        elif c == 2:
            reqs.append(cmd("HGET", k, f))
        elif c == 3:
            reqs.append(cmd("HMGET", k, *r.sample(fields, r.randint(1, 4))))
        elif c == 4:
            reqs.append(cmd(r.choice(["HGETALL", "HKEYS", "HVALS", "HLEN"]), k))
        elif c == 5:
            reqs.append(cmd("HDEL", k, *r.sample(fields, r.randint(1, 3))))
        elif c == 6:
            reqs.append(cmd("HEXISTS", k, f))
        elif c == 7:
            reqs.append(cmd("HSTRLEN", k, f))
        elif c == 8:
            reqs.append(cmd("HINCRBY", k, f, r.choice(["1", "-3", "100", "x", "9223372036854775807"])))
        elif c == 9:
            reqs.append(cmd("HINCRBYFLOAT", k, f, r.choice(["0.1", "-2.5", "1e2", "abc", "3"])))
        elif c == 10:
            reqs.append(cmd("HRANDFIELD", k, *r.choice([[], [str(r.randint(-8, 8))],
                                                        [str(r.randint(-8, 8)), "WITHVALUES"], ["60"]])))
        elif c == 11:
            reqs.append(cmd("HSCAN", k, "0", "COUNT", "100", *r.choice([[], ["MATCH", "f[0-2]"]])))
        elif c == 12:
            reqs.append(cmd("SET", k, value()))
        elif c == 13:
            reqs.append(cmd("DEL", k))
        elif c == 14:
            reqs.append(cmd("TYPE", k))
        elif c == 15:
            reqs.append(cmd("GET", k))
        elif c == 16:
            reqs.append(cmd("EXISTS", k))
        else:
            reqs.append(cmd("HSET", k, f, value()))
    for k in keys:
        reqs.append(cmd("HGETALL", k))
    return reqs


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
def test_random_sequence(redis_door, redis_reference, pipeline):
    differential(redis_door, redis_reference, random_sequence(20260124), pipeline=pipeline,
                 normalize=normalize)


def test_hrandfield_picks(redis_door):
    c = Conn(redis_door)
    try:
        assert c.call("AUTH", "app", "app") == "OK"
        c.call("DEL", H)
        want = {b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4", b"e": b"5"}
        c.call("HSET", H, *[x for kv in want.items() for x in kv])
        seen = set()
        for _ in range(40):
            f = c.call("HRANDFIELD", H)
            assert f in want
            seen.add(f)
        assert len(seen) > 1
        three = c.call("HRANDFIELD", H, "3")
        assert len(three) == 3 and len(set(three)) == 3 and set(three) <= set(want)
        many = c.call("HRANDFIELD", H, "-20")
        assert len(many) == 20 and set(many) <= set(want)
        flat = c.call("HRANDFIELD", H, "-9", "WITHVALUES")
        assert len(flat) == 18 and all(want[f] == v for f, v in zip(flat[0::2], flat[1::2]))
        flat = c.call("HRANDFIELD", H, "4", "WITHVALUES")
        assert len(set(flat[0::2])) == 4 and all(want[f] == v for f, v in zip(flat[0::2], flat[1::2]))
        c.call("HELLO", "3")
        nested = c.call("HRANDFIELD", H, "-6", "WITHVALUES")
        assert len(nested) == 6 and all(len(p) == 2 and want[p[0]] == p[1] for p in nested)
        assert c.call("HRANDFIELD", H, "-2000000") == Err("ERR manifold: HRANDFIELD count is too large")
    finally:
        c.close()


def test_hscan_pages(redis_door):
    """A hash walked page by page: every field once, MATCH filtering each page."""
    big = P + "big"
    c = Conn(redis_door)
    try:
        assert c.call("AUTH", "app", "app") == "OK"
        c.call("DEL", big)
        fields = {f"field:{i}".encode(): str(i).encode() for i in range(300)}
        c.call("HSET", big, *[x for kv in fields.items() for x in kv])
        for count, pattern, want in ((7, None, fields), (50, "field:1*",
                                     {f: v for f, v in fields.items() if f.startswith(b"field:1")})):
            got = {}
            extra = ["COUNT", str(count)] + (["MATCH", pattern] if pattern else [])
            pages = scan_pages(c, ["HSCAN", big], extra)
            for flat in pages:
                assert len(flat) <= 2 * count
                for f, v in zip(flat[0::2], flat[1::2]):
                    assert f not in got
                    got[f] = v
            assert got == want
            assert len(pages) >= 300 // count
        assert c.call("HLEN", big) == 300
        assert c.call("HDEL", big, *fields) == 300
        assert c.call("EXISTS", big) == 0
    finally:
        c.close()
