"""Statistics of a blocked sweep: paired ratios on the log scale, intervals, and when to stop.

Design (issue 17).  Each repeat is a *block* that runs every cell once in a fresh random order.  The
machine drifts between blocks (other work, page cache, thermal state) by far more than a cell's own
noise, so two cells are compared **within blocks**: the per-block ratio of their throughputs,
analysed on the log scale (throughput is a rate: effects are multiplicative and a log never gives a
negative bound).

- ``paired_ratio``: the paired t interval of the mean log-ratio over blocks, exponentiated
  ("tmpfs / disk = 1.62x [1.41, 1.86]"), its p-value, and a percentile bootstrap over blocks as a
  second opinion that does not assume normal log-ratios.
- ``log_summarize``: a cell's geometric mean with a t interval computed on the logs (never negative).
- ``compare`` / ``welch``: the *unpaired* Welch test, kept to show what ignoring the blocks costs.
- Decisions (``Target``): a comparison is decided when its interval excludes 1.0 ("differs"), lies
  within +/-3% of it ("equivalent"), or its half-width is below 5% ("precise").
- Adaptive stopping looks at the data after every block, and looking repeatedly inflates the chance of
  a false "differs".  ``look_alpha`` therefore spends a smaller per-look alpha, calibrated by simulation
  so that the chance of *any* false decision across all looks of the schedule is the nominal alpha
  (a Pocock-type constant boundary, Jennison & Turnbull, "Group Sequential Methods", ch. 2 and 9:
  repeated confidence intervals).  Intervals of an adaptive run are these repeated intervals: valid
  whenever the run stops.  With a fixed number of repeats there is one look at the nominal level.
- ``blocks_needed``: from the current spread of the log-ratios, how many blocks would decide.

Student t and the normal come from SciPy; the bootstrap and simulations use NumPy.
"""

from __future__ import annotations

import functools
import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

ALPHA = 0.05


class _OnFirstUse:
    """A module imported on first attribute access."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load
        self._mod: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._mod is None:
            self._mod = self._load()
        return getattr(self._mod, name)


# deferred: NumPy and SciPy cost about 1 s of CPU at every `innotier` start (bench/cli_startup.py: median CPU
# 1244 ms with them imported here against 268 ms without), and every CLI module reaches this one through
# the spec (Target); they load when a statistic is first computed.
np = _OnFirstUse(lambda: importlib.import_module("numpy"))
sps = _OnFirstUse(lambda: importlib.import_module("scipy.stats"))


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

    @property
    def rel_half_width(self) -> float | None:
        hw = self.half_width
        return None if hw is None or not self.mean else hw / abs(self.mean)

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
    """When a comparison counts as decided, and the schedule of looks of an adaptive run."""

    equivalence: float = 0.03  # interval inside [1/1.03, 1.03]: "no difference that matters"
    half_width: float = 0.05  # or the interval's relative half-width below 5%
    alpha: float = ALPHA
    min_blocks: int = 3  # first look (a t interval from 2 blocks has 1 degree of freedom: useless)
    max_blocks: int = 10  # last look; the time budget may stop earlier
    adaptive: bool = True  # False: one look at the end (fixed repeats), at the nominal level

    @property
    def looks(self) -> int:
        return max(1, self.max_blocks - self.min_blocks + 1) if self.adaptive else 1

    def level(self) -> float:
        """Confidence of each look's interval (the repeated-interval level of an adaptive run)."""
        return 1.0 - (look_alpha(self.alpha, self.min_blocks, self.max_blocks) if self.adaptive else self.alpha)

    def to_dict(self) -> dict:
        return {"equivalence": self.equivalence, "half_width": self.half_width, "alpha": self.alpha,
                "min_blocks": self.min_blocks, "max_blocks": self.max_blocks, "adaptive": self.adaptive,
                "per_look_confidence": self.level()}


