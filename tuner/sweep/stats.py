"""Statistics of a blocked sweep: paired ratios on the log scale, intervals, and when to stop.

Design (issue 17).  Each repeat is a *block* that runs every cell once in a fresh random order.  The
machine drifts between blocks (other work, page cache, thermal state) by far more than a cell's own
noise, so two cells are compared **within blocks**: the per-block ratio of their throughputs,
analysed on the log scale (throughput is a rate: effects are multiplicative and a log never gives a
negative bound).

- ``paired_ratio``: the paired t interval of the mean log-ratio over blocks, exponentiated
  ("tmpfs / disk = 1.62x [1.41, 1.86]"); ``ratio_from`` turns any log-scale estimate and its standard
  error (the two-way model's, tuner/sweep/model.py) into the same kind of answer.
- ``log_summarize``: a cell's geometric mean with a t interval computed on the logs (never negative).
- ``compare`` / ``welch``: the *unpaired* Welch test, kept to show what ignoring the blocks costs.
- Decisions (``Target``): a comparison is decided when its interval excludes 1.0 ("differs") or lies
  inside the equivalence margin (default +/-5%, "equivalent").  A narrow interval that holds 1.0 and
  crosses the margin decides nothing.
- The intervals are those of the planned schedule (tuner/sweep/sequential.py): error spent over the
  looks (O'Brien-Fleming type) and split over the spec's planned comparisons, so the chance of any
  false "differs" over all of them and all looks is at most alpha.  With a fixed number of repeats
  there is one look, still split over the comparisons.  Every critical value carries the factor that
  keeps that rate over the whole procedure, the choice between the two-way model and the paired fallback
  included (tuner/sweep/procedure.py).
- Undecided comparisons say how many more blocks would give 80% power (tuner/sweep/sample_size.py).

Student t and the normal come from SciPy; simulations use NumPy.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

from tuner.sweep import procedure, sequential
from tuner.sweep.numlib import np, sps
from tuner.sweep.sample_size import BlocksNeeded, blocks_needed

ALPHA = 0.05


# ---------------------------------------------------------------------------
# Student t (SciPy)


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (df may be fractional, as Welch's)."""
    if df <= 0:
        raise ValueError("degrees of freedom must be positive")
    return float(sps.t.cdf(t, df))


@functools.lru_cache(maxsize=4096)
def t_ppf(p: float, df: float) -> float:
    """The t value with P(T <= t) = p."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    return float(sps.t.ppf(p, df))


# ---------------------------------------------------------------------------
# Summaries


@dataclass(frozen=True)
class Summary:
    """Arithmetic mean, sample standard deviation and 95% t interval of one cell's repeats."""

    n: int
    mean: float
    stdev: float | None  # None with one sample
    ci_low: float | None
    ci_high: float | None

    @property
    def half_width(self) -> float | None:
        return None if self.ci_high is None else (self.ci_high - self.mean)

    def format(self, digits: int = 0) -> str:
        if self.half_width is None:
            return f"{self.mean:,.{digits}f} (n=1)"
        return f"{self.mean:,.{digits}f} ± {self.half_width:,.{digits}f} (n={self.n})"

    def to_dict(self) -> dict:
        return {"n": self.n, "mean": self.mean, "stdev": self.stdev, "ci95_low": self.ci_low,
                "ci95_high": self.ci_high}


def summarize(values: Sequence[float], confidence: float = 0.95) -> Summary:
    xs = np.asarray([float(v) for v in values])
    if xs.size == 0:
        raise ValueError("no values to summarize")
    n, mean = int(xs.size), float(xs.mean())
    if n < 2:
        return Summary(n, mean, None, None, None)
    s = float(xs.std(ddof=1))
    half = t_ppf(1.0 - (1.0 - confidence) / 2.0, n - 1) * s / math.sqrt(n)
    return Summary(n, mean, s, mean - half, mean + half)


@dataclass(frozen=True)
class LogSummary:
    """Geometric mean of a cell's runs with its interval computed on the log scale (always positive)."""

    n: int
    gmean: float
    low: float | None
    high: float | None
    log_sd: float | None  # sd of ln(values): about the coefficient of variation

    @property
    def mean(self) -> float:  # the centre the report plots
        return self.gmean

    def format(self, digits: int = 0) -> str:
        if self.low is None:
            return f"{self.gmean:,.{digits}f} (n={self.n})"
        return f"{self.gmean:,.{digits}f} [{self.low:,.{digits}f}, {self.high:,.{digits}f}] (n={self.n})"

    def to_dict(self) -> dict:
        return {"n": self.n, "geometric_mean": self.gmean, "ci95_low": self.low, "ci95_high": self.high,
                "log_sd": self.log_sd}


