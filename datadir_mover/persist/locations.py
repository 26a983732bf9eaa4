"""Where the server keeps its InnoDB files, and which of those directories a file of a copy belongs in.

Read again at every sync and restore, never frozen at install: a later move (``innotier move apply redo ...``)
changes them, and a restore must put each file where the server will look for it when it next starts.  A
running server says where it is (its variables); a stopped one is read from its option files (a sandbox's
my.cnf and conf.d, where the mover writes its placement; a system server's, as
``my_print_defaults`` reads them for the server's groups: the files it will read at its start)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Any

from tuner.core.server import ConnectionSpec, ServerModel, inspect, model_from_variables
from tuner.core.sandbox import Sandbox
from tuner.core.sandbox.config import effective_options

from datadir_mover.persist import server_process

REDO_NAMES = re.compile(r"^(ib_logfile\d+|#innodb_redo)$")
UNDO_NAMES = re.compile(r"^(undo\d{3}|undo_\d{3}|.*\.ibu)$")


@dataclass
class Locations:
    """Where the server keeps InnoDB files (saved so restore works while the server is down)."""

    datadir: str
    ibdata_dir: str
    redo_dir: str
    undo_dir: str
    data_file_path: str
    flavor: str
    version: str
    page_size: int
    uid: int
    gid: int

    @classmethod
    def from_model(cls, model: ServerModel) -> "Locations":
        st = os.stat(model.datadir)
        return cls(model.datadir, model.innodb_data_home_dir, model.innodb_log_group_home_dir,
                   model.innodb_undo_directory, model.innodb_data_file_path, model.flavor.value,
                   str(model.version), model.page_size, st.st_uid, st.st_gid)

    def ibdata_names(self) -> set[str]:
        return {p.split(":")[0] for p in self.data_file_path.split(";") if p.strip()}

    def destination(self, name: str) -> str:
        """Which directory a top-level file of a prepared backup belongs in."""
        if name in self.ibdata_names():
            return self.ibdata_dir
        if REDO_NAMES.match(name):
            return self.redo_dir
        if UNDO_NAMES.match(name):
            return self.undo_dir
        return self.datadir

    def dirs(self) -> list[str]:
        return sorted({self.datadir, self.ibdata_dir, self.redo_dir, self.undo_dir})


def from_options(options: dict[str, str], last: Locations) -> Locations:
    """The locations a server started with ``options`` uses; what options cannot say (identity, page size, the
    owner of a datadir that is gone) comes from ``last``."""
    variables: dict[str, Any] = {k: v for k, v in options.items() if k != "innodb_page_size"}
    variables["version"] = last.version + ("-MariaDB" if last.flavor == "mariadb" else "")
    model = model_from_variables(variables)
    try:
        st = os.stat(model.datadir)
        uid, gid = st.st_uid, st.st_gid
    except FileNotFoundError:   # the tier lost it: the owner it had at the last sync
        uid, gid = last.uid, last.gid
    return replace(last, datadir=model.datadir, ibdata_dir=model.innodb_data_home_dir,
                   redo_dir=model.innodb_log_group_home_dir, undo_dir=model.innodb_undo_directory,
                   data_file_path=model.innodb_data_file_path, uid=uid, gid=gid)


def configured_options(server: dict[str, Any], last: Locations) -> dict[str, str] | None:
    """The [mysqld] options the stopped server will start with, or None when they cannot be read."""
    if server.get("sandbox"):
        return effective_options(Sandbox.load(server["sandbox"]))
    if server.get("server_argv"):
        series = ".".join(last.version.split(".")[:2])
        return server_process.print_defaults(server["server_argv"], last.flavor, series)
    return None


def current(server: dict[str, Any], last: Locations, spec: ConnectionSpec | None) -> Locations:
    """Where the server keeps its files now: from the running server (``spec``), else from its option files,
    else (a system server installed before its command line was recorded) as last seen."""
    if spec is not None:
        return Locations.from_model(inspect(spec))
    options = configured_options(server, last)
    return last if options is None else from_options(options, last)
