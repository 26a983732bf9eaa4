"""Host side of the lab tests: the image and fast-init VM fixtures (tests/lab/conftest.py registers them), the
fast-init VM's run, the figures (never assertions) both VM tests record.

The two machines run at the same time: the fast-init VM (test_lab_vm.py) is started in a thread of its own as
soon as the first lab test that boots asks for it, so it runs while the reboot group's machine waits on its
timer, its syncs and its shutdowns; its test then takes the result.  Neither machine's tests assert on time.
"""

from __future__ import annotations

import os
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from datadir_mover.lab import image as lab_image
from datadir_mover.lab import vm

REPO = Path(__file__).resolve().parents[2]
GROUPS = ("test_in_guest_devices.py", "test_in_guest_moves.py", "test_in_guest_sweep.py")
# the host-mode group (systemd as PID 1) runs in the first boot of the reboot group: tests/lab/test_lab_reboot.py
# INNOTIER_LAB_GROUPS=moves,sweep (or host, reboot) runs only those groups (while working on one); CI runs them all
WANTED = [g for g in os.environ.get("INNOTIER_LAB_GROUPS", "").split(",") if g]
SELECTED = tuple(g for g in GROUPS if not WANTED or g[len("test_in_guest_"):-3] in WANTED)
# passed on to the guest: LAB_SWEEP_LEVELS=0,5,10 runs fewer cells of the raid-level sweep
GUEST_ENV = tuple((k, os.environ[k]) for k in ("LAB_SWEEP_LEVELS",) if k in os.environ)
PMEM = (1 << 30, 256 << 20)
DISKS = (128 << 20,) * 4 + (512 << 20,) * 4
FAST_INIT_TIMEOUT = 1800   # seconds; TCG on a loaded 2-core host is slow
# one vCPU each while the two machines run at once on a 2-core host: four vCPU threads on two cores leave a vCPU
# spinning on a lock that a descheduled one holds (lock-holder preemption), burning the CPU the other machine
# needs (tests/lab whole: 10 min 3 s with one vCPU each, 11 min 5 s with two, CPU 904 s from 1098 s).  The reboot
# group's later boots take two once the fast-init machine has finished.
LAB_CPUS = 1
ALONE_CPUS = 2


# the kernel's last console line for each clean end of a boot (a cut has neither)
KERNEL_SAYS = {"reboot": "reboot: Restarting system", "poweroff": "reboot: Power down"}


def passed(junit: Path, tests: int = 1) -> float:
    """The seconds of a guest pytest session whose junit file says ``tests`` tests ran and passed."""
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": tests, "failures": 0, "errors": 0, "skipped": 0}, (junit.name, counts)
    return sum(float(c.get("time", 0)) for c in suite.iter("testcase"))


def check_boot(result, run_dir: Path, boot: int, test: str, end: str) -> Path:
    """A boot of a reboot test ended as asked (in time, its test passed, the kernel's restart or power-down line,
    or a cut with neither); the guest's out directory."""
    console = (run_dir / "console.log").read_text(errors="replace")
    assert not result.timed_out, "time limit hit; console tail:\n" + "\n".join(result.console_tail)
    assert result.exit_code == 0, f"boot {boot} ({test}) failed:\n{result.output[-6000:]}"
    if end == "cut":
        assert result.cut_after_done_seconds is not None
        assert not any(k in console for k in KERNEL_SAYS.values()), "the guest shut down before the cut"
    else:
        assert KERNEL_SAYS[end] in console, "\n".join(result.console_tail)
    return run_dir / "share" / "out"


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def record(line: str) -> None:
    """Print a timing line and keep it in out/lab-vm.log of the checkout (pytest shows prints only on failure;
    the log keeps the figures of every run, CI's included)."""
    print(line, flush=True)
    out = REPO / "out"
    out.mkdir(exist_ok=True)
    with open(out / "lab-vm.log", "a") as fh:
        fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


