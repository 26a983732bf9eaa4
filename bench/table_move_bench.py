#!/usr/bin/env python3
"""A table moved onto a RAM tier and back while the built-in TPC-C runs: what clients see.

    .venv/bin/python bench/table_move_bench.py [--server mariadb-10.11|mariadb-11.8|mysql-9.7] [--table stock]
        [--warehouses 1] [--clients 8] [--mode procedures|statements] [--before 20] [--gap 10] [--tier DIR]
        [--interval 0.25] [--option NAME=VALUE ...] [--pace SECONDS] [-o out.json]

A fresh sandbox (256M buffer pool) is loaded with W warehouses; on MySQL its tier root is registered first
(`table-move register-root`: the one restart, before any client runs).  TPC-C runs with 0.25-s intervals (``--interval``):
``--before`` seconds untouched, then `innotier table-move apply` (a real CLI process) moves the table onto
the tier, ``--gap`` seconds later `table-move back` brings it home, ``--gap`` seconds after that the run
ends (SIGTERM, a clean partial result).  Printed: each move's duration and its copy and swap times; latency
p99 of New-Order and Payment before the first move (exact, and the median interval p99) and during each
move (exact over the window from the histograms' difference, and the worst interval overlapping it), and each journal step's p99; failed transactions (errors) in the whole
run and in the intervals overlapping each move, retries; server restarts (from Uptime); the redo log's size
and the part of it not yet checkpointed when the first move began (what the plan's redo note reads); and the
load average.  The tmpfs the bench mounts itself is unmounted at the end.  Figures, not assertions: on a shared machine say the load with them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from datadir_mover.tablemove import redo_room  # noqa: E402
from tuner.core import sandbox as sbx  # noqa: E402
from tuner.core.server import fetch_variables  # noqa: E402
from tuner.core.measure import LatencyHistogram, Measurement  # noqa: E402
from tuner.tpcc.config import RunConfig  # noqa: E402
from tuner.tpcc.driver import run as tpcc_run  # noqa: E402
from tuner.tpcc.loader import load  # noqa: E402

OPS = ("new_order", "payment")


def cli(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True, text=True, cwd=str(REPO))
    if proc.returncode != 0:
        return {"failed": f"innotier {' '.join(args[:3])} exited {proc.returncode}: {proc.stderr.strip()}"}
    return json.loads(proc.stdout) if proc.stdout.strip().startswith(("{", "[")) else {}


def uptime(spec) -> int:
    conn = spec.connect()
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL STATUS LIKE 'Uptime'")
    value = int(cur.fetchone()[1])
    conn.close()
    return value


def tier_dir(given: str | None) -> tuple[str, bool]:
    """The tier directory, and whether the bench mounted it (and so unmounts it at the end)."""
    if given:
        return given, False
    path = "/tmp/tmbench-tier"
    os.makedirs(path, exist_ok=True)
    if subprocess.run(["mountpoint", "-q", path]).returncode == 0:
        return path, False
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2G", "tmpfs", path], check=True)
    return path, True


class Timeline:
    """The run's interval points, each with the monotonic time it closed and the run's cumulative latency
    histograms at that moment (so a window's exact percentiles are the difference of two of them)."""

    def __init__(self, measurement: Measurement) -> None:
        self.measurement = measurement
        self.points: list[tuple[float, object]] = []
        self.cumulative: list[tuple[float, dict[str, list[int]]]] = []
        self.lock = threading.Lock()

    def add(self, point) -> None:
        now = time.monotonic()
        counts = {op: list(self.measurement.all_latency[op].counts) for op in OPS}
        with self.lock:
            self.points.append((now, point))
            self.cumulative.append((now, counts))

    def exact_p99(self, start: float, end: float) -> dict[str, float | None]:
        """p99 (ms) of every transaction that finished between the last point before ``start`` and the first
        point after ``end``: exact up to the histogram's 1% buckets."""
        first = max((c for at, c in self.cumulative if at <= start), key=lambda c: sum(c[OPS[0]]), default=None)
        last = next((c for at, c in self.cumulative if at >= end), self.cumulative[-1][1] if self.cumulative else None)
        out: dict[str, float | None] = {}
        for op in OPS:
            h = LatencyHistogram()
            base = first[op] if first else [0] * len(last[op])
            h.counts = [b - a for a, b in zip(base, last[op])]
            h.count, h.max = sum(h.counts), float("inf")
            out[op] = round(h.percentile(99.0) * 1000, 1) if h.count else None
        return out

    def measured_for(self, seconds: float) -> threading.Event:
        ev = threading.Event()
        threading.Thread(target=lambda: self._wait(seconds, ev), daemon=True).start()
        return ev

    def _wait(self, seconds: float, ev: threading.Event) -> None:
        while True:
            with self.lock:
                if self.points and self.points[-1][1].t >= seconds:
                    ev.set()
                    return
            time.sleep(0.2)

    def window(self, start: float, end: float) -> list:
        """Points whose interval overlaps [start, end] (monotonic)."""
        return [p for at, p in self.points if at >= start and at - p.seconds <= end]

    def before(self, start: float) -> list:
        return [p for at, p in self.points if at <= start]


def p99(points: list, op: str) -> list[float]:
    return [p.latency_ms[op]["p99"] for p in points if p.latency_ms.get(op, {}).get("count")]


def summary(points: list) -> dict:
    out = {"errors": sum(p.errors for p in points), "retries": sum(p.retries for p in points)}
    for op in OPS:
        values = p99(points, op)
        out[f"{op}_p99_ms_worst"] = round(max(values), 1) if values else None
        out[f"{op}_p99_ms_median"] = round(statistics.median(values), 1) if values else None
    return out


def step_times(move_id: str, wall_start: float) -> dict[str, list[float]]:
    """Each journal state's [begin, done] in seconds since the move's command started (from its journal)."""
    path = Path(os.environ["INNOTIER_HOME"], "table-moves", move_id, "journal.log")
    out: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        out.setdefault(rec["state"], []).append(round(rec["at"] - wall_start, 2))
    return out


def by_step(timeline: Timeline, start: float, steps: dict[str, list[float]] | None) -> dict | None:
    """Each journal state's p99 (the transactions that finished while it ran, to the driver's interval), and the
    command's own start before PLAN (the CLI process starting): where in the move the latency comes from."""
    if not steps:
        return None
    spans = {"startup": [0.0, steps["PLAN"][0]], **{s: [t[0], t[-1]] for s, t in steps.items()}}
    return {s: {"s": round(b - a, 2), **timeline.exact_p99(start + a, start + b)} for s, (a, b) in spans.items()
            if b - a >= 0.05}


def redo_now(spec) -> dict:
    """The redo log's size and how much of it is not yet checkpointed (MiB), read as the move's plan reads them."""
    conn = spec.connect()
    try:
        room = redo_room.read(conn, fetch_variables(conn), 0)
    finally:
        conn.close()
    return {"capacity_mib": round(room.capacity / 2**20, 1), "checkpoint_age_mib": round(room.checkpoint_age / 2**20, 1)} \
        if room else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default="mariadb-10.11", help="mariadb-10.11 (the host's), mariadb-11.8, mysql-9.7")
    ap.add_argument("--table", default="stock")
    ap.add_argument("--mode", default="procedures", help="the driver's mode: procedures (default) or statements")
    ap.add_argument("--warehouses", type=int, default=1)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--before", type=float, default=20.0)
    ap.add_argument("--gap", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=0.25,
                    help="seconds between the driver's points: the resolution of each step's p99 (default 0.25)")
    ap.add_argument("--pace", default="0", metavar="SECONDS", help="`table-move apply/back --pace` (default 0)")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                    help="a server option for the sandbox, e.g. innodb_log_file_size=1G (repeatable)")
    ap.add_argument("--tier", help="the tier directory (default: a tmpfs mounted at /tmp/tmbench-tier)")
    ap.add_argument("-o", "--output")
    args = ap.parse_args(argv)
    os.environ.setdefault("INNOTIER_HOME", "/tmp/tmbench-home")
    name = f"tmbench-{args.server.replace('.', '')}"
    tier_root, mounted = tier_dir(args.tier)
    tier = os.path.join(tier_root, name)
    shutil.rmtree(tier, ignore_errors=True)  # the bench's own directory: what an earlier run left there
    os.makedirs(tier)
    server = None if args.server == "mariadb-10.11" else args.server
    try:
        sbx.Sandbox.load(name).destroy(force=True)
    except Exception:
        pass
    # a fresh sandbox of the same name: the journals of moves on the one it replaces are void (an interrupted one
    # would otherwise be "unfinished" for the new sandbox)
    shutil.rmtree(Path(os.environ["INNOTIER_HOME"], "table-moves"), ignore_errors=True)
    sb = sbx.create(name, page_size="16k", server=server, options={"innodb_buffer_pool_size": "256M", **dict(o.split("=", 1) for o in args.option)})
    sb.start()
    spec = sb.connection_spec()
    t0 = time.monotonic()
    load(spec, warehouses=args.warehouses, database="tpcc", drop=True, progress=False)
    print(f"{args.server} {sb.version}: loaded W={args.warehouses} in {time.monotonic() - t0:.0f} s; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    if sb.flavor == "mysql":
        reg = cli("table-move", "register-root", tier, "--sandbox", name, "--yes", "--json")
        print(f"register-root: one restart, {reg['restart_s']:.1f} s, before the clients start", flush=True)
    move_args = [f"tpcc.{args.table}", "--sandbox", name, "--yes", "--json", "--pace", args.pace]
    measurement = Measurement()
    timeline, moves, redo = Timeline(measurement), {}, {}
    up0 = uptime(spec)

    def mover() -> None:
        timeline.measured_for(args.before).wait()
        redo["before_move"] = redo_now(spec)
        for label, argv_ in (("in", ["apply", *move_args[:1], "--to", tier, "--i-accept-volatile", *move_args[1:]]),
                             ("back", ["back", "--yes", "--json", "--pace", args.pace])):
            start, wall = time.monotonic(), time.time()
            res = cli("table-move", *argv_)
            if "failed" in res:  # said, and resumed as a DBA would (the journal knows where it stopped)
                print(f"table_move_bench: {res['failed']}; resuming", flush=True)
                res = {**cli("table-move", "resume", "--json"), "resumed_after": res["failed"]}
            moves[label] = {"start": start, "wall": wall, "end": time.monotonic(), "result": res}
            time.sleep(args.gap)  # clients run on the moved table before the next step
        os.kill(os.getpid(), signal.SIGTERM)  # ends the run cleanly (partial result)

    threading.Thread(target=mover, daemon=True).start()
    cfg = RunConfig(clients=args.clients, warmup=5, duration=3600, interval=args.interval, mode=args.mode)
    wall0 = time.monotonic()
    result = tpcc_run(spec, cfg, measurement, on_interval=timeline.add)
    elapsed = time.monotonic() - wall0
    restarts = 0 if uptime(spec) - up0 >= elapsed - 2 else 1
    first = moves["in"]["start"] if "in" in moves else float("inf")
    report = {"server": f"{args.server} {sb.version}", "options": args.option, "pace_s": float(args.pace), "table": args.table, "mode": args.mode, "warehouses": args.warehouses,
              "clients": args.clients, "run_errors": result.errors, "run_retries": result.retries,
              "error_messages": result.extra.get("error_messages"),
              "restarts": restarts, "redo": redo, "before": {**summary(timeline.before(first)),
                                                 "p99_ms": timeline.exact_p99(timeline.points[0][0], first)}, "moves": {},
              "load_average_end": round(os.getloadavg()[0], 1)}
    for label, m in moves.items():
        r = m["result"]
        report["moves"][label] = {"seconds": round(m["end"] - m["start"], 1), "copy_s": r.get("copy_s"),
                                  "swap_s": r.get("swap_s"), "file": r.get("file"), "digest": r.get("digest"),
                                  "steps_at_s": (steps := step_times(r["move_id"], m["wall"]) if "move_id" in r else None),
                                  "p99_ms_by_step": by_step(timeline, m["start"], steps),
                                  "resumed_after": r.get("resumed_after"),
                                  "p99_ms": timeline.exact_p99(m["start"], m["end"]),
                                  **summary(timeline.window(m["start"], m["end"]))}
    report["timeline"] = [[round(at - first, 1), *(p.latency_ms.get(op, {}).get("p99") for op in OPS), p.errors]
                          for at, p in timeline.points]  # [s since the first move started, NO p99, Pay p99, errors]
    print(json.dumps({k: v for k, v in report.items() if k != "timeline"}, indent=2))
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=2))
    sb.destroy(force=True)
    if mounted:
        subprocess.run(["umount", tier_root], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
