"""The real CLI as a background process in its own process group, and reaping that group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


def popen_cli(*args: str) -> subprocess.Popen:
    """The real `innotier` command line as a background process (unbuffered, its own process group, so that
    the driver's workers it forks can be reaped with it)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "tuner.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO), start_new_session=True)


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (zombies left out: they hold nothing)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(p.name))
    return out


def reap_group(proc: subprocess.Popen) -> None:
    """SIGKILL whatever is left of the CLI's process group (orphaned workers included) and wait until it is gone."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.wait(timeout=30)
    wait_for(lambda: not group_members(proc.pid), 30, f"process group {proc.pid} to end")
