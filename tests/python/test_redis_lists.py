"""The Redis door's list commands (LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE,
LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP), differential against
Debian's redis-server 7.0: the same requests to both, the same replies expected, each
sequence pipelined and one request at a time, in RESP2 and RESP3 (exact bytes for the null
shapes).

Intended differences from redis-server: none in these replies (list order is defined); only
`PTTL` values are compared coarsely (`redisdiff.ttl`), as the servers run a little apart.
"""

import random
import re
import time

import pytest

from conftest import USER, PASSWORD
import redisdiff
from redisdiff import AUTH, cmd, differential, raw, ttl

L = "lists:"
KEYS = [f"{L}{n}" for n in ("a", "b", "c", "s", "h", "e", "big", "x")]


def reset():
    return cmd("DEL", *KEYS)


def c(*args):
    return cmd(*args)


SEQUENCES = {
    "push_pop": [
        reset(),
        c("LPUSH", L + "a", "x"), c("LPUSH", L + "a", "y", "z"), c("RPUSH", L + "a", "1", "2", "3"),
        c("LRANGE", L + "a", "0", "-1"), c("LLEN", L + "a"),
        c("LPUSHX", L + "b", "q"), c("RPUSHX", L + "b", "q"), c("EXISTS", L + "b"),
        c("LPUSHX", L + "a", "h1", "h2"), c("RPUSHX", L + "a", "t1"), c("LRANGE", L + "a", "0", "-1"),
        c("LPOP", L + "a"), c("RPOP", L + "a"), c("LPOP", L + "a", "2"), c("RPOP", L + "a", "2"),
        c("LRANGE", L + "a", "0", "-1"), c("LPOP", L + "a", "0"), c("RPOP", L + "a", "0"),
        c("LPOP", L + "a", "100"), c("EXISTS", L + "a"), c("LLEN", L + "a"),
        c("LPOP", L + "a"), c("RPOP", L + "a"), c("LPOP", L + "a", "3"), c("RPOP", L + "a", "0"),
        c("LPOP", L + "a", "-1"), c("LPOP", L + "a", "x"), c("RPOP", L + "a", "01"),
        c("LPOP", L + "a", "1", "2"), c("RPOP", L + "a", "1", "2"), c("LPOP"), c("LPUSH", L + "a"),
        c("RPUSH", L + "a", "v"), c("RPOP", L + "a", "5"), c("TYPE", L + "a"),
        c("RPUSH", L + "b", "1", "2", "3", "4", "5"), c("RPOP", L + "b", "3"), c("LPOP", L + "b", "9223372036854775807"),
        c("LPOP", L + "b", "9223372036854775808"),
        c("RPUSH", L + "b", b"bin\x00\r\nary", "", " sp ", "12", "-0", "3.0"), c("LRANGE", L + "b", "0", "-1"),
        c("LPOP", L + "b", "10"),
    ],
    "wrongtype": [
        reset(),
        c("SET", L + "s", "str"),
        c("LPUSH", L + "s", "a"), c("RPUSH", L + "s", "a"), c("LPUSHX", L + "s", "a"), c("RPUSHX", L + "s", "a"),
        c("LPOP", L + "s"), c("RPOP", L + "s", "2"), c("LPOP", L + "s", "0"), c("LPOP", L + "s", "x"),
        c("LLEN", L + "s"), c("LRANGE", L + "s", "0", "-1"), c("LRANGE", L + "s", "x", "1"),
        c("LINDEX", L + "s", "0"), c("LINDEX", L + "s", "x"), c("LSET", L + "s", "0", "v"), c("LSET", L + "s", "x", "v"),
        c("LINSERT", L + "s", "BEFORE", "a", "b"), c("LINSERT", L + "s", "middle", "a", "b"),
        c("LREM", L + "s", "0", "a"), c("LREM", L + "s", "x", "a"), c("LTRIM", L + "s", "0", "1"),
        c("LPOS", L + "s", "a"), c("LPOS", L + "s", "a", "RANK", "0"),
        c("LMOVE", L + "s", L + "a", "LEFT", "RIGHT"), c("RPUSH", L + "a", "1", "2"),
        c("LMOVE", L + "a", L + "s", "LEFT", "RIGHT"), c("RPOPLPUSH", L + "a", L + "s"),
        c("RPOPLPUSH", L + "s", L + "a"), c("LRANGE", L + "a", "0", "-1"),
        c("LMPOP", "2", L + "s", L + "a", "LEFT"), c("LMPOP", "2", L + "a", L + "s", "LEFT"),
        c("LMPOP", "2", L + "zz", L + "s", "RIGHT"), c("GET", L + "s"), c("LRANGE", L + "a", "0", "-1"),
    ],
    "ranges": [
        reset(),
        c("RPUSH", L + "a", *"abcdefghij"),
        *[c("LRANGE", L + "a", s, e) for s, e in [
            ("0", "-1"), ("0", "0"), ("-1", "-1"), ("2", "5"), ("5", "2"), ("-3", "100"), ("-100", "2"),
            ("10", "20"), ("9", "9"), ("-11", "-11"), ("-10", "-10"), ("0", "-11"),
            ("-9223372036854775808", "9223372036854775807"), ("9223372036854775807", "-9223372036854775808"),
            ("x", "1"), ("1", "x"), ("1.5", "2"), ("01", "2"), (" 1", "2"), ("9223372036854775808", "1")]],
        c("LRANGE", L + "zz", "0", "-1"), c("LRANGE", L + "zz", "x", "-1"),
        *[c("LINDEX", L + "a", i) for i in
          ["0", "9", "10", "-1", "-10", "-11", "5", "x", "", "-9223372036854775808", "9223372036854775807"]],
        c("LINDEX", L + "zz", "0"), c("LINDEX", L + "zz", "notanumber"),
        c("LSET", L + "a", "0", "A"), c("LSET", L + "a", "-1", "J"), c("LSET", L + "a", "4", b"E\x00"),
        c("LSET", L + "a", "10", "no"), c("LSET", L + "a", "-11", "no"), c("LSET", L + "a", "x", "no"),
        c("LSET", L + "zz", "0", "no"), c("LSET", L + "zz", "x", "no"), c("LRANGE", L + "a", "0", "-1"),
        c("LRANGE", L + "a", "0"), c("LINDEX", L + "a"), c("LSET", L + "a", "0"), c("LLEN", L + "a", "b"),
    ],
    "ltrim": [
        reset(),
        c("RPUSH", L + "a", *"abcdefghij"), c("LTRIM", L + "a", "1", "-2"), c("LRANGE", L + "a", "0", "-1"),
        c("LTRIM", L + "a", "0", "-1"), c("LLEN", L + "a"), c("LTRIM", L + "a", "-3", "100"), c("LRANGE", L + "a", "0", "-1"),
        c("LPUSH", L + "a", "p"), c("RPUSH", L + "a", "q"), c("LRANGE", L + "a", "0", "-1"),
        c("LTRIM", L + "a", "2", "1"), c("EXISTS", L + "a"), c("LTRIM", L + "a", "0", "1"),
        c("RPUSH", L + "a", "1", "2", "3"), c("LTRIM", L + "a", "5", "10"), c("EXISTS", L + "a"),
        c("RPUSH", L + "a", "1", "2", "3"), c("LTRIM", L + "a", "0", "-4"), c("EXISTS", L + "a"),
        c("RPUSH", L + "a", "1", "2", "3"), c("LTRIM", L + "a", "x", "1"), c("LTRIM", L + "a", "1", "y"),
        c("LTRIM", L + "a", "-9223372036854775808", "9223372036854775807"), c("LRANGE", L + "a", "0", "-1"),
        c("LTRIM", L + "a", "1", "1"), c("LRANGE", L + "a", "0", "-1"), c("LTRIM", L + "zz", "0", "1"),
        c("LTRIM", L + "a", "0"),
    ],
    "linsert": [
        reset(),
        c("RPUSH", L + "a", "a", "b", "c", "b", "d"),
        c("LINSERT", L + "a", "BEFORE", "b", "x"), c("LRANGE", L + "a", "0", "-1"),
        c("LINSERT", L + "a", "after", "b", "y"), c("LRANGE", L + "a", "0", "-1"),
        c("LINSERT", L + "a", "AFTER", "d", "end"), c("LINSERT", L + "a", "before", "a", "start"),
        c("LRANGE", L + "a", "0", "-1"), c("LINSERT", L + "a", "BEFORE", "nope", "z"),
        c("LINSERT", L + "a", "BEFORE", "B", "z"), c("LINSERT", L + "a", "BEFORE", "b ", "z"),
        c("LINSERT", L + "a", "AFTER", "c", "m1"), c("LINSERT", L + "a", "AFTER", "m1", "m2"),
        c("LINSERT", L + "a", "BEFORE", "m1", "m0"), c("LRANGE", L + "a", "0", "-1"),
        c("LINSERT", L + "a", "SIDEWAYS", "a", "z"), c("LINSERT", L + "zz", "BEFORE", "a", "z"),
        c("LINSERT", L + "zz", "SIDEWAYS", "a", "z"), c("EXISTS", L + "zz"), c("LINSERT", L + "a", "BEFORE", "a"),
        c("LPOP", L + "a", "3"), c("RPOP", L + "a", "2"), c("LINSERT", L + "a", "AFTER", "y", "yy"),
        c("LRANGE", L + "a", "0", "-1"), c("LINDEX", L + "a", "3"), c("LSET", L + "a", "3", "Y"),
        c("LRANGE", L + "a", "0", "-1"),
        c("RPUSH", L + "b", "only"), c("LINSERT", L + "b", "BEFORE", "only", "0"), c("LINSERT", L + "b", "AFTER", "only", "2"),
        c("LRANGE", L + "b", "0", "-1"),
    ],
    "lrem": [
        reset(),
        c("RPUSH", L + "a", *"xaxbxcxdxx"), c("LREM", L + "a", "2", "x"), c("LRANGE", L + "a", "0", "-1"),
        c("LREM", L + "a", "-2", "x"), c("LRANGE", L + "a", "0", "-1"), c("LREM", L + "a", "0", "x"),
        c("LRANGE", L + "a", "0", "-1"), c("LREM", L + "a", "0", "nope"), c("LREM", L + "a", "1", "d"),
        c("LRANGE", L + "a", "0", "-1"), c("LREM", L + "a", "-1", "a"), c("LRANGE", L + "a", "0", "-1"),
        c("LPUSH", L + "a", "b", "z", "b"), c("RPUSH", L + "a", "b"), c("LRANGE", L + "a", "0", "-1"),
        c("LREM", L + "a", "-9223372036854775808", "b"), c("LRANGE", L + "a", "0", "-1"),
        c("LREM", L + "a", "0", "z"), c("LRANGE", L + "a", "0", "-1"), c("LREM", L + "a", "9223372036854775807", "c"),
        c("EXISTS", L + "a"), c("LREM", L + "zz", "0", "a"), c("LREM", L + "zz", "x", "a"),
        c("RPUSH", L + "a", "1", "2", "1", "3", "1"), c("LREM", L + "a", "x", "1"), c("LREM", L + "a", "1.0", "1"),
        c("LREM", L + "a", "0", "1.0"), c("LREM", L + "a", "0", "1"), c("LRANGE", L + "a", "0", "-1"),
        c("RPUSH", L + "b", "k", "a", "k", "b", "k", "c", "d", "e", "f", "g"), c("LREM", L + "b", "0", "k"),
        c("LRANGE", L + "b", "0", "-1"), c("LPUSH", L + "b", "h"), c("RPUSH", L + "b", "t"), c("LRANGE", L + "b", "0", "-1"),
        c("RPUSH", L + "c", "a", "b", "c", "d", "e", "f", "k", "g", "k", "h"), c("LREM", L + "c", "0", "k"),
        c("LRANGE", L + "c", "0", "-1"), c("LPUSH", L + "c", "h"), c("RPUSH", L + "c", "t"), c("LRANGE", L + "c", "0", "-1"),
        c("LINDEX", L + "c", "-1"), c("LREM", L + "c", "0"),
    ],
    "lpos": [
        reset(),
        c("RPUSH", L + "a", "a", "b", "c", "1", "2", "3", "c", "c"),
        *[c("LPOS", L + "a", *args) for args in [
            ["c"], ["c", "RANK", "1"], ["c", "RANK", "2"], ["c", "RANK", "-1"], ["c", "RANK", "-3"], ["c", "RANK", "4"],
            ["c", "RANK", "-4"], ["c", "COUNT", "0"], ["c", "COUNT", "2"], ["c", "COUNT", "2", "RANK", "2"],
            ["c", "COUNT", "0", "RANK", "-1"], ["c", "COUNT", "0", "MAXLEN", "3"], ["c", "MAXLEN", "2"],
            ["c", "MAXLEN", "1", "RANK", "-1"], ["c", "MAXLEN", "2", "RANK", "-1", "COUNT", "0"], ["c", "MAXLEN", "0"],
            ["nope"], ["nope", "COUNT", "0"], ["C"], ["c", "RANK", "0"], ["c", "RANK", "x"], ["c", "RANK"],
            ["c", "COUNT", "-1"], ["c", "COUNT", "x"], ["c", "MAXLEN", "-1"], ["c", "MAXLEN", "x"], ["c", "FOO", "1"],
            ["c", "RANK", "-9223372036854775808"], ["c", "RANK", "9223372036854775807"],
            ["c", "RANK", "-9223372036854775807"], ["c", "RANK", "1", "RANK", "-2"], ["c", "COUNT", "1", "COUNT", "3"],
            ["c", "MAXLEN", "9223372036854775807"], ["c", "COUNT", "9223372036854775807"], ["1"], ["3", "COUNT", "5"],
            ["c", "rank", "2", "count", "1", "maxlen", "8"]]],
        c("LPOS", L + "zz", "c"), c("LPOS", L + "zz", "c", "COUNT", "1"), c("LPOS", L + "zz", "c", "RANK", "0"),
        c("LPOS", L + "a"), c("LPUSH", L + "a", "c"), c("LPOS", L + "a", "c", "COUNT", "0"),
    ],
    "lmove": [
        reset(),
        c("RPUSH", L + "a", "1", "2", "3"),
        c("LMOVE", L + "a", L + "b", "LEFT", "RIGHT"), c("LMOVE", L + "a", L + "b", "right", "left"),
        c("LRANGE", L + "a", "0", "-1"), c("LRANGE", L + "b", "0", "-1"),
        c("LMOVE", L + "a", L + "b", "LEFT", "LEFT"), c("EXISTS", L + "a"), c("LRANGE", L + "b", "0", "-1"),
        c("LMOVE", L + "a", L + "b", "LEFT", "LEFT"), c("LMOVE", L + "b", L + "b", "LEFT", "RIGHT"),
        c("LRANGE", L + "b", "0", "-1"), c("LMOVE", L + "b", L + "b", "RIGHT", "LEFT"), c("LRANGE", L + "b", "0", "-1"),
        c("LMOVE", L + "b", L + "b", "LEFT", "LEFT"), c("LMOVE", L + "b", L + "b", "RIGHT", "RIGHT"),
        c("LRANGE", L + "b", "0", "-1"), c("LMOVE", L + "b", L + "c", "UP", "LEFT"), c("LMOVE", L + "b", L + "c", "LEFT", "DOWN"),
        c("LMOVE", L + "zz", L + "c", "UP", "LEFT"), c("LMOVE", L + "b", L + "c", "LEFT"),
        c("RPOPLPUSH", L + "b", L + "c"), c("RPOPLPUSH", L + "b", L + "c"), c("RPOPLPUSH", L + "b", L + "c"),
        c("RPOPLPUSH", L + "b", L + "c"), c("EXISTS", L + "b"), c("LRANGE", L + "c", "0", "-1"),
        c("RPOPLPUSH", L + "c", L + "c"), c("LRANGE", L + "c", "0", "-1"), c("RPOPLPUSH", L + "c"),
        c("DEL", L + "c"), c("RPUSH", L + "c", "one"), c("LMOVE", L + "c", L + "c", "LEFT", "RIGHT"),
        c("LMOVE", L + "c", L + "c", "RIGHT", "LEFT"), c("RPOPLPUSH", L + "c", L + "c"), c("LRANGE", L + "c", "0", "-1"),
        c("RPOPLPUSH", L + "c", L + "a"), c("EXISTS", L + "c"), c("LRANGE", L + "a", "0", "-1"), c("LLEN", L + "a"),
    ],
    "lmpop": [
        reset(),
        c("RPUSH", L + "b", "1", "2", "3", "4"),
        c("LMPOP", "2", L + "a", L + "b", "LEFT"), c("LMPOP", "2", L + "a", L + "b", "RIGHT", "COUNT", "2"),
        c("LMPOP", "1", L + "b", "left", "count", "10"), c("LMPOP", "2", L + "a", L + "b", "LEFT"),
        c("RPUSH", L + "a", "x", "y"), c("RPUSH", L + "b", "z"), c("LMPOP", "2", L + "a", L + "b", "RIGHT", "COUNT", "1"),
        c("LMPOP", "0", L + "a", "LEFT"), c("LMPOP", "-1", L + "a", "LEFT"), c("LMPOP", "x", L + "a", "LEFT"),
        c("LMPOP", "3", L + "a", "LEFT"), c("LMPOP", "2", L + "a", "LEFT"), c("LMPOP", "1", L + "a", "MIDDLE"),
        c("LMPOP", "1", L + "a", "LEFT", "COUNT"), c("LMPOP", "1", L + "a", "LEFT", "COUNT", "0"),
        c("LMPOP", "1", L + "a", "LEFT", "COUNT", "-1"), c("LMPOP", "1", L + "a", "LEFT", "COUNT", "x"),
        c("LMPOP", "1", L + "a", "LEFT", "COUNT", "1", "COUNT", "1"), c("LMPOP", "1", L + "a", "LEFT", "FOO"),
        c("LMPOP", "9223372036854775807", L + "a", "LEFT"), c("LMPOP", "9223372036854775806", L + "a", "LEFT"),
        c("LMPOP", "1", L + "a"), c("LMPOP", "1", L + "a", "RIGHT", "COUNT", "9223372036854775807"),
        c("EXISTS", L + "a"), c("LRANGE", L + "b", "0", "-1"),
    ],
}


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_lists_same_as_redis(redis_door, redis_reference, name, pipeline):
    differential(redis_door, redis_reference, SEQUENCES[name], pipeline=pipeline)


