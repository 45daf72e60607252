"""TLS without configuration: manifold started with the quick-start flags alone offers TLS with a
self-signed certificate it generates in its data directory (as MySQL 8 and ProxySQL do), keeps
it there (mode 0700, key 0600), logs its SHA-256 fingerprint and reuses it after a restart. A
configured certificate wins, `tls = "off"` turns TLS off, and a data directory manifold cannot
trust stops it with an error naming the file. Backends without TLS do not fail TLS clients.

Every client here is also pointed at MariaDB directly with the same options, and must fare
the same through manifold."""

import hashlib
import os
import re
import ssl
import stat
import subprocess
import uuid

import pymysql
import pytest

import rawmysql
from conftest import AUTO_CERT, DATA_DIR, PASSWORD, USER, Manifold, binary, free_ports, start_testkit
from test_clients_cli import cli

CN = "manifold_Auto_Generated_Server_Certificate"
UNVERIFIED = {"check_hostname": False, "verify_mode": ssl.CERT_NONE}


def fingerprint(der):
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def logged_fingerprints(log):
    return re.findall(r"self-signed certificate.*sha256=([0-9A-F:]{95})", log)


def peer_der(port, **ssl_options):
    with pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, ssl=ssl_options) as c:
        assert isinstance(c._sock, ssl.SSLSocket), "no TLS"
        return c._sock.getpeercert(binary_form=True)


def pem_der(path):
    return ssl.PEM_cert_to_DER_cert(open(path).read())


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def cipher_of_backend(conn):
    with conn.cursor() as c:
        c.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        return c.fetchone()[1]


@pytest.mark.parametrize("options", [{}, UNVERIFIED], ids=["ssl={}", "CERT_NONE"])
def test_pymysql_tls_with_no_configuration(topology, manifold, options):
    for port in (topology.primary_port, manifold.port):
        with pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, ssl=options) as c:
            assert isinstance(c._sock, ssl.SSLSocket), port
            assert c._sock.version() in ("TLSv1.2", "TLSv1.3")
            with c.cursor() as cur:
                cur.execute("SELECT 1 + 1")
                assert cur.fetchone() == (2,)
            # backend.tls.mode = as_client: the backend, which has TLS, is reached over TLS too.
            assert cipher_of_backend(c) != ""


def test_generated_certificate_is_the_data_directorys_and_logged(manifold):
    der = peer_der(manifold.port, **UNVERIFIED)
    assert der == pem_der(AUTO_CERT)
    assert logged_fingerprints(manifold.log_text())[-1] == fingerprint(der)
    # Trusting the file itself verifies manifold fully, host name included (127.0.0.1).
    der_verified = peer_der(manifold.port, ca=str(AUTO_CERT))
    assert der_verified == der
    with pymysql.connect(host="127.0.0.1", port=manifold.port, user=USER, password=PASSWORD,
                         ssl={"ca": str(AUTO_CERT)}) as c:
        subject = dict(x[0] for x in c._sock.getpeercert()["subject"])
        assert subject["commonName"] == CN
        sans = c._sock.getpeercert()["subjectAltName"]
        assert ("DNS", "localhost") in sans and ("IP Address", "127.0.0.1") in sans
    assert mode(DATA_DIR) == 0o700
    assert mode(DATA_DIR / "server-key.pem") == 0o600


def test_mariadb_cli_ssl(topology, manifold):
    for port, ca in ((topology.primary_port, topology.ca), (manifold.port, str(AUTO_CERT))):
        out = cli(port, "--ssl", "-e", "status")
        assert re.search(r"^SSL:\s+Cipher in use is \S+", out.stdout, re.M), out.stdout
        out = cli(port, "--ssl", f"--ssl-ca={ca}", "--ssl-verify-server-cert", "-N", "-e", "SELECT 1")
        assert out.stdout == "1\n"


def test_data_dir_is_private_and_the_certificate_survives_a_restart(topology, tmp_path):
    data = tmp_path / "state" / "data"
    prints = []
    for start in range(2):
        m = Manifold(topology, ["--data-dir", str(data)], log_name=f"manifold-tls-restart-{start}")
        try:
            der = peer_der(m.port, **UNVERIFIED)
            log = m.log_text()
        finally:
            m.stop_and_check()
        assert logged_fingerprints(log) == [fingerprint(der)], log
        assert ("generated=true" in log) == (start == 0), log
        prints.append(fingerprint(der))
        assert mode(data) == 0o700
        assert mode(data / "server-key.pem") == 0o600
        assert der == pem_der(data / "server-cert.pem")
    assert prints[0] == prints[1]


