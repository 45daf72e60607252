"""The Redis door's ZMPOP, ZRANDMEMBER, BZPOPMIN, BZPOPMAX and BZMPOP against Debian's
redis-server 7.0.15: the same requests to both, the same replies expected byte for byte,
pipelined and one at a time, in RESP2 and RESP3, error cases (arity, syntax, numkeys, count,
timeout, wrong type), inside MULTI and scripts (where the blocking pops do not block), a
random sequence of pops, and the blocking pops woken by every command that makes a sorted
set at their keys (the same two-client scenario run on both servers).

Intended differences from redis-server (normalized or avoided here):
- ZRANDMEMBER's random picks are other picks than Redis's: compared byte for byte only where
  the reply is determined (a count covering the set, a set of one member, errors); the
  random forms are checked on the door alone (distinct members, repeats, scores, shapes).
- ZRANDMEMBER with a negative count past 1,048,576 draws from the whole set read up to the
  client's output limit; on a set larger than that limit it is refused
  ("manifold: ZRANDMEMBER count is too large"; Redis builds the whole reply).
"""

import random
import re
import time
from collections import Counter

from conftest import USER, PASSWORD, configured, free_port, wait_port
from redisdiff import AUTH, Conn, cmd, raw_reply, read_reply, replies

K = "zpops:k"
K2 = "zpops:k2"
STR = "zpops:str"
MISSING = "zpops:missing"
RESET = cmd("DEL", K, K2, STR, MISSING)


def check(door, reference, requests):
    """The same replies, byte for byte, in RESP2 and RESP3, pipelined and one at a time."""
    for hello in (None, cmd("HELLO", "3")):
        seq = [AUTH] + ([hello] if hello else []) + requests
        for pipeline in (True, False):
            got = replies(door, seq, pipeline, read=raw_reply)
            want = replies(reference, seq, pipeline, read=raw_reply)
            for i, (req, g, w) in enumerate(zip(seq, got, want)):
                if req == hello:
                    continue
                assert g == w, f"request {i} {req!r}: manifold {g!r}, redis-server {w!r}"


def test_zmpop(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("ZMPOP", "1", MISSING, "MIN"), cmd("ZMPOP", "2", MISSING, K, "MAX", "COUNT", "3"),
        cmd("ZADD", K2, "1", "a", "2", "b", "3", "c", "-inf", "n", "+inf", "p", "1.5", "x"),
        cmd("ZMPOP", "2", MISSING, K2, "MIN"), cmd("ZMPOP", "2", K2, MISSING, "max"),
        cmd("ZMPOP", "1", K2, "MIN", "COUNT", "2"), cmd("ZMPOP", "1", K2, "MAX", "count", "100"),
        cmd("EXISTS", K2),
        cmd("SET", STR, "v"), cmd("ZADD", K, "1", "a"),
        cmd("ZMPOP", "2", STR, K, "MIN"), cmd("ZMPOP", "2", K, STR, "MIN"), cmd("ZMPOP", "2", MISSING, STR, "MAX"),
        # Errors.
        cmd("ZMPOP"), cmd("ZMPOP", "1"), cmd("ZMPOP", "1", K), cmd("ZMPOP", "0", K, "MIN"),
        cmd("ZMPOP", "-1", K, "MIN"), cmd("ZMPOP", "x", K, "MIN"), cmd("ZMPOP", "3", K, "MIN"),
        cmd("ZMPOP", "1", K, "LEFT"), cmd("ZMPOP", "1", K, "MIN", "COUNT"),
        cmd("ZMPOP", "1", K, "MIN", "COUNT", "0"), cmd("ZMPOP", "1", K, "MIN", "COUNT", "-2"),
        cmd("ZMPOP", "1", K, "MIN", "COUNT", "x"), cmd("ZMPOP", "1", K, "MIN", "COUNT", "1", "COUNT", "1"),
        cmd("ZMPOP", "1", K, "MIN", "extra"),
        RESET,
    ])


