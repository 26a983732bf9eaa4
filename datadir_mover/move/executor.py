"""Carry out a plan under the journal: apply, resume, rollback, finalize.

Every state's work is idempotent (see ``journal.py`` for the contract), so ``resume``
simply runs the first state that is not ``done``.  Each state's handler is named in
``HANDLERS`` (beside ``journal.STATES``): a function ``(ctx, lock, cache) -> record`` (``stepbase``:
the frozen ``MoveContext``, the commit block this mover may hold, the in-memory ``PassCache``; the
record is the step's frozen ``step_records`` dataclass, which the executor journals as the state's
``done`` line)
in the module of its kind of work: ``precopy_steps`` (online passes, the pre-flush between
them), ``shutdown_step`` (SHUTDOWN: flush, block, sample, the last pass under the block, stop),
``offline_steps`` (COPY, VERIFY, SWITCH), ``server_steps`` (START, VERIFY_SERVER),
``rollback_steps`` (PLAN, and ROLLBACK, CLOSE) and ``finalize_step`` (FINALIZE); what several
share has its own module (``flush_settings``, ``read_lock``, ``trees``, ``server_waits``).
The ``Executor`` holds those three for one process and runs the loop; it shares nothing else
with the steps.

A failure inside a step rolls the move back automatically (server back on the old
location, verified) until the server has accepted connections on the target; from then on
it halts and names what failed, since a rollback would discard what clients committed
(``since_start.py``).  A crash (SIGKILL, power cut) leaves the journal for
``innotier move resume`` or ``innotier move rollback``.  A step that finds the world in a
state it must not touch (the server running during an offline step, a source that moved
on since VERIFY: ``source_fingerprint.py``, ``good_copy.py``) halts without rolling back: the operator decides.
After START a detached process proves the move (``proof.py``); finalize waits for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from tuner.core.errors import InnotierError, MoveError
from tuner.core.sandbox import on_destroy

from datadir_mover.move import finalize_step, preflight, rollback_steps, side_files, since_start
from datadir_mover.move import proof as proofmod
from datadir_mover.move.journal import STATES, Journal, State, all_journals, moves_dir
from datadir_mover.move.offline_steps import step_copy, step_switch, step_verify
from datadir_mover.move.plan import Plan
from datadir_mover.move.precopy_steps import step_precopy
from datadir_mover.move.read_lock import ReadLock
from datadir_mover.move.rollback_steps import step_plan
from datadir_mover.move.server_lock import ServerLock
from datadir_mover.move.server_steps import step_start, step_verify_server
from datadir_mover.move.shutdown_step import step_shutdown
from datadir_mover.move.step_records import (CloseRecord, CommitRecord, CopyRecord, FinalizeRecord, PrecopyRecord,
                                             RollbackRecord, StepRecord, VerifyServerRecord)
from datadir_mover.move.stepbase import (Echo, MoveContext, MoveHalted, PassCache, ProgressFactory, no_progress,
                                         quiet)
from datadir_mover.move.timings import timings


MAX_WRITE_BLOCK_S = 1.5  # longest block of commits before the stop (sample, flush, last pass): then the plain stop


class Executor:
    """One process's mover of one move: the context, the commit block and the pass cache its steps are given,
    the per-server lock, and the loop over the journal's states."""

    def __init__(self, plan: Plan, journal: Journal, echo: Echo = quiet, progress: ProgressFactory = no_progress,
                 on_state: Callable[[str], None] | None = None):
        self.on_state = on_state or (lambda state: None)  # observers (progress displays, benchmarks)
        options = journal.load_json(side_files.OPTIONS) or {}
        self.ctx = MoveContext(plan, journal, plan.control_obj(), echo, progress,
                               float(options.get("max_write_block_s", MAX_WRITE_BLOCK_S)))
        self.read_lock = ReadLock(plan.connection_spec)  # the commit block, while this mover holds it
        self.cache = PassCache()  # what this process learned beyond the journal
        self.server_lock = ServerLock(plan.server_key)  # one move per server: held while this mover works
        self.background_proof = True  # after START, hash the stopped source in a detached process (proof.py)

    @property
    def plan(self) -> Plan:
        return self.ctx.plan

    @property
    def journal(self) -> Journal:
        return self.ctx.journal

    @property
    def control(self):
        return self.ctx.control

    @classmethod
    def create(cls, plan: Plan, echo: Echo = quiet, progress: ProgressFactory = no_progress,
               max_write_block_s: float = MAX_WRITE_BLOCK_S) -> "Executor":
        lock = ServerLock(plan.server_key).acquire(plan.move_id)
        try:
            preflight.check_no_open_move(plan.server_key)  # again, under the lock: another apply may have begun
            journal = Journal.create(moves_dir() / plan.move_id, plan.to_dict())
            journal.save_json(side_files.OPTIONS, {"max_write_block_s": max_write_block_s})
        except BaseException:
            lock.release()
            raise
        ex = cls(plan, journal, echo, progress)
        ex.server_lock = lock
        return ex

    @classmethod
    def open(cls, journal: Journal, echo: Echo = quiet, progress: ProgressFactory = no_progress) -> "Executor":
        return cls(Plan.from_dict(journal.plan()), journal, echo, progress)

    def run(self) -> "MoveSummary":
        """Run (or resume) the move until COMMIT; return the summary."""
        if self.journal.phase != "open":
            raise MoveError(f"move {self.plan.move_id} is {self.journal.phase.replace('_', ' ')}; nothing to resume")
        if self.journal.last() and self.journal.last().state == State.ROLLBACK:
            raise MoveError(f"move {self.plan.move_id} was being rolled back; finish it with `innotier move rollback`")
        self.server_lock.acquire(self.plan.move_id)
        try:
            self.journal.lock()
        except BaseException:
            self.server_lock.release()
            raise
        try:
            while (state := self.journal.next_state()) is not None:
                if state == State.PRECOPY and not self.plan.precopy:
                    self.journal.begin(state, skipped=True)
                    self.journal.finish(state, **PrecopyRecord(skipped=True).to_journal())
                    continue
                self._run_state(state)
            return self.summary()
        finally:
            self.read_lock.release()
            self.journal.unlock()
            self.server_lock.release()

    def _run_state(self, state: str) -> None:
        handler = HANDLERS[state]
        self.ctx.echo(f"{state.lower().replace('_', ' ')}...")
        self.on_state(state)
        self.journal.begin(state)
        try:
            record = handler(self.ctx, self.read_lock, self.cache)
        except MoveHalted:
            self.read_lock.release()
            raise
        except (InnotierError, OSError) as exc:
            self.read_lock.release()
            if since_start.accepted_on_target(self.journal):
                raise self._halt_after_start(state, exc) from None
            self._roll_back_after(state, exc)
        self.journal.finish(state, **record.to_journal())
        if state == State.START and self.background_proof and proofmod.pending(self.journal):
            proofmod.start_background(self.journal)

    def _halt_after_start(self, state: str, exc: BaseException) -> MoveHalted:
        """Clients may have written to the target: nothing automatic may throw their commits away."""
        cost = since_start.writes_since_start(self.journal, self.plan.connection_spec()).text()
        return MoveHalted(f"{state} failed after {self.control.describe()} accepted connections on "
                          f"{self.plan.target_dir}: {exc}; the move halts there (nothing rolled back, nothing "
                          f"discarded): fix it and run `innotier move resume --id {self.plan.move_id}`, or go back "
                          f"with `innotier move rollback --id {self.plan.move_id} --discard-writes-since-start`, "
                          f"which discards {cost}")

    def _roll_back_after(self, state: str, exc: BaseException) -> None:
        reason = str(exc)
        self.ctx.echo(f"{state} failed: {reason}; rolling back")
        try:
            rollback_steps.roll_back(self.ctx, self.read_lock, reason=f"{state} failed: {reason}")
        except Exception as exc2:  # the rollback itself failed: leave the journal for the operator
            raise MoveError(f"move failed in {state} ({reason}) and the automatic rollback failed too ({exc2}); "
                            f"fix that and run `innotier move rollback --id {self.plan.move_id}`") from None
        raise MoveError(f"move failed in {state}: {reason}; rolled back: {self.control.describe()} uses "
                        f"{self.plan.source_dir} again, verified") from None

    def prove(self, rate: int = 0) -> "proofmod.Proof | None":
        """Run what is left of the proof here (after a prover already at work, if any); None: no proof recorded."""
        return proofmod.run(self.journal, rate=rate, wait=True)

    def rollback(self, reason: str = "asked by the operator",
                 discard_writes_since_start: bool = False) -> RollbackRecord:
        return rollback_steps.rollback(self.ctx, self.read_lock, self.server_lock, reason, discard_writes_since_start)

    def refuse_if_closed(self, discard_writes_since_start: bool = False) -> None:
        rollback_steps.refuse_if_closed(self.ctx, discard_writes_since_start)

    def close(self, reason: str) -> CloseRecord:
        return rollback_steps.close(self.ctx, reason)

    def finalize(self, accept_volatile: bool = False, persist_backing: str | None = None) -> FinalizeRecord:
        return finalize_step.finalize(self.ctx, accept_volatile, persist_backing)

    def timings(self) -> dict[str, Any]:
        return timings(self.journal, self.plan.verify)

    def summary(self) -> "MoveSummary":
        return MoveSummary(self.plan.move_id, self.plan.component, self.plan.source_dir, self.plan.target_dir,
                           self.journal.phase, self.journal.describe(), PrecopyRecord.of(self.journal),
                           CopyRecord.of(self.journal), VerifyServerRecord.of(self.journal),
                           CommitRecord(**self.timings()))


