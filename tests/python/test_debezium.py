"""Debezium reads manifold's global binlog as it reads a server's: its embedded engine
(tests/debezium, artifacts from Maven Central) with the MariaDB connector in front of a
MariaDB fleet and the MySQL connector in front of a MySQL 9.7 fleet, through manifold's
MySQL port, in the snapshot modes users start with (`initial`, `when_needed` and `no_data`
side by side). Rows written through manifold arrive once each, in the order they were
committed, with the global binlog's GTIDs; after manifold restarts (each engine
reconnecting by itself) and after the engines restart from their stored offsets, Debezium
goes on without losing or repeating one.

Debezium's MariaDB connector reads over MariaDB's Connector/J with a query timeout, which
wraps every query in `SET STATEMENT max_statement_time=... FOR`: before manifold answered
those forms itself, Debezium learned the primary's GTIDs and the dump stopped with 1236.

One JVM runs every engine of the file (tests/debezium's harness takes `start`/`stop`
commands), since starting a JVM and loading Debezium costs seconds each time. The figures
(rows/s delivered, commit-to-event latency p50/p99) are written to
target/debezium-figures.txt and printed with `-s`."""

import itertools
import json
import queue
import subprocess
import threading
import time

import pytest

import binlogkit as bk
from conftest import ROOT

