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
    from datadir_mover.move.step_records import PassRecord

    def p(*seconds):
        return [PassRecord(number=n, seconds=s) for n, s in enumerate(seconds, 1)]

    assert not _converged(p())  # the first pass of a regime always runs
    assert not _converged(p(30.0))
    assert _converged(p(30.0, PRECOPY_ENOUGH_S / 2))  # short enough: the offline delta will be small
    assert not _converged(p(30.0, 6.0))  # shrinking fast: another pass pays
    assert _converged(p(30.0, 6.0, 5.5))  # not 0.8x of the one before: the write rate holds the delta
    assert _converged(p(*[40.0 / 2 ** i for i in range(PRECOPY_MAX_PASSES)]))  # enough passes


@pytest.mark.parametrize("state", ["PLAN", "PRECOPY", "SHUTDOWN", "COPY", "VERIFY", "SWITCH", "START",
                                   "VERIFY_SERVER", "COMMIT"])
def test_a_torn_line_hides_no_later_record(tmp_path, state, capsys):
    """A crash tore a record at ``state``; an older appender wrote the next record on the torn line's end, a newer
    one starts a new line: resume and rollback must still see every whole record after it."""
    from datadir_mover.move.journal import STATES

    j = Journal.create(tmp_path / "m", {"move_id": "m"})
    for s in STATES[:STATES.index(state)]:
        j.begin(s)
        j.finish(s)
    j.begin(state)
    with open(j.path, "a") as fh:  # the "done" record torn by a crash, then an old-style append glued to it
        fh.write('{"at": 1.0, "event": "do')
    j._append(state, "done", {})  # a new-style append: the torn tail is cut first (with a warning)
    assert "torn by a crash" in capsys.readouterr().err
    assert j.torn_lines() == 0 and j.done(state)
    j.begin("ROLLBACK" if state != "COMMIT" else "FINALIZE")
    with open(j.path, "a") as fh:
        fh.write('{"at": 2.0, "event": "done", "st')
    with open(j.path, "ab") as fh:  # what durable.append_line_durable of an older innotier did: no newline first
        fh.write(b'{"at": 3.0, "event": "begin", "state": "SWITCH"}\n')
    assert j.torn_lines() == 1
    recs = j.records()
    assert (recs[-1].state, recs[-1].event, recs[-1].at) == ("SWITCH", "begin", 3.0)
    assert j.began("SWITCH") and j.done(state)  # rollback restores the placement; resume does not loop
    assert j.began("ROLLBACK" if state != "COMMIT" else "FINALIZE")


def test_durable_append_after_a_torn_line_starts_a_new_line(tmp_path):
    from tuner.core.durable import append_line_durable

    p = tmp_path / "log"
    p.write_text('{"a": 1}\n{"b": ')
    append_line_durable(p, '{"c": 3}')
    assert p.read_text().splitlines() == ['{"a": 1}', '{"b": ', '{"c": 3}']
