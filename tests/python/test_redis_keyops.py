"""The Redis door's key operations of issue 27 step 4 (so far LCS) against Debian's
redis-server 7.0: the same requests to both, the same replies expected, pipelined and one at
a time, RESP2 and RESP3, byte for byte. MOVE: between databases, with a key's members and TTL.

Intended differences from redis-server (not exercised here):
- LCS refuses when its table would exceed 32 Mi cells ((len1+1)*(len2+1), 128 MiB) with
  "ERR Insufficient memory, transient memory for LCS exceeds the door's limit"; redis-server
  refuses only when the allocation fails (checked on the door alone).
"""

import random

from redisdiff import AUTH, byte_for_byte, cmd, differential, raw_reply, replies

A = "keyops:a"
B = "keyops:b"
L = "keyops:l"
MISSING = "keyops:missing"
RESET = cmd("DEL", A, B, L, MISSING)
HELLO3 = cmd("HELLO", "3")


def check(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, requests, pipeline=pipeline)
        differential(door, reference, [HELLO3, *requests], pipeline=pipeline, normalize=no_hello)


def no_hello(req, reply):
    """HELLO's reply carries the connection id, which differs."""
    return None if req == HELLO3 else reply


def lcs_variants():
    return [
        cmd("LCS", A, B), cmd("LCS", A, B, "LEN"), cmd("LCS", A, B, "IDX"),
        cmd("LCS", A, B, "idx", "WITHMATCHLEN"), cmd("LCS", A, B, "IDX", "MINMATCHLEN", "2"),
        cmd("LCS", A, B, "IDX", "MINMATCHLEN", "3", "WITHMATCHLEN"),
        cmd("LCS", A, B, "IDX", "MINMATCHLEN", "-4"), cmd("LCS", B, A, "IDX", "WITHMATCHLEN"),
    ]


def test_lcs_replies_and_errors(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("LCS", A, B), cmd("LCS", A, B, "LEN"), cmd("LCS", A, B, "IDX"),
        cmd("SET", A, "ohmytext"), cmd("SET", B, "mynewtext"), *lcs_variants(),
        cmd("LCS", A, MISSING), cmd("LCS", A, A, "IDX", "WITHMATCHLEN"),
        cmd("SET", A, "12345"), cmd("SET", B, "345"), *lcs_variants(),
        # errors: wrong type first, then the options, in Redis's order
        cmd("RPUSH", L, "x"), cmd("LCS", A, L), cmd("LCS", L, A, "LEN", "IDX"),
        cmd("LCS", L, MISSING, "bogus"),
        cmd("LCS", A, B, "LEN", "IDX"), cmd("LCS", A, B, "bogus"), cmd("LCS", A, B, "MINMATCHLEN"),
        cmd("LCS", A, B, "MINMATCHLEN", "x"), cmd("LCS", A, B, "MINMATCHLEN", "1.5", "LEN", "IDX"),
        cmd("LCS", A), cmd("LCS"),
    ])


def test_lcs_random(redis_door, redis_reference):
    rng = random.Random(27)
    requests = [RESET]
    for _ in range(40):
        a = "".join(rng.choice("abc") for _ in range(rng.randint(0, 30)))
        b = "".join(rng.choice("abc") for _ in range(rng.randint(0, 30)))
        requests += [cmd("SET", A, a), cmd("SET", B, b), *lcs_variants()]
    check(redis_door, redis_reference, requests)


def test_lcs_refuses_a_table_beyond_the_limit(redis_door):
    big = "x" * 6000
    got = replies(redis_door, [AUTH, cmd("SET", A, big), cmd("SET", B, big), cmd("LCS", A, B, "LEN"),
                               cmd("SET", B, "x" * 5000), cmd("LCS", A, B, "LEN")], True, read=raw_reply)
    assert got[3] == b"-ERR Insufficient memory, transient memory for LCS exceeds the door's limit\r\n"
    assert got[5] == b":5000\r\n"


K = "keyops:k"
H = "keyops:h"
T = "keyops:t"
ALL = [K, L, H, T, MISSING]


def reset():
    out = []
    for db in ("2", "0"):
        out += [cmd("SELECT", db), cmd("DEL", *ALL)]
    return out


def test_move(redis_door, redis_reference):
    byte_for_byte(redis_door, redis_reference, reset() + [
        cmd("SET", K, "v"), cmd("RPUSH", L, "a", "b"), cmd("HSET", H, "f", "1"),
        cmd("SET", T, "x", "EX", "1000"),
        # Moved: the value, its type, its members and its TTL go with it.
        cmd("MOVE", K, "2"), cmd("EXISTS", K), cmd("MOVE", L, "2"), cmd("MOVE", H, "2"),
        cmd("MOVE", T, "2"),
        cmd("SELECT", "2"), cmd("GET", K), cmd("LRANGE", L, "0", "-1"), cmd("HGETALL", H),
        cmd("TTL", T), cmd("TYPE", L),
        # A key of that name in the target: 0, nothing moves.
        cmd("SELECT", "0"), cmd("SET", K, "other"), cmd("MOVE", K, "2"), cmd("GET", K),
        cmd("SELECT", "2"), cmd("GET", K),
        # Absent source: 0.
        cmd("MOVE", MISSING, "0"),
        # Errors: same database, range, not an integer, arity.
        cmd("MOVE", K, "2"), cmd("MOVE", MISSING, "2"), cmd("MOVE", K, "16"),
        cmd("MOVE", K, "-1"), cmd("MOVE", K, "2147483648"), cmd("MOVE", K, "x"),
        cmd("MOVE", K), cmd("MOVE", K, "1", "2"),
        cmd("MOVE", L, "0"), cmd("SELECT", "0"), cmd("LPOP", L),
    ] + reset())
