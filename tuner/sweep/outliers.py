"""Runs whose throughput stands apart, and the evidence that moved with them.

The rule (robust, for the 3-10 blocks a sweep has): a run is an outlier of its cell when its log throughput
lies more than ``THRESHOLD`` robust deviations from the median of the cell's *other* runs.  The deviation is
1.4826 x the median absolute deviation (MAD) of those other runs, but never less than ``NOISE_FLOOR`` (10% on
the log scale, about the drift between blocks of this machine): with three other runs the MAD can be near
zero, and a 19% dip is then drift, not a finding.  Leaving the run out keeps a bimodal cell (two slow blocks
of four) from hiding both of its slow runs in its own spread, which the plain median/MAD of all four does.
The threshold 3.5 is Iglewicz and Hoaglin's for modified z-scores.

Each outlier says whether its **block** was slow as a whole (the other cells of the block deviated alike:
machine drift, which the paired comparisons cancel) or only this cell, and which evidence
(tuner/sweep/evidence.py) moved with it: each signal's rate against the median of the cell's other runs,
named when it changed by ``MOVED``x or more (or appeared from zero).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from tuner.sweep.evidence import SIGNALS, evidence_columns

PRESSURE = ("server_cpu_cores", "iowait_share", "psi_io_some", "psi_cpu_some")  # the noise window's, always there
THRESHOLD = 3.5
NOISE_FLOOR = math.log(1.10)
MOVED = 1.5  # a signal moved when it changed by this factor (either way) against the cell's other runs
# signals compared per second of the window (counts grow with the window and with the work done)
RATES = ("free_page_waits", "lru_flushed", "lru_freed", "flush_list_flushed", "pages_flushed", "log_waits",
         "row_lock_waits", "row_lock_time_ms", "os_waits", "spin_rounds", "page_cleaner_warnings")


@dataclass(frozen=True)
class Run:
    """One cell run as the rule sees it."""

    cell: str
    block: int
    tpmc: float
    signals: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Moved:
    signal: str
    value: float
    usual: float  # median of the cell's other runs

    @property
    def factor(self) -> float | None:
        return self.value / self.usual if self.usual else None

    def text(self) -> str:
        label = SIGNALS.get(self.signal, (self.signal, ""))[0]
        unit = "/s" if self.signal in RATES else ""
        if self.factor is None:
            return f"{label} {_num(self.value)}{unit} (none in its other runs)"
        return f"{label} {self.factor:.1f}x ({_num(self.value)}{unit} against {_num(self.usual)}{unit})"


@dataclass(frozen=True)
class Outlier:
    run: Run
    usual: float  # median tpmC of the cell's other runs
    z: float  # robust z of the log throughput against them
    whole_block: bool  # the block's other cells deviated alike
    moved: tuple[Moved, ...]

    @property
    def ratio(self) -> float:
        return self.run.tpmc / self.usual

    def text(self) -> str:
        where = ("its whole block was slow alike (machine drift)" if self.whole_block and self.ratio < 1 else
                 "its whole block was fast alike" if self.whole_block else "only this cell, not its block")
        evidence = ("; moved with it: " + ", ".join(m.text() for m in self.moved)) if self.moved else (
            "; no recorded evidence moved with it")
        return (f"{self.run.cell}, block {self.run.block}: {self.run.tpmc:,.0f} tpmC, {self.ratio:.2f}x its other "
                f"runs' median {self.usual:,.0f} (robust z {self.z:+.1f}); {where}{evidence}")

    def to_dict(self) -> dict[str, Any]:
        return {"cell": self.run.cell, "block": self.run.block, "tpmc": self.run.tpmc, "usual": self.usual,
                "ratio": self.ratio, "z": self.z, "whole_block": self.whole_block,
                "moved": [{"signal": m.signal, "value": m.value, "usual": m.usual, "factor": m.factor} for m in self.moved],
                "text": self.text()}


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def robust_z(value: float, others: list[float]) -> float:
    """Log-scale deviation of ``value`` from the median of ``others``, in robust units (MAD, floored)."""
    logs = [math.log(v) for v in others]
    centre = statistics.median(logs)
    mad = statistics.median(abs(x - centre) for x in logs)
    return (math.log(value) - centre) / max(1.4826 * mad, NOISE_FLOOR)


def _deviation(run: Run, cell_runs: list[Run]) -> float:
    """The run's log deviation from the median of its cell's other runs."""
    return math.log(run.tpmc) - statistics.median(math.log(r.tpmc) for r in cell_runs if r is not run)


def _moved(run: Run, others: list[Run]) -> tuple[Moved, ...]:
    out = []
    for key, value in run.signals.items():
        seen = [r.signals.get(key) for r in others if r.signals.get(key) is not None]
        if value is None or not seen:
            continue
        usual = statistics.median(seen)
        if usual == 0:
            if value > 0:
                out.append(Moved(key, value, 0.0))
        elif value == 0 or max(value / usual, usual / value) >= MOVED:
            out.append(Moved(key, value, usual))
    # the largest changes first; a signal that appeared from nothing counts as the largest
    return tuple(sorted(out, key=lambda m: -math.inf if m.factor in (None, 0) else -abs(math.log(m.factor))))


def find(runs: list[Run]) -> list[Outlier]:
    """Every run that is an outlier of its cell (cells need 3 runs: the others' median needs two)."""
    by_cell: dict[str, list[Run]] = {}
    for r in runs:
        by_cell.setdefault(r.cell, []).append(r)
    out = []
    for cell, cell_runs in by_cell.items():
        if len(cell_runs) < 3:
            continue
        for r in cell_runs:
            others = [o for o in cell_runs if o is not r]
            z = robust_z(r.tpmc, [o.tpmc for o in others])
            if abs(z) <= THRESHOLD:
                continue
            mine = _deviation(r, cell_runs)
            peers = [_deviation(p, by_cell[p.cell]) for p in runs
                     if p.block == r.block and p.cell != cell and len(by_cell[p.cell]) >= 3]
            whole = bool(peers) and abs(mine - statistics.median(peers)) <= THRESHOLD * NOISE_FLOOR
            out.append(Outlier(r, math.exp(statistics.median(math.log(o.tpmc) for o in others)), z, whole,
                               _moved(r, others)))
    return sorted(out, key=lambda o: (o.run.block, o.run.cell))


def runs_of(cells) -> list[Run]:
    """The finished runs of stored cells (tuner.sweep.results.CellRecord), with their evidence as signals."""
    out = []
    for c in cells:
        if c.status != "ok" or not c.tpmc:
            continue
        cols = evidence_columns(c.evidence, c.noise)
        seconds = (c.evidence or {}).get("seconds") or 0.0
        signals = {k: (v / seconds if k in RATES and seconds else v) if v is not None else None for k, v in cols.items()
                   if k in RATES or k in ("pending_fsyncs", "checkpoint_age", "free_pages_min", "lock_waiters_max")
                   + PRESSURE}
        if c.evidence is None or "error" in (c.evidence or {}):
            signals = {k: v for k, v in signals.items() if k in PRESSURE}
        out.append(Run(c.label, c.block, float(c.tpmc), signals))
    return out
