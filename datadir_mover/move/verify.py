"""Is the server whole after a move?  Table checksums or samples before and after, the paths it reports, schema checks.

Three levels (``--verify``), the file-level checksums of the copy being the proof in all of them:

- ``files``: the server starts on the new location and reports it; no lock, no table reads.
- ``sample`` (default): plus a bounded sample of every table (``sample.py``) taken under the
  read lock right before the stop and again after the start, without a lock.
- ``tables``: plus ``CHECKSUM TABLE`` of every table under the read lock before the stop and
  again under a read lock after the start, and the registered schema checks (``checks.py``:
  the TPC-C consistency conditions read every row: minutes at hundreds of GB, writes blocked
  all that time).

``CHECKSUM TABLE`` reads every row of a table and returns one number (MariaDB/MySQL
manual, CHECKSUM TABLE), so equal values before shutdown and after start mean every
row came back.  The "before" values are taken with every commit blocked (``block_writes``)
held until the server stops, so no write can slip in between.  InnoDB's persistent
statistics tables are left out: background statistics recalculation rewrites them.  A table
that differs after the start halts the move unless ``benign.py`` proves it benign.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from tuner.core.errors import MoveError
from tuner.core.server import ConnectionSpec, inspect

from datadir_mover.move import benign, sample, tables_written
from datadir_mover.move.benign import FileProof
from datadir_mover.move.checks import run_schema_checks
from datadir_mover.move.components import source_dir

SQL_READ_LOCK = "FLUSH TABLES WITH READ LOCK"
SKIPPED_TABLES = sample.SKIPPED_TABLES
VERIFY_MODES = ("files", "sample", "tables")
DEFAULT_VERIFY = "sample"


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_checksums(conn) -> dict[str, int | None]:
    """``schema.table`` -> CHECKSUM TABLE value for every InnoDB table (statistics tables excluded)."""
    cur = conn.cursor()
    out: dict[str, int | None] = {}
    for schema, table, _ in sample.innodb_tables(cur):
        cur.execute(f"CHECKSUM TABLE {_ident(schema)}.{_ident(table)}")
        row = cur.fetchone()
        out[f"{schema}.{table}"] = None if row is None or row[1] is None else int(row[1])
    cur.close()
    return out


# MariaDB 10.4+: block commits without waiting for open transactions to end (FLUSH TABLES WITH READ LOCK
# waits for every table in use, so a client inside a transaction whose next write waits on the lock
# stalls both until a timeout; docs/relocation.md has the figures)
SQL_BLOCK_COMMIT = ("BACKUP STAGE START", "BACKUP STAGE FLUSH", "BACKUP STAGE BLOCK_DDL", "BACKUP STAGE BLOCK_COMMIT")


def block_writes(conn) -> str:
    """Stop every commit on the server for as long as ``conn`` stays open; the statement that did it.

    ``BACKUP STAGE BLOCK_COMMIT`` where the server has it (MariaDB 10.4+): transactions
    already open go on until their commit, which waits, so uncommitted work is rolled back
    by the stop and what a read sees is what the stop keeps.  Elsewhere (MySQL)
    ``FLUSH TABLES WITH READ LOCK``.
    """
    cur = conn.cursor()
    try:
        for sql in SQL_BLOCK_COMMIT:
            cur.execute(sql)
        return SQL_BLOCK_COMMIT[-1]
    except Exception as exc:  # noqa: BLE001 - a server without BACKUP STAGE answers with a syntax error
        if getattr(exc, "errno", None) not in (1064, 1193, 1295):  # parse error, unknown stage, not supported
            raise
        cur.execute(SQL_READ_LOCK)
        return SQL_READ_LOCK
    finally:
        cur.close()


def checksums_now(spec: ConnectionSpec) -> dict[str, int | None]:
    conn = spec.with_database(None).connect()
    try:
        return table_checksums(conn)
    finally:
        conn.close()


@dataclass
class ServerCheck:
    locations_ok: bool
    location: str | None
    tables: int
    checksum_problems: list[str]
    # registered schema check name -> {schema: "ok" / "failed: ..."} (datadir_mover.move.checks)
    schema_checks: dict[str, dict[str, str]] = field(default_factory=dict)
    mode: str = "tables"
    changed_since_start: list[str] = field(default_factory=list)  # sample: differs, explained by rows written since
    row_writes_since_start: int = 0
    changed_at_stop: list[str] = field(default_factory=list)  # differs, explained by a commit waiting at the stop
    commits_waiting_at_stop: int = 0
    file_proof: str = FileProof.NONE.value  # what proves the files (benign.FileProof)
    pending_proof: bool = False  # an accepted difference waits for the whole-file proof
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.locations_ok and not self.checksum_problems and not self.failed_schema_checks()

    def failed_schema_checks(self) -> dict[str, str]:
        return {f"{name}:{schema}": v for name, results in self.schema_checks.items()
                for schema, v in results.items() if v != "ok"}

    def to_dict(self) -> dict[str, Any]:
        return {"locations_ok": self.locations_ok, "location": self.location, "tables": self.tables,
                "checksum_problems": self.checksum_problems, **self.schema_checks, "mode": self.mode,
                "changed_since_start": self.changed_since_start, "row_writes_since_start": self.row_writes_since_start,
                "changed_at_stop": self.changed_at_stop, "commits_waiting_at_stop": self.commits_waiting_at_stop,
                "file_proof": self.file_proof, "pending_proof": self.pending_proof,
                "seconds": round(self.seconds, 3), "ok": self.ok}

    def take(self, verdict: benign.Verdict) -> "ServerCheck":
        self.checksum_problems = verdict.problems
        self.changed_at_stop, self.changed_since_start = verdict.at_stop, verdict.since_start
        self.pending_proof = verdict.pending_proof
        return self


def check_server(spec: ConnectionSpec, component: str, expected_dir: str, before: dict[str, Any] | None,
                 mode: str = "tables", evidence: benign.Evidence | None = None) -> ServerCheck:
    """Where the server keeps ``component``, and (by ``mode``) its tables compared with ``before``.

    A table that differs is a problem, which halts the move, unless ``benign.judge`` accepts it
    from ``evidence`` (the commits waiting at the stop, what proves the files).
    """
    t0 = time.monotonic()
    evidence = evidence or benign.Evidence()
    model = inspect(spec)
    where = source_dir(component, model)
    loc_ok = os.path.realpath(where) == os.path.realpath(expected_dir)
    result = ServerCheck(loc_ok, where, 0, [], mode=mode, commits_waiting_at_stop=evidence.at_stop.count,
                         file_proof=evidence.file_proof.value)
    if mode == "sample":
        _check_sample(spec, result, before, evidence)
    elif mode == "tables":
        after = checksums_now(spec)
        result.tables = len(after)
        result.take(benign.judge(before or {}, after, evidence))
        result.schema_checks = run_schema_checks(spec)
    result.seconds = time.monotonic() - t0
    return result


def _check_sample(spec: ConnectionSpec, result: ServerCheck, before: dict[str, Any] | None,
                  evidence: benign.Evidence) -> None:
    """The sample again, without a lock, and the rows written since the start (read after it: none written before
    or during the sample when it is zero)."""
    conn = spec.with_database(None).connect()
    try:
        after = sample.take(conn, budget_s=float("inf"))
        result.row_writes_since_start = sample.row_writes(conn)
        written = tables_written.since_start(conn) if result.row_writes_since_start else set()
    finally:
        conn.close()
    result.tables = len(after.digests)
    result.take(benign.judge(before or {}, after.digests, evidence, written))


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
