"""FINALIZE: after COMMIT, remove the source files the move copied (and only those, unchanged since)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from tuner.core.durable import fsync_dir
from tuner.core.sandbox import SandboxState
from tuner.core.errors import MoveError
from tuner.core.server import inspect

from datadir_mover.move import components, placement, side_files, since_start, volatile
from datadir_mover.move import proof as proofmod
from datadir_mover.move.copy import Manifest, Tree
from datadir_mover.move.journal import State, crash_point
from datadir_mover.move.plan import Plan
from datadir_mover.move.step_records import FinalizeRecord
from datadir_mover.move.stepbase import MoveContext

SESSION_TEMP = re.compile(r"^temp_\d+\.ibt$")  # MySQL's session temporary tablespaces in #innodb_temp/


def finalize(ctx: MoveContext, accept_volatile: bool = False, persist_backing: str | None = None) -> FinalizeRecord:
    """Remove the source, once the proof passed and the target does not depend on memory alone."""
    last = ctx.journal.last()
    if ctx.journal.phase == "finalized":
        raise MoveError(f"move {ctx.plan.move_id} is already finalized")
    if ctx.journal.phase != "committed":
        raise MoveError(f"move {ctx.plan.move_id} is not committed ({ctx.journal.describe()}); only a committed "
                        "move's source can be removed")
    resumed = bool(last and last.state == State.FINALIZE)
    if not resumed:
        _require_proof(ctx)
        volatile.require_persistence(ctx.plan.target_dir, ctx.plan.move_id, persist_backing, accept_volatile)
    ctx.journal.lock()
    try:
        _require_server_on_target(ctx)
        if not resumed:
            ctx.journal.begin(State.FINALIZE)
        manifest = Manifest.from_dict(ctx.journal.load_json(side_files.COPY_MANIFEST))
        removed, kept = _remove_source(ctx.plan, manifest)
        record = FinalizeRecord(removed=removed, kept=tuple(kept))
        ctx.journal.finish(State.FINALIZE, **record.to_journal())
        return record
    finally:
        ctx.journal.unlock()


def _require_proof(ctx: MoveContext) -> None:
    """The proof must have passed; run (or wait for) what is left of it first."""
    if proofmod.pending(ctx.journal) and proofmod.prover_alive(ctx.journal):
        ctx.echo("waiting for the proof running in the background")
    proof = proofmod.run(ctx.journal, rate=0, wait=True)
    if proof is None:
        raise MoveError(f"move {ctx.plan.move_id} has no proof (made by an innotier without one); the source "
                        "is kept: compare the target with it yourself, then remove it by hand")
    if proof.status in ("pending", "blocked"):
        raise MoveError(f"the proof of move {ctx.plan.move_id} is {proof.text()}; the source is kept: bring it "
                        f"back (remount it), then run `innotier move verify --id {ctx.plan.move_id}` and "
                        "finalize again")
    if proof.status != "passed":
        cost = since_start.writes_since_start(ctx.journal, ctx.plan.connection_spec()).text()
        raise MoveError(f"the proof of move {ctx.plan.move_id} failed: the target is not the stopped source "
                        f"({'; '.join(m.text() for m in proof.mismatches[:3])}); the source is kept.  Choices: "
                        f"go back with `innotier move rollback --id {ctx.plan.move_id} "
                        f"--discard-writes-since-start` (the server returns to the source as it was at the stop, "
                        f"discarding {cost}), or keep running on the target and repair the named files' tables "
                        "from the source or a backup (the source stays until you remove it)")


def _require_server_on_target(ctx: MoveContext) -> None:
    state = ctx.control.state()
    if state == SandboxState.RUNNING:
        where = components.source_dir(ctx.plan.component, inspect(ctx.plan.connection_spec()))
        if os.path.realpath(where) != os.path.realpath(ctx.plan.target_dir):
            raise MoveError(f"the server now reports {ctx.plan.component} at {where}, not "
                            f"{ctx.plan.target_dir}; the source is not removed")
        return

    current = placement.parse(Path(ctx.plan.placement_file).read_text() if Path(ctx.plan.placement_file).exists()
                              else "")
    if current.get(ctx.plan.variable) != placement.parse(ctx.plan.placement_after).get(ctx.plan.variable):
        raise MoveError(f"{ctx.plan.placement_file} no longer places {ctx.plan.component} at "
                        f"{ctx.plan.target_dir}; the source is not removed")


def _remove_source(plan: Plan, manifest: Manifest) -> tuple[int, list[str]]:
    """Remove the copied source entries through checked directory descriptors (the server's user can write
    in the source: a directory swapped for a link is refused, never followed); a failed removal is raised."""
    src = Path(plan.source_dir)
    if not src.is_dir():  # removed whole by an earlier, interrupted finalize
        fsync_dir(src.parent)
        return 0, []
    with Tree(src) as tree:
        removed, kept = _remove_copied(tree, manifest)
        if plan.component == "datadir":
            _remove_server_scratch(tree)
        empty = not os.listdir(tree.dir_fd())
    if empty and plan.component != "tmpdir" and not os.path.ismount(src):
        src.rmdir()  # the datadir, or an emptied component directory (e.g. a tier's redo/ left by a move)
        fsync_dir(src.parent)
    else:
        fsync_dir(src)
    return removed, kept


def _remove_server_scratch(tree: Tree) -> None:
    """What MySQL and MariaDB recreate at every start and the copy never takes: ``ibtmp1``, and MySQL's
    ``#innodb_temp/`` with its session temporary tablespaces (``temp_N.ibt``; the directory is left behind empty at
    a clean stop).  Without this the emptied datadir stays and a later move back home finds it not empty."""
    for name in os.listdir(tree.dir_fd()):
        if not components.DATADIR_SKIP.match(name):
            continue
        mode = tree.lstat(name).st_mode
        if stat.S_ISREG(mode):
            tree.remove(name)
        elif stat.S_ISDIR(mode) and name == "#innodb_temp":
            inside = os.listdir(tree.dir_fd(name))
            if all(SESSION_TEMP.match(n) and stat.S_ISREG(tree.lstat(f"{name}/{n}").st_mode) for n in inside):
                for n in inside:
                    tree.remove(f"{name}/{n}")
                tree.remove(name)


def _remove_copied(tree: Tree, manifest: Manifest) -> tuple[int, list[str]]:
    """Remove the manifest's entries unchanged since the copy: (how many, those kept)."""
    removed, kept = 0, []
    first = True
    for rec in (r for r in manifest.records.values() if r.kind != "dir"):
        try:
            st = tree.lstat(rec.rel)
        except FileNotFoundError:
            continue  # removed by an earlier, interrupted finalize
        if rec.kind == "file" and (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != (
                rec.size, rec.mtime_ns, rec.ctime_ns, rec.ino):
            kept.append(rec.rel)  # changed since the copy: not ours to delete
            continue
        tree.remove(rec.rel)
        removed += 1
        if first:
            crash_point("FINALIZE:mid")
            first = False
    for rec in sorted((r for r in manifest.records.values() if r.kind == "dir"),
                      key=lambda r: r.rel.count("/"), reverse=True):
        try:
            tree.remove(rec.rel)
            removed += 1
        except FileNotFoundError:
            continue
        except OSError:
            kept.append(rec.rel + "/")  # not empty: files the copy did not take (and does not remove)
    return removed, kept
