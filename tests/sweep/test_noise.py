"""Noise figures: the process tree and kernel threads read from this machine's real /proc; the accounting of a
window and the quiet-wait loop on recorded snapshots with an injected clock, so no assertion depends on how
busy the shared machine is."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tuner.sweep import noise
from waiting import wait_for

HOG = "import os\nwhile True:\n    os.getpid()\n"


def _ticks(pid: int) -> int:
    rest = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


@pytest.fixture
def hog():
    p = subprocess.Popen([sys.executable, "-c", HOG])
    wait_for(lambda: _ticks(p.pid) > 0, 30, "the busy loop to get CPU time")
    yield p
    p.kill()
    p.wait(timeout=30)


def _snap(t: float, busy: int, ours: dict[int, int], kio: dict[int, int] | None = None, total: int = 0) -> noise.Snap:
    cpu = noise.CpuTimes(busy=busy, idle=total - busy if total else 0, iowait=0, steal=0)
    return noise.Snap(t, cpu, ours, [1.0, 1.0, 1.0], {}, kio or {})


def test_a_child_in_our_tree_is_ours_and_a_process_outside_it_is_not(hog):
    procs = noise.read_processes()
    assert procs[hog.pid].ppid == os.getpid() and procs[hog.pid].comm.startswith("python")
    assert hog.pid in noise.tree_of(procs, [os.getpid()])
    assert hog.pid not in noise.tree_of(procs, [])
    # a real snapshot counts the hog's ticks among ours
    assert hog.pid in noise.snapshot([os.getpid()]).ours_pids and hog.pid not in noise.snapshot([]).ours_pids


def test_kernel_io_threads_are_found_in_the_real_proc():
    kio = [p for p in noise.read_processes().values() if noise.is_kernel_io(p)]
    assert kio and all(p.ppid == noise.KTHREADD for p in kio)
    assert any(p.comm.startswith("kworker") for p in kio)


def test_others_cpu_is_busy_time_less_ours_less_the_kernels_io_threads():
    ticks = noise.CLK_TCK
    b = _snap(0.0, busy=1000, ours={10: 500, 11: 0}, kio={2000: 40}, total=2000)
    # 10 s later: the machine was busy 12 s of its 20 core-seconds; ours used 6 s, kworker 1 s
    e = _snap(10.0, busy=1000 + 12 * ticks, ours={10: 500 + 5 * ticks, 11: 1 * ticks}, kio={2000: 40 + ticks},
              total=2000 + 20 * ticks)
    fig = noise.window_figures(b, e, threshold=0.25)
    assert fig["ours_cores"] == 0.6 and fig["kernel_io_cores"] == 0.1
    assert fig["others_cores"] == 0.5 and fig["others_cpu_share"] == 0.25 and not fig["flagged"]
    fig = noise.window_figures(b, e, threshold=0.2)
    assert fig["flagged"] and fig["flag_reason"].startswith("other processes used 25% of the CPU (0.50 of")


def test_a_reaped_child_is_counted_once():
    ticks = noise.CLK_TCK
    # the child (pid 11) had used 1 s at the start; reaped by the end, its whole 3 s are in the parent's cutime
    b = _snap(0.0, busy=0, ours={10: 0, 11: ticks})
    e = _snap(4.0, busy=4 * ticks, ours={10: 3 * ticks})
    fig = noise.window_figures(b, e, threshold=0.25)
    assert fig["ours_cores"] == 0.5  # 2 s of the child's time in the window, over 4 s


def test_cpu_times_parse_recorded_proc_stat():
    # /proc/stat of a 2-core Debian 12 VM (kernel 6.1): user nice system idle iowait irq softirq steal guest guest_nice
    text = "cpu  4705 150 1120 16250 520 0 73 35 0 0\ncpu0 2300 70 560 8100 260 0 40 18 0 0\nintr 1\n"
    t = noise.read_cpu_times(text)
    assert t.busy == 4705 + 150 + 1120 + 0 + 73 and t.idle == 16250 and t.iowait == 520 and t.steal == 35
    assert t.total == t.busy + t.idle + t.iowait + t.steal


def test_psi_is_read_where_the_kernel_has_it():
    psi = noise.read_psi()
    if not os.path.exists("/proc/pressure/cpu"):
        assert psi == {}
    else:
        assert "cpu" in psi and psi["cpu"]["total_us"] >= 0


def test_probe_times_a_cpu_loop_and_fsyncs_and_leaves_nothing(tmp_path):
    p = noise.probe(tmp_path)
    assert p["cpu_loop_s"] > 0 and p["fsyncs"] >= 1 and p["fsync_ms_median"] > 0
    assert list(tmp_path.iterdir()) == []


class _Machine:
    """Scripted shares of others' CPU, one per sample, on a clock that moves only when a sample is taken."""

    def __init__(self, shares: list[float]) -> None:
        self.shares = list(shares)
        self.now = 100.0

    def clock(self) -> float:
        return self.now

    def measure(self, seconds: float) -> float:
        self.now += seconds
        return self.shares.pop(0)


def test_wait_quiet_gives_up_at_its_limit_and_says_so():
    m, said = _Machine([0.9, 0.8, 0.9, 0.7]), []
    w = noise.wait_quiet(lambda: [], limit=3.0, threshold=0.25, sample=1.0, echo=said.append, measure=m.measure,
                         clock=m.clock)
    assert not w.quiet and w.waited_s == 3.0 and w.samples == [0.9, 0.8, 0.9] and w.others_cpu_share == 0.9
    assert said[0].startswith("waiting for a quiet machine: others use 90% of the CPU")
    assert said[-1].startswith("the machine did not get quiet within 3 s")


def test_wait_quiet_returns_at_the_first_quiet_sample():
    m = _Machine([0.6, 0.1, 0.9])
    q = noise.wait_quiet(lambda: [], limit=30.0, threshold=0.25, sample=0.5, measure=m.measure, clock=m.clock)
    assert q.quiet and q.waited_s == 1.0 and q.samples == [0.6, 0.1]
