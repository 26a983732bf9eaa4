"""What the server has done on the target since the move started it: the cost of going back.

At START, right after the server first accepts connections on the target, the mover saves a
few of its global counters (``since-start.json`` in the move's journal directory).  Its
presence is the journal's evidence that clients may have written to the target: from then on
no automatic path rolls back, and ``rollback`` needs ``--discard-writes-since-start``.  The
delta of the counters is what a rollback (or a failed proof's choice to go back) throws away.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tuner.core.errors import InnotierError
from tuner.core.server import ConnectionSpec, fetch_status

from datadir_mover.move import side_files
from datadir_mover.move.journal import Journal

ROW_WRITES = ("Com_insert", "Com_update", "Com_delete", "Com_replace", "Com_insert_select", "Com_update_multi",
              "Com_delete_multi", "Com_replace_select", "Com_load")
LSN = ("Innodb_lsn_current", "Innodb_redo_log_current_lsn")  # MariaDB, MySQL 8.0.30+
RESTART_SLACK_S = 5  # Uptime is whole seconds and the baseline's "at" too
COUNTERS = ("Com_commit", "Uptime", *ROW_WRITES, *LSN)


@dataclass
class WritesSinceStart:
    known: bool  # False: the server cannot be asked (stopped, unreachable) or restarted since (counters reset)
    commits: int = 0  # COMMIT statements (Com_commit)
    row_writes: int = 0  # row-changing statements, autocommitted ones included
    redo_bytes: int = 0  # redo written: every committed change passes through it (0 where not reported)

    def text(self) -> str:
        if not self.known:
            return ("an unknown number of commits (the server's counters do not reach back to the start: it is not "
                    "reachable, restarted since, or was already running when a resumed mover read them)")
        return (f"{self.commits} commits and {self.row_writes} row-changing statements "
                f"({self.redo_bytes} bytes of redo) the server has taken on the target since the start")


def _counters(spec: ConnectionSpec) -> dict[str, int]:
    conn = spec.with_database(None).connect(connection_timeout=5)
    try:
        status = fetch_status(conn)
    finally:
        conn.close()
    return {k: int(status[k]) for k in COUNTERS if str(status.get(k, "")).lstrip("-").isdigit()}


def record_baseline(journal: Journal, spec: ConnectionSpec, exact: bool = True) -> None:
    """Save the counters now (the server has just accepted connections on the target); keep an earlier record.

    ``exact`` False: the server was already running when this START ran (a resumed mover), so clients may
    have written before these counters were read; the record then only says that they may have.
    """
    if journal.load_json(side_files.SINCE_START) is not None:
        return
    try:
        counters = _counters(spec) if exact else {}
    except (InnotierError, OSError):  # it accepted one connection: whether it takes more, the evidence stands
        counters = {}
    journal.save_json(side_files.SINCE_START, {**counters, "at": int(time.time()), "exact": bool(counters)})


def accepted_on_target(journal: Journal) -> bool:
    return journal.load_json(side_files.SINCE_START) is not None


def writes_since_start(journal: Journal, spec: ConnectionSpec) -> WritesSinceStart:
    base = journal.load_json(side_files.SINCE_START)
    if base is None:
        return WritesSinceStart(True)
    if not base.get("exact", True):
        return WritesSinceStart(False)
    try:
        now = _counters(spec)
    except (InnotierError, OSError):
        return WritesSinceStart(False)
    expected_uptime = base.get("Uptime", 0) + time.time() - base.get("at", time.time())
    if now.get("Uptime", 0) + RESTART_SLACK_S < expected_uptime:  # restarted since: the counters began again
        return WritesSinceStart(False)
    lsn = next((k for k in LSN if k in now and k in base), None)
    return WritesSinceStart(True, now.get("Com_commit", 0) - base.get("Com_commit", 0),
                            sum(now.get(k, 0) - base.get(k, 0) for k in ROW_WRITES),
                            now[lsn] - base[lsn] if lsn else 0)
