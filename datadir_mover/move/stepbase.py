"""What every step of the executor is given and shares.

A step is a function ``(ctx, lock, cache) -> record`` (``executor.HANDLERS``): ``ctx`` is the move
(``MoveContext``, frozen: the plan, its journal, the server's control, where to report), ``lock``
the commit block this mover may hold (``read_lock.ReadLock``) and ``cache`` what this process
learned beyond the journal (``PassCache``, memory only: a restarted mover has none of it and
reads what it needs back from the journal or the target).  The record it returns is the frozen
dataclass of what it did (``step_records``), journaled as the state's ``done`` line.  Also here: the
halt, the callback types, a server model without a connection, and the checks several steps make.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tuner.core.errors import MoveError
from tuner.core.sandbox import SandboxState
from tuner.core.server import ServerModel, model_from_variables

from datadir_mover.move.copy import Manifest
from datadir_mover.move.journal import Journal, crash_point
from datadir_mover.move.plan import Plan

Echo = Callable[[str], None]
ProgressFactory = Callable[[str, int], Callable[[int], None]]  # (description, total bytes) -> advance(n)


class MoveHalted(MoveError):
    """The move stopped where it is, on purpose; the journal is kept for resume or rollback."""


def quiet(_: str) -> None:
    pass


def no_progress(_: str, __: int) -> Callable[[int], None]:
    return lambda n: None


def model_stub(plan: Plan) -> ServerModel:
    """Enough of the server model to name a component's files without connecting (rollback, finalize)."""
    s = plan.server
    return model_from_variables({"version": s["version"], "version_comment": s["flavor"],
                                 "datadir": s["datadir"], "innodb_page_size": s["page_size"],
                                 "innodb_data_file_path": s.get("data_file_path", "ibdata1:12M:autoextend"),
                                 "innodb_undo_tablespaces": s.get("undo_tablespaces", "")})


@dataclass(frozen=True)
class MoveContext:
    """The move a step works on: what it reads, never what it remembers (that is ``PassCache``)."""

    plan: Plan
    journal: Journal
    control: Any  # the server's control (``control.SandboxControl`` or ``SystemdControl``): start, stop, state
    echo: Echo
    progress: ProgressFactory
    max_write_block_s: float  # longest block of commits before the stop (``executor.MAX_WRITE_BLOCK_S``)


@dataclass
class PassCache:
    """What this process learned beyond the journal (memory only: a restarted mover starts empty)."""

    precopy: Manifest | None = None  # the last pre-copy pass, with its block digests
    copied: Manifest | None = None  # COPY's manifest, with the block digests it verified
    verified_here: bool = False  # this process ran VERIFY: it vouches for the target files whose stat held


def require_stopped(ctx: MoveContext, state: str) -> None:
    """Halt when the server runs during a step that needs it stopped (something restarted it)."""
    now = ctx.control.state()
    if now != SandboxState.STOPPED:
        raise MoveHalted(f"{ctx.control.describe()} is {now.value} during the offline {state} step, where it "
                         f"must be stopped (something restarted it?); stop it "
                         f"({ctx.plan.control['stop_hint']}) and run "
                         f"`innotier move resume --id {ctx.plan.move_id}`")


def after_first(state: str) -> Callable[[str], None]:
    """A copy's per-file hook: the ``STATE:mid`` crash point once the first file is done (tests)."""
    fired = {"done": False}

    def hook(_: str) -> None:
        if not fired["done"]:
            fired["done"] = True
            crash_point(f"{state}:mid")
    return hook
