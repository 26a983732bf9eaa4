"""tuner.core.sandbox: a server that exits while its /proc entry is read is "gone", never an exception.

Real processes for the states that can be produced on demand (running, zombie, reaped); the exit race
itself (open() succeeded, then read() or the task listing failed with ESRCH because the process exited in
between) cannot be timed from a test, so the kernel's answer in that window, ProcessLookupError, is
injected where /proc is read.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tuner.core.sandbox import process
from tuner.core.sandbox import Sandbox, proc_state, proc_threads


def _wait_state(pid: int, want: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while proc_state(pid) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc_state(pid) == want


def test_running_zombie_and_reaped_processes():
    child = subprocess.Popen(["sleep", "30"])
    try:
        # a process that has just been started may be in any live state: R or S, and D while exec() still
        # pages the binary in on a busy machine (CI met D); only Z (zombie) and X (dead) are not alive
        assert proc_state(child.pid) in ("R", "S", "D") and proc_threads(child.pid) == 1
        assert Sandbox._pid_alive(child.pid) is True
        os.kill(child.pid, signal.SIGKILL)
        _wait_state(child.pid, "Z")                     # killed, not reaped yet
        assert Sandbox._pid_alive(child.pid) is False   # and _pid_alive reaps it
        assert proc_state(child.pid) is None and proc_threads(child.pid) is None
        assert Sandbox._pid_alive(child.pid) is False
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


class _ExitsWhileRead(type(Path())):
    """A /proc path whose process exits between open() and read(): the kernel answers ESRCH."""

    def read_text(self, *a, **kw):
        if str(self).startswith("/proc/"):
            raise ProcessLookupError(3, "No such process")
        return super().read_text(*a, **kw)


def test_exit_during_the_read_of_stat_means_gone(monkeypatch):
    monkeypatch.setattr(process, "Path", _ExitsWhileRead)
    assert proc_state(os.getpid()) is None
    assert Sandbox._pid_alive(os.getpid()) is False


def test_exit_during_the_task_listing_of_a_zombie_means_gone(monkeypatch):
    child = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(child.pid, signal.SIGKILL)
        _wait_state(child.pid, "Z")
        real_listdir = os.listdir

        def listdir(path):
            if str(path).startswith(f"/proc/{child.pid}/"):
                raise ProcessLookupError(3, "No such process")
            return real_listdir(path)

        monkeypatch.setattr(process.os, "listdir", listdir)
        assert proc_threads(child.pid) is None
        assert Sandbox._pid_alive(child.pid) is False
    finally:
        monkeypatch.undo()
        child.wait()


@pytest.mark.parametrize("text", ["", "1234 (mariadbd"])
def test_an_empty_or_cut_stat_line_means_gone(monkeypatch, text):
    class _Cut(type(Path())):
        def read_text(self, *a, **kw):
            return text if str(self).startswith("/proc/") else super().read_text(*a, **kw)

    monkeypatch.setattr(process, "Path", _Cut)
    assert proc_state(os.getpid()) is None
