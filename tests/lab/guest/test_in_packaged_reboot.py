"""Inside the mysql-sid packaged lab host, over three boots of the same machine: Debian's MySQL 9.7 on a PZRAM tier,
persisted by CLONE under the AppArmor profile the package ships, across a real reboot and a power cut.

The host side (tests/lab/test_lab_packaged_reboot.py) boots the same disks three times and runs one test here per
boot; the state between boots is a JSON file in the run share ($LAB_OUT, on the host).

1. `mysql.service` (sid's mysql-server, confined by /etc/apparmor.d/usr.sbin.mysqld, enforced) moved with
   `innotier move apply datadir` onto an ext4 zram tier at /mnt/zram; `innotier persist install` into the real
   systemd, the backing store on a persistent virtual disk (/dev/vdb at /srv/pzram, in fstab): its plan names
   the profile, its local include and the rule for <backing>/clone-staging, and reloads the profile; rows
   committed; `innotier persist sync` (an online CLONE written by the server as `mysql`, under the enforced
   profile: no DENIED line) and the timer's own sync unit (the same, run by systemd); more rows (kept only by
   the sync at shutdown); then `systemctl reboot`.
2. After the reboot: the DBA's tier unit made the zram device again, the restore unit ran before mysql.service
   (systemd's timestamps), the server is active on the restored tier, still enforced, no DENIED line since
   boot, every row is back, the CLONE generation kept as the previous one; a CLONE sync in this boot passes
   too (the rule came back with the profile at boot); rows after it; then a power cut (qemu killed).
3. After the cut: the restore brought back that CLONE generation exactly (its rows, none of those after it),
   before the server, enforced, no DENIED line; `persist uninstall` takes the rule out and reloads the profile,
   and the negative control: a CLONE sync without the rule is denied by the enforced profile (a DENIED line
   naming the staging directory), fails in one line, flips nothing and leaves staging empty; a clean power-off.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from pathlib import Path

import pytest

from labhelpers import OUT, cli, record, sh
from reboothelpers import Rows, StateFile, zram_tier_unit, backing_disk, install_innotier_on_the_host, mount_source, unit_time
from datadir_mover import persist
from datadir_mover.lab import packaged_host
from datadir_mover.persist import clone_staging
from tuner.core import system_server
from tuner.core.server import ConnectionSpec

SERVER = packaged_host.SERVERS.get(os.environ.get("LAB_PACKAGED", ""))
if SERVER is None or SERVER.name != "mysql-sid" or not Path("/", SERVER.profile).is_file() \
        or not Path("/proc/1/comm").read_text().startswith("systemd"):
    pytest.skip("not the mysql-sid packaged lab host (tests/lab/test_lab_packaged_reboot.py boots it)",
                allow_module_level=True)

UNIT = SERVER.unit
LOCAL = f"/{SERVER.local}"
CONFINEMENT = f"{SERVER.profile_name} (enforce)"
TIER, TARGET = "/mnt/zram", "/mnt/zram/mysql"
BACKING_DISK, BACKING_MNT = "/dev/vdb", "/srv/pzram"
BACKING = f"{BACKING_MNT}/backing"
RESTORE_UNIT = f"innotier-persist-{persist.unit_slug(TIER)}.service"
TIMER = f"innotier-persist-sync-{persist.unit_slug(TIER)}.timer"
SYNC_UNIT = f"innotier-persist-sync-{persist.unit_slug(TIER)}.service"
TIER_UNIT = "pzram-tier.service"
STATE = OUT / "packaged-pzram-state.json"
INSTALL_DIR = "/opt/innotier-src"   # innotier on the host's own disk: the units run it at boot and at shutdown
# the package's own gap at every start of the server, moved or not (test_in_packaged_host.PACKAGE_GAPS says why)
PACKAGE_GAP = re.compile(r'operation="open" class="file" profile="/usr/sbin/mysqld" name="/proc/\d+/cgroup" '
                         r'.*requested_mask="r"')

# The DBA's unit that makes the tier again at every boot (zram is RAM), before innotier's restore fills it
TIER_UNIT_TEXT = zram_tier_unit(TIER, RESTORE_UNIT, UNIT)


def _spec() -> ConnectionSpec:
    return ConnectionSpec.from_options(socket=system_server.find_socket().socket)


STATE_FILE = StateFile(STATE)
_state, _save = STATE_FILE.read, STATE_FILE.save

ROWS = Rows(_spec)
_query, _commit_rows, _ids = ROWS.query, ROWS.commit, ROWS.ids


def _confinement() -> str:
    pid = sh("systemctl", "show", "-p", "MainPID", "--value", UNIT).stdout.strip()
    attr = Path(f"/proc/{pid}/attr/apparmor/current")
    return (attr if attr.exists() else Path(f"/proc/{pid}/attr/current")).read_text().strip()


CLEARED = {"cursor": ""}


def _clear_denials() -> None:
    sh("dmesg", "-C")
    shown = sh("journalctl", "--no-pager", "-n", "1", "-o", "cat", "--show-cursor", check=False).stdout
    CLEARED["cursor"] = shown.rpartition("-- cursor: ")[2].strip() if "-- cursor: " in shown else ""


def _denials() -> list[str]:
    """DENIED lines since the last clear (this boot when none), kernel log and journal's audit lines, the
    package's own gap left out."""
    since = ["--after-cursor", CLEARED["cursor"]] if CLEARED["cursor"] else ["-b"]
    audit = sh("journalctl", "-q", "--no-pager", "-o", "cat", *since, "_TRANSPORT=audit", check=False).stdout
    lines = sh("dmesg").stdout.splitlines() + audit.splitlines()
    return [ln for ln in lines if 'apparmor="DENIED"' in ln and not PACKAGE_GAP.search(ln)]


