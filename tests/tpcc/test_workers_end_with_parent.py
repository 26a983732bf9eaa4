"""`innotier tpcc run`'s worker processes end with it: a SIGTERM (what `timeout` or a service manager sends)
stops the run cleanly, a SIGKILL leaves no worker behind either, and no connection of the run stays open."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.core.sandbox import proc_state
from waiting import wait_for
from sqlhelpers import execute

REPO = Path(__file__).resolve().parents[2]
WORKERS = 2


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    return proc_state(pid) not in (None, "Z")


def _run_connections(spec) -> int:
    """Connections to the run's database other than this one."""
    [(n,)] = execute(spec.with_database(None),
                     "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = 'tpcc' AND ID <> CONNECTION_ID()")
    return int(n)


def _start_run(tmp_path) -> subprocess.Popen:
    args = [sys.executable, "-m", "tuner.cli", "tpcc", "run", "--sandbox", "shared", "--database", "tpcc",
            "--clients", "4", "--workers", str(WORKERS), "--warmup", "0", "--duration", "600",
            "--interval", "1", "--mode", "statements"]
    with open(tmp_path / "run.out", "w") as out, open(tmp_path / "run.err", "w") as err:
        # the interval lines go to stderr, one write each
        return subprocess.Popen(args, cwd=str(REPO), stdout=out, stderr=err)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_no_worker_outlives_the_run(tpcc_w1, tmp_path, sig):
    run = _start_run(tmp_path)
    workers: list[int] = []
    try:
        workers = wait_for(lambda: (kids := _children(run.pid)) and len(kids) == WORKERS and kids, 120,
                           f"{WORKERS} worker processes of `innotier tpcc run`")
        wait_for(lambda: _run_connections(tpcc_w1) >= 4, 120, "the run's 4 terminals connected")
        wait_for(lambda: "tpmC" in (tmp_path / "run.err").read_text(), 120, "the first measured interval")
        os.kill(run.pid, sig)
        run.wait(timeout=120)
        if sig == signal.SIGTERM:
            # stopped cleanly: the partial result is printed, the workers' share included, and the failure says
            # why in one line
            stderr = (tmp_path / "run.err").read_text()
            assert run.returncode == 8, stderr
            assert stderr.strip().splitlines()[-1] == (
                "innotier: the run did not complete: the run was stopped by SIGTERM; "
                "the result holds the measurements up to that point")
            out = (tmp_path / "run.out").read_text()
            assert out.startswith("driver builtin") and f"client: {WORKERS} worker processes" in out
            assert "peak RSS 0 MiB" not in out  # every worker reported its end
        else:
            assert run.returncode == -signal.SIGKILL
        wait_for(lambda: not any(_alive(w) for w in workers), 60, f"workers {workers} to end with their parent")
        wait_for(lambda: _run_connections(tpcc_w1) == 0, 60, "the run's connections to close")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for w in workers:  # a failed test must not leave them running either
            if _alive(w):
                os.kill(w, signal.SIGKILL)
