"""Password guessing costs time, on every door (MySQL's `connection_control`): per client
address and user, after 3 consecutive failed logins each further attempt waits (1 s, doubling,
up to `security.max_login_delay`) before it is checked; a success resets its own user only;
many users failing from one address delay the address; an unknown user counts as a wrong
password; the delayed attempts of an address go one at a time; a Redis connection closes after
3 failed AUTHs, inside `EXEC` too.

Loopback addresses are all local: 127.0.0.1 guesses while 127.0.0.2 logs in (and other tests
take addresses of their own). The tests assert what the admin port shows (the delayed table,
the waiting gauge, the counters) and that a delayed attempt is still pending while another
address gets in; the only timings asserted are the lower bounds the delays guarantee."""

import re
import socket
import time
import urllib.request

import pymysql
import pytest

import conftest
import rawmysql
from conftest import PASSWORD, USER, Manifold, configured, free_port, native_hash, run_in_thread, wait_port

GUESSER, OTHER = "127.0.0.1", "127.0.0.2"
# A second user: the one an attacker with an account of its own (USER) guesses at.
VICTIM, VICTIM_PW = "victim", "victim-pw"
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
    """SHOW LOGIN FAILURES as {(address, user): (failed_attempts, next_delay_ms)}."""
    return {(r[0], r[1]): (int(r[2]), int(r[5])) for r in admin(m, "SHOW LOGIN FAILURES")}


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
    m = Manifold(topology, ["--user", f"{VICTIM}:{VICTIM_PW}"], log_name="login-throttle")
    yield m
    m.stop_and_check()


def test_mysql_port_delays_guessing_and_a_success_resets(quickstart):
    m = quickstart
    for _ in range(3):
        assert mysql_login(m, "wrong") == 1045
    assert failures(m)[GUESSER, USER] == (3, 1000)
    assert status(m, "Login_delayed_addresses") == 1
    # The 4th waits at least its 1 s before its answer; another address gets in meanwhile.
    code, took = delayed_attempt(m, lambda: mysql_login(m, "wrong"))
    assert code == 1045 and took >= 1.0
    assert failures(m)[GUESSER, USER] == (4, 2000)
    # The right password still waits its turn, then resets the user.
    code, _ = delayed_attempt(m, lambda: mysql_login(m, PASSWORD))
    assert code is None
    assert failures(m) == {}
    # An unknown user costs what a wrong password does: counted, and delayed alike.
    for _ in range(3):
        assert mysql_login(m, PASSWORD, user="nobody") == 1045
    assert failures(m) == {(GUESSER, "nobody"): (3, 1000)}
    code, took = delayed_attempt(m, lambda: mysql_login(m, PASSWORD, user="nobody"))
    assert code == 1045 and took >= 1.0
    delays = status(m, "Login_delays")
    assert mysql_login(m, "wrong") == 1045
    assert status(m, "Login_delays") == delays, "another user's first failure is not delayed"
    assert failures(m)[GUESSER, USER] == (1, 0)
    body = urllib.request.urlopen(f"http://127.0.0.1:{m.http_port}/metrics", timeout=10).read().decode()
    assert 'manifold_login_failures_total{door="mysql"} 9' in body
    assert metric(m, "manifold_login_delayed_total") == status(m, "Login_delays") >= 3
    admin(m, "FLUSH LOGIN FAILURES")
    assert failures(m) == {}


def test_a_success_forgives_only_its_own_users_failures(quickstart):
    """An attacker with an account of its own guesses at another's from the same address:
    two wrong guesses, a login of its own, again. Its logins forgive the victim nothing (as
    MySQL's connection_control, which counts per 'user'@'host')."""
    m = quickstart
    admin(m, "FLUSH LOGIN FAILURES")
    for password, user in (("w1", VICTIM), ("w2", VICTIM), (PASSWORD, USER), ("w3", VICTIM)):
        assert mysql_login(m, password, user=user) == (None if user == USER else 1045)
    assert failures(m) == {(GUESSER, VICTIM): (3, 1000)}
    rows = admin(m, "SHOW LOGIN FAILURES")
    assert [r[:5] for r in rows] == [(GUESSER, VICTIM, "3", "3", "0")]
    # Its own logins are not held up; the victim's next guess is.
    delays = status(m, "Login_delays")
    assert mysql_login(m, PASSWORD) is None
    assert status(m, "Login_delays") == delays
    code, took = delayed_attempt(m, lambda: mysql_login(m, "w4", user=VICTIM))
    assert code == 1045 and took >= 1.0
    assert failures(m) == {(GUESSER, VICTIM): (4, 2000)}
    admin(m, "FLUSH LOGIN FAILURES")


def recv_exact(sock, n):
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        assert chunk, "closed early"
        got += chunk
    return got


