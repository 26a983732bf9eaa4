"""Opt-in: Debian's MySQL 9.7 (mysql-sid packaged host) on a PZRAM tier, persisted by CLONE under the AppArmor
profile the package ships, across a real reboot and a power cut: one machine booted three times
(tests/lab/guest/test_in_packaged_reboot.py says what each boot proves).

Boot 1 ends with `systemctl reboot` (the whole shutdown, the sync at shutdown included; qemu runs with
-no-reboot, so it exits at the kernel's restart and this side boots the same disks again), boot 2 with a power
cut (qemu SIGKILLed at the done mark: no shutdown, so the last CLONE generation is what comes back), boot 3 with
a clean power-off.  The image is the mysql-sid one tests/lab/test_lab_packaged.py builds (cached per machine).  Not in
CI (the lab budget); runs with the packaged group when mysql-sid is asked for:

    INNOTIER_LAB_PACKAGED=mysql-sid .venv/bin/python -m pytest -q -rs tests/lab/test_lab_packaged_reboot.py
"""

from __future__ import annotations

import shutil
import time
import xml.etree.ElementTree as ET

import pytest

from datadir_mover.lab import image as lab_image
from datadir_mover.lab import vm
from labvm import REPO, load_average, record

from test_lab_packaged import RECORDED, SKIP_REASON, WANTED

NAME = "mysql-sid"
GUEST = "tests/lab/guest/test_in_packaged_reboot.py"
BOOTS = (("test_boot1_mysql_on_zram_persisted_by_clone_under_its_profile_then_reboot", "reboot"),
         ("test_boot2_restored_before_mysql_every_row_then_a_clone_and_a_power_cut", "cut"),
         ("test_boot3_after_the_power_cut_the_clone_exactly_then_uninstall_and_the_negative_control", "poweroff"))
KERNEL_SAYS = {"reboot": "reboot: Restarting system", "poweroff": "reboot: Power down"}
BACKING_DISK = 1 << 30    # /dev/vdb: two generations of the package's datadir and one being written


def _command(test: str, boot: int) -> tuple[str, ...]:
    return ("/opt/innotier/bin/python", "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfEs", "--timeout=1200",
            f"--junitxml=/mnt/lab/out/junit-{boot}.xml", f"{GUEST}::{test}")


def _passed(junit) -> float:
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": 1, "failures": 0, "errors": 0, "skipped": 0}, (junit.name, counts)
    return sum(float(c.get("time", 0)) for c in suite.iter("testcase"))


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.root
@pytest.mark.timeout(7200)   # each boot's own limit (1800 s) ends a hung one first
def test_mysql_on_pzram_survives_a_reboot_and_a_power_cut_persisted_by_clone_under_its_profile(tmp_path):
    if WANTED != "1" and NAME not in WANTED.split(","):
        pytest.skip(SKIP_REASON)
    blockers = lab_image.host_blockers()
    if blockers:
        pytest.skip("the lab image cannot be built here: " + "; ".join(blockers))
    t0 = time.monotonic()
    img = lab_image.build(lab_image.packaged_spec(REPO, NAME), REPO,
                          progress=lambda m: print(f"lab build ({NAME}): {m}", flush=True))
    record(f"lab {NAME} image: {time.monotonic() - t0:.0f} s here (built in {img.build_seconds} s when made)")
    run_dir = tmp_path / "lab"
    times = []
    try:
        for boot, (test, end) in enumerate(BOOTS, start=1):
            spec = vm.VmSpec(command=_command(test, boot), disks=(BACKING_DISK,), pmem=(), memory=2 << 30, cpus=2,
                             timeout=1800, source=REPO, init="systemd", end=end, env=(("LAB_PACKAGED", NAME),))
            result = vm.run(spec, img, run_dir, fresh_disks=boot == 1, echo=lambda line: print(line, flush=True),
                            progress=lambda m: print(m, flush=True))
            console = (run_dir / "console.log").read_text(errors="replace")
            out = run_dir / "share" / "out"
            assert not result.timed_out, "time limit hit; console tail:\n" + "\n".join(result.console_tail)
            assert result.exit_code == 0, f"boot {boot} ({test}) failed:\n{result.output[-6000:]}"
            seconds = _passed(out / f"junit-{boot}.xml")
            if end == "cut":
                assert result.cut_after_done_seconds is not None
                assert not any(k in console for k in KERNEL_SAYS.values()), "the guest shut down before the cut"
            else:
                assert KERNEL_SAYS[end] in console, "\n".join(result.console_tail)
            times.append(f"boot {boot} ({end}): up {result.boot_seconds} s, total {result.total_seconds} s, "
                         f"test {seconds:.0f} s")
    finally:
        vm.cleanup(run_dir)
        recorded = run_dir / "share" / "out" / "recorded"
        if recorded.is_dir():   # the guest's records, kept in out/lab-packaged of the checkout
            shutil.copytree(recorded, RECORDED, dirs_exist_ok=True)
    record(f"lab {NAME} pzram reboot ({result.accelerator}, systemd): " + "; ".join(times)
           + f"; load average {load_average()}")
    result_line = RECORDED / "packaged-pzram-result.txt"
    if result_line.exists():
        record(result_line.read_text().strip())
