"""The global binlog's files are its owner's alone: every cluster's rows (DDL with password
hashes included) are in them. manifold started with `--binlog-dir` on a directory that does
not exist yet makes it 0700 and every file it writes there 0600 —
binlog files, index, sources checkpoint, start record, the spill directory — whatever the
umask; on a directory an earlier version left 0755 with 0644 files, it tightens them at start
and says so in one `warn` line naming each."""

import os
import stat

import binlogkit as bk

MIB = 1 << 20


def modes(top):
    """Every directory and file under `top` (itself included) with its permission bits."""
    out = {top: stat.S_IMODE(os.lstat(top).st_mode)}
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            out[path] = stat.S_IMODE(os.lstat(path).st_mode)
    return out


def assert_private(top):
    seen = modes(top)
    wide = {p: oct(m) for p, m in seen.items()
            if m != (0o700 if stat.S_ISDIR(os.lstat(p).st_mode) else 0o600)}
    assert not wide, f"not private: {wide}"
    return seen


def write_and_spill(mf, tag):
    """Rows through manifold, and one transaction of 2 MiB: past the 1 MiB budget, it
    spills (`spill/` is made)."""
    with mf.connect(database="files") as c, c.cursor() as cur:
        for i in range(5):
            cur.execute(f"/*ledger:{tag}.{i}*/ INSERT INTO t (v) VALUES (%s)", (f"{tag}-{i}",))
        cur.execute(f"/*ledger:{tag}.big*/ INSERT INTO t (v) SELECT REPEAT('x', 256 * 1024) FROM seq_1_to_8")


def test_created_private_and_tightened_at_start(tmp_path):
    old_umask = os.umask(0o022)
    try:
        run(tmp_path)
    finally:
        os.umask(old_umask)


def run(tmp_path):
    with bk.clusters(["default"]) as cs:
        a = cs[0]
        a.query("CREATE DATABASE files")
        a.query("CREATE TABLE files.t (id INT AUTO_INCREMENT PRIMARY KEY, v LONGTEXT)")
        binlog = tmp_path / "binlog"
        # Not made by the test: manifold makes it, as `--binlog-dir` names it.
        mf = bk.BinlogManifold(cs, binlog, {}, make_dir=False, binlog_extra='memory_budget = "1M"',
                               extra_args=["--binlog-dir", str(binlog)])
        try:
            write_and_spill(mf, "first")
            mf.wait_caught_up()
            with mf.connect() as c, c.cursor() as cur:
                cur.execute("FLUSH BINARY LOGS")
            write_and_spill(mf, "second")
            mf.wait_caught_up()
            bk.wait_for("the sources checkpoint", lambda: (binlog / "manifold-bin.sources").exists())
            seen = assert_private(str(binlog))
            names = {os.path.relpath(p, binlog) for p in seen}
            for name in ["manifold-bin.000001", "manifold-bin.000002", "manifold-bin.index",
                         "manifold-bin.sources", "manifold-bin.start", "spill"]:
                assert name in names, f"{name} not written: {sorted(names)}"
            assert "made private" not in mf.log_path.read_text(), "nothing was there to tighten"
        finally:
            mf.stop_and_check()

        # What an earlier version left: a 0755 directory, 0644 files, a 0755 spill directory.
        os.chmod(binlog, 0o755)
        os.chmod(binlog / "spill", 0o755)
        widened = sorted(p for p in binlog.iterdir() if p.is_file())
        for p in widened:
            os.chmod(p, 0o644)
        log_before = mf.log_path.read_text()
        mf.start()
        try:
            write_and_spill(mf, "third")
            mf.wait_caught_up()
            assert_private(str(binlog))
            lines = [line for line in mf.log_path.read_text()[len(log_before):].splitlines()
                     if "made private" in line]
            assert len(lines) == 1, lines
            line = lines[0]
            assert "WARN" in line, line
            assert f"{binlog} (0755)" in line and f"{binlog / 'spill'} (0755)" in line, line
            for p in widened[:8]:
                assert f"{p} (0644)" in line, (p, line)
        finally:
            mf.stop_and_check()
        # Every row arrived, across the restart.
        txns = bk.read_binlog(mf.files(), allow_torn_tail=True).transactions
        tags = {tag for t in txns for tag in t.tags()}
        for tag in ("first", "second", "third"):
            assert {f"{tag}.{i}" for i in range(5)} | {f"{tag}.big"} <= tags, tag
