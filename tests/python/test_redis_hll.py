"""The Redis door's HyperLogLog commands (PFADD, PFCOUNT, PFMERGE) against Debian's
redis-server 7.0: the same requests to both, the same replies expected, pipelined and one
at a time. The values are Redis's own bytes (sparse, dense, the cached count in the
header), so GET is compared after every step, and values move both ways (GET on one
server, SET on the other, then counted and added to).

Intended differences from redis-server: none in the replies. (COMMAND INFO says PFCOUNT
writes: it stores the count it computes, as Redis does.) PFDEBUG and PFSELFTEST are not
served.
"""

import random

from redisdiff import AUTH, PASSWORD, USER, Conn, cmd, differential, raw_reply, replies

P = "hll:"
A, B, C, D, STR, LIST, MISSING = (P + n for n in ("a", "b", "c", "d", "str", "list", "missing"))
ALL = [A, B, C, D, STR, LIST, MISSING, P + "copy", P + "m", P + "r1", P + "r2", P + "r3"]
RESET = cmd("DEL", *ALL)


def check(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, requests, pipeline=pipeline)


def test_pfadd_pfcount_and_bytes(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("PFADD", A), cmd("GET", A), cmd("PFADD", A), cmd("PFCOUNT", A), cmd("GET", A),
        cmd("PFADD", A, "x"), cmd("GET", A), cmd("PFADD", A, "x"), cmd("PFCOUNT", A), cmd("GET", A),
        cmd("PFADD", A, "y", "z", "x", ""), cmd("PFCOUNT", A), cmd("PFCOUNT", A), cmd("GET", A),
        cmd("PFADD", B, *[f"e{i}" for i in range(200)]), cmd("GET", B), cmd("PFCOUNT", B), cmd("GET", B),
        cmd("PFCOUNT", MISSING), cmd("EXISTS", MISSING), cmd("PFCOUNT", A, B, MISSING),
        cmd("PFCOUNT", MISSING, MISSING), cmd("TYPE", A), cmd("STRLEN", A),
        # Elements of every length around MurmurHash's 8-byte blocks, binary ones.
        cmd("PFADD", C, *["q" * n for n in range(20)], b"\x00", b"\xff\xfe", "é"), cmd("GET", C),
        cmd("PFCOUNT", C), cmd("GET", C),
    ])


def test_sparse_to_dense_promotion(redis_door, redis_reference):
    """Elements one batch at a time past hll-sparse-max-bytes (3000): the promotion to
    dense at the same PFADD, the same bytes before and after."""
    reqs = [RESET]
    for i in range(0, 3000, 100):
        reqs += [cmd("PFADD", A, *[f"m{j}" for j in range(i, i + 100)]), cmd("GET", A), cmd("PFCOUNT", A)]
    reqs += [cmd("STRLEN", A), cmd("PFADD", A, "m1", "m2"), cmd("PFADD", A, "new-one"), cmd("GET", A)]
    # A register past 32 (the sparse VAL's largest) promotes at once: found by hashing.
    check(redis_door, redis_reference, reqs)


def test_pfmerge(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("PFADD", A, *[f"a{i}" for i in range(50)]),
        cmd("PFADD", B, *[f"b{i}" for i in range(3000)]),  # dense
        cmd("PFADD", C, "a1", "c1", "c2"),
        cmd("PFMERGE", D, A, C), cmd("GET", D), cmd("PFCOUNT", D), cmd("GET", D),
        cmd("PFMERGE", D), cmd("GET", D),
        cmd("PFMERGE", D, B), cmd("GET", D), cmd("PFCOUNT", D),
        cmd("PFMERGE", P + "m"), cmd("GET", P + "m"), cmd("PFMERGE", P + "m", MISSING), cmd("GET", P + "m"),
        cmd("PFMERGE", C, C, A), cmd("GET", C), cmd("PFCOUNT", C), cmd("PFCOUNT", A, B, C, D),
        cmd("PFMERGE", A, B), cmd("GET", A), cmd("EXISTS", MISSING),
        cmd("SET", STR, "plain"), cmd("PFMERGE", D, STR), cmd("PFMERGE", STR, A), cmd("GET", STR),
    ])


