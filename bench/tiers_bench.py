#!/usr/bin/env python3
"""fio characterization of tmpfs, zram (ext4) and the root disk, side by side.  Needs root.

Runs `innotier tiers bench`'s jobs (4 KiB sync random read, 4 KiB random write with fsync after each,
1 MiB sequential read and write with libaio QD32; O_DIRECT where the tier accepts it) --runs times per
tier and prints medians, min and max, and the ratio of each RAM tier to the disk.  The machine is shared
and noisy: read the spread, not just the median.

Usage: sudo .venv/bin/python bench/tiers_bench.py [--runs 3] [--size 256M] [--runtime 10]
Uses a private INNOTIER_HOME under /tmp; the tiers it creates are destroyed afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile

METRICS = (("randwrite", "iops", "4k randwrite+fsync IOPS"), ("randread", "iops", "4k randread IOPS"),
           ("seqwrite", "mb_s", "seq write MB/s"), ("seqread", "mb_s", "seq read MB/s"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size", default="256M")
    ap.add_argument("--runtime", type=int, default=10)
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="ih-tbench-", dir="/tmp")
    os.environ["INNOTIER_HOME"] = home
    from datadir_mover.tiers import fio
    from datadir_mover.tiers.detect import tier_for_path
    from datadir_mover.tiers.plan import apply_plan
    from datadir_mover.tiers.provision import plan_create, plan_destroy
    from tuner.cli import build_parser
    from tuner.core.units import parse_size

    size = parse_size(args.size)
    work = tempfile.mkdtemp(prefix="innotier-tbench-", dir="/var/tmp")
    created = []
    try:
        targets = {"disk": work}
        for label, argv in (("tmpfs", ["ramdisk", "--size", "1G"]), ("zram-ext4", ["zram", "--size", "1G", "--fs", "ext4"])):
            mount = os.path.join(tempfile.gettempdir(), f"innotier-tbench-{label}")
            ns = build_parser().parse_args(["tiers", "create", *argv, "--mount", mount])
            apply_plan(plan_create(ns.kind, ns))
            created.append(mount)
            targets[label] = mount
        results: dict[str, list] = {k: [] for k in targets}
        for run in range(args.runs):
            for label, path in targets.items():
                tier = tier_for_path(path)
                r = fio.bench(tier, path, size, args.runtime)
                results[label].append(r)
                print(f"run {run + 1} {label:10} {r.io_mode:10} " + "  ".join(
                    f"{name}={getattr(r.job(job), attr):,.0f}" for job, attr, name in METRICS), flush=True)
        first = results["disk"][0]
        print(f"\n{first.fio_version}, kernel {first.kernel}, size {args.size}, runtime {args.runtime}s/job, "
              f"{args.runs} runs; disk = {first.tier['device']} ({first.tier['kind']}, {first.tier['fs']})")
        print(f"{'tier':10} {'I/O':9} " + " ".join(f"{name:>30}" for _, _, name in METRICS))
        medians = {}
        for label, runs in results.items():
            cells = []
            for job, attr, _ in METRICS:
                xs = [getattr(r.job(job), attr) for r in runs]
                medians[(label, job)] = statistics.median(xs)
                cells.append(f"{statistics.median(xs):>12,.0f} ({min(xs):,.0f}-{max(xs):,.0f})")
            print(f"{label:10} {runs[0].io_mode[:9]:9} " + " ".join(f"{c:>30}" for c in cells))
        for label in targets:
            if label != "disk":
                print(f"{label} / disk: " + ", ".join(
                    f"{name} x{medians[(label, job)] / medians[('disk', job)]:.1f}" for job, _, name in METRICS))
    finally:
        for mount in created:
            try:
                apply_plan(plan_destroy(mount, force=True))
                os.rmdir(mount)
            except Exception as exc:  # report, keep cleaning
                print(f"cleanup of {mount} failed: {exc}")
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
