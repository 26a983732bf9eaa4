"""PZRAM across a real reboot, a clean power-off and a power cut: one machine (host mode) booted four times.

Boot 1 first runs the host-mode group (tests/lab/guest/test_in_host_mode.py: the system server's moves under
enforced AppArmor, in a pytest session of its own) and then boot 1's test: one boot and one qemu start
fewer than a boot of its own; the host-mode group leaves the server stopped and the host as it booted.

Each boot runs one test of tests/lab/guest/test_in_host_reboot.py (the guest side says what each proves) and
ends its own way (vm.VmSpec.end): boot 1 with `systemctl reboot` (the whole shutdown; qemu runs with
-no-reboot, so it exits at the kernel's restart and this side boots the same disks again, which is what a
reset does), boot 2 with a clean power-off, boot 3 with a power cut (qemu SIGKILLed at the done mark, no
shutdown, not even a sync), boot 4 with a cut as well (nothing is checked after it; a cut skips the shutdown).  The console's last kernel line tells which happened.
The boots' times and the RPO measured after the cut go to out/lab-vm.log (figures, never assertions).
"""

from __future__ import annotations


import pytest

from datadir_mover.lab import image as lab_image
from datadir_mover.lab import vm
from labvm import ALONE_CPUS, LAB_CPUS, REPO, WANTED, check_boot, load_average, passed, record
from tuner.core.errors import LabError, UsageError

GUEST = "tests/lab/guest/test_in_host_reboot.py"
BOOTS = (("test_boot1_the_server_on_zram_persisted_by_the_timer_then_reboot", "reboot"),
         ("test_boot2_after_the_reboot_restored_before_the_server_then_poweroff", "poweroff"),
         ("test_boot3_after_the_poweroff_every_row_then_a_commit_past_the_last_sync", "cut"),
         ("test_boot4_after_the_power_cut_the_state_is_the_last_sync_exactly", "cut"))
HOST_GROUP = "tests/lab/guest/test_in_host_mode.py"
HOST_GROUP_TESTS = 8
# /dev/vdb: the backing store (two generations of the W=1 datadir and one being written), in every boot; boot 1
# also has the host-mode group's four small disks (/dev/vdc../dev/vdf, its RAID 10) and NVDIMM (its DAX tier),
# which the later boots leave out (nothing after boot 1's first session uses them)
BACKING_DISK = 2 << 30
HOST_GROUP_DEVICES = {"disks": (BACKING_DISK,) + (128 << 20,) * 4, "pmem": (1 << 30,)}


def _pytest(junit: str, tests: str) -> str:
    return (f"/opt/innotier/bin/python -m pytest -v -p no:cacheprovider -rfEs --timeout=900 "
            f"--junitxml=/mnt/lab/out/{junit} {tests}")


def _command(test: str, boot: int) -> tuple[str, ...]:
    """The boot's pytest (boot 1: the host-mode group's first, stopping at its failure), then the moment it
    ended (the power cut follows it at once) into the share."""
    first = _pytest("junit-host.xml", HOST_GROUP) + " && " if boot == 1 else ""
    return ("sh", "-c", f"{first}{_pytest(f'junit-{boot}.xml', f'{GUEST}::{test}')}; rc=$?; "
            "date +%s.%N > /mnt/lab/out/cut-at; exit $rc")


def test_boot_ends_reboot_and_cut_only_in_host_mode_and_again_only_on_an_earlier_runs_disks(tmp_path):
    reboot, cut = vm.guest_init("systemd", "reboot"), vm.guest_init("systemd", "cut")
    assert reboot.rstrip().endswith("sync\nsystemctl --no-block reboot")
    tail = cut[cut.index(vm.DONE_MARK):]
    assert "sync" not in tail and cut.rstrip().endswith("exec sleep infinity")   # a cut writes nothing more
    img = lab_image.Image(directory=tmp_path / "img", key="k", kernel_release="6.1.0-test", host=True)
    with pytest.raises(UsageError, match="needs host mode"):
        vm.run(vm.VmSpec(command=("true",), end="reboot", source=tmp_path), img, tmp_path / "run")
    with pytest.raises(LabError, match="no earlier run's disks"):
        vm.run(vm.VmSpec(command=("true",), init="systemd", source=tmp_path), img, tmp_path / "run",
               fresh_disks=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.root
@pytest.mark.timeout(6000)   # each boot's own limit (1500 s) ends a hung one first
def test_pzram_survives_a_reboot_a_poweroff_and_a_power_cut(lab_image_built, fast_init_vm, tmp_path):
    # fast_init_vm: asking for it starts the fast-init machine now, to run beside this one (tests/lab/conftest.py)
    if WANTED and not {"reboot", "host"} & set(WANTED):
        pytest.skip("INNOTIER_LAB_GROUPS selects neither reboot nor host (they share a machine)")
    run_dir = tmp_path / "lab"
    times = []
    try:
        for boot, (test, end) in enumerate(BOOTS, start=1):
            devices = HOST_GROUP_DEVICES if boot == 1 else {"disks": (BACKING_DISK,), "pmem": ()}
            # a reboot may come back with another vCPU count: one while the fast-init machine runs beside it
            beside = fast_init_vm is not None and not fast_init_vm.future.done()
            cpus = LAB_CPUS if beside else ALONE_CPUS
            spec = vm.VmSpec(command=_command(test, boot), **devices, memory=2 << 30, cpus=cpus,
                             timeout=1500, source=REPO, init="systemd", end=end)
            result = vm.run(spec, lab_image_built, run_dir, fresh_disks=boot == 1,
                            echo=lambda line: print(line, flush=True), progress=lambda m: print(m, flush=True))
            out = check_boot(result, run_dir, boot, test, end)
            host_group = ""
            if boot == 1:
                host_group = f"host-mode group {passed(out / 'junit-host.xml', HOST_GROUP_TESTS):.0f} s, "
            seconds = passed(out / f"junit-{boot}.xml")
            times.append(f"boot {boot} ({end}, {cpus} vCPU): up {result.boot_seconds} s, total {result.total_seconds} s, "
                         f"{host_group}test {seconds:.0f} s")
    finally:
        vm.cleanup(run_dir)
    recorded = run_dir / "share" / "out" / "recorded"
    beside = ", the fast-init VM running beside it" if fast_init_vm is not None else ""
    record(f"lab VM pzram reboot ({result.accelerator}{beside}): " + "; ".join(times)
           + f"; load average {load_average()}")
    record((recorded / "pzram-rpo.txt").read_text().strip())
    for boot in (2, 4):
        print(f"boot {boot} ordering (journalctl -b -o short-monotonic):\n"
              + (recorded / f"pzram-boot{boot}-order.txt").read_text(), flush=True)
