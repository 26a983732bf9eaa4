"""Carry out a plan under the journal: apply, resume, rollback, finalize.

Every state's work is idempotent (see ``journal.py`` for the contract), so ``resume``
simply runs the first state that is not ``done``.  A failure inside a step rolls the
move back automatically (server back on the old location, verified); a crash (SIGKILL,
power cut) leaves the journal for ``innotier move resume`` or ``innotier move rollback``.
A step that finds the world in a state it must not touch (the server running during an
offline step) halts without rolling back: the operator decides.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any, Callable

from tuner.core.durable import fsync_dir, write_atomic
from tuner.core.errors import InnotierError, MoveError
from tuner.core.server import ServerModel, fetch_status, inspect, model_from_variables
from tuner.core.units import human_size

from datadir_mover import apparmor
from datadir_mover.move import atstop, components, placement, preflush, verify
from datadir_mover.move.benign import Evidence
from datadir_mover.move.copy import Manifest, copy_tree, recheck_sources, verify_tree, walk
from datadir_mover.move.journal import STATES, Journal, all_journals, crash_point, moves_dir
from datadir_mover.move.plan import TYPICAL_START_S, Plan
from tuner.core.sandbox import on_destroy, port_in_use

PRECOPY_MAX_PASSES = 5
PRECOPY_ENOUGH_S = 1.0  # a pass this short leaves little for the offline delta: stop iterating
PRECOPY_SHRINK = 0.8  # a pass must take at most this share of the one before, or iterating gains nothing
PAGE_FILE_COMPONENTS = ("datadir", "ibdata", "undo", "doublewrite")  # components holding pages the cleaner writes
QUIESCE_FLUSH_S = 10.0  # longest flush with commits blocked before the last online pass (writes wait meanwhile)

Echo = Callable[[str], None]
ProgressFactory = Callable[[str, int], Callable[[int], None]]  # (description, total bytes) -> advance(n)


class MoveHalted(MoveError):
    """The move stopped where it is, on purpose; the journal is kept for resume or rollback."""


def _quiet(_: str) -> None:
    pass


def _converged(passes: list[dict[str, Any]]) -> bool:
    """Passes of one regime (before or after the pre-flush) gain nothing more: the last was short, or not shorter
    than ``PRECOPY_SHRINK`` of the one before it, or there were ``PRECOPY_MAX_PASSES``.  The first pass of a regime
    always runs (before the pre-flush it copies everything; after it, what the flush wrote)."""
    if not passes:
        return False
    if len(passes) >= PRECOPY_MAX_PASSES or passes[-1]["seconds"] < PRECOPY_ENOUGH_S:
        return True
    return len(passes) >= 2 and passes[-1]["seconds"] > PRECOPY_SHRINK * passes[-2]["seconds"]


def _no_progress(_: str, __: int) -> Callable[[int], None]:
    return lambda n: None


def model_stub(plan: Plan) -> ServerModel:
    """Enough of the server model to name a component's files without connecting (rollback, finalize)."""
    s = plan.server
    return model_from_variables({"version": s["version"], "version_comment": s["flavor"],
                                 "datadir": s["datadir"], "innodb_page_size": s["page_size"],
                                 "innodb_data_file_path": s.get("data_file_path", "ibdata1:12M:autoextend"),
                                 "innodb_undo_tablespaces": s.get("undo_tablespaces", "")})


