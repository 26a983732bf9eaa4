"""Inside a packaged lab host: a Debian suite's own server package, under the AppArmor profile it ships.

The VM boots like a DBA's Debian server (datadir_mover/lab/packaged_host.py; LAB_PACKAGED names which: mysql-sid,
sid's mysql-server 9.7 as mysql.service under /etc/apparmor.d/usr.sbin.mysqld; mariadb-sid, sid's
mariadb-server 11.8 as mariadb.service under /etc/apparmor.d/mariadbd; mariadb-trixie, Debian 13's
mariadb-server 11.8 as mariadb.service with the empty usr.sbin.mariadbd stub it ships): systemd is PID 1,
apparmor.service has loaded the profiles as the packages installed them (the server's profile file is the
package's, checksum from dpkg's conffile list: the lab wrote no profile), the server runs where its package
put it: mysql-sid on /var/lib/mysql with /run/mysqld/mysqld.sock (compiled in), mariadb-sid on /var/lib/mariadb
with /run/mariadbd/mysqld.sock.  innotier finds that socket itself (tuner.core.system_server: the running
unit's listening socket), and HOME is the datadir the server reports at boot, so one file serves every package.
Where the package ships an empty stub (trixie), the server runs unconfined and every move's plan must say that
nothing confines it and add no rule.

- `innotier move apply datadir --to /mnt/pmem/mysql` onto the DAX mount: the rule goes in the profile's
  local include (with the stub: the plan says nothing confines the server, no rule anywhere), the server is
  active there, confined as at boot, no DENIED line, checksums equal;
- the move back home (finalize, then `move apply datadir --to HOME`): the drop-in gone, the local
  includes as at boot, confined as at boot, no DENIED line, checksums equal;
- the AppArmor negative control (confined hosts): the datadir move with the AppArmor step left out (the
  planner is shown an apparmor.d without the profile, so it plans no rule) fails at START with a DENIED line
  in the kernel log naming the new path, and the mover rolls back or halts: the server active on HOME, every
  row intact;
- on the hosts in packaged_host.HOME_MOVES (trixie's): the datadir under /home, which the unit's
  ProtectHome=true hides from the server: refused in one line naming the setting with --no-systemd-changes,
  nothing changed; moved with the unit drop-in innotier writes (the server active there), and home again (the
  drop-in gone); then the unit's negative control last (a halted move would block the others): the move
  with the drop-in step left out (the planner writes it where systemd does not read units) fails at START,
  the server's own error naming the hidden path, and the mover rolls back: the server active on HOME, every
  row intact.

Run by tests/lab/test_lab_packaged.py (opt-in: INNOTIER_LAB_PACKAGED=1); on any other guest it skips itself.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

import mvhelpers
from labhelpers import cli, cli_json, record, sh
from datadir_mover import apparmor, unit_sandbox
from datadir_mover.lab import packaged_host
from datadir_mover.move import plan as planmod
from datadir_mover.move.executor import Executor
from tuner.core.errors import MoveError
from tuner.core.probe import file_is_dax
from tuner.core import system_server
from tuner.core.server import ConnectionSpec

SERVER = packaged_host.SERVERS.get(os.environ.get("LAB_PACKAGED", ""))
if SERVER is None or not Path("/", SERVER.profile).is_file() \
        or not Path("/proc/1/comm").read_text().startswith("systemd"):
    pytest.skip("not a packaged lab host (tests/lab/test_lab_packaged.py boots one)", allow_module_level=True)

NAME = SERVER.name
PROFILE = f"/{SERVER.profile}"
LOCAL = f"/{SERVER.local}" if SERVER.confined else None
LOCAL_DIR = Path("/etc/apparmor.d/local")
PROFILE_NAME = SERVER.profile_name
# how the server's process is confined from boot to the end: the package's profile enforced, or nothing
CONFINEMENT = f"{PROFILE_NAME} (enforce)" if SERVER.confined else "unconfined"
UNIT = SERVER.unit
PACKAGE = SERVER.packages[0]
COMM = Path(SERVER.binary).name
PMEM = "/mnt/pmem"
TARGET = f"{PMEM}/mysql"
DENIED_TARGET = f"{PMEM}/denied"
DROPIN = f"/{SERVER.conf_dir}/99-innotier-placement.cnf"
HOME_PARENT = "/home/db"          # a DBA's directory under /home (root's, 0755), as tests/test_unit_sandbox.py makes
# /home is on the root file system here, as HOME is: these moves prove the unit's sandboxing, not a tier
SAME_FS = "--allow-same-fs"
HOME_TARGET = f"{HOME_PARENT}/mysql"
HOME_DENIED = f"{HOME_PARENT}/denied"
UNIT_DROPINS = Path(unit_sandbox.UNITS_ROOT, f"{UNIT}.d")


@functools.cache
def _found() -> system_server.FoundSocket:
    """The server's socket as innotier finds it (what `move apply` without --socket uses), once: at boot."""
    return system_server.find_socket()


