"""Decide under a budget: which candidates to place on the fast tier for the most predicted saving.

Each candidate's gain is its predicted saving (seconds of I/O wait per second of workload, pricing.py).
The choice is a 0/1 knapsack over sizes rounded *up* to whole MiB (so a pick never exceeds the budget):
exact by dynamic programming when candidates x MiB units is at most EXACT_CELLS, otherwise greedy by gain
per byte, kept only if it beats the best single candidate that fits (which makes greedy at least half the
optimum).  The same programme, run to the size of everything, gives the whole curve of gain against budget.

Uncertainty: the measured intervals are resampled with replacement (bootstrap, BOOTSTRAP_N draws, fixed
seed) and the pick's saving recomputed; the 2.5 and 97.5 percentiles are the interval.  It covers the
workload's variation between intervals, not the error of the pricing model, nor the choice itself
(the pick is made on all intervals).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Sequence

import numpy as np

from tuner.core.errors import UsageError
from tuner.core.units import format_size
from tuner.placement import queueing
from tuner.placement.model import Advice, Candidate, IoProfile, Pick, StoredAdvice, TierCost, sum_io
from tuner.placement.pricing import saving, wait_here

UNIT = 1 << 20
EXACT_CELLS = 20_000_000
BOOTSTRAP_N = 2000
CURVE_POINTS = 100


# ---- the knapsack --------------------------------------------------------------------------------

def units(size_bytes: int) -> int:
    return math.ceil(size_bytes / UNIT)


def exact(weights: Sequence[int], values: Sequence[float], cap: int) -> tuple[float, list[int]]:
    """0/1 knapsack by dynamic programming over integer weights; (best value, chosen indices).

    Ties keep the smaller set: an item is taken only when it strictly improves the value.
    """
    dp = np.zeros(cap + 1)
    keep = np.zeros((len(weights), cap + 1), dtype=bool)
    for i, (w, v) in enumerate(zip(weights, values)):
        if w > cap or v <= 0:
            continue
        taken = dp[:cap + 1 - w] + v      # from the values before item i: each item once
        better = taken > dp[w:]
        keep[i, w:] = better
        dp[w:] = np.where(better, taken, dp[w:])
    chosen, c = [], cap
    for i in range(len(weights) - 1, -1, -1):
        if keep[i, c]:
            chosen.append(i)
            c -= weights[i]
    return float(dp[cap]), sorted(chosen)


def exact_curve(weights: Sequence[int], values: Sequence[float], cap: int) -> np.ndarray:
    """Best value for every budget 0..cap units (the same programme without the choice table)."""
    dp = np.zeros(cap + 1)
    for w, v in zip(weights, values):
        if w <= cap and v > 0:
            dp[w:] = np.maximum(dp[w:], dp[:cap + 1 - w] + v)
    return dp


def greedy(sizes: Sequence[int], values: Sequence[float], budget: int) -> list[int]:
    """By gain per byte (free items first), then the best single item if that alone is better."""
    order = sorted((i for i in range(len(sizes)) if values[i] > 0),
                   key=lambda i: (-(values[i] / sizes[i]) if sizes[i] else -math.inf, i))
    chosen, used = [], 0
    for i in order:
        if used + sizes[i] <= budget:
            chosen.append(i)
            used += sizes[i]
    singles = [i for i in order if sizes[i] <= budget]
    best_single = max(singles, key=lambda i: values[i], default=None)
    if best_single is not None and values[best_single] > sum(values[i] for i in chosen):
        chosen = [best_single]
    return sorted(chosen)


def choose(sizes: Sequence[int], values: Sequence[float], budget: int) -> tuple[list[int], str]:
    w = [units(s) for s in sizes]
    cap = budget // UNIT
    if len(w) * (cap + 1) <= EXACT_CELLS:
        return exact(w, values, cap)[1], "exact (0/1 knapsack on sizes rounded up to MiB)"
    return greedy([x * UNIT for x in w], values, cap * UNIT), "greedy by gain per byte (too large for exact)"


def curve(sizes: Sequence[int], values: Sequence[float]) -> tuple[list[tuple[int, float]], str]:
    """(budget, best value) from 0 to the size of every candidate with a positive gain."""
    w = [units(s) for s, v in zip(sizes, values) if v > 0]
    vals = [v for v in values if v > 0]
    top = sum(w)
    step = max(1, math.ceil(top / CURVE_POINTS))
    budgets = sorted(set(range(0, top + 1, step)) | {top})
    if len(w) * (top + 1) <= EXACT_CELLS:
        dp = exact_curve(w, vals, top)
        return [(b * UNIT, float(dp[b])) for b in budgets], "exact"
    return [(b * UNIT, sum(vals[i] for i in greedy([x * UNIT for x in w], vals, b * UNIT))) for b in budgets], "greedy"


# ---- gains and their uncertainty ----------------------------------------------------------------

@dataclass(frozen=True)
class Gains:
    keys: list[str]
    per_interval: np.ndarray     # candidate x interval: seconds saved in that interval
    seconds: np.ndarray          # interval lengths
    unknown: list[str]           # candidates with counted I/O and no tier to price it on

    def rate(self, rows: Sequence[int]) -> float:
        return float(self.per_interval[list(rows)].sum() / self.seconds.sum()) if len(rows) else 0.0

    def interval(self, rows: Sequence[int]) -> tuple[float | None, float | None]:
        n = len(self.seconds)
        if n < 2:
            return None, None
        per = self.per_interval[list(rows)].sum(axis=0) if len(rows) else np.zeros(n)
        draws = np.random.default_rng(31).integers(0, n, size=(BOOTSTRAP_N, n))
        rates = per[draws].sum(axis=1) / self.seconds[draws].sum(axis=1)
        return float(np.percentile(rates, 2.5)), float(np.percentile(rates, 97.5))


def gains(profile: IoProfile, target: TierCost, here: TierCost | None) -> Gains:
    keys, rows, unknown = [], [], []
    for c in profile.candidates:
        row = []
        for iv in profile.intervals:
            s = saving(sum_io(iv.files[f] for f in c.files if f in iv.files), target, here)
            row.append(s)
        if any(s is None for s in row):
            unknown.append(c.key)
            continue
        keys.append(c.key)
        rows.append(row)
    matrix = np.array(rows, dtype=float).reshape(len(rows), len(profile.intervals))
    return Gains(keys, matrix, np.array([iv.seconds for iv in profile.intervals]), unknown)


def measured_wait(profile: IoProfile, here: TierCost | None) -> float:
    total = 0.0
    for iv in profile.intervals:
        for io in iv.files.values():
            total += wait_here(io, here) or 0.0
    return total / profile.seconds if profile.seconds else 0.0


# ---- the advice ---------------------------------------------------------------------------------

def _pick(name: str, rows: list[int], g: Gains, sizes: dict[str, int]) -> Pick:
    keys = tuple(g.keys[r] for r in rows)
    low, high = g.interval(rows)
    return Pick(name, keys, sum(sizes[k] for k in keys), g.rate(rows), low, high)


def naive_picks(g: Gains, by_key: dict[str, Candidate], budget: int) -> list[Pick]:
    sizes = {k: c.size_bytes for k, c in by_key.items()}
    tables = sorted((r for r, k in enumerate(g.keys) if by_key[k].kind in ("table", "partition")),
                    key=lambda r: (-sizes[g.keys[r]], g.keys[r]))
    largest, used = [], 0
    for r in tables:
        if used + units(sizes[g.keys[r]]) * UNIT <= budget:
            largest.append(r)
            used += units(sizes[g.keys[r]]) * UNIT
    out = [_pick("largest tables", largest, g, sizes)]
    if "redo" in g.keys:
        out.append(_pick("redo alone", [g.keys.index("redo")], g, sizes))
    out.append(_pick("everything", list(range(len(g.keys))), g, sizes))
    return out


def advise(profile: IoProfile, target: TierCost, budget: int, here: TierCost | None = None) -> Advice:
    if budget <= 0:
        raise UsageError(f"--budget {format_size(budget)} is not a size; give the fast tier's bytes, e.g. --budget 64G")
    if target.free_bytes is not None and budget > target.free_bytes:
        raise UsageError(f"--budget {format_size(budget)} is more than the {format_size(target.free_bytes)} free on "
                         f"{target.mountpoint}; give --budget {format_size(target.free_bytes)} or less, or free space")
    g = gains(profile, target, here)
    by_key = {c.key: c for c in profile.candidates}
    smallest = min((by_key[k] for k in g.keys), key=lambda c: c.size_bytes, default=None)
    if smallest is None or units(smallest.size_bytes) * UNIT > budget:
        need = "no candidate" if smallest is None else \
            f"the smallest, {smallest.label}, needs {format_size(units(smallest.size_bytes) * UNIT)}"
        raise UsageError(f"--budget {format_size(budget)} is smaller than every candidate ({need}); give a larger "
                         "--budget")
    sizes = [by_key[k].size_bytes for k in g.keys]
    values = [g.rate([r]) for r in range(len(g.keys))]
    rows, method = choose(sizes, values, budget)
    points, curve_method = curve(sizes, values)
    notes = list(profile.notes)
    if g.unknown:
        notes.append(f"not priced: {', '.join(g.unknown)} (counted without wait times); characterize the tier it "
                     "is on now with `innotier placement tier --mount M` and give it as --here")
    if target.volatile:
        notes.append(f"{target.mountpoint} is volatile: what is placed there needs `innotier persist` to survive "
                     "a power loss")
    pick = _pick("advisor", rows, g, {k: c.size_bytes for k, c in by_key.items()})
    naive = tuple(naive_picks(g, by_key, budget))
    return Advice(profile_id=profile.profile_id, tier_id=target.tier_id, budget_bytes=budget, method=method,
                  pick=pick, naive=naive, curve=tuple(points), curve_method=curve_method,
                  measured_wait=measured_wait(profile, here), gains=dict(zip(g.keys, values)), notes=tuple(notes),
                  bounds=bounds(profile, target, here, (pick, *naive)))


def bounds(profile: IoProfile, target: TierCost, here: TierCost | None, picks) -> dict[str, float]:
    """Each pick's most over the measured throughput by the bottleneck law (``queueing.bound``): what the files left
    on the slow tier allow once the fast tier took the rest.  Needs the slow tier's cost (--here)."""
    if here is None:
        return {}
    out = {p.name: queueing.bound(profile, here, target, p.keys) for p in picks}
    return {k: v for k, v in out.items() if v is not None}


def stored(advice: Advice, here: TierCost | None, now: datetime | None = None) -> StoredAdvice:
    """The advice as it is stored (`placement check` measures it later): an id of when, what and how much."""
    now = now or datetime.now(timezone.utc)
    advice_id = f"adv-{now.strftime('%Y%m%dT%H%M%S')}-{advice.budget_bytes >> 20}m"
    return StoredAdvice(advice_id, now.isoformat(timespec="seconds"), advice, here.tier_id if here else None)
