"""Malformed and out-of-protocol input from clients: each case ends at most the offending
connection, with a protocol-correct ERR where one can be sent, a reason in manifold's log,
no panic, and a second session (logged in beforehand) that keeps working.

Where MariaDB's own answer is known it is noted; MariaDB keeps the connection open after an
unknown or malformed command, manifold closes it (docs/ARCHITECTURE.md, Errors: bad input
ends that connection)."""

import struct
import threading

import pytest

import rawmysql
from rawmysql import Bystander, err_packets as errors, local_port, wait_for_log
from conftest import PASSWORD, USER


def log_of(m):
    return lambda: m.log_path.read_text()


@pytest.fixture
def bystander(manifold):
    b = Bystander(manifold.port)
    yield b
    b.check()
    b.close()
    assert "panicked" not in manifold.log_path.read_text()


def bad_client(manifold, login=False):
    c = rawmysql.RawConn(manifold.port, timeout=30)
    if login:
        c.login(USER, PASSWORD)
    else:
        c.read_handshake()
    return c


# ---- connection phase -----------------------------------------------------------------------


def test_truncated_handshake_response(manifold, bystander):
    """A well-framed handshake response whose body stops after 5 bytes. MariaDB: ERR 1043."""
    c = bad_client(manifold)
    port = local_port(c)
    c.send_packet(b"\x00\x00\x00\x00\x01")
    got = errors(c.wait_closed())
    assert len(got) == 1 and got[0][0] == 1043 and got[0][1].startswith("Bad handshake"), got
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "login failed", "bad handshake response")
    bystander.check()


def test_handshake_response_cut_short_then_eof(manifold, bystander):
    """The header announces 100 bytes, 10 arrive, then the client half-closes."""
    c = bad_client(manifold)
    port = local_port(c)
    c.send_raw(struct.pack("<I", 100)[:3] + b"\x01" + b"x" * 10)
    c.sock.shutdown(1)  # SHUT_WR
    assert c.wait_closed() == []
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "login failed", "connection closed in the middle of a packet")
    bystander.check()


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\xde\xad\xbe\xef" * 32,
                                     b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64])
def test_garbage_after_connect(manifold, bystander, garbage):
    """Bytes that are not MySQL packets at all (HTTP, noise, a TLS ClientHello without an SSL
    request): each announces a packet far above the login limit: ERR 1153, and the connection
    is closed. (MariaDB looks at the sequence id first and answers 1156 'Got packets out of
    order'.)"""
    c = bad_client(manifold)
    port = local_port(c)
    c.send_raw(garbage)
    got = errors(c.wait_closed())
    assert [code for code, _ in got] == [1153], got
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "login failed")
    bystander.check()


def test_garbage_instead_of_handshake_response_small_frame(manifold, bystander):
    """A small frame with sequence id 9: ERR 1156, as MariaDB."""
    c = bad_client(manifold)
    port = local_port(c)
    c.send_raw(b"\x05\x00\x00\x09hello")
    got = errors(c.wait_closed())
    assert [code for code, _ in got] == [1156], got
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "login failed", "sequence id 9")
    bystander.check()


def test_handshake_response_with_wrong_sequence_id(manifold, bystander):
    c = bad_client(manifold)
    port = local_port(c)
    resp = c.handshake_response(USER, rawmysql.native_scramble(PASSWORD, c.handshake.scramble), rawmysql.NATIVE)
    c.send_packet(resp, seq=3)
    got = errors(c.wait_closed())
    assert [code for code, _ in got] == [1156], got  # MariaDB: 1156 too
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "login failed", "sequence id 3")
    bystander.check()


def test_ssl_request_to_plain_only_data(manifold, bystander):
    """An SSL request followed by a plain handshake response instead of a TLS handshake."""
    c = bad_client(manifold)
    port = local_port(c)
    req = struct.pack("<IIB", rawmysql.DEFAULT_CAPS | rawmysql.CLIENT_SSL, 1 << 24, 45) + b"\0" * 23
    c.send_packet(req)
    resp = c.handshake_response(USER, rawmysql.native_scramble(PASSWORD, c.handshake.scramble), rawmysql.NATIVE)
    c.send_packet(resp)
    c.wait_closed()
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "login failed")
    bystander.check()


# ---- command phase --------------------------------------------------------------------------


def test_command_with_wrong_sequence_id(manifold, bystander):
    c = bad_client(manifold, login=True)
    port = local_port(c)
    c.send_packet(b"\x03SELECT 1", seq=5)
    got = errors(c.wait_closed())
    assert [code for code, _ in got] == [1156], got  # MariaDB: 1156 and close, too
    assert "sequence id 5" in got[0][1]
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "session ended", "out of order")
    bystander.check()


