"""A throttled tier: a loop device over a file, with a file system, slowed by the kernel's block-I/O cgroup.

The slow device to tier *from*.  This machine's disk absorbs small synchronous writes in its cache, so a
placement that moves the redo log or a hot table onto a RAM tier shows little gain here, and the advice
cannot be checked.  A throttled tier behaves like a small disk with a fixed number of operations a second:
``--read-iops 200 --write-iops 100`` is a slow SATA SSD under a mixed load, ``--write-iops 50`` a lone HDD.
The limits are those of ``tuner.core.io_throttle`` (one cgroup, limits per device); every sandbox server and
every fio run innotier starts joins the group, so the limits bind them.  Other processes are not slowed.

The loop device uses direct I/O on its backing file (``losetup --direct-io=on``), so what reaches the
tier is not served again from the host's page cache.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from tuner.core.io_throttle import Limits, ThrottleGroup, device_number
from tuner.core.probe import MountEntry
from tuner.core.errors import TierError, UsageError
from tuner.core.units import format_size
from datadir_mover.tiers.base import (FILESYSTEMS, TierProvider, check_fs, check_mountpoint, mkdir_step, mkfs_argv,
                                      root_blocker, tool_blockers, umount_step)
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.model import Tier, with_notes
from datadir_mover.tiers.plan import Plan, Step, run_argv
from datadir_mover.tiers.requests import ThrottledCreate

LOOP_RE = re.compile(r"^loop\d+$")


def group_of(host: Host) -> ThrottleGroup:
    return ThrottleGroup(cgroup_root=host.sys("fs", "cgroup"))


def loop_number(name: str, host: Host) -> str | None:
    """"MAJ:MIN" of /dev/NAME from /sys/block/NAME/dev."""
    return host.read(host.sys("block", name, "dev"))


def backing_file(name: str, host: Host) -> str | None:
    return host.read(host.sys("block", name, "loop", "backing_file"))


class ThrottledProvider(TierProvider):
    name = "throttled"
    kinds = ("throttled",)
    create_help = "a slow tier: a loop device whose I/O the block-I/O cgroup limits (IOPS, bytes/s)"
    request_type = ThrottledCreate

    def claims(self, mount: MountEntry | None, device_name: str | None, host: Host) -> bool:
        if not device_name or not LOOP_RE.match(device_name):
            return False
        return loop_number(device_name, host) in group_of(host).limits()

    def describe(self, tier: Tier, host: Host) -> Tier:
        name = tier.device_name or ""
        limits = group_of(host).limits().get(loop_number(name, host) or "")
        tier = dataclasses.replace(tier, kind="throttled", volatile=False, rotational=None)
        return with_notes(tier, f"throttled loop device over {backing_file(name, host)}: "
                                f"{limits.describe() if limits else 'no limits'} for sandbox servers and fio "
                                "(innotier puts them in the cgroup " + str(group_of(host).path) + ")",
                          "buffered writes flushed later by the kernel's writeback threads are not throttled; "
                          "direct I/O and fsync are")

    def destroy_steps(self, tier: Tier, host: Host) -> list[Step]:
        name = tier.device_name or ""
        device, number, backing = f"/dev/{name}", loop_number(name, host) or "", backing_file(name, host)
        group = group_of(host)
        steps = [umount_step(tier.mountpoint)] if tier.mountpoint else []
        steps.append(Step(summary=f"remove the throttle limits of {device} ({number})",
                          command="; ".join(group.commands(number, Limits())[1:]),
                          action=lambda state: group.clear_limits(number)))
        steps.append(Step(summary=f"detach {device}", command=f"losetup -d {device}",
                          action=lambda state: run_argv(["losetup", "-d", device]) and None))
        if backing:
            steps.append(Step(summary=f"remove the backing file {backing}", command=f"rm {backing}",
                              action=lambda state: os.unlink(backing)))
        return steps

    def plan_create(self, request: ThrottledCreate, host: Host) -> Plan:
        check_fs(request.fs, FILESYSTEMS, "throttled")
        if request.size_bytes <= 0:
            raise UsageError("the throttled tier's size must be positive; give it like 1G")
        if request.limits.empty:
            raise UsageError("a throttled tier needs a limit; give --read-iops, --write-iops, --read-bps or --write-bps")
        backing = _check_backing(request.backing, request.size_bytes)
        mountpoint, needs_mkdir = check_mountpoint(request.mount, host)
        group = group_of(host)
        plan = Plan(title=f"create a {format_size(request.size_bytes)} throttled tier ({request.fs}, "
                          f"{request.limits.describe()}) on {mountpoint}")
        plan.blockers += root_blocker() + tool_blockers("losetup", f"mkfs.{request.fs}")
        if group.available:
            plan.blockers.append(group.available)
        if needs_mkdir:
            plan.steps.append(mkdir_step(mountpoint))
        plan.steps.append(_backing_step(backing, request.size_bytes))
        plan.steps.append(_attach_step(backing))
        plan.steps.append(Step(summary=f"make the {request.fs} file system",
                               command=" ".join(mkfs_argv(request.fs, '"$LOOP"')),
                               action=lambda state: run_argv(mkfs_argv(request.fs, state["LOOP"])) and None))
        plan.steps.append(Step(summary=f"mount it on {mountpoint}", command=f'mount "$LOOP" {mountpoint}',
                               action=lambda state: run_argv(["mount", state["LOOP"], str(mountpoint)]) and None,
                               undo=lambda state: run_argv(["umount", str(mountpoint)]) and None,
                               undo_command=f"umount {mountpoint}"))
        plan.steps.append(_limits_step(group, request))
        plan.notes.append("sandbox servers and `tiers bench` started from now on join the throttle group; a server "
                          "already running is not slowed until it restarts")
        return plan


def _check_backing(path: str, size: int) -> Path:
    if not path:
        raise UsageError("--backing is required: the file the loop device stores its blocks in (on a real disk)")
    backing = Path(os.path.abspath(path))
    if backing.exists():
        raise UsageError(f"{backing} exists; give a new file for the throttled tier's blocks")
    if not backing.parent.is_dir():
        raise UsageError(f"{backing.parent} is not a directory; give the backing file on an existing directory")
    st = os.statvfs(backing.parent)
    if st.f_bavail * st.f_frsize < size:
        raise UsageError(f"{backing.parent} has {format_size(st.f_bavail * st.f_frsize)} free, less than the "
                         f"{format_size(size)} asked; choose a smaller --size or another directory")
    return backing


def _backing_step(backing: Path, size: int) -> Step:
    def action(state: dict) -> None:
        with open(backing, "xb") as fh:
            os.posix_fallocate(fh.fileno(), 0, size)  # allocated now: no hole for ENOSPC to surface in later

    return Step(summary=f"allocate the backing file {backing} ({format_size(size)})",
                command=f"fallocate -l {size} {backing}", action=action,
                undo=lambda state: backing.unlink(missing_ok=True), undo_command=f"rm {backing}")


def _attach_step(backing: Path) -> Step:
    def action(state: dict) -> None:
        state["LOOP"] = run_argv(["losetup", "--find", "--show", "--direct-io=on", str(backing)]).strip()

    return Step(summary="attach it to a free loop device (direct I/O to the backing file)",
                command=f"LOOP=$(losetup --find --show --direct-io=on {backing})", action=action,
                undo=lambda state: run_argv(["losetup", "-d", state["LOOP"]]) and None,
                undo_command='losetup -d "$LOOP"')


def _limits_step(group: ThrottleGroup, request: ThrottledCreate) -> Step:
    def action(state: dict) -> None:
        try:
            state["MAJMIN"] = device_number(state["LOOP"])
        except OSError as exc:
            raise TierError(f"{state['LOOP']} vanished before its limits were set: {exc.strerror}") from None
        group.set_limits(state["MAJMIN"], request.limits)

    return Step(summary=f"limit it to {request.limits.describe()} in the cgroup {group.path}",
                command="\n".join(['MAJMIN=$(lsblk -dno MAJ:MIN "$LOOP" | tr -d " ")']
                                   + group.commands("$MAJMIN", request.limits)),
                action=action, undo=lambda state: group.clear_limits(state["MAJMIN"]),
                undo_command="; ".join(group.commands("$MAJMIN", Limits())[1:]))


PROVIDER = ThrottledProvider()
