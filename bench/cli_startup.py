"""Start-up cost of `innotier --help`: median wall and CPU time of N fresh interpreters.

    python bench/cli_startup.py [--runs 15] [--other-tree DIR]

With --other-tree (a checkout of another commit, e.g. `git archive main | tar -x -C DIR`)
the two trees run alternately and the ratio of the medians is printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

# byte-code caching on, as on an installed system (the CI environment sets PYTHONDONTWRITEBYTECODE)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
CODE = "import sys; sys.argv = ['innotier', '--help']; from tuner.cli import main; main()"


def one_run(tree: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", CODE], cwd=tree, stdout=subprocess.DEVNULL, check=True,
                   env=ENV | {"PYTHONPATH": tree})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--other-tree", help="a second source tree to compare against")
    args = ap.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this tree": here}
    if args.other_tree:
        trees["other tree"] = os.path.abspath(args.other_tree)
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in trees}
    for tree in trees.values():
        one_run(tree)  # warm-up: writes __pycache__
    for _ in range(args.runs):
        for name, tree in trees.items():
            samples[name].append(one_run(tree))
    medians = {}
    for name, runs in samples.items():
        wall = statistics.median(w for w, _ in runs) * 1000
        cpu = statistics.median(c for _, c in runs) * 1000
        medians[name] = (wall, cpu)
        print(f"{name:10s} ({trees[name]}): median wall {wall:.0f} ms, median CPU {cpu:.0f} ms over {args.runs} runs")
    if len(medians) == 2:
        (w1, c1), (w2, c2) = medians.values()
        print(f"ratio this/other: wall {w1 / w2:.2f}, CPU {c1 / c2:.2f}")
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
