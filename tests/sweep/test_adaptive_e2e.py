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
    blocks, reason = run["stop"]["blocks"], run["stop"]["reason"]
    # the recorded reason is what the stored cells say: recomputed here with the stored design
    from tuner.sweep.analysis import configs_from, questions
    from tuner.sweep.report import target_of

    target = target_of(run)
    assert target.comparisons == 1 and (target.min_blocks, target.max_blocks) == (2, 3), target
    verdicts = questions(configs_from(cells, run["spec"]["axes"]), run["spec"]["axes"], target)
    if reason.startswith("target reached"):
        assert all(v.decided for v in verdicts) and blocks in (2, 3), (reason, [v.text() for v in verdicts])
    else:
        assert reason.startswith("max_blocks (3) reached") and blocks == 3, run["stop"]
    assert len(cells) == 2 * blocks and all(c.status == "ok" for c in cells)
    # the console names every comparison at the last look, decided ones with their interval too
    last = out[out.index(f"\nafter block {blocks}:"):]
    for v in verdicts:
        label = "decided" if v.decided else "undecided"
        assert f"  {label}: {v.text()}" in last, last
    assert run["design"]["adaptive"] and run["design"]["seed"] is not None
    # the randomized block order is the recorded one
    for b in range(1, blocks + 1):
        assert {c.config_key for c in cells if c.block == b} == {c.config_key for c in cells if c.block == 1}
    # every run has its noise figures: the measured window and the calibration probe
    for c in cells:
        w, p = c.noise["window"], c.noise["probe"]
        assert w["seconds"] > 0 and 0.0 <= w["others_cpu_share"] <= 1.0 and w["ours_cores"] > 0, w
        assert w["loadavg_end"] and w["steal_share"] is not None and "flagged" in w
        assert p["cpu_loop_s"] > 0 and p["fsyncs"] >= 1 and p["fsync_ms_median"] > 0
        wait = c.noise["wait"]  # quiet reached, or gave up, never before its 4 s limit
        assert wait["quiet"] or wait["waited_s"] >= 4.0, wait
        assert "wait-quiet" in c.phases
    # the hog's block is flagged (how much CPU the hogs got depends on the rest of the shared machine;
    # test_noise.py checks the accounting against the hog's own /proc figures)
    for c in cells:
        if c.block == hog_block:
            assert c.noisy is True, c.noise["window"]
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
    # the stop rule was fixed at the first start: an edited one is refused in one line, nothing changes;
    # a new budget is the one change a resume accepts
    edited = write_spec(SPEC.replace("max_blocks: 3", "max_blocks: 4"), "edited.yaml")
    refused = cli("sweep", "run", edited, "--no-metrics", "--no-pt-summary")
    assert refused.returncode == 9 and "cell 1/" not in refused.stdout, refused.stdout + refused.stderr
    assert refused.stderr.strip().count("\n") == 0 and (
        f"run {run_id} started with a different stop rule (max_blocks 3 -> 4)") in refused.stderr, refused.stderr
    with ResultsStore() as store:
        assert store.run(run_id)["design"] == run["design"] and len(store.cells(run_id)) == len(cells)
    budget = cli("sweep", "run", spec, "--budget", "30m", "--no-metrics", "--no-pt-summary", check=True)
    assert "cell 1/" not in budget.stdout
    with ResultsStore() as store:
        assert store.run(run_id)["design"]["stop"]["budget"] == 1800
