"""The lab VM against the real md and nvdimm kernel drivers: ONE boot, one in-guest pytest session.

The image is built once per machine (cached by content hash under innotier_cache()/lab).  One VM boots
with two fresh NVDIMMs (1 GiB for the DAX tier, 256 MiB for devdax) and eight fresh virtual disks (four
small ones for the device tests, four of 512 MiB for arrays that hold a datadir) and runs every in-guest
module of tests/lab/guest/ in one pytest session, in this order:

- devices: fsdax/devdax detection, DAX mounts with statx, `tiers create pmem`, `tiers create raid`
  for RAID 0/1/5/6/10 with stride, destroy and undo, a degraded RAID 5 and its recovery;
- moves: the datadir onto DAX ext4 (SIGKILL mid-copy, resume) and redo onto RAID 10 (SIGKILL mid-copy,
  rollback, move), TPC-C W=1 run + check after each, `persist` on the DAX tier, `tiers bench`, lint;
- sweep: the shipped raid-level sweep, scaled down to RAID 5 and 10, one array per cell; its report is built here,
  natively, from the run's results store the guest hands back (the report is a function of the store alone).

One boot instead of one per group saves the boots; the W=1 golden datadir the moves and the sweep clone
is in the image (loaded natively at build time), and the sweep runs two RAID levels (5 and 10).  This side asserts on the exit code and the JUnit XML (every in-guest test ran and passed, none
skipped) and prints the image build, boot and per-group times with the load average: figures for the CI
budget, never assertions (emulated devices, TCG).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from labvm import GROUPS, SELECTED, group_seconds, record

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.root]


def _assert_all_passed(suite: ET.Element, at_least: int) -> None:
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts["tests"] >= at_least and counts["failures"] == counts["errors"] == counts["skipped"] == 0, counts


def report_of_the_guests_sweep(cli, out: Path, report: Path) -> None:
    """`innotier sweep report` of the raid-level sweep the guest ran, from the results store it handed back: a row
    per level in the report's cells table, and the HTML."""
    run = json.loads((out / "sweep" / "run.json").read_text())
    t0 = time.monotonic()
    r = cli("sweep", "report", run["run_id"], "--results", str(out / "sweep" / "results.db"), "-o", str(report))
    assert r.returncode == 0, r.stderr
    record(f"sweep report of the guest's run (here, natively): {time.monotonic() - t0:.1f} s")
    md = (report / "report.md").read_text()
    cells_table = md.split("## Cells", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in cells_table.splitlines() if ln.startswith("| ") and not ln.startswith("| cell")]
    for lv in run["levels"]:
        assert [r for r in rows if re.search(rf"\braid{lv}\b", r)], (lv, rows)
    assert (report / "report.html").exists()


@pytest.mark.timeout(2400)   # the VM's own limit (labvm.FAST_INIT_TIMEOUT, 1800 s) ends it first
def test_devices_moves_and_sweep_in_one_vm_boot(fast_init_vm, tmp_path, cli):
    if fast_init_vm is None:
        pytest.skip("INNOTIER_LAB_GROUPS selects none of the fast-init groups")
    # booted by the fixture (tests/lab/conftest.py), maybe while the reboot group's machine ran: its result here
    result, suite = fast_init_vm.future.result()
    times = fast_init_vm.run_dir / "share" / "out" / "times.log"
    if times.exists():
        print("in-guest CLI calls (seconds):\n" + times.read_text(), flush=True)
    _assert_all_passed(suite, at_least=18 if SELECTED == GROUPS else 1)
    assert set(group_seconds(suite)) == {g[:-3] for g in SELECTED}   # every group ran
    out = fast_init_vm.run_dir / "share" / "out"
    if GROUPS[2] in SELECTED:
        report_of_the_guests_sweep(cli, out, tmp_path / "sweep-report")
    recorded = out / "recorded"
    if GROUPS[0] in SELECTED:
        assert (recorded / "mdadm-detail-raid6.txt").exists() and (recorded / "ndctl-list-fsdax.json").exists()
    keep = os.environ.get("INNOTIER_LAB_RECORD_TO")   # how tests/fixtures/recorded/hardware-lab was made
    if keep:
        shutil.copytree(recorded, keep, dirs_exist_ok=True)
