"""Inside the lab VM in host mode (`--init systemd`): Debian's mariadb.service moved for real, AppArmor enforcing.

The VM boots like the DBA's server: systemd is PID 1, apparmor.service has loaded the image's confining
profile for /usr/sbin/mariadbd in enforce mode, mariadb.service runs on /var/lib/mysql, and this session
runs as innotier-lab.service after the server is up.  The mover finds the server without --sandbox.

- the negative control first: the same datadir move with the AppArmor step left out (the planner is shown
  an apparmor.d without the profile, so it plans no rule) fails at START with a DENIED line in the kernel
  log naming the new path, and the mover rolls back: the server runs on /var/lib/mysql, every row intact;
- then the real `innotier move plan/apply datadir --to /mnt/pmem/mysql` (the CLI; apply in a fresh process):
  the plan names mariadb.service, the drop-in and the profile's local include; apply stops and starts
  through systemctl, writes the rule, reloads the profile; the server runs on the DAX mount, still
  enforced, with no DENIED line since the control;
- the way back: `move rollback` of the finalized move refuses in one line naming the way home, and the move
  back home (`move apply datadir --to /var/lib/mysql`) leaves the server on /var/lib/mysql with the drop-in
  gone and the local include as it was at boot, still enforced, no DENIED line, every row intact;
- the redo log onto md RAID 10 and tmpdir into its own subdirectory of a tmpfs (the mount's root, owned by
  root, is refused and left as it was), each with its rule, still enforced, no DENIED line;
- AppArmor enabled but securityfs unmounted: the plan refuses in one line saying what to mount;
- the unconfined case: Debian's empty profile as shipped (the confining one unloaded): the plan says there
  is nothing to change and changes nothing.

This module runs in the first boot of the reboot group (tests/lab/test_lab_reboot.py), before that boot's
PZRAM test, which saves a boot: at its end the server is stopped and the host put back as it booted (see
host_as_booted).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from pathlib import Path

import pytest

import mvhelpers
from labhelpers import cli, cli_json, record, sh, wipe_md
from datadir_mover.move import plan as planmod
from datadir_mover.move.executor import Executor
from tuner.core.errors import MoveError
from tuner.core.probe import file_is_dax
from tuner.core.server import ConnectionSpec

PMEM = "/mnt/pmem"
HOME = "/var/lib/mysql"
TARGET = f"{PMEM}/mysql"
R10 = "/mnt/r10"
REDO = f"{R10}/redo"
TMPFS = "/mnt/tmp"
TMPDIR = f"{TMPFS}/mysql"
SECURITYFS = "/sys/kernel/security"
DENIED_TARGET = f"{PMEM}/denied"
SOCKET = "/run/mysqld/mysqld.sock"
PROFILE = "/etc/apparmor.d/usr.sbin.mariadbd"
LOCAL = "/etc/apparmor.d/local/usr.sbin.mariadbd"
DROPIN = "/etc/mysql/mariadb.conf.d/99-innotier-placement.cnf"
RAID_DISKS = [f"/dev/vd{c}" for c in "cdef"]   # /dev/vdb is the reboot group's backing disk (it boots this machine)


def _spec() -> ConnectionSpec:
    return ConnectionSpec.from_options(socket=SOCKET)


def _datadir() -> str:
    conn = _spec().connect()
    cur = conn.cursor()
    cur.execute("SELECT @@datadir")
    value = cur.fetchone()[0]
    conn.close()
    return value.rstrip("/")


def _loaded_profiles() -> dict[str, str]:
    """What the kernel enforces: securityfs lists `NAME (MODE)` per loaded profile."""
    out = {}
    for line in Path("/sys/kernel/security/apparmor/profiles").read_text().splitlines():
        name, _, mode = line.rpartition(" (")
        out[name] = mode.rstrip(")")
    return out


def _server_confinement() -> str:
    pid = sh("systemctl", "show", "-p", "MainPID", "--value", "mariadb.service").stdout.strip()
    return Path(f"/proc/{pid}/attr/current").read_text().strip()


def _denials() -> list[str]:
    return [ln for ln in sh("dmesg").stdout.splitlines() if 'apparmor="DENIED"' in ln]


@pytest.fixture(scope="module", autouse=True)
def host_as_booted():
    """The reboot group's first boot goes on in this VM after this module: the server stopped, the profile,
    its local include and the option files as they were at boot (the redo and tmpdir moves stay committed
    here; the next test loads its own datadir), the RAID 10 and the tmpfs gone."""
    profile, local = Path(PROFILE).read_text(), Path(LOCAL).read_text()
    yield
    sh("systemctl", "stop", "mariadb.service")
    Path(DROPIN).unlink(missing_ok=True)
    Path(PROFILE).write_text(profile)
    Path(LOCAL).write_text(local)
    sh("apparmor_parser", "-r", "-W", PROFILE)
    for mount in (TMPFS, R10):
        sh("umount", mount, check=False)
    wipe_md(RAID_DISKS)


@pytest.fixture(scope="module")
def rows():
    """A schema of the DBA's, and its checksums: every move must leave them equal."""
    conn = _spec().connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS shop")
    cur.execute("CREATE TABLE IF NOT EXISTS shop.orders (id INT PRIMARY KEY AUTO_INCREMENT, item VARCHAR(40), "
                "qty INT) ENGINE=InnoDB")
    cur.execute("INSERT INTO shop.orders (item, qty) SELECT CONCAT('item-', seq), seq % 7 FROM shop.seq_1_to_5000")
    conn.close()
    return mvhelpers.checksums(_spec())


