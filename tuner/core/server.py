"""The server model: what a MySQL-family server is, how to reach it, where its InnoDB files live.

Data flows one way: a ``ConnectionSpec`` (how to reach a server, from CLI flags,
a sandbox or a defaults file) -> ``inspect()`` -> a ``ServerModel`` (flavor,
version, effective InnoDB variables and file locations).  Everything else in
innotier reads the model; nothing writes it back.

Credentials never come from argv: they come from a defaults file ([client]
section) or from the environment (INNOTIER_USER / INNOTIER_PASSWORD, or the
standard MYSQL_PWD).  ``ConnectionSpec.__repr__`` hides the password.
"""

from __future__ import annotations

import configparser
import contextlib
import dataclasses
import enum
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tuner.core.errors import ServerError, UsageError
from tuner.core.optionfile import private_option_file


class Flavor(str, enum.Enum):
    MARIADB = "mariadb"
    MYSQL = "mysql"
    PERCONA = "percona"


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> "Version":
        m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
        if not m:
            raise ServerError(f"cannot read a version from {text!r}; expected something like 10.11.6")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def series(self) -> str:
        return f"{self.major}.{self.minor}"


def flavor_from_version(version_string: str, version_comment: str = "") -> Flavor:
    text = f"{version_string} {version_comment}"
    if "mariadb" in text.lower():
        return Flavor.MARIADB
    if "percona" in text.lower():
        return Flavor.PERCONA
    return Flavor.MYSQL


# ---------------------------------------------------------------------------
# How to reach a server


def read_defaults_file(path: str | os.PathLike, sections: tuple[str, ...] = ("client", "innotier")) -> dict[str, str]:
    """Options from a MySQL option file's [client] (and [innotier]) sections; ``!include`` lines are skipped."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"defaults file {p} does not exist; give an option file with a [client] section")
    text = "\n".join(line for line in p.read_text().splitlines() if not line.lstrip().startswith("!"))
    cp = configparser.ConfigParser(allow_no_value=True, strict=False, interpolation=None)
    try:
        cp.read_string(text)
    except configparser.Error as exc:
        raise UsageError(f"defaults file {p} cannot be parsed ({exc.__class__.__name__}); fix its syntax") from None
    out: dict[str, str] = {}
    for section in sections:
        if cp.has_section(section):
            for k, v in cp.items(section):
                out[k.replace("-", "_")] = (v or "").strip().strip("'\"")
    return out


@dataclass
class ConnectionSpec:
    """How to reach one server.  The password is kept out of repr, logs and argv."""

    socket: str | None = None
    host: str | None = None
    port: int | None = None
    user: str = "root"
    password: str | None = field(default=None, repr=False)
    database: str | None = None
    sandbox: str | None = None
    defaults_file: str | None = None

    @classmethod
    def from_options(cls, socket: str | None = None, host: str | None = None, port: int | None = None,
                     defaults_file: str | None = None, database: str | None = None) -> "ConnectionSpec":
        """A spec for a server named by socket or host/port; user and password come from the
        defaults file's [client] section or INNOTIER_USER / INNOTIER_PASSWORD / MYSQL_PWD."""
        opts = read_defaults_file(defaults_file) if defaults_file else {}
        spec = cls(
            socket=socket or (opts.get("socket") if not (host or port) else None),
            host=host or opts.get("host"),
            port=port or (int(opts["port"]) if opts.get("port") else None),
            user=os.environ.get("INNOTIER_USER") or opts.get("user") or "root",
            password=os.environ.get("INNOTIER_PASSWORD") or opts.get("password") or os.environ.get("MYSQL_PWD"),
            database=database,
            defaults_file=defaults_file,
        )
        if not (spec.socket or spec.host or spec.port):
            raise UsageError("no server named; use --sandbox NAME, --socket PATH or --host H --port N")
        if spec.port and not spec.host:
            spec.host = "127.0.0.1"
        return spec

    def describe(self) -> str:
        where = f"socket {self.socket}" if self.socket else f"{self.host}:{self.port or 3306}"
        return f"sandbox {self.sandbox} ({where})" if self.sandbox else where

    def connect_kwargs(self, **extra: Any) -> dict[str, Any]:
        kw: dict[str, Any] = {"user": self.user, "use_pure": False, "autocommit": True,
                              "connection_timeout": 10}
        if self.password:
            kw["password"] = self.password
        if self.socket:
            kw["unix_socket"] = self.socket
        else:
            kw["host"] = self.host or "127.0.0.1"
            kw["port"] = self.port or 3306
        if self.database:
            kw["database"] = self.database
        kw.update(extra)
        return kw

    def connect(self, **extra: Any):
        """A new connection (mysql-connector-python, C extension)."""
        import mysql.connector

        try:
            return mysql.connector.connect(**self.connect_kwargs(**extra))
        except mysql.connector.Error as exc:
            raise ServerError(f"cannot connect to {self.describe()}: {exc.msg if hasattr(exc, 'msg') else exc}; "
                              "check that the server is running and the credentials are right") from None

    @contextlib.contextmanager
    def client_option_file(self) -> Iterator[str]:
        """A private (0600) [client] option file for external tools, removed afterwards.

        External tools (mariadb, mariadb-backup, pt-*, peers) get credentials from
        this file via --defaults-file, never from their command line.
        """
        lines = ["[client]", f"user={self.user}"]
        if self.password:
            lines.append(f"password={self.password}")
        if self.socket:
            lines.append(f"socket={self.socket}")
        else:
            lines += [f"host={self.host or '127.0.0.1'}", f"port={self.port or 3306}", "protocol=tcp"]
        with private_option_file(lines, prefix="innotier-client-") as path:
            yield path

    def with_database(self, database: str | None) -> "ConnectionSpec":
        return dataclasses.replace(self, database=database)


