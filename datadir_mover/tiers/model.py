"""What a storage tier is: one dataclass that detection fills and every other area reads.

A tier is a mounted file system (or a block device that could carry one) with the
facts that matter for InnoDB files: whether it survives a power cut (``volatile``),
whether O_DIRECT works there (probed, not assumed), whether DAX is in effect, and
for zram, md RAID and persistent memory the facts read from the kernel and tools.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# Tier.kind values.  RAM tiers first; then persistent memory; then block devices.
KINDS = (
    "zram",          # compressed RAM block device (Documentation/admin-guide/blockdev/zram.rst)
    "tmpfs",         # page-cache file system, size-limited, swappable
    "ramfs",         # page-cache file system, no size limit, no O_DIRECT
    "brd",           # /dev/ramN RAM block device
    "pmem",          # persistent memory block device that is really DRAM (memmap=, e820 type 12) or a raw namespace
    "dcpmm-fsdax",   # NVDIMM / Optane DCPMM namespace in fsdax mode (ndctl, ACPI.NFIT bus)
    "dcpmm-devdax",  # NVDIMM namespace in devdax mode: a character device, mmap only, no file system
    "md-raid",       # Linux software RAID (mdadm)
    "nvme",
    "ssd",
    "hdd",
    "virtio",        # paravirtual disk (vdX): what the hypervisor puts behind it is unknown
    "loop",
    "throttled",     # a loop device slowed on purpose by the block-I/O cgroup (datadir_mover/tiers/throttled.py)
    "dm",            # device-mapper (LVM, dm-crypt, dm-stripe)
    "other",         # anything else (network and overlay file systems, unknown devices)
)

VOLATILE_KINDS = frozenset({"zram", "tmpfs", "ramfs", "brd"})


@dataclass(frozen=True)
class ZramInfo:
    """A zram device's state from /sys/block/zramN (zram.rst: comp_algorithm, disksize, mm_stat)."""

    device: str
    algorithm: str | None
    algorithms_available: tuple[str, ...]
    disksize_bytes: int
    initialized: bool
    orig_data_size: int | None = None      # mm_stat 1: uncompressed bytes stored
    compr_data_size: int | None = None     # mm_stat 2: compressed bytes
    mem_used_total: int | None = None      # mm_stat 3: memory used including allocator overhead
    mem_used_max: int | None = None        # mm_stat 5
    same_pages: int | None = None          # mm_stat 6: pages filled with one value (not stored)
    huge_pages: int | None = None          # mm_stat 8: incompressible pages

    @property
    def compression_ratio(self) -> float | None:
        """orig_data_size / compr_data_size: how much the algorithm shrank what was written."""
        if not self.orig_data_size or not self.compr_data_size:
            return None
        return self.orig_data_size / self.compr_data_size

    @property
    def memory_ratio(self) -> float | None:
        """orig_data_size / mem_used_total: what the tier really saves in RAM (allocator overhead included)."""
        if not self.orig_data_size or not self.mem_used_total:
            return None
        return self.orig_data_size / self.mem_used_total

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["algorithms_available"] = list(self.algorithms_available)
        d["compression_ratio"] = _round(self.compression_ratio)
        d["memory_ratio"] = _round(self.memory_ratio)
        return d


@dataclass(frozen=True)
class RaidInfo:
    """An md array: sysfs md/ first (md.rst), then /proc/mdstat, then `mdadm --detail`."""

    device: str
    level: str | None                      # "raid0", "raid1", "raid5", "raid6", "raid10", "linear", "container"
    chunk_bytes: int | None
    raid_disks: int | None                 # member slots (after a reshape completes)
    members: tuple[str, ...] = ()          # active members (in_sync or being rebuilt)
    spares: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    state: str | None = None               # array_state (clean/active/inactive...) or mdadm's State line
    degraded: int | None = None            # number of missing members
    sync_action: str | None = None         # idle/resync/recover/check/reshape
    sync_progress: float | None = None     # 0..1 when an action runs
    layout: str | None = None              # near=2, left-symmetric (mdadm --detail only)
    array_size_bytes: int | None = None
    previous_raid_disks: int | None = None  # during a reshape "11 (10)"
    sources: tuple[str, ...] = ()          # which readers contributed: sysfs, mdstat, mdadm

    @property
    def level_number(self) -> int | None:
        if self.level and self.level.startswith("raid") and self.level[4:].isdigit():
            return int(self.level[4:])
        return None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k in ("members", "spares", "failed", "sources"):
            d[k] = list(d[k])
        d["level_number"] = self.level_number
        return d