def test_long_pushes_and_pops(redis_door, redis_reference):
    """Pushes of more elements than one INSERT takes (several statement sizes), big values."""
    big = "v" * 300_000
    values = [f"e{i}" for i in range(203)]
    seq = [
        reset(),
        c("RPUSH", L + "big", *values), c("LPUSH", L + "big", *values), c("LLEN", L + "big"),
        c("RPUSH", L + "big", *([big] * 20)), c("LLEN", L + "big"), c("LINDEX", L + "big", "-1"),
        c("LRANGE", L + "big", "195", "215"), c("LREM", L + "big", "0", big), c("LREM", L + "big", "0", "e7"),
        c("LRANGE", L + "big", "0", "-1"), c("LPOP", L + "big", "150"), c("RPOP", L + "big", "100"),
        c("LRANGE", L + "big", "0", "-1"), c("LPOS", L + "big", "e150", "COUNT", "0"),
    ]
    for pipeline in (True, False):
        differential(redis_door, redis_reference, seq, pipeline=pipeline)


NULL_SHAPES = [
    c("DEL", L + "x"), c("LPOP", L + "x"), c("RPOP", L + "x", "1"), c("LPOP", L + "x", "0"), c("LINDEX", L + "x", "0"),
    c("LPOS", L + "x", "a"), c("LPOS", L + "x", "a", "COUNT", "0"), c("LMOVE", L + "x", L + "b", "LEFT", "LEFT"),
    c("RPOPLPUSH", L + "x", L + "b"), c("LMPOP", "1", L + "x", "LEFT"), c("LRANGE", L + "x", "0", "-1"),
    c("RPUSH", L + "x", "a"), c("LINDEX", L + "x", "5"), c("LPOS", L + "x", "b"), c("LPOS", L + "x", "b", "COUNT", "1"),
    c("LPOP", L + "x", "0"), c("LMPOP", "1", L + "x", "LEFT"), c("LMPOP", "1", L + "x", "LEFT"), c("QUIT"),
]


