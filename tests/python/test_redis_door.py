"""The Redis door's connection layer (`--redis-listen`), against the real manifold binary:
the handshakes real clients send (redis-cli, redis-py in RESP2 and RESP3), AUTH forms, the
exact error texts, pipelining, protocol errors ending one connection only, and a differential
check of the connection commands against Debian's redis-server 7.0.

Deliberate differences from redis-server (so not in the differential sequence):
- `AUTH user:pass` with one argument logs in as `user` (clients that send one argument);
  redis-server takes it as the password of `default`;
- `CLIENT SETINFO` (Redis 7.2, sent by clients) answers OK; 7.0 says unknown subcommand;
- `CLIENT LIST` lists the clients of the worker serving the connection only, with zero
  memory and buffer fields; `CLIENT ID` / `HELLO`'s `id` differ in value;
- `CLIENT LIST` / `CLIENT KILL` see only the user's own clients (without `process = true`),
  and `CLIENT KILL USER <another user>` answers 0 even when no such user exists;
- `COMMAND` and `COMMAND DOCS` answer empty, `CONFIG GET` knows a few parameters, `INFO`
  has fewer fields (`redis_version`, `loading:0`...);
- a connection closes after its third failed `AUTH`/`HELLO ... AUTH` (test_login_throttle.py),
  so the sequences below fail at most two each.

This module's door does not delay logins (`security.failed_login_threshold = 0`): its wrong
passwords are tests of the replies, and test_login_throttle.py tests the delays.
"""

import re
import socket
import subprocess
import time

import pytest

from conftest import USER, PASSWORD, free_port, native_hash, wait_port
from redisdiff import AUTH, Conn, Err, cmd, need, raw, read_reply, redis_py, replies, start_door, start_reference


@pytest.fixture(scope="module")
def door(topology, tmp_path_factory):
    cfg = tmp_path_factory.mktemp("door") / "no-login-delay.toml"
    cfg.write_text("[security]\nfailed_login_threshold = 0\n")
    with start_door(topology, ["--config", str(cfg)]) as port:
        yield port


@pytest.fixture(scope="module")
def reference():
    with start_reference() as port:
        yield port


NOAUTH = b"-NOAUTH Authentication required.\r\n"
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"