def test_zmpop_random_sequences(redis_door, redis_reference):
    rng = random.Random(27)
    requests = [RESET]
    for _ in range(150):
        r = rng.random()
        key = rng.choice([K, K2])
        if r < 0.5:
            pairs = []
            for _ in range(rng.randint(1, 4)):
                pairs += [str(rng.choice([rng.randint(-3, 3), rng.uniform(-5, 5)])), "m%d" % rng.randint(0, 12)]
            requests.append(cmd("ZADD", key, *pairs))
        elif r < 0.9:
            keys = rng.sample([K, K2, MISSING], rng.randint(1, 3))
            extra = ["COUNT", str(rng.randint(1, 5))] if rng.random() < 0.6 else []
            requests.append(cmd("ZMPOP", str(len(keys)), *keys, rng.choice(["MIN", "MAX"]), *extra))
        else:
            requests.append(cmd("ZRANGE", key, "0", "-1", "WITHSCORES"))
    requests.append(RESET)
    check(redis_door, redis_reference, requests)


# --- ZRANDMEMBER ---------------------------------------------------------------------------

ONE = "zpops:one"


def test_zrandmember_determined_replies(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET, cmd("DEL", ONE),
        cmd("ZRANDMEMBER", MISSING), cmd("ZRANDMEMBER", MISSING, "3"), cmd("ZRANDMEMBER", MISSING, "-3"),
        cmd("ZRANDMEMBER", MISSING, "0"), cmd("ZRANDMEMBER", MISSING, "2", "WITHSCORES"),
        cmd("ZADD", K, "3", "c", "1", "a", "2", "b", "5", "e", "4", "d", "2", "bb", "-inf", "n", "1.5", "h"),
        # A count covering the set: the whole set, highest first (Redis's order there).
        cmd("ZRANDMEMBER", K, "8"), cmd("ZRANDMEMBER", K, "100", "WITHSCORES"),
        cmd("ZRANDMEMBER", K, "9223372036854775807"), cmd("ZRANDMEMBER", K, "4611686018427387903", "withscores"),
        cmd("ZRANDMEMBER", K, "0"), cmd("ZRANDMEMBER", K, "0", "WITHSCORES"),
        # One member: every draw is it.
        cmd("ZADD", ONE, "2.5", "only"), cmd("ZRANDMEMBER", ONE), cmd("ZRANDMEMBER", ONE, "1"),
        cmd("ZRANDMEMBER", ONE, "-1"), cmd("ZRANDMEMBER", ONE, "-4"), cmd("ZRANDMEMBER", ONE, "-3", "WITHSCORES"),
        cmd("ZRANDMEMBER", ONE, "1", "WITHSCORES"), cmd("ZRANDMEMBER", ONE, "5", "WITHSCORES"),
        # Errors, in Redis's order: the count, then the syntax, then WITHSCORES's range; the
        # type after those.
        cmd("SET", STR, "v"), cmd("ZRANDMEMBER", STR), cmd("ZRANDMEMBER", STR, "1"), cmd("ZRANDMEMBER", STR, "0"),
        cmd("ZRANDMEMBER", STR, "x"), cmd("ZRANDMEMBER", K, "x"), cmd("ZRANDMEMBER", K, "1.5"),
        cmd("ZRANDMEMBER", K, "-9223372036854775808"), cmd("ZRANDMEMBER", K, "9223372036854775808"),
        cmd("ZRANDMEMBER", K, "1", "withscore"), cmd("ZRANDMEMBER", K, "1", "WITHSCORES", "x"),
        cmd("ZRANDMEMBER", K, "x", "foo"), cmd("ZRANDMEMBER", STR, "1", "foo"),
        cmd("ZRANDMEMBER", K, "4611686018427387904", "WITHSCORES"),
        cmd("ZRANDMEMBER", K, "-4611686018427387904", "WITHSCORES"),
        cmd("ZRANDMEMBER", STR, "-4611686018427387904", "WITHSCORES"),
        cmd("ZRANDMEMBER", MISSING, "4611686018427387904", "WITHSCORES"),
        cmd("ZRANDMEMBER"), cmd("ZRANDMEMBER", K, "1", "WITHSCORES", "a", "b"),
        RESET, cmd("DEL", ONE),
    ])