@pytest.mark.parametrize("hello", [[AUTH], [cmd("HELLO", "3", "AUTH", USER, PASSWORD)]], ids=["resp2", "resp3"])
def test_null_shapes_exact_bytes(redis_door, redis_reference, hello):
    """`$-1` vs `*-1` (RESP2) and `_` (RESP3), `*0`: compared as bytes, not decoded."""
    payload = b"".join(hello + NULL_SHAPES)
    want = raw(redis_reference, payload)
    got = raw(redis_door, payload)
    assert want
    mask = lambda data: re.sub(rb"(\$2\r\nid\r\n):\d+\r\n", rb"\1:ID\r\n", data)  # noqa: E731
    assert mask(got) == mask(want), f"\nredis-server: {want!r}\nmanifold:     {got!r}"


def test_expired_keys_are_absent(redis_door, redis_reference):
    """An expired string is no key for the list commands; an expired list neither."""
    differential(redis_door, redis_reference, [
        reset(), c("SET", L + "s", "str", "PX", "50"), c("RPUSH", L + "e", "1", "2", "3"),
        c("SET", L + "h", "str", "PX", "50"), c("PEXPIRE", L + "e", "50"),
    ])
    time.sleep(0.2)
    for pipeline in (True, False):
        differential(redis_door, redis_reference, [
            c("LLEN", L + "e"), c("LRANGE", L + "e", "0", "-1"), c("LINDEX", L + "e", "0"),
            c("LPOS", L + "e", "1"), c("LPOP", L + "e"), c("RPOP", L + "e", "2"), c("LPUSHX", L + "e", "x"),
            c("RPUSHX", L + "e", "x"), c("LSET", L + "e", "0", "x"), c("LREM", L + "e", "0", "1"),
            c("LTRIM", L + "e", "0", "1"), c("LINSERT", L + "e", "BEFORE", "1", "0"),
            c("LMOVE", L + "e", L + "s", "LEFT", "LEFT"), c("RPOPLPUSH", L + "e", L + "s"),
            c("LMPOP", "2", L + "e", L + "h", "LEFT"), c("EXISTS", L + "e", L + "s", L + "h"),
            c("TYPE", L + "e"), c("PTTL", L + "e"),
        ], pipeline=pipeline)
    differential(redis_door, redis_reference, [
        c("LPUSH", L + "s", "a"), c("LRANGE", L + "s", "0", "-1"), c("LPOP", L + "h"), c("LPUSHX", L + "h", "a"),
        c("RPUSH", L + "e", "new"), c("LRANGE", L + "e", "0", "-1"), c("PTTL", L + "e"), reset(),
    ])