def _on_the_tier() -> None:
    assert sh("systemctl", "is-active", UNIT).stdout.strip() == "active"
    assert _query("SELECT @@datadir")[0][0].rstrip("/") == TARGET
    assert re.match(r"^/dev/zram\d+$", mount_source(TARGET)), mount_source(TARGET)
    assert _confinement() == CONFINEMENT
    assert _denials() == [], _denials()


def _clone_generation(gen: dict) -> None:
    """A CLONE generation as root keeps it: every entry root's (0700 / 0600), the staging directory the server's
    user's and empty."""
    assert gen["method"] == "clone", gen
    data = Path(gen["path"], "data")
    for dirpath, dirs, files in os.walk(data):
        for p in [dirpath] + [os.path.join(dirpath, f) for f in files]:
            st = os.lstat(p)
            want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, want), p
    staging = Path(BACKING, clone_staging.STAGING)
    mysql_uid = os.stat(TARGET).st_uid
    assert mysql_uid != 0 and os.stat(staging).st_uid == mysql_uid and os.listdir(staging) == []


def _sync(what: str) -> dict:
    _clear_denials()
    t0 = time.monotonic()
    gen = json.loads(cli("persist", "sync", "--backing", BACKING, "--json").stdout)
    print(f"{what}: generation {gen['id']} by {gen['method']} in {time.monotonic() - t0:.1f} s", flush=True)
    _clone_generation(gen)
    assert _denials() == [], _denials()
    return gen


# ---- boot 1 -----------------------------------------------------------------------------------------