@dataclass(frozen=True)
class PmemInfo:
    """A persistent-memory namespace as `ndctl list` reports it, plus the bus provider when known."""

    namespace: str | None
    mode: str | None                 # fsdax, devdax, raw, sector ("memory" is the old name of fsdax)
    map: str | None = None           # where the struct-page map lives: mem or dev
    size_bytes: int | None = None
    align: int | None = None
    provider: str | None = None      # e820 (memmap= emulation), ACPI.NFIT (real NVDIMM), nfit_test
    blockdev: str | None = None
    chardev: str | None = None
    badblock_count: int | None = None
    queue_dax: bool | None = None    # /sys/block/pmemN/queue/dax: the device can do DAX

    @property
    def emulated(self) -> bool | None:
        if self.provider is None:
            return None
        return self.provider == "e820"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["emulated"] = self.emulated
        return d


@dataclass(frozen=True)
class Tier:
    """One place InnoDB files could live, with the facts read from the kernel (never assumed)."""

    mountpoint: str | None           # None for a block device that is not mounted (a candidate)
    device: str | None               # /dev/zram1, /dev/vda, or the mount source for tmpfs/ramfs
    kind: str
    fs: str | None
    mount_options: tuple[str, ...] = ()
    dax: bool = False                # effective DAX (statx STATX_ATTR_DAX where probed, mount options otherwise)
    dax_source: str = "none"         # statx | mount-options | none
    o_direct: bool | None = None     # probed; None when not probed (not writable, not mounted, recorded tree)
    volatile: bool = False           # contents lost at power-off or reboot
    rotational: bool | None = None
    capacity_bytes: int | None = None
    free_bytes: int | None = None
    logical_block_size: int | None = None
    physical_block_size: int | None = None
    model: str | None = None
    zram: ZramInfo | None = None
    raid: RaidInfo | None = None
    pmem: PmemInfo | None = None
    notes: tuple[str, ...] = ()

    @property
    def device_name(self) -> str | None:
        """Kernel name of the block device (zram1, md0, pmem0, vda), or None for tmpfs/ramfs."""
        if not self.device or not self.device.startswith("/dev/"):
            return None
        return self.device.rsplit("/", 1)[-1]

    @property
    def mounted(self) -> bool:
        return self.mountpoint is not None

    def summary(self) -> str:
        """One short phrase of the kind-specific facts, for tables."""
        if self.zram:
            r = self.zram.compression_ratio
            return f"{self.zram.algorithm or '?'}" + (f", {r:.2f}x compressed" if r else ", empty")
        if self.raid:
            parts = [self.raid.level or "?"]
            if self.raid.chunk_bytes:
                parts.append(f"chunk {self.raid.chunk_bytes // 1024}K")
            parts.append(f"{len(self.raid.members)} members")
            if self.raid.state:
                parts.append(self.raid.state)
            if self.raid.degraded:
                parts.append(f"degraded {self.raid.degraded}")
            return ", ".join(parts)
        if self.pmem:
            return ", ".join(str(x) for x in (self.pmem.namespace, self.pmem.mode, self.pmem.provider) if x)
        return self.model or ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "mountpoint": self.mountpoint,
            "device": self.device,
            "kind": self.kind,
            "fs": self.fs,
            "mount_options": list(self.mount_options),
            "dax": self.dax,
            "dax_source": self.dax_source,
            "o_direct": self.o_direct,
            "volatile": self.volatile,
            "rotational": self.rotational,
            "capacity_bytes": self.capacity_bytes,
            "free_bytes": self.free_bytes,
            "logical_block_size": self.logical_block_size,
            "physical_block_size": self.physical_block_size,
            "model": self.model,
            "zram": self.zram.to_dict() if self.zram else None,
            "raid": self.raid.to_dict() if self.raid else None,
            "pmem": self.pmem.to_dict() if self.pmem else None,
            "notes": list(self.notes),
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def with_notes(tier: Tier, *notes: str) -> Tier:
    return dataclasses.replace(tier, notes=tier.notes + tuple(n for n in notes if n))