@pytest.fixture(scope="module")
def at_boot():
    """What the host looked like before any move: the profile's local include and the drop-in."""
    return {"local": Path(LOCAL).read_text(), "dropin": Path(DROPIN).exists()}


@pytest.fixture(scope="module")
def r10():
    """RAID 10 over the four small disks, its initial resync (256 MiB) let finish before the move: with the
    resync still going (throttled) the server's start on the array took much longer (docs/production-server.md)."""
    wipe_md(RAID_DISKS)
    cli("tiers", "create", "raid", "--level", "10", "--devices", *RAID_DISKS, "--name", "r10", "--chunk", "64K",
        "--mount", R10)
    sh("mdadm", "--wait", "/dev/md/r10", check=False)   # exit 1 when there was nothing to wait for
    return R10


@pytest.fixture(scope="module")
def tmpfs():
    cli("tiers", "create", "ramdisk", "--size", "64M", "--mount", TMPFS)
    return TMPFS


def _server_as_before(rows) -> None:
    """Active, still enforced, no denial since the test cleared the kernel log, every row intact."""
    assert sh("systemctl", "is-active", "mariadb.service").stdout.strip() == "active"
    assert _server_confinement() == "/usr/sbin/mariadbd (enforce)"
    assert _denials() == [], _denials()
    assert mvhelpers.checksums(_spec()) == rows


def _variable(name: str) -> str:
    conn = _spec().connect()
    cur = conn.cursor()
    cur.execute(f"SELECT @@{name}")
    value = cur.fetchone()[0]
    conn.close()
    return value.rstrip("/")


