"""TPC-C counters, gauges and latency histograms of a run, read from its Measurement.

Reads ``Measurement.read_cumulative()`` (counts and histograms since the run started,
warm-up included, merged from every worker by the driver's parent process), so the
counters are monotonic and ``rate()`` works from the first scrape.  Latency comes from
the Measurement's ~1% log histogram folded into ``LATENCY_BUCKETS`` with
``LatencyHistogram.cumulative_le``: a sample within 1% above a bound can land in that
bound's bucket.  Only completed attempts (commit or rollback) carry a latency, as in the
Measurement.
"""

from __future__ import annotations

import threading
from typing import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from exporters.collectors.base import Available, SourceCollector
from exporters.naming import (
    DURATION, GAUGE_WINDOW_SECONDS, LATENCY_BUCKETS, MEASURED_TPMC, NEW_ORDERS, RUN_PHASE, TPM, TPMC, TRANSACTIONS,
)
from exporters.window import SlidingRate
from tuner.core.measure import OUTCOMES, Measurement

PHASES = ("warmup", "measure", "done")


class TpccCollector(SourceCollector):
    name = "tpcc"
    help = "TPC-C transactions, New-Orders and latency of the run (the driver's Measurement)"
    needs = ("measurement",)
    min_version = None

    @classmethod
    def from_available(cls, available: Available) -> "TpccCollector":
        return cls(available.measurement, available.driver_id)

    def __init__(self, measurement: Measurement, driver_id: str, window: float = GAUGE_WINDOW_SECONDS) -> None:
        self.driver_id = driver_id
        self._lock = threading.Lock()
        self._measurement = measurement
        self._tpmc = SlidingRate(window)
        self._tpm = SlidingRate(window)
        self._bounds = [floatToGoString(b) for b in LATENCY_BUCKETS] + ["+Inf"]

    @property
    def measurement(self) -> Measurement:
        with self._lock:
            return self._measurement

    def set_measurement(self, measurement: Measurement) -> None:
        """Follow another run's Measurement (counters restart from 0; rate() handles the reset)."""
        with self._lock:
            self._measurement = measurement
            self._tpmc = SlidingRate(self._tpmc.window)
            self._tpm = SlidingRate(self._tpm.window)

    def sample(self, _measurement: Measurement | None = None) -> None:
        """Feed the sliding windows (called each second, at each interval close and at each scrape)."""
        counts, _ = self.measurement.read_cumulative()
        self._observe(counts)

    def _observe(self, counts: dict[str, dict[str, int]]) -> None:
        self._tpmc.observe(_completed_new_orders(counts))
        self._tpm.observe(sum(v.get("commit", 0) for v in counts.values()))

    def collect_families(self) -> Iterable[Metric]:
        m = self.measurement
        counts, hists = m.read_cumulative()
        self._observe(counts)
        d = self.driver_id

        txns = CounterMetricFamily(TRANSACTIONS, "TPC-C transaction attempts by type and outcome "
                                   "(commit, rollback, retry, error), warm-up included",
                                   labels=["driver_id", "txn", "outcome"])
        for op in m.ops:
            for outcome in OUTCOMES:
                txns.add_metric([d, op, outcome], counts[op][outcome])
        yield txns

        yield _single_counter(NEW_ORDERS, "Completed (committed + rolled-back, TPC-C 5.4.1) New-Order transactions, "
                              "warm-up included: tpmC = rate(innotier_tpcc_new_orders_total[1m]) * 60", d,
                              _completed_new_orders(counts))

        hist = HistogramMetricFamily(DURATION, "Latency of completed TPC-C transactions (commit or rollback)",
                                     labels=["driver_id", "txn"])
        for op in m.ops:
            h = hists[op]
            le = h.cumulative_le(LATENCY_BUCKETS)
            buckets = list(zip(self._bounds, le + [h.count]))
            hist.add_metric([d, op], buckets, h.sum)
        yield hist

        for name, rate, what in ((TPMC, self._tpmc, "completed (committed + rolled-back) New-Orders"), (TPM, self._tpm, "committed transactions")):
            value = rate.per_minute()
            if value is not None:
                g = GaugeMetricFamily(name, f"{what} per minute over the last {rate.window:g} s (for simple "
                                      "displays; prefer rate() of the _total counters)", labels=["driver_id"])
                g.add_metric([d], value)
                yield g

        if m.measure_started is not None:
            g = GaugeMetricFamily(MEASURED_TPMC, "tpmC of the measured window so far (the run's reported figure)",
                                  labels=["driver_id"])
            g.add_metric([d], m.tpmc())
            yield g

        phase = GaugeMetricFamily(RUN_PHASE, "1 for the run's current phase (warmup, measure, done)",
                                  labels=["driver_id", "phase"])
        for p in PHASES:
            phase.add_metric([d, p], 1.0 if m.phase == p else 0.0)
        yield phase


def _completed_new_orders(counts: dict[str, dict[str, int]]) -> int:
    """New-Orders that completed, committed or rolled back (TPC-C 5.4.1): what tpmC counts."""
    no = counts.get("new_order", {})
    return no.get("commit", 0) + no.get("rollback", 0)


def _single_counter(name: str, documentation: str, driver_id: str, value: float) -> CounterMetricFamily:
    c = CounterMetricFamily(name, documentation, labels=["driver_id"])
    c.add_metric([driver_id], value)
    return c