def log_summarize(values: Sequence[float], confidence: float = 0.95) -> LogSummary:
    xs = np.asarray([float(v) for v in values])
    if xs.size == 0:
        raise ValueError("no values to summarize")
    if (xs <= 0).any():
        raise ValueError("log-scale summaries need positive values (throughput)")
    logs = np.log(xs)
    n, m = int(xs.size), float(logs.mean())
    if n < 2:
        return LogSummary(n, math.exp(m), None, None, None)
    sd = float(logs.std(ddof=1))
    half = t_ppf(1.0 - (1.0 - confidence) / 2.0, n - 1) * sd / math.sqrt(n)
    return LogSummary(n, math.exp(m), math.exp(m - half), math.exp(m + half), sd)


# ---------------------------------------------------------------------------
# Unpaired comparison (Welch): kept to show what ignoring the blocks costs


@dataclass(frozen=True)
class Comparison:
    """B relative to A: ``rel_diff`` = (mean_B - mean_A) / mean_A; ``significant`` from Welch's t-test."""

    a: Summary
    b: Summary
    rel_diff: float
    t: float | None
    df: float | None
    p_value: float | None
    significant: bool | None  # None: cannot tell (a single repeat on a side)
    test: str = "Welch's t-test, two-sided, alpha 0.05"

    def verdict(self) -> str:
        pct = f"{self.rel_diff * 100:+.1f}%"
        if self.significant is None:
            return f"{pct}; noise unknown (one repeat; run repeats >= 2 to tell)"
        if self.significant:
            return f"{pct}, exceeds the noise (Welch p = {self.p_value:.3g})"
        return f"{pct}, within the noise (Welch p = {self.p_value:.3g})"

    def to_dict(self) -> dict:
        return {"rel_diff": self.rel_diff, "t": self.t, "df": self.df, "p_value": self.p_value,
                "significant": self.significant, "test": self.test, "verdict": self.verdict()}


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """Welch's t statistic (B - A), Welch-Satterthwaite degrees of freedom and the two-sided p-value."""
    sa, sb = summarize(a), summarize(b)
    va = (sa.stdev or 0.0) ** 2 / sa.n
    vb = (sb.stdev or 0.0) ** 2 / sb.n
    se2 = va + vb
    diff = sb.mean - sa.mean
    if se2 == 0.0:
        # no spread at all: any difference is exact, none is none
        return (math.inf if diff else 0.0), float(sa.n + sb.n - 2), (0.0 if diff else 1.0)
    res = sps.ttest_ind(np.asarray(b, float), np.asarray(a, float), equal_var=False)
    df = se2 ** 2 / ((va ** 2 / (sa.n - 1) if va else 0.0) + (vb ** 2 / (sb.n - 1) if vb else 0.0))
    return float(res.statistic), float(df), float(res.pvalue)


def compare(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA) -> Comparison:
    sa, sb = summarize(a), summarize(b)
    rel = (sb.mean - sa.mean) / sa.mean if sa.mean else math.inf
    if sa.n < 2 or sb.n < 2:
        return Comparison(sa, sb, rel, None, None, None, None)
    t, df, p = welch(a, b)
    return Comparison(sa, sb, rel, t, df, p, p < alpha)


# ---------------------------------------------------------------------------
# Decisions and the stopping rule


