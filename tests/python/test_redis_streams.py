"""The Redis door's stream commands (XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD and
its BLOCK, XSETID, and the key commands on stream keys) against Debian's redis-server 7.0:
the same requests to both, the same replies expected, pipelined and one at a time; RESP3
replies compared byte for byte.

Intended differences from redis-server (avoided here):
- Automatic IDs (`*`) come from the clock of each server: the compared sequences use
  explicit IDs (`ms-seq`, `ms-*`); automatic IDs are checked on the door alone (shape,
  monotonic, past the last explicit ID).
- `MAXLEN ~`/`MINID ~` trim exactly (at most LIMIT entries, 10000 by default), where Redis
  removes whole radix tree nodes only and so may trim fewer: `~` is checked on the door
  alone; the compared sequences trim with `=` or no operator.
"""

import random
import re
import socket
import threading
import time

from redisdiff import AUTH, Conn, cmd, differential, raw_reply, replies


def check(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, requests, pipeline=pipeline)


K = "streams:k"
K2 = "streams:k2"
STR = "streams:str"
DST = "streams:dst"
MISSING = "streams:missing"
ALL = [K, K2, STR, DST, MISSING]
RESET = cmd("DEL", *ALL)


def test_xadd_ids_and_errors(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("XADD", K, "1-1", "a", "1"), cmd("XADD", K, "1-2", "b", "2", "c", "3"),
        cmd("XADD", K, "1-2", "x", "y"), cmd("XADD", K, "1-1", "x", "y"), cmd("XADD", K, "0-5", "x", "y"),
        cmd("XADD", K, "1", "x", "y"), cmd("XADD", K, "2", "x", "y"), cmd("XADD", K, "2-*", "x", "y"),
        cmd("XADD", K, "2-*", "x", "y"), cmd("XADD", K, "5-*", "x", "y"), cmd("XADD", K, "3-*", "x", "y"),
        cmd("XADD", K, "0-0", "x", "y"), cmd("XADD", K, "0", "x", "y"), cmd("XADD", MISSING, "0-0", "x", "y"),
        cmd("XADD", MISSING, "0-*", "x", "y"), cmd("XRANGE", MISSING, "-", "+"), cmd("DEL", MISSING),
        cmd("XADD", K, "-", "x", "y"), cmd("XADD", K, "+", "x", "y"), cmd("XADD", K, "a-1", "x", "y"),
        cmd("XADD", K, "1-a", "x", "y"), cmd("XADD", K, "-1", "x", "y"), cmd("XADD", K, "1--1", "x", "y"),
        cmd("XADD", K, " 9", "x", "y"), cmd("XADD", K, "+10", "x", "y"), cmd("XADD", K, "11-+3", "x", "y"),
        cmd("XADD", K, "00012-007", "x", "y"), cmd("XADD", K, "18446744073709551616-0", "x", "y"),
        cmd("XADD", K, "1" * 130, "x", "y"), cmd("XADD", K, "*-1", "x", "y"), cmd("XADD", K, "13-**", "x", "y"),
        cmd("XADD", K, "20-1", "x"), cmd("XADD", K, "20-1", "x", "y", "z"), cmd("XADD", K, "20-1"),
        cmd("XADD", K), cmd("XADD", K, "NOMKSTREAM", "20-1", "x"), cmd("XADD", K, "MAXLEN", "5", "f", "v"),
        cmd("XADD", K, "MAXLEN", "5"), cmd("XADD", K, "nomkstream", "maxlen", "100", "21-0", "f", "v"),
        cmd("XADD", MISSING, "NOMKSTREAM", "1-1", "f", "v"), cmd("EXISTS", MISSING),
        cmd("XADD", MISSING, "NOMKSTREAM", "*", "f", "v"),
        cmd("XADD", K, "18446744073709551615-18446744073709551614", "f", "v"),
        cmd("XADD", K, "18446744073709551615-*", "f", "v"), cmd("XADD", K, "18446744073709551615-*", "f", "v"),
        cmd("XADD", K, "*", "f", "v"), cmd("XLEN", K), cmd("XRANGE", K, "-", "+"),
        # Binary fields, empty values, repeated fields.
        cmd("XADD", K2, "1-0", "", "", b"\x00\xff", b"a\r\nb", "f", "1", "f", "2"),
        cmd("XRANGE", K2, "-", "+"), cmd("xadd", K2, "2-0", "10:x,", "3:abc"), cmd("XRANGE", K2, "2", "2"),
        # Wrong types.
        cmd("SET", STR, "v"), cmd("XADD", STR, "1-1", "f", "v"), cmd("XADD", STR, "NOMKSTREAM", "*", "f", "v"),
        cmd("XLEN", STR), cmd("XRANGE", STR, "-", "+"), cmd("XDEL", STR, "1-1"), cmd("XTRIM", STR, "MAXLEN", "1"),
        cmd("XSETID", STR, "1-1"), cmd("XREAD", "STREAMS", STR, "0"), cmd("LPUSH", K, "x"), cmd("GET", K),
        cmd("HSET", K, "f", "v"), cmd("SADD", K, "m"), cmd("ZADD", K, "1", "m"), cmd("INCR", K),
        cmd("XLEN", MISSING), cmd("XLEN", K, "x"), cmd("XLEN"),
    ])


def test_trimming(redis_door, redis_reference):
    adds = [cmd("XADD", K, f"{i}-{j}", "f", f"{i}.{j}") for i in range(1, 6) for j in range(3)]
    check(redis_door, redis_reference, [
        RESET, *adds,
        cmd("XTRIM", K, "MAXLEN", "12"), cmd("XLEN", K), cmd("XRANGE", K, "-", "+", "COUNT", "2"),
        cmd("XTRIM", K, "MAXLEN", "=", "10"), cmd("XTRIM", K, "MINID", "3-1"), cmd("XRANGE", K, "-", "2"),
        cmd("XTRIM", K, "MINID", "=", "4"), cmd("XLEN", K), cmd("XTRIM", K, "minid", "4"),
        cmd("XTRIM", K, "MAXLEN", "100"), cmd("XTRIM", MISSING, "MAXLEN", "0"), cmd("EXISTS", MISSING),
        cmd("XADD", K, "MAXLEN", "4", "9-0", "f", "v"), cmd("XRANGE", K, "-", "+"),
        cmd("XADD", K, "MINID", "5-2", "9-1", "f", "v"), cmd("XRANGE", K, "-", "+"),
        cmd("XADD", K, "MAXLEN", "0", "10-0", "f", "v"), cmd("XLEN", K), cmd("EXISTS", K), cmd("TYPE", K),
        cmd("XRANGE", K, "-", "+"),
        # Errors, in Redis's order.
        cmd("XTRIM", K, "MAXLEN", "-1"), cmd("XTRIM", K, "MAXLEN", "x"), cmd("XTRIM", K, "MINID", "x"),
        cmd("XTRIM", K, "MINID", "-"), cmd("XTRIM", K, "MAXLEN", "1", "MINID", "1"),
        cmd("XTRIM", K, "MAXLEN", "1", "LIMIT", "10"), cmd("XTRIM", K, "MAXLEN", "=", "1", "LIMIT", "10"),
        cmd("XTRIM", K, "MAXLEN", "1", "LIMIT", "0"), cmd("XTRIM", K, "MAXLEN", "~", "1", "LIMIT", "-1"),
        cmd("XTRIM", K, "MAXLEN", "~", "1", "LIMIT", "x"), cmd("XTRIM", K, "LIMIT", "5", "x"),
        cmd("XTRIM", K, "LIMIT", "0", "x"), cmd("XTRIM", K, "FOO", "1"), cmd("XTRIM", K, "MAXLEN"),
        cmd("XTRIM", K, "MAXLEN", "1", "x"), cmd("XTRIM", K, "MAXLEN", "~"), cmd("XTRIM", K, "NOMKSTREAM", "1"),
        cmd("XTRIM", MISSING, "MAXLEN", "x"), cmd("XTRIM", STR, "MAXLEN", "x"),
        cmd("XADD", K, "MAXLEN", "1", "MINID", "1", "*", "f", "v"), cmd("XADD", K, "LIMIT", "10", "*", "f", "v"),
        cmd("XADD", K, "MAXLEN", "1", "LIMIT", "10", "*", "f", "v"), cmd("XADD", K, "MAXLEN", "-1", "*", "f", "v"),
        cmd("XADD", K, "MINID", "x", "*", "f", "v"), cmd("XADD", K, "MAXLEN", "~", "*", "f", "v"),
        cmd("XADD", K, "LIMIT", "-1", "*", "f", "v"), cmd("XLEN", K),
    ])


