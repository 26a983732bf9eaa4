#!/usr/bin/env python3
"""Mover figures at size: copy throughput vs `cp -a`, writes blocked, unavailability offline vs pre-copy, tpmC dip.

    sudo .venv/bin/python bench/move_bench.py [--warehouses 40] [--repeat 3] [--clients 4]
                                              [--components datadir,redo] [--keep]

What it does (root: it mounts a tmpfs):
1. a MariaDB sandbox (datadir on the root file system) with a TPC-C schema of W warehouses
   (``tuner.tpcc.loader``; W=40 is about 4 GB);
2. copy throughput: the mover's copy (read, xxh3 block digests, write, fsync, read back from
   the target's medium) against ``cp -a`` of the same stopped datadir to the same tmpfs, page
   cache warm for both, median of ``--repeat``;
3. for each component (whole datadir, redo only): one move to the tmpfs with an offline copy
   and one with the online pre-copy, each while a TPC-C New-Order load runs
   (``--clients`` connections that reconnect through the restart and count the
   transactions that fail meanwhile as errors), and the move back between them;
   per move: server unavailable (stop to accepting connections, from the journal), writes
   blocked (read lock for the sample + down), the plan's estimate, bytes copied while
   stopped, and the tpmC (New-Order commits a minute) in the minute before vs the minute
   containing the move, the lowest 5-second rate, and the errors.
Prints the figures with the load average; the machine is shared, so read them as such.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from datadir_mover.move import plan as planmod  # noqa: E402
from datadir_mover.move.copy import copy_tree, walk  # noqa: E402
from datadir_mover.move.executor import Executor  # noqa: E402
from tuner.core import sandbox as sbx  # noqa: E402
from tuner.core.server import inspect  # noqa: E402
from tuner.tpcc import new_order, schema  # noqa: E402
from tuner.tpcc.loader import load as tpcc_load  # noqa: E402
from tuner.tpcc.session import Rollback, Session  # noqa: E402
from tuner.tpcc.terminal import Terminal  # noqa: E402


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------------------- the load


class NewOrderLoad:
    """``clients`` threads running TPC-C New-Order transactions (statements mode, no keying or think time).

    Each thread reconnects when the server goes away and counts the transaction that failed
    as an error; commits are counted per second.  (The built-in driver gains the same
    ride-through; until then this is the bench's own.)
    """

    def __init__(self, spec, warehouses: int, clients: int):
        self.spec = spec.with_database("tpcc")
        conn = self.spec.connect()
        self.constants = schema.run_constants(conn, "tpcc")
        conn.close()
        self.warehouses, self.clients = warehouses, clients
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.commits: dict[int, int] = {}  # whole second (monotonic) -> New-Order commits
        self.errors: list[float] = []  # monotonic times of failed transactions
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)

    def _client(self, number: int) -> None:
        term = Terminal.for_client(number, self.warehouses, self.constants)
        session = None
        while not self.stop.is_set():
            try:
                if session is None:
                    session = Session(self.spec, autocommit=False)
                new_order.run_statements(session, new_order.make_input(term))
                with self.lock:
                    sec = int(time.monotonic())
                    self.commits[sec] = self.commits.get(sec, 0) + 1
            except Rollback:
                pass  # the 1% that TPC-C rolls back on purpose
            except Exception:
                with self.lock:
                    self.errors.append(time.monotonic())
                if session is not None:
                    session.close()
                session = None
                time.sleep(0.1)

    def tpm(self, t0: float, t1: float) -> float:
        with self.lock:
            n = sum(c for s, c in self.commits.items() if t0 <= s < t1)
        return n * 60.0 / max(1.0, t1 - t0)

    def lowest_5s(self, t0: float, t1: float) -> float:
        with self.lock:
            per = [sum(self.commits.get(s, 0) for s in range(a, a + 5)) * 12.0
                   for a in range(int(t0), max(int(t0) + 1, int(t1) - 4))]
        return min(per) if per else 0.0

    def errors_between(self, t0: float, t1: float) -> int:
        with self.lock:
            return sum(1 for e in self.errors if t0 <= e < t1)


# ---------------------------------------------------------------------------- moves


def move(sandbox: str, component: str, to: str, precopy: bool) -> dict:
    spec = sbx.Sandbox.load(sandbox).connection_spec()
    plan = planmod.build(planmod.MoveRequest(component, to, precopy=precopy), spec)
    ex = Executor.create(plan)
    t0 = time.monotonic()
    result = ex.run()
    result["wall_s"] = time.monotonic() - t0
    result["finalize"] = ex.finalize()
    result["estimate_s"] = plan.estimates["downtime_with_precopy_s" if precopy else "downtime_s"]
    result["plan_estimates"] = plan.estimates
    # wall clock -> the monotonic clock the load counts on
    result["stop_began_mono"] = ex.journal.data("SHUTDOWN").get("stop_began_at", time.time()) - time.time() + \
        time.monotonic()
    return result


def measured_move(load: NewOrderLoad, sandbox: str, component: str, to: str, precopy: bool, settle: float) -> dict:
    time.sleep(settle)
    m0 = time.monotonic()
    r = move(sandbox, component, to, precopy)
    m1 = time.monotonic()
    time.sleep(max(settle, 30.0))  # the minute around the stop is complete
    minute_from = max(m0, r["stop_began_mono"] - 30)
    r["tpm_before"] = load.tpm(m0 - 60, m0)
    r["tpm_minute_of_move"] = load.tpm(minute_from, minute_from + 60)
    r["tpm_lowest_5s"] = load.lowest_5s(m0, m1 + settle)
    r["errors"] = load.errors_between(m0, m1 + settle)
    return r


def report_move(label: str, r: dict) -> None:
    copy = r.get("copy") or {}
    pre = r.get("precopy") or {}
    passes = pre.get("passes") or []
    vs = r.get("verify_server") or {}
    print(f"  {label}: unavailable {r.get('downtime_s', float('nan')):.2f} s (plan estimated {r['estimate_s']:.1f} s); "
          f"writes blocked {r.get('writes_blocked_s', float('nan')):.2f} s; verified {r.get('until_verified_s', 0):.2f} s "
          f"after the stop ({vs.get('mode')}: {vs.get('tables')} tables, "
          f"{len(vs.get('changed_since_start') or [])} changed by clients since the start)")
    print(f"      copied while stopped: {copy.get('bytes', 0) / 2**20:.0f} MiB written, {copy.get('files', 0)} files "
          f"({copy.get('files_delta', 0)} as block deltas, {copy.get('files_unchanged_since_precopy', 0)} unchanged) "
          f"in {copy.get('seconds', 0):.2f} s" + (
              f"; pre-copy {len(passes)} passes: " + ", ".join(
                  f"{p['seconds']:.1f} s/{p['bytes_written'] / 2**20:.0f} MiB" for p in passes) if passes else ""))
    print(f"      TPC-C: {r['tpm_before']:.0f} tpmC in the minute before, {r['tpm_minute_of_move']:.0f} in the minute "
          f"around the stop, lowest 5 s {r['tpm_lowest_5s']:.0f} tpmC; {r['errors']} failed transactions; "
          f"move wall time {r['wall_s']:.1f} s")


# ---------------------------------------------------------------------------- copy vs cp -a


def copy_ratio(src: str, tier: str, repeat: int) -> tuple[float, float, int]:
    ours, cp = [], []
    nbytes = sum(f.stat().st_size for f in Path(src).rglob("*") if f.is_file())
    subprocess.run(["cat"] + [str(f) for f in Path(src).rglob("*") if f.is_file()], stdout=subprocess.DEVNULL,
                   check=True)  # page cache warm for both
    for i in range(repeat):
        d1 = Path(tier, f"ours-{i}")
        d1.mkdir()
        t0 = time.monotonic()
        copy_tree(src, d1, walk(src), verify=True, stable=True)
        ours.append(time.monotonic() - t0)
        shutil.rmtree(d1)
        d2 = Path(tier, f"cp-{i}")
        t0 = time.monotonic()
        subprocess.run(["cp", "-a", src, str(d2)], check=True)
        cp.append(time.monotonic() - t0)
        shutil.rmtree(d2)
    return statistics.median(ours), statistics.median(cp), nbytes


# ---------------------------------------------------------------------------- main


def datadir_bytes(spec) -> int:
    d = inspect(spec).datadir
    return sum(f.stat().st_size for f in Path(d).rglob("*") if f.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warehouses", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3, help="copy-vs-cp runs (median)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--components", default="datadir,redo")
    ap.add_argument("--tmpfs-size", default="12G")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds of load before and after each move")
    ap.add_argument("--keep", action="store_true", help="keep the sandbox and mount (for inspection)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("move_bench: run as root (it mounts a tmpfs)", file=sys.stderr)
        return 2
    home = Path(tempfile.mkdtemp(prefix="ih-mvb-", dir="/var/tmp"))  # the root file system
    os.environ["INNOTIER_HOME"] = str(home)
    tier = home / "tier"
    tier.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.tmpfs_size}", "tmpfs", str(tier)], check=True)
    sb = None
    load = None
    try:
        sb = sbx.create("mvb", options={"innodb_buffer_pool_size": "1G", "innodb_log_file_size": "512M"})
        sb.start()
        spec = sb.connection_spec()
        t0 = time.monotonic()
        tpcc_load(spec, warehouses=args.warehouses, database="tpcc", drop=True, progress=False)
        print(f"data: TPC-C {args.warehouses} warehouses, datadir {datadir_bytes(spec) / 2**20:.0f} MiB on "
              f"the root file system, loaded in {time.monotonic() - t0:.0f} s; {os.uname().release}; "
              f"{inspect(spec).version}")
        home_dir = sb.datadir

        sb.stop("clean")
        print(f"load average before the copy test: {loadavg()} (shared machine: other helpers running)")
        ours, cp, nbytes = copy_ratio(home_dir, str(tier), args.repeat)
        print(f"copy of the stopped datadir ({nbytes / 2**20:.0f} MiB) root fs -> tmpfs, page cache warm, "
              f"median of {args.repeat}:")
        print(f"  innotier copy (xxh3, fsync, read-back): {ours:.2f} s = {nbytes / ours / 2**20:.0f} MiB/s")
        print(f"  cp -a:                                  {cp:.2f} s = {nbytes / cp / 2**20:.0f} MiB/s")
        print(f"  throughput ratio innotier / cp -a: {cp / ours:.2f}  (load average now {loadavg()})")
        sb = sbx.Sandbox.load("mvb")
        sb.start()

        load = NewOrderLoad(spec, args.warehouses, args.clients)
        load.start()
        time.sleep(max(args.settle, 30.0))  # a baseline minute starts filling
        for comp in [c.strip() for c in args.components.split(",") if c.strip()]:
            print(f"{comp} move root fs -> tmpfs with {args.clients} New-Order clients running "
                  f"(load average {loadavg()}):")
            results = {}
            for precopy in (False, True):
                to = str(tier / f"{comp}-{'pre' if precopy else 'off'}")
                back = inspect(sbx.Sandbox.load("mvb").connection_spec()).locations()[comp]
                r = measured_move(load, "mvb", comp, to, precopy, args.settle)
                results[precopy] = r
                report_move("with pre-copy   " if precopy else "offline copy    ", r)
                move("mvb", comp, back, False)
            d0, d1 = results[False].get("downtime_s"), results[True].get("downtime_s")
            if d0 and d1:
                print(f"  pre-copy unavailability = {d1 / d0:.2f} of the offline move's "
                      f"(writes blocked {results[True].get('writes_blocked_s', 0) / max(1e-9, results[False].get('writes_blocked_s', 1)):.2f})")
        print(f"load average at the end: {loadavg()}")
    finally:
        if load is not None:
            load.close()
        if not args.keep:
            if sb is not None:
                try:
                    sbx.Sandbox.load("mvb").destroy(force=True)
                except Exception:
                    pass
            subprocess.run(["umount", str(tier)], check=False)
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
