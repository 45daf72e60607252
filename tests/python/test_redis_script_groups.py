"""Scripts of several clients sharing one transaction (group commit for EVAL/EVALSHA/FCALL):
the door runs the scripts a worker's connections send together one after the other in one
transaction and commits once. Each script must still be atomic and isolated, keep its writes
when it raises an error, lose them when it is stopped, and a slow script must hold up no
other client's script. The same requests go to Debian's redis-server, whose replies are the
reference.
"""

import re
import socket
import time

import pytest

from redisdiff import AUTH, Conn, cmd, raw_reply, read_reply

P = "sgroups:"
CONNS = 48


def auth_conns(port, n):
    conns = [Conn(port) for _ in range(n)]
    for c in conns:
        c.send(AUTH)
        assert read_reply(c.f) == "OK"
    return conns


def at_once(conns, requests, read=raw_reply):
    """Sends requests[i] on conns[i], all before reading any reply, then reads each reply."""
    for c, r in zip(conns, requests):
        c.send(r)
    return [read(c.f) for c in conns]


def commits(topology):
    db = topology.root()
    try:
        with db.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Com_commit'")
            return int(cur.fetchone()[1])
    finally:
        db.close()


INCR_PUSH = ("local n = redis.call('INCR', KEYS[1]) "
             "redis.call('RPUSH', KEYS[2], n) return n")


def test_scripts_sent_together_stay_atomic_and_share_commits(redis_door, redis_reference, topology):
    """48 clients send an INCR-then-RPUSH script at once, 20 times over: every number is
    handed out once, the list holds them in order (no script ran between another's two
    commands), as on redis-server; and the door committed far fewer times than it ran
    scripts (they shared transactions)."""
    rounds = 20
    for port in (redis_door, redis_reference):
        conns = auth_conns(port, CONNS)
        conns[0].call("DEL", P + "n", P + "order")
        before = commits(topology) if port == redis_door else 0
        got = []
        for _ in range(rounds):
            got += at_once(conns, [cmd("EVAL", INCR_PUSH, "2", P + "n", P + "order")] * CONNS,
                           read=read_reply)
        total = rounds * CONNS
        assert sorted(got) == list(range(1, total + 1)), port
        order = [int(x) for x in conns[0].call("LRANGE", P + "order", 0, -1)]
        assert order == list(range(1, total + 1)), port
        if port == redis_door:
            # The door's own commits for these scripts; a lone script commits once each.
            assert commits(topology) - before < total // 2
        for c in conns:
            c.close()


def test_one_script_failing_leaves_the_others(redis_door, redis_reference):
    """In one turn: scripts that write then raise (their writes stay, as in Redis), that do
    not compile, that write from EVAL_RO, that call an unknown command, beside plain ones:
    each script gets redis-server's replies byte for byte and the keys end the same."""
    scripts = [
        cmd("EVAL", "redis.call('SET', KEYS[1], 'kept') error('boom')", "1", P + "raised"),
        cmd("EVAL", "return redis.call('INCR', KEYS[1])", "1", P + "counter"),
        cmd("EVAL", "this is not lua", "0"),
        cmd("EVAL_RO", "return redis.call('SET', KEYS[1], 'x')", "1", P + "ro"),
        cmd("EVAL", "return redis.call('RPUSH', KEYS[1], 'a')", "1", P + "list"),
        cmd("EVAL", "return redis.call('NOSUCHCOMMAND')", "0"),
        cmd("EVAL", "redis.call('SET', KEYS[1], 'v') return redis.call('GET', KEYS[1])", "1", P + "plain"),
        cmd("EVAL", "return redis.pcall('INCR', KEYS[1])", "1", P + "alist"),
    ] * 4
    keys = [P + k for k in ("raised", "counter", "ro", "list", "plain", "alist")]
    results = []
    for port in (redis_door, redis_reference):
        conns = auth_conns(port, len(scripts))
        conns[0].call("DEL", *keys)
        conns[0].call("RPUSH", P + "alist", "x")
        got = at_once(conns, scripts)
        state = [conns[0].call("GET", P + "raised"), conns[0].call("GET", P + "counter"),
                 conns[0].call("EXISTS", P + "ro"), conns[0].call("LLEN", P + "list"),
                 conns[0].call("GET", P + "plain")]
        results.append((got, state))
        for c in conns:
            c.close()
    door, reference = results
    # The four copies of a script may run in any order: their replies are compared as a
    # sorted list.
    for i in range(8):
        assert sorted(door[0][i::8]) == sorted(reference[0][i::8]), (scripts[i], door[0][i::8], reference[0][i::8])
    assert door[1] == reference[1]