def _spec() -> ConnectionSpec:
    return ConnectionSpec.from_options(socket=_found().socket)


def _query(sql: str):
    conn = _spec().connect()
    cur = conn.cursor()
    cur.execute(sql)
    value = cur.fetchone()[0]
    conn.close()
    return value


def _datadir() -> str:
    return _query("SELECT @@datadir").rstrip("/")


def _loaded_profiles() -> dict[str, str]:
    out = {}
    for line in Path("/sys/kernel/security/apparmor/profiles").read_text().splitlines():
        name, _, mode = line.rpartition(" (")
        out[name] = mode.rstrip(")")
    return out


def _server_confinement() -> str:
    pid = sh("systemctl", "show", "-p", "MainPID", "--value", UNIT).stdout.strip()
    attr = Path(f"/proc/{pid}/attr/apparmor/current")   # AppArmor's own entry where LSMs stack
    return (attr if attr.exists() else Path(f"/proc/{pid}/attr/current")).read_text().strip()


CLEARED = {"cursor": "", "at": ""}   # the journal's position when the kernel log was last cleared (the journal keeps its lines)


def _clear_denials() -> None:
    sh("dmesg", "-C")
    shown = sh("journalctl", "--no-pager", "-n", "1", "-o", "cat", "--show-cursor", check=False).stdout
    CLEARED["cursor"] = shown.rpartition("-- cursor: ")[2].strip() if "-- cursor: " in shown else ""
    CLEARED["at"] = sh("date", "+%Y-%m-%d %H:%M:%S").stdout.strip()


# What the package's own profile denies at every start of the server, moved or not (the first test shows them at
# boot, before any move): sid's usr.sbin.mysqld allows /proc/*/status but not /proc/PID/cgroup, which MySQL 9.7
# reads (as root in mysql-systemd-start's check and as mysql in the server); sid's mariadbd profile does not let
# MariaDB 11.8 read the kernel's list of loaded profiles (the server's check whether it is confined, for its
# startup notice).  Not innotier's to grant; every other DENIED line counts, a moved path's above all.
PACKAGE_GAPS = {"mysql-sid": re.compile(r'operation="open" class="file" profile="/usr/sbin/mysqld" '
                                        r'name="/proc/\d+/cgroup" .*requested_mask="r"'),
                "mariadb-sid": re.compile(r'operation="open" class="file" profile="mariadbd" '
                                          r'name="/sys/kernel/security/apparmor/profiles" .*requested_mask="r"')}


def _all_denials() -> list[str]:
    """DENIED lines since the last clear: the kernel log, and the journal's audit lines (where journald takes the
    audit messages, the kernel does not print them)."""
    kernel = sh("dmesg").stdout.splitlines()
    since = (["--after-cursor", CLEARED["cursor"]] if CLEARED["cursor"] else
             ["--since", CLEARED["at"]] if CLEARED["at"] else ["-b"])
    audit = sh("journalctl", "-q", "--no-pager", "-o", "cat", *since, "_TRANSPORT=audit", check=False).stdout
    return [ln for ln in kernel + audit.splitlines() if 'apparmor="DENIED"' in ln]