# ---------------------------------------------------------------------------
# What a server is

COMPONENTS = ("datadir", "redo", "ibdata", "doublewrite", "undo", "tmpdir")


@dataclass
class ServerModel:
    """A MySQL-family server as innotier sees it: identity, InnoDB settings, file locations."""

    flavor: Flavor
    version: Version
    version_string: str
    managed: str  # "sandbox" or "system"
    sandbox: str | None
    socket: str | None
    port: int | None
    pid_file: str | None
    datadir: str
    innodb_data_home_dir: str
    innodb_data_file_path: str
    innodb_log_group_home_dir: str
    redo_dir: str
    innodb_undo_directory: str
    innodb_doublewrite_dir: str | None
    tmpdir: str
    page_size: int
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def has_doublewrite_files(self) -> bool:
        """MySQL 8.0.20+ keeps the doublewrite buffer in its own files; MariaDB and older MySQL keep it in ibdata."""
        return has_doublewrite_files(self.flavor, self.version)

    def locations(self) -> dict[str, str | None]:
        """Where each movable InnoDB component lives now."""
        return {
            "datadir": self.datadir,
            "ibdata": self.innodb_data_home_dir,
            "redo": self.redo_dir,
            "undo": self.innodb_undo_directory,
            "doublewrite": self.innodb_doublewrite_dir,
            "tmpdir": self.tmpdir,
        }

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["flavor"] = self.flavor.value
        d["version"] = str(self.version)
        d["locations"] = self.locations()
        return d


def has_doublewrite_files(flavor: Flavor, version: Version) -> bool:
    return flavor in (Flavor.MYSQL, Flavor.PERCONA) and version >= Version(8, 0, 20)


def has_redo_directory(flavor: Flavor, version: Version) -> bool:
    """MySQL 8.0.30+ keeps redo in #innodb_redo/ under innodb_log_group_home_dir."""
    return flavor in (Flavor.MYSQL, Flavor.PERCONA) and version >= Version(8, 0, 30)


def _abs(path: str | None, base: str) -> str:
    if not path:
        return base
    p = path.strip()
    if p in ("", "./", "."):
        return base
    return os.path.normpath(os.path.join(base, p))


