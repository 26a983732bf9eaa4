"""What persist promises, each shown on a real sandbox on a real tmpfs with the fault injected.

- a sync at shutdown that fails (the backing file system read-only) is recorded; the boot restore then refuses
  in one line naming the generation it would bring back and the loss, changing nothing; ``--accept-loss`` goes on;
- MyISAM and Aria tables come back whole through sync and restore;
- the locations are re-read: a redo log moved after ``persist install`` (by ``innotier move apply redo``, then
  finalized with the backing as the keeper of its volatile target; and by hand) is synced and restored where the
  server now looks for it (with the install-time locations the server would not start: no ib_logfile0);
- a server that refuses connections (SIGSTOP) is running: ``sync --offline`` and ``restore`` refuse it;
- an existing backing directory keeps the mode the DBA gave it;
- CLONE (MySQL 9.7) refuses a MyISAM table by name, and refuses while the clone plugin is not loaded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

import mvhelpers
from sqlhelpers import execute

NAME = "persist-box"


def _sql(spec, *statements: str) -> list:
    return execute(spec.with_database(None), *statements) or []


def _one_line_refusal(r: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith("innotier: staging ")]
    assert r.returncode == 6 and len(lines) == 1, (r.returncode, r.stderr)
    return lines[0]


@pytest.fixture(scope="module")
def box(golden, innotier_home):
    home = Path(innotier_home)
    tier, backing_fs = str(home / "persist-tier"), str(home / "persist-backing-fs")
    mvhelpers.mount_tmpfs(tier, "1G")
    mvhelpers.mount_tmpfs(backing_fs, "1G")   # its own file system: made read-only to fail a sync
    sb = mvhelpers.clone_sandbox(NAME, datadir=os.path.join(tier, "mysql"))
    yield sb, tier, backing_fs
    from tuner.core.sandbox import Sandbox

    try:
        Sandbox.load(NAME).destroy(force=True)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", backing_fs], check=False)
        mvhelpers.unmount(tier)
        mvhelpers.unmount(backing_fs)


def _move_redo_by_hand(sb, from_dir: str, redo_dir: str) -> None:
    """What `innotier move apply redo` leaves behind, done directly: the stopped server's ib_logfile0 in its new
    directory and the mover's placement file naming it (the sandbox reads conf.d last)."""
    from datadir_mover.move import control, placement

    sb.stop("clean")
    os.makedirs(redo_dir)
    os.rename(os.path.join(from_dir, "ib_logfile0"), os.path.join(redo_dir, "ib_logfile0"))
    (sb.conf_d / control.SANDBOX_PLACEMENT).write_text(placement.with_option(None, "innodb_log_group_home_dir", redo_dir))
    sb.start()