def test_zrandmember_random_forms(redis_door):
    c = Conn(redis_door)
    c.sock.settimeout(60)
    assert c.call("AUTH", USER, PASSWORD) == "OK"
    c.call("DEL", K)
    members = {b"m%d" % i: float(i) / 2 for i in range(40)}
    flat = []
    for m, s in members.items():
        flat += [str(s), m]
    assert c.call("ZADD", K, *flat) == 40
    for _ in range(5):
        one = c.call("ZRANDMEMBER", K)
        assert one in members
        got = c.call("ZRANDMEMBER", K, "7")
        assert len(got) == 7 and len(set(got)) == 7 and set(got) <= set(members)
        got = c.call("ZRANDMEMBER", K, "7", "WITHSCORES")
        assert len(got) == 14 and len({m for m in got[0::2]}) == 7
        assert all(float(s) == members[m] for m, s in zip(got[0::2], got[1::2]))
    got = c.call("ZRANDMEMBER", K, "-500")
    assert len(got) == 500 and set(got) <= set(members)
    # 500 draws of 40: repeats, and no member drawn far more often than chance allows.
    assert len(set(got)) < 40 or max(Counter(got).values()) > 1
    assert max(Counter(got).values()) < 60
    got = c.call("ZRANDMEMBER", K, "-30", "WITHSCORES")
    assert len(got) == 60 and all(float(s) == members[m] for m, s in zip(got[0::2], got[1::2]))
    # RESP3: each member and score a pair of its own, the score a double.
    c.call("HELLO", "3")
    c.send(cmd("ZRANDMEMBER", K, "-3", "WITHSCORES"))
    raw = raw_reply(c.f)
    assert raw.startswith(b"*3\r\n*2\r\n$") and raw.count(b"*2\r\n") == 3 and raw.count(b"\r\n,") == 3
    c.send(cmd("ZRANDMEMBER", K, "3", "WITHSCORES"))
    raw = raw_reply(c.f)
    assert raw.startswith(b"*3\r\n*2\r\n$") and raw.count(b"\r\n,") == 3
    # More draws than are simulated one by one: from the whole set.
    got = c.call("ZRANDMEMBER", K, "-1100000")
    assert len(got) == 1_100_000 and set(got) == set(members)
    assert max(Counter(got).values()) < 1_100_000 // 40 * 2
    c.call("DEL", K)
    c.close()


def test_zrandmember_huge_negative_counts_stop_at_the_output_limit(topology, tmp_path):
    """A 1 MiB output limit: a negative count whose reply fits is answered in full; one past
    it (simulated draws, or draws from the whole set, up to i64's largest count) closes the
    client without taking more than the limit; the door keeps serving."""
    port = free_port()
    m = configured(topology, tmp_path,
                   f'[redis]\nlisten = "127.0.0.1:{port}"\nclient_output_buffer_limit = "normal 1mb 0 0"\n',
                   "redis-zrandmember")
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        c = Conn(port)
        assert c.call("AUTH", USER, PASSWORD) == "OK"
        c.sock.settimeout(60)
        c.call("DEL", K, K2)
        assert c.call("ZADD", K, "1", "a", "2", "b", "3", "c") == 3
        # 100,000 * 7 bytes: under 1 MiB.
        got = c.call("ZRANDMEMBER", K, "-100000")
        assert len(got) == 100_000 and set(got) == {b"a", b"b", b"c"}
        for count in ("-200000", "-2000000", "-9223372036854775807"):
            d = Conn(port)
            assert d.call("AUTH", USER, PASSWORD) == "OK"
            d.send(cmd("ZRANDMEMBER", K, count))
            d.sock.settimeout(60)
            try:
                while d.sock.recv(1 << 16):
                    pass
            except ConnectionResetError:
                pass
            d.close()
        assert c.call("ZRANDMEMBER", K, "-9223372036854775807", "WITHSCORES") == "ERR value is out of range"
        # More draws than are simulated one by one, from a set larger than the limit (40,000
        # members of 30 bytes, 37 in a reply): refused, nothing read past the limit.
        for start in range(0, 40_000, 2_000):
            flat = []
            for i in range(start, start + 2_000):
                flat += ["1", "m%029d" % i]
            c.call("ZADD", K2, *flat)
        assert c.call("ZCARD", K2) == 40_000
        assert c.call("ZRANDMEMBER", K2, "-2000000") == "ERR manifold: ZRANDMEMBER count is too large"
        c.call("DEL", K2)
        assert c.call("ZCARD", K) == 3
        c.call("DEL", K)
        c.close()
    finally:
        m.stop_and_check()


# --- BZPOPMIN, BZPOPMAX, BZMPOP ------------------------------------------------------------

