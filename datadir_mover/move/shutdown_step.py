"""SHUTDOWN: lower the flush settings and flush, block commits and read the sample (or checksums), copy what the
flush wrote under the block (a pre-copied move), note the commits waiting on the block, stop the server."""

from __future__ import annotations

import time
from typing import Any

from tuner.core.errors import InnotierError
from tuner.core.sandbox import SandboxState

from datadir_mover.move import flush_settings, preflush, side_files
from datadir_mover.move.journal import State, crash_point
from datadir_mover.move.precopy_steps import run_pass, save_pass
from datadir_mover.move.read_lock import LOCK_WAIT_S, ReadLock, blocking_connection
from datadir_mover.move.server_check import table_sample, waiting_commits
from datadir_mover.move.server_check.table_checksums import table_checksums
from datadir_mover.move.stepbase import MoveContext, MoveHalted, PassCache, require_stopped
from datadir_mover.move.stepdata import PrecopyData

PAGE_FILE_COMPONENTS = ("datadir", "ibdata", "undo", "doublewrite")  # components holding pages the cleaner writes
QUIESCE_FLUSH_S = 10.0  # longest flush with commits blocked before the last online pass (writes wait meanwhile)
ER_LOCK_WAIT_TIMEOUT = 1205


def step_shutdown(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> dict[str, Any]:
    state = ctx.control.state()
    data: dict[str, Any] = {"stop_began_at": time.time()}  # refined below when this step stops the server
    if state == SandboxState.CRASHED:
        raise MoveHalted(f"{ctx.control.describe()} crashed or was killed before the move stopped it; start it "
                         "(it recovers), then `innotier move rollback`")
    if state == SandboxState.RUNNING:
        if ctx.plan.no_shutdown:
            raise MoveHalted(f"{ctx.control.describe()} is still running, but this move expects it stopped "
                             f"(--no-shutdown); stop it ({ctx.plan.control['stop_hint']}) and run "
                             f"`innotier move resume --id {ctx.plan.move_id}`")
        # after the pre-copy's own pre-flush and passes, waiting here would only let the page cleaner write
        # pages the offline delta then has to copy: lower the settings again for the stop, without waiting
        saved = flush_settings.flush_saving_settings(
            ctx.plan, ctx.journal, ctx.control, ctx.echo, data,
            limit_s=0.0 if PrecopyData.of(ctx.journal).preflush else preflush.LIMIT_S)
        try:
            if ctx.plan.verify != "files":
                data["read_lock_at"] = time.time()
                _checksum_under_read_lock(ctx, lock, data)
                _last_pass_under_the_block(ctx, lock, cache, data, saved)
            crash_point("SHUTDOWN:mid")
            ctx.echo(f"stopping {ctx.control.describe()} ({ctx.plan.shutdown_mode} shutdown)")
            if lock.held:
                data.update(_commits_waiting(lock))
            data["stop_began_at"] = time.time()
            ctx.control.stop(ctx.plan.shutdown_mode)
        except BaseException:
            lock.release()
            flush_settings.put_back(ctx.plan, ctx.control, ctx.echo, saved)
            raise
        lock.release()
    data["stopped_at"] = time.time()
    require_stopped(ctx, State.SHUTDOWN)
    if ctx.journal.load_json(side_files.CHECKSUMS_BEFORE) is None and ctx.plan.verify != "files":
        data["note"] = "the server was already stopped: no table checksums from before the move"
    return data


def _commits_waiting(lock: ReadLock) -> dict[str, Any]:
    """The commits waiting on the block as the stop begins (``waiting_commits``; unknown: nothing is put down to
    them)."""
    try:
        return waiting_commits.read(lock.conn).to_journal()
    except Exception:  # noqa: BLE001 - unknown: the check after the start then treats a difference as damage
        return waiting_commits.AtStop(known=False).to_journal()


def _checksum_under_read_lock(ctx: MoveContext, lock: ReadLock, data: dict[str, Any]) -> None:
    t0 = time.monotonic()
    try:
        lock.conn, sums = _block_and_read(ctx)
    except InnotierError:
        if ctx.journal.load_json(side_files.CHECKSUMS_BEFORE) is not None:
            return  # resumed while the server was already shutting down: the saved values stand
        raise
    except Exception as exc:  # noqa: BLE001 - only the lock wait is expected here; anything else is raised
        if getattr(exc, "errno", None) != ER_LOCK_WAIT_TIMEOUT:
            raise
        data["block"] = (f"not obtained within lock_wait_timeout={LOCK_WAIT_S} s (a long statement held a "
                         "lock): plain stop, no sample before it")
        ctx.echo(data["block"])
        return
    ctx.journal.save_json(side_files.CHECKSUMS_BEFORE, sums)
    data["tables"] = len(sums)
    data["read_seconds"] = round(time.monotonic() - t0, 3)


def _block_and_read(ctx: MoveContext):
    """(connection blocking commits, checksums or sample digests); the block waits at most ``LOCK_WAIT_S``."""
    conn = blocking_connection(ctx.plan.connection_spec())
    try:
        sums = table_checksums(conn) if ctx.plan.verify == "tables" else table_sample.take(conn).digests
    except BaseException:
        conn.close()
        raise
    return conn, sums


def _last_pass_under_the_block(ctx: MoveContext, lock: ReadLock, cache: PassCache, data: dict[str, Any],
                               saved: dict[str, str] | None) -> None:
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
        return
    if ctx.plan.component not in PAGE_FILE_COMPONENTS:
        # the dirty pages are not in the moved files: the offline delta has nothing of theirs to read, so
        # blocking writes longer buys almost no shorter stop (docs/relocation.md)
        return
    t0 = time.monotonic()
    left = ctx.max_write_block_s - (time.time() - data.get("read_lock_at", time.time()))
    flushed: dict[str, Any] = {}
    if left > 0:
        flush_settings.flush_saving_settings(ctx.plan, ctx.journal, ctx.control, ctx.echo, flushed,
                                             min(QUIESCE_FLUSH_S, left / 2))
    else:
        flushed["preflush"] = {"skipped": f"the sample under the block used the --max-write-block of "
                                          f"{ctx.max_write_block_s:g} s"}
    passes = PrecopyData.of(ctx.journal).passes
    expected = passes[-1]["seconds"] if passes else float("inf")
    left = ctx.max_write_block_s - (time.time() - data.get("read_lock_at", time.time()))
    if "skipped" not in flushed["preflush"] and expected > left:
        flushed["preflush"] = {**flushed["preflush"], "skipped": f"a pass takes about {expected:.1f} s, more than "
                               f"the {max(left, 0):.1f} s left of the --max-write-block"}
    if "skipped" in flushed["preflush"]:  # only time is at stake: the shutdown flushes what is left
        data["last_pass"] = flushed["preflush"]
    else:
        cache.precopy, st = run_pass(ctx, len(passes) + 1, cache.precopy, int(ctx.plan.server["page_size"]))
        save_pass(ctx.journal, cache.precopy)
        data["last_pass"] = {"flush": flushed["preflush"], "pass": st,
                             "seconds": round(time.monotonic() - t0, 3)}
    data["flush_settings_restored"] = flush_settings.put_back(ctx.plan, ctx.control, ctx.echo, saved)
