"""`innotier tpcc ...`: load, run, check.  Each verb lives in the module that owns it."""

from __future__ import annotations

from tuner.core.cliutil import register_modules

VERBS = ("tuner.tpcc.tpcc_load_cli", "tuner.tpcc.tpcc_run_cli", "tuner.tpcc.tpcc_compare_cli")


def register(sub) -> None:
    p = sub.add_parser("tpcc", help="the TPC-C workload: load, run, check, compare")
    s = p.add_subparsers(dest="tpcc_cmd", metavar="SUBCOMMAND")
    s.required = True
    register_modules(s, VERBS)