def test_a_change_user_left_unanswered_does_not_hold_its_address_up(quickstart):
    """A delayed COM_CHANGE_USER whose client never answers the full-auth request is ended
    after connect_timeout, as a handshake is: it does not keep the address's turn, so a later
    attempt from the address is answered."""
    m = quickstart
    source = "127.0.0.8"
    for _ in range(3):
        assert mysql_login(m, "wrong", user=VICTIM, source=source) == 1045
    conn = pymysql.connect(host="127.0.0.1", port=m.port, user=USER, password=PASSWORD,
                           bind_address=source)
    sock = conn._sock
    sock.settimeout(120)
    payload = (b"\x11" + VICTIM.encode() + b"\0" + bytes([32]) + b"x" * 32 + b"\0"
               + (45).to_bytes(2, "little") + b"caching_sha2_password\0")
    sock.sendall(len(payload).to_bytes(3, "little") + b"\0" + payload)
    header = recv_exact(sock, 4)
    assert recv_exact(sock, header[0]) == b"\x01\x04", "perform full auth"
    # The client stalls here. Another attempt of the address, which needs the turn, is
    # answered (after the stalled one is ended).
    t, out = run_in_thread(lambda: mysql_login(m, VICTIM_PW, user=VICTIM, source=source))
    t.join(120)
    # Let in (7701: the victim has no backend login of its own in this topology).
    assert out == {"result": 7701}, out
    # The stalled exchange was ended and its connection closed.
    assert not read_all(sock).startswith(b"\x01")
    sock.close()
    assert failures(m).get((source, VICTIM)) is None


def test_a_burst_of_sha2_logins_is_checked_no_faster_than_one_by_one(quickstart):
    """caching_sha2_password makes a wrong password cross client round trips (the fast-path
    mismatch, then full authentication). Each check is admitted and counted with no round
    trip between, so connections that all send their first answer at once from a fresh
    address cannot all be checked before the first failures count: once the threshold's
    worth have failed, the others wait (before their "perform full authentication")."""
    m = quickstart
    source = "127.0.0.9"
    admin(m, "SET GLOBAL security.max_login_delay = '1s'")
    # A cached user (logged in since start): its wrong passwords take the fast path.
    rawmysql.RawConn(m.port, source="127.0.0.2").login(VICTIM, VICTIM_PW, plugin=rawmysql.SHA2).close()
    delays = status(m, "Login_delays")
    conns = []
    for _ in range(6):
        c = rawmysql.RawConn(m.port, source=source, timeout=120)
        hs = c.read_handshake()
        c.tls = False
        c.send_packet(c.handshake_response(VICTIM, rawmysql.sha2_scramble("wrong", hs.scramble),
                                           rawmysql.SHA2))
        conns.append(c)
    try:
        # No client has sent a password beyond its first answer, yet three of them were
        # checked and counted, and the others wait their turn and delay.
        poll("attempts waiting after three failures",
             lambda: status(m, "Login_waiting") >= 1 and status(m, "Login_delays") > delays)
        assert failures(m)[(source, VICTIM)][0] >= 3
        # The counted ones are told to perform full authentication, then refused whatever
        # they send (their one check was made).
        first = conns[0]
        assert first.read_packet() == b"\x01\x04"
        first.send_packet(b"\x02")
        key = first.read_packet()
        assert key[:1] == b"\x01", key[:8]
        first.send_packet(rawmysql.sha2_rsa_encrypt(VICTIM_PW, first.handshake.scramble, key[1:]))
        err = rawmysql.parse_err(first.read_packet())
        assert err.code == 1045, err
    finally:
        for c in conns:
            c.close()
        # The waiting ones go through their turns (their clients gone) before the table is
        # cleared for the next test.
        poll("the burst's attempts done", lambda: status(m, "Login_waiting") == 0)
        admin(m, "FLUSH LOGIN FAILURES")
        admin(m, "SET GLOBAL security.max_login_delay = '30s'")


def test_spraying_many_users_from_one_address_is_slowed(quickstart):
    """A guess at each of many users: an address keeps 8 users apart, the others share one
    count, which delays every user without a place of its own."""
    m = quickstart
    admin(m, "FLUSH LOGIN FAILURES")
    for i in range(11):
        assert mysql_login(m, "guess", user=f"spray{i}") == 1045
    rows = failures(m)
    assert rows.pop((GUESSER, "(other users)")) == (3, 1000)
    assert rows == {(GUESSER, f"spray{i}"): (1, 0) for i in range(8)}
    code, took = delayed_attempt(m, lambda: mysql_login(m, "guess", user="spray99"))
    assert code == 1045 and took >= 1.0
    admin(m, "FLUSH LOGIN FAILURES")


