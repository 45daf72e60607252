"""Backend failures as clients see them: an unreachable backend (login works, statements get
ERR 7701 naming the backend), and a backend that dies in the middle of a streamed result (the
client gets an error, never a hang; manifold keeps serving and reports 7701 afterwards).

The dying backend is a real MariaDB of its own (a one-server topology started for the test),
killed with SIGKILL: the shared topology is never touched."""

import os
import signal
import time
from types import SimpleNamespace

import pymysql
import pymysql.cursors
import pytest

import rawmysql
from rawmysql import wait_for_log
from conftest import PASSWORD, USER, Manifold, free_port, start_testkit


def short_failover(tmp_path):
    """Arguments for a manifold that waits 1 s (not the default 10 s) for a lost primary to come
    back before it answers ERR 7701: these tests wait for that answer many times."""
    cfg = tmp_path / "short-failover.toml"
    cfg.write_text('[routing]\nfailover_timeout = "1s"\n')
    return ["--config", str(cfg)]


@pytest.fixture
def unreachable(topology, tmp_path):
    """A manifold whose primary is a port nothing listens on."""
    dead = f"127.0.0.1:{free_port()}"
    fake = SimpleNamespace(primary=dead, cert=topology.cert, key=topology.key)
    m = Manifold(fake, short_failover(tmp_path), log_name="manifold-bad-backend-down")
    m.dead = dead
    yield m
    m.stop_and_check()


def test_backend_unreachable_gives_7701_and_keeps_the_session(unreachable):
    c = rawmysql.connect(unreachable.port)  # authentication is manifold's own
    other = rawmysql.connect(unreachable.port)
    for _ in range(2):
        with pytest.raises(rawmysql.MySQLError) as e:
            c.query("SELECT 1")
        assert (e.value.code, e.value.sqlstate) == (7701, "08S01")
        assert unreachable.dead in e.value.message, e.value.message
        # The session stays open and answers what needs no backend.
        assert c.ping()[:1] == b"\x00"
    with pytest.raises(rawmysql.MySQLError) as e:
        other.query("SELECT 2")
    assert e.value.code == 7701
    wait_for_log(unreachable.log_text, f"connection=", "no backend connection", unreachable.dead)
    c.quit()
    other.quit()


def test_backend_unreachable_pymysql(unreachable):
    """PyMySQL's connect() runs SET NAMES, so the 7701 shows at connect."""
    with pytest.raises(pymysql.err.OperationalError) as e:
        unreachable.connect(ssl_disabled=True)
    assert e.value.args[0] == 7701
    assert unreachable.dead in e.value.args[1]


def test_backend_unreachable_with_database(unreachable):
    c = rawmysql.connect(unreachable.port, database="mysql")
    with pytest.raises(rawmysql.MySQLError) as e:
        c.ping()  # a schema from the handshake is confirmed on first use, as a login would
    assert e.value.code == 7701
    c.quit()


@pytest.fixture
def own_topology():
    """A one-server MariaDB topology that this test may kill."""
    with start_testkit(0) as info:
        yield SimpleNamespace(primary=info["primary"], cert=info["cert"], key=info["key"],
                              pid=int(info["pids"].split(",")[0]),
                              root_password=info["root_password"])


def test_backend_killed_mid_result(own_topology, tmp_path):
    m = Manifold(own_topology, short_failover(tmp_path), log_name="manifold-bad-backend-killed")
    try:
        bystander = rawmysql.connect(m.port)
        assert bystander.scalar("SELECT 1") == "1"

        conn = m.connect(ssl_disabled=True, cursorclass=pymysql.cursors.SSCursor, read_timeout=30, database="mysql")
        cur = conn.cursor()
        cur.execute("SELECT SLEEP(0.001), seq FROM seq_1_to_1000000")
        first = [cur.fetchone() for _ in range(5)]
        assert [row[1] for row in first] == [1, 2, 3, 4, 5]

        os.kill(own_topology.pid, signal.SIGKILL)

        # The stream ends with an error, not a hang (read_timeout=30 would turn a hang into
        # a 2013 "Lost connection" after 30 s, which the assertion below tells apart).
        started = time.monotonic()
        with pytest.raises(pymysql.err.MySQLError) as e:
            for _ in cur.fetchall_unbuffered():
                pass
        code = e.value.args[0]
        print(f"client saw {e.value.args!r} after {time.monotonic() - started:.1f}s")
        assert code == 7702 or (code == 2013 and "timed out" not in str(e.value.args)), e.value.args
        if code == 7702:
            assert "Lost connection to backend" in e.value.args[1]
        if cur._result is not None:  # keep PyMySQL from draining a dead stream on GC
            cur._result.unbuffered_active = False
        try:
            conn.close()
        except pymysql.err.Error:
            pass
        wait_for_log(m.log_text, "backend connection lost")

        # manifold keeps serving: a new client logs in; its statements get 7701 (nothing to
        # connect to) naming the backend.
        fresh = rawmysql.connect(m.port)
        with pytest.raises(rawmysql.MySQLError) as e2:
            fresh.query("SELECT 1")
        assert e2.value.code == 7701
        assert own_topology.primary in e2.value.message
        assert fresh.ping()[:1] == b"\x00"
        fresh.quit()

        # The session that was idle on its own backend connection: manifold closes it when its
        # backend connection dies, as the server closing it directly would (a driver checking
        # its idle connection then reconnects). If the close races with this statement, a
        # protocol-correct error (7702 lost, or 7701) is fine too; a hang or a success is not.
        try:
            bystander.query("SELECT 2")
            pytest.fail("a statement succeeded on a dead backend")
        except rawmysql.MySQLError as e3:
            assert e3.code in (7701, 7702), e3
        except rawmysql.ConnectionClosed:
            pass
        bystander.close()
    finally:
        log = m.stop_and_check()
    assert "panicked" not in log


def test_backend_killed_while_statement_runs(own_topology, tmp_path):
    """Killed before the first byte of the answer: the client stream is at a packet boundary,
    so manifold can say what happened: ERR 7702 (lost connection to backend)."""
    m = Manifold(own_topology, short_failover(tmp_path), log_name="manifold-bad-backend-killed2")
    try:
        c = rawmysql.connect(m.port)
        port = rawmysql.local_port(c)
        assert c.scalar("SELECT 1") == "1"
        c.send_command(b"\x03SELECT SLEEP(60)")
        # Wait (bounded) until the statement is running on the server, then kill it. The
        # server's own list: through manifold, the process list is manifold's sessions.
        host, server_port = own_topology.primary.rsplit(":", 1)
        watcher = pymysql.connect(host=host, port=int(server_port), user="root",
                                  password=own_topology.root_password)
        for _ in range(200):
            with watcher.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(60)'")
                if cur.fetchone()[0] == 1:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("SELECT SLEEP(60) never showed up in the process list")
        os.kill(own_topology.pid, signal.SIGKILL)
        c.settimeout(30)
        with pytest.raises(rawmysql.MySQLError) as e:
            c.read_results()
        assert (e.value.code, e.value.sqlstate) == (7702, "08S01")
        assert "Lost connection to backend during query" in e.value.message
        assert c.wait_closed(timeout=30) == []  # the session's server state died with it
        c.close()
        wait_for_log(m.log_text, f"peer=127.0.0.1:{port}", "backend connection lost")
        fresh = rawmysql.connect(m.port)
        with pytest.raises(rawmysql.MySQLError) as e2:
            fresh.query("SELECT 1")
        assert e2.value.code == 7701
        fresh.quit()
        watcher.close()
    finally:
        m.stop_and_check()
