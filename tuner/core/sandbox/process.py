"""The server process as /proc and the network see it: pid checks, liveness, ports, the error log's tail.

Follows Patroni's postmaster: the pid in the pid file is only trusted after checking that the process is a
server binary started with this sandbox's option file.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

# A process can exit while its /proc entry is read: open() then fails with FileNotFoundError, and a read of an
# already opened file (or the listing of its task directory) with ProcessLookupError (ESRCH); a zombie being
# reaped can even give an empty stat line.  Every one of these means "gone", never an error.
_PROC_GONE = (FileNotFoundError, ProcessLookupError)


def proc_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from /proc/PID/stat (R, S, D, Z, ...), or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except _PROC_GONE:
        return None
    fields = text.rsplit(")", 1)[-1].split() if ")" in text else []
    return fields[0] if fields else None


def proc_threads(pid: int) -> int | None:
    """How many threads ``pid`` still has (entries of /proc/PID/task), or None when it is gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except _PROC_GONE:
        return None


def pid_alive(pid: int) -> bool:
    state = proc_state(pid)
    if state is None:
        return False
    if state == "Z":
        # a killed multi-threaded server shows its leader as a zombie while other threads still exit and
        # still hold its files and sockets: it is gone only when no other thread is left
        threads = proc_threads(pid)
        if threads is not None and threads > 1:
            return True
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True


def wait_gone(pid: int, deadline: float) -> bool:
    """Wait until ``pid`` is gone or time.monotonic() passes ``deadline``; True when it is gone."""
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def pid_runs_server(pid: int, mysqld: str, cnf: Path) -> bool:
    """``pid`` runs a server binary with the option file ``cnf`` (not a recycled pid)."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe")).replace(" (deleted)", "")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        return False
    if exe not in ("mariadbd", "mysqld") and not (exe.startswith("ld-linux") and mysqld.encode() in cmdline):
        return False  # a tree's server runs through the tree's loader: the binary is an argument
    return f"--defaults-file={cnf}".encode() in cmdline


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def unused_port() -> int:
    """A port the kernel hands out as free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def error_log_tail(error_log: Path, offset: int) -> str:
    """The last ERROR line written to ``error_log`` after ``offset``, without its timestamp prefix."""
    try:
        with open(error_log, "rb") as fh:
            fh.seek(offset)
            lines = [ln for ln in fh.read().decode(errors="replace").splitlines() if "ERROR" in ln]
    except FileNotFoundError:
        return "no error log"
    return (lines[-1].split("]", 2)[-1].strip() if lines else "no ERROR line in the log")
