"""The global binlog's benchmark (run by bench/binlog.sh, which documents it). Uses the
client tests' helpers (tests/python/binlogkit.py) to start the clusters and manifold.

Parts: `decode` (mariadb-binlog decoding recorded source binlogs: events/s, MB/s),
`load` (sysbench oltp_write_only on two clusters through manifold, binlog on), `big` (one
large transaction: commit to written, peak RSS). Prints `key=value` lines; the summary table
goes to OUT/summary.md."""

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import binlogkit as bk  # noqa: E402

OUT = Path(os.environ.get("OUT", ROOT / "target" / "bench-binlog"))
RUNS = int(os.environ.get("RUNS", 3))
SECONDS = int(os.environ.get("SECONDS_PER_RUN", 30))
THREADS = int(os.environ.get("THREADS", 8))
BIG_MIB = int(os.environ.get("BIG_MIB", 1024))
SB = ["--tables=4", "--table-size=20000", "--rand-type=uniform"]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def sysbench(port, db, command, *extra):
    return subprocess.run(["sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1",
                           f"--mysql-port={port}", f"--mysql-user={bk.USER}", f"--mysql-password={bk.PASSWORD}",
                           f"--mysql-db={db}", *SB, *extra, command], capture_output=True, text=True, check=True).stdout


def cpu_ticks(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def events_of(files):
    b = bk.read_binlog(files, allow_torn_tail=True)
    dml = sum(t.row_events() for t in b.transactions)
    return b, dml


def decode(clusters, lines):
    """mariadb-binlog decoding a source's recorded binlog (the load part's files)."""
    files = clusters[0].binlog_files()
    b, _ = events_of(files)
    size = sum(f.stat().st_size for f in files)
    start = time.perf_counter()
    subprocess.run(["mariadb-binlog", "--verify-binlog-checksum", *map(str, files)],
                   stdout=subprocess.DEVNULL, check=True)
    took = time.perf_counter() - start
    lines.append(f"| mariadb-binlog decoding a source's binlog ({b.events} events, {size >> 20} MiB) "
                 f"| {b.events / took:,.0f} events/s, {size / took / 1e6:.0f} MB/s (one core) |")


def load(clusters, mf, lines):
    for name in ("sb_a", "sb_b"):
        sysbench(mf.port, name, "prepare", "--threads=4")
    rows = []
    for run in range(RUNS):
        before_files = len(mf.files())
        b0, dml0 = events_of(mf.files())
        cpu0 = cpu_ticks(mf.proc.pid)
        t0 = time.time()
        procs = [subprocess.Popen(["sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1",
                                   f"--mysql-port={mf.port}", f"--mysql-user={bk.USER}",
                                   f"--mysql-password={bk.PASSWORD}", f"--mysql-db={db}", *SB,
                                   f"--threads={THREADS}", f"--time={SECONDS}", "run"],
                                  stdout=subprocess.PIPE, text=True) for db in ("sb_a", "sb_b")]
        outs = [p.communicate()[0] for p in procs]
        mf.wait_caught_up(timeout=120)
        took = time.time() - t0
        cpu = (cpu_ticks(mf.proc.pid) - cpu0) / CLK_TCK
        b1, dml1 = events_of(mf.files())
        events = b1.events - b0.events
        txns = len(b1.transactions) - len(b0.transactions)
        status = mf.admin("SHOW BINLOG STATUS")
        delay = {r["Variable_name"]: r["Value"] for r in status if "delay" in r["Variable_name"]}
        sb_tps = sum(float(re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", o).group(1)) for o in outs)
        rows.append(dict(eps=events / took, dml=(dml1 - dml0) / took, bps=(b1.bytes - b0.bytes) / took,
                         tps=txns / took, fpm=(len(mf.files()) - before_files) / took * 60,
                         cpu_us=cpu / max(events, 1) * 1e6, sb_tps=sb_tps, status=status, delay=delay))
        print(f"run {run}: " + ", ".join(f"{k}={v}" for k, v in rows[-1].items() if k != "status"), flush=True)
    for k, label in (("eps", "EPS"), ("dml", "DML EPS"), ("bps", "BPS (bytes/s)"), ("tps", "TPS"),
                     ("fpm", "files per minute"), ("cpu_us", "manifold CPU per event (µs)"),
                     ("sb_tps", "sysbench TPS (both clusters)")):
        vals = [r[k] for r in rows]
        lines.append(f"| {label} | {' / '.join(f'{v:,.1f}' for v in vals)} |")
    for name in rows[-1]["delay"]:
        lines.append(f"| {name} (SHOW BINLOG STATUS after each run) | {' / '.join(r['delay'][name] for r in rows)} |")


def big(clusters, mf, lines):
    a = clusters[0]
    a.query("CREATE DATABASE IF NOT EXISTS big")
    a.query("CREATE TABLE IF NOT EXISTS big.t (id INT PRIMARY KEY, b LONGBLOB)")
    with mf.connect(database="big", read_timeout=3600) as c, c.cursor() as cur:
        cur.execute(f"/*ledger:big*/ INSERT INTO t SELECT seq, REPEAT('x', {1 << 20}) FROM seq_1_to_{BIG_MIB}")
    committed = time.time()
    mf.wait_caught_up(timeout=3600)
    written = time.time() - committed
    lines.append(f"| {BIG_MIB} MiB transaction: commit to written | {written:.1f} s |")
    lines.append(f"| {BIG_MIB} MiB transaction: manifold peak RSS (VmHWM) | {mf.peak_rss() >> 20} MiB |")


def main(parts):
    OUT.mkdir(parents=True, exist_ok=True)
    lines = ["| measure | value (runs) |", "|---|---|"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-binlog-"))
    with bk.clusters(["default", "b"], extra=["--max-allowed-packet", str(64 << 20)]) as cs:
        for c, db in zip(cs, ("sb_a", "sb_b")):
            c.query(f"CREATE DATABASE {db}")
        mf = bk.BinlogManifold(cs, tmp / "binlog", {"b": ["sb_b"]}, name="bench-binlog",
                               binlog_extra='memory_budget = "256M"')
        try:
            if "load" in parts:
                load(cs, mf, lines)
            if "decode" in parts:
                decode(cs, lines)
            if "big" in parts:
                big(cs, mf, lines)
        finally:
            mf.stop_and_check()
    text = "\n".join(lines) + "\n"
    (OUT / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:] or ["load", "decode", "big"])
