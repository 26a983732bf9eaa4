"""The steps that start the server on the target and check it: START and VERIFY_SERVER."""

from __future__ import annotations

import time
from typing import Any

from tuner.core.errors import InnotierError, MoveError
from tuner.core.sandbox import SandboxState, port_in_use

from datadir_mover.move import good_copy, server_check, side_files, since_start, target_check
from datadir_mover.move import proof as proofmod
from datadir_mover.move.server_check.benign import Evidence
from datadir_mover.move.copy import Manifest
from datadir_mover.move.journal import State
from datadir_mover.move.stepbase import MoveHalted


class ServerSteps:
    """START and VERIFY_SERVER (mixed into ``Executor``)."""

    def _do_start(self) -> dict[str, Any]:
        already_running = True
        checked: dict[str, Any] = {}
        if self.control.state() != SandboxState.RUNNING and not self._wait_for_starting_server():
            checked = self._check_copies_before_start()
            seconds = self.control.start()
            already_running = False
        else:
            seconds = 0.0
        self._wait_accepting()
        started = time.time()
        since_start.record_baseline(self.journal, self.plan.connection_spec(), exact=not already_running)
        if self.plan.verify == "tables":
            self.read_lock.take()  # no client write may land before the checksums are compared
        return {"started_at": started, "start_seconds": round(seconds, 3), **checked}

    def _check_copies_before_start(self) -> dict[str, Any]:
        """Every start: the source not moved on (``good_copy``), the target as VERIFY read it back
        (``target_check``).  Once a start was tried (``side_files.TARGET_STARTED``) the server may have run on the target, so
        its files and the ones it shares with the source's placement (a datadir's redo log) may differ by right."""
        tried = self.journal.load_json(side_files.TARGET_STARTED) is not None
        good_copy.for_resume(self.journal, self.plan, self.echo, moved_only=tried)
        checked: dict[str, Any] = {}
        saved = self.journal.load_json(side_files.COPY_MANIFEST)
        if not tried and saved is not None:
            checked = target_check.require_as_verified(self.plan, Manifest.from_dict(saved),
                                                       vouched=self._verified_here)
        self.journal.save_json(side_files.TARGET_STARTED, {"at": time.time()})
        return checked

    def _do_verify_server(self) -> dict[str, Any]:
        """Paths, and by ``--verify``: the table sample (no lock) or checksums and TPC-C checks (read lock from start).

        A failure here halts instead of rolling back: the server has been up on the new
        location, and only the operator can tell a client's write from damage.
        """
        before = self.journal.load_json(side_files.CHECKSUMS_BEFORE)
        spec = self.plan.connection_spec()
        if self.plan.verify == "tables":
            self.read_lock.take()
        try:
            result = self._check_on_target(spec, before)
            if result.pending_proof:  # a difference the whole-file proof may excuse: run it to the end first
                self.echo("a table differs: running the whole-file proof to the end before judging it")
                proofmod.run(self.journal, rate=0, wait=True)
                result = self._check_on_target(spec, before)
            server_check.require_ok(result, self.plan.component, self.plan.target_dir)
        except MoveError as exc:
            raise MoveHalted(f"{exc}; the server runs on {self.plan.target_dir}: if clients wrote between the start "
                             "and the check this is expected (`innotier move resume` checks again), otherwise "
                             f"`innotier move rollback --id {self.plan.move_id} --discard-writes-since-start` "
                             "returns to the old files") from None
        finally:
            self.read_lock.release()
        return result.to_dict()

    def _check_on_target(self, spec, before) -> "server_check.ServerCheck":
        proof = proofmod.Proof.load(self.journal)
        evidence = Evidence.of_move(self.journal.data(State.SHUTDOWN), self.plan.precopy,
                                    proof.status if proof is not None else None)
        return server_check.check_server(spec, self.plan.component, self.plan.target_dir, before, self.plan.verify, evidence)

    def _wait_for_starting_server(self, timeout: float = 120.0) -> bool:
        """A server another (killed) mover started may still be initializing: wait for it instead of starting twice."""
        if self.plan.control["kind"] != "sandbox":
            return False

        sb = self.control.sandbox()
        deadline = time.monotonic() + timeout
        while port_in_use(sb.port) or sb.running_pid():
            if self.control.state() == SandboxState.RUNNING and sb._ping():
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

