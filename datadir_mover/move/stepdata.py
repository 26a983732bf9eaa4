"""Typed views of what each step wrote into its journal ``done`` record.

A step's record is a JSON object; readers used to dig into it with ``(data or {}).get(key, 0) or 0``.
Each view here names the fields a reader may rely on, with their defaults when the step is not done
(or was done by an older mover that did not record a field).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from datadir_mover.move.journal import Journal, State

T = TypeVar("T", bound="StepView")


class StepView:
    """A step's ``done`` record, known fields only (a missing or null field keeps its default)."""

    STATE: ClassVar[str]

    @classmethod
    def of(cls: type[T], journal: Journal) -> T:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in journal.data(cls.STATE).items() if k in names and v is not None})


@dataclass
class PrecopyData(StepView):
    STATE: ClassVar[str] = State.PRECOPY
    passes: list[dict[str, Any]] = field(default_factory=list)
    preflush: dict[str, Any] | None = None


@dataclass
class ShutdownData(StepView):
    STATE: ClassVar[str] = State.SHUTDOWN
    stop_began_at: float = 0.0
    stopped_at: float = 0.0
    read_lock_at: float = 0.0
    commits_waiting_at_stop: int = 0  # -1: unknown
    waiting_commits: list[dict[str, Any]] = field(default_factory=list)  # waiting_commits.AtStop.to_journal
    preflush: dict[str, Any] = field(default_factory=dict)
    last_pass: dict[str, Any] = field(default_factory=dict)


@dataclass
class StartData(StepView):
    STATE: ClassVar[str] = State.START
    started_at: float = 0.0
    start_seconds: float = 0.0
