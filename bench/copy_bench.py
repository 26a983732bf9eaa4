#!/usr/bin/env python3
"""The mover's verified offline copy against `cp -a` of the same stopped datadirs, cold caches, several sizes in one run.

    sudo .venv/bin/python bench/copy_bench.py [--warehouses 4,40] [--repeat 4] [--cache cold] [--home DIR]
                                              [--tmpfs-size 12G]

For each size, a TPC-C datadir of W warehouses comes from its golden copy (``tuner.sweep.golden``, built once
and kept under ``--home``, default /var/tmp/innotier-move-bench, which ``bench/move_bench.py`` shares), is
cloned to the root file system and started and stopped once (the redo log takes its configured 512 MiB, as
on a server in use).  Then, ``--repeat`` rounds (an even number); each round runs, for every (size, cache),
the two sides back to back as a pair, innotier first in even rounds and ``cp -a`` first in odd ones, so each
order runs equally often (the run that goes first of a pair was measured faster on a quiet machine, by up
to 3x for ``cp -a``: an order effect that decided the ratio when one side went first more often); the
(size, cache) pairs are rotated by one place per round:

- **innotier**: the offline move's COPY and VERIFY steps as ``offline_steps`` runs them: ``walk``,
  ``copy_tree(verify=True, stable=True)`` (every byte of the source read and hashed with xxh3-128, holes only
  where the extent map and a read of zeros agree, the unwritten ranges of a fully allocated source allocated,
  owner/mode/mtime kept, fsync of every file and directory, every copy read back from the target and compared),
  then ``recheck_sources`` and ``verify_tree``;
- **cp -a**: GNU cp of the same directory to the same tmpfs: no hash, no fsync, no read-back; it writes the
  zeros of a fully allocated source (its redo log) instead of allocating them.

Both start with the source's pages dropped from the page cache (each file fsynced and
``POSIX_FADV_DONTNEED``; the bytes still resident are counted with ``fincore`` and printed), or with
``--cache warm`` read into it, both copy into a new directory of the same tmpfs, the timer covers the copy
only (the drop or the warming before, the removal after are outside it for both).  Printed per size and
cache: median and range of each side, each side's median when it ran first and when second (the order
effect, shown), the paired ratio of every round (cp's time over ours in the same round: > 1 means faster
than ``cp -a``), their median and a distribution-free interval for it (order statistics of the paired
ratios, with its coverage), and the load average.  The machine may be shared: read spreads accordingly.
Each side's CPU seconds (user + system, all threads: this process's for innotier, the child's for
``cp -a``) are printed too: on a loaded machine they, not the times, say what each side costs.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from datadir_mover.move.copy import copy_tree, recheck_sources, verify_tree, walk  # noqa: E402
from benchhost import bench_home_with_tmpfs, loadavg  # noqa: E402
from tuner.core import sandbox as sbx  # noqa: E402
from tuner.sweep import golden  # noqa: E402

OPTIONS = {"innodb_buffer_pool_size": "1G", "innodb_log_file_size": "512M"}
SIDES = ("innotier", "cp -a")



@dataclass
class Datadir:
    """A stopped datadir of W warehouses on the root file system, and the times measured on it."""

    warehouses: int
    path: Path
    sandbox: str
    files: list[Path]
    times: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (cache, side) -> seconds, by round
    cpu: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (cache, side) -> CPU seconds, by round
    firsts: dict[str, list[str]] = field(default_factory=dict)  # cache -> the side that ran first, by round
    resident: list[int] = field(default_factory=list)  # source bytes still cached after each drop

    @property
    def bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)


def prepare(home: Path, warehouses: int) -> Datadir:
    """The W-warehouse golden copy (built once) cloned and verified, started and stopped once."""
    bins = sbx.find_binaries()
    key = golden.GoldenKey(flavor=bins.flavor.value, version=str(bins.version), page_size="16k",
                           warehouses=warehouses, loader=golden._loader_digest())
    name = f"cpb-w{warehouses}"
    t0 = time.monotonic()
    built = not golden.is_present(key)
    golden.ensure(key, bins, load_buffer_pool="1G", progress=lambda m: print(f"  {m}", flush=True))
    golden.discard_cell_sandbox(name)  # left by an interrupted run
    data = home / f"{name}-data"
    if data.exists():
        shutil.rmtree(data)
    golden.clone(key, data)
    sb = sbx.adopt(name, data, key.dir / "client.cnf", "16k", bins, options=OPTIONS)
    try:
        sb.start()
        sb.stop("clean")
    except BaseException:
        golden.discard_cell_sandbox(name)
        raise
    files = [f for f in data.rglob("*") if f.is_file() and not f.is_symlink()]
    d = Datadir(warehouses, data, name, files)
    print(f"W={warehouses}: golden copy {key.id} ({'built' if built else 'reused'}), cloned, started and stopped in "
          f"{time.monotonic() - t0:.0f} s: {d.bytes / 2**20:.0f} MiB in {len(files)} files", flush=True)
    return d


def drop_cache(d: Datadir) -> int:
    """Evict the datadir's pages from the page cache; the bytes still resident after it (fincore)."""
    for f in d.files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "-o", "RES"] + [str(f) for f in d.files],
                         capture_output=True, text=True, check=True).stdout
    return sum(int(x) for x in out.split())


