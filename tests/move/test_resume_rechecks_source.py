"""Resume re-checks the world: a source that moved on after VERIFY is never left behind by a start on the target.

The real `innotier move apply` is killed right after VERIFY is durable (the crash-point
machinery of test_crash_points.py); someone then starts the server on the source (the
placement was not switched yet), writes a row and stops it.  `move resume` must refuse in one
line, before anything is switched, and the row must still be there.
"""

from __future__ import annotations

import os

import pytest

from datadir_mover.move.source_fingerprint import redo_checkpoint


def _query(spec, sql: str):
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute(sql)
        return cur.fetchall() if cur.with_rows else None
    finally:
        conn.close()


@pytest.mark.root
def test_resume_after_verify_refuses_when_the_server_ran_on_the_source(clone, mv_tiers, cli):
    from datadir_mover.move.journal import all_journals
    from tuner.core.server import inspect

    sb = clone("mv-recheck")
    spec = sb.connection_spec()
    home = inspect(spec).datadir
    target = os.path.join(mv_tiers["tmpfs"], "recheck")
    killed = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", target, "--yes",
                 env={"INNOTIER_MOVE_CRASH_AT": "VERIFY:done"})
    assert killed.returncode == -9, killed.stderr
    journal = next(j for j in all_journals() if j.plan()["server_key"] == f"sandbox:{sb.name}" and j.phase == "open")
    checkpoint_at_verify = redo_checkpoint(os.path.join(home, "ib_logfile0"))

    sb.start()  # the operator brings the server back where it was and clients write
    assert os.path.realpath(inspect(spec).datadir) == os.path.realpath(home)
    _query(spec, "CREATE DATABASE mvr")
    _query(spec, "CREATE TABLE mvr.t (id INT PRIMARY KEY) ENGINE=InnoDB")
    _query(spec, "INSERT INTO mvr.t VALUES (42)")
    sb.stop("clean")
    assert redo_checkpoint(os.path.join(home, "ib_logfile0")) != checkpoint_at_verify

    r = cli("move", "resume", "--id", journal.dir.name)
    assert r.returncode != 0, r.stdout
    refusal = r.stderr.strip().splitlines()[-1]  # the lines before it are the step announcements ("switch...")
    assert refusal.startswith("innotier: the source") and "changed after the copy was verified" in refusal, r.stderr
    assert "checkpoint LSN" in refusal and "move rollback" in refusal, refusal
    assert not journal.done("SWITCH") and journal.phase == "open"

    sb.start()
    assert os.path.realpath(inspect(spec).datadir) == os.path.realpath(home), "the placement was switched"
    assert _query(spec, "SELECT id FROM mvr.t") == [(42,)], "the write made on the source was lost"
