"""SQL helpers shared by tests: run statements on a fresh connection."""

from __future__ import annotations


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
