"""The Redis door's test harness, shared by the test files: starting a manifold with the
door and Debian's redis-server as the reference, raw RESP requests and replies, and the
differential check (the same requests to both, the same replies expected)."""

import contextlib
import shutil
import socket
import subprocess

import pytest

from conftest import RUN_DIR, USER, PASSWORD, Manifold, free_port, wait_port


def need(tool):
    path = shutil.which(tool) or (f"/usr/bin/{tool}" if shutil.os.path.exists(f"/usr/bin/{tool}") else None)
    if path is None:
        pytest.fail(f"{tool} not found: run scripts/setup (apt-get install redis-server redis-tools)")
    return path


def redis_py():
    try:
        import redis  # noqa: PLC0415
    except ImportError:
        pytest.fail("the redis Python package is missing: run scripts/setup (pip install redis)")
    return redis


@contextlib.contextmanager
def start_door(topology, extra=()):
    """A manifold with the Redis door on a free port; yields that port."""
    for attempt in range(3):
        port = free_port()
        m = Manifold(topology, ["--redis-listen", f"127.0.0.1:{port}", *extra], log_name="redis-door")
        try:
            wait_port(port, m.proc, "manifold's Redis door")
            break
        except pytest.fail.Exception:
            m.stop()
            if attempt == 2:
                raise
    try:
        yield port
    finally:
        m.stop_and_check()


@contextlib.contextmanager
def start_reference():
    """Debian's redis-server with the same account as manifold's (`app`/`app`) and no usable
    default user; yields its port."""
    server = need("redis-server")
    for attempt in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(RUN_DIR), "--user", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all",
             "--user", "default", "off"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port, proc, "redis-server", timeout=10)
            break
        except pytest.fail.Exception:
            proc.kill()
            proc.wait()
            if attempt == 2:
                raise
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def raw(port, payload, timeout=5.0):
    """Sends `payload` in one write and returns every byte until the server closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(payload)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        s.close()


def cmd(*args):
    """One multibulk request."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_reply(f):
    """One RESP2/RESP3 reply from a file object, as Python values (errors as Err)."""
    line = f.readline()
    assert line.endswith(b"\r\n"), line
    t, rest = line[:1], line[1:-2]
    if t == b"+":
        return rest.decode()
    if t == b"-":
        return Err(rest.decode())
    if t == b":":
        return int(rest)
    if t in (b"$", b"="):
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data[4:] if t == b"=" else data
    if t in (b"*", b"~", b">"):
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    if t == b"%":
        return {read_reply(f): read_reply(f) for _ in range(int(rest))}
    if t == b"_":
        return None
    raise AssertionError(f"unexpected reply line {line!r}")


class Err(str):
    """An error reply's text."""


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.f = self.sock.makefile("rb")

    def send(self, data):
        self.sock.sendall(data)

    def call(self, *args):
        self.send(cmd(*args))
        return read_reply(self.f)

    def closed(self):
        return self.sock.recv(1) == b""

    def close(self):
        self.f.close()
        self.sock.close()



AUTH = cmd("AUTH", USER, PASSWORD)


def replies(port, requests, pipeline=True):
    """Sends `requests` (each one multibulk request's bytes, `AUTH` first if wanted) on one
    connection and returns their replies, decoded by `read_reply`. `pipeline`: all in one
    write, else each after the previous reply."""
    c = Conn(port)
    try:
        if pipeline:
            c.send(b"".join(requests))
            return [read_reply(c.f) for _ in requests]
        out = []
        for r in requests:
            c.send(r)
            out.append(read_reply(c.f))
        return out
    finally:
        c.close()


def differential(door, reference, requests, pipeline=True, normalize=None):
    """Sends the same requests (after `AUTH`) to manifold's door and to redis-server and
    asserts the replies are equal, request by request. `normalize(request, reply)` may map
    a reply before the comparison (for documented differences)."""
    requests = [AUTH, *requests]
    got = replies(door, requests, pipeline)
    want = replies(reference, requests, pipeline)
    for i, (req, g, w) in enumerate(zip(requests, got, want)):
        if normalize is not None:
            g, w = normalize(req, g), normalize(req, w)
        assert g == w, f"request {i} {req!r}: manifold {g!r}, redis-server {w!r}"
