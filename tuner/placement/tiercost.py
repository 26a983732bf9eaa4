"""A tier in the terms a file's I/O is priced in: `tiers bench`'s fio jobs at the server's page size.

The same job machinery as ``innotier tiers bench`` (datadir_mover.tiers.fio: one fio run, jobs one
after another, O_DIRECT where the tier accepts it), with the random jobs at the InnoDB page size rather
than 4 KiB, since a page is what InnoDB reads and writes: page-size random read latency (sync, one at a
time), page-size write latency and the fsync after each write, sequential bandwidth (1 MiB, QD32), and the
capacity: page-size random reads and writes per second at depth (QD32), which the queueing model of
``placement check`` needs (a device with internal parallelism serves many more than 1 / its latency).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

from datadir_mover.tiers import fio
from datadir_mover.tiers.detect import tier_for_path
from tuner.core.errors import TierError, UsageError
from tuner.placement.model import TierCost
from tuner.placement.queueing import QUEUE_DEPTH


def jobs(page_size: int) -> tuple[fio.FioJob, ...]:
    bs = f"{page_size // 1024}k"
    return (
        fio.FioJob("seqwrite", "write", "1M", "libaio", 32, False, "sequential write, 1 MiB, libaio QD32"),
        fio.FioJob("seqread", "read", "1M", "libaio", 32, False, "sequential read, 1 MiB, libaio QD32"),
        fio.FioJob("pageread", "randread", bs, "psync", 1, False, f"{bs} random read, sync"),
        fio.FioJob("pagewrite", "randwrite", bs, "psync", 1, True, f"{bs} random write, fsync after each"),
        fio.FioJob("pagereads", "randread", bs, "libaio", QUEUE_DEPTH, False, f"{bs} random read, libaio QD{QUEUE_DEPTH}"),
        fio.FioJob("pagewrites", "randwrite", bs, "libaio", QUEUE_DEPTH, False,
                   f"{bs} random write, libaio QD{QUEUE_DEPTH}"),
    )


def check_mount(mountpoint: str) -> str:
    path = os.path.realpath(mountpoint)
    if not os.path.isdir(path):
        raise UsageError(f"{mountpoint} does not exist; give the mount point of the tier (see `innotier tiers list`)")
    if not os.path.ismount(path):
        raise UsageError(f"{mountpoint} is not a mount point; mount the tier first (`innotier tiers create ...`) "
                         "or give its mount point (see `innotier tiers list`)")
    return path


def characterize(mountpoint: str, page_size: int = 16384, size_bytes: int = 256 << 20,
                 runtime_s: int = 10) -> TierCost:
    path = check_mount(mountpoint)
    tier = tier_for_path(path)
    fio.validate(path, size_bytes, runtime_s, tier)   # not writable, too small, does not fit: one line each
    spec = fio.BenchSpec(directory=path, size_bytes=size_bytes, runtime_s=runtime_s, direct=tier.o_direct is True,
                         jobs=jobs(page_size))
    started = datetime.now(timezone.utc)
    version, results = fio.run_fio(spec)
    got = {j.name: j for j in results}
    missing = [j.name for j in spec.jobs if j.name not in got]
    if missing or got["pagewrite"].fsync_mean_us is None:
        raise TierError(f"fio reported no result for {', '.join(missing) or 'the fsync of pagewrite'} on {path}; "
                        "run `innotier tiers bench` there to see fio's own output")
    notes = [] if spec.direct else ["buffered I/O (O_DIRECT refused or not probed): reads may be served by the "
                                    "page cache"]
    if tier.volatile:
        notes.append("volatile tier: fsync returns without reaching persistent media (`innotier persist`)")
    return TierCost(
        tier_id=f"tier-{started.strftime('%Y%m%dT%H%M%SZ')}-{path.strip('/').replace('/', '-') or 'root'}",
        mountpoint=path, kind=tier.kind, fs=tier.fs, volatile=tier.volatile,
        io_mode="O_DIRECT" if spec.direct else "buffered", page_size=page_size,
        randread_s=got["pageread"].lat_mean_us / 1e6, write_s=got["pagewrite"].lat_mean_us / 1e6,
        fsync_s=got["pagewrite"].fsync_mean_us / 1e6, seqread_bps=got["seqread"].bw_bytes,
        seqwrite_bps=got["seqwrite"].bw_bytes, free_bytes=tier.free_bytes,
        measured_at=started.isoformat(timespec="seconds"), fio_version=version, notes=tuple(notes),
        randread_iops=got["pagereads"].iops, randwrite_iops=got["pagewrites"].iops)
