"""The planned looks of a sweep and the critical t of each: error spending over looks, split over comparisons.

An adaptive run (``repeats: auto``) looks at its data after every block from ``min_blocks`` to
``max_blocks``.  Each look may stop the run, so each look spends part of the error.  The spending
function is the Lan-DeMets O'Brien-Fleming type (Lan & DeMets 1983; Jennison & Turnbull, "Group
Sequential Methods", ch. 7): alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) with t = blocks / max_blocks,
which keeps most of the error for the late looks, where the intervals are narrow enough to use it.

The family of comparisons a spec asks is known at plan time; each of its ``m`` comparisons gets
alpha / m (Bonferroni), so the chance of any false "differs" over every comparison and every look is at
most alpha.  The critical value of each look comes from a simulation of the t statistic across looks
under no effect: its numerator is a running mean of normal blocks, its denominator a pooled spread
that grows by ``df_per_block`` degrees of freedom per block (1 for a paired difference, cells - 1 for
the two-way block x cell model); both pieces are independent (Helmert), so the simulation is exact.
"""

from __future__ import annotations

import functools
import math

from tuner.sweep.numlib import np, sps

SIMS = 40000
SEED = 23


def obf_spent(t: float, alpha: float) -> float:
    """Cumulative error spent by information fraction ``t`` (Lan-DeMets, O'Brien-Fleming type)."""
    if t >= 1.0:
        return alpha
    z = float(sps.norm.ppf(1.0 - alpha / 2.0))
    return float(2.0 - 2.0 * sps.norm.cdf(z / math.sqrt(t)))


def _null_t(looks: np.ndarray, df_per_block: int, sims: int, seed: int) -> np.ndarray:
    """|t| at every look (columns) of ``sims`` runs with no effect."""
    rng = np.random.default_rng(seed)
    top = int(looks[-1])
    z = np.cumsum(rng.standard_normal((sims, top)), axis=1)
    # the pooled sum of squares: (blocks - 1) * df_per_block degrees of freedom after `blocks` blocks
    chi = np.cumsum(rng.chisquare(df_per_block, (sims, top - 1)), axis=1)
    idx = looks - 1
    df = (looks - 1) * df_per_block
    s = np.sqrt(chi[:, idx - 1] / df)
    return np.abs(z[:, idx] / np.sqrt(looks)) / s


@functools.lru_cache(maxsize=256)
def boundary(alpha: float, min_blocks: int, max_blocks: int, df_per_block: int) -> tuple[float, ...]:
    """Critical |t| at each look min_blocks..max_blocks for one comparison at level ``alpha``."""
    looks = np.arange(min_blocks, max_blocks + 1)
    if looks.size == 1:
        return (float(sps.t.ppf(1.0 - alpha / 2.0, (min_blocks - 1) * df_per_block)),)
    t = _null_t(looks, df_per_block, SIMS, SEED)
    alive = np.ones(t.shape[0], bool)
    crit, spent = [], 0.0
    for k, n in enumerate(looks):
        target = obf_spent(n / max_blocks, alpha) - spent
        # reject `target` of all runs among those not stopped yet: the (1 - share) quantile of their |t|
        share = min(max(target * t.shape[0] / max(alive.sum(), 1), 0.0), 1.0)
        c = float(np.quantile(t[alive, k], 1.0 - share)) if share > 0 else math.inf
        crit.append(c)
        hit = alive & (t[:, k] > c)
        spent += hit.sum() / t.shape[0]
        alive &= ~hit
    return tuple(crit)


@functools.lru_cache(maxsize=256)
def fixed_critical(alpha: float, df: int) -> float:
    """One look at the nominal level (fixed repeats)."""
    return float(sps.t.ppf(1.0 - alpha / 2.0, df))
