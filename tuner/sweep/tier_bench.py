"""``tier_bench:`` in a spec: `innotier tiers bench` of every tier a cell uses, stored with the cell.

The DCPMM paper (docs/sources.md) measured each file system with fio before it ran TPC-C on it; a sweep whose
cells make their tier anew (pmem, md) benches the tier each cell really ran on, on the fresh file system and
before the clone lands there.  The jobs are the standard profile's (``datadir_mover.tiers.fio``: 4 KiB sync
random read, 4 KiB random write with an fsync after each, 1 MiB sequential read and write), O_DIRECT where the
tier accepts it; the result goes into the cell's record (``tiers["bench"][tier]``) and, like every bench, under
$INNOTIER_HOME/tiers/bench/.
"""

from __future__ import annotations

from typing import Any

from datadir_mover.tiers import fio
from datadir_mover.tiers.detect import tier_for_path
from tuner.core.errors import InnotierError, SweepError
from tuner.sweep.placement import TierSession
from tuner.sweep.spec import TierBench

# what a cell's record keeps of each job (the stored bench file has everything)
JOB_FIELDS = ("name", "iops", "bw_bytes", "lat_mean_us", "clat_p99_us", "fsync_mean_us")


def bench_tiers(session: TierSession, names: list[str], spec: TierBench) -> dict[str, dict[str, Any]]:
    """{tier: bench summary} for each of ``names``; a failed bench fails the cell with the tier named."""
    out = {}
    for name in names:
        root = str(session.root(name))
        try:
            result = fio.bench(tier_for_path(root), root, spec.size, spec.runtime)
        except InnotierError as exc:
            raise SweepError(f"tiers bench of tier {name}: {exc}") from None
        out[name] = summary(result.to_dict())
    return out


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The part of a stored bench a cell's record carries."""
    tier = result.get("tier") or {}
    return {"io_mode": result.get("io_mode"), "fio_version": result.get("fio_version"),
            "kernel": result.get("kernel"), "stored_at": result.get("stored_at"),
            "tier": {k: tier.get(k) for k in ("kind", "fs", "dax", "device", "mountpoint")},
            "jobs": [{k: j.get(k) for k in JOB_FIELDS} for j in result.get("jobs") or []],
            "notes": result.get("notes") or []}
