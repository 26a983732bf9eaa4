"""The tables the server wrote rows of since it started: the per-table evidence ``benign.py`` accepts.

InnoDB keeps, in memory only, the time of the last commit that changed each table (it starts
empty at every server start and is not a statistic: recalculating statistics leaves it
alone); the server shows it as ``information_schema.TABLES.UPDATE_TIME``.  A table whose
``UPDATE_TIME`` is set and not older than the server's start had rows written since then.
MySQL caches that column (``information_schema_stats_expiry``): the read asks for it fresh.
"""

from __future__ import annotations

from typing import Any

SQL_STATUS_UPTIME = "SHOW GLOBAL STATUS LIKE 'Uptime'"
SQL_FRESH = "SET SESSION information_schema_stats_expiry = 0"  # MySQL 8.0+; MariaDB has no such cache
SQL_WRITTEN = ("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE ENGINE = 'InnoDB' "
               "AND UPDATE_TIME IS NOT NULL AND UNIX_TIMESTAMP(UPDATE_TIME) >= %s")
START_SLACK_S = 1  # Uptime and UPDATE_TIME are whole seconds


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def since_start(conn) -> set[str]:
    """``schema.table`` of every InnoDB table the server changed rows of since it started."""
    cur = conn.cursor()
    try:
        try:
            cur.execute(SQL_FRESH)
        except Exception as exc:  # noqa: BLE001 - MariaDB: unknown variable, and nothing cached to refresh
            if getattr(exc, "errno", None) != 1193:
                raise
        cur.execute("SELECT UNIX_TIMESTAMP()")
        now = int(cur.fetchone()[0])
        cur.execute(SQL_STATUS_UPTIME)
        started = now - int(_s(cur.fetchone()[1])) - START_SLACK_S
        cur.execute(SQL_WRITTEN, (started,))
        return {f"{_s(schema)}.{_s(table)}" for schema, table in cur.fetchall()}
    finally:
        cur.close()
