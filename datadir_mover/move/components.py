"""What each movable InnoDB component is: its option, where it lives, which files are its own.

Facts per flavor and version (MySQL 8.0/8.4 Reference Manual "InnoDB Startup Options and System
Variables" and "Moving Tablespace Files While the Server is Offline"; MariaDB KB "InnoDB System
Variables" and "InnoDB Redo Log"; MDEV-27199):

- datadir: everything in ``datadir`` (schemas, ibdata, redo, undo, Aria logs) except what
  lives elsewhere; ``ibtmp1`` is recreated at every start and never copied.
- redo (``innodb_log_group_home_dir``): ``ib_logfile0`` on MariaDB 10.5+ (one file); ``ib_logfile0..N`` on
  MySQL <= 8.0.29; ``#innodb_redo/`` on MySQL 8.0.30+.  MariaDB 10.8+ refuses to start without
  ib_logfile0 (MDEV-27199): redo is copied like data, never recreated.
- ibdata (``innodb_data_home_dir``): the files of ``innodb_data_file_path``; holds the doublewrite
  buffer on MariaDB and on MySQL before 8.0.20.
- doublewrite (``innodb_doublewrite_dir``): ``#ib_<page>_<n>.dblwr``, MySQL 8.0.20+ only.
- undo (``innodb_undo_directory``): ``undoNNN`` (MariaDB) / ``undo_NNN`` / ``*.ibu`` (MySQL 8.0); with
  ``innodb_undo_tablespaces=0`` (MariaDB before 11.0 by default) undo lives in ibdata.
- tmpdir: temporary files only; nothing to copy, the directory is created.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from tuner.core.errors import MoveError
from tuner.core.server import COMPONENTS, Flavor, ServerModel, Version, has_doublewrite_files, has_redo_directory

# files never copied with a datadir: recreated at start, or runtime-only
DATADIR_SKIP = re.compile(r"^(ibtmp\d+|.*\.pid|.*\.sock|.*\.sock\.lock|#innodb_temp)$")

UNDO_FILE = re.compile(r"^(undo\d{3}|undo_\d{3}|.*\.ibu)$")
# DETECT_ONLY adds a batch file #ib_<page>_<n>.bdblwr (seen on MySQL 9.7.4)
DBLWR_FILE = re.compile(r"^#ib_\d+_\d+\.b?dblwr$")
REDO_FILE = re.compile(r"^ib_logfile\d+$")
# the buffer pool dump (innodb_buffer_pool_filename) is written to innodb_data_home_dir: it travels with ibdata;
# a warm-up list, not data, so a stale one in a target never blocks a move
BUFFER_POOL_DUMP = "ib_buffer_pool"


@dataclass(frozen=True)
class Component:
    name: str
    variable: str  # the option that says where it lives
    what: str  # one line, for plans
    copies_files: bool = True


CATALOG: dict[str, Component] = {
    "datadir": Component("datadir", "datadir", "the data directory (schemas, system tablespace, redo, undo unless placed elsewhere)"),
    "redo": Component("redo", "innodb_log_group_home_dir", "the InnoDB redo log"),
    "ibdata": Component("ibdata", "innodb_data_home_dir", "the InnoDB system tablespace (ibdata)"),
    "doublewrite": Component("doublewrite", "innodb_doublewrite_dir", "the doublewrite files (MySQL 8.0.20+)"),
    "undo": Component("undo", "innodb_undo_directory", "the InnoDB undo tablespaces"),
    "tmpdir": Component("tmpdir", "tmpdir", "the server's temporary directory", copies_files=False),
}
assert tuple(CATALOG) == COMPONENTS


def get(name: str) -> Component:
    if name not in CATALOG:
        raise MoveError(f"component {name!r} is unknown; use one of {', '.join(CATALOG)}")
    return CATALOG[name]


def check_supported(component: str, model: ServerModel) -> None:
    """Refuse components this server does not have, and say where the data lives instead."""
    get(component)
    if component == "doublewrite" and not has_doublewrite_files(model.flavor, model.version):
        where = "MariaDB" if model.flavor == Flavor.MARIADB else f"MySQL {model.version} (before 8.0.20)"
        raise MoveError(f"{where} has no separate doublewrite files: the doublewrite buffer lives in the system "
                        "tablespace (ibdata); move it with `innotier move plan ibdata --to PATH`")
    if component == "undo" and undo_in_ibdata(model):
        raise MoveError("innodb_undo_tablespaces is 0 on this server, so undo logs live in the system tablespace "
                        "(ibdata), not in separate files; move them with `innotier move plan ibdata --to PATH`")


def undo_in_ibdata(model: ServerModel) -> bool:
    n = model.variables.get("innodb_undo_tablespaces")
    if model.flavor == Flavor.MARIADB:
        return n is not None and n.strip() == "0"
    return model.version < Version(8, 0, 14) and (n or "0").strip() == "0"


def source_dir(component: str, model: ServerModel) -> str:
    """The directory the component's option points at now."""
    if component == "redo":
        return model.innodb_log_group_home_dir  # #innodb_redo/ sits inside it on MySQL 8.0.30+
    loc = model.locations()[component]
    if loc is None:
        raise MoveError(f"the server reports no location for {component}; it does not have this component")
    return loc


