"""The commits waiting on the commit block when the stop begins, and the tables they hold locks on.

A shutdown closes every connection, the block's holder among them, so a commit that waits on
the block may complete before its own connection is closed: the "before" sample or checksums
(read under the block) then differ from the stopped files, with no copy at fault.  The check
after the start (``benign``) may put such a difference down to these commits only for a
table one of them holds a lock on.  So, right before the stop, the holder's connection reads:

- which connections wait on the block *in a commit*: the block's wait state (``BACKUP STAGE
  BLOCK_COMMIT``: "Waiting for backup lock", also the state of DDL blocked by ``BLOCK_DDL``;
  ``FLUSH TABLES WITH READ LOCK``: "Waiting for commit lock", while a statement not yet begun
  waits for the "global read lock" and cannot commit before the stop) and an InnoDB transaction
  that changed rows (``INNODB_TRX.trx_rows_modified``); a DDL or a read waiting there has none;
- each such transaction's table locks: exact counts from ``INNODB_TRX.trx_tables_locked``, names
  from ``performance_schema.data_locks`` (MySQL) or the InnoDB monitor's lock listing (MariaDB,
  ``innodb_status_output_locks`` on for the one read, which prints only a transaction's first
  ten locks: the tables it does not name are known by count only).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

# the waits of a commit on the block (see the module docstring for the states left out)
BLOCK_WAIT_STATES = ("Waiting for backup lock", "Waiting for commit lock")
SQL_WAITING_COMMITS = (
    "SELECT p.ID, t.trx_id, t.trx_rows_modified, t.trx_tables_locked FROM information_schema.PROCESSLIST p "
    "JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID "
    "WHERE p.STATE IN (%s, %s) AND t.trx_rows_modified > 0 ORDER BY p.ID")
SQL_DATA_LOCKS = ("SELECT ENGINE_TRANSACTION_ID, OBJECT_SCHEMA, OBJECT_NAME FROM performance_schema.data_locks "
                  "WHERE LOCK_TYPE = 'TABLE'")
SQL_MONITOR = "SHOW ENGINE INNODB STATUS"
MONITOR_LOCKS = "innodb_status_output_locks"
TRX_HEADER = re.compile(r"^---TRANSACTION (\d+),")
TABLE_LOCK = re.compile(r"^TABLE LOCK table `((?:[^`]|``)*)`\.`((?:[^`]|``)*)` trx id (\d+)")


@dataclass
class WaitingCommit:
    thread: int
    trx: str
    rows_modified: int
    tables_locked: int  # exact count of the InnoDB tables the transaction holds locks on
    tables: list[str] = field(default_factory=list)  # "schema.table" of those the server named

    @property
    def unnamed(self) -> int:
        return max(0, self.tables_locked - len(self.tables))


@dataclass
class AtStop:
    """What waited on the block as the stop began; ``known`` is False when it could not be read."""

    commits: list[WaitingCommit] = field(default_factory=list)
    known: bool = True

    @property
    def count(self) -> int:
        return len(self.commits) if self.known else -1

    def named_tables(self) -> set[str]:
        return {t for c in self.commits for t in c.tables}

    def unnamed_tables(self) -> int:
        return sum(c.unnamed for c in self.commits)

    def to_journal(self) -> dict[str, Any]:
        """The SHUTDOWN step's record of it (``commits_waiting_at_stop`` -1: unknown)."""
        return {"commits_waiting_at_stop": self.count, "waiting_commits": [asdict(c) for c in self.commits]}

    @classmethod
    def from_journal(cls, data: dict[str, Any] | None) -> "AtStop":
        data = data or {}
        n = int(data.get("commits_waiting_at_stop", 0) or 0)
        commits = [WaitingCommit(**c) for c in data.get("waiting_commits") or []]
        if n < 0 or len(commits) != n:  # unknown, or a journal written before the commits were listed
            return cls([], known=False)
        return cls(commits)


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def _unquote(name: str) -> str:
    return name.replace("``", "`")


def _monitor_tables(conn) -> dict[str, list[str]]:
    """trx id -> tables named in the InnoDB monitor's lock listing (MariaDB); the setting is put back."""
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT @@GLOBAL.{MONITOR_LOCKS}")
        was = int(cur.fetchone()[0])
        cur.execute(f"SET GLOBAL {MONITOR_LOCKS} = ON")
        try:
            cur.execute(SQL_MONITOR)
            text = _s(cur.fetchone()[2])
        finally:
            cur.execute(f"SET GLOBAL {MONITOR_LOCKS} = {was}")
    finally:
        cur.close()
    return parse_monitor(text)


def parse_monitor(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = TABLE_LOCK.match(line)
        if m:
            name = f"{_unquote(m.group(1))}.{_unquote(m.group(2))}"
            tables = out.setdefault(m.group(3), [])
            if name not in tables:
                tables.append(name)
    return out


def _data_lock_tables(conn) -> dict[str, list[str]] | None:
    """trx id -> tables from performance_schema.data_locks (MySQL 8+); None where the server has none."""
    cur = conn.cursor()
    try:
        cur.execute(SQL_DATA_LOCKS)
        rows = cur.fetchall()
    except Exception as exc:  # noqa: BLE001 - MariaDB has no data_locks; performance_schema may be off
        if getattr(exc, "errno", None) in (1146, 1049, 1109):  # no such table / database
            return None
        raise
    finally:
        cur.close()
    out: dict[str, list[str]] = {}
    for trx, schema, table in rows:
        name = f"{_s(schema)}.{_s(table)}"
        if name not in out.setdefault(_s(trx), []):
            out[_s(trx)].append(name)
    return out


def read(conn) -> AtStop:
    """The commits waiting on the block now, read on the holder's own connection."""
    cur = conn.cursor()
    try:
        cur.execute(SQL_WAITING_COMMITS, BLOCK_WAIT_STATES)
        rows = cur.fetchall()
    finally:
        cur.close()
    commits = [WaitingCommit(int(t), _s(x), int(r), int(n)) for t, x, r, n in rows]
    if commits:
        try:
            names = _data_lock_tables(conn)
            if names is None:
                names = _monitor_tables(conn)
        except Exception:  # noqa: BLE001 - no names: each commit's tables are then known by count only
            names = {}
        for c in commits:
            c.tables = names.get(c.trx, [])[: c.tables_locked]
    return AtStop(commits)