def _denials() -> list[str]:
    """The DENIED lines since the last clear, the package's own gap (PACKAGE_GAPS) left out."""
    gap = PACKAGE_GAPS.get(NAME)
    return [ln for ln in _all_denials() if not (gap and gap.search(ln))]


def _active() -> str:
    return sh("systemctl", "is-active", UNIT, check=False).stdout.strip()


def _local_rules() -> dict[str, str]:
    """Every site-rule file under /etc/apparmor.d/local, by name (a move may add a block to one, never a file)."""
    return {p.name: p.read_text() for p in sorted(LOCAL_DIR.iterdir()) if p.is_file()} if LOCAL_DIR.is_dir() else {}


def _unit_dropins() -> list[str]:
    return sorted(p.name for p in UNIT_DROPINS.glob("99-innotier-*.conf")) if UNIT_DROPINS.is_dir() else []


@pytest.fixture(scope="module")
def at_boot():
    """The host as booted: the local includes, no drop-in, and HOME: the datadir the package's server runs on."""
    return {"local": _local_rules(), "dropin": Path(DROPIN).exists(), "home": _datadir(),
            "unit_dropins": _unit_dropins()}


@pytest.fixture(scope="module")
def rows():
    """A schema of the DBA's and its checksums: every move must leave them equal."""
    conn = _spec().connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS shop")
    cur.execute("CREATE TABLE IF NOT EXISTS shop.orders (id INT PRIMARY KEY AUTO_INCREMENT, item VARCHAR(40), "
                "qty INT) ENGINE=InnoDB")
    # both stop a recursive CTE at 1000 rows by default (MariaDB since 11.x: max_recursive_iterations = 1000)
    cur.execute("SET SESSION cte_max_recursion_depth = 10000" if COMM == "mysqld" else
                "SET SESSION max_recursive_iterations = 10000")
    cur.execute("INSERT INTO shop.orders (item, qty) WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
                "FROM seq WHERE n < 5000) SELECT CONCAT('item-', n), n % 7 FROM seq")
    conn.close()
    sums = mvhelpers.checksums(_spec())
    record(f"{NAME}-checksums-at-start.txt", f"{sums}\n")
    return sums


@pytest.fixture(scope="module")
def pmem():
    cli("tiers", "create", "pmem", "--source", "nvdimm", "--region", "region0", "--mount", PMEM)
    return PMEM


def _server_as_before(rows) -> None:
    assert _active() == "active"
    assert _server_confinement() == CONFINEMENT
    assert _denials() == [], _denials()
    assert mvhelpers.checksums(_spec()) == rows


