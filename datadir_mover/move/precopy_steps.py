"""The pre-copy: online passes while the server serves, the pre-flush, and the last pass under the commit block."""

from __future__ import annotations

import stat
import time
from typing import Any

from tuner.core.sandbox import SandboxState
from tuner.core.units import human_size

from datadir_mover.move import preflush, side_files
from datadir_mover.move.copy import Manifest, copy_tree
from datadir_mover.move.journal import State, crash_point
from datadir_mover.move.plan import TYPICAL_START_S
from datadir_mover.move.stepdata import PrecopyData

PRECOPY_MAX_PASSES = 5
PRECOPY_ENOUGH_S = 1.0  # a pass this short leaves little for the offline delta: stop iterating
PRECOPY_SHRINK = 0.8  # a pass must take at most this share of the one before, or iterating gains nothing
PAGE_FILE_COMPONENTS = ("datadir", "ibdata", "undo", "doublewrite")  # components holding pages the cleaner writes
QUIESCE_FLUSH_S = 10.0  # longest flush with commits blocked before the last online pass (writes wait meanwhile)


def _converged(passes: list[dict[str, Any]]) -> bool:
    """Passes of one regime (before or after the pre-flush) gain nothing more: the last was short, or not shorter
    than ``PRECOPY_SHRINK`` of the one before it, or there were ``PRECOPY_MAX_PASSES``.  The first pass of a regime
    always runs (before the pre-flush it copies everything; after it, what the flush wrote)."""
    if not passes:
        return False
    if len(passes) >= PRECOPY_MAX_PASSES or passes[-1]["seconds"] < PRECOPY_ENOUGH_S:
        return True
    return len(passes) >= 2 and passes[-1]["seconds"] > PRECOPY_SHRINK * passes[-2]["seconds"]


