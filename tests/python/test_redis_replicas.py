"""`redis.read_from = "replicas"`: the Redis door's read-only batches run on the replicas,
once they have applied the client's own last write; with the default (`"primary"`), the
replicas get no reads from the door.

- Reads go to the replicas: the door's statements (`Com_stmt_execute`) on each replica
  against the primary's while one client reads.
- A client reads its own writes: clients at once (so that groups of several connections
  form) run SET/GET ping-pong, pipelines of writes then of reads, and mixed pipelines, and
  never read an older value; meanwhile one replica stops applying (`FLUSH TABLES WITH READ
  LOCK`: it still answers reads, its lag stays within bounds) so that reads sent there must
  wait for the client's write, time out, and go elsewhere.
"""

import threading
import time

import pytest
from conftest import configured, free_port, wait_port
from redisdiff import Conn, cmd, read_reply

CLIENTS = 6
ROUNDS = 300


def _door(topology, tmp_path_factory, name, read_from):
    """A manifold with the replicas and the Redis door reading from `read_from`; yields
    (manifold, port)."""
    port = free_port()
    toml = (f'[redis]\nlisten = "127.0.0.1:{port}"\nread_from = "{read_from}"\n'
            '[routing]\ncausal_read_timeout = "300ms"\n')
    m = configured(topology, tmp_path_factory.mktemp(name), toml, name, split=True)
    wait_port(port, m.proc, "manifold's Redis door")
    return m, port


def _wait_measured(m):
    """Until the monitor has measured every replica's lag (`SHOW BACKENDS` on the admin
    port): from then on the replicas could take reads."""
    import pymysql  # noqa: PLC0415

    def replicas():
        with pymysql.connect(host="127.0.0.1", port=m.admin_port, user="admin", password="admin") as a, \
                a.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW BACKENDS")
            return [r for r in cur.fetchall() if r["role"] == "replica"]

    deadline = time.time() + 30
    while not ((rows := replicas()) and all(r["state"] == "up" and r["lag_ms"] not in ("", None) for r in rows)):
        assert time.time() < deadline, f"the monitor never measured the replicas: {rows}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def replicas_door(topology, tmp_path_factory):
    m, port = _door(topology, tmp_path_factory, "redis-replicas", "replicas")
    yield port
    text = m.stop_and_check()
    assert "panicked" not in text


@pytest.fixture(scope="module")
def primary_door(topology, tmp_path_factory):
    m, port = _door(topology, tmp_path_factory, "redis-primary-reads", "primary")
    _wait_measured(m)
    yield port
    m.stop_and_check()


def _executes(topology, port):
    with topology.root(port) as c, c.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'")
        return int(cur.fetchone()[1])


def _counts(topology):
    return [_executes(topology, p) for p in [topology.primary_port, *topology.replica_ports]]


def _client(port):
    c = Conn(port)
    assert c.call("AUTH", "app", "app") == "OK"
    return c


def _wait_for_replica_reads(topology, c):
    """Until the monitor has measured the replicas' lag (unknown lag: no reads), a read may
    go to the primary."""
    deadline = time.time() + 20
    while time.time() < deadline:
        before = _counts(topology)
        for _ in range(10):
            c.call("GET", "rep:warm")
        after = _counts(topology)
        if all(a - b > 0 for a, b in zip(after[1:], before[1:])):
            return
        time.sleep(0.2)
    pytest.fail("the door's reads never reached both replicas")


def test_reads_go_to_the_replicas(replicas_door, topology):
    c = _client(replicas_door)
    try:
        assert c.call("SET", "rep:k", "v") == "OK"
        _wait_for_replica_reads(topology, c)
        before = _counts(topology)
        for _ in range(200):
            assert c.call("GET", "rep:k") == b"v"
        # A read-only pipeline of several commands runs there too.
        c.send(b"".join([cmd("GET", "rep:k"), cmd("EXISTS", "rep:k"), cmd("STRLEN", "rep:k")] * 20))
        assert [read_reply(c.f) for _ in range(60)] == [b"v", 1, 1] * 20
        after = _counts(topology)
    finally:
        c.close()
    primary, *replicas = [a - b for a, b in zip(after, before)]
    # 200 GETs and 20 batches: each replica took its share; the primary only what the
    # sweeper runs.
    assert sum(replicas) >= 220, (primary, replicas)
    assert all(r >= 50 for r in replicas), replicas
    assert primary < 50, (primary, replicas)


