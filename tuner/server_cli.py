"""`innotier server ...`: inspect a server; install, list, export and remove server distributions."""

from __future__ import annotations

import sys

from tuner.core.cliutil import add_connection_args, connection_from_args, print_json, print_table
from tuner.core.errors import UsageError
from tuner.core.server import inspect
from tuner.core.servers import build, tree
from tuner.core.servers.distributions import DISTRIBUTIONS, known_names
from tuner.core.units import page_size_label, size_with_bytes

BYTE_VARIABLES = {"innodb_buffer_pool_size", "innodb_log_file_size", "innodb_redo_log_capacity"}


def register(sub) -> None:
    p = sub.add_parser("server", help="inspect a MySQL-family server; install server distributions")
    s = p.add_subparsers(dest="server_cmd", metavar="SUBCOMMAND")
    s.required = True
    i = s.add_parser("inspect", help="flavor, version, InnoDB settings and file locations of a server")
    add_connection_args(i)
    i.add_argument("--json", action="store_true", help="print JSON")
    i.set_defaults(func=cmd_inspect)

    names = ", ".join(known_names())
    ins = s.add_parser("install", help=f"build or register a server distribution ({names})")
    ins.add_argument("name", nargs="?", help=f"one of {names}")
    ins.add_argument("--from-archive", metavar="FILE", help="unpack a cache archive written by `server export`")
    ins.add_argument("--mirror", default=build.DEBIAN_MIRROR, help="Debian mirror for debootstrap and apt")
    ins.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    ins.set_defaults(func=cmd_install)

    ls = s.add_parser("list", help="server distributions: installed ones and the ones that can be installed")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)

    rm = s.add_parser("remove", help="remove an installed server distribution (its tree and manifest)")
    rm.add_argument("name")
    rm.set_defaults(func=cmd_remove)

    ex = s.add_parser("export", help="write an installed tree as a .tar.zst cache archive for other machines or CI")
    ex.add_argument("name")
    ex.add_argument("file", help="output file, NAME.tar.zst")
    ex.set_defaults(func=cmd_export)


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_install(args) -> int:
    verb = "installed"
    if args.from_archive:
        srv = build.install_from_archive(args.from_archive, name=args.name, progress=_progress)
    else:
        if not args.name:
            raise UsageError(f"name the server to install ({', '.join(known_names())}) or give --from-archive FILE")
        plan = build.plan_install(args.name, mirror=args.mirror)
        print(plan.render())
        if args.dry_run:
            return 0
        srv = build.install(plan, progress=_progress)
        verb = "already installed, verified:" if plan.already_installed else verb
    m = srv.manifest
    print(f"{verb} {srv.dist.name}: {m.version_string.split('Ver', 1)[-1].strip()} "
          f"({', '.join(f'{k} {v}' for k, v in m.packages.items())}) in {srv.root}")
    return 0


def cmd_list(args) -> int:
    have = {s.dist.name: s for s in tree.list_installed()}
    rows = []
    for name, dist in sorted(DISTRIBUTIONS.items()):
        if name in have:
            rows.append({"state": "installed", **have[name].summary()})
        else:
            rows.append({"name": name, "state": "available", "kind": dist.kind, "suite": dist.suite or "host",
                         "package": dist.main_package, "version": dist.series})
    if args.json:
        print_json(rows)
    else:
        print_table(rows, ["name", "state", "version", "kind", "suite", "package", "built", "size_mb", "root"])
    return 0


def cmd_remove(args) -> int:
    path = tree.remove(args.name)
    print(f"removed server {args.name} ({path})")
    return 0


def cmd_export(args) -> int:
    out = build.export(args.name, args.file, progress=_progress)
    print(f"wrote {out} ({out.stat().st_size / 2**20:.0f} MB); install it elsewhere with "
          f"`innotier server install --from-archive {out.name}`")
    return 0


def cmd_inspect(args) -> int:
    model = inspect(connection_from_args(args))
    if args.json:
        print_json(model)
        return 0
    print(f"{model.flavor.value} {model.version} ({model.version_string}), {model.managed}"
          + (f" {model.sandbox}" if model.sandbox else ""))
    print(f"  page size          {page_size_label(model.page_size)} ({model.page_size} bytes)")
    for comp, path in model.locations().items():
        note = "" if path else "(in ibdata: this version has no separate doublewrite files)"
        print(f"  {comp:<18} {path or note}")
    for k in ("innodb_data_file_path", "innodb_flush_method", "innodb_doublewrite", "innodb_buffer_pool_size",
              "innodb_buffer_pool_instances", "innodb_log_file_size", "innodb_redo_log_capacity",
              "innodb_flush_log_at_trx_commit"):
        if k in model.variables:
            value = model.variables[k]
            if k in BYTE_VARIABLES and str(value).isdigit():
                value = size_with_bytes(int(value))
            print(f"  {k:<32} {value}")
    return 0