@pytest.mark.root
def test_failed_shutdown_sync_is_recorded_and_restore_refuses_silent_loss(box, cli, tmp_path):
    sb, tier, backing_fs = box
    spec = sb.connection_spec()
    backing = os.path.join(backing_fs, "bk")
    os.mkdir(backing, 0o755)
    os.chmod(backing, 0o755)
    _sql(spec, "CREATE DATABASE pz", "CREATE TABLE pz.m (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=MyISAM",
         "CREATE TABLE pz.a (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=Aria",
         "CREATE TABLE pz.i (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB",
         "INSERT INTO pz.m SELECT seq, CONCAT('m', seq) FROM pz.seq_1_to_500",
         "INSERT INTO pz.a SELECT seq, CONCAT('a', seq) FROM pz.seq_1_to_500",
         "INSERT INTO pz.i VALUES (1, 'first')")
    r = cli("persist", "install", "--sandbox", sb.name, "--tier", tier, "--backing", backing, "--interval", "1m",
            "--unit-dir", str(tmp_path / "units"), "--first-sync", "--json")
    assert r.returncode == 0, r.stderr
    assert oct(os.stat(backing).st_mode & 0o777) == "0o755"   # the DBA's directory: not chmodded
    redo_dir = os.path.join(tier, "redo")  # moved after install by the mover, as a DBA does it
    r = cli("move", "apply", "redo", "--sandbox", sb.name, "--to", redo_dir, "--allow-same-fs", "--yes", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["phase"] == "committed", r.stderr
    cli("persist", "sync", "--backing", backing, check=True)  # the volatile target kept: finalize may go on
    r = cli("move", "finalize", "--id", json.loads(r.stdout)["move_id"], "--yes", "--persist-backing", backing)
    assert r.returncode == 0 and not Path(sb.datadir, "ib_logfile0").exists(), r.stderr
    _sql(spec, "INSERT INTO pz.i VALUES (2, 'after the redo move')")
    gen = json.loads(cli("persist", "sync", "--backing", backing, "--json", check=True).stdout)
    assert json.loads(Path(backing, "persist.json").read_text())["locations"]["redo_dir"] == redo_dir
    assert Path(gen["path"], "data", "ib_logfile0").is_file()
    _sql(spec, "INSERT INTO pz.i VALUES (3, 'lost')", "INSERT INTO pz.m VALUES (501, 'lost')")

    sb.stop("clean")
    subprocess.run(["mount", "-o", "remount,ro", backing_fs], check=True)   # the fault: the backing refuses writes
    try:
        failed = cli("persist", "sync", "--backing", backing, "--offline", "--if-clean")
        assert failed.returncode == 6 and "Read-only file system" in failed.stderr, failed.stderr
    finally:
        subprocess.run(["mount", "-o", "remount,rw", backing_fs], check=True)
    assert not Path(backing, "sync-failed.json").exists()      # it could not be written there: the fallback
    st = json.loads(cli("persist", "status", "--backing", backing, "--json", check=True).stdout)
    assert "Read-only file system" in st["missed_sync_at_shutdown"]["reason"]

    mvhelpers.unmount(tier)   # the power loss after the shutdown: the tier's contents are gone
    mvhelpers.mount_tmpfs(tier, "1G")
    before = sorted(os.listdir(backing))
    line = _one_line_refusal(cli("persist", "restore", "--backing", backing, "--if-needed", "--yes"))
    assert f"restoring generation {gen['id']}" in line and "would lose the commits of those" in line, line
    assert "--accept-loss" in line
    assert os.listdir(tier) == [] and sorted(os.listdir(backing)) == before

    r = cli("persist", "restore", "--backing", backing, "--if-needed", "--yes", "--accept-loss", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["restored"] and out["generation"] == gen["id"] and redo_dir in out["dirs"]
    assert Path(redo_dir, "ib_logfile0").is_file() and not Path(sb.datadir, "ib_logfile0").exists()
    assert json.loads(cli("persist", "status", "--backing", backing, "--json", check=True).stdout)[
        "missed_sync_at_shutdown"] is None
    sb.start()
    assert _sql(spec, "SELECT id FROM pz.i ORDER BY id") == [(1,), (2,)]
    assert _sql(spec, "SELECT COUNT(*), SUM(id) FROM pz.m") == [(500, 125250)]   # whole, and nothing after
    assert _sql(spec, "SELECT COUNT(*), SUM(id) FROM pz.a") == [(500, 125250)]
    assert _sql(spec, "CHECK TABLE pz.m, pz.a")[-1][-1] == "OK"

    # an offline generation carries them too (the server stopped: nothing writes them)
    sb.stop("clean")
    cli("persist", "sync", "--backing", backing, "--offline", check=True)
    mvhelpers.unmount(tier)
    mvhelpers.mount_tmpfs(tier, "1G")
    cli("persist", "restore", "--backing", backing, "--if-needed", "--yes", check=True)
    sb.start()
    assert _sql(spec, "SELECT COUNT(*) FROM pz.m UNION ALL SELECT COUNT(*) FROM pz.a") == [(500,), (500,)]
    mvhelpers.data_consistent(spec)


@pytest.mark.root
def test_a_server_refusing_connections_is_running(box, cli, tmp_path):
    """Reached by its socket (as a system server is): a SIGSTOPped server takes no connection, and is no
    stopped server; stopped for real, its locations are read from its option files by its own binary."""
    from datadir_mover import persist

    sb, tier, _ = box
    backing = str(tmp_path / "bk-socket")
    cli("persist", "install", "--socket", sb.socket, "--defaults-file", str(sb.client_cnf), "--tier", tier,
        "--backing", backing, "--unit-dir", str(tmp_path / "units"), check=True)
    cfg = persist.load_config(backing)
    assert cfg.server["pid_file"] == str(sb.pid_file) and cfg.server["server_argv"]
    redo_dir = os.path.join(tier, "redo-socket")      # moved after install: read from the option files
    _move_redo_by_hand(sb, cfg.locations.redo_dir, redo_dir)
    assert oct(os.stat(backing).st_mode & 0o777) == "0o700"   # made by install: private
    pid = sb.running_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(Exception, match="cannot connect"):
            sb.connection_spec().connect(connection_timeout=2)
        for args in (("sync", "--offline"), ("restore", "--yes")):
            line = _one_line_refusal(cli("persist", *args, "--backing", backing))
            assert "the server is running" in line, line
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not list(Path(backing, "generations").iterdir())
    sb.stop("clean")
    gen = json.loads(cli("persist", "sync", "--backing", backing, "--offline", "--json", check=True).stdout)
    assert Path(gen["path"], "data", "ib_logfile0").is_file()   # found in the moved redo directory
    assert gen["files"] > 100                                    # the whole datadir, not the redo alone
    assert persist.load_config(backing).locations.redo_dir == redo_dir
    # killed: a stale pid file, no clean stop: the sync at shutdown is not taken, and that is recorded
    sb.start()
    sb.stop("kill")
    r = cli("persist", "sync", "--backing", backing, "--offline", "--if-clean")
    assert r.returncode == 0 and "did not stop cleanly" in r.stderr
    assert "did not stop cleanly" in json.loads(Path(backing, "sync-failed.json").read_text())["reason"]
    sb.start(recover=True)


@pytest.mark.root
def test_clone_refuses_myisam_and_a_missing_plugin(installed_server):
    """MySQL 9.7's CLONE LOCAL copies InnoDB only: a MyISAM table is refused by name, before anything is copied;
    without the clone plugin the sync refuses too; with neither problem the clone is taken."""
    from tuner.core import sandbox as sbx
    from tuner.core.errors import TierError
    from datadir_mover.persist.sync import _clone

    installed_server("mysql-9.7")
    sb = sbx.create("persist-my97", page_size="16k", server="mysql-9.7",
                    options={"innodb_buffer_pool_size": "64M"})
    try:
        sb.start()
        spec = sb.connection_spec()
        dest = Path(sb.tmpdir, "persist-clone")
        conn = spec.connect()
        try:
            with pytest.raises(TierError, match="clone plugin is not active"):
                _clone(conn, dest)
            _sql(spec, "INSTALL PLUGIN clone SONAME 'mysql_clone.so'", "CREATE DATABASE pz",
                 "CREATE TABLE pz.m (id INT PRIMARY KEY) ENGINE=MyISAM", "CREATE TABLE pz.i (id INT PRIMARY KEY)")
            with pytest.raises(TierError, match=r"would come back empty: pz\.m \(MyISAM\);"):
                _clone(conn, dest)
            assert not dest.exists()
            _sql(spec, "ALTER TABLE pz.m ENGINE=InnoDB")
            _clone(conn, dest)
            assert Path(dest, "pz", "m.ibd").is_file()
        finally:
            conn.close()
    finally:
        sb.destroy(force=True)
