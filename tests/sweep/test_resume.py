"""Resume: SIGKILL the runner (the real CLI) mid-sweep, run it again: finished cells are not rerun,
the interrupted one runs from scratch, and the results are complete and uncorrupted."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
from pathlib import Path

from cli_procs import group_members, reap_group


SPEC = """
name: resume
server: {flavor: mariadb}
workload: {driver: builtin, mode: procedures, warehouses: 1, warmup: 2, duration: 8, interval: 4}
repeats: 1
tiers:
  disk: {kind: home}
fixed: {page_size: 16k, clients: 2, buffer_pool_size: 128M}
axes:
  doublewrite: ["ON", "OFF"]
"""


def _finished(db: Path, run_id: str) -> list[tuple]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("SELECT cell_id, started_at, finished_at, tpmc FROM cells WHERE run_id = ? "
                            "ORDER BY idx", (run_id,)).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def _our_servers(sandbox_dir: Path) -> list[int]:
    """mariadbd processes of the sweep's cell sandboxes (sweep-*) under this sandbox dir; other tests'
    sandboxes in the same session are not the sweep's business."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(str(sandbox_dir / "sweep-").encode() in a for a in cmd) and cmd[0].endswith((b"mariadbd", b"mysqld")):
                pids.append(int(p.name))
    return pids


def test_sigkill_mid_sweep_then_resume(write_spec, background_cli, cli, innotier_home, tmp_path):
    from tuner.sweep.results import ResultsStore
    from tuner.sweep.spec import load_spec

    spec = write_spec(SPEC)
    run_id = load_spec(spec).run_id
    db = innotier_home / "results.db"
    proc = background_cli("sweep", "run", spec, "--no-metrics", "--no-pt-summary")
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "[2/2]" in line and ": measure" in line:  # cell 1 recorded, cell 2 half way
            break
    assert proc.poll() is None, "".join(lines)
    first = _finished(db, run_id)
    assert len(first) == 1, "".join(lines)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    reap_group(proc)  # the driver's workers the killed runner forked: none may outlive the test
    assert not group_members(proc.pid)
    # the killed runner's cell server (its own session) is still up, as after any crash of the runner
    sandbox_dir = innotier_home / "sandboxes"
    assert _our_servers(sandbox_dir), "expected the interrupted cell's server to outlive the runner"

    # a report of the interrupted run: the one comparison cannot be computed yet, and it says so
    report = tmp_path / "report"
    cli("sweep", "report", spec, "-o", str(report), check=True)
    md = (report / "report.md").read_text()
    missing = re.search(r"dw=OFF / dw=ON: \*\*could not be computed\*\*: no run of (dw=\w+) is recorded", md)
    assert missing, md
    summary = json.loads((report / "summary.json").read_text())
    [v] = summary["verdicts"]
    assert v["paired"] is None and v["missing"].startswith(f"no run of {missing.group(1)} is recorded")

    again = cli("sweep", "run", spec, "--no-metrics", "--no-pt-summary")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 of 2 cells are already finished" in again.stdout
    assert "[1/2]" not in again.stdout  # cell 1 did not run again
    after = _finished(db, run_id)
    assert len(after) == 2
    assert after[0] == first[0]  # the finished cell's row is untouched
    with ResultsStore(db) as store:
        assert store.integrity_check() == "ok"
        assert store.run(run_id)["finished_at"] is not None
        cells = store.cells(run_id)
        assert all(c.status == "ok" and c.check_ok for c in cells)
        for c in cells:
            tl = store.timeline(run_id, c.cell_id)
            assert len(tl) == len(c.result["timeline"]) >= 1
    assert not _our_servers(sandbox_dir)  # the orphaned server was stopped, nothing left running
