"""tuner.core.measure: the latency histogram's maths against brute force on random data."""

from __future__ import annotations

import math
import random

import pytest

from tuner.core.measure import OPS, LatencyHistogram, Measurement, bucket_index, bucket_upper_seconds

REL_ERROR = 0.01  # buckets are 1% wide


def _samples(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    # log-normal latencies around 2 ms with a long tail, clipped to the histogram's 1 us .. 1000 s range
    return [min(max(rng.lognormvariate(math.log(0.002), 1.5), 2e-6), 900.0) for _ in range(n)]


def _filled(samples: list[float]) -> LatencyHistogram:
    h = LatencyHistogram()
    for s in samples:
        h.record(s)
    return h


def _exact_percentile(sorted_samples: list[float], p: float) -> float:
    rank = max(1, math.ceil(len(sorted_samples) * p / 100.0))
    return sorted_samples[rank - 1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_match_a_brute_force_sort_within_one_percent(seed):
    samples = _samples(seed, 20000)
    h = _filled(samples)
    ordered = sorted(samples)
    for p in (1, 10, 50, 90, 95, 99, 99.9, 100):
        exact = _exact_percentile(ordered, p)
        got = h.percentile(p)
        assert exact <= got * (1 + 1e-12), (p, exact, got)          # the bucket's upper bound, never below
        assert got <= exact * (1 + REL_ERROR) + 1e-12, (p, exact, got)


def test_merge_equals_recording_everything_in_one():
    a_samples, b_samples = _samples(10, 5000), _samples(11, 7000)
    merged = _filled(a_samples)
    merged.merge(_filled(b_samples))
    whole = _filled(a_samples + b_samples)
    assert merged.counts == whole.counts
    assert merged.count == whole.count == 12000
    assert merged.sum == pytest.approx(whole.sum)
    assert (merged.min, merged.max) == (whole.min, whole.max)
    for p in (50, 95, 99):
        assert merged.percentile(p) == whole.percentile(p)


def test_merge_from_a_dict_and_of_an_empty_histogram():
    samples = _samples(12, 3000)
    h = LatencyHistogram()
    h.merge(_filled(samples).to_dict())    # what worker processes ship
    h.merge(LatencyHistogram())            # an idle worker changes nothing
    assert h.counts == _filled(samples).counts and h.min == min(samples) and h.max == max(samples)


def test_dict_round_trip():
    h = _filled(_samples(13, 1000))
    back = LatencyHistogram.from_dict(h.to_dict())
    assert (back.counts, back.count, back.sum, back.max, back.min) == (h.counts, h.count, h.sum, h.max, h.min)
    empty = LatencyHistogram.from_dict(LatencyHistogram().to_dict())
    assert empty.count == 0 and empty.percentile(99) == 0.0


def test_cumulative_le_against_brute_force():
    samples = _samples(14, 10000)
    h = _filled(samples)
    bounds = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0, 10.0]
    counts = h.cumulative_le(bounds)
    assert counts == sorted(counts)
    for b, got in zip(bounds, counts):
        # a bucket is counted whole: at least every sample <= b, at most those within the bucket's 1%
        assert sum(s <= b for s in samples) <= got <= sum(s <= b * (1 + REL_ERROR) for s in samples)


def test_bucket_bounds_are_one_percent_apart_and_contain_their_values():
    rng = random.Random(15)
    for _ in range(2000):
        s = 10 ** rng.uniform(-5.9, 2.9)
        i = bucket_index(s)
        assert bucket_upper_seconds(i - 1) <= s * (1 + 1e-9) and s <= bucket_upper_seconds(i) * (1 + 1e-9)
        assert bucket_upper_seconds(i) / bucket_upper_seconds(i - 1) == pytest.approx(1.01)


def test_measurement_snapshots_merge_across_workers():
    """Workers own a Measurement each; the parent merges their snapshots: counts and latencies add up."""
    parent = Measurement()
    parent.start_measuring()
    all_samples: list[float] = []
    for seed in (20, 21, 22):
        worker = Measurement()
        worker.start_measuring()
        samples = _samples(seed, 500)
        for s in samples:
            worker.record("new_order", s, "commit")
        worker.record("payment", 0.001, "error")
        all_samples += samples
        parent.merge(worker.snapshot())
    assert parent.counts["new_order"]["commit"] == 1500
    assert parent.counts["payment"]["error"] == 3
    assert parent.total["new_order"].counts == _filled(all_samples).counts
    assert set(parent.total) == set(OPS)
