"""The TPC-C consistency conditions as a post-move schema check of the mover.

``register()`` is called by the CLI at start-up (tuner/cli.py), so every move,
resume and rollback verifies each TPC-C schema on the server with
``tuner.tpcc.check.run_checks`` after the server is back.

A schema is TPC-C only when innotier's loader made it: the loader records its version and
the load's state in ``tpcc_meta`` as it loads (``schema.write_meta``), and a schema counts once
that load was verified (state ``loaded``).  Tables that merely share TPC-C's names (an ERP's
``warehouse``, ``district``, ``order_line``) are not checked against TPC-C's conditions.
"""

from __future__ import annotations

from datadir_mover.move.server_check.schema_checks import register_schema_check
from tuner.core.server import ConnectionSpec
from tuner.tpcc import schema
from tuner.tpcc.check import run_checks

NAME = "tpcc"
SQL_META_SCHEMAS = "SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME = %s ORDER BY TABLE_SCHEMA"


def _s(v) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def loaded_by_innotier(meta: dict[str, str]) -> bool:
    """The loader's own record of a finished, verified load."""
    return bool(meta.get("loader")) and meta.get("state") == "loaded"


def tpcc_schemas(spec: ConnectionSpec) -> list[str]:
    """The schemas innotier's loader loaded (and verified) on this server."""
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute(SQL_META_SCHEMAS, (schema.META_TABLE,))
        candidates = [_s(r[0]) for r in cur.fetchall()]
        cur.close()
        return [db for db in candidates if loaded_by_innotier(schema.read_meta(conn, db))
                and set(schema.TABLES) <= set(schema.present_tables(conn, db))]
    finally:
        conn.close()


def check_schema(spec: ConnectionSpec, schema: str) -> str:
    report = run_checks(spec, database=schema)
    if getattr(report, "ok", False):
        return "ok"
    failed = [f"clause {r.clause}" for r in report.failed()]
    return "failed: " + (", ".join(failed) or "see `innotier tpcc check`")


def register() -> None:
    register_schema_check(NAME, tpcc_schemas, check_schema)
