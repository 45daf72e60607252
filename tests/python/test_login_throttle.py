"""Password guessing costs time, on every door (MySQL's `connection_control`): per client
address, after 3 consecutive failed logins each further attempt waits (1 s, doubling, up to
`security.max_login_delay`) before it is checked; a success resets the address; an unknown
user counts as a wrong password; a Redis connection closes after 3 failed AUTHs.

Loopback addresses are all local: 127.0.0.1 guesses while 127.0.0.2 logs in. The tests assert
what the admin port shows (the delayed table, the waiting gauge, the counters) and that a
delayed attempt is still pending while another address gets in; the only timing asserted is
the lower bound the delay guarantees."""

import re
import socket
import time
import urllib.request

import pymysql
import pytest

import conftest
from conftest import PASSWORD, USER, Manifold, configured, free_port, run_in_thread, wait_port

GUESSER, OTHER = "127.0.0.1", "127.0.0.2"
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"


def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def admin(m, sql):
    with pymysql.connect(host="127.0.0.1", port=m.admin_port, user="admin", password="admin",
                         bind_address=OTHER) as a:
        cur = a.cursor()
        cur.execute(sql)
        return cur.fetchall()


def status(m, name):
    return int(admin(m, f"SHOW STATUS LIKE '{name}'")[0][1])


def failures(m):
    """SHOW LOGIN FAILURES as {address: (failed_attempts, next_delay_ms)}."""
    return {r[0]: (int(r[1]), int(r[3])) for r in admin(m, "SHOW LOGIN FAILURES")}


def metric(m, name):
    body = urllib.request.urlopen(f"http://127.0.0.1:{m.http_port}/metrics", timeout=10).read().decode()
    found = re.search(r"^" + re.escape(name) + r" (\d+)$", body, re.M)
    assert found, f"{name} not in /metrics"
    return int(found.group(1))


def poll(what, check, timeout=30):
    return conftest.poll(check, what, timeout)


def mysql_login(m, password, user=USER, source=GUESSER, port=None):
    """Logs in (and out); the error code when refused, None when let in."""
    try:
        pymysql.connect(host="127.0.0.1", port=port or m.port, user=user, password=password,
                        bind_address=source, connect_timeout=60, read_timeout=120).close()
        return None
    except pymysql.err.OperationalError as e:
        return e.args[0]


def delayed_attempt(m, login):
    """Runs `login` on a thread, checks that it waits out a delay (Login_waiting) while a
    correct login from another address gets in at once, and returns (its result, seconds)."""
    delays = status(m, "Login_delays")
    started = time.monotonic()
    t, out = run_in_thread(login)
    poll("the attempt waiting out its delay", lambda: status(m, "Login_waiting") == 1)
    assert status(m, "Login_delays") == delays + 1
    # Another address is not held up by the guesser's delay.
    assert mysql_login(m, PASSWORD, source=OTHER) is None
    t.join(120)
    assert not t.is_alive()
    assert "error" not in out, out
    return out["result"], time.monotonic() - started


@pytest.fixture(scope="module")
def quickstart(topology):
    """A manifold with the quick start's flags alone: the defaults are what is tested."""
    m = Manifold(topology, log_name="login-throttle")
    yield m
    m.stop_and_check()


def test_mysql_port_delays_guessing_and_a_success_resets(quickstart):
    m = quickstart
    for _ in range(3):
        assert mysql_login(m, "wrong") == 1045
    assert failures(m)[GUESSER] == (3, 1000)
    assert status(m, "Login_delayed_addresses") == 1
    # The 4th waits at least its 1 s before its answer; another address gets in meanwhile.
    code, took = delayed_attempt(m, lambda: mysql_login(m, "wrong"))
    assert code == 1045 and took >= 1.0
    assert failures(m)[GUESSER] == (4, 2000)
    # An unknown user costs what a wrong password does: delayed, and counted.
    code, took = delayed_attempt(m, lambda: mysql_login(m, PASSWORD, user="nobody"))
    assert code == 1045 and took >= 2.0
    assert failures(m)[GUESSER] == (5, 4000)
    # The right password still waits its turn, then resets the address.
    code, _ = delayed_attempt(m, lambda: mysql_login(m, PASSWORD))
    assert code is None
    assert GUESSER not in failures(m)
    delays = status(m, "Login_delays")
    assert mysql_login(m, "wrong") == 1045
    assert status(m, "Login_delays") == delays, "a first failure after a success is not delayed"
    assert failures(m)[GUESSER] == (1, 0)
    body = urllib.request.urlopen(f"http://127.0.0.1:{m.http_port}/metrics", timeout=10).read().decode()
    assert 'manifold_login_failures_total{door="mysql"} 6' in body
    assert metric(m, "manifold_login_delayed_total") == status(m, "Login_delays") >= 3
    admin(m, "FLUSH LOGIN FAILURES")
    assert failures(m) == {}


