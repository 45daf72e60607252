"""Helpers of the global binlog's client tests (tests/python/test_binlog_*.py): several
independent MariaDB clusters, a manifold merging their binlogs that can be killed and
restarted on the same directory, a reader of binlog files of our own (independent of
manifold's code: header, CRC32, transaction boundaries, annotate texts) and the ledger
checks every test applies to what it read.

Both dialects: MariaDB clusters (the default) and MySQL ones (`flavor="mysql"`, the
testkit's `--mysql`). A MySQL transaction's GTID is `(source uuid, gno)`, its statements'
text is in ROWS_QUERY events (read as the annotates are), and the origin record of the global
binlog is a ROWS_QUERY after `BEGIN`, or a leading comment of a one-statement group's QUERY.

The ledger: every transaction a test writes carries a unique tag `/*ledger:TAG*/` in its
statements' text, which MariaDB keeps in the annotate event before the rows. Reading the
global binlog back then says which transactions it holds, in which order, from which
cluster, without decoding rows."""

import contextlib
import os
import random
import re
import signal
import struct
import subprocess
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pymysql
import pytest

from conftest import PASSWORD, ROOT, RUN_DIR, USER, binary, free_ports, manifold_env, start_testkit, stop_process, wait_port

# Event types (MariaDB binlog v4).
QUERY, STOP, ROTATE, FORMAT_DESCRIPTION, XID, TABLE_MAP = 2, 3, 4, 15, 16, 19
XA_PREPARE = 38
ROWS_EVENTS = {23, 24, 25, 30, 31, 32, 166, 167, 168}
ANNOTATE, CHECKPOINT, GTID, GTID_LIST = 160, 161, 162, 163
# MySQL's (8.0+).
ROWS_QUERY, MYSQL_GTID, ANONYMOUS_GTID, PREVIOUS_GTIDS, TRANSACTION_PAYLOAD = 29, 33, 34, 35, 40
HEADER_LEN = 19
FL_STANDALONE = 1
FL_GROUP_COMMIT_ID = 2
LOG_EVENT_BINLOG_IN_USE = 1

ORIGIN = re.compile(rb"# manifold origin cluster=(\S+) gtid=(\d+)-(\d+)-(\d+) key=(\d+)")
ORIGIN_MYSQL = re.compile(rb"# manifold origin cluster=(\S+) gtid=([0-9a-f-]{36}):(\d+) key=(\d+)")
LEDGER_TAG = re.compile(rb"/\*ledger:([A-Za-z0-9_.-]+)\*/")
HEARTBEAT_TABLE = (b"manifold", b"binlog_heartbeat")
INTERNAL = b"/*manifold:internal*/ "
BINLOG_SERVER_ID = 4000000001
# manifold's server uuid in a MySQL-dialect global binlog (binlog.server_uuid's default).
BINLOG_UUID = f"6d616e69-666f-6c64-8000-{BINLOG_SERVER_ID:012x}"


class Cluster:
    """One testkit topology (primary, `replicas` GTID replicas, no TLS) with a name."""

    def __init__(self, name, info, flavor="mariadb"):
        self.name = name
        self.info = info
        self.flavor = flavor
        self.primary = info["primary"]
        self.primary_port = int(self.primary.split(":")[1])
        self.replica_ports = [int(r.split(":")[1]) for r in info["replicas"].split(",") if r]
        self.root_password = info["root_password"]
        self.pids = [int(p) for p in info["pids"].split(",") if p]
        self.dir = Path(info["dir"])

    def root(self, port=None, **kw):
        return pymysql.connect(host="127.0.0.1", port=port or self.primary_port, user="root",
                               password=self.root_password, autocommit=True, **kw)

    def query(self, sql, port=None):
        with self.root(port) as c, c.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()

    @property
    def mysql(self):
        return self.flavor == "mysql"

    @property
    def uuid(self):
        """The primary's `@@server_uuid` (MySQL): the source part of its own GTIDs."""
        if not hasattr(self, "_uuid"):
            self._uuid = self.query("SELECT @@server_uuid")[0][0]
        return self._uuid

    def binlog_files(self, port=None):
        """The server's own binlog files, oldest first."""
        with self.root(port) as c, c.cursor() as cur:
            cur.execute("SELECT @@log_bin_basename")
            base = Path(cur.fetchone()[0])
            cur.execute("SHOW BINARY LOGS")
            return [base.parent / row[0] for row in cur.fetchall()]

    def restart_primary(self):
        """Shuts the primary down and starts it again on the same data directory and port
        (the command line the testkit gave it). The new process is this test's to stop."""
        pid = self.pids[0]
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        with contextlib.suppress(pymysql.err.OperationalError):
            self.query("SHUTDOWN")
        deadline = time.time() + 60
        while Path(f"/proc/{pid}").exists() and _state(pid) != "Z" and time.time() < deadline:
            time.sleep(0.1)
        log = open(self.dir / f"restarted-{pid}.log", "w")
        proc = subprocess.Popen([a.decode() for a in argv], stdout=log, stderr=subprocess.STDOUT)
        wait_port(self.primary_port, proc, f"the restarted primary of {self.name}", timeout=60)
        self.pids[0] = proc.pid
        self.restarted = getattr(self, "restarted", []) + [proc]
        return proc


