"""Is the server whole after a move?  Table checksums before and after, the paths it reports, schema checks.

``CHECKSUM TABLE`` reads every row of a table and returns one number (MariaDB/MySQL
manual, CHECKSUM TABLE), so equal values before shutdown and after start mean every
row came back.  The "before" values are taken under ``FLUSH TABLES WITH READ LOCK``
held until the server stops, so no write can slip in between.  InnoDB's persistent
statistics tables are left out: background statistics recalculation rewrites them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tuner.core.errors import MoveError
from tuner.core.server import ConnectionSpec, inspect

from datadir_mover.move.checks import run_schema_checks
from datadir_mover.move.components import source_dir

SQL_INNODB_TABLES = ("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                     "WHERE ENGINE = 'InnoDB' AND TABLE_TYPE = 'BASE TABLE' "
                     "ORDER BY TABLE_SCHEMA, TABLE_NAME")
SQL_READ_LOCK = "FLUSH TABLES WITH READ LOCK"
SKIPPED_TABLES = {("mysql", "innodb_table_stats"), ("mysql", "innodb_index_stats")}


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_checksums(conn) -> dict[str, int | None]:
    """``schema.table`` -> CHECKSUM TABLE value for every InnoDB table (statistics tables excluded)."""
    cur = conn.cursor()
    cur.execute(SQL_INNODB_TABLES)
    tables = [(_s(a), _s(b)) for a, b in cur.fetchall()]
    out: dict[str, int | None] = {}
    for schema, table in tables:
        if (schema, table) in SKIPPED_TABLES:
            continue
        cur.execute(f"CHECKSUM TABLE {_ident(schema)}.{_ident(table)}")
        row = cur.fetchone()
        out[f"{schema}.{table}"] = None if row is None or row[1] is None else int(row[1])
    cur.close()
    return out


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def lock_and_checksum(spec: ConnectionSpec):
    """(connection holding the global read lock, checksums).  Keep the connection open until the server stops."""
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute(SQL_READ_LOCK)
    cur.close()
    return conn, table_checksums(conn)


def checksums_now(spec: ConnectionSpec) -> dict[str, int | None]:
    conn = spec.with_database(None).connect()
    try:
        return table_checksums(conn)
    finally:
        conn.close()


def compare(before: dict[str, int | None], after: dict[str, int | None]) -> list[str]:
    """Human-readable differences (empty when every table matches)."""
    problems = []
    for name, value in sorted(before.items()):
        if name not in after:
            problems.append(f"{name} is missing")
        elif after[name] != value:
            problems.append(f"{name} checksum {after[name]} != {value} before")
    return problems


@dataclass
class ServerCheck:
    locations_ok: bool
    location: str | None
    tables: int
    checksum_problems: list[str]
    # registered schema check name -> {schema: "ok" / "failed: ..."} (datadir_mover.move.checks)
    schema_checks: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.locations_ok and not self.checksum_problems and not self.failed_schema_checks()

    def failed_schema_checks(self) -> dict[str, str]:
        return {f"{name}:{schema}": v for name, results in self.schema_checks.items()
                for schema, v in results.items() if v != "ok"}

    def to_dict(self) -> dict[str, Any]:
        return {"locations_ok": self.locations_ok, "location": self.location, "tables": self.tables,
                "checksum_problems": self.checksum_problems, **self.schema_checks, "ok": self.ok}


def check_server(spec: ConnectionSpec, component: str, expected_dir: str,
                 before: dict[str, int | None] | None) -> ServerCheck:
    model = inspect(spec)
    where = source_dir(component, model)
    loc_ok = os.path.realpath(where) == os.path.realpath(expected_dir)
    after = checksums_now(spec)
    problems = compare(before, after) if before is not None else []
    return ServerCheck(loc_ok, where, len(after), problems, run_schema_checks(spec))


def require_ok(result: ServerCheck, component: str, expected_dir: str) -> None:
    if not result.locations_ok:
        raise MoveError(f"the server reports {component} at {result.location}, not {expected_dir}; "
                        "another option file overrides the placement: check `innotier server inspect`")
    if result.checksum_problems:
        raise MoveError(f"{len(result.checksum_problems)} tables differ after the move "
                        f"({'; '.join(result.checksum_problems[:3])})")
    bad = result.failed_schema_checks()
    if bad:
        raise MoveError(f"schema checks failed after the move: {bad}; the data is in place, check it with the "
                        "workload's own tool (e.g. `innotier tpcc check`) before using it")