class Executor:
    def __init__(self, plan: Plan, journal: Journal, echo: Echo = _quiet, progress: ProgressFactory = _no_progress,
                 on_state: Callable[[str], None] | None = None):
        self.on_state = on_state or (lambda state: None)  # observers (progress displays, benchmarks)
        self.plan = plan
        self.journal = journal
        self.echo = echo
        self.progress = progress
        self.control = plan.control_obj()
        self._lock_conn = None
        self._precopy: Manifest | None = None  # the last pre-copy pass, with its block digests (memory only)

    # ------------------------------------------------------------------ apply / resume

    @classmethod
    def create(cls, plan: Plan, echo: Echo = _quiet, progress: ProgressFactory = _no_progress) -> "Executor":
        journal = Journal.create(moves_dir() / plan.move_id, plan.to_dict())
        return cls(plan, journal, echo, progress)

    @classmethod
    def open(cls, journal: Journal, echo: Echo = _quiet, progress: ProgressFactory = _no_progress) -> "Executor":
        return cls(Plan.from_dict(journal.plan()), journal, echo, progress)

    def run(self) -> dict[str, Any]:
        """Run (or resume) the move until COMMIT; return the summary."""
        if self.journal.phase != "open":
            raise MoveError(f"move {self.plan.move_id} is {self.journal.phase.replace('_', ' ')}; nothing to resume")
        if self.journal.last() and self.journal.last().state == "ROLLBACK":
            raise MoveError(f"move {self.plan.move_id} was being rolled back; finish it with `innotier move rollback`")
        self.journal.lock()
        try:
            while (state := self.journal.next_state()) is not None:
                if state == "PRECOPY" and not self.plan.precopy:
                    self.journal.begin(state, skipped=True)
                    self.journal.finish(state, skipped=True)
                    continue
                self._run_state(state)
            return self.summary()
        finally:
            self._release_read_lock()
            self.journal.unlock()

    def _run_state(self, state: str) -> None:
        handler = getattr(self, f"_do_{state.lower()}")
        self.echo(f"{state.lower().replace('_', ' ')}...")
        self.on_state(state)
        self.journal.begin(state)
        try:
            data = handler() or {}
        except MoveHalted:
            self._release_read_lock()
            raise
        except (InnotierError, OSError) as exc:
            self._release_read_lock()
            reason = str(exc)
            self.echo(f"{state} failed: {reason}; rolling back")
            try:
                self._rollback(reason=f"{state} failed: {reason}")
            except Exception as exc2:  # the rollback itself failed: leave the journal for the operator
                raise MoveError(f"move failed in {state} ({reason}) and the automatic rollback failed too ({exc2}); "
                                f"fix that and run `innotier move rollback --id {self.plan.move_id}`") from None
            raise MoveError(f"move failed in {state}: {reason}; rolled back: {self.control.describe()} uses "
                            f"{self.plan.source_dir} again, verified") from None
        self.journal.finish(state, **data)

    # ------------------------------------------------------------------ the states

    def _do_plan(self) -> dict[str, Any]:
        """Save what SWITCH will overwrite, so rollback can put it back byte for byte."""
        before = {"placement": self.plan.placement_before,
                  "records": {p: (Path(p).read_text() if Path(p).exists() else None) for p in self.plan.record_files}}
        aa = self.plan.apparmor_change()
        if aa.local_path and Path(aa.local_path).exists():
            before["apparmor_local"] = Path(aa.local_path).read_text()
        self.journal.save_json("before.json", before)
        return {}

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
                if regime or self.plan.no_shutdown or self.control.state() != "running":
                    break
                self._preflush(flushed)  # then passes copy what the flush wrote
                regime = len(passes)
            manifest, st = self._precopy_pass(n, manifest, page_size)
            passes.append(st)
        self._precopy = manifest
        self.journal.save_json("precopy-manifest.json", manifest.to_dict())
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
                                 after_file=self._mid("PRECOPY") if n == 1 else None, verify=True,
                                 lsn_floor=floor, log_floor=log_floor, log_now=log_now, page_size=page_size)
        self.echo(f"pre-copy pass {n}: {st.files_copied} files changed, {human_size(st.bytes_copied)} written "
                  f"in {st.seconds:.1f} s")
        return manifest, {"pass": n, "began_at": began, "seconds": round(st.seconds, 3),
                          "files_changed": st.files_copied, "files_delta": st.files_delta,
                          "bytes_written": st.bytes_copied, "files_unchanged": st.files_skipped}

    def _do_shutdown(self) -> dict[str, Any]:
        state = self.control.state()
        data: dict[str, Any] = {"stop_began_at": time.time()}  # refined below when this step stops the server
        if state == "crashed":
            raise MoveHalted(f"{self.control.describe()} crashed or was killed before the move stopped it; start it "
                             "(it recovers), then `innotier move rollback`")
        if state == "running":
            if self.plan.no_shutdown:
                raise MoveHalted(f"{self.control.describe()} is still running, but this move expects it stopped "
                                 f"(--no-shutdown); stop it ({self.plan.control['stop_hint']}) and run "
                                 f"`innotier move resume --id {self.plan.move_id}`")
            # after the pre-copy's own pre-flush and last pass, waiting here would only let the page cleaner write
            # pages the offline delta then has to copy: the settings are still lowered, so stop at once
            saved = self._preflush(data, limit_s=0.0 if (self.journal.data("PRECOPY") or {}).get("preflush")
                                   else preflush.LIMIT_S)
            try:
                if self.plan.verify != "files":
                    data["read_lock_at"] = time.time()
                    self._checksum_under_read_lock(data)
                    self._last_pass_under_the_block(data)
                crash_point("SHUTDOWN:mid")
                self.echo(f"stopping {self.control.describe()} ({self.plan.shutdown_mode} shutdown)")
                if self._lock_conn is not None:
                    data.update(self._commits_waiting())
                data["stop_began_at"] = time.time()
                self.control.stop(self.plan.shutdown_mode)
            except BaseException:
                self._release_read_lock()
                self._restore_flush_settings(saved)
                raise
            self._release_read_lock()
        data["stopped_at"] = time.time()
        self._require_stopped("SHUTDOWN")
        if self.journal.load_json("checksums-before.json") is None and self.plan.verify != "files":
            data["note"] = "the server was already stopped: no table checksums from before the move"
        return data

    def _commits_waiting(self) -> dict[str, Any]:
        """The commits waiting on the block as the stop begins (``atstop``; unknown: nothing is put down to them)."""
        try:
            return atstop.read(self._lock_conn).to_journal()
        except Exception:  # noqa: BLE001 - unknown: the check after the start then treats a difference as damage
            return atstop.AtStop(known=False).to_journal()

    def _last_pass_under_the_block(self, data: dict[str, Any]) -> None:
        """Pre-copied move, commits already blocked for the sample: flush the dirty pages and copy them while reads
        are still served, so the shutdown has nearly nothing to write and the offline delta nearly nothing to read.

        Under a write load the page cleaner cannot get below the pages the clients keep dirtying (about a third of a
        1 GiB pool at 65,000 tpmC here), so the shutdown flushed them and the offline delta read them back from the
        device: most of the downtime.  With commits blocked the clients stop dirtying pages (each holds at most
        one transaction waiting at its commit), the flush (``preflush``, at most ``QUIESCE_FLUSH_S``) empties the
        pool's dirty list, and one more online pass copies what it wrote.  Writes stay blocked that much longer;
        the server stays up.  Measured at W=40, four TPC-C terminals: unavailable 0.68 s instead of 3.2-3.5 s, writes
        blocked 6.0 s.  Skipped without a pre-copy in memory (a resumed move), when the flush cannot run, and for
        components without page files (``PAGE_FILE_COMPONENTS``).
        """
        if not self.plan.precopy or self._precopy is None or self._lock_conn is None:
            return
        if self.plan.component not in PAGE_FILE_COMPONENTS:
            # the dirty pages are not in the moved files: the offline delta has nothing of theirs to read, and
            # blocking writes ~3 s to shorten the stop by ~0.25 s (measured on the redo log) is a poor trade
            return
        t0 = time.monotonic()
        flushed: dict[str, Any] = {}
        self._preflush(flushed, QUIESCE_FLUSH_S)
        if "skipped" in flushed["preflush"]:  # only time is at stake: the shutdown flushes what is left
            data["last_pass"] = flushed["preflush"]
            return
        n = len((self.journal.data("PRECOPY") or {}).get("passes") or []) + 1
        self._precopy, st = self._precopy_pass(n, self._precopy, int(self.plan.server["page_size"]))
        data["last_pass"] = {"flush": flushed["preflush"], "pass": st, "seconds": round(time.monotonic() - t0, 3)}

    def _preflush(self, data: dict[str, Any], limit_s: float = preflush.LIMIT_S) -> dict[str, str] | None:
        """Flush dirty pages at full speed while the server serves (``preflush``); the settings to restore.

        The original settings are saved in the journal directory before they change, so a
        resumed SHUTDOWN (or a rollback) restores those and not this step's own.
        """
        spec = self.plan.connection_spec()
        saved = self.journal.load_json("flush-settings.json")
        try:
            if saved is None:
                conn = spec.with_database(None).connect(connection_timeout=5)
                try:
                    saved = preflush.read_settings(conn)
                finally:
                    conn.close()
                self.journal.save_json("flush-settings.json", saved)
            result = preflush.flush(spec, saved, int(self.plan.server["page_size"]), limit_s, echo=self.echo)
        except Exception as exc:  # noqa: BLE001 - the flush only saves shutdown time: without it the stop flushes
            data["preflush"] = {"skipped": str(exc)}
            if saved is not None:
                self._restore_flush_settings(saved)
            return saved
        data["preflush"] = result.to_dict()
        return saved

    def _restore_flush_settings(self, saved: dict[str, str] | None) -> None:
        if saved is not None:
            preflush.restore(self.plan.connection_spec(), saved)

    def _do_copy(self) -> dict[str, Any]:
        self._require_stopped("COPY")
        self._ensure_target()
        if not components.get(self.plan.component).copies_files:
            self.journal.save_json("copy-manifest.json", Manifest(self.plan.source_dir, self.plan.target_dir).to_dict())
            return {"files": 0, "bytes": 0}
        prev = None
        if self.plan.precopy:  # the passes' block digests live in memory: after a restart, changed files go whole
            prev = self._precopy
            if prev is None and (saved := self.journal.load_json("precopy-manifest.json")):
                prev = Manifest.from_dict(saved)
        entries = self._entries()
        total = sum(st.st_size for _, st in entries if stat.S_ISREG(st.st_mode))
        advance = self.progress("copy (server stopped)", total)
        read = [0]

        def progress(n: int) -> None:
            read[0] += n
            advance(n)

        manifest, st = copy_tree(self.plan.source_dir, self.plan.target_dir, entries, previous=prev,
                                 progress=progress,
                                 after_file=self._mid("COPY"), verify=False,
                                 page_size=int(self.plan.server["page_size"]), stable=True)
        self.journal.save_json("copy-manifest.json", manifest.to_dict())
        return {"files": st.files_copied, "bytes": st.bytes_copied, "files_delta": st.files_delta,
                "bytes_read": read[0] - st.bytes_skipped,
                "files_unchanged_since_precopy": st.files_skipped,
                "bytes_unchanged_since_precopy": st.bytes_skipped, "seconds": round(st.seconds, 3)}

    def _do_verify(self) -> dict[str, Any]:
        self._require_stopped("VERIFY")
        manifest = Manifest.from_dict(self.journal.load_json("copy-manifest.json"))
        changed = recheck_sources(manifest)
        if changed:
            raise MoveError(f"{len(changed)} source files changed while the server was stopped "
                            f"({', '.join(changed[:3])}); something else writes to {self.plan.source_dir}")
        t0 = time.monotonic()
        verify_tree(manifest)
        self.journal.save_json("copy-manifest.json", manifest.to_dict())
        return {"files": sum(1 for r in manifest.records.values() if r.kind == "file"),
                "seconds": round(time.monotonic() - t0, 3)}

    def _do_switch(self) -> dict[str, Any]:
        self._require_stopped("SWITCH")
        self._ensure_target()
        write_atomic(self.plan.placement_file, self.plan.placement_after, mode=0o644)
        crash_point("SWITCH:mid")
        if self.plan.component == "datadir" and self.plan.control["kind"] == "sandbox":
            sb = self.control.sandbox()
            sb.datadir = self.plan.target_dir  # the sandbox record follows, so start() and destroy() see it
            sb.save()
            sb.write_cnf()
        apparmor.apply(self.plan.apparmor_change())
        return {"placement_file": self.plan.placement_file}

    def _do_start(self) -> dict[str, Any]:
        if self.control.state() != "running" and not self._wait_for_starting_server():
            seconds = self.control.start()
        else:
            seconds = 0.0
        self._wait_accepting()
        started = time.time()
        if self.plan.verify == "tables":
            self._take_read_lock()  # no client write may land before the checksums are compared
        return {"started_at": started, "start_seconds": round(seconds, 3)}

    def _do_verify_server(self) -> dict[str, Any]:
        """Paths, and by ``--verify``: the table sample (no lock) or checksums and TPC-C checks (read lock from start).

        A failure here halts instead of rolling back: the server has been up on the new
        location, and only the operator can tell a client's write from damage.
        """
        before = self.journal.load_json("checksums-before.json")
        spec = self.plan.connection_spec()
        if self._lock_conn is None and self.plan.verify == "tables":
            self._take_read_lock()
        try:
            result = verify.check_server(spec, self.plan.component, self.plan.target_dir, before, self.plan.verify,
                                         Evidence.of_move(self.journal.data("SHUTDOWN"), self.plan.precopy))
            verify.require_ok(result, self.plan.component, self.plan.target_dir)
        except MoveError as exc:
            raise MoveHalted(f"{exc}; the server runs on {self.plan.target_dir}: if clients wrote between the start "
                             "and the check this is expected (`innotier move resume` checks again), otherwise "
                             f"`innotier move rollback --id {self.plan.move_id}` returns to the old files") from None
        finally:
            self._release_read_lock()
        return result.to_dict()

    def _do_commit(self) -> dict[str, Any]:
        return self.timings()

    # ------------------------------------------------------------------ rollback

    def rollback(self, reason: str = "asked by the operator") -> dict[str, Any]:
        phase = self.journal.phase
        if phase in ("committed", "finalized"):
            raise MoveError(f"move {self.plan.move_id} is {phase}: the server has run on {self.plan.target_dir} since, "
                            f"so the source is stale; to go back, move again (`innotier move plan "
                            f"{self.plan.component} --to {self.plan.source_dir}`) after finalizing this one")
        if phase == "rolled_back":
            raise MoveError(f"move {self.plan.move_id} is already rolled back")
        self.journal.lock()
        try:
            return self._rollback(reason)
        finally:
            self.journal.unlock()

    def _rollback(self, reason: str) -> dict[str, Any]:
        self.journal.begin("ROLLBACK", reason=reason)
        switched = self.journal.began("SWITCH")
        # the "before" checksums still describe the old files only if the server stopped while the read lock
        # was held (SHUTDOWN done, or begun and the server is found stopped); otherwise writes may have followed
        frozen = self.journal.done("SHUTDOWN") or (self.journal.began("SHUTDOWN") and
                                                   (switched or self.control.state() != "running"))
        if switched:
            if self.control.state() == "running":
                self.echo(f"stopping {self.control.describe()} (it may run on the new location)")
                self.control.stop("clean")
            self._restore_before()
            apparmor.remove(self.plan.apparmor_change())
        removed = self._remove_target()
        started = False
        if self.plan.was_running and self.control.state() != "running":
            if self.control.state() == "crashed":
                raise MoveError(f"{self.control.describe()} crashed during the move; start it with recovery "
                                "(`innotier sandbox start NAME --recover`), then run `innotier move rollback` again")
            self.echo(f"starting {self.control.describe()} on {self.plan.source_dir}")
            self.control.start()
            started = True
        check: dict[str, Any] = {}
        if self.control.state() == "running":
            self._wait_accepting()
            if not started:  # it kept running since SHUTDOWN's pre-flush: give it its own flush settings back
                self._restore_flush_settings(self.journal.load_json("flush-settings.json"))
            before = self.journal.load_json("checksums-before.json") if frozen and started else None
            if before is not None and self.plan.verify == "tables":
                self._take_read_lock()
            try:
                result = verify.check_server(self.plan.connection_spec(), self.plan.component, self.plan.source_dir,
                                             before, self.plan.verify,
                                             Evidence.of_move(self.journal.data("SHUTDOWN"), False, on_source=True))
            finally:
                self._release_read_lock()
            verify.require_ok(result, self.plan.component, self.plan.source_dir)
            check = result.to_dict()
        self.journal.finish("ROLLBACK", removed=removed, started=started, check=check)
        return {"removed": removed, "started": started, "check": check}

    def _restore_before(self) -> None:
        before = self.journal.load_json("before.json") or {"placement": self.plan.placement_before, "records": {}}
        pf = Path(self.plan.placement_file)
        if before.get("placement") is None:
            if pf.exists():
                pf.unlink()
                fsync_dir(pf.parent)
        else:
            write_atomic(pf, before["placement"], mode=0o644)
        for path, text in (before.get("records") or {}).items():
            if text is not None:
                write_atomic(path, text, mode=0o600 if path.endswith("client.cnf") else 0o644)

    def _remove_target(self) -> int:
        """Remove what this move wrote into the target; the target directory too when the move created it."""
        target = Path(self.plan.target_dir)
        if not target.exists():
            return 0
        if not self.plan.target_exists or self.plan.component == "datadir":
            # the target was new or empty (preflight): everything in it is the move's
            n = sum(1 for _ in target.rglob("*"))
            if not self.plan.target_exists:
                shutil.rmtree(target)
                fsync_dir(target.parent)
            else:
                for child in target.iterdir():
                    shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
                fsync_dir(target)
            return n
        n = 0
        for name in components.top_names(self.plan.component, model_stub(self.plan), str(target)):
            p = target / name
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            n += 1
        fsync_dir(target)
        return n

    # ------------------------------------------------------------------ close

    def close(self, reason: str) -> dict[str, Any]:
        """The server is gone for good (its sandbox is being destroyed): remove what the move put in the target."""
        self.journal.lock()
        try:
            self.journal.begin("CLOSE", reason=reason)
            removed = self._remove_target()
            self.journal.finish("CLOSE", removed=removed)
        finally:
            self.journal.unlock()
        return {"move_id": self.plan.move_id, "component": self.plan.component, "target_dir": self.plan.target_dir,
                "removed": removed}

    # ------------------------------------------------------------------ finalize

    def finalize(self) -> dict[str, Any]:
        last = self.journal.last()
        if self.journal.phase == "finalized":
            raise MoveError(f"move {self.plan.move_id} is already finalized")
        if self.journal.phase != "committed":
            raise MoveError(f"move {self.plan.move_id} is not committed ({self.journal.describe()}); only a committed "
                            "move's source can be removed")
        self.journal.lock()
        try:
            self._require_server_on_target()
            if not (last and last.state == "FINALIZE"):
                self.journal.begin("FINALIZE")
            manifest = Manifest.from_dict(self.journal.load_json("copy-manifest.json"))
            removed, kept = self._remove_source(manifest)
            data = {"removed": removed, "kept": kept}
            self.journal.finish("FINALIZE", **data)
            return data
        finally:
            self.journal.unlock()

    def _require_server_on_target(self) -> None:
        state = self.control.state()
        if state == "running":
            where = components.source_dir(self.plan.component, inspect(self.plan.connection_spec()))
            if os.path.realpath(where) != os.path.realpath(self.plan.target_dir):
                raise MoveError(f"the server now reports {self.plan.component} at {where}, not "
                                f"{self.plan.target_dir}; the source is not removed")
            return

        current = placement.parse(Path(self.plan.placement_file).read_text() if Path(self.plan.placement_file).exists()
                                  else "")
        if current.get(self.plan.variable) != self.plan.target_dir:
            raise MoveError(f"{self.plan.placement_file} no longer places {self.plan.component} at "
                            f"{self.plan.target_dir}; the source is not removed")

    def _remove_source(self, manifest: Manifest) -> tuple[int, list[str]]:
        src = Path(self.plan.source_dir)
        removed, kept = 0, []
        first = True
        files = [r for r in manifest.records.values() if r.kind != "dir"]
        for rec in files:
            p = src / rec.rel
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue  # removed by an earlier, interrupted finalize
            if rec.kind == "file" and (st.st_size, st.st_mtime_ns, st.st_ino) != (rec.size, rec.mtime_ns, rec.ino):
                kept.append(rec.rel)  # changed since the copy: not ours to delete
                continue
            p.unlink()
            removed += 1
            if first:
                crash_point("FINALIZE:mid")
                first = False
        for rec in sorted((r for r in manifest.records.values() if r.kind == "dir"),
                          key=lambda r: r.rel.count("/"), reverse=True):
            try:
                (src / rec.rel).rmdir()
                removed += 1
            except OSError:
                kept.append(rec.rel + "/")
        if self.plan.component == "datadir":
            for leftover in src.iterdir() if src.exists() else []:
                if components.DATADIR_SKIP.match(leftover.name) and leftover.is_file():
                    leftover.unlink()  # ibtmp1: recreated at start, never copied
            if src.exists() and not any(src.iterdir()) and not os.path.ismount(src):
                src.rmdir()
        elif self.plan.component != "tmpdir" and src.exists() and not any(src.iterdir()) and not os.path.ismount(src):
            src.rmdir()  # an emptied component directory (e.g. a tier's redo/ left by an earlier move)
        if src.exists():
            fsync_dir(src)
        else:
            fsync_dir(src.parent)
        return removed, kept

    # ------------------------------------------------------------------ helpers

    def _entries(self):
        names = components.top_names(self.plan.component, model_stub(self.plan), self.plan.source_dir)
        return walk(self.plan.source_dir, names)

    def _ensure_target(self) -> None:
        t = Path(self.plan.target_dir)
        if not t.exists():
            t.mkdir(mode=0o700)
            fsync_dir(t.parent)
        o = self.plan.owner
        os.chown(t, o["uid"], o["gid"])
        os.chmod(t, o["mode"])

    def _mid(self, state: str) -> Callable[[str], None]:
        fired = {"done": False}

        def hook(_: str) -> None:
            if not fired["done"]:
                fired["done"] = True
                crash_point(f"{state}:mid")
        return hook

    def _require_stopped(self, state: str) -> None:
        now = self.control.state()
        if now != "stopped":
            raise MoveHalted(f"{self.control.describe()} is {now} during the offline {state} step, where it must be "
                             f"stopped (something restarted it?); stop it ({self.plan.control['stop_hint']}) and run "
                             f"`innotier move resume --id {self.plan.move_id}`")

    def _checksum_under_read_lock(self, data: dict[str, Any]) -> None:
        spec = self.plan.connection_spec()
        lock_and_read = verify.lock_and_checksum if self.plan.verify == "tables" else verify.lock_and_sample
        t0 = time.monotonic()
        try:
            self._lock_conn, sums = lock_and_read(spec)
        except InnotierError:
            if self.journal.load_json("checksums-before.json") is not None:
                return  # resumed while the server was already shutting down: the saved values stand
            raise
        self.journal.save_json("checksums-before.json", sums)
        data["tables"] = len(sums)
        data["read_seconds"] = round(time.monotonic() - t0, 3)

    def _lsns(self) -> tuple[int, int, int]:
        """(last checkpoint, flushed, current) LSN of the server (MariaDB's Innodb_lsn_*; 0 where it has none)."""
        try:
            conn = self.plan.connection_spec().with_database(None).connect()
            try:
                status = fetch_status(conn)
            finally:
                conn.close()
            return (int(status.get("Innodb_lsn_last_checkpoint", 0) or 0),
                    int(status.get("Innodb_lsn_flushed", 0) or 0), int(status.get("Innodb_lsn_current", 0) or 0))
        except (InnotierError, ValueError):
            return 0, 0, 0

    def _take_read_lock(self) -> None:
        conn = self.plan.connection_spec().with_database(None).connect()
        verify.block_writes(conn)
        self._lock_conn = conn

    def _release_read_lock(self) -> None:
        if self._lock_conn is not None:
            try:
                self._lock_conn.close()
            except Exception:
                pass  # the server is gone: so is the lock
            self._lock_conn = None

    def _wait_for_starting_server(self, timeout: float = 120.0) -> bool:
        """A server another (killed) mover started may still be initializing: wait for it instead of starting twice."""
        if self.plan.control["kind"] != "sandbox":
            return False

        sb = self.control.sandbox()
        deadline = time.monotonic() + timeout
        while port_in_use(sb.port) or sb.running_pid():
            if self.control.state() == "running" and sb._ping():
                return True
            if time.monotonic() > deadline:
                raise MoveHalted(f"port {sb.port} of {self.control.describe()} is busy but the server does not answer; "
                                 "check it and run `innotier move resume` again")
            time.sleep(0.2)
        return False

    def _wait_accepting(self, timeout: float = 120.0) -> None:
        spec = self.plan.connection_spec()
        deadline = time.monotonic() + timeout
        while True:
            try:
                spec.with_database(None).connect(connection_timeout=2).close()
                return
            except InnotierError:
                if time.monotonic() > deadline:
                    raise MoveError(f"{self.control.describe()} does not accept connections after start; see its "
                                    "error log") from None
                time.sleep(0.2)

    # ------------------------------------------------------------------ reporting

    def timings(self) -> dict[str, Any]:
        sd = self.journal.data("SHUTDOWN")
        st = self.journal.data("START")
        out: dict[str, Any] = {}
        if sd.get("stop_began_at") and st.get("started_at"):
            out["downtime_s"] = round(st["started_at"] - sd["stop_began_at"], 3)
        vs = [r for r in self.journal.records() if r.state == "VERIFY_SERVER" and r.event == "done"]
        if vs and sd.get("stop_began_at"):
            out["until_verified_s"] = round(vs[-1].at - sd["stop_began_at"], 3)
        if st.get("started_at") and sd.get("stop_began_at"):
            # read lock before shutdown (sample or checksums), server down, and with --verify tables the
            # read lock after start until verified
            blocked_from = sd.get("read_lock_at") or sd["stop_began_at"]
            blocked_to = vs[-1].at if (vs and self.plan.verify == "tables") else st["started_at"]
            out["writes_blocked_s"] = round(blocked_to - blocked_from, 3)
        if out.get("downtime_s") is not None:
            out["downtime_breakdown"] = self.downtime_breakdown()
        return out

    def downtime_breakdown(self) -> dict[str, float]:
        """Where the time the server was unavailable went: stop, each offline step, start, waiting to accept.

        From the journal: the stop as SHUTDOWN recorded it, COPY (delta read and write),
        VERIFY (read-back), SWITCH and START from their begin/done records; ``other_s`` is
        what lies between them (journal writes).  The pre-flush ran before the stop (not
        downtime) and is listed apart.
        """
        began: dict[str, float] = {}
        done: dict[str, float] = {}
        for r in self.journal.records():
            (began if r.event == "begin" else done)[r.state] = r.at
        sd, st = self.journal.data("SHUTDOWN"), self.journal.data("START")
        out: dict[str, float] = {}
        if sd.get("stopped_at") and sd.get("stop_began_at"):
            out["stop_s"] = round(sd["stopped_at"] - sd["stop_began_at"], 3)
        for state in ("COPY", "VERIFY", "SWITCH"):
            if state in began and state in done and done[state] >= began[state]:
                out[f"{state.lower()}_s"] = round(done[state] - began[state], 3)
        if "START" in began and st.get("started_at"):
            out["start_s"] = round(st.get("start_seconds", 0.0), 3)
            out["accept_wait_s"] = round(st["started_at"] - began["START"] - st.get("start_seconds", 0.0), 3)
        if st.get("started_at") and sd.get("stop_began_at"):
            out["other_s"] = round(st["started_at"] - sd["stop_began_at"] - sum(out.values()), 3)
        pf = sd.get("preflush") or {}
        if "seconds" in pf:
            out["preflush_before_stop_s"] = pf["seconds"]
        return out

    def summary(self) -> dict[str, Any]:
        return {"move_id": self.plan.move_id, "component": self.plan.component, "from": self.plan.source_dir,
                "to": self.plan.target_dir, "phase": self.journal.phase, "state": self.journal.describe(),
                "copy": self.journal.data("COPY"), "precopy": self.journal.data("PRECOPY"),
                "verify_server": self.journal.data("VERIFY_SERVER"), **self.timings()}


