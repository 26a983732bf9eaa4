"""Dashboards are generated from code: the committed files must equal what the code generates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from exporters import dashboards
from exporters.dashboard_panels import DASHBOARDS

REPO = Path(__file__).resolve().parents[2]


def test_committed_files_equal_regenerated(tmp_path):
    written = dashboards.generate(tmp_path)
    assert sorted(written) == sorted(dashboards.expected_files())
    for rel in written:
        committed = REPO / "grafana" / rel
        assert committed.is_file(), f"{rel} is not committed; run `innotier dashboards generate`"
        assert committed.read_text() == (tmp_path / rel).read_text(), \
            f"grafana/{rel} differs from the code; run `innotier dashboards generate`"
    assert dashboards.check(REPO / "grafana") == []


def test_generation_is_deterministic():
    assert dashboards.expected_files() == dashboards.expected_files()


def test_check_cli_fails_on_a_hand_edit(tmp_path):
    dashboards.generate(tmp_path)
    ok = subprocess.run([sys.executable, "-m", "tuner.cli", "dashboards", "generate", "--check", "--output",
                         str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    f = tmp_path / "dashboards" / "innotier-tpcc.json"
    d = json.loads(f.read_text())
    d["title"] = "hand edited"
    f.write_text(json.dumps(d))
    bad = subprocess.run([sys.executable, "-m", "tuner.cli", "dashboards", "generate", "--check", "--output",
                          str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 1
    assert "dashboards/innotier-tpcc.json" in bad.stderr and "innotier dashboards generate" in bad.stderr


def test_every_panel_has_queries_and_a_prometheus_datasource():
    for spec in DASHBOARDS:
        d = json.loads((REPO / "grafana" / "dashboards" / spec.file).read_text())
        assert d["uid"] == spec.uid
        panels = [p for p in d["panels"] if p["type"] != "row"]
        assert panels
        for p in panels:
            assert p["targets"], p["title"]
            for t in p["targets"]:
                assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids))
    queries = [q for spec in DASHBOARDS
               for q in dashboards.panel_queries(json.loads((REPO / "grafana" / "dashboards" / spec.file).read_text()))]
    assert any("annotation" in where for where, _ in queries)


def test_required_panels_present():
    titles = {p.title for spec in DASHBOARDS for row in spec.rows for p in row.panels}
    exprs = " ".join(q.expr for spec in DASHBOARDS for row in spec.rows for p in row.panels for q in p.queries)
    for needed in ("tpmC and NOPM", "Latency p95 by transaction", "Latency p99 by transaction", "Transaction mix",
                   "Errors, retries and rollbacks", "Sweep progress"):
        assert needed in titles
    for metric in ("mysql_global_status_innodb_data_fsyncs", "node_disk_written_bytes_total",
                   "innotier_innodb_doublewrite_pages_written_total", "histogram_quantile(0.99"):
        assert metric in exprs
