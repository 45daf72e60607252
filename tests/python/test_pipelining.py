"""Pipelining across sessions, on by default: a lone autocommit `SELECT` of a session waiting
for a backend connection is written right behind another session's statement on a busy
connection, and reads its own answer there. It must stay invisible to clients: every answer
is the session's own, a follower behind a slow statement does not wait for it, `KILL QUERY`
interrupts its target's statement and no other session's, and `SHOW WARNINGS` after a
pipelined statement says what MariaDB says.

Each test runs a manifold of its own with one worker and two backend connections (fixed, not
adaptive) and the default `pool.pipeline_depth`, so that sessions must wait and pipelining
happens; with no replica, every statement runs on the primary. A "gate" holds a backend
connection on demand: a session's `SELECT` of a table a root session has locked waits on the
server until the gate opens."""

import random
import threading
import time

import pymysql
import pytest

from conftest import USER, PASSWORD, configured, run_in_thread
from test_admin import scrape

INTERRUPTED = 1317

TINY_POOL = """
[engine]
threads = 1

[pool]
min_idle = 0
max_size = 2
adaptive = false
wait_timeout = "30s"
"""


@pytest.fixture
def tiny(topology, tmp_path):
    """One worker, two backend connections, pipelining as configured by default."""
    m = configured(topology, tmp_path, TINY_POOL, "manifold-pipeline")
    yield m
    m.stop_and_check()


def connect(m, schema, **kw):
    return m.connect(database=schema, autocommit=True, **kw)


def rows(conn, sql):
    cur = conn.cursor()
    cur.execute(sql)
    return cur.fetchall()


def kill_query(conn, target):
    """`KILL QUERY` of session `target`'s statement, sent on `conn` (through manifold)."""
    conn.cursor().execute(f"KILL QUERY {target.thread_id()}")


def admin_status(m, name):
    with pymysql.connect(host="127.0.0.1", port=m.admin_port, user="admin", password="admin") as a:
        cur = a.cursor()
        cur.execute(f"SHOW STATUS LIKE '{name}'")
        return int(cur.fetchone()[1])


def pipelined(m):
    """Statements written behind another session's so far (`manifold_pipelined_statements_total`)."""
    return admin_status(m, "Pipelined_statements")


