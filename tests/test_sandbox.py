"""Sandbox lifecycle and the server model against a real MariaDB 10.11 (no mocks)."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import pytest

from tuner.core import sandbox as sbx
from tuner.core.server import inspect


def _tree(path: Path) -> set[str]:
    """Everything under path (to prove a failed command changed nothing)."""
    if not path.exists():
        return set()
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def _page_size(sb: sbx.Sandbox) -> int:
    conn = sb.connection_spec().connect()
    cur = conn.cursor()
    cur.execute("SELECT @@innodb_page_size")
    (value,) = cur.fetchone()
    conn.close()
    return int(value)


@pytest.mark.parametrize("page,expected", [("4k", 4096), ("8k", 8192), ("16k", 16384), ("32k", 32768), ("64k", 65536)])
def test_page_size_is_set_at_initialization(cli, page, expected):
    name = f"pg{page}"
    r = cli("sandbox", "create", name, "--page-size", page, "--start", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["state"] == "running"
    sb = sbx.Sandbox.load(name)
    assert _page_size(sb) == expected
    # the page size really is in the data files: restarting without the option would fail, so the model reports it
    assert inspect(sb.connection_spec()).page_size == expected
    assert cli("sandbox", "destroy", name, "--force").returncode == 0
    assert not Path(info["dir"]).exists()


def test_lifecycle_start_stop_restart_destroy(cli):
    assert cli("sandbox", "create", "life", "--page-size", "8k").returncode == 0
    sb = sbx.Sandbox.load("life")
    assert sb.state() == sbx.SandboxState.STOPPED
    assert cli("sandbox", "start", "life").returncode == 0
    assert sb.state() == sbx.SandboxState.RUNNING
    pid1 = sb.running_pid()
    # write something, restart, it is still there
    conn = sb.connection_spec().connect()
    conn.cursor().execute("CREATE DATABASE keepme")
    conn.close()
    assert cli("sandbox", "stop", "life").returncode == 0
    assert sb.state() == sbx.SandboxState.STOPPED
    assert cli("sandbox", "start", "life").returncode == 0
    assert sb.running_pid() != pid1
    conn = sb.connection_spec().connect()
    cur = conn.cursor()
    cur.execute("SHOW DATABASES LIKE 'keepme'")
    assert cur.fetchall()
    conn.close()
    _assert_stop_purges_history(cli, sb, "--slow", purges=True)
    assert cli("sandbox", "start", "life").returncode == 0
    _assert_stop_purges_history(cli, sb, "--mode=clean", purges=False)
    assert cli("sandbox", "destroy", "life").returncode == 0
    assert cli("sandbox", "status", "life").returncode != 0


# What only a slow shutdown (innodb_fast_shutdown=0) writes: InnoDB purges the undo history before it stops,
# and says how much is left; a fast shutdown leaves the history for the next start and says nothing of it.
SLOW_SHUTDOWN_LINE = "InnoDB: to purge "


def _assert_stop_purges_history(cli, sb, how: str, purges: bool) -> None:
    """Stop with undo history that purge cannot have removed yet: a read view opened before the updates
    holds it until the server closes the connection at shutdown."""
    reader = sb.connection_spec().connect()
    reader.cursor().execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    writer = sb.connection_spec().connect()
    cur = writer.cursor()
    cur.execute("CREATE TABLE IF NOT EXISTS keepme.h (id INT PRIMARY KEY, v INT)")
    cur.execute("INSERT INTO keepme.h SELECT seq, 0 FROM keepme.seq_1_to_2000 ON DUPLICATE KEY UPDATE v = v + 1")
    for _ in range(20):
        cur.execute("UPDATE keepme.h SET v = v + 1")
    writer.close()
    offset = sb.error_log.stat().st_size
    r = cli("sandbox", "stop", "life", how)
    assert r.returncode == 0, r.stderr
    assert ("(slow)" in r.stdout) == purges
    log = sb.error_log.read_text()[offset:]
    assert "Shutdown complete" in log
    assert (SLOW_SHUTDOWN_LINE in log) == purges, log
    try:
        reader.close()
    except Exception:
        pass  # the server closed it


def test_slow_stop_that_cannot_set_fast_shutdown_fails_and_leaves_it_running(cli, innotier_home):
    assert cli("sandbox", "create", "noslow", "--start").returncode == 0
    sb = sbx.Sandbox.load("noslow")
    good = sb.client_cnf.read_text()
    sb.client_cnf.write_text(good.replace("password=", "password=wrong"))
    try:
        r = cli("sandbox", "stop", "noslow", "--slow")
        assert r.returncode != 0 and r.stdout == ""
        assert len(r.stderr.strip().splitlines()) == 1
        assert "innodb_fast_shutdown=0" in r.stderr and "still running" in r.stderr
        assert sb.state() == sbx.SandboxState.RUNNING
    finally:
        sb.client_cnf.write_text(good)
    assert cli("sandbox", "destroy", "noslow", "--force").returncode == 0


def test_two_sandboxes_at_once_on_different_ports(cli):
    for n in ("twin-a", "twin-b"):
        assert cli("sandbox", "create", n, "--start").returncode == 0
    a, b = sbx.Sandbox.load("twin-a"), sbx.Sandbox.load("twin-b")
    assert a.port != b.port
    assert a.state() == b.state() == sbx.SandboxState.RUNNING
    for sb in (a, b):
        conn = sb.tcp_spec().connect()
        cur = conn.cursor()
        cur.execute("SELECT @@port")
        assert int(cur.fetchone()[0]) == sb.port
        conn.close()
    listed = json.loads(cli("sandbox", "list", "--json").stdout)
    names = {s["name"]: s["state"] for s in listed}
    assert names["twin-a"] == names["twin-b"] == "running"
    for n in ("twin-a", "twin-b"):
        assert cli("sandbox", "destroy", n, "--force").returncode == 0


def test_killed_sandbox_is_reported_and_not_silently_reused(cli):
    assert cli("sandbox", "create", "crashy", "--start").returncode == 0
    sb = sbx.Sandbox.load("crashy")
    os.kill(sb.running_pid(), signal.SIGKILL)
    for _ in range(100):
        if not sb.running_pid():
            break
        import time

        time.sleep(0.05)
    assert sb.state() == sbx.SandboxState.CRASHED
    st = cli("sandbox", "status", "crashy", "--json")
    assert st.returncode != 0 and json.loads(st.stdout)["state"] == "crashed"
    r = cli("sandbox", "start", "crashy")
    assert r.returncode != 0
    assert "not shut down cleanly" in r.stderr and "--recover" in r.stderr
    assert cli("sandbox", "start", "crashy", "--recover").returncode == 0
    assert sb.state() == sbx.SandboxState.RUNNING
    assert cli("sandbox", "destroy", "crashy", "--force").returncode == 0


def test_inspect_reports_real_file_locations(cli, shared_sandbox):
    r = cli("server", "inspect", "--sandbox", "shared", "--json")
    assert r.returncode == 0, r.stderr
    model = json.loads(r.stdout)
    assert model["flavor"] == "mariadb"
    assert model["managed"] == "sandbox"
    loc = model["locations"]
    assert loc["datadir"] == shared_sandbox.datadir
    assert Path(loc["ibdata"], "ibdata1").is_file()
    assert Path(loc["redo"], "ib_logfile0").is_file()
    assert Path(loc["undo"]).is_dir()
    assert loc["doublewrite"] is None  # MariaDB keeps the doublewrite buffer in ibdata
    assert loc["tmpdir"] == str(shared_sandbox.tmpdir)
    # the same through the socket and a defaults file (credentials from the file, not argv)
    r2 = cli("server", "inspect", "--socket", shared_sandbox.socket, "--defaults-file",
             str(shared_sandbox.client_cnf), "--json")
    assert r2.returncode == 0, r2.stderr
    assert json.loads(r2.stdout)["datadir"] == shared_sandbox.datadir
    assert shared_sandbox.client_cnf.stat().st_mode & 0o077 == 0


def test_credentials_never_in_process_arguments(shared_sandbox):
    password = (shared_sandbox.client_cnf.read_text().split("password=")[1].split()[0])
    pid = shared_sandbox.running_pid()
    assert password not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    assert password not in shared_sandbox.cnf.read_text()
    assert password not in Path(shared_sandbox.dir, "sandbox.json").read_text()


# ---------------------------------------------------------------------------
# bad input: one clear line, nothing changed on disk


def _assert_clean_failure(r, *needles):
    assert r.returncode != 0
    err = r.stderr.strip()
    assert err.startswith("innotier: "), err
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, err


def test_bad_page_size(cli, innotier_home):
    before = _tree(innotier_home)
    _assert_clean_failure(cli("sandbox", "create", "bad", "--page-size", "3k"), "3k", "16k")
    assert _tree(innotier_home) == before


def test_port_in_use(cli, innotier_home):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        before = _tree(innotier_home)
        _assert_clean_failure(cli("sandbox", "create", "bad", "--port", str(port)), f"port {port} is in use")
        assert _tree(innotier_home) == before


def test_datadir_not_empty_or_owned_by_another(cli, innotier_home, shared_sandbox, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "precious.ibd").write_bytes(b"x" * 100)
    before = _tree(innotier_home)
    _assert_clean_failure(cli("sandbox", "create", "bad", "--datadir", str(full)), "not empty")
    assert (full / "precious.ibd").read_bytes() == b"x" * 100
    _assert_clean_failure(cli("sandbox", "create", "bad", "--datadir", shared_sandbox.datadir),
                          "belongs to sandbox shared")
    assert _tree(innotier_home) == before


def test_missing_server_binary(cli, innotier_home, tmp_path):
    before = _tree(innotier_home)
    _assert_clean_failure(cli("sandbox", "create", "bad", "--basedir", str(tmp_path)), "no server binary")
    assert _tree(innotier_home) == before


def test_name_with_a_slash(cli, innotier_home):
    before = _tree(innotier_home)
    _assert_clean_failure(cli("sandbox", "create", "a/b"), "not valid")
    assert _tree(innotier_home) == before


def test_start_already_running_and_destroy_running(cli, shared_sandbox):
    _assert_clean_failure(cli("sandbox", "start", "shared"), "already running")
    _assert_clean_failure(cli("sandbox", "destroy", "shared"), "--force")
    assert shared_sandbox.state() == sbx.SandboxState.RUNNING
    assert Path(shared_sandbox.datadir, "ibdata1").exists()


def test_unknown_sandbox_lists_known_ones(cli, shared_sandbox):
    _assert_clean_failure(cli("server", "inspect", "--sandbox", "nope"), "no sandbox named", "shared")


def test_no_server_named(cli):
    _assert_clean_failure(cli("server", "inspect"), "--sandbox NAME")
