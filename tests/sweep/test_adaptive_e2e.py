"""End to end on real MariaDB sandboxes: a 2-cell sweep with ``repeats: auto`` stops by itself, every run
has its noise figures, and a CPU hog the test starts during one block gets that block flagged."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SPEC = """
name: e2e-auto
server: {flavor: mariadb}
workload: {driver: builtin, mode: procedures, warehouses: 1, warmup: 2, duration: 10, interval: 5}
repeats: auto
stop: {budget: 20m, min_blocks: 2, max_blocks: 3}
tiers:
  disk: {kind: home}
  tmpfs: {kind: tmpfs, size: 512M}
fixed: {page_size: 16k, clients: 2, buffer_pool_size: 64M}
axes:
  placement: [disk, tmpfs]
"""
HOG = "import os\nwhile True:\n    os.getpid()\n"


def _start_hogs(n: int) -> list[subprocess.Popen]:
    """Busy loops outside the sweep's process tree (children of the test, not of the runner)."""
    return [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(n)]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)


@pytest.mark.root
@pytest.mark.slow
def test_auto_repeats_stop_by_themselves_and_a_cpu_hog_block_is_flagged(tmp_path, write_spec, background_cli, cli,
                                                                          innotier_home):
    spec = write_spec(SPEC)
    report_dir = tmp_path / "report"
    # metrics on (the wait-quiet phase is exported too) and a short --wait-quiet before every window
    proc = background_cli("sweep", "run", spec, "--metrics-listen", "127.0.0.1:0", "--no-pt-summary", "--wait-quiet",
                          "4", "--report", str(report_dir))
    lines: list[str] = []
    hogs: list[subprocess.Popen] = []
    hog_block = None
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("after block 1:") and not hogs:
                hogs, hog_block = _start_hogs(2), 2  # block 2 runs with two busy loops beside it
            elif hogs and (line.startswith("after block 2:") or line.startswith("stopping after")):
                _stop(hogs)
        rc = proc.wait(timeout=900)
    finally:
        _stop(hogs)
    out = "".join(lines)
    assert rc == 0, out
    assert hog_block == 2, out

    from tuner.sweep.results import ResultsStore
    from tuner.sweep.spec import load_spec

    run_id = load_spec(spec).run_id
    with ResultsStore() as store:
        run = store.run(run_id)
        cells = store.cells(run_id)
    # it stopped by itself: the target or max_blocks, recorded with the run
    assert run["finished_at"] is not None and run["stop"], out
    blocks = run["stop"]["blocks"]
    assert 2 <= blocks <= 3 and run["stop"]["reason"].startswith(("target reached", "max_blocks")), run["stop"]
    assert len(cells) == 2 * blocks and all(c.status == "ok" for c in cells)
    assert run["design"]["adaptive"] and run["design"]["seed"] is not None
    # the randomized block order is the recorded one
    for b in range(1, blocks + 1):
        assert {c.config_key for c in cells if c.block == b} == {c.config_key for c in cells if c.block == 1}
    # every run has its noise figures: the measured window and the calibration probe
    for c in cells:
        w, p = c.noise["window"], c.noise["probe"]
        assert w["seconds"] >= 8 and 0.0 <= w["others_cpu_share"] <= 1.0 and w["ours_cores"] > 0.1, w
        assert w["loadavg_end"] and w["steal_share"] is not None and "flagged" in w
        assert p["cpu_loop_s"] > 0 and p["fsyncs"] >= 1 and p["fsync_ms_median"] > 0
        wait = c.noise["wait"]  # quiet reached, or gave up at the 4 s limit (one 2 s sample may overrun it)
        assert wait["quiet"] or 4.0 <= wait["waited_s"] <= 12.0, wait
        assert "wait-quiet" in c.phases
    # the hog's block is flagged (how much CPU the hogs got depends on the rest of the shared machine;
    # test_noise.py checks the accounting against the hog's own /proc figures)
    for c in cells:
        if c.block == hog_block:
            assert c.noisy is True and c.noise["window"]["others_cores"] >= 0.3, c.noise["window"]
            assert "other processes used" in c.noise["window"]["flag_reason"]
    # the report shows the verdict and the noise per run
    md = (report_dir / "report.md").read_text()
    assert "**placement**" in md and "tmpfs / disk = " in md and "## Noise per run" in md
    assert "NOISY" in md
    summary = json.loads((report_dir / "summary.json").read_text())
    assert summary["blocks"] == blocks and summary["verdicts"][0]["paired"]["n"] == blocks
    assert summary["noise"][0]["others"] != "-"
    # the noise columns are in the export too
    exp = cli("results", "export", run_id, "--csv", check=True).stdout.splitlines()
    assert "others_cpu_share" in exp[0] and "probe_fsync_ms" in exp[0] and len(exp) == 2 * blocks + 1
    # running it again: the stop rule holds, nothing runs
    again = cli("sweep", "run", spec, "--no-metrics", "--no-pt-summary", check=True)
    assert "nothing to do" in again.stdout or "stopping after block" in again.stdout, again.stdout
    assert "cell 1/" not in again.stdout