def test_writes_keep_ttl(redis_door, redis_reference):
    """Every write to a list keeps its TTL; a store into another key (LMOVE) does not give
    its TTL to the destination."""
    for pipeline in (True, False):
        differential(redis_door, redis_reference, [
            reset(), c("RPUSH", L + "a", "1", "2", "3"), c("PEXPIRE", L + "a", "3600000"),
            c("LPUSH", L + "a", "0"), c("RPOP", L + "a"), c("LSET", L + "a", "0", "z"),
            c("LINSERT", L + "a", "AFTER", "z", "y"), c("LREM", L + "a", "1", "1"), c("LTRIM", L + "a", "0", "5"),
            c("LMOVE", L + "a", L + "a", "LEFT", "RIGHT"), c("RPUSHX", L + "a", "w"), c("LPUSHX", L + "a", "v"),
            c("LPOP", L + "a"), c("LMPOP", "1", L + "a", "RIGHT"), c("LRANGE", L + "a", "0", "-1"),
            c("PTTL", L + "a"), c("LMOVE", L + "a", L + "b", "LEFT", "LEFT"), c("PTTL", L + "b"),
            c("PTTL", L + "a"), c("LLEN", L + "a"), reset(),
        ], pipeline=pipeline, normalize=ttl)


def random_sequence(seed, n=400):
    rnd = random.Random(seed)
    keys = [L + "a", L + "b", L + "c", L + "s"]
    vals = ["a", "b", "c", "", "1", "a "]
    out = [reset(), c("SET", L + "s", "string")]
    for _ in range(n):
        k, k2 = rnd.choice(keys), rnd.choice(keys)
        v = rnd.choice(vals)
        i = str(rnd.randint(-6, 6))
        j = str(rnd.randint(-6, 6))
        side = rnd.choice(["LEFT", "RIGHT"])
        op = rnd.randrange(20)
        if op == 0:
            out.append(c("LPUSH", k, *rnd.choices(vals, k=rnd.randint(1, 4))))
        elif op == 1:
            out.append(c("RPUSH", k, *rnd.choices(vals, k=rnd.randint(1, 4))))
        elif op == 2:
            out.append(c(rnd.choice(["LPUSHX", "RPUSHX"]), k, v))
        elif op == 3:
            out.append(c(rnd.choice(["LPOP", "RPOP"]), k, *([str(rnd.randint(0, 3))] if rnd.random() < 0.5 else [])))
        elif op == 4:
            out.append(c("LLEN", k))
        elif op == 5:
            out.append(c("LRANGE", k, i, j))
        elif op == 6:
            out.append(c("LINDEX", k, i))
        elif op == 7:
            out.append(c("LSET", k, i, v))
        elif op == 8:
            out.append(c("LINSERT", k, rnd.choice(["BEFORE", "AFTER"]), v, rnd.choice(vals)))
        elif op == 9:
            out.append(c("LREM", k, str(rnd.randint(-2, 2)), v))
        elif op == 10:
            out.append(c("LTRIM", k, i, j))
        elif op == 11:
            extra = []
            if rnd.random() < 0.5:
                extra += ["RANK", str(rnd.choice([-2, -1, 1, 2]))]
            if rnd.random() < 0.5:
                extra += ["COUNT", str(rnd.randint(0, 2))]
            if rnd.random() < 0.3:
                extra += ["MAXLEN", str(rnd.randint(0, 4))]
            out.append(c("LPOS", k, v, *extra))
        elif op == 12:
            out.append(c("LMOVE", k, k2, side, rnd.choice(["LEFT", "RIGHT"])))
        elif op == 13:
            out.append(c("RPOPLPUSH", k, k2))
        elif op == 14:
            out.append(c("LMPOP", "2", k, k2, side, *(["COUNT", str(rnd.randint(1, 3))] if rnd.random() < 0.5 else [])))
        elif op == 15:
            out.append(c("EXISTS", k))
        elif op == 16:
            out.append(c("TYPE", k))
        elif op == 17 and rnd.random() < 0.2:
            out.append(c("SET", k, "s"))
        elif op == 17:
            out.append(c("DEL", k))
        else:
            out.append(c("LRANGE", k, "0", "-1"))
    out += [c("LRANGE", k, "0", "-1") for k in keys]
    return out


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
@pytest.mark.parametrize("seed", [7, 2024])
def test_random_sequence(redis_door, redis_reference, seed, pipeline):
    differential(redis_door, redis_reference, random_sequence(seed), pipeline=pipeline)
