"""The `mariadb` command-line client through manifold, compared with the same client directly
against the primary."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PASSWORD, USER, Manifold


def mariadb_bin():
    path = shutil.which("mariadb")
    if path is None:
        pytest.fail("the mariadb client is missing: apt-get install mariadb-client")
    return path


def cli(port, *args, stdin=None, database=None, check=True, timeout=120):
    """Runs the client. Plain TCP unless the arguments say otherwise (the client's default is
    TLS, whose logins to manifold fail intermittently: test_tls_logins_are_reliable covers that
    on its own so that it does not mask everything else)."""
    cmd = [mariadb_bin(), "--no-defaults", "-h127.0.0.1", f"-P{port}", "--protocol=tcp", f"-u{USER}", f"-p{PASSWORD}",
           "--default-character-set=utf8mb4"]
    if not any(a.startswith(("--ssl", "--skip-ssl")) for a in args):
        cmd.append("--skip-ssl")
    if database:
        cmd.append(f"-D{database}")
    cmd += list(args)
    p = subprocess.run(cmd, input=stdin, capture_output=True, encoding="utf-8", errors="surrogateescape",
                       timeout=timeout)
    if check:
        assert p.returncode == 0, f"{cmd} exited {p.returncode}: {p.stderr}"
    return p


def both(topology, manifold, *args, **kw):
    return cli(manifold.port, *args, **kw), cli(topology.primary_port, *args, **kw)


def stop_and_check(m):
    m.stop()
    text = m.log_path.read_text()
    assert "panicked" not in text, f"manifold panicked: see {m.log_path}"
    return text


def test_execute_several_statements(topology, manifold, schema):
    sql = ("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(30), d DECIMAL(8,3), n INT NULL); "
           "INSERT INTO t VALUES (1, 'one', 1.5, NULL), (2, 'dos 🐬', -2.25, 7); "
           "UPDATE t SET n = 0 WHERE id = 1; "
           "SELECT * FROM t ORDER BY id; "
           "SELECT COUNT(*) AS c, SUM(d) AS total FROM t; "
           "SELECT DATABASE(), @@character_set_client; "
           "DROP TABLE t")
    via, direct = both(topology, manifold, "-e", sql, database=schema)
    assert via.stdout == direct.stdout
    assert "2\tdos 🐬\t-2.250\t7" in via.stdout
    assert f"{schema}\t" in via.stdout


BATCH = r"""
CREATE TABLE b (id INT PRIMARY KEY, ti TINYINT, f DOUBLE, dt DATETIME(3), tm TIME, txt TEXT,
                bin VARBINARY(10), j JSON, e ENUM('x','y'), bt BIT(4)) CHARSET utf8mb4;
