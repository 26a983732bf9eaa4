"""DAX against the page cache: the PMDK thesis's measurements (docs/sources.md, seed 003) on one tier or two.

``innotier tiers bench PATH --profile dax [--against MOUNT]`` runs, on each tier:

- bandwidth: sequential (1 MiB) and random (4 KiB) reads and writes, each through libaio (queue depth 32)
  and psync (one request at a time), with fio (the jobs run one after another on one file);
- file-operation latency: create+open, 4 KiB append + fsync, unlink, each timed ``FILE_OPS`` times in a
  scratch directory (median and 99th percentile, microseconds);
- page-fault cost on a mapped file: the first write and the first read of every 4 KiB page of a fresh
  MAP_SHARED mapping, less a second pass over the same pages (no faults: the loop's own cost), per page;
  then the same with MAP_SYNC, which the kernel accepts only on a DAX mapping (MAP_SHARED_VALIDATE |
  MAP_SYNC: EOPNOTSUPP elsewhere, reported as "not DAX").

With ``--against`` the two tiers are measured one after the other and shown side by side with their ratio.
O_DIRECT where a tier accepts it (a DAX file system bypasses the page cache with or without it); buffered
libaio is synchronous, so its queue depth then does nothing (the result says so).  Results are stored
under $INNOTIER_HOME/tiers/bench/ like the standard bench.
"""

from __future__ import annotations

import errno
import mmap
import os
import platform
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from datadir_mover.tiers import fio
from datadir_mover.tiers.fio import BenchSpec, FioJob, JobResult
from datadir_mover.tiers.model import Tier
from tuner.core.durable import write_json_atomic
from tuner.core.probe import probe_dax

DAX_JOBS: tuple[FioJob, ...] = tuple(
    FioJob(f"{kind}{rw}-{engine}", ("" if kind == "seq" else "rand") + rw, bs, engine, depth, False,
           f"{'sequential' if kind == 'seq' else 'random'} {rw}, {bs}, {engine}" + (f" QD{depth}" if depth > 1 else ""))
    for kind, bs in (("seq", "1M"), ("rand", "4k"))
    for rw in ("write", "read")
    for engine, depth in (("libaio", 32), ("psync", 1)))
FILE_OPS = 200  # rounds of each file operation
PAGE = 4096
MAP_SHARED_VALIDATE = 0x03  # linux/mman.h: MAP_SYNC is only honoured (and checked) with this type
MAP_SYNC = 0x80000


@dataclass(frozen=True)
class Latency:
    median_us: float
    p99_us: float

    @staticmethod
    def of(seconds: list[float]) -> "Latency":
        s = sorted(seconds)
        return Latency(round(statistics.median(s) * 1e6, 2), round(s[min(len(s) - 1, int(len(s) * 0.99))] * 1e6, 2))


@dataclass(frozen=True)
class FaultCost:
    """Microseconds per 4 KiB page of the first write and the first read of a fresh mapping (None: not run)."""

    write_fault_us: float | None
    read_fault_us: float | None
    refused: str | None = None  # why the mapping was refused (MAP_SYNC off DAX: "not DAX")


@dataclass
class DaxBench:
    """One tier's measurements."""

    tier: dict
    dax: bool | None
    io_mode: str
    jobs: list[JobResult]
    file_ops: dict[str, Latency]
    faults: dict[str, FaultCost]  # "shared" and "map_sync"
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"tier": self.tier, "dax": self.dax, "io_mode": self.io_mode,
                "jobs": [dict(asdict(j), mb_s=round(j.mb_s, 3)) for j in self.jobs],
                "file_ops": {k: asdict(v) for k, v in self.file_ops.items()},
                "faults": {k: asdict(v) for k, v in self.faults.items()}, "notes": self.notes}


@dataclass
class DaxComparison:
    """The profile on PATH's tier and, with --against, on a second one."""

    runs: list[DaxBench]
    fio_version: str
    kernel: str
    started: str
    spec: dict
    stored_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"profile": "dax", "runs": [r.to_dict() for r in self.runs], "fio_version": self.fio_version,
                "kernel": self.kernel, "started": self.started, "spec": self.spec, "stored_at": self.stored_at}

    def rows(self) -> list[dict[str, Any]]:
        """metric, one value per tier and B / A: the side-by-side table."""
        out = []

        def add(metric: str, unit: str, values: list[float | None], text: list[str] | None = None) -> None:
            row: dict[str, Any] = {"metric": metric, "unit": unit, "values": values,
                                   "text": text or ["-" if v is None else f"{v:,.1f}" for v in values]}
            a, b = (values + [None])[:2]
            row["ratio"] = (b / a) if len(values) > 1 and a and b is not None else None
            out.append(row)

        for job in DAX_JOBS:
            vals = [next((j.mb_s for j in r.jobs if j.name == job.name), None) for r in self.runs]
            add(job.description, "MB/s", vals)
        for op in ("open", "append_fsync", "unlink"):
            add(f"{op.replace('_', ' + ')} latency (median)", "us", [r.file_ops[op].median_us for r in self.runs])
        for kind, label in (("shared", "page fault, MAP_SHARED"), ("map_sync", "page fault, MAP_SYNC")):
            for side in ("write", "read"):
                costs = [r.faults[kind] for r in self.runs]
                vals = [getattr(c, f"{side}_fault_us") for c in costs]
                add(f"{label}, first {side}", "us/page", vals,
                    [c.refused if c.refused else f"{v:,.2f}" for c, v in zip(costs, vals)])
        return out


