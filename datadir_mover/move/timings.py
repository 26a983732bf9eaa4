"""How long a move kept the server down and writes blocked, read back from its journal."""

from __future__ import annotations

from typing import Any

from datadir_mover.move.journal import OFFLINE_STATES, Journal, State
from datadir_mover.move.step_records import ShutdownRecord, StartRecord


def timings(journal: Journal, verify_mode: str) -> dict[str, Any]:
    """downtime_s, until_verified_s, writes_blocked_s and the downtime's breakdown (those known so far)."""
    sd, st = ShutdownRecord.of(journal), StartRecord.of(journal)
    out: dict[str, Any] = {}
    if sd.stop_began_at and st.started_at:
        out["downtime_s"] = round(st.started_at - sd.stop_began_at, 3)
    vs = [r for r in journal.records() if r.state == State.VERIFY_SERVER and r.event == "done"]
    if vs and sd.stop_began_at:
        out["until_verified_s"] = round(vs[-1].at - sd.stop_began_at, 3)
    if st.started_at and sd.stop_began_at:
        # read lock before shutdown (sample or checksums), server down, and with --verify tables the
        # read lock after start until verified
        blocked_from = sd.read_lock_at or sd.stop_began_at
        blocked_to = vs[-1].at if (vs and verify_mode == "tables") else st.started_at
        out["writes_blocked_s"] = round(blocked_to - blocked_from, 3)
    if out.get("downtime_s") is not None:
        out["downtime_breakdown"] = downtime_breakdown(journal)
    return out


def downtime_breakdown(journal: Journal) -> dict[str, float]:
    """Where the time the server was unavailable went: stop, each offline step, start, waiting to accept.

    From the journal: the stop as SHUTDOWN recorded it, COPY (read, write and read-back),
    VERIFY (the sources' and copies' stat, a copy changed since read back again), SWITCH and START from their begin/done records; ``other_s`` is
    what lies between them (journal writes).  The pre-flush ran before the stop (not
    downtime) and is listed apart.
    """
    began: dict[str, float] = {}
    done: dict[str, float] = {}
    for r in journal.records():
        (began if r.event == "begin" else done)[r.state] = r.at
    sd, st = ShutdownRecord.of(journal), StartRecord.of(journal)
    out: dict[str, float] = {}
    if sd.stopped_at and sd.stop_began_at:
        out["stop_s"] = round(sd.stopped_at - sd.stop_began_at, 3)
    for state in OFFLINE_STATES:
        if state in began and state in done and done[state] >= began[state]:
            out[f"{state.lower()}_s"] = round(done[state] - began[state], 3)
    if State.START in began and st.started_at:
        out["start_s"] = round(st.start_seconds, 3)
        out["accept_wait_s"] = round(st.started_at - began[State.START] - st.start_seconds, 3)
    if st.started_at and sd.stop_began_at:
        out["other_s"] = round(st.started_at - sd.stop_began_at - sum(out.values()), 3)
    if sd.preflush and "seconds" in sd.preflush:
        out["preflush_before_stop_s"] = sd.preflush["seconds"]
    return out
