"""Authentication through manifold: mysql_native_password and caching_sha2_password (fast path,
full authentication over TLS and with the RSA key exchange), failures, users from a config
file. rawmysql records which caching_sha2_password path the server took ("fast", "full",
"rsa", "switch:<plugin>")."""

import subprocess
import time

import pymysql
import pytest

import rawmysql
from conftest import PASSWORD, USER, Manifold, binary


def stop_and_check(m):
    m.stop()
    text = m.log_path.read_text()
    assert "panicked" not in text, f"manifold panicked: see {m.log_path}"
    return text


def hashes(password):
    out = subprocess.run([binary("manifold"), "hash-password", password], capture_output=True, text=True, check=True)
    return out.stdout


def start(topology, tmp_path, toml="", name="manifold-auth"):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(toml)
    return Manifold(topology, ["--config", str(cfg)], log_name=name)


SHA2 = '[mysql]\ndefault_auth_plugin = "caching_sha2_password"\n'


@pytest.fixture
def sha2_manifold(topology, tmp_path):
    """A fresh manifold advertising caching_sha2_password: nobody has logged in yet, so the
    first login of a user goes through full authentication."""
    m = start(topology, tmp_path, SHA2, "manifold-auth-sha2")
    yield m
    stop_and_check(m)




def select1(conn):
    with conn.cursor() as c:
        c.execute("SELECT CURRENT_USER(), 1")
        return c.fetchone()


# ---- mysql_native_password (manifold's default) ---------------------------------------------


@pytest.mark.parametrize("tls", [False, True])
def test_native_password_login(topology, manifold, tls):
    kw = {"ssl": {"ca": manifold.ca, "check_hostname": False}} if tls else {"ssl_disabled": True}
    with manifold.connect(**kw) as c:
        assert c._auth_plugin_name == "mysql_native_password"  # what the handshake advertised
        assert select1(c) == ("app@%", 1)
    raw = rawmysql.connect(manifold.port)
    try:
        assert raw.handshake.auth_plugin == "mysql_native_password"
        assert raw.log == []  # no switch, no extra round trip
        assert raw.scalar("SELECT 2") == "2"
    finally:
        raw.quit()


def access_denied(port, **kw):
    kw.setdefault("ssl_disabled", True)
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(host="127.0.0.1", port=port, **kw)
    return e.value.args


@pytest.mark.parametrize("user,password", [(USER, "wrong"), ("nobody_at_all", "whatever"), (USER, ""),
                                           ("nobody_at_all", "")])
def test_bad_credentials_give_1045_like_mariadb(topology, manifold, user, password):
    got = access_denied(manifold.port, user=user, password=password)
    want = access_denied(topology.primary_port, user=user, password=password)
    yes = "YES" if password else "NO"
    assert got == (1045, f"Access denied for user '{user}'@'127.0.0.1' (using password: {yes})")
    assert got == want
    # The gateway keeps serving.
    with manifold.connect(ssl_disabled=True) as c:
        assert select1(c) == ("app@%", 1)


def test_bad_credentials_raw_error_packet(manifold):
    c = rawmysql.RawConn(manifold.port)
    try:
        with pytest.raises(rawmysql.MySQLError) as e:
            c.login(USER, "wrong")
        assert (e.value.code, e.value.sqlstate) == (1045, "28000")
        assert e.value.message == "Access denied for user 'app'@'127.0.0.1' (using password: YES)"
        assert c.wait_closed(timeout=30) == []
    finally:
        c.close()


# ---- caching_sha2_password ------------------------------------------------------------------


def test_sha2_first_login_over_tls_is_full_then_fast(topology, sha2_manifold):
    first = rawmysql.RawConn(sha2_manifold.port)
    first.login(USER, PASSWORD, tls_ca=sha2_manifold.ca)
    assert first.handshake.auth_plugin == "caching_sha2_password"
    assert first.log == ["full"]  # cleartext password over TLS
    assert first.scalar("SELECT CURRENT_USER()") == "app@%"
    first.quit()
    for tls in (sha2_manifold.ca, None):  # then the fast path, with and without TLS
        again = rawmysql.RawConn(sha2_manifold.port)
        again.login(USER, PASSWORD, tls_ca=tls)
        assert again.log == ["fast"]
        assert again.scalar("SELECT 1") == "1"
        again.quit()


