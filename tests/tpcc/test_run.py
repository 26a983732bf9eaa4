"""`tpcc run` end to end on real sandboxes: the mix, rollbacks, metrics, consistency after, bad input, a killed server."""

from __future__ import annotations

import json
import threading

import pytest

from tuner.core.errors import UsageError, WorkloadError
from tuner.core.measure import OPS, Measurement
from tuner.tpcc import driver
from tuner.tpcc.config import RunConfig

from tuner.tpcc import mix


def assert_consistent(spec) -> None:
    from tuner.tpcc.check import run_checks

    report = run_checks(spec, "tpcc")
    assert report.ok, report


@pytest.mark.parametrize("mode", ["procedures", "statements"])
def test_run_reports_the_mix_rollbacks_and_metrics(tpcc_w1, mode):
    assert_consistent(tpcc_w1)
    points = []
    m = Measurement()
    cfg = RunConfig(clients=4, warmup=2, duration=20, interval=5, mode=mode, database="tpcc")
    r = driver.run(tpcc_w1, cfg, m, on_interval=points.append)
    assert r.complete and r.failure is None
    assert r.driver == "builtin" and r.mode == mode and r.warehouses == 1 and r.clients == 4
    done = {op: r.counts[op]["commit"] + r.counts[op]["rollback"] + r.counts[op]["error"] for op in OPS}
    total = sum(done.values())
    assert all(done[op] > 0 for op in OPS), done
    # The 23-card deck (5.2.4.2): a client's window holds whole decks plus at most a partial deck at each end,
    # so each op is within 2 x its cards per client of its exact share.
    assert r.extra["deck"].startswith("23 cards")
    for e in mix.DECKS["23"]:
        assert abs(done[e.op] - total * e.weight / 23) <= 2 * e.weight * cfg.clients, (e.op, done)
        assert r.extra["realized_mix"][e.op] == pytest.approx(100.0 * done[e.op] / total, abs=0.01)
    no = r.counts["new_order"]
    rollback_share = no["rollback"] / (no["commit"] + no["rollback"])
    assert 0.002 < rollback_share < 0.03, no  # 1% (2.4.1.4); few hundred orders, so a wide band
    assert r.rollbacks == no["rollback"] and r.errors == 0
    # tpmC counts completed New-Orders, committed and rolled back (5.4.1); NOPM from sum(d_next_o_id) over the
    # same window (rolled-back orders do not move it)
    assert r.tpmc == pytest.approx((no["commit"] + no["rollback"]) * 60 / r.measured_seconds, abs=0.1)
    assert sum(p.commits["new_order"] for p in points) == no["commit"]
    assert r.nopm is not None and r.nopm == pytest.approx(r.tpmc, rel=0.15)
    assert r.tpm is not None and r.tpm >= r.tpmc
    # timeline: one point per 5 s interval, latency percentiles from the histogram
    assert len(points) == 4 and len(r.timeline) == 4
    assert all(p.tpmc > 0 for p in points)
    lat = r.latency_ms["new_order"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    assert lat["count"] == no["commit"] + no["rollback"]
    # the shared Measurement is what exporters read: warm-up included in all_counts, excluded from counts
    assert m.all_counts["new_order"]["commit"] > no["commit"]
    assert r.extra["client_cpu_seconds"] > 0 and r.extra["client_rss_bytes"] > 0
    assert_consistent(tpcc_w1)


def test_cli_run_json(tpcc_w1, shared_sandbox, cli, tmp_path):
    out = tmp_path / "r.json"
    p = cli("tpcc", "run", "--sandbox", shared_sandbox.name, "--clients", "2", "--warmup", "0", "--duration", "3",
            "--interval", "1", "--deck", "100", "--json", "-o", str(out))
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["complete"] and r["tpmc"] > 0 and len(r["timeline"]) == 3
    assert r["extra"]["deck"].startswith("100 cards") and "not the spec" in r["extra"]["deck"]
    assert set(r["extra"]["realized_mix"]) == set(OPS) and "sorts the lines" in r["extra"]["new_order_lines"]
    assert json.loads(out.read_text())["tpmc"] == r["tpmc"]
    human = cli("tpcc", "run", "--sandbox", shared_sandbox.name, "--clients", "2", "--warmup", "0",
                "--duration", "2", "--interval", "1")
    assert human.returncode == 0, human.stderr
    assert "tpmC" in human.stdout and "NOPM" in human.stdout and "p99" in human.stdout


# ---------------------------------------------------------------------------
# Bad input: one clear line, nothing started


@pytest.mark.parametrize("args, message", [
    (["--warehouses", "0"], "--warehouses 0 is not valid"),
    (["--duration", "-5"], "--duration -5 is not valid"),
    (["--clients", "0"], "--clients 0 is not valid"),
    (["--mode", "statements", "--interval", "0"], "--interval 0 is not valid"),
])
def test_cli_rejects_bad_numbers(shared_sandbox, cli, args, message):
    p = cli("tpcc", "run", "--sandbox", shared_sandbox.name, *args)
    assert p.returncode == UsageError.exit_code
    assert message in p.stderr and "Traceback" not in p.stderr


def test_clients_above_max_connections_are_refused(tpcc_w1, shared_sandbox, cli):
    conn = tpcc_w1.connect()
    cur = conn.cursor()
    cur.execute("SELECT @@max_connections")
    max_connections = cur.fetchone()[0]
    conn.close()
    p = cli("tpcc", "run", "--sandbox", shared_sandbox.name, "--clients", str(max_connections + 5))
    assert p.returncode == UsageError.exit_code
    assert "max_connections" in p.stderr and str(max_connections) in p.stderr


def test_warehouses_beyond_the_loaded_ones_are_refused(tpcc_w1):
    with pytest.raises(UsageError, match="more than the 1 loaded"):
        driver.run(tpcc_w1, RunConfig(clients=1, warmup=0, duration=1, warehouses=3))


def test_never_loaded_schema_is_refused_with_the_fix(shared_sandbox, cli):
    conn = shared_sandbox.connection_spec().connect()
    conn.cursor().execute("CREATE DATABASE IF NOT EXISTS tpcc_never_loaded")
    conn.close()
    p = cli("tpcc", "run", "--sandbox", shared_sandbox.name, "--database", "tpcc_never_loaded", "--duration", "5")
    assert p.returncode == WorkloadError.exit_code
    assert "no loaded TPC-C schema" in p.stderr and "innotier tpcc load" in p.stderr
    with pytest.raises(WorkloadError, match="innotier tpcc load"):
        driver.run(shared_sandbox.connection_spec(), RunConfig(clients=1, duration=1, database="nothing_here"))


# ---------------------------------------------------------------------------
# A server that goes away mid-run


@pytest.fixture(scope="module")
def kill_sandbox(innotier_home):
    """A small sandbox of its own (the shared one must stay up), W=1 loaded."""
    from tuner.core import sandbox as sbx
    from tuner.tpcc.loader import load

    sb = sbx.create("tpcc-kill", page_size="16k", options={"innodb_buffer_pool_size": "128M"})
    sb.start()
    load(sb.connection_spec(), warehouses=1, database="tpcc", drop=True, progress=False)
    yield sb
    if sb.state() == sbx.SandboxState.RUNNING:
        sb.stop("kill")


def test_run_rides_through_a_server_restart(kill_sandbox):
    """A restart mid-run costs the transactions in flight (errors), not the run."""
    spec = kill_sandbox.connection_spec("tpcc")
    m = Measurement()
    points = []
    bounce = threading.Thread(target=lambda: (kill_sandbox.stop("clean"), kill_sandbox.start()))

    def on_interval(p):
        points.append(p)
        if len(points) == 2:
            bounce.start()

    try:
        r = driver.run(spec, RunConfig(clients=4, warmup=1, duration=30, interval=1, mode="statements",
                                       outage_limit=120), m, on_interval=on_interval)
    finally:
        bounce.join(300)
    assert r.complete and r.failure is None, r.failure
    outages = r.extra["outages"]
    assert len(outages) >= 1 and r.extra["reconnects"] >= 1
    assert r.errors >= 1 and sum(r.extra["error_messages"].values()) == r.errors
    assert any(msg.startswith(("2013", "2006", "1053", "4031", "1927")) for msg in r.extra["error_messages"])
    back = outages[-1]["end"] - m.measure_started
    assert any(p["tpmc"] > 0 for p in r.timeline if p["t"] > back + 1), (back, r.timeline)
    assert "TPM unknown" in " ".join(r.extra["notes"]) and r.tpm is None and r.nopm is not None


def test_server_killed_mid_run_keeps_the_partial_timeline(kill_sandbox):
    spec = kill_sandbox.connection_spec("tpcc")
    points = []

    def on_interval(p):
        points.append(p)
        if len(points) == 3:
            kill_sandbox.stop("kill")

    r = driver.run(spec, RunConfig(clients=4, warmup=1, duration=60, interval=1, mode="procedures",
                                   outage_limit=3), on_interval=on_interval)
    # ended by the outage limit, not by the 60 s asked for: only the "lost" path sets this failure
    assert r.complete is False
    assert "did not come back" in r.failure and "stayed away for more than 3 s" in r.failure
    assert len(r.timeline) >= 3 and r.timeline[0]["tpmc"] > 0
    assert sum(r.counts[op]["commit"] for op in OPS) > 0
    # the measured window is kept up to the failure: it covers every interval of the partial timeline
    assert r.measured_seconds >= r.timeline[-1]["t"] > 0