def test_ranges_and_xdel(redis_door, redis_reference):
    adds = [cmd("XADD", K, f"{i}-{j}", "n", f"{i}.{j}") for i in (1, 2, 5, 18446744073709551615) for j in (0, 1, 18446744073709551615)]
    ranges = []
    for lo, hi in [("-", "+"), ("2", "5"), ("(2", "5"), ("2-1", "(5-1"), ("(1-0", "(2-1"), ("5", "1"),
                   ("-", "(-"), ("(+", "+"), ("(-", "+"), ("-", "(+"), ("18446744073709551615", "+"),
                   ("(18446744073709551615-18446744073709551615", "+"), ("-", "(0-0"), ("0", "0"),
                   ("x", "+"), ("-", "y"), ("(", "+"), ("(x", "+"), ("((1", "+"), ("1-", "+"), ("-1", "+")]:
        ranges += [cmd("XRANGE", K, lo, hi), cmd("XREVRANGE", K, hi, lo)]
    check(redis_door, redis_reference, [
        RESET, *adds, *ranges,
        cmd("XRANGE", K, "-", "+", "COUNT", "2"), cmd("XREVRANGE", K, "+", "-", "COUNT", "3"),
        cmd("XRANGE", K, "-", "+", "COUNT", "0"), cmd("XRANGE", K, "-", "+", "COUNT", "-5"),
        cmd("XRANGE", K, "-", "+", "count", "1", "COUNT", "4"), cmd("XRANGE", K, "-", "+", "COUNT"),
        cmd("XRANGE", K, "-", "+", "COUNT", "x"), cmd("XRANGE", K, "-", "+", "LIMIT", "1"),
        cmd("XRANGE", MISSING, "-", "+", "COUNT", "0"), cmd("XRANGE", MISSING, "x", "+"), cmd("XRANGE", K, "-"),
        # XDEL: the key first, then every ID before any deletion.
        cmd("XDEL", MISSING, "x"), cmd("XDEL", K, "1-0", "x"), cmd("XLEN", K), cmd("XDEL", K, "1-0", "1-0", "2-1", "9-9"),
        cmd("XDEL", K, "-"), cmd("XDEL", K, "5"), cmd("XLEN", K), cmd("XRANGE", K, "-", "+"),
        cmd("XADD", K, "2-5", "f", "v"), cmd("XDEL", K), cmd("XRANGE", K, "-", "+", "COUNT", "3"),
    ])


def test_xsetid(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("XSETID", MISSING, "1-1"), cmd("XSETID", MISSING, "x"), cmd("XSETID", K, "-"), cmd("XSETID", K, "1-1", "FOO"),
        cmd("XADD", K, "5-0", "f", "v"), cmd("XADD", K, "6-0", "f", "v"), cmd("XSETID", K, "5-9"),
        cmd("XSETID", K, "6-0"), cmd("XADD", K, "6-0", "f", "v"), cmd("XSETID", K, "10-0"),
        cmd("XADD", K, "9-0", "f", "v"), cmd("XADD", K, "10-*", "f", "v"),
        cmd("XSETID", K, "20-0", "ENTRIESADDED", "1"), cmd("XSETID", K, "20-0", "ENTRIESADDED", "-1"),
        cmd("XSETID", K, "20-0", "ENTRIESADDED", "x"), cmd("XSETID", K, "20-0", "ENTRIESADDED", "3", "MAXDELETEDID", "21-0"),
        cmd("XSETID", K, "20-0", "ENTRIESADDED", "30", "MAXDELETEDID", "15-0"), cmd("XSETID", K, "20-0", "MAXDELETEDID", "x"),
        cmd("XSETID", K, "14-0"), cmd("XSETID", K, "15-0"), cmd("XSETID", K, "20-0", "ENTRIESADDED"),
        cmd("XDEL", K, "5-0"), cmd("XDEL", K, "6-0"), cmd("XDEL", K, "10-1"), cmd("XLEN", K), cmd("XSETID", K, "14-0"),
        cmd("XSETID", K, "15-0", "ENTRIESADDED", "0"), cmd("XADD", K, "15-*", "f", "v"), cmd("XRANGE", K, "-", "+"),
        cmd("XSETID", K, "18446744073709551615-18446744073709551615"), cmd("XADD", K, "*", "f", "v"),
        cmd("XADD", K, "18446744073709551615-*", "f", "v"), cmd("XLEN", K), cmd("XSETID", K),
    ])


def test_xread(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("XADD", K, "1-0", "a", "1"), cmd("XADD", K, "2-0", "b", "2"), cmd("XADD", K2, "3-0", "c", "3"),
        cmd("XREAD", "STREAMS", K, "0"), cmd("XREAD", "STREAMS", K, K2, "0", "0"), cmd("XREAD", "STREAMS", K, K2, "1", "3"),
        cmd("XREAD", "COUNT", "1", "STREAMS", K, K2, MISSING, "0-0", "0", "0"), cmd("XREAD", "STREAMS", K, "$"),
        cmd("XREAD", "STREAMS", MISSING, "$"), cmd("XREAD", "STREAMS", K, "2"), cmd("XREAD", "COUNT", "0", "STREAMS", K, "-"),
        cmd("XREAD", "COUNT", "-1", "STREAMS", K, "0"), cmd("XREAD", "STREAMS", K, "+"), cmd("XREAD", "STREAMS", K, ">"),
        cmd("XREAD", "STREAMS", K, "x"), cmd("XREAD", "STREAMS", K, K2), cmd("XREAD", "STREAMS", K, K2, "0"),
        cmd("XREAD", "STREAMS", STR, "x"), cmd("XREAD", "STREAMS", K, STR, "x", "0"), cmd("SET", STR, "v"),
        cmd("XREAD", "STREAMS", K, STR, "x", "0"), cmd("XREAD", "STREAMS", K, STR, "0", "x"),
        cmd("XREAD", "COUNT", "x", "STREAMS", K, "0"), cmd("XREAD", "BLOCK", "x", "STREAMS", K, "0"),
        cmd("XREAD", "BLOCK", "-1", "STREAMS", K, "0"), cmd("XREAD", "BLOCK", "1.5", "STREAMS", K, "0"),
        cmd("XREAD", "GROUP", "g", "c", "STREAMS", K, "0"), cmd("XREAD", "NOACK", "STREAMS", K, "0"),
        cmd("XREAD", "FOO", "STREAMS", K, "0"), cmd("XREAD", "COUNT", "1", "BLOCK", "x", "FOO"),
        cmd("XREAD", "COUNT", "1", "STREAMS"), cmd("XREAD", "COUNT", "1", "COUNT", "2"), cmd("XREAD", "STREAMS", K),
        # Served at once with BLOCK when there is something; null at a short timeout.
        cmd("XREAD", "BLOCK", "0", "STREAMS", K, "0"), cmd("XREAD", "BLOCK", "10", "STREAMS", K, "$"),
        cmd("XREAD", "BLOCK", "10", "COUNT", "1", "STREAMS", MISSING, K2, "0", "0"),
        # In a transaction nothing blocks.
        cmd("MULTI"), cmd("XREAD", "BLOCK", "0", "STREAMS", K, "$"), cmd("XREAD", "STREAMS", K, "0"), cmd("EXEC"),
    ])


