"""The one small interface every tier kind implements, and the provisioning helpers they share.

A provider describes the tiers it recognises (``claims`` + ``describe``), may
report tiers only its tools can see (``candidates``), knows how to tear its tiers
down (``destroy_steps``) and, when the kind can be created, adds its
a typed request (``datadir_mover.tiers.requests``) and builds a ``Plan`` from it
(``plan_create``); the CLI maps its flags to the request.  The
explicit registry of providers is ``datadir_mover.tiers.registry``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tuner.core.probe import MountEntry
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.model import Tier
from datadir_mover.tiers.plan import Plan, Step, command_step
from tuner.core.errors import UsageError
from tuner.core.units import format_size, human_size


class TierProvider:
    name: str = ""
    kinds: tuple[str, ...] = ()
    create_help: str | None = None      # None: this kind cannot be created by innotier
    request_type: type | None = None    # the create request dataclass (datadir_mover.tiers.requests)

    def claims(self, mount: MountEntry | None, device_name: str | None, host: Host) -> bool:
        return False

    def describe(self, tier: Tier, host: Host) -> Tier:
        return tier

    def candidates(self, host: Host, seen_devices: set[str]) -> list[Tier]:
        """Tiers that only this kind's tools can see (e.g. devdax character devices)."""
        return []

    def destroy_steps(self, tier: Tier, host: Host) -> list[Step]:
        return [umount_step(tier.mountpoint)] if tier.mountpoint else []

    def plan_create(self, request, host: Host) -> Plan:
        raise NotImplementedError


# ---- shared provisioning helpers -------------------------------------------------------------

FILESYSTEMS = ("ext4", "xfs", "btrfs", "f2fs")


def root_blocker() -> list[str]:
    return [] if os.geteuid() == 0 else ["creating and mounting tiers needs root; run it with sudo"]


def tool_blockers(*tools: str) -> list[str]:
    return [f"{t} is not installed; install the package that provides it" for t in tools if shutil.which(t) is None]


def check_mountpoint(path: str, host: Host) -> tuple[Path, bool]:
    """Validate a new mount point: it may not exist (we create it) or be an empty directory that is not a mount.

    Returns (absolute path, needs_mkdir).  Bad input raises UsageError and changes nothing.
    """
    if not path:
        raise UsageError("a mount point is required; give the directory the tier should be mounted on")
    p = Path(os.path.abspath(path))
    mounted = {m.mountpoint for m in host.mounts()}
    if str(p) in mounted or (p.exists() and os.path.ismount(p)):
        raise UsageError(f"{p} is already a mount point; choose an empty directory or `innotier tiers destroy {p}` first")
    if p.is_symlink():
        raise UsageError(f"{p} is a symlink; give the real directory path")
    if p.exists():
        if not p.is_dir():
            raise UsageError(f"{p} exists and is not a directory; choose an empty directory")
        entries = [e for e in os.listdir(p)]
        if entries:
            raise UsageError(f"{p} is not empty ({len(entries)} entries); mounting over it would hide them, "
                             "choose an empty directory")
        return p, False
    return p, True


def check_ram_size(size: int, host: Host, what: str) -> None:
    """A RAM tier larger than the memory available now would push the host into swap or the OOM killer."""
    if size <= 0:
        raise UsageError(f"the {what} size must be positive; give it like 512M or 4G")
    available = host.meminfo().get("MemAvailable")
    if available is not None and size > available:
        raise UsageError(f"{what} size {format_size(size)} is larger than the memory available now "
                         f"({human_size(available)}, MemAvailable in /proc/meminfo); choose a smaller size")


def mkfs_argv(fs: str, device: str, *, for_dax: bool = False, raid_stride: tuple[int, int] | None = None) -> list[str]:
    """mkfs command for a new tier.  DAX needs the file-system block size equal to the page size (4096)
    and, on xfs, no reflink ("DAX and reflink cannot be used together", pmem docs; recorded in tests/fixtures/recorded/hardware/dmesg)."""
    if fs == "ext4":
        argv = ["mkfs.ext4", "-q", "-F", "-b", "4096"]
        extended = []
        if not for_dax:
            # initialise inode tables and journal now, not in a background thread that writes for minutes
            extended.append("lazy_itable_init=0,lazy_journal_init=0")
        if raid_stride:
            extended.append(f"stride={raid_stride[0]},stripe_width={raid_stride[1]}")
        if extended:
            argv += ["-E", ",".join(extended)]
        return argv + [device]
    if fs == "xfs":
        return ["mkfs.xfs", "-q", "-f"] + (["-m", "reflink=0"] if for_dax else []) + [device]
    if fs == "btrfs":
        return ["mkfs.btrfs", "-q", "-f", device]
    if fs == "f2fs":
        return ["mkfs.f2fs", "-q", "-f", device]
    raise UsageError(f"file system {fs!r} is not supported here; choose one of {', '.join(FILESYSTEMS)}")


def mkdir_step(path: Path) -> Step:
    return command_step(f"create the mount point {path}", ["mkdir", "-p", str(path)], ["rmdir", str(path)])


def mount_step(source: str, path: Path, fstype: str | None, options: list[str]) -> Step:
    argv = ["mount"]
    if fstype:
        argv += ["-t", fstype]
    if options:
        argv += ["-o", ",".join(options)]
    argv += [source, str(path)]
    return command_step(f"mount {source} on {path}", argv, ["umount", str(path)])


def umount_step(path: str | None) -> Step:
    return command_step(f"unmount {path}", ["umount", str(path)])


def check_fs(fs: str, allowed: tuple[str, ...], what: str) -> None:
    if fs not in allowed:
        raise UsageError(f"file system {fs!r} is not supported for a {what} tier; choose one of {', '.join(allowed)}")


def split_options(text: str | None) -> list[str]:
    return [o for o in (text or "").split(",") if o]
