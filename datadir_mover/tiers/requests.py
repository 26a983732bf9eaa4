"""Typed requests to create a tier: one frozen dataclass per kind.

The CLI (``datadir_mover/tiers_cli.py``) maps its flags to these; the sweep builds
them directly.  Sizes are bytes.  The providers validate them with domain words
(``datadir_mover/tiers/<kind>.py``: ``plan_create(request, host)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.core.io_throttle import Limits


@dataclass(frozen=True)
class ZramCreate:
    size_bytes: int                  # uncompressed capacity (disksize)
    mount: str                       # empty directory to mount it on
    fs: str = "ext4"
    algorithm: str | None = None     # None: the kernel's default
    options: tuple[str, ...] = ()    # extra mount options


@dataclass(frozen=True)
class RamdiskCreate:
    size_bytes: int                  # size limit (ramfs cannot enforce it)
    mount: str
    fs: str = "tmpfs"                # tmpfs or ramfs
    mode: str = "0755"               # permissions of the root directory
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class PmemCreate:
    mount: str
    source: str | None = None        # memmap (DRAM emulation) or nvdimm; None: an NVDIMM region if any, else memmap
    memmap: str = "4G!12G"           # memmap= reservation SIZE!OFFSET (memmap source)
    namespace: str = "namespace0.0"  # namespace to reconfigure (memmap source)
    region: str = "region0"          # region to carve the namespace from (nvdimm source)
    size_bytes: int | None = None    # namespace size (nvdimm source; None: the whole region)
    device: str | None = None        # the resulting block device (None: /dev/pmemN of region N, /dev/pmem0 for memmap)
    fs: str = "ext4"
    options: tuple[str, ...] = ()
    dax: bool = True                 # False: the same device through the page cache (ext4, xfs or f2fs, no -o dax)


@dataclass(frozen=True)
class RaidCreate:
    level: int
    devices: tuple[str, ...]         # member block devices
    chunk_bytes: int = 512 * 1024    # mdadm(8): "The default when creating an array is 512KB."
    name: str = "innotier0"          # the array is /dev/md/NAME
    fs: str | None = None            # None: ext4 when a mount point is given, else no file system
    mount: str | None = None
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class ThrottledCreate:
    size_bytes: int
    mount: str
    backing: str                     # new file holding the loop device's blocks (on a real disk)
    limits: Limits = field(default_factory=Limits)
    fs: str = "ext4"
    options: tuple[str, ...] = ()


CreateRequest = ZramCreate | RamdiskCreate | PmemCreate | RaidCreate | ThrottledCreate
