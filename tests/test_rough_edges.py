"""The rough edges a newcomer met on the README's tour, each on real things (the session's MariaDB sandbox,
real CLI runs); the move ones are in tests/move/test_destroy_and_estimates.py, `results show` in the sweep
end-to-end test."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real CLI (module-scoped fixtures cannot use the function-scoped `cli`)."""
    return subprocess.run([sys.executable, "-m", "tuner.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)


def popen_cli(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tuner.cli", *args], cwd=str(REPO), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})


# -- sandbox create / status / server inspect ----------------------------------------------------------------

@pytest.fixture(scope="module")
def created(innotier_home):
    """Two stopped sandboxes: page size given in bytes, and taken from a profile; {name: (create output, form)}."""
    out = {}
    for name, args, expect in (("pg-flag", ["--page-size", "8192"], "8k"),
                               ("pg-profile", ["--profile", "dissertation-tuning"], "16k")):
        r = run("sandbox", "create", name, *args)
        assert r.returncode == 0, r.stderr
        out[name] = (r.stdout, expect)
    yield out
    for name in out:
        run("sandbox", "destroy", name, "--force")


def test_sandbox_create_says_the_page_size_one_way(cli, created):
    for name, (out, expect) in created.items():
        assert f"page size {expect}," in out, out
        status = cli("sandbox", "status", name, check=True).stdout
        assert re.search(rf"^page_size\s+{expect}$", status, re.M), status
        assert cli("sandbox", "list", "--json", check=True).stdout.count(f'"page_size": "{expect}"') >= 1


def test_sandbox_status_of_a_stopped_sandbox_has_no_pid_none(cli, created):
    name = "pg-flag"
    out = cli("sandbox", "status", name, check=True).stdout
    assert re.search(r"^state\s+stopped$", out, re.M)
    assert "None" not in out and not re.search(r"^pid\b", out, re.M), out
    assert json.loads(cli("sandbox", "status", name, "--json", check=True).stdout)["pid"] is None


def test_server_inspect_shows_human_units_beside_bytes(shared_sandbox, cli):
    out = cli("server", "inspect", "--sandbox", shared_sandbox.name, check=True).stdout
    assert re.search(r"^\s+innodb_buffer_pool_size\s+256M \(268435456 bytes\)$", out, re.M), out
    assert re.search(r"^\s+page size\s+16k \(16384 bytes\)$", out, re.M), out
    assert re.search(r"^\s+innodb_log_file_size\s+\S+ \(\d+ bytes\)$", out, re.M), out
    # the JSON keeps raw values for scripts
    model = json.loads(cli("server", "inspect", "--sandbox", shared_sandbox.name, "--json", check=True).stdout)
    assert model["variables"]["innodb_buffer_pool_size"] == "268435456"


# -- tpcc load progress ------------------------------------------------------------------------------------

def test_tpcc_load_progress_never_passes_100_percent_and_bars_come_first(shared_sandbox, cli):
    """Piped, as in a CI log: every bar at done/total with done <= total, then the "loaded in" line."""
    db = "nc_progress"
    try:
        r = cli("tpcc", "load", "--sandbox", shared_sandbox.name, "-w", "1", "--database", db, check=True)
        lines = r.stdout.splitlines()
        bars = [(i, m) for i, ln in enumerate(lines) if (m := re.search(r"(\d+)/(\d+)\s+\d+:\d\d:\d\d", ln))]
        assert len(bars) == 9, r.stdout  # one per TPC-C table
        for _, m in bars:
            assert int(m.group(1)) == int(m.group(2)), m.group(0)  # finished tables: exactly 100%
        loaded = next(i for i, ln in enumerate(lines) if ln.startswith("loaded in "))
        assert loaded > max(i for i, _ in bars), r.stdout
    finally:
        conn = shared_sandbox.connection_spec().connect()
        conn.cursor().execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()


# -- profiles ----------------------------------------------------------------------------------------------

def test_profile_lint_with_a_missing_tier_says_so_and_fails(cli, tmp_path):
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[mysqld]\ninnodb_flush_method = O_DIRECT\n")
    missing = tmp_path / "no-such-tier"
    r = cli("profile", "lint", str(cnf), "--flavor", "mariadb-10.11", "--tier", str(missing))
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1 and f"--tier {missing} does not exist" in r.stderr, r.stderr
    assert "could not probe" not in r.stdout + r.stderr
    assert not missing.exists()  # nothing created


def test_profile_catalog_shows_sources_short_wide_json_and_whole(cli):
    default = cli("profile", "catalog", check=True, env={"COLUMNS": "200"}).stdout
    assert "sources" in default and "MySQL 8.0 innodb-parameters" in default and "MariaDB docs" in default
    assert "https://" not in default
    wide = cli("profile", "catalog", "--wide", check=True, env={"COLUMNS": "250"}).stdout
    assert "https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html#sysvar_innodb_page_size" in wide
    data = json.loads(cli("profile", "catalog", "--json", check=True).stdout)
    assert all(row["sources"] and all(u.startswith("https://") for u in row["sources"])
               for row in data["options"].values())
    one = cli("profile", "catalog", "--option", "innodb_page_size", check=True, env={"COLUMNS": "80"}).stdout
    assert "…" not in one and "..." not in one
    assert "https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html#sysvar_innodb_page_size" in one.splitlines()[-2] + one.splitlines()[-1]


def test_profile_diff_fits_80_columns(cli):
    out = cli("profile", "diff", "dcpmm-4k-dwb-on-o-direct", "dcpmm-4k-dwb-off-o-direct", "--flavor", "mysql-8.0",
              check=True, env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert lines[0] == "A = profile dcpmm-4k-dwb-on-o-direct (mysql-8.0 (newest 8.0 release))"
    assert lines[1] == "B = profile dcpmm-4k-dwb-off-o-direct (mysql-8.0 (newest 8.0 release))"
    assert all(len(ln) <= 80 for ln in lines), out
    assert re.search(r"innodb_doublewrite\s+│ ON\s+│ OFF", out), out


# -- exporter --------------------------------------------------------------------------------------------

def _serve(*args: str) -> tuple[subprocess.Popen, str, str]:
    proc = popen_cli("exporter", "--listen", "127.0.0.1:0", *args)
    line = proc.stderr.readline()
    m = re.search(r"serving (http://\S+)", line)
    if not m:
        proc.kill()
        raise AssertionError(f"exporter did not start: {line}{proc.stderr.read()}")
    return proc, m.group(1), line


def test_exporter_finds_the_tpcc_schema_by_default(tpcc_w1, shared_sandbox):
    proc, url, line = _serve("--sandbox", shared_sandbox.name)
    try:
        assert "tpcc_schema" in line and "TPC-C New-Orders from database tpcc (found on the server)" in line, line
        text = ""
        for _ in range(50):
            with urllib.request.urlopen(url, timeout=10) as resp:
                text = resp.read().decode()
            if "innotier_tpcc_district_orders_total" in text:
                break
            time.sleep(0.2)
        assert re.search(r'^innotier_tpcc_district_orders_total\{[^}]*\} \d', text, re.M), text[-2000:]
        assert 'innotier_collector_success{collector="tpcc_schema"} 1.0' in text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_exporter_on_an_unreachable_server_keeps_the_documented_default(tmp_path):
    proc, url, line = _serve("--socket", str(tmp_path / "no.sock"))
    try:
        assert "tpcc_schema" in line and "database tpcc (default; server not reachable yet)" in line, line
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
