"""Placing single TPC-C tables of a cell on a tier (issue 31, item 4): ``placement: {tpcc.stock: fast}``.

A table's file can only be put elsewhere by the server (its data dictionary says where a table lives), so
this runs after the cell's server started and before its warm-up, with no client connected.

MariaDB (``DATA DIRECTORY`` is fixed when the table is created, and it has no general tablespaces):

  CREATE TABLE <shadow> (the table's own definition) DATA DIRECTORY='<cell dir on the tier>'
  INSERT INTO <shadow> SELECT * FROM <table>          (in the clustered index's order: key order)
  RENAME TABLE <table> TO <old>, <shadow> TO <table>; DROP TABLE <old>; ANALYZE TABLE <table>

MySQL 8+ (the online table mover's mechanism, ``datadir_mover/tablemove``): a general tablespace per table in
the cell's directory, and the server's own rebuild into it:

  CREATE TABLESPACE innotier_<schema>_<table> ADD DATAFILE '<cell dir>/innotier_<schema>_<table>.ibd'
  ALTER TABLE <table> TABLESPACE=innotier_<schema>_<table>; ANALYZE TABLE <table>

MySQL accepts a data file only in a directory InnoDB knows (``innodb_directories``, read-only: ERROR 3121
otherwise); a table mover registers a root with one restart, but a cell's sandbox is new, so
``prepare_directories`` writes the cell's table directories into its option files before its first start
and no restart is needed.

Either way the moved table is rebuilt (as the online table mover's copy rebuilds it), so beside where its
file is, it differs from the golden copy's in how full its pages are; the TPC-C loader also inserts in key
order, so the difference is small.  Moving the pages themselves (a transportable tablespace: DISCARD, copy
the .ibd and .cfg, IMPORT) would avoid it, but MariaDB 10.11.19 fails that import into a ``DATA DIRECTORY``
table: it reads the copied file, then opens the tablespace at the datadir's path ("Cannot open datafile ...
'./db/t.ibd'", error 37, data structure corruption; tried on a sandbox).

The clone is disposable (the whole cell is removed afterwards), so nothing is journaled.  Where the file is
is read back from the server (``datadir_mover.tablemove.where.table_file``) after the move and again when the
cell's run ended (``verify``): a table that is not under its tier's directory fails the cell.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tuner.core.durable import write_atomic
from tuner.core.errors import SweepError
from tuner.core.server import Flavor
from datadir_mover.tablemove import where
from datadir_mover.tablemove.plan import tablespace_name
from datadir_mover.tablemove.register import OPTION_FILE, option_text
from datadir_mover.tablemove.steps import ER_WRONG_DIRECTORY

SHADOW_SUFFIX = "_on_tier"
OLD_SUFFIX = "_off_tier"
SQL_SHOW_CREATE = "SHOW CREATE TABLE {t}"


def _q(*names: str) -> str:
    return ".".join("`" + n.replace("`", "``") + "`" for n in names)


def _run(conn, sql: str) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(sql)
    rows = cur.fetchall() if cur.with_rows else []
    cur.close()
    return rows


def shadow_ddl(create_table: str, table: str, shadow: str, directory: str) -> str:
    """The table's own CREATE TABLE under the shadow's name, with DATA DIRECTORY on the tier."""
    head = f"CREATE TABLE {_q(table)}"
    if not create_table.startswith(head):
        raise SweepError(f"SHOW CREATE TABLE {table} did not start with {head!r}; cannot make its shadow")
    if "'" in directory:
        raise SweepError(f"the tier directory {directory} contains a quote; give the tier a plain path")
    return f"CREATE TABLE {_q(shadow)}" + create_table[len(head):] + f" DATA DIRECTORY='{directory}'"


def prepare_directories(sb, tables: dict[str, Path]) -> list[str]:
    """Make the tables' directories before the cell's server starts; on MySQL also list them in
    ``innodb_directories`` (the table mover's drop-in, ``conf.d/60-innotier-directories.cnf``), which the
    server reads at its start.  Returns the directories registered (none on MariaDB)."""
    dirs = sorted({str(d) for d in tables.values()})
    for d in dirs:
        Path(d).mkdir(parents=True, exist_ok=True)
    if sb.flavor != Flavor.MYSQL or not dirs:
        return []
    write_atomic(Path(sb.conf_d) / OPTION_FILE, option_text(dirs, by="an innotier sweep cell"), mode=0o644)
    return dirs


def place_tables(conn, flavor: Flavor, tables: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Move each ``schema.table`` into its directory; {key: {"dir", "path" (from the server), "bytes"}}."""
    place_one = _place_one_mysql if flavor == Flavor.MYSQL else _place_one_mariadb
    done = {}
    for key, directory in sorted(tables.items()):
        schema, table = key.split(".", 1)
        directory.mkdir(parents=True, exist_ok=True)
        _open(conn, schema, table)
        if where.table_file(conn, flavor, schema, table) is None:
            raise SweepError(f"table {schema}.{table} is not in the cell's server; the golden copy lacks it: delete "
                             "the golden copy so it is rebuilt")
        place_one(conn, flavor, schema, table, directory)
        now = where_now(conn, flavor, {key: directory})[key]
        if not now["under"]:
            raise SweepError(f"{key} was moved to {directory} but the server reports its file at "
                             f"{now['path'] or 'no file'}; the cell cannot measure this placement")
        done[key] = {"dir": str(directory), "path": now["path"], "bytes": now["bytes"]}
    return done


def _open(conn, schema: str, table: str) -> None:
    """Open the table: information_schema's InnoDB tables list only what the dictionary cache holds (a table no
    one touched since the start is not there)."""
    _run(conn, f"SELECT 1 FROM {_q(schema, table)} LIMIT 1")


def _place_one_mariadb(conn, flavor: Flavor, schema: str, table: str, directory: Path) -> None:
    """MariaDB: a shadow with DATA DIRECTORY in ``directory``, filled, swapped in by RENAME, analyzed."""
    shadow, old = table + SHADOW_SUFFIX, table + OLD_SUFFIX
    (create,) = [r[1] for r in _run(conn, SQL_SHOW_CREATE.format(t=_q(schema, table)))]
    _run(conn, f"USE {_q(schema)}")
    _run(conn, shadow_ddl(_text(create), table, shadow, str(directory)))
    target = where.table_file(conn, flavor, schema, shadow)
    if target is None or not target.under(str(directory)):
        raise SweepError(f"the shadow of {schema}.{table} was not created under {directory} "
                         f"({target.path if target else 'no file'}); the server ignored DATA DIRECTORY")
    _run(conn, f"INSERT INTO {_q(shadow)} SELECT * FROM {_q(table)}")  # the clustered index's order: key order
    _run(conn, f"RENAME TABLE {_q(table)} TO {_q(old)}, {_q(shadow)} TO {_q(table)}")
    _run(conn, f"DROP TABLE {_q(old)}")
    _run(conn, f"ANALYZE TABLE {_q(table)}")  # the shadow's statistics are an empty table's until then


def _place_one_mysql(conn, flavor: Flavor, schema: str, table: str, directory: Path) -> None:
    """MySQL: the table rebuilt by the server into a general tablespace of its own in ``directory``."""
    ts = tablespace_name(schema, table)
    datafile = str(directory / f"{ts}.ibd")
    if "'" in datafile:
        raise SweepError(f"the tier directory {directory} contains a quote; give the tier a plain path")
    try:
        _run(conn, f"CREATE TABLESPACE {_q(ts)} ADD DATAFILE '{datafile}' ENGINE=InnoDB")
    except Exception as exc:
        if getattr(exc, "errno", None) == ER_WRONG_DIRECTORY:
            raise SweepError(f"the cell's server refuses {directory} (ERROR 3121: not in innodb_directories); its "
                             f"option files lack {OPTION_FILE}, which the cell writes before the start") from None
        raise
    _run(conn, f"ALTER TABLE {_q(schema, table)} TABLESPACE={_q(ts)}")
    _run(conn, f"ANALYZE TABLE {_q(schema, table)}")  # the rebuilt table's statistics are an empty table's


def where_now(conn, flavor: Flavor, tables: dict[str, Path | str]) -> dict[str, dict[str, Any]]:
    """Each table's file as the server reports it, and whether it is under the directory it was placed in."""
    out = {}
    for key, directory in sorted(tables.items()):
        schema, table = key.split(".", 1)
        _open(conn, schema, table)
        found = where.table_file(conn, flavor, schema, table)
        path = found.path if found else None
        out[key] = {"path": path, "under": bool(found and found.under(str(directory))),
                    "bytes": os.path.getsize(path) if path and os.path.exists(path) else None}
    return out


def verify(conn, flavor: Flavor, tables: dict[str, Path | str]) -> dict[str, dict[str, Any]]:
    """``where_now``, refusing (SweepError) a table whose file the server reports outside its directory."""
    now = where_now(conn, flavor, tables)
    away = [f"{k} at {v['path'] or 'no file'} (placed in {tables[k]})" for k, v in now.items() if not v["under"]]
    if away:
        raise SweepError("the server reports a placed table's file elsewhere: " + "; ".join(away) +
                         "; something put it back in the datadir (a CREATE TABLE ... LIKE and swap, a dump and "
                         "reload, on MySQL an ALTER TABLE ... TABLESPACE), so the cell's measurement is not of its "
                         "placement: run the cell again")
    return now


def _text(v) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)
