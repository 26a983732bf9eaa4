"""Storage characterization with fio: the papers' jobs (docs/sources.md), run on a tier, parsed from JSON, stored.

Jobs (one fio run, one file, jobs separated by ``stonewall`` so they never overlap):
- seqwrite / seqread: 1 MiB blocks, libaio, queue depth 32 (the PMDK thesis used libaio; 1 MiB is
  InnoDB's extent size for page sizes up to 16 KiB, the unit of read-ahead and file extension);
- randread: 4 KiB, sync engine (psync), one request at a time (DCPMM paper: "The I/O engine is set
  to sync ... the request size is fixed to 4 KB");
- randwrite: the same with ``fsync=1``, an fsync after every write (DCPMM paper: "We issue a fsync()
  system call after each request in the case of write workloads") - what a commit costs.

O_DIRECT (``direct=1``) where the tier accepts it (probed), buffered otherwise, and the result
says which: buffered libaio is synchronous, so queue depth then has no effect.
Results go to $INNOTIER_HOME/tiers/bench/*.json (durable write) with the tier's facts, fio's
version and the kernel, and for md RAID the expected-vs-measured ratios (raid.py).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from datadir_mover.tiers.model import Tier
from datadir_mover.tiers.raid import measured_vs_expected
from tuner.core import io_throttle
from tuner.core.durable import write_json_atomic
from tuner.core.errors import TierError, ToolMissing, UsageError
from tuner.core.units import format_size, human_size
from tuner.core.paths import innotier_home


@dataclass(frozen=True)
class FioJob:
    name: str
    rw: str
    bs: str
    ioengine: str
    iodepth: int
    fsync: bool
    description: str

    @property
    def direction(self) -> str:
        return "write" if "write" in self.rw else "read"


JOBS: tuple[FioJob, ...] = (
    FioJob("seqwrite", "write", "1M", "libaio", 32, False, "sequential write, 1 MiB, libaio QD32"),
    FioJob("seqread", "read", "1M", "libaio", 32, False, "sequential read, 1 MiB, libaio QD32"),
    FioJob("randread", "randread", "4k", "psync", 1, False, "4 KiB random read, sync"),
    FioJob("randwrite", "randwrite", "4k", "psync", 1, True, "4 KiB random write, fsync after each"),
)


@dataclass(frozen=True)
class BenchSpec:
    directory: str
    size_bytes: int = 256 << 20
    runtime_s: int = 10
    direct: bool = True
    jobs: tuple[FioJob, ...] = JOBS
    buffer_compress_percentage: int | None = None   # None: fio's default (incompressible data)


@dataclass(frozen=True)
class JobResult:
    name: str
    description: str
    rw: str
    bs: str
    iodepth: int
    direct: bool
    iops: float
    bw_bytes: float
    lat_mean_us: float | None
    clat_p99_us: float | None
    fsync_mean_us: float | None = None

    @property
    def mb_s(self) -> float:
        return self.bw_bytes / 1e6


@dataclass
class BenchResult:
    tier: dict
    spec: dict
    fio_version: str
    kernel: str
    io_mode: str                     # "O_DIRECT" or "buffered (...)"
    jobs: list[JobResult]
    started: str
    raid: dict | None = None
    notes: list[str] = field(default_factory=list)
    stored_at: str | None = None

    def job(self, name: str) -> JobResult | None:
        return next((j for j in self.jobs if j.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["jobs"] = [dict(asdict(j), mb_s=round(j.mb_s, 3)) for j in self.jobs]
        return d


# ---- job file, run, parse ----------------------------------------------------------------------

def job_file(spec: BenchSpec, workdir: str) -> str:
    """The fio job file: one data file shared by all jobs (laid out once), jobs one after another."""
    lines = ["[global]", f"directory={workdir}", "filename=innotier-fio.dat", f"size={spec.size_bytes}",
             f"runtime={spec.runtime_s}", "time_based=1", f"direct={1 if spec.direct else 0}",
             "randrepeat=0", "norandommap=1"]
    if spec.buffer_compress_percentage is not None:
        lines += [f"buffer_compress_percentage={spec.buffer_compress_percentage}", "refill_buffers=1"]
    for job in spec.jobs:
        lines += ["", f"[{job.name}]", f"rw={job.rw}", f"bs={job.bs}", f"ioengine={job.ioengine}",
                  f"iodepth={job.iodepth}", "stonewall"]
        if job.fsync:
            lines.append("fsync=1")
    return "\n".join(lines) + "\n"


def parse_fio_json(text: str, spec: BenchSpec) -> tuple[str, list[JobResult]]:
    """fio --output-format=json: version and one JobResult per job (fio may print warnings first)."""
    start = text.find("{")
    if start < 0:
        raise TierError("fio printed no JSON; run the job file by hand to see why")
    doc = json.loads(text[start:])
    by_name = {j.name: j for j in spec.jobs}
    results = []
    for job in doc.get("jobs", []):
        if job.get("error"):
            raise TierError(f"fio job {job.get('jobname')} failed with error {job['error']}")
        meta = by_name.get(job["jobname"])
        if meta is None:
            continue
        side = job[meta.direction]
        clat = side.get("clat_ns") or {}
        p99 = (clat.get("percentile") or {}).get("99.000000")
        sync_lat = (job.get("sync") or {}).get("lat_ns") or {}
        results.append(JobResult(
            name=meta.name, description=meta.description, rw=meta.rw, bs=meta.bs, iodepth=meta.iodepth,
            direct=spec.direct, iops=float(side["iops"]), bw_bytes=float(side["bw_bytes"]),
            lat_mean_us=_us((side.get("lat_ns") or {}).get("mean")), clat_p99_us=_us(p99),
            fsync_mean_us=_us(sync_lat.get("mean")) if meta.fsync else None,
        ))
    return doc.get("fio version", "fio"), results


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1000


def fio_version() -> str:
    if shutil.which("fio") is None:
        raise ToolMissing("fio is not installed; `apt-get install -y fio`")
    out = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    return out or "fio"


def run_fio(spec: BenchSpec, on_tick: Callable[[float], None] | None = None) -> tuple[str, list[JobResult]]:
    """Run the jobs in a private directory under the tier; the data file is removed afterwards."""
    fio_version()
    workdir = tempfile.mkdtemp(prefix=".innotier-fio-", dir=spec.directory)
    try:
        path = Path(workdir, "jobs.fio")
        path.write_text(job_file(spec, workdir))
        proc = subprocess.Popen(["fio", "--output-format=json", str(path)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                                preexec_fn=io_throttle.joiner())  # a throttled tier is slow for fio too
        started = time.monotonic()
        while True:
            try:
                out, err = proc.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if on_tick:
                    on_tick(time.monotonic() - started)
        if proc.returncode != 0:
            last = (err.strip() or out.strip() or f"exit {proc.returncode}").splitlines()[-1]
            raise TierError(f"fio failed on {spec.directory}: {last}")
        return parse_fio_json(out, spec)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ---- the whole bench ---------------------------------------------------------------------------

def validate(directory: str, size_bytes: int, runtime_s: int, tier: Tier) -> None:
    if not os.path.isdir(directory):
        raise UsageError(f"{directory} is not a directory; give the mount point (or a directory) of the tier to test")
    if not os.access(directory, os.W_OK):
        raise UsageError(f"{directory} is not writable; run as a user who may write there")
    if size_bytes < (4 << 20):
        raise UsageError(f"--size {format_size(size_bytes)} is too small; give at least 4M")
    if runtime_s < 1:
        raise UsageError("--runtime must be at least 1 second")
    if tier.free_bytes is not None and size_bytes > tier.free_bytes * 0.9:
        raise UsageError(f"--size {format_size(size_bytes)} does not fit: {tier.mountpoint} has "
                         f"{human_size(tier.free_bytes)} free (fio needs the size plus 10% headroom); "
                         "choose a smaller --size")


def raid_section(tier: Tier, jobs: list[JobResult], baseline: dict | None) -> dict | None:
    """Expected-vs-measured for an md array, from one member's stored bench (``--member-baseline``)."""
    if tier.kind != "md-raid" or tier.raid is None:
        return None
    level, n = tier.raid.level_number, len(tier.raid.members)
    section: dict[str, Any] = {"level": level, "devices": n}
    if level is None or baseline is None:
        section["note"] = ("give --member-baseline FILE (a stored `tiers bench` of one member device) "
                           "to compare with the RAID paper's expected performance")
        return section
    one = {j["name"]: j for j in baseline.get("jobs", [])}
    got = {j.name: j for j in jobs}
    for label, read_job, write_job, key in (("sequential MB/s", "seqread", "seqwrite", "bw_bytes"),
                                            ("4k random IOPS", "randread", "randwrite", "iops")):
        if read_job in one and write_job in one:
            section[label] = measured_vs_expected(
                level, n, float(one[read_job][key]), float(one[write_job][key]),
                float(getattr(got[read_job], key)) if read_job in got else None,
                float(getattr(got[write_job], key)) if write_job in got else None)
    return section


