"""Move every component of a real, loaded MariaDB sandbox to a real tmpfs and a real zram-backed ext4, and back.

The moves go through the real CLI (`innotier move apply ... --yes`); the mover verifies each
one itself (paths, CHECKSUM TABLE of every InnoDB table, TPC-C checks), and the test checks
again with its own checksums, a short write workload and the consistency checks.
"""

from __future__ import annotations

import json
import os

import pytest

import mvhelpers

# out: the datadir last, so each move leaves the root file system for the tier (a same-file-system move is
# refused: it would gain nothing); back: the datadir first, then the others return into it
OUT = ("redo", "ibdata", "undo", "tmpdir", "datadir")
BACK = ("datadir", "redo", "ibdata", "undo", "tmpdir")


def _move(run_cli, sandbox: str, component: str, to: str) -> dict:
    """Datadir moves go through the real CLI; the others call the same code in-process (CI time budget)."""
    if component != "datadir":
        return _move_in_process(sandbox, component, to)
    # the full table-level verification (CHECKSUM TABLE under a read lock, TPC-C checks) on the CLI path;
    # the default (a bounded sample) runs in the in-process moves and the crash points
    proc = run_cli("move", "apply", component, "--sandbox", sandbox, "--to", to, "--yes", "--json",
                   "--verify", "tables")
    assert proc.returncode == 0, f"move {component} -> {to} failed:\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(proc.stdout)
    assert result["phase"] == "committed"
    assert result["verify_server"]["ok"] and not result["verify_server"]["checksum_problems"]
    assert result["verify_server"]["mode"] == "tables" and result["verify_server"]["tpcc"] == {"tpcc": "ok"}
    fin = run_cli("move", "finalize", "--id", result["move_id"], "--yes", "--json", "--i-accept-volatile")
    assert fin.returncode == 0, fin.stderr
    assert not json.loads(fin.stdout)["kept"]
    return result


def _move_in_process(sandbox: str, component: str, to: str) -> dict:
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor
    from tuner.core.sandbox import Sandbox

    spec = Sandbox.load(sandbox).connection_spec()
    plan = planmod.build(planmod.MoveRequest(component=component, target=to, probe=False), spec)
    ex = Executor.create(plan)
    result = ex.run()
    assert result.phase == "committed"
    assert result.verify_server.ok and not result.verify_server.checksum_problems
    proof = ex.prove()
    assert proof.status == "passed", proof.text()  # offline copies: recorded as passed from the copy's own evidence
    assert not ex.finalize(accept_volatile=True).kept
    return result.to_dict()  # as `move apply --json` prints it, like the CLI path's


def _locations(sb) -> dict:
    from tuner.core.server import inspect

    return inspect(sb.connection_spec()).locations()


@pytest.mark.root
@pytest.mark.parametrize("tier", ["tmpfs", "zram"])
def test_move_every_component_there_and_back(tier, mv_tiers, clone, cli):
    sb = clone(f"mv-{tier}")
    spec = sb.connection_spec()
    before = mvhelpers.checksums(spec)
    home = _locations(sb)
    base = os.path.join(mv_tiers[tier], f"{sb.name}")
    os.makedirs(base)
    targets = {c: os.path.join(base, c) for c in OUT}

    for c in OUT:
        _move(cli, sb.name, c, targets[c])
        assert os.path.realpath(_locations(sb)[c]) == targets[c]

    now = _locations(sb)
    for c in OUT:
        assert now[c] == targets[c], f"{c} is at {now[c]}"
    assert mvhelpers.checksums(spec) == before, "moving changed table contents"
    committed = mvhelpers.short_workload(spec, seconds=3)
    assert committed > 0
    mvhelpers.data_consistent(spec)
    after_run = mvhelpers.checksums(spec)

    for c in BACK:
        _move(cli, sb.name, c, home[c])
    assert _locations(sb) == home
    assert mvhelpers.checksums(spec) == after_run, "moving back changed table contents"
    mvhelpers.data_consistent(spec)
    # the tier holds nothing of the server any more (finalize removed each source)
    leftovers = [os.path.join(d, n) for d in targets.values() if os.path.isdir(d) for n in os.listdir(d)]
    assert not leftovers, leftovers
