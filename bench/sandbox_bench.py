#!/usr/bin/env python3
"""Time to create (initialize) and start a fresh sandbox, per page size.  Prints medians of N runs.

Usage: .venv/bin/python bench/sandbox_bench.py [--runs 5] [--page-sizes 4k,16k,64k]
Uses a private INNOTIER_HOME under /tmp and removes it afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--page-sizes", default="4k,16k,64k")
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="ih-bench-", dir="/tmp")
    os.environ["INNOTIER_HOME"] = home
    from tuner.core import sandbox as sbx

    try:
        print(f"{'page':>5} {'create s (median/min/max)':>28} {'start s (median/min/max)':>28} {'stop s':>8}")
        for page in args.page_sizes.split(","):
            creates, starts, stops = [], [], []
            for i in range(args.runs):
                t0 = time.monotonic()
                sb = sbx.create(f"b{page}{i}", page_size=page)
                creates.append(time.monotonic() - t0)
                starts.append(sb.start())
                stops.append(sb.stop())
                sb.destroy()
            fmt = lambda xs: f"{statistics.median(xs):.2f} / {min(xs):.2f} / {max(xs):.2f}"
            print(f"{page:>5} {fmt(creates):>28} {fmt(starts):>28} {statistics.median(stops):>8.2f}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