def test_admin_port_delays_guessing(quickstart):
    m = quickstart

    def admin_login(password, user="admin"):
        return mysql_login(m, password, user=user, port=m.admin_port)

    admin(m, "FLUSH LOGIN FAILURES")
    for _ in range(3):
        assert admin_login("wrong") == 1045
    assert admin_login("admin", user="nobody") == 1045
    assert failures(m) == {(GUESSER, "admin"): (3, 1000), (GUESSER, "nobody"): (1, 0)}
    code, took = delayed_attempt(m, lambda: admin_login("wrong"))
    assert code == 1045 and took >= 1.0
    assert failures(m)[GUESSER, "admin"] == (4, 2000)
    body = urllib.request.urlopen(f"http://127.0.0.1:{m.http_port}/metrics", timeout=10).read().decode()
    assert 'manifold_login_failures_total{door="admin"} 5' in body
    code, _ = delayed_attempt(m, lambda: admin_login("admin"))
    assert code is None
    assert failures(m) == {(GUESSER, "nobody"): (1, 0)}
    admin(m, "FLUSH LOGIN FAILURES")


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
        assert failures(m)[GUESSER, USER] == (8, 0)
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
            # Every form names the user it is counted against.
            s.sendall(cmd("AUTH", USER, "a") + cmd("AUTH", f"{USER}:b") + cmd("HELLO", "3", "AUTH", USER, "c")
                      + cmd("AUTH", USER, PASSWORD) + cmd("PING"))
            assert read_all(s) == WRONGPASS * 3
        assert failures(m) == {(GUESSER, USER): (3, 1000)}
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
        assert failures(m) == {(GUESSER, USER): (4, 2000)}

        # The right password waits its turn too (2 s), then gets in and resets the user.
        with redis_session(port) as early:
            early.sendall(cmd("AUTH", USER, PASSWORD))
            assert early.recv(100) == b"+OK\r\n"
            assert failures(m) == {}
            for _ in range(3):
                with redis_session(port) as s:
                    s.sendall(cmd("AUTH", USER, "x") + cmd("QUIT"))
                    assert read_all(s) == WRONGPASS + b"+OK\r\n"
            assert failures(m) == {(GUESSER, USER): (3, 1000)}
            # AUTHs queued in MULTI run inside EXEC, where they cannot wait: while the user is
            # delayed at the address they are refused unchecked (the right password too), not
            # counted, and the session keeps its earlier login.
            delays = status(m, "Login_delays")
            early.sendall(cmd("MULTI") + cmd("AUTH", USER, "bad") + cmd("AUTH", USER, PASSWORD)
                          + cmd("EXEC") + cmd("PING") + cmd("QUIT"))
            assert read_all(early) == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n" + WRONGPASS * 2 \
                + b"+PONG\r\n+OK\r\n"
            assert status(m, "Login_delays") == delays
            assert failures(m) == {(GUESSER, USER): (3, 1000)}
    finally:
        m.stop_and_check()


@pytest.fixture(scope="module")
def guarded_door(topology, tmp_path_factory):
    """A manifold with the Redis door and a second user, VICTIM; yields (manifold, port)."""
    port = free_port()
    toml = (f'[redis]\nlisten = "127.0.0.1:{port}"\n'
            f'[[users]]\nname = "{VICTIM}"\npassword_native = "{native_hash(VICTIM_PW)}"\n'
            f'backend_user = "{USER}"\nbackend_password = "{PASSWORD}"\n')
    m = configured(topology, tmp_path_factory.mktemp("guarded"), toml, "redis-throttle-guarded")
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        yield m, port
    finally:
        m.stop_and_check()


def test_redis_auth_in_exec_counts_as_a_direct_auth(guarded_door):
    """AUTH queued in MULTI runs inside EXEC (as in Redis): its failures count against the
    user at the address and toward the connection's 3, and once the connection has had 3
    (it closes after the EXEC) no further AUTH of the EXEC is checked."""
    m, port = guarded_door
    source = "127.0.0.3"
    with redis_session(port, source) as s:
        s.sendall(cmd("AUTH", USER, PASSWORD))
        assert s.recv(100) == b"+OK\r\n"
        # Guesses at the victim between logins of its own: the fifth is the right password.
        s.sendall(cmd("MULTI") + cmd("AUTH", VICTIM, "w1") + cmd("AUTH", VICTIM, "w2") + cmd("AUTH", USER, PASSWORD)
                  + cmd("AUTH", VICTIM, "w3") + cmd("AUTH", VICTIM, VICTIM_PW) + cmd("EXEC") + cmd("PING"))
        assert read_all(s) == b"+OK\r\n" + b"+QUEUED\r\n" * 5 + b"*5\r\n" + WRONGPASS * 2 + b"+OK\r\n" \
            + WRONGPASS * 2
    assert failures(m) == {(source, VICTIM): (3, 1000)}
    # Failures inside EXEC and direct ones add up to the connection's 3.
    with redis_session(port, "127.0.0.6") as s:
        s.sendall(cmd("AUTH", USER, PASSWORD) + cmd("MULTI") + cmd("AUTH", "nobody1", "x")
                  + cmd("AUTH", "nobody2", "x") + cmd("EXEC") + cmd("AUTH", "nobody3", "x") + cmd("PING"))
        assert read_all(s) == b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n" + WRONGPASS * 3
    admin(m, "FLUSH LOGIN FAILURES")