@dataclass(frozen=True)
class Target:
    """When a comparison counts as decided, the planned looks, and the family the error is shared by."""

    equivalence: float = 0.05  # the margin: an interval inside [1/1.05, 1.05] decides "equivalent"
    alpha: float = ALPHA  # chance of any false "differs" over every comparison and every look
    min_blocks: int = 3  # first look (a t interval from 2 blocks has 1 degree of freedom: useless)
    max_blocks: int = 10  # last look; the time budget may stop earlier
    adaptive: bool = True  # False: one look at the end (fixed repeats)
    comparisons: int = 1  # the planned comparisons (known at plan time): each gets alpha / comparisons
    # the design the whole procedure is calibrated on (tuner/sweep/procedure.py): its cells and each planned
    # comparison as (numerator cells, denominator cells); none: the schedule's critical values as they are
    cells: int = 0
    contrasts: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()

    @property
    def looks(self) -> int:
        return max(1, self.max_blocks - self.min_blocks + 1) if self.adaptive else 1

    @property
    def alpha_each(self) -> float:
        return self.alpha / max(self.comparisons, 1)

    def critical(self, n: int, df_per_block: int = 1) -> float:
        """Critical |t| for an interval from ``n`` blocks, calibrated over the whole procedure."""
        return self.schedule_critical(n, df_per_block) * self.switch_factor(n)

    def schedule_critical(self, n: int, df_per_block: int = 1) -> float:
        """The schedule's critical |t| for one analysis (a look of the schedule, or the one fixed look)."""
        if not self.adaptive:
            return sequential.fixed_critical(self.alpha_each, max(n - 1, 1) * df_per_block)
        lo, hi = self.min_blocks, max(self.max_blocks, self.min_blocks)
        if n < lo:  # before the first look: that look's error at this many blocks
            spent = sequential.obf_spent(lo / hi, self.alpha_each)
            return sequential.fixed_critical(spent, max(n - 1, 1) * df_per_block)
        return sequential.boundary(self.alpha_each, lo, hi, df_per_block)[min(n, hi) - lo]

    def switch_factor(self, n: int) -> float:
        """The factor (>= 1) that pays for choosing between the model and the paired fallback on the same data."""
        return procedure.switch_factor(self, n)

    def family_text(self) -> str:
        """The one sentence the report states about its error rate."""
        looks = f" and up to {self.looks} looks (O'Brien-Fleming-type error spending)" if self.adaptive else ""
        choice = (", the choice between the two-way model and the paired fallback included (critical values "
                  "calibrated by simulating the whole procedure under normal noise and two kinds of block x cell "
                  "interaction)" if self.cells else " for the analysis used")
        return (f"The chance of any false \"differs\" over all {self.comparisons} planned comparison"
                f"{'s' if self.comparisons != 1 else ''}{looks} is at most {self.alpha * 100:.0f}%{choice}; "
                f"each comparison gets {self.alpha_each * 100:.2g}% (docs/sweep-statistics.md).")

    def to_dict(self) -> dict:
        return {"equivalence": self.equivalence, "alpha": self.alpha, "min_blocks": self.min_blocks,
                "max_blocks": self.max_blocks, "adaptive": self.adaptive, "comparisons": self.comparisons,
                "cells": self.cells, "contrasts": [[list(a), list(b)] for a, b in self.contrasts]}


@dataclass(frozen=True)
class PairedRatio:
    """num / den over blocks: the ratio, its interval under the schedule, and whether that decides the question."""

    n: int  # blocks used
    ratio: float
    low: float | None
    high: float | None
    sd_log: float | None  # spread of the comparison per block (log scale): se * sqrt(n)
    df: int | None  # degrees of freedom of that spread
    status: str  # differs | equivalent | undecided | unknown
    method: str = "paired"  # paired | two-way model
    margin: float = 0.05
    target: Target | None = None  # the schedule the interval came from (for the blocks-needed estimate)
    df_per_block: int = 1
    # the interval's own two-sided level: an early look of an adaptive run and a family of comparisons spend a
    # small part of the error, so the interval is far wider than a 95% one on the same blocks (issue 33)
    level: float | None = None
    per_block: tuple[float, ...] = ()  # the ratio within each block (what a reader checks the interval against)

    @functools.cached_property
    def needed(self) -> BlocksNeeded | None:
        """Total blocks for 80% power (undecided comparisons only; computed when first asked)."""
        if self.status != "undecided" or self.target is None or self.sd_log is None:
            return None
        t, per = self.target, self.df_per_block
        cap = t.max_blocks if t.adaptive else 50
        return blocks_needed(math.log(self.ratio), self.sd_log, self.df, lambda k: t.critical(k, per), per,
                             self.n + 1, cap, t.equivalence, floor=lambda k: t.schedule_critical(k, per))

    @property
    def decided(self) -> bool:
        return self.status in ("differs", "equivalent")

    def interval(self) -> str:
        if self.low is None:
            return f"{_r(self.ratio)}x (n={self.n}, no interval)"
        return f"{_r(self.ratio)}x [{_r(self.low)}, {_r(self.high)}]"

    def look(self) -> tuple[int, int] | None:
        """(this look, the planned looks) of an adaptive run at a planned look; None otherwise."""
        t = self.target
        if t is None or not t.adaptive or self.n < t.min_blocks:
            return None
        return min(self.n, t.max_blocks) - t.min_blocks + 1, t.looks

    def level_text(self) -> str:
        """'at level 99.9% (look 1 of up to 6)': how strict the interval is, and why."""
        if self.level is None or self.low is None:
            return ""
        look = self.look()
        where = f" (look {look[0]} of up to {look[1]})" if look and look[1] > 1 else ""
        return f"at level {level_percent(self.level)}{where}"

    def per_block_text(self, most: int = 8) -> str:
        """'per block 2.9x 3.1x 3.0x' (the first ``most`` blocks, then how many more)."""
        if not self.per_block:
            return ""
        shown = " ".join(f"{_r(x)}x" for x in self.per_block[:most])
        more = len(self.per_block) - most
        return f"per block {shown}" + (f" (+{more} more)" if more > 0 else "")

    def described(self) -> str:
        """'3.04x [0.14, 67.65] at level 99.9% (look 1 of up to 6), per block 2.9x 3.1x 3.0x'."""
        parts = [" ".join(x for x in (self.interval(), self.level_text()) if x), self.per_block_text()]
        return ", ".join(x for x in parts if x)

    def text(self) -> str:
        """The whole answer for people: the interval, its level, the blocks' own ratios, and the state."""
        return f"{self.described()}, {self.state()}"

    def state(self) -> str:
        if self.status == "unknown":
            return "undecided (needs at least 2 blocks)"
        if self.status == "equivalent":
            return f"decided: equivalent (within ±{self.margin * 100:.0f}%)"
        if self.status == "differs":
            return "decided: differs"
        if self.needed is None:
            return "undecided"
        return f"undecided, {self.needed.more_text(self.n)}"

    def to_dict(self) -> dict:
        return {"n": self.n, "ratio": self.ratio, "low": self.low, "high": self.high, "sd_log": self.sd_log,
                "df": self.df, "status": self.status, "decided": self.decided, "method": self.method,
                "margin": self.margin, "blocks_needed": self.needed.to_dict() if self.needed else None,
                "level": self.level, "look": list(self.look()) if self.look() else None,
                "per_block": list(self.per_block), "text": self.text()}


