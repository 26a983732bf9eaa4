#!/usr/bin/env python3
"""How long does loading TPC-C take?  Ours and, given their paths, the peers', side by side.

Creates a fresh MariaDB sandbox with the settings the peers were measured with
(tests/fixtures/recorded/peer-output/README.txt: innodb_buffer_pool_size=1G,
innodb_flush_method=O_DIRECT, innodb_log_file_size=256M, max_connections=500,
everything else default), then for each loader runs N loads (default 3) of W
warehouses (default 4) and prints min / median / max of:

* load seconds (ours: until every table is committed) and, for ours, load +
  verification seconds (row counts, clause 4.3.3.1 rules and clause 3.3.2
  conditions; the peers' figures are without checks: go-tpc ran with --no-check);
* server CPU seconds (the sandbox's mariadbd, from /proc) and client CPU seconds.

Between runs the database is dropped and dirty pages are flushed to ~0 (as the
peers' recording did), so every run starts alike.  The machine is shared and
noisy: compare medians and ratios, and read the CPU seconds, which noise moves less.

Peers (each "not measured" unless its path is given):
  --go-tpc PATH           go-tpc binary        (go-tpc tpcc --warehouses W ... -T JOBS prepare --no-check)
  --tpcc-mysql DIR        tpcc-mysql checkout  (create_table.sql, add_fkey_idx.sql, tpcc_load; serial load)
  --sysbench-tpcc DIR     sysbench-tpcc dir    (sysbench DIR/tpcc.lua --scale=W --threads=JOBS prepare)
Peers get a throwaway password-less account on the throwaway sandbox (127.0.0.1 only), so no
password ever appears in their command lines.

Usage: .venv/bin/python bench/load_bench.py [--warehouses 4] [--runs 3] [--jobs N] [--go-tpc PATH] ...
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PEER_SETTINGS = {"innodb_buffer_pool_size": "1G", "innodb_flush_method": "O_DIRECT",
                 "innodb_log_file_size": "256M", "max_connections": "500"}
BENCH_USER = "tpccbench"


def server_cpu(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def execute(spec, *sql: str):
    conn = spec.connect()
    try:
        cur = conn.cursor()
        for s in sql:
            cur.execute(s)
        return cur.fetchall() if cur.with_rows else None
    finally:
        conn.close()


def settle(spec, timeout: float = 120.0) -> None:
    """Flush dirty pages to (almost) none, then restore the default (the peers' recording did the same)."""
    execute(spec, "SET GLOBAL innodb_max_dirty_pages_pct = 0")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirty = int(execute(spec, "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")[0][1])
        if dirty <= 10:
            break
        time.sleep(0.5)
    execute(spec, "SET GLOBAL innodb_max_dirty_pages_pct = 90")


def run_ours(sb, warehouses: int, jobs: int | None, bulk: bool) -> dict:
    from tuner.tpcc.loader import load

    spec = sb.connection_spec()
    pid = sb.running_pid()
    c0, s0 = server_cpu(pid), self_cpu()
    r = load(spec, warehouses, database="tpcc", jobs=jobs, drop=True, progress=False, bulk=bulk)
    return {"load_s": r.seconds - r.verify_seconds, "total_s": r.seconds, "verify_s": r.verify_seconds,
            "server_cpu": server_cpu(pid) - c0,
            "client_cpu": self_cpu() - s0, "verified": r.verified, "jobs": r.jobs}


def run_peer(sb, name: str, argv_list: list[list[str]], cwd: str | None = None) -> dict:
    pid = sb.running_pid()
    c0, k0, t0 = server_cpu(pid), children_cpu(), time.monotonic()
    for argv in argv_list:
        p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{name} failed ({p.returncode}): {' '.join(argv)}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return {"load_s": time.monotonic() - t0, "total_s": None, "server_cpu": server_cpu(pid) - c0,
            "client_cpu": children_cpu() - k0, "verified": False, "jobs": None}


def peer_commands(name: str, path: str, sb, warehouses: int, jobs: int) -> tuple[list[list[str]], str | None]:
    port, db = str(sb.port), "tpcc_peer"
    if name == "go-tpc":
        return [[path, "tpcc", "--warehouses", str(warehouses), "-H", "127.0.0.1", "-P", port, "-U", BENCH_USER,
                 "-D", db, "-T", str(jobs), "prepare", "--no-check"]], None
    client = shutil.which("mariadb") or shutil.which("mysql") or "mariadb"
    base = [client, "-h127.0.0.1", f"-P{port}", f"-u{BENCH_USER}"]
    if name == "tpcc-mysql":
        d = Path(path)
        return [base + ["-e", f"CREATE DATABASE {db}"],
                ["sh", "-c", f"{' '.join(base)} {db} < {d / 'create_table.sql'}"],
                ["sh", "-c", f"{' '.join(base)} {db} < {d / 'add_fkey_idx.sql'}"],
                [str(d / "tpcc_load"), "-h", "127.0.0.1", "-P", port, "-d", db, "-u", BENCH_USER, "-p", "",
                 "-w", str(warehouses)]], str(d)
    if name == "sysbench-tpcc":
        return [base + ["-e", f"CREATE DATABASE {db}"],
                ["sysbench", "./tpcc.lua", "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}",
                 f"--mysql-user={BENCH_USER}", f"--mysql-db={db}", "--tables=1", f"--scale={warehouses}",
                 f"--threads={jobs}", "prepare"]], path
    raise ValueError(name)


def print_run(name: str, i: int, r: dict) -> None:
    extra = (f", with verification {r['total_s']:.1f} s (verification {r['verify_s']:.1f} s = "
             f"{r['verify_s'] / r['load_s']:.2f}x the load)") if r["total_s"] else ""
    print(f"  {name} run {i + 1}: load {r['load_s']:.1f} s{extra}; server CPU {r['server_cpu']:.1f} s, "
          f"client CPU {r['client_cpu']:.1f} s; load average {os.getloadavg()[0]:.1f}", flush=True)


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{min(values):6.1f} {statistics.median(values):6.1f} {max(values):6.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warehouses", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=None, help="our loader's connections (default: its own choice)")
    ap.add_argument("--peer-jobs", type=int, default=4, help="threads for peers that take them (go-tpc -T 4)")
    ap.add_argument("--also-bulk", action="store_true",
                    help="also measure our loader's one-bulk-transaction-a-table variant")
    ap.add_argument("--go-tpc", metavar="PATH")
    ap.add_argument("--tpcc-mysql", metavar="DIR")
    ap.add_argument("--sysbench-tpcc", metavar="DIR")
    ap.add_argument("--keep", action="store_true", help="keep the sandbox (and its INNOTIER_HOME) afterwards")
    args = ap.parse_args()

    home = tempfile.mkdtemp(prefix="ih-lb-", dir="/tmp")
    os.environ["INNOTIER_HOME"] = home
    from tuner.core import sandbox as sbx

    sb = sbx.create("loadbench", page_size="16k", options=PEER_SETTINGS)
    sb.start()
    spec = sb.connection_spec()
    try:
        execute(spec, f"CREATE USER '{BENCH_USER}'@'127.0.0.1'", f"GRANT ALL ON *.* TO '{BENCH_USER}'@'127.0.0.1'")
        version = execute(spec, "SELECT @@version")[0][0]
        print(f"server {version}; {', '.join(f'{k}={v}' for k, v in PEER_SETTINGS.items())}; "
              f"W={args.warehouses}, {args.runs} run(s) each; {os.cpu_count()} cores; "
              f"load average {os.getloadavg()[0]:.1f} at start")
        loaders = [("innotier", None)]
        if args.also_bulk:
            loaders.append(("innotier-bulk", None))
        for name in ("go-tpc", "tpcc-mysql", "sysbench-tpcc"):
            path = getattr(args, name.replace("-", "_"))
            loaders.append((name, path))
        results: dict[str, list[dict]] = {}
        for name, path in loaders:
            if name not in ("innotier", "innotier-bulk") and not path:
                continue
            results[name] = []
            for i in range(args.runs):
                execute(spec, "DROP DATABASE IF EXISTS tpcc", "DROP DATABASE IF EXISTS tpcc_peer")
                settle(spec)
                if name.startswith("innotier"):
                    r = run_ours(sb, args.warehouses, args.jobs, bulk=(name == "innotier-bulk"))
                else:
                    cmds, cwd = peer_commands(name, path, sb, args.warehouses, args.peer_jobs)
                    r = run_peer(sb, name, cmds, cwd)
                results[name].append(r)
                print_run(name, i, r)

        print(f"\nTPC-C load, W={args.warehouses} (min median max over {args.runs} runs)")
        print(f"{'loader':<15} {'load s':>20} {'load+verify s':>20} {'server CPU s':>20} {'client CPU s':>20}")
        for name in ["innotier", "innotier-bulk", "go-tpc", "hammerdb", "tpcc-mysql", "sysbench-tpcc"]:
            rs = results.get(name)
            if not rs:  # figures from earlier runs are in docs/benchmarks.md, with their date and machine
                if name != "innotier-bulk":
                    print(f"{name:<15} not measured")
                continue
            print(f"{name:<15} {summary([r['load_s'] for r in rs]):>20} "
                  f"{summary([r['total_s'] for r in rs if r['total_s']]):>20} "
                  f"{summary([r['server_cpu'] for r in rs]):>20} {summary([r['client_cpu'] for r in rs]):>20}")
        ours = statistics.median(r["load_s"] for r in results["innotier"])
        ours_total = statistics.median(r["total_s"] for r in results["innotier"])
        for name in ("go-tpc", "hammerdb", "tpcc-mysql", "sysbench-tpcc"):
            if results.get(name):
                peer = statistics.median(r["load_s"] for r in results[name])
                print(f"  {name}: {peer / ours:.2f}x our load time, {peer / ours_total:.2f}x our load+verify")
    finally:
        if not args.keep:
            try:
                sb.stop("kill")
            except Exception:
                pass
            shutil.rmtree(home, ignore_errors=True)
        else:
            print(f"sandbox kept: INNOTIER_HOME={home}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
