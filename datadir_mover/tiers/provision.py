"""Plans to create and destroy tiers; ``plan.apply_plan`` carries them out.

``plan_create(request)`` asks the provider whose request type it is (registry) for its plan.
``plan_destroy(path)`` tears down the tier mounted at ``path``: unmount, then what
the kind needs (zram: reset and hot_remove; md: mdadm --stop).  It refuses system
mounts, and mounts that still hold files unless ``force`` (a tier with data on it
is not discarded by accident: move the data off first).
"""

from __future__ import annotations

import os
import re

from datadir_mover.tiers import zram
from datadir_mover.tiers.base import root_blocker
from datadir_mover.tiers.detect import SYSTEM_PREFIXES, describe_device, describe_mount
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.plan import Plan
from datadir_mover.tiers.registry import creatable, provider_for_tier
from datadir_mover.tiers.requests import CreateRequest
from tuner.core.errors import TierError, UsageError

SYSTEM_MOUNTS = frozenset({"/", "/boot", "/boot/efi", "/usr", "/var", "/home", "/etc", "/opt", "/srv", "/tmp"})
IGNORED_ENTRIES = frozenset({"lost+found"})


def plan_create(request: CreateRequest, host: Host | None = None) -> Plan:
    """The plan to create the tier ``request`` (a ``datadir_mover.tiers.requests`` dataclass) describes."""
    provider = next((p for p in creatable().values() if isinstance(request, p.request_type)), None)
    if provider is None:
        raise TierError(f"cannot create a tier from {type(request).__name__}; "
                        f"give one of {', '.join(p.request_type.__name__ for p in creatable().values())}")
    return provider.plan_create(request, host or Host())


def plan_destroy(path: str, host: Host | None = None, force: bool = False) -> Plan:
    host = host or Host()
    target = os.path.abspath(path)
    if re.match(r"^/dev/zram\d+$", target):
        return _plan_destroy_zram_device(target, host)
    entry = next((m for m in reversed(host.mounts()) if m.mountpoint == target), None)
    if entry is None:
        raise UsageError(f"{target} is not a mount point; give a tier's mount point as `innotier tiers list` shows it")
    if target in SYSTEM_MOUNTS or any(target == p or target.startswith(p + "/") for p in SYSTEM_PREFIXES):
        raise UsageError(f"{target} is a system mount; innotier destroys only tiers, not the host's own file systems")
    entries = [e for e in _list(target) if e not in IGNORED_ENTRIES]
    if entries and not force:
        shown = ", ".join(sorted(entries)[:3])
        raise UsageError(f"{target} still holds {len(entries)} entries ({shown}); move them off first "
                         "(`innotier move`) or pass --force to discard them")
    tier = describe_mount(entry, host, probe=False)
    plan = Plan(title=f"destroy the {tier.kind} tier at {target}")
    plan.blockers += root_blocker()
    plan.steps += provider_for_tier(tier).destroy_steps(tier, host)
    if entries:
        plan.notes.append(f"--force: the {len(entries)} entries on {target} are discarded")
    if tier.kind == "md-raid":
        plan.notes.append("member superblocks are kept; `mdadm --zero-superblock DEV` before reusing a member")
    if tier.kind in ("pmem", "dcpmm-fsdax"):
        plan.notes.append("the namespace is kept; `ndctl destroy-namespace` frees it")
    plan.notes.append(f"the directory {target} is left in place")
    return plan


def _plan_destroy_zram_device(device: str, host: Host) -> Plan:
    name = device.rsplit("/", 1)[-1]
    if not host.sys("block", name).exists():
        raise UsageError(f"{device} does not exist; `innotier tiers list` shows the zram tiers")
    mounted = [m.mountpoint for m in host.mounts() if m.device == device]
    if mounted:
        raise UsageError(f"{device} is mounted on {mounted[-1]}; destroy it by its mount point")
    tier = describe_device(name, host)
    plan = Plan(title=f"destroy the unmounted zram device {device}")
    plan.blockers += root_blocker()
    plan.steps += zram.PROVIDER.destroy_steps(tier, host)
    return plan


def _list(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
