"""MULTI/EXEC/DISCARD/WATCH/UNWATCH through the Redis door: one SQL transaction per EXEC.

Compared with Debian's redis-server (differential): queueing, refusals at queue time
(EXECABORT), errors at run time answered in place, nesting and misuse errors, WATCH of
keys changed by another client or by the same one, or deleted. Not differential: that an
EXEC's writes are committed together (checked through SQL on the primary) and that a
failed EXEC writes nothing.

Intended difference: other clients' commands may run between the statements of an EXEC
(its writes are locked until its commit); see `crates/frontend-redis/src/multi.rs`.
"""

from redisdiff import AUTH, Conn, Err, cmd, differential, read_reply


def test_queue_exec_discard_and_errors(redis_door, redis_reference):
    k = "multi:a"
    seqs = [
        [cmd("DEL", k, "multi:b"), cmd("MULTI"), cmd("SET", k, "1"), cmd("GET", k), cmd("PING"),
         cmd("ECHO", "x"), cmd("EXEC"), cmd("GET", k)],
        # Refused at queue time: the whole transaction is discarded.
        [cmd("MULTI"), cmd("SET", k, "2"), cmd("NOSUCH", "x"), cmd("EXEC"), cmd("GET", k)],
        [cmd("MULTI"), cmd("SET", k, "3"), cmd("GET"), cmd("EXEC"), cmd("GET", k)],
        # A run-time error stays in place; the rest commits.
        [cmd("MULTI"), cmd("SET", k, "4"), cmd("SET", k, "5", "EX", "0"), cmd("GET", k), cmd("EXEC")],
        # Misuse.
        [cmd("EXEC"), cmd("DISCARD"), cmd("MULTI"), cmd("MULTI"), cmd("WATCH", k), cmd("DISCARD"),
         cmd("DISCARD"), cmd("MULTI", "x"), cmd("WATCH"), cmd("UNWATCH"), cmd("EXEC", "x")],
        [cmd("MULTI"), cmd("SET", k, "6"), cmd("DISCARD"), cmd("GET", k)],
        # SELECT inside a transaction changes the database of the commands after it.
        [cmd("SELECT", "3"), cmd("DEL", k), cmd("SELECT", "0"), cmd("MULTI"), cmd("SELECT", "3"),
         cmd("SET", k, "db3"), cmd("EXEC"), cmd("GET", k), cmd("SELECT", "0"), cmd("GET", k)],
        # WATCH of a key the same client changes: EXEC answers null.
        [cmd("WATCH", k), cmd("SET", k, "7"), cmd("MULTI"), cmd("SET", k, "8"), cmd("EXEC"), cmd("GET", k)],
        [cmd("WATCH", k, "multi:b"), cmd("MULTI"), cmd("SET", k, "9"), cmd("EXEC"), cmd("GET", k)],
        [cmd("WATCH", "multi:b"), cmd("UNWATCH"), cmd("SET", "multi:b", "x"), cmd("MULTI"), cmd("GET", "multi:b"),
         cmd("EXEC")],
        [cmd("WATCH", k), cmd("DEL", k), cmd("MULTI"), cmd("GET", k), cmd("EXEC")],
        [cmd("MULTI"), cmd("EXEC")],
    ]
    for seq in seqs:
        for pipeline in (True, False):
            differential(redis_door, redis_reference, seq, pipeline=pipeline)


def _watch_changed_by_other(port, key):
    a, b = Conn(port), Conn(port)
    try:
        for c in (a, b):
            assert c.call("AUTH", "app", "app") == "OK"
        assert a.call("SET", key, "v0") == "OK"
        assert a.call("WATCH", key) == "OK"
        assert b.call("SET", key, "other") == "OK"
        assert a.call("MULTI") == "OK"
        assert a.call("SET", key, "mine") == "QUEUED"
        first = a.call("EXEC")
        # Unchanged key: the transaction runs.
        assert a.call("WATCH", key) == "OK"
        assert a.call("MULTI") == "OK"
        assert a.call("SET", key, "mine2") == "QUEUED"
        second = a.call("EXEC")
        return first, second, a.call("GET", key)
    finally:
        a.close()
        b.close()


def test_watch_sees_other_clients(redis_door, redis_reference):
    key = "multi:w"
    assert _watch_changed_by_other(redis_door, key) == _watch_changed_by_other(redis_reference, key) \
        == (None, ["OK"], b"mine2")


def test_exec_commits_together(redis_door, topology):
    c = Conn(redis_door)
    c.send(AUTH + cmd("MULTI") + b"".join(cmd("SET", f"multi:t{i}", str(i)) for i in range(50)) + cmd("EXEC"))
    assert read_reply(c.f) == "OK" and read_reply(c.f) == "OK"
    assert [read_reply(c.f) for _ in range(50)] == ["QUEUED"] * 50
    assert read_reply(c.f) == ["OK"] * 50
    c.close()
    db = topology.root()
    try:
        with db.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM manifold_redis.redis_keys WHERE db = 0 AND k LIKE 'multi:t%'")
            assert cur.fetchone()[0] == 50
    finally:
        db.close()


def _rows_like(topology, pattern):
    db = topology.root()
    try:
        with db.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM manifold_redis.redis_keys WHERE db = 0 AND k LIKE %s", (pattern,))
            return cur.fetchone()[0]
    finally:
        db.close()


def test_failed_exec_writes_nothing(redis_door, topology):
    writes = b"".join(cmd("SET", f"multi:fail{i}", str(i)) for i in range(20))
    c, other = Conn(redis_door), Conn(redis_door)
    try:
        assert c.call("AUTH", "app", "app") == "OK" and other.call("AUTH", "app", "app") == "OK"
        assert isinstance(c.call("DEL", "multi:fw", *[f"multi:fail{i}" for i in range(20)]), int)
        # Refused at queue time: EXECABORT, and none of the queued writes is stored.
        c.send(cmd("MULTI") + writes + cmd("NOSUCH") + cmd("EXEC"))
        queued = [read_reply(c.f) for _ in range(22)]
        assert queued[:21] == ["OK"] + ["QUEUED"] * 20
        assert isinstance(queued[21], Err) and queued[21].startswith("ERR unknown command 'NOSUCH'"), queued[21]
        assert read_reply(c.f) == Err("EXECABORT Transaction discarded because of previous errors.")
        # A watched key changed by another client: EXEC answers null and writes nothing.
        assert c.call("WATCH", "multi:fw") == "OK"
        assert other.call("SET", "multi:fw", "changed") == "OK"
        c.send(cmd("MULTI") + writes + cmd("EXEC"))
        assert [read_reply(c.f) for _ in range(21)] == ["OK"] + ["QUEUED"] * 20
        assert read_reply(c.f) is None
        assert c.call("EXISTS", *[f"multi:fail{i}" for i in range(20)]) == 0
    finally:
        c.close()
        other.close()
    # Through SQL on the primary: no row of either transaction.
    assert _rows_like(topology, "multi:fail%") == 0
    assert _rows_like(topology, "multi:fw") == 1


def test_refused_exec_says_why(redis_door, redis_reference):
    from redisdiff import replies
    seq = [cmd("EXEC"), cmd("MULTI"), cmd("EXEC"), cmd("AUTH", "app", "app"), cmd("MULTI"),
           cmd("EXEC", "x"), cmd("EXEC")]
    assert replies(redis_door, seq) == replies(redis_reference, seq)