INSERT INTO b VALUES (1, 1, 1.5, '2024-01-02 03:04:05.678', '-10:00:00', 'tab\there', X'00FF', '{"a":1}', 'x', b'1010'),
                     (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
                     (3, -128, -1e-300, '1000-01-01 00:00:00', '838:59:59', 'emoji 🐬 ünï', X'', '[]', 'y', b'0');
SELECT * FROM b ORDER BY id;
SELECT id, HEX(bin), LENGTH(txt), CHAR_LENGTH(txt) FROM b ORDER BY id;
INSERT IGNORE INTO b (id, ti) VALUES (4, 1000);
SELECT CAST('7x' AS SIGNED) AS warned;
SELEC broken;
INSERT INTO b (id) VALUES (1);
DELIMITER //
CREATE PROCEDURE two() BEGIN SELECT 1 AS first; SELECT 'a' AS x, 'b' AS y; END //
DELIMITER ;
CALL two();
SELECT SUM(id) FROM b;
SHOW CREATE TABLE b;
DROP PROCEDURE two;
DROP TABLE b;
"""


def normalise(text):
    """Drops what legitimately differs between two servers (none expected in batch output)."""
    return text


def test_batch_output_equals_direct(topology, manifold, schema):
    for mode in (["--batch"], ["--table"], ["--batch", "--column-type-info"], ["--xml"], ["--batch", "--vertical"]):
        via, direct = both(topology, manifold, *mode, "--force", "--show-warnings", stdin=BATCH, database=schema, check=False)
        assert via.returncode == direct.returncode, (mode, via.stderr, direct.stderr)
        assert normalise(via.stdout) == normalise(direct.stdout), mode
        assert via.stderr == direct.stderr, mode
        assert "ERROR 1064 (42000) at line" in via.stderr
        assert "ERROR 1062 (23000) at line" in via.stderr
        assert "emoji 🐬 ünï" in via.stdout


STABLE_STATUS = ("Current database:", "Current user:", "SSL:", "Current pager:", "Using delimiter:", "Server:",
                 "Protocol version:", "Connection:", "Server characterset:", "Db     characterset:",
                 "Client characterset:", "Conn.  characterset:")


def status_lines(out):
    return [line for line in out.splitlines() if line.startswith(STABLE_STATUS)]


@pytest.mark.parametrize("how", ["-e", "stdin"])
def test_status_shows_tls_cipher(topology, cert_manifold, schema, how):
    """With the certificate the server has (configured), verified as directly."""
    manifold = cert_manifold
    tls = ["--ssl", f"--ssl-ca={topology.ca}", "--ssl-verify-server-cert"]
    if how == "-e":
        via, direct = both(topology, manifold, *tls, "-e", "status", database=schema)
    else:
        via, direct = both(topology, manifold, *tls, stdin="\\s\n", database=schema)
    ssl_line = [line for line in via.stdout.splitlines() if line.startswith("SSL:")]
    assert ssl_line and re.match(r"SSL:\s+Cipher in use is \S+", ssl_line[0]), via.stdout
    assert status_lines(via.stdout) == status_lines(direct.stdout)
    assert "-manifold" in via.stdout  # server version names the gateway
    # Without TLS.
    via, direct = both(topology, manifold, "--skip-ssl", "-e", "status", database=schema)
    assert re.search(r"^SSL:\s+Not in use", via.stdout, re.M), via.stdout
    assert status_lines(via.stdout) == status_lines(direct.stdout)


def test_tls_logins_are_reliable(topology, manifold):
    """30 TLS logins in a row (--ssl-verify-server-cert against the test CA directly, against
    manifold's generated certificate through it): every one works directly, and must through
    manifold."""
    failures = {"direct": [], "manifold": []}
    for name, port, ca in (("direct", topology.primary_port, topology.ca), ("manifold", manifold.port, manifold.ca)):
        args = ["--ssl", f"--ssl-ca={ca}", "--ssl-verify-server-cert", "-N", "-e", "SELECT 1"]
        for _ in range(30):
            out = cli(port, *args, check=False)
            if out.returncode != 0 or out.stdout != "1\n":
                failures[name].append(out.stderr.strip())
    assert failures["direct"] == []
    assert failures["manifold"] == [], f"{len(failures['manifold'])}/30 failed: {failures['manifold'][0]}"


def test_verify_server_cert_fails_without_the_ca(topology, manifold):
    """--ssl-verify-server-cert with the system CAs only (which do not include the test CA)
    refuses the certificate, through manifold as directly."""
    via, direct = both(topology, manifold, "--ssl", "--ssl-verify-server-cert", "-e", "SELECT 1", check=False)
    assert direct.returncode != 0
    assert via.returncode != 0
    assert "ERROR 2026" in via.stderr and "ERROR 2026" in direct.stderr, (via.stderr, direct.stderr)


def test_source_sql_file(topology, manifold, schema, tmp_path):
    inner = tmp_path / "inner.sql"
    inner.write_text("INSERT INTO s VALUES (3, 'from inner');\nSELECT 'inner done' AS msg;\n")
    outer = tmp_path / "outer.sql"
    outer.write_text(
        "CREATE TABLE s (id INT PRIMARY KEY, v VARCHAR(20));\n"
        "INSERT INTO s VALUES (1, 'a'), (2, 'b');\n"
        f"source {inner}\n"
        "SELECT * FROM s ORDER BY id;\n"
        "DROP TABLE s;\n"
    )
    via, direct = both(topology, manifold, "-e", f"source {outer}", database=schema)
    assert via.stdout == direct.stdout
    assert "3\tfrom inner" in via.stdout
    via2, direct2 = both(topology, manifold, stdin=f"source {outer}\n", database=schema)
    assert via2.stdout == direct2.stdout == via.stdout


def test_load_data_local_infile(topology, manifold, schema, tmp_path):
    data = tmp_path / "rows.csv"
    data.write_text("".join(f"{i},\"name {i}\",{i % 10}\n" for i in range(1, 3001)))
    create = "CREATE TABLE IF NOT EXISTS li (id INT PRIMARY KEY, name VARCHAR(30), k INT)"
    load = (f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE li FIELDS TERMINATED BY ',' "
            "OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\n'")
    out = cli(manifold.port, "--local-infile=1", "-vvv", "-e", f"{create}; {load}", database=schema)
    assert "3000 rows affected" in out.stdout, out.stdout
    out = cli(manifold.port, "-N", "-e", "SELECT COUNT(*), SUM(id), SUM(k) FROM li", database=schema)
    assert out.stdout == "3000\t4501500\t13500\n"
    assert cli(manifold.port, "-N", "-e", "SELECT name FROM li WHERE id = 2999", database=schema).stdout == "name 2999\n"
    # With --local-infile=0 the client refuses, through manifold as directly.
    via, direct = both(topology, manifold, "--local-infile=0", "-e", f"{create}; {load}", database=schema, check=False)
    assert via.returncode == direct.returncode != 0
    assert via.stderr == direct.stderr
    # The loaded rows are there once (the refused load added nothing).
    assert cli(manifold.port, "-N", "-e", "SELECT COUNT(*) FROM li", database=schema).stdout == "3000\n"


@pytest.mark.parametrize("tls", ["--ssl", "--skip-ssl"])
def test_default_auth_caching_sha2_against_default_manifold(topology, manifold, tls):
    """manifold advertises mysql_native_password (its default); the client starts with
    caching_sha2_password and sends no auth data (it had none for that plugin). Directly,
    MariaDB answers with an AuthSwitchRequest and the login succeeds."""
    args = ["--default-auth=caching_sha2_password", tls, "-N", "-e", "SELECT CURRENT_USER()"]
    direct = cli(topology.primary_port, *args, check=False)
    assert direct.returncode == 0, direct.stderr
    via = cli(manifold.port, *args, check=False)
    assert via.returncode == 0, f"through manifold: {via.stderr.strip()}"
    assert via.stdout == direct.stdout


@pytest.fixture
def sha2_manifold(topology, tmp_path):
    cfg = tmp_path / "sha2.toml"
    cfg.write_text('[mysql]\ndefault_auth_plugin = "caching_sha2_password"\n')
    m = Manifold(topology, ["--config", str(cfg)], log_name="manifold-cli-sha2")
    yield m
    stop_and_check(m)


def test_caching_sha2_manifold_rsa_then_tls_then_fast(sha2_manifold):
    """manifold advertising caching_sha2_password: first login without TLS (full
    authentication with the RSA public key the client requests), then with TLS, then again
    without (fast path): each works with the stock client and its default plugin choice."""
    for args in (["--skip-ssl"], ["--ssl"], ["--skip-ssl"], ["--default-auth=caching_sha2_password", "--skip-ssl"],
                 ["--default-auth=caching_sha2_password", "--ssl"]):
        out = cli(sha2_manifold.port, *args, "-N", "-e", "SELECT CURRENT_USER(), 1 + 1", check=False)
        assert out.returncode == 0, (args, out.stderr)
        assert out.stdout == "app@%\t2\n", args


def test_caching_sha2_manifold_full_auth_over_tls_first(sha2_manifold):
    out = cli(sha2_manifold.port, "--ssl", "-e", "status")
    assert re.search(r"^SSL:\s+Cipher in use is", out.stdout, re.M)
    out = cli(sha2_manifold.port, "--skip-ssl", "-N", "-e", "SELECT 3")
    assert out.stdout == "3\n"


def test_default_auth_native_against_caching_sha2_manifold(sha2_manifold):
    """The reverse: manifold advertises caching_sha2_password, the client insists on
    mysql_native_password (it sends an empty response naming that plugin). A MySQL server
    answers with an AuthSwitchRequest; the user has a native hash, so this must log in."""
    out = cli(sha2_manifold.port, "--default-auth=mysql_native_password", "--skip-ssl", "-N", "-e", "SELECT 1", check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "1\n"


def test_wrong_password_and_unknown_user(topology, manifold):
    for user in (USER, "nobody_here"):
        cmd = [mariadb_bin(), "--no-defaults", "-h127.0.0.1", "--protocol=tcp", f"-u{user}", "-pwrong", "-e", "SELECT 1"]
        via = subprocess.run(cmd + [f"-P{manifold.port}"], capture_output=True, text=True, timeout=60)
        direct = subprocess.run(cmd + [f"-P{topology.primary_port}"], capture_output=True, text=True, timeout=60)
        assert via.returncode == direct.returncode == 1
        assert via.stderr == direct.stderr
        assert f"ERROR 1045 (28000): Access denied for user '{user}'@'127.0.0.1' (using password: YES)" in via.stderr