def test_blocking_pops_when_not_waiting(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("ZADD", K, "1", "a", "2", "b", "3", "c", "-inf", "n", "+inf", "p", "1.5", "x"),
        cmd("BZPOPMIN", K, "0"), cmd("BZPOPMAX", K, "0"), cmd("BZPOPMIN", MISSING, K, "1"),
        cmd("BZPOPMAX", MISSING, K, "0.5"), cmd("BZMPOP", "0", "2", MISSING, K, "MIN"),
        cmd("BZMPOP", "1", "1", K, "max", "COUNT", "10"), cmd("EXISTS", K),
        cmd("ZADD", K, "7", "q"), cmd("BZPOPMAX", K, "0"), cmd("EXISTS", K),
        # Timeouts: nothing there.
        cmd("BZPOPMIN", MISSING, "0.05"), cmd("BZPOPMAX", MISSING, K, "0.01"),
        cmd("BZMPOP", "0.02", "2", MISSING, K, "MIN", "COUNT", "3"),
        # Wrong type: at the first key of another type before a sorted set.
        cmd("SET", STR, "v"), cmd("ZADD", K2, "1", "z"), cmd("BZPOPMIN", STR, K2, "1"),
        cmd("BZPOPMIN", K2, STR, "1"), cmd("BZMPOP", "1", "2", STR, K2, "MIN"), cmd("BZMPOP", "1", "1", STR, "MAX"),
        # Errors: the timeout's texts; BZMPOP checks numkeys, the side and COUNT first.
        cmd("BZPOPMIN", K, "x"), cmd("BZPOPMIN", K, "-1"), cmd("BZPOPMIN", K, "inf"), cmd("BZPOPMAX", K, "nan"),
        cmd("BZPOPMIN", K, "1e20"), cmd("BZPOPMIN", K, "99999999999999999999"), cmd("BZPOPMIN", K, ""),
        # Timeouts read as Redis's string2ld reads them (hexadecimal, a long double's range),
        # for the list pops too.
        cmd("BZPOPMIN", MISSING, "0x1p-4"), cmd("BZPOPMAX", MISSING, "0x.1"), cmd("BLPOP", MISSING, "0x.1"),
        cmd("BZPOPMIN", K, "1e5000"), cmd("BZPOPMIN", K, "1e-5000"), cmd("BLPOP", K, "1e-5000"),
        cmd("BZPOPMIN", K, "1e400"), cmd("BZPOPMIN", K, "-1e400"), cmd("BZPOPMIN", K, "0x"), cmd("BZPOPMIN", K, "1 "),
        cmd("BZMPOP", "1e5000", "1", K, "MIN"), cmd("BZMPOP", "0x.01", "1", K, "MIN"),
        cmd("BZPOPMIN", STR, "-1"), cmd("BZMPOP", "-1", "1", K, "MIN"), cmd("BZMPOP", "x", "1", K, "MIN"),
        cmd("BZMPOP", "inf", "1", K, "MIN"), cmd("BZMPOP", "-1", "0", K, "MIN"), cmd("BZMPOP", "-1", "1", K, "foo"),
        cmd("BZMPOP", "x", "1", K, "MIN", "COUNT", "0"), cmd("BZMPOP", "0", "2", K, "MIN"),
        cmd("BLMPOP", "-1", "0", K, "LEFT"), cmd("BLMPOP", "x", "1", K, "MIN"), cmd("BLMPOP", "-1", "1", K, "LEFT"),
        cmd("BZMPOP", "0", "1", K, "MIN", "COUNT"), cmd("BZMPOP", "0", "1", K, "MIN", "COUNT", "1", "COUNT", "2"),
        cmd("BZMPOP", "0", "x", K, "MIN"), cmd("BZMPOP", "0", "1", K, "MIN", "COUNT", "-1"),
        cmd("BZPOPMIN", K), cmd("BZPOPMAX"), cmd("BZMPOP", "0", "1", K),
        # Inside a transaction they do not block: a null array when nothing is there.
        cmd("DEL", K, K2), cmd("MULTI"), cmd("BZPOPMIN", K, "0"), cmd("BZPOPMAX", K, K2, "0"),
        cmd("BZMPOP", "0", "1", K, "MIN"), cmd("ZADD", K, "1", "a", "2", "b"), cmd("BZPOPMAX", K, "0"),
        cmd("BZMPOP", "0", "1", K, "MIN", "COUNT", "5"), cmd("EXEC"),
        cmd("MULTI"), cmd("BZPOPMIN", K, "x"), cmd("EXEC"),
        # Nor in scripts.
        cmd("EVAL", "return redis.call('BZPOPMIN', KEYS[1], 0)", "1", K),
        cmd("EVAL", "return redis.call('BZMPOP', 0, 1, KEYS[1], 'MIN')", "1", K),
        cmd("EVAL", "return redis.call('BLMPOP', 0, 1, KEYS[1], 'LEFT')", "1", K),
        cmd("ZADD", K, "4", "s"), cmd("EVAL", "return redis.call('BZPOPMAX', KEYS[1], 0)", "1", K),
        cmd("EVAL", "return redis.call('BZMPOP', 0, 1, KEYS[1], 'MAX', 'COUNT', 3)", "1", K),
        RESET,
    ])