def close_moves_of_sandbox(name: str) -> list[str]:
    """Close every move of sandbox ``name`` (being destroyed, its server stopped): remove the files each move
    placed in its target (only the move's own entries; the target directory too when the move created it) and
    journal CLOSE, so `move status` stops saying the server uses the new location.  One line per move."""
    out = []
    for journal in all_journals():
        control = journal.plan()["control"]
        if control.get("kind") != "sandbox" or control.get("name") != name or journal.phase in ("rolled_back",
                                                                                                 "closed"):
            continue
        result = Executor.open(journal).close(f"sandbox {name} destroyed")
        n = result["removed"]
        out.append(f"closed move {result['move_id']} ({result['component']}): removed {n} "
                   f"entr{'y' if n == 1 else 'ies'} the sandbox owned from {result['target_dir']}")
    return out



# every process that can move files (the CLI, sweeps, tests) imports this module: from then on destroying a
# sandbox closes its moves
on_destroy(close_moves_of_sandbox)


def status_of(journal: Journal) -> dict[str, Any]:
    plan = journal.plan()
    last = journal.last()
    ex_timings = {}
    try:
        ex_timings = Executor(Plan.from_dict(plan), journal).timings()
    except Exception:
        pass
    return {"move_id": plan["move_id"], "component": plan["component"], "server": plan["control"]["describe"],
            "from": plan["source_dir"], "to": plan["target_dir"], "phase": journal.phase,
            "last": f"{last.state} {last.event}" if last else None,
            "at": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last.at)) if last else None,
            "state": journal.describe(), **ex_timings}


__all__ = ["Executor", "MoveHalted", "STATES", "status_of"]
