"""Destroying a sandbox closes its moves, and `move plan` models the pre-copy with the server's own times.

Real clones of the golden sandbox, a real tmpfs tier, the real CLI."""

from __future__ import annotations

import json
import os
import re

import pytest

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def box(golden, mv_tiers):
    import mvhelpers

    sb = mvhelpers.clone_sandbox("mv-close")
    sb.stop("clean")
    sb.start()  # a clean stop and a start: the sandbox now knows its own times
    yield sb
    from tuner.core.sandbox import Sandbox, sandboxes_dir

    if (sandboxes_dir() / "mv-close" / "sandbox.json").exists():
        Sandbox.load("mv-close").destroy(force=True)


def test_plan_models_the_precopy_with_this_servers_times(box, mv_tiers, cli):
    target = os.path.join(mv_tiers["tmpfs"], "close-redo")
    timings = box.timings()
    assert timings["start_s"] > 0 and timings["stop_clean_s"] > 0
    plans = {}
    for flag in ([], ["--precopy"]):
        out = cli("move", "plan", "redo", "--to", target, "--sandbox", box.name, "--json", *flag, check=True)
        plans[bool(flag)] = json.loads(out.stdout)["estimates"]
    offline, pre = plans[False], plans[True]
    assert pre["downtime_expected_s"] == pre["downtime_with_precopy_s"]
    assert offline["downtime_expected_s"] == offline["downtime_s"]
    assert pre["downtime_with_precopy_s"] <= pre["downtime_s"]
    assert pre["server_times"] == "measured on this server"
    assert pre["start_s"] == round(timings["start_s"], 2)
    # people see the figure that applies to what they asked first
    text = cli("move", "plan", "redo", "--to", target, "--sandbox", box.name, "--precopy", check=True).stdout
    line = next(ln for ln in text.splitlines() if "expected downtime" in ln)
    # (the copy rate is probed again for each plan, so the figures differ a little from the JSON's)
    assert re.search(r"expected downtime: \d+\.\d s with the online pre-copy \(\d+\.\d s without it\)", line), line
    assert "measured on this server" in line


def _data_extent_bytes(path: str) -> int:
    """The file's data regions by SEEK_DATA/SEEK_HOLE, read here independently of the mover."""
    total, fd = 0, os.open(path, os.O_RDONLY)
    try:
        size, pos = os.fstat(fd).st_size, 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                break
            pos = os.lseek(fd, start, os.SEEK_HOLE)
            total += pos - start
    finally:
        os.close(fd)
    return total


def test_the_offline_estimate_costs_what_the_copy_reads_at_the_probed_rate(box, mv_tiers, cli):
    """The downtime estimate's inputs: the bytes in the files' data regions (a preallocated redo log is mostly
    unwritten: never read, never copied), this server's own stop and start, and no dirty-page term (the pre-flush
    writes them before the stop)."""
    target = os.path.join(mv_tiers["tmpfs"], "close-redo")
    plan = json.loads(cli("move", "plan", "redo", "--to", target, "--sandbox", box.name, "--json", check=True).stdout)
    e = plan["estimates"]
    redo = os.path.join(plan["source_dir"], "ib_logfile0")
    assert plan["names"] == ["ib_logfile0"]
    assert abs(e["copy_bytes"] - _data_extent_bytes(redo)) <= 1 << 20  # the server may write a block meanwhile
    assert e["copy_bytes"] <= plan["bytes_logical"]
    timings = box.timings()
    assert e["shutdown_s"] == round(timings["stop_clean_s"], 2) and e["start_s"] == round(timings["start_s"], 2)
    expected = e["shutdown_s"] + e["copy_bytes"] / e["copy_rate_bytes_per_s"] + e["start_s"]
    # downtime_s is rounded to 0.1 s from the unrounded parts, the parts shown to 0.01 s: 0.05 + 2 x 0.005
    assert abs(e["downtime_s"] - expected) <= 0.0601, (e, expected)
    text = cli("move", "plan", "redo", "--to", target, "--sandbox", box.name, check=True).stdout
    assert "copy 1 file (" in text and "1 files" not in text, text


def test_destroy_closes_a_committed_move_and_removes_its_files(box, mv_tiers, cli):
    target = os.path.join(mv_tiers["tmpfs"], "close-redo")
    planned = json.loads(cli("move", "plan", "redo", "--to", target, "--sandbox", box.name, "--json",
                             check=True).stdout)["estimates"]["tables"]
    applied = cli("move", "apply", "redo", "--to", target, "--sandbox", box.name, "--precopy", "--yes",
                  check=True).stdout
    assert f"sample of {planned} tables" in applied and f"  {planned} InnoDB tables sampled" in applied, applied
    # a pre-copied move is not proven byte for byte by its copy: the whole-file proof comes after the start
    assert "files: file proof pending (innotier move status)" in applied and "byte-identical" not in applied
    assert os.path.exists(os.path.join(target, "ib_logfile0"))
    [mine] = [r for r in json.loads(cli("move", "status", "--json", check=True).stdout)
              if r["server"] == f"sandbox {box.name}"]
    assert mine["phase"] == "committed" and "uses the new location" in mine["state"]

    out = cli("sandbox", "destroy", box.name, "--force", check=True).stdout
    assert f"closed move {mine['move_id']} (redo): removed 1 entry the sandbox owned from {target}" in out
    assert out.strip().endswith(f"destroyed sandbox {box.name}")
    assert not os.path.exists(target)  # the move created it: it goes with the sandbox
    assert os.path.ismount(mv_tiers["tmpfs"])  # the tier itself stays
    [after] = [r for r in json.loads(cli("move", "status", "--json", check=True).stdout)
               if r["move_id"] == mine["move_id"]]
    assert after["phase"] == "closed" and "uses the new location" not in after["state"]
    assert f"sandbox {box.name} was destroyed" in after["state"]
    # a closed move is over: nothing to resume, roll back or finalize
    r = cli("move", "finalize", "--id", mine["move_id"], "--yes")
    assert r.returncode != 0 and "not committed" in r.stderr