# The differential sequences: the same bytes go to redis-server and to manifold, and the
# whole answers must be equal byte for byte, `id` values masked.
SEQUENCES = {
    "before_auth": [
        cmd("PING"), cmd("FOO", "a", "b"), cmd("CLIENT", "SETNAME"), cmd("CLIENT", "FOO"),
        cmd("CLIENT"), cmd("ECHO"), cmd("HELLO"), cmd("HELLO", "4"), cmd("HELLO", "x"),
        cmd("HELLO", "3"), cmd("HELLO", "3", "FOO"), cmd("SELECT", "1"), cmd("CLIENT", "ID"),
        cmd("INFO"), cmd("AUTH", "wrong"), cmd("AUTH", USER, "wrong"),
        cmd("AUTH", "a", "b", "c"), cmd("AUTH"), cmd("PING", "a", "b"), b"PING\r\n",
        b"ping inline 'quoted arg'\r\n", cmd("QUIT"),
    ],
    "before_auth_unknown_users": [
        cmd("AUTH", "nobody", PASSWORD), cmd("AUTH", "default", PASSWORD), cmd("PING"), cmd("QUIT"),
    ],
    "before_auth_hello_wrong_password": [
        cmd("HELLO", "3", "AUTH", USER, "wrong"), cmd("PING"), cmd("QUIT"),
    ],
    "after_auth": [
        AUTH, cmd("PING"), cmd("PING", "hi"), cmd("ECHO", b"a\r\nb\x00c"), cmd("ECHO", ""),
        cmd("SELECT", "15"), cmd("SELECT", "16"), cmd("SELECT", "-1"), cmd("SELECT", "x"),
        cmd("SELECT", "01"), cmd("SELECT", "0"), cmd("CLIENT", "GETNAME"),
        cmd("CLIENT", "SETNAME", "a b"), cmd("CLIENT", "SETNAME", "n1"), cmd("CLIENT", "GETNAME"),
        cmd("CLIENT", "SETNAME", ""), cmd("CLIENT", "GETNAME"), cmd("CLIENT", "NO-EVICT", "on"),
        cmd("CLIENT", "NO-EVICT", "maybe"), cmd("CLIENT", "ID", "x"), cmd("DBSIZE", "x"),
        cmd("CONFIG", "GET", "save"), cmd("CONFIG", "GET", "appendonly"), cmd("CONFIG", "GET", "nothing*"),
        cmd("CONFIG"), cmd("COMMAND", "NOPE"), cmd("TIME", "x"), cmd("HELLO", "2"), cmd("HELLO", "2", "SETNAME", "n2"),
        cmd("CLIENT", "GETNAME"), cmd("HELLO", "3", "SETNAME", "bad name"), cmd("ECHO", "x", "y"),
        cmd("QUIT", "extra"),
    ],
    "resp3_and_reset": [
        cmd("HELLO", "3", "AUTH", USER, PASSWORD, "SETNAME", "r3"), cmd("PING"), cmd("ECHO", "e"),
        cmd("CLIENT", "GETNAME"), cmd("CONFIG", "GET", "save"), cmd("SELECT", "7"),
        cmd("RESET"), cmd("PING"), cmd("CLIENT", "GETNAME"), AUTH, cmd("CLIENT", "GETNAME"),
        cmd("HELLO", "3"), cmd("CLIENT", "GETNAME"), cmd("HELLO", "2"), cmd("QUIT"),
    ],
    "protocol_error_unauthenticated": [cmd("PING"), b"*20\r\n"],
    "protocol_error_bulk": [AUTH, cmd("PING"), b"*2\r\n$4\r\nECHO\r\n$x\r\n"],
    "protocol_error_dollar": [AUTH, b"*1\r\n+PING\r\n"],
    "protocol_error_quotes": [AUTH, b'ECHO "unbalanced\r\n'],
    "protocol_error_too_big_bulk_before_auth": [b"*1\r\n$20000\r\n"],
    "ignored_empty_requests": [AUTH, b"*0\r\n", b"\r\n", b"   \r\n", b"*-1\r\n", cmd("PING"), cmd("QUIT")],
}


def mask(data):
    return re.sub(rb"(\$2\r\nid\r\n):\d+\r\n", rb"\1:ID\r\n", data)


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_same_replies_as_redis_server(door, reference, name):
    payload = b"".join(SEQUENCES[name])
    want = raw(reference, payload)
    got = raw(door, payload)
    assert want, "redis-server answered nothing"
    assert mask(got) == mask(want), f"\nredis-server: {want!r}\nmanifold:     {got!r}"


def same_bytes(door, reference, payload):
    """`payload`'s whole answer from the door, asserted equal to redis-server's."""
    want = raw(reference, payload)
    got = raw(door, payload)
    assert want, "redis-server answered nothing"
    assert got == want, f"\nredis-server: {want!r}\nmanifold:     {got!r}"
    return got


def test_exact_error_texts(door, reference):
    # Each answer is redis-server's; the texts named here are also in them.
    assert same_bytes(door, reference, cmd("PING") + cmd("QUIT")).startswith(NOAUTH)
    assert same_bytes(door, reference, cmd("AUTH", "app", "nope") + cmd("QUIT")).startswith(WRONGPASS)
    assert b"-NOPROTO unsupported protocol version\r\n" in same_bytes(
        door, reference, cmd("AUTH", "app", "app") + cmd("HELLO", "4") + cmd("HELLO", "1") + cmd("QUIT"))
    assert b"-ERR DB index is out of range\r\n" in same_bytes(door, reference, AUTH + cmd("SELECT", "16") + cmd("QUIT"))
    assert b"-ERR wrong number of arguments for 'echo' command\r\n" in same_bytes(
        door, reference, AUTH + cmd("ECHO") + cmd("QUIT"))
    # Data commands: NOAUTH before authentication, run after it.
    assert same_bytes(door, reference, cmd("GET", "door:k") + AUTH + cmd("SET", "door:k", "v")
                      + cmd("GET", "door:k") + cmd("QUIT")).startswith(NOAUTH)


