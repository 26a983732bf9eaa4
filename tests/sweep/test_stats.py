"""Statistics across repeats on synthetic results with known means and variances."""

from __future__ import annotations

import math
import random

import pytest

from tuner.sweep.stats import compare, summarize, t_cdf, t_ppf, welch


@pytest.mark.parametrize("df,expected", [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (30, 2.042)])
def test_t_quantiles_match_the_published_table(df, expected):
    # NIST/SEMATECH e-Handbook 1.3.6.7.2, upper critical values of Student's t, alpha = 0.025
    assert t_ppf(0.975, df) == pytest.approx(expected, abs=1e-3)


def test_t_cdf_is_symmetric_and_monotonic():
    assert t_cdf(0.0, 5) == pytest.approx(0.5)
    assert t_cdf(-2.0, 5) == pytest.approx(1 - t_cdf(2.0, 5))
    assert t_cdf(1.0, 5) < t_cdf(2.0, 5) < t_cdf(3.0, 5)


def test_summary_of_known_sample():
    s = summarize([10.0, 12.0, 14.0])  # mean 12, s = 2
    assert s.mean == pytest.approx(12.0)
    assert s.stdev == pytest.approx(2.0)
    half = 4.303 * 2.0 / math.sqrt(3)
    assert s.ci_low == pytest.approx(12.0 - half, abs=1e-2)
    assert s.ci_high == pytest.approx(12.0 + half, abs=1e-2)


def test_single_repeat_has_no_interval_and_no_verdict():
    s = summarize([100.0])
    assert s.stdev is None and s.ci_low is None
    c = compare([100.0], [150.0])
    assert c.significant is None
    assert "noise unknown" in c.verdict()


def test_welch_matches_the_textbook_example():
    # Welch's t-test, worked example 1 (Wikipedia "Welch's t-test"): t = -2.46, df = 25.0, p = 0.021
    a1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
    a2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
    t, df, p = welch(a2, a1)
    assert t == pytest.approx(-2.46, abs=0.01)
    assert df == pytest.approx(25.0, abs=0.1)
    assert p == pytest.approx(0.021, abs=0.001)


def test_confidence_interval_covers_the_true_mean_95_percent_of_the_time():
    rng = random.Random(20240601)
    true_mean, sd, n, trials = 1000.0, 50.0, 4, 2000
    hits = 0
    for _ in range(trials):
        s = summarize([rng.gauss(true_mean, sd) for _ in range(n)])
        hits += s.ci_low <= true_mean <= s.ci_high
    assert 0.93 <= hits / trials <= 0.97


def test_significance_statement_false_positive_rate_and_power():
    rng = random.Random(7)
    same = sum(compare([rng.gauss(100, 5) for _ in range(5)], [rng.gauss(100, 5) for _ in range(5)]).significant
               for _ in range(1000))
    assert 0.02 <= same / 1000 <= 0.08  # alpha = 0.05 under equal means
    different = sum(compare([rng.gauss(100, 5) for _ in range(5)], [rng.gauss(120, 5) for _ in range(5)]).significant
                    for _ in range(200))
    assert different / 200 > 0.95  # a 4-sigma difference is found


def test_relative_difference_and_verdict_text():
    c = compare([100.0, 102.0, 98.0], [110.0, 111.0, 109.0])
    assert c.rel_diff == pytest.approx(0.10)
    assert c.significant is True
    assert "+10.0%" in c.verdict() and "exceeds the noise" in c.verdict()
    c2 = compare([100.0, 110.0, 90.0], [101.0, 111.0, 91.0])
    assert c2.significant is False and "within the noise" in c2.verdict()