def _client(port):
    c = Conn(port)
    assert c.call("AUTH", USER, PASSWORD) == "OK"
    return c


def _blocked_clients(probe):
    return int(re.search(r"blocked_clients:(\d+)", probe.call("INFO", "clients").decode()).group(1))


def _wait_blocked(probe, n):
    """Until exactly `n` clients are blocked, as Redis's own tests wait for one."""
    deadline = time.monotonic() + 10
    while (got := _blocked_clients(probe)) != n:
        assert time.monotonic() < deadline, f"{got} clients blocked, not {n}"
        time.sleep(0.02)


SRC = "zpops:src"
DST = "zpops:dst"


def _wake_scenario(port, resp3):
    """One client blocks, another makes a sorted set at its key: the blocked client's raw
    replies, in order (the same on both servers)."""
    probe = _client(port)
    probe.call("DEL", K, K2, SRC, DST, STR, MISSING, "zpops:l")
    waiter = _client(port)
    if resp3:
        waiter.call("HELLO", "3")
    base = _blocked_clients(probe)
    got = []

    def blocked(request, wake, *more):
        """`request` blocks; `wake` (run by the probe) serves it."""
        waiter.send(request)
        _wait_blocked(probe, base + 1)
        for w in (wake, *more):
            probe.call(*w)
        got.append(raw_reply(waiter.f))
        _wait_blocked(probe, base)

    blocked(cmd("BZPOPMIN", K, "0"), ("ZADD", K, "2", "b", "1", "a"))
    blocked(cmd("BZPOPMAX", MISSING, K2, "0"), ("ZINCRBY", K2, "2.5", "m"))
    probe.call("ZADD", SRC, "1", "x", "2", "y", "3", "z")
    blocked(cmd("BZMPOP", "0", "1", DST, "MAX", "COUNT", "2"), ("ZUNIONSTORE", DST, "1", SRC))
    probe.call("DEL", DST)
    blocked(cmd("BZPOPMIN", DST, "0"), ("ZINTERSTORE", DST, "2", SRC, SRC))
    probe.call("DEL", DST)
    blocked(cmd("BZPOPMIN", DST, "0"), ("ZDIFFSTORE", DST, "1", SRC))
    probe.call("DEL", DST)
    blocked(cmd("BZPOPMAX", DST, "0"), ("ZRANGESTORE", DST, SRC, "0", "1"))
    probe.call("DEL", DST)
    blocked(cmd("BZMPOP", "0", "2", MISSING, DST, "MIN"), ("GEOADD", DST, "13.361389", "38.115556", "Palermo"))
    probe.call("DEL", DST)
    blocked(cmd("BZPOPMIN", DST, "0"), ("COPY", SRC, DST))
    probe.call("DEL", DST)
    blocked(cmd("BZPOPMAX", DST, "0"), ("RENAME", SRC, DST))
    # A sorted set moved in from another database wakes the waiter as one made there.
    probe.call("DEL", DST)
    blocked(cmd("BZPOPMIN", DST, "0"), ("SELECT", "2"), ("DEL", DST), ("ZADD", DST, "5", "mv"),
            ("MOVE", DST, "0"), ("SELECT", "0"))
    # A list (or a string) made at the key wakes nobody waiting for a sorted set; nor does a
    # sorted set made at a list's key wake a BLPOP.
    waiter.send(cmd("BZPOPMIN", "zpops:l", "0"))
    _wait_blocked(probe, base + 1)
    probe.call("RPUSH", "zpops:l", "e")
    probe.call("SET", STR, "v")
    probe.call("RENAME", STR, MISSING)
    # A wrong wake-up would answer WRONGTYPE at once (the list is there): give it the time
    # to, then the reply read below is the pop's.
    time.sleep(0.2)
    assert _blocked_clients(probe) == base + 1
    probe.call("DEL", "zpops:l")
    probe.call("ZADD", "zpops:l", "9", "late")
    got.append(raw_reply(waiter.f))
    _wait_blocked(probe, base)
    probe.call("DEL", "zpops:l", MISSING)
    waiter.send(cmd("BLPOP", "zpops:l", "0"))
    _wait_blocked(probe, base + 1)
    probe.call("ZADD", "zpops:l", "1", "z")
    time.sleep(0.2)
    assert _blocked_clients(probe) == base + 1
    probe.call("DEL", "zpops:l")
    probe.call("RPUSH", "zpops:l", "pushed")
    got.append(raw_reply(waiter.f))
    _wait_blocked(probe, base)
    # A timeout: the null array.
    got.append(waiter.call("BZPOPMIN", MISSING, "0.1") is None)
    probe.call("DEL", K, K2, SRC, DST, STR, MISSING, "zpops:l")
    for c in (waiter, probe):
        c.close()
    return got


