"""`innotier fleet ...`: install on hosts, sweeps on every `db` host, sharded TPC-C on the `drivers` hosts.

Everything goes through Ansible (ansible-runner driving the playbooks in tuner/fleet/playbooks), so the
inventory, SSH keys and host variables are the ones the DBA already maintains.  See docs/fleet.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tuner.core.cliutil import print_json
from tuner.core.durable import write_json_atomic
from tuner.core.errors import FleetError
from tuner.core.paths import innotier_home
from tuner.fleet import sweep as fleet_sweep
from tuner.fleet import tpcc as fleet_tpcc
from tuner.fleet.inventory import load_inventory
from tuner.fleet.runner import PLAYBOOKS, PlaybookRun, run_playbook
from tuner.fleet.wheelhouse import build_wheelhouse
from tuner.tpcc.config import MODES
from tuner.tpcc.tpcc_run_cli import print_result


def register(sub) -> None:
    p = sub.add_parser("fleet", help="several hosts through Ansible: install, fleet sweeps, sharded TPC-C drivers",
                       description="Run innotier on the hosts of an Ansible inventory (groups db and drivers). "
                                   f"The playbooks are in {PLAYBOOKS} and also work with ansible-playbook.")
    s = p.add_subparsers(dest="fleet_cmd", metavar="SUBCOMMAND")
    s.required = True

    pg = s.add_parser("ping", help="check every host answers over SSH")
    _inv(pg)
    pg.set_defaults(func=cmd_ping)

    pb = s.add_parser("playbooks", help="print where the shipped playbooks are (for ansible-playbook)")
    pb.set_defaults(func=cmd_playbooks)

    ins = s.add_parser("install", help="install this innotier on the hosts (offline, from a wheelhouse)")
    _inv(ins)
    ins.add_argument("--wheel", metavar="FILE", help="the innotier wheel to install (default: build it from this "
                                                      "innotier's source tree)")
    ins.add_argument("--hosts", default="all", metavar="PATTERN", help="inventory hosts or group (default all)")
    ins.set_defaults(func=cmd_install)

    t = s.add_parser("tpcc", help="one TPC-C run split into shards on the drivers hosts, merged into one result",
                     description="Each host of the drivers group runs `innotier tpcc run --shard I/N --start-at T`: "
                                 "its share of --clients on its own warehouses, from a common start. The results "
                                 "are fetched and merged (counts add, histograms merge exactly).")
    _inv(t)
    t.add_argument("--clients", type=int, required=True, help="terminals in total, shared out between the shards")
    t.add_argument("--warmup", type=float, default=10.0, metavar="S")
    t.add_argument("--duration", type=float, default=60.0, metavar="S")
    t.add_argument("--interval", type=float, default=10.0, metavar="S")
    t.add_argument("--mode", choices=MODES, default="procedures")
    t.add_argument("--warehouses", type=int, metavar="W", help="warehouses to use (default: all loaded)")
    t.add_argument("--workers", type=int, metavar="N", help="client processes per shard (default: one per core)")
    t.add_argument("--host", required=True, metavar="H", help="the server as the driver hosts reach it")
    t.add_argument("--port", type=int, default=3306, metavar="N")
    t.add_argument("--database", default="tpcc", metavar="DB")
    t.add_argument("--defaults-file", required=True, metavar="FILE",
                   help="controller file (mode 0600) with a [client] section: user and password; it reaches the "
                        "shards as a 0600 file, never on a command line or in Ansible's output")
    t.add_argument("--lead", type=float, default=45.0, metavar="S",
                   help="seconds from now to the shared start (SSH, copying, connecting); default 45. A shard "
                        "not ready by then refuses to start late; give more on busy or distant hosts")
    t.add_argument("--metrics-linger", type=float, default=0.0, metavar="S",
                   help="shards keep serving metrics S seconds after the run (hosts set innotier_metrics_listen)")
    t.add_argument("--group", default="drivers", help="inventory group of the driver hosts (default drivers)")
    t.add_argument("--out", metavar="DIR", help="where shard results and logs go (default $INNOTIER_HOME/fleet/...)")
    t.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    t.add_argument("--json", action="store_true")
    t.add_argument("-o", "--output", metavar="FILE", help="also write the merged result as JSON to FILE")
    t.set_defaults(func=cmd_tpcc)

    sw = s.add_parser("sweep", help="the same sweep on every db host in parallel, merged into one results database",
                      description="Each host of the db group runs `innotier sweep run` on its own copy of the spec "
                                  "(tiers named in its innotier_tiers host variable placed on its directories). Each "
                                  "host's results come back and are merged with a host dimension; `innotier sweep "
                                  "report RUN` then compares hosts. Run it again to resume every host.")
    sw.add_argument("spec", help="a spec file, or a shipped spec name")
    _inv(sw)
    sw.add_argument("--group", default="db", help="inventory group of the database hosts (default db)")
    sw.add_argument("--results", metavar="PATH", help="merged results database (default $INNOTIER_HOME/results.db)")
    sw.add_argument("--out", metavar="DIR", help="per-host specs, logs and fetched databases "
                                                 "(default $INNOTIER_HOME/fleet/sweep-NAME)")
    sw.add_argument("--dry-run", action="store_true", help="print the plan (and write the per-host specs) and stop")
    sw.add_argument("--json", action="store_true")
    sw.set_defaults(func=cmd_sweep)

    sn = s.add_parser("snapshot-results", help="(on a host) consistent copy of a results database, for fetching")
    sn.add_argument("--results", required=True, metavar="PATH")
    sn.add_argument("--to", required=True, metavar="PATH")
    sn.set_defaults(func=cmd_snapshot)


def _inv(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--inventory", required=True, metavar="INVENTORY", help="Ansible inventory (INI or YAML)")


def _report_hosts(run: PlaybookRun) -> None:
    for o in run.hosts.values():
        mark = "ok" if o.status == "ok" else o.status.upper()
        print(f"{o.host:20s} {mark}" + (f"  {o.message}" if o.message else ""))


def cmd_ping(args) -> int:
    load_inventory(args.inventory)
    with tempfile.TemporaryDirectory(prefix="innotier-fleet-") as d:
        run = run_playbook("ping", args.inventory, {}, Path(d))
    _report_hosts(run)
    return 0 if not run.failed_hosts else 11


def cmd_playbooks(args) -> int:
    print(PLAYBOOKS)
    for p in sorted(PLAYBOOKS.glob("*.yml")):
        print(f"  {p.name}")
    return 0


def cmd_install(args) -> int:
    load_inventory(args.inventory)
    work = innotier_home() / "fleet" / "install"
    house = build_wheelhouse(work, args.wheel, echo=lambda s: print(s, file=sys.stderr))
    extravars = {"innotier_wheelhouse": str(house.archive), "innotier_wheel": house.wheel.name,
                 "innotier_version": house.version, "fleet_hosts": args.hosts}
    run = run_playbook("install", args.inventory, extravars, work / "ansible")
    _report_hosts(run)
    if run.failed_hosts:
        raise FleetError(f"innotier {house.version} is not installed on {len(run.failed_hosts)} host(s): "
                         f"{', '.join(o.host for o in run.failed_hosts)}; fix the cause shown above and run again")
    return 0


def cmd_tpcc(args) -> int:
    inv = load_inventory(args.inventory)
    spec = fleet_tpcc.FleetTpccSpec(
        server_host=args.host, server_port=args.port, defaults_file=args.defaults_file, clients=args.clients,
        warmup=args.warmup, duration=args.duration, interval=args.interval, mode=args.mode, database=args.database,
        warehouses=args.warehouses, workers=args.workers, lead=args.lead, metrics_linger=args.metrics_linger,
        group=args.group)
    p = fleet_tpcc.plan(inv, spec, Path(args.out) if args.out else None)
    print(p.describe(), file=sys.stderr)
    if args.dry_run:
        return 0
    outcome = fleet_tpcc.apply(p, args.inventory)
    r = outcome.result
    if args.output:
        write_json_atomic(args.output, r.to_dict())
    if args.json:
        print_json(outcome.to_dict())
    else:
        print_result(r)
        for s in r.extra.get("per_shard", []):
            print(f"shard {s['shard']} on {s['host']}: {s['clients']} clients, warehouses {s['home_warehouses']}, "
                  f"tpmC {s['tpmc']:,.0f}, client CPU {s['client_cpu_seconds']} s")
    if not r.complete:
        print(f"innotier: the fleet run did not complete: {r.failure}", file=sys.stderr)
        return 8
    return 0


def cmd_sweep(args) -> int:
    inv = load_inventory(args.inventory)
    p = fleet_sweep.plan(inv, args.spec, Path(args.out) if args.out else None,
                         Path(args.results) if args.results else None, group=args.group)
    print(p.describe(), file=sys.stderr)
    if args.dry_run:
        return 0
    t0 = time.monotonic()
    outcome = fleet_sweep.apply(p, args.inventory)
    if args.json:
        print_json({**outcome.to_dict(), "seconds": round(time.monotonic() - t0, 1)})
    else:
        for h in p.hosts:
            o = outcome.playbook.hosts.get(h)
            state = "ok" if o and o.status == "ok" else (o.status.upper() if o else "NO ANSWER")
            print(f"{h:20s} {state:12s} {outcome.merged_cells.get(h, 0)} cells in the merged run"
                  + (f"  {o.message}" if o and o.message else ""))
        print(f"merged run {p.run_id} in {p.results} ({time.monotonic() - t0:.0f} s); "
              f"compare the hosts with `innotier sweep report {p.run_id} --results {p.results} -o DIR`")
    if outcome.failed:
        print(f"innotier: {len(outcome.failed)} host(s) did not finish: {', '.join(outcome.failed)}; their finished "
              "cells are kept; run the same command again to resume them", file=sys.stderr)
        return 11
    return 0


def cmd_snapshot(args) -> int:
    n = fleet_sweep.snapshot_results(Path(args.results), Path(args.to))
    print(f"{n} finished cells copied to {args.to}")
    return 0
