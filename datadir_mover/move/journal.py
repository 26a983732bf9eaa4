"""The mover's journal: an append-only, fsynced record of how far a move got.

Semantics (the contract ``resume`` and ``rollback`` rely on)
-----------------------------------------------------------
A move lives in ``$INNOTIER_HOME/moves/<move id>/``: ``plan.json`` (written once, atomically,
before the journal's first record), ``journal.log`` and the files the steps save there
(previous option files, checksums taken before shutdown, copy manifests), every one named in
``side_files.py``.  The states are ``State``; a record holds its value, so neither ever changes.

``journal.log`` holds one JSON object a line: ``{"state": S, "event": "begin"|"done", "at": t, ...}``.
Each line is appended and fsynced (``tuner.core.durable.append_line_durable``) *before* the
work it announces starts (``begin``) and *after* that work is durable (``done``).  A line
torn by a crash is a record that never became durable, so the work it announced was not
begun (``begin``) or is run again (``done``; every step is idempotent): it is skipped and
the records after it are read (an appender of an older innotier wrote the next record on
the torn line's end: that record is recovered from the line).  Before the next append the
torn tail is cut, with a warning, so every record starts on its own line.

States, in order: PLAN -> PRECOPY (optional, server running) -> SHUTDOWN -> COPY -> VERIFY
-> SWITCH -> START -> VERIFY_SERVER -> COMMIT, and later FINALIZE (removes the source).
ROLLBACK can follow any state before COMMIT.

- ``S done`` as the last record: S is complete; ``resume`` carries on with the next state.
- ``S begin`` as the last record: S may be partly done; ``resume`` runs S again from its
  start (every step is idempotent: copies overwrite only the move's own files, option
  files are rewritten whole, stop/start check the server's state first).
- ``rollback`` is defined from every state before COMMIT, once ``good_copy.for_rollback`` found
  the source whole (as at the stop, or moved on); otherwise it refuses before anything is removed,
  naming the good copy.  Then: stop the server if it may be
  running on the new location (SWITCH begun), put back the saved option files (and
  sandbox record) and remove the AppArmor rules, remove the files the move wrote into the
  target, start the server on the old location if it was running when the move began,
  and verify it.  Once the server has accepted connections on the target (``since-start.json``
  exists, see ``since_start.py``) a rollback discards what clients committed there, so it
  runs only with ``--discard-writes-since-start`` and no automatic path takes it.  After
  COMMIT there is nothing to roll back (moving back is a new move), unless the move's proof
  failed: then the same explicit rollback returns to the source as it was at the stop.
- ``finalize`` is only allowed after COMMIT and once the proof passed (``proof.py``): it
  removes the source files (FINALIZE begin,
  one file at a time, FINALIZE done); a crash inside it is resumed by ``finalize`` again.
- ROLLBACK done, FINALIZE done: the move is closed.

Only one process works on a move at a time: it holds ``flock`` on ``lock`` (released by the
kernel when the process dies, so a SIGKILLed mover never blocks its own resume), and one move
works on a server at a time (``server_lock.py``).

Crash injection (tests): with ``INNOTIER_MOVE_CRASH_AT=STATE:event`` (event ``begin``,
``done`` or ``mid``), the process kills itself with SIGKILL right after that record is
durable (``mid``: after the step's first unit of work), which is what a power cut or an
OOM kill looks like to the journal.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from tuner.core.durable import append_line_durable, write_json_atomic
from tuner.core.errors import MoveError
from tuner.core.filelock import set_holder, try_lock
from tuner.core.paths import innotier_home

from datadir_mover import journal_lookup
from datadir_mover.move import side_files



class State(StrEnum):
    """A journal record's state; its value is what the record holds on disk (never change one)."""

    PLAN = "PLAN"
    PRECOPY = "PRECOPY"
    SHUTDOWN = "SHUTDOWN"
    COPY = "COPY"
    VERIFY = "VERIFY"
    SWITCH = "SWITCH"
    START = "START"
    VERIFY_SERVER = "VERIFY_SERVER"
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    FINALIZE = "FINALIZE"
    # ends a move whose sandbox is destroyed, from any phase but rolled back: the files the move placed in the
    # target belong to the sandbox and are removed; nothing is left to resume or finalize
    CLOSE = "CLOSE"


STATES = (State.PLAN, State.PRECOPY, State.SHUTDOWN, State.COPY, State.VERIFY, State.SWITCH, State.START,
          State.VERIFY_SERVER, State.COMMIT)  # the forward path, in order
OFFLINE_STATES = (State.COPY, State.VERIFY, State.SWITCH)  # the server must be stopped while these run
AFTER_COMMIT = (State.FINALIZE,)
CRASH_ENV = "INNOTIER_MOVE_CRASH_AT"