def test_sha2_first_login_without_tls_uses_rsa_then_fast(sha2_manifold):
    first = rawmysql.RawConn(sha2_manifold.port)
    first.login(USER, PASSWORD)
    assert first.log == ["full", "rsa"]
    assert first.scalar("SELECT CURRENT_USER()") == "app@%"
    first.quit()
    again = rawmysql.RawConn(sha2_manifold.port)
    again.login(USER, PASSWORD)
    assert again.log == ["fast"]
    again.quit()


def test_sha2_pymysql_rsa_exchange_first_login(sha2_manifold):
    """PyMySQL without TLS: full authentication, asks for the public key, encrypts with
    `cryptography`; then the fast path; then over TLS."""
    for _ in range(2):
        with sha2_manifold.connect(ssl_disabled=True) as c:
            assert c._auth_plugin_name == "caching_sha2_password"
            assert select1(c) == ("app@%", 1)
    with sha2_manifold.connect() as c:  # TLS preferred
        assert select1(c) == ("app@%", 1)


def test_sha2_pymysql_cleartext_over_tls_first_login(topology, sha2_manifold):
    for _ in range(2):
        with sha2_manifold.connect(ssl={"ca": sha2_manifold.ca, "check_hostname": False}) as c:
            assert select1(c) == ("app@%", 1)


@pytest.mark.parametrize("tls", [False, True])
def test_sha2_wrong_password(topology, sha2_manifold, tls):
    kw = {"ssl": {"ca": sha2_manifold.ca, "check_hostname": False}} if tls else {"ssl_disabled": True}
    want = (1045, "Access denied for user 'app'@'127.0.0.1' (using password: YES)")
    # Before any successful login (full authentication) ...
    assert access_denied(sha2_manifold.port, user=USER, password="wrong", **kw) == want
    assert access_denied(sha2_manifold.port, user="ghost", password="x", **kw) == (
        1045, "Access denied for user 'ghost'@'127.0.0.1' (using password: YES)")
    with sha2_manifold.connect(**kw) as c:
        select1(c)
    # ... and after one (fast path).
    assert access_denied(sha2_manifold.port, user=USER, password="wrong", **kw) == want


def test_sha2_full_auth_first_off_uses_fast_path_at_once(topology, tmp_path):
    m = start(topology, tmp_path, SHA2 + "sha2_full_auth_first = false\n", "manifold-auth-sha2-fast")
    try:
        c = rawmysql.RawConn(m.port)
        c.login(USER, PASSWORD)
        assert c.log == ["fast"]
        c.quit()
    finally:
        stop_and_check(m)


