"""BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP through the Redis door: answered at once when
an element is there (compared with redis-server), woken by a push from another client (on
any worker) without polling the database, null at their timeout, nothing popped for a
client that left while blocked, and commands pipelined behind a blocked one answered after
it.

Intended difference: every client blocked on a key is woken by a push and the first to
commit its pop wins; Redis serves the longest-blocked client first."""

import re
import socket
import threading
import time

from redisdiff import AUTH, Conn, cmd, differential, read_reply, redis_py


def test_same_replies_when_not_waiting(redis_door, redis_reference):
    seq = [
        cmd("DEL", "bl:a", "bl:b", "bl:s"), cmd("SET", "bl:s", "v"),
        cmd("BLPOP", "bl:a", "x"), cmd("BLPOP", "bl:a", "-1"), cmd("BLPOP", "bl:a", "inf"),
        cmd("BLPOP", "bl:a", "nan"), cmd("BLPOP", "bl:a", " 1"), cmd("BLPOP", "bl:a", "1e400"),
        cmd("BLPOP", "bl:a", "99999999999999999999"), cmd("BLPOP", "bl:a"),
        cmd("BLMOVE", "bl:a", "bl:b", "X", "LEFT", "1"), cmd("BLMPOP", "x", "1", "bl:a", "LEFT"),
        cmd("BLMPOP", "0", "0", "bl:a", "LEFT"), cmd("BLMPOP", "0", "2", "bl:a", "LEFT"),
        cmd("BLPOP", "bl:nokey", "bl:s", "1"), cmd("RPUSH", "bl:a", "1", "2", "3"),
        cmd("BLPOP", "bl:nokey", "bl:a", "1"), cmd("BRPOP", "bl:a", "1"),
        cmd("BRPOPLPUSH", "bl:a", "bl:b", "1"), cmd("BLMOVE", "bl:b", "bl:a", "LEFT", "RIGHT", "0"),
        cmd("BLMPOP", "1", "2", "bl:nokey", "bl:a", "RIGHT", "COUNT", "5"),
        cmd("BLMOVE", "bl:s", "bl:a", "LEFT", "LEFT", "1"),
        cmd("RPUSH", "bl:a", "x"), cmd("BLMOVE", "bl:a", "bl:s", "LEFT", "LEFT", "1"),
        # Inside a transaction a blocking command does not block.
        cmd("DEL", "bl:a"), cmd("MULTI"), cmd("BLPOP", "bl:a", "0"), cmd("BLMOVE", "bl:a", "bl:b", "LEFT", "LEFT", "0"),
        cmd("BRPOPLPUSH", "bl:a", "bl:b", "0"), cmd("BLMPOP", "0", "1", "bl:a", "LEFT"), cmd("EXEC"),
        # A short timeout answers null.
        cmd("BLPOP", "bl:a", "0.05"), cmd("BLMOVE", "bl:a", "bl:b", "LEFT", "LEFT", "0.05"),
        cmd("HELLO", "3"), cmd("BLPOP", "bl:a", "0.05"), cmd("BLMOVE", "bl:a", "bl:b", "LEFT", "LEFT", "0.05"),
    ]

    def normalize(req, reply):
        # HELLO's map has ids and versions.
        return "hello" if req.startswith(b"*2\r\n$5\r\nHELLO") else reply

    for pipeline in (True, False):
        differential(redis_door, redis_reference, seq, pipeline=pipeline, normalize=normalize)


def _client(port):
    c = Conn(port)
    assert c.call("AUTH", "app", "app") == "OK"
    return c


def _blocked_clients(probe):
    """`INFO`'s `blocked_clients` on the door (clients of every worker waiting for a push)."""
    return int(re.search(r"blocked_clients:(\d+)", probe.call("INFO", "clients").decode()).group(1))


def _wait_blocked(probe, n):
    """Until exactly `n` clients are blocked, as Redis's own tests wait for one."""
    deadline = time.monotonic() + 10
    while (got := _blocked_clients(probe)) != n:
        assert time.monotonic() < deadline, f"{got} clients blocked, not {n}"
        time.sleep(0.02)


