#!/usr/bin/env python3
"""MariaDB 10.11 vs MariaDB 11.8 vs MySQL 9.7 on this machine: sandbox create/start time and TPC-C tpmC.

Usage: .venv/bin/python bench/servers_bench.py [--servers mariadb-10.11,mariadb-11.8,mysql-9.7]
           [--runs 3] [--clients 8] [--warehouses 4] [--warmup 10] [--duration 30] [--buffer-pool 1G]
           [--mode procedures]

Each server must be installed (`innotier server install NAME`).  Per server: one sandbox (16k pages,
O_DIRECT, the given buffer pool), created and started --runs times for the timings; then one sandbox is
loaded with W warehouses and measured --runs times (same data, consistency checks after the last run).
Prints medians with min-max spread, the load average before and after, kernel, versions and packages.
Uses a private INNOTIER_HOME under /tmp and removes it afterwards.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time


def spread(xs: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def loadavg() -> str:
    return open("/proc/loadavg").read().split(" ", 3)[:3].__str__()


def bench_server(name: str, args) -> dict:
    from tuner.core import sandbox as sbx
    from tuner.core.servers import tree
    from tuner.tpcc.check import run_checks
    from tuner.tpcc.config import RunConfig
    from tuner.tpcc.driver import run
    from tuner.tpcc.loader import load

    srv = tree.installed(name)
    options = {"innodb_buffer_pool_size": args.buffer_pool, "innodb_flush_method": "O_DIRECT"}
    if srv.flavor.value == "mariadb" and srv.version.major >= 11:
        options = {"innodb_buffer_pool_size": args.buffer_pool}  # O_DIRECT is the default, the option deprecated
    creates, starts = [], []
    for i in range(args.runs):
        t0 = time.monotonic()
        sb = sbx.create(f"b-{name}-{i}", page_size="16k", server=name, options=options)
        creates.append(time.monotonic() - t0)
        starts.append(sb.start())
        if i < args.runs - 1:
            sb.destroy(force=True)
    spec = sb.connection_spec()
    t0 = time.monotonic()
    load(spec, warehouses=args.warehouses, database="tpcc", drop=True, progress=False)
    load_s = time.monotonic() - t0
    tpmcs = []
    for _ in range(args.runs):
        cfg = RunConfig(clients=args.clients, warmup=args.warmup, duration=args.duration, mode=args.mode,
                        interval=max(1.0, args.duration / 3))
        result = run(spec.with_database("tpcc"), cfg)
        if not result.complete or result.errors:
            raise SystemExit(f"{name}: the run failed ({result.failure}, {result.errors} errors)")
        tpmcs.append(result.tpmc)
    ok = run_checks(spec.with_database("tpcc"), database="tpcc").ok
    sb.destroy(force=True)
    return {"server": name, "version": srv.manifest.version, "create": creates, "start": starts, "load": load_s,
            "tpmc": tpmcs, "checks": "pass" if ok else "FAIL",
            "package": f"{srv.dist.main_package} {srv.manifest.packages.get(srv.dist.main_package)}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="mariadb-10.11,mariadb-11.8,mysql-9.7")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--warehouses", type=int, default=4)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--buffer-pool", default="1G")
    ap.add_argument("--mode", default="procedures", choices=("procedures", "statements"))
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="ih-sbench-", dir="/tmp")
    os.environ["INNOTIER_HOME"] = home
    before = loadavg()
    rows = []
    try:
        for name in args.servers.split(","):
            rows.append(bench_server(name, args))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"kernel {platform.release()}, {os.cpu_count()} CPUs; load average before {before}, after {loadavg()}")
    print(f"16k pages, O_DIRECT, buffer pool {args.buffer_pool}, W={args.warehouses}, {args.clients} clients, "
          f"{args.mode}, warm-up {args.warmup:g} s + {args.duration:g} s measured, {args.runs} runs each "
          "(median (min-max))")
    print(f"{'server':<14} {'version':<10} {'create s':>18} {'start s':>18} {'load W s':>9} {'tpmC':>26} checks")
    for r in rows:
        print(f"{r['server']:<14} {r['version']:<10} {spread(r['create']):>18} {spread(r['start']):>18} "
              f"{r['load']:>9.1f} {spread(r['tpmc'], '{:,.0f}'):>26} {r['checks']}")
    base = rows[0]
    for r in rows[1:]:
        ratio = statistics.median(r["tpmc"]) / statistics.median(base["tpmc"])
        print(f"tpmC {r['server']} / {base['server']}: {ratio:.2f}x")
    for r in rows:
        print(f"  {r['server']}: {r['package']}")


if __name__ == "__main__":
    main()
