"""`innotier tiers list|create|destroy|bench`: detect, provision and characterize storage tiers."""

from __future__ import annotations

import argparse
import json
import sys

from tuner.core.errors import TierError, UsageError
from datadir_mover.tiers.registry import creatable
from datadir_mover.tiers.detect import detect_tiers, tier_for_path
from tuner.core.cliutil import print_json
from tuner.core.units import human_size, parse_size
from datadir_mover.tiers.provision import plan_create, plan_destroy
from datadir_mover.tiers import fio, fio_dax
from datadir_mover.tiers.plan import apply_plan
from datadir_mover.tiers.base import FILESYSTEMS, split_options
from datadir_mover.tiers.pmem import PAGE_CACHE_FILESYSTEMS, PMEM_SOURCES
from datadir_mover.tiers.raid import LEVELS
from datadir_mover.tiers.ramdisk import RAM_FILESYSTEMS
from datadir_mover.tiers.requests import (CreateRequest, PmemCreate, RaidCreate, RamdiskCreate, ThrottledCreate,
                                          ZramCreate)
from tuner.core.io_throttle import Limits


def register(sub) -> None:
    p = sub.add_parser("tiers", help="detect, create, destroy and benchmark storage tiers",
                       description="Storage tiers for InnoDB files: zram, tmpfs/ramfs, PMEM/DCPMM (DAX), "
                                   "md RAID, NVMe/SSD/HDD.")
    tsub = p.add_subparsers(dest="tiers_command", metavar="ACTION")
    tsub.required = True

    ls = tsub.add_parser("list", help="every mounted file system and unused block device, with probed facts",
                         description="List tiers: kind, file system, mount options, DAX (statx), O_DIRECT "
                                     "(probed), volatile, rotational, capacity, free; zram algorithm and "
                                     "compression ratio; md level, chunk and members.")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.add_argument("--all", action="store_true", help="include read-only, pseudo and system mounts")
    ls.set_defaults(func=cmd_list)

    cr = tsub.add_parser("create", help="create a tier (zram, ramdisk, pmem, raid, throttled); --dry-run prints the commands",
                         description="Create a tier.  Every kind takes --dry-run, which prints the exact commands "
                                     "and changes nothing.")
    csub = cr.add_subparsers(dest="kind", metavar="KIND")
    csub.required = True

    for name, provider in creatable().items():
        kp = csub.add_parser(name, help=provider.create_help, description=provider.create_help)
        CREATE_ARGUMENTS[name](kp)
        kp.add_argument("--dry-run", action="store_true", help="print the plan (exact commands) and change nothing")
        kp.add_argument("--json", action="store_true", help="print JSON")
        kp.set_defaults(func=cmd_create)

    de = tsub.add_parser("destroy", help="unmount a tier and free it (zram: reset and hot_remove)",
                         description="Destroy the tier mounted at PATH (or an unmounted /dev/zramN).  Refuses "
                                     "system mounts, and tiers that still hold files unless --force.")
    de.add_argument("path", metavar="PATH", help="the tier's mount point, or /dev/zramN")
    de.add_argument("--force", action="store_true", help="discard files still on the tier")
    de.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    de.add_argument("--json", action="store_true", help="print JSON")
    de.set_defaults(func=cmd_destroy)

    be = tsub.add_parser("bench", help="characterize a tier with fio (4k sync random read/write+fsync, "
                                       "sequential libaio QD32)",
                         description="Run fio on the tier holding PATH: 4 KiB sync random read, 4 KiB random "
                                     "write with fsync after each, 1 MiB sequential read and write with libaio "
                                     "queue depth 32; O_DIRECT where the tier accepts it.  Results are stored "
                                     "under $INNOTIER_HOME/tiers/bench/.")
    be.add_argument("path", metavar="PATH", help="a directory on the tier")
    be.add_argument("--size", default="256M", help="fio file size (default 256M)")
    be.add_argument("--runtime", type=int, default=10, help="seconds per job (default 10; 4 jobs)")
    be.add_argument("--compress-percentage", type=int, metavar="PCT",
                    help="make fio's data this compressible (zram: InnoDB pages compress; default incompressible)")
    be.add_argument("--member-baseline", metavar="FILE",
                    help="md RAID: a stored bench of one member device, for the expected-vs-measured ratios")
    be.add_argument("--profile", choices=("standard", "dax"), default="standard",
                    help="standard: the four jobs above; dax: the PMDK thesis's DAX-against-page-cache measurements "
                         "(sequential and random bandwidth through libaio and psync, open / append+fsync / unlink "
                         "latency, page-fault cost with and without MAP_SYNC)")
    be.add_argument("--against", metavar="MOUNT",
                    help="--profile dax: measure this second tier too and show the two side by side (e.g. the same "
                         "device without DAX)")
    be.add_argument("--json", action="store_true", help="print JSON")
    be.set_defaults(func=cmd_bench)


