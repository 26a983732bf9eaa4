"""What each step of a move did: one frozen record per journal state.

A step returns its record (``executor.HANDLERS``; ROLLBACK, CLOSE and FINALIZE in ``rollback_steps`` and
``finalize_step``); the state's ``done`` line holds ``record.to_journal()``, and whoever reads what a step did
(the executor's summary, the CLI, ``timings``, a later step, tests) takes it back as ``XRecord.of(journal)``.

The journal's lines are what they always were: ``to_journal`` gives exactly the dict each step wrote before
it had a record, so an older mover's journal resumes and a newer one's reads the same.  ``from_journal``
reads any of those dicts: a field an older mover did not write, written as null, or of a state not done yet,
keeps its default, and a key it does not know is dropped.  A field a step writes only sometimes is None when
the step did not write it, and then left out of the dict (``_written``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from datadir_mover.move.journal import Journal, State
from datadir_mover.move.server_check import ServerCheck
from datadir_mover.move.server_check.waiting_commits import AtStop

R = TypeVar("R", bound="StepRecord")


def _known(cls: type, data: dict[str, Any] | None, *skip: str) -> dict[str, Any]:
    """The keys of ``data`` that name a field of ``cls`` (not in ``skip``), nulls left out: keyword arguments."""
    names = {f.name for f in fields(cls)} - set(skip)
    return {k: v for k, v in (data or {}).items() if k in names and v is not None}


def _written(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the fields the step did not write (None)."""
    return {k: v for k, v in data.items() if v is not None}


class StepRecord:
    """A step's ``done`` record: ``to_journal`` writes it, ``of`` / ``from_journal`` read it back."""

    STATE: ClassVar[str]

    @classmethod
    def of(cls: type[R], journal: Journal) -> R:
        """The last ``done`` record of this state in ``journal`` (all defaults when the state is not done)."""
        return cls.from_journal(journal.data(cls.STATE))

    @classmethod
    def from_journal(cls: type[R], data: dict[str, Any] | None) -> R:
        return cls(**_known(cls, data))

    def to_journal(self) -> dict[str, Any]:
        return _written({f.name: getattr(self, f.name) for f in fields(self)})


@dataclass(frozen=True)
class PlanRecord(StepRecord):
    """PLAN saves what SWITCH overwrites in a side file (``side_files.BEFORE``); its record holds nothing."""

    STATE: ClassVar[str] = State.PLAN


@dataclass(frozen=True)
class PassRecord:
    """One online copy pass: PRECOPY's, or SHUTDOWN's last one under the block."""

    number: int = 0  # "pass" in the journal
    began_at: float = 0.0
    seconds: float = 0.0
    files_changed: int = 0
    files_delta: int = 0  # of those, copied as block deltas
    bytes_written: int = 0
    files_unchanged: int = 0

    @classmethod
    def from_journal(cls, data: dict[str, Any] | None) -> "PassRecord":
        data = data or {}
        return cls(number=int(data.get("pass") or 0), **_known(cls, data, "number"))

    def to_journal(self) -> dict[str, Any]:
        return {"pass": self.number, "began_at": self.began_at, "seconds": self.seconds,
                "files_changed": self.files_changed, "files_delta": self.files_delta,
                "bytes_written": self.bytes_written, "files_unchanged": self.files_unchanged}


@dataclass(frozen=True)
class PrecopyRecord(StepRecord):
    """The online passes, the pre-flush between them and the downtime they leave to expect."""

    STATE: ClassVar[str] = State.PRECOPY
    passes: tuple[PassRecord, ...] = ()
    files: int = 0  # what the first pass copied (everything)
    bytes: int = 0
    seconds: float = 0.0  # all passes
    preflush: dict[str, Any] | None = None  # preflush.PreflushResult.to_dict() and settings_restored, or skipped
    expected_copy_s: float = 0.0
    expected_downtime_s: float = 0.0
    skipped: bool = False  # a move without --precopy: the executor journals the state skipped

    @classmethod
    def from_journal(cls, data: dict[str, Any] | None) -> "PrecopyRecord":
        data = data or {}
        passes = tuple(PassRecord.from_journal(p) for p in data.get("passes") or [])
        return cls(passes=passes, **_known(cls, data, "passes"))

    def to_journal(self) -> dict[str, Any]:
        if self.skipped:
            return {"skipped": True}
        return {"passes": [p.to_journal() for p in self.passes], "files": self.files, "bytes": self.bytes,
                "seconds": self.seconds, "preflush": self.preflush, "expected_copy_s": self.expected_copy_s,
                "expected_downtime_s": self.expected_downtime_s}


