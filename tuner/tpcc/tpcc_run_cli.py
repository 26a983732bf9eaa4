"""`innotier tpcc run`: run the TPC-C workload (built-in driver or an external one) and report the result."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from tuner.core.cliutil import add_connection_args, connection_from_args, parse_key_values, print_json
from tuner.core.errors import UsageError
from tuner.core.measure import Measurement, OPS
from tuner.tpcc.config import DECKS, MODES, RunConfig
from tuner.tpcc import adapters, driver
from tuner.core.durable import write_json_atomic
from tuner.tpcc.shard import Shard, ShardMeasurement, parse_start_at

DEFAULTS = RunConfig()  # every default below is RunConfig's


def register(sub) -> None:
    p = sub.add_parser("run", help="run the TPC-C workload and report tpmC, NOPM, TPM and latency",
                       description="Run TPC-C against a loaded schema (see `innotier tpcc load`). The warm-up is "
                                   "excluded from every figure; the result is printed, and as JSON with --json/-o.")
    p.add_argument("--clients", type=int, default=DEFAULTS.clients,
                   help="concurrent terminals (connections); default %(default)s")
    p.add_argument("--warmup", type=float, default=DEFAULTS.warmup, metavar="S",
                   help="warm-up seconds, excluded (default %(default)g)")
    p.add_argument("--duration", type=float, default=DEFAULTS.duration, metavar="S",
                   help="measured seconds (default %(default)g)")
    p.add_argument("--mode", choices=MODES, default=DEFAULTS.mode,
                   help="procedures: one stored-procedure CALL per transaction (as HammerDB); statements: "
                        "client-side prepared statements (as tpcc-mysql / go-tpc). Default %(default)s")
    p.add_argument("--interval", type=float, default=DEFAULTS.interval, metavar="S",
                   help="report interval seconds (default %(default)g)")
    p.add_argument("--warehouses", type=int, default=None, metavar="W",
                   help="warehouses to use (default: all loaded)")
    p.add_argument("--driver", choices=adapters.drivers(), default=DEFAULTS.driver,
                   help="who runs the transactions (default %(default)s)")
    p.add_argument("--tool-path", metavar="P", help="the external driver's program or directory")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="client processes of the built-in driver (default: one per core)")
    p.add_argument("--deck", choices=DECKS, default=DEFAULTS.deck,
                   help="the transaction mix: 23 = TPC-C 5.2.4.2's deck 10/10/1/1/1 (default %(default)s, as HammerDB); "
                        "100 = 45/43/4/4/4 (go-tpc's weights, about 3.5%% more New-Orders; the result says so)")
    p.add_argument("--max-retries", type=int, default=DEFAULTS.max_retries, metavar="N",
                   help="retries of a deadlocked or lock-wait-timed-out transaction before it is an error "
                        "(default %(default)s)")
    p.add_argument("--outage-limit", type=float, default=DEFAULTS.outage_limit, metavar="S",
                   help="if the server goes away, reconnect for up to S seconds and go on (the transactions "
                        "in flight count as errors); longer, and the run ends with a failure (default %(default)g)")
    p.add_argument("--keying-and-think", action="store_true",
                   help="use TPC-C keying and think times (off by default, as the peers)")
    p.add_argument("--metrics-listen", metavar="HOST:PORT",
                   help="serve the run's metrics for Prometheus while it runs, e.g. 127.0.0.1:9623")
    p.add_argument("--metrics-linger", type=float, default=0.0, metavar="S",
                   help="keep serving metrics S seconds after the run, so Prometheus scrapes the final values")
    p.add_argument("--shard", metavar="I/N", help="run shard I (0-based) of N: its share of --clients (the fleet's "
                                                   "total) on its own block of warehouses (see `innotier fleet tpcc`)")
    p.add_argument("--start-at", metavar="TIME", help="with --shard: the shared start, epoch seconds, ISO 8601 with a "
                                                      "zone, or +S from now; every shard's intervals align on it")
    p.add_argument("--label", action="append", metavar="KEY=VALUE", help="run label (tier, profile...); repeatable")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the result as JSON to FILE")
    add_connection_args(p)
    p.set_defaults(func=handle)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    cfg = RunConfig(clients=args.clients, warmup=args.warmup, duration=args.duration, mode=args.mode,
                    interval=args.interval, warehouses=args.warehouses, database=args.database or "tpcc",
                    keying_and_think=args.keying_and_think, driver=args.driver, tool_path=args.tool_path,
                    workers=args.workers, labels=parse_key_values(args.label, "--label"), deck=args.deck,
                    max_retries=args.max_retries, outage_limit=args.outage_limit)
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers} is not valid; give 1 or more")
    if args.start_at and not args.shard:
        raise UsageError("--start-at applies to sharded runs; give --shard I/N too, or drop --start-at")
    if args.shard:
        if args.driver != "builtin":
            raise UsageError(f"--shard needs the built-in driver; {args.driver} cannot run a share of a fleet run")
        cfg.shard = Shard.parse(args.shard)
        cfg.start_at = parse_start_at(args.start_at) if args.start_at else None
        cfg.labels.setdefault("driver_id", str(cfg.shard.index))  # one series per shard; sum() adds them up
        cfg.labels.setdefault("shard", str(cfg.shard))
    return cfg.validate()


def handle(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    spec = connection_from_args(args, database=cfg.database)
    exporter = None
    measurement = None
    if cfg.driver == "builtin":
        measurement = ShardMeasurement() if cfg.shard else Measurement()
    if args.metrics_listen:
        exporter = _start_exporter(measurement, args.metrics_listen, cfg, spec)
    try:
        if cfg.driver == "builtin":
            result = _run_builtin(spec, cfg, measurement, quiet=args.json)
        else:
            result = adapters.get(cfg.driver).run(spec, cfg)
    finally:
        if exporter is not None:
            if args.metrics_linger > 0:
                time.sleep(args.metrics_linger)
            exporter.stop()
    if args.output:
        write_json_atomic(args.output, result.to_dict())
    if args.json:
        print_json(result.to_dict())
    else:
        print_result(result)
    if not result.complete:
        print(f"innotier: the run did not complete: {result.failure}", file=sys.stderr)
        return 8
    return 0


def _start_exporter(measurement, listen: str, cfg: RunConfig, spec):
    from exporters.live import start_live_exporter  # deferred: prometheus_client, ~40 ms of start-up
    run_info = {"driver": cfg.driver, "mode": cfg.mode, "clients": str(cfg.clients),
                "warehouses": str(cfg.warehouses or ""), **cfg.labels}
    return start_live_exporter(measurement, listen, run_info, spec)


def _run_builtin(spec, cfg: RunConfig, measurement, quiet: bool):
    from rich.console import Console
    from rich.live import Live

    console = Console(stderr=True)
    state: dict[str, Any] = {"last": None}

    def line(kind: str, offset: float, m) -> str:
        if kind in ("warmup", "start") or m.phase == "warmup":
            return f"[cyan]warming up[/] {offset:5.0f}/{cfg.warmup:g} s  (excluded from results)"
        p = state["last"]
        elapsed = offset - cfg.warmup
        errors = sum(v["error"] for v in m.counts.values())
        retries = sum(v["retry"] for v in m.counts.values())
        if p is None:
            return f"[green]measuring[/] {elapsed:5.0f}/{cfg.duration:g} s  errors {errors}  retries {retries}"
        p95 = p.latency_ms.get("new_order", {}).get("p95", 0.0)
        return (f"[green]measuring[/] {elapsed:5.0f}/{cfg.duration:g} s  interval tpmC {p.tpmc:,.0f}  "
                f"New-Order p95 {p95:.1f} ms  errors {errors}  retries {retries}")

    if quiet or not console.is_terminal:
        def on_interval(p) -> None:
            state["last"] = p
            if not quiet:
                p95 = p.latency_ms.get("new_order", {}).get("p95", 0.0)
                console.print(f"{p.t:6.0f} s  tpmC {p.tpmc:10,.0f}  New-Order p95 {p95:7.1f} ms  "
                              f"errors {p.errors}  retries {p.retries}")
        return driver.run(spec, cfg, measurement, on_interval)

    with Live(console=console, refresh_per_second=4, transient=True) as live:
        live.update("connecting...")

        def on_interval(p) -> None:
            state["last"] = p
            p95 = p.latency_ms.get("new_order", {}).get("p95", 0.0)
            live.console.print(f"{p.t:6.0f} s  tpmC {p.tpmc:10,.0f}  New-Order p95 {p95:7.1f} ms  "
                               f"errors {p.errors}  retries {p.retries}")

        def on_tick(kind: str, offset: float, m) -> None:
            live.update(line(kind, offset, m))

        return driver.run(spec, cfg, measurement, on_interval, on_tick=on_tick)


def print_result(r) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 120))

    def num(v, fmt="{:,.0f}") -> str:
        return "-" if v is None else fmt.format(v)

    head = (f"driver {r.driver}  mode {r.mode or '-'}  warehouses {r.warehouses or '-'}  clients {r.clients or '-'}  "
            f"measured {num(r.measured_seconds, '{:.1f}')} s")
    console.print(head)
    console.print(f"tpmC {num(r.tpmc)}   NOPM {num(r.nopm)}   TPM {num(r.tpm)}   "
                  f"rollbacks {r.rollbacks}   retries {r.retries}   errors {r.errors}")
    table = Table(title="per transaction (latency ms)")
    for c in ("transaction", "commit", "rollback", "retry", "error", "p50", "p90", "p95", "p99", "max"):
        table.add_column(c, justify="left" if c == "transaction" else "right")
    for op in OPS:
        c = r.counts.get(op, {})
        lat = r.latency_ms.get(op, {})
        table.add_row(op, *[str(c.get(k, 0)) for k in ("commit", "rollback", "retry", "error")],
                      *[num(lat.get(k), "{:.2f}") for k in ("p50", "p90", "p95", "p99", "max")])
    console.print(table)
    extra = r.extra or {}
    if extra.get("deck"):
        realized = extra.get("realized_mix") or {}
        console.print(f"deck: {extra['deck']}; realized mix: "
                      + ", ".join(f"{op} {realized.get(op, 0):.1f}%" for op in OPS))
    if extra.get("delivery_skipped_districts"):
        console.print(f"Delivery skipped {extra['delivery_skipped_districts']} district(s) with no undelivered "
                      "order (warm-up included; clause 2.7.4.2): the loaded backlog of 900 new orders a "
                      "district ran out, so those Deliveries did less work")
    if extra.get("reconnects") or extra.get("outages"):
        down = sum(o["seconds"] for o in extra.get("outages", []))
        console.print(f"server away: {len(extra.get('outages', []))} outage(s), {down:.1f} s; "
                      f"{extra.get('reconnects', 0)} reconnects; {r.errors} transactions failed")
    for msg, n in list((extra.get("error_messages") or {}).items())[:5]:
        console.print(f"error x{n}: {msg}")
    for note in extra.get("notes", []):
        console.print(f"note: {note}")
    if "client_cpu_seconds" in extra:
        console.print(f"client: {extra.get('workers')} worker processes, {extra['client_cpu_seconds']:.1f} CPU-s, "
                      f"peak RSS {extra.get('client_rss_bytes', 0) / 2**20:,.0f} MiB")
