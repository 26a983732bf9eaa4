"""The offline steps, the server stopped: COPY (the delta, or everything), VERIFY (read back), SWITCH (placement)."""

from __future__ import annotations

import stat
import time
from pathlib import Path

from tuner.core.durable import fsync_dir, write_atomic
from tuner.core.errors import MoveError

from datadir_mover import apparmor, unit_sandbox
from datadir_mover.move import components, good_copy, side_files, source_fingerprint, trees
from datadir_mover.move import proof as proofmod
from datadir_mover.move.copy import Manifest, copy_tree, recheck_sources, verify_tree
from datadir_mover.move.journal import State, crash_point
from datadir_mover.move.precopy_steps import saved_pass
from datadir_mover.move.read_lock import ReadLock
from datadir_mover.move.step_records import CopyRecord, SwitchRecord, VerifyRecord
from datadir_mover.move.stepbase import MoveContext, MoveHalted, PassCache, after_first, require_stopped


def step_copy(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> CopyRecord:
    require_stopped(ctx, State.COPY)
    trees.ensure_target(ctx.plan)
    if not components.get(ctx.plan.component).copies_files:
        ctx.journal.save_json(side_files.COPY_MANIFEST, Manifest(ctx.plan.source_dir, ctx.plan.target_dir).to_dict())
        return CopyRecord(files=0, bytes=0)
    prev = None
    if ctx.plan.precopy:  # the last pass's block digests: in memory, or as journaled after a restart
        prev = cache.precopy or saved_pass(ctx.journal)
    entries = trees.source_entries(ctx.plan)
    total = sum(st.st_size for _, st in entries if stat.S_ISREG(st.st_mode))
    advance = ctx.progress("copy (server stopped)", total)
    read = [0]

    def progress(n: int) -> None:
        read[0] += n
        advance(n)

    manifest, st = copy_tree(ctx.plan.source_dir, ctx.plan.target_dir, entries, previous=prev,
                             progress=progress,
                             after_file=after_first(State.COPY), verify=True,
                             page_size=int(ctx.plan.server["page_size"]), stable=True,
                             owned=trees.moved_in_target(ctx.plan), follow_target_root=False)
    ctx.journal.save_json(side_files.COPY_MANIFEST, manifest.to_dict())
    cache.copied = manifest
    return CopyRecord(files=st.files_copied, bytes=st.bytes_copied, files_delta=st.files_delta,
                      bytes_read=read[0] - st.bytes_skipped, files_unchanged_since_precopy=st.files_skipped,
                      bytes_unchanged_since_precopy=st.bytes_skipped, seconds=round(st.seconds, 3))


def step_verify(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> VerifyRecord:
    require_stopped(ctx, State.VERIFY)
    manifest = Manifest.from_dict(ctx.journal.load_json(side_files.COPY_MANIFEST))
    changed = recheck_sources(manifest)
    if changed:
        raise MoveError(f"{len(changed)} source files changed while the server was stopped "
                        f"({', '.join(changed[:3])}); something else writes to {ctx.plan.source_dir}")
    t0 = time.monotonic()
    verify_tree(manifest, follow_target_root=False)
    ctx.journal.save_json(side_files.COPY_MANIFEST, manifest.to_dict())
    if cache.copied is not None:  # the block digests the copy verified (memory only: a restart reads the target)
        manifest.blocks = cache.copied.blocks
    proof = proofmod.record_at_switch(ctx.journal, ctx.plan, manifest)
    source_fingerprint.record(ctx.journal, ctx.plan)
    cache.verified_here = True  # until START, this process can vouch for what it read back
    return VerifyRecord(files=sum(1 for r in manifest.records.values() if r.kind == "file"),
                        seconds=round(time.monotonic() - t0, 3), proof=proof.status)


def step_switch(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> SwitchRecord:
    require_stopped(ctx, State.SWITCH)
    good_copy.for_resume(ctx.journal, ctx.plan, ctx.echo)
    if components.get(ctx.plan.component).copies_files and not Path(ctx.plan.target_dir).is_dir():
        raise MoveHalted(f"the target {ctx.plan.target_dir} vanished after the copy was verified (a tier that "
                         "did not come back?); nothing was switched: bring it back and run `innotier move resume "
                         f"--id {ctx.plan.move_id}`, or go back with `innotier move rollback --id "
                         f"{ctx.plan.move_id}`")
    trees.ensure_target(ctx.plan)  # a tmpdir move copies nothing: its directory is simply made again
    if ctx.plan.placement_after is not None:
        write_atomic(ctx.plan.placement_file, ctx.plan.placement_after, mode=0o644)
    elif Path(ctx.plan.placement_file).exists():   # a move back home: the drop-in held only its placements
        Path(ctx.plan.placement_file).unlink()
        fsync_dir(Path(ctx.plan.placement_file).parent)
    crash_point("SWITCH:mid")
    if ctx.plan.component == "datadir" and ctx.plan.control["kind"] == "sandbox":
        sb = ctx.control.sandbox()
        sb.datadir = ctx.plan.target_dir  # the sandbox record follows, so start() and destroy() see it
        sb.save()
        sb.write_cnf()
    apparmor.apply(ctx.plan.apparmor_change())
    unit_sandbox.apply(ctx.plan.unit_change())
    return SwitchRecord(placement_file=ctx.plan.placement_file, unit_dropin=ctx.plan.unit_change().dropin_path)
