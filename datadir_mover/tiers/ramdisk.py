"""RAM file systems: tmpfs and ramfs (Documentation/filesystems/tmpfs.rst, ramfs-rootfs-initramfs.rst).

tmpfs has a size limit (``size=``), can be swapped, and accepts O_DIRECT from
Linux 6.6.  ramfs has no limit at all (it ignores ``size=`` and grows until the
machine runs out of memory), is never swapped, and refuses O_DIRECT (EINVAL), so
``innodb_flush_method=O_DIRECT`` falls back to buffered I/O there.  Both lose
everything at reboot.
"""

from __future__ import annotations

import dataclasses

from tuner.core.probe import MountEntry
from datadir_mover.tiers.base import (TierProvider, check_fs, check_mountpoint, check_ram_size, mkdir_step, mount_step,
                                      root_blocker)
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.model import Tier, with_notes
from datadir_mover.tiers.plan import Plan
from datadir_mover.tiers.requests import RamdiskCreate
from tuner.core.units import format_size

RAM_FILESYSTEMS = ("tmpfs", "ramfs")


class RamdiskProvider(TierProvider):
    name = "ramdisk"
    kinds = RAM_FILESYSTEMS
    create_help = "a tmpfs or ramfs RAM disk"
    request_type = RamdiskCreate

    def claims(self, mount: MountEntry | None, device_name: str | None, host: Host) -> bool:
        return mount is not None and mount.fstype in RAM_FILESYSTEMS

    def describe(self, tier: Tier, host: Host) -> Tier:
        tier = dataclasses.replace(tier, kind=tier.fs or "tmpfs", volatile=True, rotational=None)
        if tier.fs == "ramfs":
            tier = dataclasses.replace(tier, capacity_bytes=None, free_bytes=None)
            tier = with_notes(tier, "ramfs has no size limit: it grows until memory runs out and is never swapped")
        return tier

    def plan_create(self, request: RamdiskCreate, host: Host) -> Plan:
        args = request
        size = request.size_bytes
        check_fs(request.fs, RAM_FILESYSTEMS, "RAM")
        check_ram_size(size, host, args.fs)
        mountpoint, needs_mkdir = check_mountpoint(args.mount, host)
        plan = Plan(title=f"create a {format_size(size)} {args.fs} tier on {mountpoint}")
        plan.blockers += root_blocker()
        if needs_mkdir:
            plan.steps.append(mkdir_step(mountpoint))
        options = [f"mode={args.mode}"]
        if args.fs == "tmpfs":
            options.insert(0, f"size={format_size(size)}")
        else:
            plan.notes.append(f"ramfs ignores size=: nothing stops it growing past {format_size(size)}; "
                              "watch its usage, a full ramfs exhausts the host's memory")
            plan.notes.append("ramfs refuses O_DIRECT: InnoDB falls back to buffered I/O there")
        plan.steps.append(mount_step(args.fs, mountpoint, args.fs, options + list(args.options)))
        plan.notes.append(f"volatile: a {args.fs} tier is lost at reboot or power-off; keep a consistent copy "
                          "(`innotier persist`) of anything on it")
        return plan


PROVIDER = RamdiskProvider()