def test_the_host_runs_the_server_under_the_profile_the_package_ships(request):
    assert Path("/proc/1/comm").read_text().strip() == "systemd"
    # the unit as booted, whatever follows (the first mariadb-sid boot could not be reached on its socket and
    # left no trace of why)
    record(f"{NAME}-unit-at-boot.txt", sh("systemctl", "status", "--no-pager", UNIT, check=False).stdout
           + sh("journalctl", "--no-pager", "-b", "-u", UNIT, check=False).stdout + "\n".join(_all_denials()) + "\n")
    assert _active() == "active", f"{UNIT} is {_active()} at boot: out/lab-packaged/{NAME}-unit-at-boot.txt"
    at_boot = request.getfixturevalue("at_boot")   # connects: after the record above, which a failure would lose
    assert sh("systemctl", "is-active", "apparmor.service").stdout.strip() == "active"
    # the profile is the package's conffile, byte for byte (dpkg recorded its md5 at install)
    conffiles = sh("dpkg-query", "-W", "-f", "${Conffiles}\n", PACKAGE).stdout
    shipped = {ln.split()[0]: ln.split()[1] for ln in conffiles.splitlines() if len(ln.split()) >= 2}
    assert shipped.get(PROFILE) == hashlib.md5(Path(PROFILE).read_bytes()).hexdigest(), conffiles
    if SERVER.confined:
        assert _loaded_profiles().get(PROFILE_NAME) == "enforce"
    else:   # the stub: no file in /etc/apparmor.d attaches a profile to the server, the kernel lists none for it
        assert apparmor.empty_stubs([SERVER.binary]) == [PROFILE], apparmor.empty_stubs([SERVER.binary])
        assert apparmor.find_profile([SERVER.binary]) is None, apparmor.find_profile([SERVER.binary])
        assert not {SERVER.binary, COMM, Path(PROFILE).name} & set(_loaded_profiles()), _loaded_profiles()
    assert _server_confinement() == CONFINEMENT
    # innotier found the socket from the running unit itself (not from a list of guesses), and it is the server's
    found, home = _found(), at_boot["home"]
    assert found.source.startswith(f"{UNIT} (pid "), found
    assert os.path.realpath(found.socket) == os.path.realpath(_query("SELECT @@socket")), found
    # HOME is the package's own datadir: its profile grants it (where one confines the server), its system
    # schema is there
    assert Path(home, "mysql").is_dir(), home
    assert not SERVER.confined or f"{home}/** rwk," in Path(PROFILE).read_text(), home
    options = system_server.option_files()
    version = _query("SELECT @@version")
    record(f"{NAME}-host.txt", f"version {version}\n{sh('dpkg-query', '-W', PACKAGE).stdout}"
           f"{sh('uname', '-r').stdout}{sh('systemctl', '--version').stdout.splitlines()[0]}\n"
           f"{sh('apparmor_parser', '--version').stdout.splitlines()[0]}\n"
           f"datadir {home}; socket {found.socket} (found: {found.source}); option files {list(options.files)} "
           f"set socket={options.options.get('socket')} datadir={options.options.get('datadir')}; "
           f"placement drop-in dir {DROPIN.rpartition('/')[0]}\n"
           f"confinement {_server_confinement()}; unit sandboxing {unit_sandbox.read(UNIT).properties}\n"
           f"boot denials: {_all_denials()}\n")
    assert version.startswith(SERVER.series), version
    assert _denials() == [], _denials()   # at boot, before any move: only the package's own gap, if any


def _gtid_rows() -> list:
    conn = _spec().connect()
    cur = conn.cursor()
    cur.execute("SELECT * FROM mysql.gtid_executed")
    out = cur.fetchall()
    conn.close()
    return out


def test_the_datadir_moves_onto_dax_with_the_rule_in_the_packages_local_include(rows, pmem, at_boot):
    # right after install MySQL 9.7 holds its GTID set in several rows of mysql.gtid_executed and compacts them
    # at the move's restart: the check compares the set, so no restart is needed first (docs/production-server.md)
    before = _gtid_rows() if COMM == "mysqld" else []
    _clear_denials()
    out = cli("move", "apply", "datadir", "--to", TARGET, "--yes").stdout
    record(f"{NAME}-apply.txt", out)
    if COMM == "mysqld":
        record(f"{NAME}-gtid-executed-move.txt", f"before the move: {before}\nafter: {_gtid_rows()}\n")
    assert f"system server ({UNIT})" in out, out
    if SERVER.confined:
        assert f"AppArmor: add rules to {LOCAL} and reload" in out, out
        assert f"{TARGET}/** rwk," in Path(LOCAL).read_text()
    else:   # the plan says nothing confines the server, and no rule went anywhere
        assert "AppArmor: no change" in out and f"AppArmor: {PROFILE} is intentionally empty" in out, out
        assert _local_rules() == at_boot["local"], _local_rules()
    assert _active() == "active"
    assert _datadir() == TARGET
    assert file_is_dax(f"{TARGET}/ibdata1") is True
    _server_as_before(rows)


