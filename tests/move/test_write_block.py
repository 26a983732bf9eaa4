"""The commit block before the stop is bounded (``--max-write-block``), and the flush settings come back.

With a budget of zero the sample under the block uses it all: the last pass is skipped with the
reason (the plain stop follows) and the move still completes and proves itself.  With an ample
budget the pass runs, is journaled, and the pre-flush settings are put back right after it,
before the stop, which the journal records.
"""

from __future__ import annotations

import os

import pytest

import mvhelpers


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
    assert Executor.open(ex.journal).max_write_block_s == budget  # journaled: a resumed mover keeps the bound
    result = ex.run()
    assert result["phase"] == "committed"
    shutdown = ex.journal.data("SHUTDOWN")
    last = shutdown["last_pass"]
    if budget == 0.0:
        assert "max-write-block" in last["skipped"], last
        assert "flush_settings_restored" in shutdown
    else:
        assert "pass" in last, last
        assert shutdown["flush_settings_restored"] is True, shutdown
        assert ex.journal.load_json("precopy-blocks.json"), "the last pass was not journaled"
    assert mvhelpers.flush_settings(spec) == original, "the pre-flush settings were left on the server"
    assert ex.prove().status == "passed"


@pytest.mark.root
def test_block_that_cannot_be_taken_in_lock_wait_timeout_falls_back_to_the_plain_stop(clone, mv_tiers):
    """Another session holds the backup lock: the mover's block waits ``LOCK_WAIT_S`` (lock_wait_timeout on its
    session), then stops without a sample instead of queueing behind it with every commit."""
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor
    from datadir_mover.move.server_steps import LOCK_WAIT_S

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
    shutdown = ex.journal.data("SHUTDOWN")
    assert f"lock_wait_timeout={LOCK_WAIT_S}" in shutdown["block"] and "plain stop" in shutdown["block"], shutdown
    assert result["phase"] == "committed" and ex.journal.load_json("checksums-before.json") is None
