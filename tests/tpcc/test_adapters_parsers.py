"""The peer adapters' parsers on the recorded real consoles in tests/fixtures/recorded/peer-output.

Every expected value below is printed in the fixture file (see its README.txt for
the commands that produced them) or derived from printed values as noted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.core.measure import RunResult
from tuner.tpcc import adapters
from tuner.tpcc.adapters import _common as common
from tuner.tpcc.adapters import go_tpc, hammerdb, sysbench_tpcc, tpcc_mysql


RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "recorded" / "peer-output"


@pytest.fixture(scope="module")
def peer_output():
    d = RECORDED

    def read(name: str) -> str:
        return (d / name).read_text()

    return read


# ---------------------------------------------------------------------------
# HammerDB 4.12


def test_hammerdb_test_result_and_time_profile(peer_output):
    r = hammerdb.parse_output(peer_output("hammerdb-run-c8.txt"))
    assert isinstance(r, RunResult)
    assert r.driver == "hammerdb" and r.mode == "procedures"
    assert r.nopm == 44305.0
    assert r.tpm == 102729.0
    assert r.tpmc is None  # HammerDB prints no client-side New-Order count
    assert r.clients == 8  # "8 Active Virtual Users configured"
    assert r.warmup_seconds == 18.0  # "rampup time of 0.3 minutes"
    assert r.measured_seconds == 60.0  # "Timing test period of 1 in minutes"
    assert r.complete and r.failure is None and r.errors == 0
    # counts: half the printed "calls" (xtprof appends each sample list twice; see the next test)
    assert r.latency_ms["new_order"] == {"p50": 4.362, "p95": 8.691, "p99": 11.89, "min": 0.583, "avg": 4.73,
                                         "max": 92.716, "count": 122182 // 2}
    assert r.latency_ms["payment"]["p95"] == 7.529 and r.latency_ms["payment"]["count"] == 121528 // 2
    assert r.latency_ms["delivery"]["p99"] == 19.952 and r.latency_ms["delivery"]["max"] == 88.979
    assert r.latency_ms["stock_level"]["p50"] == 2.722 and r.latency_ms["stock_level"]["count"] == 12414 // 2
    assert r.latency_ms["order_status"]["p99"] == 6.461 and r.latency_ms["order_status"]["count"] == 12156 // 2
    assert set(r.latency_ms) == {"new_order", "payment", "delivery", "stock_level", "order_status"}
    assert "ramp-up" in r.extra["latency_scope"] and "halved" in r.extra["latency_scope"]


@pytest.mark.parametrize("name,fixture,shares", [
    ("hammerdb", "hammerdb-run-c8.txt", {"new_order": 43.55, "payment": 43.31}),  # 23-card deck: 43.5 / 43.5
    ("go-tpc", "go-tpc-run-c8.txt", {"new_order": 44.92, "payment": 43.17}),  # its weights 45/43/4/4/4
])
def test_realized_mix_of_a_peer(peer_output, name, fixture, shares):
    r = adapters.get(name).parse_output(peer_output(fixture))
    mix = common.realized_mix(r)
    assert sum(mix.values()) == pytest.approx(100, abs=0.05)
    for op, share in shares.items():
        assert mix[op] == pytest.approx(share, abs=0.1)


def test_hammerdb_profile_counts_every_call_twice(peer_output):
    """The evidence for halving: the profile's time shares sum to 198%, and the halved New-Order calls
    over the profile's elapsed time match the NOPM the server counted."""
    timing = hammerdb._timing_json(peer_output("hammerdb-run-c8.txt"))
    share = sum(float(t["ratio_pct"]) for t in timing.values())
    assert 197 < share < 199
    calls = int(timing["NEWORD"]["calls"]) // 2
    per_minute = calls * 60000 / float(timing["NEWORD"]["elapsed_ms"])  # ramp-up and run: 77.6 s
    assert per_minute == pytest.approx(44305, rel=0.10)  # "System achieved 44305 NOPM"


def test_hammerdb_counts_deadlocks_and_lock_wait_timeouts_as_errors(peer_output):
    # The server's messages as a virtual user prints them (they do not contain the word "error").
    text = peer_output("hammerdb-run-c8.txt").replace(
        "Vuser 1:Rampup complete", "Vuser 3:Deadlock found when trying to get lock; try restarting transaction\n"
        "Vuser 5:Lock wait timeout exceeded; try restarting transaction\n"
        "Vuser 6:Error in Virtual User 6: mysqlexec/db server: Duplicate entry\nVuser 1:Rampup complete")
    assert hammerdb.parse_output(text).errors == 3


