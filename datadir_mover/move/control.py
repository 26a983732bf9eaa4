"""Stopping and starting the server a move works on, and where its placement option file goes.

Two kinds of server:

- a sandbox (``tuner.core.sandbox``): stop/start through the sandbox (clean or slow shutdown,
  pid checked before signalling); the placement goes to ``conf.d/50-innotier-placement.cnf``,
  which my.cnf includes last, so it wins.
- a system server: ``systemctl stop/start UNIT`` when systemd is PID 1; otherwise innotier
  cannot drive it and says what to run.  The unit is the one whose cgroup the running server is in
  (``/proc/PID/cgroup``), whatever it is called, and only when that unit's MainPID is the server: a server
  started by hand from a shell inside some other service is not that service's (stopping it would stop the
  wrong thing), so innotier says what to run instead.  Only a stopped server's unit is guessed from the
  packaged names.  It is stopped when systemd knows no main process for it (``MainPID=0``).  The
  placement goes to a drop-in in the server's conf.d (``99-innotier-placement.cnf``, sorted last).
"""

from __future__ import annotations

import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tuner.core import system_server
from tuner.core.errors import MoveError
from tuner.core.server import ConnectionSpec, Flavor, ServerModel
from tuner.core.sandbox import Sandbox, SandboxState
from tuner.core.system_server import unit_of_pid

START_LIMIT = 900   # seconds a system server's start may take (mysql.service sets no start timeout of its own)
SANDBOX_PLACEMENT = "50-innotier-placement.cnf"
SYSTEM_PLACEMENT = "99-innotier-placement.cnf"

# conf.d directories of packaged servers, most specific first (Debian MariaDB, Debian/Ubuntu MySQL, RHEL, generic)
SYSTEM_CONF_DIRS = ("etc/mysql/mariadb.conf.d", "etc/mysql/mysql.conf.d", "etc/my.cnf.d", "etc/mysql/conf.d")
UNIT_DIRS = ("etc/systemd/system", "lib/systemd/system", "usr/lib/systemd/system")
UNITS = {Flavor.MARIADB: ("mariadb.service", "mysql.service"),
         Flavor.MYSQL: ("mysql.service", "mysqld.service"),
         Flavor.PERCONA: ("mysql.service", "mysqld.service")}


def systemd_is_pid1(proc_root: str = "/proc") -> bool:
    try:
        return Path(proc_root, "1", "comm").read_text().strip() == "systemd"
    except OSError:
        return False


def system_conf_dir(root: str = "/") -> Path:
    """Where the placement drop-in goes: the last directory the server's option files include (its files are read
    last, and 99-... sorts last in it), else the first packaged conf.d that exists."""
    included = [Path(root, d.lstrip("/")) for d in system_server.option_files(root).includedirs]
    for p in [*reversed(included), *(Path(root, rel) for rel in SYSTEM_CONF_DIRS)]:
        if p.is_dir():
            return p
    raise MoveError("no conf.d directory for a system server found (the option files include none, and none of "
                    f"{', '.join('/' + r for r in SYSTEM_CONF_DIRS)} exists); create the one your my.cnf includes")


SERVER_COMMS = system_server.SERVER_COMMS


def server_pid(pid_file: str | None, proc_root: str = "/proc") -> int | None:
    """The running server's pid from its pid file, when that process is a server on this host."""
    try:
        pid = int(Path(pid_file).read_text().split()[0]) if pid_file else 0
        comm = Path(proc_root, str(pid), "comm").read_text().strip() if pid > 0 else ""
    except (OSError, ValueError, IndexError):
        return None
    return pid if comm in SERVER_COMMS else None


def server_binary(pid: int | None, proc_root: str = "/proc") -> str | None:
    """The running server's executable as the kernel resolved it (what an AppArmor profile attaches to)."""
    try:
        return os.readlink(Path(proc_root, str(pid), "exe")) if pid else None
    except OSError:
        return None


def system_unit(flavor: Flavor, root: str = "/") -> str | None:
    for unit in UNITS.get(flavor, ()):
        if any(Path(root, d, unit).exists() for d in UNIT_DIRS):
            return unit
    return None