def test_auth_forms(door, reference):
    # AUTH user pass, AUTH user:pass (one argument), HELLO ... AUTH user pass.
    for login in (cmd("AUTH", USER, PASSWORD), cmd("AUTH", f"{USER}:{PASSWORD}"),
                  cmd("HELLO", "2", "AUTH", USER, PASSWORD)):
        c = Conn(door)
        assert c.call("PING") == Err("NOAUTH Authentication required.")
        c.send(login)
        first = read_reply(c.f)
        assert first == "OK" or (isinstance(first, list) and b"proto" in first), first
        assert c.call("PING") == "PONG"
        assert b"user=app " in c.call("CLIENT", "INFO")
        c.close()
    # No password-less default user: one argument without a colon fails, as do wrong ones.
    # (redis-server, whose `default` user is off, answers these the same way.)
    for bad in (cmd("AUTH", PASSWORD), cmd("AUTH", f"{USER}:wrong"), cmd("AUTH", f"nobody:{PASSWORD}"),
                cmd("AUTH", USER, PASSWORD + "\x00"), cmd("AUTH", "", "")):
        assert same_bytes(door, reference, bad + cmd("PING") + cmd("QUIT")) == WRONGPASS + NOAUTH + b"+OK\r\n", bad
    # A failed AUTH keeps an earlier login.
    assert same_bytes(door, reference, AUTH + cmd("AUTH", USER, "x") + cmd("PING") + cmd("QUIT")) == \
        b"+OK\r\n" + WRONGPASS + b"+PONG\r\n+OK\r\n"


def _resp3_session(port):
    """What HELLO 3 and the replies after it look like on `port`, the connection's `id` aside
    (returned apart, with its CLIENT ID)."""
    c = Conn(port)
    out = []
    c.send(cmd("HELLO", "3", "AUTH", USER, PASSWORD))
    head = c.f.readline()
    hello = {}
    for _ in range(int(head[1:-2])):
        k = read_reply(c.f)
        hello[k] = read_reply(c.f)
    ids = (hello.pop(b"id"), c.call("CLIENT", "ID"))
    out += [head, hello]
    c.send(cmd("CLIENT", "GETNAME"))
    out.append(c.f.readline())
    c.send(cmd("CONFIG", "GET", "appendonly"))
    out += [c.f.readline(), read_reply(c.f), read_reply(c.f)]
    c.send(cmd("INFO", "server"))
    head = c.f.readline()
    # The first two lines of the verbatim text (redis-server has more fields after them).
    out += [head[:1], c.f.read(int(head[1:-2]) + 2).split(b"\r\n")[:2]]
    c.send(cmd("HELLO", "2"))
    out.append(c.f.readline())
    c.close()
    return out, ids


def test_resp3_after_hello_3(door, reference):
    got, (hello_id, client_id) = _resp3_session(door)
    want, _ = _resp3_session(reference)
    assert got == want
    # What redis-server answers too (checked above): a map of 7, RESP3 null, verbatim text.
    assert got[0] == b"%7\r\n" and got[1][b"version"] == b"7.0.15" and got[1][b"proto"] == 3
    assert got[2] == b"_\r\n" and got[7] == [b"txt:# Server", b"redis_version:7.0.15"]
    assert hello_id == client_id


def test_pipelining_keeps_order(door):
    n = 500
    payload = AUTH + b"".join(cmd("ECHO", f"m{i}") if i % 3 else cmd("PING", f"p{i}") for i in range(n))
    payload += b"".join(b"ECHO inline%d\r\n" % i for i in range(50)) + cmd("QUIT")
    got = raw(door, payload)
    want = b"+OK\r\n" + b"".join(
        (b"$%d\r\n%s\r\n" % (len(s), s)) for s in
        ((f"m{i}" if i % 3 else f"p{i}").encode() for i in range(n)))
    want += b"".join(b"$%d\r\ninline%d\r\n" % (len(b"inline%d" % i), i) for i in range(50)) + b"+OK\r\n"
    assert got == want
    # The same requests cut anywhere: one byte per write.
    c = Conn(door)
    for b in AUTH + cmd("ECHO", "split") + cmd("PING"):
        c.send(bytes([b]))
    assert [read_reply(c.f) for _ in range(3)] == ["OK", b"split", "PONG"]
    # A large argument across many reads.
    big = b"x" * (3 << 20)
    assert c.call("ECHO", big) == big
    c.close()


