"""The Redis door's sorted set commands (ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZCOUNT,
ZLEXCOUNT, ZRANGE and its older forms, ZRANGESTORE, ZRANK, ZREVRANK, ZPOPMIN, ZPOPMAX,
ZREMRANGEBY*, ZSCAN) against Debian's redis-server 7.0: the same requests to both, the same
replies expected, pipelined and one at a time; RESP3 replies compared byte for byte.

Intended differences from redis-server (normalized or avoided here):
- ZSCAN pages by the members' hashes: its cursor and the order within a page differ (Redis
  answers a small sorted set whole, cursor 0). The sequences scan with a COUNT larger than
  the set, so both answer cursor 0; the pairs are compared sorted. Paging is checked on the
  door alone (every member once, cursor 0 at the end).
- Lex ranges over members of different scores (unspecified in Redis) are not compared: the
  lex commands run on a key whose scores are all 0.
- Members tied on score and longer than MariaDB's max_sort_length (1024) with a common
  prefix of that length may be ordered differently: not exercised.
"""

import random
import time

from redisdiff import AUTH, Conn, cmd, differential, raw_reply, replies, scan_pages


def is_cmd(req, *names):
    """Whether the multibulk request `req` is one of the commands `names`."""
    parts = req.split(b"\r\n")
    return len(parts) > 2 and parts[2].upper() in {n.encode() for n in names}


def normalize(req, reply):
    """ZSCAN: the pairs sorted (their order is the set's iteration order)."""
    if is_cmd(req, "ZSCAN") and isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], list):
        flat = reply[1]
        pairs = sorted(zip(flat[0::2], flat[1::2]))
        return [reply[0], pairs]
    return reply


def check(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, requests, pipeline=pipeline, normalize=normalize)


K = "zsets:k"
K2 = "zsets:k2"
LEX = "zsets:lex"
STR = "zsets:str"
DST = "zsets:dst"
MISSING = "zsets:missing"
ALL = [K, K2, LEX, STR, DST, MISSING, "zsets:e"]
RESET = cmd("DEL", *ALL)