def test_xdg_state_home_is_the_default_place(topology, tmp_path):
    m = Manifold(topology, log_name="manifold-tls-xdg", env={"XDG_STATE_HOME": str(tmp_path)})
    try:
        der = peer_der(m.port, **UNVERIFIED)
    finally:
        m.stop_and_check()
    assert der == pem_der(tmp_path / "manifold" / "server-cert.pem")
    assert mode(tmp_path / "manifold") == 0o700


def test_rsa_key_is_kept_in_the_data_dir(topology, tmp_path):
    """caching_sha2_password without TLS: the RSA key is generated at first use into the data
    directory, and the next start hands out the same public key."""
    data = tmp_path / "data"
    cfg = tmp_path / "sha2.toml"
    # Generating an RSA key can take many seconds on a loaded machine: the first login may
    # wait for it longer than the default connect_timeout.
    cfg.write_text('[mysql]\ndefault_auth_plugin = "caching_sha2_password"\nconnect_timeout = "120s"\n')
    keys = []
    for start in range(2):
        m = Manifold(topology, ["--config", str(cfg), "--data-dir", str(data)], log_name=f"manifold-tls-rsa-{start}")
        try:
            c = rawmysql.RawConn(m.port, timeout=120)
            c.login(USER, PASSWORD)
            assert c.log == ["full", "rsa"]
            c.quit()
        finally:
            m.stop_and_check()
        assert mode(data / "private_key.pem") == 0o600
        keys.append((data / "public_key.pem").read_text())
    assert keys[0] == keys[1] and keys[0].startswith("-----BEGIN PUBLIC KEY-----")