def test_key_commands_on_streams(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("XADD", K, "1-0", "a", "1"), cmd("XADD", K, "2-0", "b", "2"), cmd("TYPE", K), cmd("EXISTS", K),
        cmd("COPY", K, DST), cmd("XRANGE", DST, "-", "+"), cmd("XADD", DST, "2-0", "f", "v"), cmd("XADD", DST, "3-*", "f", "v"),
        cmd("XLEN", K), cmd("RENAME", K, K2), cmd("XRANGE", K2, "-", "+"), cmd("EXISTS", K),
        cmd("XADD", K2, "2-*", "f", "v"), cmd("EXPIRE", K2, "100"), cmd("TTL", K2), cmd("PERSIST", K2),
        cmd("DEL", K2), cmd("XLEN", K2), cmd("XADD", K2, "1-1", "f", "v"), cmd("XRANGE", K2, "-", "+"),
        cmd("SET", K2, "str"), cmd("GET", K2), cmd("XADD", K2, "1-1", "f", "v"), cmd("DEL", K2),
        cmd("XADD", K2, "1-1", "f", "v"), cmd("XRANGE", K2, "-", "+"), cmd("TYPE", DST),
        cmd("DEL", DST), cmd("XADD", DST, "1-*", "f", "v"), cmd("XDEL", DST, "1-0"), cmd("EXISTS", DST), cmd("TYPE", DST),
        cmd("XADD", DST, "1-*", "f", "v"),
    ])


