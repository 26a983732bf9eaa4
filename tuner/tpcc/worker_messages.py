"""What a driver worker process tells the parent, over one queue, in this order:
``Ready`` (or ``Failed``), then ``Tick`` per schedule point, then ``Lost`` if the server stayed away, then ``Done``."""

from __future__ import annotations

from typing import Any, NamedTuple


class Ready(NamedTuple):
    worker: int
    pid: int


class Failed(NamedTuple):
    """A terminal of the worker could not connect: the run cannot start."""

    worker: int
    message: str


class Tick(NamedTuple):
    worker: int
    index: int  # position in the run's schedule
    snapshot: dict[str, Any]  # Measurement.snapshot(): the delta since the previous tick


class Lost(NamedTuple):
    """The server stayed away longer than the outage limit: the run must end."""

    worker: int
    reason: str
    snapshot: dict[str, Any]  # everything not shipped yet


class Done(NamedTuple):
    worker: int
    info: dict[str, Any]  # resource use, error messages, reconnects, outages; "final": the last attempts


WorkerMessage = Ready | Failed | Tick | Lost | Done
