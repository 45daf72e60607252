"""Client-side caching on the Redis door (`CLIENT TRACKING`, `CLIENT CACHING`, `CLIENT
GETREDIR`, `CLIENT TRACKINGINFO`) against Debian's redis-server 7.0: the same requests on
both, the same replies and the same invalidations, byte for byte and in the same order.

How a test knows every invalidation arrived without waiting a fixed time: the tracking
client sends `PING` after the writer got its replies, and reads up to its `PONG` (the door
puts an invalidation in the tracking client's queue when the write commits, before the
writer's reply, and a connection writes its queue before it reads its next request).

Intended differences from redis-server (avoided here, listed in docs/REDIS.md): only writes
made through this manifold invalidate; an invalidation reaches another connection moments
after the writer's reply rather than before it (they may be on different workers).
"""

import time

from conftest import PASSWORD, USER
from redisdiff import Conn, byte_for_byte, cmd, raw_reply, read_reply

P = "trk:"


def login(port, resp3=False):
    c = Conn(port)
    c.sock.settimeout(20)
    assert c.call("AUTH", USER, PASSWORD) == "OK"
    if resp3:
        c.send(cmd("HELLO", "3"))
        read_reply(c.f)
    return c


def until_pong(c):
    """Sends `PING` on `c` and returns the raw replies and pushes read before its `PONG`."""
    c.send(cmd("PING"))
    got = []
    while True:
        m = raw_reply(c.f)
        if m == b"+PONG\r\n":
            return got
        got.append(m)


def ok(c, *args):
    r = c.call(*args)
    assert r == "OK", (args, r)


def clean(port, keys):
    w = login(port)
    try:
        w.call("DEL", *keys)
    finally:
        w.close()