def min_p_under_null(min_blocks: int, max_blocks: int, sims: int = 40000, seed: int = 17) -> np.ndarray:
    """The smallest two-sided paired-t p-value over looks min_blocks..max_blocks, per simulated run
    with no effect (normal log-ratios; the t statistic does not depend on their spread)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((sims, max_blocks))
    n = np.arange(1, max_blocks + 1)
    csum = np.cumsum(x, axis=1)
    csq = np.cumsum(x * x, axis=1)
    looks = np.arange(min_blocks, max_blocks + 1)
    idx = looks - 1
    mean = csum[:, idx] / n[idx]
    var = (csq[:, idx] - n[idx] * mean ** 2) / (n[idx] - 1)
    t = mean / np.sqrt(var / n[idx])
    p = 2.0 * sps.t.sf(np.abs(t), looks - 1)
    return p.min(axis=1)


@functools.lru_cache(maxsize=64)
def look_alpha(alpha: float, min_blocks: int, max_blocks: int) -> float:
    """Per-look alpha such that P(any look rejects | no effect) = alpha over looks min..max blocks."""
    if max_blocks <= min_blocks:
        return alpha
    return float(np.quantile(min_p_under_null(min_blocks, max_blocks), alpha))


@dataclass(frozen=True)
class PairedRatio:
    """num / den from per-block pairs: the ratio, its interval, and whether that decides the question."""

    n: int  # blocks with both cells
    ratio: float
    low: float | None
    high: float | None
    p_value: float | None
    sd_log: float | None  # sd of the per-block log-ratios
    level: float  # confidence of [low, high]
    status: str  # differs | equivalent | precise | undecided | unknown
    more_blocks: int | None  # blocks more that the current spread suggests would decide (None: many)
    boot_low: float | None = None  # percentile bootstrap over blocks, same level
    boot_high: float | None = None

    @property
    def decided(self) -> bool:
        return self.status in ("differs", "equivalent", "precise")

    def interval(self) -> str:
        if self.low is None:
            return f"{_r(self.ratio)}x (n={self.n}, no interval)"
        return f"{_r(self.ratio)}x [{_r(self.low)}, {_r(self.high)}]"

    def state(self) -> str:
        if self.status == "unknown":
            return "undecided (needs at least 2 blocks)"
        if self.status == "equivalent":
            return "decided: equivalent (within ±3%)"
        if self.status == "precise":
            bound = max(1.0 - self.low, self.high - 1.0) * 100
            return f"decided: no difference shown, any is under {bound:.0f}%"
        if self.decided:
            return "decided"
        if self.more_blocks is None:
            return "undecided (more than 50 more blocks at this spread)"
        return f"undecided, ~{self.more_blocks} more blocks"

    def to_dict(self) -> dict:
        return {"n": self.n, "ratio": self.ratio, "low": self.low, "high": self.high, "p_value": self.p_value,
                "sd_log": self.sd_log, "level": self.level, "status": self.status, "decided": self.decided,
                "more_blocks": self.more_blocks, "bootstrap_low": self.boot_low, "bootstrap_high": self.boot_high,
                "text": f"{self.interval()}, {self.state()}"}


def _r(x: float) -> str:
    """A ratio for people: two decimals, or two significant digits far from 1 (never "0.00")."""
    return f"{x:.2f}" if 0.1 <= x < 100 else f"{x:.2g}"


def _status(mean: float, half: float, target: Target) -> str:
    lo, hi = mean - half, mean + half
    eq = math.log1p(target.equivalence)
    if lo > 0.0 or hi < 0.0:
        return "differs"
    if lo >= -eq and hi <= eq:
        return "equivalent"
    if math.expm1(half) < target.half_width:
        return "precise"
    return "undecided"


def blocks_needed(mean_log: float, sd_log: float, target: Target, level: float | None = None,
                  limit: int = 50) -> int | None:
    """Total blocks at which, with this mean and spread of log-ratios, the interval would decide."""
    level = target.level() if level is None else level
    q = 1.0 - (1.0 - level) / 2.0
    for m in range(max(2, target.min_blocks if target.adaptive else 2), limit + 1):
        half = t_ppf(q, m - 1) * sd_log / math.sqrt(m)
        if _status(mean_log, half, target) != "undecided":
            return m
    return None


def paired_ratio(num: Sequence[float], den: Sequence[float], target: Target | None = None,
                 level: float | None = None, boot: int = 4000, seed: int = 0) -> PairedRatio:
    """Paired analysis of num / den over blocks (``num[i]`` and ``den[i]`` come from block i)."""
    target = target or Target(adaptive=False)
    level = target.level() if level is None else level
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
    if n < 2:
        return PairedRatio(n, math.exp(m), None, None, None, None, level, "unknown", None)
    sd = float(d.std(ddof=1))
    q = 1.0 - (1.0 - level) / 2.0
    half = t_ppf(q, n - 1) * sd / math.sqrt(n)
    p = 1.0 if sd == 0.0 and m == 0.0 else (0.0 if sd == 0.0 else float(2.0 * sps.t.sf(abs(m) / (sd / math.sqrt(n)), n - 1)))
    status = _status(m, half, target)
    more = None
    if status == "undecided":
        need = blocks_needed(m, sd, target, level)
        more = None if need is None else max(1, need - n)
    elif status != "undecided":
        more = 0
    blo = bhi = None
    if n >= 3 and boot:
        rng = np.random.default_rng(seed)
        means = d[rng.integers(0, n, size=(boot, n))].mean(axis=1)
        blo, bhi = (math.exp(float(x)) for x in np.quantile(means, [1.0 - q, q]))
    return PairedRatio(n, math.exp(m), math.exp(m - half), math.exp(m + half), p, sd, level, status, more, blo, bhi)
