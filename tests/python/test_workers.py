"""Client connections are spread evenly over the workers, whichever worker's SO_REUSEPORT
socket the kernel hands each one to. A session's worker is read from its connection id:
worker w of n hands out ids w + 1, w + 1 + n, ..."""

import time

import pytest

from conftest import configured
from test_admin import admin, table

WORKERS = 4


@pytest.fixture
def four_workers(topology, tmp_path):
    m = configured(topology, tmp_path, f"[engine]\nthreads = {WORKERS}\n", "manifold-workers")
    yield m
    m.stop_and_check()


def worker_of(conn):
    with conn.cursor() as c:
        c.execute("SELECT CONNECTION_ID()")
        (cid,) = c.fetchone()
    return (int(cid) - 1) % WORKERS


def per_worker(workers):
    return [workers.count(w) for w in range(WORKERS)]


def sessions_per_worker(m):
    """Client sessions of each worker as the admin port's SHOW SESSIONS lists them."""
    rows = table(admin(m, "SHOW SESSIONS").stdout)
    return per_worker([(int(r["id"]) - 1) % WORKERS for r in rows])


def wait_for_sessions(m, want):
    """Polls until the workers hold `want` sessions: a session ends on its worker a moment
    after its client closes."""
    deadline = time.monotonic() + 10
    while (now := sessions_per_worker(m)) != want:
        assert time.monotonic() < deadline, f"sessions per worker {now}, expected {want}"
        time.sleep(0.05)


def test_sessions_spread_evenly_and_refill_the_emptiest_worker(four_workers):
    # The kernel's hash alone puts 40 connections on 4 sockets 10 each about once in 250 runs,
    # and the 10 new ones below all on one worker about once in a million.
    conns = [four_workers.connect() for _ in range(40)]
    workers = [worker_of(c) for c in conns]
    counts = per_worker(workers)
    assert max(counts) - min(counts) <= 1, counts

    # Worker 0's sessions end: the next connections go to it until it is even again.
    for c, w in zip(conns, workers):
        if w == 0:
            c.close()
    kept = [c for c, w in zip(conns, workers) if w != 0]
    wait_for_sessions(four_workers, [0, *counts[1:]])
    refill = [four_workers.connect() for _ in range(counts[0])]
    assert [worker_of(c) for c in refill] == [0] * counts[0]
    assert sessions_per_worker(four_workers) == counts
    for c in kept + refill:
        c.close()
