"""The Redis door's whole-key commands between databases (MOVE) against Debian's
redis-server 7.0: the same requests to both, replies compared byte for byte (RESP2 and
RESP3), pipelined and one at a time.

Intended differences from redis-server: none exercised here.
"""

from redisdiff import byte_for_byte, cmd

K = "keyops:k"
L = "keyops:l"
H = "keyops:h"
T = "keyops:t"
MISSING = "keyops:missing"
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
