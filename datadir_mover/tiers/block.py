"""Plain block devices (NVMe, SSD, HDD, virtio, loop, device-mapper, brd): facts from /sys/block.

Also the shared reader every block-backed kind uses: size (always in 512-byte
sectors), queue/rotational, logical and physical block size, queue/dax, model
(Documentation/ABI/stable/sysfs-block).  This provider is the registry's
fallback: it describes any device the specific kinds did not claim.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass

from tuner.core.probe import MountEntry
from datadir_mover.tiers.base import TierProvider
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.model import Tier, with_notes

SECTOR = 512  # /sys/block/*/size counts 512-byte sectors whatever the device's block size


@dataclass(frozen=True)
class BlockFacts:
    name: str
    size_bytes: int | None
    rotational: bool | None
    logical_block_size: int | None
    physical_block_size: int | None
    queue_dax: bool | None
    model: str | None


def device_name(device: str | None, host: Host) -> str | None:
    """Kernel block-device name behind a mount source (/dev/vda1 -> vda1, /dev/mapper/x -> dm-0 live)."""
    if not device or not device.startswith("/dev/"):
        return None
    path = os.path.realpath(device) if host.live and os.path.exists(device) else device
    return path.rsplit("/", 1)[-1]


def disk_of(name: str, host: Host) -> str:
    """The whole-disk name for a partition (vda1 -> vda, nvme0n1p2 -> nvme0n1); the name itself otherwise."""
    if host.sys("block", name).exists():
        return name
    cls = host.sys("class", "block", name)
    if (cls / "partition").exists():
        return os.path.basename(os.path.dirname(os.path.realpath(cls)))
    m = re.match(r"^(.*\d)p\d+$", name) or re.match(r"^([a-z]+)\d+$", name)
    return m.group(1) if m else name


def read_block_facts(name: str, host: Host) -> BlockFacts:
    disk = disk_of(name, host)
    base = host.sys("class", "block", name) if host.sys("class", "block", name).exists() else host.sys("block", name)
    q = host.sys("block", disk, "queue")
    sectors = host.read_int(base / "size")
    rot = host.read_int(q / "rotational")
    dax = host.read_int(q / "dax")
    model = host.read(host.sys("block", disk, "device", "model"))
    return BlockFacts(
        name=name,
        size_bytes=sectors * SECTOR if sectors is not None else None,
        rotational=None if rot is None else bool(rot),
        logical_block_size=host.read_int(q / "logical_block_size"),
        physical_block_size=host.read_int(q / "physical_block_size"),
        queue_dax=None if dax is None else bool(dax),
        model=model.strip() if model else None,
    )


def classify(disk: str, rotational: bool | None) -> str:
    """Kind of a whole disk from its kernel name, and for SCSI/ATA names from queue/rotational."""
    if re.match(r"^nvme\d+n\d+", disk):
        return "nvme"
    if re.match(r"^vd[a-z]+", disk):
        return "virtio"
    if re.match(r"^loop\d+", disk):
        return "loop"
    if re.match(r"^dm-\d+", disk):
        return "dm"
    if re.match(r"^ram\d+$", disk):
        return "brd"
    if rotational is True:
        return "hdd"
    if rotational is False:
        return "ssd"
    return "other"


class BlockProvider(TierProvider):
    name = "block"
    kinds = ("nvme", "ssd", "hdd", "virtio", "loop", "dm", "brd", "other")

    def claims(self, mount: MountEntry | None, device_name: str | None, host: Host) -> bool:
        return True  # the fallback: last in the registry

    def describe(self, tier: Tier, host: Host) -> Tier:
        name = tier.device_name
        if name is None:
            return dataclasses.replace(tier, kind="other")
        facts = read_block_facts(name, host)
        kind = classify(disk_of(name, host), facts.rotational)
        tier = dataclasses.replace(
            tier,
            kind=kind,
            rotational=facts.rotational,
            volatile=kind == "brd",
            capacity_bytes=tier.capacity_bytes if tier.capacity_bytes is not None else facts.size_bytes,
            logical_block_size=facts.logical_block_size,
            physical_block_size=facts.physical_block_size,
            model=facts.model,
        )
        if kind == "virtio":
            tier = with_notes(tier, "virtio disk: whether an fsync reaches stable storage depends on the hypervisor's cache mode")
        if kind == "loop":
            tier = with_notes(tier, "loop device: performance and durability are those of the backing file's file system")
        return tier


PROVIDER = BlockProvider()
