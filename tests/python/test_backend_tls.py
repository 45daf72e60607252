"""TLS to the backends on every connection manifold opens, and with the certificates real setups
have.

- The connections manifold opens for itself (the Redis door's, the global binlog's reader and
  heartbeats, the monitor's) follow `backend.tls.mode` as client sessions do; under the default
  `as_client` they have no client, so they use TLS whenever the backend offers it. The proof
  is the server's own: the backend account is created `REQUIRE SSL`, so MariaDB refuses every
  plaintext login of it, and each kind of connection is seen working (the Redis door's answers,
  a `Binlog Dump` thread of the account, the heartbeat row moving, the monitor's reading of
  `read_only`).
- A backend serving an X.509 v1 certificate (`openssl x509 -req` without an extensions file, as
  MySQL's own guide makes them) is reached over TLS when the certificate is not verified (the
  default), by client sessions and by manifold's own connections; `verify_ca` refuses it and
  says why."""

import contextlib
import shutil
import ssl
import subprocess
import uuid

import pymysql
import pytest

import conftest
from conftest import PASSWORD, ROOT, RUN_DIR, USER, binary, free_ports, manifold_env, start_testkit, stop_process, wait_port
from redisdiff import redis_py

TLS_ANY = {"check_hostname": False, "verify_mode": ssl.CERT_NONE}  # TLS, any certificate


class QuickStart:
    """manifold started as the README's quick start does, with one `--user` (so the monitor,
    the global binlog and the Redis door's backend logins are that account's), the Redis door
    and the global binlog on, plus `extra` flags."""

    def __init__(self, primary, user, password, tmp_path, extra=(), name="manifold-backend-tls"):
        for attempt in range(3):
            self.port, self.admin_port, self.http_port, self.redis_port = free_ports(4)
            self.log_path = ROOT / "target" / f"{name}-{self.port}.log"
            self.log = open(self.log_path, "w")
            args = [binary("manifold"), "--primary", primary, "--user", f"{user}:{password}",
                    "--listen", f"127.0.0.1:{self.port}", "--admin-listen", f"127.0.0.1:{self.admin_port}",
                    "--http-listen", f"127.0.0.1:{self.http_port}",
                    "--redis-listen", f"127.0.0.1:{self.redis_port}", *extra]
            self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=RUN_DIR,
                                         env=manifold_env())
            try:
                wait_port(self.port, self.proc, "manifold")
                wait_port(self.redis_port, self.proc, "manifold's Redis door")
                wait_port(self.admin_port, self.proc, "manifold's admin port")
                return
            except pytest.fail.Exception:
                self.stop()
                if attempt == 2 or "Address already in use" not in self.log_path.read_text():
                    raise

    def backends(self):
        with pymysql.connect(host="127.0.0.1", port=self.admin_port, user="admin", password="admin") as c, \
                c.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW BACKENDS")
            return cur.fetchall()

    def stop(self):
        stop_process(self.proc)
        self.log.close()
        text = self.log_path.read_text()
        assert "panicked" not in text, f"manifold panicked: see {self.log_path}"
        return text


@contextlib.contextmanager
def quick_start(*args, **kw):
    m = QuickStart(*args, **kw)
    try:
        yield m
    finally:
        m.stop()


def poll(what, fn, timeout=30):
    """`fn()` once truthy (its value), else the test fails saying `what` and the last value."""
    return conftest.poll(fn, what, timeout, interval=0.1)


def root_rows(topology_root, sql, *params):
    with topology_root() as c, c.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def heartbeat_row(topology_root, server_id):
    """manifold `server_id`'s heartbeat row on the primary, or None (none yet, or no table)."""
    try:
        rows = root_rows(topology_root, "SELECT * FROM manifold.binlog_heartbeat WHERE id = %s", server_id)
    except pymysql.err.ProgrammingError:  # 1146: the table is not there yet
        return None
    return rows[0] if rows else None


def require_ssl_account(root, name, password):
    """A MariaDB account with every privilege that MariaDB lets in over TLS only."""
    with root() as c, c.cursor() as cur:
        cur.execute(f"CREATE USER '{name}'@'%' IDENTIFIED BY '{password}' REQUIRE SSL")
        cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{name}'@'%'")


def assert_plaintext_refused(port, name, password):
    """The account's plaintext logins are refused by the server itself (1045)."""
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(host="127.0.0.1", port=port, user=name, password=password, ssl_disabled=True)
    assert e.value.args[0] == 1045, e.value
    with pymysql.connect(host="127.0.0.1", port=port, user=name, password=password, ssl=TLS_ANY) as c:
        assert c.query("SELECT 1") == 1


