#!/usr/bin/env python3
"""Cost of the live exporter: one scrape during a 64-client TPC-C run, and tpmC with the exporter on vs off.

Prints:
  * scrape time (HTTP GET of /metrics, what Prometheus pays and what the driver's parent process
    spends): median / p90 / max of every scrape taken during the "on" runs, and the median of the
    exporter's own per-collector durations (innotier_collector_duration_seconds);
  * tpmC of ``--runs`` runs with the exporter on (scraped every ``--scrape-every`` seconds, as a
    Prometheus would) and ``--runs`` runs with it off, alternated on/off so drift hits both; medians
    and their ratio.

Usage:
  .venv/bin/python bench/exporter_bench.py                       # full: 3+3 runs of 60 s, 64 clients
  .venv/bin/python bench/exporter_bench.py --quick               # brief: 1+1 runs of 10 s
  .venv/bin/python bench/exporter_bench.py --sandbox NAME        # use a sandbox with `tpcc` loaded

Without --sandbox it creates a private sandbox in a temporary INNOTIER_HOME, loads --warehouses
warehouses and removes everything afterwards.  The machine is noisy: read medians and ratios, and
run the full figures when nothing else runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request


SERVER_COLLECTORS = ("innodb", "tpcc_schema")


def scrape_loop(url: str, every: float, stop: threading.Event, times: list[float], collector_secs: dict) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    while not stop.wait(every):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = resp.read().decode()
        times.append(time.perf_counter() - t0)
        for fam in text_string_to_metric_families(body):
            if fam.name == "innotier_collector_duration_seconds":
                for s in fam.samples:
                    collector_secs.setdefault(s.labels["collector"], []).append(s.value)


def one_run(spec, args, exporter_on: bool, scrape_times: list[float], collector_secs: dict) -> float:
    from exporters.live import start_live_exporter
    from tuner.core.measure import Measurement
    from tuner.tpcc.config import RunConfig
    from tuner.tpcc.driver import run

    cfg = RunConfig(clients=args.clients, warmup=args.warmup, duration=args.duration, interval=10.0,
                    database="tpcc")
    m = Measurement()
    if not exporter_on:
        return run(spec, cfg, measurement=m).tpmc
    info = {"tier": "bench", "clients": args.clients, "warehouses": args.warehouses, "driver": "builtin"}
    handle = start_live_exporter(m, "127.0.0.1:0", info, spec)
    stop = threading.Event()
    t = threading.Thread(target=scrape_loop, args=(handle.url, args.scrape_every, stop, scrape_times, collector_secs),
                         daemon=True)
    t.start()
    try:
        return run(spec, cfg, measurement=m).tpmc
    finally:
        stop.set()
        t.join(timeout=30)
        handle.stop()


def prepare(args):
    """(spec, cleanup): the bench's server with a loaded `tpcc` schema."""
    if args.sandbox:
        from tuner.core.sandbox import Sandbox

        spec = Sandbox.load(args.sandbox).connection_spec("tpcc")
        conn = spec.connect()
        try:
            cur = conn.cursor()
            cur.execute("SELECT COUNT(*) FROM warehouse")
            args.warehouses = int(cur.fetchone()[0])
        finally:
            conn.close()
        return spec, lambda: None
    home = tempfile.mkdtemp(prefix="ih-xbench-", dir="/tmp")
    os.environ["INNOTIER_HOME"] = home
    from tuner.core import sandbox as sbx
    from tuner.tpcc.loader import load

    sb = sbx.create("xbench", page_size="16k", options={"innodb_buffer_pool_size": args.buffer_pool})
    sb.start()

    def cleanup() -> None:
        try:
            sb.stop("kill")
        finally:
            shutil.rmtree(home, ignore_errors=True)

    try:
        print(f"loading {args.warehouses} warehouse(s) ...", flush=True)
        load(sb.connection_spec(), warehouses=args.warehouses, database="tpcc", drop=True, progress=False)
    except BaseException:
        cleanup()
        raise
    return sb.connection_spec("tpcc"), cleanup


def ms(x: float) -> str:
    return f"{x * 1e3:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--warehouses", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3, help="runs with the exporter on, and as many off")
    ap.add_argument("--duration", type=float, default=60.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--scrape-every", type=float, default=1.0, help="seconds between scrapes while on")
    ap.add_argument("--buffer-pool", default="512M")
    ap.add_argument("--sandbox", help="existing sandbox with a loaded `tpcc` schema")
    ap.add_argument("--quick", action="store_true", help="1+1 runs of 10 s after 3 s warm-up, 1 warehouse")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.duration, args.warmup = 1, 10.0, 3.0
        if not args.sandbox:
            args.warehouses = 1

    spec, cleanup = prepare(args)
    scrape_times: list[float] = []
    collector_secs: dict[str, list[float]] = {}
    on, off = [], []
    try:
        for i in range(args.runs):
            for exporter_on in ((True, False) if i % 2 == 0 else (False, True)):
                tpmc = one_run(spec, args, exporter_on, scrape_times, collector_secs)
                (on if exporter_on else off).append(tpmc)
                print(f"run {i + 1} exporter {'on ' if exporter_on else 'off'}: tpmC {tpmc:,.0f}", flush=True)
    finally:
        cleanup()

    print()
    print(f"clients {args.clients}, warehouses {args.warehouses}, {args.duration:g} s measured, "
          f"scrape every {args.scrape_every:g} s, cores {os.cpu_count()}")
    if scrape_times:
        st = sorted(scrape_times)
        print(f"scrape (HTTP GET /metrics) during the run: median {ms(statistics.median(st))}, "
              f"p90 {ms(st[int(0.9 * (len(st) - 1))])}, max {ms(st[-1])}  ({len(st)} scrapes)")
        for name, xs in sorted(collector_secs.items()):
            where = "server round trip" if name in SERVER_COLLECTORS else "in process"
            print(f"  collector {name:<12} median {ms(statistics.median(xs))}  ({where})")
        in_process = [sum(v) for v in zip(*(xs for n, xs in collector_secs.items() if n not in SERVER_COLLECTORS))]
        if in_process:
            print(f"  in-process collectors together: median {ms(statistics.median(in_process))} "
                  "(the rest of a scrape waits on the server under test and on the GIL)")
    med_on, med_off = statistics.median(on), statistics.median(off)
    print(f"tpmC exporter on : median {med_on:,.0f}  {[round(x) for x in on]}")
    print(f"tpmC exporter off: median {med_off:,.0f}  {[round(x) for x in off]}")
    if med_off:
        print(f"on / off: {med_on / med_off:.3f}")


if __name__ == "__main__":
    main()
