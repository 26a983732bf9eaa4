"""Noise figures from the real /proc of this machine: a busy loop is counted as ours when it is in our tree
and as others' when it is not; the probe times real work; waiting for quiet respects its limit."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tuner.sweep import noise

HOG = "import os\nwhile True:\n    os.getpid()\n"


@pytest.fixture
def hog():
    p = subprocess.Popen([sys.executable, "-c", HOG])
    time.sleep(0.3)
    yield p
    p.kill()
    p.wait(timeout=30)


def _ticks(pid: int) -> int:
    rest = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def _window(roots, hog_pid: int, seconds: float = 2.0, threshold: float = noise.DEFAULT_THRESHOLD):
    """The window's figures and the hog's own CPU in cores over the same window (read independently)."""
    w = noise.NoiseWindow(roots, threshold)
    h0 = _ticks(hog_pid)
    w.begin()
    time.sleep(seconds)
    fig = w.end()
    hog_cores = (_ticks(hog_pid) - h0) / noise.CLK_TCK / fig["seconds"]
    return fig, hog_cores


def test_a_busy_child_in_our_tree_is_ours(hog):
    fig, hog_cores = _window(lambda: [os.getpid()], hog.pid)
    assert hog_cores > 0.02, "the hog never ran"
    # however little CPU the shared machine gave it, the hog's time is counted as ours
    assert fig["ours_cores"] >= hog_cores - 0.05, (fig, hog_cores)
    assert 0.0 <= fig["others_cpu_share"] <= 1.0 and fig["seconds"] >= 1.9
    assert fig["loadavg_start"] and fig["loadavg_end"] and fig["cpus"] == os.cpu_count()


def test_a_busy_process_outside_our_tree_is_others_and_flags_the_window(hog):
    fig, hog_cores = _window(lambda: [], hog.pid, threshold=0.01)  # nothing is ours: the hog is other work
    assert fig["ours_cores"] == 0
    assert fig["others_cores"] >= hog_cores - 0.05, (fig, hog_cores)
    assert fig["flagged"] and "other processes used" in fig["flag_reason"]


def test_a_reaped_child_is_counted_once():
    w = noise.NoiseWindow(lambda: [os.getpid()])
    w.begin()
    subprocess.run([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 1.0: pass"],
                   check=True)
    fig = w.end()
    # the child's CPU time arrives once, through our cutime when it is reaped: never more than the cores
    # it could have used in the window, and not nothing
    assert 0.02 <= fig["ours_cores"] <= 1.2, fig


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


def test_wait_quiet_gives_up_at_its_limit(hog):
    t0 = time.monotonic()
    said = []
    w = noise.wait_quiet(lambda: [], limit=3.0, threshold=0.01, sample=1.0, echo=said.append)
    assert not w.quiet and 3.0 <= w.waited_s < 8.0 and time.monotonic() - t0 < 10
    assert any("did not get quiet" in s for s in said)
    q = noise.wait_quiet(lambda: [os.getpid()], limit=3.0, threshold=0.999, sample=0.5)
    assert q.quiet and q.waited_s < 2.0