def test_zadd_and_scores(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("ZADD", K, "1", "a"), cmd("ZADD", K, "2", "b", "3", "c"), cmd("ZADD", K, "1.5", "a"),
        cmd("ZSCORE", K, "a"), cmd("ZSCORE", K, "nope"), cmd("ZSCORE", MISSING, "a"),
        cmd("ZADD", K, "0.1", "d", "-0.5", "e", "1e17", "f", "+inf", "g", "-inf", "h"),
        cmd("ZADD", K, "0x10", "i", ".5", "j", "5.", "k", "1E3", "l", "-Infinity", "m", "1e-320", "n"),
        cmd("ZMSCORE", K, "a", "d", "nope", "f", "g", "h", "i", "n"), cmd("ZMSCORE", MISSING, "a", "b"),
        cmd("ZCARD", K), cmd("ZCARD", MISSING),
        # Scores that are not floats.
        cmd("ZADD", K, "x", "a"), cmd("ZADD", K, "nan", "a"), cmd("ZADD", K, " 1", "a"),
        cmd("ZADD", K, "1 ", "a"), cmd("ZADD", K, "", "a"), cmd("ZADD", K, "1e400", "a"),
        cmd("ZADD", K, "1e-400", "a"), cmd("ZADD", K, "1", "a", "y", "b"), cmd("ZADD", K, b"1\x002", "a"),
        # Options.
        cmd("ZADD", K, "NX", "10", "a", "10", "new1"), cmd("ZADD", K, "XX", "10", "a", "10", "new2"),
        cmd("ZADD", K, "XX", "CH", "11", "a", "10", "new2"), cmd("ZADD", K, "ch", "11", "a", "12", "b"),
        cmd("ZADD", K, "GT", "CH", "5", "a", "20", "b", "1", "new3"), cmd("ZADD", K, "LT", "CH", "5", "a", "30", "b"),
        cmd("ZADD", K, "XX", "GT", "100", "a"), cmd("ZADD", K, "INCR", "2.5", "a"),
        cmd("ZADD", K, "INCR", "NX", "1", "a"), cmd("ZADD", K, "INCR", "XX", "1", "zz"),
        cmd("ZADD", K, "INCR", "GT", "-1", "a"), cmd("ZADD", K, "INCR", "LT", "-1", "a"),
        cmd("ZADD", K, "GT", "INCR", "0", "a"), cmd("ZADD", K, "LT", "INCR", "0", "a"), cmd("ZADD", K, "XX", "INCR", "0", "a"),
        cmd("ZADD", K, "INCR", "1", "fresh"), cmd("ZADD", MISSING, "XX", "1", "a"),
        cmd("ZADD", MISSING, "XX", "INCR", "1", "a"), cmd("EXISTS", MISSING),
        cmd("ZADD", K, "NX", "XX", "1", "a"), cmd("ZADD", K, "GT", "LT", "1", "a"),
        cmd("ZADD", K, "GT", "NX", "1", "a"), cmd("ZADD", K, "LT", "NX", "1", "a"),
        cmd("ZADD", K, "INCR", "1", "a", "2", "b"), cmd("ZADD", K, "1"), cmd("ZADD", K, "NX", "1"),
        cmd("ZADD", K, "1", "a", "2"), cmd("ZADD", K, "NX"), cmd("ZADD", K, "1", "a", "2", "a"),
        cmd("ZADD", K, "CH", "3", "a", "3", "a", "4", "dup", "5", "dup"), cmd("ZSCORE", K, "dup"),
        cmd("ZADD", K, "NX", "XX", "x", "a"), cmd("ZADD", K, "INCR", "x", "a"),
        # Infinities and NaN.
        cmd("ZADD", K, "INCR", "+inf", "g"), cmd("ZADD", K, "INCR", "-inf", "g"), cmd("ZSCORE", K, "g"),
        cmd("ZINCRBY", K, "-inf", "g"), cmd("ZINCRBY", K, "1", "h"), cmd("ZINCRBY", K, "inf", "a"),
        cmd("ZINCRBY", K, "2", "a"), cmd("ZINCRBY", K, "0.1", "new4"), cmd("ZINCRBY", K, "x", "a"),
        cmd("ZINCRBY", K, "nx", "a"), cmd("ZINCRBY", K, "nx", "xx"), cmd("ZINCRBY", MISSING, "1.5", "m"),
        cmd("ZINCRBY", K, "1"), cmd("ZINCRBY", K, "1", "a", "b"),
        cmd("ZADD", K, "-0", "negzero"), cmd("ZADD", K, "0", "poszero"), cmd("ZRANGE", K, "0", "-1", "WITHSCORES"),
        cmd("ZCARD", K),
        # Wrong types and arity.
        cmd("SET", STR, "v"), cmd("ZADD", STR, "1", "a"), cmd("ZADD", STR, "XX", "1", "a"),
        cmd("ZINCRBY", STR, "1", "a"), cmd("ZSCORE", STR, "a"), cmd("ZMSCORE", STR, "a"), cmd("ZCARD", STR),
        cmd("ZADD", STR, "x", "a"), cmd("ZADD", K), cmd("ZADD", K, "1"), cmd("ZSCORE", K),
        cmd("ZSCORE", K, "a", "b"), cmd("ZMSCORE", K), cmd("ZCARD"), cmd("ZCARD", K, "x"), cmd("GET", STR),
        cmd("zadd", K, "nx", "ch", "7", "lower"), cmd("ZScore", K, "lower"),
    ])