# ---- file operations ---------------------------------------------------------------------------------------

def file_op_latency(directory: str, rounds: int = FILE_OPS) -> dict[str, Latency]:
    """create+open, 4 KiB append + fsync, unlink: each timed ``rounds`` times in a scratch directory."""
    work = tempfile.mkdtemp(prefix=".innotier-fileops-", dir=directory)
    block = os.urandom(PAGE)
    opens, appends, unlinks = [], [], []
    try:
        for i in range(rounds):
            path = os.path.join(work, f"f{i}")
            t0 = time.perf_counter()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            t1 = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            t2 = time.perf_counter()
            os.close(fd)
            t3 = time.perf_counter()
            os.unlink(path)
            t4 = time.perf_counter()
            opens.append(t1 - t0)
            appends.append(t2 - t1)
            unlinks.append(t4 - t3)
    finally:
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)
    return {"open": Latency.of(opens), "append_fsync": Latency.of(appends), "unlink": Latency.of(unlinks)}


# ---- page faults -----------------------------------------------------------------------------------------

def _touch(m: mmap.mmap, pages: int, write: bool) -> float:
    t0 = time.perf_counter()
    if write:
        for p in range(pages):
            m[p * PAGE] = 1
    else:
        s = 0
        for p in range(pages):
            s += m[p * PAGE]
    return time.perf_counter() - t0


def fault_cost(directory: str, size_bytes: int, map_sync: bool) -> FaultCost:
    """Per-page cost of first-touch write and read faults on a fresh file mapping (a second pass, without
    faults, is subtracted).  ``map_sync``: MAP_SHARED_VALIDATE | MAP_SYNC, refused off DAX."""
    pages = max(size_bytes // PAGE, 1)
    fd, path = tempfile.mkstemp(prefix=".innotier-faults-", dir=directory)
    try:
        costs = []
        for write in (True, False):
            os.ftruncate(fd, 0)
            os.ftruncate(fd, pages * PAGE)  # a sparse file: every first touch faults a block in
            if not write:
                os.pwrite(fd, b"\x01" * PAGE, 0)  # reads of the rest fault in the zero page or page cache
                os.fsync(fd)
            flags = (MAP_SHARED_VALIDATE | MAP_SYNC) if map_sync else mmap.MAP_SHARED
            try:
                m = mmap.mmap(fd, pages * PAGE, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError as exc:
                if map_sync and exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                    return FaultCost(None, None, "not DAX")
                raise
            try:
                first = _touch(m, pages, write)
                again = _touch(m, pages, write)
            finally:
                m.close()
            costs.append(round(max(first - again, 0.0) / pages * 1e6, 3))
        return FaultCost(costs[0], costs[1])
    finally:
        os.close(fd)
        os.unlink(path)


# ---- the profile ---------------------------------------------------------------------------------------

def measure(tier: Tier, directory: str, size_bytes: int, runtime_s: int,
            on_tick: Callable[[float], None] | None = None) -> tuple[str, DaxBench]:
    """The whole profile on one tier: fio bandwidths, file-operation latencies, fault costs."""
    fio.validate(directory, size_bytes, runtime_s, tier)
    direct = tier.o_direct is True
    spec = BenchSpec(directory=directory, size_bytes=size_bytes, runtime_s=runtime_s, direct=direct, jobs=DAX_JOBS)
    version, jobs = fio.run_fio(spec, on_tick)
    dax = probe_dax(directory)
    notes = [] if direct else ["buffered I/O (no O_DIRECT here): libaio is synchronous, so QD32 does nothing"]
    if dax:
        notes.append("DAX: reads and writes bypass the page cache whatever the open flags")
    if tier.volatile:
        notes.append("volatile tier: fsync returns without reaching persistent media")
    fault_bytes = min(size_bytes, 64 << 20)
    bench = DaxBench(tier=tier.to_dict(), dax=dax, io_mode="O_DIRECT" if direct else "buffered", jobs=jobs,
                     file_ops=file_op_latency(directory),
                     faults={"shared": fault_cost(directory, fault_bytes, False),
                             "map_sync": fault_cost(directory, fault_bytes, True)}, notes=notes)
    return version, bench


def compare(sides: list[tuple[Tier, str]], size_bytes: int, runtime_s: int,
            on_tick: Callable[[float], None] | None = None) -> DaxComparison:
    """The profile on every (tier, directory), one after the other; stored as one result."""
    for tier, directory in sides:  # refuse bad input before measuring anything
        fio.validate(directory, size_bytes, runtime_s, tier)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    runs, version = [], "fio"
    for tier, directory in sides:
        version, bench = measure(tier, directory, size_bytes, runtime_s, on_tick)
        runs.append(bench)
    result = DaxComparison(runs, version, platform.release(), started,
                           {"size_bytes": size_bytes, "runtime_s": runtime_s, "file_ops": FILE_OPS,
                            "directories": [d for _, d in sides], "jobs": [asdict(j) for j in DAX_JOBS]})
    slug = "-vs-".join(os.path.basename(d.rstrip("/")) or "root" for _, d in sides)
    path = fio.results_dir() / f"{started.replace(':', '').replace('-', '')}-dax-{slug}.json"
    result.stored_at = str(path)
    write_json_atomic(path, result.to_dict())
    return result


def estimated_seconds(runtime_s: int, tiers: int) -> float:
    return runtime_s * len(DAX_JOBS) * tiers
