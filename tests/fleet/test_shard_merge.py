"""Shard arithmetic, --shard/--start-at input, and the exactness of the shard merge (no server needed)."""

from __future__ import annotations

import math
import random

import pytest

from tuner.core.errors import FleetError, UsageError
from tuner.core.measure import OPS, LatencyHistogram, RunResult
from tuner.fleet.merge import merge_results
from tuner.tpcc.shard import Shard, ShardMeasurement, home_of, parse_start_at


def test_shards_cover_warehouses_and_clients_disjointly():
    for w in (2, 3, 7, 10, 100):
        for n in range(1, min(w, 6) + 1):
            ranges = [Shard(i, n).warehouses(w) for i in range(n)]
            covered = [x for lo, hi in ranges for x in range(lo, hi + 1)]
            assert covered == list(range(1, w + 1))  # disjoint, contiguous, complete
            for c in (n, n + 1, 4 * n + 3):
                shares = [Shard(i, n).clients(c) for i in range(n)]
                assert sum(shares) == c and max(shares) - min(shares) <= 1
    # a shard's terminals stay on its own warehouses, spread over its districts
    homes = [home_of(k, 3, 4) for k in range(40)]
    assert {w for w, _ in homes} == {3, 4} and {d for _, d in homes} == set(range(1, 11))


@pytest.mark.parametrize("text", ["", "1", "2/2", "-1/2", "a/b", "0/0"])
def test_bad_shard_is_refused(text):
    with pytest.raises(UsageError, match="--shard"):
        Shard.parse(text)


def test_too_few_warehouses_or_clients_are_refused():
    with pytest.raises(UsageError, match="warehouses"):
        Shard(0, 3).warehouses(2)
    with pytest.raises(UsageError, match="--clients"):
        Shard(0, 3).clients(2)


def test_start_at_forms():
    assert parse_start_at("1700000000.5") == 1700000000.5
    assert parse_start_at("2026-11-23T13:00:00Z") == parse_start_at("2026-11-23T14:00:00+01:00")
    assert parse_start_at("+30", now=100.0) == 130.0
    with pytest.raises(UsageError, match="time zone"):
        parse_start_at("2026-11-23T13:00:00")
    with pytest.raises(UsageError, match="not a time"):
        parse_start_at("soon")


def _shard_result(index: int, count: int, samples: list[list[tuple[str, float]]], start_at: float) -> RunResult:
    """A shard's RunResult built as the driver builds it: a ShardMeasurement fed interval by interval."""
    m = ShardMeasurement()
    m.start_measuring()
    for interval in samples:
        for op, s in interval:
            m.record(op, s, "commit")
        m.close_interval()
    m.finish()
    m.measure_ended = m.measure_started + 12.0
    r = RunResult.from_measurement(m, driver="builtin", mode="procedures", warehouses=4, clients=2,
                                   warmup_seconds=0.0)
    r.extra = {"histograms": {op: h.to_dict() for op, h in m.total.items() if h.count},
               "interval_histograms": m.interval_histograms, "shard": f"{index}/{count}", "start_at": start_at,
               "all_counts": {op: dict(v) for op, v in m.all_counts.items()}}
    return r


def test_merged_percentiles_are_those_of_the_concatenated_samples():
    rng = random.Random(7)

    def draw(n):  # a long-tailed latency mix, a different one per shard
        return [[(rng.choice(OPS), rng.lognormvariate(-5.5 + 0.3 * k, 0.9)) for _ in range(n)] for k in range(3)]

    a, b = draw(3000), draw(1700)
    first, second = _shard_result(1, 2, b, 1e9), _shard_result(0, 2, a, 1e9)
    first.extra["delivery_skipped_districts"], second.extra["delivery_skipped_districts"] = 3, 4
    merged = merge_results([first, second])
    assert merged.extra["delivery_skipped_districts"] == 7  # clause 2.7.4.2 counts every shard's skips
    for op in OPS:
        raw = sorted(s for iv in a + b for o, s in iv if o == op)
        concat = LatencyHistogram()
        for s in raw:
            concat.record(s)
        assert merged.latency_ms[op] == concat.summary_ms()
        assert LatencyHistogram.from_dict(merged.extra["histograms"][op]).counts == concat.counts
        for p in (50, 90, 95, 99):  # and within the histogram's 1% of the exact sample percentile
            exact = raw[max(1, math.ceil(len(raw) * p / 100)) - 1]
            assert exact <= merged.latency_ms[op][f"p{p}"] / 1e3 <= exact * 1.0101
    # intervals aligned: interval k of the merge holds interval k of both shards
    assert len(merged.timeline) == 3
    for k, p in enumerate(merged.timeline):
        assert sum(p["commits"].values()) == len(a[k]) + len(b[k])
        assert sum(v["count"] for v in p["latency_ms"].values()) == len(a[k]) + len(b[k])
    assert merged.counts["new_order"]["commit"] == sum(1 for iv in a + b for o, _ in iv if o == "new_order")
    assert merged.extra["per_shard"][0]["shard"] == "0/2"


def test_results_of_different_runs_are_not_merged():
    x = _shard_result(0, 2, [[("payment", 0.01)]], 1e9)
    y = _shard_result(1, 2, [[("payment", 0.01)]], 2e9)
    with pytest.raises(FleetError, match="start_at"):
        merge_results([x, y])
    with pytest.raises(FleetError, match="not the shards of one run"):
        merge_results([x, _shard_result(0, 2, [[("payment", 0.01)]], 1e9)])
    with pytest.raises(FleetError, match="no shard"):
        merge_results([])
