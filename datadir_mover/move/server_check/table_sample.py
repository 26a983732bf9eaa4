"""A bounded sample of every InnoDB table: the first and last rows by primary key, hashed.

The proof that a moved file is right is file-level (``copy``: every byte read from the
source, every byte read back from the target).  The sample answers a different question
cheaply: does the server, started on the new location, read every table, from the root of
its clustered index down to the leftmost and rightmost leaf pages, and return the same
rows as before the stop?  ``SAMPLE_ROWS`` rows from each end of the primary key (a few
16 KiB pages' worth; a small table is hashed whole) cost milliseconds per table, so the
"before" sample is taken with commits blocked (``read_lock.block_writes``) right before the stop
without blocking writes for longer than a fraction of the shutdown itself.

After the start no lock is taken: clients may write at once.  The server's counters of rows
written start at zero with it (``row_writes``: InnoDB's own row counters where the server has
them, else ``Handler_write/update/delete``, which MariaDB keeps apart from its internal temporary
tables; never statement counters, which count reads too), so when they are still zero after the
sample no client wrote; ``benign`` says when a table that differs is put down to those writes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import xxhash

SAMPLE_ROWS = 200  # rows from each end of every table's primary key
SAMPLE_BUDGET_S = 2.0  # the sample stops (and says so) when it takes longer than this under the read lock
SKIPPED_TABLES = {("mysql", "innodb_table_stats"), ("mysql", "innodb_index_stats")}  # rewritten by InnoDB itself
# MySQL compacts mysql.gtid_executed when it starts (Debian sid's freshly installed mysql-server 9.7: 3 rows became
# 1 at the move's restart, and the check halted the move): what the table holds is a GTID set, so the server's
# executed set is compared, not the rows
GTID_SET_TABLES = {("mysql", "gtid_executed")}
SQL_TABLES = ("SELECT t.TABLE_SCHEMA, t.TABLE_NAME, t.DATA_LENGTH + t.INDEX_LENGTH FROM information_schema.TABLES t "
              "WHERE t.ENGINE = 'InnoDB' AND t.TABLE_TYPE = 'BASE TABLE' ORDER BY t.TABLE_SCHEMA, t.TABLE_NAME")
SQL_PK = ("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
          "WHERE INDEX_NAME = 'PRIMARY' ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX")
# rows written since the server started: InnoDB's counters (MySQL; MariaDB 10.6+ has none), else the handler's
INNODB_ROW_WRITES = ("Innodb_rows_inserted", "Innodb_rows_updated", "Innodb_rows_deleted")
HANDLER_ROW_WRITES = ("Handler_write", "Handler_update", "Handler_delete")
SQL_ROW_WRITES = ("SHOW GLOBAL STATUS WHERE Variable_name IN ("
                  + ", ".join(f"'{v}'" for v in INNODB_ROW_WRITES + HANDLER_ROW_WRITES) + ")")
ROWS_PER_SECOND = 50_000  # rows read and hashed per second by the sample (measured here: 60-150k/s); plan estimate


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


@dataclass
class Sample:
    """``schema.table`` -> digest of its sampled rows; tables left out when the budget ran out."""

    digests: dict[str, str] = field(default_factory=dict)
    rows: int = 0
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)


def innodb_tables(cur) -> list[tuple[str, str, int]]:
    """(schema, table, bytes of data and indexes) of every InnoDB table the verification reads: the one list the
    plan counts, the sample hashes and ``--verify tables`` checksums."""
    cur.execute(SQL_TABLES)
    return [(_s(s), _s(t), int(n or 0)) for s, t, n in cur.fetchall() if (_s(s), _s(t)) not in SKIPPED_TABLES]


def _tables(cur) -> list[tuple[str, str, list[str]]]:
    cur.execute(SQL_PK)
    pks: dict[tuple[str, str], list[str]] = {}
    for s, t, c in cur.fetchall():
        pks.setdefault((_s(s), _s(t)), []).append(_s(c))
    return [(s, t, pks.get((s, t), [])) for s, t, _ in innodb_tables(cur)]


def _digest_rows(h, rows) -> int:
    n = 0
    for row in rows:
        h.update(repr(tuple(row)).encode())
        n += 1
    return n


def gtid_set_digest(cur) -> str:
    """Digest of the server's executed GTID set, whitespace removed (the server prints it over several lines)."""
    cur.execute("SELECT @@GLOBAL.gtid_executed")
    row = cur.fetchone()
    return xxhash.xxh3_128("".join(_s(row[0] if row else "").split()).encode()).hexdigest()


def table_sample(cur, schema: str, table: str, pk: list[str], rows: int = SAMPLE_ROWS) -> tuple[str, int]:
    """(digest, rows read) of the first and last ``rows`` rows of a table by primary key (of a GTID table: of
    the GTID set it holds)."""
    if (schema, table) in GTID_SET_TABLES:
        return gtid_set_digest(cur), 0
    h = xxhash.xxh3_128()
    name = f"{_ident(schema)}.{_ident(table)}"
    if pk:
        asc = ", ".join(_ident(c) for c in pk)
        desc = ", ".join(f"{_ident(c)} DESC" for c in pk)
        cur.execute(f"SELECT * FROM {name} ORDER BY {asc} LIMIT {int(rows)}")
        n = _digest_rows(h, cur.fetchall())
        h.update(b"|")
        cur.execute(f"SELECT * FROM {name} ORDER BY {desc} LIMIT {int(rows)}")
        n += _digest_rows(h, cur.fetchall())
    else:  # no primary key: the hidden clustered index's order is the scan order
        cur.execute(f"SELECT * FROM {name} LIMIT {int(rows)}")
        n = _digest_rows(h, cur.fetchall())
    return h.hexdigest(), n


def take(conn, rows: int = SAMPLE_ROWS, budget_s: float = SAMPLE_BUDGET_S) -> Sample:
    """The sample of every InnoDB table (statistics tables excluded), within ``budget_s``."""
    t0 = time.monotonic()
    cur = conn.cursor()
    out = Sample()
    for schema, table, pk in _tables(cur):
        key = f"{schema}.{table}"
        if time.monotonic() - t0 > budget_s:
            out.skipped.append(key)
            continue
        out.digests[key], n = table_sample(cur, schema, table, pk, rows)
        out.rows += n
    cur.close()
    out.seconds = time.monotonic() - t0
    return out


def row_writes(conn) -> int:
    """Rows written since the server started (0: no client wrote); reads, prepared or not, never count."""
    cur = conn.cursor()
    cur.execute(SQL_ROW_WRITES)
    counters = {_s(k): int(v) for k, v in cur.fetchall()}
    cur.close()
    names = INNODB_ROW_WRITES if all(n in counters for n in INNODB_ROW_WRITES) else HANDLER_ROW_WRITES
    return sum(counters.get(n, 0) for n in names)


def estimate_seconds(tables: int, rows: int = SAMPLE_ROWS) -> float:
    """Seconds the sample takes for ``tables`` tables (plan estimate)."""
    return round(tables * (2 * rows / ROWS_PER_SECOND + 0.002), 2)
