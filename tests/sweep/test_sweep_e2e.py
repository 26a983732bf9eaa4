"""End to end on real MariaDB sandboxes: a two-cell sweep (W=1, 15 s runs) with a tmpfs the sweep mounts,
its results, its report with plots, and the metrics served while it runs."""

from __future__ import annotations

import base64
import json
import re
import urllib.request
from pathlib import Path

import pytest


SPEC = """
name: e2e
server: {flavor: mariadb}
workload: {driver: builtin, mode: procedures, warehouses: 1, warmup: 5, duration: 15, interval: 5}
repeats: 1
tiers:
  disk: {kind: home}
  tmpfs: {kind: tmpfs, size: 512M}
fixed: {page_size: 16k, clients: 2, buffer_pool_size: 128M}
axes:
  placement: [disk, {redo: tmpfs}]
"""


def _png_ok(data: bytes) -> bool:
    import io

    import matplotlib.image as mpimg

    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return False
    img = mpimg.imread(io.BytesIO(data), format="png")
    return img.ndim == 3 and img.shape[0] > 50 and img.shape[1] > 50


@pytest.mark.root
def test_two_cell_sweep_results_report_and_metrics(tmp_path, write_spec, background_cli, cli, innotier_home):
    spec = write_spec(SPEC)
    report_dir = tmp_path / "report"
    proc = background_cli("sweep", "run", spec, "--metrics-listen", "127.0.0.1:0", "--report", str(report_dir))
    lines: list[str] = []
    metrics_text = None
    for line in proc.stdout:
        lines.append(line)
        m = re.search(r"metrics: (http://\S+)", line)
        if m:
            url = m.group(1)
        if metrics_text is None and ": measure" in line and "[2/2]" in line:
            metrics_text = urllib.request.urlopen(url, timeout=10).read().decode()
    rc = proc.wait(timeout=600)
    out = "".join(lines)
    assert rc == 0, out

    # metrics were served while it ran: the sweep's progress and the current cell's TPC-C counters
    assert metrics_text is not None, out
    assert "innotier_sweep_cells_total" in metrics_text and "innotier_tpcc_transactions_total" in metrics_text
    assert 'sweep="e2e"' in metrics_text and 'placement="redo on tmpfs (rest on disk)"' in metrics_text

    # results: both cells, complete, with what reproduces them
    from tuner.sweep.results import ResultsStore
    from tuner.sweep.spec import load_spec

    run_id = load_spec(spec).run_id
    with ResultsStore() as store:
        assert store.integrity_check() == "ok"
        run = store.run(run_id)
        assert run["finished_at"] is not None and run["total_cells"] == 2
        cells = store.cells(run_id)
        assert [c.status for c in cells] == ["ok", "ok"]
        for c in cells:
            assert c.check_ok is True and c.tpmc > 0
            assert c.result["measured_seconds"] >= 14
            assert len(store.timeline(run_id, c.cell_id)) >= 2
            assert c.variables["innodb_page_size"] == "16384" and c.server_version.startswith("10.")
            assert "40-innotier-profile.cnf" in c.option_file and "innodb_buffer_pool_size" in c.option_file
            assert c.environment["kernel"].startswith("Linux") and c.environment["innotier"]
            assert "Percona Toolkit MySQL Summary Report" in (c.pt_summary or "")
            assert c.golden["clone"]["bytes"] > 0 and c.phases["measure"] > 0
            # InnoDB's own wait evidence over the measured window (issue 33): read from the server at both ends
            ev = c.evidence
            assert "error" not in ev, ev
            # the evidence window is the measured one (how long the clock says it was is not asserted)
            assert ev["seconds"] > 0 and ev["counters"]["data_fsyncs"] > 0  # every commit syncs the redo
            assert ev["counters"]["row_lock_waits"] >= 0 and ev["counters"]["free_page_waits"] >= 0
            assert ev["counters"]["lru_flushed"] is not None  # MariaDB splits LRU flushing out
            assert ev["monitor"]["os_wait_reservations"] is None  # and prints no wait array (10.6+)
            assert ev["monitor"]["end"]["checkpoint_age"] >= 0 and ev["page_cleaner"]["warnings"] == 0
            pk = ev["peaks"]  # sampled every 2 s through the ~15 s window on a second connection
            assert pk["failure"] is None and pk["samples"] >= 3 and pk["free_pages_min"] >= 0
            assert pk["checkpoint_age_max"] >= 0 and pk["row_lock_current_waits_max"] >= 0
        moved = cells[1]
        assert moved.settings["placement"] == {"datadir": "disk", "redo": "tmpfs"}
        redo_dir = moved.variables["innodb_log_group_home_dir"]
        assert "/mnt/" in redo_dir and moved.tiers["facts"]["tmpfs"]["kind"] == "tmpfs"
        assert "50-innotier-placement.cnf" in moved.option_file
        assert cells[0].variables["innodb_log_group_home_dir"] in ("./", "")

    # the tmpfs the sweep mounted is gone again, and no cell server is left running
    assert str(innotier_home / "mnt") not in Path("/proc/mounts").read_text()  # the sweep mounts its tiers there
    from tuner.core.sandbox import SandboxState, list_sandboxes

    assert not [s.name for s in list_sandboxes() if s.state() == SandboxState.RUNNING and s.name.startswith("sweep-")]

    # the report: HTML with every PNG embedded, Markdown beside them, a recommendation
    html = (report_dir / "report.html").read_text()
    pngs = sorted(report_dir.glob("*.png"))
    assert {p.name for p in pngs} >= {"tpmc_by_cell.png", "placement.png", "latency.png", "timeline.png"}
    for p in pngs:
        data = p.read_bytes()
        assert _png_ok(data), p
        assert base64.b64encode(data).decode() in html
    assert "<img src=\"http" not in html and "src=\"/" not in html  # self-contained
    # one block decides nothing: the ranking is not established, and the default is named as a default
    assert "On disk: ranking not established" in html and "(a default, not a finding of this sweep)" in html
    md = (report_dir / "report.md").read_text()
    assert "| cell |" in md and "![placement comparison](placement.png)" in md
    assert "## Outliers and InnoDB's wait evidence" in md and "MariaDB counts almost no free-page waits" in md
    summary = json.loads((report_dir / "summary.json").read_text())
    assert summary["complete"] and summary["recommendations"][0]["tier"] == "disk"

    # results commands
    exp = cli("results", "export", run_id, "--csv", check=True)
    assert len(exp.stdout.strip().splitlines()) == 3 and "tpmc" in exp.stdout.splitlines()[0]
    assert "evidence.row_lock_waits" in exp.stdout.splitlines()[0]
    shown = json.loads(cli("results", "show", run_id, "--json", check=True).stdout)
    assert len(shown["cells"]) == 2
    cell = json.loads(cli("results", "show", run_id, cells[1].cell_id, "--json", check=True).stdout)
    assert cell["timeline"] and cell["variables"]["innodb_log_group_home_dir"] == redo_dir
    # the same cell for people: tables and words, no Python reprs; what the report's "Reproduce" line promises
    human = cli("results", "show", run_id, cells[1].cell_id, check=True).stdout
    assert "consistency checks: all passed" in human and "checks: True" not in human
    assert "{'" not in human and "': " not in human, human
    for shown_part in ("settings", "option files:", f"server: {cell['server_version']}", "environment", "innotier",
                       "mysql-connector-python", redo_dir, "InnoDB wait evidence over the measured window: "):
        assert shown_part in human, shown_part
    assert f"innotier results show {run_id} CELL" in cli("results", "show", run_id, check=True).stdout
    assert f"`innotier results show {run_id} CELL` prints that cell's settings, option files" in md
    listed = json.loads(cli("results", "list", "--json", check=True).stdout)
    assert any(r["run_id"] == run_id and r["ok_cells"] == 2 for r in listed)
    # running the finished sweep again does nothing
    again = cli("sweep", "run", spec, "--no-metrics", check=True)
    assert "nothing to do" in again.stdout
