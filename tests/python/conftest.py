"""Shared fixtures: one real MariaDB topology (primary + 2 GTID replicas, TLS) and one manifold
in front of it per test session. Each test works in its own schema.

manifold is started as the README's quick start does (`--primary ... --user app:app`, plus the
ports the tests need), so clients that ask for TLS get the certificate manifold generates in its
data directory; only tests of a configured certificate pass `--tls-cert` (`configured_cert`).
Every manifold runs in one working directory per test session, so they all share that
directory's `manifold-data` (the first start generates the certificate, later ones load it).

Binaries come from MANIFOLD_BIN_DIR (scripts/test builds them in target/test-opt), else
target/release. A missing binary or server fails with a message saying what to run or
install; nothing is skipped."""

import atexit
import os
import shutil
import contextlib
import tempfile
import hashlib
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pymysql
import pytest

# PyMySQL (2.x) negotiates TLS whenever the server offers it, building a new default SSL
# context for every connection to do so: the system CA store is loaded each time, ~45 ms of
# CPU per login, minutes over this suite's thousands of logins on 2 cores. The tests share
# one context, built the way PyMySQL builds it; what PyMySQL does with it is unchanged.
_build_ssl_ctx = pymysql.connections.Connection._create_ssl_ctx
_preferred_ssl_ctx = []


def _shared_preferred_ssl_ctx(self, sslp):
    if isinstance(sslp, dict) and not sslp:
        if not _preferred_ssl_ctx:
            _preferred_ssl_ctx.append(_build_ssl_ctx(self, sslp))
        return _preferred_ssl_ctx[0]
    return _build_ssl_ctx(self, sslp)


pymysql.connections.Connection._create_ssl_ctx = _shared_preferred_ssl_ctx

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("MANIFOLD_BIN_DIR", ROOT / "target" / "release"))
USER, PASSWORD = "app", "app"
# The working directory of every manifold the tests start: its default data directory is
# RUN_DIR/manifold-data (XDG_STATE_HOME is removed from manifold's environment).
RUN_DIR = Path(tempfile.mkdtemp(prefix="manifold-tests-"))
atexit.register(shutil.rmtree, RUN_DIR, True)
DATA_DIR = RUN_DIR / "manifold-data"
# The certificate manifold generates there; being self-signed, it is its own CA for clients.
AUTO_CERT = DATA_DIR / "server-cert.pem"


def manifold_env():
    return {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}


def binary(name):
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path} is missing: build it with `cargo build --release --workspace`, or run scripts/test")
    return str(path)


def free_port():
    return free_ports(1)[0]


