"""`innotier fleet sweep` for real: one spec on two namespace hosts (each with its own tmpfs tier and
INNOTIER_HOME), a host killed mid-sweep, the re-run resuming only its unfinished cells, a merged report."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import pytest

from nshosts import innotier_cli

pytestmark = pytest.mark.slow

SPEC = """\
name: fleet-small
description: two doublewrite settings with the datadir on each host's fast tier (fleet test)
server:
  flavor: mariadb
workload:
  driver: builtin
  mode: procedures
  warehouses: 1
  warmup: 2
  duration: 8
  interval: 4
repeats: 1
tiers:
  fast: {kind: tmpfs, size: 512M}   # each host's innotier_tiers.fast replaces this
fixed:
  page_size: 16k
  clients: 2
  buffer_pool_size: 128M
  flush_method: fsync
  placement: fast
axes:
  doublewrite: ["ON", "OFF"]
"""


def ok_cells(db) -> list[tuple[str, float]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
            return c.execute("SELECT cell_id, started_at FROM cells WHERE status = 'ok' ORDER BY idx").fetchall()
    except sqlite3.OperationalError:  # created but no table yet
        return []


def test_fleet_sweep_kill_resume_and_report(installed_fleet, tmp_path):
    fleet, _ = installed_fleet
    h1, h2 = fleet.hosts
    inv = fleet.write_inventory(tmp_path / "inventory.yml", {"db": [0, 1]})
    spec = tmp_path / "fleet-small.yaml"
    spec.write_text(SPEC)
    merged = tmp_path / "merged.db"
    args = ["fleet", "sweep", str(spec), "-i", str(inv), "--results", str(merged), "--out", str(tmp_path / "out")]

    # -- first run: h2 loses power after its first cell
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 900
        while not ok_cells(h2.home / "results.db"):
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "h2 finished no cell within 15 min"
            time.sleep(1)
        h2.kill_all()
        out, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 11, out
    assert "[h1]" in out and "[h2]" in out  # progress lines streamed per host
    assert "h2" in out and "UNREACHABLE" in out
    first_h1 = ok_cells(h1.home / "results.db")
    first_h2 = ok_cells(h2.home / "results.db")
    assert len(first_h1) == 2 and len(first_h2) == 1
    with sqlite3.connect(merged) as c:
        rows = c.execute("SELECT host, COUNT(*) FROM cells WHERE status = 'ok' GROUP BY host").fetchall()
    assert dict(rows) == {"h1": 2}  # the finished host's cells are merged; h2's stay on h2 until it answers

    # -- h2 is back: the re-run resumes only its unfinished cell, h1 runs nothing
    h2.start_sshd()
    r = innotier_cli(*args, "--json", timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads(r.stdout)
    assert summary["cells"] == {"h1": 2, "h2": 2}
    assert ok_cells(h1.home / "results.db") == first_h1  # not run again
    second_h2 = ok_cells(h2.home / "results.db")
    assert len(second_h2) == 2 and second_h2[0] == first_h2[0]  # the finished cell was kept, not re-run
    log2 = (tmp_path / "out" / "h2" / "sweep.log").read_text()
    assert "resuming run" in log2 and "1 of 2 cells" in log2, log2[-2000:]
    log1 = (tmp_path / "out" / "h1" / "sweep.log").read_text()
    assert "nothing to do" in log1, log1[-2000:]

    # -- the merged database: a host column, host facts, a host axis; the report compares hosts
    with sqlite3.connect(merged) as c:
        c.row_factory = sqlite3.Row
        cells = c.execute("SELECT * FROM cells WHERE run_id = ?", (summary["run_id"],)).fetchall()
        run = c.execute("SELECT * FROM runs WHERE run_id = ?", (summary["run_id"],)).fetchone()
    assert sorted(x["host"] for x in cells) == ["h1", "h1", "h2", "h2"]
    assert all(x["status"] == "ok" and x["tpmc"] > 0 for x in cells)
    for x in cells:
        env = json.loads(x["environment_json"])
        facts = env["host_facts"]
        assert facts["cpu_model"] and facts["memory_mb"] > 0 and facts["kernel"]
        assert any(t.get("mountpoint") for t in facts["tiers"] or [])
        settings = json.loads(x["settings_json"])
        assert settings["host"] == x["host"]
        assert str(fleet.hosts[int(x["host"][1]) - 1].tier) in x["tiers_json"]  # placed on its own tier
    assert json.loads(run["spec_json"])["axes"]["host"] == ["h1", "h2"]
    assert run["finished_at"] is not None
    rep = innotier_cli("sweep", "report", summary["run_id"], "--results", str(merged), "-o", str(tmp_path / "rep"))
    assert rep.returncode == 0, rep.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "host=h1" in md and "host=h2" in md
