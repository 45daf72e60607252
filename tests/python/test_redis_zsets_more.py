"""The Redis door's sorted set algebra (ZUNION, ZINTER, ZDIFF, ZUNIONSTORE, ZINTERSTORE,
ZDIFFSTORE, ZINTERCARD) against Debian's redis-server 7.0: the same requests to both, the same
replies expected, pipelined and one at a time; RESP2 and RESP3 compared byte for byte.

Intended differences from redis-server: none exercised (the inputs are held in manifold's
memory while a command runs, as in Redis's).
"""

import random

from redisdiff import AUTH, cmd, differential, raw_reply, replies

A = "zalg:a"
B = "zalg:b"
C = "zalg:c"
SET = "zalg:set"
STR = "zalg:str"
DST = "zalg:dst"
MISSING = "zalg:missing"
RESET = cmd("DEL", A, B, C, SET, STR, DST, MISSING)
SETUP = [
    RESET,
    cmd("ZADD", A, "1", "x", "2", "y", "3", "z", "inf", "big", "-inf", "small", "-0", "nz"),
    cmd("ZADD", B, "10", "x", "-inf", "big", "inf", "small", "0.1", "w", "1e17", "y"),
    cmd("ZADD", C, "5", "x", "5", "y"),
    cmd("SADD", SET, "x", "q", "y"),
    cmd("SET", STR, "v"),
]


def check(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, requests, pipeline=pipeline)


def algebra_requests():
    out = []
    for name in ("ZUNION", "ZINTER", "ZDIFF"):
        out += [
            cmd(name, "2", A, B), cmd(name, "2", A, B, "WITHSCORES"), cmd(name, "3", A, B, C, "withscores"),
            cmd(name, "2", A, SET, "WITHSCORES"), cmd(name, "2", SET, A, "WITHSCORES"),
            cmd(name, "1", MISSING), cmd(name, "2", A, MISSING, "WITHSCORES"), cmd(name, "2", MISSING, A),
            cmd(name, "2", A, A, "WITHSCORES"), cmd(name, "1", SET, "WITHSCORES"),
            # Errors: numkeys, syntax, wrong types (before the options' errors, as Redis).
            cmd(name, "0", A), cmd(name, "-1", A), cmd(name, "x", A), cmd(name, "3", A, B),
            cmd(name, "2", A, STR), cmd(name, "3", A, STR, B, "WITHSCORES"), cmd(name, "2", STR, A, "BOGUS"),
            cmd(name, "2", A, B, "BOGUS"), cmd(name, "1", A, "WITHSCORES", "x"),
        ]
        if name != "ZDIFF":
            out += [
                cmd(name, "2", A, B, "WEIGHTS", "2", "3", "WITHSCORES"),
                cmd(name, "2", A, B, "WEIGHTS", "inf", "-inf", "WITHSCORES"),
                cmd(name, "2", A, B, "WEIGHTS", "0", "1", "AGGREGATE", "MIN", "WITHSCORES"),
                cmd(name, "2", A, B, "AGGREGATE", "max", "WITHSCORES"),
                cmd(name, "2", A, B, "AGGREGATE", "min", "WEIGHTS", "-1", "0.5", "WITHSCORES"),
                cmd(name, "2", A, A, "WEIGHTS", "1", "-1", "WITHSCORES"),
                cmd(name, "2", A, B, "WEIGHTS", "1", "nan"), cmd(name, "2", A, B, "WEIGHTS", "1", "x"),
                cmd(name, "2", A, B, "WEIGHTS", "1"), cmd(name, "2", A, B, "AGGREGATE", "avg"),
                cmd(name, "2", A, B, "AGGREGATE"), cmd(name, "2", A, STR, "WEIGHTS", "x", "y"),
            ]
        else:
            out += [cmd(name, "2", A, B, "WEIGHTS", "1", "2"), cmd(name, "2", A, B, "AGGREGATE", "SUM")]
    return out


def test_union_inter_diff(redis_door, redis_reference):
    check(redis_door, redis_reference, SETUP + algebra_requests())


