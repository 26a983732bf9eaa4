"""`innotier placement measure|tier|advise|show`: where the I/O goes, and what belongs on the fast tier."""

from __future__ import annotations

import argparse

from datadir_mover.journaled_args import confirm
from tuner.core.cliutil import add_connection_args, connection_from_args, print_json, print_table
from tuner.core.errors import UsageError
from tuner.core.units import human_size, parse_page_size, parse_size
from tuner.placement import advisor, apply, check_cli, measure, report, tiercost
from tuner.placement.queueing import QUEUE_DEPTH
from tuner.placement.store import PlacementStore
from tuner.tpcc.config import RunConfig

HELP = "where the I/O goes and what belongs on the fast tier: measure, tier, advise, check, apply, show"


def register(sub) -> None:
    p = sub.add_parser("placement", help=HELP, description=HELP + " (docs/placement.md)")
    ps = p.add_subparsers(dest="placement_cmd", required=True)

    m = ps.add_parser("measure", help="record per-file and per-table I/O during a window (performance_schema)")
    add_connection_args(m)
    what = m.add_mutually_exclusive_group(required=True)
    what.add_argument("--seconds", type=float, help="observe the server's own traffic for N seconds")
    what.add_argument("--during-tpcc", action="store_true", help="run the built-in TPC-C and measure its window")
    m.add_argument("--interval", type=float, default=5.0, help="seconds between snapshots (default 5)")
    m.add_argument("--clients", type=int, default=8, help="TPC-C terminals (with --during-tpcc)")
    m.add_argument("--warmup", type=float, default=10.0, help="TPC-C warm-up seconds, not measured")
    m.add_argument("--duration", type=float, default=60.0, help="TPC-C measured seconds")
    m.add_argument("--mode", default="procedures", help="TPC-C mode: procedures or statements")
    _common(m, png=True)
    m.set_defaults(func=cmd_measure)

    t = ps.add_parser("tier", help="price a tier in the same terms (fio: page-size random read, write+fsync, "
                                   "sequential bandwidth)")
    t.add_argument("--mount", required=True, help="the tier's mount point")
    t.add_argument("--page-size", default="16k", help="InnoDB page size of the random jobs (default 16k)")
    t.add_argument("--size", default="256M", help="fio's file size (default 256M)")
    t.add_argument("--runtime", type=int, default=10, help="seconds per job (default 10, four jobs)")
    _common(t)
    t.set_defaults(func=cmd_tier)

    a = ps.add_parser("advise", help="what to place on the tier for a budget, the predicted saving and the curve")
    a.add_argument("--budget", required=True, help="bytes of the fast tier to fill, e.g. 64M, 64G")
    a.add_argument("--tier", help="the fast tier: a tier id or mount point characterized by `placement tier` "
                                  "(default: the newest)")
    a.add_argument("--here", help="the tier the files are on now (prices what is counted without wait times)")
    a.add_argument("--profile", help="an I/O profile id (default: the newest)")
    _common(a, png=True)
    a.set_defaults(func=cmd_advise)

    c = ps.add_parser("check", help="check a stored advice by measurement: a sweep of none / the pick / naive "
                                    "picks / everything, predicted beside measured")
    check_cli.add_arguments(c)
    _common(c)
    c.set_defaults(func=check_cli.cmd_check)

    ap = ps.add_parser("apply", help="move a stored advice's tables onto the tier online (its components: the "
                                     "commands, a restart each)")
    ap.add_argument("--advice", help="a stored advice id or prefix (default: the newest)")
    ap.add_argument("--to", required=True, metavar="ROOT", help="the tier directory the tables go to")
    ap.add_argument("--i-accept-volatile", action="store_true",
                    help="a root on tmpfs/ramfs/zram without persistence: a power loss loses the tables")
    ap.add_argument("--persist-backing", metavar="DIR",
                    help="the `innotier persist` backing that keeps a volatile root")
    ap.add_argument("--plan", action="store_true", help="print what would move, move nothing")
    ap.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_connection_args(ap)
    ap.add_argument("--results", metavar="PATH", help="results database (default $INNOTIER_HOME/results.db)")
    ap.set_defaults(func=cmd_apply)

    s = ps.add_parser("show", help="stored profiles and tiers, or one profile's files")
    s.add_argument("profile", nargs="?", help="a profile id (or prefix)")
    _common(s, png=True)
    s.set_defaults(func=cmd_show)


