"""Statistics across repeats: mean, sample standard deviation, 95% confidence interval, and whether a
difference between two cells exceeds the noise.

- The confidence interval is the Student-t interval ``mean +/- t(0.975, n-1) * s / sqrt(n)``
  (NIST/SEMATECH e-Handbook of Statistical Methods, 7.2.2.1).
- "Exceeds the noise" is decided with **Welch's unequal-variances t-test** (two-sided, alpha 0.05),
  degrees of freedom by the Welch-Satterthwaite equation (NIST e-Handbook 1.3.5.3).  CI overlap is
  not used: two 95% intervals can overlap while the difference is still significant.
- With a single repeat on either side the noise is unknown; the verdict says so instead of guessing.

The Student-t distribution is computed here from the regularized incomplete beta function
(continued fraction, Numerical Recipes 3rd ed. 6.4) so that no SciPy is needed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

ALPHA = 0.05


# ---------------------------------------------------------------------------
# Student t


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (df may be fractional, as Welch's)."""
    if df <= 0:
        raise ValueError("degrees of freedom must be positive")
    x = df / (df + t * t)
    tail = 0.5 * betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


@functools.lru_cache(maxsize=1024)
def t_ppf(p: float, df: float) -> float:
    """The t value with P(T <= t) = p (bisection on t_cdf; exact to ~1e-10)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


# ---------------------------------------------------------------------------
# Summaries


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation and 95% CI of one cell's repeats."""

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
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("no values to summarize")
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return Summary(n, mean, None, None, None)
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    s = math.sqrt(var)
    half = t_ppf(1.0 - (1.0 - confidence) / 2.0, n - 1) * s / math.sqrt(n)
    return Summary(n, mean, s, mean - half, mean + half)


# ---------------------------------------------------------------------------
# Comparing two cells


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
    """Welch's t statistic, Welch-Satterthwaite degrees of freedom and the two-sided p-value."""
    sa, sb = summarize(a), summarize(b)
    va = (sa.stdev or 0.0) ** 2 / sa.n
    vb = (sb.stdev or 0.0) ** 2 / sb.n
    se2 = va + vb
    diff = sb.mean - sa.mean
    if se2 == 0.0:
        # no spread at all: any difference is exact, none is none
        return (math.inf if diff else 0.0), float(sa.n + sb.n - 2), (0.0 if diff else 1.0)
    t = diff / math.sqrt(se2)
    df = se2 ** 2 / ((va ** 2 / (sa.n - 1) if va else 0.0) + (vb ** 2 / (sb.n - 1) if vb else 0.0))
    p = 2.0 * (1.0 - t_cdf(abs(t), df))
    return t, df, max(0.0, min(1.0, p))


def compare(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA) -> Comparison:
    sa, sb = summarize(a), summarize(b)
    rel = (sb.mean - sa.mean) / sa.mean if sa.mean else math.inf
    if sa.n < 2 or sb.n < 2:
        return Comparison(sa, sb, rel, None, None, None, None)
    t, df, p = welch(a, b)
    return Comparison(sa, sb, rel, t, df, p, p < alpha)
