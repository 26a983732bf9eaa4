"""Sandbox servers: private mariadbd/mysqld instances with their own datadir, socket, port, option file and log.

Layout of a sandbox (``$INNOTIER_HOME/sandboxes/NAME``)::

    sandbox.json    what the sandbox is (written durably)
    my.cnf          generated core options (paths, port, page size), ends with !includedir conf.d
    conf.d/         drop-ins: a profile (40-innotier-profile.cnf), placements (50-innotier-placement.cnf)
    client.cnf      0600 [client] file with the sandbox's generated root password
    data/           the datadir (unless --datadir)
    tmp/            tmpdir
    mysqld.sock, mysqld.pid, error.log

Process handling follows Patroni's postmaster: the pid in the pid file is only
trusted after checking that the process is a server binary started with this
sandbox's option file; stop modes live in one table; states are an enum.
A sandbox whose pid file names a dead process is CRASHED: it is reported, and
``start`` refuses to reuse it unless asked to recover.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tuner.core.datadir import datadir_page_size
from tuner.core.durable import write_atomic, write_json_atomic
from tuner.core.paths import innotier_home, sandboxes_dir
from tuner.core.errors import SandboxError, ToolMissing, UsageError
from tuner.core.server import ConnectionSpec, Flavor, Version, flavor_from_version, read_defaults_file
from tuner.core.servers import tree as server_trees
from tuner.core.units import page_size_label, parse_page_size

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
SOCKET_PATH_MAX = 107


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


# ---------------------------------------------------------------------------
# Binaries


@dataclass(frozen=True)
class ServerBinaries:
    mysqld: str
    install_db: str | None  # mariadb-install-db, or None for MySQL (mysqld --initialize-insecure)
    flavor: Flavor
    version: Version
    version_string: str
    basedir: str | None = None
    server: str | None = None  # an installed server distribution (`innotier server install`), e.g. mysql-9.7

    @property
    def series(self) -> str:
        return f"{self.flavor.value}-{self.version.series}"


def binaries_for_server(name: str) -> ServerBinaries:
    """The binaries of an installed server distribution, verified against its manifest."""
    srv = server_trees.installed(name)
    install_db = None
    if srv.flavor == Flavor.MARIADB and srv.dist.kind == "host":
        install_db = _which(("mariadb-install-db", "mysql_install_db"), ["/usr/bin"])
    return ServerBinaries(mysqld=srv.binary, install_db=install_db, flavor=srv.flavor, version=srv.version,
                          version_string=srv.manifest.version_string, server=srv.dist.name)


def _which(names: tuple[str, ...], dirs: list[str]) -> str | None:
    for d in dirs:
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


def find_binaries(basedir: str | None = None) -> ServerBinaries:
    """Find the server binary (mariadbd or mysqld) on --basedir, PATH or the usual sbin directories."""
    dirs = []
    if basedir:
        if not os.path.isdir(basedir):
            raise ToolMissing(f"--basedir {basedir} is not a directory; point it at a server installation (with bin/ or sbin/)")
        dirs = [os.path.join(basedir, "bin"), os.path.join(basedir, "sbin"), basedir]
    else:
        dirs = ["/usr/sbin", "/usr/local/mysql/bin", "/usr/local/sbin"]
    mysqld = _which(("mariadbd", "mysqld"), dirs) if not basedir else _which_only(("mariadbd", "mysqld"), dirs)
    if not mysqld:
        where = f"under {basedir}" if basedir else "on PATH or in /usr/sbin"
        raise ToolMissing(f"no server binary (mariadbd or mysqld) found {where}; "
                          "install one (apt-get install mariadb-server) or pass --basedir")
    out = subprocess.run([mysqld, "--version"], capture_output=True, text=True, timeout=30)
    text = (out.stdout or out.stderr).strip()
    flavor = flavor_from_version(text)
    version = Version.parse(text.split("Ver", 1)[-1])
    install_db = None
    if flavor == Flavor.MARIADB:
        bin_dirs = ([os.path.join(basedir, "scripts"), os.path.join(basedir, "bin")] if basedir
                    else ["/usr/bin", "/usr/local/mysql/bin"])
        install_db = _which(("mariadb-install-db", "mysql_install_db"), bin_dirs)
        if not install_db:
            raise ToolMissing("mariadb-install-db not found; install mariadb-server (it ships the script) or pass --basedir")
    return ServerBinaries(mysqld=mysqld, install_db=install_db, flavor=flavor, version=version,
                          version_string=text, basedir=basedir)


def _which_only(names: tuple[str, ...], dirs: list[str]) -> str | None:
    for d in dirs:
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    return None


# ---------------------------------------------------------------------------
# Ports


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def free_port() -> int:
    """A port nothing listens on now and no other sandbox has claimed."""
    claimed = {sb.port for sb in list_sandboxes()}
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in claimed and port > 1024:
            return port
    raise SandboxError("no free TCP port found on 127.0.0.1; pass --port N")


# ---------------------------------------------------------------------------
# The sandbox



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


@dataclass
class Sandbox:
    name: str
    dir: str
    datadir: str
    port: int
    socket: str
    mysqld: str
    install_db: str | None
    flavor: Flavor
    version: str
    version_string: str
    page_size: int
    options: dict[str, str] = field(default_factory=dict)  # extra [mysqld] options given at create
    basedir: str | None = None
    created_at: float = 0.0
    needs_bootstrap: bool = True  # root password not set yet (first start sets it)
    server: str | None = None  # installed server distribution it runs (None: the host's binaries / --basedir)

    # -- persistence -------------------------------------------------------

    @property
    def path(self) -> Path:
        return Path(self.dir)

    @property
    def cnf(self) -> Path:
        return self.path / "my.cnf"

    @property
    def conf_d(self) -> Path:
        return self.path / "conf.d"

    @property
    def client_cnf(self) -> Path:
        return self.path / "client.cnf"

    @property
    def pid_file(self) -> Path:
        return self.path / "mysqld.pid"

    @property
    def error_log(self) -> Path:
        return self.path / "error.log"

    @property
    def tmpdir(self) -> Path:
        return self.path / "tmp"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["flavor"] = self.flavor.value
        return d

    def save(self) -> None:
        write_json_atomic(self.path / "sandbox.json", self.to_dict(), mode=0o644)

    @classmethod
    def load(cls, name: str) -> "Sandbox":
        validate_name(name)
        p = sandboxes_dir() / name / "sandbox.json"
        if not p.is_file():
            known = ", ".join(sb.name for sb in list_sandboxes()) or "none"
            raise SandboxError(f"no sandbox named {name!r} (known: {known}); create it with `innotier sandbox create {name}`")
        import json

        d = json.loads(p.read_text())
        d["flavor"] = Flavor(d["flavor"])
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})

    # -- option files ------------------------------------------------------

    def core_options(self) -> dict[str, str]:
        opts = {
            "datadir": self.datadir,
            "socket": self.socket,
            "port": str(self.port),
            "bind_address": "127.0.0.1",
            "pid_file": str(self.pid_file),
            "log_error": str(self.error_log),
            "tmpdir": str(self.tmpdir),
            "innodb_page_size": str(self.page_size),
            "skip_name_resolve": "ON",
            "max_connections": "600",
            "lower_case_table_names": "0",
        }
        if self.flavor == Flavor.MARIADB:
            opts["skip_log_bin"] = ""
        else:
            opts["skip_log_bin"] = ""
            opts["mysqlx"] = "OFF"
            opts["secure_file_priv"] = str(self.tmpdir)  # the default /var/lib/mysql-files stops the server
        if self.server:
            opts.update(self.installed_server().server_options())
        if os.geteuid() == 0:
            opts["user"] = "root"
        opts.update(self.options)
        return opts

    def render_cnf(self) -> str:
        lines = [
            f"# Generated by innotier for sandbox {self.name}; do not edit (use `innotier sandbox reconfigure`).",
            "[mysqld]",
        ]
        for k, v in sorted(self.core_options().items()):
            lines.append(k if v == "" else f"{k} = {v}")
        lines += ["", "[client]", f"socket = {self.socket}", "", f"!includedir {self.conf_d}", ""]
        return "\n".join(lines)

    def write_cnf(self) -> None:
        self.conf_d.mkdir(parents=True, exist_ok=True)
        write_atomic(self.cnf, self.render_cnf(), mode=0o644)

    def connection_spec(self, database: str | None = None) -> ConnectionSpec:
        password = None
        if self.client_cnf.exists():
            password = read_defaults_file(self.client_cnf).get("password") or None
        return ConnectionSpec(socket=self.socket, user="root", password=password, database=database,
                              sandbox=self.name, defaults_file=str(self.client_cnf))

    def tcp_spec(self, database: str | None = None) -> ConnectionSpec:
        spec = self.connection_spec(database)
        spec.socket = None
        spec.host, spec.port = "127.0.0.1", self.port
        return spec

    # -- process -----------------------------------------------------------

    def installed_server(self, verify: bool = False) -> "server_trees.InstalledServer":
        return server_trees.installed(self.server, verify=verify)

    def launcher(self, verify: bool = False) -> list[str]:
        """The command prefix that runs the server binary (a tree's loader; empty for host binaries)."""
        return self.installed_server(verify).launcher() if self.server else []

    def _read_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _pid_is_ours(self, pid: int) -> bool:
        """The pid runs a server binary with this sandbox's option file (not a recycled pid)."""
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe")).replace(" (deleted)", "")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            return False
        if exe not in ("mariadbd", "mysqld") and not (exe.startswith("ld-linux") and self.mysqld.encode() in cmdline):
            return False  # a tree's server runs through the tree's loader: the binary is an argument
        return f"--defaults-file={self.cnf}".encode() in cmdline

    def running_pid(self) -> int | None:
        pid = self._read_pid()
        if pid and self._pid_is_ours(pid):
            # a zombie is not running
            state = proc_state(pid)
            return None if state in (None, "Z") else pid
        return None

    def state(self) -> SandboxState:
        if self.running_pid():
            return SandboxState.RUNNING
        if self.pid_file.exists():
            return SandboxState.CRASHED
        return SandboxState.STOPPED

    def start(self, timeout: float = 180.0, recover: bool = False, extra_args: list[str] | None = None) -> float:
        """Start the server and wait until it accepts connections; return seconds taken."""
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
        if port_in_use(self.port):
            raise SandboxError(f"port {self.port} of sandbox {self.name} is in use by another process; "
                               f"free it or recreate the sandbox with another --port")
        if not os.path.isdir(self.datadir):
            raise SandboxError(f"datadir {self.datadir} of sandbox {self.name} is missing; "
                               "restore it (innotier persist restore / move rollback) or recreate the sandbox")
        self._check_page_size(extra_args or [])
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        log_offset = self.error_log.stat().st_size if self.error_log.exists() else 0
        t0 = time.monotonic()
        cmd = self.launcher(verify=True) + [self.mysqld, f"--defaults-file={self.cnf}"] + list(extra_args or [])
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, cwd=self.dir)
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            rc = proc.poll()
            if rc is not None:
                raise SandboxError(f"sandbox {self.name} server exited with code {rc} while starting: "
                                   f"{self._log_tail(log_offset)}; see {self.error_log}")
            if os.path.exists(self.socket) and self._ping():
                break
            time.sleep(0.05)
        else:
            proc.kill()
            raise SandboxError(f"sandbox {self.name} did not accept connections within {timeout:.0f} s; "
                               f"see {self.error_log}")
        if self.needs_bootstrap:
            self._bootstrap_credentials()
        elif not recover:  # a first start also sets up credentials, a recovery replays redo: neither is typical
            self._note_timing("start_s", time.monotonic() - t0)
        return time.monotonic() - t0

    def effective_options(self, extra_args: list[str] | None = None) -> dict[str, str]:
        """[mysqld] options as the server will read them: my.cnf, then conf.d drop-ins in order, then arguments."""
        opts = read_defaults_file(self.cnf, sections=("mysqld",)) if self.cnf.exists() else {}
        for dropin in sorted(self.conf_d.glob("*.cnf")) if self.conf_d.is_dir() else []:
            opts.update(read_defaults_file(dropin, sections=("mysqld",)))
        for arg in extra_args or []:
            if arg.startswith("--") and "=" in arg:
                k, v = arg[2:].split("=", 1)
                opts[k.replace("-", "_")] = v
        return opts

    def _check_page_size(self, extra_args: list[str]) -> None:
        """Refuse to start with a page size other than the datadir's (the server would only say 'Corrupted page')."""
        opts = self.effective_options(extra_args)
        have = datadir_page_size(self.datadir, opts.get("innodb_data_home_dir"), opts.get("innodb_data_file_path"))
        want = parse_page_size(opts.get("innodb_page_size") or self.page_size)
        if have is not None and have != want:
            raise SandboxError(
                f"sandbox {self.name}: the datadir was initialized with {page_size_label(have)} pages but the "
                f"server would start with innodb_page_size={page_size_label(want)}; the page size is fixed at "
                f"initialization: start with {page_size_label(have)} or create a new sandbox with --page-size")

    def timings(self) -> dict[str, float]:
        """How long this server's last start and clean/slow stops took (``start_s``, ``stop_clean_s``, ...)."""
        try:
            return json.loads((self.path / "timings.json").read_text())
        except (OSError, ValueError):
            return {}

    def _note_timing(self, key: str, seconds: float) -> None:
        """Kept for estimates (a move's downtime): what this server took, not a typical figure."""
        write_json_atomic(self.path / "timings.json", {**self.timings(), key: round(seconds, 3)})

    def _log_tail(self, offset: int) -> str:
        try:
            with open(self.error_log, "rb") as fh:
                fh.seek(offset)
                lines = [ln for ln in fh.read().decode(errors="replace").splitlines() if "ERROR" in ln]
        except FileNotFoundError:
            return "no error log"
        return (lines[-1].split("]", 2)[-1].strip() if lines else "no ERROR line in the log")

    def _ping(self) -> bool:
        try:
            conn = self.connection_spec().connect(connection_timeout=2)
        except Exception:
            try:
                conn = ConnectionSpec(socket=self.socket, user="root").connect(connection_timeout=2)
            except Exception:
                return False
        conn.close()
        return True

    def _bootstrap_credentials(self) -> None:
        """First start: give root a random password, stored only in the 0600 client.cnf."""
        password = secrets.token_urlsafe(18)
        conn = ConnectionSpec(socket=self.socket, user="root").connect()
        cur = conn.cursor()
        for host in ("localhost", "127.0.0.1"):
            if host == "localhost":
                cur.execute("ALTER USER 'root'@'localhost' IDENTIFIED BY %s", (password,))
            else:
                cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY %s", (password,))
                cur.execute("ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY %s", (password,))
                cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
        conn.close()
        write_atomic(self.client_cnf,
                     f"[client]\nuser=root\npassword={password}\nsocket={self.socket}\n", mode=0o600)
        self.needs_bootstrap = False
        self.save()

    def stop(self, mode: str = "clean", timeout: float = 300.0) -> float:
        """Stop the server; ``mode`` is one of STOP_MODES.  Returns seconds taken."""
        if mode not in STOP_MODES:
            raise UsageError(f"stop mode {mode!r} is unknown; use one of {', '.join(STOP_MODES)}")
        pid = self.running_pid()
        if not pid:
            st = self.state()
            if st == SandboxState.CRASHED:
                raise SandboxError(f"sandbox {self.name} is not running: it crashed or was killed "
                                   f"(stale pid file); start it with --recover")
            raise SandboxError(f"sandbox {self.name} is not running")
        fast_shutdown, sig = STOP_MODES[mode]
        t0 = time.monotonic()
        asked = False
        if fast_shutdown is not None:
            try:
                conn = self.connection_spec().connect(connection_timeout=5)
                cur = conn.cursor()
                cur.execute(f"SET GLOBAL innodb_fast_shutdown = {fast_shutdown}")
                if self.flavor != Flavor.MARIADB:
                    cur.execute("SHUTDOWN")  # MySQL's own way (Debian's host mysqladmin cannot stop 9.x)
                    asked = True
                conn.close()
            except Exception:
                pass  # SIGTERM still gives a clean (fast) shutdown
        if not asked:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass  # it exited between the pid check and the signal: the wait below sees it gone
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if not self._pid_alive(pid):
                break
            time.sleep(0.05)
        else:
            raise SandboxError(f"sandbox {self.name} (pid {pid}) did not stop within {timeout:.0f} s; "
                               f"check {self.error_log}, or stop it with --mode kill")
        if mode == "kill":
            # leave the pid file in place, as a crash would: the sandbox now reports CRASHED
            if not self.pid_file.exists():
                write_atomic(self.pid_file, f"{pid}\n")
        else:
            self._note_timing(f"stop_{mode}_s", time.monotonic() - t0)
        return time.monotonic() - t0

    @staticmethod
    def _pid_alive(pid: int) -> bool:
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

    def status(self) -> dict[str, Any]:
        st = self.state()
        d: dict[str, Any] = {"name": self.name, "state": st.value, "pid": self.running_pid(), "port": self.port,
                             "socket": self.socket, "datadir": self.datadir, "flavor": self.flavor.value,
                             "version": self.version, "page_size": page_size_label(self.page_size),
                             "dir": self.dir}
        if st == SandboxState.CRASHED:
            d["problem"] = f"stale pid file names process {self._read_pid()}, which is gone: the server crashed or was killed"
        return d

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


