"""Driver shards: one TPC-C run split over several client processes or hosts.

``tpcc run --shard I/N --start-at TIME --clients C`` runs shard I (0-based, as a Kubernetes Indexed Job's
completion index) of N: its share of the C terminals, homed on its own contiguous block of warehouses
(disjoint from every other shard's; remote warehouses for Payment and New-Order still range over all of
them, as TPC-C 2.4.1.5 and 2.5.1.2 ask), starting its warm-up at the shared wall-clock TIME so that every
shard's intervals line up.  ``tuner.fleet.merge`` folds the shards' results into one RunResult.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass
from typing import Any

from tuner.core.errors import UsageError
from tuner.core.measure import Measurement
from tuner.tpcc.schema import DISTRICTS_PER_W

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    index: int  # 0-based
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        m = _SHARD.match(text or "")
        if not m:
            raise UsageError(f"--shard {text!r} is not valid; give I/N with 0 <= I < N, e.g. --shard 0/2")
        i, n = int(m.group(1)), int(m.group(2))
        if n < 1 or not 0 <= i < n:
            raise UsageError(f"--shard {text} is out of range; I counts from 0 to N-1 (e.g. 0/2 and 1/2)")
        return cls(i, n)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def warehouses(self, total: int) -> tuple[int, int]:
        """This shard's home warehouses, first and last (1-based, inclusive), a contiguous block."""
        if total < self.count:
            raise UsageError(f"{self.count} shards need at least {self.count} warehouses for disjoint home "
                             f"ranges but {total} are used; load more warehouses or run fewer shards")
        return self.index * total // self.count + 1, (self.index + 1) * total // self.count

    def clients(self, total: int) -> int:
        """This shard's share of the fleet's ``total`` terminals (shares differ by at most one)."""
        if total < self.count:
            raise UsageError(f"--clients {total} is fewer than the {self.count} shards; give at least one "
                             "client per shard")
        return total // self.count + (1 if self.index < total % self.count else 0)

    def to_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


def home_of(local: int, first: int, last: int) -> tuple[int, int]:
    """(warehouse, district) of the shard's ``local``-th terminal: round-robin over its own warehouses."""
    span = last - first + 1
    return first + local % span, (local // span) % DISTRICTS_PER_W + 1


def parse_start_at(text: str, now: float | None = None) -> float:
    """Epoch seconds from ``--start-at``: epoch seconds, ISO 8601 with a zone, or ``+S`` (S seconds from now)."""
    now = time.time() if now is None else now
    t = (text or "").strip()
    try:
        if t.startswith("+"):
            return now + float(t[1:])
        return float(t)
    except ValueError:
        pass
    try:
        d = dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--start-at {text!r} is not a time; give epoch seconds, ISO 8601 with a zone "
                         "(2026-11-23T13:00:00Z) or +SECONDS") from None
    if d.tzinfo is None:
        raise UsageError(f"--start-at {text!r} has no time zone; add Z or +00:00 so every shard reads the same instant")
    return d.timestamp()


class ShardMeasurement(Measurement):
    """A Measurement that also keeps each closed interval's latency histograms, so that shards' intervals
    merge exactly (the timeline itself keeps only percentiles, which do not add up)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.interval_histograms: list[dict[str, dict]] = []

    def close_interval(self):
        if self.phase == "measure":  # called from the parent's merge loop, which also does every merge
            self.interval_histograms.append({op: h.to_dict() for op, h in self.interval.items() if h.count})
        return super().close_interval()
