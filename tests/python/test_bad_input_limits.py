"""Limits on what clients may do: max_allowed_packet, connect_timeout (half-open handshakes),
wait_timeout (idle clients), max_connections. Each on its own manifold with the limit set low;
each time a second, logged-in session on the same manifold keeps working, the log has a
reason for the closed connection, and nothing panics."""

import socket
import struct
import threading
import time

import pytest

import rawmysql
from rawmysql import Bystander, err_packets as errors, local_port, wait_for_log
from conftest import PASSWORD, USER, configured as limited


# ---- max_allowed_packet ---------------------------------------------------------------------


@pytest.fixture
def small_packets(topology, tmp_path):
    m = limited(topology, tmp_path, '[mysql]\nmax_allowed_packet = "1M"\n', "manifold-bad-packet")
    yield m
    m.stop_and_check()


def send_in_background(conn, data):
    """Writes `data` from a thread (the server may close before reading it all)."""
    def run():
        try:
            conn.send_raw(data)
        except OSError:
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def packet(seq, payload):
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def test_query_over_max_allowed_packet(small_packets):
    b = Bystander(small_packets.port)
    c = rawmysql.connect(small_packets.port)
    port = local_port(c)
    sql = b"\x03SELECT '" + b"x" * (2 << 20) + b"'"
    t = send_in_background(c, packet(0, sql))
    got = errors(c.wait_closed())
    t.join(30)
    assert len(got) == 1 and got[0][0] == 1153, got
    assert "max_allowed_packet" in got[0][1]
    c.close()
    wait_for_log(small_packets.log_text, f"peer=127.0.0.1:{port}", "session ended", "max_allowed_packet")
    b.check()
    # Just under the limit works.
    ok = rawmysql.connect(small_packets.port)
    assert ok.query("SELECT LENGTH('" + "y" * (1000 * 1000) + "')")[0][2] == [("1000000",)]
    ok.quit()
    b.check()
    b.close()


def test_split_command_over_max_allowed_packet(small_packets):
    """The limit applies to the joined packet: 16 MiB - 1 + more, announced by the first
    header alone."""
    b = Bystander(small_packets.port)
    c = rawmysql.connect(small_packets.port)
    port = local_port(c)
    t = send_in_background(c, b"\xff\xff\xff\x00\x03SELECT '" + b"z" * 100_000)
    got = errors(c.wait_closed())
    t.join(30)
    assert [code for code, _ in got] == [1153], got
    c.close()
    wait_for_log(small_packets.log_text, f"peer=127.0.0.1:{port}", "max_allowed_packet")
    b.check()
    b.close()


def test_load_data_local_packet_over_limit(small_packets, tmp_path):
    """LOCAL INFILE data packets are bounded by the same limit."""
    b = Bystander(small_packets.port)
    c = rawmysql.connect(small_packets.port, caps=rawmysql.DEFAULT_CAPS | rawmysql.CLIENT_LOCAL_FILES)
    c.query("CREATE DATABASE IF NOT EXISTS bad_input_ld")
    try:
        c.query("CREATE TABLE IF NOT EXISTS bad_input_ld.t (s LONGTEXT)")
        c.send_command(b"\x03LOAD DATA LOCAL INFILE 'x' INTO TABLE bad_input_ld.t")
        req = c.read_packet()
        assert req[:1] == b"\xfb", req  # the server asks for the file
        t = send_in_background(c, packet(c.seq, b"a" * (2 << 20)))
        c.wait_closed()
        t.join(30)
        c.close()
        b.check()
    finally:
        b.conn.query("DROP DATABASE IF EXISTS bad_input_ld")
        b.close()


# ---- connect_timeout: half-open handshakes ----------------------------------------------------


@pytest.fixture
def short_connect(topology, tmp_path):
    m = limited(topology, tmp_path, '[mysql]\nconnect_timeout = "1s"\n', "manifold-bad-connect")
    yield m
    m.stop_and_check()


@pytest.mark.parametrize("stage", ["nothing", "partial header", "ssl request only", "auth switch unanswered",
                                   "full auth unanswered"])