def test_protocol_error_ends_only_that_connection(door, reference):
    good = Conn(door)
    assert good.call("AUTH", USER, PASSWORD) == "OK"
    bad = Conn(door)
    bad.send(AUTH + cmd("PING") + b"*1\r\n$x\r\n" + cmd("PING"))
    assert [read_reply(bad.f) for _ in range(3)] == [
        "OK", "PONG", Err("ERR Protocol error: invalid bulk length")]
    assert bad.f.read() == b"", "the connection stays open after a protocol error"
    # redis-server's answer, closed the same way.
    same_bytes(door, reference, AUTH + cmd("PING") + b"*1\r\n$x\r\n" + cmd("PING"))
    assert good.call("PING") == "PONG"
    assert good.call("ECHO", "still here") == b"still here"
    good.close()
    bad.close()


def test_client_commands(door):
    c = Conn(door)
    c.call("AUTH", USER, PASSWORD)
    assert c.call("CLIENT", "SETNAME", "door-test") == "OK"
    assert c.call("CLIENT", "GETNAME") == b"door-test"
    assert c.call("CLIENT", "SETINFO", "lib-name", "redis-py") == "OK"
    assert c.call("CLIENT", "SETINFO", "lib-ver", "1.0") == "OK"
    assert c.call("CLIENT", "SETINFO", "nope", "1") == Err("ERR Unrecognized option 'nope'")
    my_id = c.call("CLIENT", "ID")
    assert isinstance(my_id, int) and my_id > 0
    other = Conn(door)
    assert other.call("CLIENT", "ID") == Err("NOAUTH Authentication required.")
    other.call("AUTH", USER, PASSWORD)
    assert other.call("CLIENT", "ID") != my_id
    info = c.call("CLIENT", "INFO").decode()
    assert info.startswith(f"id={my_id} ") and " name=door-test " in info and info.endswith("\n")
    assert " db=0 " in info and " resp=2" in info and " cmd=client|info " in info
    c.call("SELECT", "5")
    listing = c.call("CLIENT", "LIST").decode()
    lines = [l for l in listing.split("\n") if l]
    me = [l for l in lines if l.startswith(f"id={my_id} ")]
    assert len(me) == 1 and " db=5 " in me[0] and " cmd=client|list " in me[0], listing
    assert c.call("CLIENT", "LIST", "ID", str(my_id)).decode().startswith(f"id={my_id} ")
    assert c.call("CLIENT", "NO-EVICT", "off") == "OK"
    assert c.call("COMMAND", "COUNT") > 0
    assert c.call("COMMAND", "DOCS") == []
    assert isinstance(c.call("DBSIZE"), int)
    secs, micros = c.call("TIME")
    assert abs(int(secs) - time.time()) < 60 and 0 <= int(micros) < 1_000_000
    text = c.call("INFO").decode()
    assert "redis_version:7.0.15\r\n" in text and "loading:0\r\n" in text and "redis_mode:standalone" in text
    assert c.call("INFO", "keyspace").decode().startswith("# Keyspace")
    assert c.call("CONFIG", "GET", "save") == [b"save", b""]
    assert c.call("CONFIG", "GET", "appendonly") == [b"appendonly", b"no"]
    got = c.call("CONFIG", "GET", "max*")
    assert got[0] == b"maxclients" and int(got[1]) > 0
    c.close()
    other.close()


