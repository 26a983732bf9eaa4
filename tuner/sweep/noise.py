"""What else used the machine while a cell was measured: read from /proc, never assumed.

For every measured window (``NoiseWindow.begin()`` when the driver enters its measured phase,
``end()`` when it returns) this records:

- CPU used by processes *outside* the sweep: all busy CPU time of the machine (/proc/stat) minus the
  CPU time of the runner's own process tree (the TPC-C driver and its workers), of the cell's server,
  and of the kernel's I/O threads (kworker, jbd2, md*, loop, dm, zram, writeback: ``KERNEL_IO``).  Those
  threads do the cell's own I/O, far more for a disk cell than for a RAM cell; counted as others' CPU
  they would flag disk cells more often and bias the "without noisy blocks" line.  Their time is
  reported apart (``kernel_io_cores``); the kernel cannot say whose I/O a kworker did, so another
  process's I/O through them is left out of others' CPU too.  Per-process times come from /proc/PID/stat (utime+stime+cutime+cstime, so children reaped
  during the window are counted once, by their parent).  Reported as a share of the machine's CPU
  capacity and in cores;
- steal and iowait shares (/proc/stat), the load average at both ends (/proc/loadavg);
- pressure stall information (/proc/pressure/cpu|io|memory, "some" avg10 and the stall time in the
  window) where the kernel provides it (Linux >= 4.20 with PSI enabled);
- a calibration probe taken just before the window (``probe()``): a fixed CPU loop and a small
  write+fsync loop in the cell's datadir, timed.  A slow probe means a busy CPU or a busy disk.

A run is *flagged* when others used more than ``threshold`` of the machine's CPU (default 25%: half a
core on a 2-core machine).  ``wait_quiet`` waits, up to a limit, for a window in which others use less
than the threshold before a measured window starts.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
DEFAULT_THRESHOLD = 0.25  # others' share of the machine's CPU above which a run is flagged
PSI_KINDS = ("cpu", "io", "memory")
KTHREADD = 2  # parent of every kernel thread
KERNEL_IO = ("kworker", "jbd2", "md", "raid", "loop", "dm-", "kdmflush", "kcryptd", "zram", "kswapd", "writeback",
             "kblockd", "xfs", "ext4", "f2fs", "flush-", "nvme", "scsi_eh")


# ---------------------------------------------------------------------------
# /proc readers


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate 'cpu' line of /proc/stat, in clock ticks."""

    busy: int  # user + nice + system + irq + softirq (guest time is already in user)
    idle: int
    iowait: int
    steal: int

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.iowait + self.steal


def read_cpu_times(text: str | None = None) -> CpuTimes:
    text = text if text is not None else Path("/proc/stat").read_text()
    for line in text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            f += [0] * (8 - len(f))
            user, nice, system, idle, iowait, irq, softirq, steal = f[:8]
            return CpuTimes(user + nice + system + irq + softirq, idle, iowait, steal)
    raise ValueError("/proc/stat has no aggregate cpu line")


class Proc(NamedTuple):
    ppid: int
    ticks: int  # CPU ticks of the process and its reaped children
    comm: str


def is_kernel_io(p: Proc) -> bool:
    """A kernel thread that does block I/O or file-system work for whoever wrote."""
    return p.ppid == KTHREADD and p.comm.startswith(KERNEL_IO)


def read_processes() -> dict[int, Proc]:
    """pid -> Proc (parent, cumulative CPU ticks of the process and its reaped children, command name)."""
    out: dict[int, Proc] = {}
    for d in os.scandir("/proc"):
        if not d.name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{d.name}/stat").read_text()
        except OSError:
            continue
        head, tail = raw.rsplit(")", 1)
        rest = tail.split()
        # fields after the command: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17)
        try:
            ppid = int(rest[1])
            ticks = int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14])
        except (IndexError, ValueError):
            continue
        out[int(d.name)] = Proc(ppid, ticks, head.split("(", 1)[-1])
    return out


def tree_of(procs: dict[int, Proc], roots: Iterable[int]) -> set[int]:
    """The roots and all their descendants that are alive in ``procs``."""
    children: dict[int, list[int]] = {}
    for pid, p in procs.items():
        children.setdefault(p.ppid, []).append(pid)
    seen: set[int] = set()
    stack = [r for r in roots if r in procs]
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        stack.extend(children.get(p, ()))
    return seen


