"""Paired, blocked statistics on synthetic data with known effects and a known drift between blocks.

Every simulation has a fixed seed: the rates asserted are those of the method, measured the same way on
every run (the assertion bands are a few binomial standard errors wide)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.sweep.stats import Target, compare, log_summarize, paired_ratio


def blocked(rng: np.random.Generator, effect: float, blocks: int, drift: float = 0.30, sd: float = 0.03):
    """Two cells measured once per block: the block scales both by up to +-drift; each run has its own noise."""
    f = 1.0 + rng.uniform(-drift, drift, blocks)
    den = 20000.0 * f * np.exp(rng.normal(0.0, sd, blocks))
    num = 20000.0 * effect * f * np.exp(rng.normal(0.0, sd, blocks))
    return num, den


def test_paired_decides_a_20_percent_effect_under_30_percent_drift_where_unpaired_cannot():
    rng = np.random.default_rng(20261123)
    trials, blocks = 400, 4
    paired_hits = welch_hits = 0
    for _ in range(trials):
        num, den = blocked(rng, 1.20, blocks)
        r = paired_ratio(num, den)
        paired_hits += r.status == "differs" and r.low > 1.0
        welch_hits += bool(compare(den, num).significant)
    paired_power, welch_power = paired_hits / trials, welch_hits / trials
    print(f"\n4 blocks, 20% effect, +-30% drift, 3% run noise: paired t decides {paired_power:.0%}, "
          f"unpaired Welch {welch_power:.0%}")
    assert paired_power > 0.95
    assert welch_power < 0.35


def test_one_example_shows_both_answers():
    rng = np.random.default_rng(5)
    num, den = blocked(rng, 1.20, 4)
    r = paired_ratio(num, den)
    w = compare(den, num)
    assert r.decided and 1.1 < r.ratio < 1.3 and r.low > 1.0
    assert w.significant is False  # same runs, blocks ignored: "within the noise"
    assert r.interval().startswith("1.") and "x [" in r.interval()


@pytest.mark.parametrize("blocks", [3, 5, 10])
def test_nominal_paired_interval_covers_the_true_ratio_95_percent_of_the_time(blocks):
    """The exploratory best-vs-best rows print this nominal 95% interval."""
    rng = np.random.default_rng(blocks)
    trials, hits = 3000, 0
    for _ in range(trials):
        num, den = blocked(rng, 1.35, blocks, sd=0.05)
        r = paired_ratio(num, den)
        hits += r.low <= 1.35 <= r.high
    assert 0.935 <= hits / trials <= 0.965


def test_the_issues_demo_numbers_have_positive_bounds_and_say_how_many_blocks_would_decide():
    # issue 17: raw tpmC, repeat 1 / repeat 2 (dw=ON and dw=OFF pooled per tier)
    disk = [math.sqrt(17632 * 17306), math.sqrt(23978 * 24582)]
    tmpfs = [math.sqrt(33136 * 28116), math.sqrt(36208 * 28260)]
    s = log_summarize([17632, 23978])
    assert s.low > 0 and s.low < s.gmean < s.high  # the old report printed -54,399 .. 135,635
    r = paired_ratio(tmpfs, disk)
    # two blocks give the spread 1 degree of freedom: the upper end of its range is beyond any schedule
    assert r.status == "undecided" and r.needed.low == 3 and r.needed.high is None
    assert r.state() == "undecided, 80% power needs 1 to more than the schedule's 50 blocks allow"
    assert r.ratio == pytest.approx(math.exp((math.log(tmpfs[0] / disk[0]) + math.log(tmpfs[1] / disk[1])) / 2))


def test_equivalence_is_the_margin_and_a_narrow_interval_holding_one_is_not_decided():
    t = Target(adaptive=False)
    same = paired_ratio([1000, 1010, 995, 1003, 1001], [1001, 1005, 999, 1000, 1002], t)
    assert same.status == "equivalent" and same.decided and "within ±5%" in same.state()
    # about [0.98, 1.05]: half-width under 4%, holds 1.0, reaches past the +5% margin: undecided (no "precise")
    near = paired_ratio([1060, 970, 1050, 980, 1070, 990, 1040, 960], [1000] * 8, t)
    assert near.low < 1.0 < 1.05 < near.high < 1.06 and near.status == "undecided" and not near.decided


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one value of each cell per block"):
        paired_ratio([1, 2], [1])
    with pytest.raises(ValueError, match="positive"):
        paired_ratio([0, 2], [1, 1])
    with pytest.raises(ValueError, match="positive"):
        log_summarize([100, -1])
