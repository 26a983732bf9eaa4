"""The move journal on its own: resume points, a torn tail, phases, the exclusive lock; and when pre-copy
passes stop."""

from __future__ import annotations

import pytest

from datadir_mover.move.journal import Journal
from tuner.core.errors import MoveError


def test_journal_resume_points_and_torn_tail(tmp_path):
    j = Journal.create(tmp_path / "m", {"move_id": "m"})
    assert j.next_state() == "PLAN"
    j.begin("PLAN")
    j.finish("PLAN")
    j.begin("PRECOPY")
    assert j.next_state() == "PRECOPY"  # begun, not done: run it again
    j.finish("PRECOPY")
    assert j.next_state() == "SHUTDOWN"
    with open(j.path, "a") as fh:  # a crash tore the next record
        fh.write('{"state": "SHUTDOWN", "ev')
    assert [r.state for r in j.records()] == ["PLAN", "PLAN", "PRECOPY", "PRECOPY"]
    assert j.next_state() == "SHUTDOWN" and j.phase == "open"
    assert "resume" in j.describe()


def test_journal_phases(tmp_path):
    j = Journal.create(tmp_path / "m", {"move_id": "m"})
    for s in ("PLAN", "PRECOPY", "SHUTDOWN", "COPY", "VERIFY", "SWITCH", "START", "VERIFY_SERVER", "COMMIT"):
        j.begin(s)
        j.finish(s)
    assert j.phase == "committed" and j.next_state() is None
    j.begin("FINALIZE")
    assert j.phase == "committed" and "finalize was interrupted" in j.describe()
    j.finish("FINALIZE")
    assert j.phase == "finalized"


def test_journal_lock_is_exclusive(tmp_path):
    j = Journal.create(tmp_path / "m", {"move_id": "m"})
    j.lock()
    try:
        with pytest.raises(MoveError, match="another innotier process"):
            Journal(tmp_path / "m").lock()
    finally:
        j.unlock()
    Journal(tmp_path / "m").lock()


def test_precopy_passes_stop_when_the_delta_stops_shrinking():
    from datadir_mover.move.precopy_steps import PRECOPY_ENOUGH_S, PRECOPY_MAX_PASSES, _converged

    def p(*seconds):
        return [{"seconds": s} for s in seconds]

    assert not _converged(p())  # the first pass of a regime always runs
    assert not _converged(p(30.0))
    assert _converged(p(30.0, PRECOPY_ENOUGH_S / 2))  # short enough: the offline delta will be small
    assert not _converged(p(30.0, 6.0))  # shrinking fast: another pass pays
    assert _converged(p(30.0, 6.0, 5.5))  # not 0.8x of the one before: the write rate holds the delta
    assert _converged(p(*[40.0 / 2 ** i for i in range(PRECOPY_MAX_PASSES)]))  # enough passes
