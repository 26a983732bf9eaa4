"""The measurement object: the one place run numbers are recorded.

The TPC-C driver calls ``Measurement.record(op, seconds, outcome)`` around each
transaction.  Everything else -- the console, the JSON result, the Prometheus
exporter, the results database -- reads snapshots of the same object; nothing
keeps its own count.

Latency goes into ``LatencyHistogram``: log-linear buckets of about 1% relative
width from 1 microsecond to 1000 seconds (an HDR-style histogram: fixed memory,
O(1) record, mergeable across processes, percentiles within 1%), never a list of
samples.  Each op has two histograms: one for the whole measured run and one for
the current report interval (reset at each interval), as go-tpc does.  A transaction
that ends in an error has its latency (from its first attempt) in a third,
``error_total``, like go-tpc's ``<op>_ERR`` rows; retried attempts are counted but
carry no latency of their own (the final outcome carries the whole time).

tpmC counts New-Orders that completed, committed or rolled back (TPC-C 5.4.1:
the 1% rolled back on an unused item are completed business transactions).

Worker processes each own a Measurement and ship ``snapshot()`` dicts to the
parent, which ``merge()``s them; the histogram counts are plain lists so they
pickle and JSON-encode cheaply.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

OPS = ("new_order", "payment", "order_status", "delivery", "stock_level")
OUTCOMES = ("commit", "rollback", "retry", "error")
PERCENTILES = (50.0, 90.0, 95.0, 99.0)

_MIN_US = 1.0
_GROWTH = 1.01
_LOG_GROWTH = math.log(_GROWTH)
_NBUCKETS = int(math.log(1e9 / _MIN_US) / _LOG_GROWTH) + 2  # 1 us .. 1000 s


def bucket_index(seconds: float) -> int:
    us = seconds * 1e6
    if us <= _MIN_US:
        return 0
    i = int(math.log(us / _MIN_US) / _LOG_GROWTH) + 1
    return i if i < _NBUCKETS else _NBUCKETS - 1


def bucket_upper_seconds(i: int) -> float:
    """Upper bound of bucket i in seconds."""
    return _MIN_US * (_GROWTH ** i) / 1e6


class LatencyHistogram:
    """Fixed-size log-linear latency histogram (about 1% resolution)."""

    __slots__ = ("counts", "count", "sum", "max", "min")

    def __init__(self) -> None:
        self.counts = [0] * _NBUCKETS
        self.count = 0
        self.sum = 0.0
        self.max = 0.0
        self.min = math.inf

    def record(self, seconds: float) -> None:
        self.counts[bucket_index(seconds)] += 1
        self.count += 1
        self.sum += seconds
        if seconds > self.max:
            self.max = seconds
        if seconds < self.min:
            self.min = seconds

    def merge(self, other: "LatencyHistogram | dict") -> None:
        if isinstance(other, dict):
            other = LatencyHistogram.from_dict(other)
        if not other.count:
            return
        c = self.counts
        for i, n in enumerate(other.counts):
            if n:
                c[i] += n
        self.count += other.count
        self.sum += other.sum
        self.max = max(self.max, other.max)
        self.min = min(self.min, other.min)

    def percentile(self, p: float) -> float:
        """The latency (seconds) at or below which p% of samples fall; upper bucket bound, capped at max."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(self.count * p / 100.0))
        seen = 0
        for i, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                return min(bucket_upper_seconds(i), self.max)
        return self.max

    def cumulative_le(self, bounds: Iterable[float]) -> list[int]:
        """Counts of samples <= each bound (for Prometheus histogram buckets)."""
        out = []
        bounds = list(bounds)
        j = 0
        running = 0
        for b in bounds:
            limit = bucket_index(b)
            while j <= limit and j < _NBUCKETS:
                running += self.counts[j]
                j += 1
            out.append(running)
        return out

    def summary_ms(self) -> dict[str, float]:
        d = {f"p{int(p) if p.is_integer() else p}": round(self.percentile(p) * 1e3, 3) for p in PERCENTILES}
        d["max"] = round(self.max * 1e3, 3)
        d["avg"] = round(self.sum / self.count * 1e3, 3) if self.count else 0.0
        d["count"] = self.count
        return d

    def to_dict(self) -> dict[str, Any]:
        nz = {i: n for i, n in enumerate(self.counts) if n}
        return {"buckets": nz, "count": self.count, "sum": self.sum, "max": self.max,
                "min": (self.min if self.count else 0.0)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LatencyHistogram":
        h = cls()
        for i, n in d.get("buckets", {}).items():
            h.counts[int(i)] = n
        h.count = d.get("count", 0)
        h.sum = d.get("sum", 0.0)
        h.max = d.get("max", 0.0)
        h.min = d.get("min", math.inf) if h.count else math.inf
        return h


def _counts() -> dict[str, dict[str, int]]:
    return {op: {o: 0 for o in OUTCOMES} for op in OPS}


@dataclass
class IntervalPoint:
    """One row of the per-interval timeline."""

    t: float  # seconds since the measured phase started (end of the interval)
    seconds: float  # length of the interval
    tpmc: float  # completed (committed + rolled-back) New-Orders per minute in this interval
    tpm_total: float  # all committed transactions per minute (client side)
    commits: dict[str, int]
    errors: int
    retries: int
    latency_ms: dict[str, dict[str, float]]  # op -> {p50,p90,p95,p99,max,avg,count}

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


class Measurement:
    """Counters and histograms of one run, thread-safe for the parent's merge and readers.

    Phases: ``warmup`` (recorded into counters labelled so, excluded from results),
    ``measure`` (counted), ``done``.  Listeners (the exporter) get each merged
    interval via ``subscribe``.
    """

    def __init__(self, ops: tuple[str, ...] = OPS) -> None:
        self.ops = ops
        self._lock = threading.Lock()
        self.phase = "warmup"
        self.started = time.time()
        self.measure_started: float | None = None
        self.measure_ended: float | None = None
        self.counts = _counts()  # measured phase only
        self.all_counts = _counts()  # warm-up included (monotonic; what counters export)
        self.total = {op: LatencyHistogram() for op in ops}
        self.interval = {op: LatencyHistogram() for op in ops}
        self.all_latency = {op: LatencyHistogram() for op in ops}  # warm-up included, for the exporter
        self.error_total = {op: LatencyHistogram() for op in ops}  # measured transactions that ended in an error
        self._error_delta = {op: LatencyHistogram() for op in ops}  # the same, since the last snapshot
        self.timeline: list[IntervalPoint] = []
        self._interval_counts = _counts()
        self._interval_started = time.monotonic()
        self._listeners: list[Callable[["Measurement"], None]] = []

    # -- recording (hot path in workers) -------------------------------------

    def record(self, op: str, seconds: float, outcome: str = "commit") -> None:
        """Record one transaction attempt: outcome is commit, rollback, retry or error."""
        self.all_counts[op][outcome] += 1
        if outcome in ("commit", "rollback"):
            self.all_latency[op].record(seconds)
        if self.phase != "measure":
            return
        self.counts[op][outcome] += 1
        self._interval_counts[op][outcome] += 1
        if outcome in ("commit", "rollback"):
            self.total[op].record(seconds)
            self.interval[op].record(seconds)
        elif outcome == "error":
            self.error_total[op].record(seconds)
            self._error_delta[op].record(seconds)

    # -- phases ---------------------------------------------------------------

    def start_measuring(self) -> None:
        with self._lock:
            self.phase = "measure"
            self.measure_started = time.time()
            self._interval_started = time.monotonic()
            self._interval_counts = _counts()
            for h in self.interval.values():
                h.__init__()

    def finish(self) -> None:
        with self._lock:
            if self.phase == "measure":
                self.measure_ended = time.time()
            self.phase = "done"

    # -- cross-process --------------------------------------------------------

    def snapshot(self, reset_interval: bool = True) -> dict[str, Any]:
        """What a worker ships to the parent: deltas since the last snapshot."""
        with self._lock:
            snap = {
                "all_counts": self.all_counts,
                "counts": self._interval_counts,
                "interval": {op: h.to_dict() for op, h in self.interval.items() if h.count},
                "all_latency": {op: h.to_dict() for op, h in self.all_latency.items() if h.count},
                "error_latency": {op: h.to_dict() for op, h in self._error_delta.items() if h.count},
            }
            if reset_interval:
                self.all_counts = _counts()
                self._interval_counts = _counts()
                self.interval = {op: LatencyHistogram() for op in self.ops}
                self.all_latency = {op: LatencyHistogram() for op in self.ops}
                self._error_delta = {op: LatencyHistogram() for op in self.ops}
            return snap

    def merge(self, snap: dict[str, Any], measured: bool | None = None) -> None:
        """Fold a worker's delta snapshot into this (parent) measurement."""
        measured = self.phase == "measure" if measured is None else measured
        with self._lock:
            for op, d in snap["all_counts"].items():
                for o, n in d.items():
                    self.all_counts[op][o] += n
            for op, d in snap.get("all_latency", {}).items():
                self.all_latency[op].merge(d)
            if not measured:
                return
            for op, d in snap["counts"].items():
                for o, n in d.items():
                    self.counts[op][o] += n
                    self._interval_counts[op][o] += n
            for op, d in snap.get("interval", {}).items():
                h = LatencyHistogram.from_dict(d)
                self.total[op].merge(h)
                self.interval[op].merge(h)
            for op, d in snap.get("error_latency", {}).items():
                self.error_total[op].merge(d)

    # -- intervals ------------------------------------------------------------

    def close_interval(self) -> IntervalPoint | None:
        """End the current report interval: append a timeline point and notify listeners."""
        with self._lock:
            now = time.monotonic()
            secs = max(now - self._interval_started, 1e-6)
            self._interval_started = now
            if self.phase != "measure":
                point = None
            else:
                c = self._interval_counts
                commits = {op: c[op]["commit"] for op in self.ops}
                point = IntervalPoint(
                    t=round(time.time() - (self.measure_started or time.time()), 3),
                    seconds=round(secs, 3),
                    tpmc=round((c["new_order"]["commit"] + c["new_order"]["rollback"]) * 60.0 / secs, 1),
                    tpm_total=round(sum(commits.values()) * 60.0 / secs, 1),
                    commits=commits,
                    errors=sum(c[op]["error"] for op in self.ops),
                    retries=sum(c[op]["retry"] for op in self.ops),
                    latency_ms={op: h.summary_ms() for op, h in self.interval.items() if h.count},
                )
                self.timeline.append(point)
                self._interval_counts = _counts()
                self.interval = {op: LatencyHistogram() for op in self.ops}
        for fn in list(self._listeners):
            fn(self)
        return point

    def subscribe(self, fn: Callable[["Measurement"], None]) -> None:
        self._listeners.append(fn)

    def read_cumulative(self) -> tuple[dict[str, dict[str, int]], dict[str, LatencyHistogram]]:
        """A consistent copy of the cumulative counters and latency histograms (warm-up included).

        For readers in other threads (the Prometheus exporter): taken under the
        lock the parent's ``merge`` holds, so counts and histograms agree.
        """
        with self._lock:
            counts = {op: dict(v) for op, v in self.all_counts.items()}
            hists = {}
            for op, h in self.all_latency.items():
                c = LatencyHistogram()
                c.counts = list(h.counts)
                c.count, c.sum, c.max, c.min = h.count, h.sum, h.max, h.min
                hists[op] = c
        return counts, hists

    # -- results --------------------------------------------------------------

    @property
    def measured_seconds(self) -> float:
        if self.measure_started is None:
            return 0.0
        return (self.measure_ended or time.time()) - self.measure_started

    def tpmc(self) -> float:
        """Completed New-Orders (committed + rolled back, TPC-C 5.4.1) per measured minute."""
        secs = self.measured_seconds
        no = self.counts["new_order"]
        return (no["commit"] + no["rollback"]) * 60.0 / secs if secs > 0 else 0.0

    def latency_summary_ms(self) -> dict[str, dict[str, float]]:
        return {op: h.summary_ms() for op, h in self.total.items() if h.count}


@dataclass
class RunResult:
    """The final result of one TPC-C run, whichever driver produced it.

    ``tpmc``: completed New-Orders (committed + rolled back, TPC-C 5.4.1) per minute over
    the measured window (client side).
    ``nopm``: HammerDB's New Orders Per Minute: growth of sum(district.d_next_o_id)
    per minute (server side); rolled-back New-Orders do not move it, so it is about 1% below tpmc.
    ``error_latency_ms``: per op, the latency (from the first attempt) of transactions that ended in an error.
    ``tpm``: HammerDB's TPM: growth of Com_commit + Com_rollback per minute
    (server-wide, so it includes other traffic).
    Fields an external driver does not report are None.
    """

    driver: str
    mode: str | None
    warehouses: int | None
    clients: int | None
    warmup_seconds: float | None
    measured_seconds: float | None
    tpmc: float | None
    nopm: float | None = None
    tpm: float | None = None
    tps: float | None = None
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    errors: int = 0
    retries: int = 0
    rollbacks: int = 0
    complete: bool = True
    failure: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    error_latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunResult":
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    @classmethod
    def from_measurement(cls, m: Measurement, **kw: Any) -> "RunResult":
        counts = {op: dict(v) for op, v in m.counts.items()}
        return cls(
            tpmc=round(m.tpmc(), 1),
            measured_seconds=round(m.measured_seconds, 3),
            counts=counts,
            latency_ms=m.latency_summary_ms(),
            error_latency_ms={op: h.summary_ms() for op, h in m.error_total.items() if h.count},
            timeline=[p.to_dict() for p in m.timeline],
            errors=sum(v["error"] for v in counts.values()),
            retries=sum(v["retry"] for v in counts.values()),
            rollbacks=sum(v["rollback"] for v in counts.values()),
            **kw,
        )