def test_resp3_replies_byte_for_byte(redis_door, redis_reference):
    body = [
        RESET,
        cmd("XADD", K, "1-0", "a", "1", "b", ""), cmd("XADD", K, "2-0", "c", "3"), cmd("XADD", K2, "1-5", "d", "4"),
        cmd("XRANGE", K, "-", "+"), cmd("XREVRANGE", K, "+", "-", "COUNT", "1"), cmd("XRANGE", K, "-", "+", "COUNT", "0"),
        cmd("XRANGE", MISSING, "-", "+"), cmd("XREAD", "STREAMS", K, K2, "0", "0"), cmd("XREAD", "STREAMS", K, "$"),
        cmd("XREAD", "COUNT", "1", "STREAMS", K, K2, MISSING, "1", "0", "0"), cmd("XREAD", "BLOCK", "10", "STREAMS", K, "$"),
        cmd("XADD", MISSING, "NOMKSTREAM", "*", "f", "v"), cmd("XLEN", K), cmd("XDEL", K, "1-0"), cmd("XTRIM", K, "MAXLEN", "0"),
        cmd("XSETID", K, "5-0"), cmd("XADD", K, "5-*", "f", "v"),
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


def _client(port):
    c = Conn(port)
    assert c.call("AUTH", "app", "app") == "OK"
    return c


def test_auto_ids_on_the_door(redis_door):
    c = _client(redis_door)
    c.call("DEL", K)
    before = int(time.time() * 1000)
    ids = [c.call("XADD", K, "*", "f", str(i)) for i in range(20)]
    after = int(time.time() * 1000)
    parsed = []
    for i in ids:
        assert re.fullmatch(rb"\d+-\d+", i), i
        ms, seq = map(int, i.split(b"-"))
        assert before - 1000 <= ms <= after + 1000
        parsed.append((ms, seq))
    assert parsed == sorted(parsed) and len(set(parsed)) == 20
    # An explicit ID in the future: the next automatic one follows it.
    future = after + 10_000_000
    assert c.call("XADD", K, f"{future}-7", "f", "v") == f"{future}-7".encode()
    assert c.call("XADD", K, "*", "f", "v") == f"{future}-8".encode()
    assert c.call("XADD", K, f"{future}-*", "f", "v") == f"{future}-9".encode()
    assert c.call("XLEN", K) == 23
    # `~` trims (here: exactly, within LIMIT).
    assert c.call("XTRIM", K, "MAXLEN", "~", "10", "LIMIT", "5") == 5
    assert c.call("XTRIM", K, "MAXLEN", "~", "10") == 8
    assert c.call("XLEN", K) == 10
    c.call("XADD", K, "MAXLEN", "~", "3", "*", "f", "v")
    assert c.call("XLEN", K) == 3
    c.close()


def _blocked_clients(probe):
    return int(re.search(r"blocked_clients:(\d+)", probe.call("INFO", "clients").decode()).group(1))


def _wait_blocked(probe, n):
    deadline = time.monotonic() + 10
    while (got := _blocked_clients(probe)) != n:
        assert time.monotonic() < deadline, f"{got} clients blocked, not {n}"
        time.sleep(0.02)


def _not_answered(c):
    c.sock.settimeout(0.2)
    try:
        assert c.sock.recv(1, socket.MSG_PEEK) == b"", "answered while nothing was added"
    except socket.timeout:
        pass
    finally:
        c.sock.settimeout(5)


def test_xread_block_woken_by_xadd(redis_door):
    adder = _client(redis_door)
    adder.call("DEL", "streams:b1", "streams:b2")
    adder.call("XADD", "streams:b1", "1-0", "old", "1")
    waiters = [_client(redis_door) for _ in range(4)]
    base = _blocked_clients(adder)
    for w in waiters:
        # `$`: only what arrives after the call.
        w.send(cmd("XREAD", "BLOCK", "0", "STREAMS", "streams:b1", "streams:b2", "$", "$"))
    _wait_blocked(adder, base + 4)
    for w in waiters:
        _not_answered(w)
    assert adder.call("XADD", "streams:b2", "5-0", "new", "2") == b"5-0"
    for w in waiters:
        from redisdiff import read_reply
        assert read_reply(w.f) == [[b"streams:b2", [[b"5-0", [b"new", b"2"]]]]]
    _wait_blocked(adder, base)
    # A resolved `$` stays what it was when the call came: an entry added between the
    # call and the wake-up is served too.
    w = waiters[0]
    w.send(cmd("XREAD", "COUNT", "10", "BLOCK", "0", "STREAMS", "streams:b1", "$"))
    _wait_blocked(adder, base + 1)
    adder.send(cmd("XADD", "streams:b1", "2-0", "a", "1") + cmd("XADD", "streams:b1", "3-0", "b", "2"))
    from redisdiff import read_reply
    assert read_reply(adder.f) == b"2-0" and read_reply(adder.f) == b"3-0"
    got = read_reply(w.f)
    assert got[0][0] == b"streams:b1" and got[0][1][0] == [b"2-0", [b"a", b"1"]], got
    # The timeout answers null; a command pipelined behind it answers after it.
    w.send(cmd("XREAD", "BLOCK", "50", "STREAMS", "streams:b1", "$") + cmd("PING"))
    assert read_reply(w.f) is None
    assert read_reply(w.f) == "PONG"
    for c in [adder, *waiters]:
        c.close()


def test_xread_block_woken_by_rename_and_copy(redis_door):
    """A stream renamed or copied onto a key serves the clients blocked on it, as Redis
    signals the key ready."""
    adder = _client(redis_door)
    adder.call("DEL", "streams:rn-src", "streams:rn-dst", "streams:cp-dst")
    base = _blocked_clients(adder)
    renamed, copied = _client(redis_door), _client(redis_door)
    renamed.send(cmd("XREAD", "BLOCK", "0", "STREAMS", "streams:rn-dst", "0-0"))
    copied.send(cmd("XREAD", "BLOCK", "0", "STREAMS", "streams:cp-dst", "0-0"))
    _wait_blocked(adder, base + 2)
    assert adder.call("XADD", "streams:rn-src", "1-0", "a", "1") == b"1-0"
    assert adder.call("COPY", "streams:rn-src", "streams:cp-dst") == 1
    assert adder.call("RENAME", "streams:rn-src", "streams:rn-dst") == "OK"
    from redisdiff import read_reply
    assert read_reply(copied.f) == [[b"streams:cp-dst", [[b"1-0", [b"a", b"1"]]]]]
    assert read_reply(renamed.f) == [[b"streams:rn-dst", [[b"1-0", [b"a", b"1"]]]]]
    for c in (adder, renamed, copied):
        c.close()


def test_xread_block_waits_for_an_xadd_not_yet_committed(redis_door):
    """An XADD whose transaction is still open when a client blocks (here a script's, held
    open ~1.5 s) found no waiter to wake when it ran: the blocked client's attempt must wait
    for its commit and serve the entry, not sleep past it."""
    from redisdiff import read_reply
    adder, sub, reader = _client(redis_door), _client(redis_door), _client(redis_door)
    adder.call("DEL", "streams:open")
    sub.send(cmd("SUBSCRIBE", "streams:open-ready"))
    assert read_reply(sub.f)[0] == b"subscribe"
    adder.send(cmd("EVAL", "redis.call('XADD', KEYS[1], '1-0', 'a', '1') "
                   "redis.call('PUBLISH', 'streams:open-ready', 'x') "
                   "local t0 = redis.call('TIME') "
                   "repeat local t = redis.call('TIME') "
                   "until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 1500000 "
                   "return 1", "1", "streams:open"))
    assert read_reply(sub.f) == [b"message", b"streams:open-ready", b"x"]
    reader.send(cmd("XREAD", "BLOCK", "20000", "STREAMS", "streams:open", "0-0"))
    assert read_reply(adder.f) == 1
    assert read_reply(reader.f) == [[b"streams:open", [[b"1-0", [b"a", b"1"]]]]]
    for c in (adder, sub, reader):
        c.close()


def random_requests(rng, n):
    keys = ["streams:r1", "streams:r2"]
    out = [cmd("DEL", *keys, "streams:rs"), cmd("SET", "streams:rs", "str")]
    ms = [0]

    def key():
        return "streams:rs" if rng.random() < 0.05 else rng.choice(keys)

    def some_id():
        return rng.choice(["-", "+", "0", "1", f"{rng.randint(0, ms[0] + 2)}-{rng.randint(0, 3)}",
                           f"({rng.randint(0, ms[0] + 2)}", str(rng.randint(0, ms[0] + 2))])

    for _ in range(n):
        r = rng.random()
        if r < 0.35:
            ms[0] += rng.randint(0, 2)
            idarg = rng.choice([f"{ms[0]}-*", f"{ms[0]}-{rng.randint(0, 5)}", str(ms[0])])
            opts = rng.choice([[], [], ["MAXLEN", str(rng.randint(0, 8))], ["MAXLEN", "=", str(rng.randint(0, 8))],
                               ["MINID", f"{max(0, ms[0] - 3)}"], ["NOMKSTREAM"]])
            fields = [x for i in range(rng.randint(1, 3)) for x in (rng.choice(["f", "g", ""]), str(rng.randint(0, 99)))]
            out.append(cmd("XADD", key(), *opts, idarg, *fields))
        elif r < 0.5:
            a, b = some_id(), some_id()
            extra = ["COUNT", str(rng.randint(-1, 4))] if rng.random() < 0.4 else []
            out.append(cmd(rng.choice(["XRANGE", "XREVRANGE"]), key(), a, b, *extra))
        elif r < 0.6:
            out.append(cmd("XDEL", key(), *[f"{rng.randint(0, ms[0] + 1)}-{rng.randint(0, 3)}" for _ in range(rng.randint(1, 3))]))
        elif r < 0.67:
            out.append(cmd("XTRIM", key(), *rng.choice([["MAXLEN", str(rng.randint(0, 6))], ["MINID", str(rng.randint(0, ms[0] + 1))]])))
        elif r < 0.8:
            ks = rng.sample(keys, rng.randint(1, 2))
            ids = [rng.choice(["0", "$", f"{rng.randint(0, ms[0])}-{rng.randint(0, 2)}"]) for _ in ks]
            extra = ["COUNT", str(rng.randint(0, 3))] if rng.random() < 0.5 else []
            out.append(cmd("XREAD", *extra, "STREAMS", *ks, *ids))
        elif r < 0.87:
            out.append(cmd("XLEN", key()))
        elif r < 0.92:
            out.append(cmd("XSETID", key(), f"{ms[0] + rng.randint(-1, 2)}-{rng.randint(0, 3)}"))
        elif r < 0.95:
            out.append(cmd("DEL", rng.choice(keys)))
        else:
            out.append(cmd(rng.choice(["TYPE", "EXISTS"]), key()))
    for k in keys:
        out.append(cmd("XRANGE", k, "-", "+"))
    return out


def test_random_sequence(redis_door, redis_reference):
    rng = random.Random(20261128)
    check(redis_door, redis_reference, random_requests(rng, 400))


SCHEMA = "manifold_redis"
STREAM_TABLES = ("redis_stream", "redis_stream_meta", "redis_stream_group", "redis_stream_consumer",
                 "redis_stream_pending")
NONE = [0] * len(STREAM_TABLES)


def _stream_rows(topology, kid=None):
    """The rows of `redis_stream` and `redis_stream_meta` (under `kid`, else of no key)."""
    conn = topology.root()
    try:
        with conn.cursor() as c:
            out = []
            for t in STREAM_TABLES:
                if kid is None:
                    c.execute(f"SELECT COUNT(*) FROM {SCHEMA}.{t} WHERE kid NOT IN "
                              f"(SELECT kid FROM {SCHEMA}.redis_keys) AND kid NOT IN "
                              f"(SELECT kid FROM {SCHEMA}.redis_gc)")
                else:
                    c.execute(f"SELECT COUNT(*) FROM {SCHEMA}.{t} WHERE kid = %s", (kid,))
                out.append(c.fetchone()[0])
            return out
    finally:
        conn.close()


def _kid(topology, key):
    conn = topology.root()
    try:
        with conn.cursor() as c:
            c.execute(f"SELECT kid FROM {SCHEMA}.redis_keys WHERE db = 0 AND k = %s", (key,))
            row = c.fetchone()
            return row and row[0]
    finally:
        conn.close()


def test_storage_readable_and_cleaned(redis_door, topology):
    """Entries are rows SQL users can read (fields as netstrings); DEL, FLUSHDB, a string
    written over the stream and the expiry sweeper leave no row behind."""
    c = _client(redis_door)
    key = "streams:sql"
    c.call("DEL", key)
    c.call("XADD", key, "7-1", "name", "bob", "", "x")
    c.call("XADD", key, "7-2", "n", "1")
    c.call("XDEL", key, "7-2")
    kid = _kid(topology, key)
    conn = topology.root()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT ms, seq, fields FROM {SCHEMA}.redis_stream WHERE kid = %s", (kid,))
            assert cur.fetchall() == ((7, 1, b"4:name,3:bob,0:,1:x,"),)
            cur.execute(f"SELECT last_ms, last_seq, max_deleted_ms, max_deleted_seq, entries_added "
                        f"FROM {SCHEMA}.redis_stream_meta WHERE kid = %s", (kid,))
            assert cur.fetchall() == ((7, 2, 7, 2, 2),)
            cur.execute(f"SELECT type, len FROM {SCHEMA}.redis_keys WHERE kid = %s", (kid,))
            assert cur.fetchall() == ((5, 1),)
    finally:
        conn.close()
    assert c.call("XGROUP", "CREATE", key, "g", "0") == "OK"
    assert c.call("XREADGROUP", "GROUP", "g", "alice", "STREAMS", key, ">")[0][0] == key.encode()
    conn = topology.root()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT g.name, g.last_ms, g.last_seq, c.name, p.ms, p.seq, p.consumer, p.deliveries "
                        f"FROM {SCHEMA}.redis_stream_group g JOIN {SCHEMA}.redis_stream_consumer c "
                        f"ON c.kid = g.kid AND c.gh = g.gh JOIN {SCHEMA}.redis_stream_pending p "
                        f"ON p.kid = g.kid AND p.gh = g.gh AND p.ch = c.ch WHERE g.kid = %s", (kid,))
            assert cur.fetchall() == ((b"g", 7, 1, b"alice", 7, 1, b"alice", 1),)
    finally:
        conn.close()
    # DEL.
    assert c.call("DEL", key) == 1
    assert _stream_rows(topology, kid) == NONE
    # A string written over it: its rows are collected (at once by a write, else by the sweeper).
    c.call("XADD", key, "1-1", "f", "v")
    c.call("XGROUP", "CREATE", key, "g", "0")
    c.call("XREADGROUP", "GROUP", "g", "alice", "STREAMS", key, ">")
    kid = _kid(topology, key)
    c.call("SET", key, "s")
    c.call("DEL", key)
    assert _stream_rows(topology, kid) == NONE
    # Expiry, by the sweeper (nobody touches the key).
    for i in range(3):
        c.call("XADD", key, f"1-{i + 1}", "f", "v")
    c.call("XGROUP", "CREATE", key, "g", "0")
    c.call("XREADGROUP", "GROUP", "g", "alice", "STREAMS", key, ">")
    kid = _kid(topology, key)
    c.call("PEXPIRE", key, 50)
    deadline = time.monotonic() + 10
    while _stream_rows(topology, kid) != NONE:
        assert time.monotonic() < deadline, "the sweeper left the stream's rows"
        time.sleep(0.05)
    assert c.call("EXISTS", key) == 0
    assert _stream_rows(topology) == NONE
    c.close()


