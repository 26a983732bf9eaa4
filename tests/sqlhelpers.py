"""SQL helpers shared by tests: run statements on a fresh connection."""

from __future__ import annotations

import os
import sqlite3


def execute(spec, *statements):
    """Run ``statements`` in order on a new connection (autocommit); the last one's rows, if it has any."""
    conn = spec.connect()
    try:
        cur = conn.cursor()
        for s in statements:
            cur.execute(s)
        return cur.fetchall() if cur.with_rows else None
    finally:
        conn.close()


def stored_rows(db: str, table: str) -> int:
    """Rows of ``table`` in the SQLite file ``db`` (0: no file, or no such table): what a refusal must not add."""
    if not os.path.exists(db):
        return 0
    with sqlite3.connect(db) as conn:
        have = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] if have else 0