def test_blocking_pops_woken_by_every_command_making_a_sorted_set(redis_door, redis_reference):
    for resp3 in (False, True):
        got = _wake_scenario(redis_door, resp3)
        want = _wake_scenario(redis_reference, resp3)
        assert got == want


def test_blocked_pop_behind_pipeline_and_client_gone(redis_door):
    probe = _client(redis_door)
    probe.call("DEL", K)
    base = _blocked_clients(probe)
    # Several waiters on one key: one member each.
    waiters = [_client(redis_door) for _ in range(3)]
    for w in waiters:
        w.send(cmd("BZPOPMIN", K, "0") + cmd("PING"))
    _wait_blocked(probe, base + 3)
    assert probe.call("ZADD", K, "1", "a", "2", "b", "3", "c") == 3
    got = sorted(tuple(read_reply(w.f)) for w in waiters)
    assert got == [(K.encode(), b"a", b"1"), (K.encode(), b"b", b"2"), (K.encode(), b"c", b"3")]
    assert all(read_reply(w.f) == "PONG" for w in waiters)
    _wait_blocked(probe, base)
    # A client that leaves while blocked pops nothing.
    gone = _client(redis_door)
    gone.send(cmd("BZMPOP", "0", "1", K, "MIN"))
    _wait_blocked(probe, base + 1)
    gone.close()
    _wait_blocked(probe, base)
    assert probe.call("ZADD", K, "5", "kept") == 1
    assert probe.call("ZRANGE", K, "0", "-1") == [b"kept"]
    # The timeout answers the null array, after about that long.
    started = time.monotonic()
    assert probe.call("BZPOPMAX", MISSING, "0.3") is None
    assert time.monotonic() - started >= 0.25
    probe.call("DEL", K)
    for c in waiters + [probe]:
        c.close()


def test_blocking_pops_and_zrandmember_random_sequences(redis_door, redis_reference):
    """Random ZADDs, non-waiting blocking pops (short timeouts where nothing is there) and
    ZRANDMEMBER with counts covering the set, compared byte for byte."""
    rng = random.Random(2707)
    requests = [RESET]
    for _ in range(120):
        r = rng.random()
        key = rng.choice([K, K2])
        if r < 0.4:
            pairs = []
            for _ in range(rng.randint(1, 4)):
                pairs += [str(rng.choice([rng.randint(-3, 3), rng.uniform(-5, 5)])), "m%d" % rng.randint(0, 12)]
            requests.append(cmd("ZADD", key, *pairs))
        elif r < 0.55:
            keys = rng.sample([K, K2, MISSING], rng.randint(1, 3))
            requests.append(cmd(rng.choice(["BZPOPMIN", "BZPOPMAX"]), *keys, "0.01"))
        elif r < 0.7:
            keys = rng.sample([K, K2, MISSING], rng.randint(1, 3))
            extra = ["COUNT", str(rng.randint(1, 5))] if rng.random() < 0.6 else []
            requests.append(cmd("BZMPOP", "0.01", str(len(keys)), *keys, rng.choice(["MIN", "MAX"]), *extra))
        elif r < 0.9:
            extra = ["WITHSCORES"] if rng.random() < 0.5 else []
            requests.append(cmd("ZRANDMEMBER", key, str(rng.choice([0, 13, 20, 1000])), *extra))
        else:
            requests.append(cmd("ZRANGE", key, "0", "-1", "WITHSCORES"))
    requests.append(RESET)
    check(redis_door, redis_reference, requests)
