"""The TPC-C collector reads a Measurement: counters, New-Orders, latency histogram, gauges."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporters.collectors.base import Scrape, SourceCollector
from exporters.collectors.run_info import RunInfoCollector
from exporters.collectors.sweep import SweepCollector
from exporters.collectors.tpcc import TpccCollector
from exporters.naming import LATENCY_BUCKETS, sanitize_info
from exporters.state import RunState
from exporters.window import SlidingRate
from tuner.core.measure import Measurement
from tuner.core.phases import SweepPhase


def scrape(*sources: SourceCollector) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry(auto_describe=False)  # fresh registry per test
    registry.register(Scrape(sources))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def sample(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def recorded_measurement() -> Measurement:
    m = Measurement()
    for secs in (0.0004, 0.0009, 0.003, 0.003, 0.04, 0.7, 3.0, 9.0):
        m.record("new_order", secs, "commit")
    m.record("new_order", 0.002, "rollback")
    m.record("payment", 0.001, "commit")
    m.record("payment", 0.5, "retry")  # retries and errors carry no latency
    m.record("delivery", 0.2, "error")
    return m


def test_counters_and_new_orders_exact():
    s = scrape(TpccCollector(recorded_measurement(), driver_id="7"))
    assert sample(s, "innotier_tpcc_transactions_total", driver_id="7", txn="new_order", outcome="commit") == 8
    assert sample(s, "innotier_tpcc_transactions_total", driver_id="7", txn="new_order", outcome="rollback") == 1
    assert sample(s, "innotier_tpcc_transactions_total", driver_id="7", txn="payment", outcome="retry") == 1
    assert sample(s, "innotier_tpcc_transactions_total", driver_id="7", txn="delivery", outcome="error") == 1
    assert sample(s, "innotier_tpcc_transactions_total", driver_id="7", txn="stock_level", outcome="commit") == 0
    # completed New-Orders: 8 committed + 1 rolled back (TPC-C 5.4.1), as the tpmC gauge counts them
    assert sample(s, "innotier_tpcc_new_orders_total", driver_id="7") == 9
    # every txn x outcome exists from the start, so rate() has series before the first error
    assert sum(1 for (name, _l) in s if name == "innotier_tpcc_transactions_total") == 5 * 4


def test_latency_histogram_buckets_from_measurement():
    s = scrape(TpccCollector(recorded_measurement(), driver_id="0"))

    def bucket(le):
        return sample(s, "innotier_tpcc_transaction_duration_seconds_bucket", driver_id="0", txn="new_order", le=le)

    # new_order latencies: 0.0004 0.0009 0.002(rollback) 0.003 0.003 0.04 0.7 3.0 9.0
    assert bucket("0.0005") == 1
    assert bucket("0.001") == 2
    assert bucket("0.002") == 3
    assert bucket("0.005") == 5
    assert bucket("0.05") == 6
    assert bucket("1.0") == 7
    assert bucket("5.0") == 8
    assert bucket("+Inf") == 9
    assert sample(s, "innotier_tpcc_transaction_duration_seconds_count", driver_id="0", txn="new_order") == 9
    assert sample(s, "innotier_tpcc_transaction_duration_seconds_sum", driver_id="0", txn="new_order") == \
        pytest.approx(0.0004 + 0.0009 + 0.002 + 0.003 + 0.003 + 0.04 + 0.7 + 3.0 + 9.0)
    # the payment retry has no latency sample
    assert sample(s, "innotier_tpcc_transaction_duration_seconds_count", driver_id="0", txn="payment") == 1
    les = [le for (name, labels) in s if name.endswith("_bucket") for k, le in labels if k == "le"]
    assert len(set(les)) == len(LATENCY_BUCKETS) + 1


def test_worker_snapshots_merged_into_parent_are_counted():
    parent, worker = Measurement(), Measurement()
    for _ in range(3):
        worker.record("new_order", 0.01)
    parent.merge(worker.snapshot())
    worker.record("new_order", 0.01)
    parent.merge(worker.snapshot())
    s = scrape(TpccCollector(parent, driver_id="0"))
    assert sample(s, "innotier_tpcc_new_orders_total", driver_id="0") == 4
    assert sample(s, "innotier_tpcc_transaction_duration_seconds_count", driver_id="0", txn="new_order") == 4


def test_phase_and_measured_tpmc():
    m = recorded_measurement()
    s = scrape(TpccCollector(m, driver_id="0"))
    assert sample(s, "innotier_tpcc_run_phase", driver_id="0", phase="warmup") == 1
    assert ("innotier_tpcc_measured_tpmc", (("driver_id", "0"),)) not in s
    m.start_measuring()
    m.record("new_order", 0.01)
    s = scrape(TpccCollector(m, driver_id="0"))
    assert sample(s, "innotier_tpcc_run_phase", driver_id="0", phase="measure") == 1
    assert sample(s, "innotier_tpcc_measured_tpmc", driver_id="0") > 0


def test_sliding_rate():
    r = SlidingRate(window=60, min_span=1)
    assert r.per_minute() is None
    r.observe(0, now=100.0)
    r.observe(10, now=100.5)
    assert r.per_minute() is None  # spans less than min_span
    r.observe(100, now=110.0)
    assert r.per_minute() == pytest.approx(100 * 60 / 10)
    for t in range(111, 200):
        r.observe(100 + (t - 110) * 2, now=float(t))  # 2 per second from t=110
    assert r.per_minute() == pytest.approx(120.0)  # only the last 60 s count
    r.observe(5, now=200.0)  # counter reset: a new run
    assert r.per_minute() is None


def test_gauges_appear_once_window_has_span():
    m = Measurement()
    c = TpccCollector(m, driver_id="0")
    c._tpmc = SlidingRate(60, min_span=0.0)
    c._tpm = SlidingRate(60, min_span=0.0)
    s = scrape(c)
    assert ("innotier_tpcc_tpmc", (("driver_id", "0"),)) not in s
    m.record("new_order", 0.01)
    m.record("payment", 0.01)
    s = scrape(c)
    assert sample(s, "innotier_tpcc_tpmc", driver_id="0") > 0
    assert sample(s, "innotier_tpcc_tpm", driver_id="0") > sample(s, "innotier_tpcc_tpmc", driver_id="0")


def test_run_info_bounded_and_without_secrets():
    info = {"tier": "zram", "page_size": "4k", "clients": 8, "run_id": "3f2a-uuid", "password": "hunter2",
            "placement": "mysql://root:pw@host/db", "profile": "token=abc", "driver_id": "2"}
    assert sanitize_info(info) == {"tier": "zram", "page_size": "4k", "clients": "8"}
    s = scrape(RunInfoCollector(RunState(info), driver_id="2"))
    [(name, labels)] = [k for k in s if k[0] == "innotier_run_info"]
    labels = dict(labels)
    assert labels["tier"] == "zram" and labels["clients"] == "8" and labels["driver_id"] == "2"
    assert "run_id" not in labels and "password" not in labels
    assert "hunter2" not in repr(s) and "pw@" not in repr(s)


def test_run_info_replaced_and_sweep_progress():
    state = RunState({"tier": "ram"})
    state.set_info({"tier": "zram"})
    state.set_progress(3, 12, SweepPhase.MEASURE)
    s = scrape(RunInfoCollector(state, "0"), SweepCollector(state, "0"))
    tiers = [dict(l)["tier"] for (n, l) in s if n == "innotier_run_info"]
    assert tiers == ["zram"]
    assert sample(s, "innotier_sweep_cells_total", driver_id="0") == 12
    assert sample(s, "innotier_sweep_cells_done", driver_id="0") == 3
    assert sample(s, "innotier_sweep_phase", driver_id="0", phase="measure") == 1


class Broken(SourceCollector):
    name = "broken"
    help = "always fails"

    def collect_families(self):
        raise RuntimeError("source gone")


def test_failing_collector_does_not_fail_the_scrape():
    s = scrape(Broken(), TpccCollector(recorded_measurement(), "0"))
    assert sample(s, "innotier_collector_success", collector="broken") == 0
    assert sample(s, "innotier_collector_success", collector="tpcc") == 1
    assert sample(s, "innotier_tpcc_new_orders_total", driver_id="0") == 9
    assert sample(s, "innotier_collector_duration_seconds", collector="tpcc") >= 0