def test_ranges(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("ZADD", K, "1", "a", "1", "b", "2", "c", "3", "d", "3", "e", "-1.5", "f", "inf", "g", "-inf", "h",
            "0.1", "i", "1", "", "1", b"\x00", "1", b"\xff", "1", "B", "1", "ab"),
        cmd("ZRANGE", K, "0", "-1"), cmd("ZRANGE", K, "0", "-1", "WITHSCORES"), cmd("ZRANGE", K, "2", "4"),
        cmd("ZRANGE", K, "-3", "-1", "withscores"), cmd("ZRANGE", K, "-100", "100"), cmd("ZRANGE", K, "5", "2"),
        cmd("ZRANGE", K, "20", "30"), cmd("ZRANGE", K, "0", "-20"), cmd("ZRANGE", K, "0", "-1", "REV"),
        cmd("ZRANGE", K, "1", "3", "REV", "WITHSCORES"), cmd("ZREVRANGE", K, "0", "2"),
        cmd("ZREVRANGE", K, "0", "-1", "WITHSCORES"), cmd("ZREVRANGE", K, "0", "1", "REV"),
        cmd("ZRANGE", K, "-9223372036854775808", "9223372036854775807"),
        # BYSCORE.
        cmd("ZRANGE", K, "1", "3", "BYSCORE"), cmd("ZRANGE", K, "(1", "3", "BYSCORE", "WITHSCORES"),
        cmd("ZRANGE", K, "1", "(3", "BYSCORE"), cmd("ZRANGE", K, "(1", "(3", "BYSCORE"),
        cmd("ZRANGE", K, "-inf", "+inf", "BYSCORE"), cmd("ZRANGE", K, "(-inf", "(inf", "BYSCORE"),
        cmd("ZRANGE", K, "inf", "-inf", "BYSCORE"), cmd("ZRANGE", K, "3", "1", "BYSCORE", "REV"),
        cmd("ZRANGE", K, "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "3", "WITHSCORES"),
        cmd("ZRANGE", K, "-inf", "inf", "BYSCORE", "LIMIT", "2", "-1"),
        cmd("ZRANGE", K, "-inf", "inf", "BYSCORE", "LIMIT", "-1", "2"),
        cmd("ZRANGE", K, "-inf", "inf", "BYSCORE", "LIMIT", "100", "2"),
        cmd("ZRANGE", K, "-inf", "inf", "BYSCORE", "LIMIT", "0", "0"),
        cmd("ZRANGE", K, "", "(", "BYSCORE"), cmd("ZRANGE", K, " 1", "1", "BYSCORE"),
        cmd("ZRANGE", K, "1", "1", "BYSCORE"), cmd("ZRANGE", K, "(1", "1", "BYSCORE"),
        cmd("ZRANGE", K, "1e400", "inf", "BYSCORE"), cmd("ZRANGE", K, "0x1", "0x2", "BYSCORE"),
        cmd("ZRANGEBYSCORE", K, "1", "3"), cmd("ZRANGEBYSCORE", K, "-inf", "inf", "WITHSCORES", "LIMIT", "1", "2"),
        cmd("ZRANGEBYSCORE", K, "-inf", "inf", "LIMIT", "1"), cmd("ZRANGEBYSCORE", K, "1", "3", "REV"),
        cmd("ZRANGEBYSCORE", K, "1", "3", "BYSCORE"), cmd("ZREVRANGEBYSCORE", K, "3", "1"),
        cmd("ZREVRANGEBYSCORE", K, "(3", "(1", "WITHSCORES"), cmd("ZREVRANGEBYSCORE", K, "inf", "-inf", "LIMIT", "2", "3"),
        cmd("ZCOUNT", K, "1", "3"), cmd("ZCOUNT", K, "(1", "(3"), cmd("ZCOUNT", K, "-inf", "+inf"),
        cmd("ZCOUNT", K, "3", "1"), cmd("ZCOUNT", MISSING, "1", "2"), cmd("ZCOUNT", K, "x", "1"),
        cmd("ZCOUNT", K, "1", "nan"), cmd("ZCOUNT", K, "((1", "2"), cmd("ZCOUNT", K, "1", "2 "),
        # Errors.
        cmd("ZRANGE", K, "0", "-1", "LIMIT", "0", "1"), cmd("ZRANGE", K, "0", "-1", "LIMIT", "0", "-1"),
        cmd("ZRANGE", K, "a", "1"), cmd("ZRANGE", K, "0", "1.5"), cmd("ZRANGE", K, "0", "1", "FOO"),
        cmd("ZRANGE", K, "0", "1", "REV", "REV"), cmd("ZRANGE", K, "0", "1", "BYSCORE", "BYLEX"),
        cmd("ZRANGE", K, "x", "1", "BYSCORE"), cmd("ZRANGE", K, "1", "x", "BYSCORE", "LIMIT", "x", "1"),
        cmd("ZRANGE", K, "-", "+", "BYLEX", "WITHSCORES"), cmd("ZRANGE", K, "a", "+", "BYLEX"),
        cmd("ZRANGE", K, "0", "1", "LIMIT"), cmd("ZRANGEBYSCORE", K, "0", "1", "LIMIT", "0", "x"),
        cmd("ZREVRANGE", K, "0", "1", "LIMIT", "0", "1"), cmd("ZREVRANGE", K, "0", "1", "BYSCORE"),
        cmd("ZRANGE", K, "0"), cmd("ZRANGEBYSCORE", K, "0"), cmd("ZCOUNT", K, "0"),
        cmd("ZRANGE", MISSING, "0", "-1"), cmd("ZRANGE", MISSING, "x", "-1"),
        cmd("ZRANGEBYSCORE", MISSING, "0", "1", "WITHSCORES"),
        cmd("SET", STR, "v"), cmd("ZRANGE", STR, "0", "-1"), cmd("ZRANGEBYSCORE", STR, "0", "1"),
        cmd("ZRANGE", STR, "x", "1"), cmd("ZCOUNT", STR, "0", "1"), cmd("ZLEXCOUNT", STR, "-", "+"),
        cmd("ZRANGEBYLEX", STR, "-", "+"),
        # Lex ranges, on one score.
        cmd("ZADD", LEX, "0", "a", "0", "b", "0", "c", "0", "ab", "0", "", "0", "B", "0", b"\x00", "0", b"\xff",
            "0", "abc", "0", "b\x00"),
        cmd("ZRANGEBYLEX", LEX, "-", "+"), cmd("ZRANGEBYLEX", LEX, "[a", "[b"), cmd("ZRANGEBYLEX", LEX, "(a", "(b"),
        cmd("ZRANGEBYLEX", LEX, "[", "(a"), cmd("ZRANGEBYLEX", LEX, "(", "+"), cmd("ZRANGEBYLEX", LEX, "-", "[ab"),
        cmd("ZRANGEBYLEX", LEX, "+", "-"), cmd("ZRANGEBYLEX", LEX, "-", "-"), cmd("ZRANGEBYLEX", LEX, "+", "+"),
        cmd("ZRANGEBYLEX", LEX, "[b", "[a"), cmd("ZRANGEBYLEX", LEX, "-", "+", "LIMIT", "2", "3"),
        cmd("ZRANGEBYLEX", LEX, "-", "+", "LIMIT", "-1", "3"), cmd("ZRANGEBYLEX", LEX, "-", "+", "LIMIT", "1", "-5"),
        cmd("ZREVRANGEBYLEX", LEX, "+", "-"), cmd("ZREVRANGEBYLEX", LEX, "[b", "[a", "LIMIT", "1", "1"),
        cmd("ZRANGE", LEX, "[b", "-", "BYLEX", "REV"), cmd("ZRANGE", LEX, "[a", "[c", "BYLEX", "LIMIT", "1", "2"),
        cmd("ZRANGEBYLEX", LEX, "a", "+"), cmd("ZRANGEBYLEX", LEX, "-", "+a"), cmd("ZRANGEBYLEX", LEX, "", "+"),
        cmd("ZRANGEBYLEX", LEX, "-", "+", "WITHSCORES"), cmd("ZRANGEBYLEX", MISSING, "-", "+"),
        cmd("ZLEXCOUNT", LEX, "-", "+"), cmd("ZLEXCOUNT", LEX, "[a", "(b"), cmd("ZLEXCOUNT", LEX, "+", "-"),
        cmd("ZLEXCOUNT", LEX, "x", "+"), cmd("ZLEXCOUNT", MISSING, "-", "+"), cmd("ZLEXCOUNT", LEX, "-"),
        cmd("ZRANGEBYLEX", LEX, "[b\x00", "+"),
    ])


