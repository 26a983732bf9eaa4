"""PRECOPY: online passes while the server serves, the pre-flush between them; a pass is saved as it ends (the pass
and its saving are also SHUTDOWN's last pass under the block and COPY's starting point)."""

from __future__ import annotations

import stat
import time
from typing import Any

from tuner.core.errors import InnotierError
from tuner.core.sandbox import SandboxState
from tuner.core.server import fetch_status
from tuner.core.units import human_size

from datadir_mover.move import flush_settings, side_files, trees
from datadir_mover.move.copy import Manifest, copy_tree
from datadir_mover.move.journal import Journal, State, crash_point
from datadir_mover.move.plan import TYPICAL_START_S, Plan
from datadir_mover.move.read_lock import ReadLock
from datadir_mover.move.step_records import PassRecord, PrecopyRecord
from datadir_mover.move.stepbase import MoveContext, PassCache, after_first

PRECOPY_MAX_PASSES = 5
PRECOPY_ENOUGH_S = 1.0  # a pass this short leaves little for the offline delta: stop iterating
PRECOPY_SHRINK = 0.8  # a pass must take at most this share of the one before, or iterating gains nothing


def _converged(passes: list[PassRecord]) -> bool:
    """Passes of one regime (before or after the pre-flush) gain nothing more: the last was short, or not shorter
    than ``PRECOPY_SHRINK`` of the one before it, or there were ``PRECOPY_MAX_PASSES``.  The first pass of a regime
    always runs (before the pre-flush it copies everything; after it, what the flush wrote)."""
    if not passes:
        return False
    if len(passes) >= PRECOPY_MAX_PASSES or passes[-1].seconds < PRECOPY_ENOUGH_S:
        return True
    return len(passes) >= 2 and passes[-1].seconds > PRECOPY_SHRINK * passes[-2].seconds


