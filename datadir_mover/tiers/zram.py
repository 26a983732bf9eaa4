"""zram: a compressed RAM block device carrying a real file system (the persistent-ZRAM tier done right).

The kernel's order (Documentation/admin-guide/blockdev/zram.rst): get a device
from ``/sys/class/zram-control/hot_add``, choose ``comp_algorithm`` *before*
``disksize`` (the algorithm cannot change once the device is initialised), set
``disksize`` (the uncompressed capacity), then mkfs and mount the block device.
Tear-down is ``umount``, ``echo 1 > reset`` (frees the memory) and ``echo N >
hot_remove``.  ``mount -t tmpfs /dev/zram0 DIR`` (the dissertation's script, docs/sources.md) ignores the
device and mounts a plain tmpfs: zram is never used.

``mm_stat`` fields, in order: orig_data_size compr_data_size mem_used_total
mem_limit mem_used_max same_pages pages_compacted huge_pages huge_pages_since
(the last two only on newer kernels).
"""

from __future__ import annotations

import dataclasses
import os
import re
import time

from tuner.core.probe import MountEntry
from datadir_mover.tiers.base import (FILESYSTEMS, TierProvider, check_fs, check_mountpoint, check_ram_size, mkdir_step,
                                      mkfs_argv, mount_step, root_blocker, tool_blockers,
                                      umount_step)
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.model import Tier, ZramInfo, with_notes
from datadir_mover.tiers.plan import Plan, Step, command_step, write_step
from datadir_mover.tiers.requests import ZramCreate
from tuner.core.errors import TierError, UsageError
from tuner.core.units import format_size

CONTROL = "/sys/class/zram-control"
MM_STAT_FIELDS = ("orig_data_size", "compr_data_size", "mem_used_total", "mem_limit", "mem_used_max",
                  "same_pages", "pages_compacted", "huge_pages", "huge_pages_since")
NAME_RE = re.compile(r"^zram(\d+)$")


def parse_mm_stat(text: str) -> dict[str, int]:
    values = [int(v) for v in text.split()]
    return dict(zip(MM_STAT_FIELDS, values))


def parse_comp_algorithm(text: str) -> tuple[str | None, tuple[str, ...]]:
    """``lzo-rle lzo [lz4] zstd`` -> ("lz4", ("lzo-rle", "lzo", "lz4", "zstd"))."""
    selected = None
    available = []
    for token in text.split():
        if token.startswith("[") and token.endswith("]"):
            token = token[1:-1]
            selected = token
        available.append(token)
    return selected, tuple(available)


def read_zram(name: str, host: Host) -> ZramInfo:
    base = host.sys("block", name)
    selected, available = parse_comp_algorithm(host.read(base / "comp_algorithm") or "")
    mm = parse_mm_stat(host.read(base / "mm_stat") or "")
    return ZramInfo(
        device=f"/dev/{name}",
        algorithm=selected,
        algorithms_available=available,
        disksize_bytes=host.read_int(base / "disksize") or 0,
        initialized=host.read_int(base / "initstate") == 1,
        orig_data_size=mm.get("orig_data_size"),
        compr_data_size=mm.get("compr_data_size"),
        mem_used_total=mm.get("mem_used_total"),
        mem_used_max=mm.get("mem_used_max"),
        same_pages=mm.get("same_pages"),
        huge_pages=mm.get("huge_pages"),
    )


def available_algorithms(host: Host) -> tuple[str, ...]:
    """The kernel's zram algorithms, read from any zram device (they are the same for all)."""
    for name in host.block_devices():
        if NAME_RE.match(name):
            _, available = parse_comp_algorithm(host.read(host.sys("block", name, "comp_algorithm")) or "")
            if available:
                return available
    return ()