def test_rank_pop_remove_store(redis_door, redis_reference):
    fill = cmd("ZADD", K, "1", "a", "2", "b", "2", "bb", "3", "c", "4", "d", "5", "e", "-inf", "lo", "inf", "hi")
    check(redis_door, redis_reference, [
        RESET, fill,
        cmd("ZRANK", K, "a"), cmd("ZRANK", K, "lo"), cmd("ZRANK", K, "hi"), cmd("ZRANK", K, "bb"),
        cmd("ZRANK", K, "nope"), cmd("ZREVRANK", K, "a"), cmd("ZREVRANK", K, "hi"), cmd("ZREVRANK", K, "b"),
        cmd("ZREVRANK", K, "nope"), cmd("ZRANK", MISSING, "a"), cmd("ZRANK", K), cmd("ZRANK", K, "a", "b"),
        # ZREM.
        cmd("ZREM", K, "a", "nope", "a"), cmd("ZREM", K, "nope"), cmd("ZREM", MISSING, "a"), cmd("ZCARD", K),
        cmd("ZREM", K), cmd("ZADD", K2, "1", "x"), cmd("ZREM", K2, "x"), cmd("EXISTS", K2),
        # Pops.
        cmd("ZPOPMIN", K), cmd("ZPOPMAX", K), cmd("ZPOPMIN", K, "2"), cmd("ZPOPMAX", K, "1"), cmd("ZPOPMIN", K, "0"),
        cmd("ZPOPMIN", K, "-1"), cmd("ZPOPMIN", K, "x"), cmd("ZPOPMIN", K, "1", "2"), cmd("ZPOPMAX", MISSING),
        cmd("ZPOPMAX", MISSING, "3"), cmd("ZPOPMIN", MISSING, "-1"), cmd("ZPOPMIN", K, "100"), cmd("EXISTS", K),
        cmd("ZPOPMIN", K), cmd("ZPOPMIN"),
        # ZREMRANGEBY*.
        fill, cmd("ZREMRANGEBYRANK", K, "0", "1"), cmd("ZRANGE", K, "0", "-1"), cmd("ZREMRANGEBYRANK", K, "-2", "-1"),
        cmd("ZREMRANGEBYRANK", K, "5", "1"), cmd("ZREMRANGEBYRANK", K, "10", "20"), cmd("ZREMRANGEBYRANK", K, "x", "1"),
        cmd("ZREMRANGEBYRANK", MISSING, "0", "-1"), cmd("ZRANGE", K, "0", "-1"), cmd("ZREMRANGEBYRANK", K, "0", "-1"),
        cmd("EXISTS", K), fill, cmd("ZREMRANGEBYSCORE", K, "(2", "4"), cmd("ZREMRANGEBYSCORE", K, "x", "4"),
        cmd("ZREMRANGEBYSCORE", K, "5", "1"), cmd("ZRANGE", K, "0", "-1", "WITHSCORES"),
        cmd("ZREMRANGEBYSCORE", K, "-inf", "(inf"), cmd("ZCARD", K), cmd("ZREMRANGEBYSCORE", K, "-inf", "inf"),
        cmd("EXISTS", K), cmd("ZREMRANGEBYSCORE", MISSING, "0", "1"),
        cmd("ZADD", LEX, "0", "a", "0", "b", "0", "c", "0", "d"), cmd("ZREMRANGEBYLEX", LEX, "(a", "[c"),
        cmd("ZREMRANGEBYLEX", LEX, "+", "-"), cmd("ZREMRANGEBYLEX", LEX, "x", "-"), cmd("ZRANGE", LEX, "0", "-1"),
        cmd("ZREMRANGEBYLEX", LEX, "-", "+"), cmd("EXISTS", LEX), cmd("ZREMRANGEBYLEX", MISSING, "-", "+"),
        cmd("ZREMRANGEBYRANK", K, "0"), cmd("ZREMRANGEBYSCORE", K, "0", "1", "2"),
        # ZRANGESTORE.
        fill, cmd("ZRANGESTORE", DST, K, "0", "2"), cmd("ZRANGE", DST, "0", "-1", "WITHSCORES"),
        cmd("ZRANGESTORE", DST, K, "(1", "4", "BYSCORE", "REV"), cmd("ZRANGE", DST, "0", "-1", "WITHSCORES"),
        cmd("ZRANGESTORE", DST, K, "4", "(1", "BYSCORE", "REV", "LIMIT", "1", "2"), cmd("ZRANGE", DST, "0", "-1"),
        cmd("ZRANGESTORE", DST, K, "-inf", "inf", "BYSCORE", "LIMIT", "0", "-1"), cmd("ZCARD", DST),
        cmd("ZRANGESTORE", DST, K, "10", "20"), cmd("EXISTS", DST), cmd("ZRANGESTORE", DST, MISSING, "0", "-1"),
        cmd("SET", DST, "string"), cmd("ZRANGESTORE", DST, K, "0", "0"), cmd("TYPE", DST),
        cmd("ZRANGESTORE", DST, MISSING, "0", "-1"), cmd("EXISTS", DST),
        cmd("ZRANGESTORE", K, K, "1", "2"), cmd("ZRANGE", K, "0", "-1", "WITHSCORES"),
        cmd("ZRANGESTORE", DST, K, "0", "-1", "WITHSCORES"), cmd("ZRANGESTORE", DST, K, "0", "-1", "LIMIT", "0", "1"),
        cmd("ZRANGESTORE", DST, K, "x", "-1"), cmd("ZRANGESTORE", DST, K, "0"),
        cmd("ZADD", LEX, "0", "a", "0", "b", "0", "c"), cmd("ZRANGESTORE", DST, LEX, "[b", "+", "BYLEX"),
        cmd("ZRANGE", DST, "0", "-1"),
        # Wrong types.
        cmd("SET", STR, "v"), cmd("ZRANK", STR, "a"), cmd("ZREVRANK", STR, "a"), cmd("ZREM", STR, "a"),
        cmd("ZPOPMIN", STR), cmd("ZPOPMAX", STR, "0"), cmd("ZPOPMIN", STR, "x"), cmd("ZREMRANGEBYRANK", STR, "0", "1"),
        cmd("ZREMRANGEBYSCORE", STR, "0", "1"), cmd("ZREMRANGEBYLEX", STR, "-", "+"),
        cmd("ZRANGESTORE", DST, STR, "0", "-1"), cmd("ZRANGESTORE", STR, K, "0", "-1"), cmd("TYPE", STR),
        cmd("ZSCAN", STR, "0"),
    ])


