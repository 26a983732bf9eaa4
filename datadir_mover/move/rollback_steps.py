"""Going back and closing: PLAN saves what SWITCH overwrites, ROLLBACK puts it back, CLOSE ends a destroyed
sandbox's move."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tuner.core.durable import fsync_dir, write_atomic
from tuner.core.sandbox import SandboxState
from tuner.core.errors import MoveError

from datadir_mover import apparmor, unit_sandbox
from datadir_mover.move import components, flush_settings, good_copy, server_check, side_files, since_start
from datadir_mover.move import proof as proofmod
from datadir_mover.move.stepbase import model_stub
from datadir_mover.move.server_check.benign import Evidence
from datadir_mover.move.journal import State


class RollbackSteps:
    """PLAN, ROLLBACK and CLOSE (mixed into ``Executor``)."""

    def _do_plan(self) -> dict[str, Any]:
        """Save what SWITCH will overwrite, so rollback can put it back byte for byte."""
        before = {"placement": self.plan.placement_before,
                  "records": {p: (Path(p).read_text() if Path(p).exists() else None) for p in self.plan.record_files}}
        aa = self.plan.apparmor_change()
        if aa.local_path and Path(aa.local_path).exists():
            before["apparmor_local"] = Path(aa.local_path).read_text()
        self.journal.save_json(side_files.BEFORE, before)
        return {}

    def refuse_if_closed(self, discard_writes_since_start: bool = False) -> None:
        """One line where rollback is not the way back: after COMMIT (unless the proof failed) or after it ran."""
        phase = self.journal.phase
        proof = proofmod.Proof.load(self.journal)
        failed_proof = phase == "committed" and proof is not None and proof.status == "failed"
        back = f"`innotier move apply {self.plan.component} --to {self.plan.source_dir}`"
        if phase == "finalized":
            raise MoveError(f"move {self.plan.move_id} is finalized: its source {self.plan.source_dir} was removed, so "
                            f"there is nothing to roll back to; to go back, move {self.plan.component} back home with "
                            f"{back} (it undoes this move's option-file and AppArmor changes)")
        if phase == "committed" and not (failed_proof and discard_writes_since_start):
            raise MoveError(f"move {self.plan.move_id} is committed: the server has run on {self.plan.target_dir} "
                            f"since, so the source is stale; to go back, finalize this move (`innotier move finalize "
                            f"--id {self.plan.move_id}`), then move back home with {back}")
        if phase == "rolled_back":
            raise MoveError(f"move {self.plan.move_id} is already rolled back")

    def rollback(self, reason: str = "asked by the operator",
                 discard_writes_since_start: bool = False) -> dict[str, Any]:
        self.refuse_if_closed(discard_writes_since_start)
        may_have_written = since_start.accepted_on_target(self.journal) or (
            self.journal.began(State.START) and self.control.state() == SandboxState.RUNNING)  # started, then killed
        if may_have_written and not discard_writes_since_start:
            cost = since_start.writes_since_start(self.journal, self.plan.connection_spec()).text()
            raise MoveError(f"{self.control.describe()} has accepted connections on {self.plan.target_dir}: rolling "
                            f"back discards {cost}; if that is what you want, run `innotier move rollback --id "
                            f"{self.plan.move_id} --discard-writes-since-start`")
        self.server_lock.acquire(self.plan.move_id)
        try:
            self.journal.lock()
            try:
                return self._rollback(reason)
            finally:
                self.journal.unlock()
        finally:
            self.server_lock.release()

    def _rollback(self, reason: str) -> dict[str, Any]:
        if not self.journal.began(State.ROLLBACK):  # an interrupted rollback already removed what it removes
            good_copy.for_rollback(self.journal, self.plan)
        self.journal.begin(State.ROLLBACK, reason=reason)
        switched = self.journal.began(State.SWITCH)
        # the "before" checksums still describe the old files only if the server stopped while the read lock
        # was held (SHUTDOWN done, or begun and the server is found stopped); otherwise writes may have followed
        frozen = self.journal.done(State.SHUTDOWN) or (self.journal.began(State.SHUTDOWN) and
                                                   (switched or self.control.state() != SandboxState.RUNNING))
        if switched:
            if self.control.state() == SandboxState.RUNNING:
                self.echo(f"stopping {self.control.describe()} (it may run on the new location)")
                self.control.stop("clean")
            self._restore_before()
            apparmor.remove(self.plan.apparmor_change())
            unit_sandbox.remove(self.plan.unit_change())
        removed = self._remove_target()
        started = False
        if self.plan.was_running and self.control.state() != SandboxState.RUNNING:
            if self.control.state() == SandboxState.CRASHED:
                raise MoveError(f"{self.control.describe()} crashed during the move; start it with recovery "
                                "(`innotier sandbox start NAME --recover`), then run `innotier move rollback` again")
            self.echo(f"starting {self.control.describe()} on {self.plan.source_dir}")
            self.control.start()
            started = True
        check: dict[str, Any] = {}
        if self.control.state() == SandboxState.RUNNING:
            self._wait_accepting()
            if not started:  # it kept running since SHUTDOWN's pre-flush: give it its own flush settings back
                flush_settings.put_back(self.plan, self.control, self.echo, flush_settings.saved(self.journal))
            before = self.journal.load_json(side_files.CHECKSUMS_BEFORE) if frozen and started else None
            if before is not None and self.plan.verify == "tables":
                self.read_lock.take()
            try:
                result = server_check.check_server(self.plan.connection_spec(), self.plan.component, self.plan.source_dir,
                                             before, self.plan.verify,
                                             Evidence.of_move(self.journal.data(State.SHUTDOWN), False, on_source=True))
            finally:
                self.read_lock.release()
            server_check.require_ok(result, self.plan.component, self.plan.source_dir)
            check = result.to_dict()
        self.journal.finish(State.ROLLBACK, removed=removed, started=started, check=check)
        return {"removed": removed, "started": started, "check": check}

    def _restore_before(self) -> None:
        before = self.journal.load_json(side_files.BEFORE) or {"placement": self.plan.placement_before, "records": {}}
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


    def close(self, reason: str) -> dict[str, Any]:
        """The server is gone for good (its sandbox is being destroyed): remove what the move put in the target."""
        self.journal.lock()
        try:
            self.journal.begin(State.CLOSE, reason=reason)
            removed = self._remove_target()
            self.journal.finish(State.CLOSE, removed=removed)
        finally:
            self.journal.unlock()
        return {"move_id": self.plan.move_id, "component": self.plan.component, "target_dir": self.plan.target_dir,
                "removed": removed}

