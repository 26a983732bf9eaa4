"""Inside the lab VM in host mode (`--init systemd`): Debian's mariadb.service moved for real, AppArmor enforcing.

The VM boots like the DBA's server: systemd is PID 1, apparmor.service has loaded the image's confining
profile for /usr/sbin/mariadbd in enforce mode, mariadb.service runs on /var/lib/mysql, and this session
runs as innotier-lab.service after the server is up.  The mover finds the server without --sandbox.

- the negative control first: the same datadir move with the AppArmor step left out (the planner is shown
  an apparmor.d without the profile, so it plans no rule) fails at START with a DENIED line in the kernel
  log naming the new path, and the mover rolls back: the server runs on /var/lib/mysql, every row intact;
- then the real `innotier move plan/apply datadir --to /mnt/pmem/mysql` (the CLI, fresh processes): the plan
  names mariadb.service, the drop-in and the profile's local include; apply stops and starts through
  systemctl, writes the rule, reloads the profile; the server runs on the DAX mount, still enforced, with
  no DENIED line since the control;
- the unconfined case: Debian's empty profile as shipped (the confining one unloaded): the plan says there
  is nothing to change and changes nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import mvhelpers
from labhelpers import cli, record, sh
from datadir_mover.move import plan as planmod
from datadir_mover.move.executor import Executor
from tuner.core.errors import MoveError
from tuner.core.probe import file_is_dax
from tuner.core.server import ConnectionSpec

PMEM = "/mnt/pmem"
TARGET = f"{PMEM}/mysql"
DENIED_TARGET = f"{PMEM}/denied"
SOCKET = "/run/mysqld/mysqld.sock"
PROFILE = "/etc/apparmor.d/usr.sbin.mariadbd"
LOCAL = "/etc/apparmor.d/local/usr.sbin.mariadbd"
DROPIN = "/etc/mysql/mariadb.conf.d/99-innotier-placement.cnf"


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
def pmem():
    cli("tiers", "create", "pmem", "--source", "nvdimm", "--region", "region0", "--mount", PMEM)
    return PMEM


def test_the_host_boots_like_a_real_server():
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


def test_debians_empty_profile_means_nothing_to_change(pmem):
    shutil.copy2(f"{PROFILE}.debian", PROFILE)                  # the profile as Debian ships it
    sh("aa-remove-unknown")                                     # unload what no file describes any more
    assert "/usr/sbin/mariadbd" not in _loaded_profiles()
    local_before = Path(LOCAL).read_text()
    plan = json.loads(cli("move", "plan", "tmpdir", "--to", f"{PMEM}/tmp", "--json").stdout)
    assert plan["apparmor"]["action"] == "none" and "intentionally empty" in plan["apparmor"]["reason"], plan
    assert Path(LOCAL).read_text() == local_before
