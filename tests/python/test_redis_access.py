"""Who reaches the Redis door, and what one Redis user may do to others (issue 26, items 4
and 6), against the real manifold binary and MariaDB:

- the quick start listens on the loopback only (127.0.0.1 and ::1), seen from the sockets
  manifold holds (/proc/net/tcp, tcp6) and from clients; `--redis-listen` opens it wider;
  an optional address (`-addr`) the host lacks is left out, a required one stops the start;
- `CLIENT LIST` / `CLIENT KILL` (every form) see and end only the user's own clients unless
  its `[[users]]` entry has `process = true`; another user's client is answered for as
  redis-server answers for a client that does not exist;
- a user's `max_connections` counts its Redis clients with its MySQL sessions;
- the expiry sweeper runs as manifold's own login (the monitor's), never a client's: a
  client login without DELETE neither stops it nor has statements run in its name.
"""

import ipaddress
import os
import re
import socket
import subprocess
import time
import uuid

import pymysql
import pytest

import conftest
from conftest import USER, PASSWORD, Manifold, configured, free_port, native_hash, start_on_free_port, wait_port
from redisdiff import Conn, Err, cmd, read_reply


# ---- helpers -----------------------------------------------------------------------------

def listening(pid, port):
    """The local addresses of the TCP sockets process `pid` listens on at `port`, from
    /proc/<pid>/fd and /proc/net/tcp{,6}."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    found = set()
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state != "0A" or inode not in inodes:
                    continue
                host, p = local.split(":")
                if int(p, 16) != port:
                    continue
                # Each 32-bit word in host (little-endian) order.
                raw = b"".join(bytes.fromhex(host[i:i + 8])[::-1] for i in range(0, len(host), 8))
                found.add(str(ipaddress.ip_address(raw)))
    return found


def anyone_listens(port, hosts):
    """Whether any process listens on `port` at one of `hosts` (or a wildcard)."""
    wild = {"0.0.0.0", "::"} | set(hosts)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                host, p = cols[1].split(":")
                if cols[3] != "0A" or int(p, 16) != port:
                    continue
                raw = b"".join(bytes.fromhex(host[i:i + 8])[::-1] for i in range(0, len(host), 8))
                if str(ipaddress.ip_address(raw)) in wild:
                    return True
    return False


def network_addresses():
    """This machine's non-loopback addresses (IPv4 and global IPv6), from `ip -o addr`."""
    out = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        m = re.search(r"\binet6? ([0-9a-f.:]+)/\d+ .*\bscope global\b", line)
        if m and not ipaddress.ip_address(m.group(1)).is_loopback:
            found.append(m.group(1))
    return found


def ping(host, port):
    """AUTH and PING on `host:port`: the door's answers."""
    s = socket.create_connection((host, port), timeout=5)
    try:
        f = s.makefile("rb")
        s.sendall(cmd("AUTH", USER, PASSWORD) + cmd("PING"))
        return read_reply(f), read_reply(f)
    finally:
        s.close()


def refused(host, port):
    try:
        socket.create_connection((host, port), timeout=2).close()
    except (ConnectionRefusedError, OSError):
        return True
    return False


wait_for = conftest.poll


# ---- item 4: where the door listens ------------------------------------------------------

def test_the_quick_start_door_listens_on_the_loopback_only(topology):
    """The quick start (no --redis-listen): 127.0.0.1:6380 and [::1]:6380, nothing else, and
    the log says how to open it."""
    m = Manifold(topology, log_name="redis-quickstart")
    try:
        line = wait_for(lambda: [l for l in m.log_text().splitlines() if "Redis door open" in l],
                        "the door's start-up line")
        assert ("Redis door open on 127.0.0.1:6380 and [::1]:6380 (loopback only; "
                "--redis-listen 0.0.0.0:6380 to open it to the network)") in line[0], line
        assert listening(m.proc.pid, 6380) == {"127.0.0.1", "::1"}
        for host in ("127.0.0.1", "::1"):
            assert ping(host, 6380) == ("OK", "PONG"), host
        others = network_addresses()
        assert others, "this machine has no non-loopback address to try"
        for host in others:
            # Another process on this machine may serve 6380 there; manifold does not.
            if not anyone_listens(6380, [host]):
                assert refused(host, 6380), host
        # MySQL's port is unchanged (the quick start's 0.0.0.0 through --listen here).
        assert m.connect().open
    finally:
        m.stop_and_check()


