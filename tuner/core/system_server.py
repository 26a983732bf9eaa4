"""Where the distribution's own server is: the socket it listens on, read from what tells the truth.

Packages move their servers.  Debian sid's mariadb-server (from 1:11.8.6-5) runs on /var/lib/mariadb with its
socket at /run/mariadbd/mysqld.sock (set in /etc/mysql/mariadb.cnf; the datadir is compiled in), where MySQL's
package and older MariaDB use /var/lib/mysql and /run/mysqld/mysqld.sock (MySQL's compiled in, no option file
names them).  So the system server's socket is found, in this order:

1. the running server: a mariadbd/mysqld process in the cgroup of a packaged server unit (``mariadb.service``,
   ``mysql.service``, ``mysqld.service`` or an instance of one; a sandbox's server runs in no such unit), and
   the unix socket it listens on (its ``/proc/PID/fd`` against ``/proc/PID/net/unix``; MySQL's X Protocol
   socket left out).  Two such servers: refused, the caller names one;
2. the socket the server's option files set, read as the server reads them (``option_files``); where they set
   one, no other is taken (a socket elsewhere is another server's: sid moved MariaDB's so that MySQL can be
   installed beside it);
3. where they set none, the sockets packages are known to use (``SOCKETS``), where one is there.

Nothing found: one line naming each place tried.  The datadir is the server's answer once connected
(``@@datadir``), or ``datadir`` in the option files.  The server binary itself is not run to print its
defaults: under its package's confining profile (sid's ``mariadbd``) it would run confined and leave denials.
Readers take a root and a proc root, so recorded package trees stand in for hosts this machine is not.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tuner.core.errors import ServerError

# where packages put the socket: sid's MariaDB, Debian/Ubuntu's MySQL and older MariaDB, the same through the
# /var/run link, RHEL/Fedora
SOCKETS = ("/run/mariadbd/mysqld.sock", "/run/mysqld/mysqld.sock", "/var/run/mysqld/mysqld.sock",
           "/var/lib/mysql/mysql.sock")
# the option files a server reads by default, in order (the server runs as mysql: no ~/.my.cnf of root's)
OPTION_FILES = ("/etc/my.cnf", "/etc/mysql/my.cnf")
# the groups mariadbd reads (`my_print_defaults --mysqld`); mysqld reads the first two
SERVER_GROUPS = ("mysqld", "server", "client-server", "galera", "mariadb", "mariadbd")
SERVER_COMMS = ("mariadbd", "mysqld")
SERVER_UNIT = re.compile(r"^(mariadb|mysql|mysqld)(@[^/]*)?\.service$")
X_PROTOCOL_SOCKET = re.compile(r"mysqlx[^/]*$")   # MySQL's X Plugin listens too (mysqlx.sock): not the classic one
_LISTENING = "00010000"   # /proc/net/unix Flags of a listening socket (__SO_ACCEPTCON)


@dataclass(frozen=True)
class OptionFiles:
    """What a server's option files say for its groups: the files read in order, the last value of each option."""

    files: tuple[str, ...]
    includedirs: tuple[str, ...]       # the `!includedir` directories, in the order read
    options: dict[str, str] = field(default_factory=dict)   # names with `_` for `-`, `loose-` dropped
    origins: dict[str, str] = field(default_factory=dict)   # option -> the file its value comes from


@dataclass(frozen=True)
class RunningServer:
    pid: int
    unit: str
    sockets: tuple[str, ...]


@dataclass(frozen=True)
class FoundSocket:
    socket: str
    source: str    # where it was found, for the plan and the tests: "mariadb.service (pid 399)", a file, "known"


def _in_root(root: str, path: str) -> Path:
    """``path`` of the tree at ``root``, its own links followed inside that tree (my.cnf -> /etc/alternatives/...)."""
    p = Path(root, path.lstrip("/"))
    for _ in range(40):
        if not p.is_symlink():
            return p
        target = os.readlink(p)
        p = Path(root, target.lstrip("/")) if target.startswith("/") else p.parent / target
    return p


def _without_comment(line: str) -> str:
    """The line up to a ``#`` outside quotes (mysys's remove_end_comment: no blank needed before it)."""
    quote = ""
    for i, c in enumerate(line):
        if c in "'\"":
            quote = "" if quote == c else quote or c
        elif c == "#" and not quote:
            return line[:i]
    return line


def _option_line(line: str) -> tuple[str, str] | None:
    """``name = value`` (or a bare ``name``) as the server reads it; a value in matching quotes loses them."""
    name, eq, value = _without_comment(line).partition("=")
    value = value.strip()
    if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
        value = value[1:-1]
    name = name.strip().replace("-", "_")
    name = name[len("loose_"):] if name.startswith("loose_") else name
    return (name, value if eq else "") if name else None