def test_errors_and_wrong_types(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("PFADD"), cmd("PFCOUNT"), cmd("PFMERGE"),
        cmd("SET", STR, "not an hll at all"), cmd("RPUSH", LIST, "x"),
        cmd("PFADD", STR, "a"), cmd("PFCOUNT", STR), cmd("PFMERGE", A, STR), cmd("PFCOUNT", A, STR),
        cmd("PFADD", LIST, "a"), cmd("PFCOUNT", LIST), cmd("PFMERGE", A, LIST), cmd("PFCOUNT", A, LIST),
        cmd("PFMERGE", LIST, A), cmd("EXISTS", A),
        # Strings that look like HLLs but are not: short, a bad encoding, a dense of the wrong length.
        cmd("SET", STR, "HYLL"), cmd("PFCOUNT", STR),
        cmd("SET", STR, b"HYLL\x02" + b"\x00" * 11 + b"\x7f\xff"), cmd("PFCOUNT", STR), cmd("PFADD", STR, "a"),
        cmd("SET", STR, b"HYLL\x00" + b"\x00" * 11 + b"\x00" * 100), cmd("PFCOUNT", STR),
        cmd("SET", STR, 123456789012345678), cmd("PFCOUNT", STR),
        # Corrupt sparse values: runs that do not cover the 16384 registers.
        cmd("SET", STR, b"HYLL\x01" + b"\x00" * 10 + b"\x80" + b"\x7f\xfe"), cmd("PFCOUNT", STR),
        cmd("PFCOUNT", STR, A), cmd("PFMERGE", A, STR), cmd("PFADD", STR, "zzz"),
        cmd("SET", STR, b"HYLL\x01" + b"\x00" * 10 + b"\x80" + b"\x7f\xff\x00"), cmd("PFCOUNT", STR),
        cmd("SET", STR, b"HYLL\x01" + b"\x00" * 11), cmd("PFCOUNT", STR), cmd("PFADD", STR, "a"),
        # A valid sparse value with a cached count that is wrong: returned as cached.
        cmd("SET", STR, b"HYLL\x01\x00\x00\x00" + (12345).to_bytes(8, "little") + b"\x7f\xff"),
        cmd("PFCOUNT", STR), cmd("PFCOUNT", STR, MISSING), cmd("PFADD", STR, "x"), cmd("PFCOUNT", STR),
        cmd("GET", STR),
    ])


def test_values_move_between_servers(redis_door, redis_reference):
    """A value made on redis-server, SET on the door (and the reverse), counted and grown
    there: the same bytes as growing it on its home server."""
    rng = random.Random(27)
    elements = [f"v{rng.random()}" for _ in range(4000)]
    for home, away in ((redis_reference, redis_door), (redis_door, redis_reference)):
        for n in (10, 500, 4000):
            made = replies(home, [AUTH, RESET, cmd("PFADD", A, *elements[:n]), cmd("GET", A)])[3]
            more = [cmd("PFADD", A, *elements[n:n + 300]), cmd("PFCOUNT", A), cmd("GET", A),
                    cmd("PFMERGE", B, A), cmd("GET", B), cmd("PFCOUNT", A, B)]
            there = replies(away, [AUTH, RESET, cmd("SET", A, made), *more])
            here = replies(home, [AUTH, *more])
            assert there[3:] == here[1:], f"{n} elements"


def random_requests(rng, n):
    keys = [P + "r1", P + "r2", P + "r3"]
    pool = [f"k{i}" for i in range(6000)]
    out = [cmd("DEL", *keys)]
    for _ in range(n):
        r = rng.random()
        k = rng.choice(keys)
        if r < 0.55:
            out.append(cmd("PFADD", k, *rng.sample(pool, rng.choice([0, 1, 2, 5, 30, 200]))))
        elif r < 0.7:
            out.append(cmd("PFCOUNT", k))
        elif r < 0.78:
            out.append(cmd("PFCOUNT", *rng.sample(keys, rng.randint(2, 3))))
        elif r < 0.86:
            out.append(cmd("PFMERGE", k, *rng.sample(keys, rng.randint(0, 2))))
        elif r < 0.9:
            out.append(cmd("DEL", k))
        else:
            out.append(cmd("GET", k))
    return out + [cmd("GET", k) for k in keys] + [cmd("PFCOUNT", k) for k in keys]


def test_random_sequences(redis_door, redis_reference):
    for seed in range(4):
        rng = random.Random(seed)
        check(redis_door, redis_reference, random_requests(rng, 150))


def test_resp3_and_transactions(redis_door, redis_reference):
    body = [
        RESET, cmd("PFADD", A, "a", "b"), cmd("PFCOUNT", A), cmd("PFCOUNT", A, MISSING),
        cmd("MULTI"), cmd("PFADD", A, "c"), cmd("PFCOUNT", A), cmd("GET", A), cmd("PFMERGE", B, A), cmd("EXEC"),
        cmd("GET", B), cmd("SET", STR, "x"), cmd("PFADD", STR, "a"),
    ]
    for hello in (None, cmd("HELLO", "3")):
        requests = [AUTH] + ([hello] if hello else []) + body
        for pipeline in (True, False):
            got = replies(redis_door, requests, pipeline, read=raw_reply)
            want = replies(redis_reference, requests, pipeline, read=raw_reply)
            for i, (req, g, w) in enumerate(zip(requests, got, want)):
                if req == hello:
                    continue
                assert g == w, f"request {i} {req!r}: manifold {g!r}, redis-server {w!r}"


def test_watch_sees_pfcount_caching(redis_door, redis_reference):
    """PFCOUNT that stores its count touches the key (a WATCH fails), as in Redis; one that
    reads a cached count does not."""
    for port in (redis_door, redis_reference):
        c, other = Conn(port), Conn(port)
        try:
            for conn in (c, other):
                assert conn.call("AUTH", USER, PASSWORD) == "OK"
            c.call("DEL", A)
            c.call("PFADD", A, "x")
            c.call("WATCH", A)
            other.call("PFCOUNT", A)
            c.call("MULTI")
            c.call("GET", A)
            assert c.call("EXEC") is None, port
            c.call("WATCH", A)
            other.call("PFCOUNT", A)
            c.call("MULTI")
            c.call("GET", A)
            assert c.call("EXEC") is not None, port
        finally:
            c.close()
            other.close()