class ZramProvider(TierProvider):
    name = "zram"
    kinds = ("zram",)
    create_help = "a zram device (compressed RAM) with a real file system on it"
    request_type = ZramCreate

    def claims(self, mount: MountEntry | None, device_name: str | None, host: Host) -> bool:
        return bool(device_name and NAME_RE.match(device_name))

    def describe(self, tier: Tier, host: Host) -> Tier:
        info = read_zram(tier.device_name or "", host)
        q = host.sys("block", tier.device_name or "", "queue")
        tier = dataclasses.replace(
            tier, kind="zram", zram=info, volatile=True, rotational=False,
            capacity_bytes=tier.capacity_bytes if tier.capacity_bytes is not None else info.disksize_bytes,
            logical_block_size=host.read_int(q / "logical_block_size"),
            physical_block_size=host.read_int(q / "physical_block_size"),
        )
        if tier.fs == "tmpfs":
            tier = with_notes(tier, "tmpfs with a zram source is a plain tmpfs: the zram device is not used")
        return tier

    def destroy_steps(self, tier: Tier, host: Host) -> list[Step]:
        name = tier.device_name or ""
        number = NAME_RE.match(name).group(1)  # type: ignore[union-attr]
        steps = [umount_step(tier.mountpoint)] if tier.mountpoint else []
        steps.append(_reset_step(name))
        if number != "0":  # zram0 is the boot-time device: leave it in place, reset
            steps.append(Step(summary=f"remove /dev/{name}", command=f"echo {number} > {CONTROL}/hot_remove",
                              action=lambda state: _retry_write(f"{CONTROL}/hot_remove", number)))
        return steps

    def plan_create(self, request: ZramCreate, host: Host) -> Plan:
        args = request
        size = request.size_bytes
        check_fs(request.fs, FILESYSTEMS, "zram")
        check_ram_size(size, host, "zram")
        mountpoint, needs_mkdir = check_mountpoint(args.mount, host)
        available = available_algorithms(host)
        if args.algorithm and available and args.algorithm not in available:
            raise UsageError(f"zram algorithm {args.algorithm!r} is not offered by this kernel; "
                             f"choose one of: {', '.join(available)}")
        plan = Plan(title=f"create a {format_size(size)} zram tier ({args.fs}) on {mountpoint}")
        plan.blockers += root_blocker()
        if not host.sys("class", "zram-control").exists():
            plan.blockers.append("zram is not available (/sys/class/zram-control is missing); load it with `modprobe zram`")
        plan.blockers += tool_blockers(f"mkfs.{args.fs}")
        if needs_mkdir:
            plan.steps.append(mkdir_step(mountpoint))
        plan.steps.append(_hot_add_step())
        if args.algorithm:
            plan.steps.append(write_step(f"choose the {args.algorithm} algorithm (before disksize)",
                                         "/sys/block/zram$N/comp_algorithm", args.algorithm))
        plan.steps.append(write_step(f"set the uncompressed capacity to {format_size(size)}",
                                     "/sys/block/zram$N/disksize", str(size),
                                     undo=_reset_action("zram$N"), undo_command="echo 1 > /sys/block/zram$N/reset"))
        plan.steps.append(command_step(f"make the {args.fs} file system", mkfs_argv(args.fs, "/dev/zram$N")))
        # discard lets the file system hand freed blocks back, so zram frees their memory (zram.rst)
        options = (["discard"] if args.fs in ("ext4", "xfs", "btrfs") else []) + list(args.options)
        plan.steps.append(mount_step("/dev/zram$N", mountpoint, args.fs, options))
        plan.notes.append("volatile: a zram tier is lost at reboot or power-off; keep a consistent copy "
                          "(`innotier persist`) of anything on it")
        return plan


def _hot_add_step() -> Step:
    def action(state: dict) -> None:
        try:
            with open(f"{CONTROL}/hot_add") as fh:
                state["N"] = int(fh.read().strip())
        except OSError as exc:
            raise TierError(f"zram hot_add failed: {exc.strerror}") from None
        _wait_for(f"/dev/zram{state['N']}")

    def undo(state: dict) -> None:
        _retry_write(f"{CONTROL}/hot_remove", str(state["N"]))

    return Step(summary="add a zram device (the kernel prints its number N)",
                command=f"N=$(cat {CONTROL}/hot_add)", action=action, undo=undo,
                undo_command=f"echo $N > {CONTROL}/hot_remove")


def _reset_action(name: str):
    def action(state: dict) -> None:
        _retry_write(f"/sys/block/{name.replace('$N', str(state.get('N', '')))}/reset", "1")
    return action


def _reset_step(name: str) -> Step:
    return Step(summary=f"reset /dev/{name} (frees its memory)", command=f"echo 1 > /sys/block/{name}/reset",
                action=_reset_action(name))


def _retry_write(path: str, value: str, attempts: int = 20) -> None:
    """sysfs writes to a device that was just unmounted can answer EBUSY while udev/blkid still hold it."""
    for i in range(attempts):
        try:
            with open(path, "w") as fh:
                fh.write(value)
            return
        except OSError as exc:
            if exc.errno != 16 or i == attempts - 1:  # EBUSY
                raise TierError(f"writing {value!r} to {path} failed: {exc.strerror}") from None
            time.sleep(0.1)


def _wait_for(path: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TierError(f"{path} did not appear after hot_add; check dmesg")
        time.sleep(0.02)


PROVIDER = ZramProvider()
