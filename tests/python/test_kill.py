"""Connection ids are manifold's: `CONNECTION_ID()` answers the id the handshake announced,
whichever backend connection runs the statement, and `KILL [QUERY] id` acts on manifold's
session with that id (its statement on its backend connection, and its client connection).
Failures are compared with MariaDB's own answers."""

import time

import pymysql
import pytest

import rawmysql
from conftest import USER, PASSWORD, configured, native_hash, run_in_thread


def two_users_config(account):
    name, password = account
    return f"""
[engine]
threads = 2

[pool]
min_idle = 0
max_size = 2

[[users]]
name = "{name}"
password_native = "{native_hash(password)}"
backend_password = "{password}"
"""


@pytest.fixture
def small(topology, tmp_path, mariadb_account):
    """Two workers with two backend connections each; users `app` and a second account."""
    m = configured(topology, tmp_path, two_users_config(mariadb_account), "manifold-kill")
    m.account = mariadb_account
    yield m
    m.stop_and_check()


def test_connection_id_is_the_handshake_id_on_every_backend_connection(small):
    conns = [rawmysql.connect(small.port) for _ in range(6)]
    ids = [c.handshake.connection_id for c in conns]
    assert len(set(ids)) == 6
    for _ in range(5):
        for c, want in zip(conns, ids):
            # A whole select item keeps its column name; inside an expression the call reads
            # as the number (hence the alias).
            assert c.query("SELECT CONNECTION_ID(), CONNECTION_ID() = @@pseudo_thread_id AS same") == \
                [("rows", ["CONNECTION_ID()", "same"], [(str(want), "0")])]
    # In a prepared statement too, and inside expressions.
    c, want = conns[0], ids[0]
    sid, _, _ = c.prepare("SELECT CONCAT('id:', CONNECTION_ID())")
    assert c.execute(sid)[-1][2] == [(f"id:{want}",)]
    for conn in conns:
        conn.quit()


def wait_until_sleeping(topology, timeout=20):
    """Bounded poll until some connection on the primary runs SLEEP()."""
    deadline = time.monotonic() + timeout
    with topology.root() as r:
        cur = r.cursor()
        while time.monotonic() < deadline:
            cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(%%'")
            if cur.fetchone()[0]:
                return
            time.sleep(0.05)
    pytest.fail("the statement to kill never started")


def test_kill_query_interrupts_the_sessions_statement_only(topology, small):
    a = small.connect(autocommit=True)
    b = small.connect(autocommit=True)
    a_id = a.thread_id()
    cur = a.cursor()
    t, out = run_in_thread(lambda: (cur.execute("SELECT SLEEP(60)"), cur.fetchall()))
    wait_until_sleeping(topology)
    b.cursor().execute(f"KILL QUERY {a_id}")
    t.join(30)
    assert not t.is_alive(), "KILL QUERY did not interrupt the statement"
    # As MariaDB answers a killed statement.
    assert isinstance(out.get("error"), pymysql.err.OperationalError), out
    assert out["error"].args[0] == 1317, out
    # The session lives on.
    c = a.cursor()
    c.execute("SELECT CONNECTION_ID()")
    assert c.fetchone() == (a_id,)
    a.close()
    b.close()


def test_kill_connection_closes_the_session_idle_or_busy(topology, small):
    a, busy, b = (small.connect(autocommit=True) for _ in range(3))
    b.cursor().execute(f"KILL {a.thread_id()}")
    with pytest.raises(pymysql.err.OperationalError):
        a.cursor().execute("SELECT 1")
    cur = busy.cursor()
    t, out = run_in_thread(lambda: cur.execute("SELECT SLEEP(60)"))
    wait_until_sleeping(topology)
    b.kill(busy.thread_id())  # COM_PROCESS_KILL
    t.join(30)
    assert not t.is_alive(), "KILL did not end the busy session"
    assert isinstance(out.get("error"), pymysql.err.OperationalError), out
    c = b.cursor()
    c.execute("SELECT 1")
    assert c.fetchone() == (1,)
    b.close()


def kill_errors(port, login, other_id):
    """Error codes for KILL forms that cannot succeed; the last kills the session itself."""
    c = rawmysql.connect(port, **login)
    own = c.handshake.connection_id
    out = []
    for sql in ("KILL 4000000000", "KILL 999999", f"KILL QUERY {own}", f"KILL {other_id}"):
        try:
            c.query(sql)
            out.append(None)
        except rawmysql.MySQLError as e:
            out.append(e.code)
    try:
        c.query(f"KILL {own}")
    except rawmysql.MySQLError as e:
        out.append(e.code)
    out.append(c.wait_closed(timeout=10) == [])
    return out


def test_kill_errors_match_the_server(topology, small):
    name, password = small.account
    login = dict(user=name, password=password)
    # Another user's session: MariaDB refuses it to a user without the privilege to kill it.
    with topology.root() as r:
        r.cursor().execute("CREATE USER IF NOT EXISTS 'nokill'@'%' IDENTIFIED BY 'nokill'")
    try:
        direct_other = rawmysql.connect(topology.primary_port)
        direct = kill_errors(topology.primary_port, dict(user="nokill", password="nokill"),
                             direct_other.handshake.connection_id)
        direct_other.quit()
    finally:
        with topology.root() as r:
            r.cursor().execute("DROP USER IF EXISTS 'nokill'@'%'")
    other = rawmysql.connect(small.port, user=USER, password=PASSWORD)
    through = kill_errors(small.port, login, other.handshake.connection_id)
    assert direct == [1094, 1094, 1317, 1095, 1927, True], direct
    assert through == direct
    # The other session was not harmed.
    assert other.scalar("SELECT 1") == "1"
    other.quit()


def test_kill_forms_manifold_cannot_map_are_refused(small):
    c = rawmysql.connect(small.port)
    for sql in ("KILL USER app", "KILL QUERY ID 3", "SELECT 1; KILL 3"):
        with pytest.raises(rawmysql.MySQLError) as e:
            c.query(sql)
        assert e.value.code == 1235, sql
    assert c.scalar("SELECT 'fine'") == "fine"
    c.quit()
