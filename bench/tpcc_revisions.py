#!/usr/bin/env python3
"""Two or more git revisions of innotier's TPC-C side by side, under the fair protocol, to hold a change to
tuner/tpcc/ against main before it lands (issue 34).

    .venv/bin/python bench/tpcc_revisions.py main HEAD [REV ...] [--clients 8,32] [--rounds 5] [--warmup 25]
        [--duration 60] [--warehouses 4] [--mode procedures] [--workdir DIR] [-o out.json]

Each revision is checked out with ``git worktree add --detach`` under the work directory (a temporary one,
removed at the end, unless ``--workdir`` keeps them for the next invocation) and gets its own virtualenv from
its own ``scripts/bootstrap.sh`` (the machine's wheel cache).  Then, round after round, in an order rotated
each round (no revision always first or always after the same one), every revision gets a run:

* a fresh sandbox with identical server settings (tuner.tpcc.compare.SERVER_OPTIONS: the host's MariaDB,
  1G buffer pool, O_DIRECT, 256M redo), made by this checkout, so only the TPC-C code differs;
* W=4 loaded by the revision's own ``innotier tpcc load`` (the loader is part of what is compared), ANALYZE
  TABLE on every table;
* per client count: dirty pages flushed, then the revision's ``innotier tpcc run`` over TCP; New-Orders are
  counted by this bench from the server (growth of sum(d_next_o_id)) in the window compare.window() gives
  (after the warm-up), and the server's CPU from /proc/<pid>/stat at the window's two ends.

Analysis: per round, the ratio of each revision to the first one (NOPM, and server CPU-s per 1000
New-Orders: above 1 is more CPU per New-Order); the median of those ratios, and the paired t interval of the
mean log-ratio (tuner.sweep.stats.paired_ratio) at a Bonferroni-corrected level: the family is every
(revision, client count, figure) comparison.  Figures, not assertions: on a shared machine say the load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tuner.core.errors import UsageError  # noqa: E402
from tuner.sweep.stats import ALPHA, Target, paired_ratio  # noqa: E402
from tuner.tpcc import compare  # noqa: E402
from tuner.tpcc.tpcc_compare_cli import parse_clients  # noqa: E402

SANDBOX = "tpcc-rev"  # one sandbox name, made afresh for every run
DATABASE = "tpcc"
FIGURES = ("nopm", "server_cpu_per_kno")  # what is compared: throughput, and the server's work per New-Order
FIGURE_NAMES = {"nopm": "NOPM", "server_cpu_per_kno": "server CPU-s / 1000 NO"}


# ---------------------------------------------------------------------------
# What to compare (pure)


@dataclass(frozen=True)
class BenchSpec:
    revisions: tuple[str, ...]  # as given (branch, tag, sha); the first is the reference
    clients: tuple[int, ...] = (8, 32)
    rounds: int = 5
    warmup: float = 25.0
    duration: float = 60.0
    warehouses: int = 4
    mode: str = "procedures"

    def validate(self) -> "BenchSpec":
        if len(self.revisions) < 2:
            raise UsageError(f"give two or more revisions to compare (got {list(self.revisions)}), e.g. main HEAD")
        if len(set(self.revisions)) != len(self.revisions):
            raise UsageError(f"revisions {list(self.revisions)} repeat one; give each once (an A/A run: main main^0)")
        if self.rounds < 1:
            raise UsageError(f"--rounds {self.rounds} is not valid; give 1 or more (2 for an interval, 5 to decide)")
        if not self.clients or any(c < 1 for c in self.clients):
            raise UsageError(f"--clients {list(self.clients)} is not valid; give positive client counts, e.g. 8,32")
        if self.duration < 10:
            raise UsageError(f"--duration {self.duration:g} is too short for the counting window; give 10 s or more")
        if self.warmup < 0 or self.warehouses < 1:
            raise UsageError("--warmup must be 0 or more and --warehouses 1 or more")
        if self.mode not in ("procedures", "statements"):
            raise UsageError(f"--mode {self.mode!r} is unknown; use procedures or statements")
        return self

    @property
    def comparisons(self) -> int:
        """The Bonferroni family: every revision but the first, at every client count, for every figure."""
        return (len(self.revisions) - 1) * len(self.clients) * len(FIGURES)


def round_order(n: int, r: int) -> list[int]:
    """Round r's order of n revisions (indices): rotated by r, so each goes first and follows each other one in
    turn."""
    k = r % n
    return list(range(k, n)) + list(range(k))


@dataclass(frozen=True)
class Measured:
    """One revision's figures at one client count in one round (None: not counted)."""

    round: int
    revision: str
    clients: int
    nopm: float | None
    server_cpu_per_kno: float | None
    client_cpu_per_kno: float | None = None
    load_seconds: float | None = None
    complete: bool = True
    note: str = ""