def test_boot1_mysql_on_zram_persisted_by_clone_under_its_profile_then_reboot():
    assert _confinement() == CONFINEMENT and sh("systemctl", "is-active", UNIT).stdout.strip() == "active"
    install_innotier_on_the_host(INSTALL_DIR)
    backing_disk(BACKING_DISK, BACKING_MNT)
    cli("tiers", "create", "zram", "--size", "1G", "--fs", "ext4", "--mount", TIER)
    Path(f"/etc/systemd/system/{TIER_UNIT}").write_text(TIER_UNIT_TEXT)
    sh("systemctl", "daemon-reload")
    sh("systemctl", "enable", TIER_UNIT)   # enabled, not started: this boot's tier was made by innotier
    _clear_denials()
    record("packaged-pzram-move.txt", cli("move", "apply", "datadir", "--to", TARGET, "--yes").stdout)
    _on_the_tier()

    if not _query("SELECT 1 FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'clone' AND PLUGIN_STATUS = 'ACTIVE'"):
        _query("INSTALL PLUGIN clone SONAME 'mysql_clone.so'")
    _query("CREATE DATABASE pz")
    _query("CREATE TABLE pz.commits (id INT AUTO_INCREMENT PRIMARY KEY, phase VARCHAR(32) NOT NULL, "
           "seq INT NOT NULL, at DOUBLE NOT NULL) ENGINE=InnoDB")
    before_install = _commit_rows("before-install", 50)

    _clear_denials()
    # a 1 h timer: it does not fire during the test; its service is started by hand below
    r = cli("persist", "install", "--tier", TIER, "--backing", BACKING, "--interval", "1h", "--socket",
            system_server.find_socket().socket, "--json")
    out = json.loads(r.stdout)
    record("packaged-pzram-install.json", json.dumps(out, indent=2))
    rule = f"{BACKING}/clone-staging/** rwk,"
    assert rule in out["apparmor"] and LOCAL in out["apparmor"] and "the profile is reloaded" in out["apparmor"], out
    assert rule in Path(LOCAL).read_text()
    assert out["enabled"] is True and sh("systemctl", "is-enabled", RESTORE_UNIT).stdout.strip() == "enabled"
    assert oct(os.stat(BACKING).st_mode & 0o777) == "0o711"
    assert _denials() == [], _denials()

    synced = _commit_rows("synced", 50)
    cli_gen = _sync("persist sync (CLONE under the enforced profile)")
    after_cli = _commit_rows("after-cli-sync", 50)
    _clear_denials()
    sh("systemctl", "start", SYNC_UNIT)     # the timer's own unit: a oneshot, start waits for its end
    timer_gen = persist.current(BACKING).to_dict()
    assert timer_gen["id"] != cli_gen["id"]
    _clone_generation(timer_gen)
    assert _denials() == [], _denials()
    record("packaged-pzram-sync-unit.txt", sh("journalctl", "--no-pager", "-b", "-u", SYNC_UNIT).stdout)
    after_timer = _commit_rows("after-timer-sync", 50)   # kept only by the sync at shutdown
    _on_the_tier()
    _save(boot1={"ids": before_install + synced + after_cli + after_timer, "cli_generation": cli_gen["id"],
                 "timer_generation": timer_gen["id"], "clone_seconds": [cli_gen["duration_s"], timer_gen["duration_s"]]})


# ---- boot 2 -----------------------------------------------------------------------------------------

def _restored_before_the_server(boot: str) -> tuple[persist.Generation, str]:
    """The tier unit, then the restore unit, finished before mysql.service began (systemd's own timestamps), the
    server on the restored tier, enforced, no DENIED line since boot; the generation restored and the line."""
    journal = sh("journalctl", "-b", "-o", "short-monotonic", "--no-pager", "-u", TIER_UNIT, "-u", RESTORE_UNIT,
                 "-u", UNIT).stdout
    record(f"packaged-pzram-{boot}-journal.txt", journal)   # first: what a failed boot's units said
    restore_done = unit_time(RESTORE_UNIT, "ActiveEnterTimestampMonotonic")
    tier_done = unit_time(TIER_UNIT, "ActiveEnterTimestampMonotonic")
    server_begins = unit_time(UNIT, "InactiveExitTimestampMonotonic")
    server_ready = unit_time(UNIT, "ActiveEnterTimestampMonotonic")
    assert 0 < tier_done <= restore_done < server_begins < server_ready, (tier_done, restore_done, server_begins,
                                                                          journal[-3000:])
    restored = [ln for ln in journal.splitlines() if "restored generation" in ln]
    assert len(restored) == 1, journal
    _on_the_tier()                       # active, on zram, enforced, no DENIED line since boot
    current = persist.current(BACKING)
    assert current.id in restored[0], (restored, current)
    return current, f"restore finished {(server_begins - restore_done) / 1e6:.2f} s before {UNIT} began"