def redis_roundtrip(port, user, password, key):
    redis = redis_py()
    r = redis.Redis(port=port, username=user, password=password, socket_timeout=20)
    try:
        value = "over tls " + uuid.uuid4().hex
        assert r.set(key, value) is True
        assert r.get(key) == value.encode()
        assert r.delete(key) == 1
    finally:
        r.close()


def test_manifolds_own_connections_use_tls_under_as_client(topology, tmp_path):
    name, password = "tls" + uuid.uuid4().hex[:8], "pw-" + uuid.uuid4().hex[:8]
    require_ssl_account(topology.root, name, password)
    server_id = 4_100_000_000 + int(uuid.uuid4().hex[:6], 16)
    config = tmp_path / "binlog.toml"
    config.write_text(f'[binlog]\nserver_id = {server_id}\nheartbeat_interval = "100ms"\n')
    try:
        assert_plaintext_refused(topology.primary_port, name, password)
        with quick_start(topology.primary, name, password, tmp_path,
                         ["--config", str(config), "--binlog-dir", str(tmp_path / "binlog")]) as m:
            # The monitor: it has read the primary's read_only over its own connection.
            poll("the monitor read @@read_only",
                 lambda: [b for b in m.backends() if b["role"] == "primary" and b["read_only"] == "OFF"])
            # The Redis door: its commands run on its own backend connections.
            redis_roundtrip(m.redis_port, name, password, f"backend-tls:{name}")
            # The global binlog's reader: a binlog dump of the account on the primary.
            poll("a Binlog Dump of the account on the primary", lambda: root_rows(
                topology.root, "SELECT ID FROM information_schema.PROCESSLIST "
                               "WHERE USER = %s AND COMMAND LIKE 'Binlog Dump%%'", name))
            # The heartbeats: manifold's row on the primary moves.
            first = poll("manifold's heartbeat row", lambda: heartbeat_row(topology.root, server_id))
            poll("the heartbeat row to move", lambda: heartbeat_row(topology.root, server_id) != first)
            # A TLS client's statements: encrypted end to end, as before.
            with pymysql.connect(host="127.0.0.1", port=m.port, user=name, password=password,
                                 ssl=TLS_ANY) as c, c.cursor() as cur:
                cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
                assert cur.fetchone()[1] != ""
            log = m.stop()
        assert "Access denied" not in log, log
    finally:
        with topology.root() as c, c.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{name}'@'%'")
        if heartbeat_row(topology.root, server_id):
            root_rows(topology.root, "DELETE FROM manifold.binlog_heartbeat WHERE id = %s", server_id)


def test_backend_tls_disabled_leaves_a_require_ssl_account_refused(topology, tmp_path):
    """The control of the test above: with `--backend-tls disabled` the same connections are
    plaintext, and the server refuses them (so the test above sees TLS, not luck)."""
    name, password = "tls" + uuid.uuid4().hex[:8], "pw-" + uuid.uuid4().hex[:8]
    require_ssl_account(topology.root, name, password)
    try:
        with quick_start(topology.primary, name, password, tmp_path, ["--backend-tls", "disabled"],
                         name="manifold-backend-tls-disabled") as m:
            redis = redis_py()
            r = redis.Redis(port=m.redis_port, username=name, password=password, socket_timeout=20)
            with pytest.raises(redis.exceptions.ResponseError):
                r.set(f"backend-tls:{name}", "x")
            r.close()
    finally:
        with topology.root() as c, c.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{name}'@'%'")


# --- X.509 v1 certificates ------------------------------------------------------------------

def openssl(*args, cwd):
    out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def v1_certificates(d):
    """MySQL's guide (`Creating SSL Certificates and Keys Using openssl`): a CA, and a server
    certificate it signs with `openssl x509 -req` and no extensions file: X.509 v1. Also a
    self-signed v1 one (`-signkey`). Returns {name: (cert, key)}."""
    d.mkdir(parents=True, exist_ok=True)
    openssl("genrsa", "-out", "ca-key.pem", "2048", cwd=d)
    openssl("req", "-new", "-x509", "-nodes", "-days", "3650", "-key", "ca-key.pem", "-subj", "/CN=v1 test CA",
            "-out", "ca.pem", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-keyout", "server-key.pem",
            "-subj", "/CN=v1 server", "-out", "server-req.pem", cwd=d)
    openssl("x509", "-req", "-in", "server-req.pem", "-days", "3650", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
            "-set_serial", "01", "-out", "server-cert.pem", cwd=d)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "self-key.pem",
            "-subj", "/CN=v1 self-signed", "-out", "self-req.pem", cwd=d)
    openssl("x509", "-req", "-in", "self-req.pem", "-days", "3650", "-signkey", "self-key.pem",
            "-out", "self-cert.pem", cwd=d)
    certs = {"ca-signed": (d / "server-cert.pem", d / "server-key.pem"),
             "self-signed": (d / "self-cert.pem", d / "self-key.pem")}
    for cert, _ in certs.values():
        assert "Version: 1 (0x0)" in openssl("x509", "-in", str(cert), "-noout", "-text", cwd=d)
    return certs


