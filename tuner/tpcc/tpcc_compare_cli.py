"""`innotier tpcc compare`: the fair side-by-side comparison (tuner.tpcc.compare) from the command line."""

from __future__ import annotations

import argparse
import sys

from tuner.core.cliutil import print_json
from tuner.core.durable import write_json_atomic
from tuner.core.errors import UsageError
from tuner.tpcc import compare

SHORT = {"warmup": 20.0, "duration": 60.0, "priming": 20.0}
LONG = {"warmup": 60.0, "duration": 300.0, "priming": 60.0}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hammerdb", metavar="DIR", help="HammerDB source directory (hammerdbcli); absent: not measured")
    p.add_argument("--go-tpc", metavar="BIN", help="go-tpc binary; absent: not measured")
    p.add_argument("--tpcc-mysql", metavar="DIR", help="tpcc-mysql directory (tpcc_load, tpcc_start)")
    p.add_argument("--sysbench-tpcc", metavar="DIR", help="sysbench-tpcc checkout (tpcc.lua)")
    p.add_argument("--clients", default="8,32", help="comma-separated client counts (default 8,32)")
    p.add_argument("--rounds", type=int, default=3, help="rounds, each in a rotated order (default 3)")
    p.add_argument("--warmup", type=float, default=None, metavar="S", help="warm-up seconds (default 20; --long 60)")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="measured seconds (default 60; --long 300)")
    p.add_argument("--priming", type=float, default=None, metavar="S",
                   help="priming run after load and ANALYZE (default 20; --long 60)")
    p.add_argument("--long", action="store_true", help="60 s warm-up, 5 min runs, 60 s priming")
    p.add_argument("--no-socket-row", action="store_true", help="skip the labelled socket row of ours")
    p.add_argument("--big-clients", type=int, default=0, metavar="N",
                   help="one extra run of ours (procedures) at N clients after the rounds (e.g. 512)")
    p.add_argument("--plan", action="store_true", help="print the plan and stop")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the result as JSON to FILE")


def parse_clients(text: str) -> list[int]:
    """``8,32`` -> [8, 32]; anything else is a one-line usage error."""
    try:
        return [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        raise UsageError(f"--clients {text!r} is not valid; give comma-separated whole numbers, e.g. 8,32") from None


def spec_from_args(args: argparse.Namespace) -> compare.CompareSpec:
    base = LONG if args.long else SHORT
    return compare.CompareSpec(
        clients=parse_clients(args.clients), rounds=args.rounds,
        warmup=args.warmup if args.warmup is not None else base["warmup"],
        duration=args.duration if args.duration is not None else base["duration"],
        priming=args.priming if args.priming is not None else base["priming"],
        socket_row=not args.no_socket_row, big_clients=args.big_clients,
        peers={"hammerdb": args.hammerdb, "go-tpc": args.go_tpc, "tpcc-mysql": args.tpcc_mysql,
               "sysbench-tpcc": args.sysbench_tpcc}).validate()


def register(sub) -> None:
    p = sub.add_parser("compare", help="fair side-by-side TPC-C: our driver and the peers, each on a fresh server",
                       description=compare.__doc__.split("\n\n")[0])
    add_arguments(p)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    if args.plan:
        print("\n".join(compare.plan(spec)))
        return 0
    result = compare.run(spec, say=lambda line: print(line, file=sys.stderr, flush=True))
    if args.output:
        write_json_atomic(args.output, result.to_dict())
    if args.json:
        print_json(result.to_dict())
    else:
        print(compare.render(result))
    return 0
