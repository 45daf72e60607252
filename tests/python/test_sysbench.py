"""sysbench (1.0.20, MySQL driver built on libmariadb) through manifold.

Behaviour only, never timings:
- a 40 s, 64-thread oltp_read_write run through manifold with 8 backend connections per worker
  (16 in all) ends without errors or reconnects, and
  every table then has the same CHECKSUM TABLE through manifold, on the primary and on each
  replica once it has caught up;
- a deterministic workload (one thread, fixed event count, fixed seed) leaves the same data when
  run through manifold as when run directly against the primary, with prepared statements and
  with the text protocol;
- sysbench's `--mysql-ssl=on` works through manifold, and really negotiates TLS.

Determinism, checked by hand and by a control run in the test: sysbench 1.0.20 seeds its RNG
with --rand-seed only for `run` (srandom() is called while printing the run mode), so `prepare`
writes different `k`/`c`/`pad` values each time even with the same seed. The test therefore
prepares one schema and copies it into the compared schemas; the `run` phase with --threads=1,
--events=N, --time=0 and a fixed --rand-seed is reproducible (two direct runs give identical
checksums, which the control run re-checks every time).
"""

import re
import shutil
import socket
import subprocess
import threading
import uuid

import pytest

from conftest import configured, native_hash

USER, PASSWORD = "app", "app"

# Uniform keys: sysbench's default "special" distribution sends 75% of the accesses to 1% of the
# rows, and then 32 threads deadlock now and then even against MariaDB directly (sysbench counts
# those as "ignored errors"). Uniform keys over 4 x 25000 rows make that practically impossible,
# so any ignored error is worth looking at.
LOAD_TABLES = ["--tables=4", "--table-size=25000", "--rand-type=uniform"]
DET_TABLES = ["--tables=4", "--table-size=10000"]
DET_EVENTS = 2000
DET_SEED = 20241120


def sysbench_bin():
    path = shutil.which("sysbench")
    if path is None:
        pytest.fail("sysbench not found: apt-get install -y sysbench")
    return path


def tail(text, lines=40):
    return "\n".join(text.splitlines()[-lines:])


def sysbench(command, port, db, *args, test="oltp_read_write", cwd=None, timeout=300, login=(USER, PASSWORD)):
    """Runs one sysbench command; fails the test unless it exits 0 without a FATAL line."""
    cmd = [sysbench_bin(), test, "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}",
           f"--mysql-user={login[0]}", f"--mysql-password={login[1]}", f"--mysql-db={db}", *args, command]
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        partial = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"sysbench {command} on port {port} did not finish within {timeout}s:\n{tail(partial)}")
    assert p.returncode == 0 and "FATAL" not in p.stdout, \
        f"sysbench {command} on port {port} failed (exit {p.returncode}): {' '.join(cmd)}\n{tail(p.stdout)}"
    return p.stdout


def run_stats(out):
    """The counters of a `run` report."""
    def number(label):
        m = re.search(rf"^\s*{label}:\s+(\d+)", out, re.M)
        assert m, f"no '{label}:' line in sysbench's report:\n{tail(out)}"
        return int(m.group(1))
    return {"transactions": number("transactions"), "queries": number("queries"),
            "errors": number("ignored errors"), "reconnects": number("reconnects")}


def assert_clean(stats, out, what):
    assert stats["errors"] == 0, f"{what}: sysbench reported {stats['errors']} errors\n{tail(out)}"
    assert stats["reconnects"] == 0, f"{what}: sysbench reported {stats['reconnects']} reconnects\n{tail(out)}"
    assert stats["transactions"] > 0, f"{what}: no transactions\n{tail(out)}"


def table_names(args):
    n = int(next(a for a in args if a.startswith("--tables=")).split("=", 1)[1])
    return [f"sbtest{i}" for i in range(1, n + 1)]


def checksums(conn, db, tables):
    cur = conn.cursor()
    cur.execute("CHECKSUM TABLE " + ", ".join(f"`{db}`.`{t}`" for t in tables))
    result = {name.split(".", 1)[1]: value for name, value in cur.fetchall()}
    assert set(result) == set(tables), f"CHECKSUM TABLE returned {result}"
    assert all(v is not None for v in result.values()), f"missing tables in {db}: {result}"
    return result


def wait_for_replicas(topology, timeout=120):
    """Waits (bounded) until every replica has applied everything in the primary's binlog."""
    with topology.root() as c:
        cur = c.cursor()
        cur.execute("SELECT @@gtid_binlog_pos")
        pos = cur.fetchone()[0]
    for port in topology.replica_ports:
        with topology.root(port) as r:
            cur = r.cursor()
            # MASTER_GTID_WAIT returns 0 once @@gtid_slave_pos covers `pos`, -1 on timeout.
            cur.execute("SELECT MASTER_GTID_WAIT(%s, %s)", (pos, timeout))
            reached = cur.fetchone()[0]
            cur.execute("SELECT @@gtid_slave_pos, @@gtid_current_pos")
            slave_pos, current_pos = cur.fetchone()
            assert reached == 0, (f"replica {port} did not reach the primary's {pos} within {timeout}s "
                                  f"(gtid_slave_pos={slave_pos} gtid_current_pos={current_pos})")