def idle_free(req, reply):
    """XPENDING's extended form: the idle times (milliseconds since delivery) differ."""
    if req.split(b"\r\n")[2].upper() == b"XPENDING" and isinstance(reply, list):
        return [r[:2] + ["idle"] + r[3:] if isinstance(r, list) and len(r) == 4 else r for r in reply]
    return reply


def check_groups(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, requests, pipeline=pipeline, normalize=idle_free)


def test_xgroup(redis_door, redis_reference):
    check_groups(redis_door, redis_reference, [
        RESET, cmd("SET", STR, "v"),
        cmd("XGROUP", "CREATE", K, "g", "$"), cmd("XGROUP", "CREATE", K, "g", "$", "foo"),
        cmd("XGROUP", "CREATE", STR, "g", "$"), cmd("XGROUP", "CREATE", K, "g", "$", "MKSTREAM"),
        cmd("EXISTS", K), cmd("TYPE", K), cmd("XLEN", K), cmd("XGROUP", "CREATE", K, "g", "$", "MKSTREAM"),
        cmd("XGROUP", "CREATE", K, "g2", "bad"), cmd("XGROUP", "CREATECONSUMER", K, "nog", "c"),
        cmd("XGROUP", "CREATECONSUMER", MISSING, "nog", "c"), cmd("XGROUP", "SETID", MISSING, "g", "0"),
        cmd("XGROUP", "DESTROY", MISSING, "g"), cmd("XGROUP", "DELCONSUMER", K, "g", "c"),
        cmd("XGROUP", "CREATE", K, "g3", "0", "ENTRIESREAD", "-2"), cmd("XGROUP", "CREATE", K, "g3", "0", "ENTRIESREAD", "x"),
        cmd("XGROUP", "CREATE", K, "g3", "0", "ENTRIESREAD", "-1"), cmd("XGROUP", "CREATE", K, "g4", "0", "entriesread", "3"),
        cmd("XGROUP", "FOO", K, "g"), cmd("XGROUP", "CREATE", K), cmd("XGROUP", "CREATE", K, "g", "0", "1", "2", "3", "4"),
        cmd("XGROUP", "SETID", K, "g", "0", "ENTRIESREAD", "5"), cmd("XGROUP", "SETID", K, "g", "0", "MKSTREAM"),
        cmd("XGROUP", "SETID", K, "g", "-"), cmd("XGROUP", "SETID", K, "g", "+"), cmd("XGROUP", "SETID", K, "g", "x"),
        cmd("XGROUP", "SETID", K, "g", "$"), cmd("XGROUP", "HELP"), cmd("XGROUP", "help", "x"),
        cmd("XGROUP", "DESTROY", K, "g", "x"), cmd("XGROUP", "CREATE", MISSING, "g", "0", "ENTRIESREAD", "-2"),
        cmd("XGROUP", "CREATE", K, "g5", "0", "MKSTREAM", "ENTRIESREAD", "1", "MKSTREAM"),
        cmd("XGROUP", "create", K, "g5", "0", "BAD"), cmd("XGROUP"),
        cmd("XGROUP", "CREATECONSUMER", K, "g", "c1"), cmd("XGROUP", "CREATECONSUMER", K, "g", "c1"),
        cmd("XGROUP", "DELCONSUMER", K, "g", "c1"), cmd("XGROUP", "DELCONSUMER", K, "g", "c1"),
        cmd("XGROUP", "DESTROY", K, "g"), cmd("XGROUP", "DESTROY", K, "g"), cmd("XGROUP", "SETID", K, "g", "0"),
        cmd("XGROUP", "CREATECONSUMER", STR, "g", "c"), cmd("XGROUP", "DESTROY", STR, "g"),
    ])


