"""Paired, blocked statistics on synthetic data with known effects and a known drift between blocks.

Every simulation has a fixed seed: the rates asserted are those of the method, measured the same way on
every run (the assertion bands are a few binomial standard errors wide)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.sweep.stats import (Target, blocks_needed, compare, log_summarize, look_alpha, paired_ratio)


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
        r = paired_ratio(num, den, boot=0)
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
    assert r.boot_low is not None and r.boot_low > 1.0  # the bootstrap over blocks agrees
    assert w.significant is False  # same runs, blocks ignored: "within the noise"
    assert r.interval().startswith("1.") and "x [" in r.interval()


@pytest.mark.parametrize("blocks", [3, 5, 8])
def test_paired_interval_covers_the_true_ratio_95_percent_of_the_time(blocks):
    rng = np.random.default_rng(blocks)
    trials, hits = 3000, 0
    for _ in range(trials):
        num, den = blocked(rng, 1.35, blocks, sd=0.05)
        r = paired_ratio(num, den, boot=0)
        hits += r.low <= 1.35 <= r.high
    assert 0.935 <= hits / trials <= 0.965


def _sequential(rng, effect: float, target: Target, sd: float = 0.10, adjusted: bool = True):
    """Run the adaptive rule: look after every block from min_blocks on, stop at the first decision."""
    num, den = blocked(rng, effect, target.max_blocks, sd=sd)
    level = None if adjusted else 0.95
    for n in range(target.min_blocks, target.max_blocks + 1):
        r = paired_ratio(num[:n], den[:n], target, level=level, boot=0)
        if r.decided:
            return r
    return r


def test_adaptive_stopping_false_decision_rate_under_no_effect_is_nominal():
    target = Target(min_blocks=3, max_blocks=10)
    rng = np.random.default_rng(11)
    trials = 3000
    false = sum(_sequential(rng, 1.0, target).status == "differs" for _ in range(trials))
    naive = sum(_sequential(rng, 1.0, target, adjusted=False).status == "differs" for _ in range(trials))
    print(f"\nno effect, looks after blocks 3..10: false 'differs' {false / trials:.1%} with the calibrated "
          f"per-look level ({target.level():.4f}), {naive / trials:.1%} looking at 95% every time")
    assert 0.035 <= false / trials <= 0.065  # nominal 5%
    assert naive / trials > 0.10  # why the calibration is needed


def test_adaptive_rule_still_finds_a_real_effect_and_its_repeated_interval_covers():
    target = Target(min_blocks=3, max_blocks=10)
    rng = np.random.default_rng(12)
    results = [_sequential(rng, 1.20, target, sd=0.05) for _ in range(500)]
    assert sum(r.status == "differs" and r.low > 1.0 for r in results) / 500 > 0.9
    assert sum(r.low <= 1.20 <= r.high for r in results) / 500 >= 0.94


def test_look_alpha_is_calibrated_and_a_single_look_is_nominal():
    a = look_alpha(0.05, 3, 10)
    assert 0.005 < a < 0.05 / 2  # smaller than nominal, larger than Bonferroni over 8 looks is not required
    assert look_alpha(0.05, 3, 3) == 0.05
    assert Target(adaptive=False).level() == 0.95


def test_blocks_needed_predicts_when_an_interval_decides():
    target = Target(adaptive=False)
    # log-ratio mean 0.10 (+10.5%), sd 0.10: the paired t interval excludes 0 from 7 blocks on
    n = blocks_needed(0.10, 0.10, target)
    assert n is not None
    q = lambda m: 0.10 - __import__("scipy").stats.t.ppf(0.975, m - 1) * 0.10 / math.sqrt(m)  # noqa: E731
    assert q(n) > 0 and q(n - 1) <= 0
    assert blocks_needed(0.0, 0.5, target) is None  # no effect, huge spread: more than 50 blocks


def test_the_issues_demo_numbers_have_positive_bounds_and_say_how_many_blocks_would_decide():
    # issue 17: raw tpmC, repeat 1 / repeat 2 (dw=ON and dw=OFF pooled per tier)
    disk = [math.sqrt(17632 * 17306), math.sqrt(23978 * 24582)]
    tmpfs = [math.sqrt(33136 * 28116), math.sqrt(36208 * 28260)]
    s = log_summarize([17632, 23978])
    assert s.low > 0 and s.low < s.gmean < s.high  # the old report printed -54,399 .. 135,635
    r = paired_ratio(tmpfs, disk)
    assert r.status == "undecided" and r.more_blocks is not None and r.more_blocks >= 1
    assert "more blocks" in r.state()
    assert r.ratio == pytest.approx(math.exp((math.log(tmpfs[0] / disk[0]) + math.log(tmpfs[1] / disk[1])) / 2))


def test_equivalence_and_precision_decide_without_a_difference():
    t = Target(adaptive=False)
    same = paired_ratio([1000, 1010, 995, 1003, 1001], [1001, 1005, 999, 1000, 1002], t)
    assert same.status == "equivalent" and same.decided
    assert "equivalent" in same.state()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one value of each cell per block"):
        paired_ratio([1, 2], [1])
    with pytest.raises(ValueError, match="positive"):
        paired_ratio([0, 2], [1, 1])
    with pytest.raises(ValueError, match="positive"):
        log_summarize([100, -1])
