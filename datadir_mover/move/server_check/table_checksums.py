"""``CHECKSUM TABLE`` of every InnoDB table: the ``--verify tables`` comparison, read under the commit block before the
stop and under a read lock after the start."""

from __future__ import annotations

from tuner.core.server import ConnectionSpec

from datadir_mover.move.server_check import table_sample


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_checksums(conn) -> dict[str, int | None]:
    """``schema.table`` -> CHECKSUM TABLE value for every InnoDB table (statistics tables excluded)."""
    cur = conn.cursor()
    out: dict[str, int | None] = {}
    for schema, table, _ in table_sample.innodb_tables(cur):
        if (schema, table) in table_sample.GTID_SET_TABLES:  # rewritten at a start: its GTID set is what it holds
            out[f"{schema}.{table}"] = int(table_sample.gtid_set_digest(cur)[:16], 16)
            continue
        cur.execute(f"CHECKSUM TABLE {_ident(schema)}.{_ident(table)}")
        row = cur.fetchone()
        out[f"{schema}.{table}"] = None if row is None or row[1] is None else int(row[1])
    cur.close()
    return out



def checksums_now(spec: ConnectionSpec) -> dict[str, int | None]:
    conn = spec.with_database(None).connect()
    try:
        return table_checksums(conn)
    finally:
        conn.close()
