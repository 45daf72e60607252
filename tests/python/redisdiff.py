"""The Redis door's test harness, shared by the test files: starting a manifold with the
door and Debian's redis-server as the reference, raw RESP requests and replies, and the
differential check (the same requests to both, the same replies expected)."""

import contextlib
import math
import shutil
import socket
import subprocess
import time

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


def launch_door(topology, extra=(), log_name="redis-door", fleet=""):
    """Starts a manifold with the Redis door on a free port (three tries) and returns it, the
    door's port as `redis_port`; the caller stops it (`stop_and_check`). `fleet`: the
    registry's schema.table of the fleet it joins (empty: alone)."""
    for attempt in range(3):
        port = free_port()
        m = Manifold(topology, ["--redis-listen", f"127.0.0.1:{port}", *extra], log_name=log_name, fleet=fleet)
        try:
            wait_port(port, m.proc, "manifold's Redis door")
            break
        except pytest.fail.Exception:
            m.stop()
            if attempt == 2:
                raise
    m.redis_port = port
    return m


@contextlib.contextmanager
def start_door(topology, extra=()):
    """A manifold with the Redis door on a free port; yields that port."""
    m = launch_door(topology, extra)
    try:
        yield m.redis_port
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


def raw_reply(f):
    """One RESP2/RESP3 reply from a file object, as its bytes (for byte-exact comparisons)."""
    line = f.readline()
    assert line.endswith(b"\r\n"), line
    t, rest = line[:1], line[1:-2]
    out = line
    if t in (b"$", b"=", b"!"):
        n = int(rest)
        if n >= 0:
            out += f.read(n + 2)
    elif t in (b"*", b"~", b">"):
        for _ in range(max(int(rest), 0)):
            out += raw_reply(f)
    elif t == b"%":
        for _ in range(2 * int(rest)):
            out += raw_reply(f)
    return out


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
        """Whether the server closed the connection (a reset, when replies were still
        unread, is a close too)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self):
        self.f.close()
        self.sock.close()



AUTH = cmd("AUTH", USER, PASSWORD)


def replies(port, requests, pipeline=True, read=read_reply):
    """Sends `requests` (each one multibulk request's bytes, `AUTH` first if wanted) on one
    connection and returns their replies, decoded by `read` (`read_reply`, or `raw_reply`
    for their bytes). `pipeline`: all in one write, else each after the previous reply."""
    c = Conn(port)
    try:
        if pipeline:
            c.send(b"".join(requests))
            return [read(c.f) for _ in requests]
        out = []
        for r in requests:
            c.send(r)
            out.append(read(c.f))
        return out
    finally:
        c.close()


def scan_pages(conn, head, options=(), most=10_000):
    """The pages of one whole `*SCAN` iteration on `conn` (a `Conn`): `head` is the command
    before the cursor (`["SCAN"]`, `["HSCAN", key]`), `options` what follows it; fails past
    `most` calls."""
    cursor, pages = b"0", []
    for _ in range(most):
        cursor, page = conn.call(*head, cursor, *options)
        pages.append(page)
        if cursor == b"0":
            return pages
    raise AssertionError(f"{head[0]} did not end in {most} calls")


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


def byte_for_byte(door, reference, body, hellos=(None, cmd("HELLO", "3"))):
    """The same requests (after `AUTH` and each of `hellos`: RESP2, then RESP3) to the door
    and to redis-server, pipelined and one at a time: their replies' bytes must be equal,
    the `HELLO`'s aside."""
    for hello in hellos:
        requests = [AUTH] + ([hello] if hello else []) + body
        for pipeline in (True, False):
            got = replies(door, requests, pipeline, read=raw_reply)
            want = replies(reference, requests, pipeline, read=raw_reply)
            for i, (req, g, w) in enumerate(zip(requests, got, want)):
                if req != hello:
                    assert g == w, f"request {i} {req!r}: manifold {g!r}, redis-server {w!r}"


# --- normalizers for the documented differences, shared by the test files -----------------

def args_of(req):
    """The arguments of one multibulk request, as bytes."""
    assert req[:1] == b"*", req[:20]
    end = req.index(b"\r\n")
    n, at, out = int(req[1:end]), end + 2, []
    for _ in range(n):
        end = req.index(b"\r\n", at)
        size = int(req[at + 1:end])
        out.append(req[end + 2:end + 2 + size])
        at = end + 2 + size + 2
    return out


def name_of(req):
    """The lower-case command name of one multibulk request."""
    args = args_of(req)
    return args[0].lower() if args else b""


def ttl_bucket(seconds):
    """A time left, coarsely: the two servers answer a few milliseconds apart."""
    return ("~", round(math.log10(seconds) * 20)) if seconds >= 1 else ("~", 0)


def ttl(req, reply):
    """`TTL`/`PTTL` (and `EXPIRETIME`/`PEXPIRETIME` near now) in buckets; the rest as is."""
    if not isinstance(reply, int) or isinstance(reply, bool) or reply <= 0:
        return reply
    name = name_of(req)
    if name == b"ttl":
        return ttl_bucket(reply)
    if name == b"pttl":
        return ttl_bucket(reply / 1000)
    if name in (b"expiretime", b"pexpiretime"):
        seconds = reply / 1000 if name == b"pexpiretime" else reply
        left = seconds - time.time()
        if abs(left) < 10**7:
            return ttl_bucket(left)
    return reply


def _pairs(flat):
    return sorted(zip(flat[0::2], flat[1::2]))


def unordered(req, reply):
    """Every reply whose order Redis leaves unspecified, made comparable: the door lists
    keys, fields and members in their SHA-256 order. Sorted: `KEYS`, `SMEMBERS`, `SINTER`,
    `SUNION`, `SDIFF`, `SPOP` with a count (use one that takes the whole set), `HKEYS`, `HVALS`; sorted
    pairs: `HGETALL`, `HSCAN`, `ZSCAN`; `SCAN`/`SSCAN` pages sorted (their cursors are
    compared: call them with a `COUNT` that covers everything); random picks (`RANDOMKEY`,
    `SRANDMEMBER`, `HRANDFIELD`, `SPOP` without a count) by their shape only; TTLs as
    [`ttl`] does."""
    if isinstance(reply, Err) or not req.startswith(b"*"):
        return reply
    args = args_of(req)
    name = args[0].lower()
    if name in (b"keys", b"smembers", b"sinter", b"sunion", b"sdiff", b"hkeys", b"hvals") \
            and isinstance(reply, list):
        return sorted(reply)
    if name == b"hgetall":
        return ("map", sorted(reply.items())) if isinstance(reply, dict) else ("array", _pairs(reply))
    if name in (b"scan", b"sscan") and isinstance(reply, list):
        return [reply[0], sorted(reply[1])]
    if name in (b"hscan", b"zscan") and isinstance(reply, list):
        return [reply[0], _pairs(reply[1])]
    if name == b"spop" and isinstance(reply, list):
        return sorted(reply)
    if name in (b"randomkey", b"srandmember", b"hrandfield", b"spop"):
        if isinstance(reply, list):
            return ("picks", len(reply))
        return reply if reply is None else "a pick"
    return ttl(req, reply)