def polled(check, timeout=20):
    """Bounded poll until `check()` is true; says whether it became true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def poll(check, what, timeout=20):
    if not polled(check, timeout):
        pytest.fail(f"{what}: not within {timeout}s")


def server_count(topology, where, args=()):
    with topology.root() as r:
        cur = r.cursor()
        cur.execute(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE {where}", args)
        return cur.fetchone()[0]


def outcome(out):
    """What a statement run by `run_in_thread` got: ("rows", rows) or ("err", code)."""
    if "error" in out:
        e = out["error"]
        assert isinstance(e, pymysql.MySQLError), repr(e)
        return ("err", e.args[0])
    return ("rows", out["result"])


def interrupted(result):
    """An answer to `SELECT SLEEP(..), ...` (or error) saying that a KILL QUERY reached it."""
    return result == ("err", INTERRUPTED) or (result[0] == "rows" and result[1][0][0] == 1)


class Gates:
    """Tables `gate0`..`gateN` that root sessions have locked: a session's `SELECT x FROM
    gateI` through manifold holds its backend connection, waiting on the server, until
    `open(I)`; then it reads the row `(I,)`."""

    def __init__(self, topology, schema):
        self.topology, self.schema = topology, schema
        self.lockers, self.held = [], []

    def lock(self, n):
        with self.topology.root() as r:
            for i in range(n):
                r.cursor().execute(f"CREATE TABLE {self.schema}.gate{i} (x INT)")
                r.cursor().execute(f"INSERT INTO {self.schema}.gate{i} VALUES ({i})")
        for i in range(n):
            locker = self.topology.root()
            self.lockers.append(locker)
            locker.cursor().execute(f"LOCK TABLES {self.schema}.gate{i} WRITE")

    def waiting(self):
        """Statements waiting at a gate on the server."""
        return server_count(self.topology, "DB = %s AND INFO LIKE 'SELECT x FROM gate%%' "
                            "AND STATE = 'Waiting for table metadata lock'", (self.schema,))

    def hold(self, sessions):
        """Session `i` of `sessions` holds a backend connection at gate `i`."""
        before = self.waiting()
        for i, s in enumerate(sessions):
            self.held.append((i, run_in_thread(lambda s=s, i=i: rows(s, f"SELECT x FROM gate{i}"))))
        poll(lambda: self.waiting() == before + len(sessions), "statements held at the gates")

    def open(self, i):
        self.lockers[i].cursor().execute("UNLOCK TABLES")

    def open_all(self):
        """Opens every gate; each statement held at one read its row."""
        for i in range(len(self.lockers)):
            self.open(i)
        for i, (t, out) in self.held:
            t.join(30)
            assert not t.is_alive()
            assert outcome(out) == ("rows", ((i,),)), (i, out)

    def close(self):
        for locker in self.lockers:
            locker.close()


@pytest.fixture
def gates(topology, schema):
    """Gates in the test's schema, all opened at the end (else it could not be dropped)."""
    g = Gates(topology, schema)
    yield g
    g.close()


def start_waiting(m, session, sql):
    """Runs `sql` on `session` in a thread of its own, returning once it waits for a backend
    connection (one more statement waits in the pool)."""
    before = admin_status(m, "Pool_waiting")
    run = run_in_thread(lambda: rows(session, sql))
    poll(lambda: admin_status(m, "Pool_waiting") == before + 1, f"{sql!r} waiting for a connection")
    return run


def finished(run, want):
    t, out = run
    t.join(30)
    assert not t.is_alive()
    assert outcome(out) == want, out


def all_answer_their_own(sessions, rounds=10):
    """Each session selects values of its own, all at once; each gets its own back."""
    def work(i):
        return [rows(sessions[i], f"SELECT {i * 1000 + k}")[0][0] for k in range(rounds)]

    runs = [run_in_thread(lambda i=i: work(i)) for i in range(len(sessions))]
    for i, (t, out) in enumerate(runs):
        t.join(60)
        assert not t.is_alive()
        assert out.get("result") == [i * 1000 + k for k in range(rounds)], (i, out)


def test_pipelining_is_on_by_default_and_every_answer_is_its_own(tiny, schema):
    """12 sessions doing point selects on two backend connections: statements are pipelined
    (no configuration asked for it), and every session reads exactly the rows it asked for."""
    with pymysql.connect(host="127.0.0.1", port=tiny.admin_port, user="admin", password="admin") as a:
        cur = a.cursor()
        cur.execute("SHOW VARIABLES LIKE 'pool.pipeline_depth'")
        assert [r[:2] for r in cur.fetchall()] == [("pool.pipeline_depth", "8")]
    with connect(tiny, schema) as c:
        c.cursor().execute("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(20))")
        c.cursor().execute("INSERT INTO kv SELECT seq, CONCAT('v', seq) FROM seq_1_to_2400")
    sessions = [connect(tiny, schema) for _ in range(12)]
    metric = ("manifold_pipelined_statements_total", ())
    before, metric_before = pipelined(tiny), scrape(tiny)[metric]

    def work(i):
        got = []
        for k in range(200):
            key = i * 200 + k + 1
            got.append((key, rows(sessions[i], f"SELECT id, v FROM kv WHERE id = {key}")))
        return got

    runs = [run_in_thread(lambda i=i: work(i)) for i in range(12)]
    for i, (t, out) in enumerate(runs):
        t.join(60)
        assert not t.is_alive()
        assert "error" not in out, out
        for key, got in out["result"]:
            assert got == ((key, f"v{key}"),), (i, key, got)
    assert pipelined(tiny) > before
    assert scrape(tiny)[metric] > metric_before
    for s in sessions:
        s.close()


def test_a_follower_behind_a_slow_statement_does_not_wait_for_it(topology, tiny, schema, gates):
    """Both connections held; L's `SELECT x FROM gate2` (held on the server until its gate
    opens) takes the first to come back, with F's `SELECT 4242` written behind it. F gives up
    its place and runs on the other connection: its answer comes while L's statement still
    runs. Once L's answer comes (and F's first one, read and dropped behind it), every
    session reads its own answers."""
    leader, follower, *holders = [connect(tiny, schema) for _ in range(4)]
    gates.lock(3)
    gates.hold(holders)
    before = pipelined(tiny)
    lead = start_waiting(tiny, leader, "SELECT x FROM gate2")
    follow = start_waiting(tiny, follower, "SELECT 4242")
    # The first connection to come back goes to L, first in line, which writes F's
    # statement behind its own.
    gates.open(0)
    poll(lambda: pipelined(tiny) == before + 1, "F's statement written behind L's")
    poll(lambda: gates.waiting() == 2, "L's statement at its gate")
    gates.open(1)
    finished(follow, ("rows", ((4242,),)))
    assert lead[0].is_alive(), "L's statement ended before F's answer came"
    gates.open_all()
    finished(lead, ("rows", ((2,),)))
    for _ in range(3):
        all_answer_their_own([leader, follower, *holders])


def test_kill_query_of_a_statement_queued_behind_another_answers_it_only(topology, tiny, schema, gates):
    """L's statement takes a connection with V's and W's written behind it; V is killed
    (KILL QUERY through manifold) while it waits, behind L or for a connection of its own:
    V is answered ERR 1317 and its statement does not run for it; L, W and the statements
    holding the connections get their own answers, and every session works afterwards."""
    leader, victim, witness, killer, *holders = [connect(tiny, schema) for _ in range(6)]
    gates.lock(3)
    gates.hold(holders)
    before = pipelined(tiny)
    lead = start_waiting(tiny, leader, "SELECT x FROM gate2")
    hit = start_waiting(tiny, victim, "SELECT SLEEP(1)")
    seen = start_waiting(tiny, witness, "SELECT SLEEP(0.2)")
    gates.open(0)
    poll(lambda: pipelined(tiny) == before + 2, "V's and W's statements written behind L's")
    # Neither holds a connection: the kill needs none, and marks V's statement.
    kill_query(killer, victim)
    gates.open(1)
    finished(hit, ("err", INTERRUPTED))
    finished(seen, ("rows", ((0,),)))
    assert lead[0].is_alive()
    gates.open_all()
    finished(lead, ("rows", ((2,),)))
    for _ in range(3):
        all_answer_their_own([leader, victim, witness, killer, *holders])


def kill_a_leader_with_followers(topology, tiny, schema, gates):
    """L's statement holds a connection (at gate 2) with F1's and F2's statements written
    behind it, and K's `KILL QUERY` of L comes through manifold. Returns the sessions
    (L, F1, F2, K, holders) once L has its answer (open gates 0 and 1)."""
    leader, f1, f2, killer, *holders = [connect(tiny, schema) for _ in range(6)]
    gates.lock(3)
    gates.hold(holders)
    before = pipelined(tiny)
    lead = start_waiting(tiny, leader, "SELECT x FROM gate2")
    first = start_waiting(tiny, f1, "SELECT SLEEP(0.2), 11")
    second = start_waiting(tiny, f2, "SELECT 22")
    gates.open(0)
    poll(lambda: pipelined(tiny) == before + 2, "F1's and F2's statements written behind L's")
    poll(lambda: gates.waiting() == 2, "L's statement at its gate")
    # K needs a connection to send the kill on: it comes when gate 1 opens.
    kill = run_in_thread(lambda: kill_query(killer, leader))
    gates.open(1)
    finished(kill, ("rows", None))
    finished(lead, ("err", INTERRUPTED))
    finished(first, ("rows", ((0, 11),)))
    finished(second, ("rows", ((22,),)))
    return leader, f1, f2, killer, holders


def test_kill_query_of_a_leader_interrupts_it_and_not_the_statements_behind(topology, tiny, schema, gates):
    """KILL QUERY of L, whose statement runs with two others written behind it: L is
    interrupted, F1 and F2 get their own answers (not ERR 1317, not SLEEP() = 1), and every
    session works afterwards."""
    leader, f1, f2, killer, holders = kill_a_leader_with_followers(topology, tiny, schema, gates)
    gates.open_all()
    for _ in range(3):
        all_answer_their_own([leader, f1, f2, killer, *holders])


def test_a_killed_pipelined_leader_is_not_run_again_and_shows_its_interruption(topology, tiny, schema, gates):
    """As on MariaDB, after ERR 1317 `SHOW WARNINGS` lists the interruption, and the killed
    statement is over: it does not run again (to read its conditions) on another connection."""
    leader, *_ = kill_a_leader_with_followers(topology, tiny, schema, gates)
    warnings = run_in_thread(lambda: rows(leader, "SHOW WARNINGS"))
    # Nothing of L's runs on the server any more: its statement was interrupted, answered.
    rerun = not polled(lambda: gates.waiting() == 0 and not warnings[0].is_alive(), timeout=10)
    gates.open_all()
    warnings[0].join(30)
    assert (rerun, outcome(warnings[1])) == \
        (False, ("rows", (("Error", INTERRUPTED, "Query execution was interrupted"),)))


def test_a_statement_killed_while_waiting_shows_its_interruption(topology, tiny, schema, gates):
    """A statement killed while it waits for a connection is answered ERR 1317 by manifold;
    as after MariaDB's own ERR 1317, `SHOW WARNINGS` then lists the interruption (not the
    previous statement's warning) and `@@warning_count` counts it."""
    victim, killer, *holders = [connect(tiny, schema) for _ in range(4)]
    assert rows(victim, "SELECT CAST('1abc' AS UNSIGNED)") == ((1,),)
    gates.lock(2)
    gates.hold(holders)
    hit = start_waiting(tiny, victim, "SELECT SLEEP(1)")
    kill_query(killer, victim)
    gates.open_all()
    finished(hit, ("err", INTERRUPTED))
    assert (rows(victim, "SHOW WARNINGS"), rows(victim, "SELECT @@warning_count")) == \
        ((("Error", INTERRUPTED, "Query execution was interrupted"),), ((1,),))


def test_kill_query_never_interrupts_a_statement_it_was_not_aimed_at(tiny, schema):
    """Stress: 10 sessions run short statements, pipelined on one connection, while another
    session (holding the other in a transaction, so its kills go out at once) sends KILL
    QUERY to randomly chosen ones, a few statements of its own apart. A statement may be
    interrupted (ERR 1317, or SLEEP() = 1) only if a KILL QUERY of its own session was under
    way while it ran; every answer is the session's own, and every session works after each
    round."""
    sessions = [connect(tiny, schema) for _ in range(10)]
    ids = [s.thread_id() for s in sessions]
    killer = connect(tiny, schema)
    # From here on the killer's transaction holds a connection: its kills need no wait.
    killer.cursor().execute("BEGIN")
    rows(killer, "SELECT 1")
    rng = random.Random(7)
    before = pipelined(tiny)
    hits = 0
    for rnd in range(4):
        done = threading.Event()

        def work(i):
            seen = []
            for n in range(100):
                value = i * 100000 + rnd * 1000 + n
                sql = f"SELECT SLEEP(0.001), {value}" if i % 2 == 0 else f"SELECT 0, {value}"
                start = time.monotonic()
                try:
                    got = ("rows", rows(sessions[i], sql))
                except pymysql.MySQLError as e:
                    got = ("err", e.args[0])
                seen.append((start, time.monotonic(), value, got))
            return seen

        def kill_until_done():
            kills = []
            cur = killer.cursor()
            while not done.is_set():
                target = rng.randrange(len(sessions))
                start = time.monotonic()
                cur.execute(f"KILL QUERY {ids[target]}")
                kills.append((target, start, time.monotonic()))
                for _ in range(rng.randrange(10)):
                    cur.execute("DO 0")
            return kills

        runs = [run_in_thread(lambda i=i: work(i)) for i in range(len(sessions))]
        killing = run_in_thread(kill_until_done)
        for t, _ in runs:
            t.join(60)
        done.set()
        killing[0].join(30)
        assert "error" not in killing[1], killing[1]
        kills = killing[1]["result"]
        for i, (t, out) in enumerate(runs):
            assert not t.is_alive()
            assert "error" not in out, out
            for start, end, value, got in out["result"]:
                # Under way while the statement ran: that kill may have reached it.
                aimed = any(k == i and k_start < end and k_end > start for k, k_start, k_end in kills)
                if interrupted(got):
                    assert aimed, f"session {i}'s statement {value} interrupted by a kill aimed at another"
                    hits += 1
                else:
                    assert got == ("rows", ((0, value),)), (i, value, got)
        all_answer_their_own(sessions + [killer], rounds=3)
    killer.cursor().execute("COMMIT")
    # Not vacuous: statements were pipelined, and kills did interrupt their targets.
    assert pipelined(tiny) > before
    assert hits > 0


def test_show_warnings_after_a_pipelined_statement_matches_mariadb(topology, tiny, schema):
    """10 sessions loop a SELECT raising a warning of their own, then SHOW WARNINGS and
    @@warning_count, on the two connections: whether the SELECT was pipelined (followed by
    other sessions' statements) or not, each answers exactly what MariaDB answers directly."""
    script = ["SELECT CAST('{i}abc' AS UNSIGNED)", "SHOW WARNINGS", "SELECT @@warning_count",
              "SHOW COUNT(*) WARNINGS"]

    def run(conn, i):
        return [rows(conn, sql.format(i=i)) for sql in script]

    with pymysql.connect(host="127.0.0.1", port=topology.primary_port, user=USER, password=PASSWORD,
                         database=schema, autocommit=True) as direct:
        want = [run(direct, i) for i in range(10)]
    assert want[3][1] == (("Warning", 1292, "Truncated incorrect INTEGER value: '3abc'"),)
    sessions = [connect(tiny, schema) for _ in range(10)]
    before = pipelined(tiny)
    runs = [run_in_thread(lambda i=i: [run(sessions[i], i) for _ in range(30)]) for i in range(10)]
    for i, (t, out) in enumerate(runs):
        t.join(60)
        assert not t.is_alive()
        assert "error" not in out, out
        for got in out["result"]:
            assert got == want[i], i
    assert pipelined(tiny) > before