# ---- tiers create KIND: flags -> typed request (datadir_mover.tiers.requests) ----------------------

def _add_zram_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", required=True, help="uncompressed capacity (disksize), e.g. 4G")
    parser.add_argument("--algorithm", help="compression algorithm (default: the kernel's); "
                                            "the choices are in /sys/block/zramN/comp_algorithm")
    parser.add_argument("--fs", default="ext4", choices=FILESYSTEMS, help="file system (default ext4)")
    parser.add_argument("--mount", required=True, metavar="PATH", help="empty directory to mount it on")
    parser.add_argument("--options", metavar="OPTS", help="extra mount options, comma separated")


def _add_ramdisk_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fs", default="tmpfs", choices=RAM_FILESYSTEMS, help="tmpfs (default) or ramfs")
    parser.add_argument("--size", required=True, help="size limit, e.g. 4G (ramfs cannot enforce it)")
    parser.add_argument("--mount", required=True, metavar="PATH", help="empty directory to mount it on")
    parser.add_argument("--mode", default="0755", help="permissions of the root directory (default 0755)")
    parser.add_argument("--options", metavar="OPTS", help="extra mount options, comma separated")


def _add_pmem_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", choices=PMEM_SOURCES, default=None,
                        help="memmap: DRAM reserved with the memmap= kernel parameter (emulation, volatile); "
                             "nvdimm: a real NVDIMM/Optane DCPMM region (default: nvdimm when ndctl lists a "
                             "region, else memmap)")
    parser.add_argument("--memmap", default="4G!12G", metavar="SIZE!OFFSET",
                        help="memmap= value to reserve (memmap source; default 4G!12G: 4 GiB at 12 GiB); "
                             "the range must lie in usable RAM (see the BIOS-e820 lines in dmesg)")
    parser.add_argument("--namespace", default="namespace0.0", help="namespace to reconfigure (memmap source)")
    parser.add_argument("--region", default="region0", help="region to carve the namespace from (nvdimm source)")
    parser.add_argument("--size", help="namespace size (nvdimm source; default: the whole region)")
    parser.add_argument("--device", default=None,
                        help="the resulting block device (default /dev/pmemN for region N, /dev/pmem0 for memmap)")
    parser.add_argument("--fs", default="ext4", choices=PAGE_CACHE_FILESYSTEMS,
                        help="file system: ext4 or xfs with DAX; ext4, xfs or f2fs with --no-dax")
    parser.add_argument("--no-dax", dest="dax", action="store_false",
                        help="mount without DAX: the device used through the page cache (the DCPMM paper's "
                             "traditional file systems)")
    parser.add_argument("--mount", required=True, metavar="PATH", help="empty directory to mount it on")
    parser.add_argument("--options", metavar="OPTS", help="extra mount options, comma separated")


