"""systemd's sandboxing of the server's unit: what the server can reach, the drop-in that opens a move's target.

Two sources, both real systemd: the recorded ``systemctl show`` of the units Debian's packages ship
(tests/fixtures/recorded/distro-packages), and a live systemd manager (``systemd --user`` in a private mount
namespace, tests/usermanager.py: systemd is not PID 1 here) that loads the packaged unit with the drop-in
innotier writes, so the effective settings after the drop-in are systemd's, not ours; and starts it, with
its ExecStart swapped for a write into the target, so the kernel's view through the unit's namespace decides.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from datadir_mover import unit_sandbox
from datadir_mover.move import control
from tuner.core.errors import MoveError
from tuner.core.sandbox import SandboxState
from usermanager import UserManager
from waiting import wait_for

BOOKWORM = "bookworm-mariadb-server-10.11.19-0+deb12u1.mariadb.service"
SID_MARIADB = "sid-mariadb-server-11.8.9+ds-4.mariadb.service"
SID_MYSQL = "sid-mysql-server-9.7.4-2.mysql.service"


@pytest.fixture
def recorded(fixtures_dir):
    def load(name: str, unit: str = "mariadb.service") -> unit_sandbox.Sandboxing:
        return unit_sandbox.parse_show(unit, (fixtures_dir / "distro-packages" / f"{name}.show").read_text())
    return load


@pytest.fixture(scope="module")
def manager(tmp_path_factory):
    m = UserManager(tmp_path_factory.mktemp("distro-um")).start()
    yield m
    m.stop()


@pytest.mark.parametrize("target, settings", [
    ("/mnt/pmem/mysql", []),                                               # the DAX mount: nothing hides it
    ("/home/db/mysql", ["ProtectHome=tmpfs", "BindPaths=/home/db/mysql"]),  # ProtectHome=true hides /home
    ("/root/mysql", ["ProtectHome=tmpfs", "BindPaths=/root/mysql"]),
    ("/etc/mysql/data", ["ReadWritePaths=/etc/mysql/data"]),              # ProtectSystem=full: /etc read-only
    ("/usr/local/mysql", ["ReadWritePaths=/usr/local/mysql"]),
    ("/srv/my data", []),
])
@pytest.mark.parametrize("package", [BOOKWORM, SID_MARIADB])
def test_debians_mariadb_unit_decides_the_narrowest_dropin(recorded, package, target, settings):
    assert unit_sandbox.needed(recorded(package), target)[0] == settings


def test_sid_mysql_unit_has_no_sandboxing(recorded):
    sb = recorded(SID_MYSQL, "mysql.service")
    for target in ("/home/db/mysql", "/etc/x", "/mnt/pmem/mysql"):
        assert unit_sandbox.needed(sb, target)[0] == []


def _sandbox(**props) -> unit_sandbox.Sandboxing:
    return unit_sandbox.Sandboxing("x.service", {k: v for k, v in props.items()})


def test_settings_innotier_does_not_lift_are_refused_in_one_line(tmp_path):
    cases = [(_sandbox(InaccessiblePaths="/srv"), "/srv/db", "InaccessiblePaths=/srv"),
             (_sandbox(PrivateTmp="yes"), "/tmp/mysql", "PrivateTmp=yes"),
             (_sandbox(ProtectHome="yes", ReadWritePaths="/home/db"), "/home/db/x", "ProtectHome=yes")]
    for sb, target, setting in cases[:2]:
        with pytest.raises(MoveError) as refused:
            unit_sandbox.plan_change(sb, target, "m1", units_root=str(tmp_path))
        assert "\n" not in str(refused.value) and setting in str(refused.value)
    # a ReadWritePaths= below ProtectHome=yes is dropped by systemd: still hidden, so ProtectHome=tmpfs + bind
    assert unit_sandbox.needed(cases[2][0], cases[2][1])[0] == ["ProtectHome=tmpfs", "BindPaths=/home/db/x"]
    with pytest.raises(MoveError, match="own root"):
        unit_sandbox.plan_change(_sandbox(RootDirectory="/srv/chroot"), "/srv/db", "m1", units_root=str(tmp_path))
    assert not any(tmp_path.iterdir())


def test_no_systemd_changes_refuses_a_hidden_target_in_one_line_naming_the_setting(recorded, tmp_path):
    with pytest.raises(MoveError) as refused:
        unit_sandbox.plan_change(recorded(BOOKWORM), "/home/db/mysql", "m2", allow=False, units_root=str(tmp_path))
    line = str(refused.value)
    assert "\n" not in line and "ProtectHome=yes hides /home/db/mysql" in line and "--no-systemd-changes" in line
    assert not any(tmp_path.iterdir())
    # a target the unit does not hide needs nothing, so the opt-out does not stand in the way
    assert unit_sandbox.plan_change(recorded(BOOKWORM), "/mnt/pmem/mysql", "m2", allow=False,
                                    units_root=str(tmp_path)).action == "none"


@pytest.mark.parametrize("target, site", [("/home/db/mysql", ""), ("/etc/mysql/innotier-data", ""),
                                          ("/mnt/my pmem/mysql", "ReadOnlyPaths=/mnt\n")])
def test_the_dropin_loaded_by_systemd_opens_the_target_and_rollback_closes_it(manager, fixtures_dir, target, site):
    """Write the drop-in where systemd reads it, reload the real manager, read its effective settings back."""
    manager.install(fixtures_dir / "distro-packages" / BOOKWORM, "mariadb.service")
    dropins = manager.units / "mariadb.service.d"
    dropins.mkdir(exist_ok=True)
    (dropins / "50-site.conf").write_text(f"[Service]\n{site}")  # a DBA's own drop-in, read-only /mnt
    manager.reload()
    before = unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service"))
    change = unit_sandbox.plan_change(before, target, "m-live", units_root=str(manager.units))
    assert change.action == "dropin" and unit_sandbox.reach(before, target).kind not in (None, "read-write", "bind")
    unit_sandbox.apply(change, reload=manager.reload)
    assert Path(change.dropin_path).parent == dropins
    after = unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service"))
    assert unit_sandbox.reach(after, target).kind in ("read-write", "bind"), after.properties
    assert unit_sandbox.needed(after, target)[0] == []
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(manager.units / "mariadb.service")],
                       capture_output=True, text=True, env=manager.env)
    assert "99-innotier" not in r.stderr, r.stderr  # systemd finds nothing wrong in the drop-in
    unit_sandbox.remove(change, reload=manager.reload)
    assert not Path(change.dropin_path).exists()
    again = unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service"))
    assert again.properties == before.properties
    (dropins / "50-site.conf").unlink()


def test_a_move_back_home_retires_the_earlier_dropin_and_its_rollback_puts_it_back(manager, fixtures_dir):
    manager.install(fixtures_dir / "distro-packages" / BOOKWORM, "mariadb.service")
    home_sb = unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service"))
    out = unit_sandbox.plan_change(home_sb, "/home/db/mysql", "m-out", units_root=str(manager.units))
    unit_sandbox.apply(out, reload=manager.reload)
    now = unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service"))
    home = unit_sandbox.plan_change(now, "/var/lib/mysql", "m-home", units_root=str(manager.units), retire="m-out")
    assert home.action == "dropin" and home.dropin_path is None and home.retired_path == out.dropin_path
    unit_sandbox.apply(home, reload=manager.reload)
    assert not Path(out.dropin_path).exists()
    assert unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service")).properties == home_sb.properties
    unit_sandbox.remove(home, reload=manager.reload)   # the move home rolled back: the earlier drop-in is back
    assert Path(out.dropin_path).read_text() == out.dropin_text()
    assert unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service")).properties == now.properties
    unit_sandbox.remove(out, reload=manager.reload)


def test_the_unit_is_found_from_the_servers_cgroup(tmp_path):
    proc = tmp_path / "proc"

    def server(pid: int, comm: str, cgroup: str) -> str:
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(comm + "\n")
        (proc / str(pid) / "cgroup").write_text(cgroup)
        pid_file = tmp_path / f"{pid}.pid"
        pid_file.write_text(f"{pid}\n")
        return str(pid_file)

    v2 = server(10, "mariadbd", "0::/system.slice/mariadb-site.service\n")
    hybrid = server(11, "mysqld", "12:pids:/system.slice/x.service\n1:name=systemd:/system.slice/mysql.service\n"
                                  "0::/system.slice/mysql.service\n")
    by_hand = server(12, "mariadbd", "0::/user.slice/user-0.slice/session-3.scope\n")
    not_a_server = server(13, "bash", "0::/system.slice/mariadb.service\n")
    assert control.unit_of_pid(control.server_pid(v2, str(proc)), str(proc)) == "mariadb-site.service"
    assert control.unit_of_pid(control.server_pid(hybrid, str(proc)), str(proc)) == "mysql.service"
    assert control.unit_of_pid(control.server_pid(by_hand, str(proc)), str(proc)) is None
    assert control.server_pid(not_a_server, str(proc)) is None          # a reused pid is not the server
    assert control.server_pid(str(tmp_path / "missing.pid"), str(proc)) is None


def test_a_unit_with_no_main_process_is_stopped(manager, tmp_path, monkeypatch):
    """SystemdControl's state from systemd itself: a running unit has a MainPID, a stopped one has none."""
    (manager.units / "distro-idle.service").write_text("[Service]\nExecStart=/bin/sleep 600\n")
    manager.reload()
    ctl = control.SystemdControl("distro-idle.service", spec=None, conf_dir=str(tmp_path),
                                 systemctl_argv=("systemctl", "--user"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", manager.env["XDG_RUNTIME_DIR"])
    assert ctl.state() == SandboxState.STOPPED
    ctl.start()
    assert ctl.state() == SandboxState.RUNNING
    ctl.stop("clean")
    assert ctl.state() == SandboxState.STOPPED


def test_a_start_that_fails_into_restart_leaves_no_restart_behind(manager, fixtures_dir, tmp_path, monkeypatch):
    """Debian sid's mysql.service has Restart=on-failure: a mysqld denied its new datadir exits 1 and systemd starts it
    again behind the rollback's back.  The recorded unit, its ExecStartPre dropped and its ExecStart swapped for the
    denied server's exit 1, RestartSec=600 so that a pending restart stays there to be seen.  The fault first: a
    start that fails leaves the restart pending (reset-failed, all the mover did before, does not cancel it); then
    SystemdControl.start raises and leaves the unit inactive with no restart pending."""
    unit = "distro-restarting.service"
    text = (fixtures_dir / "distro-packages" / SID_MYSQL).read_text()
    assert "Restart=on-failure" in text and "ExecStart=/usr/sbin/mysqld\n" in text
    text = text.replace("ExecStartPre=/usr/share/mysql/mysql-systemd-start pre\n", "")
    (manager.units / unit).write_text(text.replace("ExecStart=/usr/sbin/mysqld", "ExecStart=/bin/sh -c 'exit 1'")
                                      + "RestartSec=600\n")
    manager.reload()

    def sub_state() -> str:
        return manager.systemctl("show", unit, "-p", "SubState", "--value").stdout.strip()

    manager.systemctl("start", "--no-block", unit)
    wait_for(lambda: sub_state().startswith("auto-restart"), timeout=60, what="the failed start's pending restart")
    manager.systemctl("reset-failed", unit)
    assert sub_state().startswith("auto-restart")       # the fault: systemd would start the server again
    manager.systemctl("stop", unit)
    ctl = control.SystemdControl(unit, spec=None, conf_dir=str(tmp_path), systemctl_argv=("systemctl", "--user"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", manager.env["XDG_RUNTIME_DIR"])
    with pytest.raises(MoveError, match=f"systemctl start {unit}` failed"):
        ctl.start()
    assert sub_state() == "dead" and ctl.state() == SandboxState.STOPPED


def test_systemd_analyze_flags_a_broken_dropin(fixtures_dir, tmp_path):
    """The fault the live test's verify step would catch: a misspelt key and an unquoted blank in a path."""
    (tmp_path / "mariadb.service.d").mkdir()
    (tmp_path / "mariadb.service").write_text((fixtures_dir / "distro-packages" / BOOKWORM).read_text())
    (tmp_path / "mariadb.service.d" / "99-innotier-bad.conf").write_text(
        "[Service]\nReadWritePath=/srv/db\nBindPaths=/home/my data\n")
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "mariadb.service")],
                       capture_output=True, text=True)
    assert "99-innotier-bad.conf:2: Unknown key 'ReadWritePath'" in r.stderr
    assert "99-innotier-bad.conf:3: BindPaths= path is not absolute" in r.stderr


@pytest.mark.parametrize("parent", ["/home", "/etc"])
def test_the_packaged_units_server_writes_under_home_only_with_the_dropin(manager, fixtures_dir, parent):
    """Debian 12's mariadb.service, its ExecStart swapped for a write into the target as its user mysql: systemd
    builds the unit's real mount namespace.  Without innotier's drop-in the write fails (the negative control:
    ProtectHome=true hides /home, ProtectSystem=full makes /etc read-only); with it the write lands; after the
    rollback it fails again."""
    mysql = pwd.getpwnam("mysql")
    top = Path(tempfile.mkdtemp(prefix="distro-unit-", dir=parent))
    top.chmod(0o755)   # mysql may pass through: only the unit's sandboxing stands in the way
    target = top / "mysql"
    target.mkdir()
    os.chown(target, mysql.pw_uid, mysql.pw_gid)
    probe = target / "innotier-probe"
    try:
        manager.install(fixtures_dir / "distro-packages" / BOOKWORM, "mariadb.service")
        dropins = manager.units / "mariadb.service.d"
        dropins.mkdir(exist_ok=True)
        (dropins / "50-probe.conf").write_text(
            f"[Service]\nType=oneshot\nExecStart=\nExecStart=/bin/touch {probe}\nExecStartPost=\n")
        manager.reload()

        def start() -> bool:
            subprocess.run(["systemctl", "--user", "reset-failed", "mariadb.service"], env=manager.env,
                           capture_output=True, timeout=60)   # a failed start is kept failed until reset
            r = subprocess.run(["systemctl", "--user", "start", "mariadb.service"], env=manager.env,
                               capture_output=True, text=True, timeout=60)
            return r.returncode == 0 and probe.exists()

        assert not start(), "the packaged unit's sandboxing let the server write there without a drop-in"
        assert subprocess.run(["setpriv", f"--reuid={mysql.pw_uid}", f"--regid={mysql.pw_gid}", "--clear-groups",
                               "touch", str(probe)]).returncode == 0   # outside the unit, mysql can write there
        probe.unlink()
        sb = unit_sandbox.parse_show("mariadb.service", manager.show("mariadb.service"))
        change = unit_sandbox.plan_change(sb, str(target), "m-ns", units_root=str(manager.units))
        unit_sandbox.apply(change, reload=manager.reload)
        assert start(), change.settings
        probe.unlink()
        unit_sandbox.remove(change, reload=manager.reload)
        assert not start()
    finally:
        (manager.units / "mariadb.service.d" / "50-probe.conf").unlink(missing_ok=True)
        shutil.rmtree(top)


@pytest.mark.parametrize("verb", ["plan", "apply"])
def test_the_opt_out_reaches_the_move_request(verb):
    from datadir_mover.move_cli import _request
    from tuner.cli import build_parser

    parse = build_parser("move").parse_args
    base = ["move", verb, "datadir", "--to", "/home/db/mysql"]
    assert _request(parse(base + ["--no-systemd-changes"])).systemd_changes is False
    assert _request(parse(base)).systemd_changes is True


@pytest.mark.parametrize("main", [False, True])
def test_a_server_started_by_hand_inside_another_service_is_not_driven_through_that_service(
        manager, tmp_path, monkeypatch, main):
    """A real unit of the live manager runs a process named like a server: as a child of a shell that is the
    unit's main process (a server started by hand from inside some service, a CI runner's), or as the main
    process itself.  The server's cgroup names the unit either way; only when systemd says the unit's MainPID is
    the server does the mover drive that unit.  The fault is the first case: the old rule took the cgroup's unit
    and would have stopped the shell's service."""
    fake = tmp_path / "bin" / "mariadbd"
    fake.parent.mkdir()
    shutil.copy("/bin/sleep", fake)
    unit = f"distro-{'main' if main else 'byhand'}.service"
    start = f"{fake} 600" if main else f"/bin/sh -c '{fake} 600 & exec /bin/sleep 600'"
    (manager.units / unit).write_text(f"[Service]\nExecStart={start}\n")
    manager.reload()
    monkeypatch.setenv("XDG_RUNTIME_DIR", manager.env["XDG_RUNTIME_DIR"])
    manager.systemctl("start", unit)
    try:
        pids = []
        wait_for(lambda: pids.extend(p for p in map(int, subprocess.run(["pgrep", "-f", f"^{fake} 600"],
                 capture_output=True, text=True).stdout.split())) or pids, timeout=30, what="the fake server")
        pid = pids[0]
        # the host's own /proc for the server, and a PID 1 that is systemd (it is not, here)
        proc = tmp_path / "proc"
        (proc / "1").mkdir(parents=True)
        (proc / "1" / "comm").write_text("systemd\n")
        (proc / str(pid)).symlink_to(f"/proc/{pid}")
        assert control.unit_of_pid(pid, str(proc)) == unit
        pid_file = tmp_path / "server.pid"
        pid_file.write_text(f"{pid}\n")
        etc = tmp_path / "etc-root"
        (etc / "etc/mysql/mariadb.conf.d").mkdir(parents=True)
        model = type("Model", (), {"managed": "system", "sandbox": None, "pid_file": str(pid_file),
                                   "flavor": control.Flavor.MARIADB})()
        ctl = control.control_for(model, None, etc_root=str(etc), proc_root=str(proc),
                                  systemctl_argv=("systemctl", "--user"))
        assert ctl.unit == unit
        if main:
            assert ctl.main_pid() == pid and ctl.not_driven == ""
        else:
            assert ctl.main_pid() not in (0, pid)
            assert f"the server (pid {pid}) runs inside {unit} but is not its main process" in ctl.not_driven
            assert "stop and start the server by hand" in ctl.not_driven
    finally:
        manager.systemctl("stop", unit)