def test_hammerdb_fractional_result_line():
    # the TEST RESULT line of a real HammerDB 4.12 run on this machine with mysql_duration 0.3 (W=1, 4 VUs)
    line = "\rVuser 1:TEST RESULT : System achieved 6873.333333333334 NOPM from 16313.333333333334 MySQL TPM\n"
    r = hammerdb.parse_output(line)
    assert (r.nopm, r.tpm) == (6873.3, 16313.3)


def test_hammerdb_announces_its_measured_phase_once_with_its_length(peer_output):
    """The monitor's "Timing test period of 1 in minutes" line (right after its start counts) is the anchor."""
    announced: list[float] = []
    watch = hammerdb.measuring_watch(announced.append)
    lines = peer_output("hammerdb-run-c8.txt").splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if "Timing test period" in ln)
    for line in lines[:start]:  # start-up and ramp-up: not yet measuring
        watch(line)
    assert announced == []
    for line in lines[start:] * 2:  # a repeated announcement changes nothing
        watch(line)
    assert announced == [60.0]
    assert hammerdb.measuring_watch(None) is None


def test_hammerdb_output_without_result_is_incomplete(peer_output):
    text = peer_output("hammerdb-run-c8.txt")
    cut = text[: text.index("Vuser 1:Rampup complete")]
    r = hammerdb.parse_output(cut)
    assert not r.complete and "TEST RESULT" in r.failure
    assert r.nopm is None and r.latency_ms == {}


def test_hammerdb_load_and_check_outputs_are_not_runs(peer_output):
    for name in ("hammerdb-load.txt", "hammerdb-check.txt"):
        r = hammerdb.parse_output(peer_output(name))
        assert not r.complete and r.nopm is None
    assert hammerdb.LOAD_DONE_RE.search(peer_output("hammerdb-load.txt").replace("\r", ""))


# ---------------------------------------------------------------------------
# tpcc-mysql


def test_tpcc_mysql_tpmc_counts_and_timeline(peer_output):
    r = tpcc_mysql.parse_output(peer_output("tpcc-mysql-run-c8.txt"))
    assert r.driver == "tpcc-mysql" and r.mode == "statements"
    assert r.tpmc == 21097.0
    assert (r.warehouses, r.clients, r.warmup_seconds, r.measured_seconds) == (4, 8, 20.0, 60.0)
    # <Raw Results>: commit = sc + lt, retry = rt, error = fl
    assert r.counts["new_order"] == {"commit": 2761 + 18336, "rollback": 0, "retry": 0, "error": 0}
    assert r.counts["payment"]["commit"] == 15827 + 5278
    assert r.counts["order_status"]["commit"] == 2071 + 39
    assert r.counts["delivery"]["commit"] == 2068 + 43
    assert r.counts["stock_level"]["commit"] == 464 + 1645
    assert r.counts["new_order"]["commit"] * 60 / 60 == r.tpmc  # TpmC = (sc+lt) * 60 / seconds
    assert r.extra["transactions"] == 48532  # sum of sc+lt+fl (fixture README)
    assert r.tps == round(48532 / 60, 2)
    assert r.extra["raw_results"]["new_order"]["avg_rt_ms_as_printed"] == 15.2
    assert r.complete and r.errors == 0 and r.retries == 0


def test_tpcc_mysql_interval_lines_are_milliseconds(peer_output):
    r = tpcc_mysql.parse_output(peer_output("tpcc-mysql-run-c8.txt"))
    assert [p["t"] for p in r.timeline] == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    first = r.timeline[0]
    assert first["commits"] == {"new_order": 2222, "payment": 2225, "order_status": 223, "delivery": 223,
                                "stock_level": 222}
    assert first["latency_ms"]["new_order"] == {"p95": 30.862, "p99": 52.691, "max": 153.867, "count": 2222}
    assert first["latency_ms"]["delivery"]["max"] == 152.969
    assert first["tpmc"] == 2222 * 6
    last = r.timeline[-1]
    assert last["latency_ms"]["new_order"]["p95"] == 17.670 and last["latency_ms"]["new_order"]["p99"] == 25.520
    # interval New-Order counts add up to the Raw Results count (21097)
    assert sum(p["commits"]["new_order"] for p in r.timeline) == 21097
    # whole-run max = largest interval max, in ms
    assert r.latency_ms["new_order"]["max"] == 163.919
    assert r.latency_ms["delivery"]["max"] == 173.627