@dataclass(frozen=True)
class LastPass:
    """SHUTDOWN's last pass under the block: the flush and the pass, or why they were skipped."""

    flush: dict[str, Any]  # preflush.PreflushResult.to_dict() ({} when no flush ran)
    flush_settings_restored: bool | None  # flush_settings.put_back (None: there was nothing to put back)
    skipped: str | None = None  # why no pass ran (then the flush's fields sit beside it in the journal)
    pass_record: PassRecord | None = None
    seconds: float | None = None  # the flush and the pass

    @classmethod
    def from_journal(cls, data: dict[str, Any]) -> "LastPass":
        restored = data.get("flush_settings_restored")
        last = data["last_pass"]
        if "pass" in last:
            return cls(last.get("flush") or {}, restored, pass_record=PassRecord.from_journal(last["pass"]),
                       seconds=last.get("seconds"))
        return cls({k: v for k, v in last.items() if k != "skipped"}, restored, skipped=last.get("skipped"))

    def to_journal(self) -> dict[str, Any]:
        if self.pass_record is None:
            last = {**self.flush, "skipped": self.skipped}
        else:
            last = {"flush": self.flush, "pass": self.pass_record.to_journal(), "seconds": self.seconds}
        return {"last_pass": last, "flush_settings_restored": self.flush_settings_restored}


@dataclass(frozen=True)
class ShutdownRecord(StepRecord):
    """How the server was stopped: when, what was read under the block, the commits waiting on it."""

    STATE: ClassVar[str] = State.SHUTDOWN
    stop_began_at: float = 0.0
    stopped_at: float = 0.0
    note: str | None = None  # the server was already stopped: nothing read before the move
    preflush: dict[str, Any] | None = None  # the flush before the block (preflush.PreflushResult.to_dict())
    read_lock_at: float | None = None  # commits blocked from then on
    block: str | None = None  # the block was not obtained: why
    tables: int | None = None  # tables sampled (or checksummed) under the block
    read_seconds: float | None = None
    last_pass: LastPass | None = None
    waiting_at_stop: AtStop | None = None  # None: the block was not held at the stop

    def commits_at_stop(self) -> AtStop:
        """The commits that waited on the block as the stop began (none when it was not held)."""
        return self.waiting_at_stop or AtStop()

    @classmethod
    def from_journal(cls, data: dict[str, Any] | None) -> "ShutdownRecord":
        data = data or {}
        last = LastPass.from_journal(data) if "last_pass" in data else None
        at_stop = AtStop.from_journal(data) if "commits_waiting_at_stop" in data else None
        return cls(last_pass=last, waiting_at_stop=at_stop, **_known(cls, data, "last_pass", "waiting_at_stop"))

    def to_journal(self) -> dict[str, Any]:
        out = _written({"stop_began_at": self.stop_began_at, "stopped_at": self.stopped_at, "note": self.note,
                        "preflush": self.preflush, "read_lock_at": self.read_lock_at, "block": self.block,
                        "tables": self.tables, "read_seconds": self.read_seconds})
        if self.last_pass is not None:
            out.update(self.last_pass.to_journal())
        if self.waiting_at_stop is not None:
            out.update(self.waiting_at_stop.to_journal())
        return out


@dataclass(frozen=True)
class CopyRecord(StepRecord):
    """The offline copy: what it wrote, and (after a pre-copy) what it could keep."""

    STATE: ClassVar[str] = State.COPY
    files: int = 0  # files copied
    bytes: int = 0  # bytes written
    # the rest only when the component has files to copy (a tmpdir move writes files and bytes, both 0)
    files_delta: int | None = None  # of the files copied, those copied as block deltas
    bytes_read: int | None = None
    files_unchanged_since_precopy: int | None = None
    bytes_unchanged_since_precopy: int | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class VerifyRecord(StepRecord):
    """The copy read back from the target, and the state of the proof recorded then."""

    STATE: ClassVar[str] = State.VERIFY
    files: int = 0
    seconds: float = 0.0
    proof: str | None = None  # proof.Proof.status


@dataclass(frozen=True)
class SwitchRecord(StepRecord):
    """The placement written and the unit drop-in applied."""

    STATE: ClassVar[str] = State.SWITCH
    placement_file: str | None = None
    unit_dropin: str | None = None  # None: a sandbox, or a unit needing no drop-in

    def to_journal(self) -> dict[str, Any]:
        return {"placement_file": self.placement_file, "unit_dropin": self.unit_dropin}


@dataclass(frozen=True)
class StartRecord(StepRecord):
    """When the server accepted connections on the target, and the target checked before that start."""

    STATE: ClassVar[str] = State.START
    started_at: float = 0.0
    start_seconds: float = 0.0  # the start itself (0: it was running already)
    target_files_checked: int | None = None  # target_check.require_as_verified, on the first start only
    target_files_read_again: int | None = None