@dataclass(frozen=True)
class MoveSummary:
    """What ``Executor.run`` returns: the move, where its journal stands, what its steps did, its timings."""

    move_id: str
    component: str
    source_dir: str
    target_dir: str
    phase: str
    state: str  # the journal in words (``Journal.describe``)
    precopy: PrecopyRecord
    copy: CopyRecord
    verify_server: VerifyServerRecord
    timings: CommitRecord  # the timings known so far (``timings.timings``)

    def to_dict(self) -> dict[str, Any]:
        """The summary as `move apply --json` prints it."""
        return {"move_id": self.move_id, "component": self.component, "from": self.source_dir,
                "to": self.target_dir, "phase": self.phase, "state": self.state, "copy": self.copy.to_journal(),
                "precopy": self.precopy.to_journal(), "verify_server": self.verify_server.to_journal(),
                **self.timings.to_journal()}


def step_commit(ctx: MoveContext, lock: ReadLock, cache: PassCache) -> CommitRecord:
    """COMMIT: the move is done; its record keeps the timings."""
    return CommitRecord(**timings(ctx.journal, ctx.plan.verify))


Handler = Callable[[MoveContext, ReadLock, PassCache], StepRecord]
# every state's handler, beside STATES (tests/move/test_executor_table.py checks that none is missing)
HANDLERS: dict[str, Handler] = {
    State.PLAN: step_plan,
    State.PRECOPY: step_precopy,
    State.SHUTDOWN: step_shutdown,
    State.COPY: step_copy,
    State.VERIFY: step_verify,
    State.SWITCH: step_switch,
    State.START: step_start,
    State.VERIFY_SERVER: step_verify_server,
    State.COMMIT: step_commit,
}


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
        ex = Executor.open(journal)
        n = ex.close(f"sandbox {name} destroyed").removed
        out.append(f"closed move {ex.plan.move_id} ({ex.plan.component}): removed {n} "
                   f"entr{'y' if n == 1 else 'ies'} the sandbox owned from {ex.plan.target_dir}")
    return out


# every process that can move files (the CLI, sweeps, tests) imports this module: from then on destroying a
# sandbox closes its moves
on_destroy(close_moves_of_sandbox)


def status_of(journal: Journal) -> dict[str, Any]:
    plan = journal.plan()
    last = journal.last()
    ex_timings = timings(journal, plan.get("verify", "sample"))
    return {"move_id": plan["move_id"], "component": plan["component"], "server": plan["control"]["describe"],
            "from": plan["source_dir"], "to": plan["target_dir"], "phase": journal.phase,
            "last": f"{last.state} {last.event}" if last else None,
            "at": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last.at)) if last else None,
            "state": journal.describe(), "proof": proof.text() if (proof := proofmod.Proof.load(journal)) else None,
            **ex_timings}


__all__ = ["Executor", "HANDLERS", "MoveHalted", "MoveSummary", "STATES", "status_of"]
