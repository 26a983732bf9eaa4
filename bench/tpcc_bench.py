#!/usr/bin/env python3
"""TPC-C side by side: innotier's built-in driver against the peers on one sandbox.

    .venv/bin/python bench/tpcc_bench.py [--hammerdb DIR] [--go-tpc BIN] [--tpcc-mysql DIR] [--sysbench-tpcc DIR]
        [--warmup 20] [--duration 60] [--repeats 3] [--clients 8,32] [--big-clients 512]

One sandbox with the peers' settings (tests/fixtures/recorded/peer-output/README.txt:
buffer pool 1G, O_DIRECT, innodb_log_file_size=256M, max_connections large
enough), W=4 loaded by each driver into its own database.  For each client count
and repeat, every driver runs in turn with the same warm-up and duration, dirty
pages flushed to (near) zero before each run as the fixture README describes.
Printed per driver and client count: median / min / max of NOPM and tpmC over the
repeats, and client and server CPU seconds per 1000 New-Orders, from /proc:
the CPU time of the bench's descendant processes (the driver's process tree,
the server excluded) and of mariadbd, sampled inside the steady part of the
measured window.  A peer whose path is not given is reported "not measured".
Last, one run of ours with --big-clients (tpmC, errors, client peak RSS).

Figures, not assertions: the machine is shared and noisy (15-25% between 10 s
intervals), so look at medians and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tuner.core import sandbox as sbx  # noqa: E402
from tuner.tpcc.config import RunConfig  # noqa: E402

SANDBOX_OPTIONS = {  # the peers' server settings (tests/fixtures/recorded/peer-output/README.txt)
    "innodb_buffer_pool_size": "1G",
    "innodb_flush_method": "O_DIRECT",
    "innodb_log_file_size": "256M",
    "max_connections": "700",
    "max_prepared_stmt_count": "60000",
    "skip_name_resolve": "ON",
}
PEERS = ("hammerdb", "go-tpc", "tpcc-mysql", "sysbench-tpcc")
CLK_TCK = os.sysconf("SC_CLK_TCK")
WAREHOUSES = 4


# ---------------------------------------------------------------------------
# /proc readers (root argument so a recorded tree could stand in)


def proc_cpu_seconds(pid: int, root: str = "/proc") -> float:
    """utime + stime of one process, seconds (0 if it is gone)."""
    try:
        text = Path(root, str(pid), "stat").read_text()
    except OSError:
        return 0.0
    fields_ = text.rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / CLK_TCK


def children_map(root: str = "/proc") -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in os.listdir(root):
        if not d.isdigit():
            continue
        try:
            text = Path(root, d, "stat").read_text()
        except OSError:
            continue
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(d))
    return out


def descendants(pid: int, exclude: set[int], root: str = "/proc") -> list[int]:
    kids = children_map(root)
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        if p in exclude:
            continue
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def tree_cpu(pid: int, exclude: set[int]) -> float:
    return sum(proc_cpu_seconds(p) for p in descendants(pid, exclude))


def tree_rss_bytes(pid: int, exclude: set[int]) -> int:
    total = 0
    for p in descendants(pid, exclude):
        try:
            for line in Path("/proc", str(p), "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class WindowSampler:
    """Client-tree and server CPU sampled inside the steady part of the measured window."""

    def __init__(self, warmup: float, duration: float, server_pid: int) -> None:
        self.a = warmup + 0.2 * duration + 2.0
        self.b = warmup + 0.9 * duration
        self.server_pid = server_pid
        self.samples: list[tuple[float, float, float]] = []
        self.peak_rss = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.t0 = time.monotonic()
        self._t.start()

    def _sample(self) -> None:
        me = os.getpid()
        self.samples.append((time.monotonic(), tree_cpu(me, {self.server_pid}), proc_cpu_seconds(self.server_pid)))

    def _run(self) -> None:
        for at in (self.a, self.b):
            if self._stop.wait(max(0.0, self.t0 + at - time.monotonic())):
                return
            self._sample()
            self.peak_rss = max(self.peak_rss, tree_rss_bytes(os.getpid(), {self.server_pid}))

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=5)

    def rates(self) -> tuple[float, float] | None:
        """(client CPU-s per second, server CPU-s per second) over the window, or None."""
        if len(self.samples) < 2:
            return None
        (t1, c1, s1), (t2, c2, s2) = self.samples[0], self.samples[-1]
        return (c2 - c1) / (t2 - t1), (s2 - s1) / (t2 - t1)


# ---------------------------------------------------------------------------
# Runs


@dataclass
class Run:
    driver: str
    clients: int
    nopm: float | None
    tpmc: float | None
    client_cpu_per_kno: float | None
    server_cpu_per_kno: float | None
    errors: int = 0
    complete: bool = True
    rss_bytes: int = 0
    note: str = ""
    extra: dict = field(default_factory=dict)


def flush_dirty_pages(spec, limit: int = 10, timeout: float = 300.0) -> None:
    """SET GLOBAL innodb_max_dirty_pages_pct=0 until dirty pages <= limit, then back (fixture README)."""
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("SELECT @@innodb_max_dirty_pages_pct")
    old = cur.fetchone()[0]
    cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
            if int(cur.fetchone()[1]) <= limit:
                break
            time.sleep(0.5)
    finally:
        cur.execute(f"SET GLOBAL innodb_max_dirty_pages_pct = {float(old)}")
        conn.close()


def per_kno(cpu_rate: float, nopm: float | None) -> float | None:
    if not nopm:
        return None
    return round(cpu_rate / (nopm / 60.0) * 1000.0, 3)


def run_ours(sb, clients: int, args) -> Run:
    cmd = [sys.executable, "-m", "tuner.cli", "tpcc", "run", "--sandbox", sb.name, "--database", "tpcc",
           "--clients", str(clients), "--warmup", str(args.warmup), "--duration", str(args.duration),
           "--interval", str(min(10.0, args.duration)), "--mode", args.mode, "--json"]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    sampler = WindowSampler(args.warmup + 1.0, args.duration, sb.running_pid())
    sampler.start()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO),
                          timeout=args.warmup + args.duration + 300 + clients)
    sampler.stop()
    if proc.returncode not in (0, 8):
        return Run("innotier", clients, None, None, None, None, note=proc.stderr.strip()[-300:])
    r = json.loads(proc.stdout)
    rates = sampler.rates()
    nopm = r.get("nopm") or r.get("tpmc")
    extra = r.get("extra", {})
    rss = int(extra.get("client_rss_bytes", 0)) + int(extra.get("parent_rss_bytes", 0))
    return Run("innotier", clients, r.get("nopm"), r.get("tpmc"),
               per_kno(rates[0], nopm) if rates else None, per_kno(rates[1], nopm) if rates else None,
               errors=r.get("errors", 0), complete=r.get("complete", False), rss_bytes=max(rss, sampler.peak_rss),
               note=r.get("failure") or "", extra={"retries": r.get("retries"), "rollbacks": r.get("rollbacks"),
                                                   "tpm": r.get("tpm")})


def run_peer(sb, name: str, tool_path: str, clients: int, args) -> Run:
    from tuner.tpcc import adapters

    adapter = adapters.get(name)
    cfg = RunConfig(clients=clients, warmup=args.warmup, duration=args.duration, interval=10.0,
                    warehouses=WAREHOUSES, database=peer_db(name), driver=name, tool_path=tool_path)
    sampler = WindowSampler(args.warmup, args.duration, sb.running_pid())
    sampler.start()
    try:
        r = adapter.run(sb.connection_spec(peer_db(name)), cfg)
    except Exception as exc:  # a peer failing is a figure to report, not a crash of the bench
        sampler.stop()
        return Run(name, clients, None, None, None, None, complete=False, note=str(exc)[:300])
    sampler.stop()
    rates = sampler.rates()
    nopm = r.nopm or r.tpmc
    return Run(name, clients, r.nopm, r.tpmc, per_kno(rates[0], nopm) if rates else None,
               per_kno(rates[1], nopm) if rates else None, errors=r.errors, complete=r.complete,
               note=r.failure or "")


def peer_db(name: str) -> str:
    return "tpcc_" + name.replace("-", "_")


# ---------------------------------------------------------------------------
# Set-up


def sandbox_for_bench(name: str, fresh: bool):
    try:
        sb = sbx.Sandbox.load(name)
        if fresh:
            if sb.state() == sbx.SandboxState.RUNNING:
                sb.stop("kill")
            subprocess.run(["rm", "-rf", str(sb.dir)], check=False)
            raise LookupError
    except Exception:
        sb = sbx.create(name, page_size="16k", options=SANDBOX_OPTIONS)
    if sb.state() != sbx.SandboxState.RUNNING:
        sb.start(recover=sb.state() == sbx.SandboxState.CRASHED)
    return sb


def load_ours(sb, reload: bool) -> float | None:
    from tuner.tpcc import loader

    spec = sb.connection_spec()
    if not reload and _loaded(spec, "tpcc"):
        return None
    t = time.monotonic()
    loader.load(spec, WAREHOUSES, database="tpcc", drop=True, progress=False)
    took = time.monotonic() - t
    from tuner.tpcc import check

    report = check.run_checks(spec.with_database("tpcc"), "tpcc")
    if not report.ok:
        raise SystemExit("consistency check failed right after our load")
    return took


def _loaded(spec, db: str) -> bool:
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (db,))
        return cur.fetchone()[0] > 0
    finally:
        conn.close()


def load_peer(sb, name: str, tool_path: str, reload: bool) -> float | None:
    from tuner.tpcc import adapters

    spec = sb.connection_spec()
    if not reload and _loaded(spec, peer_db(name)):
        return None
    return adapters.get(name).load(spec, WAREHOUSES, database=peer_db(name), tool_path=tool_path, drop=True)


# ---------------------------------------------------------------------------
# Report


def fmt(v, f="{:,.0f}") -> str:
    return "-" if v is None else f.format(v)


def summarize(runs: list[Run]) -> dict:
    def stats(vals):
        vals = [v for v in vals if v is not None]
        if not vals:
            return None
        return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}

    return {"nopm": stats([r.nopm for r in runs]), "tpmc": stats([r.tpmc for r in runs]),
            "client_cpu_per_kno": stats([r.client_cpu_per_kno for r in runs]),
            "server_cpu_per_kno": stats([r.server_cpu_per_kno for r in runs]),
            "errors": sum(r.errors for r in runs), "incomplete": sum(not r.complete for r in runs),
            "notes": sorted({r.note for r in runs if r.note})}


def print_report(table: dict, loads: dict, big: Run | None, drivers: list[str], peers_missing: list[str]) -> None:
    print()
    print("load W=4 (seconds): " + ", ".join(f"{k} {fmt(v, '{:.1f}')}" for k, v in loads.items()))
    for clients, by_driver in table.items():
        print(f"\n{clients} clients  (median [min-max] of {len(next(iter(by_driver.values()))['runs'])} runs)")
        print(f"{'driver':<14}{'NOPM':>28}{'tpmC':>28}{'client CPU-s/1000 NO':>22}{'server CPU-s/1000 NO':>22}"
              f"{'vs HammerDB':>13}")
        hdb = by_driver.get("hammerdb", {}).get("summary", {}).get("nopm")
        for d in drivers:
            s = by_driver[d]["summary"]

            def cell(k, f="{:,.0f}"):
                x = s.get(k)
                if x is None:  # the driver ran but does not report this figure (HammerDB: no tpmC), or failed
                    return "n/a"
                return f"{fmt(x['median'], f)} [{fmt(x['min'], f)}-{fmt(x['max'], f)}]"

            ratio = ""
            if hdb and s.get("nopm"):
                ratio = f"{s['nopm']['median'] / hdb['median']:.2f}x"
            print(f"{d:<14}{cell('nopm'):>28}{cell('tpmc'):>28}{cell('client_cpu_per_kno', '{:.2f}'):>22}"
                  f"{cell('server_cpu_per_kno', '{:.2f}'):>22}{ratio:>13}")
            for note in s.get("notes", []):
                print(f"{'':<14}note: {note}")
        for p in peers_missing:
            print(f"{p:<14}not measured (no path given)")
    if big is not None:
        print(f"\n{big.clients} clients (innotier): tpmC {fmt(big.tpmc)}, NOPM {fmt(big.nopm)}, errors {big.errors}, "
              f"complete {big.complete}, client peak RSS {big.rss_bytes / 2**20:,.0f} MiB {big.note}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hammerdb", metavar="DIR", help="HammerDB source directory (hammerdbcli)")
    ap.add_argument("--go-tpc", metavar="BIN", help="go-tpc binary")
    ap.add_argument("--tpcc-mysql", metavar="DIR", help="tpcc-mysql directory (tpcc_load, tpcc_start)")
    ap.add_argument("--sysbench-tpcc", metavar="DIR", help="sysbench-tpcc checkout (tpcc.lua)")
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", default="8,32", help="comma-separated client counts (default 8,32)")
    ap.add_argument("--big-clients", type=int, default=512, help="one run of ours at this many clients (0: skip)")
    ap.add_argument("--big-duration", type=float, default=None, help="duration of the big run (default --duration)")
    ap.add_argument("--mode", default="procedures", choices=("procedures", "statements"))
    ap.add_argument("--workers", type=int, default=None, help="our worker processes (default: one per core)")
    ap.add_argument("--sandbox", default="tpcc-bench", help="sandbox name (created if missing)")
    ap.add_argument("--fresh", action="store_true", help="recreate the sandbox and reload everything")
    ap.add_argument("--reload", action="store_true", help="reload the schemas even if present")
    ap.add_argument("--keep", action="store_true", help="leave the sandbox running afterwards")
    ap.add_argument("--json", metavar="FILE", help="also write all runs as JSON")
    args = ap.parse_args(argv)

    peers = {"hammerdb": args.hammerdb, "go-tpc": args.go_tpc, "tpcc-mysql": args.tpcc_mysql,
             "sysbench-tpcc": args.sysbench_tpcc}
    present = [p for p in PEERS if peers[p]]
    missing = [p for p in PEERS if not peers[p]]
    clients_list = [int(c) for c in args.clients.split(",") if c.strip()]

    sb = sandbox_for_bench(args.sandbox, args.fresh)
    print(f"sandbox {sb.name}: {SANDBOX_OPTIONS}", flush=True)
    loads: dict[str, float | None] = {"innotier": load_ours(sb, args.reload or args.fresh)}
    for p in present:
        try:
            loads[p] = load_peer(sb, p, peers[p], args.reload or args.fresh)
        except Exception as exc:
            print(f"{p}: load failed: {exc}", flush=True)
            loads[p] = None
    print("loads done (None: already loaded)", loads, flush=True)

    drivers = ["innotier"] + present
    table: dict[int, dict] = {}
    for clients in clients_list:
        table[clients] = {d: {"runs": []} for d in drivers}
        for rep in range(args.repeats):
            for d in drivers:
                flush_dirty_pages(sb.connection_spec())
                run = run_ours(sb, clients, args) if d == "innotier" else run_peer(sb, d, peers[d], clients, args)
                table[clients][d]["runs"].append(run)
                print(f"c{clients} rep{rep + 1} {d}: NOPM {fmt(run.nopm)} tpmC {fmt(run.tpmc)} client "
                      f"{fmt(run.client_cpu_per_kno, '{:.2f}')} server {fmt(run.server_cpu_per_kno, '{:.2f}')} "
                      f"CPU-s/1000 NO errors {run.errors} {run.note}", flush=True)
        for d in drivers:
            table[clients][d]["summary"] = summarize(table[clients][d]["runs"])

    big = None
    if args.big_clients:
        flush_dirty_pages(sb.connection_spec())
        big_args = argparse.Namespace(**vars(args))
        big_args.duration = args.big_duration or args.duration
        big = run_ours(sb, args.big_clients, big_args)

    print_report(table, loads, big, drivers, missing)
    if args.json:
        out = {"loads": loads, "big": big.__dict__ if big else None,
               "runs": {c: {d: [r.__dict__ for r in v["runs"]] for d, v in t.items()} for c, t in table.items()}}
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    if not args.keep:
        sb.stop("clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
