"""The commit block before the stop is bounded (``--max-write-block``), and the flush settings come back.

With a budget of zero the sample under the block uses it all: the last pass is skipped with the
reason (the plain stop follows) and the move still completes and proves itself.  With an ample
budget the pass runs, is journaled, and the pre-flush settings are put back right after it,
before the stop, which the journal records.
"""

from __future__ import annotations

import contextlib
import os

import pytest

import mvhelpers
from datadir_mover.move.step_records import ShutdownRecord


@pytest.mark.root
@pytest.mark.parametrize("budget", [0.0, 60.0], ids=["no-budget", "ample"])  # never a budget the load decides
def test_last_pass_under_the_block_keeps_to_the_budget(budget, clone, mv_tiers):
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor

    sb = clone(f"mv-block-{int(budget * 10)}")
    spec = sb.connection_spec()
    original = mvhelpers.flush_settings(spec)
    plan = planmod.build(planmod.MoveRequest("datadir", os.path.join(mv_tiers["tmpfs"], f"block{budget:g}"),
                                             precopy=True, probe=False), spec)
    ex = Executor.create(plan, max_write_block_s=budget)
    assert Executor.open(ex.journal).ctx.max_write_block_s == budget  # journaled: a resumed mover keeps the bound
    result = ex.run()
    assert result.phase == "committed"
    last = ShutdownRecord.of(ex.journal).last_pass
    if budget == 0.0:
        assert last is not None and "max-write-block" in last.skipped, last
    else:
        assert last is not None and last.pass_record is not None, last
        assert last.flush_settings_restored is True, last
        assert ex.journal.load_json("precopy-blocks.json"), "the last pass was not journaled"
    assert mvhelpers.flush_settings(spec) == original, "the pre-flush settings were left on the server"
    assert ex.prove().status == "passed"


@pytest.mark.root
def test_block_that_cannot_be_taken_in_lock_wait_timeout_falls_back_to_the_plain_stop(clone, mv_tiers):
    """Another session holds the backup lock: the mover's block waits ``LOCK_WAIT_S`` (lock_wait_timeout on its
    session), then stops without a sample instead of queueing behind it with every commit."""
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor
    from datadir_mover.move.read_lock import LOCK_WAIT_S

    sb = clone("mv-block-held")
    spec = sb.connection_spec()
    holder = spec.with_database(None).connect()
    holder.cursor().execute("BACKUP STAGE START")  # one backup at a time: the mover's BACKUP STAGE START waits
    try:
        plan = planmod.build(planmod.MoveRequest("datadir", os.path.join(mv_tiers["tmpfs"], "held"), probe=False),
                             spec)
        ex = Executor.create(plan)
        ex.background_proof = False
        result = ex.run()
    finally:
        holder.close()
    shutdown = ShutdownRecord.of(ex.journal)
    assert f"lock_wait_timeout={LOCK_WAIT_S}" in shutdown.block and "plain stop" in shutdown.block, shutdown
    assert result.phase == "committed" and ex.journal.load_json("checksums-before.json") is None


@pytest.mark.root
def test_failed_restore_of_the_flush_settings_is_reported_and_the_move_stays_correct(clone, mv_tiers):
    """A real failure of the restore after the last pass under the block: a reconnect storm fills every connection
    slot right after that pass (``max_connections`` lowered and filled from another session: a grant change would
    wait for the mover's own backup lock), so the restore cannot reach the server and the lowered settings stay.
    The failure is printed with the `SET GLOBAL`s to run and journaled; the slots come free as soon as it was
    reported, and the move completes, proven byte for byte."""
    from tuner.core.errors import ServerError

    from datadir_mover.move import plan as planmod
    from datadir_mover.move import preflush
    from datadir_mover.move.executor import Executor

    sb = clone("mv-restore-fails")
    spec = sb.connection_spec()
    original = mvhelpers.flush_settings(spec)
    admin = spec.with_database(None).connect()  # another session, opened before the storm
    cur = admin.cursor()
    cur.execute("SELECT @@GLOBAL.max_connections")
    max_connections = cur.fetchone()[0]
    state, said, storm = {"now": ""}, [], []

    def on_state(s: str) -> None:
        state["now"] = s
        if s == "SHUTDOWN":  # committed before the block: dirty pages, so the stop's pre-flush lowers the settings
            for sql in ("UPDATE tpcc.stock SET s_dist_05 = REVERSE(s_dist_05)",
                        "UPDATE tpcc.customer SET c_data = REVERSE(c_data)"):
                cur.execute(sql)
            admin.commit()
            state["checksums"] = mvhelpers.checksums(spec)  # what the target must hold

    def fill_every_slot() -> None:
        cur.execute("SET GLOBAL max_connections = 10")  # its minimum; SET GLOBAL does not wait for the block
        while len(storm) < 100:
            try:
                storm.append(spec.with_database(None).connect(connection_timeout=5))
            except ServerError as exc:
                assert "Too many connections" in str(exc), exc  # ER_CON_COUNT_ERROR
                return
        raise AssertionError("the server took 100 connections with max_connections = 10")

    def echo(msg: str) -> None:
        said.append(msg)
        if state["now"] == "SHUTDOWN" and msg.startswith("pre-copy pass") and not storm:
            fill_every_slot()  # between the last pass and the restore
        elif msg.startswith("could not put the flush settings back") and storm:
            state["left"] = preflush.read_settings(admin)  # what the server was left with
            for c in storm:
                c.close()
            cur.execute(f"SET GLOBAL max_connections = {max_connections}")  # reported: the move goes on as usual

    plan = planmod.build(planmod.MoveRequest("datadir", os.path.join(mv_tiers["tmpfs"], "restore-fails"),
                                             precopy=True, probe=False), spec)
    try:
        ex = Executor(plan, Executor.create(plan, max_write_block_s=60.0).journal, echo=echo, on_state=on_state)
        result = ex.run()
    finally:  # the server restarted on the target meanwhile (its max_connections from its config): close quietly
        for c in storm + [admin]:
            with contextlib.suppress(Exception):
                c.close()
    assert storm, f"the last pass under the block did not run: {said}"
    last = ShutdownRecord.of(ex.journal).last_pass
    assert last is not None and last.pass_record is not None and last.flush_settings_restored is False, last
    assert state.get("left") and state["left"] != original, "the settings were not lowered: nothing to restore"
    report = [m for m in said if m.startswith("could not put the flush settings back")]
    assert len(report) == 1, said
    for var, value in original.items():
        assert f"SET GLOBAL {var} = {value}" in report[0], report[0]
    # the move itself is correct: committed, verified on the target, every file proven equal to the stopped source
    assert result.phase == "committed" and result.verify_server.ok, result.verify_server
    assert ex.prove().status == "passed"
    assert mvhelpers.flush_settings(spec) == original  # the restart on the target began with its own settings
    assert mvhelpers.checksums(spec) == state["checksums"]
    mvhelpers.data_consistent(spec)