def test_by_default_replicas_get_no_reads(primary_door, topology):
    c = _client(primary_door)
    try:
        assert c.call("SET", "rep:k", "v") == "OK"
        # (The fixture waited for the monitor to measure the replicas: they could take reads.)
        before = _counts(topology)
        for _ in range(100):
            assert c.call("GET", "rep:k") == b"v"
        c.send(b"".join([cmd("GET", "rep:k"), cmd("EXISTS", "rep:k")] * 10))
        assert [read_reply(c.f) for _ in range(20)] == [b"v", 1] * 10
        after = _counts(topology)
    finally:
        c.close()
    primary, *replicas = [a - b for a, b in zip(after, before)]
    assert replicas == [0] * len(replicas), (primary, replicas)
    assert primary >= 110


def _rounds(port, i, errors, start):
    c = _client(port)
    try:
        start.wait(timeout=60)
        for r in range(ROUNDS):
            k = f"rep:{i}"
            v = f"{i}:{r}".encode()
            # Ping-pong.
            if c.call("SET", k, v) != "OK":
                errors.append((i, r, "set"))
            got = c.call("GET", k)
            if got != v:
                errors.append((i, r, "get", got))
            # A pipeline of writes, then one of reads (separate batches).
            keys = [f"rep:{i}:p{j}" for j in range(3)]
            c.send(b"".join([cmd("SET", key, v) for key in keys] + [cmd("INCR", f"rep:{i}:n")]))
            if [read_reply(c.f) for _ in range(4)] != ["OK"] * 3 + [r + 1]:
                errors.append((i, r, "pipelined writes"))
            c.send(b"".join([cmd("GET", key) for key in keys] + [cmd("GET", f"rep:{i}:n")]))
            got = [read_reply(c.f) for _ in range(4)]
            if got != [v] * 3 + [str(r + 1).encode()]:
                errors.append((i, r, "pipelined reads", got))
            # A read batch that is not only GETs (no group), after a write of another type.
            c.send(cmd("HSET", f"rep:{i}:h", "f", v))
            read_reply(c.f)
            c.send(cmd("HGET", f"rep:{i}:h", "f") + cmd("EXISTS", k))
            got = [read_reply(c.f), read_reply(c.f)]
            if got != [v, 1]:
                errors.append((i, r, "hget", got))
            # A write and its read in one pipeline.
            c.send(cmd("SET", k, v + b"!") + cmd("GET", k))
            got = [read_reply(c.f), read_reply(c.f)]
            if got != ["OK", v + b"!"]:
                errors.append((i, r, "mixed", got))
    except Exception as e:  # noqa: BLE001 (reported below)
        errors.append((i, "exception", repr(e)))
    finally:
        c.close()


