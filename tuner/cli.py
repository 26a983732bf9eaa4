"""The ``innotier`` command: one parser, a sub-command group per area.

Each area registers its own sub-commands from its own module (``register(sub)``),
so this file only wires them together and owns the one top-level error handler.
"""

from __future__ import annotations

import argparse
import os
import sys

from tuner import __version__
from tuner.core.cliutil import register_modules
from tuner.core.errors import InnotierError
from tuner.tpcc import move_check

# (module, what it adds); order is the order of --help
REGISTRARS = (
    "tuner.server_cli",       # server inspect
    "tuner.sandbox_cli",      # sandbox create/start/stop/status/destroy/list/reconfigure
    "profiles.profile_cli",           # profile generate/lint/diff/list/show
    "datadir_mover.tiers_cli",   # tiers list/create/destroy/bench
    "datadir_mover.move_cli",    # move plan/apply/status/resume/rollback/finalize
    "datadir_mover.persist_cli", # persist install/sync/restore/status
    "datadir_mover.lab_cli",     # lab build/run/shell/status (VM with real PMEM and md RAID drivers)
    "tuner.tpcc.tpcc_cli",         # tpcc load/run/check
    "tuner.sweep.sweep_cli",        # sweep plan/run/report, results ..., demo
    "exporters.exporter_cli",          # exporter, dashboards
    "tuner.fleet.fleet_cli",        # fleet ping/install/tpcc/sweep (Ansible)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="innotier",
        description="MySQL/InnoDB storage-tuning toolkit: tiers, safe relocation, profiles, TPC-C sweeps.",
    )
    parser.add_argument("--version", action="version", version=f"innotier {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    register_modules(sub, REGISTRARS)
    move_check.register()  # every move, resume and rollback also runs the TPC-C consistency checks
    return parser


def main(argv: list[str] | None = None) -> int:
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        os.environ["COLUMNS"] = "200"  # rich would squeeze tables to 80 columns in a pipe or a log
    try:
        parser = build_parser()
    except InnotierError as exc:
        print(f"innotier: {exc}", file=sys.stderr)
        return exc.exit_code
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except InnotierError as exc:
        print(f"innotier: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("innotier: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
