"""The MySQL dialect of the global binlog through crashes: the ledger load on two MySQL
clusters while manifold is SIGKILLed and restarted on the same directory, a source primary
restarted once and MySQL's own mysqlbinlog following it and killed at random. Afterwards the
ledger checks hold (nothing lost, nothing duplicated, each transaction whole, per-source and
causal order), and each source's recorded position is one interval per server: heartbeats,
which are never written, still move it, across every restart (`manifold-bin.sources`)."""

import random
import time

import pytest

import binlogkit as bk

SCHEMAS = {"default": "mcrash_a", "b": "mcrash_b"}
KILLS = bk.env_int("BINLOG_TEST_MYSQL_KILLS", 10)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with bk.clusters(["default", "b"], flavors=["mysql", "mysql"]) as (a, b):
        bk.create_schemas([a, b], SCHEMAS)
        mf = bk.BinlogManifold(
            [a, b], tmp_path_factory.mktemp("mysql-crash") / "binlog", {"b": ["mcrash_b"]},
            binlog_extra='max_file_size = "1M"\nreconnect_interval = "200ms"')
        yield a, b, mf, bk.Ledger()
        mf.stop_and_check()


def random_readers(mf):
    """MySQL's `mysqlbinlog --stop-never` readers, each killed after a random while."""
    return bk.KilledReaders([*bk.mysql_tool("mysqlbinlog"), "--read-from-remote-server",
                             "--get-server-public-key", "--stop-never", "--verify-binlog-checksum",
                             "-h127.0.0.1", f"-P{mf.port}", f"-u{bk.USER}", f"-p{bk.PASSWORD}",
                             "manifold-bin.000001"],
                            seed=11, outages=mf.outages)


def intervals_per_server(position):
    """`{uuid: number of intervals}` of a MySQL GTID set's text (`uuid:1-5:7,uuid2:1-3`)."""
    out = {}
    for part in position.replace("\n", "").split(","):
        if part.strip():
            uuid, *intervals = part.strip().split(":")
            out[uuid] = len(intervals)
    return out


def test_kill_minus_nine_under_load_keeps_every_transaction_and_compact_positions(setup):
    a, b, mf, ledger = setup
    rng = random.Random(23)
    writers = bk.Writers(mf, SCHEMAS, ledger, tolerate_errors=True).start()
    with random_readers(mf) as readers:
        for k in range(KILLS):
            # Long enough between kills for heartbeats to be noted and checkpointed.
            time.sleep(rng.uniform(0.5, 1.5))
            mf.kill()
            if k == KILLS // 2:
                a.restart_primary()
            mf.start()
        time.sleep(2)
    writers.stop()
    assert mf.starts == KILLS + 1
    assert readers.runs > 3
    # (Each ended for a reason, checked on leaving the `with`; manifold is down for much of
    # the time, so many readers never get to read.)
    assert readers.events_read > 0, "no reader printed an event"
    assert len(ledger.committed) > 100, "writes went on between the crashes"
    mf.wait_caught_up(timeout=120)
    bk.check_global_binlog(bk.read_binlog(mf.files(), allow_torn_tail=True), ledger, [a, b])
    # Heartbeats (ten a second on each primary, never written) are in the recorded positions:
    # one interval per server, not a hole per heartbeat that a restart would ask for again.
    def compact():
        rows = mf.admin("SHOW BINLOG SOURCES")
        return all(set(intervals_per_server(r["written"]).values()) == {1} for r in rows) and rows
    rows = bk.wait_for("the recorded positions to take the latest heartbeats", compact, timeout=30)
    for r in rows:
        assert r["state"] == "streaming", r