def ibdata_names(model: ServerModel) -> list[str]:
    """File names of innodb_data_file_path (``ibdata1:12M;ibdata2:50M:autoextend``); raw partitions excluded."""
    names = []
    for part in (model.innodb_data_file_path or "ibdata1:12M:autoextend").split(";"):
        fields = part.strip().split(":")
        if not fields or not fields[0]:
            continue
        if any(f.lower() in ("raw", "newraw") or f.lower().endswith("raw") for f in fields[2:]):
            continue
        names.append(fields[0])
    return names


def other_locations_inside(component: str, model: ServerModel) -> list[str]:
    """For a datadir move: the other components that live outside the datadir (they stay where they are)."""
    src = os.path.realpath(model.datadir)
    out = []
    for name, loc in model.locations().items():
        if name == "datadir" or not loc:
            continue
        real = os.path.realpath(loc)
        if real != src and not real.startswith(src + os.sep):
            out.append(f"{name} stays at {loc}")
    return out


def top_names(component: str, model: ServerModel, directory: str) -> list[str]:
    """Top-level names in ``directory`` that belong to the component (what a move copies and finalize removes)."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    if component == "datadir":
        return [n for n in names if not DATADIR_SKIP.match(n) and not _is_special(os.path.join(directory, n))]
    if component == "redo":
        if has_redo_directory(model.flavor, model.version):
            return [n for n in names if n == "#innodb_redo"]
        return [n for n in names if REDO_FILE.match(n)]
    if component == "ibdata":
        wanted = set(ibdata_names(model)) | {BUFFER_POOL_DUMP}
        return [n for n in names if n in wanted]
    if component == "undo":
        return [n for n in names if UNDO_FILE.match(n)]
    if component == "doublewrite":
        return [n for n in names if DBLWR_FILE.match(n)]
    return []  # tmpdir


def expected_names(component: str, model: ServerModel) -> list[str]:
    """Names a component must have (checked before a move: a redo move with no ib_logfile0 is refused)."""
    if component == "redo":
        return ["#innodb_redo"] if has_redo_directory(model.flavor, model.version) else ["ib_logfile0"]
    if component == "ibdata":
        return ibdata_names(model)[:1]
    return []


def _is_special(path: str) -> bool:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return True
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))


def shutdown_mode(component: str, model: ServerModel, force_slow: bool = False) -> tuple[str, str]:
    """(stop mode, why): clean by default, slow where the redo format makes it the conservative choice.

    Moving files only needs a clean shutdown (innodb_fast_shutdown 0 or 1, never 2: the MySQL
    5.6 manual's "Changing the Number or Size of InnoDB Redo Log Files" asks for exactly that).
    For servers with the old multi-file redo (MySQL before 8.0.30, MariaDB before 10.5) we
    take a slow shutdown (full purge and change-buffer merge), which the manual recommends
    before anything that may touch file formats (innodb_fast_shutdown, "slow shutdown"), so
    the moved redo holds nothing but a checkpoint.  ``--slow-shutdown`` forces it.
    """
    if force_slow:
        return "slow", "asked for with --slow-shutdown"
    if component in ("redo", "datadir") and model.flavor != Flavor.MARIADB and model.version < Version(8, 0, 30):
        return "slow", "multi-file redo (MySQL before 8.0.30): slow shutdown so the moved redo holds only a checkpoint"
    if component in ("redo", "datadir") and model.flavor == Flavor.MARIADB and model.version < Version(10, 5):
        return "slow", "multi-file redo (MariaDB before 10.5): slow shutdown so the moved redo holds only a checkpoint"
    return "clean", "a clean shutdown (innodb_fast_shutdown=1) leaves every page and the redo checkpoint on disk"