def read_loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def read_psi() -> dict[str, dict[str, float]]:
    """kind -> {avg10, total_us} of the 'some' line; empty when the kernel has no PSI."""
    out: dict[str, dict[str, float]] = {}
    for kind in PSI_KINDS:
        try:
            text = Path(f"/proc/pressure/{kind}").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("some "):
                kv = dict(x.split("=", 1) for x in line.split()[1:])
                out[kind] = {"avg10": float(kv.get("avg10", 0.0)), "total_us": float(kv.get("total", 0.0))}
    return out


# ---------------------------------------------------------------------------
# One measured window


@dataclass
class Snap:
    """The machine at one instant: what ``window_figures`` subtracts."""

    t: float
    cpu: CpuTimes
    ours_pids: dict[int, int]  # pid -> ticks of our processes
    load: list[float]
    psi: dict[str, dict[str, float]]
    kernel_io: dict[int, int] = field(default_factory=dict)  # pid -> ticks of the kernel's I/O threads


def snapshot(roots: Iterable[int]) -> Snap:
    """The real machine now (/proc)."""
    procs = read_processes()
    ours = {p: procs[p].ticks for p in tree_of(procs, roots)}
    kio = {pid: p.ticks for pid, p in procs.items() if is_kernel_io(p)}
    return Snap(time.monotonic(), read_cpu_times(), ours, read_loadavg(), read_psi(), kio)


class NoiseWindow:
    """Snapshots around a measured window; ``ours()`` names the root pids of the sweep's own work.
    ``sampler`` takes the snapshot (the real /proc by default; tests give recorded ones)."""

    def __init__(self, ours: Callable[[], Iterable[int]], threshold: float = DEFAULT_THRESHOLD,
                 sampler: Callable[[Iterable[int]], Snap] = snapshot) -> None:
        self._roots = ours
        self.threshold = threshold
        self._sampler = sampler
        self._begin: Snap | None = None

    def _snap(self) -> Snap:
        return self._sampler(self._roots())

    def begin(self) -> None:
        self._begin = self._snap()

    @property
    def started(self) -> bool:
        return self._begin is not None

    def end(self) -> dict[str, Any]:
        if self._begin is None:
            return {}
        b, e = self._begin, self._snap()
        self._begin = None
        return window_figures(b, e, self.threshold)


def _growth(b: dict[int, int], e: dict[int, int]) -> int:
    """Ticks used between two snapshots by a set of processes: those alive at both ends count their growth, new
    ones count fully; one gone at the end was reaped by a parent in the set, whose cutime now holds its whole
    life: take its start value back out."""
    used = sum(t - b.get(p, 0) for p, t in e.items()) - sum(t for p, t in b.items() if p not in e)
    return max(used, 0)


def window_figures(b: Snap, e: Snap, threshold: float) -> dict[str, Any]:
    total = max(e.cpu.total - b.cpu.total, 1)
    busy = e.cpu.busy - b.cpu.busy
    ours = _growth(b.ours_pids, e.ours_pids)
    # kernel threads are never reaped by a parent: a gone one simply stops counting
    kio = max(sum(t - b.kernel_io.get(p, t) for p, t in e.kernel_io.items()), 0)
    others = max(busy - ours - kio, 0)
    seconds = e.t - b.t
    out: dict[str, Any] = {
        "seconds": round(seconds, 2),
        "cpus": NCPU,
        "others_cpu_share": round(others / total, 4),
        "others_cores": round(others / CLK_TCK / seconds, 3) if seconds > 0 else None,
        "ours_cores": round(ours / CLK_TCK / seconds, 3) if seconds > 0 else None,
        "kernel_io_cores": round(kio / CLK_TCK / seconds, 3) if seconds > 0 else None,
        "steal_share": round((e.cpu.steal - b.cpu.steal) / total, 4),
        "iowait_share": round((e.cpu.iowait - b.cpu.iowait) / total, 4),
        "idle_share": round((e.cpu.idle - b.cpu.idle) / total, 4),
        "loadavg_start": b.load, "loadavg_end": e.load,
        "psi": {k: {"some_avg10_end": v["avg10"],
                    "some_stall_share": round((v["total_us"] - b.psi.get(k, {}).get("total_us", v["total_us"]))
                                              / 1e6 / seconds, 4) if seconds > 0 else None}
                for k, v in e.psi.items()},
        "threshold": threshold,
    }
    out["flagged"] = out["others_cpu_share"] > threshold
    out["flag_reason"] = (f"other processes used {out['others_cpu_share'] * 100:.0f}% of the CPU "
                          f"({out['others_cores']:.2f} of {NCPU} cores), above {threshold * 100:.0f}%"
                          if out["flagged"] else None)
    return out


