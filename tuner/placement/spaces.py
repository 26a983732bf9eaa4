"""Which tables live in a file whose path does not say: MySQL's general tablespaces.

A file-per-table file is ``<dir>/<schema>/<table>.ibd`` and names its table (objects.classify reads the path).
A MySQL general tablespace is ``<name>.ibd`` wherever CREATE TABLESPACE put it (in the datadir, or in a tier
root: `innotier table-move` puts each moved table in ``innotier_<schema>_<table>.ibd``), so its tables are
read from the data dictionary.  MariaDB has no general tablespaces: nothing to read.
"""

from __future__ import annotations

import os

from tuner.core.server import Flavor, ServerModel
from tuner.placement.objects import SYSTEM_SCHEMAS

SQL_GENERAL = ("SELECT f.FILE_NAME, t.NAME FROM information_schema.INNODB_TABLES t "
               "JOIN information_schema.INNODB_TABLESPACES ts ON ts.SPACE = t.SPACE "
               "JOIN information_schema.FILES f ON f.FILE_ID = t.SPACE "
               "WHERE ts.SPACE_TYPE = 'General' ORDER BY t.NAME")


def _text(v) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def owners_from_rows(rows, datadir: str) -> dict[str, tuple[str, ...]]:
    """(file name as the server reports it, "schema/table") rows -> absolute file -> ("schema.table", ...).

    The server reports a file in the datadir relative to it (``./ts1.ibd``); performance_schema names the same
    file by its absolute, resolved path, which is the key here.  The system schemas' tables (MySQL's own
    ``mysql.ibd`` is a general tablespace) are not offered, like their file-per-table files."""
    out: dict[str, list[str]] = {}
    for name, table in rows:
        schema, _, rest = _text(table).partition("/")
        if schema in SYSTEM_SCHEMAS:
            continue
        path = os.path.realpath(os.path.join(datadir, _text(name)))
        out.setdefault(path, []).append(f"{schema}.{rest}")
    return {path: tuple(tables) for path, tables in out.items()}


def general_tablespaces(conn, model: ServerModel) -> dict[str, tuple[str, ...]]:
    if model.flavor != Flavor.MYSQL:
        return {}
    cur = conn.cursor()
    cur.execute(SQL_GENERAL)
    rows = cur.fetchall()
    cur.close()
    return owners_from_rows(rows, model.datadir)
