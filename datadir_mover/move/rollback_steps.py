"""Going back and closing: PLAN saves what SWITCH overwrites, ROLLBACK puts it back, CLOSE ends a destroyed
sandbox's move."""

from __future__ import annotations

import shutil
from pathlib import Path

from tuner.core.durable import fsync_dir, write_atomic
from tuner.core.sandbox import SandboxState
from tuner.core.errors import MoveError

from datadir_mover import apparmor, unit_sandbox
from datadir_mover.move import (components, flush_settings, good_copy, server_check, server_waits, side_files,
                                since_start)
from datadir_mover.move import proof as proofmod
from datadir_mover.move.journal import State
from datadir_mover.move.plan import Plan
from datadir_mover.move.read_lock import ReadLock
from datadir_mover.move.server_check.benign import Evidence
from datadir_mover.move.server_lock import ServerLock
from datadir_mover.move.step_records import CloseRecord, PlanRecord, RollbackRecord, ShutdownRecord, VerifyServerRecord
from datadir_mover.move.stepbase import MoveContext, PassCache, model_stub


def step_plan(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> PlanRecord:
    """Save what SWITCH will overwrite, so rollback can put it back byte for byte."""
    before = {"placement": ctx.plan.placement_before,
              "records": {p: (Path(p).read_text() if Path(p).exists() else None) for p in ctx.plan.record_files}}
    aa = ctx.plan.apparmor_change()
    if aa.local_path and Path(aa.local_path).exists():
        before["apparmor_local"] = Path(aa.local_path).read_text()
    ctx.journal.save_json(side_files.BEFORE, before)
    return PlanRecord()


def refuse_if_closed(ctx: MoveContext, discard_writes_since_start: bool = False) -> None:
    """One line where rollback is not the way back: after COMMIT (unless the proof failed) or after it ran."""
    phase = ctx.journal.phase
    proof = proofmod.Proof.load(ctx.journal)
    failed_proof = phase == "committed" and proof is not None and proof.status == "failed"
    back = f"`innotier move apply {ctx.plan.component} --to {ctx.plan.source_dir}`"
    if phase == "finalized":
        raise MoveError(f"move {ctx.plan.move_id} is finalized: its source {ctx.plan.source_dir} was removed, so "
                        f"there is nothing to roll back to; to go back, move {ctx.plan.component} back home with "
                        f"{back} (it undoes this move's option-file and AppArmor changes)")
    if phase == "committed" and not (failed_proof and discard_writes_since_start):
        raise MoveError(f"move {ctx.plan.move_id} is committed: the server has run on {ctx.plan.target_dir} "
                        f"since, so the source is stale; to go back, finalize this move (`innotier move finalize "
                        f"--id {ctx.plan.move_id}`), then move back home with {back}")
    if phase == "rolled_back":
        raise MoveError(f"move {ctx.plan.move_id} is already rolled back")


def rollback(ctx: MoveContext, lock: ReadLock, server_lock: ServerLock, reason: str = "asked by the operator",
             discard_writes_since_start: bool = False) -> RollbackRecord:
    refuse_if_closed(ctx, discard_writes_since_start)
    may_have_written = since_start.accepted_on_target(ctx.journal) or (
        ctx.journal.began(State.START) and ctx.control.state() == SandboxState.RUNNING)  # started, then killed
    if may_have_written and not discard_writes_since_start:
        cost = since_start.writes_since_start(ctx.journal, ctx.plan.connection_spec()).text()
        raise MoveError(f"{ctx.control.describe()} has accepted connections on {ctx.plan.target_dir}: rolling "
                        f"back discards {cost}; if that is what you want, run `innotier move rollback --id "
                        f"{ctx.plan.move_id} --discard-writes-since-start`")
    server_lock.acquire(ctx.plan.move_id)
    try:
        ctx.journal.lock()
        try:
            return roll_back(ctx, lock, reason)
        finally:
            ctx.journal.unlock()
    finally:
        server_lock.release()


def roll_back(ctx: MoveContext, lock: ReadLock, reason: str) -> RollbackRecord:
    if not ctx.journal.began(State.ROLLBACK):  # an interrupted rollback already removed what it removes
        good_copy.for_rollback(ctx.journal, ctx.plan)
    ctx.journal.begin(State.ROLLBACK, reason=reason)
    switched = ctx.journal.began(State.SWITCH)
    # the "before" checksums still describe the old files only if the server stopped while the read lock
    # was held (SHUTDOWN done, or begun and the server is found stopped); otherwise writes may have followed
    frozen = ctx.journal.done(State.SHUTDOWN) or (ctx.journal.began(State.SHUTDOWN) and
                                                  (switched or ctx.control.state() != SandboxState.RUNNING))
    if switched:
        if ctx.control.state() == SandboxState.RUNNING:
            ctx.echo(f"stopping {ctx.control.describe()} (it may run on the new location)")
            ctx.control.stop("clean")
        _restore_before(ctx)
        apparmor.remove(ctx.plan.apparmor_change())
        unit_sandbox.remove(ctx.plan.unit_change())
    removed = remove_target(ctx.plan)
    started = False
    if ctx.plan.was_running and ctx.control.state() != SandboxState.RUNNING:
        if ctx.control.state() == SandboxState.CRASHED:
            raise MoveError(f"{ctx.control.describe()} crashed during the move; start it with recovery "
                            "(`innotier sandbox start NAME --recover`), then run `innotier move rollback` again")
        ctx.echo(f"starting {ctx.control.describe()} on {ctx.plan.source_dir}")
        ctx.control.start()
        started = True
    check: VerifyServerRecord | None = None
    if ctx.control.state() == SandboxState.RUNNING:
        server_waits.wait_accepting(ctx)
        if not started:  # it kept running since SHUTDOWN's pre-flush: give it its own flush settings back
            flush_settings.put_back(ctx.plan, ctx.control, ctx.echo, flush_settings.saved(ctx.journal))
        before = ctx.journal.load_json(side_files.CHECKSUMS_BEFORE) if frozen and started else None
        if before is not None and ctx.plan.verify == "tables":
            lock.take()
        try:
            result = server_check.check_server(ctx.plan.connection_spec(), ctx.plan.component, ctx.plan.source_dir,
                                               before, ctx.plan.verify,
                                               Evidence.of_move(ShutdownRecord.of(ctx.journal).commits_at_stop(),
                                                                False, on_source=True))
        finally:
            lock.release()
        server_check.require_ok(result, ctx.plan.component, ctx.plan.source_dir)
        check = VerifyServerRecord.of_check(result)
    record = RollbackRecord(removed=removed, started=started, check=check)
    ctx.journal.finish(State.ROLLBACK, **record.to_journal())
    return record


def _restore_before(ctx: MoveContext) -> None:
    before = ctx.journal.load_json(side_files.BEFORE) or {"placement": ctx.plan.placement_before, "records": {}}
    pf = Path(ctx.plan.placement_file)
    if before.get("placement") is None:
        if pf.exists():
            pf.unlink()
            fsync_dir(pf.parent)
    else:
        write_atomic(pf, before["placement"], mode=0o644)
    for path, text in (before.get("records") or {}).items():
        if text is not None:
            write_atomic(path, text, mode=0o600 if path.endswith("client.cnf") else 0o644)


def remove_target(plan: Plan) -> int:
    """Remove what this move wrote into the target; the target directory too when the move created it."""
    target = Path(plan.target_dir)
    if not target.exists():
        return 0
    if not plan.target_exists or plan.component == "datadir":
        # the target was new or empty (preflight): everything in it is the move's
        n = sum(1 for _ in target.rglob("*"))
        if not plan.target_exists:
            shutil.rmtree(target)
            fsync_dir(target.parent)
        else:
            for child in target.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            fsync_dir(target)
        return n
    n = 0
    for name in components.top_names(plan.component, model_stub(plan), str(target)):
        p = target / name
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        n += 1
    fsync_dir(target)
    return n


def close(ctx: MoveContext, reason: str) -> CloseRecord:
    """The server is gone for good (its sandbox is being destroyed): remove what the move put in the target."""
    ctx.journal.lock()
    try:
        ctx.journal.begin(State.CLOSE, reason=reason)
        record = CloseRecord(removed=remove_target(ctx.plan))
        ctx.journal.finish(State.CLOSE, **record.to_journal())
    finally:
        ctx.journal.unlock()
    return record