def test_zscan(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("ZADD", K, "1", "a", "2.5", "b", "-0", "c", "1e17", "d", "inf", "e", "-inf", "f", "0.1", "g",
            "-3", "ab", "4611686018427387904", "big", "1e300", "huge"),
        cmd("ZSCAN", K, "0", "COUNT", "100"), cmd("ZSCAN", K, "0", "MATCH", "a*", "COUNT", "100"),
        cmd("ZSCAN", K, "0", "MATCH", "*", "COUNT", "100"), cmd("ZSCAN", K, "0", "MATCH", "[a-c]", "COUNT", "100"),
        cmd("ZSCAN", K, "0", "MATCH", "?", "COUNT", "100"), cmd("ZSCAN", K, "0", "COUNT", "100", "MATCH", "nothing"),
        cmd("ZSCAN", MISSING, "0"), cmd("ZSCAN", MISSING, "0", "COUNT", "0"), cmd("ZSCAN", MISSING, "x"),
        cmd("ZSCAN", K, "x"), cmd("ZSCAN", K, " 1"), cmd("ZSCAN", K, "-"), cmd("ZSCAN", K, "99999999999999999999"),
        cmd("ZSCAN", K, "0", "COUNT", "0"), cmd("ZSCAN", K, "0", "COUNT", "x"), cmd("ZSCAN", K, "0", "COUNT"),
        cmd("ZSCAN", K, "0", "FOO", "1"), cmd("ZSCAN", K, "0", "TYPE", "zset"), cmd("ZSCAN", K),
    ])


