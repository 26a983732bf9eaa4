"""The post-start check: is the server whole on the new location?  (And on the old one after a rollback.)

Three levels (``--verify``), the file-level checksums of the copy being the proof in all of them:

- ``files``: the server starts on the new location and reports it; no lock, no table reads.
- ``sample`` (default): plus a bounded sample of every table (``table_sample``) taken under the
  commit block right before the stop and again after the start, without a lock.
- ``tables``: plus ``CHECKSUM TABLE`` of every table (``table_checksums``) under the commit block
  before the stop and again under a read lock after the start, and the registered schema checks
  (``schema_checks``: the TPC-C consistency conditions read every row: minutes at hundreds of GB,
  writes blocked all that time).

``CHECKSUM TABLE`` reads every row of a table and returns one number (MariaDB/MySQL
manual, CHECKSUM TABLE), so equal values before shutdown and after start mean every
row came back.  The "before" values are taken with every commit blocked (``read_lock.block_writes``)
held until the server stops, so no write can slip in between.  InnoDB's persistent
statistics tables are left out: background statistics recalculation rewrites them.  A table
that differs after the start halts the move unless ``benign`` proves it benign, from the
commits waiting on the block at the stop (``waiting_commits``) or the tables written since the
start (``tables_written``).

This module is the check's entry (``check_server``, ``require_ok``, ``ServerCheck``); the modules
of the package hold one piece each of what it reads and how it judges.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from tuner.core.errors import MoveError
from tuner.core.server import ConnectionSpec, inspect

from datadir_mover.move.components import source_dir
from datadir_mover.move.server_check import benign, table_sample, tables_written
from datadir_mover.move.server_check.benign import FileProof
from datadir_mover.move.server_check.schema_checks import run_schema_checks
from datadir_mover.move.server_check.table_checksums import checksums_now

VERIFY_MODES = ("files", "sample", "tables")
DEFAULT_VERIFY = "sample"


@dataclass
class ServerCheck:
    locations_ok: bool
    location: str | None
    tables: int
    checksum_problems: list[str]
    # registered schema check name -> {schema: "ok" / "failed: ..."} (``schema_checks``)
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
        after = table_sample.take(conn, budget_s=float("inf"))
        result.row_writes_since_start = table_sample.row_writes(conn)
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