def crash_point(name: str) -> None:
    """Test hook: SIGKILL this process when ``name`` (``STATE:event``) is the configured crash point."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class Record:
    state: str
    event: str
    at: float
    data: dict[str, Any]


RECORD_START = '{"at": '  # every record is written with sorted keys, so it starts so


def _record_of(text: str) -> Record | None:
    try:
        obj = json.loads(text)
        return Record(obj.pop("state"), obj.pop("event"), float(obj.pop("at")), obj)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _parse(line: str, whole: bool = False) -> Record | None:
    """The record on ``line``; on a torn line (unless ``whole``), the whole record written after the torn part."""
    rec = _record_of(line)
    if rec is not None or whole:
        return rec
    at = line.find(RECORD_START, 1)
    while at > 0:
        if (rec := _record_of(line[at:])) is not None:
            return rec
        at = line.find(RECORD_START, at + 1)
    return None


class Journal:
    """One move's journal (see the module docstring for the semantics)."""

    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)
        self.path = self.dir / side_files.JOURNAL
        self._lock_fd: int | None = None

    # -- creation and reading ------------------------------------------------

    @classmethod
    def create(cls, directory: str | os.PathLike, plan: dict[str, Any]) -> "Journal":
        d = Path(directory)
        if (d / side_files.JOURNAL).exists():
            raise MoveError(f"a move journal already exists in {d}; resume it or roll it back")
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
        write_json_atomic(d / side_files.PLAN, plan, mode=0o600)
        return cls(d)

    def plan(self) -> dict[str, Any]:
        return json.loads((self.dir / side_files.PLAN).read_text())

    def records(self) -> list[Record]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(errors="replace").splitlines():
            rec = _parse(line)
            if rec is not None:
                out.append(rec)
        return out

    def torn_lines(self) -> int:
        """How many lines do not hold a whole record (each one a write a crash cut short)."""
        if not self.path.exists():
            return 0
        return sum(1 for line in self.path.read_text(errors="replace").splitlines() if _parse(line, whole=True) is None)

    def last(self) -> Record | None:
        recs = self.records()
        return recs[-1] if recs else None

    def done(self, state: str) -> bool:
        return any(r.state == state and r.event == "done" for r in self.records())

    def began(self, state: str) -> bool:
        return any(r.state == state and r.event == "begin" for r in self.records())

    def data(self, state: str) -> dict[str, Any]:
        """The data of the last ``done`` record of ``state`` (empty when not done)."""
        for r in reversed(self.records()):
            if r.state == state and r.event == "done":
                return r.data
        return {}

    @property
    def phase(self) -> str:
        """open, committed, finalized, rolled_back or closed (its sandbox was destroyed)."""
        if self.done(State.CLOSE):
            return "closed"
        if self.done(State.ROLLBACK):
            return "rolled_back"
        if self.done(State.FINALIZE):
            return "finalized"
        if self.done(State.COMMIT):
            return "committed"
        return "open"

    def next_state(self) -> str | None:
        """The state ``resume`` runs next (None when COMMIT is done)."""
        last = self.last()
        if last is None:
            return State.PLAN
        if last.state in STATES:
            i = STATES.index(last.state)
            if last.event == "begin":
                return last.state
            return STATES[i + 1] if i + 1 < len(STATES) else None
        return None

    def describe(self) -> str:
        last = self.last()
        if last is None:
            return "empty journal (nothing was done)"
        phase = self.phase
        if phase == "closed":
            return (f"closed: {self.plan()['control']['describe']} was destroyed and the files it owned in "
                    f"{self.plan()['target_dir']} were removed")
        if phase == "rolled_back":
            return "rolled back: the server uses the old location"
        if phase == "finalized":
            return "finalized: the server uses the new location and the source was removed"
        if phase == "committed" and last.state == State.FINALIZE:
            return "committed; finalize was interrupted: run `innotier move finalize` again"
        if phase == "committed":
            return "committed: the server uses the new location; the source stays until `innotier move finalize`"
        if last.state == State.ROLLBACK:
            return "rollback was interrupted: run `innotier move rollback` again"
        if last.event == "begin":
            return (f"stopped inside {last.state} (began, not done): run `innotier move resume` to carry on "
                    f"or `innotier move rollback` to go back")
        return (f"stopped after {last.state}: run `innotier move resume` to carry on "
                f"or `innotier move rollback` to go back")

    # -- writing -----------------------------------------------------------

    def _cut_torn_tail(self) -> None:
        """A last line without its newline was torn by a crash: cut it, so the next record starts a line."""
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return
        try:
            size = os.fstat(fd).st_size
            if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
                return
            data = os.pread(fd, size, 0)
            keep = data.rfind(b"\n") + 1
            print(f"innotier: warning: {self.path} ends in a record torn by a crash ({size - keep} bytes, never "
                  "durable): cut", file=sys.stderr)
            os.ftruncate(fd, keep)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _append(self, state: str, event: str, data: dict[str, Any]) -> None:
        self._cut_torn_tail()
        rec = {"state": state, "event": event, "at": time.time(), **data}
        append_line_durable(self.path, json.dumps(rec, sort_keys=True, default=str))
        crash_point(f"{state}:{event}")

    def begin(self, state: str, **data: Any) -> None:
        self._append(state, "begin", data)

    def finish(self, state: str, **data: Any) -> None:
        self._append(state, "done", data)

    # -- one worker at a time ----------------------------------------------------

    def lock(self) -> None:
        fd = try_lock(self.dir / side_files.WORK_LOCK)
        if fd is None:
            raise MoveError(f"move {self.dir.name} is being worked on by another innotier process; "
                            "wait for it to finish (see `innotier move status`)")
        set_holder(fd, str(os.getpid()))
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- side files ----------------------------------------------------------------

    def save_json(self, name: str, obj: Any) -> None:
        write_json_atomic(self.dir / name, obj, mode=0o600)

    def load_json(self, name: str) -> Any | None:
        p = self.dir / name
        return json.loads(p.read_text()) if p.exists() else None


def moves_dir() -> Path:
    return innotier_home() / "moves"


def all_journals() -> list[Journal]:
    return journal_lookup.journals_in(moves_dir(), Journal)


def find(move_id: str | None, phases: tuple[str, ...]) -> Journal:
    """The move named ``move_id``, or the only one in one of ``phases`` (the rule `table-move` shares)."""
    return journal_lookup.find(moves_dir(), move_id, phases, open_journal=Journal, phase_of=lambda j: j.phase,
                               noun="move", status_command="innotier move status")