def test_xreadgroup_xack_xpending(redis_door, redis_reference):
    check_groups(redis_door, redis_reference, [
        RESET, cmd("SET", STR, "v"),
        cmd("XGROUP", "CREATE", K, "g", "0", "MKSTREAM"), cmd("XREADGROUP", "GROUP", "g", "c1", "STREAMS", K),
        cmd("XREADGROUP", "GROUP", "g", "c1", "STREAMS", K, ">"), cmd("XPENDING", K, "g"),
        cmd("XADD", K, "1-0", "f", "v"), cmd("XADD", K, "2-0", "f", "w"),
        cmd("XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "STREAMS", K, ">"),
        cmd("XREADGROUP", "GROUP", "g", "c2", "STREAMS", K, "0"), cmd("XDEL", K, "1-0"),
        cmd("XREADGROUP", "GROUP", "g", "c2", "STREAMS", K, "0"), cmd("XREADGROUP", "GROUP", "g", "c3", "STREAMS", K, "0"),
        cmd("XPENDING", K, "g"), cmd("XPENDING", K, "g", "-", "+", "10"),
        cmd("XREADGROUP", "GROUP", "g", "c1", "STREAMS", K, "$"), cmd("XREADGROUP", "GROUP", "nog", "c1", "STREAMS", K, ">"),
        cmd("XREADGROUP", "STREAMS", K, ">"), cmd("XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", K, ">"),
        cmd("XPENDING", K, "g", "-", "+", "10", "nosuch"), cmd("XACK", K, "g", "1-0", "2-0", "x"),
        cmd("XACK", K, "g", "1-0", "1-0", "9-9"), cmd("XACK", K, "nog", "x"), cmd("XACK", MISSING, "g", "x"),
        cmd("XACK", STR, "g", "1-0"), cmd("XPENDING", K, "g"),
        cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", K, "t", ">"), cmd("XREADGROUP", "COUNT", "1", "STREAMS", K, "t", ">", ">"),
        cmd("XREADGROUP", "GROUP", "g", "newc", "STREAMS", K, ">"), cmd("XGROUP", "CREATECONSUMER", K, "g", "newc"),
        cmd("XREADGROUP", "GROUP", "g", "c", "BLOCK", "x", "STREAMS", K, ">"),
        cmd("XPENDING", K, "g", "IDLE", "5"), cmd("XPENDING", K, "g", "IDLE"), cmd("XPENDING", K, "g", "IDLE", "5", "-", "+"),
        cmd("XPENDING", K, "g", "IDLE", "x", "-"), cmd("XPENDING", K, "g", "-", "+"), cmd("XPENDING", K, "g", "-", "+", "10", "c", "x"),
        cmd("XPENDING", K, "g", "IDLE", "5", "-", "+", "10", "c", "x"), cmd("XPENDING", K, "g", "x", "+", "10"), cmd("XPENDING", K, "g", "IDLE", "x", "-", "+", "1"),
        cmd("XPENDING", K, "g", "-", "+", "x"), cmd("XPENDING", K, "g", "x", "+", "1"),
        cmd("XPENDING", K, "g", "-", "+", "1", "c", "extra"), cmd("XPENDING", MISSING, "g"), cmd("XPENDING", STR, "g"),
        cmd("XPENDING", K, "g", "-"), cmd("XPENDING", K, "nog"), cmd("XPENDING", K, "g", "(+", "+", "1"),
        cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", K, STR, ">", ">"), cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", STR, K, ">", ">"),
        cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", K, "x"),
        # Set back: entries pending for one consumer move to the one that reads them again.
        cmd("XADD", K, "3-0", "a", "b"), cmd("XADD", K, "4-0", "c", "d"), cmd("XREADGROUP", "GROUP", "g", "c4", "STREAMS", K, ">"),
        cmd("XGROUP", "SETID", K, "g", "0"), cmd("XREADGROUP", "GROUP", "g", "c7", "COUNT", "2", "STREAMS", K, ">"),
        cmd("XPENDING", K, "g", "-", "+", "10"), cmd("XPENDING", K, "g"), cmd("XPENDING", K, "g", "IDLE", "0", "-", "+", "10", "c4"),
        cmd("XPENDING", K, "g", "IDLE", "-5", "(3-0", "+", "10"), cmd("XPENDING", K, "g", "-", "+", "0"),
        cmd("XPENDING", K, "g", "IDLE", "100000", "-", "+", "10"),
        # Delivered again: the count grows.
        cmd("XREADGROUP", "GROUP", "g", "c7", "STREAMS", K, "0"), cmd("XREADGROUP", "GROUP", "g", "c7", "COUNT", "1", "STREAMS", K, "2-0"),
        cmd("XPENDING", K, "g", "-", "+", "10"), cmd("XGROUP", "DELCONSUMER", K, "g", "c7"), cmd("XPENDING", K, "g"),
        # Two streams, RESP2.
        cmd("XGROUP", "CREATE", K2, "g", "$", "MKSTREAM"), cmd("XADD", K2, "5-0", "x", "y"),
        cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", K, K2, ">", ">"), cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", K, K2, "0", "0"),
        cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", K, K2, ">", ">"),
        # The key's type, COPY, RENAME and DEL carry the groups.
        cmd("COPY", K2, DST), cmd("XPENDING", DST, "g"), cmd("XGROUP", "CREATE", DST, "g", "0"), cmd("DEL", K2),
        cmd("XPENDING", K2, "g"), cmd("RENAME", DST, K2), cmd("XPENDING", K2, "g"), cmd("XACK", K2, "g", "5-0"),
        cmd("XREADGROUP", "GROUP", "g", "c", "BLOCK", "10", "STREAMS", K2, ">"),
        cmd("MULTI"), cmd("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", K2, ">"), cmd("EXEC"),
    ])