def test_tpcc_mysql_cut_run_keeps_partial_timeline(peer_output):
    text = peer_output("tpcc-mysql-run-c8.txt")
    cut = text[: text.index("  40, trx:")]
    r = tpcc_mysql.parse_output(cut)
    assert not r.complete and "TpmC" in r.failure
    assert len(r.timeline) == 3 and r.tpmc is None


def test_tpcc_mysql_load_output_is_not_a_run(peer_output):
    text = peer_output("tpcc-mysql-load.txt")
    assert tpcc_mysql.LOAD_DONE in text
    r = tpcc_mysql.parse_output(text)
    assert not r.complete and r.timeline == [] and r.warehouses == 4


# ---------------------------------------------------------------------------
# sysbench-tpcc


def test_sysbench_tpcc_totals_and_percentiles(peer_output):
    r = sysbench_tpcc.parse_output(peer_output("sysbench-tpcc-run-c8.txt"))
    assert r.driver == "sysbench-tpcc" and r.mode == "statements"
    assert r.extra["transactions"] == 51214
    assert r.tps == 853.35
    assert r.measured_seconds == 60.0145
    assert r.clients == 8
    assert r.tpmc is None  # sysbench-tpcc prints no tpmC
    lat = r.latency_ms["all"]
    assert lat["p95"] == 26.20  # printed "95th percentile: 26.20"
    assert lat["p99"] == 42.611  # histogram row at rank ceil(51214 * 0.99) (README: about 42.6 ms)
    assert (lat["min"], lat["avg"], lat["max"], lat["count"]) == (0.27, 9.37, 241.67, 51214)
    assert r.extra["ignored_errors"] == 212
    assert r.retries == 212 and r.errors == 0  # ignored errors restart the event (tpcc.lua before_restart_event)
    assert r.extra["reconnects"] == 0
    assert r.complete


def test_sysbench_tpcc_check_verdicts(peer_output):
    text = peer_output("sysbench-tpcc-check.txt")
    ok, detail = sysbench_tpcc.parse_check(text)
    assert ok and detail == "40 checks passed"  # ten checks x warehouses 1-4 (README)
    ok, detail = sysbench_tpcc.parse_check(text.replace("Check 2, warehouse: 3 PASSED", "Check 2, warehouse: 3 FAILED"))
    assert not ok and detail == "40 checks, failed: check 2 warehouse 3"
    assert sysbench_tpcc.parse_check("sysbench 1.0.20\nFATAL: error 1146: Table 'x.district1' doesn't exist\n") == \
        (False, "sysbench-tpcc check printed no verdict")


def test_sysbench_histogram_is_complete_and_matches_printed_p95(peer_output):
    text = peer_output("sysbench-tpcc-run-c8.txt")
    rows = sysbench_tpcc.histogram(text)
    assert sum(c for _, c in rows) == 51214  # every event is in the histogram
    assert rows[0] == (0.275, 1) and rows[-1] == (240.024, 1)
    p95 = sysbench_tpcc.histogram_percentile(rows, 95)
    assert p95 == 26.205  # the bucket sysbench printed as "95th percentile: 26.20"
    assert abs(p95 - 26.20) < 0.01
    assert sysbench_tpcc.histogram_percentile(rows, 50) == 6.318


def test_sysbench_timeline(peer_output):
    r = sysbench_tpcc.parse_output(peer_output("sysbench-tpcc-run-c8.txt"))
    assert [p["t"] for p in r.timeline] == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    assert r.timeline[0]["tps"] == 825.16 and r.timeline[0]["latency_ms"]["all"]["p95"] == 27.17
    assert r.timeline[0]["retries"] == 29  # err/s 2.90 over 10 s
    assert r.timeline[0]["tpmc"] is None


def test_sysbench_load_and_check_outputs_are_not_runs(peer_output):
    for name in ("sysbench-tpcc-load.txt", "sysbench-tpcc-check.txt"):
        r = sysbench_tpcc.parse_output(peer_output(name))
        assert not r.complete and r.tps is None


