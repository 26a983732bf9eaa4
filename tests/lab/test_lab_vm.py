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
from collections import defaultdict
from pathlib import Path

import pytest

from datadir_mover.lab import image as lab_image
from datadir_mover.lab import vm

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.root]
GROUPS = ("test_in_guest_devices.py", "test_in_guest_moves.py", "test_in_guest_sweep.py")
# the host-mode group (systemd as PID 1) runs in the first boot of the reboot group: tests/lab/test_lab_reboot.py
# INNOTIER_LAB_GROUPS=moves,sweep (or host, reboot) runs only those groups (while working on one); CI runs them all
_WANTED = [g for g in os.environ.get("INNOTIER_LAB_GROUPS", "").split(",") if g]
SELECTED = tuple(g for g in GROUPS if not _WANTED or g[len("test_in_guest_"):-3] in _WANTED)
# passed on to the guest: LAB_SWEEP_LEVELS=0,5,10 runs fewer cells of the raid-level sweep
GUEST_ENV = tuple((k, os.environ[k]) for k in ("LAB_SWEEP_LEVELS",) if k in os.environ)
PMEM = (1 << 30, 256 << 20)
DISKS = (128 << 20,) * 4 + (512 << 20,) * 4


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _record(line: str) -> None:
    """Print a timing line and keep it in out/lab-vm.log of the checkout (pytest shows prints only on failure;
    the log keeps the figures of every run, CI's included)."""
    print(line, flush=True)
    out = REPO / "out"
    out.mkdir(exist_ok=True)
    with open(out / "lab-vm.log", "a") as fh:
        fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


@pytest.fixture(scope="session")
def lab_image_built():
    blockers = lab_image.host_blockers()
    if blockers:
        pytest.skip("the lab image cannot be built here: " + "; ".join(blockers))
    t0 = time.monotonic()
    # the host-mode image: the fast groups boot it with the fast init, the host group with systemd
    img = lab_image.build(lab_image.default_spec(REPO, host=True), REPO, progress=lambda m: print(f"lab build: {m}", flush=True))
    _record(f"lab image: {time.monotonic() - t0:.0f} s here (built in {img.build_seconds} s when made); "
            f"load average {_load()}")
    return img


def run_groups(img, groups: tuple[str, ...], run_dir: Path, timeout: float, **kw) -> tuple[vm.VmResult, ET.Element]:
    command = ("/opt/innotier/bin/python", "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfEs",
               "--timeout=900", "--durations=0", "--junitxml=/mnt/lab/out/junit.xml",
               *(f"tests/lab/guest/{g}" for g in groups))
    spec = vm.VmSpec(command=command, source=REPO, timeout=timeout, **kw)
    try:
        result = vm.run(spec, img, run_dir, echo=lambda line: print(line, flush=True),
                        progress=lambda m: print(m, flush=True))
    finally:
        vm.cleanup(run_dir)
    junit = run_dir / "share" / "out" / "junit.xml"
    assert not result.timed_out, "time limit hit; console tail:\n" + "\n".join(result.console_tail)
    assert junit.exists(), f"no JUnit XML (exit {result.exit_code}); console tail:\n" + "\n".join(result.console_tail)
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    times = run_dir / "share" / "out" / "times.log"
    if times.exists():
        print("in-guest CLI calls (seconds):\n" + times.read_text(), flush=True)
    _record(f"lab VM ({result.accelerator}, init {spec.init}): boot {result.boot_seconds} s, "
            f"total {result.total_seconds} s; "
            + ", ".join(f"{g} {s:.0f} s" for g, s in group_seconds(suite).items())
            + f"; load average {_load()}")
    assert result.exit_code == 0, f"in-guest pytest failed (exit {result.exit_code}):\n{result.output[-6000:]}"
    return result, suite


def group_seconds(suite: ET.Element) -> dict[str, float]:
    """Seconds per in-guest module (JUnit times include each test's setup and teardown)."""
    out: dict[str, float] = defaultdict(float)
    for case in suite.iter("testcase"):
        out[case.get("classname", "").rsplit(".", 1)[-1]] += float(case.get("time", 0))
    return dict(out)


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
    _record(f"sweep report of the guest's run (here, natively): {time.monotonic() - t0:.1f} s")
    md = (report / "report.md").read_text()
    cells_table = md.split("## Cells", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in cells_table.splitlines() if ln.startswith("| ") and not ln.startswith("| cell")]
    for lv in run["levels"]:
        assert [r for r in rows if re.search(rf"\braid{lv}\b", r)], (lv, rows)
    assert (report / "report.html").exists()


@pytest.mark.timeout(2400)   # the VM's own limit (1800 s) ends it first; TCG on a loaded 2-core host is slow
def test_devices_moves_and_sweep_in_one_vm_boot(lab_image_built, tmp_path, cli):
    if not SELECTED:
        pytest.skip("INNOTIER_LAB_GROUPS selects none of the fast-init groups")
    run_dir = tmp_path / "lab"
    result, suite = run_groups(lab_image_built, SELECTED, run_dir, timeout=1800, pmem=PMEM, disks=DISKS,
                               env=GUEST_ENV)
    _assert_all_passed(suite, at_least=18 if SELECTED == GROUPS else 1)
    assert set(group_seconds(suite)) == {g[:-3] for g in SELECTED}   # every group ran
    if GROUPS[2] in SELECTED:
        report_of_the_guests_sweep(cli, run_dir / "share" / "out", tmp_path / "sweep-report")
    recorded = run_dir / "share" / "out" / "recorded"
    if GROUPS[0] in SELECTED:
        assert (recorded / "mdadm-detail-raid6.txt").exists() and (recorded / "ndctl-list-fsdax.json").exists()
    keep = os.environ.get("INNOTIER_LAB_RECORD_TO")   # how tests/fixtures/recorded/hardware-lab was made
    if keep:
        shutil.copytree(recorded, keep, dirs_exist_ok=True)