def _r(x: float) -> str:
    """A ratio for people: two decimals, or two significant digits far from 1 (never "0.00")."""
    return f"{x:.2f}" if 0.1 <= x < 100 else f"{x:.2g}"


def level_percent(level: float) -> str:
    """95% -> '95%', 0.975 -> '97.5%', 0.99994 -> '99.994%': enough digits to tell the level from 100%."""
    if level >= 1.0:
        return "100%"
    digits = max(1, math.ceil(-math.log10(1.0 - level)) - 1)
    return f"{level * 100:.{digits}f}".rstrip("0").rstrip(".") + "%"


def interval_level(critical: float, df: float) -> float:
    """The two-sided level of a t interval with this critical value and degrees of freedom."""
    if math.isinf(critical):
        return 1.0
    return 2.0 * t_cdf(critical, df) - 1.0


def status_of(mean: float, half: float, margin: float) -> str:
    lo, hi = mean - half, mean + half
    if lo > 0.0 or hi < 0.0:
        return "differs"
    eq = math.log1p(margin)
    if lo >= -eq and hi <= eq:
        return "equivalent"
    return "undecided"


def ratio_from(mean: float, se: float, n: int, df: int, df_per_block: int, target: Target,
               method: str, per_block: Sequence[float] = ()) -> PairedRatio:
    """A log-scale estimate and its standard error as a ratio with the schedule's interval and verdict."""
    crit = target.critical(n, df_per_block)
    half = crit * se
    status = status_of(mean, half, target.equivalence)
    if target.adaptive and n < target.min_blocks:
        status = "undecided"  # not a planned look
    return PairedRatio(n, math.exp(mean), math.exp(mean - half), math.exp(mean + half), se * math.sqrt(n), df, status,
                       method, target.equivalence, target, df_per_block, interval_level(crit, df), tuple(per_block))


def paired_ratio(num: Sequence[float], den: Sequence[float], target: Target | None = None) -> PairedRatio:
    """Paired analysis of num / den over blocks (``num[i]`` and ``den[i]`` come from block i)."""
    target = target or Target(adaptive=False)
    a, b = np.asarray(num, float), np.asarray(den, float)
    if a.shape != b.shape:
        raise ValueError("paired samples need one value of each cell per block")
    if (a <= 0).any() or (b <= 0).any():
        raise ValueError("ratios need positive throughput values")
    d = np.log(a) - np.log(b)
    n = int(d.size)
    if n == 0:
        raise ValueError("no blocks to compare")
    m = float(d.mean())
    per_block = tuple(math.exp(float(x)) for x in d)
    if n < 2:
        return PairedRatio(n, math.exp(m), None, None, None, None, "unknown", "paired", target.equivalence,
                           per_block=per_block)
    sd = float(d.std(ddof=1))
    return ratio_from(m, sd / math.sqrt(n), n, n - 1, 1, target, "paired", per_block)
