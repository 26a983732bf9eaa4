"""Where a table's data file is now, read from the server (per flavor), and the table's shape."""

from __future__ import annotations

import os
from dataclasses import dataclass

from tuner.core.server import Flavor

# MySQL 8+: the data dictionary's tablespaces and their files
MYSQL_FILE = ("SELECT ts.NAME, ts.SPACE_TYPE, f.FILE_NAME FROM information_schema.INNODB_TABLES t "
              "JOIN information_schema.INNODB_TABLESPACES ts ON ts.SPACE = t.SPACE "
              "JOIN information_schema.FILES f ON f.FILE_ID = t.SPACE WHERE t.NAME = %s")
# MariaDB: the space of the table and the file InnoDB opened for it
MARIADB_FILE = ("SELECT ts.NAME, 'Single', ts.FILENAME FROM information_schema.INNODB_SYS_TABLES t "
                "JOIN information_schema.INNODB_SYS_TABLESPACES ts ON ts.SPACE = t.SPACE WHERE t.NAME = %s")
TABLE_INFO = ("SELECT ENGINE, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s")
PRIMARY_COLUMNS = ("SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                   "AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX")
COLUMNS = ("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
           "ORDER BY ORDINAL_POSITION")
TRIGGERS = ("SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = %s "
            "AND EVENT_OBJECT_TABLE = %s ORDER BY TRIGGER_NAME")
FOREIGN_KEYS = ("SELECT CONSTRAINT_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = %s "
                "AND (TABLE_NAME = %s OR REFERENCED_TABLE_NAME = %s)")
DATADIR = "SELECT @@datadir"


@dataclass(frozen=True)
class TableFile:
    """The tablespace a table lives in and its file (absolute)."""

    space: str
    space_type: str  # "Single" (file-per-table) or "General" (MySQL)
    path: str

    def under(self, root: str) -> bool:
        root = os.path.realpath(root).rstrip("/") + "/"
        return os.path.realpath(self.path).startswith(root)


def _rows(conn, sql: str, *params) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(sql, params)
    rows = cur.fetchall()
    cur.close()
    return rows


def table_file(conn, flavor: Flavor, schema: str, table: str) -> TableFile | None:
    """The table's tablespace and file; None when InnoDB has no such table."""
    sql = MYSQL_FILE if flavor == Flavor.MYSQL else MARIADB_FILE
    rows = _rows(conn, sql, f"{schema}/{table}")
    if not rows:
        return None
    space, kind, path = (_text(v) for v in rows[0])
    if not os.path.isabs(path):  # "./db/t.ibd": relative to the datadir
        path = os.path.normpath(os.path.join(_text(_rows(conn, DATADIR)[0][0]), path))
    return TableFile(space, kind, path)


def table_kind(conn, schema: str, table: str) -> tuple[str, str] | None:
    """(engine, table type) or None when the table does not exist."""
    rows = _rows(conn, TABLE_INFO, schema, table)
    return (_text(rows[0][0] or ""), _text(rows[0][1])) if rows else None


def primary_key(conn, schema: str, table: str) -> list[str]:
    return [_text(r[0]) for r in _rows(conn, PRIMARY_COLUMNS, schema, table)]


def columns(conn, schema: str, table: str) -> list[str]:
    return [_text(r[0]) for r in _rows(conn, COLUMNS, schema, table)]


def triggers(conn, schema: str, table: str) -> list[str]:
    return [_text(r[0]) for r in _rows(conn, TRIGGERS, schema, table)]


def foreign_keys(conn, schema: str, table: str) -> list[str]:
    return [_text(r[0]) for r in _rows(conn, FOREIGN_KEYS, schema, table, table)]


def exists(conn, schema: str, table: str) -> bool:
    return table_kind(conn, schema, table) is not None


def _text(v) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)
