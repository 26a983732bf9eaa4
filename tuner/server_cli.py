"""`innotier server inspect`: the server model of any reachable server."""

from __future__ import annotations

from tuner.core.cliutil import add_connection_args, connection_from_args, print_json
from tuner.core.server import inspect


def register(sub) -> None:
    p = sub.add_parser("server", help="inspect a MySQL-family server")
    s = p.add_subparsers(dest="server_cmd", metavar="SUBCOMMAND")
    s.required = True
    i = s.add_parser("inspect", help="flavor, version, InnoDB settings and file locations of a server")
    add_connection_args(i)
    i.add_argument("--json", action="store_true", help="print JSON")
    i.set_defaults(func=cmd_inspect)


def cmd_inspect(args) -> int:
    model = inspect(connection_from_args(args))
    if args.json:
        print_json(model)
        return 0
    print(f"{model.flavor.value} {model.version} ({model.version_string}), {model.managed}"
          + (f" {model.sandbox}" if model.sandbox else ""))
    print(f"  page size          {model.page_size}")
    for comp, path in model.locations().items():
        note = "" if path else "(in ibdata: this version has no separate doublewrite files)"
        print(f"  {comp:<18} {path or note}")
    for k in ("innodb_data_file_path", "innodb_flush_method", "innodb_doublewrite", "innodb_buffer_pool_size",
              "innodb_buffer_pool_instances", "innodb_log_file_size", "innodb_redo_log_capacity",
              "innodb_flush_log_at_trx_commit"):
        if k in model.variables:
            print(f"  {k:<32} {model.variables[k]}")
    return 0