def test_boot2_restored_before_mysql_every_row_then_a_clone_and_a_power_cut():
    state = _state()["boot1"]
    current, order = _restored_before_the_server("boot2")
    assert _ids() == state["ids"]        # every row: the last 50 through the sync at shutdown
    assert current.method == persist.OFFLINE_METHOD, current
    previous = Path(BACKING, "generations", state["timer_generation"])
    assert (previous / "COMPLETE").is_file()    # the timer unit's CLONE, kept one more round
    gen = _sync("persist sync after the reboot (the rule loaded with the profile at boot)")
    lost = _commit_rows("after-the-last-clone", 10)   # the power cut comes next: no sync at shutdown keeps these
    _save(boot2={"ids": _ids(), "clone": gen["id"], "clone_seconds": gen["duration_s"], "lost": lost, "order": order})


# ---- boot 3 -----------------------------------------------------------------------------------------

def test_boot3_after_the_power_cut_the_clone_exactly_then_uninstall_and_the_negative_control():
    state = _state()
    current, order = _restored_before_the_server("boot3")
    assert current.id == state["boot2"]["clone"] and current.method == "clone", current   # the CLONE itself
    ids = _ids()
    assert ids == [i for i in state["boot2"]["ids"] if i not in state["boot2"]["lost"]]
    assert ids == state["boot1"]["ids"] and not set(state["boot2"]["lost"]) & set(ids)
    last = _sync("persist sync after the power cut")
    _uninstall_then_the_negative_control(state, last)
    record("packaged-pzram-result.txt",
           f"CLONE syncs in boot 1: {state['boot1']['clone_seconds']} s, boot 2: {state['boot2']['clone_seconds']} s, "
           f"boot 3: {last['duration_s']} s; boot 2 (after the reboot): {state['boot2']['order']}, the stop's offline "
           f"copy restored, rows {len(state['boot1']['ids'])} back; boot 3 (after the power cut): {order}, CLONE "
           f"generation {current.id} restored exactly ({len(ids)} rows, the {len(state['boot2']['lost'])} after it "
           "gone)\n")


def _uninstall_then_the_negative_control(state: dict, last: dict) -> None:
    """`persist uninstall` takes the rule out of the local include and reloads the profile; a CLONE sync then
    (persist.json is kept) is denied by the enforced profile, not by file permissions (the staging directory is
    the server user's): one line, the DENIED line names the staging directory, nothing flipped, staging empty."""
    _clear_denials()
    gone = json.loads(cli("persist", "uninstall", "--backing", BACKING, "--json").stdout)
    record("packaged-pzram-uninstall.json", json.dumps(gone, indent=2))
    assert LOCAL in gone["apparmor"] and "reloaded" in gone["apparmor"], gone
    assert "clone-staging" not in Path(LOCAL).read_text() and f"{TARGET}/** rwk," in Path(LOCAL).read_text()
    assert len(gone["removed"]) == 3 and not Path(BACKING, clone_staging.STAGING).exists()
    assert _denials() == [], _denials()
    pointer = Path(BACKING, "current.json").read_text()
    _clear_denials()
    failed = cli("persist", "sync", "--backing", BACKING, check=False)
    denied = [ln for ln in _denials() if "clone-staging" in ln]
    lines = [ln for ln in failed.stderr.strip().splitlines() if "as the server's user, for generation" not in ln]
    record("packaged-pzram-denied.txt", failed.stderr + "\n" + "\n".join(_denials()) + "\n")
    assert failed.returncode != 0 and len(lines) == 1 and "CLONE LOCAL into" in lines[0], failed.stderr
    assert denied and all('profile="/usr/sbin/mysqld"' in ln for ln in denied), _denials()
    assert Path(BACKING, "current.json").read_text() == pointer and persist.current(BACKING).id == last["id"]
    assert os.listdir(Path(BACKING, clone_staging.STAGING)) == []
    assert not [p for p in os.listdir(Path(BACKING, "generations")) if p.startswith(".")]
    assert sh("systemctl", "is-active", UNIT).stdout.strip() == "active" and _confinement() == CONFINEMENT