def test_admin_port_delays_guessing(quickstart):
    m = quickstart

    def admin_login(password, user="admin"):
        return mysql_login(m, password, user=user, port=m.admin_port)

    admin(m, "FLUSH LOGIN FAILURES")
    assert admin_login("wrong") == 1045
    assert admin_login("admin", user="nobody") == 1045
    assert admin_login("wrong") == 1045
    assert failures(m)[GUESSER] == (3, 1000)
    code, took = delayed_attempt(m, lambda: admin_login("wrong", user="root"))
    assert code == 1045 and took >= 1.0
    assert failures(m)[GUESSER] == (4, 2000)
    body = urllib.request.urlopen(f"http://127.0.0.1:{m.http_port}/metrics", timeout=10).read().decode()
    assert 'manifold_login_failures_total{door="admin"} 4' in body
    code, _ = delayed_attempt(m, lambda: admin_login("admin"))
    assert code is None
    assert GUESSER not in failures(m)


def test_threshold_zero_turns_the_delays_off(quickstart):
    m = quickstart
    admin(m, "FLUSH LOGIN FAILURES")
    admin(m, "SET GLOBAL security.failed_login_threshold = 0")
    try:
        delays = status(m, "Login_delays")
        for _ in range(8):
            assert mysql_login(m, "wrong") == 1045
        assert status(m, "Login_delays") == delays
        # Still counted, to show who is guessing.
        assert failures(m)[GUESSER] == (8, 0)
        assert status(m, "Login_delayed_addresses") == 0
    finally:
        admin(m, "SET GLOBAL security.failed_login_threshold = 3")
        admin(m, "FLUSH LOGIN FAILURES")
    assert admin(m, "SHOW VARIABLES LIKE 'security.%'")[0][:2] == ("security.failed_login_threshold", "3")


def redis_session(port, source=GUESSER):
    return socket.create_connection(("127.0.0.1", port), timeout=120, source_address=(source, 0))


def read_all(s):
    got = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return got
        got += chunk


def test_redis_door_closes_after_three_failed_auths_and_delays_guessing(topology, tmp_path):
    port = free_port()
    m = configured(topology, tmp_path, f'[redis]\nlisten = "127.0.0.1:{port}"\n', "redis-throttle")
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        # Pipelined guesses do not get past the third: its WRONGPASS, then the connection closes.
        with redis_session(port) as s:
            s.sendall(cmd("AUTH", USER, "a") + cmd("AUTH", "b") + cmd("HELLO", "3", "AUTH", "nobody", PASSWORD)
                      + cmd("AUTH", USER, PASSWORD) + cmd("PING"))
            assert read_all(s) == WRONGPASS * 3
        assert failures(m)[GUESSER] == (3, 1000)
        body = urllib.request.urlopen(f"http://127.0.0.1:{m.http_port}/metrics", timeout=10).read().decode()
        assert 'manifold_login_failures_total{door="redis"} 3' in body

        # The next guess, on a new connection, waits; another address logs in meanwhile.
        def guess():
            with redis_session(port) as s:
                s.sendall(cmd("AUTH", USER, "wrong") + cmd("QUIT"))
                return read_all(s)

        delays = status(m, "Login_delays")
        started = time.monotonic()
        t, out = run_in_thread(guess)
        poll("the AUTH waiting out its delay", lambda: status(m, "Login_waiting") == 1)
        with redis_session(port, OTHER) as s:
            s.sendall(cmd("AUTH", USER, PASSWORD) + cmd("PING") + cmd("QUIT"))
            assert read_all(s) == b"+OK\r\n+PONG\r\n+OK\r\n"
        t.join(120)
        assert out.get("result") == WRONGPASS + b"+OK\r\n", out
        assert time.monotonic() - started >= 1.0
        assert status(m, "Login_delays") == delays + 1
        assert failures(m)[GUESSER] == (4, 2000)

        # The right password waits its turn too (2 s), then gets in and resets the address.
        with redis_session(port) as early:
            early.sendall(cmd("AUTH", USER, PASSWORD))
            assert early.recv(100) == b"+OK\r\n"
            assert GUESSER not in failures(m)
            for _ in range(3):
                with redis_session(port) as s:
                    s.sendall(cmd("AUTH", USER, "x") + cmd("QUIT"))
                    assert read_all(s) == WRONGPASS + b"+OK\r\n"
            assert failures(m)[GUESSER] == (3, 1000)
            # AUTHs queued in MULTI run inside EXEC, where they cannot wait: while the address
            # is delayed they are refused unchecked (the right password too), not counted, and
            # the session keeps its earlier login.
            delays = status(m, "Login_delays")
            early.sendall(cmd("MULTI") + cmd("AUTH", USER, "bad") + cmd("AUTH", USER, PASSWORD)
                          + cmd("EXEC") + cmd("PING") + cmd("QUIT"))
            assert read_all(early) == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n" + WRONGPASS * 2 \
                + b"+PONG\r\n+OK\r\n"
            assert status(m, "Login_delays") == delays
            assert failures(m)[GUESSER] == (3, 1000)
    finally:
        m.stop_and_check()
