"""What a sandbox does: start, stop, state, ping, status and destroy of its server.

States are an enum; stop modes live in one table.  A sandbox whose pid file names a dead process is
CRASHED: it is reported, and ``start`` refuses to reuse it unless asked to recover.
"""

from __future__ import annotations

import enum
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from tuner.core import io_throttle
from tuner.core.durable import write_atomic
from tuner.core.errors import SandboxError, UsageError
from tuner.core.sandbox import bootstrap, config, process
from tuner.core.sandbox.record import SandboxRecord, sandbox_names
from tuner.core.server import ConnectionSpec, Flavor
from tuner.core.units import page_size_label


class SandboxState(str, enum.Enum):
    STOPPED = "stopped"
    RUNNING = "running"
    CRASHED = "crashed"  # pid file left behind by a process that is gone (killed, crashed)


# stop mode -> (innodb_fast_shutdown to set first, signal)
STOP_MODES: dict[str, tuple[int | None, signal.Signals]] = {
    "clean": (1, signal.SIGTERM),
    "slow": (0, signal.SIGTERM),  # full purge and change-buffer merge before exit
    "kill": (None, signal.SIGKILL),  # no shutdown at all: what a crash looks like
}

# Closers for what a sandbox owns outside its directory.  The kernel knows nothing of them: whoever puts a
# sandbox's files elsewhere (the mover: InnoDB components on tiers) registers one with on_destroy().  Each is
# called with the sandbox's name after the server is stopped and before the directory goes, and returns
# one line per thing it did.
DESTROY_CLOSERS: list[Callable[[str], list[str]]] = []


