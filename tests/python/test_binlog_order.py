"""The global binlog's ledger: two independent clusters behind one manifold, sysbench
`oltp_write_only` on each through manifold, Python writers (multi-statement transactions,
rollbacks) and causal chains (a commit acknowledged on one cluster, then a write on the
other, alternating). The global binlog read back from its files holds every committed
transaction exactly once, each whole, each source's in its order, every chain in order, and
every transaction of every source's own binlog (heartbeats aside)."""

import subprocess
import time

import pytest

import binlogkit as bk
from test_sysbench import sysbench, sysbench_bin

SCHEMAS = {"default": "ledger_a", "b": "ledger_b"}
SYSBENCH = ["--tables=2", "--table-size=2000", "--rand-type=uniform"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with bk.clusters(["default", "b"]) as cs:
        bk.create_schemas(cs, SCHEMAS)
        for c, name in zip(cs, SCHEMAS):
            c.query(f"CREATE DATABASE IF NOT EXISTS sb_{name}")
        mf = bk.BinlogManifold(cs, tmp_path_factory.mktemp("order") / "binlog",
                               {"b": ["ledger_b", "sb_b"]}, binlog_extra='max_file_size = "4M"')
        yield cs, mf
        mf.stop_and_check()


def run_sysbench(mf, db, seconds):
    cmd = [sysbench_bin(), "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1",
           f"--mysql-port={mf.port}", f"--mysql-user={bk.USER}", f"--mysql-password={bk.PASSWORD}",
           f"--mysql-db={db}", *SYSBENCH, "--threads=4", f"--time={seconds}", "run"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_ledger_under_sysbench_and_causal_chains(pair):
    cs, mf = pair
    for name in SCHEMAS:
        sysbench("prepare", mf.port, f"sb_{name}", *SYSBENCH, "--threads=2", test="oltp_write_only")
    ledger = bk.Ledger()
    writers = bk.Writers(mf, SCHEMAS, ledger).start()
    benches = [run_sysbench(mf, f"sb_{name}", 15) for name in SCHEMAS]
    for b in benches:
        out, _ = b.communicate(timeout=120)
        assert b.returncode == 0 and "FATAL" not in out, f"sysbench failed:\n{out[-2000:]}"
    writers.stop()
    assert len(ledger.committed) > 200 and len(ledger.chains) > 20, "the load ran"
    mf.wait_caught_up()
    binlog = bk.read_binlog(mf.files(), allow_torn_tail=True)
    bk.check_global_binlog(binlog, ledger, cs)
    assert len(mf.files()) > 1, "4M files rotated under this load"
    # Every file but the last ends whole (a transaction is never split across files).
    bk.read_binlog(mf.files()[:-1])


def test_idle_source_does_not_hold_back_the_other(pair):
    """Only cluster b writes: its transactions still reach the global binlog (the idle
    default cluster's heartbeats advance the watermark), and no heartbeat is in."""
    cs, mf = pair
    before = len(bk.read_binlog(mf.files(), allow_torn_tail=True).transactions)
    ledger = bk.Ledger()
    with mf.connect(database="ledger_b") as c, c.cursor() as cur:
        for i in range(20):
            tag = f"idle.{i}"
            cur.execute(f"/*ledger:{tag}*/ INSERT INTO ledger (id, tag, v) VALUES ({800_000_000 + i}, '{tag}', 0)")
            ledger.add(tag, "b")
    deadline = time.time() + 30
    while True:
        txns = bk.read_binlog(mf.files(), allow_torn_tail=True).transactions
        tags = {tag for t in txns[before:] for tag in t.tags()}
        if set(ledger.committed) <= tags:
            break
        assert time.time() < deadline, f"b's writes did not leave the merge while default was idle: {tags}"
        time.sleep(0.1)
    assert all(t.origin.cluster == "b" for t in txns[before:] if t.tags()), "from b"
    bk.check_global_binlog(bk.read_binlog(mf.files(), allow_torn_tail=True))


def test_writes_outside_manifold_are_in_the_global_binlog(pair):
    """Transactions written on a primary directly (no stamp) are ordered by the source's
    heartbeats and are in the global binlog too, once each."""
    cs, mf = pair
    for i in range(10):
        cs[1].query(f"/*ledger:direct.{i}*/ INSERT INTO ledger_b.ledger (id, tag, v) VALUES ({700_000_000 + i}, 'd', 0)")
    txns = mf.wait_caught_up()
    tags = [tag for t in txns for tag in t.tags() if tag.startswith("direct.")]
    assert tags == [f"direct.{i}" for i in range(10)], tags


def test_schema_changes_pass_through(pair):
    cs, mf = pair
    with mf.connect(database="ledger_b") as c, c.cursor() as cur:
        cur.execute("CREATE TABLE ddl_t (id INT PRIMARY KEY)")
        cur.execute("ALTER TABLE ddl_t ADD COLUMN v INT")
    txns = mf.wait_caught_up()
    queries = [q for t in txns for q in t.queries]
    assert any(b"CREATE TABLE ddl_t" in q for q in queries), "the DDL is in the global binlog"
    assert any(b"ALTER TABLE ddl_t" in q for q in queries)
