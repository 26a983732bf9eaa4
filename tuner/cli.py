"""The ``innotier`` command: one parser, a sub-command group per area.

Each area registers its own sub-commands from its own module (``register(sub)``), so this file only wires
them together and owns the one top-level error handler.  Modules are imported on dispatch: ``innotier
--help`` lists the groups from ``COMMANDS`` and imports none of them; ``innotier sandbox ...`` imports
only ``tuner.sandbox_cli``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from tuner import __version__
from tuner.core.cliwiring import CommandParser, register_modules, require_modules
from tuner.core.errors import InnotierError


@dataclass(frozen=True)
class Command:
    module: str  # the CLI module whose register(sub) adds this group
    help: str    # what `innotier --help` shows for it: the same line the module registers


# command -> its module; order is the order of --help
COMMANDS: dict[str, Command] = {
    "server": Command("tuner.server_cli", "inspect a MySQL-family server; install server distributions"),
    "sandbox": Command("tuner.sandbox_cli", "private server instances for tests and sweeps"),
    "profile": Command("profiles.profile_cli",
                       "my.cnf profiles: generate, lint and diff option files per flavor/version"),
    "tiers": Command("datadir_mover.tiers_cli", "detect, create, destroy and benchmark storage tiers"),
    "move": Command("datadir_mover.move_cli",
                    "relocate InnoDB components (datadir, redo, ibdata, undo, tmpdir) safely"),
    "table-move": Command("datadir_mover.tablemove_cli",
                          "move one table onto a tier (and back) online, clients running, under a journal"),
    "persist": Command("datadir_mover.persist_cli", "consistent copies of a volatile tier, restore after power loss"),
    "lab": Command("datadir_mover.lab_cli",
                   "a VM with real PMEM/DAX and md RAID drivers to rehearse tiers and moves"),
    "tpcc": Command("tuner.tpcc.tpcc_cli", "the TPC-C workload: load, run, check, compare"),
    "placement": Command("tuner.placement.placement_cli",
                         "where the I/O goes and what belongs on the fast tier: measure, tier, advise, check, apply, show"),
    "sweep": Command("tuner.sweep.sweep_cli", "TPC-C sweeps: plan, run (resumable), report"),
    "results": Command("tuner.sweep.sweep_cli", "the sweep results database: list, show, export"),
    "demo": Command("tuner.sweep.sweep_cli",
                    "the demo: a small sweep across this host's tiers, with metrics and a report"),
    "exporter": Command("exporters.exporter_cli", "serve a server's InnoDB counters (and run info) for Prometheus"),
    "dashboards": Command("exporters.exporter_cli", "Grafana dashboards generated from code"),
    "fleet": Command("tuner.fleet.fleet_cli",
                     "several hosts through Ansible: install, fleet sweeps, sharded TPC-C drivers"),
}



def cli_modules() -> tuple[str, ...]:
    """The CLI modules, each once, in the order of COMMANDS."""
    return tuple(dict.fromkeys(c.module for c in COMMANDS.values()))


REGISTRARS = cli_modules()


def build_parser(command: str | None = None) -> CommandParser:
    """The parser; with every module registered, or, given ``command``, only that command's module (the
    other groups are listed by name and help, enough for --help and for "did you mean")."""
    parser = CommandParser(
        prog="innotier",
        description="MySQL/InnoDB storage-tuning toolkit: tiers, safe relocation, profiles, TPC-C sweeps.",
    )
    parser.add_argument("--version", action="version", version=f"innotier {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    if command is None:
        modules = cli_modules()
    else:
        modules = (COMMANDS[command].module,) if command in COMMANDS else ()
        require_modules(cli_modules())
    register_modules(sub, modules)
    for name, cmd in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=cmd.help, add_help=False)
    if modules:
        _register_move_checks()
    return parser


def _register_move_checks() -> None:
    """Every move, resume and rollback also runs the TPC-C consistency checks."""
    from tuner.tpcc import move_check  # deferred: it loads the mover and the TPC-C checks, which --help needs not

    move_check.register()


def _command_of(argv: list[str]) -> str:
    """The group named on the command line ("" when there is none: --help, --version, nothing)."""
    return argv[0] if argv and not argv[0].startswith("-") else ""


def main(argv: list[str] | None = None) -> int:
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        os.environ["COLUMNS"] = "200"  # rich would squeeze tables to 80 columns in a pipe or a log
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser(_command_of(argv)).parse_args(argv)
    except InnotierError as exc:
        print(f"innotier: {exc}", file=sys.stderr)
        return exc.exit_code
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