def test_rsa_key_from_config_file(topology, tmp_path):
    """mysql.tls.rsa_private_key: the public key the client receives is the configured one."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = tmp_path / "rsa.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    m = start(topology, tmp_path, SHA2 + f'[mysql.tls]\nrsa_private_key = "{pem}"\n', "manifold-auth-rsa")
    try:
        c = rawmysql.RawConn(m.port)
        hs = c.read_handshake()
        c.send_packet(c.handshake_response(USER, rawmysql.sha2_scramble(PASSWORD, hs.scramble), "caching_sha2_password"))
        assert c.read_packet() == b"\x01\x04"  # perform full authentication
        c.send_packet(b"\x02")
        got = c.read_packet()
        assert got[0] == 1
        served = serialization.load_pem_public_key(got[1:])
        assert served.public_numbers() == key.public_key().public_numbers()
        c.send_packet(rawmysql.sha2_rsa_encrypt(PASSWORD, hs.scramble, got[1:]))
        assert c.read_packet()[0] == 0  # OK
        c.quit()
    finally:
        stop_and_check(m)


# ---- users from a configuration file -------------------------------------------------------


def test_config_file_users_with_each_plugin(topology, tmp_path, mariadb_account):
    """Users defined in [[users]] with hashes from `manifold hash-password`: one with both
    hashes, one native-only, one sha2-only; a client proposing the other plugin is switched."""
    bname, bpw = mariadb_account
    toml = SHA2
    for name, keep in (("both_u", ("password_native", "password_sha2")), ("native_u", ("password_native",)),
                       ("sha2_u", ("password_sha2",))):
        lines = [l for l in hashes(f"{name}-pw").splitlines() if l.split(" ")[0] in keep]
        toml += (f'[[users]]\nname = "{name}"\n' + "\n".join(lines)
                 + f'\nbackend_user = "{bname}"\nbackend_password = "{bpw}"\n')
    m = start(topology, tmp_path, toml, "manifold-auth-users")
    try:
        for name in ("both_u", "native_u", "sha2_u"):
            for kw in ({"ssl_disabled": True}, {"ssl": {"ca": m.ca, "check_hostname": False}}):
                with m.connect(user=name, password=f"{name}-pw", **kw) as c:
                    assert select1(c) == (f"{bname}@%", 1), (name, kw)
            assert access_denied(m.port, user=name, password="nope") == (
                1045, f"Access denied for user '{name}'@'127.0.0.1' (using password: YES)")
        # The handshake advertises caching_sha2_password; native_u is switched to native.
        raw = rawmysql.RawConn(m.port)
        raw.login("native_u", "native_u-pw")
        assert raw.log == ["switch:mysql_native_password"]
        raw.quit()
        # A client proposing mysql_native_password for a sha2-only user is switched to sha2.
        raw = rawmysql.RawConn(m.port)
        raw.login("sha2_u", "sha2_u-pw", plugin="mysql_native_password")
        assert raw.log[0] == "switch:caching_sha2_password"
        raw.quit()
    finally:
        stop_and_check(m)


def test_config_file_check_config(tmp_path):
    """The hashes `manifold hash-password` prints are accepted by `manifold check-config`."""
    cfg = tmp_path / "users.toml"
    cfg.write_text('[backend]\nprimary = "127.0.0.1:3306"\n[[users]]\nname = "x"\n' + hashes("pw")
                   + 'backend_password = "pw"\n')
    out = subprocess.run([binary("manifold"), "check-config", str(cfg)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_per_user_max_connections(topology, tmp_path):
    toml = '[[users]]\nname = "limited"\n' + hashes("lim") + f'backend_user = "{USER}"\nbackend_password = "{PASSWORD}"\nmax_connections = 1\n'
    m = start(topology, tmp_path, toml, "manifold-auth-limit")
    try:
        with m.connect(user="limited", password="lim", ssl_disabled=True) as first:
            with pytest.raises(pymysql.err.OperationalError) as e:
                m.connect(user="limited", password="lim", ssl_disabled=True)
            assert e.value.args[0] == 1226
            assert select1(first)[1] == 1
            # Other users are not limited by it.
            with m.connect(ssl_disabled=True) as other:
                assert select1(other) == ("app@%", 1)
        # The slot is released when the session ends (the server notices the QUIT after the
        # client has moved on: poll, bounded).
        for _ in range(100):
            try:
                again = m.connect(user="limited", password="lim", ssl_disabled=True)
                break
            except pymysql.err.OperationalError as e:
                assert e.args[0] == 1226
                time.sleep(0.1)
        else:
            pytest.fail("the per-user slot was never released")
        with again:
            assert select1(again)[1] == 1
    finally:
        stop_and_check(m)


def test_client_naming_another_plugin_without_data_gets_auth_switch(topology, manifold):
    """What libmariadb does with --default-auth=<plugin other than the advertised one>: it
    names its plugin and sends *no* auth data (it has none computed for that plugin) and
    expects an AuthSwitchRequest carrying a scramble. MariaDB sends one (0xFE); so must
    manifold, instead of treating the empty data as the answer (the mariadb CLI then fails
    with 2012 "Error in server handshake", see test_clients_cli.py)."""
    first = {}
    for label, port in (("direct", topology.primary_port), ("manifold", manifold.port)):
        c = rawmysql.RawConn(port)
        try:
            hs = c.read_handshake()
            assert hs.auth_plugin == "mysql_native_password"
            c.send_packet(c.handshake_response(USER, b"", "caching_sha2_password"))
            first[label] = c.read_packet()[:1]
        finally:
            c.close()
    assert first["direct"] == b"\xfe"
    assert first["manifold"] == b"\xfe", f"manifold answered {first['manifold']!r} instead of an AuthSwitchRequest"