def paired_values(runs: list[Measured], ref: str, rev: str, clients: int, figure: str
                  ) -> tuple[list[float], list[float], list[int]]:
    """(revision's values, reference's values, rounds) of the rounds in which both have the figure."""
    by = {(m.revision, m.round): getattr(m, figure) for m in runs if m.clients == clients}
    rounds = sorted({r for (_, r) in by})
    keep = [r for r in rounds if (by.get((rev, r)) or 0) > 0 and (by.get((ref, r)) or 0) > 0]
    return [by[(rev, r)] for r in keep], [by[(ref, r)] for r in keep], keep


@dataclass(frozen=True)
class Comparison:
    revision: str
    reference: str
    clients: int
    figure: str
    rounds: list[int]
    ratios: list[float]  # per round, revision / reference
    median: float | None
    low: float | None  # the interval of the mean ratio (geometric), Bonferroni-corrected
    high: float | None
    level: float  # its confidence level

    def to_dict(self) -> dict:
        return asdict(self)


def compare_one(runs: list[Measured], ref: str, rev: str, clients: int, figure: str, family: int) -> Comparison:
    num, den, rounds = paired_values(runs, ref, rev, clients, figure)
    ratios = [a / b for a, b in zip(num, den)]
    level = 1.0 - ALPHA / family
    low = high = None
    if len(ratios) >= 2:
        pr = paired_ratio(num, den, Target(adaptive=False, comparisons=family))
        low, high = pr.low, pr.high
    return Comparison(rev, ref, clients, figure, rounds, ratios, statistics.median(ratios) if ratios else None,
                      low, high, level)


def analyse(spec: BenchSpec, runs: list[Measured]) -> list[Comparison]:
    ref = spec.revisions[0]
    return [compare_one(runs, ref, rev, c, f, spec.comparisons)
            for rev in spec.revisions[1:] for c in spec.clients for f in FIGURES]


def _median_of(runs: list[Measured], rev: str, clients: int, figure: str) -> float | None:
    vals = [getattr(m, figure) for m in runs if m.revision == rev and m.clients == clients
            and getattr(m, figure) is not None]
    return statistics.median(vals) if vals else None


def render(spec: BenchSpec, runs: list[Measured], comparisons: list[Comparison], header: list[str]) -> str:
    lines = list(header)
    lines.append("")
    lines.append(f"{'revision':<16}{'clients':>8}  {'NOPM (median)':>14}  {'server CPU-s/1000 NO':>21}  "
                 f"{'client CPU-s/1000 NO':>21}  {'runs':>5}")
    for rev in spec.revisions:
        for c in spec.clients:
            mine = [m for m in runs if m.revision == rev and m.clients == c]
            nopm, cpu = _median_of(runs, rev, c, "nopm"), _median_of(runs, rev, c, "server_cpu_per_kno")
            client = _median_of(runs, rev, c, "client_cpu_per_kno")
            lines.append(f"{rev:<16}{c:>8}  {_num(nopm, '{:,.0f}'):>14}  {_num(cpu, '{:.3f}'):>21}  "
                         f"{_num(client, '{:.3f}'):>21}  {len(mine):>5}")
    lines.append("")
    level = comparisons[0].level if comparisons else 1 - ALPHA
    lines.append(f"paired per round against {spec.revisions[0]}: ratios per round, their median, and the "
                 f"{level * 100:.2f}% interval of the mean ratio (Bonferroni over {spec.comparisons} comparisons)")
    for k in comparisons:
        per = ", ".join(f"{x:.3f}" for x in k.ratios) or "-"
        interval = f"[{k.low:.3f}, {k.high:.3f}]" if k.low is not None else "(no interval: fewer than 2 rounds)"
        lines.append(f"  {k.revision} / {k.reference}  {k.clients:>3} clients  {FIGURE_NAMES[k.figure]:<22} "
                     f"median {_num(k.median, '{:.3f}')}  {interval}  rounds: {per}")
    for m in runs:
        if m.note or not m.complete:
            lines.append(f"note: round {m.round} {m.revision} c{m.clients}: {m.note or 'incomplete'}")
    return "\n".join(lines)


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)


