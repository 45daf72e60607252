"""An unknown user is indistinguishable from a wrong password (issue 26 item 3).

A raw client records every packet manifold sends during the connection phase, from the
handshake response to the final ERR (or OK), for an unknown user and for a wrong password of
each kind of configured user (both hashes, native only, caching_sha2 only), with every
plugin a client may name in its handshake response. The packets are compared after
normalising what is random by nature (scrambles, the RSA key's PEM) and the user name the
error text echoes; sequence ids are kept.

What the real servers do, and what manifold copies: MariaDB (`sql_acl.cc`,
`find_mpvio_user`) checks an unknown name as the configured account a hash of the name
picks, made to fail, so unknown names show the real accounts' mix of plugin switches, the
same account for the same name every time. MySQL (`sql_authentication.cc`, `decoy_user`)
gives an unknown account a random built-in plugin, remembered per name. Both answer a
caching_sha2_password fast-path mismatch with "perform full authentication" (0x01 0x04), then
read the password (cleartext over TLS, RSA-encrypted otherwise) and only then refuse."""

import subprocess
import uuid

import pytest

import rawmysql
from conftest import PASSWORD, USER, Manifold, binary, start_testkit

SHA2 = rawmysql.SHA2
NATIVE = rawmysql.NATIVE
# A plugin manifold does not check: the client is switched to one it does.
OTHER = "client_ed25519"


def hashes(password):
    out = subprocess.run([binary("manifold"), "hash-password", password], capture_output=True, text=True, check=True)
    return out.stdout


def describe(p, user):
    """A server packet of the connection phase, with what is random by nature left out."""
    if p[:1] == b"\xfe":
        end = p.index(b"\0", 1)
        return ("switch", p[1:end].decode(), len(p) - end - 1)
    if p[:1] == b"\x01":
        if p[1:2] in (b"\x03", b"\x04"):
            return ("more", p[1])
        assert p[1:].startswith(b"-----BEGIN PUBLIC KEY-----"), p[:40]
        return ("public key",)
    if p[:1] == b"\xff":
        e = rawmysql.parse_err(p)
        return ("err", e.code, e.sqlstate, e.message.replace(f"'{user}'@", "'<user>'@"))
    if p[:1] == b"\x00":
        return ("ok",)
    return ("other", bytes(p[:16]))


def record(port, user, password, plugin, tls_ca=None):
    """Every packet the server sends from the handshake response on, as (seq, describe(...)),
    for a client naming `plugin` with `password` computed for it. The client follows the
    exchange as libmysqlclient with --get-server-public-key does: it answers a switch for the
    switched plugin, and after "perform full authentication" sends its password in cleartext
    over TLS, else asks for the public key and sends it RSA-encrypted."""
    c = rawmysql.RawConn(port, timeout=30)
    out = []
    try:
        hs = c.read_handshake()
        c.tls = False
        if tls_ca:
            c.start_tls(tls_ca)
        scramble = hs.scramble
        if plugin == SHA2:
            data = rawmysql.sha2_scramble(password, scramble)
        elif plugin == NATIVE:
            data = rawmysql.native_scramble(password, scramble)
        else:
            data = b"\x17" * 64  # an ed25519 signature's size; manifold cannot use it
        caps = rawmysql.DEFAULT_CAPS | (rawmysql.CLIENT_SSL if tls_ca else 0)
        c.send_packet(c.handshake_response(user, data, plugin, caps=caps))
        current = plugin
        while True:
            try:
                p = c.read_packet()
            except (rawmysql.ConnectionClosed, ConnectionResetError):
                out.append(("closed",))
                return out
            seq = (c.seq - 1) & 0xFF
            out.append((seq, describe(p, user)))
            if p[:1] in (b"\xff", b"\x00"):
                return out
            if p[:1] == b"\xfe":
                end = p.index(b"\0", 1)
                current = p[1:end].decode()
                scramble = bytes(p[end + 1:]).rstrip(b"\0")[:20]
                c.send_packet(rawmysql.sha2_scramble(password, scramble) if current == SHA2
                              else rawmysql.native_scramble(password, scramble))
            elif p[:2] == b"\x01\x04":
                if tls_ca:
                    c.send_packet(password.encode() + b"\0")
                else:
                    c.send_packet(b"\x02")
            elif p[:1] == b"\x01" and p[1:2] not in (b"\x03",):
                c.send_packet(rawmysql.sha2_rsa_encrypt(password, scramble, p[1:]))
    finally:
        c.close()


def signature(port, user, password, tls_ca=None):
    """The sequences for every client plugin, one per plugin, in a fixed order."""
    return tuple(tuple(record(port, user, password, plugin, tls_ca)) for plugin in (SHA2, NATIVE, OTHER))


KINDS = {
    "both_u": ("password_native", "password_sha2"),
    "native_u": ("password_native",),
    "sha2_u": ("password_sha2",),
}


