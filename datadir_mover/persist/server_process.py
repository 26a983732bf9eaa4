"""Is the server there: stopped means no server process, not "cannot connect".

A server that refuses connections (stopped with SIGSTOP, out of connections, still in crash recovery, its
socket gone) is running: its files change under a copy, and a restore would swap them under it.  So a
sync ``--offline`` and a restore look for the process itself: a sandbox's pid file (the sandbox checks the
process is its server), a system server's pid file (recorded at install from ``@@pid_file``) and, where
systemd is PID 1, its unit's MainPID.  A pid file whose process is gone is a server that did not stop cleanly.
"""

from __future__ import annotations

import enum
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tuner.core.errors import TierError
from tuner.core.server import ServerModel
from tuner.core.sandbox import Sandbox, SandboxState
from tuner.core.sandbox.process import pid_alive, read_pid
from tuner.core.system_server import unit_of_pid

from datadir_mover.move import control
from datadir_mover.move.control import systemd_is_pid1

SERVER_BINARIES = ("mariadbd", "mysqld")
# command-line options that choose which option files a server reads (kept when its options are re-read)
DEFAULTS_ARGS = ("--no-defaults", "--defaults-file=", "--defaults-extra-file=", "--defaults-group-suffix=")


class ServerState(enum.Enum):
    RUNNING = "running"     # a server process exists (whether or not it takes connections)
    STOPPED = "stopped"     # no process, and it left no pid file behind: a clean shutdown
    CRASHED = "crashed"     # no process, but its pid file is still there: killed or crashed


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _binary_index(argv: list[str]) -> int | None:
    """Where the server binary is in a command line (a tree's server runs through its loader: an argument)."""
    for i, arg in enumerate(argv):
        if os.path.basename(arg) in SERVER_BINARIES:
            return i
    return None


def runs_server(pid: int) -> bool:
    """``pid`` is alive (stopped or not) and runs a server binary: not a recycled pid."""
    return pid_alive(pid) and _binary_index(_cmdline(pid)) is not None


def _unit_property(unit: str, prop: str) -> str:
    r = subprocess.run(["systemctl", "show", "-p", prop, "--value", unit], capture_output=True, text=True, timeout=60)
    return r.stdout.strip()


def _main_unit_of(pid: int) -> str | None:
    """The systemd service whose main process is ``pid`` (only where systemd is PID 1): the unit its cgroup
    names, and only when that unit's MainPID is ``pid``, not a service the server was merely started from (a CI
    runner, a shell in a service)."""
    if not systemd_is_pid1():
        return None
    unit = unit_of_pid(pid)
    return unit if unit and _unit_property(unit, "MainPID") == str(pid) else None


def identify(model: ServerModel) -> dict[str, Any]:
    """What tells later whether a system server runs, and how to read its option files while it is down: its pid
    file, the command line it runs with and its systemd unit (read from the running process at install)."""
    out: dict[str, Any] = {}
    if model.pid_file:
        out["pid_file"] = os.path.normpath(os.path.join(model.datadir, model.pid_file))
        pid = read_pid(Path(out["pid_file"]))
        argv = _cmdline(pid) if pid else []
        if _binary_index(argv) is not None:
            out["server_argv"] = argv
            if unit := _main_unit_of(pid):
                out["unit"] = unit
    return out


def server_binary(server: dict[str, Any]) -> str | None:
    """The running server's executable as the kernel resolved it (what an AppArmor profile attaches to, read as
    the mover reads it); None when it does not run (then the flavor's usual binaries are tried)."""
    if server.get("sandbox"):
        pid = Sandbox.load(server["sandbox"]).running_pid()
    else:
        pid = read_pid(Path(server["pid_file"])) if server.get("pid_file") else None
    return control.server_binary(pid) if pid and runs_server(pid) else None


def state(server: dict[str, Any], unit: str | None) -> ServerState:
    if server.get("sandbox"):
        st = Sandbox.load(server["sandbox"]).state()
        return {SandboxState.RUNNING: ServerState.RUNNING, SandboxState.STOPPED: ServerState.STOPPED}.get(
            st, ServerState.CRASHED)
    by_unit = bool(unit) and systemd_is_pid1()
    if by_unit and _unit_property(unit, "MainPID") not in ("", "0"):
        return ServerState.RUNNING
    pid_file = server.get("pid_file")
    if not pid_file and not by_unit:
        raise TierError("cannot tell whether the server runs: the backing's persist.json records no pid file (it "
                        "was installed by an older innotier); run `innotier persist install` again while it runs")
    if pid_file:
        pid = read_pid(Path(pid_file))
        if pid and runs_server(pid):
            return ServerState.RUNNING
        if Path(pid_file).exists():
            return ServerState.CRASHED
    if by_unit and _unit_property(unit, "ActiveState") == "failed":
        return ServerState.CRASHED
    return ServerState.STOPPED


def _option_reader(argv: list[str], i: int) -> list[str] | None:
    """How to run ``my_print_defaults`` for the server at ``argv[i]``: the one beside it (through the same loader
    for a tree's server), else the one on PATH.  Not the server binary itself: a confined server's profile
    (AppArmor) would apply to it."""
    binary = argv[i]
    for cand in (os.path.join(os.path.dirname(binary), "..", "bin", "my_print_defaults"),
                 os.path.join(os.path.dirname(binary), "my_print_defaults")):
        if os.path.isfile(cand):
            return [*argv[:i], os.path.normpath(cand)]
    found = shutil.which("my_print_defaults")
    return [found] if found else None


def print_defaults(argv: list[str], flavor: str, series: str) -> dict[str, str] | None:
    """The [mysqld] options a server started with ``argv`` reads: its option files as ``my_print_defaults`` reads
    them for the server's groups, then the options on its command line; None when they cannot be read (or
    name no datadir)."""
    i = _binary_index(argv)
    reader = _option_reader(argv, i) if i is not None else None
    if reader is None:
        return None
    rest = argv[i + 1:]
    chooses = [a for a in rest if a.startswith(DEFAULTS_ARGS)]
    groups = ["--mysqld"] if flavor == "mariadb" else ["mysqld", "server", f"mysqld-{series}"]
    r = subprocess.run([*reader, *chooses, *groups], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None
    opts: dict[str, str] = {}
    for arg in r.stdout.splitlines() + [a for a in rest if a not in chooses]:
        if arg.startswith("--"):
            key, _, value = arg[2:].partition("=")
            opts[key.replace("-", "_")] = value
    return opts if opts.get("datadir") else None
