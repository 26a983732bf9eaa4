"""Tier detection: every mounted file system and every unused block device, described by its provider.

``detect_tiers(sys_root, proc_root, run)`` reads /proc/mounts, /sys/block and the tools'
output (mdadm --detail, ndctl list, daxctl list) through a ``Host``; pointed at recorded
trees and a ``RecordedRunner`` it describes hardware that is not on this machine.  On the
live host it also probes what the kernel does rather than what the options say: O_DIRECT
(an aligned 4 KiB O_DIRECT write) and effective DAX (statx STATX_ATTR_DAX on a new file).

``tier_for_path(path)`` is the tier a path lives on, probed in that directory: what the
relocation code asks before it moves an InnoDB file there.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from tuner.core.probe import MountEntry, mount_of, probe_dax, probe_o_direct
from datadir_mover.tiers import block
from datadir_mover.tiers.host import Host, Runner, subprocess_runner
from datadir_mover.tiers.model import Tier
from datadir_mover.tiers.registry import PROVIDERS, provider_for

# file systems that hold no files a database could use
PSEUDO_FS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "mqueue", "debugfs", "tracefs", "securityfs",
    "pstore", "bpf", "configfs", "fusectl", "hugetlbfs", "autofs", "binfmt_misc", "rpc_pipefs", "nsfs",
    "efivarfs", "selinuxfs", "ramfs-initramfs", "squashfs", "iso9660",
})
SYSTEM_PREFIXES = ("/proc", "/sys", "/dev", "/run")   # kernel and runtime trees; /dev/shm is the exception


def detect_tiers(sys_root: str = "/sys", proc_root: str = "/proc", run: Runner = subprocess_runner, *,
                 mounts: Sequence[MountEntry] | None = None, probe: bool | None = None,
                 include_all: bool = False) -> list[Tier]:
    """All tiers: mounted file systems first (in mount order), then unused block devices, then
    devices only tools can see (devdax).  ``probe`` defaults to True on the live host only."""
    host = Host(sys_root, proc_root, run, mounts_override=list(mounts) if mounts is not None else None)
    probe = host.live if probe is None else probe
    tiers: list[Tier] = []
    busy: set[str] = set()
    usable = {m.mountpoint for m in storage_mounts(host.mounts())}
    for m in storage_mounts(host.mounts(), include_all):
        # never write probe files into pseudo or system trees (/dev, /sys/fs/cgroup), even with --all
        tier = describe_mount(m, host, probe=probe and m.mountpoint in usable)
        tiers.append(tier)
        name = block.device_name(m.device, host)
        if name:
            busy.update({name, block.disk_of(name, host)})
    swaps = _swap_devices(host)
    for name in host.block_devices():
        if name not in busy and _is_candidate(name, host, busy, swaps):
            tiers.append(describe_device(name, host))
            busy.add(name)
    for provider in PROVIDERS:
        tiers.extend(provider.candidates(host, busy))
    return tiers


def tier_for_path(path: str | os.PathLike, sys_root: str = "/sys", proc_root: str = "/proc",
                  run: Runner = subprocess_runner, *, probe: bool = True) -> Tier:
    """The tier ``path`` lives on (the path need not exist yet), probed in its nearest existing directory."""
    host = Host(sys_root, proc_root, run)
    p = os.path.realpath(os.fspath(path))
    while not os.path.isdir(p):
        p = os.path.dirname(p)
    mount = mount_of(p, host.mounts())
    return describe_mount(mount, host, probe=probe and host.live, probe_dir=p)


def storage_mounts(mounts: Sequence[MountEntry], include_all: bool = False) -> list[MountEntry]:
    """Mounts that could hold database files: not pseudo file systems, not kernel/runtime trees,
    not read-only (unless include_all); one entry per mount point (the last mounted, on top)."""
    by_point: dict[str, MountEntry] = {}
    for m in mounts:
        by_point.pop(m.mountpoint, None)
        by_point[m.mountpoint] = m
    out = []
    for m in by_point.values():
        if not include_all:
            if m.fstype in PSEUDO_FS or "ro" in m.options:
                continue
            if m.mountpoint != "/dev/shm" and any(m.mountpoint == p or m.mountpoint.startswith(p + "/")
                                                   for p in SYSTEM_PREFIXES):
                continue
        out.append(m)
    return out


def describe_mount(m: MountEntry, host: Host, *, probe: bool, probe_dir: str | None = None) -> Tier:
    name = block.device_name(m.device, host)
    tier = Tier(mountpoint=m.mountpoint, device=m.device, kind="other", fs=m.fstype, mount_options=m.options)
    if host.live:
        tier = _with_space(tier)
    tier = _with_dax_and_o_direct(tier, m, host, probe, probe_dir or m.mountpoint)
    return provider_for(m, name, host).describe(tier, host)


def describe_device(name: str, host: Host) -> Tier:
    tier = Tier(mountpoint=None, device=f"/dev/{name}", kind="other", fs=None)
    return provider_for(None, name, host).describe(tier, host)


def _with_space(tier: Tier) -> Tier:
    try:
        st = os.statvfs(tier.mountpoint or "/")
    except OSError:
        return tier
    return dataclasses.replace(tier, capacity_bytes=st.f_blocks * st.f_frsize, free_bytes=st.f_bavail * st.f_frsize)


def _with_dax_and_o_direct(tier: Tier, m: MountEntry, host: Host, probe: bool, directory: str) -> Tier:
    """Effective DAX: statx on a new file where we may write; otherwise the mount options (the kernel
    drops `dax` from them when it refuses DAX) and the device's queue/dax."""
    dax_opt = any(o in ("dax", "dax=always") for o in m.options)
    name = block.device_name(m.device, host)
    if dax_opt and name:
        queue_dax = host.read_int(host.sys("block", block.disk_of(name, host), "queue", "dax"))
        dax_opt = queue_dax != 0
    dax, source, o_direct = dax_opt, ("mount-options" if dax_opt else "none"), None
    writable = probe and "ro" not in m.options and os.path.isdir(directory) and os.access(directory, os.W_OK)
    if writable:
        try:
            probed = probe_dax(directory)
            if probed is not None:
                dax, source = probed, "statx"
            o_direct = probe_o_direct(directory)
        except OSError:   # full or refusing writes: leave what the options say
            o_direct = None
    return dataclasses.replace(tier, dax=dax, dax_source=source, o_direct=o_direct)


def _swap_devices(host: Host) -> set[str]:
    try:
        lines = host.proc("swaps").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {line.split()[0].rsplit("/", 1)[-1] for line in lines if line.strip()}


def _is_candidate(name: str, host: Host, busy: set[str], swaps: set[str]) -> bool:
    """An unused block device that could carry a tier: has a size (md and pmem trees may lack it),
    is not swap, is not held by another device (md member, dm), has no mounted partition."""
    if name in swaps:
        return False
    base = host.sys("block", name)
    holders = base / "holders"
    if holders.is_dir() and any(holders.iterdir()):
        return False
    if any(b != name and block.disk_of(b, host) == name for b in busy):
        return False
    if name.startswith("zram") and host.read_int(base / "initstate") == 0:
        return False  # an unused zram slot: no memory, nothing to describe
    size = host.read_int(base / "size")
    if size is None:
        return (base / "md").is_dir() or name.startswith(("pmem", "nvme", "sd", "vd"))
    return size > 0