def test_rsa_key_in_memory_when_the_data_dir_is_only_for_it(topology, tmp_path):
    """TLS off or a configured certificate: the data directory would hold the RSA key alone. One
    that cannot be made (a service started in / by a user who cannot write there) is warned
    about, naming it, and the key is kept in memory: caching_sha2_password logins without TLS
    work. Only the generated certificate requires the directory."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    data = blocker / "data"
    sha2 = '[mysql]\ndefault_auth_plugin = "caching_sha2_password"\nconnect_timeout = "120s"\n'
    off = tmp_path / "off.toml"
    off.write_text(sha2 + 'tls = "off"\n')
    configured = tmp_path / "configured.toml"
    configured.write_text(sha2)
    for cfg, cert in ((off, False), (configured, True)):
        m = Manifold(topology, ["--config", str(cfg), "--data-dir", str(data)], configured_cert=cert,
                     log_name=f"manifold-tls-rsa-memory-{cfg.stem}")
        try:
            c = rawmysql.RawConn(m.port, timeout=120)
            c.login(USER, PASSWORD)
            assert c.log == ["full", "rsa"]
            c.quit()
            log = m.log_text()
        finally:
            m.stop_and_check()
        warnings = [line for line in log.splitlines() if "kept in memory" in line]
        assert len(warnings) == 1 and str(data) in warnings[0], log
    err = start_failing(topology, tmp_path, "--data-dir", str(data))
    assert str(data) in err, err


def test_configured_certificate_wins(topology, cert_manifold):
    der = peer_der(cert_manifold.port, **UNVERIFIED)
    assert der == pem_der(topology.cert)
    log = cert_manifold.log_text()
    assert "the configured certificate" in log and logged_fingerprints(log) == []
    assert f"sha256={fingerprint(der)}" in log


@pytest.fixture(scope="module")
def plain_backend():
    """A MariaDB without TLS (as a quick start against a server without certificates)."""
    with start_testkit(0, "--no-tls") as info:
        yield info


def test_tls_off_refuses_tls_as_a_server_without_it(plain_backend, tmp_path):
    port = int(plain_backend["primary"].split(":")[1])
    cfg = tmp_path / "off.toml"
    cfg.write_text('[mysql]\ntls = "off"\n')
    fake = type("T", (), {"primary": plain_backend["primary"], "replica_ports": [], "ca": "", "cert": "", "key": ""})
    m = Manifold(fake, ["--config", str(cfg), "--data-dir", str(tmp_path / "data")], log_name="manifold-tls-off")
    try:
        outcomes = []
        for target in (port, m.port):
            c = rawmysql.RawConn(target)
            assert not c.read_handshake().capabilities & rawmysql.CLIENT_SSL
            c.close()
            # Clients that require TLS: the CLI verifying the server, PyMySQL given a CA.
            out = cli(target, "--ssl", "--ssl-verify-server-cert", "-e", "SELECT 1", check=False)
            with pytest.raises(pymysql.err.OperationalError) as e:
                pymysql.connect(host="127.0.0.1", port=target, user=USER, password=PASSWORD,
                                ssl={"ca": str(AUTO_CERT)})
            outcomes.append((out.returncode, out.stderr, e.value.args))
            # Without asking for TLS, both answer.
            assert cli(target, "-N", "-e", "SELECT 1").stdout == "1\n"
            with pymysql.connect(host="127.0.0.1", port=target, user=USER, password=PASSWORD, ssl={}) as c:
                assert not isinstance(c._sock, ssl.SSLSocket)
        assert outcomes[0][0] != 0 and "SSL is required" in outcomes[0][1], outcomes
        assert outcomes[1] == outcomes[0], outcomes
        assert "TLS for clients: off" in m.log_text()
        assert not (tmp_path / "data" / "server-cert.pem").exists()
    finally:
        m.stop_and_check()


def test_tls_client_with_a_backend_without_tls(plain_backend, tmp_path):
    """as_client: the client's TLS ends at manifold when the backend offers none; the client is
    not failed for it. Unless the operator requires backend TLS."""
    fake = type("T", (), {"primary": plain_backend["primary"], "replica_ports": [], "ca": "", "cert": "", "key": ""})
    m = Manifold(fake, log_name="manifold-tls-plain-backend")
    try:
        with m.connect(ssl=UNVERIFIED) as c:
            assert isinstance(c._sock, ssl.SSLSocket)
            assert cipher_of_backend(c) == ""
        assert cli(m.port, "--ssl", "-N", "-e", "SELECT 1").stdout == "1\n"
    finally:
        m.stop_and_check()
    m = Manifold(fake, ["--backend-tls", "required"], log_name="manifold-tls-plain-backend-required")
    try:
        with pytest.raises(pymysql.err.MySQLError):
            with m.connect(ssl=UNVERIFIED, read_timeout=30) as c:
                cipher_of_backend(c)
        assert "does not offer TLS" in m.log_text()
    finally:
        m.stop_and_check()


def start_failing(topology, tmp_path, *args):
    """Runs manifold expecting it to refuse to start; returns its stderr."""
    port, admin, http = free_ports(3)
    out = subprocess.run([binary("manifold"), "--primary", topology.primary, "--user", f"{USER}:{PASSWORD}",
                          "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
                          "--http-listen", f"127.0.0.1:{http}", *args],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode != 0, out.stderr
    return out.stderr


def test_corrupt_key_stops_the_start_naming_the_file(topology, tmp_path):
    data = tmp_path / "data"
    m = Manifold(topology, ["--data-dir", str(data)], log_name="manifold-tls-corrupt")
    m.stop_and_check()
    key = data / "server-key.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    err = start_failing(topology, tmp_path, "--data-dir", str(data))
    assert str(key) in err and "not a usable private key" in err, err
    # The file is left as it was: it may be a key someone relies on.
    assert "not a key" in key.read_text()


def test_certificate_without_its_key_stops_the_start(topology, tmp_path):
    data = tmp_path / "data"
    m = Manifold(topology, ["--data-dir", str(data)], log_name="manifold-tls-no-key")
    m.stop_and_check()
    cert, key = data / "server-cert.pem", data / "server-key.pem"
    pem = cert.read_text()
    key.unlink()
    err = start_failing(topology, tmp_path, "--data-dir", str(data))
    assert str(cert) in err and str(key) in err and "remove the certificate" in err, err
    # Someone may trust that certificate: it is left as it was, and no key is made for it.
    assert cert.read_text() == pem and not key.exists()


def test_data_dir_others_can_write_is_refused(topology, tmp_path):
    data = tmp_path / "open"
    data.mkdir()
    data.chmod(0o777)
    err = start_failing(topology, tmp_path, "--data-dir", str(data))
    assert str(data) in err and "0777" in err, err
    assert not (data / "server-key.pem").exists()


def test_data_dir_that_is_a_link_is_refused(topology, tmp_path):
    """Whoever can change a link could point it at a directory with a key of their own."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    err = start_failing(topology, tmp_path, "--data-dir", str(link))
    assert str(link) in err and "symbolic link" in err, err
    assert not (real / "server-key.pem").exists()


def test_tls_flag_off_and_required_conflict(topology, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[mysql.tls]\nrequired = true\n")
    err = start_failing(topology, tmp_path, "--config", str(cfg), "--tls", "off")
    assert "mysql.tls.required" in err, err
    err = start_failing(topology, tmp_path, "--tls", "sometimes")
    assert "--tls sometimes" in err, err