def test_store_forms_and_intercard(redis_door, redis_reference):
    reqs = list(SETUP)
    for name in ("ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"):
        reqs += [
            cmd(name, DST, "2", A, B), cmd("ZRANGE", DST, "0", "-1", "WITHSCORES"), cmd("TTL", DST),
            cmd(name, DST, "2", A, SET), cmd("ZRANGE", DST, "0", "-1", "WITHSCORES"),
            cmd("SET", DST, "old", "EX", "100"), cmd(name, DST, "1", A), cmd("TYPE", DST), cmd("TTL", DST),
            cmd(name, DST, "1", MISSING), cmd("EXISTS", DST),
            cmd("ZADD", DST, "1", "keep"), cmd(name, DST, "2", DST, A), cmd("ZRANGE", DST, "0", "-1", "WITHSCORES"),
            cmd(name, DST, "0", A), cmd(name, DST, "x", A), cmd(name, DST, "2", A),
            cmd(name, DST, "2", A, STR), cmd(name, DST, "1", A, "WITHSCORES"), cmd("ZRANGE", DST, "0", "-1"),
        ]
        if name != "ZDIFFSTORE":
            reqs += [
                cmd(name, DST, "2", A, B, "WEIGHTS", "inf", "-inf", "AGGREGATE", "SUM"),
                cmd("ZRANGE", DST, "0", "-1", "WITHSCORES"),
                cmd(name, DST, "2", A, B, "WEIGHTS", "nan", "1"),
            ]
    reqs += [
        cmd("ZINTERCARD", "2", A, B), cmd("ZINTERCARD", "2", A, B, "LIMIT", "1"), cmd("ZINTERCARD", "2", A, B, "LIMIT", "0"),
        cmd("ZINTERCARD", "3", A, B, SET), cmd("ZINTERCARD", "1", MISSING), cmd("ZINTERCARD", "2", A, MISSING),
        cmd("ZINTERCARD", "0", A), cmd("ZINTERCARD", "x", A), cmd("ZINTERCARD", "3", A, B),
        cmd("ZINTERCARD", "1", A, "LIMIT", "-1"), cmd("ZINTERCARD", "1", A, "LIMIT", "x"),
        cmd("ZINTERCARD", "1", STR, "LIMIT", "-1"), cmd("ZINTERCARD", "1", A, "WITHSCORES"),
        cmd("ZINTERCARD", "1", A, "WEIGHTS", "1"), cmd("ZINTERCARD", "1", A, "LIMIT"),
        cmd("ZUNIONSTORE", DST), cmd("ZUNION", "1"), cmd("ZINTERCARD", "1"),
    ]
    check(redis_door, redis_reference, reqs)


def test_resp3_byte_for_byte(redis_door, redis_reference):
    body = SETUP + [
        cmd("ZUNION", "2", A, B, "WITHSCORES"), cmd("ZINTER", "2", A, B, "WITHSCORES"),
        cmd("ZDIFF", "2", A, B, "WITHSCORES"), cmd("ZUNION", "2", A, B), cmd("ZUNION", "1", MISSING, "WITHSCORES"),
        cmd("ZINTERSTORE", DST, "2", A, B), cmd("ZINTERCARD", "2", A, B),
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


def test_random_sequences(redis_door, redis_reference):
    rng = random.Random(27)
    keys = ["zalg:r1", "zalg:r2", "zalg:r3", "zalg:rs"]
    members = ["a", "b", "c", "d", "", "10", "9", "zz"]
    scores = ["0", "1", "-1", "1.5", "2", "inf", "-inf", "0.1", "-0", "1e17", "3"]
    weights = ["1", "2", "-1", "0", "0.5", "inf", "-inf"]
    reqs = [cmd("DEL", *keys, "zalg:rd")]
    for _ in range(300):
        op = rng.randrange(10)
        if op < 4:
            k = rng.choice(keys[:3])
            reqs.append(cmd("ZADD", k, *[x for _ in range(rng.randint(1, 3)) for x in (rng.choice(scores), rng.choice(members))]))
        elif op == 4:
            reqs.append(cmd("SADD", "zalg:rs", rng.choice(members)))
        elif op == 5:
            reqs.append(cmd("ZREM", rng.choice(keys[:3]), rng.choice(members)))
        else:
            name = rng.choice(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE", "ZINTERCARD"])
            n = rng.randint(1, 4)
            ks = [rng.choice(keys) for _ in range(n)]
            extra = []
            if name in ("ZUNION", "ZINTER", "ZUNIONSTORE", "ZINTERSTORE"):
                if rng.random() < 0.5:
                    extra += ["WEIGHTS", *[rng.choice(weights) for _ in ks]]
                if rng.random() < 0.5:
                    extra += ["AGGREGATE", rng.choice(["SUM", "MIN", "MAX"])]
            if name in ("ZUNION", "ZINTER", "ZDIFF"):
                extra.append("WITHSCORES")
            if name == "ZINTERCARD" and rng.random() < 0.5:
                extra += ["LIMIT", rng.choice(["0", "1", "2"])]
            head = [name, "zalg:rd"] if name.endswith("STORE") else [name]
            reqs.append(cmd(*head, str(n), *ks, *extra))
            if name.endswith("STORE"):
                reqs.append(cmd("ZRANGE", "zalg:rd", "0", "-1", "WITHSCORES"))
    check(redis_door, redis_reference, reqs)
