"""`innotier exporter` (serve a server's InnoDB counters) and `innotier dashboards generate [--check]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from tuner.core.cliutil import add_connection_args, connection_from_args, parse_key_values, print_json
from tuner.core.errors import InnotierError

from exporters.naming import DEFAULT_LISTEN


class DashboardsStale(InnotierError):
    """The committed dashboards differ from what the code generates."""

    exit_code = 1


def register(sub) -> None:
    _register_exporter(sub)
    _register_dashboards(sub)


def _register_exporter(sub) -> None:
    p = sub.add_parser(
        "exporter", help="serve a server's InnoDB counters (and run info) for Prometheus",
        description="Serve /metrics for Prometheus: the InnoDB counters of one server (SHOW GLOBAL STATUS), "
                    "the server-side New-Order count from a TPC-C schema (--database; by default `tpcc` when the "
                    "server has it), and run info given "
                    "with --info. Listens on 127.0.0.1 unless told otherwise. An unreachable server does not "
                    "stop it: innotier_collector_success{collector=\"innodb\"} is 0 until the server answers. "
                    "TPC-C runs serve their own metrics with `tpcc run --metrics-listen`.",
    )
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to serve /metrics on (default {DEFAULT_LISTEN}; port 0 picks a free one)")
    p.add_argument("--info", action="append", metavar="KEY=VALUE",
                   help="run info label for innotier_run_info (tier, placement, page_size, flush_method, "
                        "doublewrite, clients, warehouses, ...); repeatable")
    p.add_argument("--driver-id", default="0", metavar="ID",
                   help="driver_id label of innotier_run_info (default 0)")
    # names are checked against the registry on dispatch: listing them here would import prometheus_client
    p.add_argument("--no-collector", action="append", default=[], metavar="NAME",
                   help="disable a collector (the collector label of innotier_collector_success: innodb, "
                        "tpcc_schema, run_info, ...); repeatable")
    add_connection_args(p)
    p.set_defaults(func=_exporter)


def _register_dashboards(sub) -> None:
    p = sub.add_parser("dashboards", help="Grafana dashboards generated from code")
    s = p.add_subparsers(dest="dashboards_cmd", metavar="SUBCOMMAND")
    s.required = True
    g = s.add_parser("generate", help="write grafana/dashboards/*.json and grafana/provisioning/ from code",
                     description="Generate the Grafana dashboards (grafana-foundation-sdk) and the file "
                                 "provisioning YAML. With --check, write nothing and fail if the files differ.")
    g.add_argument("--check", action="store_true", help="only compare; exit 1 listing files that differ")
    g.add_argument("--output", metavar="DIR", help="grafana directory (default: the checkout's grafana/)")
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    g.set_defaults(func=_dashboards_generate)


def _exporter(args: argparse.Namespace) -> int:
    from exporters.standalone import check_input, serve_forever, start_standalone, with_tpcc_default  # deferred: prometheus_client, ~40 ms of start-up
    check_input(args.listen, args.no_collector)  # bad input fails before anything else
    info = parse_key_values(args.info, "--info")
    spec, how = with_tpcc_default(connection_from_args(args))
    exporter = start_standalone(args.listen, spec, info=info, disabled=tuple(args.no_collector),
                                driver_id=args.driver_id)
    return serve_forever(exporter, f"{spec.describe()}, TPC-C New-Orders from {how}")


def _dashboards_generate(args: argparse.Namespace) -> int:
    from exporters import dashboards  # deferred: prometheus_client, ~40 ms of start-up
    root = Path(args.output).resolve() if args.output else dashboards.default_root()
    if args.check:
        stale = dashboards.check(root)
        if args.json:
            print_json({"root": root, "stale": stale})
        if stale:
            raise DashboardsStale(f"{len(stale)} generated file(s) under {root} differ from the code "
                                  f"({', '.join(stale)}); run `innotier dashboards generate` and commit them")
        if not args.json:
            print(f"dashboards up to date under {root}")
        return 0
    written = dashboards.generate(root)
    if args.json:
        print_json({"root": root, "written": written})
    else:
        print(f"wrote {len(written)} file(s) under {root}" + (": " + ", ".join(written) if written else
                                                               " (all up to date)"))
    return 0