def test_hello_with_two_auth_options_counts_the_user_it_checks(guarded_door):
    """HELLO with several AUTH options checks the last (as redis-server's helloCommand):
    the failure counts against that user, and a later login of the first named user does
    not forgive it."""
    m, port = guarded_door
    source = "127.0.0.7"
    with redis_session(port, source) as s:
        s.sendall(cmd("HELLO", "3", "AUTH", USER, PASSWORD, "AUTH", VICTIM, "guess")
                  + cmd("AUTH", USER, PASSWORD) + cmd("QUIT"))
        assert read_all(s) == WRONGPASS + b"+OK\r\n+OK\r\n"
    found = failures(m)
    assert [k for k in found if k[0] == source] == [(source, VICTIM)], found
    assert found[(source, VICTIM)][0] == 1
    admin(m, "FLUSH LOGIN FAILURES")


def test_many_connections_guess_no_faster_than_one(guarded_door):
    """Once an address has failures, its delayed attempts go one at a time, each after the
    previous one's result and its own delay, however many connections make them; an address
    without failures is never held up; and at most 10 attempts of an address wait."""
    m, port = guarded_door
    source = "127.0.0.4"
    admin(m, "SET GLOBAL security.failed_login_threshold = 1")
    admin(m, "SET GLOBAL security.max_login_delay = '1s'")
    try:
        with redis_session(port, source) as s:
            s.sendall(cmd("AUTH", VICTIM, "w0") + cmd("QUIT"))
            assert read_all(s) == WRONGPASS + b"+OK\r\n"
        # Four guesses at once, each delayed 1 s (the cap): answered one a second, not together.
        started = time.monotonic()

        def guess():
            with redis_session(port, source) as s:
                s.sendall(cmd("AUTH", VICTIM, "wrong") + cmd("QUIT"))
                assert read_all(s) == WRONGPASS + b"+OK\r\n"
                return time.monotonic() - started

        guesses = [run_in_thread(guess) for _ in range(4)]
        for t, _ in guesses:
            t.join(120)
        answered = sorted(out["result"] for _, out in guesses)
        for i, took in enumerate(answered):
            assert took >= i + 1, answered
        assert failures(m) == {(source, VICTIM): (5, 1000)}

        # A pool opening 50 connections at once from an address without failures waits for
        # nothing (while the table has an address with failures).
        delays, refused = status(m, "Login_delays"), status(m, "Login_refused_waiting")
        pool = [run_in_thread(lambda: mysql_login(m, PASSWORD, source="127.0.0.5")) for _ in range(50)]
        for t, out in pool:
            t.join(120)
            assert out == {"result": None}
        assert (status(m, "Login_delays"), status(m, "Login_refused_waiting")) == (delays, refused)

        # Ten attempts waiting (the first its 5 s, the others their turn): the eleventh is
        # refused at once, unchecked, with each door's wrong-password error.
        admin(m, "SET GLOBAL security.max_login_delay = '5s'")
        waiters = []
        for _ in range(10):
            w = redis_session(port, source)
            w.sendall(cmd("AUTH", VICTIM, VICTIM_PW) + cmd("QUIT"))
            waiters.append(w)
        poll("ten attempts waiting", lambda: status(m, "Login_waiting") == 10)
        with redis_session(port, source) as s:
            s.sendall(cmd("AUTH", VICTIM, VICTIM_PW))
            assert s.recv(200) == WRONGPASS
        assert mysql_login(m, VICTIM_PW, user=VICTIM, source=source) == 1045
        assert status(m, "Login_refused_waiting") == refused + 2
        # Another user of the address, without failures of its own, is not held up.
        assert mysql_login(m, PASSWORD, source=source) is None
        # The first waiter's right password forgives the victim: the others follow at once.
        for w in waiters:
            with w:
                assert read_all(w) == b"+OK\r\n+OK\r\n"
        assert status(m, "Login_waiting") == 0
        assert failures(m) == {}
    finally:
        admin(m, "SET GLOBAL security.failed_login_threshold = 3")
        admin(m, "SET GLOBAL security.max_login_delay = '30s'")
        admin(m, "FLUSH LOGIN FAILURES")