def test_many_and_long_members(redis_door, redis_reference):
    """Statements in chunks (more than 128 members a command) and members longer than the
    index prefix (255 bytes) or Redis's small-set limit (64 bytes)."""
    many = [x for i in range(300) for x in (str(i % 17 - 8), f"m{i:03}")]
    # Tied on score, they differ within MariaDB's max_sort_length (1024 bytes).
    long_a, long_b = "L" * 1000 + "a" + "L" * 1000, "L" * 1000 + "b" + "L" * 1000
    check(redis_door, redis_reference, [
        RESET, cmd("ZADD", K, *many), cmd("ZCARD", K), cmd("ZADD", K, "CH", *many[:260], "1", "extra"),
        cmd("ZRANGE", K, "0", "-1", "WITHSCORES"), cmd("ZRANGE", K, "100", "150", "REV"),
        cmd("ZMSCORE", K, *[f"m{i:03}" for i in range(0, 300, 2)], "nope"),
        cmd("ZREM", K, *[f"m{i:03}" for i in range(0, 280)]), cmd("ZCARD", K), cmd("ZPOPMIN", K, "130"),
        cmd("ZCARD", K), cmd("ZRANK", K, "m299"), cmd("ZSCAN", K, "0", "COUNT", "1000"),
        cmd("ZADD", K2, "1", long_b, "1", long_a, "1", "L" * 70, "0", "L" * 300, "2", "short"),
        cmd("ZRANGE", K2, "0", "-1", "WITHSCORES"), cmd("ZADD", LEX, "0", long_a, "0", long_b, "0", "L"),
        cmd("ZRANGEBYLEX", LEX, "[" + "L" * 1000, "(" + long_b), cmd("ZLEXCOUNT", LEX, "(L", "+"),
        cmd("ZRANK", K2, long_b), cmd("ZREVRANK", K2, long_a), cmd("ZSCORE", K2, long_a),
        cmd("ZSCAN", K2, "0", "COUNT", "1000"), cmd("ZREM", K2, long_a), cmd("ZRANGE", K2, "0", "-1"),
    ])


def test_zscan_pages(redis_door):
    """Paging on the door alone: every member once, cursor 0 at the end."""
    c = Conn(redis_door)
    try:
        assert c.call("AUTH", "app", "app") == "OK"
        c.call("DEL", K)
        members = {f"m{i}".encode(): str(i).encode() for i in range(57)}
        c.call("ZADD", K, *[x for m, s in members.items() for x in (s, m)])
        seen = {}
        pages = scan_pages(c, ["ZSCAN", K], ["COUNT", "7"], most=100)
        for flat in pages:
            assert len(flat) <= 14
            for m, s in zip(flat[0::2], flat[1::2]):
                assert m not in seen
                seen[m] = s
        assert seen == members and len(pages) >= 8
        cursor, flat = c.call("ZSCAN", K, "0", "MATCH", "m1*", "COUNT", "1000")
        assert cursor == b"0" and sorted(flat[0::2]) == sorted(m for m in members if m.startswith(b"m1"))
    finally:
        c.close()


