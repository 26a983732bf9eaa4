"""The lab VM against the real md and nvdimm kernel drivers: one boot per group, pytest inside it.

The image is built once per machine (cached by content hash under innotier_cache()/lab); each group boots
the VM with fresh NVDIMMs and disks, runs one in-guest pytest module (tests/lab/guest/) on the shared
checkout, and this side asserts on the exit code and the JUnit XML: every in-guest test ran and passed,
none skipped.  The times printed are for the CI budget, not assertions (emulated devices, TCG).
"""

from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from datadir_mover.lab import image as lab_image
from datadir_mover.lab import vm

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.root]


@pytest.fixture(scope="session")
def lab_image_built():
    blockers = lab_image.host_blockers()
    if blockers:
        pytest.skip("the lab image cannot be built here: " + "; ".join(blockers))
    return lab_image.build(lab_image.default_spec(REPO), progress=lambda m: print(f"lab build: {m}", flush=True))


def run_group(img, module: str, run_dir: Path, timeout: float = 1800, **kw) -> tuple[vm.VmResult, ET.Element]:
    command = ("/opt/innotier/bin/python", "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfEs", "-x",
               "--timeout=600", "--durations=0",
               "--junitxml=/mnt/lab/out/junit.xml", f"tests/lab/guest/{module}")
    spec = vm.VmSpec(command=command, source=REPO, timeout=timeout, **kw)
    try:
        result = vm.run(spec, img, run_dir, echo=lambda line: print(line, flush=True),
                        progress=lambda m: print(m, flush=True))
    finally:
        vm.cleanup(run_dir)
    print(f"lab group {module}: boot {result.boot_seconds} s, total {result.total_seconds} s "
          f"({result.accelerator}); load average {Path('/proc/loadavg').read_text().split()[:3]}")
    junit = run_dir / "share" / "out" / "junit.xml"
    assert not result.timed_out, f"time limit hit; console tail:\n" + "\n".join(result.console_tail)
    assert junit.exists(), f"no JUnit XML (exit {result.exit_code}); console tail:\n" + "\n".join(result.console_tail)
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert result.exit_code == 0, f"in-guest pytest failed (exit {result.exit_code}):\n{result.output[-6000:]}"
    return result, suite


def _assert_all_passed(suite: ET.Element, at_least: int) -> None:
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts["tests"] >= at_least and counts["failures"] == counts["errors"] == counts["skipped"] == 0, counts


@pytest.mark.timeout(2400)   # the VM's own limit (1800 s) ends it first; TCG on a loaded 2-core host is slow
def test_pmem_and_raid_devices_in_the_vm(lab_image_built, tmp_path):
    """fsdax/devdax detection and DAX mounts with statx; `tiers create pmem` and `tiers create raid` for
    RAID 0/1/5/6/10 with stride, destroy and undo; a degraded RAID 5 and its recovery."""
    result, suite = run_group(lab_image_built, "test_in_guest_devices.py", tmp_path / "devices",
                              pmem=(512 << 20, 256 << 20), disks=(256 << 20,) * 4)
    _assert_all_passed(suite, at_least=11)
    recorded = tmp_path / "devices" / "share" / "out" / "recorded"
    assert (recorded / "mdadm-detail-raid6.txt").exists() and (recorded / "ndctl-list-fsdax.json").exists()
    keep = os.environ.get("INNOTIER_LAB_RECORD_TO")   # how tests/fixtures/recorded/hardware-lab was made
    if keep:
        shutil.copytree(recorded, keep, dirs_exist_ok=True)


@pytest.mark.timeout(2400)
@pytest.mark.skipif(os.environ.get("INNOTIER_LAB_MOVES") != "1",
                    reason="the lab moves group (TPC-C under TCG emulation, 9-25 min) runs only with "
                           "INNOTIER_LAB_MOVES=1: it does not yet fit the CI budget and was not stable "
                           "in one run on a loaded machine (issue 13 stays open for it)")
def test_moves_onto_dax_and_raid10_in_the_vm(lab_image_built, tmp_path):
    """The datadir onto DAX ext4 and redo onto RAID 10 with TPC-C run + check; SIGKILL mid-copy then
    resume / rollback; tiers bench on both; profile lint --tier on the DAX mount."""
    result, suite = run_group(lab_image_built, "test_in_guest_moves.py", tmp_path / "moves",
                              pmem=(1 << 30,), disks=(512 << 20,) * 4, timeout=1800)
    _assert_all_passed(suite, at_least=6)
