"""Once the server has accepted connections on the target, no automatic path rolls back.

A ``ServerError`` (a reconnect storm: "Too many connections") or a ``WorkloadError`` raised by
the check after the start used to reach the automatic rollback, which discarded what clients
had committed on the target.  Injected here in-process after a client committed a row on the
target: the move halts naming the failure, the row stays, and ``rollback`` refuses without
``--discard-writes-since-start`` in one line that says what going back would discard.
"""

from __future__ import annotations

import os

import pytest

from tuner.core.errors import ServerError, WorkloadError
from sqlhelpers import execute


def _rows(spec) -> int:
    [(n,)] = execute(spec.with_database(None), "SELECT COUNT(*) FROM mvh.t")
    return int(n)


@pytest.mark.root
@pytest.mark.parametrize("error", [ServerError("cannot connect: Too many connections"),
                                   WorkloadError("3 of the TPC-C checks failed")], ids=["ServerError", "WorkloadError"])
def test_failure_after_the_start_halts_and_discards_nothing(error, clone, mv_tiers, monkeypatch):
    from datadir_mover.move import plan as planmod
    from datadir_mover.move import server_check
    from datadir_mover.move.executor import Executor, MoveHalted
    from tuner.core.server import inspect

    sb = clone(f"mv-halt-{type(error).__name__.lower()}")
    spec = sb.connection_spec()
    conn = spec.with_database(None).connect()
    conn.cursor().execute("CREATE DATABASE mvh")
    conn.cursor().execute("CREATE TABLE mvh.t (id INT PRIMARY KEY) ENGINE=InnoDB")
    conn.close()
    target = os.path.join(mv_tiers["tmpfs"], f"halt-{type(error).__name__}")
    plan = planmod.build(planmod.MoveRequest("datadir", target, probe=False), spec)

    def failing_check(*args, **kwargs):
        c = spec.with_database(None).connect()  # a client commits on the target first
        c.cursor().execute("INSERT INTO mvh.t VALUES (1)")
        c.close()
        raise error

    monkeypatch.setattr(server_check, "check_server", failing_check)
    ex = Executor.create(plan)
    ex.background_proof = False
    with pytest.raises(MoveHalted) as halted:
        ex.run()
    msg = str(halted.value)
    assert "VERIFY_SERVER failed" in msg and str(error) in msg and "nothing rolled back" in msg, msg
    assert ex.journal.phase == "open" and not ex.journal.began("ROLLBACK")
    assert sb.state().value == "running"
    assert os.path.realpath(inspect(spec).datadir) == os.path.realpath(target), "the server left the target"
    assert _rows(spec) == 1, "the commit made on the target was lost"

    with pytest.raises(Exception) as refused:
        Executor.open(ex.journal).rollback()
    text = str(refused.value)
    assert "--discard-writes-since-start" in text and "row-changing statements" in text and "\n" not in text
    assert _rows(spec) == 1 and ex.journal.phase == "open", "the refused rollback changed something"

    monkeypatch.undo()
    back = Executor.open(ex.journal).rollback(discard_writes_since_start=True)
    assert back.started and ex.journal.phase == "rolled_back"
    assert os.path.realpath(inspect(spec).datadir) == os.path.realpath(plan.source_dir)
