"""Going back and closing: PLAN saves what SWITCH overwrites, ROLLBACK puts it back, CLOSE ends a destroyed
sandbox's move."""

from __future__ import annotations

import os
import stat
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
from datadir_mover.move.copy import Tree, remove_all
from datadir_mover.move.stepbase import Echo, MoveContext, PassCache, model_stub, quiet


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
    """Back to the source (``journal.py`` has the contract): the placement put back when SWITCH began, what the
    move wrote into the target removed, the server started there when it was running before the move, checked."""
    if not ctx.journal.began(State.ROLLBACK):  # an interrupted rollback already removed what it removes
        good_copy.for_rollback(ctx.journal, ctx.plan)
    ctx.journal.begin(State.ROLLBACK, reason=reason)
    frozen = _stopped_under_the_block(ctx)  # before the server is stopped or started below
    if ctx.journal.began(State.SWITCH):
        _undo_switch(ctx)
    removed = remove_target(ctx.plan, ctx.echo)
    started = _start_on_source(ctx)
    check = _check_on_source(ctx, lock, started, frozen) if ctx.control.state() == SandboxState.RUNNING else None
    record = RollbackRecord(removed=removed, started=started, check=check)
    ctx.journal.finish(State.ROLLBACK, **record.to_journal())
    return record


def _stopped_under_the_block(ctx: MoveContext) -> bool:
    """Do the "before" checksums still describe the old files?  Only if the server stopped while the read lock
    was held (SHUTDOWN done, or begun and the server is found stopped); otherwise writes may have followed."""
    j = ctx.journal
    return j.done(State.SHUTDOWN) or (j.began(State.SHUTDOWN) and
                                      (j.began(State.SWITCH) or ctx.control.state() != SandboxState.RUNNING))


def _undo_switch(ctx: MoveContext) -> None:
    """SWITCH began: stop the server (it may run on the new location), put the saved files back."""
    if ctx.control.state() == SandboxState.RUNNING:
        ctx.echo(f"stopping {ctx.control.describe()} (it may run on the new location)")
        ctx.control.stop("clean")
    _restore_before(ctx)
    apparmor.remove(ctx.plan.apparmor_change())
    unit_sandbox.remove(ctx.plan.unit_change())


def _start_on_source(ctx: MoveContext) -> bool:
    """Start the server on the old location when it ran before the move and is not running now; whether it did."""
    if not ctx.plan.was_running or ctx.control.state() == SandboxState.RUNNING:
        return False
    if ctx.control.state() == SandboxState.CRASHED:
        raise MoveError(f"{ctx.control.describe()} crashed during the move; start it with recovery "
                        "(`innotier sandbox start NAME --recover`), then run `innotier move rollback` again")
    ctx.echo(f"starting {ctx.control.describe()} on {ctx.plan.source_dir}")
    ctx.control.start()
    return True


def _check_on_source(ctx: MoveContext, lock: ReadLock, started: bool, frozen: bool) -> VerifyServerRecord:
    """The running server checked on the source: against the checksums taken before the stop when it was started
    here from files stopped under the block, else for what it is (paths, readable tables)."""
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
    return VerifyServerRecord.of_check(result)


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


def remove_target(plan: Plan, echo: Echo = quiet) -> int:
    """Remove what this move wrote into the target, and the target directory when the move created it; how many
    entries.  The server's user owns the target and may have changed it: everything is listed and removed
    through directory descriptors opened without following a link (a link is removed, never followed), and a
    link or file found in the target's own place is not the move's directory: nothing is removed through it."""
    target = plan.target_dir
    if not os.path.lexists(target):
        return 0
    if os.path.islink(target) or not os.path.isdir(target):
        what = f"a symbolic link to {os.readlink(target)}" if os.path.islink(target) else "not a directory"
        echo(f"the target {target} is {what}, not the directory the move made or was given (something changed it "
             "while the move ran: the server's user?); nothing was removed through it: remove it yourself")
        return 0
    removed = 0
    with Tree(target, follow_root=False) as tree:
        for _ in range(3):  # listed again: the server's user may have renamed a directory aside meanwhile
            rels = _moved_entries(tree, plan)
            if not rels:
                break
            removed += remove_all(tree, rels)
        tree.fsync_dir()
    if not plan.target_exists:
        try:
            os.rmdir(target)  # never follows a link put in its place since
        except OSError as exc:
            raise MoveError(f"could not remove the target {target}: {exc.strerror} (something keeps adding to it "
                            "while the rollback runs: the server's user?); remove it by hand and run the rollback "
                            "again") from None
        fsync_dir(Path(target).parent)
    return removed


def _moved_entries(tree: Tree, plan: Plan) -> list[str]:
    """What of the target is the move's: all of it when it was new or empty (preflight), else the component's names."""
    if not plan.target_exists or plan.component == "datadir":
        tops = os.listdir(tree.dir_fd())
    else:
        tops = components.top_names(plan.component, model_stub(plan), f"/proc/self/fd/{tree.dir_fd()}")
    return [rel for top in tops for rel in _below(tree, top)]


def _below(tree: Tree, rel: str) -> list[str]:
    """``rel`` and, when it is a directory (not a link), everything under it; listed through the tree's descriptors."""
    try:
        mode = tree.lstat(rel).st_mode
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(mode):
        return [rel]
    return [rel] + [r for name in os.listdir(tree.dir_fd(rel)) for r in _below(tree, f"{rel}/{name}")]


def close(ctx: MoveContext, reason: str) -> CloseRecord:
    """The server is gone for good (its sandbox is being destroyed): remove what the move put in the target."""
    ctx.journal.lock()
    try:
        ctx.journal.begin(State.CLOSE, reason=reason)
        record = CloseRecord(removed=remove_target(ctx.plan, ctx.echo))
        ctx.journal.finish(State.CLOSE, **record.to_journal())
    finally:
        ctx.journal.unlock()
    return record