def test_split_packet_with_wrong_continuation_sequence(manifold, bystander):
    """A 16 MiB - 1 frame (seq 0) continued by a frame with seq 7 instead of 1."""
    c = bad_client(manifold, login=True)
    port = local_port(c)
    first = b"\x03SELECT '" + b"a" * (0xFFFFFF - 9)
    c.send_raw(b"\xff\xff\xff\x00" + first + b"\x02\x00\x00\x07'x")
    got = errors(c.wait_closed())
    assert [code for code, _ in got] == [1156], got
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "session ended", "out of order")
    bystander.check()


@pytest.mark.parametrize("payload,what", [
    (b"", "empty command packet"),
    (b"\x17\x01", "COM_STMT_EXECUTE without its statement id"),
    (b"\x0c\x01", "COM_PROCESS_KILL without its 4-byte id"),
    (b"\x1b", "COM_SET_OPTION without its option"),
    (b"\x1c\x01\x00", "COM_STMT_FETCH truncated"),
])
def test_command_shorter_than_its_fields(manifold, bystander, payload, what):
    """A command packet whose length leaves out fields the command requires: ERR 1158 and
    close (MariaDB: 1835 'Malformed communication packet', connection kept)."""
    c = bad_client(manifold, login=True)
    port = local_port(c)
    c.send_packet(payload, seq=0)
    got = errors(c.wait_closed())
    assert [code for code, _ in got] == [1158], (what, got)
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "session ended", "Malformed command packet")
    bystander.check()


def test_command_length_longer_than_sent_then_eof(manifold, bystander):
    """The header claims 1000 bytes, 20 follow, then the client closes its side."""
    c = bad_client(manifold, login=True)
    c.send_raw(struct.pack("<I", 1000)[:3] + b"\x00" + b"\x03SELECT 1 /* ... */")
    c.sock.shutdown(1)
    assert c.wait_closed() == []
    c.close()
    bystander.check()


def test_command_length_shorter_than_sent(manifold, bystander):
    """The header claims 3 bytes of "SELECT 1": the command is "\\x03SE" (a syntax error from
    the server, relayed), and the leftover bytes "LECT 1" are read as the next header: a
    4.4 MB packet with sequence id 'T', which never completes: the client gives up."""
    c = bad_client(manifold, login=True)
    c.send_raw(b"\x03\x00\x00\x00\x03SELECT 1")
    with pytest.raises(rawmysql.MySQLError) as e:
        c.read_results()
    assert e.value.code == 1064
    c.close()
    bystander.check()


@pytest.mark.parametrize("command", [0x12, 0x08, 0x00, 0x05, 0x06, 0x0B, 0x0F, 0x10, 0x1E, 0x20, 0xFE, 0xFF])
def test_unknown_command(manifold, bystander, command):
    """Commands manifold does not serve (COM_BINLOG_DUMP 0x12, COM_SHUTDOWN 0x08, COM_SLEEP,
    COM_CREATE_DB, COM_DROP_DB, COM_CONNECT, COM_TIME, COM_DELAYED_INSERT, COM_BINLOG_DUMP_GTID,
    undefined bytes): ERR 1047 then close. Never forwarded: the primary is still up."""
    c = bad_client(manifold, login=True)
    port = local_port(c)
    c.send_packet(bytes([command]) + b"\x00\x00\x00\x00", seq=0)
    got = errors(c.wait_closed())
    assert got == [(1047, f"Unknown command 0x{command:02x}")], got
    c.close()
    wait_for_log(log_of(manifold), f"peer=127.0.0.1:{port}", "session ended", f"Unknown command 0x{command:02x}")
    bystander.check()


def test_interleaved_bad_clients_do_not_disturb_a_busy_session(manifold, bystander):
    """Many misbehaving connections at once while the bystander keeps querying."""
    stop = threading.Event()
    failures = []

    def misbehave(i):
        try:
            c = rawmysql.RawConn(manifold.port, timeout=30)
            if i % 3 == 0:
                c.read_handshake()
                c.send_raw(b"\xff" * 64)
            elif i % 3 == 1:
                c.login(USER, PASSWORD)
                c.send_packet(b"\x03SELECT 1", seq=9)
            else:
                c.login(USER, PASSWORD)
                c.send_packet(b"\x12\x00\x00\x00\x00", seq=0)
            c.wait_closed()
            c.close()
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            failures.append((i, repr(e)))

    threads = [threading.Thread(target=misbehave, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for _ in range(20):
        bystander.check()
    for t in threads:
        t.join(60)
    stop.set()
    assert failures == []
    bystander.check()
