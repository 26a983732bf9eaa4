"""In-guest helpers: run the real CLI and tools, record what the real drivers said, clean up what a test made.

Runs only inside the lab VM (INNOTIER_IN_LAB=1): region0 and region1 are fresh NVDIMMs with initialised
labels; /dev/vdb../dev/vde (DISKS) are small fresh virtual disks for the device tests, /dev/vdf../dev/vdi
(BIG_DISKS) larger ones for the arrays that hold a datadir (the moves and the raid-level sweep).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from datadir_mover.tiers.detect import detect_tiers
from tuner.cli import main

DISKS = [f"/dev/vd{c}" for c in "bcde"]
BIG_DISKS = [f"/dev/vd{c}" for c in "fghi"]
OUT = Path(os.environ.get("LAB_OUT", "/tmp/lab-out"))


def sh(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), capture_output=True, text=True, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


# Commands run in this process through the CLI's own main(argv) (the parser and handler a user runs, without a
# fresh interpreter: importing the CLI's ~330 modules costs seconds at every start under emulation).  They hold
# no signal handler, and their locks (move journal, persist backing) and children (fio, the TPC-C driver's
# forked workers) end with the call.  A fresh process still runs where that is what is tested: `move apply`
# SIGKILLed mid-copy (the crash point kills its own process; env set) and `sweep run`.
IN_PROCESS = {("tiers", "create"), ("tiers", "destroy"), ("tiers", "list"), ("tiers", "bench"), ("move", "status"),
              ("move", "plan"), ("move", "apply"), ("move", "resume"), ("move", "rollback"), ("move", "finalize"),
              ("move", "verify"), ("persist", "install"), ("persist", "restore"), ("profile", "lint"), ("tpcc", "run"), ("tpcc", "check")}


def cli(*args: str, check: bool = True, env: dict | None = None, fresh: bool = False) -> subprocess.CompletedProcess:
    """`innotier ARGS`: in this process where IN_PROCESS allows, else (or with fresh=True) a new interpreter."""
    t0 = time.monotonic()
    if tuple(args[:2]) in IN_PROCESS and not env and not fresh:
        proc = _cli_here(list(args))
    else:
        full = dict(os.environ, **(env or {}))
        proc = subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True, text=True, env=full)
    note_time(f"innotier {' '.join(args[:2])}", time.monotonic() - t0)
    if check and proc.returncode != 0:
        raise AssertionError(f"innotier {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _cli_here(argv: list[str]) -> subprocess.CompletedProcess:
    """`innotier ARGV` through tuner.cli.main in this process, with its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:   # argparse: bad usage (2), --help (0)
            rc = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["innotier", *argv], rc, out.getvalue(), err.getvalue())


def note_time(what: str, seconds: float) -> None:
    """Where the guest's time goes (for the CI budget; $LAB_OUT/times.log comes back to the host)."""
    try:
        OUT.mkdir(parents=True, exist_ok=True)
        with open(OUT / "times.log", "a") as fh:
            fh.write(f"{seconds:7.1f} s  {what}\n")
    except OSError:
        pass


def cli_json(*args: str) -> object:
    return json.loads(cli(*args, "--json").stdout)


def record(name: str, text: str) -> None:
    """Keep a real output for tests/fixtures/recorded/hardware-lab/ (the host copies $LAB_OUT/recorded)."""
    target = OUT / "recorded" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _tiers(include_all: bool = False) -> list[dict]:
    """What `tiers list --json` prints, computed in this process (a CLI start costs seconds under emulation;
    the CLI itself is exercised by `tiers create`/`destroy` and by test_cli_lists_the_live_tiers)."""
    return [t.to_dict() for t in detect_tiers(include_all=include_all)]


def tier_at(path: str) -> dict:
    return next(t for t in _tiers() if t["mountpoint"] == path)


def device_tier(device: str) -> dict:
    return next(t for t in _tiers(include_all=True) if t["device"] == device)


def all_tiers() -> list[dict]:
    return _tiers(include_all=True)


def wipe_md(disks: list[str] = DISKS) -> None:
    """Stop every md array and clear the disks' superblocks, whatever a test left behind."""
    for line in Path("/proc/mounts").read_text().splitlines():
        dev, mnt = line.split()[:2]
        if dev.startswith("/dev/md"):
            sh("umount", mnt, check=False)
    for name in os.listdir("/sys/block"):
        if name.startswith("md"):
            sh("mdadm", "--stop", f"/dev/{name}", check=False)
    sh("mdadm", "--zero-superblock", *disks, check=False)
    sh("wipefs", "-a", "-q", *disks, check=False)


SPEED_LIMIT_MAX = Path("/proc/sys/dev/raid/speed_limit_max")


@contextlib.contextmanager
def slow_resync(kib_per_s: int = 2000):
    """Throttle md's initial resync while arrays that are torn down long before it would end hold data: under
    emulation a full-speed resync of four 512 MiB members takes the CPU the server and the tests need (the
    arrays stay correct while they resync; the device tests wait for resyncs with the default limit)."""
    before = SPEED_LIMIT_MAX.read_text().strip()
    SPEED_LIMIT_MAX.write_text(str(kib_per_s))
    try:
        yield
    finally:
        SPEED_LIMIT_MAX.write_text(before)