def test_push_wakes_blocked_clients(redis_door):
    pusher = _client(redis_door)
    pusher.call("DEL", "bl:w1", "bl:w2", "bl:dst")
    # Several blocked clients (spread over the workers), woken by one push each.
    waiters = [_client(redis_door) for _ in range(4)]
    base = _blocked_clients(pusher)
    for w in waiters:
        w.send(cmd("BLPOP", "bl:w1", "bl:w2", "0"))
    _wait_blocked(pusher, base + 4)
    for w in waiters:
        w.sock.settimeout(0.2)
        try:
            assert w.sock.recv(1, socket.MSG_PEEK) == b"", "answered while the lists are empty"
        except socket.timeout:
            pass
        w.sock.settimeout(10)
    assert pusher.call("RPUSH", "bl:w2", "a", "b") == 2
    assert pusher.call("LPUSH", "bl:w1", "c") == 1
    assert pusher.call("RPUSH", "bl:w2", "d") in (1, 2, 3)
    got = sorted(tuple(read_reply(w.f)) for w in waiters)
    assert got == [(b"bl:w1", b"c"), (b"bl:w2", b"a"), (b"bl:w2", b"b"), (b"bl:w2", b"d")]
    _wait_blocked(pusher, base)
    assert pusher.call("EXISTS", "bl:w1", "bl:w2") == 0
    # BLMOVE woken by a push; the command pipelined behind it is answered after it.
    mover = _client(redis_door)
    mover.send(cmd("BLMOVE", "bl:w1", "bl:dst", "LEFT", "RIGHT", "0") + cmd("PING"))
    _wait_blocked(pusher, base + 1)
    assert pusher.call("RPUSH", "bl:w1", "moved") == 1
    assert read_reply(mover.f) == b"moved"
    assert read_reply(mover.f) == "PONG"
    assert pusher.call("LRANGE", "bl:dst", "0", "-1") == [b"moved"]
    for c in waiters + [mover, pusher]:
        c.close()


def test_timeout_and_client_gone(redis_door):
    c = _client(redis_door)
    c.call("DEL", "bl:t")
    started = time.monotonic()
    assert c.call("BLPOP", "bl:t", "0.3") is None
    assert time.monotonic() - started >= 0.25
    assert c.call("BRPOPLPUSH", "bl:t", "bl:t2", "0.1") is None
    # A client that leaves while blocked pops nothing.
    gone = _client(redis_door)
    base = _blocked_clients(c)
    gone.send(cmd("BLPOP", "bl:t", "0"))
    _wait_blocked(c, base + 1)
    gone.close()
    # Its wait ends when it leaves: the push after that has nobody to serve.
    _wait_blocked(c, base)
    assert c.call("RPUSH", "bl:t", "kept") == 1
    assert c.call("LRANGE", "bl:t", "0", "-1") == [b"kept"]
    c.close()


def test_redis_py(redis_door):
    redis = redis_py()
    r = redis.Redis(port=redis_door, username="app", password="app", socket_timeout=10)
    r.delete("bl:py")
    result = {}

    def wait():
        result["got"] = r2.blpop(["bl:py"], timeout=5)

    r2 = redis.Redis(port=redis_door, username="app", password="app", socket_timeout=10, protocol=3)
    base = int(r.info("clients")["blocked_clients"])
    t = threading.Thread(target=wait)
    t.start()
    deadline = time.monotonic() + 10
    while int(r.info("clients")["blocked_clients"]) != base + 1:
        assert time.monotonic() < deadline, "the redis-py client never blocked"
        time.sleep(0.02)
    r.rpush("bl:py", "hello")
    t.join(10)
    assert result["got"] in ((b"bl:py", b"hello"), [b"bl:py", b"hello"])
    assert r.blpop(["bl:py"], timeout=0.1) is None
    r.close()
    r2.close()


def test_rename_and_copy_onto_a_waited_key_wake_it(redis_door):
    c = _client(redis_door)
    c.call("DEL", "bl:src", "bl:dst", "bl:dst2")
    for move in (("RENAME", "bl:src", "bl:dst"), ("COPY", "bl:src", "bl:dst2")):
        target = move[2]
        waiter = _client(redis_door)
        base = _blocked_clients(c)
        waiter.send(cmd("BLPOP", target, "0"))
        _wait_blocked(c, base + 1)
        assert c.call("RPUSH", "bl:src", "moved") == 1
        assert c.call(*move) in ("OK", 1)
        assert read_reply(waiter.f) == [target.encode(), b"moved"]
        waiter.close()
    c.close()
