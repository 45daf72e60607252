#!/usr/bin/env python3
"""The kernel's floor for one short MySQL connection through a proxy.

A deliberately minimal stand-in for a proxy, used by bench/short_conn.sh (target `floor`): it
makes the same socket calls manifold must make for a short connection and nothing else. For
each client it accepts, sends a fixed handshake, reads the login and answers OK without
checking it, forwards each COM_QUERY verbatim on one backend connection logged in at start
and relays the answer back, and closes on COM_QUIT. No authentication, no parsing beyond
packet boundaries, no session state, no TLS.

Its user-space CPU is Python's and means nothing; its kernel CPU per connection is the cost of
the sends, receives, accept, epoll and close that any proxy answering this exchange pays on
this machine. That is the figure short_conn.sh reports next to manifold's.

    floor_server.py --listen 127.0.0.1:PORT --backend 127.0.0.1:PORT --user app:app [--procs 2]

--procs processes share the port with SO_REUSEPORT, as manifold's workers do; the first line
it prints is their pids.
"""

import argparse
import os
import select
import signal
import socket
import struct
import sys

import pymysql

CAPABILITIES = (
    0x00000001  # LONG_PASSWORD (also says "not MariaDB-extended" to MariaDB clients)
    | 0x00000004  # LONG_FLAG
    | 0x00000008  # CONNECT_WITH_DB
    | 0x00000200  # PROTOCOL_41
    | 0x00002000  # TRANSACTIONS
    | 0x00008000  # SECURE_CONNECTION
    | 0x00010000  # MULTI_STATEMENTS
    | 0x00020000  # MULTI_RESULTS
    | 0x00080000  # PLUGIN_AUTH
)
COM_QUIT, COM_QUERY = 0x01, 0x03


def packet(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def greeting(conn_id):
    scramble = b"abcdefghijklmnopqrst"
    body = (
        b"\x0a"
        + b"11.0.0-floor\x00"
        + struct.pack("<I", conn_id)
        + scramble[:8]
        + b"\x00"
        + struct.pack("<H", CAPABILITIES & 0xFFFF)
        + b"\x2d"  # utf8mb4_general_ci
        + struct.pack("<H", 0x0002)  # SERVER_STATUS_AUTOCOMMIT
        + struct.pack("<H", CAPABILITIES >> 16)
        + bytes([21])
        + b"\x00" * 10
        + scramble[8:]
        + b"\x00"
        + b"mysql_native_password\x00"
    )
    return packet(0, body)


def ok(seq):
    return packet(seq, b"\x00\x00\x00\x02\x00\x00\x00")


def split_packets(buf):
    """Complete packets at the front of buf: ([(seq, payload)], rest)."""
    out, pos = [], 0
    while len(buf) - pos >= 4:
        n = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
        if len(buf) - pos - 4 < n:
            break
        out.append((buf[pos + 3], buf[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return out, buf[pos:]


class Backend:
    """One logged-in backend connection, used synchronously: a floor needs no pool."""

    def __init__(self, host, port, user, password):
        self.conn = pymysql.connect(host=host, port=port, user=user, password=password)
        self.sock = self.conn._sock
        self.sock.setblocking(True)

    def query(self, raw):
        """Send one COM_QUERY packet as the client sent it; the whole answer, as bytes."""
        self.sock.sendall(raw)
        buf, answer = b"", b""
        # Without DEPRECATE_EOF (neither side asks for it here) a result set is: column count,
        # definitions, EOF, rows, EOF. An OK or ERR first packet is the whole answer.
        columns = eofs = None
        while True:
            data = self.sock.recv(65536)
            if not data:
                sys.exit("backend closed the connection")
            buf += data
            packets, rest = split_packets(buf)
            consumed = len(buf) - len(rest)
            answer += buf[:consumed]
            buf = rest
            for _, payload in packets:
                if columns is None:
                    if payload[0] in (0x00, 0xFF):
                        return answer
                    columns, eofs = payload[0], 0
                elif payload[0] == 0xFE and len(payload) < 9:
                    eofs += 1
                    if eofs == 2:
                        return answer
                elif payload[0] == 0xFF:
                    return answer


def serve(listen, backend_addr, user, password):
    backend = Backend(backend_addr[0], backend_addr[1], user, password)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lsock.bind(listen)
    lsock.listen(4096)
    lsock.setblocking(False)
    ep = select.epoll()
    ep.register(lsock.fileno(), select.EPOLLIN)
    clients = {}  # fd -> [socket, buffer, logged_in]
    next_id = 1
    while True:
        for fd, _ in ep.poll():
            if fd == lsock.fileno():
                while True:
                    try:
                        c, _ = lsock.accept()
                    except BlockingIOError:
                        break
                    c.setblocking(False)
                    ep.register(c.fileno(), select.EPOLLIN)
                    clients[c.fileno()] = [c, b"", False]
                    c.send(greeting(next_id))
                    next_id += 1
                continue
            entry = clients[fd]
            c = entry[0]
            try:
                data = c.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            done = not data
            packets, entry[1] = split_packets(entry[1] + data)
            for seq, payload in packets:
                if not entry[2]:
                    entry[2] = True
                    c.send(ok(seq + 1))
                elif payload[:1] == bytes([COM_QUERY]):
                    c.send(backend.query(packet(seq, payload)))
                else:  # COM_QUIT, or anything else: a floor serves nothing more
                    done = True
            if done:
                del clients[fd]
                c.close()  # closing the descriptor also takes it out of the epoll set


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--procs", type=int, default=2)
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    bhost, bport = a.backend.rsplit(":", 1)
    user, password = a.user.split(":", 1)
    children = []
    for _ in range(a.procs):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            serve((host, int(port)), (bhost, int(bport)), user, password)
            os._exit(0)
        children.append(pid)

    def stop(*_):
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # The parent only waits. Its children's CPU would show in its own /proc stat only after
    # they exit, so it prints their pids for the bench to read their stat files.
    print(" ".join(str(p) for p in children), flush=True)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