# ---------------------------------------------------------------------------
# Checkouts (side effects)


@dataclass(frozen=True)
class Checkout:
    revision: str  # as given
    sha: str
    path: Path


def _git(*args: str, cwd: Path = REPO) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UsageError(f"git {' '.join(args)} failed: {proc.stderr.strip()[:200]}")
    return proc.stdout.strip()


def resolve(revision: str) -> str:
    """The full sha of a revision of this repository; a name git does not know is a usage error."""
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except UsageError:
        raise UsageError(f"{revision!r} is not a commit of {REPO}; give a branch, tag or sha (git log)") from None


def check_out(revision: str, sha: str, workdir: Path, say: Callable[[str], None]) -> Checkout:
    """A worktree of ``sha`` with its own .venv (kept from an earlier invocation with the same --workdir)."""
    path = workdir / f"rev-{sha[:12]}"
    if not (path / ".git").exists():
        _git("worktree", "add", "--detach", str(path), sha)
    if not (path / ".venv" / "bin" / "innotier").exists():  # installed last: a bootstrap cut short runs again
        say(f"{revision} ({sha[:12]}): scripts/bootstrap.sh in {path}")
        proc = subprocess.run(["bash", "scripts/bootstrap.sh"], cwd=path, capture_output=True, text=True)
        if proc.returncode != 0:
            raise UsageError(f"bootstrap of {revision} in {path} failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return Checkout(revision, sha, path)


def remove_checkouts(checkouts: list[Checkout]) -> None:
    for c in checkouts:
        subprocess.run(["git", "worktree", "remove", "--force", str(c.path)], cwd=REPO, capture_output=True)


# ---------------------------------------------------------------------------
# One run (side effects)


def load_with(co: Checkout, sb, warehouses: int) -> float:
    """W warehouses loaded by the revision's own loader, over TCP; returns the seconds it took."""
    cmd = [str(co.path / ".venv" / "bin" / "python"), "-m", "tuner.cli", "tpcc", "load", "--host", "127.0.0.1",
           "--port", str(sb.port), "--defaults-file", str(sb.client_cnf), "--database", DATABASE,
           "--warehouses", str(warehouses)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=co.path, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"load by {co.revision} failed: {proc.stderr.strip()[-300:]}")
    return round(time.monotonic() - t0, 1)


def one_run(spec: BenchSpec, co: Checkout, rnd: int, say: Callable[[str], None]) -> list[Measured]:
    """A fresh sandbox, the revision's load, ANALYZE, then one measured run per client count."""
    sb = compare.fresh_sandbox(SANDBOX)
    try:
        try:
            load_seconds = load_with(co, sb, spec.warehouses)
            compare.analyze(sb.connection_spec(), DATABASE)
        except Exception as exc:
            return [Measured(rnd, co.revision, c, None, None, complete=False, note=str(exc)[:300])
                    for c in spec.clients]
        entry = compare.Entry(f"rev-{co.sha[:12]}", "builtin", spec.mode, checkout=str(co.path))
        out = []
        for c in spec.clients:
            rec = compare.measured_run(sb, entry, c, spec.warmup, spec.duration, rnd)
            b = rec.bench or {}
            out.append(Measured(rnd, co.revision, c, b.get("nopm"), b.get("server_cpu_per_kno"),
                                b.get("client_cpu_per_kno"), load_seconds, rec.complete, rec.note))
            say(f"round {rnd} {co.revision} c{c}: loaded in {load_seconds} s; NOPM {b.get('nopm')}, server "
                f"{b.get('server_cpu_per_kno')} client {b.get('client_cpu_per_kno')} CPU-s/1000 NO {rec.note}")
        return out
    finally:
        sb.destroy(force=True)


def run(spec: BenchSpec, checkouts: list[Checkout], say: Callable[[str], None]) -> list[Measured]:
    runs: list[Measured] = []
    for r in range(spec.rounds):
        for i in round_order(len(checkouts), r):
            runs.extend(one_run(spec, checkouts[i], r + 1, say))
    return runs


def plan_lines(spec: BenchSpec, shas: list[str]) -> list[str]:
    lines = ["revisions: " + ", ".join(f"{r} ({s[:12]})" for r, s in zip(spec.revisions, shas))
             + f"; reference {spec.revisions[0]}",
             f"server settings for every run: {compare.SERVER_OPTIONS}; a fresh sandbox a run; W={spec.warehouses} "
             f"loaded by the revision's own loader, ANALYZE TABLE; dirty pages flushed before each measured run",
             f"{spec.mode}, clients {list(spec.clients)}, warm-up {spec.warmup:g} s, measured {spec.duration:g} s; "
             f"New-Orders counted from the server in {compare.window(spec.warmup, spec.duration)} s of each run"]
    for r in range(spec.rounds):
        lines.append(f"round {r + 1}: " + ", ".join(spec.revisions[i] for i in round_order(len(spec.revisions), r)))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("revisions", nargs="+", help="git revisions of this repository; the first is the reference")
    ap.add_argument("--clients", default="8,32", help="comma-separated client counts (default 8,32)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each in a rotated order (default 5)")
    ap.add_argument("--warmup", type=float, default=25.0, metavar="S", help="warm-up seconds (default 25)")
    ap.add_argument("--duration", type=float, default=60.0, metavar="S", help="measured seconds (default 60)")
    ap.add_argument("--warehouses", type=int, default=4, metavar="W", help="warehouses loaded (default 4)")
    ap.add_argument("--mode", default="procedures", help="procedures (default) or statements")
    ap.add_argument("--workdir", metavar="DIR", help="keep the worktrees, venvs and sandbox home here for the next "
                                                     "invocation (default: a temporary directory, removed)")
    ap.add_argument("--plan", action="store_true", help="print the plan and stop")
    ap.add_argument("-o", "--output", metavar="FILE", help="also write the runs and comparisons as JSON to FILE")
    args = ap.parse_args(argv)
    try:
        spec = BenchSpec(tuple(args.revisions), tuple(parse_clients(args.clients)), args.rounds, args.warmup,
                         args.duration, args.warehouses, args.mode).validate()
        shas = [resolve(r) for r in spec.revisions]
    except UsageError as exc:  # bad input: one line, nothing made
        print(f"tpcc_revisions: {exc}", file=sys.stderr)
        return 2
    header = plan_lines(spec, shas)
    print("\n".join(header), flush=True)
    if args.plan:
        return 0
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="tpcc-revisions-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ["INNOTIER_HOME"] = str(workdir / "home")  # the bench's sandboxes, apart from anyone else's
    say = lambda line: print(line, flush=True)  # noqa: E731
    checkouts: list[Checkout] = []
    try:
        for rev, sha in zip(spec.revisions, shas):
            checkouts.append(check_out(rev, sha, workdir, say))
        load_start = compare.loadavg()
        runs = run(spec, checkouts, say)
        comparisons = analyse(spec, runs)
        header.append(f"load average: {load_start} at the start, {compare.loadavg()} at the end")
        print()
        print(render(spec, runs, comparisons, header))
        if args.output:
            Path(args.output).write_text(json.dumps(
                {"spec": asdict(spec), "shas": dict(zip(spec.revisions, shas)), "plan": header,
                 "runs": [asdict(m) for m in runs], "comparisons": [k.to_dict() for k in comparisons]}, indent=2))
    except UsageError as exc:
        print(f"tpcc_revisions: {exc}", file=sys.stderr)
        return 2
    finally:
        if not args.workdir:
            remove_checkouts(checkouts)
            shutil.rmtree(workdir, ignore_errors=True)
            subprocess.run(["git", "worktree", "prune"], cwd=REPO, capture_output=True)  # one that failed half-way
    return 0


if __name__ == "__main__":
    sys.exit(main())
