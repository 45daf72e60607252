"""Group commit: batches of GETs or plain SETs that connections of one worker send
together run as one statement. Many clients at once, each with its own keys, must each get
exactly their own answers (a member's share of a group's result is its own), read their
own writes, and find every acknowledged write in the tables."""

import threading

from redisdiff import Conn, cmd, read_reply

CLIENTS = 48
ROUNDS = 15


def _client(port, i, errors, barrier):
    c = Conn(port)
    try:
        assert c.call("AUTH", "app", "app") == "OK"
        for r in range(ROUNDS):
            barrier.wait(timeout=60)
            # Ping-pong: one SET, then one GET of it and of a neighbour's key.
            mine = f"grp:{i}:{r}".encode()
            if c.call("SET", f"grp:{i}", mine) != "OK":
                errors.append((i, r, "set"))
            barrier.wait(timeout=60)
            got = c.call("GET", f"grp:{i}")
            if got != mine:
                errors.append((i, r, "get", got))
            other = c.call("GET", f"grp:{(i + 1) % CLIENTS}")
            if other != f"grp:{(i + 1) % CLIENTS}:{r}".encode():
                errors.append((i, r, "other", other))
            # A pipeline of plain SETs then GETs: its own keys, in order.
            keys = [f"grp:{i}:p{j}" for j in range(5)]
            c.send(b"".join(cmd("SET", k, f"{k}:{r}") for k in keys))
            if [read_reply(c.f) for _ in keys] != ["OK"] * 5:
                errors.append((i, r, "pipelined set"))
            c.send(b"".join(cmd("GET", k) for k in keys))
            want = [f"{k}:{r}".encode() for k in keys]
            got = [read_reply(c.f) for _ in keys]
            if got != want:
                errors.append((i, r, "pipelined get", got))
    except Exception as e:  # noqa: BLE001 (reported below)
        errors.append((i, "exception", repr(e)))
        barrier.abort()
    finally:
        c.close()


def test_many_clients_get_their_own_answers(redis_door, topology):
    errors = []
    barrier = threading.Barrier(CLIENTS)
    threads = [threading.Thread(target=_client, args=(redis_door, i, errors, barrier)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert errors == []
    db = topology.root()
    try:
        with db.cursor() as cur:
            cur.execute("SELECT k, v FROM manifold_redis.redis_keys WHERE db = 0 AND k LIKE 'grp:%%' AND type = 0")
            rows = dict(cur.fetchall())
    finally:
        db.close()
    for i in range(CLIENTS):
        assert rows[f"grp:{i}".encode()] == f"grp:{i}:{ROUNDS - 1}".encode()
        for j in range(5):
            k = f"grp:{i}:p{j}"
            assert rows[k.encode()] == f"{k}:{ROUNDS - 1}".encode()


def test_a_value_over_max_allowed_packet_fails_alone(topology):
    """A value the server would refuse (it closes the connection on a packet past its
    `max_allowed_packet`) fails its own command only: the batch's other writes commit."""
    from redisdiff import start_door
    root = topology.root()
    with root.cursor() as cur:
        cur.execute("SELECT @@global.max_allowed_packet")
        before = cur.fetchone()[0]
        cur.execute("SET GLOBAL max_allowed_packet = 4194304")
    try:
        # A manifold of its own: its backend connections are opened under the new limit.
        with start_door(topology) as port:
            c = Conn(port)
            assert c.call("AUTH", "app", "app") == "OK"
            c.call("DEL", "grp:big", "grp:small", "grp:cnt")
            big = b"x" * (5 << 20)
            c.send(cmd("SET", "grp:big", big) + cmd("SET", "grp:small", "z") + cmd("INCR", "grp:cnt")
                   + cmd("SET", "grp:big2", big))
            got = [read_reply(c.f) for _ in range(4)]
            assert "max_allowed_packet" in got[0] and "max_allowed_packet" in got[3], got
            assert got[1:3] == ["OK", 1], got
            assert c.call("GET", "grp:small") == b"z"
            assert c.call("EXISTS", "grp:big", "grp:big2") == 0
            # A lone big SET (a group of one) fails alone too; the connection goes on.
            assert "max_allowed_packet" in c.call("SET", "grp:big", big)
            assert c.call("INCR", "grp:cnt") == 2
            c.close()
    finally:
        with root.cursor() as cur:
            cur.execute(f"SET GLOBAL max_allowed_packet = {before}")
        root.close()


COUNTERS = 12
PIPELINES = 8
DEPTH = 32


def _incr_client(port, i, sent, errors, barrier):
    """Pipelines of INCRs and HINCRBYs over a few keys, in an order of its own: batches that
    lock the same rows in different orders."""
    import random
    rnd = random.Random(i)
    c = Conn(port)
    try:
        assert c.call("AUTH", "app", "app") == "OK"
        barrier.wait(timeout=60)
        for p in range(PIPELINES):
            picks = [rnd.randrange(COUNTERS) for _ in range(DEPTH)]
            reqs = []
            for n in picks:
                if n % 2:
                    reqs.append(cmd("HINCRBY", "dl:h", f"f{n}", 1))
                else:
                    reqs.append(cmd("INCR", f"dl:c{n}"))
            c.send(b"".join(reqs))
            for n in picks:
                got = read_reply(c.f)
                if not isinstance(got, int):
                    errors.append((i, p, n, got))
                sent[n] += 1
    except Exception as e:  # noqa: BLE001 (reported below)
        errors.append((i, "exception", repr(e)))
        barrier.abort()
    finally:
        c.close()


def test_concurrent_pipelines_of_increments_never_fail(redis_door):
    """Many connections pipelining increments of the same few keys in different orders: a
    batch is one transaction, yet none surfaces a deadlock (redis-server never fails an INCR),
    and every increment counts once: batches lock their keys in one order first."""
    c = Conn(redis_door)
    assert c.call("AUTH", "app", "app") == "OK"
    c.call("DEL", "dl:h", *[f"dl:c{n}" for n in range(COUNTERS)])
    # The keys exist before: batches creating the same new keys in different orders may
    # still deadlock each other (docs/REDIS.md, "Batches and group commit").
    for n in range(COUNTERS):
        if n % 2:
            assert c.call("HSET", "dl:h", f"f{n}", 0) == 1
        else:
            assert c.call("SET", f"dl:c{n}", 0) == "OK"
    clients = 32
    errors = []
    sent = [[0] * COUNTERS for _ in range(clients)]
    barrier = threading.Barrier(clients)
    threads = [threading.Thread(target=_incr_client, args=(redis_door, i, sent[i], errors, barrier))
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert errors == [], errors[:3]
    for n in range(COUNTERS):
        want = sum(s[n] for s in sent)
        if n % 2:
            assert int(c.call("HGET", "dl:h", f"f{n}")) == want, n
        else:
            assert int(c.call("GET", f"dl:c{n}")) == want, n
    c.close()