def test_expired_keys_are_absent(redis_door, redis_reference):
    setup = [AUTH, cmd("DEL", *ALL), cmd("SET", K, "v", "PX", "50"), cmd("SET", K2, "v", "PX", "50"),
             cmd("SET", DST, "v", "PX", "50")]
    for port in (redis_door, redis_reference):
        replies(port, setup)
    time.sleep(0.2)
    check(redis_door, redis_reference, [
        cmd("ZSCORE", K, "a"), cmd("ZCARD", K), cmd("ZRANGE", K, "0", "-1"), cmd("ZRANK", K, "a"),
        cmd("ZREM", K2, "a"), cmd("ZPOPMIN", K2), cmd("ZRANGESTORE", DST, K2, "0", "-1"), cmd("EXISTS", DST),
        cmd("ZADD", K, "1", "a"), cmd("TYPE", K), cmd("ZRANGE", K, "0", "-1", "WITHSCORES"),
    ])


def test_resp3_replies_byte_for_byte(redis_door, redis_reference):
    """Doubles (`,`), nulls (`_`) and WITHSCORES pairs as Redis 7.0 writes them in RESP3, and
    the same requests in RESP2, compared as raw bytes."""
    body = [
        RESET,
        cmd("ZADD", K, "1", "a", "2.5", "b", "0.1", "c", "inf", "d", "-inf", "e", "-0", "f", "1e17", "g", "1e-5", "h"),
        cmd("ZSCORE", K, "a"), cmd("ZSCORE", K, "c"), cmd("ZSCORE", K, "d"), cmd("ZSCORE", K, "e"),
        cmd("ZSCORE", K, "f"), cmd("ZSCORE", K, "g"), cmd("ZSCORE", K, "h"), cmd("ZSCORE", K, "nope"),
        cmd("ZSCORE", MISSING, "a"), cmd("ZMSCORE", K, "a", "nope", "b"), cmd("ZINCRBY", K, "0.2", "c"),
        cmd("ZADD", K, "INCR", "1", "b"), cmd("ZADD", K, "XX", "INCR", "1", "nope"),
        cmd("ZRANGE", K, "0", "-1", "WITHSCORES"), cmd("ZRANGE", K, "0", "-1"),
        cmd("ZRANGE", K, "(0", "inf", "BYSCORE", "REV", "WITHSCORES"), cmd("ZRANGEBYSCORE", K, "-inf", "0", "WITHSCORES"),
        cmd("ZRANGE", MISSING, "0", "-1", "WITHSCORES"), cmd("ZRANK", K, "nope"), cmd("ZRANK", K, "b"),
        cmd("ZPOPMIN", K), cmd("ZPOPMAX", K, "2"), cmd("ZPOPMIN", K, "1"), cmd("ZPOPMIN", K, "0"),
        cmd("ZPOPMAX", MISSING, "2"), cmd("ZSCAN", K, "0", "MATCH", "a", "COUNT", "100"),
        cmd("ZRANGESTORE", DST, K, "0", "-1"), cmd("ZRANGE", DST, "0", "-1", "WITHSCORES"),
        cmd("ZADD", K, "INCR", "-inf", "d"),
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


def random_requests(rng, n):
    keys = ["zsets:r1", "zsets:r2", "zsets:r3"]
    members = ["a", "b", "c", "ab", "B", "", "\x00", "10", "9", "zz", "m1", "m2"]
    scores = ["0", "1", "-1", "1.5", "2", "3", "-2.5", "inf", "-inf", "+inf", "0.1", "1e-5", "7", "-0", "1e17"]
    # In ascending order: a pair picked in order is a range that may hold members.
    bounds = ["-inf", "(-inf", "-2.5", "-1", "(-1", "0", "(0", "1", "(1", "1.5", "2", "(2", "3", "7", "(inf", "+inf"]
    lex = ["-", "[", "(", "[9", "(9", "[B", "[a", "(a", "[ab", "(ab", "[b", "(c", "[zz", "+"]
    ranks = ["-10", "-3", "-2", "-1", "0", "1", "2", "5", "10"]
    out = [cmd("DEL", *keys, "zsets:lex", "zsets:s"), cmd("SET", "zsets:s", "str")]

    def key():
        return "zsets:s" if rng.random() < 0.06 else rng.choice(keys)

    def pair(values, bad):
        """Two bounds, usually in order; now and then one that is not a bound at all."""
        a, b = sorted(rng.sample(range(len(values)), 2)) if rng.random() < 0.75 else rng.sample(range(len(values)), 2)
        lo, hi = values[a], values[b]
        if rng.random() < 0.04:
            lo = bad
        return lo, hi

    for _ in range(n):
        op = rng.randrange(24)
        k = key()
        if op < 6:
            opts = rng.sample(["NX", "XX", "GT", "LT", "CH"], rng.choice([0, 0, 0, 1, 1, 2]))
            pairs = [x for _ in range(rng.randint(1, 5)) for x in (rng.choice(scores), rng.choice(members))]
            if rng.random() < 0.15:
                opts.append("INCR")
                pairs = pairs[:2]
            if rng.random() < 0.03:
                pairs[0] = "x"
            out.append(cmd("ZADD", k, *opts, *pairs))
        elif op == 6:
            out.append(cmd("ZINCRBY", k, rng.choice(scores), rng.choice(members)))
        elif op == 7:
            out.append(cmd("ZREM", k, *rng.sample(members, rng.randint(1, 2))))
        elif op == 8:
            lo, hi = pair(ranks, "x")
            out.append(cmd("ZRANGE", k, lo, hi, *(["WITHSCORES"] if rng.random() < 0.5 else []),
                           *(["REV"] if rng.random() < 0.3 else [])))
        elif op == 9:
            extra = ["WITHSCORES"] if rng.random() < 0.5 else []
            if rng.random() < 0.4:
                extra += ["LIMIT", rng.choice(["0", "1", "2", "-1"]), rng.choice(["1", "2", "-1", "0"])]
            lo, hi = pair(bounds, "x")
            if rng.random() < 0.5:
                out.append(cmd("ZRANGEBYSCORE", k, lo, hi, *extra))
            else:
                out.append(cmd("ZREVRANGEBYSCORE", k, hi, lo, *extra))
        elif op == 10:
            out.append(cmd("ZCOUNT", k, *pair(bounds, "((1")))
        elif op == 11:
            out.append(cmd(rng.choice(["ZRANK", "ZREVRANK"]), k, rng.choice(members)))
        elif op == 12:
            out.append(cmd(rng.choice(["ZPOPMIN", "ZPOPMAX"]), k, *([rng.choice(["0", "1", "2", "3"])] if rng.random() < 0.6 else [])))
        elif op == 13:
            out.append(cmd("ZREMRANGEBYRANK", k, *pair(ranks, "1.5")))
        elif op == 14:
            out.append(cmd("ZREMRANGEBYSCORE", k, *pair(bounds, "nan")))
        elif op == 15:
            out.append(cmd("ZRANGESTORE", rng.choice(keys), k, *pair(ranks, "x")))
        elif op == 16:
            out.append(cmd("ZSCORE", k, rng.choice(members)))
        elif op == 17:
            out.append(cmd("ZMSCORE", k, *rng.sample(members, rng.randint(1, 4))))
        elif op == 18:
            out.append(cmd("ZCARD", k))
        elif op == 19:
            out.append(cmd("ZADD", "zsets:lex", *[x for m in rng.sample(members, 3) for x in ("0", m)]))
        elif op == 20:
            name = rng.choice(["ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZLEXCOUNT", "ZREMRANGEBYLEX", "ZRANGEBYLEX"])
            lo, hi = pair(lex, "a")
            if name == "ZREVRANGEBYLEX":
                lo, hi = hi, lo
            extra = []
            if name in ("ZRANGEBYLEX", "ZREVRANGEBYLEX") and rng.random() < 0.3:
                extra = ["LIMIT", rng.choice(["0", "1", "-1"]), rng.choice(["1", "3", "-1"])]
            out.append(cmd(name, "zsets:lex", lo, hi, *extra))
        elif op == 21:
            out.append(cmd("ZSCAN", k, "0", "COUNT", "100", *(["MATCH", rng.choice(["*b*", "?", "[a-c]*", "m?"])] if rng.random() < 0.4 else [])))
        elif op == 22:
            out.append(cmd(rng.choice(["DEL", "TYPE", "EXISTS", "TYPE"]), k))
        else:
            lo, hi = pair(bounds, "x")
            rev = rng.random() < 0.5
            if rev:
                lo, hi = hi, lo
            out.append(cmd("ZRANGE", k, lo, hi, "BYSCORE", *(["REV"] if rev else []),
                           *(["WITHSCORES"] if rng.random() < 0.5 else []),
                           *(["LIMIT", rng.choice(["0", "1"]), rng.choice(["2", "-1"])] if rng.random() < 0.3 else [])))
    out.append(cmd("ZRANGE", "zsets:lex", "0", "-1", "WITHSCORES"))
    for k in keys:
        out.append(cmd("ZRANGE", k, "0", "-1", "WITHSCORES"))
    return out


def test_random_sequence(redis_door, redis_reference):
    rng = random.Random(20250607)
    requests = random_requests(rng, 400)
    check(redis_door, redis_reference, requests)
