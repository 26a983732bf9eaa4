"""Row digests of tables, taken in one consistent snapshot: the proof that a shadow table equals its original.

The digest is pt-table-checksum's rule made order-free: for every row an MD5 of its columns joined with
``#`` and a NULL bitmap (so NULL and '' differ), XORed over the table in two 64-bit halves, with the row
count.  Two tables read in the same ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` see the same moment:
pt-online-schema-change's triggers write the shadow in the same transaction as the original, so the two
digests are equal exactly when the copy is complete and right.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

SERVER_COMMS = ("mariadbd", "mysqld")
LOW_PRIORITY = 19   # the nice value the digest's server thread runs at: the clients' threads come first


@dataclass(frozen=True)
class Digest:
    rows: int
    high: int
    low: int

    def text(self) -> str:
        return f"{self.rows} rows, {self.high:016x}{self.low:016x}"


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def digest_sql(schema: str, table: str, cols: list[str]) -> str:
    joined = ", ".join(_q(c) for c in cols)
    nulls = ", ".join(f"ISNULL({_q(c)})" for c in cols)
    row = f"MD5(CONCAT_WS('#', {joined}, CONCAT({nulls})))"
    return (f"SELECT COUNT(*), COALESCE(BIT_XOR(CAST(CONV(LEFT({row}, 16), 16, 10) AS UNSIGNED)), 0), "
            f"COALESCE(BIT_XOR(CAST(CONV(RIGHT({row}, 16), 16, 10) AS UNSIGNED)), 0) "
            f"FROM {_q(schema)}.{_q(table)}")


def _one(cur, schema: str, table: str, cols: list[str]) -> Digest:
    cur.execute(digest_sql(schema, table, cols))
    n, high, low = cur.fetchone()
    return Digest(int(n), int(high), int(low))


def snapshot_digests(spec, schema: str, tables: list[str], cols: list[str]) -> list[Digest]:
    """The digests of ``tables`` (same columns) read in one consistent snapshot, on a connection of its own,
    whose server thread runs at a low priority (``lowered_priority``): two full scans with an MD5 a row take a
    core for a second or more, which on a small machine doubled the clients' p99 while a table moved."""
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        with lowered_priority(cur):
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            out = [_one(cur, schema, t, cols) for t in tables]
            cur.execute("COMMIT")
        return out
    finally:
        conn.close()


def server_thread(cur) -> int | None:
    """The OS thread serving this connection, when the server runs on this host and performance_schema says
    (``threads.THREAD_OS_ID``); None otherwise (another host, performance_schema off, a thread pool)."""
    try:
        cur.execute("SELECT THREAD_OS_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()")
        row = cur.fetchone()
    except Exception:  # noqa: BLE001 - no performance_schema, or no such column: no thread to name
        return None
    tid = int(row[0]) if row and row[0] else 0
    try:
        comm = Path(f"/proc/{tid}/comm").read_text().strip() if tid > 0 else ""
        owner = Path(f"/proc/{tid}/status").read_text()
    except OSError:
        return None    # not a thread on this host
    tgid = next((ln.split()[1] for ln in owner.splitlines() if ln.startswith("Tgid:")), "")
    try:
        server = Path(f"/proc/{tgid}/comm").read_text().strip()
    except OSError:
        return None
    return tid if server in SERVER_COMMS and comm else None


@contextlib.contextmanager
def lowered_priority(cur):
    """Run the connection's server thread at nice LOW_PRIORITY for the block, and put its priority back after:
    the server reuses the thread for later connections.  Where the thread cannot be named or reniced (not
    root, another host), the block runs as it is."""
    tid = server_thread(cur)
    before = None
    if tid is not None:
        try:
            before = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, LOW_PRIORITY)
        except OSError:
            before = None
    try:
        yield tid if before is not None else None
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, tid, before)
