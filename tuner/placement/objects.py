"""What can be placed: each measured file named as a table, a partition or one of the mover's components.

performance_schema names files by their full path.  A ``<dir>/<schema>/<table>.ibd`` is a table (or a
partition: ``#P#`` on MariaDB, ``#p#`` on MySQL); the mover's own patterns (datadir_mover.move.components)
name redo, undo, doublewrite and ibdata; anything under tmpdir is tmpdir; a MySQL general tablespace is named
by the tables the server says it holds (``owners``, tuner/placement/spaces.py).  The rest (ibtmp1, .frm, Aria
and binary logs, the system schemas' tables, MySQL's mysql.ibd) is reported but not offered.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Iterable, Mapping

from datadir_mover.move.components import DBLWR_FILE, REDO_FILE, UNDO_FILE, ibdata_names, source_dir, top_names
from tuner.core.server import ServerModel
from tuner.placement.model import Candidate

Owners = Mapping[str, tuple[str, ...]]   # absolute file -> "schema.table" of each table in it
SYSTEM_SCHEMAS = frozenset({"mysql", "sys", "performance_schema", "information_schema"})
MIB = 1 << 20


def classify(path: str, model: ServerModel, owners: Owners | None = None) -> tuple[str, str, str] | None:
    """(key, kind, label) of the candidate the file belongs to, or None when it is not placeable alone.

    ``owners``: absolute file -> the tables in it, for files whose path does not name their table (MySQL's
    general tablespaces, spaces.general_tablespaces)."""
    name, parent = os.path.basename(path), os.path.dirname(path)
    if REDO_FILE.match(name) or os.path.basename(parent) == "#innodb_redo":
        return "redo", "redo", "redo log"
    if UNDO_FILE.match(name):
        return "undo", "undo", "undo tablespaces"
    if DBLWR_FILE.match(name):
        return "doublewrite", "doublewrite", "doublewrite files"
    if name in ibdata_names(model) and _same(parent, model.innodb_data_home_dir):
        return "ibdata", "ibdata", "system tablespace (ibdata)"
    if _inside(path, model.tmpdir):
        return "tmpdir", "tmpdir", "temporary files (tmpdir)"
    tables = owners.get(os.path.realpath(path)) if owners else None
    if tables:
        if len(tables) == 1:
            return tables[0], "table", tables[0]
        space = name[:-4] if name.endswith(".ibd") else name
        return f"tablespace {space}", "table", f"general tablespace {space} ({', '.join(tables)})"
    if not name.endswith(".ibd") or _same(parent, model.datadir):
        return None
    schema, table = os.path.basename(parent), name[:-4]
    if schema in SYSTEM_SCHEMAS:
        return None
    for mark in ("#P#", "#p#"):
        if mark in table:
            base, part = table.split(mark, 1)
            return f"{schema}.{table}", "partition", f"{schema}.{base} partition {part}"
    return f"{schema}.{table}", "table", f"{schema}.{table}"


def _same(a: str, b: str | None) -> bool:
    return b is not None and os.path.realpath(a) == os.path.realpath(b)


def _inside(path: str, directory: str | None) -> bool:
    if not directory:
        return False
    d = os.path.realpath(directory)
    return os.path.realpath(path).startswith(d + os.sep)


def candidates(measured: Iterable[str], model: ServerModel, interval_writes: Mapping[str, int],
               table_sizes: Mapping[str, int], owners: Owners | None = None) -> tuple[list[Candidate], list[str]]:
    """The candidates the measured files belong to, with their sizes, and the files that belong to none.

    ``interval_writes``: the most bytes written to tmpdir in one interval (tmpdir's size is what it must
    hold, not what it holds now); ``table_sizes``: schema.table -> bytes from information_schema, used
    when a table's file cannot be read here (a server on another host).
    """
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    other = []
    for path in sorted(measured):
        found = classify(path, model, owners)
        if found is None:
            other.append(path)
        else:
            groups[found].append(path)
    for component in ("redo", "undo", "doublewrite", "ibdata"):
        files = component_files(component, model)
        if files and not any(k[0] == component for k in groups):
            key = classify(files[0], model)
            if key is not None:
                groups[key] = []
    out = []
    for (key, kind, label), files in sorted(groups.items()):
        size = _size(key, kind, files, model, interval_writes, table_sizes)
        out.append(Candidate(key, kind, label, tuple(files), size))
    return out, other


def component_files(component: str, model: ServerModel) -> list[str]:
    """The component's files on disk now (what the mover would move); redo's directory is walked."""
    try:
        directory = source_dir(component, model)
    except Exception:  # noqa: BLE001 - the server has no such component
        return []
    out = []
    for name in top_names(component, model, directory):
        path = os.path.join(directory, name)
        if os.path.isdir(path):
            out += [os.path.join(path, n) for n in sorted(os.listdir(path))]
        else:
            out.append(path)
    return out


def _size(key: str, kind: str, files: list[str], model: ServerModel, interval_writes: Mapping[str, int],
          table_sizes: Mapping[str, int]) -> int:
    if kind == "tmpdir":
        return max(_du(model.tmpdir), interval_writes.get("tmpdir", 0), MIB)
    if kind in ("redo", "undo", "doublewrite", "ibdata"):
        return sum(_stat_size(p) or 0 for p in component_files(kind, model)) or sum(_stat_size(p) or 0 for p in files)
    sizes = [_stat_size(p) for p in files]
    if all(s is not None for s in sizes):
        return sum(sizes)  # type: ignore[arg-type]
    return table_sizes.get(key, 0)


def _stat_size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _du(directory: str | None) -> int:
    total = 0
    for root, _dirs, names in os.walk(directory or "/nonexistent"):
        for n in names:
            total += _stat_size(os.path.join(root, n)) or 0
    return total
