#!/usr/bin/env python3
"""Per-cell overhead of a sweep: setup (clone the golden copy, start, warm up) against the measured time,
and cloning a golden copy against reloading TPC-C data (the goal: setup at most 0.1x of a reload).

Runs a real sweep (default: W=4, 3 cell runs on the disk under a private $INNOTIER_HOME, so the golden
copy is built -- i.e. reloaded -- once and timed), then reads the phase timings the runner stored with
every cell.  Prints medians and ratios; the machine is noisy, so compare medians, not single runs.

    .venv/bin/python bench/sweep_bench.py [--warehouses 4] [--cells 3] [--warmup 10] [--duration 30]
                                          [--tier disk|tmpfs] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SPEC = """
name: bench
server: {{flavor: mariadb}}
workload: {{driver: builtin, mode: procedures, warehouses: {w}, warmup: {warmup}, duration: {duration}, interval: 5}}
repeats: {cells}
order: sequential
tiers:
  disk: {{kind: home}}
  tmpfs: {{kind: tmpfs, size: {tmpfs_size}}}
fixed: {{page_size: 16k, clients: 4, buffer_pool_size: 256M, placement: {tier}}}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouses", type=int, default=4)
    ap.add_argument("--cells", type=int, default=3, help="cell runs to time (repeats of one cell)")
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--tier", choices=("disk", "tmpfs"), default="disk", help="where the cells' datadirs go")
    ap.add_argument("--home", help="INNOTIER_HOME to use (default: a fresh temporary one, so the golden copy is built)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary INNOTIER_HOME")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="ih-bench-", dir="/tmp"))
    os.environ["INNOTIER_HOME"] = str(home)
    from tuner.sweep.plan import make_plan
    from tuner.sweep.results import ResultsStore
    from tuner.sweep.runner import Runner, RunnerOptions
    from tuner.sweep.spec import load_spec

    spec_path = home / "bench.yaml"
    home.mkdir(parents=True, exist_ok=True)
    tmpfs_size = f"{max(1, (args.warehouses * 130 + 400) // 1024 + 1)}G"
    spec_path.write_text(SPEC.format(w=args.warehouses, warmup=args.warmup, duration=args.duration, cells=args.cells,
                                     tier=args.tier, tmpfs_size=tmpfs_size))
    try:
        plan = make_plan(load_spec(str(spec_path)))
        t0 = time.monotonic()
        summary = Runner(plan, RunnerOptions(listen=None, pt_summary=False,
                                             echo=lambda m: print(m, file=sys.stderr))).run()
        wall = time.monotonic() - t0
        with ResultsStore() as store:
            cells = store.cells(summary.run_id)
        figures = analyse(cells, wall)
    finally:
        if not args.home and not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        print_figures(figures, args)
    return 0


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def analyse(cells, wall: float) -> dict:
    ok = [c for c in cells if c.status == "ok"]
    if not ok:
        raise SystemExit("no cell finished; see the messages above")
    golden = next((c.golden for c in ok if c.golden and c.golden.get("timings")), {})
    g = golden.get("timings", {})
    reload_s = g.get("init", 0.0) + g.get("load", 0.0)
    per_cell = []
    for c in ok:
        p = c.phases
        clone = c.golden["clone"]
        setup = p.get("prepare", 0) + p.get("clone", 0) + p.get("place", 0) + p.get("configure", 0) + \
            p.get("start", 0) + p.get("warmup", 0)
        per_cell.append({
            "clone_copy": clone["copy_seconds"], "clone_verify": clone["verify_seconds"], "clone": p.get("clone", 0),
            "start": p.get("start", 0), "warmup": p.get("warmup", 0), "measure": p.get("measure", 0),
            "setup": setup, "setup_without_warmup": setup - p.get("warmup", 0),
            "teardown": p.get("check", 0) + p.get("collect", 0) + p.get("stop", 0) + p.get("record", 0),
            "total": c.finished_at - c.started_at - p.get("golden", 0)})
    med = {k: round(_median([x[k] for x in per_cell]), 2) for k in per_cell[0]}
    return {
        "warehouses": golden.get("key", {}).get("warehouses"), "datadir_bytes": golden.get("bytes"),
        "golden_timings": g, "reload_seconds": round(reload_s, 2), "cells": len(ok), "median": med,
        "setup_over_measured": round(med["setup"] / med["measure"], 3) if med["measure"] else None,
        "setup_over_reload": round(med["setup"] / reload_s, 3) if reload_s else None,
        "setup_without_warmup_over_reload": round(med["setup_without_warmup"] / reload_s, 3) if reload_s else None,
        "clone_over_reload": round(med["clone"] / reload_s, 3) if reload_s else None,
        "wall_seconds": round(wall, 1),
    }


def print_figures(f: dict, args) -> None:
    m = f["median"]
    mib = (f["datadir_bytes"] or 0) / 2**20
    print(f"sweep per-cell overhead, W={f['warehouses']} ({mib:.0f} MiB datadir), {f['cells']} cell runs on "
          f"{args.tier}, warm-up {args.warmup:g} s, measured {args.duration:g} s (medians)")
    print(f"  reload (initialize + load TPC-C)     {f['reload_seconds']:8.2f} s   "
          f"[golden build: {json.dumps(f['golden_timings'])}]")
    print(f"  clone golden copy (cp + verify)      {m['clone']:8.2f} s   (copy {m['clone_copy']:.2f} s, verify "
          f"{m['clone_verify']:.2f} s)   = {f['clone_over_reload']:.3f} x reload")
    print(f"  start server                         {m['start']:8.2f} s")
    print(f"  warm-up                              {m['warmup']:8.2f} s")
    print(f"  setup = clone + place + start + warm {m['setup']:8.2f} s   = {f['setup_over_reload']:.3f} x reload, "
          f"{f['setup_over_measured']:.3f} x measured")
    print(f"  setup without the warm-up            {m['setup_without_warmup']:8.2f} s   = "
          f"{f['setup_without_warmup_over_reload']:.3f} x reload")
    print(f"  measured                             {m['measure']:8.2f} s")
    print(f"  check + collect + stop + record      {m['teardown']:8.2f} s")
    print(f"  cell total                           {m['total']:8.2f} s")
    machinery = f["setup_without_warmup_over_reload"]
    print(f"  goal setup <= 0.1 x reload: clone + place + start = {machinery:.3f} x reload "
          f"({'met' if machinery is not None and machinery <= 0.1 else 'NOT met'}); counting the "
          f"{args.warmup:g} s warm-up, which a reloaded server needs as well: {f['setup_over_reload']:.3f} x reload")
    print(f"  bench wall time {f['wall_seconds']:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