def test_redis_cli(door, reference):
    cli = need("redis-cli")

    def run(*args, port=door):
        p = subprocess.run([cli, "-p", str(port), *args], capture_output=True, text=True, timeout=30)
        return p.stdout + p.stderr

    # The refusals print what redis-cli prints against redis-server.
    for args in (("PING",), ("--user", USER, "--pass", "wrong", "--no-auth-warning", "PING"),
                 ("--user", USER, "--pass", PASSWORD, "--no-auth-warning", "GETX", "k")):
        assert run(*args) == run(*args, port=reference), args

    assert run("--user", USER, "--pass", PASSWORD, "--no-auth-warning", "PING").strip() == "PONG"
    assert run("-a", f"{USER}:{PASSWORD}", "--no-auth-warning", "ECHO", "hi").strip() == "hi"
    # -n sends SELECT; -3 sends HELLO 3 (with AUTH when a user is given).
    assert run("--user", USER, "--pass", PASSWORD, "--no-auth-warning", "-n", "3", "CLIENT", "INFO").count(" db=3 ") == 1
    out = run("-3", "--user", USER, "--pass", PASSWORD, "--no-auth-warning", "CLIENT", "INFO")
    assert " resp=3" in out, out
    assert "NOAUTH Authentication required." in run("PING")
    assert "WRONGPASS invalid username-password pair or user is disabled." in \
        run("--user", USER, "--pass", "wrong", "--no-auth-warning", "PING")
    assert "ERR unknown command 'GETX', with args beginning with: 'k'" in \
        run("--user", USER, "--pass", PASSWORD, "--no-auth-warning", "GETX", "k")
    assert run("--user", USER, "--pass", PASSWORD, "--no-auth-warning", "SET", "cli:k", "v 1").strip() == "OK"
    assert run("--user", USER, "--pass", PASSWORD, "--no-auth-warning", "-3", "GET", "cli:k").strip() == 'v 1'



def test_redis_py(door):
    redis = redis_py()
    for protocol in (2, 3):
        r = redis.Redis(port=door, username=USER, password=PASSWORD, protocol=protocol, db=2,
                        client_name=f"py{protocol}", socket_timeout=10)
        assert r.ping() is True
        assert r.echo("hello") == b"hello"
        assert r.client_getname() in (f"py{protocol}", f"py{protocol}".encode())
        info = r.client_info()
        assert int(info["db"]) == 2 and int(info["resp"]) == protocol, info
        assert r.info()["redis_version"] == "7.0.15"
        assert r.info()["loading"] == 0
        assert r.config_get("appendonly") == {"appendonly": "no"} or \
            r.config_get("appendonly") == {b"appendonly": b"no"}
        assert isinstance(r.dbsize(), int)
        assert r.time()[0] > 0
        assert any(c["id"] == str(r.client_id()) or int(c["id"]) == r.client_id() for c in r.client_list())
        pipe = r.pipeline(transaction=False)
        for i in range(100):
            pipe.echo(f"v{i}")
        assert pipe.execute() == [f"v{i}".encode() for i in range(100)]
        assert r.set(f"py{protocol}:k", "v") is True
        assert r.get(f"py{protocol}:k") == b"v"
        r.close()
    # user:pass as the password alone (AUTH with one argument, RESP2).
    r = redis.Redis(port=door, password=f"{USER}:{PASSWORD}", protocol=2, socket_timeout=10)
    assert r.ping() is True
    r.close()
    for protocol in (2, 3):
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=door, username=USER, password="wrong", protocol=protocol, socket_timeout=10).ping()
        with pytest.raises((redis.exceptions.AuthenticationError, redis.exceptions.ResponseError),
                           match="uthenticat"):
            redis.Redis(port=door, protocol=protocol, socket_timeout=10).ping()


def test_door_is_on_by_default(manifold):
    """The quick start (no --redis-listen) opens the Redis door, on the loopback only
    (test_redis_access.py checks the sockets)."""
    help_text = subprocess.run([manifold.proc.args[0], "--help"], capture_output=True, text=True).stdout
    assert "--redis-listen" in help_text
    opened = [line for line in manifold.log_text().splitlines() if "Redis door open" in line]
    assert opened and "127.0.0.1:6380 and [::1]:6380 (loopback only" in opened[0], opened


