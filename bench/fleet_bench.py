#!/usr/bin/env python3
"""Fleet figures on namespace hosts of this machine (needs root): sharded TPC-C and a fleet sweep.

Makes N hosts as network namespaces with their own sshd (the test harness, tests/fleet/nshosts.py),
installs innotier on them with `innotier fleet install`, then:

1. `innotier fleet tpcc` with one shard per host against a MariaDB sandbox on the bridge address:
   merged New-Orders (connect to disconnect) against the server's growth of sum(d_next_o_id), tpmC, and
   client CPU-seconds per 1000 New-Orders per shard, from which: shards one driver host of K cores
   carries before its CPU is the bottleneck = K / (CPU-s per New-Order x New-Orders per second per shard);
2. `innotier fleet sweep` of a two-cell spec on every host, against the same cell runs on one host
   (the spec with `repeats` = number of hosts, fresh INNOTIER_HOME, so both build their golden copy):
   wall times and their ratio.

All "hosts" share this machine's cores, so the sweep's speed-up here is bounded by them (and by the other
work on the machine: the load average is printed); on separate machines the cells run truly in parallel.

    .venv/bin/python bench/fleet_bench.py [--hosts 2] [--clients 8] [--duration 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fleet"))  # the namespace-host harness is shared with the tests

import nshosts  # noqa: E402

SPEC = """\
name: fleet-bench
server: {{flavor: mariadb}}
workload: {{driver: builtin, mode: procedures, warehouses: 1, warmup: 5, duration: {duration}, interval: 5}}
repeats: {repeats}
tiers:
  fast: {{kind: tmpfs, size: 512M}}
fixed: {{page_size: 16k, clients: 2, buffer_pool_size: 128M, flush_method: fsync, placement: fast}}
axes:
  doublewrite: ["ON", "OFF"]
"""


def cli(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit(f"innotier {' '.join(args[:2])} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def bench_tpcc(a, fleet, inv: Path, work: Path, sb, spec, cnf: Path) -> dict:
    """One fleet tpcc run: merged vs server New-Orders, client CPU per 1000 New-Orders per shard."""
    before = nshosts.sum_next_o_id(spec)
    cli("fleet", "tpcc", "-i", str(inv), "--clients", str(a.clients), "--warmup", "5", "--duration",
        f"{a.duration:g}", "--interval", "5", "--host", fleet.controller_addr, "--port", str(sb.port),
        "--defaults-file", str(cnf), "--lead", "60", "--out", str(work / "tpcc"), "-o", str(work / "merged.json"))
    after = nshosts.sum_next_o_id(spec)
    merged = json.loads((work / "merged.json").read_text())
    cores = os.cpu_count() or 1
    shards = []
    for s in merged["extra"]["per_shard"]:
        res = json.loads((work / "tpcc" / f"{s['host']}.json").read_text())
        all_no = res["extra"]["all_counts"]["new_order"]["commit"]
        cpu = res["extra"]["client_cpu_seconds"] + res["extra"]["parent_cpu_seconds"]
        per_1000 = cpu / all_no * 1000 if all_no else None
        no_per_s = s["tpmc"] / 60
        shards.append({"shard": s["shard"], "host": s["host"], "tpmc": s["tpmc"], "cpu_s": round(cpu, 2),
                       "cpu_s_per_1000_new_orders": round(per_1000, 3) if per_1000 else None,
                       "shards_per_driver_host": round(cores / (per_1000 / 1000 * no_per_s), 1)
                       if per_1000 and no_per_s else None})
    return {"clients": a.clients, "tpmc": merged["tpmc"], "nopm": merged["nopm"],
            "merged_new_orders": merged["extra"]["all_counts"]["new_order"]["commit"],
            "server_new_orders": after - before, "shards": shards, "driver_host_cores": cores}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--sweep-duration", type=float, default=10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("fleet_bench needs root (network namespaces, tmpfs mounts)")
    work = Path(tempfile.mkdtemp(prefix="itf-bench-", dir="/tmp"))
    os.environ["INNOTIER_HOME"] = str(work / "controller")
    out: dict = {"loadavg_start": open("/proc/loadavg").read().split()[:3], "hosts": a.hosts}
    fleet = nshosts.create_fleet(work / "fleet", a.hosts)
    try:
        idx = list(range(a.hosts))
        inv = fleet.write_inventory(work / "inv.yml", {"db": idx, "drivers": idx},
                                    extra={"innotier_install_packages": False})
        t = time.monotonic()
        cli("fleet", "install", "-i", str(inv))
        out["install_seconds"] = round(time.monotonic() - t, 1)

        # 1. sharded TPC-C
        with nshosts.bridge_sandbox(fleet, "fleetbench", warehouses=max(2, a.hosts), buffer_pool="512M") as srv:
            out["tpcc"] = bench_tpcc(a, fleet, inv, work, *srv[:3])

        # 2. fleet sweep against the same cell runs on one host
        spec_fleet = work / "fleet-bench.yaml"
        spec_fleet.write_text(SPEC.format(duration=f"{a.sweep_duration:g}", repeats=1))
        t = time.monotonic()
        cli("fleet", "sweep", str(spec_fleet), "-i", str(inv), "--results", str(work / "fleet.db"),
            "--out", str(work / "sweep-fleet"))
        fleet_s = time.monotonic() - t
        one = fleet.hosts[0]
        one.extra_vars["innotier_home"] = str(one.root / "home-single")
        inv1 = fleet.write_inventory(work / "inv1.yml", {"db": [0]})
        spec_one = work / "one" / "fleet-bench.yaml"
        spec_one.parent.mkdir()
        spec_one.write_text(SPEC.format(duration=f"{a.sweep_duration:g}", repeats=a.hosts))
        t = time.monotonic()
        cli("fleet", "sweep", str(spec_one), "-i", str(inv1), "--results", str(work / "one.db"),
            "--out", str(work / "sweep-one"))
        one_s = time.monotonic() - t
        out["sweep"] = {"cell_runs": 2 * a.hosts, "fleet_seconds": round(fleet_s, 1),
                        "one_host_seconds": round(one_s, 1), "speedup": round(one_s / fleet_s, 2)}
    finally:
        nshosts.destroy_fleet(fleet)
        subprocess.run(["rm", "-rf", str(work)], check=False)
    out["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    t = out["tpcc"]
    print(f"load average at start {' '.join(out['loadavg_start'])}, at end {' '.join(out['loadavg_end'])} "
          f"(other work on the machine shares its {t['driver_host_cores']} cores)")
    print(f"install on {a.hosts} hosts: {out['install_seconds']} s")
    print(f"fleet tpcc, {a.hosts} shards, {t['clients']} clients: tpmC {t['tpmc']:,.0f}, NOPM {t['nopm']:,.0f}; "
          f"New-Orders merged {t['merged_new_orders']} vs server {t['server_new_orders']}")
    for s in t["shards"]:
        print(f"  shard {s['shard']} on {s['host']}: tpmC {s['tpmc']:,.0f}, client CPU {s['cpu_s']} s, "
              f"{s['cpu_s_per_1000_new_orders']} CPU-s per 1000 New-Orders -> {s['shards_per_driver_host']} such "
              f"shards per {t['driver_host_cores']}-core driver host before its CPU is the bottleneck")
    w = out["sweep"]
    print(f"fleet sweep, {w['cell_runs']} cell runs: {w['fleet_seconds']} s on {a.hosts} hosts vs "
          f"{w['one_host_seconds']} s on one host ({w['speedup']}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