LOOP = "redis.call('SET', KEYS[1], 'never') while true do end"


@pytest.mark.parametrize("position", ["first", "last"])
def test_a_script_that_never_returns_holds_up_no_other(redis_door, position):
    """A script that never returns, sent with 8 others in the same turn (so sharing their
    transaction): the others are answered while it still runs; SCRIPT KILL then ends it,
    its write is gone, and every other script's write is there."""
    n = 8
    conns = auth_conns(redis_door, n + 2)
    control = conns.pop()
    control.call("DEL", P + "never", P + "count")
    loop = cmd("EVAL", LOOP, "1", P + "never")
    incr = cmd("EVAL", "return redis.call('INCR', KEYS[1])", "1", P + "count")
    requests = [loop] + [incr] * n if position == "first" else [incr] * n + [loop]
    looping = conns[0] if position == "first" else conns[-1]
    for c, r in zip(conns, requests):
        c.send(r)
    others = [c for c in conns if c is not looping]
    got = sorted(read_reply(c.f) for c in others)
    assert got == list(range(1, n + 1))
    assert control.call("GET", P + "count") == str(n).encode()
    # It still runs: nothing came for it.
    looping.sock.settimeout(0.2)
    with pytest.raises(socket.timeout):
        looping.sock.recv(1)
    looping.sock.settimeout(5)
    assert control.call("SCRIPT", "KILL") == "OK"
    reply = read_reply(looping.f)
    assert reply.startswith("ERR Script killed by user with SCRIPT KILL..."), reply
    assert control.call("EXISTS", P + "never") == 0
    assert looping.call("PING") == "PONG"
    for c in conns + [control]:
        c.close()


def test_a_client_killed_while_its_script_waits_in_a_group(redis_door):
    """CLIENT KILL of a client whose script was sent with others: the others' scripts run
    and commit; the killed client's connection closes."""
    n = 6
    conns = auth_conns(redis_door, n + 2)
    control = conns.pop()
    control.call("DEL", P + "k", P + "slow")
    slow = conns[0]
    victim = conns[1]
    victim_id = victim.call("CLIENT", "ID")
    # A slow first script (a busy loop of ~0.3 s) keeps the group's turn while the victim is
    # killed.
    slow.send(cmd("EVAL", "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] "
                  "while true do local u = redis.call('TIME') "
                  "if u[1] * 1e6 + u[2] - s > 300000 then break end end "
                  "return redis.call('INCR', KEYS[1])", "1", P + "slow"))
    for c in conns[1:]:
        c.send(cmd("EVAL", "return redis.call('INCR', KEYS[1])", "1", P + "k"))
    assert control.call("CLIENT", "KILL", "ID", victim_id) == 1
    assert read_reply(slow.f) == 1
    got = []
    for c in conns[2:]:
        got.append(read_reply(c.f))
    # The killed client's script may have run (in a group of its own, while the slow one
    # runs) and been answered before the kill reached it, or not: then the connection
    # closes, with nothing else sent.
    sent = b""
    try:
        while chunk := victim.sock.recv(64):
            sent += chunk
    except ConnectionResetError:
        pass
    assert sent == b"" or re.fullmatch(rb":\d+\r\n", sent), sent
    count = int(control.call("GET", P + "k"))
    assert count in (n - 1, n), count
    if sent:
        # Answered, so its write is kept.
        assert count == n, count
        got.append(int(sent[1:-2]))
    assert sorted(got) == sorted(set(got)) and all(1 <= g <= count for g in got), got
    for c in conns + [control]:
        c.close()
