"""Pub/Sub through the Redis door: SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE, PUNSUBSCRIBE, PUBLISH,
PUBSUB, in RESP2 and RESP3, compared byte for byte with Debian's redis-server; messages
reach subscribers on every worker of the manifold; redis-py's PubSub works.

Intended differences: channels are not shared between manifold instances (messages never
touch the database); a message matching several patterns is delivered once per pattern in
pattern order (redis-server's order varies from run to run, so the sequences avoid it).
"""

import socket
import time

from redisdiff import AUTH, Conn, cmd, read_reply, redis_py


def _session(port, script):
    """Runs `script`: a list of (connection index, request bytes or None to only read) and
    returns everything each connection received, read with a short quiet period."""
    conns = {}
    got = {}
    for who, data in script:
        if who not in conns:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(AUTH)
            assert _read_some(s, first=10) == b"+OK\r\n"
            conns[who] = s
            got[who] = b""
        # Every step gets replies: wait for the sender's, then collect what the others got.
        conns[who].sendall(data)
        got[who] += _read_some(conns[who], first=10)
        for w, s in conns.items():
            got[w] += _read_some(s, first=0.3 if w != who else 0.05)
    for w, s in conns.items():
        got[w] += _read_some(s, first=0.5)
        s.close()
    return got


def _read_some(s, first):
    """What `s` sends within `first` seconds, and until it has been quiet for 0.3 s."""
    s.settimeout(first)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
            s.settimeout(0.3)
    except socket.timeout:
        pass
    return out


SCRIPT = [
    (0, cmd("UNSUBSCRIBE") + cmd("PUNSUBSCRIBE")),
    (0, cmd("SUBSCRIBE", "ps:c1", "ps:c2", "ps:c1") + cmd("PSUBSCRIBE", "ps:c*", "ps:?9")),
    (0, cmd("PING") + cmd("PING", "x") + cmd("GET", "k") + cmd("ECHO", "x") + cmd("PUBSUB", "NUMPAT")),
    (1, cmd("PUBLISH", "ps:c1", "hello") + cmd("PUBLISH", "ps:none", "x") + cmd("PUBLISH", "ps:c2", b"a\r\nb")),
    (1, cmd("PUBSUB", "NUMSUB", "ps:c1", "ps:zz") + cmd("PUBSUB", "CHANNELS", "ps:c1*") + cmd("PUBSUB", "NUMPAT")),
    (0, cmd("UNSUBSCRIBE", "ps:c1", "ps:zz") + cmd("PUNSUBSCRIBE", "ps:?9")),
    (1, cmd("PUBLISH", "ps:c1", "again")),
    (0, cmd("PUNSUBSCRIBE") + cmd("UNSUBSCRIBE") + cmd("PING")),
    (2, cmd("HELLO", "3") + cmd("SUBSCRIBE", "ps:r3") + cmd("PING") + cmd("GET", "ps:none")),
    (1, cmd("PUBLISH", "ps:r3", "m3")),
    (2, cmd("UNSUBSCRIBE", "ps:r3")),
    (3, cmd("SUBSCRIBE") + cmd("PSUBSCRIBE") + cmd("PUBLISH", "a") + cmd("PUBSUB") + cmd("PUBSUB", "FOO")
     + cmd("PUBSUB", "NUMSUB") + cmd("SUBSCRIBE", "ps:x") + cmd("RESET") + cmd("PUBLISH", "ps:x", "y")),
]


def _strip_hello(data):
    # HELLO's map (ids, versions) differs by design; everything after it is compared.
    if data.startswith(b"%"):
        i = data.index(b"$7\r\nmodules\r\n*0\r\n") + len(b"$7\r\nmodules\r\n*0\r\n")
        return data[i:]
    return data


def test_differential(redis_door, redis_reference):
    got = _session(redis_door, SCRIPT)
    want = _session(redis_reference, SCRIPT)
    for who in want:
        assert _strip_hello(got[who]) == _strip_hello(want[who]), who


def _six_subscribers(port):
    """Six subscribers (on the door, spread over its workers) and a publisher: every reply
    and message in order."""
    subs = [Conn(port) for _ in range(6)]
    out = []
    for c in subs:
        assert c.call("AUTH", "app", "app") == "OK"
        out.append(c.call("SUBSCRIBE", "ps:all"))
    pub = Conn(port)
    assert pub.call("AUTH", "app", "app") == "OK"
    out.append(pub.call("PUBSUB", "NUMSUB", "ps:all"))
    out.append(pub.call("PUBLISH", "ps:all", "to everyone"))
    out += [read_reply(c.f) for c in subs]
    # A subscriber that leaves is no longer counted.
    subs.pop().close()
    deadline = time.time() + 5
    while pub.call("PUBSUB", "NUMSUB", "ps:all")[1] != 5:
        assert time.time() < deadline, "a subscriber that left is still counted"
        time.sleep(0.05)
    out.append(pub.call("PUBLISH", "ps:all", "x"))
    out += [read_reply(c.f) for c in subs]
    for c in subs + [pub]:
        c.close()
    return out


def test_messages_reach_every_worker(redis_door, redis_reference):
    got = _six_subscribers(redis_door)
    assert got == _six_subscribers(redis_reference)
    assert got[6:8] == [[b"ps:all", 6], 6] and got[8] == [b"message", b"ps:all", b"to everyone"]


def test_redis_py(redis_door):
    redis = redis_py()
    for protocol in (2, 3):
        r = redis.Redis(port=redis_door, username="app", password="app", protocol=protocol, socket_timeout=10)
        p = r.pubsub()
        p.subscribe("ps:py")
        p.psubscribe("ps:p*")
        assert p.get_message(timeout=5)["type"] == "subscribe"
        assert p.get_message(timeout=5)["type"] == "psubscribe"
        assert r.publish("ps:py", "hi") == 2
        got = sorted((m["type"], m["data"]) for m in (p.get_message(timeout=5), p.get_message(timeout=5)))
        assert got == [("message", b"hi"), ("pmessage", b"hi")]
        p.close()
        r.close()