def results_dir() -> Path:
    return innotier_home() / "tiers" / "bench"


def store(result: BenchResult) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", result.tier.get("mountpoint") or "tier").strip("-") or "root"
    stamp = result.started.replace(":", "").replace("-", "")
    path = results_dir() / f"{stamp}-{slug}.json"
    result.stored_at = str(path)
    write_json_atomic(path, result.to_dict())
    return path


def bench(tier: Tier, directory: str, size_bytes: int, runtime_s: int, *, baseline: dict | None = None,
          buffer_compress_percentage: int | None = None,
          on_tick: Callable[[float], None] | None = None) -> BenchResult:
    validate(directory, size_bytes, runtime_s, tier)
    direct = tier.o_direct is True
    spec = BenchSpec(directory=directory, size_bytes=size_bytes, runtime_s=runtime_s, direct=direct,
                     buffer_compress_percentage=buffer_compress_percentage)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    version, jobs = run_fio(spec, on_tick)
    notes = []
    if direct:
        io_mode = "O_DIRECT"
    else:
        why = "O_DIRECT refused by this file system" if tier.o_direct is False else "O_DIRECT not probed"
        io_mode = f"buffered ({why})"
        notes.append("buffered I/O: reads may come from the page cache and libaio is synchronous, "
                     "so queue depth 32 has no effect")
    if tier.volatile:
        notes.append("volatile tier: fsync returns without reaching persistent media")
    result = BenchResult(
        tier=tier.to_dict(),
        spec={"directory": directory, "size_bytes": size_bytes, "runtime_s": runtime_s, "direct": direct,
              "buffer_compress_percentage": buffer_compress_percentage,
              "jobs": [asdict(j) for j in spec.jobs]},
        fio_version=version, kernel=platform.release(), io_mode=io_mode, jobs=jobs, started=started,
        raid=raid_section(tier, jobs, baseline), notes=notes,
    )
    store(result)
    return result


def estimated_seconds(runtime_s: int, jobs: tuple[FioJob, ...] = JOBS) -> float:
    return runtime_s * len(jobs)
