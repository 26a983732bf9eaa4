"""Placing single TPC-C tables of a cell on a tier (issue 31, item 4): ``placement: {tpcc.stock: fast}``.

A table's file can only be put elsewhere by the server (MariaDB keeps where a table lives in its data
dictionary: ``DATA DIRECTORY`` is fixed when the table is created), so this runs after the cell's server
started and before its warm-up, with no client connected:

  CREATE TABLE <shadow> (the table's own definition) DATA DIRECTORY='<cell dir on the tier>'
  INSERT INTO <shadow> SELECT * FROM <table>          (in the clustered index's order: key order)
  RENAME TABLE <table> TO <old>, <shadow> TO <table>; DROP TABLE <old>; ANALYZE TABLE <table>

The moved table is rebuilt (as the online table mover's copy rebuilds it), so beside where its file is, it
differs from the golden copy's in how full its pages are; the TPC-C loader also inserts in key order, so the
difference is small.  Moving the pages themselves (a transportable tablespace: DISCARD, copy the .ibd and
.cfg, IMPORT) would avoid it, but MariaDB 10.11.19 fails that import into a ``DATA DIRECTORY`` table: it
reads the copied file, then opens the tablespace at the datadir's path ("Cannot open datafile ...
'./db/t.ibd'", error 37, data structure corruption; tried on a sandbox).

The clone is disposable (the whole cell is removed afterwards), so nothing is journaled.  Where the file is
is read back from the server (``datadir_mover.tablemove.where.table_file``) after the swap and again when the
cell's run ended (``verify``): a table that is not under its tier's directory fails the cell.

MariaDB only: MySQL accepts ``DATA DIRECTORY`` only in directories listed in ``innodb_directories``, which a
sweep cell does not set yet (the plan refuses such a cell).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tuner.core.errors import SweepError
from tuner.core.server import Flavor
from datadir_mover.tablemove import where

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


def place_tables(conn, flavor: Flavor, tables: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Move each ``schema.table`` into its directory; {key: {"dir", "path" (from the server), "bytes"}}."""
    if flavor != Flavor.MARIADB:
        raise SweepError(f"placing single tables in a sweep cell is done on MariaDB only, not {flavor.value}; "
                         "place components there, or run the check on a MariaDB server")
    done = {}
    for key, directory in sorted(tables.items()):
        schema, table = key.split(".", 1)
        directory.mkdir(parents=True, exist_ok=True)
        done[key] = _place_one(conn, flavor, schema, table, directory)
    return done


def _open(conn, schema: str, table: str) -> None:
    """Open the table: information_schema's InnoDB tables list only what the dictionary cache holds (a table no
    one touched since the start is not there)."""
    _run(conn, f"SELECT 1 FROM {_q(schema, table)} LIMIT 1")


def _place_one(conn, flavor: Flavor, schema: str, table: str, directory: Path) -> dict[str, Any]:
    _open(conn, schema, table)
    if where.table_file(conn, flavor, schema, table) is None:
        raise SweepError(f"table {schema}.{table} is not in the cell's server; the golden copy lacks it: delete "
                         "the golden copy so it is rebuilt")
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
    now = where_now(conn, flavor, {f"{schema}.{table}": directory})[f"{schema}.{table}"]
    return {"dir": str(directory), "path": now["path"], "bytes": now["bytes"]}


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
                         "reload), so the cell's measurement is not of its placement: run the cell again")
    return now


def _text(v) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)