# ---------------------------------------------------------------------------
# Calibration probe


CPU_LOOP_ROUNDS = 20000  # sha256 of 4 KiB, chained: about 50 ms on an idle 2020s core
FSYNC_ROUNDS = 20


def cpu_probe(rounds: int = CPU_LOOP_ROUNDS) -> float:
    """Seconds for a fixed, single-threaded CPU loop (chained SHA-256 of a 4 KiB block)."""
    block = b"\x5a" * 4096
    h = b""
    t0 = time.perf_counter()
    for _ in range(rounds):
        h = hashlib.sha256(h + block).digest()
    return time.perf_counter() - t0


def fsync_probe(directory: str | os.PathLike, rounds: int = FSYNC_ROUNDS, limit: float = 3.0) -> dict[str, Any]:
    """4 KiB write + fsync, ``rounds`` times (stopping after ``limit`` seconds), in a scratch file that is
    removed afterwards: milliseconds per fsync (median and max)."""
    path = Path(directory) / f".innotier-probe-{os.getpid()}"
    times: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        buf = os.urandom(4096)
        start = time.perf_counter()
        for i in range(rounds):
            t0 = time.perf_counter()
            os.pwrite(fd, buf, (i % 16) * 4096)
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
            if time.perf_counter() - start > limit:
                break
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    times.sort()
    return {"fsync_ms_median": round(times[len(times) // 2] * 1000, 3), "fsync_ms_max": round(times[-1] * 1000, 3),
            "fsyncs": len(times)}


def probe(directory: str | os.PathLike) -> dict[str, Any]:
    return {"cpu_loop_s": round(cpu_probe(), 4), **fsync_probe(directory), "directory": str(directory)}


# ---------------------------------------------------------------------------
# Waiting for a quiet machine


@dataclass
class QuietWait:
    waited_s: float
    quiet: bool
    others_cpu_share: float
    samples: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"waited_s": round(self.waited_s, 1), "quiet": self.quiet,
                "others_cpu_share": round(self.others_cpu_share, 4)}


def sample_share(ours: Callable[[], Iterable[int]], seconds: float, threshold: float) -> float:
    """Others' CPU share over the next ``seconds`` on the real machine."""
    win = NoiseWindow(ours, threshold)
    win.begin()
    time.sleep(seconds)
    return win.end()["others_cpu_share"]


def wait_quiet(ours: Callable[[], Iterable[int]], limit: float, threshold: float = DEFAULT_THRESHOLD,
               sample: float = 2.0, echo: Callable[[str], None] | None = None,
               measure: Callable[[float], float] | None = None,
               clock: Callable[[], float] = time.monotonic) -> QuietWait:
    """Sample others' CPU share over ``sample``-second windows until it is below ``threshold`` or
    ``limit`` seconds have passed.  ``measure(seconds)`` takes one sample (the real machine by default)."""
    measure = measure or (lambda seconds: sample_share(ours, seconds, threshold))
    t0 = clock()
    shares: list[float] = []
    told = False
    while True:
        share = measure(sample)
        shares.append(share)
        waited = clock() - t0
        if share <= threshold:
            return QuietWait(waited, True, share, shares)
        if waited >= limit:
            if echo:
                echo(f"the machine did not get quiet within {limit:.0f} s (others use {share * 100:.0f}% of the "
                     "CPU); measuring anyway, the run will be flagged if it stays busy")
            return QuietWait(waited, False, share, shares)
        if echo and not told:
            echo(f"waiting for a quiet machine: others use {share * 100:.0f}% of the CPU "
                 f"(threshold {threshold * 100:.0f}%, at most {limit:.0f} s)")
            told = True
