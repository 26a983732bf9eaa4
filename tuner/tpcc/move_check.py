"""The TPC-C consistency conditions as a post-move schema check of the mover.

``register()`` is called by the CLI at start-up (tuner/cli.py), so every move,
resume and rollback verifies each TPC-C schema on the server with
``tuner.tpcc.check.run_checks`` after the server is back.
"""

from __future__ import annotations

from datadir_mover.move.checks import register_schema_check
from tuner.core.server import ConnectionSpec
from tuner.tpcc.check import run_checks

NAME = "tpcc"
SQL_TPCC_SCHEMAS = ("SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME IN "
                    "('warehouse', 'district', 'order_line', 'new_orders', 'new_order') "
                    "GROUP BY TABLE_SCHEMA HAVING COUNT(*) >= 3")


def _s(v) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def tpcc_schemas(spec: ConnectionSpec) -> list[str]:
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute(SQL_TPCC_SCHEMAS)
        return sorted(_s(r[0]) for r in cur.fetchall())
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