def step_precopy(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> PrecopyRecord:
    """Online passes until the delta stops shrinking, then a pre-flush and passes again until the delta
    stops shrinking: the first pass copies everything, each next one what changed.

    A pass re-reads the files whose size/mtime/ctime changed, and of a tablespace only the
    64 KiB blocks with a page at or above the LSN floor of the pass that last read them
    (copy.stale_pages; onto memory or DAX only those pages); it rewrites only the blocks
    whose digest changed.  Passes stop (``_converged``) when one takes less than
    ``PRECOPY_ENOUGH_S`` or is not ``PRECOPY_SHRINK`` faster than the one before (the write
    rate keeps the delta where it is), or after ``PRECOPY_MAX_PASSES``.  Then the dirty pages
    are flushed while the server serves (``preflush``; the settings stay lowered until the
    stop) and passes copy what that flush wrote, and what the server writes meanwhile, until
    they converge again (at most ``PRECOPY_MAX_PASSES`` more), so neither the shutdown nor
    the offline delta has much left.
    """
    trees.ensure_target(ctx.plan)
    passes: list[PassRecord] = []
    manifest: Manifest | None = None
    page_size = int(ctx.plan.server["page_size"])
    flushed: dict[str, Any] = {}
    regime = 0  # index in ``passes`` of the first pass of this regime (before the pre-flush, then after it)
    for n in range(1, 2 * PRECOPY_MAX_PASSES + 1):
        if _converged(passes[regime:]):
            if regime or ctx.plan.no_shutdown or ctx.control.state() != SandboxState.RUNNING:
                break
            flush_settings.flush_saving_settings(ctx.plan, ctx.journal, ctx.control, ctx.echo, flushed)
            # then passes copy what the flush wrote
            regime = len(passes)
        manifest, st = run_pass(ctx, n, manifest, page_size)
        passes.append(st)
        crash_point("PRECOPY:pass")  # every file is in the target, no pass is journaled yet
    cache.precopy = manifest
    save_pass(ctx.journal, manifest)
    if "preflush" in flushed:  # the passes are over: the server gets its own flush settings back at once
        flushed["preflush"]["settings_restored"] = flush_settings.put_back(
            ctx.plan, ctx.control, ctx.echo, flush_settings.saved(ctx.journal))
    final = passes[-1]
    rate = ctx.plan.estimates.get("copy_rate_bytes_per_s") or 100e6
    # the offline delta rewrites about what the last online pass rewrote (the blocks written during one
    # pass), at the copy rate, plus the changed files' page headers and the redo written since the pass
    expected_copy = final.bytes_written / rate + ctx.plan.estimates.get("copy_delta_s", 0.0)
    expected = (ctx.plan.estimates.get("shutdown_s", 1.0) + expected_copy
                + ctx.plan.estimates.get("start_s", TYPICAL_START_S))
    ctx.echo(f"pre-copy done in {len(passes)} passes; expected downtime {expected:.1f} s")
    return PrecopyRecord(passes=tuple(passes), files=passes[0].files_changed, bytes=passes[0].bytes_written,
                         seconds=round(sum(p.seconds for p in passes), 3), preflush=flushed.get("preflush"),
                         expected_copy_s=round(expected_copy, 1), expected_downtime_s=round(expected, 1))


def run_pass(ctx: MoveContext, n: int, manifest: Manifest | None, page_size: int) -> tuple[Manifest, PassRecord]:
    entries = trees.source_entries(ctx.plan)
    total = sum(st.st_size for _, st in entries if stat.S_ISREG(st.st_mode))
    what = "pre-copy (server running)" if n == 1 else f"pre-copy pass {n}: changed blocks"
    began = time.time()
    floor, log_floor, log_now = _lsns(ctx.plan)  # before the pass reads anything (copy.stale_pages)
    manifest, st = copy_tree(ctx.plan.source_dir, ctx.plan.target_dir, entries, previous=manifest,
                             progress=ctx.progress(what, total),
                             after_file=after_first(State.PRECOPY) if n == 1 else None, verify=True,
                             lsn_floor=floor, log_floor=log_floor, log_now=log_now, page_size=page_size,
                             owned=trees.moved_in_target(ctx.plan), follow_target_root=False)
    ctx.echo(f"pre-copy pass {n}: {st.files_copied} files changed, {human_size(st.bytes_copied)} written "
             f"in {st.seconds:.1f} s")
    return manifest, PassRecord(number=n, began_at=began, seconds=round(st.seconds, 3),
                                files_changed=st.files_copied, files_delta=st.files_delta,
                                bytes_written=st.bytes_copied, files_unchanged=st.files_skipped)


def save_pass(journal: Journal, manifest: Manifest) -> None:
    """Journal a pass: its manifest and block digests, so a restarted mover's delta rewrites changed blocks only."""
    journal.save_json(side_files.PRECOPY_MANIFEST, manifest.to_dict())
    journal.save_json(side_files.PRECOPY_BLOCKS, {rel: b.hex() for rel, b in manifest.blocks.items()})


def saved_pass(journal: Journal) -> Manifest | None:
    saved = journal.load_json(side_files.PRECOPY_MANIFEST)
    if saved is None:
        return None
    manifest = Manifest.from_dict(saved)
    manifest.blocks = {rel: bytes.fromhex(h) for rel, h in (journal.load_json(side_files.PRECOPY_BLOCKS)
                                                            or {}).items()}
    return manifest


def _lsns(plan: Plan) -> tuple[int, int, int]:
    """(last checkpoint, flushed, current) LSN of the server (MariaDB's Innodb_lsn_*; 0 where it has none)."""
    try:
        conn = plan.connection_spec().with_database(None).connect()
        try:
            status = fetch_status(conn)
        finally:
            conn.close()
        return (int(status.get("Innodb_lsn_last_checkpoint", 0) or 0),
                int(status.get("Innodb_lsn_flushed", 0) or 0), int(status.get("Innodb_lsn_current", 0) or 0))
    except (InnotierError, ValueError):
        return 0, 0, 0