def _add_raid_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--level", type=int, required=True, choices=LEVELS, help="RAID level")
    parser.add_argument("--chunk", default="512K", help="chunk size (default 512K, mdadm's default)")
    parser.add_argument("--devices", nargs="+", required=True, metavar="DEV", help="member block devices")
    parser.add_argument("--name", default="innotier0", help="array name: /dev/md/NAME (default innotier0)")
    parser.add_argument("--fs", choices=FILESYSTEMS, help="make this file system on the array (default ext4 "
                                                          "when --mount is given)")
    parser.add_argument("--mount", metavar="PATH", help="mount the array here (empty directory)")
    parser.add_argument("--options", metavar="OPTS", help="extra mount options, comma separated")


def _add_throttled_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", required=True, help="capacity, e.g. 2G")
    parser.add_argument("--backing", required=True, metavar="FILE",
                        help="new file on a real disk that holds the tier's blocks (removed by `tiers destroy`)")
    parser.add_argument("--read-iops", type=int, metavar="N", help="read operations a second")
    parser.add_argument("--write-iops", type=int, metavar="N", help="write operations a second")
    parser.add_argument("--read-bps", metavar="SIZE", help="read bytes a second, e.g. 50M")
    parser.add_argument("--write-bps", metavar="SIZE", help="write bytes a second, e.g. 20M")
    parser.add_argument("--fs", default="ext4", choices=FILESYSTEMS, help="file system (default ext4)")
    parser.add_argument("--mount", required=True, metavar="PATH", help="empty directory to mount it on")
    parser.add_argument("--options", metavar="OPTS", help="extra mount options, comma separated")


CREATE_ARGUMENTS = {"zram": _add_zram_arguments, "ramdisk": _add_ramdisk_arguments, "pmem": _add_pmem_arguments,
                    "raid": _add_raid_arguments, "throttled": _add_throttled_arguments}


def request_from_args(args: argparse.Namespace) -> CreateRequest:
    """The typed create request the ``tiers create KIND`` flags describe."""
    options = tuple(split_options(args.options))
    if args.kind == "zram":
        return ZramCreate(size_bytes=parse_size(args.size, "--size"), mount=args.mount, fs=args.fs,
                          algorithm=args.algorithm, options=options)
    if args.kind == "ramdisk":
        return RamdiskCreate(size_bytes=parse_size(args.size, "--size"), mount=args.mount, fs=args.fs,
                             mode=args.mode, options=options)
    if args.kind == "pmem":
        return PmemCreate(mount=args.mount, source=args.source, memmap=args.memmap, namespace=args.namespace,
                          region=args.region, size_bytes=parse_size(args.size, "--size") if args.size else None,
                          device=args.device, fs=args.fs, options=options, dax=args.dax)
    if args.kind == "raid":
        if args.fs and not args.mount:
            raise UsageError("--fs needs --mount: give the directory to mount the new file system on")
        return RaidCreate(level=args.level, devices=tuple(args.devices), chunk_bytes=parse_size(args.chunk, "--chunk"),
                          name=args.name, fs=args.fs, mount=args.mount, options=options)
    if args.kind == "throttled":
        return ThrottledCreate(size_bytes=parse_size(args.size, "--size"), mount=args.mount, backing=args.backing,
                               limits=_limits_from_args(args), fs=args.fs, options=options)
    raise UsageError(f"cannot create tier kind {args.kind!r}; choose one of {', '.join(CREATE_ARGUMENTS)}")