class PrecopySteps:
    """PRECOPY, and the parts of SHUTDOWN that copy while the server still runs (mixed into ``Executor``)."""

    def _do_precopy(self) -> dict[str, Any]:
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
        self._ensure_target()
        passes: list[dict[str, Any]] = []
        manifest: Manifest | None = None
        page_size = int(self.plan.server["page_size"])
        flushed: dict[str, Any] = {}
        regime = 0  # index in ``passes`` of the first pass of this regime (before the pre-flush, then after it)
        for n in range(1, 2 * PRECOPY_MAX_PASSES + 1):
            if _converged(passes[regime:]):
                if regime or self.plan.no_shutdown or self.control.state() != SandboxState.RUNNING:
                    break
                self._preflush(flushed)  # then passes copy what the flush wrote
                regime = len(passes)
            manifest, st = self._precopy_pass(n, manifest, page_size)
            passes.append(st)
            crash_point("PRECOPY:pass")  # every file is in the target, no pass is journaled yet
        self._precopy = manifest
        self._save_precopy(manifest)
        if "preflush" in flushed:  # the passes are over: the server gets its own flush settings back at once
            flushed["preflush"]["settings_restored"] = self._restore_flush_settings(
                self.journal.load_json(side_files.FLUSH_SETTINGS))
        final = passes[-1]
        rate = self.plan.estimates.get("copy_rate_bytes_per_s") or 100e6
        # the offline delta rewrites about what the last online pass rewrote (the blocks written during one
        # pass), at the copy rate, plus the changed files' page headers and the redo written since the pass
        expected_copy = final["bytes_written"] / rate + self.plan.estimates.get("copy_delta_s", 0.0)
        expected = (self.plan.estimates.get("shutdown_s", 1.0) + expected_copy
                    + self.plan.estimates.get("start_s", TYPICAL_START_S))
        self.echo(f"pre-copy done in {len(passes)} passes; expected downtime {expected:.1f} s")
        return {"passes": passes, "files": passes[0]["files_changed"], "bytes": passes[0]["bytes_written"],
                "seconds": round(sum(p["seconds"] for p in passes), 3), "preflush": flushed.get("preflush"),
                "expected_copy_s": round(expected_copy, 1), "expected_downtime_s": round(expected, 1)}

    def _precopy_pass(self, n: int, manifest: Manifest | None, page_size: int) -> tuple[Manifest, dict[str, Any]]:
        entries = self._entries()
        total = sum(st.st_size for _, st in entries if stat.S_ISREG(st.st_mode))
        what = "pre-copy (server running)" if n == 1 else f"pre-copy pass {n}: changed blocks"
        began = time.time()
        floor, log_floor, log_now = self._lsns()  # before the pass reads anything (copy.stale_pages)
        manifest, st = copy_tree(self.plan.source_dir, self.plan.target_dir, entries, previous=manifest,
                                 progress=self.progress(what, total),
                                 after_file=self._mid(State.PRECOPY) if n == 1 else None, verify=True,
                                 lsn_floor=floor, log_floor=log_floor, log_now=log_now, page_size=page_size,
                                 owned=self._moved_in_target())
        self.echo(f"pre-copy pass {n}: {st.files_copied} files changed, {human_size(st.bytes_copied)} written "
                  f"in {st.seconds:.1f} s")
        return manifest, {"pass": n, "began_at": began, "seconds": round(st.seconds, 3),
                          "files_changed": st.files_copied, "files_delta": st.files_delta,
                          "bytes_written": st.bytes_copied, "files_unchanged": st.files_skipped}

    def _last_pass_under_the_block(self, data: dict[str, Any], saved: dict[str, str] | None) -> None:
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
        if not self.plan.precopy or self._precopy is None or self._lock_conn is None:
            return
        if self.plan.component not in PAGE_FILE_COMPONENTS:
            # the dirty pages are not in the moved files: the offline delta has nothing of theirs to read, so
            # blocking writes longer buys almost no shorter stop (docs/relocation.md)
            return
        t0 = time.monotonic()
        left = self.max_write_block_s - (time.time() - data.get("read_lock_at", time.time()))
        flushed: dict[str, Any] = {}
        if left > 0:
            self._preflush(flushed, min(QUIESCE_FLUSH_S, left / 2))
        else:
            flushed["preflush"] = {"skipped": f"the sample under the block used the --max-write-block of "
                                              f"{self.max_write_block_s:g} s"}
        passes = PrecopyData.of(self.journal).passes
        expected = passes[-1]["seconds"] if passes else float("inf")
        left = self.max_write_block_s - (time.time() - data.get("read_lock_at", time.time()))
        if "skipped" not in flushed["preflush"] and expected > left:
            flushed["preflush"] = {**flushed["preflush"], "skipped": f"a pass takes about {expected:.1f} s, more than "
                                   f"the {max(left, 0):.1f} s left of the --max-write-block"}
        if "skipped" in flushed["preflush"]:  # only time is at stake: the shutdown flushes what is left
            data["last_pass"] = flushed["preflush"]
        else:
            self._precopy, st = self._precopy_pass(len(passes) + 1, self._precopy, int(self.plan.server["page_size"]))
            self._save_precopy(self._precopy)
            data["last_pass"] = {"flush": flushed["preflush"], "pass": st,
                                 "seconds": round(time.monotonic() - t0, 3)}
        data["flush_settings_restored"] = self._restore_flush_settings(saved)

    def _save_precopy(self, manifest: Manifest) -> None:
        """Journal a pass: its manifest and block digests, so a restarted mover's delta rewrites changed blocks only."""
        self.journal.save_json(side_files.PRECOPY_MANIFEST, manifest.to_dict())
        self.journal.save_json(side_files.PRECOPY_BLOCKS, {rel: b.hex() for rel, b in manifest.blocks.items()})

    def _saved_precopy(self) -> Manifest | None:
        saved = self.journal.load_json(side_files.PRECOPY_MANIFEST)
        if saved is None:
            return None
        manifest = Manifest.from_dict(saved)
        manifest.blocks = {rel: bytes.fromhex(h) for rel, h in (self.journal.load_json(side_files.PRECOPY_BLOCKS)
                                                                 or {}).items()}
        return manifest

    def _preflush(self, data: dict[str, Any], limit_s: float = preflush.LIMIT_S) -> dict[str, str] | None:
        """Flush dirty pages at full speed while the server serves (``preflush``); the settings to restore.

        The original settings are saved in the journal directory before they change, so a
        resumed SHUTDOWN (or a rollback) restores those and not this step's own.
        """
        spec = self.plan.connection_spec()
        saved = self.journal.load_json(side_files.FLUSH_SETTINGS)
        try:
            if saved is None:
                conn = spec.with_database(None).connect(connection_timeout=5)
                try:
                    saved = preflush.read_settings(conn)
                finally:
                    conn.close()
                self.journal.save_json(side_files.FLUSH_SETTINGS, saved)
            result = preflush.flush(spec, int(self.plan.server["page_size"]), limit_s, echo=self.echo)
        except Exception as exc:  # noqa: BLE001 - the flush only saves shutdown time: without it the stop flushes
            data["preflush"] = {"skipped": str(exc)}
            if saved is not None:
                self._restore_flush_settings(saved)
            return saved
        data["preflush"] = result.to_dict()
        return saved

    def _restore_flush_settings(self, saved: dict[str, str] | None) -> bool | None:
        """Put the flush settings back (None: nothing to restore); a failure is said, not swallowed."""
        if saved is None:
            return None
        ok = preflush.restore(self.plan.connection_spec(), saved)
        if not ok and self.control.state() == SandboxState.RUNNING:
            self.echo(f"could not put the flush settings back on {self.control.describe()}; set them by hand: "
                      + ", ".join(f"SET GLOBAL {k} = {v}" for k, v in saved.items()))
        return ok