def _common(parser: argparse.ArgumentParser, png: bool = False) -> None:
    parser.add_argument("--results", metavar="PATH", help="results database (default $INNOTIER_HOME/results.db)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    if png:
        parser.add_argument("--png", metavar="PATH", help="also draw the picture into PATH")


def cmd_measure(args) -> int:
    if args.interval <= 0:
        raise UsageError(f"--interval {args.interval:g} is not valid; give a positive number of seconds")
    if args.seconds is not None and args.seconds < args.interval:
        raise UsageError(f"--seconds {args.seconds:g} is shorter than --interval {args.interval:g}; measure for "
                         "at least one interval (several, for an uncertainty)")
    spec = connection_from_args(args)
    tpcc = None
    if args.during_tpcc:
        tpcc = RunConfig(clients=args.clients, warmup=args.warmup, duration=args.duration, mode=args.mode,
                         interval=args.interval, database=args.database or "tpcc").validate()
    profile = measure.measure(spec.with_database(None), seconds=args.seconds, interval=args.interval, tpcc=tpcc)
    with PlacementStore(args.results) as store:
        store.put_profile(profile)
    _show_profile(profile, args)
    return 0


def cmd_tier(args) -> int:
    cost = tiercost.characterize(args.mount, parse_page_size(args.page_size), parse_size(args.size, "--size"),
                                 args.runtime)
    with PlacementStore(args.results) as store:
        store.put_tier(cost)
    if args.json:
        print_json(cost.to_dict())
        return 0
    print(f"{cost.tier_id}: {cost.kind} {cost.mountpoint} ({cost.fs}, {cost.io_mode})")
    print(f"  {cost.page_size // 1024}k random read {cost.randread_s * 1e6:.1f} us, write {cost.write_s * 1e6:.1f} us "
          f"+ fsync {cost.fsync_s * 1e6:.1f} us, sequential read {cost.seqread_bps / 1e6:.0f} MB/s, "
          f"write {cost.seqwrite_bps / 1e6:.0f} MB/s")
    print(f"  capacity at depth {QUEUE_DEPTH}: {cost.randread_iops:,.0f} random reads/s, "
          f"{cost.randwrite_iops:,.0f} random writes/s")
    for note in cost.notes:
        print(f"note: {note}")
    return 0


def cmd_advise(args) -> int:
    budget = parse_size(args.budget, "--budget")
    with PlacementStore(args.results) as store:
        profile = store.profile(args.profile)
        target = store.tier(args.tier)
        here = store.tier(args.here) if args.here else None
    advice = advisor.advise(profile, target, budget, here)
    stored = advisor.stored(advice, here)
    with PlacementStore(args.results) as store:
        store.put_advice(stored)
    if args.png:
        report.write_curve_png(advice, args.png)
    if args.json:
        print_json(advice.to_dict() | {"advice_id": stored.advice_id})
        return 0
    print(f"advice {stored.advice_id}: profile {profile.profile_id} on tier {target.tier_id} ({target.mountpoint}), "
          f"budget {human_size(budget)}; {advice.method}")
    print(f"measured file I/O wait: {1000 * advice.measured_wait:.2f} ms per second of workload")
    print_table(report.advice_rows(advice), report.ADVICE_COLUMNS, title="predicted saving (wait ms per second)")
    print("gain against budget: " + ", ".join(f"{human_size(b)} {1000 * g:.2f}" for b, g in _few(advice.curve)))
    for note in advice.notes:
        print(f"note: {note}")
    if args.png:
        print(f"curve: {args.png}")
    return 0


def _few(points, n: int = 8):
    step = max(1, len(points) // n)
    return list(points[::step]) + ([points[-1]] if (len(points) - 1) % step else [])


def cmd_show(args) -> int:
    with PlacementStore(args.results) as store:
        if args.profile is None and not args.png:
            listing = {"profiles": store.profiles(), "tiers": [t.to_dict() for t in store.tiers()]}
            if args.json:
                print_json(listing)
            else:
                print_table(listing["profiles"], ["profile_id", "taken_at", "server", "workload"], title="I/O profiles")
                print_table([{"tier_id": t["tier_id"], "mount": t["mountpoint"], "kind": t["kind"],
                              "read us": f"{t['randread_s'] * 1e6:.1f}", "fsync us": f"{t['fsync_s'] * 1e6:.1f}"}
                             for t in listing["tiers"]], ["tier_id", "mount", "kind", "read us", "fsync us"],
                            title="tiers")
            return 0
        profile = store.profile(args.profile)
    _show_profile(profile, args)
    return 0


def _show_profile(profile, args) -> None:
    if args.png:
        report.write_profile_png(profile, args.png)
    if args.json:
        print_json(profile.to_dict())
        return
    wl = profile.workload
    print(f"{profile.profile_id}: {profile.server.get('flavor')} {profile.server.get('version')}, "
          f"{profile.seconds:.1f} s in {len(profile.intervals)} intervals, workload {wl.get('kind')}"
          + (f" (tpmC {wl['result'].get('tpmc'):.0f})" if wl.get("result", {}).get("tpmc") else ""))
    print_table(report.profile_rows(profile), report.PROFILE_COLUMNS, title="where the I/O time goes")
    for note in profile.notes:
        print(f"note: {note}")
    if args.png:
        print(f"picture: {args.png}")


def cmd_apply(args) -> int:
    with PlacementStore(args.results) as store:
        stored = store.advice(args.advice)
        profile = store.profile(stored.advice.profile_id)
    kinds = {c.key: c.kind for c in profile.candidates}
    request = apply.ApplyRequest(root=args.to, accept_volatile=args.i_accept_volatile,
                                 persist_backing=args.persist_backing)
    plan = apply.plan(stored, kinds, request, connection_from_args(args))
    apply.describe(plan)
    if args.plan or not plan.tables:
        return 0
    confirm(f"Move {len(plan.tables)} table(s) of advice {plan.advice_id} to {args.to} online?", args.yes)
    res = apply.execute(plan)
    for r in res.moved:
        print(f"moved {r['table']}: now in {r['file']} ({r['seconds']:.1f} s)")
    for comp, command in res.components:
        print(f"next, in a maintenance window: {command}")
    return 0