def test_check_config_validates_redis(tmp_path, manifold):
    binary = manifold.proc.args[0]
    base = ('[backend]\nprimary = "127.0.0.1:3306"\n[[users]]\nname = "a"\n'
            f'password_native = "{native_hash("a")}"\nbackend_password = "a"\n')
    ok = tmp_path / "ok.toml"
    ok.write_text(base + '[redis]\nlisten = "127.0.0.1:6380"\nmax_clients = 5\nidle_timeout = "30s"\n')
    p = subprocess.run([binary, "check-config", str(ok)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for bad, key in (('listen = "nowhere"', "redis.listen"), ("max_clients = 0", "redis.max_clients"),
                     ("proto_max_bulk_len = 10", "redis.proto_max_bulk_len"), ("tls = true", "tls")):
        f = tmp_path / "bad.toml"
        f.write_text(base + "[redis]\n" + bad + "\n")
        p = subprocess.run([binary, "check-config", str(f)], capture_output=True, text=True)
        assert p.returncode != 0 and key in p.stderr, (bad, p.stderr)


def test_a_client_that_stops_reading_is_let_go_after_the_idle_timeout(topology, tmp_path):
    """Replies a client does not read are held back by its socket, not by manifold's memory,
    and a client that stays stalled that way past `idle_timeout` is closed, as an idle one is."""
    from conftest import configured  # noqa: PLC0415

    redis = redis_py()
    port = free_port()
    m = configured(topology, tmp_path,
                   f'[redis]\nlisten = "127.0.0.1:{port}"\nidle_timeout = "1s"\n', "redis-stalled")
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", port))
        stalled.settimeout(30)
        stalled.sendall(b"*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$3\r\napp\r\n")
        assert stalled.recv(5) == b"+OK\r\n"
        # Far more replies than the two sockets hold; none is read.
        echo = b"*2\r\n$4\r\nECHO\r\n$1000\r\n" + b"x" * 1000 + b"\r\n"
        try:
            for _ in range(4096):
                stalled.sendall(echo * 16)
        except OSError:
            pass  # manifold stopped reading (a timeout here), or already closed the client
        probe = redis.Redis(host="127.0.0.1", port=port, username=USER, password=PASSWORD,
                            socket_timeout=10)

        def clients():
            return probe.info("clients")["connected_clients"]

        deadline = time.monotonic() + 30
        while clients() > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert clients() == 1, "a client that does not read its replies is kept forever"
        probe.close()
        stalled.close()
    finally:
        m.stop_and_check()


def test_a_refused_auth_counts_as_a_refused_login(topology, tmp_path):
    """`Client_auth_failures` counts the Redis door's refused AUTHs as it counts refused
    MySQL logins, so guessing passwords there shows on the same counter."""
    import pymysql  # noqa: PLC0415

    from conftest import configured  # noqa: PLC0415

    port = free_port()
    m = configured(topology, tmp_path, f'[redis]\nlisten = "127.0.0.1:{port}"\n', "redis-auth-count")

    def failures():
        with pymysql.connect(host="127.0.0.1", port=m.admin_port, user="admin", password="admin") as a:
            cur = a.cursor()
            cur.execute("SHOW STATUS LIKE 'Client_auth_failures'")
            return int(cur.fetchone()[1])

    try:
        wait_port(port, m.proc, "manifold's Redis door")
        before = failures()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"AUTH app nope\r\nAUTH nobody app\r\nAUTH app app\r\n")
            got = b""
            while got.count(b"\r\n") < 3:
                chunk = s.recv(4096)
                assert chunk, got
                got += chunk
        wrongpass = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        assert got == wrongpass * 2 + b"+OK\r\n", got
        assert failures() == before + 2
    finally:
        m.stop_and_check()


def test_client_kill(door, reference):
    # Refusals and counts as redis-server answers them (no other client matches here).
    from redisdiff import differential
    differential(door, reference, [
        cmd("CLIENT", "KILL"), cmd("CLIENT", "KILL", "1.2.3.4:5"), cmd("CLIENT", "KILL", "ID", "0"),
        cmd("CLIENT", "KILL", "ID", "x"), cmd("CLIENT", "KILL", "ID", "999999"), cmd("CLIENT", "KILL", "TYPE", "foo"),
        cmd("CLIENT", "KILL", "FOO", "bar"), cmd("CLIENT", "KILL", "ID"),
        cmd("CLIENT", "KILL", "SKIPME", "maybe"), cmd("CLIENT", "KILL", "ADDR", "1.2.3.4:5"),
        cmd("CLIENT", "KILL", "LADDR", "1.2.3.4:5"), cmd("CLIENT", "KILL", "TYPE", "master"),
        cmd("CLIENT", "KILL", "ID", "999999", "SKIPME", "no"),
    ])
    # A deliberate difference: `USER` naming another user finds nothing, whether it exists or
    # not (redis-server: "No such user"), so a user without `process = true` does not learn
    # which users exist (test_redis_access.py has the user that has it).
    assert replies(door, [AUTH, cmd("CLIENT", "KILL", "USER", "nobody")])[1] == 0
    # Clients on every worker are killed by id, by address, by user; the killer is skipped.
    victims = [Conn(door) for _ in range(6)]
    for v in victims:
        assert v.call("AUTH", USER, PASSWORD) == "OK"
    killer = Conn(door)
    assert killer.call("AUTH", USER, PASSWORD) == "OK"
    assert killer.call("CLIENT", "KILL", "ID", str(victims[0].call("CLIENT", "ID"))) == 1
    assert victims[0].closed()
    addr = victims[1].call("CLIENT", "INFO").decode().split("addr=")[1].split()[0]
    assert killer.call("CLIENT", "KILL", addr) == "OK"
    assert victims[1].closed()
    # A blocked client is killed too.
    victims[2].send(cmd("BLPOP", "door:never", "0"))
    # (Connections of earlier tests still closing may be counted too.)
    assert killer.call("CLIENT", "KILL", "USER", USER) >= 4
    for v in victims[2:]:
        assert v.closed()
    assert killer.call("PING") == "PONG"
    # SKIPME no: the killer goes too, after its reply.
    killer.send(cmd("CLIENT", "KILL", "USER", USER, "SKIPME", "no"))
    assert read_reply(killer.f) >= 1
    assert killer.closed()


def test_unauthenticated_clients_are_let_go(topology, tmp_path):
    from conftest import configured
    port = free_port()
    m = configured(topology, tmp_path, f'[redis]\nlisten = "127.0.0.1:{port}"\nauth_timeout = "1s"\n',
                   "redis-auth-timeout")
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        idle, busy, logged = Conn(port), Conn(port), Conn(port)
        assert logged.call("AUTH", USER, PASSWORD) == "OK"
        # Commands without a login do not extend the deadline.
        # Until it is closed, every answer is NOAUTH; a closed connection reads as the end
        # of the stream (or a reset), and anything else fails here.
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                busy.send(cmd("PING"))
                line = busy.f.readline()
            except (ConnectionResetError, BrokenPipeError):
                break
            if line == b"":
                break
            assert line == b"-NOAUTH Authentication required.\r\n", line
            time.sleep(0.1)
        else:
            raise AssertionError("a client that never logs in stays")
        assert idle.closed()
        # A logged-in client stays.
        time.sleep(1.2)
        assert logged.call("PING") == "PONG"
        for c in (idle, busy, logged):
            c.close()
    finally:
        m.stop_and_check()


def test_command_info(door, reference):
    # The layout Redis 7.0 gives (10 fields, sets in RESP3, nil for an unknown command),
    # and the name, arity and key positions of the door's commands.
    c = Conn(door)
    assert c.call("AUTH", USER, PASSWORD) == "OK"
    ref = Conn(reference)
    assert ref.call("AUTH", USER, PASSWORD) == "OK"
    for conn in (c, ref):
        conn.call("HELLO", "2")
    names = ["get", "mset", "del", "rpoplpush", "hset", "zadd", "blpop", "echo", "watch", "nosuch"]
    got, want = c.call("COMMAND", "INFO", *names), ref.call("COMMAND", "INFO", *names)
    assert len(got) == len(want) == len(names)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        assert len(g) == 10 and g[0] == w[0] and g[1] == w[1] and g[3:6] == w[3:6], (g, w)
        assert ("write" in g[2]) == ("write" in w[2])
    c.send(cmd("HELLO", "3"))
    read_reply(c.f)
    c.send(cmd("COMMAND", "INFO", "nosuch"))
    assert c.f.readline() == b"*1\r\n" and c.f.readline() == b"_\r\n"
    c.close()
    ref.close()
