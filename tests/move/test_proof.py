"""The proof of a move: the stopped source hashed whole against the target's digests at the switch.

The fault injected is the one a pre-copy cannot see: bytes written into a data page's body on
the source after a pre-copy pass copied its block, with the page header (and so its LSN) left
as it was.  The offline delta skips the block by the LSN rule, VERIFY reads back only what was
rewritten, and the check after the start samples tables: the proof must catch it, name the
file and the byte range, and finalize must refuse.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from datadir_mover.move import proof as proofmod
from tuner.core.errors import MoveError

PAGE = 16384
INJECTED = b"\xa5" * 256


def test_differing_ranges_joins_neighbouring_blocks_and_clips_at_the_end():
    block = proofmod.BLOCK
    want = bytes(16) * 4
    got = bytes(16) + b"\x01" * 16 + b"\x02" * 16 + bytes(16)
    assert proofmod._differing_ranges(want, got, 0, 4 * block) == [[block, 3 * block]]
    assert proofmod._differing_ranges(bytes(16), b"\x01" * 16, 8 * block, 8 * block + 100) == [
        [8 * block, 8 * block + 100]]


def _inject(path: Path, at: int) -> bytes:
    with open(path, "r+b") as fh:
        fh.seek(at)
        was = fh.read(len(INJECTED))
        fh.seek(at)
        fh.write(INJECTED)
        os.fsync(fh.fileno())
    return was


@pytest.mark.root
def test_page_body_written_on_the_source_after_its_precopy_is_caught_before_finalize(clone, mv_tiers, cli):
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor, status_of
    from tuner.core.server import inspect

    sb = clone("mv-proof")
    spec = sb.connection_spec()
    plan = planmod.build(planmod.MoveRequest("datadir", os.path.join(mv_tiers["tmpfs"], "proof"), precopy=True,
                                             probe=False), spec)
    victim = Path(plan.source_dir, "tpcc", "item.ibd")  # TPC-C never writes ITEM: no client touches it
    # the body of a page in the middle of the file (header with its LSN, and trailer, untouched): a leaf the
    # sample before the stop does not read (it reads the first and last rows' pages)
    at = (victim.stat().st_size // PAGE // 2) * PAGE + 4000
    injected: dict[str, bytes] = {}

    def inject(state: str) -> None:
        if state == "SHUTDOWN":  # the pre-copy passes are done: the block holding that page was copied
            injected["was"] = _inject(victim, at)

    ex = Executor.create(plan)
    ex.on_state = inject
    result = ex.run()
    assert injected and injected["was"] != INJECTED, "the bytes were not injected"
    assert result.phase == "committed"  # nothing before the proof noticed
    assert Path(plan.target_dir, "tpcc", "item.ibd").read_bytes()[at:at + 256] == injected["was"]

    proof = ex.prove()
    assert proof.status == "failed", proof
    bad = [m for m in proof.mismatches if m.file == "tpcc/item.ibd"]
    assert bad and any(a <= at and at + len(INJECTED) <= b for a, b in bad[0].ranges), proof
    assert [m.file for m in proof.mismatches] == ["tpcc/item.ibd"], proof
    assert "tpcc/item.ibd" in status_of(ex.journal)["proof"]
    shown = cli("move", "status", "--id", ex.journal.dir.name)
    assert f"{ex.journal.dir.name}: proof failed: tpcc/item.ibd (content differs: bytes" in shown.stdout, shown.stdout
    again = cli("move", "verify", "--id", ex.journal.dir.name, "--json")
    assert again.returncode == 1 and '"status": "failed"' in again.stdout, again.stdout + again.stderr

    with pytest.raises(MoveError) as refused:
        ex.finalize(accept_volatile=True)
    msg = str(refused.value)
    assert "proof" in msg and "tpcc/item.ibd" in msg and "--discard-writes-since-start" in msg and "\n" not in msg
    assert "commits" in msg  # the cost of going back
    assert victim.exists() and ex.journal.phase == "committed", "finalize removed the source"

    # the first choice the refusal names: back to the source as it was at the stop (it holds the bytes the copy
    # missed), only with the explicit flag
    with pytest.raises(MoveError, match="committed"):
        Executor.open(ex.journal).rollback()
    back = Executor.open(ex.journal).rollback(discard_writes_since_start=True)
    assert back.started and ex.journal.phase == "rolled_back"
    assert os.path.realpath(inspect(spec).datadir) == os.path.realpath(plan.source_dir)
    assert victim.read_bytes()[at:at + len(INJECTED)] == INJECTED


@pytest.mark.root
def test_a_link_retargeted_in_the_target_after_the_copy_fails_the_proof_naming_both_destinations(clone, mv_tiers):
    """The proof compares where each symbolic link points, not only that it is a link: a link in the target
    replaced after COPY by one to another destination (the same name, the same kind) is named by the proof with
    both destinations, and START refuses to run the server on that target (the source stays the good copy)."""
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor
    from datadir_mover.move.stepbase import MoveHalted
    from tuner.core.server import inspect

    sb = clone("mv-proof-link")
    spec = sb.connection_spec()
    link = "innotier-notes"  # a link beside the server's files, to one of them (the server reads neither)
    os.symlink("ibdata1", os.path.join(inspect(spec).datadir, link))
    plan = planmod.build(planmod.MoveRequest("datadir", os.path.join(mv_tiers["tmpfs"], "proof-link"), probe=False),
                         spec)
    assert link in plan.names

    def retarget(state: str) -> None:
        if state == "VERIFY":  # COPY is done: the copy made the link as the source has it
            planted = Path(plan.target_dir, link)
            assert os.readlink(planted) == "ibdata1"
            planted.unlink()
            os.symlink("/etc/hostname", planted)

    ex = Executor.create(plan)
    ex.on_state = retarget
    with pytest.raises(MoveHalted, match=f"{link} \\(no longer a link to ibdata1\\)"):
        ex.run()
    proof = proofmod.Proof.load(ex.journal)
    assert proof.status == "failed", proof
    assert [(m.file, m.why) for m in proof.mismatches] == [
        (link, "a link to '/etc/hostname' in the target at the switch, a link to 'ibdata1' when copied")], proof
    assert f"{link} (a link to '/etc/hostname'" in proof.text()

    back = Executor.open(ex.journal).rollback()
    assert back.started and ex.journal.phase == "rolled_back"
    assert os.readlink(os.path.join(plan.source_dir, link)) == "ibdata1"
