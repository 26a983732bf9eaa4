"""The whole decision procedure under no effect: the factor that keeps its family-wise rate at alpha.

At every look the analysis chooses, on the same data, between the two-way model (pooled error) and each
comparison's paired interval (tuner/sweep/model.py: the checks of the model's assumptions).  Each analysis
alone keeps the schedule's rate (tuner/sweep/sequential.py) when its assumptions hold; the choice is a
preliminary test on the same data, and the model's assumptions can fail in ways the checks miss at a few
blocks.  So the critical values are calibrated over the whole procedure: simulate the spec's design with
no effect, run the checks, the choice and both analyses at every look, and take the smallest factor
``f >= 1`` on every critical value such that the chance of any false "differs" over all comparisons and
looks is at most alpha in each of three worlds (``null_tables``): normal noise, and two kinds of block
x cell interaction.  Both analyses are free of the block levels and of the noise's scale, so the simulation
needs neither.  Stopping early when everything is decided is ignored: that can only lower the rate.
"""

from __future__ import annotations

import functools
from typing import Any

from tuner.sweep.model import fit_tables
from tuner.sweep.numlib import np

SIMS = 20000
SEED = 2323
INTERACTION = 0.5  # cells respond to the block level by 1 -/+ this
DRIFT = 2.5  # block levels uniform over +/- this many run sd

# a comparison as cell indices of the design: (numerator cells, denominator cells)
Contrast = tuple[tuple[int, ...], tuple[int, ...]]


def switch_factor(target: Any, n: int) -> float:
    """The factor on ``target``'s (a ``stats.Target``) critical values at a look after ``n`` blocks (one factor for every look of an
    adaptive schedule; a fixed design has its one look at ``n``); 1.0 when no design is attached."""
    cells, contrasts = target.cells, target.contrasts
    if cells < 2 or not contrasts or (not target.adaptive and n < 2):
        return 1.0
    looks = (tuple(range(max(target.min_blocks, 2), max(target.max_blocks, target.min_blocks) + 1)) if target.adaptive
             else (n,))
    crit = {(k, per): target.schedule_critical(k, per) for k in looks for per in (1, cells - 1)}
    return _factor(cells, contrasts, looks, tuple(sorted(crit.items())), target.alpha)


@functools.lru_cache(maxsize=64)
def _factor(cells: int, contrasts: tuple[Contrast, ...], looks: tuple[int, ...],
            crit_items: tuple, alpha: float) -> float:
    rng = np.random.default_rng(SEED)
    worst = [worst_ratio(cells, contrasts, looks, dict(crit_items), tables)
             for tables in null_tables(rng, SIMS, looks[-1], cells)]
    return max(1.0, *(float(np.quantile(w, 1.0 - alpha)) for w in worst))


def null_tables(rng, sims: int, blocks: int, cells: int):
    """The worlds without any effect the factor must hold in (log tpmC in units of the run noise): normal noise
    with the model's assumptions true, and two block x cell interactions the checks often miss at a few blocks,
    with block levels over +/-2.5 run sd (a busy block slowing some cells more than others): the cells respond
    to the block level by 0.5x to 1.5x, or the last cell by twice as much as the others."""
    yield rng.standard_normal((sims, blocks, cells))
    level = rng.uniform(-DRIFT, DRIFT, (sims, blocks, 1))
    yield rng.standard_normal((sims, blocks, cells)) + level * (1.0 + INTERACTION * np.linspace(-1.0, 1.0, cells))
    one = np.ones(cells)
    one[-1] = 2.0
    yield rng.standard_normal((sims, blocks, cells)) + level * one


def worst_ratio(cells: int, contrasts: tuple[Contrast, ...], looks: tuple[int, ...], crit: dict, tables):
    """Per simulated run: the largest |t| / critical value over every comparison and look, with the analysis
    the checks choose at each look (a run says "differs" somewhere exactly when this exceeds the factor)."""
    y = tables  # (runs, blocks, cells) of log tpmC
    worst = np.zeros(y.shape[0])
    for n in looks:
        if n < 2:
            continue
        t = y[:, :n, :]
        model = fit_tables(t)
        holds = model.holds
        for num, den in contrasts:
            d = t[:, :, list(num)].mean(axis=2) - t[:, :, list(den)].mean(axis=2)  # per-block log ratio
            est = d.mean(axis=1)
            se_model = model.s * np.sqrt((1.0 / len(num) + 1.0 / len(den)) / n)
            se_paired = d.std(axis=1, ddof=1) / np.sqrt(n)
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(holds, np.abs(est) / se_model / crit[(n, cells - 1)],
                             np.abs(est) / se_paired / crit[(n, 1)])
            worst = np.fmax(worst, np.nan_to_num(r, nan=0.0, posinf=np.inf))
    return worst
