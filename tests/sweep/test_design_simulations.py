"""Simulations with known truth: the demo's design (2 tiers x doublewrite ON/OFF, 3 planned comparisons, looks
after blocks 3..5) run through the same model, checks and schedule the analysis uses.

Seeded: the rates asserted are those of the method, the same on every run; each band is the nominal rate plus
about 2.5 binomial standard errors of the trial count."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.sweep.model import fit
from tuner.sweep.stats import Target, paired_ratio, ratio_from

CELLS = ("disk-ON", "disk-OFF", "tmpfs-ON", "tmpfs-OFF")
# the planned comparisons of the demo: placement (dw pooled), doublewrite on disk, doublewrite on tmpfs
FAMILY = ((("tmpfs-ON", "tmpfs-OFF"), ("disk-ON", "disk-OFF")), (("disk-OFF",), ("disk-ON",)),
          (("tmpfs-OFF",), ("tmpfs-ON",)))
DEMO = Target(min_blocks=3, max_blocks=5, comparisons=3)


def _table(rng, blocks: int, effects: dict[str, float], cv: float = 0.12, drift: float = 0.3, tails: bool = False,
           interaction: float = 0.0) -> np.ndarray:
    """log tpmC per block x cell: a block level, each cell's true effect, run noise (t3 when ``tails``), and a
    block x cell interaction (cells respond to the block level by different amounts)."""
    level = rng.uniform(-drift, drift, (blocks, 1))
    noise = rng.standard_t(3, (blocks, len(CELLS))) * cv / math.sqrt(3) if tails else rng.normal(0, cv, (blocks, len(CELLS)))
    slope = 1.0 + interaction * np.linspace(-1, 1, len(CELLS))
    return 10.0 + level * slope + np.log([effects.get(c, 1.0) for c in CELLS]) + noise


def _verdicts(logs: np.ndarray, target: Target):
    """What the analysis says at this look: the model when its checks hold, else each comparison's paired interval."""
    by = {c: {b: math.exp(logs[b, j]) for b in range(logs.shape[0])} for j, c in enumerate(CELLS)}
    tw = fit(by)
    out = []
    for num, den in FAMILY:
        if tw is not None and tw.holds:
            est, se = tw.contrast(list(num), list(den))
            out.append(ratio_from(est, se, tw.n, tw.df, tw.df_per_block, target, "two-way model"))
        else:
            gm = lambda cs: np.exp(np.mean([np.log(list(by[c].values())) for c in cs], axis=0))  # noqa: E731
            out.append(paired_ratio(gm(num), gm(den), target))
    return out


def _sequential(rng, effects: dict[str, float], target: Target = DEMO, **kw):
    """Look after every block from min_blocks on; stop when every comparison is decided."""
    logs = _table(rng, target.max_blocks, effects, **kw)
    for n in range(target.min_blocks, target.max_blocks + 1):
        vs = _verdicts(logs[:n], target)
        if all(v.decided for v in vs):
            break
    return vs


def _any_false_differs(rng, trials: int, **kw) -> float:
    """Family-wise: any comparison said "differs" at any look, when nothing differs."""
    hits = 0
    for _ in range(trials):
        logs = _table(rng, DEMO.max_blocks, {}, **kw)
        hits += any(v.status == "differs" for n in range(DEMO.min_blocks, DEMO.max_blocks + 1)
                    for v in _verdicts(logs[:n], DEMO))
    return hits / trials


@pytest.mark.parametrize("kind", ["normal", "heavy tails", "block x cell interaction"])
def test_family_wise_false_differs_over_all_comparisons_and_looks_is_at_most_5_percent(kind):
    rng = np.random.default_rng(2311)
    kw = {"tails": kind == "heavy tails", "interaction": 0.5 if kind == "block x cell interaction" else 0.0}
    trials = 400
    rate = _any_false_differs(rng, trials, **kw)
    print(f"\n{kind}: any false 'differs' over 3 comparisons and looks 3..5: {rate:.1%}")
    assert rate <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / trials)


@pytest.mark.parametrize("blocks", [3, 5, 10])
def test_every_printed_interval_covers_the_truth(blocks):
    """The model's and the paired fallback's intervals under the schedule (looks 3..10, 3 comparisons)."""
    target = Target(min_blocks=3, max_blocks=10, comparisons=3)
    rng = np.random.default_rng(100 + blocks)
    truth = {"tmpfs-ON": 1.3, "tmpfs-OFF": 1.3, "disk-OFF": 1.1}
    true_ratio = (1.3, 1.1, 1.0)
    trials, model_hits, paired_hits = 300, 0, 0
    for _ in range(trials):
        logs = _table(rng, blocks, truth)
        by = {c: {b: math.exp(logs[b, j]) for b in range(blocks)} for j, c in enumerate(CELLS)}
        tw = fit(by)
        for (num, den), r in zip(FAMILY, true_ratio):
            est, se = tw.contrast(list(num), list(den))
            m = ratio_from(est, se, tw.n, tw.df, tw.df_per_block, target, "two-way model")
            gm = lambda cs: np.exp(np.mean([np.log(list(by[c].values())) for c in cs], axis=0))  # noqa: E731
            p = paired_ratio(gm(num), gm(den), target)
            model_hits += m.low <= r <= m.high
            paired_hits += p.low <= r <= p.high
    n = trials * len(FAMILY)
    assert model_hits / n >= 0.95 - 2.5 * math.sqrt(0.05 * 0.95 / n)
    assert paired_hits / n >= 0.95 - 2.5 * math.sqrt(0.05 * 0.95 / n)


@pytest.mark.parametrize("ratio", [1.05, 1.10])
def test_false_equivalent_at_or_beyond_the_margin_is_rare(ratio):
    """A true 5% or 10% difference must not be called "equivalent within ±5%"."""
    rng = np.random.default_rng(int(ratio * 100))
    trials = 300
    # every planned comparison is truly `ratio`: placement, doublewrite on disk, doublewrite on tmpfs
    effects = {"disk-OFF": ratio, "tmpfs-ON": ratio, "tmpfs-OFF": ratio * ratio}
    false_eq = sum(v.status == "equivalent" for _ in range(trials) for v in _sequential(rng, effects, cv=0.03))
    rate = false_eq / (trials * len(FAMILY))
    print(f"\ntrue ratio {ratio}: false 'equivalent' {rate:.1%}")
    assert rate <= 0.05


def test_the_demo_design_decides_ram_against_disk_at_the_measured_effect_and_noise():
    """The issue's demo: tmpfs 1.3x the disk, run noise CV 12%, drift between blocks; looks after blocks 3..5."""
    rng = np.random.default_rng(1300)
    trials = 200
    decided = sum(_sequential(rng, {"tmpfs-ON": 1.3, "tmpfs-OFF": 1.3})[0].status == "differs" for _ in range(trials))
    print(f"\ndemo design, 1.3x, CV 12%: RAM vs disk decided 'differs' in {decided / trials:.0%} of runs")
    assert decided / trials >= 0.80
