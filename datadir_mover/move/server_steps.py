"""The steps that talk to the server: SHUTDOWN (block, sample, stop), START, VERIFY_SERVER, and the read lock."""

from __future__ import annotations

import time
from typing import Any

from tuner.core.errors import InnotierError, MoveError
from tuner.core.server import fetch_status
from tuner.core.sandbox import SandboxState, port_in_use

from datadir_mover.move import atstop, good_copy, preflush, sample, side_files, since_start, target_check, verify
from datadir_mover.move import proof as proofmod
from datadir_mover.move.benign import Evidence
from datadir_mover.move.copy import Manifest
from datadir_mover.move.journal import State, crash_point
from datadir_mover.move.stepbase import MoveHalted
from datadir_mover.move.stepdata import PrecopyData


LOCK_WAIT_S = 5  # the commit block waits at most this long for a lock (FTWRL queues behind a long query)
ER_LOCK_WAIT_TIMEOUT = 1205


class ServerSteps:
    """SHUTDOWN, START and VERIFY_SERVER (mixed into ``Executor``)."""

    def _do_shutdown(self) -> dict[str, Any]:
        state = self.control.state()
        data: dict[str, Any] = {"stop_began_at": time.time()}  # refined below when this step stops the server
        if state == SandboxState.CRASHED:
            raise MoveHalted(f"{self.control.describe()} crashed or was killed before the move stopped it; start it "
                             "(it recovers), then `innotier move rollback`")
        if state == SandboxState.RUNNING:
            if self.plan.no_shutdown:
                raise MoveHalted(f"{self.control.describe()} is still running, but this move expects it stopped "
                                 f"(--no-shutdown); stop it ({self.plan.control['stop_hint']}) and run "
                                 f"`innotier move resume --id {self.plan.move_id}`")
            # after the pre-copy's own pre-flush and passes, waiting here would only let the page cleaner write
            # pages the offline delta then has to copy: lower the settings again for the stop, without waiting
            saved = self._preflush(data, limit_s=0.0 if PrecopyData.of(self.journal).preflush
                                   else preflush.LIMIT_S)
            try:
                if self.plan.verify != "files":
                    data["read_lock_at"] = time.time()
                    self._checksum_under_read_lock(data)
                    self._last_pass_under_the_block(data, saved)
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
        self._require_stopped(State.SHUTDOWN)
        if self.journal.load_json(side_files.CHECKSUMS_BEFORE) is None and self.plan.verify != "files":
            data["note"] = "the server was already stopped: no table checksums from before the move"
        return data

    def _commits_waiting(self) -> dict[str, Any]:
        """The commits waiting on the block as the stop begins (``atstop``; unknown: nothing is put down to them)."""
        try:
            return atstop.read(self._lock_conn).to_journal()
        except Exception:  # noqa: BLE001 - unknown: the check after the start then treats a difference as damage
            return atstop.AtStop(known=False).to_journal()

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
            self._take_read_lock()  # no client write may land before the checksums are compared
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
        if self._lock_conn is None and self.plan.verify == "tables":
            self._take_read_lock()
        try:
            result = self._check_on_target(spec, before)
            if result.pending_proof:  # a difference the whole-file proof may excuse: run it to the end first
                self.echo("a table differs: running the whole-file proof to the end before judging it")
                proofmod.run(self.journal, rate=0, wait=True)
                result = self._check_on_target(spec, before)
            verify.require_ok(result, self.plan.component, self.plan.target_dir)
        except MoveError as exc:
            raise MoveHalted(f"{exc}; the server runs on {self.plan.target_dir}: if clients wrote between the start "
                             "and the check this is expected (`innotier move resume` checks again), otherwise "
                             f"`innotier move rollback --id {self.plan.move_id} --discard-writes-since-start` "
                             "returns to the old files") from None
        finally:
            self._release_read_lock()
        return result.to_dict()

    def _check_on_target(self, spec, before) -> "verify.ServerCheck":
        proof = proofmod.Proof.load(self.journal)
        evidence = Evidence.of_move(self.journal.data(State.SHUTDOWN), self.plan.precopy,
                                    proof.status if proof is not None else None)
        return verify.check_server(spec, self.plan.component, self.plan.target_dir, before, self.plan.verify, evidence)

    def _checksum_under_read_lock(self, data: dict[str, Any]) -> None:
        t0 = time.monotonic()
        try:
            self._lock_conn, sums = self._block_and_read()
        except InnotierError:
            if self.journal.load_json(side_files.CHECKSUMS_BEFORE) is not None:
                return  # resumed while the server was already shutting down: the saved values stand
            raise
        except Exception as exc:  # noqa: BLE001 - only the lock wait is expected here; anything else is raised
            if getattr(exc, "errno", None) != ER_LOCK_WAIT_TIMEOUT:
                raise
            data["block"] = (f"not obtained within lock_wait_timeout={LOCK_WAIT_S} s (a long statement held a "
                             "lock): plain stop, no sample before it")
            self.echo(data["block"])
            return
        self.journal.save_json(side_files.CHECKSUMS_BEFORE, sums)
        data["tables"] = len(sums)
        data["read_seconds"] = round(time.monotonic() - t0, 3)

    def _block_and_read(self):
        """(connection blocking commits, checksums or sample digests); the block waits at most ``LOCK_WAIT_S``."""
        conn = self._blocking_connection()
        try:
            sums = verify.table_checksums(conn) if self.plan.verify == "tables" else sample.take(conn).digests
        except BaseException:
            conn.close()
            raise
        return conn, sums

    def _blocking_connection(self):
        conn = self.plan.connection_spec().with_database(None).connect()
        try:
            cur = conn.cursor()
            cur.execute(f"SET SESSION lock_wait_timeout = {LOCK_WAIT_S}")
            cur.close()
            verify.block_writes(conn)
        except BaseException:
            conn.close()
            raise
        return conn

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
        self._lock_conn = self._blocking_connection()

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

