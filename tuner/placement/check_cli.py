"""`innotier placement check`: a stored advice checked by a sweep (tuner/placement/check.py)."""

from __future__ import annotations

import sys

from tuner.core.cliutil import print_json, print_table
from tuner.core.errors import UsageError
from tuner.core.units import format_duration, parse_size
from tuner.placement import check, report
from tuner.placement.store import PlacementStore
from tuner.sweep.plan import print_plan
from tuner.sweep.runner import RunnerOptions


def add_arguments(c) -> None:
    c.add_argument("--advice", help="a stored advice id or prefix (default: the newest; `placement advise` stores "
                                    "each)")
    c.add_argument("--plan", action="store_true", help="print the cells and the generated sweep, run nothing")
    c.add_argument("--server", help="an installed server distribution for the cells (default: the host's server; "
                                    "it must be the one the advice's profile was measured on)")
    c.add_argument("--slow", metavar="DIR", help="where the files that are not moved live (default: the advice's "
                                                 "--here tier if it is a mount of its own, else $INNOTIER_HOME's disk)")
    c.add_argument("--naive", action="append", choices=check.NAIVE,
                   help="naive picks beside the advisor's (repeatable; default both)")
    c.add_argument("--budget", action="append", metavar="SIZE",
                   help="also check the advisor's pick at this budget (repeatable, e.g. --budget 16M --budget 128M): "
                        "predicted against measured at several budgets in one design")
    c.add_argument("--blocks", type=int, default=3, help="blocks of the design, each runs every cell once in a "
                                                         "random order (default 3; 1 gives no interval)")
    c.add_argument("--clients", type=int, help="TPC-C terminals (default: the profile's)")
    c.add_argument("--warehouses", type=int, help="TPC-C warehouses of the golden copy (default: the profile's)")
    c.add_argument("--buffer-pool", help="innodb_buffer_pool_size of the cells (default: the profile's)")
    c.add_argument("--warmup", type=float, default=10.0, help="seconds of warm-up per cell (default 10)")
    c.add_argument("--duration", type=float, default=60.0, help="measured seconds per cell (default 60)")
    c.add_argument("--interval", type=float, default=5.0, help="report interval seconds (default 5)")
    c.add_argument("--metrics-listen", metavar="HOST:PORT", help="serve Prometheus metrics here while it runs")
    c.add_argument("--png", metavar="PATH", help="also draw measured beside predicted throughput against budget")


def request_from_args(args) -> check.CheckRequest:
    for name in ("warmup", "duration", "interval"):
        if getattr(args, name) < (0 if name == "warmup" else 1):
            raise UsageError(f"--{name} {getattr(args, name):g} is not valid; give a positive number of seconds")
    return check.CheckRequest(advice=args.advice, server=args.server, slow=args.slow,
                              naive=tuple(args.naive) if args.naive else check.NAIVE,
                              budgets=tuple(parse_size(b, "--budget") for b in args.budget or ()), blocks=args.blocks,
                              clients=args.clients, warehouses=args.warehouses, buffer_pool=args.buffer_pool,
                              warmup=args.warmup, duration=args.duration, interval=args.interval)


def cmd_check(args) -> int:
    request = request_from_args(args)
    with PlacementStore(args.results) as store:
        plan = check.build(request, store)
    sweep = check.sweep_plan(plan)  # validated as `sweep run` validates: tiers, binaries, every cell
    echo = (lambda m: print(m, file=sys.stderr)) if args.json else print
    if args.plan:
        if args.json:
            print_json({"cells": [c.to_dict() for c in plan.cells], "spec": dict(plan.spec_doc),
                        "sweep": sweep.to_dict()})
            return 0
        check.describe(plan)
        print_table(check.cell_rows(plan), check.CELL_COLUMNS, title="cells (predicted saving from the advice)")
        print(plan.spec_text())
        print_plan(sweep)
        return 0
    if sweep.refusal:
        raise UsageError(f"the check cannot run on this machine: {sweep.refusal}")
    check.describe(plan, echo)
    echo(f"{len(sweep.cells)} cell runs, estimated {format_duration(sweep.estimate_seconds)}; sweep run "
         f"{sweep.run_id}")
    summary = check.execute(plan, RunnerOptions(results=args.results, listen=args.metrics_listen, echo=echo))
    res = check.result(plan, args.results)
    if args.json:
        print_json(res.to_dict())
    else:
        print_table(check.result_rows(res), check.RESULT_COLUMNS,
                    title="predicted (advice) beside measured (throughput over none)", fold=("files",))
        for line in check.head_to_head_lines(res):
            print(line)
        if check.curve_line(res):
            print(check.curve_line(res))
        if args.png:
            print(f"picture: {report.write_check_png(res, args.png)}")
        for note in res.notes:
            print(f"note: {note}")
        print(f"stored as check {res.run_id} in {summary.results}; the sweep's report: `innotier sweep report "
              f"{res.run_id}`")
    return 1 if summary.failed else 0
