"""A big transaction through a small memory budget: one `INSERT ... SELECT` of 1 MiB rows
(2 GiB by default) on one cluster, with `binlog.memory_budget = "256M"`. It arrives whole
in the global binlog (every row event, in one transaction, between its GTID and XID) while
manifold's peak RSS (VmHWM) stays well under the transaction's size.

BINLOG_BIG_MIB sets the size: 2048 needs about 4× that on disk (the source's binlog and
binlog cache, the global binlog, manifold's spill files) and some minutes on two cores. The
budget is 256M from 1 GiB up, else an eighth of the size, so the transaction always spills;
the RSS bound is half the size, at most 1 GiB."""

import shutil

import binlogkit as bk

MIB = 1 << 20
SIZE_MIB = bk.env_int("BINLOG_BIG_MIB", 2048)
BUDGET_MIB = 256 if SIZE_MIB >= 1024 else max(SIZE_MIB // 8, 4)
RSS_LIMIT = min(SIZE_MIB * MIB // 2, 1 << 30)


def test_a_transaction_larger_than_the_budget_passes_whole_in_bounded_memory(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    assert free > 4 * SIZE_MIB * MIB, \
        f"{SIZE_MIB} MiB needs {4 * SIZE_MIB} MiB free disk, {free >> 20} MiB are: set BINLOG_BIG_MIB lower"
    # Rows of 1 MiB: the sources accept 64 MiB packets; the other cluster stays idle.
    server_args = ["--max-allowed-packet", str(64 * MIB)]
    with bk.clusters(["default", "b"], extra=server_args) as cs:
        a = cs[0]
        a.query("CREATE DATABASE big")
        a.query("CREATE TABLE big.t (id INT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB")
        mf = bk.BinlogManifold(cs, tmp_path / "binlog", {"b": []},
                               binlog_extra=f'memory_budget = "{BUDGET_MIB}M"\nmax_file_size = "64M"')
        try:
            with mf.connect(database="big", read_timeout=3600) as c, c.cursor() as cur:
                # One statement, one transaction: SIZE_MIB rows of 1 MiB each, distinct bytes.
                cur.execute("/*ledger:big*/ INSERT INTO t SELECT seq, CONCAT(LPAD(seq, 16, '0'), "
                            f"REPEAT('x', {MIB - 16})) FROM seq_1_to_{SIZE_MIB}")
            txns = mf.wait_caught_up(timeout=max(600, SIZE_MIB // 2))
            rss = mf.peak_rss()
            big = [t for t in txns if "big" in t.tags()]
            assert len(big) == 1, f"the big transaction is in the global binlog once ({len(big)})"
            t = big[0]
            own = [s for s in bk.read_binlog(a.binlog_files()).transactions if "big" in s.tags()]
            assert t.complete and t.origin.cluster == "default" and [s.gtid for s in own] == [t.origin.gtid]
            assert t.row_bytes > SIZE_MIB * MIB, f"every row: {t.row_bytes} bytes of row events"
            assert rss < RSS_LIMIT, f"manifold's peak RSS {rss >> 20} MiB for a {SIZE_MIB} MiB transaction"
            # Files rotate at 64M, never inside it.
            bk.check_global_binlog(bk.read_binlog(mf.files(), allow_torn_tail=True), clusters=cs)
        finally:
            mf.stop_and_check()