@dataclass(frozen=True)
class VerifyServerRecord(StepRecord):
    """The post-start check (``server_check.ServerCheck``): on the target at VERIFY_SERVER, on the source in a
    rollback's record."""

    STATE: ClassVar[str] = State.VERIFY_SERVER
    locations_ok: bool = False
    location: str | None = None
    tables: int = 0
    checksum_problems: tuple[str, ...] = ()
    schema_checks: dict[str, dict[str, str]] = field(default_factory=dict)  # one key each in the journal
    mode: str = ""
    changed_since_start: tuple[str, ...] = ()
    row_writes_since_start: int = 0
    changed_at_stop: tuple[str, ...] = ()
    commits_waiting_at_stop: int = 0
    file_proof: str = ""
    pending_proof: bool = False
    seconds: float = 0.0
    ok: bool = False

    @classmethod
    def of_check(cls, check: ServerCheck) -> "VerifyServerRecord":
        return cls(check.locations_ok, check.location, check.tables, tuple(check.checksum_problems),
                   dict(check.schema_checks), check.mode, tuple(check.changed_since_start),
                   check.row_writes_since_start, tuple(check.changed_at_stop), check.commits_waiting_at_stop,
                   check.file_proof, check.pending_proof, round(check.seconds, 3), check.ok)

    @classmethod
    def from_journal(cls, data: dict[str, Any] | None) -> "VerifyServerRecord":
        data = data or {}
        names = {f.name for f in fields(cls)}
        schema = {k: v for k, v in data.items() if k not in names and isinstance(v, dict)}
        known = {k: tuple(v) if isinstance(v, list) else v for k, v in _known(cls, data, "schema_checks").items()}
        return cls(schema_checks=schema, **known)

    def to_journal(self) -> dict[str, Any]:
        return {"locations_ok": self.locations_ok, "location": self.location, "tables": self.tables,
                "checksum_problems": list(self.checksum_problems), **self.schema_checks, "mode": self.mode,
                "changed_since_start": list(self.changed_since_start),
                "row_writes_since_start": self.row_writes_since_start, "changed_at_stop": list(self.changed_at_stop),
                "commits_waiting_at_stop": self.commits_waiting_at_stop, "file_proof": self.file_proof,
                "pending_proof": self.pending_proof, "seconds": self.seconds, "ok": self.ok}


@dataclass(frozen=True)
class CommitRecord(StepRecord):
    """The move's timings as COMMIT found them (``timings.timings``; those not known are left out)."""

    STATE: ClassVar[str] = State.COMMIT
    downtime_s: float | None = None
    until_verified_s: float | None = None
    writes_blocked_s: float | None = None
    downtime_breakdown: dict[str, float] | None = None


@dataclass(frozen=True)
class RollbackRecord(StepRecord):
    """What a rollback removed from the target, whether it started the server, and the check on the source."""

    STATE: ClassVar[str] = State.ROLLBACK
    removed: int = 0
    started: bool = False
    check: VerifyServerRecord | None = None  # None: the server was not running, nothing to check

    @classmethod
    def from_journal(cls, data: dict[str, Any] | None) -> "RollbackRecord":
        data = data or {}
        check = VerifyServerRecord.from_journal(data["check"]) if data.get("check") else None
        return cls(check=check, **_known(cls, data, "check"))

    def to_journal(self) -> dict[str, Any]:
        return {"removed": self.removed, "started": self.started,
                "check": self.check.to_journal() if self.check is not None else {}}


@dataclass(frozen=True)
class CloseRecord(StepRecord):
    """A destroyed sandbox's move closed: the entries it owned in the target removed."""

    STATE: ClassVar[str] = State.CLOSE
    removed: int = 0


@dataclass(frozen=True)
class FinalizeRecord(StepRecord):
    """The source entries removed, and those kept because they changed since the copy."""

    STATE: ClassVar[str] = State.FINALIZE
    removed: int = 0
    kept: tuple[str, ...] = ()

    @classmethod
    def from_journal(cls, data: dict[str, Any] | None) -> "FinalizeRecord":
        data = data or {}
        return cls(kept=tuple(data.get("kept") or ()), **_known(cls, data, "kept"))

    def to_journal(self) -> dict[str, Any]:
        return {"removed": self.removed, "kept": list(self.kept)}


# the record each state's step returns (tests/move/test_step_records.py holds every one to its journal dict)
RECORDS: dict[str, type[StepRecord]] = {r.STATE: r for r in (
    PlanRecord, PrecopyRecord, ShutdownRecord, CopyRecord, VerifyRecord, SwitchRecord, StartRecord,
    VerifyServerRecord, CommitRecord, RollbackRecord, CloseRecord, FinalizeRecord)}
