#!/usr/bin/env python3
"""Mover figures: downtime of a datadir move with and without the online pre-copy, and copy throughput vs `cp -a`.

    sudo .venv/bin/python bench/move_bench.py [--warehouses 4] [--repeat 3] [--keep]

What it does (root: it mounts a tmpfs):
1. a MariaDB sandbox with a TPC-C schema of W warehouses (tuner.tpcc.loader; until that
   exists, a schema of our own of about the same size, and it says so), a light writer
   running throughout so the hot files (redo, ibdata, undo, one table) really change;
2. ``--repeat`` datadir moves from the root file system to a tmpfs and back, without and
   then with ``--precopy``; downtime = from the stop to the server accepting connections
   again (the journal's SHUTDOWN and START records), and until verified;
3. copy throughput of the mover's copy (read, xxh3, write, fsync, read back) against
   ``cp -a`` of the same stopped datadir to the same tmpfs, page cache warm for both,
   median of ``--repeat``.
Prints medians and ratios; the machine is shared and noisy, so read them as such.
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
sys.path.insert(0, str(REPO / "tests" / "move"))


def _load(spec, warehouses: int) -> str:
    try:
        from tuner.tpcc.loader import load
    except ModuleNotFoundError:
        import mvhelpers

        conn = spec.connect()
        mvhelpers.load_own_schema(spec)
        cur = conn.cursor()
        # grow it to roughly W warehouses' worth (a TPC-C warehouse is ~100 MB of InnoDB files)
        target = warehouses * 100 << 20
        while _datadir_bytes(spec) < target:
            cur.execute("INSERT INTO mvdata.olines SELECT o + (SELECT MAX(o) FROM mvdata.olines), n, amount "
                        "FROM mvdata.olines")
        conn.close()
        return f"own schema grown to ~{warehouses} TPC-C warehouses' size (tuner.tpcc.loader not available)"
    load(spec, warehouses=warehouses, database="tpcc", drop=True, progress=False)
    return f"TPC-C, {warehouses} warehouses"


def _datadir_bytes(spec) -> int:
    from tuner.core.server import inspect

    d = inspect(spec).datadir
    return sum(f.stat().st_size for f in Path(d).rglob("*") if f.is_file())


def _writer(spec, stop: threading.Event, paused: threading.Event) -> None:
    """One small update every 20 ms while the server runs before a move's shutdown (paused from SHUTDOWN to COMMIT)."""
    conn = None
    while not stop.is_set():
        if paused.is_set():
            conn = None
            time.sleep(0.02)
            continue
        try:
            if conn is None:
                conn = spec.with_database(None).connect(connection_timeout=1)
                cur = conn.cursor()
                cur.execute("CREATE DATABASE IF NOT EXISTS bench")
                cur.execute("CREATE TABLE IF NOT EXISTS bench.hot (id INT PRIMARY KEY, v BIGINT) ENGINE=InnoDB")
                cur.execute("INSERT IGNORE INTO bench.hot VALUES (1, 0)")
            conn.cursor().execute("UPDATE bench.hot SET v = v + 1 WHERE id = 1")
        except Exception:
            conn = None
            time.sleep(0.1)
        time.sleep(0.02)


PAUSED = threading.Event()


def _pause_writer_from_shutdown(state: str) -> None:
    # the writer makes the hot files change during the pre-copy; from SHUTDOWN on, the mover compares
    # checksums taken before the stop with those after the start, so writes wait for the commit
    if state == "SHUTDOWN":
        PAUSED.set()
    elif state == "COMMIT":
        PAUSED.clear()


def _move(sandbox: str, to: str, precopy: bool) -> dict:
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor
    from tuner.core.sandbox import Sandbox

    spec = Sandbox.load(sandbox).connection_spec()
    plan = planmod.build(planmod.MoveRequest("datadir", to, precopy=precopy), spec)
    ex = Executor.create(plan)
    ex.on_state = _pause_writer_from_shutdown
    result = ex.run()
    ex.finalize()
    result["estimate"] = plan.estimates["downtime_with_precopy_s" if precopy else "downtime_s"]
    return result