LOCATION_VARIABLES = (
    "datadir", "innodb_data_home_dir", "innodb_data_file_path", "innodb_log_group_home_dir",
    "innodb_undo_directory", "innodb_doublewrite_dir", "tmpdir", "innodb_page_size",
    "innodb_temp_data_file_path", "socket", "port", "pid_file", "version", "version_comment",
)
# files the server writes besides InnoDB's, where it resolved them (a datadir move makes those given by an
# absolute path inside the datadir follow it: datadir_mover.move.followers)
FILE_VARIABLES = (
    "log_bin_basename", "log_bin_index", "relay_log_basename", "relay_log_index", "master_info_file",
    "relay_log_info_file", "aria_log_dir_path", "log_error", "slow_query_log_file", "general_log_file",
    "secure_file_priv",
)


def model_from_variables(variables: dict[str, str], sandbox: str | None = None) -> ServerModel:
    """Build the model from SHOW GLOBAL VARIABLES output (live, or a recorded capture)."""
    v = {k.lower(): ("" if val is None else str(val)) for k, val in variables.items()}
    flavor = flavor_from_version(v.get("version", ""), v.get("version_comment", ""))
    version = Version.parse(v.get("version", ""))
    if not v.get("datadir"):   # no guess: packages put it in different places (/var/lib/mariadb in Debian sid)
        raise ServerError("the server's variables name no datadir, so innotier cannot tell where its files are; "
                          "give variables as SHOW GLOBAL VARIABLES reports them (datadir included)")
    datadir = os.path.normpath(v["datadir"])
    data_home = _abs(v.get("innodb_data_home_dir"), datadir)
    log_home = _abs(v.get("innodb_log_group_home_dir"), datadir)
    redo_dir = os.path.join(log_home, "#innodb_redo") if has_redo_directory(flavor, version) else log_home
    dblwr = None
    if has_doublewrite_files(flavor, version):
        dblwr = _abs(v.get("innodb_doublewrite_dir"), data_home)
    tmpdir = (v.get("tmpdir") or "/tmp").split(":")[0]
    return ServerModel(
        flavor=flavor,
        version=version,
        version_string=v.get("version", ""),
        managed="sandbox" if sandbox else "system",
        sandbox=sandbox,
        socket=v.get("socket") or None,
        port=int(v["port"]) if v.get("port", "").isdigit() else None,
        pid_file=v.get("pid_file") or None,
        datadir=datadir,
        innodb_data_home_dir=data_home,
        innodb_data_file_path=v.get("innodb_data_file_path", "ibdata1:12M:autoextend"),
        innodb_log_group_home_dir=log_home,
        redo_dir=redo_dir,
        innodb_undo_directory=_abs(v.get("innodb_undo_directory"), datadir),
        innodb_doublewrite_dir=dblwr,
        tmpdir=tmpdir,
        page_size=int(v.get("innodb_page_size") or 16384),
        variables={k: val for k, val in sorted(v.items()) if k.startswith("innodb_") or k in LOCATION_VARIABLES
                   or k in FILE_VARIABLES                   or k in ("max_connections", "version_compile_os", "log_bin", "sync_binlog")},
    )


def fetch_variables(conn) -> dict[str, str]:
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL VARIABLES")
    rows = cur.fetchall()
    cur.close()
    return {(k.decode() if isinstance(k, bytes) else k): (val.decode() if isinstance(val, bytes) else val)
            for k, val in rows}


def fetch_status(conn) -> dict[str, str]:
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL STATUS")
    rows = cur.fetchall()
    cur.close()
    return {(k.decode() if isinstance(k, bytes) else k): (val.decode() if isinstance(val, bytes) else val)
            for k, val in rows}


def inspect(spec: ConnectionSpec) -> ServerModel:
    """Connect and describe the server."""
    conn = spec.with_database(None).connect()
    try:
        variables = fetch_variables(conn)
    finally:
        conn.close()
    return model_from_variables(variables, sandbox=spec.sandbox)