# Closers for what a sandbox owns outside its directory.  The kernel knows nothing of them: whoever puts a
# sandbox's files elsewhere (the mover: InnoDB components on tiers) registers one with on_destroy().  Each is
# called with the sandbox's name after the server is stopped and before the directory goes, and returns
# one line per thing it did.
DESTROY_CLOSERS: list[Callable[[str], list[str]]] = []


def on_destroy(closer: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    if closer not in DESTROY_CLOSERS:
        DESTROY_CLOSERS.append(closer)
    return closer


def validate_name(name: str) -> None:
    if not NAME_RE.match(name or ""):
        raise UsageError(f"sandbox name {name!r} is not valid; use letters, digits, '.', '_' or '-' (no '/'), "
                         "at most 63 characters")


def list_sandboxes() -> list[Sandbox]:
    root = sandboxes_dir()
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        if (p / "sandbox.json").is_file():
            try:
                out.append(Sandbox.load(p.name))
            except Exception:
                continue
    return out


def _socket_path(sandbox_dir: Path, name: str) -> str:
    p = str(sandbox_dir / "mysqld.sock")
    if len(p) <= SOCKET_PATH_MAX:
        return p
    # unix socket paths are limited to 108 bytes: fall back to a short, private path
    short = Path("/tmp") / f"innotier-{abs(hash(str(sandbox_dir))) % 10**10}-{name[:20]}.sock"
    return str(short)


def create(name: str, page_size: str | int = "16k", datadir: str | None = None, port: int | None = None,
           options: dict[str, str] | None = None, basedir: str | None = None,
           binaries: ServerBinaries | None = None, server: str | None = None) -> Sandbox:
    """Validate everything first, then initialize a new datadir with the page size fixed at init."""
    validate_name(name)
    page = parse_page_size(page_size)
    sb_dir = sandboxes_dir() / name
    if (sb_dir / "sandbox.json").exists():
        raise SandboxError(f"sandbox {name} already exists; destroy it first or pick another name")
    if port is not None:
        if not (1 <= port <= 65535):
            raise UsageError(f"port {port} is out of range; give 1-65535")
        if port_in_use(port) or any(sb.port == port for sb in list_sandboxes()):
            raise SandboxError(f"port {port} is in use; pick another --port or leave it out to get a free one")
    data = Path(datadir).resolve() if datadir else sb_dir / "data"
    for other in list_sandboxes():
        if Path(other.datadir).resolve() == data:
            raise SandboxError(f"datadir {data} belongs to sandbox {other.name}; give another --datadir")
    if data.exists() and any(data.iterdir()):
        raise SandboxError(f"datadir {data} is not empty; give an empty or new directory")
    if server and basedir:
        raise UsageError("give either --server or --basedir, not both")
    bins = binaries or (binaries_for_server(server) if server else find_binaries(basedir))
    port = port or free_port()
    sb_dir.mkdir(parents=True, exist_ok=True)
    try:
        sb = Sandbox(name=name, dir=str(sb_dir), datadir=str(data), port=port, socket=_socket_path(sb_dir, name),
                     mysqld=bins.mysqld, install_db=bins.install_db, flavor=bins.flavor, version=str(bins.version),
                     version_string=bins.version_string, page_size=page, options=dict(options or {}),
                     basedir=basedir, created_at=time.time(), server=bins.server)
        sb.write_cnf()
        sb.tmpdir.mkdir(exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        _initialize(sb, bins)
        sb.save()
    except BaseException:
        shutil.rmtree(sb_dir, ignore_errors=True)
        if datadir and data.exists() and not any(data.iterdir()):
            data.rmdir()
        elif datadir and data.exists():
            shutil.rmtree(data, ignore_errors=True)
        raise
    return sb


def _initialize(sb: Sandbox, bins: ServerBinaries) -> None:
    stdin = None
    if bins.flavor == Flavor.MARIADB and bins.server and not bins.install_db:
        cmd, stdin = _mariadb_tree_bootstrap(sb, bins)
    elif bins.flavor == Flavor.MARIADB:
        cmd = [bins.install_db, f"--defaults-file={sb.cnf}", "--auth-root-authentication-method=normal",
               "--skip-test-db"]
        if bins.basedir:
            cmd.append(f"--basedir={bins.basedir}")
        if os.geteuid() == 0:
            cmd.append("--user=root")
    else:
        cmd = sb.launcher() + [bins.mysqld, f"--defaults-file={sb.cnf}", "--initialize-insecure"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, input=stdin)
    if out.returncode == 0 and stdin is not None:
        write_atomic(Path(sb.datadir) / "mariadb_upgrade_info", f"{bins.version}-MariaDB")
    if out.returncode != 0:
        detail = [ln for ln in (out.stderr + out.stdout).splitlines() if "ERROR" in ln or "error" in ln]
        msg = (detail[-1] if detail else (out.stderr or out.stdout).strip().splitlines()[-1:] or ["?"])
        msg = msg if isinstance(msg, str) else msg[0]
        raise SandboxError(f"initializing the datadir of sandbox {sb.name} failed: {msg.strip()}; "
                           f"check the options given with --option")


# What mariadb-install-db feeds to `mariadbd --bootstrap`, in its order (root gets a normal password account).
MARIADB_BOOTSTRAP_SQL = ("mariadb_system_tables.sql", "mariadb_performance_tables.sql",
                         "mariadb_system_tables_data.sql", "fill_help_tables.sql",
                         "maria_add_gis_sp_bootstrap.sql", "mariadb_sys_schema.sql")


def _mariadb_tree_bootstrap(sb: Sandbox, bins: ServerBinaries) -> tuple[list[str], str]:
    """mariadb-install-db's work for a tree's server: its shell script cannot run the tree's helper binaries
    (they need the tree's loader), so its SQL goes to `mariadbd --bootstrap` directly, as the script does."""
    srv = sb.installed_server()
    share = srv.root / srv.dist.share_dir
    missing = [f for f in MARIADB_BOOTSTRAP_SQL if not (share / f).is_file()]
    if missing:
        raise SandboxError(f"server {srv.dist.name} lacks {', '.join(missing)} in {share}; reinstall it")
    sql = "create database if not exists mysql;\nuse mysql;\nSET @auth_root_socket=NULL;\n"
    sql += "".join((share / f).read_text() for f in MARIADB_BOOTSTRAP_SQL)
    cmd = sb.launcher() + [bins.mysqld, f"--defaults-file={sb.cnf}", "--bootstrap", "--log-warnings=0",
                           "--enforce-storage-engine=", "--max_allowed_packet=8M", "--net_buffer_length=16K"]
    return cmd, sql


def binaries_of(sb: Sandbox) -> ServerBinaries:
    """The server binaries a sandbox was created with."""
    return ServerBinaries(mysqld=sb.mysqld, install_db=sb.install_db, flavor=sb.flavor,
                          version=Version.parse(sb.version), version_string=sb.version_string, basedir=sb.basedir,
                          server=sb.server)


def adopt(name: str, datadir: str | os.PathLike, credentials_from: str | os.PathLike, page_size: str | int,
          binaries: ServerBinaries, options: dict[str, str] | None = None, port: int | None = None) -> Sandbox:
    """A sandbox around an already-initialized datadir (a verified clone of a golden copy): no initialization.

    The datadir's mysql.user already holds the root password of the sandbox it was cloned from, so the
    0600 client.cnf is copied from ``credentials_from`` with this sandbox's socket.
    """
    validate_name(name)
    sb_dir = sandboxes_dir() / name
    if (sb_dir / "sandbox.json").exists():
        raise SandboxError(f"sandbox {name} already exists; destroy it first or pick another name")
    sb_dir.mkdir(parents=True, exist_ok=True)
    sb = Sandbox(name=name, dir=str(sb_dir), datadir=str(datadir), port=port or free_port(),
                 socket=_socket_path(sb_dir, name), mysqld=binaries.mysqld, install_db=binaries.install_db,
                 flavor=binaries.flavor, version=str(binaries.version), version_string=binaries.version_string,
                 page_size=parse_page_size(page_size), options=dict(options or {}), basedir=binaries.basedir,
                 created_at=time.time(), needs_bootstrap=False, server=binaries.server)
    sb.write_cnf()
    sb.tmpdir.mkdir(exist_ok=True)
    creds = [ln for ln in Path(credentials_from).read_text().splitlines() if not ln.startswith("socket")]
    write_atomic(sb.client_cnf, "\n".join(creds + [f"socket={sb.socket}"]) + "\n", mode=0o600)
    sb.save()
    return sb