def option_files(root: str = "/", files: tuple[str, ...] = OPTION_FILES,
                 groups: tuple[str, ...] = SERVER_GROUPS) -> OptionFiles:
    """Read ``files`` (absolute paths inside ``root``) and what they include, as the server does: `!include
    FILE`, `!includedir DIR` (its ``*.cnf`` in name order), options of ``groups`` only, the last one winning."""
    read: list[str] = []
    dirs: list[str] = []
    options: dict[str, str] = {}
    origins: dict[str, str] = {}

    def read_file(path: str, depth: int) -> None:
        p = _in_root(root, path)
        if depth > 10 or path in read:
            return
        try:
            text = p.read_text(errors="replace")
        except OSError:   # missing or unreadable: nothing of it can reach the server either
            return
        read.append(path)
        group = None
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("!includedir"):
                d = line[len("!includedir"):].strip()
                dirs.append(d.rstrip("/") or "/")
                try:
                    names = sorted(n for n in os.listdir(_in_root(root, d)) if n.endswith(".cnf"))
                except OSError:
                    names = []
                for n in names:
                    read_file(os.path.join(d, n), depth + 1)
            elif line.startswith("!include"):
                read_file(line[len("!include"):].strip(), depth + 1)
            elif line.startswith("["):
                group = line[1:line.find("]")].strip().lower() if "]" in line else None
            elif group in groups and (opt := _option_line(line)):
                options[opt[0]], origins[opt[0]] = opt[1], path

    for f in files:
        read_file(f, 0)
    return OptionFiles(tuple(read), tuple(dirs), options, origins)


def unit_of_pid(pid: int, proc_root: str = "/proc") -> str | None:
    """The systemd service whose cgroup holds ``pid`` (cgroup v2's ``0::`` line, or v1's name=systemd one)."""
    try:
        lines = Path(proc_root, str(pid), "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in sorted(lines, key=lambda ln: not ln.startswith("0::")):
        hierarchy, _, path = line.partition(":")[2].partition(":")
        if hierarchy in ("", "name=systemd"):
            units = [part for part in path.strip().split("/") if part.endswith(".service")]
            if units:
                return units[-1]
    return None


def listening_sockets(pid: int, proc_root: str = "/proc") -> tuple[str, ...]:
    """The unix socket paths ``pid`` listens on (root reads another user's fds; none when it cannot)."""
    inodes = set()
    try:
        fds = list(Path(proc_root, str(pid), "fd").iterdir())
        table = Path(proc_root, str(pid), "net", "unix").read_text().splitlines()[1:]
    except OSError:
        return ()
    for fd in fds:
        try:
            m = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(fd))
        except OSError:   # closed meanwhile: the server opens and closes files all the time
            continue
        if m:
            inodes.add(m.group(1))
    return tuple(sorted({f[7].rstrip() for f in (ln.split(None, 7) for ln in table)
                         if len(f) >= 8 and f[6] in inodes and f[3] == _LISTENING and f[7].startswith("/")}))


def running_servers(proc_root: str = "/proc") -> list[RunningServer]:
    """The mariadbd/mysqld processes that packaged server units run, with the sockets they listen on."""
    out = []
    for entry in sorted(Path(proc_root).iterdir(), key=lambda p: (len(p.name), p.name)):
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        unit = unit_of_pid(int(entry.name), proc_root) if comm in SERVER_COMMS else None
        if unit and SERVER_UNIT.match(unit):
            socks = tuple(s for s in listening_sockets(int(entry.name), proc_root) if not X_PROTOCOL_SOCKET.search(s))
            out.append(RunningServer(int(entry.name), unit, socks))
    return out


def find_socket(root: str = "/", proc_root: str = "/proc") -> FoundSocket:
    """The system server's socket: the running server's, else its option files', else a known one that is there."""
    running = [s for s in running_servers(proc_root) if s.sockets]
    if len(running) > 1:
        raise ServerError("several system servers run (" + "; ".join(f"{s.unit}: {s.sockets[0]}" for s in running)
                          + "); name one with --socket PATH")
    if running:
        return FoundSocket(running[0].sockets[0], f"{running[0].unit} (pid {running[0].pid})")
    tried = ["no mariadbd or mysqld with a socket runs in a server unit (mariadb, mysql or mysqld.service)"]
    read = option_files(root)
    configured = read.options.get("socket")
    if configured:   # the server's own word: a socket elsewhere is another server's (a co-installed MySQL's)
        if _in_root(root, configured).is_socket():
            return FoundSocket(str(Path(root, configured.lstrip("/"))),
                               f"socket = {configured} in {read.origins['socket']}")
        tried.append(f"its option file {read.origins['socket']} sets socket = {configured}, which is not there")
    else:
        tried.append(f"its option files ({' and '.join(OPTION_FILES)}, with what they include) set no socket")
        for known in SOCKETS:
            if _in_root(root, known).is_socket():
                return FoundSocket(str(Path(root, known.lstrip("/"))), "known")
        tried.append(f"nothing listens at {', '.join(SOCKETS)}")
    raise ServerError(f"no system server found: {'; '.join(tried)}; start it, or name the server with --socket PATH "
                      "(or --sandbox NAME, --host H --port N)")