def _state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@contextlib.contextmanager
def clusters(names, replicas=0, extra=(), flavors=None):
    """Independent testkit topologies, one per name, started side by side; `flavors` (one
    per name, "mariadb" or "mysql") says which server each is, MariaDB by default. `replicas`
    is one count for all, or one per name."""
    flavors = flavors or ["mariadb"] * len(names)
    counts = replicas if isinstance(replicas, (list, tuple)) else [replicas] * len(names)
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(len(names)) as pool:
        futures = [pool.submit(stack.enter_context,
                               start_testkit(n, "--no-tls", *(["--mysql"] if f == "mysql" else []), *extra))
                   for f, n in zip(flavors, counts)]
        out = [Cluster(name, f.result(), flavor) for name, f, flavor in zip(names, futures, flavors)]
        try:
            yield out
        finally:
            for c in out:
                for p in getattr(c, "restarted", []):
                    p.terminate()
                    p.wait(timeout=60)


class BinlogManifold:
    """manifold in front of `clusters` (the first is `[backend]`, named `default` in the
    global binlog; the others `[[clusters]]` holding schemas `schemas[name]`), the global
    binlog on in `binlog_dir`. `kill()` and `start()` again reuse the directory and ports."""

    def __init__(self, clusters, binlog_dir, schemas, binlog_extra="", toml_extra="", name="manifold-binlog",
                 extra_args=(), start=True, make_dir=True, binlog_users=(USER,)):
        """`make_dir`: create `binlog_dir` first (else manifold does). `binlog_users`: the
        logins that may read the global binlog (`binlog.users`); `None` leaves it unset."""
        self.clusters = clusters
        self.dir = Path(binlog_dir)
        if make_dir:
            self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.extra_args = list(extra_args)
        self.port, self.admin_port, self.http_port = free_ports(3)
        first, rest = clusters[0], clusters[1:]
        toml = f'[backend]\nprimary = "{first.primary}"\n'
        if first.replica_ports:
            toml += "replicas = [" + ", ".join(f'"127.0.0.1:{p}"' for p in first.replica_ports) + "]\n"
        for c in rest:
            toml += f'\n[[clusters]]\nname = "{c.name}"\nprimary = "{c.primary}"\n'
            toml += "replicas = [" + ", ".join(f'"127.0.0.1:{p}"' for p in c.replica_ports) + "]\n"
            toml += "schemas = [" + ", ".join(f'"{s}"' for s in schemas.get(c.name, [])) + "]\n"
        toml += f'\n[routing.monitor]\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
        # `binlog_users=None` leaves binlog.users unset: the backends' grants alone decide.
        users = "" if binlog_users is None else "users = [" + ", ".join(f'"{u}"' for u in binlog_users) + "]\n"
        toml += (f'\n[binlog]\ndir = "{self.dir}"\nheartbeat_interval = "100ms"\n{users}'
                 f'user = "{USER}"\npassword = "{PASSWORD}"\n{binlog_extra}\n')
        toml += toml_extra
        self.config = self.dir.parent / f"{name}.toml"
        self.config.write_text(toml)
        self.log_path = ROOT / "target" / f"{name}-{self.port}.log"
        self.proc = None
        self.starts = 0
        # [down, up] monotonic times of each `kill()` and the `start()` after it (up is None
        # while down): when a binlog reader may have been cut off or refused a connection.
        self.outages = []
        if start:
            self.start()

    def argv(self):
        # Alone: the tests count every source transaction in the global binlog, and a
        # fleet's registry writes are manifold's own, left out of it.
        return [binary("manifold"), "--config", str(self.config), "--user", f"{USER}:{PASSWORD}",
                "--listen", f"127.0.0.1:{self.port}", "--admin-listen", f"127.0.0.1:{self.admin_port}",
                "--http-listen", f"127.0.0.1:{self.http_port}", "--fleet-table", "", *self.extra_args]

    def start(self):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, cwd=RUN_DIR,
                                     env=manifold_env())
        log.close()
        self.starts += 1
        wait_port(self.port, self.proc, "manifold", timeout=60)
        if self.outages and self.outages[-1][1] is None:
            self.outages[-1][1] = time.monotonic()

    def kill(self):
        """SIGKILL, as a crash."""
        self.outages.append([time.monotonic(), None])
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop_and_check(self):
        stop_process(self.proc)
        text = self.log_path.read_text()
        assert "panicked" not in text, f"manifold panicked: see {self.log_path}"
        return text

    def connect(self, **kw):
        kw.setdefault("user", USER)
        kw.setdefault("password", PASSWORD)
        kw.setdefault("autocommit", True)
        return pymysql.connect(host="127.0.0.1", port=self.port, **kw)

    def admin(self, sql):
        """Rows of an admin-port statement, as dicts."""
        with pymysql.connect(host="127.0.0.1", port=self.admin_port, user="admin", password="admin") as c, \
                c.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(sql)
            return cur.fetchall()

    def peak_rss(self):
        """VmHWM of the running process, in bytes."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM line")

    def files(self):
        return sorted(self.dir.glob("manifold-bin.[0-9]*"))

    def start_seqs(self):
        """Where each source was first read from (`manifold-bin.start`), as its domain 0
        sequence number."""
        out = {}
        path = self.dir / "manifold-bin.start"
        uuids = {c.name if i else "default": c.uuid for i, c in enumerate(self.clusters) if c.mysql}
        if path.exists():
            for line in path.read_text().splitlines():
                name, _, pos = line.partition(" ")
                if name in uuids:
                    seq = gtid_set_last(pos, uuids[name])
                    if seq:
                        out[name] = seq
                    continue
                for gtid in filter(None, pos.split(",")):
                    d, _, seq = gtid.split("-")
                    if d == "0":
                        out[name] = int(seq)
        return out

    def wait_caught_up(self, timeout=60):
        """Until the global binlog holds every source transaction committed so far (all of
        the clusters' current GTID positions, heartbeats aside) and the files end whole."""
        targets = {c.name if i else "default": last_data_seq(c) for i, c in enumerate(self.clusters)}
        deadline = time.time() + timeout
        seen = {}
        while time.time() < deadline:
            txns = read_binlog(self.files(), allow_torn_tail=True).transactions
            seen = {}
            for t in txns:
                if t.origin:
                    seen[t.origin.cluster] = max(seen.get(t.origin.cluster, 0), t.origin.seq)
            # A source's transactions before the global binlog began reading it are not in
            # it: the start record says where that was.
            started = self.start_seqs()
            if all(max(seen.get(name, 0), started.get(name, 0)) >= seq for name, seq in targets.items()):
                return txns
            time.sleep(0.2)
        raise AssertionError(f"the global binlog did not catch up: sources at {targets}, it holds {seen}")


def last_data_seq(cluster):
    """The sequence number of the last transaction on the cluster's primary binlog that is
    not a heartbeat (0 when there is none); on MySQL, the last gno of the primary's uuid."""
    txns = read_binlog(cluster.binlog_files(), allow_torn_tail=True).transactions
    data = [t for t in txns if not t.is_heartbeat() and (not cluster.mysql or t.gtid[0] == cluster.uuid)]
    return data[-1].seq if data else 0


def gtid_set_last(text, uuid):
    """The last gno of `uuid` in a MySQL GTID set's text (`uuid:1-5:7,uuid2:1-3`; 0 when absent)."""
    last = 0
    for part in text.replace("\n", "").split(","):
        sid, _, ranges = part.strip().partition(":")
        if sid.lower() != uuid.lower():
            continue
        for r in ranges.split(":"):
            if r and r[0].isdigit():
                last = max(last, int(r.rpartition("-")[2]))
    return last


class Origin:
    """An origin record: the cluster, the transaction's GTID on it (MariaDB `(domain, server,
    seq)`, MySQL `(uuid, gno)`), its sequence number there and its key."""

    def __init__(self, m, mysql=False):
        self.cluster = m.group(1).decode()
        if mysql:
            self.gtid = (m.group(2).decode(), int(m.group(3)))
            self.seq = self.gtid[1]
            self.key = int(m.group(4))
        else:
            self.gtid = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
            self.seq = self.gtid[2]
            self.key = int(m.group(5))


def statement_origin(q):
    """The origin record a MySQL statement's trailing comment (` /* # manifold origin ... */`)
    carries, if any."""
    if not q.endswith(b" */"):
        return None
    at = q.rfind(b" /* # manifold origin ")
    return find_origin(q[at + 4:-3]) if at >= 0 else None


def find_origin(text):
    """The origin record in an annotate / rows-query / statement text, either dialect."""
    m = ORIGIN.search(text)
    if m:
        return Origin(m)
    m = ORIGIN_MYSQL.search(text)
    return Origin(m, mysql=True) if m else None


class Transaction:
    """One GTID..end group of events: its GTID (MariaDB (domain, server, seq), MySQL (uuid,
    gno)), the file it is in, the annotate (MySQL: rows-query) texts, the tables its TABLE_MAPs
    name, and the event types in order. A MySQL transaction compressed into one
    TRANSACTION_PAYLOAD is whole at that event (`compressed`; its inner events are not read)."""

    def __init__(self, gtid, flags, file, pos, mysql=False):
        self.gtid = gtid
        self.mysql = mysql
        self.seq = gtid[-1]
        self.compressed = False
        self.standalone = None  # MySQL: decided at the group's first statement
        self.pos = pos
        self.row_bytes = 0
        self.flags = flags
        self.file = file
        self.annotates = []
        self.tables = []
        self.types = []
        self.origin = None
        self.origins = 0
        self.queries = []
        self.complete = False

    def tags(self):
        out = {}
        for a in self.annotates:
            out.update((t.decode(), None) for t in LEDGER_TAG.findall(a))
        return list(out)

    def origin_first(self):
        """Whether the origin record is where the global binlog puts it: MariaDB's first
        annotate; MySQL's rows-query right after `BEGIN`, or the one statement's comment."""
        if not self.mysql:
            return bool(self.types) and self.types[0] == ANNOTATE and ORIGIN.match(self.annotates[0]) is not None
        if self.queries and (self.queries[0] == b"BEGIN" or self.queries[0].startswith(b"XA START")):
            # A group: its first rows-query event, else (no rows) a statement's trailing comment.
            if ROWS_QUERY in self.types:
                return find_origin(self.annotates[0]) is not None
            return any(statement_origin(q) for q in self.queries[1:])
        return bool(self.queries) and statement_origin(self.queries[0]) is not None

    def is_heartbeat(self):
        """Heartbeat rows, or manifold's own DDL of the heartbeat table on a source (marked
        `/*manifold:internal*/`): neither belongs in the global binlog."""
        if any(q.startswith(INTERNAL) for q in self.queries):
            return True
        return bool(self.tables) and all(t == HEARTBEAT_TABLE for t in self.tables)

    def row_events(self):
        return sum(1 for t in self.types if t in ROWS_EVENTS)


class Binlog:
    def __init__(self):
        self.transactions = []
        self.events = 0
        self.bytes = 0
        self.server_ids = set()


def read_binlog(files, allow_torn_tail=False):
    """Reads binlog files: checks the magic, every event's CRC32 and position, and groups
    events into transactions. A torn last transaction of the last file is tolerated only
    with `allow_torn_tail` (a file being written); anything else malformed fails."""
    out = Binlog()
    for i, path in enumerate(files):
        last_file = i == len(files) - 1
        with open(path, "rb") as f:
            _read_file(f, path, out, allow_torn_tail and last_file)
    return out


def _read_file(f, path, out, torn_ok):
    """One file's events, read one at a time (a multi-gigabyte file never is in memory)."""
    assert f.read(4) == b"\xfebin", f"{path}: not a binlog file"
    pos = 4
    current = None
    while True:
        header = f.read(HEADER_LEN)
        if not header:
            break
        if len(header) < HEADER_LEN:
            assert torn_ok, f"{path}: torn event header at {pos}"
            break
        _ts, etype, server_id, size, log_pos, flags = struct.unpack_from("<IBIIIH", header, 0)
        rest = f.read(max(size - HEADER_LEN, 0))
        if size < HEADER_LEN + 4 or len(rest) < size - HEADER_LEN:
            assert torn_ok, f"{path}: torn event at {pos} (size {size})"
            break
        body = rest[:-4]
        (crc,) = struct.unpack_from("<I", rest, len(rest) - 4)
        if etype == FORMAT_DESCRIPTION and flags & LOG_EVENT_BINLOG_IN_USE:
            # MariaDB computes a format description's checksum with the in-use flag clear.
            header = header[:17] + struct.pack("<H", flags & ~LOG_EVENT_BINLOG_IN_USE)
        assert zlib.crc32(body, zlib.crc32(header)) == crc, f"{path}: bad CRC32 of event type {etype} at {pos}"
        assert log_pos in (0, pos + size), f"{path}: event at {pos} says its end is {log_pos}"
        out.bytes += size
        out.events += 1
        out.server_ids.add(server_id)
        if etype == GTID:
            assert current is None or current.complete, \
                f"{path}: GTID at {pos} inside transaction {current.gtid}"
            seq, domain, gflags = struct.unpack_from("<QIB", body, 0)
            current = Transaction((domain, server_id, seq), gflags, Path(path).name, pos)
            out.transactions.append(current)
        elif etype == MYSQL_GTID:
            assert current is None or current.complete, \
                f"{path}: GTID at {pos} inside transaction {current.gtid}"
            gflags, sid, gno = struct.unpack_from("<B16sQ", body, 0)
            h = sid.hex()
            uuid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            current = Transaction((uuid, gno), gflags, Path(path).name, pos, mysql=True)
            out.transactions.append(current)
        elif etype == ANONYMOUS_GTID:
            raise AssertionError(f"{path}: an anonymous GTID at {pos} (gtid_mode is not ON)")
        elif current is not None and not current.complete:
            _take(current, etype, body, size)
        pos += size
    if current is not None and not current.complete:
        assert torn_ok, f"{path}: transaction {current.gtid} not whole at the end of the file"
        out.transactions.pop()


def _take(current, etype, body, size):
    """One event of an open transaction."""
    current.types.append(etype)
    if etype in (ANNOTATE, ROWS_QUERY):
        text = body if etype == ANNOTATE else body[1:]
        current.annotates.append(text)
        o = find_origin(text) if text.startswith(b"# manifold origin ") else None
        if o:
            current.origins += 1
            current.origin = current.origin or o
    elif etype == TRANSACTION_PAYLOAD:
        # The whole transaction, compressed: its events are read as plain ones.
        current.compressed = True
        for inner_type, inner_body, inner_size in _payload_events(body):
            if not current.complete:
                _take(current, inner_type, inner_body, inner_size)
        current.complete = True
    elif etype == TABLE_MAP:
        db_len = body[8]
        db = body[9:9 + db_len]
        t_len = body[10 + db_len]
        current.tables.append((db, body[11 + db_len:11 + db_len + t_len]))
    elif etype == XID:
        current.complete = True
    elif etype == QUERY:
        q = _query_text(body)
        current.queries.append(q)
        if current.mysql:
            o = statement_origin(q)
            if o:
                current.origins += 1
                current.origin = current.origin or o
            if current.standalone is None:
                # MySQL's boundary rule: BEGIN / XA START open a group, any other
                # first statement is the whole group.
                current.standalone = not (q == b"BEGIN" or q.startswith(b"XA START"))
            if current.standalone or q in (b"COMMIT", b"ROLLBACK") or q.startswith(b"XA ROLLBACK"):
                current.complete = True
        elif current.flags & FL_STANDALONE or q in (b"COMMIT", b"ROLLBACK"):
            current.complete = True
    elif etype == XA_PREPARE and current.mysql:
        current.complete = True
    elif etype in ROWS_EVENTS:
        current.row_bytes += size


def _net_int(buf, at):
    """A length-encoded integer of MySQL's protocol: (value, next offset)."""
    first = buf[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(buf[at + 1:at + 1 + width], "little"), at + 1 + width


def _payload_events(body):
    """The events inside a TRANSACTION_PAYLOAD body: its fields (type, length, value; 0
    ends them), then the payload, zstd (type 0) or plain (255). Inner events carry no
    checksum of their own (the payload event's covers them); one that does is cut off."""
    import zstandard  # noqa: PLC0415 - installed by scripts/setup; only MySQL tests need it
    at, fields = 0, {}
    while True:
        kind, at = _net_int(body, at)
        if kind == 0:
            break
        length, at = _net_int(body, at)
        fields[kind], _ = _net_int(body, at)
        at += length
    size = fields.get(1, len(body) - at)
    data = bytes(body[at:at + size])
    if fields.get(2, 0) == 0:
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    assert len(data) == fields.get(3, len(data)), "payload: uncompressed size differs from its header"
    pos = 0
    while pos < len(data):
        etype = data[pos + 4]
        (esize,) = struct.unpack_from("<I", data, pos + 9)
        event = data[pos:pos + esize]
        assert len(event) == esize >= HEADER_LEN, "payload: torn inner event"
        inner = event[HEADER_LEN:]
        if struct.unpack_from("<I", event, esize - 4)[0] == zlib.crc32(event[:-4]):
            inner = inner[:-4]
        yield etype, inner, esize
        pos += esize


def _query_text(body):
    _thread, _exec, db_len, _err, vars_len = struct.unpack_from("<IIBHH", body, 0)
    start = 13 + vars_len + db_len + 1
    return bytes(body[start:])


# -- the ledger -----------------------------------------------------------------------------

class Ledger:
    """What the clients know: tags of transactions acknowledged as committed, tags whose
    commit failed without an answer (may be in, at most once), causal chains (tags in the
    order each commit was acknowledged before the next began)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.committed = {}  # tag -> cluster name
        self.uncertain = set()
        self.chains = []

    def add(self, tag, cluster):
        with self.lock:
            assert tag not in self.committed, f"tag {tag} used twice"
            self.committed[tag] = cluster

    def unsure(self, tag):
        with self.lock:
            self.uncertain.add(tag)


def check_global_binlog(binlog, ledger=None, clusters=(), expect_complete=True):
    """The checks every global binlog must pass; returns {tag: index} of ledger tags.

    - every transaction is whole and has exactly one origin record, right after its GTID;
    - global GTIDs are manifold's, strictly increasing by one;
    - each source's transactions appear at most once, in strictly increasing GTID order;
    - keys never go down; no heartbeat transaction is in;
    - with a ledger: every acknowledged transaction exactly once, from its cluster, each
      uncertain one at most once, nothing else tagged, every causal chain in order;
    - with `clusters` (and `expect_complete`): every data transaction of every source's own
      binlog is in, exactly once."""
    txns = binlog.transactions
    assert txns, "the global binlog holds no transaction"
    last_seq = None
    last_key = 0
    per_source = {}
    seen_origin = set()
    where = {}
    for i, t in enumerate(txns):
        assert t.complete, f"transaction {t.gtid} not whole"
        if t.mysql:
            assert t.gtid[0] == BINLOG_UUID and not t.compressed, f"global GTID {t.gtid} not manifold's"
        else:
            assert t.gtid[0] == 0 and t.gtid[1] == BINLOG_SERVER_ID, f"global GTID {t.gtid} not manifold's"
        if last_seq is not None:
            assert t.seq == last_seq + 1, f"global GTID {t.gtid} after seq {last_seq}"
        last_seq = t.seq
        assert t.origins == 1 and t.origin_first() and t.origin, \
            f"transaction {t.gtid}: {t.origins} origin records, events {t.types[:3]}"
        o = t.origin
        assert o.key >= last_key, f"transaction {t.gtid}: key {o.key} after {last_key}"
        last_key = o.key
        ident = (o.cluster, o.gtid)
        assert ident not in seen_origin, f"source transaction {ident} twice (again as {t.gtid})"
        seen_origin.add(ident)
        prev = per_source.get(o.cluster)
        assert prev is None or o.seq > prev, f"{o.cluster}: source seq {o.seq} after {prev}"
        per_source[o.cluster] = o.seq
        assert not t.is_heartbeat(), f"heartbeat transaction {ident} in the global binlog"
        for tag in t.tags():
            assert tag not in where, f"ledger transaction {tag} twice: {txns[where[tag]].gtid} and {t.gtid}"
            where[tag] = i
    if ledger is not None:
        missing = [tag for tag in ledger.committed if tag not in where]
        assert not missing, f"{len(missing)} acknowledged transactions missing, e.g. {missing[:5]}"
        for tag, cluster in ledger.committed.items():
            assert txns[where[tag]].origin.cluster == cluster, f"{tag} from {txns[where[tag]].origin.cluster}"
        unknown = [tag for tag in where if tag not in ledger.committed and tag not in ledger.uncertain]
        assert not unknown, f"tags nobody wrote: {unknown[:5]}"
        for chain in ledger.chains:
            positions = [where[tag] for tag in chain]
            assert positions == sorted(positions) and len(set(positions)) == len(positions), \
                "causal chain out of order: " + "; ".join(
                    f"{tag} at {p}: {txns[p].origin.cluster} {txns[p].origin.gtid} key {txns[p].origin.key} "
                    f"{[a[:60] for a in txns[p].annotates[1:2]]}" for tag, p in zip(chain, positions))
    if clusters and expect_complete:
        start = start_positions(txns[0], {c.name if i else "default": c.uuid
                                          for i, c in enumerate(clusters) if c.mysql})
        for i, c in enumerate(clusters):
            name = c.name if i else "default"
            own = read_binlog(c.binlog_files(), allow_torn_tail=True).transactions
            # Sources are read from where they stood when the global binlog began: the
            # sources= record, else (a fresh start records no position) its first held.
            first_held = min((g[-1] for (cl, g) in seen_origin if cl == name), default=1)
            begin = start.get(name) or first_held - 1
            ours = c.uuid if c.mysql else 0
            wanted = {t.gtid for t in own if not t.is_heartbeat() and t.gtid[0] == ours and t.seq > begin}
            held = {origin for (cl, origin) in seen_origin if cl == name}
            lost = sorted(wanted - held, key=lambda g: g[-1])
            assert not lost, f"{name}: {len(lost)} source transactions not in the global binlog, e.g. {lost[:5]}"
    return where


def start_positions(first, uuids=None):
    """{cluster: domain 0 seq} of the `sources=` record of the global binlog's first
    transaction: where every source stood when the global binlog began. `uuids`: the MySQL
    clusters' server uuids, whose position is that uuid's last gno in the set."""
    grouped = not first.mysql or first.types[:2] == [QUERY, ROWS_QUERY]
    text = first.annotates[0] if grouped else first.queries[0]
    m = re.search(rb" sources=(\S*)", text)
    assert m, f"the first transaction's origin has no sources= record: {text[:200]!r}"
    out = {}
    uuids = uuids or {}
    for entry in m.group(1).decode().removesuffix("*/").split(";"):
        name, pos, _key = entry.split("@")
        if name in uuids:
            out[name] = gtid_set_last(pos, uuids[name])
            continue
        for g in filter(None, pos.split(",")):
            d, _s, n = g.split("-")
            if d == "0":
                out[name] = int(n)
    return out


# -- writers ------------------------------------------------------------------------------

class Writers:
    """Threads writing tagged transactions through manifold until stopped: per cluster
    schema, inserts/updates/deletes in multi-statement transactions, a rollback now and
    then; plus causal chains alternating between the clusters."""

    runs = 0

    def __init__(self, mf, schemas, ledger, threads_per_schema=2, chains=True, tolerate_errors=False):
        self.mf, self.schemas, self.ledger = mf, schemas, ledger
        Writers.runs += 1
        self.run = Writers.runs  # in every tag: tags stay unique over several runs
        self.stop_flag = threading.Event()
        self.errors = []
        self.tolerate = tolerate_errors
        self.threads = []
        for cluster, schema in schemas.items():
            for n in range(threads_per_schema):
                self.threads.append(threading.Thread(target=self._writer, args=(cluster, schema, n), daemon=True))
        if chains:
            self.threads.append(threading.Thread(target=self._chains, daemon=True))

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=120)
        # A writer still running would add to the ledger while it is checked.
        hung = [t.name for t in self.threads if t.is_alive()]
        assert not hung, f"writers still running 120 s after stop (a write hung): {hung}"
        if not self.tolerate:
            assert not self.errors, f"writes failed: {self.errors[:3]}"

    def _connect(self, schema):
        while not self.stop_flag.is_set():
            try:
                return self.mf.connect(database=schema, autocommit=False, connect_timeout=5, read_timeout=30)
            except pymysql.err.MySQLError as e:
                if not self.tolerate:
                    raise
                self.errors.append(e)
                time.sleep(0.2)
        return None

    def _commit(self, conn, cluster, tag, statements):
        """Runs one transaction; records it; returns the connection to go on with (None
        when it was lost)."""
        try:
            with conn.cursor() as cur:
                for s in statements:
                    cur.execute(s)
        except pymysql.err.MySQLError as e:
            if not self.tolerate:
                raise
            self.errors.append(e)
            with contextlib.suppress(Exception):
                conn.close()
            return None
        try:
            conn.commit()
        except pymysql.err.MySQLError as e:
            if not self.tolerate:
                raise
            self.errors.append(e)
            self.ledger.unsure(tag)
            with contextlib.suppress(Exception):
                conn.close()
            return None
        self.ledger.add(tag, cluster)
        return conn

    def _writer(self, cluster, schema, n):
        conn = None
        i = 0
        while not self.stop_flag.is_set():
            conn = conn or self._connect(schema)
            if conn is None:
                return
            i += 1
            tag = f"{cluster}.{self.run}.{n}.{i}"
            k = f"/*ledger:{tag}*/"
            base = self.run * 10_000_000 + n * 1_000_000 + i
            if i % 17 == 0:
                try:
                    with conn.cursor() as cur:
                        cur.execute(f"{k} INSERT INTO ledger (id, tag, v) VALUES ({base}, 'rolled back', 0)")
                    conn.rollback()
                except pymysql.err.MySQLError as e:
                    if not self.tolerate:
                        raise
                    self.errors.append(e)
                    conn = None
                continue
            statements = [f"{k} INSERT INTO ledger (id, tag, v) VALUES ({base}, '{tag}', {i})",
                          f"{k} UPDATE ledger SET v = v + 1 WHERE id = {base}"]
            if i % 3 == 0:
                statements.append(f"{k} DELETE FROM ledger WHERE id = {base - 2}")
            conn = self._commit(conn, cluster, tag, statements)

    def _chains(self):
        names = list(self.schemas)
        conns = {}
        c = 0
        while not self.stop_flag.is_set():
            c += 1
            chain = []
            for step in range(4):
                cluster = names[step % len(names)]
                schema = self.schemas[cluster]
                conn = conns.get(cluster) or self._connect(schema)
                if conn is None:
                    return
                tag = f"chain.{self.run}.{c}.{step}"
                conn = self._commit(conn, cluster, tag, [
                    f"/*ledger:{tag}*/ INSERT INTO ledger (id, tag, v) VALUES ({900_000_000 + self.run * 1_000_000 + c * 10 + step}, '{tag}', {step})"])
                conns[cluster] = conn
                if conn is None:
                    break
                chain.append(tag)
            with self.ledger.lock:
                self.ledger.chains.append(chain)


LEDGER_DDL = "CREATE TABLE ledger (id BIGINT PRIMARY KEY, tag VARCHAR(64), v BIGINT, pad VARBINARY(200))"


def create_schemas(clusters, schemas):
    """Creates each cluster's schema with the ledger table, directly on its primary."""
    for i, c in enumerate(clusters):
        name = c.name if i else "default"
        s = schemas[name]
        c.query(f"CREATE DATABASE IF NOT EXISTS {s}")
        c.query(f"CREATE TABLE IF NOT EXISTS {s}.ledger (id BIGINT PRIMARY KEY, tag VARCHAR(64), v BIGINT, pad VARBINARY(200))")


def mariadb_binlog(port, *args, timeout=120, check=True):
    """Runs `mariadb-binlog --read-from-remote-server` against manifold (or a server)."""
    cmd = ["mariadb-binlog", "--read-from-remote-server", "-h127.0.0.1", f"-P{port}", f"-u{USER}",
           f"-p{PASSWORD}", *args]
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    if check:
        assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}"
    return p


def mysql_root():
    """The MySQL root `scripts/setup-mysql` unpacks (MANIFOLD_MYSQL_ROOT, else
    ~/.cache/manifold/mysql/root); fails saying what to run when it is missing."""
    root = Path(os.environ.get("MANIFOLD_MYSQL_ROOT") or Path.home() / ".cache/manifold/mysql/root")
    if not (root / "usr/bin/mysqlbinlog").is_file():
        pytest.fail(f"MySQL's mysqlbinlog is not in {root}: run scripts/setup-mysql")
    return root


def mysql_tool(name):
    """argv prefix running one of the MySQL root's programs (`usr/bin/<name>`) through the
    root's own loader and libraries, as the testkit runs mysqld."""
    root = mysql_root()
    lib = root / "usr/lib/x86_64-linux-gnu"
    return [str(lib / "ld-linux-x86-64.so.2"), "--library-path", str(lib), str(root / "usr/bin" / name)]


def mysqlbinlog(port, *args, user=USER, password=PASSWORD, timeout=120, check=True):
    """Runs MySQL's own `mysqlbinlog --read-from-remote-server` against manifold (or a MySQL
    server), asking for the server's RSA key as caching_sha2_password needs without TLS."""
    # `--read-from-remote-source=...` (by GTIDs) replaces --read-from-remote-server.
    remote = [] if any(a.startswith("--read-from-remote-source") for a in args) else ["--read-from-remote-server"]
    cmd = [*mysql_tool("mysqlbinlog"), *remote, "--get-server-public-key",
           "-h127.0.0.1", f"-P{port}", f"-u{user}", f"-p{password}", *args]
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    if check:
        assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}"
    return p


