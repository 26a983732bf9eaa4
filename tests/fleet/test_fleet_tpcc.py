"""`innotier fleet tpcc` for real: two shards on two namespace hosts, driven over SSH by ansible-runner,
against one MariaDB sandbox on the controller's bridge address, scraped by a real Prometheus."""

from __future__ import annotations

import json

import pytest

import nshosts
from nshosts import innotier_cli
from promhelpers import launch_prometheus
from tuner.core.measure import OPS, LatencyHistogram

pytestmark = pytest.mark.slow

METRICS_PORT = 9623
SCRAPE_S = 1.0


@pytest.fixture(scope="module")
def fleet_server(ns_fleet):
    """A sandbox on the bridge address, W=2, an account for the driver hosts (password in a 0600 file)."""
    with nshosts.bridge_sandbox(ns_fleet, "fleetdb", warehouses=2) as server:
        yield server


def test_two_shards_merge_to_the_server_count(installed_fleet, fleet_server, tmp_path):
    fleet, _ = installed_fleet
    sb, spec, cnf, password = fleet_server
    for h in fleet.hosts:
        h.extra_vars["innotier_metrics_listen"] = f"{h.addr}:{METRICS_PORT}"
    inv = fleet.write_inventory(tmp_path / "inventory.yml", {"drivers": [0, 1]})
    prom = launch_prometheus(tmp_path / "prom", {f"shard{h.index - 1}": f"{h.addr}:{METRICS_PORT}" for h in fleet.hosts},
                             tmp_path / "prometheus.log", interval=f"{SCRAPE_S:g}s")
    try:
        before = nshosts.sum_next_o_id(spec)
        out = tmp_path / "out"
        r = innotier_cli("fleet", "tpcc", "-i", str(inv), "--clients", "4", "--warmup", "3", "--duration", "12",
                         "--interval", "3", "--workers", "1", "--host", fleet.controller_addr, "--port", str(sb.port),
                         "--defaults-file", str(cnf), "--lead", "60", "--metrics-linger", "4", "--out", str(out),
                         "--json", "-o", str(tmp_path / "merged.json"), timeout=600)
        after = nshosts.sum_next_o_id(spec)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        merged = json.loads((tmp_path / "merged.json").read_text())
        shards = {h.name: json.loads((out / f"{h.name}.json").read_text()) for h in fleet.hosts}

        # -- the shards: disjoint home warehouses, a share of the clients each, one shared start
        assert shards["h1"]["extra"]["home_warehouses"] == [1, 1]
        assert shards["h2"]["extra"]["home_warehouses"] == [2, 2]
        assert [s["clients"] for s in shards.values()] == [2, 2] and merged["clients"] == 4
        assert len({s["extra"]["start_at"] for s in shards.values()}) == 1
        assert all(s["complete"] and s["errors"] == 0 for s in shards.values())

        # -- counts add; the New-Orders committed from connect to disconnect are exactly the server's
        no_commits = merged["extra"]["all_counts"]["new_order"]["commit"]
        assert no_commits == after - before > 0
        assert merged["counts"]["new_order"]["commit"] == sum(s["counts"]["new_order"]["commit"] for s in shards.values())
        completed = merged["counts"]["new_order"]["commit"] + merged["counts"]["new_order"]["rollback"]
        assert merged["tpmc"] == pytest.approx(completed * 60 / merged["measured_seconds"], abs=0.1)
        # server-side NOPM (each shard read the same server over the same window) agrees with client tpmC
        assert merged["nopm"] == pytest.approx(merged["tpmc"], rel=0.15)

        # -- histograms merged exactly: the merged percentiles are those of both shards' samples together
        for op in OPS:
            parts = [LatencyHistogram.from_dict(s["extra"]["histograms"][op]) for s in shards.values()]
            both = LatencyHistogram()
            for p in parts:
                both.merge(p)
            assert merged["latency_ms"][op] == both.summary_ms()
            assert both.count == sum(s["counts"][op]["commit"] + s["counts"][op]["rollback"] for s in shards.values())

        # -- intervals aligned on the shared clock: 4 intervals of 3 s, counts added
        assert len(merged["timeline"]) == 4
        for k, p in enumerate(merged["timeline"]):
            assert p["shards"] == 2
            assert p["commits"]["new_order"] == sum(s["timeline"][k]["commits"]["new_order"] for s in shards.values())
            assert p["latency_ms"]["new_order"]["count"] == sum(
                s["timeline"][k]["latency_ms"]["new_order"]["count"] for s in shards.values())

        # -- Prometheus scraped both shards (driver_id 0 and 1); sum() gives the fleet's figures
        series = prom.query("max_over_time(innotier_tpcc_new_orders_total[10m])")
        assert sorted(s["metric"]["driver_id"] for s in series) == ["0", "1"]
        total = sum(float(s["value"][1]) for s in series)
        # the lingering endpoints' last scrape holds the final counts: completed New-Orders (committed and
        # rolled back, TPC-C 5.4.1), as the exporter counts them
        assert total == no_commits + merged["extra"]["all_counts"]["new_order"]["rollback"]
        last_tpmc = prom.query("sum(last_over_time(innotier_tpcc_measured_tpmc[10m]))")
        assert float(last_tpmc[0]["value"][1]) == pytest.approx(merged["tpmc"], abs=0.2 * 2)
        # over the measured window, sum(rate) * 60 matches the merged tpmC within one scrape interval's orders
        t0 = merged["extra"]["start_at"] + merged["warmup_seconds"]
        t1 = t0 + merged["measured_seconds"]
        rows = prom.query_range("sum(innotier_tpcc_new_orders_total)", t0, t1, step=SCRAPE_S)[0]["values"]
        (ta, va), (tb, vb) = rows[0], rows[-1]
        prom_tpmc = (float(vb) - float(va)) * 60 / (tb - ta)
        per_scrape = merged["tpmc"] / 60 * SCRAPE_S
        assert abs(prom_tpmc - merged["tpmc"]) * (tb - ta) / 60 <= 2 * per_scrape + 1, (prom_tpmc, merged["tpmc"])

        # -- the password went nowhere but the 0600 file, and that file is gone from the hosts
        for f in out.rglob("*"):
            if f.is_file():
                assert password not in f.read_text(errors="replace"), f
        for h in fleet.hosts:
            assert not list((h.home / "fleet").rglob("client.cnf"))  # the shards' copies are gone
        assert password not in r.stdout + r.stderr
    finally:
        prom.service.stop()