# ---------------------------------------------------------------------------
# go-tpc


def test_go_tpc_summary(peer_output):
    r = go_tpc.parse_output(peer_output("go-tpc-run-c8.txt"))
    assert r.driver == "go-tpc" and r.mode == "statements"
    assert r.tpmc == 28142.1
    assert r.extra["tpm_total"] == 62659.5
    assert r.extra["efficiency_pct"] == 54708.5
    assert r.measured_seconds == 60.0
    no = r.latency_ms["new_order"]
    assert (no["p50"], no["p90"], no["p95"], no["p99"], no["p99.9"], no["max"], no["avg"], no["count"]) == \
        (7.9, 17.8, 22.0, 32.5, 52.4, 92.3, 9.4, 28139)
    assert r.latency_ms["payment"]["p95"] == 11.5 and r.latency_ms["payment"]["count"] == 27044
    assert r.latency_ms["order_status"]["p99"] == 8.4
    assert r.latency_ms["delivery"]["p95"] == 37.7
    assert r.latency_ms["stock_level"]["max"] == 41.9
    # _ERR rows are errors, never latencies
    assert r.counts["new_order"] == {"commit": 28139, "rollback": 0, "retry": 0, "error": 3}
    assert r.counts["delivery"]["error"] == 2 and r.counts["payment"]["error"] == 2
    assert r.counts["order_status"]["error"] == 0 and r.counts["stock_level"]["error"] == 0
    # ... but all 7 are the transactions the workers were inside at the --time deadline (7 "stopped due to
    # timeout: exec ... failed context deadline exceeded" lines; the 8th stopped between transactions)
    assert r.extra["err_rows"] == 7 and r.extra["deadline_err_rows"] == 7
    assert r.errors == 0
    assert r.complete


def test_go_tpc_run_with_real_errors(peer_output):
    """Lock-wait timeouts under --ignore-error (peer-output README.txt, the go-tpc errors section): 18 _ERR rows, 3 of them the deadline."""
    r = go_tpc.parse_output(peer_output("go-tpc-run-errors-c4.txt"))
    assert r.complete and r.tpmc == 5194.3
    assert r.counts["new_order"]["error"] == 5 and r.counts["payment"]["error"] == 13
    assert r.extra["err_rows"] == 18 and r.extra["deadline_err_rows"] == 3
    assert r.errors == 15
    assert "new_order" in r.latency_ms and r.latency_ms["payment"]["count"] == r.counts["payment"]["commit"]


def test_go_tpc_timeline(peer_output):
    r = go_tpc.parse_output(peer_output("go-tpc-run-c8.txt"))
    assert len(r.timeline) == 5  # five [Current] blocks before the deadline
    first = r.timeline[0]
    assert first["tpmc"] == 30598.3
    assert first["commits"] == {"delivery": 457, "new_order": 5096, "order_status": 501, "payment": 4872,
                                "stock_level": 432}
    assert first["latency_ms"]["new_order"]["p99"] == 30.4
    assert [p["t"] for p in r.timeline] == [10.0, 20.0, 30.0, 40.0, 50.0]


def test_go_tpc_cut_run_is_incomplete(peer_output):
    text = peer_output("go-tpc-run-c8.txt")
    r = go_tpc.parse_output(text[: text.index("Finished")])
    assert not r.complete and "tpmC" in r.failure
    assert len(r.timeline) == 5 and r.tpmc is None


def test_go_tpc_load_output_is_not_a_run(peer_output):
    r = go_tpc.parse_output(peer_output("go-tpc-load.txt"))
    assert not r.complete and r.timeline == []


# ---------------------------------------------------------------------------
# One result model


@pytest.mark.parametrize("name,fixture", [
    ("hammerdb", "hammerdb-run-c8.txt"), ("tpcc-mysql", "tpcc-mysql-run-c8.txt"),
    ("sysbench-tpcc", "sysbench-tpcc-run-c8.txt"), ("go-tpc", "go-tpc-run-c8.txt")])
def test_every_parser_fills_the_one_result_model(peer_output, name, fixture):
    r = adapters.get(name).parse_output(peer_output(fixture))
    assert r.driver == name
    again = RunResult.from_dict(r.to_dict())
    assert again == r