def test_commands_and_errors_as_redis(redis_door, redis_reference):
    """Every check of `CLIENT TRACKING` in Redis's order, with its texts; `CACHING`,
    `GETREDIR` and `TRACKINGINFO` in each mode (RESP2 and RESP3: `TRACKINGINFO` is a map
    with a set)."""
    body = [
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "GETREDIR"),
        cmd("CLIENT", "CACHING", "yes"),
        cmd("CLIENT", "CACHING"),
        cmd("CLIENT", "TRACKING"),
        cmd("CLIENT", "TRACKING", "maybe"),
        cmd("CLIENT", "TRACKING", "on", "foo"),
        cmd("CLIENT", "TRACKING", "on", "redirect"),
        cmd("CLIENT", "TRACKING", "on", "prefix", "a"),
        cmd("CLIENT", "TRACKING", "on", "optin", "optout"),
        cmd("CLIENT", "TRACKING", "on", "bcast", "optin"),
        cmd("CLIENT", "TRACKING", "on", "redirect", "x1"),
        cmd("CLIENT", "TRACKING", "on", "redirect", "999999999"),
        cmd("CLIENT", "TRACKING", "on", "redirect", "0"),
        cmd("CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "ab"),
        cmd("CLIENT", "TRACKING", "on", "bcast", "prefix", "ab", "prefix", "b", "prefix", "a"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "TRACKING", "on", "optin"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "GETREDIR"),
        cmd("CLIENT", "CACHING", "yes"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "CACHING", "no"),
        cmd("CLIENT", "CACHING", "maybe"),
        cmd("CLIENT", "TRACKING", "on", "optout"),
        cmd("CLIENT", "TRACKING", "on", "bcast"),
        cmd("CLIENT", "TRACKING", "on", "optin", "noloop"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "TRACKING", "off"),
        cmd("CLIENT", "TRACKING", "on", "optout"),
        cmd("CLIENT", "CACHING", "no"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("GET", P + "none"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "TRACKING", "OFF"),
        cmd("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", P + "a", "prefix", P + "b", "NOLOOP"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "TRACKING", "on", "bcast", "prefix", P + "ab"),
        cmd("CLIENT", "TRACKING", "on", "bcast", "prefix", P + "c"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "TRACKING", "on"),
        cmd("CLIENT", "TRACKING", "off"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "TRACKING", "on", "bcast"),
        cmd("CLIENT", "TRACKINGINFO"),
        cmd("CLIENT", "TRACKING", "off"),
        cmd("CLIENT", "TRACKING", "off"),
    ]
    byte_for_byte(redis_door, redis_reference, body)


def invalidations(port, reads, writes, resp3=True, mode=("on",)):
    """The pushes a tracking client (`CLIENT TRACKING <mode>`) gets after it sent `reads`
    (each a request, replies dropped) and another client sent `writes`."""
    keys = [P + s for s in ("k1", "k2", "k3", "k4", "k5", "h", "b:1", "b:2", "b:3", "x", "s1", "s2", "o1", "o2", "o3", "hll", "st")]
    clean(port, keys)
    a = login(port, resp3)
    w = login(port)
    try:
        ok(a, "CLIENT", "TRACKING", *mode)
        for r in reads:
            a.send(r)
            read_reply(a.f)
        assert until_pong(a) == []
        for r in writes:
            w.send(r)
            read_reply(w.f)
        return until_pong(a)
    finally:
        a.close()
        w.close()


def same_invalidations(door, reference, reads, writes, **kw):
    got = invalidations(door, reads, writes, **kw)
    want = invalidations(reference, reads, writes, **kw)
    assert got == want, f"manifold {got!r}\nredis    {want!r}"
    return got


def test_default_mode_invalidates_what_was_read(redis_door, redis_reference):
    """The keys a client read (GET, MGET, HGET, EXISTS, STRLEN, PFCOUNT, XREAD), one push
    each when another client changes them, once; keys not read, and writes that change
    nothing, send none."""
    reads = [
        cmd("GET", P + "k1"),
        cmd("MGET", P + "k2", P + "k3"),
        cmd("HGET", P + "h", "f"),
        cmd("EXISTS", P + "k4"),
        cmd("STRLEN", P + "x"),
        cmd("PFCOUNT", P + "hll"),
        cmd("XREAD", "COUNT", "1", "STREAMS", P + "st", "0"),
    ]
    writes = [
        cmd("SET", P + "k1", "v"),
        cmd("MSET", P + "k2", "x", P + "k3", "y"),
        cmd("HSET", P + "h", "f", "1"),
        cmd("DEL", P + "k4"),
        cmd("SET", P + "k5", "v"),
        cmd("SET", P + "k1", "again"),
        cmd("SETNX", P + "k2", "no"),
        cmd("APPEND", P + "x", "tail"),
        cmd("PFADD", P + "hll", "a"),
        cmd("XADD", P + "st", "1-1", "f", "v"),
    ]
    got = same_invalidations(redis_door, redis_reference, reads, writes)
    assert len(got) == 7, got
    assert got[0] == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\ntrk:k1\r\n"


def test_pipelined_and_transactions_invalidate_in_order(redis_door, redis_reference):
    reads = [cmd("MGET", P + "k1", P + "k2", P + "k3", P + "h")]
    writes = [
        cmd("MULTI"),
        cmd("SET", P + "k3", "1"),
        cmd("HSET", P + "h", "a", "1"),
        cmd("DEL", P + "k3"),
        cmd("SET", P + "k1", "1"),
        cmd("EXEC"),
        cmd("SET", P + "k2", "2"),
    ]
    same_invalidations(redis_door, redis_reference, reads, writes)


def test_bcast_prefixes_and_noloop(redis_door, redis_reference):
    """`BCAST`: every changed key under a prefix, a command's keys as one array in key
    order; `NOLOOP`: the client's own writes are not sent back."""
    for mode in (("on", "bcast", "prefix", P + "b:"), ("on", "bcast", "prefix", P + "b:", "prefix", P + "x", "noloop")):
        writes = [
            cmd("MSET", P + "b:2", "1", P + "b:1", "1", P + "k1", "1"),
            cmd("SET", P + "x", "1"),
            cmd("DEL", P + "b:2"),
        ]
        got = same_invalidations(redis_door, redis_reference, [], writes, mode=mode)
        assert b"trk:b:1" in got[0], got
    # The client's own writes, with and without NOLOOP.
    for noloop in ((), ("noloop",)):
        for port in (redis_door, redis_reference):
            clean(port, [P + "b:3"])
        got = []
        for port in (redis_door, redis_reference):
            a = login(port, resp3=True)
            try:
                ok(a, "CLIENT", "TRACKING", "on", "bcast", "prefix", P + "b:", *noloop)
                ok(a, "SET", P + "b:3", "mine")
                got.append(until_pong(a))
            finally:
                a.close()
        assert got[0] == got[1], got
        assert (got[0] == []) == bool(noloop), got


def test_own_write_after_its_reply_and_noloop(redis_door, redis_reference):
    """A client's own change of a key it read: the invalidation comes after the write's
    reply (Redis holds it until then); with `NOLOOP` none."""
    for mode in (("on",), ("on", "noloop")):
        got = []
        for port in (redis_door, redis_reference):
            clean(port, [P + "k1"])
            a = login(port, resp3=True)
            try:
                ok(a, "CLIENT", "TRACKING", *mode)
                a.send(cmd("GET", P + "k1") + cmd("SET", P + "k1", "v") + cmd("PING"))
                seq = []
                while True:
                    m = raw_reply(a.f)
                    seq.append(m)
                    if m == b"+PONG\r\n":
                        break
                got.append(seq)
            finally:
                a.close()
        assert got[0] == got[1], got
        assert len(got[0]) == (4 if mode == ("on",) else 3), got


def test_optin_optout_and_caching(redis_door, redis_reference):
    """`OPTIN`: only the command after `CLIENT CACHING yes` (or the transaction after it)
    is remembered; `OPTOUT`: all but the one after `CLIENT CACHING no`."""
    reads = [
        cmd("GET", P + "o1"),
        cmd("CLIENT", "CACHING", "yes"),
        cmd("GET", P + "o2"),
        cmd("GET", P + "o3"),
        cmd("CLIENT", "CACHING", "yes"),
        cmd("MULTI"),
        cmd("GET", P + "k1"),
        cmd("GET", P + "k2"),
        cmd("EXEC"),
        cmd("GET", P + "k3"),
    ]
    writes = [cmd("MSET", *[x for k in ("o1", "o2", "o3", "k1", "k2", "k3") for x in (P + k, "1")])]
    got = same_invalidations(redis_door, redis_reference, reads, writes, mode=("on", "optin"))
    assert len(got) == 3, got
    reads = [
        cmd("GET", P + "o1"),
        cmd("CLIENT", "CACHING", "no"),
        cmd("GET", P + "o2"),
        cmd("GET", P + "o3"),
    ]
    got = same_invalidations(redis_door, redis_reference, reads, writes, mode=("on", "optout"))
    assert len(got) == 2, got


def test_scripts_remember_their_declared_keys(redis_door, redis_reference):
    """A script that reads makes its client remember the keys it declared (Redis 7.0
    remembers the `EVAL`'s keys); one that only writes remembers none."""
    reads = [
        cmd("EVAL", "return redis.call('GET', KEYS[1])", "2", P + "s1", P + "s2"),
        cmd("EVAL", "return redis.call('SET', KEYS[1], '1')", "1", P + "k1"),
    ]
    writes = [cmd("SET", P + "s2", "1"), cmd("SET", P + "k1", "2"), cmd("SET", P + "s1", "1")]
    got = same_invalidations(redis_door, redis_reference, reads, writes)
    assert len(got) == 2, got
    # A script's writes invalidate as any command's.
    writes = [cmd("EVAL", "redis.call('SET', KEYS[1], 'x') return redis.call('DEL', KEYS[2])", "2", P + "k1", P + "k2")]
    got = same_invalidations(redis_door, redis_reference, [cmd("MGET", P + "k1", P + "k2")], writes)
    assert len(got) == 1, got


def test_flush_invalidates_everything(redis_door, redis_reference):
    """`FLUSHDB` (here of database 9, which no other test uses) sends every tracking
    client a null: all its keys."""
    for resp3 in (True,):
        writes = [cmd("SELECT", "9"), cmd("FLUSHDB")]
        got = same_invalidations(redis_door, redis_reference, [cmd("GET", P + "k1")], writes, resp3=resp3)
        assert got == [b">2\r\n$10\r\ninvalidate\r\n_\r\n"], got


def redirect_pair(port, resp3_target):
    """A target subscribed to `__redis__:invalidate` (RESP2) or in RESP3, and a RESP2
    client tracking with `REDIRECT` to it."""
    t = login(port, resp3_target)
    tid = t.call("CLIENT", "ID")
    if not resp3_target:
        t.send(cmd("SUBSCRIBE", "__redis__:invalidate"))
        raw_reply(t.f)
    a = login(port)
    ok(a, "CLIENT", "TRACKING", "on", "REDIRECT", str(tid))
    assert a.call("CLIENT", "GETREDIR") == tid
    return t, a


def test_redirect_to_a_resp2_subscriber_and_to_resp3(redis_door, redis_reference):
    for resp3_target in (False, True):
        got = []
        for port in (redis_door, redis_reference):
            clean(port, [P + "k1"])
            t, a = redirect_pair(port, resp3_target)
            w = login(port)
            try:
                assert a.call("GET", P + "k1") is None
                ok(w, "SET", P + "k1", "1")
                # The target's next reply follows the invalidation.
                if resp3_target:
                    got.append(until_pong(t))
                else:
                    got.append([raw_reply(t.f)])
                # The tracking client itself gets nothing in RESP2.
                assert until_pong(a) == []
            finally:
                for c in (t, a, w):
                    c.close()
        assert got[0] == got[1], got
        assert b"trk:k1" in got[0][0], got


def gone(port, tid, killer):
    """Waits until client `tid` is no longer known (its connection ended)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = killer.call("CLIENT", "KILL", "ID", str(tid))
        if r == 0 or (isinstance(r, str) and "No such client" in r):
            return
        time.sleep(0.05)
    raise AssertionError(f"client {tid} still known")


def test_redirect_to_a_client_that_left(redis_door, redis_reference):
    """RESP3: the tracking client is told `tracking-redir-broken` with the id, and
    `TRACKINGINFO` shows `broken_redirect`."""
    got = []
    for port in (redis_door, redis_reference):
        clean(port, [P + "k1"])
        t = login(port)
        tid = t.call("CLIENT", "ID")
        a = login(port, resp3=True)
        w = login(port)
        try:
            ok(a, "CLIENT", "TRACKING", "on", "REDIRECT", str(tid))
            assert a.call("GET", P + "k1") is None
            t.close()
            gone(port, tid, w)
            ok(w, "SET", P + "k1", "1")
            pushes = until_pong(a)
            assert pushes == [b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % tid], pushes
            info = a.call("CLIENT", "TRACKINGINFO")
            got.append(sorted(info[b"flags"]))
        finally:
            a.close()
            w.close()
    assert got[0] == got[1] == [b"broken_redirect", b"on"], got


def test_info_client_list_and_reset(redis_door):
    clean(redis_door, [P + "k1"])
    a = login(redis_door)
    try:
        ok(a, "CLIENT", "TRACKING", "on")
        assert a.call("GET", P + "k1") is None
        clients = a.call("INFO", "clients").decode()
        assert "tracking_clients:" in clients and "tracking_clients:0" not in clients, clients
        stats = a.call("INFO", "stats").decode()
        fields = dict(l.split(":", 1) for l in stats.split("\r\n") if ":" in l)
        assert int(fields["tracking_total_keys"]) >= 1, stats
        assert int(fields["tracking_total_items"]) >= 1, stats
        line = a.call("CLIENT", "INFO").decode()
        assert " flags=t " in line and " redir=0 " in line, line
        # RESET turns tracking off, as Redis's does.
        assert a.call("RESET") == "RESET"
        assert a.call("AUTH", USER, PASSWORD) == "OK"
        assert a.call("CLIENT", "GETREDIR") == -1
        line = a.call("CLIENT", "INFO").decode()
        assert " flags=N " in line and " redir=-1 " in line, line
    finally:
        a.close()


def test_config_tracking_table_max_keys(redis_door, redis_reference):
    body = [
        cmd("CONFIG", "GET", "tracking-table-max-keys"),
        cmd("CONFIG", "SET", "tracking-table-max-keys", "-1"),
        cmd("CONFIG", "SET", "tracking-table-max-keys", "x"),
        cmd("CONFIG", "SET", "tracking-table-max-keys", "1000000"),
        cmd("CONFIG", "GET", "tracking-table-max-keys"),
    ]
    byte_for_byte(redis_door, redis_reference, body, hellos=(None,))


def test_a_full_table_lets_keys_go_with_their_invalidation(redis_door, redis_reference):
    """Past `tracking-table-max-keys` the table lets keys go, telling their clients to
    forget them (as Redis evicts them): a client that read more keys than the table holds
    gets invalidations for some of them without any write, and none is kept past the
    bound."""
    for port in (redis_door, redis_reference):
        a = login(port, resp3=True)
        c = login(port)
        try:
            ok(c, "CONFIG", "SET", "tracking-table-max-keys", "10")
            ok(a, "CLIENT", "TRACKING", "on")
            for i in range(40):
                a.send(cmd("GET", f"{P}full:{i}"))
            for i in range(40):
                read_reply(a.f)
            pushes = until_pong(a)
            deadline = time.monotonic() + 10
            # redis-server lets them go in its cron (10 times a second): wait for it.
            while not pushes and time.monotonic() < deadline:
                time.sleep(0.1)
                pushes = until_pong(a)
            assert pushes, port
            stats = c.call("INFO", "stats").decode()
            fields = dict(l.split(":", 1) for l in stats.split("\r\n") if ":" in l)
            assert int(fields["tracking_total_keys"]) <= 10, (port, stats)
        finally:
            c.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")
            a.close()
            c.close()


def test_swapdb_invalidates_everything(redis_door):
    """`SWAPDB` moves every key of two databases: a tracking client forgets all it holds (a
    null, as after a flush; Redis 7.2 does so, 7.0 sent nothing). Databases 9 and 10, which
    no other test uses."""
    got = invalidations(redis_door, [cmd("GET", P + "k1")], [cmd("SWAPDB", "9", "10")])
    assert got == [b">2\r\n$10\r\ninvalidate\r\n_\r\n"], got


def test_client_list_flags(redis_door, redis_reference):
    """`CLIENT INFO`'s `flags=`: `t` tracking, `B` broadcasting, `R` when the redirect
    target left; `redir=`."""
    for port in (redis_door, redis_reference):
        t = login(port)
        tid = t.call("CLIENT", "ID")
        a = login(port, resp3=True)
        w = login(port)
        try:
            ok(a, "CLIENT", "TRACKING", "on", "BCAST")
            line = a.call("CLIENT", "INFO").decode()
            assert " flags=tB " in line and " redir=0 " in line, (port, line)
            ok(a, "CLIENT", "TRACKING", "off")
            ok(a, "CLIENT", "TRACKING", "on", "REDIRECT", str(tid))
            a.call("GET", P + "k1")
            t.close()
            gone(port, tid, w)
            ok(w, "SET", P + "k1", "flags")
            until_pong(a)
            line = a.call("CLIENT", "INFO").decode()
            assert " flags=tR " in line and f" redir={tid} " in line, (port, line)
        finally:
            a.close()
            w.close()