def test_groups_resp3_byte_for_byte(redis_door, redis_reference):
    body = [
        RESET, cmd("XADD", K, "1-0", "a", "1"), cmd("XADD", K, "2-0", "b", "2"), cmd("XGROUP", "CREATE", K, "g", "0"),
        cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", K, ">"), cmd("XDEL", K, "1-0"),
        cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", K, "0"), cmd("XREADGROUP", "GROUP", "g", "c", "STREAMS", K, ">"),
        cmd("XPENDING", K, "g"), cmd("XACK", K, "g", "1-0", "2-0"), cmd("XPENDING", K, "g"), cmd("XGROUP", "HELP"),
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


def test_xreadgroup_block_woken_by_xadd(redis_door):
    from redisdiff import read_reply
    adder = _client(redis_door)
    adder.call("DEL", "streams:bg")
    assert adder.call("XGROUP", "CREATE", "streams:bg", "g", "$", "MKSTREAM") == "OK"
    waiters = [_client(redis_door) for _ in range(3)]
    base = _blocked_clients(adder)
    for i, w in enumerate(waiters):
        # COUNT 1: a consumer woken by the first of two entries added back to back may find
        # both; each takes one here, so the two waiters left get one each.
        w.send(cmd("XREADGROUP", "GROUP", "g", f"c{i}", "COUNT", "1", "BLOCK", "0", "STREAMS", "streams:bg", ">"))
    _wait_blocked(adder, base + 3)
    for w in waiters:
        _not_answered(w)
    # One entry: one consumer gets it, the others wait on.
    assert adder.call("XADD", "streams:bg", "1-0", "f", "v") == b"1-0"
    deadline = time.monotonic() + 10
    answered = []
    while not answered:
        assert time.monotonic() < deadline
        for w in waiters:
            w.sock.settimeout(0.05)
            try:
                if w.sock.recv(1, socket.MSG_PEEK):
                    answered.append(w)
            except socket.timeout:
                pass
            finally:
                w.sock.settimeout(5)
    assert len(answered) == 1
    got = read_reply(answered[0].f)
    assert got == [[b"streams:bg", [[b"1-0", [b"f", b"v"]]]]]
    _wait_blocked(adder, base + 2)
    summary = adder.call("XPENDING", "streams:bg", "g")
    assert summary[0] == 1
    for _ in range(2):
        adder.call("XADD", "streams:bg", "*", "f", "v")
    rest = [w for w in waiters if w is not answered[0]]
    for w in rest:
        assert read_reply(w.f)[0][0] == b"streams:bg"
    _wait_blocked(adder, base)
    assert adder.call("XPENDING", "streams:bg", "g")[0] == 3
    for c in [adder, *waiters]:
        c.close()


def test_xclaim_xautoclaim(redis_door, redis_reference):
    """Claims with explicit times (IDLE 0, TIME) so that both servers agree without a clock."""
    check_groups(redis_door, redis_reference, [
        RESET, cmd("SET", STR, "v"),
        cmd("XADD", K, "1-0", "a", "1"), cmd("XADD", K, "2-0", "b", "2"), cmd("XADD", K, "3-0", "c", "3"),
        cmd("XGROUP", "CREATE", K, "g", "0"),
        cmd("XCLAIM", K, "g", "c", "0", "1-0", "FORCE", "JUSTID"), cmd("XPENDING", K, "g", "-", "+", "10"),
        cmd("XCLAIM", K, "g", "c", "0", "2-0", "FORCE"), cmd("XPENDING", K, "g", "-", "+", "10"),
        cmd("XCLAIM", K, "g", "c", "x", "1-0"), cmd("XCLAIM", K, "g", "c", "0", "1-0", "FOO"),
        cmd("XCLAIM", K, "g", "c", "0", "1-0", "IDLE", "x"), cmd("XCLAIM", K, "g", "c", "0", "x", "1-0"),
        cmd("XCLAIM", K, "g", "c", "0", "1-0", "TIME", "x"), cmd("XCLAIM", K, "g", "c", "0", "1-0", "RETRYCOUNT", "x"),
        cmd("XCLAIM", K, "g", "c", "0", "1-0", "LASTID", "x"), cmd("XCLAIM", K, "g", "c", "0", "1-0", "IDLE"),
        cmd("XCLAIM", K, "g", "d", "0", "1-0", "2-0", "1-0", "TIME", "5", "RETRYCOUNT", "7"),
        cmd("XPENDING", K, "g", "-", "+", "10"), cmd("XPENDING", K, "g"),
        # A negative RETRYCOUNT is as none: the count goes up by one.
        cmd("XCLAIM", K, "g", "d", "0", "1-0", "TIME", "5", "RETRYCOUNT", "-1"),
        cmd("XPENDING", K, "g", "-", "+", "10"),
        cmd("XCLAIM", MISSING, "g", "c", "0", "1-0"), cmd("XCLAIM", K, "nog", "c", "x", "1-0"), cmd("XCLAIM", STR, "g", "c", "0", "1-0"),
        cmd("XCLAIM", K, "g", "e", "100000000", "1-0"), cmd("XCLAIM", K, "g", "e", "0", "3-0"), cmd("XCLAIM", K, "g", "e", "0", "9-0", "FORCE"),
        cmd("XCLAIM", K, "g", "e", "0", "1-0", "IDLE", "0", "JUSTID", "LASTID", "5-0"), cmd("XPENDING", K, "g", "-", "+", "10"),
        cmd("XREADGROUP", "GROUP", "g", "f", "STREAMS", K, ">"), cmd("XADD", K, "6-0", "d", "4"),
        cmd("XREADGROUP", "GROUP", "g", "f", "STREAMS", K, ">"), cmd("XPENDING", K, "g"),
        cmd("XCLAIM", K, "g", "f", "-5", "1-0", "IDLE", "-3"), cmd("XCLAIM", K, "g", "f", "0", "1-0", "TIME", "99999999999999"),
        cmd("XPENDING", K, "g", "-", "+", "10"),
        # XAUTOCLAIM.
        cmd("XAUTOCLAIM", K, "g", "c", "0", "0", "COUNT", "0"), cmd("XAUTOCLAIM", K, "g", "c", "x", "0"),
        cmd("XAUTOCLAIM", K, "g", "c", "0", "x"), cmd("XAUTOCLAIM", K, "g", "c", "0", "0", "FOO"),
        cmd("XAUTOCLAIM", K, "g", "c", "0", "0", "COUNT"), cmd("XAUTOCLAIM", MISSING, "g", "c", "0", "0"),
        cmd("XAUTOCLAIM", STR, "g", "c", "0", "0"), cmd("XAUTOCLAIM", STR, "g", "c", "x", "0"),
        cmd("XAUTOCLAIM", K, "g", "h", "0", "0", "count", "1"), cmd("XAUTOCLAIM", K, "g", "h", "0", "(1-0", "JUSTID"),
        cmd("XAUTOCLAIM", K, "g", "h", "100000000", "0"), cmd("XPENDING", K, "g", "-", "+", "10"),
        cmd("XDEL", K, "1-0", "2-0"), cmd("XAUTOCLAIM", K, "g", "i", "0", "0", "COUNT", "1"),
        cmd("XAUTOCLAIM", K, "g", "i", "0", "0"), cmd("XPENDING", K, "g", "-", "+", "10"), cmd("XPENDING", K, "g"),
        cmd("XDEL", K, "3-0"), cmd("XCLAIM", K, "g", "j", "0", "3-0", "6-0"), cmd("XPENDING", K, "g"),
        cmd("XAUTOCLAIM", K, "g", "i", "0", "(18446744073709551615-18446744073709551615"),
    ])


def info_normal(req, reply):
    """XINFO CONSUMERS' idle (milliseconds since the consumer was seen) differs between the
    servers; XPENDING's idle too."""
    reply = idle_free(req, reply)
    parts = req.split(b"\r\n")
    if parts[2].upper() == b"XINFO" and parts[4].upper() == b"CONSUMERS" and isinstance(reply, list):
        return [[("idle" if i > 0 and c[i - 1] == b"idle" else v) for i, v in enumerate(c)]
                if isinstance(c, list) else c for c in reply]
    return reply


def times_free(req, reply):
    """XINFO STREAM FULL: seen and delivery times (Unix ms) are each server's clock."""
    def walk(v):
        if isinstance(v, list):
            return [walk(x) for x in v]
        return "time" if isinstance(v, int) and v > 10**12 else v
    return walk(info_normal(req, reply))


def test_xinfo(redis_door, redis_reference):
    requests = [
        RESET, cmd("SET", STR, "v"),
        cmd("XINFO", "HELP"), cmd("XINFO", "help", "x"), cmd("XINFO", "FOO"), cmd("XINFO", "STREAM"),
        cmd("XINFO", "STREAM", MISSING), cmd("XINFO", "GROUPS", MISSING), cmd("XINFO", "CONSUMERS", MISSING, "g"),
        cmd("XINFO", "STREAM", STR), cmd("XINFO", "GROUPS", STR), cmd("XINFO", "CONSUMERS", K),
        cmd("XINFO", "GROUPS", K, "x"),
        cmd("XGROUP", "CREATE", K, "e", "$", "MKSTREAM"), cmd("XINFO", "STREAM", K), cmd("XINFO", "GROUPS", K),
        cmd("XADD", K, "1-0", "a", "1"), cmd("XADD", K, "2-0", "b", "2"), cmd("XADD", K, "3-0", "c", "3"),
        cmd("XGROUP", "CREATE", K, "g", "$"), cmd("XGROUP", "CREATE", K, "g0", "0"),
        cmd("XGROUP", "CREATE", K, "g1", "0", "ENTRIESREAD", "0"), cmd("XINFO", "GROUPS", K),
        cmd("XREADGROUP", "GROUP", "g0", "c", "COUNT", "1", "STREAMS", K, ">"),
        cmd("XREADGROUP", "GROUP", "g1", "c", "COUNT", "2", "STREAMS", K, ">"), cmd("XINFO", "GROUPS", K),
        cmd("XINFO", "CONSUMERS", K, "g0"), cmd("XINFO", "CONSUMERS", K, "nog"), cmd("XINFO", "STREAM", K),
        cmd("XDEL", K, "2-0"), cmd("XINFO", "GROUPS", K), cmd("XINFO", "STREAM", K),
        cmd("XREADGROUP", "GROUP", "g0", "d", "STREAMS", K, ">"), cmd("XINFO", "GROUPS", K),
        cmd("XGROUP", "CREATECONSUMER", K, "g0", "z"), cmd("XINFO", "CONSUMERS", K, "g0"),
        cmd("XDEL", K, "1-0"), cmd("XINFO", "STREAM", K), cmd("XINFO", "GROUPS", K),
        cmd("XADD", K, "5-0", "d", "4"), cmd("XINFO", "GROUPS", K), cmd("XGROUP", "SETID", K, "g", "0"),
        cmd("XINFO", "GROUPS", K), cmd("XSETID", K, "9-0", "ENTRIESADDED", "20", "MAXDELETEDID", "4-0"),
        cmd("XINFO", "GROUPS", K), cmd("XINFO", "STREAM", K), cmd("XINFO", "STREAM", K, "x"),
        cmd("XINFO", "STREAM", K, "FULL", "COUNT", "x"), cmd("XINFO", "STREAM", K, "FULL"),
        cmd("XINFO", "STREAM", K, "full", "count", "1"), cmd("XINFO", "STREAM", K, "FULL", "COUNT", "0"),
        cmd("XINFO", "STREAM", K, "FULL", "COUNT", "-3"), cmd("XINFO", "STREAM", K, "FULL", "LIMIT", "1"),
        cmd("XINFO", "STREAM", K, "FULL", "COUNT"), cmd("XINFO", "STREAM", K2, "FULL"),
        cmd("XADD", K2, "1-1", "f", "v"), cmd("XINFO", "STREAM", K2, "FULL"),
    ]
    for pipeline in (True, False):
        differential(redis_door, redis_reference, requests, pipeline=pipeline, normalize=times_free)
    body = requests + [cmd("XINFO", "CONSUMERS", K, "g1")]
    for hello in (None, cmd("HELLO", "3")):
        reqs = [AUTH] + ([hello] if hello else []) + body
        got = replies(redis_door, reqs, True, read=raw_reply)
        want = replies(redis_reference, reqs, True, read=raw_reply)
        for i, (req, g, w) in enumerate(zip(reqs, got, want)):
            if req == hello or b"CONSUMERS" in req or b"FULL" in req.upper():
                continue
            assert g == w, f"request {i} {req!r}: manifold {g!r}, redis-server {w!r}"


def random_group_requests(rng, n):
    keys = ["streams:g1", "streams:g2"]
    groups = ["ga", "gb"]
    consumers = ["alice", "bob", "carol"]
    out = [cmd("DEL", *keys)]
    ms = [0]
    for k in keys:
        out += [cmd("XADD", k, "1-0", "f", "0"), cmd("XGROUP", "CREATE", k, "ga", "0"), cmd("XGROUP", "CREATE", k, "gb", "$")]

    def some_id():
        return f"{rng.randint(0, ms[0] + 2)}-{rng.randint(0, 2)}"

    for _ in range(n):
        k, g, c = rng.choice(keys), rng.choice(groups), rng.choice(consumers)
        r = rng.random()
        if r < 0.25:
            ms[0] += rng.randint(1, 2)
            out.append(cmd("XADD", k, f"{ms[0]}-*", "f", str(rng.randint(0, 9))))
        elif r < 0.45:
            extra = ["COUNT", str(rng.randint(1, 3))] if rng.random() < 0.5 else []
            noack = ["NOACK"] if rng.random() < 0.1 else []
            ids = [rng.choice([">", ">", "0", some_id()])]
            out.append(cmd("XREADGROUP", "GROUP", g, c, *extra, *noack, "STREAMS", k, *ids))
        elif r < 0.55:
            out.append(cmd("XACK", k, g, *[some_id() for _ in range(rng.randint(1, 3))]))
        elif r < 0.65:
            out.append(rng.choice([cmd("XPENDING", k, g), cmd("XPENDING", k, g, "-", "+", "10"),
                                   cmd("XPENDING", k, g, "-", "+", "10", c)]))
        elif r < 0.72:
            out.append(cmd("XCLAIM", k, g, c, "0", *[some_id() for _ in range(rng.randint(1, 3))],
                           *rng.choice([[], ["JUSTID"], ["FORCE"], ["RETRYCOUNT", "3"]])))
        elif r < 0.78:
            out.append(cmd("XAUTOCLAIM", k, g, c, "0", rng.choice(["0", "-", some_id()]), "COUNT", str(rng.randint(1, 3)),
                           *rng.choice([[], ["JUSTID"]])))
        elif r < 0.83:
            out.append(cmd("XDEL", k, some_id()))
        elif r < 0.86:
            out.append(cmd("XTRIM", k, "MAXLEN", str(rng.randint(1, 5))))
        elif r < 0.9:
            out.append(rng.choice([cmd("XGROUP", "SETID", k, g, rng.choice(["0", "$", some_id()])),
                                   cmd("XGROUP", "DELCONSUMER", k, g, c), cmd("XGROUP", "CREATECONSUMER", k, g, c)]))
        elif r < 0.95:
            out.append(rng.choice([cmd("XINFO", "GROUPS", k), cmd("XINFO", "STREAM", k)]))
        else:
            out.append(rng.choice([cmd("XGROUP", "DESTROY", k, g), cmd("XGROUP", "CREATE", k, g, rng.choice(["0", "$"]))]))
    for k in keys:
        out += [cmd("XINFO", "GROUPS", k), cmd("XPENDING", k, "ga", "-", "+", "100"), cmd("XPENDING", k, "gb", "-", "+", "100")]
    return out


def test_random_group_sequence(redis_door, redis_reference):
    rng = random.Random(20261129)
    requests = random_group_requests(rng, 400)
    for pipeline in (True, False):
        differential(redis_door, redis_reference, requests, pipeline=pipeline, normalize=times_free)
