"""SHUTDOWN: lower the flush settings and flush, block commits and read the sample (or checksums), copy what the
flush wrote under the block (a pre-copied move), note the commits waiting on the block, stop the server."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from tuner.core.errors import InnotierError
from tuner.core.sandbox import SandboxState

from datadir_mover.move import flush_settings, preflush, side_files
from datadir_mover.move.journal import State, crash_point
from datadir_mover.move.precopy_steps import run_pass, save_pass
from datadir_mover.move.read_lock import LOCK_WAIT_S, ReadLock, blocking_connection
from datadir_mover.move.server_check import table_sample, waiting_commits
from datadir_mover.move.server_check.table_checksums import table_checksums
from datadir_mover.move.step_records import LastPass, PrecopyRecord, ShutdownRecord
from datadir_mover.move.stepbase import MoveContext, MoveHalted, PassCache, require_stopped

PAGE_FILE_COMPONENTS = ("datadir", "ibdata", "undo", "doublewrite")  # components holding pages the cleaner writes
QUIESCE_FLUSH_S = 10.0  # longest flush with commits blocked before the last online pass (writes wait meanwhile)
ER_LOCK_WAIT_TIMEOUT = 1205


def step_shutdown(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> ShutdownRecord:
    state = ctx.control.state()
    record = ShutdownRecord(stop_began_at=time.time())  # refined below when this step stops the server
    if state == SandboxState.CRASHED:
        raise MoveHalted(f"{ctx.control.describe()} crashed or was killed before the move stopped it; start it "
                         "(it recovers), then `innotier move rollback`")
    if state == SandboxState.RUNNING:
        if ctx.plan.no_shutdown:
            raise MoveHalted(f"{ctx.control.describe()} is still running, but this move expects it stopped "
                             f"(--no-shutdown); stop it ({ctx.plan.control['stop_hint']}) and run "
                             f"`innotier move resume --id {ctx.plan.move_id}`")
        record = _stop(ctx, lock, cache, record)
    record = replace(record, stopped_at=time.time())
    require_stopped(ctx, State.SHUTDOWN)
    if ctx.journal.load_json(side_files.CHECKSUMS_BEFORE) is None and ctx.plan.verify != "files":
        record = replace(record, note="the server was already stopped: no table checksums from before the move")
    return record


def _stop(ctx: MoveContext, lock: ReadLock, cache: PassCache, record: ShutdownRecord) -> ShutdownRecord:
    """Flush, block commits and read the sample (and copy under the block), stop the running server."""
    # after the pre-copy's own pre-flush and passes, waiting here would only let the page cleaner write
    # pages the offline delta then has to copy: lower the settings again for the stop, without waiting
    flushed: dict[str, Any] = {}
    saved = flush_settings.flush_saving_settings(
        ctx.plan, ctx.journal, ctx.control, ctx.echo, flushed,
        limit_s=0.0 if PrecopyRecord.of(ctx.journal).preflush else preflush.LIMIT_S)
    record = replace(record, preflush=flushed.get("preflush"))
    try:
        if ctx.plan.verify != "files":
            record = _checksum_under_read_lock(ctx, lock, replace(record, read_lock_at=time.time()))
            record = _last_pass_under_the_block(ctx, lock, cache, record, saved)
        crash_point("SHUTDOWN:mid")
        ctx.echo(f"stopping {ctx.control.describe()} ({ctx.plan.shutdown_mode} shutdown)")
        if lock.held:
            record = replace(record, waiting_at_stop=_commits_waiting(lock))
        record = replace(record, stop_began_at=time.time())
        ctx.control.stop(ctx.plan.shutdown_mode)
    except BaseException:
        lock.release()
        flush_settings.put_back(ctx.plan, ctx.control, ctx.echo, saved)
        raise
    lock.release()
    return record


def _commits_waiting(lock: ReadLock) -> waiting_commits.AtStop:
    """The commits waiting on the block as the stop begins (``waiting_commits``; unknown: nothing is put down to
    them)."""
    try:
        return waiting_commits.read(lock.conn)
    except Exception:  # noqa: BLE001 - unknown: the check after the start then treats a difference as damage
        return waiting_commits.AtStop(known=False)


def _checksum_under_read_lock(ctx: MoveContext, lock: ReadLock, record: ShutdownRecord) -> ShutdownRecord:
    t0 = time.monotonic()
    try:
        lock.conn, sums = _block_and_read(ctx)
    except InnotierError:
        if ctx.journal.load_json(side_files.CHECKSUMS_BEFORE) is not None:
            return record  # resumed while the server was already shutting down: the saved values stand
        raise
    except Exception as exc:  # noqa: BLE001 - only the lock wait is expected here; anything else is raised
        if getattr(exc, "errno", None) != ER_LOCK_WAIT_TIMEOUT:
            raise
        block = (f"not obtained within lock_wait_timeout={LOCK_WAIT_S} s (a long statement held a "
                 "lock): plain stop, no sample before it")
        ctx.echo(block)
        return replace(record, block=block)
    ctx.journal.save_json(side_files.CHECKSUMS_BEFORE, sums)
    return replace(record, tables=len(sums), read_seconds=round(time.monotonic() - t0, 3))


def _block_and_read(ctx: MoveContext):
    """(connection blocking commits, checksums or sample digests); the block waits at most ``LOCK_WAIT_S``."""
    conn = blocking_connection(ctx.plan.connection_spec())
    try:
        sums = table_checksums(conn) if ctx.plan.verify == "tables" else table_sample.take(conn).digests
    except BaseException:
        conn.close()
        raise
    return conn, sums


def _last_pass_under_the_block(ctx: MoveContext, lock: ReadLock, cache: PassCache, record: ShutdownRecord,
                               saved: dict[str, str] | None) -> ShutdownRecord:
    """Pre-copied move, commits already blocked for the sample: flush the dirty pages and copy them while reads
    are still served, so the shutdown has nearly nothing to write and the offline delta nearly nothing to read.

    With commits blocked the clients stop dirtying pages (each holds at most one transaction waiting at its
    commit), so the flush (``preflush``) empties the pool's dirty list and one more online pass copies what
    it wrote; writes stay blocked that much longer while the server stays up (docs/relocation.md, "The last
    pass under the block", has the measurements behind this trade).  The whole block before the stop is
    bounded by ``max_write_block_s``: the flush gets what is left of it, and the pass runs only when the
    last online pass took no longer than what then remains; otherwise the plain stop follows.  The pass is
    saved (manifest and block digests) so a restarted mover's offline delta still rewrites only changed
    blocks, and the flush settings are put back as soon as it is done.  Skipped without a pre-copy in
    memory (a resumed move), when the flush cannot run, and for components without page files
    (``PAGE_FILE_COMPONENTS``).
    """
    if not ctx.plan.precopy or cache.precopy is None or not lock.held:
        return record
    if ctx.plan.component not in PAGE_FILE_COMPONENTS:
        # the dirty pages are not in the moved files: the offline delta has nothing of theirs to read, so
        # blocking writes longer buys almost no shorter stop (docs/relocation.md)
        return record
    t0 = time.monotonic()
    passes = PrecopyRecord.of(ctx.journal).passes
    flushed = _flush_within_the_block(ctx, record.read_lock_at, passes[-1].seconds if passes else float("inf"))
    flush = {k: v for k, v in flushed.items() if k != "skipped"}
    if "skipped" in flushed:  # only time is at stake: the shutdown flushes what is left
        last = LastPass(flush, None, skipped=flushed["skipped"])
    else:
        cache.precopy, st = run_pass(ctx, len(passes) + 1, cache.precopy, int(ctx.plan.server["page_size"]))
        save_pass(ctx.journal, cache.precopy)
        last = LastPass(flush, None, pass_record=st, seconds=round(time.monotonic() - t0, 3))
    restored = flush_settings.put_back(ctx.plan, ctx.control, ctx.echo, saved)
    return replace(record, last_pass=replace(last, flush_settings_restored=restored))


def _flush_within_the_block(ctx: MoveContext, read_lock_at: float, pass_seconds: float) -> dict[str, Any]:
    """The flush in what the --max-write-block leaves of the block: preflush's record, with ``skipped`` (why)
    when no pass is to follow (the block used up, or a pass, about as long as the last online one, would not
    fit in what is left after the flush)."""
    left = ctx.max_write_block_s - (time.time() - read_lock_at)
    if left <= 0:
        return {"skipped": f"the sample under the block used the --max-write-block of {ctx.max_write_block_s:g} s"}
    flushed: dict[str, Any] = {}
    flush_settings.flush_saving_settings(ctx.plan, ctx.journal, ctx.control, ctx.echo, flushed,
                                         min(QUIESCE_FLUSH_S, left / 2))
    left = ctx.max_write_block_s - (time.time() - read_lock_at)
    if "skipped" not in flushed["preflush"] and pass_seconds > left:
        return {**flushed["preflush"], "skipped": f"a pass takes about {pass_seconds:.1f} s, more than the "
                                                  f"{max(left, 0):.1f} s left of the --max-write-block"}
    return flushed["preflush"]
