"""The explicit registry of tier kinds.  Order matters: the first provider that claims a mount or
device describes it, so the block provider, which claims everything, comes last."""

from __future__ import annotations

from tuner.core.probe import MountEntry
from datadir_mover.tiers import block, pmem, raid, ramdisk, throttled, zram
from datadir_mover.tiers.base import TierProvider
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.model import Tier

PROVIDERS: tuple[TierProvider, ...] = (
    zram.PROVIDER,      # zram
    ramdisk.PROVIDER,   # tmpfs, ramfs
    pmem.PROVIDER,      # pmem, dcpmm-fsdax, dcpmm-devdax
    raid.PROVIDER,      # md-raid
    throttled.PROVIDER, # a loop device with block-I/O cgroup limits
    block.PROVIDER,     # nvme, ssd, hdd, virtio, loop, dm, brd, other (fallback)
)


def creatable() -> dict[str, TierProvider]:
    """`tiers create KIND`: the kinds innotier can provision."""
    return {p.name: p for p in PROVIDERS if p.create_help}


def provider_for(mount: MountEntry | None, device_name: str | None, host: Host) -> TierProvider:
    for p in PROVIDERS:
        if p.claims(mount, device_name, host):
            return p
    return block.PROVIDER


def provider_for_tier(tier: Tier) -> TierProvider:
    for p in PROVIDERS:
        if tier.kind in p.kinds:
            return p
    return block.PROVIDER