def _one_line_refusal(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, (proc.returncode, proc.stdout, proc.stderr)
    return lines[0]


@pytest.fixture(scope="module")
def pmem():
    cli("tiers", "create", "pmem", "--source", "nvdimm", "--region", "region0", "--mount", PMEM)
    return PMEM


def test_the_host_boots_like_a_real_server(at_boot):
    assert Path("/proc/1/comm").read_text().strip() == "systemd"
    assert sh("systemctl", "is-active", "mariadb.service").stdout.strip() == "active"
    assert sh("systemctl", "is-active", "apparmor.service").stdout.strip() == "active"
    assert _loaded_profiles().get("/usr/sbin/mariadbd") == "enforce"
    assert _server_confinement() == "/usr/sbin/mariadbd (enforce)"
    assert _datadir() == "/var/lib/mysql"
    assert _denials() == [], _denials()
    record("host-mode-profiles", Path("/sys/kernel/security/apparmor/profiles").read_text())
    record("host-mode-systemd-analyze", sh("systemd-analyze", check=False).stdout)


def test_without_the_apparmor_step_the_server_is_denied_the_new_path_and_the_move_rolls_back(rows, pmem, tmp_path):
    # the AppArmor step left out: the planner sees an apparmor.d without the server's profile, so the rule is
    # never written, while the kernel keeps enforcing the real profile
    blind = tmp_path / "apparmor.d"
    shutil.copytree("/etc/apparmor.d", blind, symlinks=True, ignore=shutil.ignore_patterns("cache", "cache.d"))
    (blind / "usr.sbin.mariadbd").unlink()
    request = planmod.MoveRequest(component="datadir", target=DENIED_TARGET, apparmor_root=str(blind), probe=False)
    plan = planmod.build(request, _spec())
    assert plan.apparmor["action"] == "none" and plan.control["unit"] == "mariadb.service", plan.apparmor
    sh("dmesg", "-C")
    with pytest.raises(MoveError, match="rolled back") as failed:
        Executor.create(plan, echo=lambda m: print(m, flush=True)).run()
    denied = _denials()
    record("host-mode-denied.txt", "\n".join(denied) + "\n")
    assert any(DENIED_TARGET in ln and "mariadbd" in ln for ln in denied), (denied, str(failed.value))
    assert sh("systemctl", "is-active", "mariadb.service").stdout.strip() == "active"
    assert _datadir() == "/var/lib/mysql" and not Path(DROPIN).exists()
    assert mvhelpers.checksums(_spec()) == rows
    assert not Path(DENIED_TARGET).exists() or not any(Path(DENIED_TARGET).iterdir())   # the copy is gone


def test_the_system_server_moves_onto_dax_with_the_rule_in_the_profiles_local_include(rows, pmem):
    sh("dmesg", "-C")
    plan = json.loads(cli("move", "plan", "datadir", "--to", TARGET, "--json").stdout)   # no --sandbox
    record("host-mode-plan.json", json.dumps(plan, indent=2))
    assert plan["control"]["kind"] == "system" and plan["control"]["unit"] == "mariadb.service", plan["control"]
    assert plan["placement_file"] == DROPIN
    assert plan["apparmor"]["action"] == "apply" and plan["apparmor"]["local_path"] == LOCAL, plan["apparmor"]
    assert f"{TARGET}/** rwk," in plan["apparmor"]["rules"]
    out = cli("move", "apply", "datadir", "--to", TARGET, "--yes", fresh=True).stdout
    record("host-mode-apply.txt", out)
    assert sh("systemctl", "is-active", "mariadb.service").stdout.strip() == "active"
    assert _datadir() == TARGET
    assert f"datadir = {TARGET}" in Path(DROPIN).read_text() or f"datadir={TARGET}" in Path(DROPIN).read_text()
    assert f"{TARGET}/** rwk," in Path(LOCAL).read_text()
    assert _server_confinement() == "/usr/sbin/mariadbd (enforce)"
    assert file_is_dax(f"{TARGET}/ibdata1") is True
    assert _denials() == [], _denials()
    assert mvhelpers.checksums(_spec()) == rows


def test_rollback_after_finalize_refuses_and_the_datadir_moves_back_home(rows, at_boot):
    moved = [m for m in cli_json("move", "status") if m["to"] == TARGET and m["phase"] == "committed"]
    assert len(moved) == 1, moved
    move_id = moved[0]["move_id"]
    cli("move", "finalize", "--id", move_id, "--yes")
    assert not Path(HOME).exists()                      # finalize removed the emptied source
    line = _one_line_refusal(cli("move", "rollback", "--id", move_id, "--yes", check=False))
    assert "is finalized" in line and f"innotier move apply datadir --to {HOME}" in line, line
    assert _datadir() == TARGET
    sh("dmesg", "-C")
    out = cli("move", "apply", "datadir", "--to", HOME, "--yes").stdout
    record("host-mode-back-home.txt", out)
    assert f"remove {DROPIN} (no option left in it)" in out and f"remove move {move_id}'s rules from {LOCAL}" in out
    assert _datadir() == HOME
    assert not Path(DROPIN).exists() and Path(LOCAL).read_text() == at_boot["local"]
    assert not at_boot["dropin"]
    _server_as_before(rows)


def test_redo_moves_onto_md_raid10_with_its_rule(rows, r10):
    sh("dmesg", "-C")
    out = cli("move", "apply", "redo", "--to", REDO, "--yes").stdout
    record("host-mode-redo-apply.txt", out)
    # the plan, as apply prints it first, names the unit, the drop-in and the AppArmor change
    assert "system server (mariadb.service)" in out and "systemctl stop mariadb.service" in out
    assert f"write {DROPIN} with innodb_log_group_home_dir = {REDO}" in out
    assert f"AppArmor: add rules to {LOCAL} and reload" in out
    assert _variable("innodb_log_group_home_dir") == REDO
    mounts = {f[1]: f[0] for f in (ln.split() for ln in Path("/proc/mounts").read_text().splitlines())}
    assert mounts[R10].startswith("/dev/md"), mounts[R10]
    assert any(p.name.startswith("ib_logfile") for p in Path(REDO).iterdir())
    assert f"innodb_log_group_home_dir = {REDO}" in Path(DROPIN).read_text()
    assert f"{REDO}/** rwk," in Path(LOCAL).read_text()
    _server_as_before(rows)


def test_tmpdir_moves_into_its_own_subdirectory_of_a_tmpfs(rows, tmpfs):
    root = os.stat(TMPFS)
    dropin = Path(DROPIN).read_text()
    line = _one_line_refusal(cli("move", "apply", "tmpdir", "--to", TMPFS, "--yes", check=False))
    assert "changes no directory it did not create" in line and f"{TMPFS}/innotier" in line, line
    assert Path(DROPIN).read_text() == dropin
    sh("dmesg", "-C")
    out = cli("move", "apply", "tmpdir", "--to", TMPDIR, "--yes").stdout
    record("host-mode-tmpdir-apply.txt", out)
    assert f"AppArmor: add rules to {LOCAL} and reload" in out
    assert _variable("tmpdir") == TMPDIR
    made = os.stat(TMPDIR)
    assert (made.st_uid, made.st_mode & 0o7777) == (pwd.getpwnam("mysql").pw_uid, 0o750)
    after = os.stat(TMPFS)
    assert (after.st_uid, after.st_gid, after.st_mode) == (root.st_uid, root.st_gid, root.st_mode)
    # an on-disk internal temporary table (Aria) in the new tmpdir: the server writes there, confined
    conn = _spec().connect()
    cur = conn.cursor()
    cur.execute("SHOW SESSION STATUS LIKE 'Created_tmp_disk_tables'")
    before = int(cur.fetchone()[1])
    cur.execute("SET SESSION tmp_table_size = 16384, max_heap_table_size = 16384")
    cur.execute("SELECT item, COUNT(*) FROM shop.orders GROUP BY item ORDER BY 2 DESC, 1 LIMIT 1")
    cur.fetchall()
    cur.execute("SHOW SESSION STATUS LIKE 'Created_tmp_disk_tables'")
    assert int(cur.fetchone()[1]) > before
    conn.close()
    _server_as_before(rows)


def test_apparmor_enabled_but_securityfs_unmounted_is_one_line_naming_the_mount(pmem):
    local = Path(LOCAL).read_text()
    sh("umount", SECURITYFS)
    try:
        assert Path("/sys/module/apparmor/parameters/enabled").read_text().strip() == "Y"
        reload = sh("apparmor_parser", "-r", "-T", "-W", PROFILE, check=False)   # what the mover would hit
        record("host-mode-reload-without-securityfs.txt", f"exit {reload.returncode}\n{reload.stderr}")
        line = _one_line_refusal(cli("move", "plan", "tmpdir", "--to", f"{PMEM}/tmp2", check=False))
        assert "securityfs is not mounted" in line and f"mount -t securityfs securityfs {SECURITYFS}" in line, line
        assert _server_confinement() == "/usr/sbin/mariadbd (enforce)"   # what was loaded keeps confining
    finally:
        sh("mount", "-t", "securityfs", "securityfs", SECURITYFS)
    assert Path(LOCAL).read_text() == local and not Path(f"{PMEM}/tmp2").exists()
    assert reload.returncode != 0, reload.stderr


def test_debians_empty_profile_means_nothing_to_change(pmem):
    shutil.copy2(f"{PROFILE}.debian", PROFILE)                  # the profile as Debian ships it
    sh("aa-remove-unknown")                                     # unload what no file describes any more
    assert "/usr/sbin/mariadbd" not in _loaded_profiles()
    local_before = Path(LOCAL).read_text()
    plan = json.loads(cli("move", "plan", "tmpdir", "--to", f"{PMEM}/tmp", "--json").stdout)
    assert plan["apparmor"]["action"] == "none" and "intentionally empty" in plan["apparmor"]["reason"], plan
    assert Path(LOCAL).read_text() == local_before