def test_half_open_handshake_is_closed(short_connect, stage):
    b = Bystander(short_connect.port)
    c = rawmysql.RawConn(short_connect.port, timeout=30)
    port = local_port(c)
    if stage == "partial header":
        c.read_handshake()
        c.send_raw(b"\x20\x00")
    elif stage == "ssl request only":
        c.read_handshake()
        c.send_packet(struct.pack("<IIB", rawmysql.DEFAULT_CAPS | rawmysql.CLIENT_SSL, 1 << 24, 45) + b"\0" * 23)
    elif stage == "auth switch unanswered":
        # A plugin manifold does not know: it answers with an AuthSwitchRequest, which the
        # client never answers.
        hs = c.read_handshake()
        c.send_packet(c.handshake_response(USER, b"junk", "dialog"))
        assert c.read_packet()[:1] == b"\xfe"
    elif stage == "full auth unanswered":
        # caching_sha2_password, first login of the user: manifold asks for full
        # authentication; the client asks for the RSA key and never sends the password.
        hs = c.read_handshake()
        c.send_packet(c.handshake_response(USER, rawmysql.sha2_scramble(PASSWORD, hs.scramble), rawmysql.SHA2))
        assert c.read_packet() == b"\x01\x04"
        c.send_packet(b"\x02")
    # Bounded wait for the server to close (the limit is 1s; 30s means it never did).
    packets = c.wait_closed(timeout=30)
    c.close()
    if stage == "nothing":
        assert len(packets) == 1 and packets[0][0] == 10  # the server's handshake, then the close
    line = wait_for_log(short_connect.log_text, f"peer=127.0.0.1:{port}", "connect_timeout")
    assert "handshake" in line
    b.check()
    b.close()


def test_many_half_open_connections_do_not_block_logins(short_connect):
    socks = [socket.create_connection(("127.0.0.1", short_connect.port)) for _ in range(50)]
    try:
        b = Bystander(short_connect.port)
        b.check()
        b.close()
    finally:
        for s in socks:
            s.close()


# ---- wait_timeout: idle clients ---------------------------------------------------------------


@pytest.fixture
def short_wait(topology, tmp_path):
    m = limited(topology, tmp_path, '[mysql]\nwait_timeout = "1s"\n', "manifold-bad-wait")
    yield m
    m.stop_and_check()


def wait_closed_keeping_busy(conn, bystander, limit=30):
    """Like RawConn.wait_closed, but the bystander runs a query every 200 ms meanwhile (it
    would otherwise be idle past wait_timeout itself)."""
    packets = []
    deadline = time.monotonic() + limit
    conn.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            packets.append(conn.read_packet())
        except socket.timeout:
            bystander.check()
        except (rawmysql.ConnectionClosed, ConnectionResetError):
            return packets
    raise AssertionError(f"idle connection still open after {limit}s")


@pytest.mark.parametrize("stage", ["idle after login", "idle after a query", "half a command packet"])
def test_idle_client_gets_1159_and_is_closed(short_wait, stage):
    b = Bystander(short_wait.port)
    c = rawmysql.connect(short_wait.port)
    port = local_port(c)
    if stage == "idle after a query":
        assert c.scalar("SELECT 5") == "5"
    elif stage == "half a command packet":
        c.send_raw(b"\x20\x00\x00\x00\x03SELECT")
    got = errors(wait_closed_keeping_busy(c, b))
    c.close()
    assert [code for code, _ in got] == [1159], got
    assert "wait_timeout" in got[0][1]
    wait_for_log(short_wait.log_text, f"peer=127.0.0.1:{port}", "session ended", "wait_timeout")
    b.check()
    b.close()


def test_busy_session_is_not_timed_out(short_wait):
    """wait_timeout bounds the idle time between commands, not the session's age: a session
    that keeps issuing statements for 3 s on a 1 s wait_timeout is never cut off."""
    c = rawmysql.connect(short_wait.port)
    end = time.monotonic() + 3
    i = 0
    while time.monotonic() < end:
        assert c.scalar(f"SELECT {i}") == str(i)
        i += 1
    c.quit()


# ---- max_connections ----------------------------------------------------------------------------


def test_too_many_connections(topology, tmp_path):
    m = limited(topology, tmp_path, "[mysql]\nmax_connections = 3\n", "manifold-bad-maxconn")
    try:
        b = Bystander(m.port)
        others = [rawmysql.connect(m.port) for _ in range(2)]
        fourth = rawmysql.RawConn(m.port)
        port = local_port(fourth)
        got = errors(fourth.wait_closed())
        fourth.close()
        assert got == [(1040, "Too many connections")]
        wait_for_log(m.log_text, f"peer=127.0.0.1:{port}", "max_connections")
        # PyMySQL sees the same error.
        import pymysql
        with pytest.raises(pymysql.err.OperationalError) as e:
            m.connect(ssl_disabled=True)
        assert e.value.args[0] == 1040
        b.check()
        for o in others:
            assert o.scalar("SELECT 1") == "1"
        # A slot freed is a slot usable again (the server sees the QUIT asynchronously: poll).
        others.pop().quit()
        for _ in range(100):
            c = rawmysql.RawConn(m.port)
            try:
                c.login(USER, PASSWORD)
                break
            except rawmysql.MySQLError as e:
                assert e.code == 1040
                c.close()
                time.sleep(0.1)
        else:
            pytest.fail("the freed connection slot never became available")
        assert c.scalar("SELECT 2") == "2"
        c.quit()
        b.check()
        b.close()
        for o in others:
            o.quit()
    finally:
        m.stop_and_check()