class KilledReaders:
    """Binlog readers started one after another (`argv`) and each SIGKILLed after a random
    while (0.1 to 1.5 s, from `seed`), for as long as the `with` block runs.

    Each reader's exit and output are kept. On leaving the block (the body having passed)
    every reader must have been killed by us, or have ended because manifold was down
    (`outages`, a `BinlogManifold`'s: cut off, or its connection refused, during a kill) with
    a client's lost-connection or can't-connect error; a reader refused at login or at its
    dump request, or cut off while manifold was up, fails the test. `events_read` counts the
    readers that printed at least one event (`# at `)."""

    # The client errors of a server that went away or is not listening (mariadb-binlog and
    # MySQL's mysqlbinlog: 2013, 2002/2003, 2006, or the TLS handshake cut short).
    CUT_OFF = re.compile(r"Lost connection to (MySQL )?server|Can't connect to (MySQL )?server"
                         r"|(MySQL )?server has gone away"
                         r"|TLS/SSL error: (unexpected eof|Connection reset by peer|Broken pipe)"
                         r"|SSL connection error: error:00000000"
                         r"|SSL connection error: .*unexpected eof while reading")
    # Timestamps are taken around the reader's start and wait, not its connect and exit.
    SLACK = 1.0

    def __init__(self, argv, seed, outages=None):
        self.argv = argv
        self.seed = seed
        self.outages = outages if outages is not None else []
        self.stop_flag = threading.Event()
        self.runs = 0
        self.events_read = 0
        self.ended = []  # (start, end, returncode, stderr) of readers not killed by us
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        rng = random.Random(self.seed)
        while not self.stop_flag.is_set():
            with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
                started = time.monotonic()
                # Line-buffered: what a reader printed before its SIGKILL is in `out`.
                p = subprocess.Popen(["stdbuf", "-oL", *self.argv], stdout=out, stderr=err)
                self.stop_flag.wait(rng.uniform(0.1, 1.5))
                p.send_signal(signal.SIGKILL)  # a no-op if it has already ended
                p.wait()
                out.seek(0)
                if any(b"# at " in chunk for chunk in iter(lambda: out.read(1 << 20), b"")):
                    self.events_read += 1
                if p.returncode != -signal.SIGKILL:
                    err.seek(0)
                    self.ended.append((started, time.monotonic(), p.returncode,
                                       err.read().decode(errors="replace")))
            self.runs += 1

    def _during_outage(self, start, end):
        return any(down - self.SLACK <= end and (up is None or start <= up + self.SLACK)
                   for down, up in self.outages)

    def unexpected(self):
        """The readers that ended by themselves for a reason other than manifold being down."""
        return [(code, err[-1000:]) for start, end, code, err in self.ended
                if not (self.CUT_OFF.search(err) and self._during_outage(start, end))]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, exc_type, *exc):
        self.stop_flag.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "a binlog reader did not end"
        if exc_type is None:
            bad = self.unexpected()
            assert not bad, f"{len(bad)} of {self.runs} binlog readers ended by themselves: {bad[:5]}"


def wait_for(what, fn, timeout=60, interval=0.2):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def env_int(name, default):
    return int(os.environ.get(name, default))


__all__ = ["pytest"]