def _limits_from_args(args: argparse.Namespace) -> Limits:
    for flag in ("read_iops", "write_iops"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be a positive number of operations a second")
    return Limits(read_iops=args.read_iops, write_iops=args.write_iops,
                  read_bps=parse_size(args.read_bps, "--read-bps") if args.read_bps else None,
                  write_bps=parse_size(args.write_bps, "--write-bps") if args.write_bps else None)


# ---- handlers ----------------------------------------------------------------------------------

def cmd_list(args: argparse.Namespace) -> int:
    tiers = detect_tiers(include_all=args.all)
    if args.json:
        print_json([t.to_dict() for t in tiers])
        return 0
    rows = []
    for t in tiers:
        rows.append({
            "mount": t.mountpoint or "-", "device": t.device, "kind": t.kind, "fs": t.fs or "-",
            "DAX": _yn(t.dax), "O_DIRECT": _yn(t.o_direct), "volatile": _yn(t.volatile),
            "rotational": _yn(t.rotational),
            "capacity": human_size(t.capacity_bytes) if t.capacity_bytes is not None else "-",
            "free": human_size(t.free_bytes) if t.free_bytes is not None else "-",
            "details": t.summary(),
        })
    _wide_table(rows, ["mount", "device", "kind", "fs", "DAX", "O_DIRECT", "volatile", "rotational",
                       "capacity", "free", "details"], title="storage tiers")
    for t in tiers:
        for note in t.notes:
            print(f"  {t.mountpoint or t.device}: {note}")
    return 0


def cmd_create(args: argparse.Namespace) -> int:
    plan = plan_create(request_from_args(args))
    if args.dry_run:
        _print_plan(plan, args.json)
        return 0
    result = _apply_or_explain(plan, args.json)
    tier = None
    mount = getattr(args, "mount", None)
    if mount:
        tier = tier_for_path(mount)
    if args.json:
        print_json({"plan": plan.to_dict(), "executed": result.executed, "tier": tier.to_dict() if tier else None})
    elif tier:
        print(f"created: {tier.kind} on {tier.mountpoint} ({tier.device}, {tier.fs}); "
              f"O_DIRECT {_yn(tier.o_direct)}, DAX {_yn(tier.dax)}, volatile {_yn(tier.volatile)}")
    else:
        print(f"done: {plan.title}")
    return 0


def cmd_destroy(args: argparse.Namespace) -> int:
    plan = plan_destroy(args.path, force=args.force)
    if args.dry_run:
        _print_plan(plan, args.json)
        return 0
    result = _apply_or_explain(plan, args.json)
    if args.json:
        print_json({"plan": plan.to_dict(), "executed": result.executed})
    else:
        print(f"destroyed: {args.path}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    import os

    path = os.path.abspath(args.path)
    if not os.path.isdir(path):
        raise UsageError(f"{path} is not a directory; give a directory on the tier to test")
    if args.compress_percentage is not None and not 0 <= args.compress_percentage <= 100:
        raise UsageError("--compress-percentage must be between 0 and 100")
    baseline = None
    if args.member_baseline:
        try:
            with open(args.member_baseline) as fh:
                baseline = json.load(fh)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--member-baseline {args.member_baseline}: cannot read it ({exc}); "
                             "give a JSON file stored by `innotier tiers bench`") from None
    size = parse_size(args.size, "--size")
    if args.profile == "dax":
        return _bench_dax(path, size, args)
    if args.against:
        raise UsageError("--against compares tiers with --profile dax only; add --profile dax or drop --against")
    tier = tier_for_path(path)
    fio.fio_version()
    result = _run_bench_with_progress(fio, tier, path, size, args, baseline)
    if args.json:
        print_json(result.to_dict())
        return 0
    _print_bench(result)
    return 0


def _bench_dax(path: str, size: int, args: argparse.Namespace) -> int:
    import os

    if args.member_baseline or args.compress_percentage is not None:
        raise UsageError("--member-baseline and --compress-percentage belong to the standard profile; drop them "
                         "with --profile dax")
    sides = [path]
    if args.against:
        other = os.path.abspath(args.against)
        if not os.path.isdir(other):
            raise UsageError(f"--against {other} is not a directory; give a directory on the tier to compare with")
        sides.append(other)
    fio.fio_version()
    result = fio_dax.compare([(tier_for_path(p), p) for p in sides], size, args.runtime)
    if args.json:
        print_json(result.to_dict())
        return 0
    _print_dax(result)
    return 0


def _print_dax(result) -> None:
    heads = [f"{r.tier.get('kind')} {r.tier.get('mountpoint')} ({r.tier.get('fs')}, "
             f"{'DAX' if r.dax else 'no DAX'}, {r.io_mode})" for r in result.runs]
    columns = ["metric", "unit", *heads] + (["B / A"] if len(result.runs) > 1 else [])
    rows = []
    for row in result.rows():
        line = {"metric": row["metric"], "unit": row["unit"], **dict(zip(heads, row["text"]))}
        if len(result.runs) > 1:
            line["B / A"] = "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        rows.append(line)
    _wide_table(rows, columns, title=f"DAX against the page cache (PMDK thesis): {result.fio_version}, kernel "
                                     f"{result.kernel}" + (", A = the first tier, B = --against" if len(heads) > 1 else ""))
    for r in result.runs:
        for note in r.notes:
            print(f"note ({r.tier.get('mountpoint')}): {note}")
    print(f"stored: {result.stored_at}")


# ---- output helpers ----------------------------------------------------------------------------

def _wide_table(rows, columns, title) -> None:
    """A rich table that is not squeezed to 80 columns when stdout is a pipe."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c, no_wrap=c in ("mount", "device", "kind"))
    for r in rows:
        table.add_row(*[str(r.get(c, "")) for c in columns])
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(table)


def _yn(v) -> str:
    return "?" if v is None else ("yes" if v else "no")


def _print_plan(plan, as_json: bool) -> None:
    if as_json:
        print_json(plan.to_dict())
    else:
        print(plan.render())


def _apply_or_explain(plan, as_json: bool):
    """Apply an applicable plan (commands echoed to stderr); otherwise print it and fail with the reason."""
    if not plan.applicable:
        _print_plan(plan, as_json)
        reason = plan.blockers[0] if plan.blockers else \
            f"step '{next(s for s in plan.steps if s.manual).summary}' must be done by hand"
        raise TierError(f"cannot {plan.title} on this host: {reason} (the plan printed above shows every command)")
    return apply_plan(plan, echo=lambda line: print(line, file=sys.stderr))


def _run_bench_with_progress(fio, tier, path, size, args, baseline):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = fio.estimated_seconds(args.runtime)
    with Progress(TextColumn("fio on {task.description}"), BarColumn(), TimeElapsedColumn(),
                  transient=True, disable=args.json or not sys.stderr.isatty()) as progress:
        task = progress.add_task(path, total=total)
        return fio.bench(tier, path, size, args.runtime, baseline=baseline,
                         buffer_compress_percentage=args.compress_percentage,
                         on_tick=lambda elapsed: progress.update(task, completed=min(elapsed, total)))


def _print_bench(result) -> None:
    t = result.tier
    rows = []
    for j in result.jobs:
        rows.append({"job": j.name, "what": j.description, "IOPS": f"{j.iops:,.0f}", "MB/s": f"{j.mb_s:,.1f}",
                     "mean lat us": _fmt(j.lat_mean_us), "p99 clat us": _fmt(j.clat_p99_us),
                     "fsync us": _fmt(j.fsync_mean_us)})
    _wide_table(rows, ["job", "what", "IOPS", "MB/s", "mean lat us", "p99 clat us", "fsync us"],
                title=f"{t['kind']} {t['mountpoint']} ({t['fs']}): {result.io_mode}, {result.fio_version}, "
                      f"kernel {result.kernel}")
    for note in result.notes:
        print(f"note: {note}")
    if result.raid:
        print(f"RAID {result.raid.get('level')} x{result.raid.get('devices')}: "
              + json.dumps({k: v for k, v in result.raid.items() if k not in ("level", "devices")}, default=str))
    print(f"stored: {result.stored_at}")


def _fmt(v) -> str:
    return "-" if v is None else f"{v:,.1f}"
