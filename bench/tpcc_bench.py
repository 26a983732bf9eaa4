#!/usr/bin/env python3
"""TPC-C side by side, fairly: innotier's driver (procedures, statements, and a labelled socket row) and the
peers, each on its own fresh sandbox with identical settings and preparation (tuner/tpcc/compare.py).

    .venv/bin/python bench/tpcc_bench.py [--go-tpc BIN] [--hammerdb DIR] [--tpcc-mysql DIR] [--sysbench-tpcc DIR]
        [--clients 8,32] [--rounds 3] [--warmup 20] [--duration 60] [--long] [--big-clients 512] [-o out.json]

Prints the plan, then per client count and driver: NOPM and TPM counted by the
bench from the server in the same window for every driver, client and server
CPU-s per 1000 New-Orders from /proc, medians with [min-max] over the rounds, the
ratio to the peer of the same kind (HammerDB for procedures, go-tpc for
statements: tool against tool, not a same-work speed-up, since the peers leave out part of the
transactions' work; docs/benchmarks.md), load times, the consistency check after each driver's runs, and the
load average at the start and end.  A peer without a path is "not measured".
Figures, not assertions: on a shared machine say the load with them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tuner.core.errors import InnotierError  # noqa: E402
from tuner.tpcc import compare  # noqa: E402
from tuner.tpcc.tpcc_compare_cli import add_arguments, spec_from_args  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(ap)
    ap.set_defaults(big_clients=512)
    args = ap.parse_args(argv)
    try:
        spec = spec_from_args(args)
        steps = compare.plan(spec)
    except InnotierError as exc:  # bad input: one line, nothing started
        print(f"tpcc_bench: {exc}", file=sys.stderr)
        return 2
    print("\n".join(steps), flush=True)
    if args.plan:
        return 0
    result = compare.run(spec, say=lambda line: print(line, flush=True))
    print()
    print(compare.render(result))
    if args.output:
        Path(args.output).write_text(json.dumps(result.to_dict(), indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
