"""`innotier tpcc ...`: load, run, check.  Each verb lives in the module that owns it."""

from __future__ import annotations

import importlib

VERBS = ("tuner.tpcc.cli_load", "tuner.tpcc.cli_run")


def register(sub) -> None:
    p = sub.add_parser("tpcc", help="the TPC-C workload: load, run, check")
    s = p.add_subparsers(dest="tpcc_cmd", metavar="SUBCOMMAND")
    s.required = True
    for name in VERBS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(s)
