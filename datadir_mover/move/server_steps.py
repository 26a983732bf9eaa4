"""The steps that start the server on the target and check it: START and VERIFY_SERVER."""

from __future__ import annotations

import time

from tuner.core.errors import MoveError
from tuner.core.sandbox import SandboxState

from datadir_mover.move import good_copy, log_indexes, server_check, server_waits, side_files, since_start
from datadir_mover.move import target_check
from datadir_mover.move import proof as proofmod
from datadir_mover.move.copy import Manifest
from datadir_mover.move.read_lock import ReadLock
from datadir_mover.move.server_check.benign import Evidence
from datadir_mover.move.step_records import ShutdownRecord, StartRecord, VerifyServerRecord
from datadir_mover.move.stepbase import MoveContext, MoveHalted, PassCache


def step_start(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> StartRecord:
    already_running = True
    checked: dict[str, int] = {}
    if ctx.control.state() != SandboxState.RUNNING and not server_waits.wait_for_starting_server(ctx):
        checked = _check_copies_before_start(ctx, cache)
        _rename_in_log_indexes(ctx)
        seconds = ctx.control.start()
        already_running = False
    else:
        seconds = 0.0
    server_waits.wait_accepting(ctx)
    started = time.time()
    since_start.record_baseline(ctx.journal, ctx.plan.connection_spec(), exact=not already_running)
    if ctx.plan.verify == "tables":
        lock.take()  # no client write may land before the checksums are compared
    return StartRecord(started_at=started, start_seconds=round(seconds, 3), **checked)


def _rename_in_log_indexes(ctx: MoveContext) -> None:
    """After the target's check, before the start: the indexes name the target's copies, not the source's files."""
    plan = ctx.plan
    if plan.log_indexes:  # absent from older plans: nothing to rename
        done = log_indexes.rewrite(plan.target_dir, plan.source_dir, plan.log_indexes, plan.owner["uid"],
                                   plan.owner["gid"])
        if done:
            ctx.echo(f"renamed the files {', '.join(done)} names from {plan.source_dir} into {plan.target_dir}")


def _check_copies_before_start(ctx: MoveContext, cache: PassCache) -> dict[str, int]:
    """Every start: the source not moved on (``good_copy``), the target as VERIFY read it back
    (``target_check``).  Once a start was tried (``side_files.TARGET_STARTED``) the server may have run on the
    target, so its files and the ones it shares with the source's placement (a datadir's redo log) may differ by
    right."""
    tried = ctx.journal.load_json(side_files.TARGET_STARTED) is not None
    good_copy.for_resume(ctx.journal, ctx.plan, ctx.echo, moved_only=tried)
    checked: dict[str, int] = {}
    saved = ctx.journal.load_json(side_files.COPY_MANIFEST)
    if not tried and saved is not None:
        checked = target_check.require_as_verified(ctx.plan, Manifest.from_dict(saved),
                                                   vouched=cache.verified_here)
    ctx.journal.save_json(side_files.TARGET_STARTED, {"at": time.time()})
    return checked


def step_verify_server(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> VerifyServerRecord:
    """Paths, and by ``--verify``: the table sample (no lock) or checksums and TPC-C checks (read lock from start).

    A failure here halts instead of rolling back: the server has been up on the new
    location, and only the operator can tell a client's write from damage.
    """
    before = ctx.journal.load_json(side_files.CHECKSUMS_BEFORE)
    spec = ctx.plan.connection_spec()
    if ctx.plan.verify == "tables":
        lock.take()
    try:
        result = _check_on_target(ctx, spec, before)
        if result.pending_proof:  # a difference the whole-file proof may excuse: run it to the end first
            ctx.echo("a table differs: running the whole-file proof to the end before judging it")
            proofmod.run(ctx.journal, rate=0, wait=True)
            result = _check_on_target(ctx, spec, before)
        server_check.require_ok(result, ctx.plan.component, ctx.plan.target_dir)
    except MoveError as exc:
        raise MoveHalted(f"{exc}; the server runs on {ctx.plan.target_dir}: if clients wrote between the start "
                         "and the check this is expected (`innotier move resume` checks again), otherwise "
                         f"`innotier move rollback --id {ctx.plan.move_id} --discard-writes-since-start` "
                         "returns to the old files") from None
    finally:
        lock.release()
    return VerifyServerRecord.of_check(result)


def _check_on_target(ctx: MoveContext, spec, before) -> "server_check.ServerCheck":
    proof = proofmod.Proof.load(ctx.journal)
    evidence = Evidence.of_move(ShutdownRecord.of(ctx.journal).commits_at_stop(), ctx.plan.precopy,
                                proof.status if proof is not None else None)
    return server_check.check_server(spec, ctx.plan.component, ctx.plan.target_dir, before, ctx.plan.verify, evidence)
