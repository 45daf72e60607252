"""Debezium reads manifold's global binlog as it reads a server's: its embedded engine
(tests/debezium, artifacts from Maven Central) with the MariaDB connector, in the snapshot
modes users start with (`initial`, `no_data`), through manifold's MySQL port. Rows written
through manifold arrive once each, in the order they were committed, with the global
binlog's GTIDs; after manifold restarts (the engine reconnecting by itself) and after the
engine restarts from its stored offsets, Debezium goes on without losing or repeating one.

Debezium's MariaDB connector reads over MariaDB's Connector/J with a query timeout, which
wraps every query in `SET STATEMENT max_statement_time=... FOR`: before manifold answered
those forms itself, Debezium learned the primary's GTIDs and the dump stopped with 1236.

The figures (rows/s delivered, commit-to-event latency p50/p99) are written to
target/debezium-figures.txt and printed with `-s`."""

import json
import os
import queue
import subprocess
import threading
import time

import pymysql
import pytest

import binlogkit as bk
from conftest import ROOT, native_hash

DBZ = ("dbz", "dbz-pw")
RUN_SH = ROOT / "tests" / "debezium" / "run.sh"
FIGURES = ROOT / "target" / "debezium-figures.txt"


@pytest.fixture(scope="module")
def classpath():
    """The harness built (the artifacts resolved once into target/m2, then offline)."""
    p = subprocess.run([str(RUN_SH), "build"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"tests/debezium/run.sh build failed:\n{p.stderr}"
    return p.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with bk.clusters(["default"]) as cs:
        a = cs[0]
        # What Debezium's documentation asks of its login on the server.
        a.query(f"CREATE USER IF NOT EXISTS '{DBZ[0]}'@'%' IDENTIFIED BY '{DBZ[1]}'")
        a.query(f"GRANT SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, BINLOG MONITOR "
                f"ON *.* TO '{DBZ[0]}'@'%'")
        mf = bk.BinlogManifold(cs, tmp_path_factory.mktemp("debezium") / "binlog", {},
                               binlog_users=(bk.USER, DBZ[0]),
                               toml_extra=f'\n[[users]]\nname = "{DBZ[0]}"\n'
                               f'password_native = "{native_hash(DBZ[1])}"\nbackend_password = "{DBZ[1]}"\n')
        yield a, mf
        mf.stop_and_check()


class Engine:
    """The harness running: its events as they arrive (dicts with `recv_us`, `key`,
    `value`); `stop()` closes its stdin, after which it commits its offsets and exits."""

    def __init__(self, classpath, mf, state_dir, snapshot_mode, schema):
        state_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = state_dir / f"engine-{int(time.time() * 1000)}.log"
        self.log = open(self.log_path, "w")
        args = ["java", "-cp", classpath, "manifold.debezium.Main", "connector=mariadb", f"dir={state_dir}",
                "database.hostname=127.0.0.1", f"database.port={mf.port}", f"database.user={DBZ[0]}",
                f"database.password={DBZ[1]}", f"database.include.list={schema}",
                f"snapshot.mode={snapshot_mode}", "database.query.timeout.ms=30000"]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.events = queue.Queue()
        self.stopped = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            item = json.loads(line)
            if item.get("engine") == "stopped":
                self.stopped = item
            else:
                self.events.put(item)
        self.events.put(None)

    def take(self, n, timeout=120):
        """The next `n` events; fails when the engine stops or they do not come in time."""
        out = []
        deadline = time.time() + timeout
        while len(out) < n:
            try:
                item = self.events.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                raise AssertionError(f"{len(out)} of {n} events within {timeout}s; "
                                     f"engine log {self.log_path}:\n{self.tail()}") from None
            if item is None:
                raise AssertionError(f"the engine stopped ({self.stopped}) after {len(out)} of {n} events; "
                                     f"log:\n{self.tail()}")
            out.append(item)
        return out

    def quiet(self, seconds):
        """Nothing more arrives within `seconds` (after the events taken)."""
        try:
            item = self.events.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"an event more than written: {item}")

    def tail(self):
        if not self.log.closed:
            self.log.flush()
        return "\n".join(self.log_path.read_text().splitlines()[-40:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=10)
        self.log.close()
        assert self.stopped is not None and self.stopped["success"], \
            f"the engine did not stop cleanly: {self.stopped}\n{self.tail()}"


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


def check_stream(events, expected, schema):
    """Every change once, in commit order, from the global binlog."""
    assert [change(e) for e in events] == expected
    for e in events:
        src = e["value"]["source"]
        assert src["db"] == schema and src["table"] == "orders", src
        assert src["file"].startswith("manifold-bin."), src
        assert src["gtid"].startswith(f"0-{bk.BINLOG_SERVER_ID}-"), src


def make_schema(a, schema):
    a.query(f"CREATE DATABASE {schema}")
    a.query(f"CREATE TABLE {schema}.orders (id INT PRIMARY KEY, qty INT NOT NULL, note VARCHAR(64))")


def write_figures(text):
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    with open(FIGURES, "a") as f:
        f.write(text + "\n")
    print(text)


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def test_initial_snapshot_then_stream_across_restarts(setup, classpath, tmp_path):
    a, mf = setup
    schema = "dbz_initial"
    make_schema(a, schema)
    w = Writer(lambda: mf.connect(autocommit=False), schema)
    w.insert(30)
    mf.wait_caught_up()
    state = tmp_path / "engine"
    engine = Engine(classpath, mf, state, "initial", schema)
    try:
        snap = engine.take(30)
        assert sorted(e["value"]["after"]["id"] for e in snap) == list(range(1, 31))
        assert {e["value"]["op"] for e in snap} == {"r"}
        # Streaming: inserts, updates, deletes in commit order.
        w.expected.clear()
        w.insert(20)
        w.update(3, 333)
        w.delete(4)
        w.update(35, 3535)
        check_stream(engine.take(len(w.expected)), w.expected, schema)

        # manifold restarts; rows written meanwhile on the primary directly are in the
        # global binlog when it is back, and the engine reconnects by itself.
        w.expected.clear()
        mf.stop_and_check()
        w.insert(5, through=lambda: a.root(database=schema))
        mf.start()
        w.insert(5)
        check_stream(engine.take(len(w.expected)), w.expected, schema)
        engine.quiet(2)
    finally:
        engine.stop()

    # The engine stopped; rows written meanwhile come first when it starts again from its
    # offsets, once each (no snapshot again).
    w.expected.clear()
    w.insert(10)
    w.delete(1)
    engine = Engine(classpath, mf, state, "initial", schema)
    try:
        check_stream(engine.take(len(w.expected)), w.expected, schema)
        w.expected.clear()
        w.insert(3)
        check_stream(engine.take(len(w.expected)), w.expected, schema)
        engine.quiet(2)
    finally:
        engine.stop()


def test_no_data_streams_from_where_it_started_and_measures(setup, classpath, tmp_path):
    a, mf = setup
    schema = "dbz_nodata"
    make_schema(a, schema)
    w = Writer(lambda: mf.connect(autocommit=False), schema)
    w.insert(10)
    mf.wait_caught_up()
    engine = Engine(classpath, mf, tmp_path / "engine", "no_data", schema)
    try:
        # No snapshot: the first event is a row written after the engine began streaming;
        # rows are written one at a time until one comes.
        w.expected.clear()
        first = None
        deadline = time.time() + 120
        while first is None:
            assert time.time() < deadline, f"no event from the engine:\n{engine.tail()}"
            w.insert(1)
            try:
                first = engine.events.get(timeout=1)
            except queue.Empty:
                continue
            assert first is not None, f"the engine stopped: {engine.stopped}\n{engine.tail()}"
        assert first["value"]["op"] == "c" and first["value"]["after"]["id"] > 10, first
        at = [e[1] for e in w.expected].index(first["value"]["after"]["id"])
        rest = engine.take(len(w.expected) - at - 1)
        check_stream([first] + rest, w.expected[at:], schema)

        # Latency: rows one at a time, each waited for.
        latencies = []
        for _ in range(200):
            w.expected.clear()
            w.committed_us.clear()
            w.insert(1)
            (event,) = engine.take(1)
            check_stream([event], w.expected, schema)
            latencies.append((event["recv_us"] - w.committed_us[0]) / 1000)
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
        check_stream(events, w.expected, schema)
        seconds = (events[-1]["recv_us"] - start) / 1e6
        write_figures(f"debezium mariadb connector through manifold: {n} rows in {seconds:.2f}s = "
                      f"{n / seconds:.0f} rows/s delivered; commit-to-event latency over "
                      f"{len(latencies)} single-row commits: p50 {percentile(latencies, 50):.1f} ms, "
                      f"p99 {percentile(latencies, 99):.1f} ms, max {max(latencies):.1f} ms "
                      f"(binlog.heartbeat_interval 100ms)")
        engine.quiet(2)
    finally:
        engine.stop()
