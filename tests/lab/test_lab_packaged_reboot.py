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

import pytest

from datadir_mover.lab import image as lab_image
from datadir_mover.lab import vm
from labvm import REPO, check_boot, load_average, passed, record

from test_lab_packaged import RECORDED, skip_unless_wanted

NAME = "mysql-sid"
GUEST = "tests/lab/guest/test_in_packaged_reboot.py"
BOOTS = (("test_boot1_mysql_on_zram_persisted_by_clone_under_its_profile_then_reboot", "reboot"),
         ("test_boot2_restored_before_mysql_every_row_then_a_clone_and_a_power_cut", "cut"),
         ("test_boot3_after_the_power_cut_the_clone_exactly_then_uninstall_and_the_negative_control", "poweroff"))
BACKING_DISK = 1 << 30    # /dev/vdb: two generations of the package's datadir and one being written


def _command(test: str, boot: int) -> tuple[str, ...]:
    return ("/opt/innotier/bin/python", "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfEs", "--timeout=1200",
            f"--junitxml=/mnt/lab/out/junit-{boot}.xml", f"{GUEST}::{test}")


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.root
@pytest.mark.timeout(7200)   # each boot's own limit (1800 s) ends a hung one first
def test_mysql_on_pzram_survives_a_reboot_and_a_power_cut_persisted_by_clone_under_its_profile(tmp_path):
    skip_unless_wanted(NAME)
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
            seconds = passed(check_boot(result, run_dir, boot, test, end) / f"junit-{boot}.xml")
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