@dataclass
class SandboxControl:
    name: str
    kind: str = "sandbox"

    def sandbox(self):
        return Sandbox.load(self.name)  # reloaded each time: a datadir move rewrites sandbox.json

    def describe(self) -> str:
        return f"sandbox {self.name}"

    def state(self) -> SandboxState:
        return self.sandbox().state()

    def stop(self, mode: str) -> float:
        return self.sandbox().stop(mode)

    def start(self) -> float:
        return self.sandbox().start()

    def stop_hint(self, mode: str = "clean") -> str:
        return f"innotier sandbox stop {self.name}" + (" --slow" if mode == "slow" else "")

    def start_hint(self) -> str:
        return f"innotier sandbox start {self.name}"

    def placement_file(self) -> Path:
        return self.sandbox().conf_d / SANDBOX_PLACEMENT

    def record_files(self) -> list[Path]:
        """Files besides the placement that a datadir move rewrites (saved before, restored on rollback)."""
        sb = self.sandbox()
        return [sb.path / "sandbox.json", sb.cnf]

    def connection_spec(self) -> ConnectionSpec:
        return self.sandbox().connection_spec()

    def timings(self) -> dict[str, float]:
        """This server's last measured start and stop seconds (for the downtime estimate)."""
        return self.sandbox().timings()

    def can_drive(self) -> tuple[bool, str]:
        return True, ""