def _copy_ratio(src: str, tier: str, repeat: int) -> tuple[float, float, int]:
    from datadir_mover.move.copy import copy_tree, walk

    ours, cp = [], []
    nbytes = sum(f.stat().st_size for f in Path(src).rglob("*") if f.is_file())
    for f in Path(src).rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                while fh.read(1 << 20):
                    pass
    for i in range(repeat):
        d1 = Path(tier, f"ours-{i}")
        d1.mkdir()
        t0 = time.monotonic()
        copy_tree(src, d1, walk(src), verify=True)
        ours.append(time.monotonic() - t0)
        shutil.rmtree(d1)
        d2 = Path(tier, f"cp-{i}")
        t0 = time.monotonic()
        subprocess.run(["cp", "-a", src, str(d2)], check=True)
        cp.append(time.monotonic() - t0)
        shutil.rmtree(d2)
    return statistics.median(ours), statistics.median(cp), nbytes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warehouses", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the sandbox and mount (for inspection)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("move_bench: run as root (it mounts a tmpfs)", file=sys.stderr)
        return 2
    home = Path(tempfile.mkdtemp(prefix="ih-mvb-", dir="/tmp"))
    os.environ["INNOTIER_HOME"] = str(home)
    from tuner.core import sandbox as sbx

    tier = home / "tier"
    tier.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6G", "tmpfs", str(tier)], check=True)
    sb = None
    stop = threading.Event()
    try:
        sb = sbx.create("mvb", options={"innodb_buffer_pool_size": "512M", "innodb_log_file_size": "96M"})
        sb.start()
        spec = sb.connection_spec()
        t0 = time.monotonic()
        what = _load(spec, args.warehouses)
        size = _datadir_bytes(spec)
        print(f"data: {what}; datadir {size / 2**20:.0f} MiB (loaded in {time.monotonic() - t0:.0f} s)")
        writer = threading.Thread(target=_writer, args=(spec, stop, PAUSED), daemon=True)
        writer.start()
        home_dir = sb.datadir
        rows = {False: [], True: []}
        for precopy in (False, True):
            for i in range(args.repeat):
                out = _move("mvb", str(tier / f"d-{int(precopy)}-{i}"), precopy)
                rows[precopy].append(out)
                _move("mvb", home_dir, False)
        stop.set()
        print(f"datadir move root fs -> tmpfs, median of {args.repeat} (light writer running):")
        for precopy in (False, True):
            down = statistics.median(r["downtime_s"] for r in rows[precopy])
            ver = statistics.median(r["until_verified_s"] for r in rows[precopy])
            blocked = statistics.median(r.get("writes_blocked_s", 0) for r in rows[precopy])
            est = statistics.median(r["estimate"] for r in rows[precopy])
            copied = statistics.median(r["copy"].get("bytes", 0) for r in rows[precopy]) / 2**20
            print(f"  {'with pre-copy   ' if precopy else 'without pre-copy'}: server unavailable {down:.2f} s "
                  f"(plan estimated {est:.1f} s), verified {ver:.2f} s after the stop; writes blocked "
                  f"{blocked:.2f} s in all (read lock for checksums, down, read lock until verified); "
                  f"{copied:.0f} MiB copied while stopped")
        d0 = statistics.median(r["downtime_s"] for r in rows[False])
        d1 = statistics.median(r["downtime_s"] for r in rows[True])
        print(f"  pre-copy downtime ratio: {d1 / d0:.2f} of the offline move")
        sb.stop("clean")
        ours, cp, nbytes = _copy_ratio(sb.datadir, str(tier), args.repeat)
        print(f"copy of the stopped datadir ({nbytes / 2**20:.0f} MiB) root fs -> tmpfs, page cache warm, "
              f"median of {args.repeat}:")
        print(f"  innotier copy (xxh3, fsync, read-back verify): {ours:.2f} s = {nbytes / ours / 2**20:.0f} MiB/s")
        print(f"  cp -a:                                          {cp:.2f} s = {nbytes / cp / 2**20:.0f} MiB/s")
        print(f"  throughput ratio innotier / cp -a: {cp / ours:.2f}")
    finally:
        stop.set()
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