@pytest.fixture
def schemas(topology):
    """Makes extra fresh schemas on the primary; drops them afterwards."""
    made = []

    def make():
        name = "t_" + uuid.uuid4().hex[:12]
        with topology.root() as c:
            c.cursor().execute(f"CREATE DATABASE {name}")
        made.append(name)
        return name

    yield make
    with topology.root() as c:
        for name in made:
            c.cursor().execute(f"DROP DATABASE IF EXISTS {name}")


@pytest.fixture
def small_pool(topology, tmp_path, mariadb_account):
    """A manifold whose workers (2) open at most 8 backend connections each, logging in to
    MariaDB as an account of its own (so its connections can be counted)."""
    name, password = mariadb_account
    toml = f"""
[engine]
threads = 2

[pool]
max_size = 8

[[users]]
name = "{name}"
password_native = "{native_hash(password)}"
backend_password = "{password}"
"""
    m = configured(topology, tmp_path, toml, "manifold-small-pool")
    m.login = mariadb_account
    yield m
    m.stop_and_check()


def test_oltp_read_write_64_threads_on_16_backend_connections(topology, small_pool, schema):
    """64 sysbench threads (prepared statements, transactions) multiplexed over 16 backend
    connections: no errors, no reconnects, and the data ends the same everywhere."""
    manifold = small_pool
    tables = table_names(LOAD_TABLES)
    login = manifold.login
    sysbench("prepare", manifold.port, schema, *LOAD_TABLES, "--threads=4", login=login)
    peak = [0]
    done = threading.Event()

    def watch():
        with topology.root() as r:
            cur = r.cursor()
            while not done.is_set():
                cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (login[0],))
                peak[0] = max(peak[0], cur.fetchone()[0])
                done.wait(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        out = sysbench("run", manifold.port, schema, *LOAD_TABLES, "--threads=64", "--time=20", timeout=240,
                       login=login)
    finally:
        done.set()
        watcher.join()
    stats = run_stats(out)
    assert_clean(stats, out, "oltp_read_write through manifold")
    assert 1 <= peak[0] <= 16, f"{peak[0]} backend connections for 2 pools of at most 8"

    assert_same_data_everywhere(topology, manifold, schema, tables)


def assert_same_data_everywhere(topology, manifold, schema, tables):
    """CHECKSUM TABLE through manifold, on the primary and (once caught up) on each replica
    agree."""
    with manifold.connect(autocommit=True) as m, topology.root() as p:
        through = checksums(m, schema, tables)
        direct = checksums(p, schema, tables)
    assert through == direct, "CHECKSUM TABLE through manifold differs from the primary's"

    wait_for_replicas(topology)
    for port in topology.replica_ports:
        with topology.root(port) as r:
            assert checksums(r, schema, tables) == direct, f"replica {port} has different data"


def com_select(topology, port):
    with topology.root(port) as c:
        cur = c.cursor()
        cur.execute("SHOW GLOBAL STATUS LIKE 'Com_select'")
        return int(cur.fetchone()[1])


def test_oltp_read_write_autocommit_with_reads_on_replicas(topology, split_manifold, schema):
    """oltp_read_write without transactions (`--skip-trx`) through a manifold splitting
    reads: every point select and range read may go to a replica, right after the same
    thread's writes. Clean, the replicas served reads, and the data ends the same
    everywhere."""
    manifold = split_manifold
    tables = table_names(LOAD_TABLES)
    sysbench("prepare", manifold.port, schema, *LOAD_TABLES, "--threads=4")
    wait_for_replicas(topology)
    before = [com_select(topology, p) for p in topology.replica_ports]
    # No DELETE+INSERT pairs: without transactions, two threads drawing the same id between
    # one's DELETE and its INSERT make the second INSERT a duplicate key, through manifold or
    # not (sysbench then stops). The updates keep every read right after a write.
    out = sysbench("run", manifold.port, schema, *LOAD_TABLES, "--threads=16", "--time=15", "--skip-trx=on",
                   "--delete_inserts=0", timeout=120)
    assert_clean(run_stats(out), out, "oltp_read_write --skip-trx through a splitting manifold")
    after = [com_select(topology, p) for p in topology.replica_ports]
    for port, b, a in zip(topology.replica_ports, before, after):
        assert a - b > 1000, f"replica {port} served {a - b} selects"
    assert_same_data_everywhere(topology, manifold, schema, tables)


def copy_schema(conn, src, dst, tables):
    cur = conn.cursor()
    for t in tables:
        cur.execute(f"CREATE TABLE `{dst}`.`{t}` LIKE `{src}`.`{t}`")
        cur.execute(f"INSERT INTO `{dst}`.`{t}` SELECT * FROM `{src}`.`{t}`")


@pytest.mark.parametrize("ps_mode", ["auto", "disable"], ids=["prepared", "text"])
def test_deterministic_run_matches_direct(topology, manifold, schemas, ps_mode):
    tables = table_names(DET_TABLES)
    base = schemas()
    sysbench("prepare", topology.primary_port, base, *DET_TABLES)
    direct, control, through = schemas(), schemas(), schemas()
    with topology.root() as c:
        for s in (direct, control, through):
            copy_schema(c, base, s, tables)
        initial = checksums(c, base, tables)
        for s in (direct, control, through):
            assert checksums(c, s, tables) == initial

    args = [*DET_TABLES, f"--rand-seed={DET_SEED}", "--threads=1", f"--events={DET_EVENTS}", "--time=0",
            f"--db-ps-mode={ps_mode}"]
    for port, db, what in ((topology.primary_port, direct, "direct run"),
                           (topology.primary_port, control, "second direct run"),
                           (manifold.port, through, "run through manifold")):
        out = sysbench("run", port, db, *args, timeout=600)
        stats = run_stats(out)
        assert_clean(stats, out, what)
        assert stats["transactions"] == DET_EVENTS, f"{what}: {stats}"

    with topology.root() as c:
        after_direct = checksums(c, direct, tables)
        after_control = checksums(c, control, tables)
        after_through = checksums(c, through, tables)
    assert after_direct != initial, "the workload changed nothing"
    assert after_control == after_direct, \
        "two direct runs of the same seeded workload differ: the workload is not deterministic"
    assert after_through == after_direct, "the run through manifold left different data than the direct run"


class SniffingRelay:
    """A TCP relay in front of a port that keeps the first bytes each client sent."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.first_bytes = []
        self.sockets = []
        self.stopped = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
            except (socket.timeout, OSError):
                continue
            client.settimeout(None)
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            record = bytearray()
            self.first_bytes.append(record)
            self.sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, record), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, None), daemon=True).start()

    @staticmethod
    def _pipe(src, dst, record):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if record is not None and len(record) < 64:
                    record += data[:64 - len(record)]
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        self.stopped = True
        self.thread.join()
        self.listener.close()
        for s in self.sockets:
            s.close()


def upgraded_to_tls(first):
    """True if a client's first packet is an SSLRequest (32-byte payload, sequence 1, CLIENT_SSL)
    followed directly by a TLS handshake record."""
    if len(first) < 37:
        return False
    length = int.from_bytes(first[0:3], "little")
    capabilities = int.from_bytes(first[4:8], "little")
    return length == 32 and first[3] == 1 and bool(capabilities & 0x800) and first[36] == 0x16


def test_sysbench_tls(topology, manifold, schema, tmp_path):
    # sysbench 1.0.20 with --mysql-ssl=on loads client-key.pem, client-cert.pem and cacert.pem
    # from its working directory (there are no options for them), and verifies the server's
    # certificate against cacert.pem: manifold's own, generated one (its own CA).
    shutil.copy(manifold.ca, tmp_path / "cacert.pem")
    shutil.copy(topology.cert, tmp_path / "client-cert.pem")
    shutil.copy(topology.key, tmp_path / "client-key.pem")
    args = ["--tables=2", "--table-size=2000", "--rand-type=uniform", "--mysql-ssl=on"]
    sysbench("prepare", manifold.port, schema, *args, cwd=tmp_path)
    out = sysbench("run", manifold.port, schema, *args, "--threads=8", "--time=5", cwd=tmp_path)
    assert_clean(run_stats(out), out, "oltp_read_write over TLS through manifold")

    # The same client through a relay that looks at the wire: every connection must upgrade.
    relay = SniffingRelay(manifold.port)
    try:
        out = sysbench("run", relay.port, schema, *args, "--threads=2", "--events=20", "--time=0", cwd=tmp_path)
    finally:
        relay.close()
    assert_clean(run_stats(out), out, "oltp_read_write over TLS through a relay to manifold")
    assert relay.first_bytes, "sysbench never connected through the relay"
    plain = [bytes(b[:40]).hex() for b in relay.first_bytes if not upgraded_to_tls(b)]
    assert not plain, f"connections that did not start TLS: {plain}"

    with manifold.connect(autocommit=True) as m, topology.root() as p:
        assert checksums(m, schema, ["sbtest1", "sbtest2"]) == checksums(p, schema, ["sbtest1", "sbtest2"])
