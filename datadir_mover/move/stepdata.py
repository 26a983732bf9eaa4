"""Typed views of what each step wrote into its journal ``done`` record.

A step's record is a JSON object; readers used to dig into it with ``(data or {}).get(key, 0) or 0``.
Each view here names the fields a reader may rely on, with their defaults when the step is not done
(or was done by an older mover that did not record a field).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from datadir_mover.move.journal import Journal

T = TypeVar("T")


def _view(cls: type[T], data: dict[str, Any] | None) -> T:
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in (data or {}).items() if k in names and v is not None})


@dataclass
class PrecopyData:
    passes: list[dict[str, Any]] = field(default_factory=list)
    preflush: dict[str, Any] | None = None

    @classmethod
    def of(cls, journal: Journal) -> "PrecopyData":
        return _view(cls, journal.data("PRECOPY"))


@dataclass
class ShutdownData:
    stop_began_at: float = 0.0
    stopped_at: float = 0.0
    read_lock_at: float = 0.0
    commits_waiting_at_stop: int = 0  # -1: unknown
    preflush: dict[str, Any] = field(default_factory=dict)
    last_pass: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, journal: Journal) -> "ShutdownData":
        return _view(cls, journal.data("SHUTDOWN"))


@dataclass
class StartData:
    started_at: float = 0.0
    start_seconds: float = 0.0

    @classmethod
    def of(cls, journal: Journal) -> "StartData":
        return _view(cls, journal.data("START"))