def group_seconds(suite: ET.Element) -> dict[str, float]:
    """Seconds per in-guest module (JUnit times include each test's setup and teardown)."""
    out: dict[str, float] = defaultdict(float)
    for case in suite.iter("testcase"):
        out[case.get("classname", "").rsplit(".", 1)[-1]] += float(case.get("time", 0))
    return dict(out)


def run_groups(img, groups: tuple[str, ...], run_dir: Path, timeout: float, *, stop: threading.Event | None = None,
               label: str = "", **kw) -> tuple[vm.VmResult, ET.Element]:
    """Boot the fast init once and run the in-guest modules ``groups`` in one pytest session; asserts that the
    session ran to its end and passed.  ``label`` prefixes its progress lines (a run in a thread of its own keeps
    the guest's lines in its output.log instead of echoing them among another test's)."""
    command = ("/opt/innotier/bin/python", "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfEs",
               "--timeout=900", "--durations=0", "--junitxml=/mnt/lab/out/junit.xml",
               *(f"tests/lab/guest/{g}" for g in groups))
    spec = vm.VmSpec(command=command, source=REPO, timeout=timeout, **kw)
    echo = None if label else (lambda line: print(line, flush=True))
    try:
        result = vm.run(spec, img, run_dir, echo=echo, progress=lambda m: print(f"{label}{m}", flush=True), stop=stop)
    finally:
        vm.cleanup(run_dir)
    junit = run_dir / "share" / "out" / "junit.xml"
    assert not result.timed_out, "time limit hit; console tail:\n" + "\n".join(result.console_tail)
    assert junit.exists(), f"no JUnit XML (exit {result.exit_code}); console tail:\n" + "\n".join(result.console_tail)
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    record(f"lab VM ({result.accelerator}, init {spec.init}): boot {result.boot_seconds} s, "
           f"total {result.total_seconds} s; "
           + ", ".join(f"{g} {s:.0f} s" for g, s in group_seconds(suite).items())
           + f"; load average {load_average()}")
    assert result.exit_code == 0, f"in-guest pytest failed (exit {result.exit_code}):\n{result.output[-6000:]}"
    return result, suite


FAST_INIT_TEST = "test_devices_moves_and_sweep_in_one_vm_boot"
REBOOT_TEST = "test_pzram_survives_a_reboot_a_poweroff_and_a_power_cut"


@pytest.fixture(scope="session")
def lab_image_built():
    blockers = lab_image.host_blockers()
    if blockers:
        pytest.skip("the lab image cannot be built here: " + "; ".join(blockers))
    t0 = time.monotonic()
    # the host-mode image: the fast groups boot it with the fast init, the host group with systemd
    img = lab_image.build(lab_image.default_spec(REPO, host=True), REPO,
                          progress=lambda m: print(f"lab build: {m}", flush=True))
    record(f"lab image: {time.monotonic() - t0:.0f} s here (built in {img.build_seconds} s when made); "
           f"load average {load_average()}")
    return img


@dataclass
class FastInitRun:
    run_dir: Path
    future: Future          # run_groups' (VmResult, JUnit suite), or its assertion


@pytest.fixture(scope="session")
def fast_init_vm(request, lab_image_built, tmp_path_factory):
    """The fast-init VM's run, started now in a thread of its own; None when its test is not in this session."""
    names = {item.name for item in request.session.items}
    if not SELECTED or FAST_INIT_TEST not in names:
        yield None
        return
    cpus = LAB_CPUS if REBOOT_TEST in names else ALONE_CPUS
    run_dir = tmp_path_factory.mktemp("fast-init") / "lab"
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fast-init-vm") as pool:
        future = pool.submit(run_groups, lab_image_built, SELECTED, run_dir, FAST_INIT_TIMEOUT, stop=stop,
                             label="[fast-init VM] ", pmem=PMEM, disks=DISKS, env=GUEST_ENV, cpus=cpus)
        try:
            yield FastInitRun(run_dir, future)
        finally:
            stop.set()   # a session ended early (interrupted, or its test never ran) leaves no qemu behind
