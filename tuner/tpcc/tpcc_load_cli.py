"""`innotier tpcc load` and `innotier tpcc check`."""

from __future__ import annotations

import argparse

from tuner.core.cliutil import add_connection_args, connection_from_args, print_json, print_table
from tuner.core.errors import UsageError
from tuner.tpcc import loader
from tuner.tpcc.check import run_checks

DEFAULT_DATABASE = "tpcc"


def register(s) -> None:
    p = s.add_parser("load", help="create and load the TPC-C schema (data generated on the server), then verify it",
                     description="Create the nine TPC-C tables and load W warehouses, generated per the TPC-C "
                                 "specification on the server itself; verify row counts, the initial-state rules "
                                 "(clause 4.3.3.1) and the consistency conditions (clause 3.3.2) at the end.")
    p.add_argument("--warehouses", "-w", type=int, required=True, metavar="W", help="number of warehouses (1 or more)")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="parallel connections (default: 2-4, from the number of cores)")
    p.add_argument("--drop", action="store_true",
                   help="drop the TPC-C tables already in the database first (otherwise an existing schema is refused)")
    p.add_argument("--dry-run", action="store_true", help="print the load plan and change nothing")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_connection_args(p)
    p.set_defaults(func=cmd_load)

    c = s.add_parser("check", help="run the TPC-C consistency conditions (clause 3.3.2) on a loaded schema",
                     description="Check TPC-C consistency conditions 1-10 and 12 of clause 3.3.2 (with --initial, "
                                 "also condition 11 and the initial-population rules of clause 4.3.3.1); report "
                                 "each as pass or fail with the first offending rows.  Exit status 8 when any fails.")
    c.add_argument("--initial", action="store_true",
                   help="also check the rules that hold only right after a load (condition 11, clause 4.3.3.1)")
    c.add_argument("--limit", type=int, default=5, metavar="N", help="offending rows to show a check (default 5)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    add_connection_args(c)
    c.set_defaults(func=cmd_check)


def cmd_load(args: argparse.Namespace) -> int:
    database = args.database or DEFAULT_DATABASE
    warehouses, jobs = loader.validate(args.warehouses, args.jobs, database)  # before touching the server
    spec = connection_from_args(args)
    if args.dry_run:
        plan = loader.build_plan(warehouses, database, jobs, c_load_c_last=0, load_time="(at load)")
        print(plan.describe())
        return 0
    result = loader.load(spec, warehouses, database=database, jobs=jobs, drop=args.drop,
                         progress=not args.json)
    if args.json:
        print_json(result)
        return 0
    rows = [{"table": t, "rows": n, "seconds": f"{result.table_seconds.get(t, 0):.1f}"}
            for t, n in result.row_counts.items()]
    print(f"TPC-C loaded into {database}: {result.warehouses} warehouse(s)")  # a title would wrap to the narrow table
    print_table(rows, ["table", "rows", "seconds"])
    checks = result.checks
    print(f"loaded and verified in {result.seconds:.1f} s (verification {result.verify_seconds:.1f} s, "
          f"{len(checks.results) if checks else 0} checks passed); C-Load for C_LAST = {result.c_load['c_last']}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit {args.limit} is not valid; give 1 or more")
    database = args.database or DEFAULT_DATABASE
    spec = connection_from_args(args)
    report = run_checks(spec, database=database, initial=args.initial, limit=args.limit)
    if args.json:
        print_json(report)
    else:
        print_table([{"clause": r.clause, "result": "pass" if r.passed else "FAIL", "check": r.description,
                      "offending": "" if r.passed else (r.error or f"{r.offending_count} row(s): {r.offending[:3]}")}
                     for r in report.results],
                    ["clause", "result", "check", "offending"], title=f"TPC-C consistency of {database}")
        print(f"{'all checks passed' if report.ok else f'{len(report.failed())} check(s) FAILED'} "
              f"in {report.seconds:.1f} s")
    return 0 if report.ok else 8