def test_the_datadir_moves_back_home(rows, at_boot):
    moved = [m for m in cli_json("move", "status") if m["to"] == TARGET and m["phase"] == "committed"]
    assert len(moved) == 1, moved
    move_id = moved[0]["move_id"]
    cli("move", "finalize", "--id", move_id, "--yes")
    _clear_denials()
    out = cli("move", "apply", "datadir", "--to", at_boot["home"], "--yes").stdout
    record(f"{NAME}-back-home.txt", out)
    assert _datadir() == at_boot["home"]
    assert not Path(DROPIN).exists() and _local_rules() == at_boot["local"]
    assert not at_boot["dropin"]
    _server_as_before(rows)
    record(f"{NAME}-checksums-at-end.txt", f"{mvhelpers.checksums(_spec())}\n")


def test_without_the_apparmor_step_the_server_is_denied_the_new_path_and_the_move_rolls_back(rows, pmem, tmp_path,
                                                                                            at_boot):
    if not SERVER.confined:
        pytest.skip(f"nothing confines {COMM} ({PROFILE} is the package's empty stub): no AppArmor step to leave "
                    "out; this host's negative control is the unit's (the last test)")
    # the rule step left out: the planner sees an apparmor.d without mysqld's profile and plans no rule, while
    # the kernel keeps enforcing the package's profile
    blind = tmp_path / "apparmor.d"
    shutil.copytree("/etc/apparmor.d", blind, symlinks=True, ignore=shutil.ignore_patterns("cache", "cache.d"))
    (blind / Path(PROFILE).name).unlink()
    request = planmod.MoveRequest(component="datadir", target=DENIED_TARGET, apparmor_root=str(blind), probe=False)
    plan = planmod.build(request, _spec())
    assert plan.apparmor["action"] == "none" and plan.control["unit"] == UNIT, (plan.apparmor, plan.control)
    _clear_denials()
    with pytest.raises(MoveError) as failed:
        Executor.create(plan, echo=lambda m: print(m, flush=True)).run()
    denied = _all_denials()
    record(f"{NAME}-denied.txt", "\n".join(denied) + f"\n\nthe mover: {failed.value}\n"
           + sh("journalctl", "--no-pager", "-o", "short-monotonic", "-n", "80", "-u", UNIT, check=False).stdout)
    # the mover rolls back by itself, or halts saying what it found and how to finish (both leave every row)
    assert "rolled back" in str(failed.value) or "run `innotier move rollback --id" in str(failed.value), failed.value
    assert any(DENIED_TARGET in ln and COMM in ln for ln in denied), (denied, str(failed.value))
    assert _active() == "active"
    assert _datadir() == at_boot["home"]
    assert _server_confinement() == CONFINEMENT
    assert mvhelpers.checksums(_spec()) == rows


def _home_moves() -> None:
    if NAME not in packaged_host.HOME_MOVES:
        pytest.skip(f"{NAME} is not in packaged_host.HOME_MOVES (the move under /home runs on trixie's host)")
    Path(HOME_PARENT).mkdir(mode=0o755, exist_ok=True)   # root's: only the unit's sandboxing stands in the way


