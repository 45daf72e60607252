"""The dashboard at `/` on the HTTP port, in a real browser: headless Chromium loads it while
point selects run through manifold, lets it poll `/status` a few times, and the DOM it leaves
must show live figures (the primary up, queries per second, the `total` latency stage, the
time of the last poll). A screenshot is kept in tests/python/artifacts/dashboard.png.

Chromium is Debian's `chromium` package (scripts/setup installs it); without it the test fails."""

import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import ROOT
from test_admin import http_get

ARTIFACTS = ROOT / "tests" / "python" / "artifacts"
DASH = "\u2014"
# Chromium starts slowly on two busy cores; this bounds one invocation.
CHROMIUM_TIMEOUT = 60
# Virtual time the page gets before the DOM is dumped: five polls at one a second. The page's
# timers run on virtual time, fetches on real time (virtual time waits for them).
VIRTUAL_TIME_MS = 5000


def chromium_bin():
    path = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if path is None:
        pytest.fail("chromium is missing: the dashboard test drives a headless Chromium; "
                    "scripts/setup installs it (Debian package `chromium`)")
    return path


def headless(url, profile, *args):
    """Runs headless Chromium on `url` with a private profile; returns its stdout. The whole
    process group is killed if it outlives CHROMIUM_TIMEOUT."""
    cmd = [chromium_bin(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
           "--disable-background-networking", "--disable-component-update", "--mute-audio",
           "--hide-scrollbars", "--enable-logging=stderr", f"--user-data-dir={profile}", *args, url]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CHROMIUM_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"chromium did not finish within {CHROMIUM_TIMEOUT}s: {cmd}\n{err[-3000:]}")
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {cmd}\n{err[-3000:]}"
    return out, err


class Node:
    def __init__(self, tag, attrs):
        self.tag, self.attrs, self.children = tag, dict(attrs), []

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.walk()

    def by_id(self, ident):
        return next((n for n in self.walk() if n.attrs.get("id") == ident), None)

    def all(self, tag):
        return [n for n in self.walk() if n.tag == tag]


class Dom(HTMLParser):
    """The dumped DOM as a tree of Nodes (the serialisation is HTML, not XML)."""
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", [])
        self.stack = [self.root]
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs)
        self.stack[-1].children.append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, attrs))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def element(dom, ident):
    node = dom.root.by_id(ident)
    assert node is not None, f"the dashboard has no element with id {ident!r}"
    return node


def table(dom, ident):
    """The rows of a table's body as dicts by header text; a table showing only "—" has none."""
    t = element(dom, ident)
    names = [th.text().strip() for th in t.all("thead")[0].all("th")]
    rows = []
    for tr in t.all("tbody")[0].all("tr"):
        cells = [td.text().strip() for td in tr.all("td")]
        if cells != [DASH]:
            rows.append(dict(zip(names, cells)))
    return rows


def number(text):
    """A figure as the page prints it ("1,234", "12.5"), or None for "—" or anything else."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def test_dashboard_shows_live_figures_in_a_browser(topology, manifold, schema, tmp_path):
    code, content_type, page = http_get(manifold, "/")
    assert code == 200 and content_type == "text/html; charset=utf-8", (code, content_type)
    assert 'id="qps"' in page and "fetch(" in page
    assert http_get(manifold, "/index.html")[2] == page

    with topology.root(database=schema) as r:
        cur = r.cursor()
        cur.execute("CREATE TABLE pt (id INT PRIMARY KEY, c CHAR(20) NOT NULL)")
        cur.executemany("INSERT INTO pt VALUES (%s, %s)", [(i, f"row {i}") for i in range(1, 101)])

    stop = threading.Event()
    done, failures = [0, 0], []

    def point_selects(slot):
        try:
            with manifold.connect(database=schema, autocommit=True) as c:
                cur = c.cursor()
                while not stop.is_set():
                    n = random.randint(1, 100)
                    cur.execute("SELECT c FROM pt WHERE id = %s", (n,))
                    assert cur.fetchone() == (f"row {n}",)
                    done[slot] += 1
                    time.sleep(0.001)  # steady, and leaves the cores some room for Chromium
        except Exception as e:  # reported by the test, not lost in the thread
            failures.append(e)

    workers = [threading.Thread(target=point_selects, args=(i,)) for i in range(2)]
    for w in workers:
        w.start()
    try:
        # A full second of load, so the latest interval of the server's history has queries.
        deadline = time.time() + 20
        started = time.time()
        while (sum(done) < 200 or time.time() < started + 1.5) and time.time() < deadline and not failures:
            time.sleep(0.05)
        assert not failures, failures
        assert sum(done) >= 200, f"the workload ran {done} point selects in 20s"

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        if shot.exists():
            shot.unlink()
        url = f"http://127.0.0.1:{manifold.http_port}/"
        started = time.time()
        out, err = headless(url, tmp_path / "chromium-profile", f"--virtual-time-budget={VIRTUAL_TIME_MS}",
                            "--window-size=1280,1600", f"--screenshot={shot}", "--dump-dom")
        browser_seconds = time.time() - started
        status = json.loads(http_get(manifold, "/status")[2])
        during = sum(done)
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=30)
    assert not failures, failures
    (ARTIFACTS / "dashboard-dom.html").write_text(out)

    # What works without the server's history, stages and Questions.
    assert "<html" in out, f"chromium dumped no DOM:\n{err[-3000:]}"
    dom = Dom(out)
    # Uncaught exceptions, and those the page caught while drawing ("dashboard: ..."), are
    # console messages, which --enable-logging=stderr prints.
    thrown = [line for line in err.splitlines() if "Uncaught" in line or '"dashboard: ' in line]
    assert not thrown, "the page threw:\n" + "\n".join(thrown)
    polls = int(dom.root.all("body")[0].attrs.get("data-polls", "0"))
    assert polls >= 2, f"the page polled /status {polls} times in {VIRTUAL_TIME_MS} ms of virtual time"
    banner = element(dom, "banner")
    assert "hidden" in banner.attrs, f"the page shows an error: {banner.text()!r}"
    updated = element(dom, "updated")
    assert updated.text().strip() not in ("", DASH) and updated.attrs.get("data-time"), updated.attrs
    backends = table(dom, "backends")
    primary = [b for b in backends if b.get("node") == topology.primary]
    assert primary and primary[0]["role"] == "primary" and primary[0]["state"] == "up", backends
    assert element(dom, "clients").text().strip() not in ("", DASH)
    # Pin reasons listed, with counts or among those never seen.
    pinned = element(dom, "pinned").text()
    assert "transaction" in pinned and "temporary_table" in pinned, pinned
    assert shot.exists() and shot.stat().st_size > 20_000, f"{shot} is missing or nearly empty"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Live numbers from the server's history and latency stages.
    qps = number(element(dom, "qps").text().strip())
    history = status.get("history")
    assert isinstance(history, dict) and history.get("queries"), \
        f"/status has no history.queries yet (the page shows qps {qps!r}): {sorted(status)}"
    assert qps is not None and qps > 0, \
        f"the qps element shows {element(dom, 'qps').text()!r} while {during} point selects ran " \
        f"(browser ran {browser_seconds:.1f}s); history.queries ends {history['queries'][-5:]}"
    assert number(element(dom, "errors").text().strip()) is not None, element(dom, "errors").text()
    stages = table(dom, "stages")
    total = [s for s in stages if s.get("stage") == "total"]
    assert total, f"the stages table has no `total` row: {stages}; /status stages: {status.get('stages')}"
    assert (number(total[0]["count"]) or 0) > 0, total