def test_a_client_reads_its_own_writes(replicas_door, topology):
    c = _client(replicas_door)
    try:
        keys = [f"rep:{i}{s}" for i in range(CLIENTS) for s in ("", ":p0", ":p1", ":p2", ":n", ":h")]
        c.call("DEL", *keys)
        _wait_for_replica_reads(topology, c)
    finally:
        c.close()
    errors = []
    start = threading.Barrier(CLIENTS + 1)
    threads = [threading.Thread(target=_rounds, args=(replicas_door, i, errors, start)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    before = _counts(topology)
    start.wait(timeout=60)
    # Meanwhile one replica stops applying for a while, twice: it still reads, within its
    # lag bound, but without the clients' writes.
    for _ in range(2):
        time.sleep(0.5)
        lock = topology.root(topology.replica_ports[0])
        try:
            lock.cursor().execute("FLUSH TABLES WITH READ LOCK")
            time.sleep(2)
            lock.cursor().execute("UNLOCK TABLES")
        finally:
            lock.close()
    for t in threads:
        t.join(600)
    after = _counts(topology)
    assert errors == [], errors[:10]
    _, *replicas = [a - b for a, b in zip(after, before)]
    assert all(r > 100 for r in replicas), replicas


def _lockstep(port, i, n, errors, barrier):
    c = _client(port)
    try:
        for r in range(60):
            v = f"{i}:{r}".encode()
            # Every client's SET at once, then every GET: groups of several connections
            # (a SET group's commit is each member's write; a GET group waits for all).
            # Odd rounds: a SET with an option, which runs alone: members of the next GET
            # group each wait for a write of their own.
            barrier.wait(timeout=60)
            opts = ("KEEPTTL",) if r % 2 else ()
            if c.call("SET", f"rep:g{i}", v, *opts) != "OK":
                errors.append((i, r, "set"))
            barrier.wait(timeout=60)
            got = c.call("GET", f"rep:g{i}")
            if got != v:
                errors.append((i, r, "get", got))
    except Exception as e:  # noqa: BLE001 (reported below)
        errors.append((i, "exception", repr(e)))
        barrier.abort()
    finally:
        c.close()


def test_groups_read_their_members_writes(replicas_door, topology):
    n = 24
    c = _client(replicas_door)
    try:
        c.call("DEL", *[f"rep:g{i}" for i in range(n)])
        _wait_for_replica_reads(topology, c)
    finally:
        c.close()
    errors = []
    barrier = threading.Barrier(n)
    threads = [threading.Thread(target=_lockstep, args=(replicas_door, i, n, errors, barrier)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert errors == [], errors[:10]


# --- WAIT ---------------------------------------------------------------------------------

def test_wait_counts_the_replicas_that_applied_the_clients_write(primary_door, topology, redis_reference):
    """`WAIT numreplicas timeout` counts the replicas in service that have applied the
    client's last write (its GTID): both once they have it; one while the other stopped
    applying, after the timeout; the stopped one again as soon as it catches up, for a
    `WAIT` with no timeout that was waiting meanwhile. A client that leaves while it waits
    harms no one. Inside MULTI it answers at once, from scripts it is refused; argument
    errors are redis-server's."""
    c = _client(primary_door)
    ref = _client(redis_reference)
    # Argument errors, as redis-server words them (and in its order: numreplicas first).
    for args in [("x", "0"), ("0", "x"), ("0", "-1"), ("x", "-1"), ("0", "1.5"), ("1",)]:
        assert c.call("WAIT", *args) == ref.call("WAIT", *args), args
    script = "return redis.call('WAIT', 0, 0)"
    assert c.call("EVAL", script, "0") == ref.call("EVAL", script, "0")
    # Nothing written yet: every replica in service counts (Redis counts every replica).
    assert c.call("WAIT", "0", "0") == 2
    assert c.call("SET", "wait:k", "1") == "OK"
    assert c.call("WAIT", "2", "0") == 2
    stopped = topology.replica_ports[1]
    with topology.root(stopped) as r:
        r.cursor().execute("STOP SLAVE")
        try:
            assert c.call("SET", "wait:k", "2") == "OK"
            # One replica has it; the other never will while stopped.
            assert c.call("WAIT", "2", "300") == 1
            assert c.call("WAIT", "1", "0") == 1
            # Inside MULTI: no waiting (Redis does not block there), what is known now.
            c.send(cmd("MULTI") + cmd("WAIT", "2", "0") + cmd("EXEC"))
            assert read_reply(c.f) == "OK" and read_reply(c.f) == "QUEUED"
            known = read_reply(c.f)[0]
            assert isinstance(known, int) and known < 2
            # A client that leaves while it waits: the door goes on serving the others.
            gone = _client(primary_door)
            assert gone.call("SET", "wait:gone", "1") == "OK"
            gone.send(cmd("WAIT", "2", "0"))
            time.sleep(0.2)
            gone.close()
            # WAITs with no timeout, answered once the stopped replica catches up: more of
            # them than a worker asks replicas for at once (the rest follow the monitor).
            waiters = [_client(primary_door) for _ in range(40)]
            for i, w in enumerate(waiters):
                assert w.call("SET", f"wait:w{i}", "3") == "OK"
                w.send(cmd("WAIT", "2", "0"))
            assert c.call("GET", "wait:w39") == b"3"
            time.sleep(0.3)
        finally:
            r.cursor().execute("START SLAVE")
    for w in waiters:
        assert read_reply(w.f) == 2
        w.close()
    assert c.call("WAIT", "2", "0") == 2
    c.close()
    ref.close()