@pytest.fixture
def users_manifold(topology, tmp_path_factory):
    """manifold advertising caching_sha2_password with a user of each kind (plus the
    quick-start `app`, which has both hashes). One per test: the tests depend on what its
    caching_sha2 cache holds."""
    # The test makes a few hundred wrong logins from one address: the login throttle (which
    # delays them, never changes their packets) is off, else they would wait up to 30 s each.
    toml = ('[mysql]\ndefault_auth_plugin = "caching_sha2_password"\n'
            '[security]\nfailed_login_threshold = 0\n')
    for name, keep in KINDS.items():
        lines = [line for line in hashes(f"{name}-pw").splitlines() if line.split(" ")[0] in keep]
        toml += (f'[[users]]\nname = "{name}"\n' + "\n".join(lines)
                 + f'\nbackend_user = "{USER}"\nbackend_password = "{PASSWORD}"\n')
    cfg = tmp_path_factory.mktemp("unknown-user") / "manifold-unknown-user.toml"
    cfg.write_text(toml)
    m = Manifold(topology, ["--config", str(cfg)], log_name="manifold-unknown-user")
    yield m
    m.stop_and_check()


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_unknown_user_packets_equal_a_wrong_password(users_manifold, tls):
    m = users_manifold
    ca = m.ca if tls else None
    # Each kind's first login with the right password (nothing cached yet) goes through full
    # authentication; up to the final OK it is exactly what a wrong password gets.
    for name in KINDS:
        right = record(m.port, name, f"{name}-pw", SHA2, ca)
        wrong = record(m.port, name, "wrong", SHA2, ca)
        assert right[-1][1] == ("ok",), right
        assert wrong[-1][1][0] == "err", wrong
        assert right[:-1] == wrong[:-1], (name, right, wrong)
    # After those logins the fast path is open to the right password; a wrong one still gets
    # full authentication then ERR, as an unknown name does.
    known = {name: signature(m.port, name, "wrong", ca) for name in KINDS}
    known[USER] = signature(m.port, USER, "wrong", ca)
    for sig in known.values():
        for seq in sig:
            assert seq[-1][1][:3] == ("err", 1045, "28000"), seq
            assert seq[-1][1][3] == "Access denied for user '<user>'@'127.0.0.1' (using password: YES)"
    # The kinds really differ (a plugin switch for some), so a decoy of one fixed kind would
    # show: every unknown name must look like one configured user in every exchange, always
    # the same for the same name, and unknown names together cover every kind.
    matched = set()
    for i in range(64):
        name = f"ghost_{i}_{uuid.uuid4().hex[:6]}"
        sig = signature(m.port, name, "wrong", ca)
        like = {n for n, s in known.items() if s == sig}
        assert like, f"{name} looks like no configured user:\n{sig}\nknown:\n{known}"
        assert signature(m.port, name, "wrong", ca) == sig, f"{name} changed between attempts"
        matched |= {n for n in like}
    kinds_seen = {frozenset(KINDS.get(n, KINDS["both_u"])) for n in matched}
    assert kinds_seen == {frozenset(v) for v in KINDS.values()}, matched


def test_sha2_fast_path_mismatch_gets_full_authentication(users_manifold):
    """A cached user with a wrong password: 0x01 0x04, the key exchange, then ERR 1045, as
    MySQL answers (not ERR at once, which only a known, cached user would get)."""
    m = users_manifold
    assert record(m.port, "sha2_u", "sha2_u-pw", SHA2)[-1][1] == ("ok",)
    assert record(m.port, "sha2_u", "sha2_u-pw", SHA2) == [(2, ("more", 3)), (3, ("ok",))]
    want = [(2, ("more", 4)), (4, ("public key",)),
            (6, ("err", 1045, "28000", "Access denied for user '<user>'@'127.0.0.1' (using password: YES)"))]
    assert record(m.port, "sha2_u", "wrong", SHA2) == want
    assert record(m.port, "nobody_" + uuid.uuid4().hex[:8], "wrong", SHA2) in (
        want,
        # An unknown name standing for native_u is first switched, as native_u would be.
        record(m.port, "native_u", "wrong", SHA2),
    )


def mysql_testkit():
    return start_testkit(0, "--no-tls", "--mysql")


def test_same_packets_as_mysql_9(users_manifold):
    """The same logins against a real MySQL 9 (whose `app` is a caching_sha2_password
    account): a wrong password of a caching_sha2 user, before and after a good login, gets
    the same packets from both (MySQL's decoy plugin for unknown names is random, so only its
    own consistency is checked for them)."""
    m = users_manifold
    with mysql_testkit() as info:
        port = int(info["primary"].split(":")[1])
        mysql_wrong = record(port, USER, "wrong", SHA2)
        ours_wrong = record(m.port, "sha2_u", "wrong", SHA2)
        assert ours_wrong == mysql_wrong, (ours_wrong, mysql_wrong)
        # MySQL: a good login fills its cache; a wrong password afterwards still goes through
        # full authentication.
        assert record(port, USER, PASSWORD, SHA2)[-1][1] == ("ok",)
        assert record(port, USER, "wrong", SHA2) == mysql_wrong
        ghost = "ghost_" + uuid.uuid4().hex[:8]
        mysql_ghost = record(port, ghost, "wrong", SHA2)
        assert mysql_ghost[-1][1][:2] == ("err", 1045)
        assert record(port, ghost, "wrong", SHA2) == mysql_ghost
        # Native-named client on a caching_sha2 account: switched, then the same exchange.
        assert record(m.port, "sha2_u", "wrong", NATIVE) == record(port, USER, "wrong", NATIVE)
