"""The global binlog's benchmark (run by bench/binlog.sh, which documents it). Uses the
client tests' helpers (tests/python/binlogkit.py) to start the clusters and manifold.

Parts: `replay` (the pipeline alone, crates/binlog/examples/replay.rs, on two recorded source
binlogs, against mariadb-binlog decoding the same files), `decode` (mariadb-binlog decoding
recorded source binlogs: events/s, MB/s),
`load` (sysbench oltp_write_only on two clusters through manifold, binlog on), `big` (one
large transaction: commit to written, peak RSS). Prints `key=value` lines; the summary table
goes to OUT/summary.md."""

import os
import re
import resource
import shutil
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
RECORD_SECONDS = int(os.environ.get("RECORD_SECONDS", 20))
REPLAY_RUNS = int(os.environ.get("REPLAY_RUNS", 5))
# Source binlogs the replay part reads: recorded by the load part (through manifold: stamped,
# with heartbeats) or by the replay part itself when missing or REPLAY_RECORD=1.
SOURCES = OUT / ("sources" if os.environ.get("FLAVOR", "mariadb") == "mariadb" else "sources-mysql")
SOURCE_NAMES = ("a", "b")
REPLAY_BIN = Path(os.environ.get("REPLAY_BIN", ROOT / "target" / "release" / "examples" / "replay"))
SB = ["--tables=4", "--table-size=20000", "--rand-type=uniform"]
# The sources' server: "mariadb" (default) or "mysql" (MySQL 9.7 from scripts/setup-mysql); the
# global binlog is in their dialect, and the decoder compared is that server's own.
FLAVOR = os.environ.get("FLAVOR", "mariadb")
if FLAVOR not in ("mariadb", "mysql"):
    sys.exit(f"binlog.py: FLAVOR={FLAVOR}: mariadb or mysql")


def decoder():
    """argv of the sources' own binlog decoder, checksums verified."""
    if FLAVOR == "mysql":
        return [*bk.mysql_tool("mysqlbinlog"), "--verify-binlog-checksum"]
    return ["mariadb-binlog", "--verify-binlog-checksum"]


def decoder_name():
    return "mysqlbinlog" if FLAVOR == "mysql" else "mariadb-binlog"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def sysbench_argv(port, db, command, *extra):
    return ["sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}",
            f"--mysql-user={bk.USER}", f"--mysql-password={bk.PASSWORD}", f"--mysql-db={db}", *SB, *extra, command]


def sysbench(port, db, command, *extra):
    return subprocess.run(sysbench_argv(port, db, command, *extra), capture_output=True, text=True,
                          check=True).stdout


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def save_sources(clusters):
    """Copies each cluster's closed binlog files to SOURCES/<name> (the newest, just opened by
    the flush, holds no transaction)."""
    shutil.rmtree(SOURCES, ignore_errors=True)
    for c, name in zip(clusters, SOURCE_NAMES):
        c.query("FLUSH BINARY LOGS")
        (SOURCES / name).mkdir(parents=True)
        for f in c.binlog_files()[:-1]:
            shutil.copy(f, SOURCES / name / f.name)


def record_sources():
    """Two primaries, sysbench oltp_write_only straight on each (prepare, then RECORD_SECONDS
    of THREADS threads, both at once): their binlogs, unstamped, become the replay's input."""
    with bk.clusters(list(SOURCE_NAMES), flavors=[FLAVOR] * len(SOURCE_NAMES)) as cs:
        for c in cs:
            c.query("CREATE DATABASE sb")
        steps = (("prepare", ["--threads=4"]), ("run", [f"--threads={THREADS}", f"--time={RECORD_SECONDS}"]))
        for command, extra in steps:
            procs = [subprocess.Popen(sysbench_argv(c.primary_port, "sb", command, *extra),
                                      stdout=subprocess.DEVNULL) for c in cs]
            if any(p.wait() != 0 for p in procs):
                sys.exit(f"binlog.py: sysbench {command} failed")
        save_sources(cs)