def on_destroy(closer: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    if closer not in DESTROY_CLOSERS:
        DESTROY_CLOSERS.append(closer)
    return closer


class Sandbox(SandboxRecord):
    """A sandbox record with its server's lifecycle."""

    # -- option files and connections --------------------------------------

    def core_options(self) -> dict[str, str]:
        return config.core_options(self)

    def render_cnf(self) -> str:
        return config.render_cnf(self)

    def write_cnf(self) -> None:
        config.write_cnf(self)

    def effective_options(self, extra_args: list[str] | None = None) -> dict[str, str]:
        return config.effective_options(self, extra_args)

    def connection_spec(self, database: str | None = None) -> ConnectionSpec:
        return config.connection_spec(self, database)

    def tcp_spec(self, database: str | None = None) -> ConnectionSpec:
        spec = self.connection_spec(database)
        spec.socket = None
        spec.host, spec.port = "127.0.0.1", self.port
        return spec

    # -- state -------------------------------------------------------------

    _pid_alive = staticmethod(process.pid_alive)

    def _read_pid(self) -> int | None:
        return process.read_pid(self.pid_file)

    def running_pid(self) -> int | None:
        pid = self._read_pid()
        if pid and process.pid_runs_server(pid, self.mysqld, self.cnf):
            state = process.proc_state(pid)
            return None if state in (None, "Z") else pid  # a zombie is not running
        return None

    def state(self) -> SandboxState:
        if self.running_pid():
            return SandboxState.RUNNING
        if self.pid_file.exists():
            return SandboxState.CRASHED
        return SandboxState.STOPPED

    def ping(self) -> bool:
        """The server accepts a connection (with the sandbox's credentials, or as root before the first
        start has set them)."""
        try:
            conn = self.connection_spec().connect(connection_timeout=2)
        except Exception:
            try:
                conn = ConnectionSpec(socket=self.socket, user="root").connect(connection_timeout=2)
            except Exception:
                return False
        conn.close()
        return True

    _ping = ping  # the name datadir_mover.move.executor still calls

    def status(self) -> dict[str, Any]:
        st = self.state()
        d: dict[str, Any] = {"name": self.name, "state": st.value, "pid": self.running_pid(), "port": self.port,
                             "socket": self.socket, "datadir": self.datadir, "flavor": self.flavor.value,
                             "version": self.version, "page_size": page_size_label(self.page_size),
                             "dir": self.dir}
        if st == SandboxState.CRASHED:
            d["problem"] = f"stale pid file names process {self._read_pid()}, which is gone: the server crashed or was killed"
        return d

    # -- start -------------------------------------------------------------

    def start(self, timeout: float = 180.0, recover: bool = False, extra_args: list[str] | None = None) -> float:
        """Start the server and wait until it accepts connections; return seconds taken."""
        self._check_startable(recover)
        config.check_page_size(self, extra_args or [])
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        log_offset = self.error_log.stat().st_size if self.error_log.exists() else 0
        t0 = time.monotonic()
        cmd = self.launcher(verify=True) + [self.mysqld, f"--defaults-file={self.cnf}"] + list(extra_args or [])
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, cwd=self.dir,
                                preexec_fn=io_throttle.joiner())  # a throttled tier binds its servers
        self._wait_ready(proc, t0 + timeout, timeout, log_offset)
        if self.needs_bootstrap:
            bootstrap.set_root_password(self)
        elif not recover:  # a first start also sets up credentials, a recovery replays redo: neither is typical
            self.note_timing("start_s", time.monotonic() - t0)
        return time.monotonic() - t0

    def _check_startable(self, recover: bool) -> None:
        st = self.state()
        if st == SandboxState.RUNNING:
            raise SandboxError(f"sandbox {self.name} is already running (pid {self.running_pid()}); "
                               f"stop it first with `innotier sandbox stop {self.name}`")
        if st == SandboxState.CRASHED:
            if not recover:
                raise SandboxError(
                    f"sandbox {self.name} was not shut down cleanly (stale pid file {self.pid_file}, "
                    f"process {self._read_pid()} is gone); start it with --recover to run InnoDB crash recovery")
            self.pid_file.unlink(missing_ok=True)
        if process.port_in_use(self.port):
            raise SandboxError(f"port {self.port} of sandbox {self.name} is in use by another process; "
                               f"free it or recreate the sandbox with another --port")
        if not os.path.isdir(self.datadir):
            raise SandboxError(f"datadir {self.datadir} of sandbox {self.name} is missing; "
                               "restore it (innotier persist restore / move rollback) or recreate the sandbox")

    def _wait_ready(self, proc: subprocess.Popen, deadline: float, timeout: float, log_offset: int) -> None:
        while time.monotonic() < deadline:
            rc = proc.poll()
            if rc is not None:
                raise SandboxError(f"sandbox {self.name} server exited with code {rc} while starting: "
                                   f"{process.error_log_tail(self.error_log, log_offset)}; see {self.error_log}")
            if os.path.exists(self.socket) and self.ping():
                return
            time.sleep(0.05)
        proc.kill()
        raise SandboxError(f"sandbox {self.name} did not accept connections within {timeout:.0f} s; "
                           f"see {self.error_log}")

    # -- stop --------------------------------------------------------------

    def stop(self, mode: str = "clean", timeout: float = 300.0) -> float:
        """Stop the server; ``mode`` is one of STOP_MODES.  Returns seconds taken."""
        if mode not in STOP_MODES:
            raise UsageError(f"stop mode {mode!r} is unknown; use one of {', '.join(STOP_MODES)}")
        pid = self._pid_to_stop()
        fast_shutdown, sig = STOP_MODES[mode]
        t0 = time.monotonic()
        asked = fast_shutdown is not None and self._ask_shutdown(fast_shutdown)
        if not asked:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass  # it exited between the pid check and the signal: the wait below sees it gone
        if not process.wait_gone(pid, t0 + timeout):
            raise SandboxError(f"sandbox {self.name} (pid {pid}) did not stop within {timeout:.0f} s; "
                               f"check {self.error_log}, or stop it with --mode kill")
        if mode == "kill":
            # leave the pid file in place, as a crash would: the sandbox now reports CRASHED
            if not self.pid_file.exists():
                write_atomic(self.pid_file, f"{pid}\n")
        else:
            self.note_timing(f"stop_{mode}_s", time.monotonic() - t0)
        return time.monotonic() - t0

    def _pid_to_stop(self) -> int:
        pid = self.running_pid()
        if pid:
            return pid
        if self.state() == SandboxState.CRASHED:
            raise SandboxError(f"sandbox {self.name} is not running: it crashed or was killed "
                               f"(stale pid file); start it with --recover")
        raise SandboxError(f"sandbox {self.name} is not running")

    def _ask_shutdown(self, fast_shutdown: int) -> bool:
        """Set innodb_fast_shutdown (and on MySQL send SHUTDOWN); True when the server was asked to stop.

        A clean stop that cannot set it still gets a fast shutdown from SIGTERM; a slow one must not
        silently become fast, so that failure stops here with the server still running."""
        try:
            conn = self.connection_spec().connect(connection_timeout=5)
            conn.cursor().execute(f"SET GLOBAL innodb_fast_shutdown = {fast_shutdown}")
        except Exception as exc:
            if fast_shutdown == 0:
                raise SandboxError(
                    f"sandbox {self.name}: a slow shutdown needs innodb_fast_shutdown=0 but setting it failed "
                    f"({type(exc).__name__}: {exc}); the server is still running: check {self.client_cnf}, "
                    f"or stop it without --slow") from exc
            return False
        try:
            if self.flavor != Flavor.MARIADB:
                conn.cursor().execute("SHUTDOWN")  # MySQL's own way (Debian's host mysqladmin cannot stop 9.x)
                return True
            return False
        except Exception:
            return False  # the setting took: SIGTERM now gives the shutdown asked for
        finally:
            try:
                conn.close()
            except Exception:
                pass  # a server that is shutting down may drop the connection first
    def destroy(self, force: bool = False) -> list[str]:
        """Stop (with force), let the registered closers remove what the sandbox owns elsewhere, remove it.

        Returns one line per thing the closers did (e.g. a move's files removed from a tier)."""
        if self.state() == SandboxState.RUNNING:
            if not force:
                raise SandboxError(f"sandbox {self.name} is running; stop it first or pass --force")
            self.stop("kill")
        done: list[str] = []
        for closer in DESTROY_CLOSERS:
            done += closer(self.name)
        if os.path.isdir(self.datadir) and not Path(self.datadir).is_relative_to(self.path):
            shutil.rmtree(self.datadir)
        shutil.rmtree(self.path)
        return done


def list_sandboxes() -> list[Sandbox]:
    out = []
    for name in sandbox_names():
        try:
            out.append(Sandbox.load(name))
        except Exception:
            continue
    return out