def free_ports(n):
    """`n` distinct free ports: all are held until all are chosen, else the kernel may hand
    the same port out twice."""
    held = [socket.socket() for _ in range(n)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def wait_port(port, proc, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited early with code {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"{what} did not listen on port {port} within {timeout}s")


def poll(check, what, timeout=30, interval=0.05):
    """`check()`'s value once truthy; else the test fails naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not within {timeout}s (last: {last!r})")
        time.sleep(interval)


def stop_process(proc, timeout=30):
    """Ends `proc` gracefully (SIGTERM), killing it if it has not exited within `timeout`."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Topology:
    def __init__(self, info):
        self.info = info
        self.primary = info["primary"]
        self.primary_port = int(self.primary.split(":")[1])
        self.replica_ports = [int(r.split(":")[1]) for r in info["replicas"].split(",") if r]
        self.ca, self.cert, self.key = info["ca"], info["cert"], info["key"]
        self.root_password = info["root_password"]

    def root(self, port=None, **kw):
        return pymysql.connect(host="127.0.0.1", port=port or self.primary_port, user="root",
                               password=self.root_password, autocommit=True, **kw)


@contextlib.contextmanager
def start_testkit(replicas, *extra):
    """A MariaDB topology from `manifold-testkit up` (with `extra` arguments, e.g. `--no-tls`),
    as the dict of its `key=value` line; torn down (stdin closed) on exit."""
    if shutil.which("mariadbd") is None and not Path("/usr/sbin/mariadbd").exists():
        pytest.fail("mariadbd not found: apt-get install mariadb-server mariadb-client")
    proc = subprocess.Popen([binary("manifold-testkit"), "up", "--replicas", str(replicas),
                             "--user", f"{USER}:{PASSWORD}", *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:
        pytest.fail(f"manifold-testkit did not start a topology (exit {proc.wait()})")
    try:
        yield dict(kv.split("=", 1) for kv in line.split())
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


@pytest.fixture(scope="session")
def topology():
    with start_testkit(2) as info:
        yield Topology(info)


class Manifold:
    def __init__(self, topo, extra_args=(), log_name="manifold", split=False, configured_cert=False, env=None,
                 fleet=""):
        """`split`: the replicas too, so reads are split over them (else the primary only).
        `configured_cert`: offer the topology's certificate (signed by its CA, `--tls-cert`)
        instead of the generated one. `ca` is the file a client verifying manifold trusts."""
        tls = ["--tls-cert", topo.cert, "--tls-key", topo.key] if configured_cert else []
        self.ca = topo.ca if configured_cert else str(AUTO_CERT)
        replicas = [a for port in topo.replica_ports for a in ("--replica", f"127.0.0.1:{port}")] if split else []
        # Another process (a client's ephemeral port) can take a chosen port before manifold
        # binds it: then it exits at once, saying so, and gets new ports.
        for attempt in range(3):
            self.port, self.admin_port, self.http_port = free_ports(3)
            self.log_path = ROOT / "target" / f"{log_name}-{self.port}.log"
            self.log = open(self.log_path, "w")
            # Alone unless the test names a fleet (`fleet`: the registry's schema.table): the
            # suite's manifolds run side by side, and a fleet shares runtime changes.
            args = [binary("manifold"), "--primary", topo.primary, *replicas, "--user", f"{USER}:{PASSWORD}",
                    "--listen", f"127.0.0.1:{self.port}", "--admin-listen", f"127.0.0.1:{self.admin_port}",
                    "--http-listen", f"127.0.0.1:{self.http_port}", "--fleet-table", fleet, *tls, *extra_args]
            self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=RUN_DIR,
                                         env=dict(manifold_env(), **(env or {})))
            try:
                wait_port(self.port, self.proc, "manifold")
                return
            except pytest.fail.Exception:
                self.log.close()
                if attempt == 2 or "Address already in use" not in self.log_path.read_text():
                    raise

    def connect(self, **kw):
        kw.setdefault("user", USER)
        kw.setdefault("password", PASSWORD)
        return pymysql.connect(host="127.0.0.1", port=self.port, **kw)

    def log_text(self):
        self.log.flush()
        return self.log_path.read_text()

    def stop_and_check(self):
        """Stops manifold and returns its log, failing the test if it panicked."""
        self.stop()
        text = self.log_path.read_text()
        assert "panicked" not in text, f"manifold panicked: see {self.log_path}"
        return text

    def stop(self):
        stop_process(self.proc)
        self.log.close()


def start_on_free_port(start, what="manifold's Redis door"):
    """`start(port)` starts a Manifold listening (also) on `port`, a free port chosen here;
    another process (a client's ephemeral port) may take it before manifold binds it: then
    manifold exits saying so, and it is started again on another. Returns (manifold, port)."""
    for attempt in range(3):
        port = free_port()
        m = start(port)
        try:
            wait_port(port, m.proc, what)
            return m, port
        except pytest.fail.Exception:
            m.stop()
            if attempt == 2 or "Address already in use" not in m.log_path.read_text():
                raise


def configured(topology, tmp_path, toml, name, **kw):
    """A manifold of its own with extra TOML configuration (the fixture's flags still apply).
    Its monitor logs in as root, so that the backend connections of the test's own account
    are its pools' alone (tests count them)."""
    cfg = tmp_path / f"{name}.toml"
    if "[routing.monitor]" not in toml:
        toml += f'\n[routing.monitor]\nuser = "root"\npassword = "{topology.root_password}"\n'
    cfg.write_text(toml)
    return Manifold(topology, ["--config", str(cfg)], log_name=name, **kw)


def native_hash(password):
    """mysql_native_password's stored form: '*' + hex(SHA1(SHA1(password)))."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


@pytest.fixture(scope="session")
def manifold(topology):
    m = Manifold(topology)
    yield m
    m.stop_and_check()


@pytest.fixture(scope="session")
def cert_manifold(topology):
    """manifold offering a configured certificate (the topology's, signed by its CA, valid
    for 127.0.0.1), for tests that verify it as clients verify a real server's."""
    m = Manifold(topology, log_name="manifold-cert", configured_cert=True)
    yield m
    m.stop_and_check()


@pytest.fixture(scope="session")
def split_manifold(topology):
    """manifold in front of the primary and both replicas: reads split, causal reads on."""
    m = Manifold(topology, log_name="manifold-split", split=True)
    yield m
    m.stop_and_check()


@pytest.fixture
def schema(topology):
    """A fresh schema on the primary for one test, dropped afterwards."""
    name = "t_" + uuid.uuid4().hex[:12]
    with topology.root() as c:
        c.cursor().execute(f"CREATE DATABASE {name}")
    yield name
    with topology.root() as c:
        c.cursor().execute(f"DROP DATABASE IF EXISTS {name}")


@pytest.fixture
def mariadb_account(topology):
    """A second MariaDB account (all privileges) as (name, password), dropped afterwards."""
    name, password = "u" + uuid.uuid4().hex[:10], "pw-" + uuid.uuid4().hex[:8]
    with topology.root() as r:
        r.cursor().execute(f"CREATE USER '{name}'@'%' IDENTIFIED BY '{password}'")
        r.cursor().execute(f"GRANT ALL PRIVILEGES ON *.* TO '{name}'@'%'")
    yield name, password
    with topology.root() as r:
        r.cursor().execute(f"DROP USER IF EXISTS '{name}'@'%'")


def run_in_thread(fn):
    """Runs `fn` on a thread of its own; the dict gets its "result" or the "error" it raised."""
    out = {}

    def target():
        try:
            out["result"] = fn()
        except Exception as e:  # noqa: BLE001 - reported to the test
            out["error"] = e

    t = threading.Thread(target=target)
    t.start()
    return t, out


@pytest.fixture(scope="session")
def redis_door(topology):
    """One manifold with the Redis door for the Redis data test files (each uses its own key
    prefix); yields the door's port."""
    from redisdiff import start_door  # noqa: PLC0415 (redisdiff imports this module)
    with start_door(topology) as port:
        yield port


@pytest.fixture(scope="session")
def redis_reference():
    """Debian's redis-server, the reference of the differential tests; yields its port."""
    from redisdiff import start_reference  # noqa: PLC0415
    with start_reference() as port:
        yield port