def run_innotier(src: Path, dst: Path) -> None:
    """The offline move's COPY and VERIFY steps (see the module docstring)."""
    dst.mkdir()
    manifest, _ = copy_tree(src, dst, walk(src), verify=True, stable=True)
    changed = recheck_sources(manifest)
    if changed:
        raise RuntimeError(f"source files changed during the bench's copy: {changed[:3]}")
    verify_tree(manifest)


def run_cp(src: Path, dst: Path) -> None:
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)


def warm_cache(d: Datadir) -> None:
    subprocess.run(["cat"] + [str(f) for f in d.files], stdout=subprocess.DEVNULL, check=True)


def cpu_seconds(side: str) -> float:
    """User + system CPU seconds so far of this process (innotier's copy runs in it) or of its waited-for children
    (``cp -a``)."""
    ru = resource.getrusage(resource.RUSAGE_SELF if side == "innotier" else resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measure(d: Datadir, cache: str, side: str, tier: Path) -> tuple[float, float]:
    """(seconds, CPU seconds) of one copy."""
    dst = tier / f"w{d.warehouses}-{side.replace(' ', '')}"
    if cache == "cold":
        d.resident.append(drop_cache(d))
    else:
        warm_cache(d)
    c0, t0 = cpu_seconds(side), time.monotonic()
    (run_innotier if side == "innotier" else run_cp)(d.path, dst)
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(side) - c0
    shutil.rmtree(dst)
    return elapsed, cpu


def pair_order(r: int) -> tuple[str, str]:
    """The sides of round ``r`` in the order they run: each order in every other round."""
    return SIDES if r % 2 == 0 else SIDES[::-1]


def rounds(datadirs: list[Datadir], caches: list[str], repeat: int, tier: Path) -> None:
    pairs = [(d, cache) for d in datadirs for cache in caches]
    for r in range(repeat):
        line = []
        for d, cache in pairs[r % len(pairs):] + pairs[:r % len(pairs)]:  # the pairs rotated by one place a round
            order = pair_order(r)
            for side in order:
                t, cpu = measure(d, cache, side, tier)
                d.times.setdefault((cache, side), []).append(t)
                d.cpu.setdefault((cache, side), []).append(cpu)
                line.append(f"W={d.warehouses} {cache} {side} {t:.2f} s ({cpu:.2f} s CPU)")
            d.firsts.setdefault(cache, []).append(order[0])
        print(f"  round {r + 1}: " + ", ".join(line) + f" (load average {loadavg()})", flush=True)


def median_interval(xs: list[float], level: float = 0.9) -> tuple[float, float, float]:
    """(low, high, coverage): the narrowest order-statistic interval (x_(k), x_(n+1-k)) holding the median with at
    least ``level`` probability, whatever the distribution; (min, max) and its coverage when n is too small."""
    xs, n = sorted(xs), len(xs)
    below = [sum(math.comb(n, i) for i in range(k)) / 2**n for k in range(n // 2 + 1)]  # P(Binom(n, 1/2) < k)
    k = max([k for k in range(1, n // 2 + 1) if 1 - 2 * below[k] >= level], default=1)
    return xs[k - 1], xs[n - k], 1 - 2 * below[k]


def report(d: Datadir, cache: str) -> None:
    mib = d.bytes / 2**20
    med = {s: statistics.median(d.times[cache, s]) for s in SIDES}
    how = (f"source pages dropped before every run (at most {max(d.resident) / 2**20:.1f} MiB still cached)"
           if cache == "cold" else "source read into the page cache before every run")
    print(f"W={d.warehouses}: {mib:.0f} MiB, {len(d.files)} files, root fs -> tmpfs, {how}, "
          f"{len(d.times[cache, 'cp -a'])} rounds, each order in half of them:")
    firsts = d.firsts[cache]
    for s in SIDES:
        ts = d.times[cache, s]
        first = [t for t, f in zip(ts, firsts) if f == s]
        second = [t for t, f in zip(ts, firsts) if f != s]
        print(f"  {s:9s} median {med[s]:6.2f} s = {mib / med[s]:5.0f} MiB/s  (range {min(ts):.2f}-{max(ts):.2f}; "
              f"first of the pair {statistics.median(first):.2f} s, second {statistics.median(second):.2f} s; "
              f"runs {', '.join(f'{t:.2f}' for t in ts)})")
    ratios = [c / i for c, i in zip(d.times[cache, "cp -a"], d.times[cache, "innotier"])]
    lo, hi, coverage = median_interval(ratios)
    by_order = {s: statistics.median([q for q, f in zip(ratios, firsts) if f == s]) for s in SIDES}
    print(f"  paired ratio cp -a time / innotier time, by round: {', '.join(f'{q:.2f}' for q in ratios)}; "
          f"median {statistics.median(ratios):.2f}, interval {lo:.2f}-{hi:.2f} ({coverage:.0%} coverage); "
          f"innotier first {by_order['innotier']:.2f}, cp -a first {by_order['cp -a']:.2f}", flush=True)
    cpu = {s: d.cpu[cache, s] for s in SIDES}
    cpu_ratios = [c / i for c, i in zip(cpu["cp -a"], cpu["innotier"])]
    print(f"  CPU seconds (user + system): innotier median {statistics.median(cpu['innotier']):.2f} "
          f"(runs {', '.join(f'{x:.2f}' for x in cpu['innotier'])}), cp -a median "
          f"{statistics.median(cpu['cp -a']):.2f} (runs {', '.join(f'{x:.2f}' for x in cpu['cp -a'])}); "
          f"paired CPU ratio cp -a / innotier median {statistics.median(cpu_ratios):.2f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warehouses", default="4,40", help="comma-separated sizes, measured in the same rounds")
    ap.add_argument("--repeat", type=int, default=4,
                    help="rounds, an even number (each side and size once per round, each order in half)")
    ap.add_argument("--home", default="/var/tmp/innotier-move-bench",
                    help="INNOTIER_HOME of the bench; keeps the golden copies between runs")
    ap.add_argument("--cache", default="cold", help="the source's page cache before every run: cold, warm or both")
    ap.add_argument("--tmpfs-size", default="12G")
    args = ap.parse_args()
    caches = [c.strip() for c in args.cache.split(",") if c.strip()]
    if not caches or set(caches) - {"cold", "warm"}:
        ap.error(f"--cache {args.cache!r} is not valid; give cold, warm or cold,warm")
    try:
        sizes = [int(w) for w in args.warehouses.split(",") if w.strip()]
    except ValueError:
        ap.error(f"--warehouses {args.warehouses!r} is not valid; give numbers such as 4,40")
    if not sizes or min(sizes) < 1 or args.repeat < 2 or args.repeat % 2:
        ap.error(f"--warehouses takes numbers of 1 or more, --repeat an even number of 2 or more (not "
                 f"{args.repeat}: each order of the pair must run equally often)")
    if os.geteuid() != 0:
        print("copy_bench: run as root (it mounts a tmpfs)", file=sys.stderr)
        return 2
    home = Path(args.home)
    tier = bench_home_with_tmpfs(args.home, "copy-tier", args.tmpfs_size)
    print(f"copy_bench started, load average {loadavg()}; {os.uname().release}")
    datadirs: list[Datadir] = []
    try:
        for w in sizes:
            datadirs.append(prepare(home, w))
        print(f"{args.repeat} rounds of {', '.join(f'W={d.warehouses}' for d in datadirs)} x {'/'.join(caches)} x "
              f"(innotier, cp -a) pairs, each order in half of the rounds:", flush=True)
        rounds(datadirs, caches, args.repeat, tier)
        for d in datadirs:
            for cache in caches:
                report(d, cache)
        print(f"load average at the end: {loadavg()}")
    finally:
        for d in datadirs:
            golden.discard_cell_sandbox(d.sandbox)  # removes its datadir too
        subprocess.run(["umount", str(tier)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
