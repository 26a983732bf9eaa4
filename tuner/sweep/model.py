"""The two-way block x cell model on the log scale, with the checks of its assumptions.

log tpmC[block, cell] = block effect + cell effect + error.  The block effect is the machine's state
while the block ran (it cancels in every comparison, as in a paired ratio); the error's spread is
pooled over every cell and block, which gives (cells - 1)(blocks - 1) degrees of freedom instead of a
paired comparison's blocks - 1: at 4 cells and 3 blocks, 6 instead of 2.

The pooling is right only when the cells' differences are the same in every block (additivity) and
the cells' noise has one spread.  Two checks, both shown in the report:
- Tukey's one-degree-of-freedom test for non-additivity (Tukey 1949): a block x cell interaction of
  the multiplicative kind (a busy block shrinking the storage differences) shows as a product term;
- the residual spread per cell (Brown-Forsythe / Levene with medians): one cell much noisier than the
  others.
When either check fails (p < ``CHECK_ALPHA``; a liberal level, since a failure only costs power) the
comparisons fall back to the per-comparison paired interval, which assumes neither.
Only complete blocks (every cell of the model finished) enter the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tuner.sweep.numlib import np, sps

CHECK_ALPHA = 0.10


@dataclass(frozen=True)
class TwoWay:
    keys: tuple[str, ...]  # the cells (config keys), columns of the table
    blocks: tuple[int, ...]  # the complete blocks, rows
    col_means: dict[str, float]  # mean log tpmC per cell
    s: float  # pooled residual sd (log scale)
    df: int  # (cells - 1)(blocks - 1)
    tukey_p: float | None  # None: too few degrees of freedom to test
    spread_p: float | None

    @property
    def n(self) -> int:
        return len(self.blocks)

    @property
    def df_per_block(self) -> int:
        return len(self.keys) - 1

    @property
    def holds(self) -> bool:
        """Both checks could run and neither rejects."""
        return (self.tukey_p is not None and self.tukey_p >= CHECK_ALPHA
                and (self.spread_p is None or self.spread_p >= CHECK_ALPHA))

    def contrast(self, num: list[str], den: list[str]) -> tuple[float, float]:
        """Mean log of ``num``'s cells minus that of ``den``'s, and its standard error."""
        est = sum(self.col_means[k] for k in num) / len(num) - sum(self.col_means[k] for k in den) / len(den)
        weight = 1.0 / len(num) + 1.0 / len(den)
        return est, self.s * math.sqrt(weight / self.n)

    def check_text(self) -> str:
        tukey = "not testable" if self.tukey_p is None else f"p = {self.tukey_p:.2g}"
        spread = "not testable" if self.spread_p is None else f"p = {self.spread_p:.2g}"
        use = ("holds: every comparison uses the pooled error" if self.holds else
               "does not hold (or cannot be checked): every comparison uses its own paired interval")
        return (f"two-way block x cell model on {len(self.keys)} cells x {self.n} complete blocks "
                f"({self.df} degrees of freedom for the error): Tukey's test for non-additivity {tukey}, "
                f"equal residual spread per cell (Brown-Forsythe) {spread}; the model {use}.")

    def to_dict(self) -> dict:
        return {"cells": len(self.keys), "blocks": list(self.blocks), "df": self.df, "sd_log": self.s,
                "tukey_p": self.tukey_p, "spread_p": self.spread_p, "holds": self.holds, "text": self.check_text()}


def fit(by_block: dict[str, dict[int, float]]) -> TwoWay | None:
    """Fit over the blocks where every cell has a run; None with fewer than 2 cells or 2 such blocks."""
    keys = tuple(sorted(by_block))
    if len(keys) < 2:
        return None
    blocks = tuple(sorted(set.intersection(*(set(by_block[k]) for k in keys))))
    if len(blocks) < 2:
        return None
    y = np.log(np.array([[by_block[k][b] for k in keys] for b in blocks], float))
    f = fit_tables(y[None])
    opt = lambda p: None if math.isnan(p) else float(p)  # noqa: E731
    return TwoWay(keys, blocks, {k: float(c) for k, c in zip(keys, f.col_means[0])}, float(f.s[0]), f.df,
                  opt(f.tukey_p[0]), opt(f.spread_p[0]))


@dataclass(frozen=True)
class Tables:
    """The model fitted to many block x cell tables at once (``fit``'s arithmetic; the whole-procedure
    calibration, tuner/sweep/procedure.py, runs it on simulated tables).  NaN: the check cannot run."""

    col_means: np.ndarray  # (tables, cells)
    s: np.ndarray  # (tables,)
    df: int
    tukey_p: np.ndarray
    spread_p: np.ndarray

    @property
    def holds(self) -> np.ndarray:
        """``TwoWay.holds`` per table."""
        spread_ok = np.isnan(self.spread_p) | (self.spread_p >= CHECK_ALPHA)
        return ~np.isnan(self.tukey_p) & (self.tukey_p >= CHECK_ALPHA) & spread_ok


def fit_tables(y: np.ndarray) -> Tables:
    """Fit log tpmC tables ``y`` of shape (tables, blocks, cells), at least 2 of each."""
    t, n, k = y.shape
    grand = y.mean(axis=(1, 2), keepdims=True)
    row = y.mean(axis=2, keepdims=True) - grand
    col = y.mean(axis=1, keepdims=True) - grand
    resid = y - grand - row - col
    df = (k - 1) * (n - 1)
    rss = (resid ** 2).sum(axis=(1, 2))
    s = np.sqrt(rss / df)
    return Tables((grand + col)[:, 0, :], s, df, _tukey(y, row, col, rss, df), _spread(resid))


def _tukey(y, row, col, rss, df: int):
    """p-values of Tukey's one-degree-of-freedom test for non-additivity (NaN: not testable)."""
    denom = (row ** 2).sum(axis=(1, 2)) * (col ** 2).sum(axis=(1, 2))
    out = np.full(y.shape[0], np.nan)
    ok = denom > 0.0
    if df < 2 or not ok.any():
        return out
    ss_n = (row * col * y).sum(axis=(1, 2))[ok] ** 2 / denom[ok]
    rest = rss[ok] - ss_n
    with np.errstate(divide="ignore", invalid="ignore"):
        p = sps.f.sf(ss_n / (rest / (df - 1)), 1, df - 1)
    out[ok] = np.where(rest <= 0.0, 0.0, p)
    return out


def _spread(resid):
    """p-values of the Brown-Forsythe test that every cell's residuals have one spread (NaN: not testable).
    Levene's W on the absolute deviations from each cell's median, as ``scipy.stats.levene(center="median")``."""
    t, n, k = resid.shape
    out = np.full(t, np.nan)
    if n < 3:
        return out
    z = np.abs(resid - np.median(resid, axis=1, keepdims=True))
    zj = z.mean(axis=1)  # (t, k)
    zbar = zj.mean(axis=1, keepdims=True)
    between = n * ((zj - zbar) ** 2).sum(axis=1)
    within = ((z - zj[:, None, :]) ** 2).sum(axis=(1, 2))
    flat = np.ptp(resid, axis=1).max(axis=1) == 0.0  # every cell's residuals constant: nothing to compare
    with np.errstate(divide="ignore", invalid="ignore"):
        w = (n * k - k) / (k - 1) * between / within
        p = sps.f.sf(w, k - 1, n * k - k)
    return np.where(flat, np.nan, p)