DBZ = ("dbz", "dbz-pw")
RUN_SH = ROOT / "tests" / "debezium" / "run.sh"
FIGURES = ROOT / "target" / "debezium-figures.txt"
# What Debezium's documentation asks of its login on each server.
GRANTS = {
    "mariadb": "SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, BINLOG MONITOR",
    "mysql": "SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, REPLICATION CLIENT",
}
SERVER_IDS = itertools.count(6100)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """The harness built (the artifacts resolved once into target/m2, then offline) and
    running: one JVM for every engine of the file."""
    p = subprocess.run([str(RUN_SH), "build"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"tests/debezium/run.sh build failed:\n{p.stderr}"
    h = Harness(p.stdout.strip().splitlines()[-1], tmp_path_factory.mktemp("debezium-jvm") / "engines.log")
    yield h
    h.close()


def fleet(flavor, tmp_path_factory):
    with bk.clusters(["default"], flavors=[flavor]) as cs:
        a = cs[0]
        a.query(f"CREATE USER IF NOT EXISTS '{DBZ[0]}'@'%' IDENTIFIED BY '{DBZ[1]}'")
        a.query(f"GRANT {GRANTS[flavor]} ON *.* TO '{DBZ[0]}'@'%'")
        mf = bk.BinlogManifold(cs, tmp_path_factory.mktemp(f"debezium-{flavor}") / "binlog", {},
                               name=f"manifold-debezium-{flavor}", binlog_users=(bk.USER, DBZ[0]),
                               extra_args=["--user", f"{DBZ[0]}:{DBZ[1]}"])
        yield Fleet(flavor, a, mf)
        mf.stop_and_check()


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory):
    yield from fleet("mariadb", tmp_path_factory)


@pytest.fixture(scope="module")
def mysql(tmp_path_factory):
    yield from fleet("mysql", tmp_path_factory)


@pytest.fixture(params=["mariadb", "mysql"])
def setup(request):
    return request.getfixturevalue(request.param)


class Fleet:
    def __init__(self, flavor, primary, mf):
        self.flavor = flavor
        self.primary = primary
        self.mf = mf

    def gtid_prefix(self):
        """How the global binlog's GTIDs start, as Debezium reports them."""
        return f"{bk.BINLOG_UUID}:" if self.flavor == "mysql" else f"0-{bk.BINLOG_SERVER_ID}-"


class Harness:
    """The JVM running engines; its stdout dispatched to each engine's events."""

    def __init__(self, classpath, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(["java", "-cp", classpath, "manifold.debezium.Main"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self.engines = {}
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            item = json.loads(line)
            with self.lock:
                engine = self.engines.get(item["engine"])
            if engine is None:
                continue
            if item.get("stopped"):
                engine.stopped = item
                engine.events.put(None)
            else:
                engine.events.put(item)
        with self.lock:
            for engine in self.engines.values():
                engine.events.put(None)

    def send(self, line):
        assert self.proc.poll() is None, f"the harness exited:\n{self.tail()}"
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def tail(self):
        self.log.flush()
        return "\n".join(self.log_path.read_text().splitlines()[-40:])

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Engine:
    """One engine of the harness reading `fleet` in `snapshot_mode`, its state in
    `state_dir` (started again on the same directory, it resumes from its offsets)."""

    def __init__(self, harness, fleet, state_dir, snapshot_mode, schema):
        state_dir.mkdir(parents=True, exist_ok=True)
        self.harness = harness
        self.name = f"{fleet.flavor}-{snapshot_mode}-{next(SERVER_IDS)}"
        self.events = queue.Queue()
        self.stopped = None
        with harness.lock:
            harness.engines[self.name] = self
        # A short poll and keep-alive: events handed over at once, and a binlog connection
        # that manifold's restart cut is opened again within a second.
        # The connector's name and topic prefix key the engine's offsets and its JMX
        # metrics: the same for the engine started again on its state, others for each
        # engine running beside it.
        stable = f"{fleet.flavor}_{snapshot_mode}"
        props = {"connector": fleet.flavor, "dir": state_dir, "name": stable, "topic.prefix": stable,
                 "database.hostname": "127.0.0.1",
                 "database.port": fleet.mf.port, "database.user": DBZ[0], "database.password": DBZ[1],
                 "database.server.id": next(SERVER_IDS), "database.include.list": schema,
                 "snapshot.mode": snapshot_mode, "database.query.timeout.ms": 30000,
                 "poll.interval.ms": 20, "connect.keep.alive.interval.ms": 500}
        harness.send(f"start {self.name} " + " ".join(f"{k}={v}" for k, v in props.items()))

    def take(self, n, timeout=120):
        """The next `n` events; fails when the engine stops or they do not come in time."""
        out = []
        deadline = time.time() + timeout
        while len(out) < n:
            try:
                item = self.events.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                raise AssertionError(f"{self.name}: {len(out)} of {n} events within {timeout}s; "
                                     f"log {self.harness.log_path}:\n{self.harness.tail()}") from None
            if item is None:
                raise AssertionError(f"{self.name} stopped ({self.stopped}) after {len(out)} of {n} events; "
                                     f"log:\n{self.harness.tail()}")
            out.append(item)
        return out

    def quiet(self, seconds):
        """Nothing more arrives within `seconds` (after the events taken)."""
        try:
            item = self.events.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"{self.name}: an event more than written: {item} {self.stopped or ''}")

    def stop(self):
        if self.stopped is None:
            self.harness.send(f"stop {self.name}")
            deadline = time.time() + 90
            while self.stopped is None and time.time() < deadline:
                try:
                    self.events.get(timeout=1)
                except queue.Empty:
                    pass
        with self.harness.lock:
            self.harness.engines.pop(self.name, None)
        assert self.stopped is not None and self.stopped["success"], \
            f"{self.name} did not stop cleanly: {self.stopped}\n{self.harness.tail()}"


class Writer:
    """Writes rows of `schema.orders` through manifold, one transaction per statement, and
    remembers each change as Debezium should report it, with its commit time."""

    def __init__(self, conn_fn, schema):
        self.conn_fn = conn_fn
        self.schema = schema
        self.next_id = 1
        self.expected = []
        self.committed_us = []

    def insert(self, n, through=None):
        with (through or self.conn_fn)() as c, c.cursor() as cur:
            for _ in range(n):
                i = self.next_id
                self.next_id += 1
                cur.execute(f"INSERT INTO {self.schema}.orders (id, qty, note) VALUES (%s, %s, %s)",
                            (i, i * 10, f"row {i}"))
                c.commit()
                self.committed_us.append(time.time_ns() // 1000)
                self.expected.append(("c", i, i * 10))

    def update(self, i, qty):
        with self.conn_fn() as c, c.cursor() as cur:
            cur.execute(f"UPDATE {self.schema}.orders SET qty = %s WHERE id = %s", (qty, i))
            c.commit()
            self.committed_us.append(time.time_ns() // 1000)
            self.expected.append(("u", i, qty))

    def delete(self, i):
        with self.conn_fn() as c, c.cursor() as cur:
            cur.execute(f"DELETE FROM {self.schema}.orders WHERE id = %s", (i,))
            c.commit()
            self.committed_us.append(time.time_ns() // 1000)
            self.expected.append(("d", i, None))


def change(event):
    """`(op, id, qty)` of a change event."""
    v = event["value"]
    row = v["before"] if v["op"] == "d" else v["after"]
    return v["op"], row["id"], None if v["op"] == "d" else row["qty"]


def check_stream(events, expected, schema, fleet):
    """Every change once, in commit order, from the global binlog."""
    assert [change(e) for e in events] == expected
    for e in events:
        src = e["value"]["source"]
        assert src["db"] == schema and src["table"] == "orders", src
        assert src["file"].startswith("manifold-bin."), src
        assert src["gtid"].startswith(fleet.gtid_prefix()), src


def make_schema(fleet, schema):
    fleet.primary.query(f"CREATE DATABASE {schema}")
    fleet.primary.query(f"CREATE TABLE {schema}.orders (id INT PRIMARY KEY, qty INT NOT NULL, note VARCHAR(64))")


def write_figures(text):
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    with open(FIGURES, "a") as f:
        f.write(text + "\n")
    print(text)


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def test_snapshot_then_stream_across_restarts(setup, harness, tmp_path):
    """`initial` and `when_needed` side by side (no offsets yet: both take the snapshot)."""
    fl = setup
    mf = fl.mf
    schema = f"dbz_{fl.flavor}_snap"
    make_schema(fl, schema)
    w = Writer(lambda: mf.connect(autocommit=False), schema)
    w.insert(30)
    mf.wait_caught_up()
    modes = ["initial", "when_needed"]
    engines = [Engine(harness, fl, tmp_path / m, m, schema) for m in modes]
    try:
        for engine in engines:
            snap = engine.take(30)
            assert sorted(e["value"]["after"]["id"] for e in snap) == list(range(1, 31)), engine.name
            assert {e["value"]["op"] for e in snap} == {"r"}, engine.name
        # Streaming: inserts, updates, deletes in commit order.
        w.expected.clear()
        w.insert(20)
        w.update(3, 333)
        w.delete(4)
        w.update(35, 3535)
        for engine in engines:
            check_stream(engine.take(len(w.expected)), w.expected, schema, fl)

        # manifold restarts; rows written meanwhile on the primary directly are in the
        # global binlog when it is back, and the engines reconnect by themselves.
        w.expected.clear()
        mf.stop_and_check()
        w.insert(5, through=lambda: fl.primary.root(database=schema))
        mf.start()
        w.insert(5)
        for engine in engines:
            check_stream(engine.take(len(w.expected)), w.expected, schema, fl)
        engines[0].quiet(1)
        for engine in engines[1:]:
            engine.quiet(0)
    finally:
        for engine in engines:
            engine.stop()

    # The engines stopped; rows written meanwhile come first when they start again from
    # their offsets, once each (no snapshot again).
    w.expected.clear()
    w.insert(10)
    w.delete(1)
    engines = [Engine(harness, fl, tmp_path / m, m, schema) for m in modes]
    try:
        for engine in engines:
            check_stream(engine.take(len(w.expected)), w.expected, schema, fl)
        w.expected.clear()
        w.insert(3)
        for engine in engines:
            check_stream(engine.take(len(w.expected)), w.expected, schema, fl)
        engines[0].quiet(1)
        for engine in engines[1:]:
            engine.quiet(0)
    finally:
        for engine in engines:
            engine.stop()


def test_no_data_streams_from_where_it_started_and_measures(setup, harness, tmp_path):
    fl = setup
    mf = fl.mf
    schema = f"dbz_{fl.flavor}_nodata"
    make_schema(fl, schema)
    w = Writer(lambda: mf.connect(autocommit=False), schema)
    w.insert(10)
    mf.wait_caught_up()
    engine = Engine(harness, fl, tmp_path / "engine", "no_data", schema)
    try:
        # No snapshot: the first event is a row written after the engine began streaming;
        # rows are written one at a time until one comes.
        w.expected.clear()
        first = None
        deadline = time.time() + 120
        while first is None:
            assert time.time() < deadline, f"no event from the engine:\n{harness.tail()}"
            w.insert(1)
            try:
                first = engine.events.get(timeout=0.5)
            except queue.Empty:
                continue
            assert first is not None, f"the engine stopped: {engine.stopped}\n{harness.tail()}"
        assert first["value"]["op"] == "c" and first["value"]["after"]["id"] > 10, first
        at = [e[1] for e in w.expected].index(first["value"]["after"]["id"])
        rest = engine.take(len(w.expected) - at - 1)
        check_stream([first] + rest, w.expected[at:], schema, fl)

        # Latency: rows one at a time, each waited for.
        latencies = []
        with mf.connect(autocommit=False) as c, c.cursor() as cur:
            for _ in range(100):
                i = w.next_id
                w.next_id += 1
                cur.execute(f"INSERT INTO {schema}.orders (id, qty, note) VALUES (%s, %s, 'one')", (i, i))
                c.commit()
                committed_us = time.time_ns() // 1000
                (event,) = engine.take(1)
                check_stream([event], [("c", i, i)], schema, fl)
                latencies.append((event["recv_us"] - committed_us) / 1000)
        # Throughput: 5,000 rows in transactions of 100, from a second client, delivered.
        w.expected.clear()
        n, per_txn = 5000, 100
        start = time.time_ns() // 1000
        with mf.connect(autocommit=False) as c, c.cursor() as cur:
            for t in range(n // per_txn):
                rows = [(w.next_id + k, k, "bulk") for k in range(per_txn)]
                w.next_id += per_txn
                cur.executemany(f"INSERT INTO {schema}.orders (id, qty, note) VALUES (%s, %s, %s)", rows)
                c.commit()
                w.expected.extend(("c", i, q) for i, q, _ in rows)
        events = engine.take(n, timeout=300)
        check_stream(events, w.expected, schema, fl)
        seconds = (events[-1]["recv_us"] - start) / 1e6
        write_figures(f"debezium {fl.flavor} connector through manifold: {n} rows in {seconds:.2f}s = "
                      f"{n / seconds:.0f} rows/s delivered; commit-to-event latency over "
                      f"{len(latencies)} single-row commits: p50 {percentile(latencies, 50):.1f} ms, "
                      f"p99 {percentile(latencies, 99):.1f} ms, max {max(latencies):.1f} ms "
                      f"(binlog.heartbeat_interval 100ms, poll.interval.ms 20)")
        engine.quiet(1)
    finally:
        engine.stop()