@dataclass
class SystemdControl:
    unit: str
    spec: ConnectionSpec
    conf_dir: str
    kind: str = "system"
    systemctl_argv: tuple[str, ...] = ("systemctl",)
    not_driven: str = ""    # why this unit must not be driven (the server is not its main process), else ""

    def describe(self) -> str:
        return f"system server ({self.unit})"

    def can_drive(self) -> tuple[bool, str]:
        if os.geteuid() != 0:
            return False, "innotier must run as root to stop and start a system server"
        if not systemd_is_pid1():
            return False, "systemd is not PID 1 here, so innotier cannot stop and start the system server"
        if self.not_driven:
            return False, self.not_driven
        return True, ""

    def _systemctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.systemctl_argv, *args], capture_output=True, text=True, timeout=900)

    def main_pid(self) -> int:
        """The unit's main process as systemd knows it (0: none)."""
        shown = dict(ln.partition("=")[::2] for ln in self._systemctl("show", self.unit, "-p", "MainPID").stdout.splitlines())
        try:
            return int(shown.get("MainPID") or 0)
        except ValueError:
            return 0

    def state(self) -> SandboxState:
        """Running while systemd knows a main process for the unit; failed (and gone) is crashed."""
        shown = dict(ln.partition("=")[::2] for ln in
                     self._systemctl("show", self.unit, "-p", "ActiveState,MainPID").stdout.splitlines())
        if shown.get("MainPID", "0") not in ("", "0"):
            return SandboxState.RUNNING
        return SandboxState.CRASHED if shown.get("ActiveState") == "failed" else SandboxState.STOPPED

    def stop(self, mode: str) -> float:
        import time

        t0 = time.monotonic()
        if mode == "slow":
            conn = self.spec.connect()
            conn.cursor().execute("SET GLOBAL innodb_fast_shutdown = 0")
            conn.close()
        r = self._systemctl("stop", self.unit)
        if r.returncode != 0:
            raise MoveError(f"`systemctl stop {self.unit}` failed: {r.stderr.strip()}; check `journalctl -u {self.unit}`")
        return time.monotonic() - t0

    def start(self) -> float:
        import time

        t0 = time.monotonic()
        failed = self._start_job()
        if failed is not None:
            # stop: a unit with Restart=on-failure (Debian's mysql.service) would be started again by systemd
            # behind the rollback's back, on whatever option files are there by then.  A unit that failed to
            # start is "failed", which state() reports as crashed; the server never came up, so reset it to
            # inactive: the rollback then starts it on the old files (the raise reports it)
            self._systemctl("stop", self.unit)
            self._systemctl("reset-failed", self.unit)
            raise MoveError(f"`systemctl start {self.unit}` failed: {failed}; check `journalctl -u {self.unit}`")
        return time.monotonic() - t0

    def _restarts(self) -> tuple[str, str]:
        """(SubState, NRestarts) of the unit."""
        shown = dict(ln.partition("=")[::2] for ln in
                     self._systemctl("show", self.unit, "-p", "SubState,NRestarts").stdout.splitlines())
        return shown.get("SubState", ""), shown.get("NRestarts", "")

    def _start_job(self) -> str | None:
        """`systemctl start UNIT`: None when it started, else why not.  A server that exits during its start and
        that systemd restarts (Restart=) has failed to start, also where systemctl would wait through the restarts."""
        import time

        before = self._restarts()[1]
        deadline = time.monotonic() + START_LIMIT
        proc = subprocess.Popen([*self.systemctl_argv, "start", self.unit], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        while True:
            try:
                err = proc.communicate(timeout=0.5)[1].strip()
                return None if proc.returncode == 0 else err or f"exit {proc.returncode}"
            except subprocess.TimeoutExpired:
                sub, restarts = self._restarts()
                late = time.monotonic() > deadline
                if sub.startswith("auto-restart") or restarts != before or late:
                    self._systemctl("stop", self.unit)   # ends the start job (and the restarts) systemctl waits on
                    proc.communicate()
                    return (f"the server did not start within {START_LIMIT} s" if late else
                            f"the server exited during its start and systemd was restarting it (Restart=, {sub})")

    def stop_hint(self, mode: str = "clean") -> str:
        pre = "mariadb -e 'SET GLOBAL innodb_fast_shutdown=0' && " if mode == "slow" else ""
        return f"{pre}systemctl stop {self.unit}"

    def start_hint(self) -> str:
        return f"systemctl start {self.unit}"

    def placement_file(self) -> Path:
        return Path(self.conf_dir) / SYSTEM_PLACEMENT

    def record_files(self) -> list[Path]:
        return []

    def timings(self) -> dict[str, float]:
        return {}  # not measured for a system service: the estimate uses typical figures

    def connection_spec(self) -> ConnectionSpec:
        return self.spec


def by_hand(control, comp, source: str, target: str) -> str:
    """One line: the commands a DBA runs where innotier cannot drive the server (no systemd as PID 1, not root)."""
    copy = (f"copy {comp.what} from {source} to {target} with `cp -a`, owner mysql:mysql, mode 0750; "
            if comp.copies_files else f"mkdir -m 0750 {target}, owner mysql:mysql; ")
    return (f"run by hand: {control.stop_hint()}; {copy}write `[mysqld]` `{comp.variable}={target}` to "
            f"{control.placement_file()}; if the server is confined by AppArmor add `{target}/ r,` and "
            f"`{target}/** rwk,` to its local include and reload it; {control.start_hint()}")


def control_for(model: ServerModel, spec: ConnectionSpec, service: str | None = None, etc_root: str = "/",
                proc_root: str = "/proc", systemctl_argv: tuple[str, ...] = ("systemctl",)):
    if model.managed == "sandbox" and model.sandbox:
        return SandboxControl(model.sandbox)
    pid = server_pid(model.pid_file, proc_root)
    found = unit_of_pid(pid, proc_root) if pid and not service else None
    unit = service or found or system_unit(model.flavor, etc_root) or "mariadb.service"
    control = SystemdControl(unit=unit, spec=spec, conf_dir=str(system_conf_dir(etc_root)),
                             systemctl_argv=systemctl_argv)
    if found and systemd_is_pid1(proc_root):
        main = control.main_pid()
        if main != pid:
            control.not_driven = (f"the server (pid {pid}) runs inside {found} but is not its main process "
                                  f"(MainPID {main or 'none'}): it was started by hand there, and stopping {found} "
                                  "would stop something else; stop and start the server by hand, or run it "
                                  "under its own unit (or give --service)")
    return control


def server_user(model: ServerModel, source_dir: str) -> tuple[int, int, str]:
    """(uid, gid, name) the server's files belong to: mysql for system servers, the source's owner for sandboxes."""
    if model.managed == "system":
        try:
            pw = pwd.getpwnam("mysql")
            return pw.pw_uid, pw.pw_gid, "mysql"
        except KeyError:
            pass
    st = os.stat(source_dir)
    try:
        name = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        name = str(st.st_uid)
    return st.st_uid, st.st_gid, name
