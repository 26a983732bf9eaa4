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


def test_destroy_closes_a_committed_move_and_removes_its_files(box, mv_tiers, cli):
    target = os.path.join(mv_tiers["tmpfs"], "close-redo")
    cli("move", "apply", "redo", "--to", target, "--sandbox", box.name, "--precopy", "--yes", check=True)
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
