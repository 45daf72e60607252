"""The manifold command line: --version, check-config, hash-password, and flag errors."""

import subprocess

from conftest import ROOT, binary


def run(*args):
    return subprocess.run([binary("manifold"), *args], capture_output=True, text=True, timeout=30)


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("manifold "), r


def test_check_config_accepts_the_example():
    r = run("check-config", str(ROOT / "manifold.example.toml"))
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_check_config_names_the_bad_key(tmp_path):
    text = (ROOT / "manifold.example.toml").read_text()
    cases = {
        "unknown key": (text.replace("[pool]\n", "[pool]\nmax_sise = 3\n"), "max_sise"),
        "bad duration": (text.replace('idle_timeout = "60s"', 'idle_timeout = "sixty"'), "idle_timeout"),
        "bad size": (text.replace('max_allowed_packet = "64M"', 'max_allowed_packet = "64Q"'), "max_allowed_packet"),
        "bad address": (text.replace('primary = "127.0.0.1:3306"', 'primary = "db-without-port"'), "backend.primary"),
        "bad hash": (text.replace("*5BCB3E6AC345B435C7C2E6B7949A04CE6F6563D3", "*5BCB"), "password_native"),
    }
    for name, (body, key) in cases.items():
        f = tmp_path / "bad.toml"
        f.write_text(body)
        r = run("check-config", str(f))
        assert r.returncode != 0, name
        assert key in r.stderr, f"{name}: {r.stderr}"


def test_hash_password_prints_hashes_that_config_accepts(tmp_path):
    r = run("hash-password", "s3cret")
    assert r.returncode == 0
    lines = dict(l.split(" = ", 1) for l in r.stdout.strip().splitlines())
    assert lines["password_native"].startswith('"*') and lines["password_sha2"].startswith('"sha2:')
    f = tmp_path / "c.toml"
    f.write_text(f'[backend]\nprimary = "127.0.0.1:3306"\n[[users]]\nname = "u"\n'
                 f'password_native = {lines["password_native"]}\npassword_sha2 = {lines["password_sha2"]}\n'
                 f'backend_password = "s3cret"\n')
    assert run("check-config", str(f)).returncode == 0


def test_bad_flags_are_refused_with_a_reason():
    r = run("--primary", "127.0.0.1:1", "--user", "no-colon")
    assert r.returncode != 0 and "NAME:PASSWORD" in r.stderr
    r = run("--user", "a:b")
    assert r.returncode != 0 and "backend.primary" in r.stderr
    r = run("--primary", "127.0.0.1:1", "--user", "a:b", "--backend-tls", "sometimes")
    assert r.returncode != 0 and "--backend-tls" in r.stderr