@pytest.fixture(scope="module")
def v1_server(tmp_path_factory):
    """A MariaDB primary serving an X.509 v1 certificate; `app` may log in over TLS only.
    Yields (topology info, certificates, directory). `serve(info, d, cert, key)` changes the
    certificate served."""
    d = tmp_path_factory.mktemp("v1")
    certs = v1_certificates(d)
    serve_files(d, *certs["ca-signed"])
    with start_testkit(0, "--server-arg", f"--ssl-cert={d / 'served-cert.pem'}",
                       "--server-arg", f"--ssl-key={d / 'served-key.pem'}") as info:
        with root(info) as c, c.cursor() as cur:
            cur.execute(f"ALTER USER '{USER}'@'%' REQUIRE SSL")
        yield info, certs, d


def serve_files(d, cert, key):
    shutil.copyfile(cert, d / "served-cert.pem")
    shutil.copyfile(key, d / "served-key.pem")


def serve(info, d, cert, key):
    """The server serves `cert` from now on: MariaDB reads its files again on FLUSH SSL."""
    serve_files(d, cert, key)
    with root(info) as c, c.cursor() as cur:
        cur.execute("FLUSH SSL")
    assert served_der(int(info["primary"].split(":")[1])) == pem_der(cert), "the v1 certificate is not served"


def root(info):
    return pymysql.connect(host="127.0.0.1", port=int(info["primary"].split(":")[1]), user="root",
                           password=info["root_password"], autocommit=True, ssl=TLS_ANY)


def served_der(port):
    with pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, ssl=TLS_ANY) as c:
        return c._sock.getpeercert(binary_form=True)


def pem_der(path):
    return ssl.PEM_cert_to_DER_cert(path.read_text())


@pytest.mark.parametrize("which", ["ca-signed", "self-signed"])
def test_a_backend_with_a_v1_certificate_is_reached_over_tls(v1_server, which, tmp_path):
    info, certs, d = v1_server
    serve(info, d, *certs[which])
    assert_plaintext_refused(int(info["primary"].split(":")[1]), USER, PASSWORD)
    with quick_start(info["primary"], USER, PASSWORD, tmp_path, name=f"manifold-v1-{which}") as m:
        # A client asking for TLS: its statements run on TLS backend connections.
        with pymysql.connect(host="127.0.0.1", port=m.port, user=USER, password=PASSWORD, ssl=TLS_ANY) as c, \
                c.cursor() as cur:
            cur.execute("SELECT 1 + 1")
            assert cur.fetchone() == (2,)
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            assert cur.fetchone()[1] != ""
        # manifold's own connections: the Redis door's, the monitor's.
        redis_roundtrip(m.redis_port, USER, PASSWORD, f"backend-tls:v1:{which}")
        poll("the monitor read @@read_only",
             lambda: [b for b in m.backends() if b["role"] == "primary" and b["read_only"] == "OFF"])


def test_verify_ca_refuses_a_v1_certificate_saying_why(v1_server, tmp_path):
    info, certs, d = v1_server
    serve(info, d, *certs["ca-signed"])
    config = tmp_path / "verify.toml"
    config.write_text(f'[backend.tls]\nmode = "verify_ca"\nca = "{d / "ca.pem"}"\n')
    with quick_start(info["primary"], USER, PASSWORD, tmp_path, ["--config", str(config)],
                     name="manifold-v1-verify-ca") as m:
        with pytest.raises(pymysql.err.MySQLError) as e:
            with pymysql.connect(host="127.0.0.1", port=m.port, user=USER, password=PASSWORD, ssl=TLS_ANY) as c:
                c.query("SELECT 1")
        assert e.value.args[0] == 7701, e.value
        assert "X.509 v1" in e.value.args[1], e.value