def replay(lines):
    """The pipeline alone (read and verify, assemble, merge, write) on both sources' recorded
    binlogs, then mariadb-binlog decoding the same files; both per CPU-second."""
    if os.environ.get("REPLAY_RECORD") == "1" or not all((SOURCES / n).is_dir() for n in SOURCE_NAMES):
        record_sources()
    groups = [sorted((SOURCES / n).glob("binlog.[0-9]*")) for n in SOURCE_NAMES]
    if not all(groups):
        sys.exit(f"binlog.py: no recorded binlog files under {SOURCES}")
    out = OUT / "replay-out"
    argv = [str(REPLAY_BIN), "--out", str(out)]
    for files in groups:
        argv += ["--source", ",".join(map(str, files))]
    load_avg = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    # A run takes well under a second of CPU on this input: the median of REPLAY_RUNS.
    runs = []
    for _ in range(REPLAY_RUNS):
        shutil.rmtree(out, ignore_errors=True)
        line = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
        print(f"replay: {line}", flush=True)
        runs.append(dict(kv.split("=", 1) for kv in line.split()))
    runs.sort(key=lambda r: float(r["events_per_cpu_s"]))
    r = runs[len(runs) // 2]
    events, size, cpu = int(r["events"]), int(r["bytes"]), float(r["cpu_s"])
    if int(r["transactions"]) == 0:
        sys.exit("binlog.py: the replay wrote no transaction")
    written = sorted(out.glob("manifold-bin.[0-9]*"))
    # The global binlog it wrote must decode, checksums verified.
    subprocess.run([*decoder(), *map(str, written)], stdout=subprocess.DEVNULL, check=True)

    cpu0, start = children_cpu(), time.perf_counter()
    for files in groups:
        subprocess.run([*decoder(), *map(str, files)], stdout=subprocess.DEVNULL, check=True)
    mb_cpu, mb_wall = children_cpu() - cpu0, time.perf_counter() - start
    print(f"{decoder_name()}: events={events} bytes={size} cpu_s={mb_cpu:.2f} wall_s={mb_wall:.3f}", flush=True)

    replay_eps, mb_eps = events / cpu, events / mb_cpu
    each = " / ".join(f"{float(x['events_per_cpu_s']):,.0f}" for x in runs)
    lines.append(f"| replay: parse, assemble, merge, write 2 recorded source binlogs ({events:,} events, "
                 f"{size / 1e6:.0f} MB, {r['transactions']} txns; median of {len(runs)} runs: {cpu:.2f} CPU s, "
                 f"{float(r['wall_s']):.2f} s) | {replay_eps:,.0f} events/s, {size / cpu / 1e6:.0f} MB/s per "
                 f"CPU-second (runs: {each}) |")
    stages = ", ".join(f"{stage} {float(r[f'{stage}_events_per_s']):,.0f}"
                       for stage in ("read_verify", "assemble", "merge", "write"))
    lines.append(f"| replay stages (events/s of each stage's own time) | {stages} |")
    lines.append(f"| {decoder_name()} --verify-binlog-checksum decoding the same files ({mb_cpu:.2f} CPU s, "
                 f"{mb_wall:.2f} s) | {mb_eps:,.0f} events/s, {size / mb_cpu / 1e6:.0f} MB/s per CPU-second |")
    lines.append(f"| replay / {decoder_name()} (events per CPU-second; load average before: {load_avg}) "
                 f"| {replay_eps / mb_eps:.1f}x |")


def cpu_ticks(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def events_of(files):
    b = bk.read_binlog(files, allow_torn_tail=True)
    dml = sum(t.row_events() for t in b.transactions)
    return b, dml


def decode(clusters, lines):
    """The source's own decoder on a source's recorded binlog (the load part's files)."""
    files = clusters[0].binlog_files()
    b, _ = events_of(files)
    size = sum(f.stat().st_size for f in files)
    start = time.perf_counter()
    subprocess.run([*decoder(), *map(str, files)], stdout=subprocess.DEVNULL, check=True)
    took = time.perf_counter() - start
    lines.append(f"| {decoder_name()} decoding a source's binlog ({b.events} events, {size >> 20} MiB) "
                 f"| {b.events / took:,.0f} events/s, {size / took / 1e6:.0f} MB/s (one core) |")


def counters(mf):
    """The binlog service's counters (SHOW BINLOG STATUS on the admin port) as numbers."""
    return {r["Variable_name"]: r["Value"] for r in mf.admin("SHOW BINLOG STATUS")}


def load(clusters, mf, lines):
    for name in ("sb_a", "sb_b"):
        sysbench(mf.port, name, "prepare", "--threads=4")
    rows = []
    for run in range(RUNS):
        # Rates come from the service's own counters sampled when sysbench starts and ends, so
        # the time is the load's only (the catch-up check after it reads the files and is not
        # counted); what is still waiting for the watermark at the end is ~1 heartbeat.
        c0 = counters(mf)
        cpu0 = cpu_ticks(mf.proc.pid)
        t0 = time.time()
        procs = [subprocess.Popen(["sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1",
                                   f"--mysql-port={mf.port}", f"--mysql-user={bk.USER}",
                                   f"--mysql-password={bk.PASSWORD}", f"--mysql-db={db}", *SB,
                                   f"--threads={THREADS}", f"--time={SECONDS}", "run"],
                                  stdout=subprocess.PIPE, text=True) for db in ("sb_a", "sb_b")]
        outs = [p.communicate()[0] for p in procs]
        took = time.time() - t0
        cpu = (cpu_ticks(mf.proc.pid) - cpu0) / CLK_TCK
        c1 = counters(mf)
        mf.wait_caught_up(timeout=120)
        status = mf.admin("SHOW BINLOG STATUS")
        delay = {r["Variable_name"]: r["Value"] for r in status if "delay" in r["Variable_name"]}

        def rate(name):
            return (int(c1[name]) - int(c0[name])) / took

        events = int(c1["Binlog_events"]) - int(c0["Binlog_events"])
        sb_tps = sum(float(re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", o).group(1)) for o in outs)
        rows.append(dict(eps=rate("Binlog_events"), dml=rate("Binlog_dml_events"), bps=rate("Binlog_bytes"),
                         tps=rate("Binlog_transactions"), fpm=rate("Binlog_files_started") * 60,
                         cpu_us=cpu / max(events, 1) * 1e6, sb_tps=sb_tps, status=status, delay=delay))
        print(f"run {run}: " + ", ".join(f"{k}={v}" for k, v in rows[-1].items() if k != "status"), flush=True)
    save_sources(clusters)
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
        if FLAVOR == "mysql":
            # MySQL has no sequence engine: a recursive CTE counts the rows.
            cur.execute(f"SET SESSION cte_max_recursion_depth = {BIG_MIB + 1}")
            cur.execute(f"/*ledger:big*/ INSERT INTO t WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL "
                        f"SELECT n + 1 FROM s WHERE n < {BIG_MIB}) SELECT n, REPEAT('x', {1 << 20}) FROM s")
        else:
            cur.execute(f"/*ledger:big*/ INSERT INTO t SELECT seq, REPEAT('x', {1 << 20}) FROM seq_1_to_{BIG_MIB}")
    committed = time.time()
    mf.wait_caught_up(timeout=3600)
    written = time.time() - committed
    lines.append(f"| {BIG_MIB} MiB transaction: commit to written | {written:.1f} s |")
    lines.append(f"| {BIG_MIB} MiB transaction: manifold peak RSS (VmHWM) | {mf.peak_rss() >> 20} MiB |")


def main(parts):
    OUT.mkdir(parents=True, exist_ok=True)
    lines = ["| measure | value (runs) |", "|---|---|"]
    if {"load", "decode", "big"} & set(parts):
        clustered(parts, lines)
    # After the load part, whose source binlogs (stamped, with heartbeats) it then replays.
    if "replay" in parts:
        replay(lines)
    text = "\n".join(lines) + "\n"
    (OUT / "summary.md").write_text(text)
    print(text)


def clustered(parts, lines):
    """The parts that run on two clusters with manifold in front."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-binlog-"))
    with bk.clusters(["default", "b"], extra=["--max-allowed-packet", str(64 << 20)],
                     flavors=[FLAVOR, FLAVOR]) as cs:
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


if __name__ == "__main__":
    main(sys.argv[1:] or ["load", "decode", "big"])