def test_a_datadir_under_home_starts_through_the_units_dropin_and_moves_home_again(rows, at_boot):
    _home_moves()
    hidden = unit_sandbox.reach(unit_sandbox.read(UNIT), HOME_TARGET)
    assert hidden.kind == "inaccessible" and hidden.setting.startswith("ProtectHome="), hidden
    # the opt-out: refused before the stop, one line naming the setting, nothing changed
    refused = cli("move", "apply", "datadir", "--to", HOME_TARGET, "--yes", SAME_FS, "--no-systemd-changes",
                  check=False)
    lines = refused.stderr.strip().splitlines()
    record(f"{NAME}-home-refused.txt", refused.stderr)
    assert refused.returncode != 0 and len(lines) == 1, (refused.returncode, refused.stdout, refused.stderr)
    assert "ProtectHome=" in lines[0] and "--no-systemd-changes" in lines[0], lines[0]
    assert not Path(HOME_TARGET).exists() and _unit_dropins() == at_boot["unit_dropins"]
    assert _active() == "active" and _datadir() == at_boot["home"]
    _clear_denials()
    out = cli("move", "apply", "datadir", "--to", HOME_TARGET, "--yes", SAME_FS).stdout
    record(f"{NAME}-home-apply.txt", out + "\n" + "".join((UNIT_DROPINS / d).read_text() for d in _unit_dropins()))
    assert "ProtectHome=tmpfs" in out and f"BindPaths={HOME_TARGET}" in out, out
    added = [d for d in _unit_dropins() if d not in at_boot["unit_dropins"]]
    assert len(added) == 1, _unit_dropins()
    assert unit_sandbox.read(UNIT).properties.get("ProtectHome") == "tmpfs"   # systemd's own reading of it
    assert _datadir() == HOME_TARGET
    _server_as_before(rows)
    assert SERVER.confined or _local_rules() == at_boot["local"]
    moved = [m for m in cli_json("move", "status") if m["to"] == HOME_TARGET and m["phase"] == "committed"]
    assert len(moved) == 1, moved
    cli("move", "finalize", "--id", moved[0]["move_id"], "--yes")
    _clear_denials()
    back = cli("move", "apply", "datadir", "--to", at_boot["home"], "--yes", SAME_FS).stdout
    record(f"{NAME}-home-back.txt", back)
    assert _datadir() == at_boot["home"]
    assert _unit_dropins() == at_boot["unit_dropins"] and unit_sandbox.read(UNIT).properties.get("ProtectHome") != "tmpfs"
    assert not Path(DROPIN).exists() and _local_rules() == at_boot["local"]
    _server_as_before(rows)
    record(f"{NAME}-checksums-after-home.txt", f"{mvhelpers.checksums(_spec())}\n")


def test_without_the_units_dropin_the_server_cannot_reach_home_and_the_move_rolls_back(rows, tmp_path, at_boot):
    _home_moves()
    # the drop-in step left out: the planner writes it under a directory systemd does not read units from, so
    # the unit keeps ProtectHome=true while everything else of the move is as planned
    ignored = tmp_path / "units"
    request = planmod.MoveRequest(component="datadir", target=HOME_DENIED, units_root=str(ignored), probe=False,
                                  allow_same_fs=True)
    plan = planmod.build(request, _spec())
    assert plan.unit_sandbox["action"] == "dropin" and plan.unit_sandbox["dropin_path"].startswith(str(ignored))
    assert plan.control["unit"] == UNIT, plan.control
    _clear_denials()
    with pytest.raises(MoveError) as failed:
        Executor.create(plan, echo=lambda m: print(m, flush=True)).run()
    since = ["--after-cursor", CLEARED["cursor"]] if CLEARED["cursor"] else ["--since", CLEARED["at"]]
    journal = sh("journalctl", "--no-pager", "-o", "short-monotonic", "-u", UNIT, *since, check=False).stdout
    log_error = system_server.option_files().options.get("log_error")   # where the package sends the server's log
    error_log = Path(log_error).read_text(errors="replace")[-20000:] if log_error and Path(log_error).is_file() else ""
    record(f"{NAME}-home-denied.txt", f"the mover: {failed.value}\n\n{journal}\n{log_error or 'no log_error'}:\n"
                                      f"{error_log}")
    assert "rolled back" in str(failed.value) or "run `innotier move rollback --id" in str(failed.value), failed.value
    # the server's own error (its stderr in the unit's journal, or its error log) names the path the unit hides
    assert any(HOME_DENIED in ln for ln in (journal + error_log).splitlines()), (journal[-3000:], error_log[-1000:])
    assert _active() == "active"
    assert _datadir() == at_boot["home"]
    assert _unit_dropins() == at_boot["unit_dropins"]
    _server_as_before(rows)