def test_redis_listen_opens_it_where_it_names(topology):
    """--redis-listen 0.0.0.0:PORT answers on every IPv4 address; a repeated flag listens on
    each; an optional address the host lacks is left out with a warning."""
    others = [a for a in network_addresses() if ":" not in a]
    assert others, "this machine has no non-loopback IPv4 address to try"
    m, port = start_on_free_port(
        lambda port: Manifold(topology, ["--redis-listen", f"0.0.0.0:{port}"], log_name="redis-open"))
    try:
        assert listening(m.proc.pid, port) == {"0.0.0.0"}
        for host in ["127.0.0.1", *others]:
            assert ping(host, port) == ("OK", "PONG"), host
        line = [l for l in m.log_text().splitlines() if "Redis door open" in l]
        assert line and f"Redis door open on 0.0.0.0:{port}" in line[0] and "loopback only" not in line[0]
    finally:
        m.stop_and_check()

    # 192.0.2.254 / fd00::dead: documentation addresses this host does not have.
    m, port = start_on_free_port(
        lambda port: Manifold(topology, ["--redis-listen", f"127.0.0.1:{port}", "--redis-listen",
                                         f"[::1]:{port},-[fd00::dead]:{port}"], log_name="redis-list"))
    try:
        assert listening(m.proc.pid, port) == {"127.0.0.1", "::1"}
        assert ping("::1", port) == ("OK", "PONG")
        log = m.log_text()
        assert f"[fd00::dead]:{port} left out: this host has no such address" in log, log
    finally:
        m.stop_and_check()

    # A required address the host lacks stops the start, naming it.
    port = free_port()
    p = subprocess.run([m.proc.args[0], "--primary", topology.primary, "--user", f"{USER}:{PASSWORD}",
                        "--listen", f"127.0.0.1:{free_port()}", "--admin-listen", "", "--http-listen", "",
                        "--redis-listen", f"192.0.2.254:{port}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and f"192.0.2.254:{port}" in p.stderr, p.stderr


# ---- item 6: what one user may do to others ----------------------------------------------

def users_toml(port, extra=""):
    """`alice`, `bob` (their own clients only) and `ops` (`process = true`), all logging into
    the backends as the topology's `app`; one worker, so that `CLIENT LIST` (a worker's
    clients) lists them all."""
    users = ""
    for name, process in (("alice", "false"), ("bob", "false"), ("ops", "true")):
        users += (f'\n[[users]]\nname = "{name}"\npassword_native = "{native_hash(name + "-pw")}"\n'
                  f'backend_user = "{USER}"\nbackend_password = "{PASSWORD}"\nprocess = {process}\n')
    return f'[engine]\nthreads = 1\n[redis]\nlisten = "127.0.0.1:{port}"\n{extra}' + users


def logged_in(port, user):
    c = Conn(port)
    assert c.call("AUTH", user, f"{user}-pw") == "OK"
    return c


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split(" ") if "=" in kv)


def client_lines(c, *args):
    text = c.call("CLIENT", "LIST", *args)
    return [fields(l) for l in text.decode().splitlines() if l]


def test_a_user_sees_and_ends_only_its_own_clients(topology, tmp_path, redis_reference):
    port = free_port()
    m = configured(topology, tmp_path, users_toml(port), "redis-access-clients")
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        alice, alice2 = logged_in(port, "alice"), logged_in(port, "alice")
        bob = logged_in(port, "bob")
        bob_id = bob.call("CLIENT", "ID")
        bob_info = fields(bob.call("CLIENT", "INFO").decode().strip())
        assert bob_info["user"] == "bob"
        alice2_id = alice2.call("CLIENT", "ID")

        # What redis-server answers for a client that does not exist.
        ref = Conn(redis_reference)
        assert ref.call("AUTH", USER, PASSWORD) == "OK"
        no_such = {
            "addr": ref.call("CLIENT", "KILL", "10.255.255.1:1"),
            "id": ref.call("CLIENT", "KILL", "ID", "999999"),
            "list_id": ref.call("CLIENT", "LIST", "ID", "999999"),
        }
        ref.close()
        assert no_such["addr"] == Err("ERR No such client") and no_such["id"] == 0

        # alice's listing: her clients, not bob's.
        seen = client_lines(alice)
        assert {c["user"] for c in seen} == {"alice"}, seen
        assert str(bob_id) not in {c["id"] for c in seen}
        assert str(alice2_id) in {c["id"] for c in seen}
        assert alice.call("CLIENT", "LIST", "ID", str(bob_id)) == no_such["list_id"]
        # Every form of CLIENT KILL finds no bob.
        assert alice.call("CLIENT", "KILL", bob_info["addr"]) == no_such["addr"]
        assert alice.call("CLIENT", "KILL", "ID", str(bob_id)) == no_such["id"]
        assert alice.call("CLIENT", "KILL", "ADDR", bob_info["addr"]) == 0
        # Invalidations (`CLIENT TRACKING ... REDIRECT`) go only to the user's own clients:
        # bob's id is answered for as one that does not exist, as redis-server answers it.
        no_redirect = Err("ERR The client ID you want redirect to does not exist")
        assert alice.call("CLIENT", "TRACKING", "on", "REDIRECT", str(bob_id)) == no_redirect
        assert alice.call("CLIENT", "GETREDIR") == -1
        assert alice.call("CLIENT", "TRACKING", "on", "REDIRECT", str(alice2_id)) == "OK"
        assert alice.call("CLIENT", "GETREDIR") == alice2_id
        assert alice.call("CLIENT", "TRACKING", "off") == "OK"
        assert alice.call("CLIENT", "KILL", "USER", "bob") == 0
        # A user that does not exist looks the same as one that does (not Redis's "No such
        # user", which would tell alice which users exist).
        assert alice.call("CLIENT", "KILL", "USER", "nobody") == 0
        assert alice.call("CLIENT", "KILL", "LADDR", bob_info["laddr"], "ID", str(bob_id)) == 0
        assert alice.call("CLIENT", "KILL", "TYPE", "pubsub") == 0
        assert bob.call("PING") == "PONG", "bob was killed by alice"
        # Her own: TYPE normal ends alice2 (and skips herself), not bob.
        assert alice.call("CLIENT", "KILL", "TYPE", "normal", "LADDR", bob_info["laddr"]) == 1
        assert alice2.closed()
        assert bob.call("PING") == "PONG", "bob was killed by alice's TYPE normal"
        assert alice.call("CLIENT", "KILL", "USER", "alice", "SKIPME", "yes") == 0
        # bob's own user is found (not hidden); his one client is himself, skipped.
        assert bob.call("CLIENT", "KILL", "USER", "bob") == 0

        # ops (process = true) sees everyone and may end bob's client.
        ops = logged_in(port, "ops")
        users = {c["user"] for c in client_lines(ops)}
        assert {"alice", "bob", "ops"} <= users, users
        assert [c["id"] for c in client_lines(ops, "ID", str(bob_id))] == [str(bob_id)]
        assert ops.call("CLIENT", "KILL", "USER", "nobody") == Err("ERR No such user 'nobody'")
        assert ops.call("CLIENT", "KILL", "ID", str(bob_id)) == 1
        assert bob.closed()
        # ... and alice's, by the old form.
        alice_addr = fields(alice.call("CLIENT", "INFO").decode().strip())["addr"]
        assert ops.call("CLIENT", "KILL", alice_addr) == "OK"
        assert alice.closed()
        assert ops.call("PING") == "PONG"
    finally:
        m.stop_and_check()


def test_max_connections_counts_redis_clients_with_mysql_sessions(topology, tmp_path):
    port = free_port()
    toml = (f'[redis]\nlisten = "127.0.0.1:{port}"\n[[users]]\nname = "limited"\n'
            f'password_native = "{native_hash("lim")}"\nbackend_user = "{USER}"\n'
            f'backend_password = "{PASSWORD}"\nmax_connections = 2\n')
    m = configured(topology, tmp_path, toml, "redis-access-limit")
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        mysql = m.connect(user="limited", password="lim", ssl_disabled=True)
        first = Conn(port)
        assert first.call("AUTH", "limited", "lim") == "OK"
        # Logging in again as the same user keeps its own place.
        assert first.call("AUTH", "limited", "lim") == "OK"
        # The third connection of the user: a Redis client is refused as redis-server
        # refuses one past maxclients, and closed...
        second = Conn(port)
        assert second.call("AUTH", "limited", "lim") == Err("ERR max number of clients reached")
        assert second.closed()
        third = Conn(port)
        assert third.call("HELLO", "3", "AUTH", "limited", "lim") == Err("ERR max number of clients reached")
        assert third.closed()
        # ... and so is a MySQL session (1226), the Redis client being counted.
        with pytest.raises(pymysql.err.OperationalError) as e:
            m.connect(user="limited", password="lim", ssl_disabled=True)
        assert e.value.args[0] == 1226
        # A wrong password is still only that.
        wrong = Conn(port)
        assert wrong.call("AUTH", "limited", "nope").startswith("WRONGPASS")
        # Other users are not limited by it.
        other = Conn(port)
        assert other.call("AUTH", USER, PASSWORD) == "OK"
        # The Redis client leaves: its place is given back (the server notices the close
        # after the client has moved on: poll, bounded).
        first.close()

        def mysql_login():
            try:
                return m.connect(user="limited", password="lim", ssl_disabled=True)
            except pymysql.err.OperationalError as err:
                assert err.args[0] == 1226
                return None
        again = wait_for(mysql_login, "the Redis client's place given back")
        # At the limit again (two MySQL sessions); RESET (logging out) gives a place back.
        again.close()

        def redis_login():
            c = Conn(port)
            if c.call("AUTH", "limited", "lim") == "OK":
                return c
            assert c.closed()
            return None
        r = wait_for(redis_login, "the MySQL session's place given back")
        assert r.call("RESET") == "RESET"
        late = Conn(port)
        assert late.call("AUTH", "limited", "lim") == "OK"
        mysql.close()
    finally:
        m.stop_and_check()


# ---- item 6: the sweeper's login ---------------------------------------------------------

def test_the_sweeper_runs_as_manifolds_own_login(topology, tmp_path):
    """A client whose backend login may not DELETE runs the latest batches: the sweeper
    still deletes expired keys, as the monitor's login, and never as the client's."""
    schema = "rs_" + uuid.uuid4().hex[:10]
    nodel, nodel_pw = "nd" + uuid.uuid4().hex[:8], "pw-" + uuid.uuid4().hex[:8]
    port = free_port()
    toml = (f'[engine]\nthreads = 1\n[redis]\nlisten = "127.0.0.1:{port}"\nschema = "{schema}"\n'
            f'[[users]]\nname = "reader"\npassword_native = "{native_hash("rd")}"\n'
            f'backend_user = "{nodel}"\nbackend_password = "{nodel_pw}"\n')
    with topology.root() as r:
        c = r.cursor()
        c.execute(f"CREATE USER '{nodel}'@'%' IDENTIFIED BY '{nodel_pw}'")
        c.execute(f"GRANT SELECT, INSERT, UPDATE ON `{schema}`.* TO '{nodel}'@'%'")
        c.execute("SET GLOBAL log_output = 'TABLE'")
        c.execute("TRUNCATE mysql.general_log")
        c.execute("SET GLOBAL general_log = ON")
    m = configured(topology, tmp_path, toml, "redis-access-sweeper")
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        writer = Conn(port)
        assert writer.call("AUTH", USER, PASSWORD) == "OK"
        assert writer.call("SET", "k:gone", "v", "PX", "300") == "OK"
        assert writer.call("SADD", "k:set", "a", "b") == 2
        assert writer.call("PEXPIRE", "k:set", "300") == 1
        assert writer.call("SET", "k:kept", "v") == "OK"
        reader = Conn(port)
        assert reader.call("AUTH", "reader", "rd") == "OK"
        # The reader's batches are the latest, all the while.
        deadline = time.monotonic() + 30
        while True:
            assert reader.call("GET", "k:kept") == b"v"
            with topology.root() as r:
                c = r.cursor()
                c.execute(f"SELECT COUNT(*) FROM `{schema}`.redis_keys")
                keys = c.fetchone()[0]
                c.execute(f"SELECT COUNT(*) FROM `{schema}`.redis_set")
                members = c.fetchone()[0]
            if keys == 1 and members == 0:
                break
            assert time.monotonic() < deadline, f"expired keys not swept: {keys} keys, {members} members"
            time.sleep(0.1)
        with topology.root() as r:
            c = r.cursor()
            c.execute("SET GLOBAL general_log = OFF")
            c.execute("SELECT user_host, CONVERT(argument USING utf8mb4) FROM mysql.general_log "
                      "WHERE CONVERT(argument USING utf8mb4) LIKE %s",
                      # This manifold's schema only: other doors of the test session sweep theirs.
                      (f"%{schema}%redis_keys WHERE expire_at <=%",))
            sweeps = c.fetchall()
        assert sweeps, "the sweeper's statements were not seen in the general log"
        users = {row[0].split("[", 1)[0] for row in sweeps}
        assert users == {"root"}, users
        assert "redis expiry sweep failed" not in m.log_text()
    finally:
        with topology.root() as r:
            c = r.cursor()
            c.execute("SET GLOBAL general_log = OFF")
            c.execute(f"DROP USER IF EXISTS '{nodel}'@'%'")
            c.execute(f"DROP DATABASE IF EXISTS `{schema}`")
        m.stop_and_check()
