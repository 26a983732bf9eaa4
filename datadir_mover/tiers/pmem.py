"""Persistent memory: emulated PMEM (memmap=) and NVDIMM / Optane DCPMM namespaces (ndctl), DAX mounts.

Facts (pmem.io docs, ndctl-create-namespace(1), Documentation/filesystems/dax.rst):
- ``memmap=4G!12G`` on the kernel command line reserves 4 GiB at 12 GiB as e820 type 12
  ("persistent (type 12)", tests/fixtures/recorded/hardware/dmesg); the kernel exposes it as /dev/pmemN on
  the ``e820`` bus.  It is DRAM: it is lost at power-off, so innotier counts it volatile.
- ``ndctl create-namespace --mode=fsdax`` gives a /dev/pmemN[.M] block device that file
  systems can mount with DAX; ``-f -e namespace0.0 --mode=fsdax`` reconfigures an existing
  (raw) namespace, which is how an emulated region gets fsdax.  A raw namespace refuses DAX
  ("DAX unsupported by block device. Turning off DAX.").  devdax gives /dev/daxN.M: mmap only.
- DAX needs a file-system block size equal to the page size (mkfs.ext4 -b 4096) and, on xfs,
  no reflink.  ``mount -o dax`` is ``dax=always`` on Linux 5.8+.  Whether DAX is really in
  effect is what statx(2) reports in STATX_ATTR_DAX; the kernel drops ``dax`` from the mount
  options when it turns DAX off.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
from typing import Any, Iterator

from tuner.core.probe import MountEntry, probe_dax
from datadir_mover.tiers.base import (TierProvider, check_fs, check_mountpoint, mkdir_step, mkfs_argv, mount_step,
                                      root_blocker, tool_blockers)
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.model import PmemInfo, Tier, with_notes
from datadir_mover.tiers.plan import Plan, Step, command_step, manual_step
from datadir_mover.tiers.requests import PmemCreate
from tuner.core.errors import TierError, UsageError
from tuner.core.units import format_size

NAME_RE = re.compile(r"^pmem\d+(\.\d+)?$")
FSDAX_MODES = ("fsdax", "memory")  # "memory" is fsdax's name in old ndctl releases
_HUMAN_SIZE_RE = re.compile(r"^\s*([\d.]+)\s*([KMGTP]i?B)")
_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50,
          "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12, "PB": 10 ** 15}


# ---- readers of ndctl / daxctl JSON ----------------------------------------------------------

def parse_json_stream(text: str) -> list[Any]:
    """ndctl prints one JSON document, or (with --buses) several objects one after another."""
    decoder = json.JSONDecoder()
    docs, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return docs
        doc, i = decoder.raw_decode(text, i)
        docs.append(doc)


def parse_size_value(value: Any) -> int | None:
    """ndctl sizes: a byte count, or with -u a string like "4.00 GiB (4.29 GB)" (rounded)."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _HUMAN_SIZE_RE.match(value)
        if m:
            return int(float(m.group(1)) * _UNITS[m.group(2)])
    return None


def _namespace_dicts(doc: Any, provider: str | None = None) -> Iterator[tuple[dict, str | None]]:
    if isinstance(doc, list):
        for item in doc:
            yield from _namespace_dicts(item, provider)
    elif isinstance(doc, dict):
        provider = doc.get("provider", provider)
        if str(doc.get("dev", "")).startswith("namespace"):
            yield doc, provider
        for key in ("buses", "regions", "namespaces"):
            if key in doc:
                yield from _namespace_dicts(doc[key], provider)


def parse_ndctl_namespaces(text: str) -> list[PmemInfo]:
    out = []
    for ns, provider in _namespace_dicts(parse_json_stream(text)):
        chardev = ns.get("chardev")          # ndctl 76 (Debian 12) puts it on the namespace itself
        region = ns.get("daxregion") or {}
        devices = region.get("devices") or []
        if devices and not chardev:
            chardev = devices[0].get("chardev")
        out.append(PmemInfo(
            namespace=ns.get("dev"), mode=ns.get("mode"), map=ns.get("map"),
            size_bytes=parse_size_value(ns.get("size")),
            align=ns.get("align") or region.get("align"),
            provider=provider, blockdev=ns.get("blockdev"), chardev=chardev,
            badblock_count=ns.get("badblock_count"),
        ))
    return out


@dataclasses.dataclass(frozen=True)
class NdRegion:
    """A region of `ndctl list --regions --buses`: what a namespace can be carved from."""

    dev: str
    provider: str | None  # the bus: ACPI.NFIT for NVDIMMs (real, or qemu's), e820 for memmap= emulation
    type: str | None
    size: int | None
    available: int | None


def parse_ndctl_regions(text: str) -> list[NdRegion]:
    out: list[NdRegion] = []

    def add(region: dict, provider: str | None) -> None:
        out.append(NdRegion(region["dev"], provider, region.get("type"), parse_size_value(region.get("size")),
                            parse_size_value(region.get("available_size"))))

    for doc in parse_json_stream(text):
        for item in doc if isinstance(doc, list) else [doc]:
            if not isinstance(item, dict):
                continue
            if "regions" in item:
                for region in item["regions"]:
                    add(region, item.get("provider"))
            elif str(item.get("dev", "")).startswith("region"):
                add(item, None)
    return out


def nvdimm_region(host: Host, wanted: str) -> NdRegion | None:
    """The NVDIMM pmem region to use: ``wanted`` if it is one, else the one with the most free space."""
    regions = [r for r in parse_ndctl_regions(host.tool("ndctl", "list", "--regions", "--buses") or "")
               if r.provider != "e820" and r.type == "pmem"]
    named = [r for r in regions if r.dev == wanted]
    if named:
        return named[0]
    return max(regions, key=lambda r: r.available or 0, default=None)


def parse_daxctl_devices(text: str) -> list[dict]:
    """`daxctl list` (devices, or regions with devices) -> [{"chardev", "size", "mode", "target_node"}]."""
    out = []

    def walk(doc: Any) -> None:
        if isinstance(doc, list):
            for item in doc:
                walk(item)
        elif isinstance(doc, dict):
            if "chardev" in doc:
                out.append({"chardev": doc["chardev"], "size": parse_size_value(doc.get("size")),
                            "mode": doc.get("mode"), "target_node": doc.get("target_node")})
            walk(doc.get("devices", []))

    for doc in parse_json_stream(text):
        walk(doc)
    return out


def namespaces(host: Host) -> list[PmemInfo]:
    text = host.tool("ndctl", "list", "--buses", "--namespaces") or host.tool("ndctl", "list", "--namespaces")
    if not text:
        return []
    try:
        return parse_ndctl_namespaces(text)
    except ValueError:
        return []


def sysfs_provider(name: str, host: Host) -> str | None:
    """The nd bus a live pmem device hangs off: /sys/block/pmemN/device -> .../ndbusX/regionY/namespaceY.Z."""
    if not host.live:
        return None
    target = os.path.realpath(host.sys("block", name, "device"))
    m = re.search(r"/(ndbus\d+)/", target)
    return host.read(host.sys("bus", "nd", "devices", m.group(1), "provider")) if m else None


def kind_of(info: PmemInfo) -> str:
    if info.mode == "devdax":
        return "dcpmm-devdax"
    if info.provider == "e820":
        return "pmem"
    if info.mode in FSDAX_MODES:
        return "dcpmm-fsdax"
    return "pmem"


def volatile_of(info: PmemInfo, kind: str) -> bool:
    if info.provider == "e820":
        return True            # memmap= emulation is DRAM
    if info.provider == "ACPI.NFIT":
        return False
    return kind == "pmem"      # unknown bus: a raw/legacy namespace is most likely memmap=; assume the worst

PMEM_SOURCES = ("memmap", "nvdimm")  # DRAM reserved with memmap= (emulation), or a real NVDIMM region
DAX_FILESYSTEMS = ("ext4", "xfs")
# without DAX the device is a fast block device under the page cache: the DCPMM paper's traditional file systems
PAGE_CACHE_FILESYSTEMS = ("ext4", "xfs", "f2fs")


class PmemProvider(TierProvider):
    name = "pmem"
    kinds = ("pmem", "dcpmm-fsdax", "dcpmm-devdax")
    create_help = "a DAX file system on persistent memory (memmap= emulation or an NVDIMM fsdax namespace)"
    request_type = PmemCreate

    def claims(self, mount: MountEntry | None, device_name: str | None, host: Host) -> bool:
        return bool(device_name and NAME_RE.match(device_name))

    def describe(self, tier: Tier, host: Host) -> Tier:
        name = tier.device_name or ""
        found = next((ns for ns in namespaces(host) if ns.blockdev == name), None)
        queue_dax = host.read_int(host.sys("block", name, "queue", "dax"))
        info = found or PmemInfo(namespace=None, mode=None, blockdev=name)
        if info.provider is None:
            info = dataclasses.replace(info, provider=sysfs_provider(name, host))
        info = dataclasses.replace(info, queue_dax=None if queue_dax is None else bool(queue_dax))
        kind = kind_of(info)
        if tier.dax and tier.dax_source == "mount-options" and (info.mode == "raw" or info.queue_dax is False):
            tier = dataclasses.replace(tier, dax=False, dax_source="none")   # the device cannot do DAX
        tier = dataclasses.replace(
            tier, kind=kind, pmem=info, volatile=volatile_of(info, kind), rotational=False,
            capacity_bytes=tier.capacity_bytes if tier.capacity_bytes is not None else info.size_bytes,
        )
        return with_notes(tier, *self._notes(tier, info))

    @staticmethod
    def _notes(tier: Tier, info: PmemInfo) -> list[str]:
        notes = []
        if info.provider is None:
            notes.append("bus provider unknown (no ndctl --buses output): "
                         + ("counted as an NVDIMM fsdax namespace" if tier.kind == "dcpmm-fsdax"
                            else "counted as emulated (memmap=), so volatile"))
        elif info.provider == "e820":
            notes.append("emulated persistent memory (memmap=): it is DRAM and is lost at power-off")
        if info.mode == "raw" or info.queue_dax is False:
            ns = info.namespace or "namespace0.0"
            notes.append(f"{info.mode or 'this'} namespace cannot do DAX; reconfigure it with "
                         f"`ndctl create-namespace -f -e {ns} --mode=fsdax`")
        if tier.mounted and tier.fs in ("ext4", "xfs") and not tier.dax:
            notes.append("DAX is not in effect on this mount; remount with -o dax (dax=always)")
        if info.badblock_count:
            notes.append(f"{info.badblock_count} bad blocks reported by ndctl; scrub and repair before use")
        return notes

    def candidates(self, host: Host, seen_devices: set[str]) -> list[Tier]:
        out = []
        for info in namespaces(host):
            if info.blockdev and info.blockdev not in seen_devices:
                out.append(self.describe(Tier(mountpoint=None, device=f"/dev/{info.blockdev}", kind="pmem",
                                              fs=None), host))
                seen_devices.add(info.blockdev)
            elif info.chardev and info.chardev not in seen_devices:
                out.append(_devdax_tier(info.chardev, info.size_bytes, info))
                seen_devices.add(info.chardev)
        for dev in parse_daxctl_devices(host.tool("daxctl", "list") or ""):
            if dev["chardev"] not in seen_devices:
                out.append(_devdax_tier(dev["chardev"], dev["size"], None))
                seen_devices.add(dev["chardev"])
        return out

    def plan_create(self, request: PmemCreate, host: Host) -> Plan:
        args, region, chose = _resolve_source(request, host)
        if args.source not in PMEM_SOURCES:
            raise UsageError(f"persistent-memory source {args.source!r} is unknown; choose one of {', '.join(PMEM_SOURCES)}")
        if args.dax:
            check_fs(args.fs, DAX_FILESYSTEMS, "DAX")
        else:
            check_fs(args.fs, PAGE_CACHE_FILESYSTEMS, "PMEM page-cache (no DAX)")
        if not re.match(r"^\d+[KMGT]![\dxa-fA-F]+[KMGT]?$", args.memmap):
            raise UsageError(f"memmap reservation {args.memmap!r} is not SIZE!OFFSET; write it like 4G!12G")
        if not re.match(r"^/dev/pmem\d+(\.\d+)?$", args.device):
            raise UsageError(f"device {args.device!r} is not a pmem block device; write it like /dev/pmem0")
        if args.size_bytes is not None and args.size_bytes <= 0:
            raise UsageError("the namespace size must be positive; give it like 16G, or none for the whole region")
        mountpoint, needs_mkdir = check_mountpoint(args.mount, host)
        device = args.device
        name = device.rsplit("/", 1)[-1]
        how = "DAX" if args.dax else "page-cache (no DAX)"
        plan = Plan(title=f"create a {how} {args.fs} tier on {device} ({args.source}) at {mountpoint}")
        plan.notes += chose
        plan.blockers += root_blocker()
        have_device = host.sys("block", name).exists() and (not host.live or os.path.exists(device))
        have_region = region is not None or host.sys("bus", "nd", "devices", args.region).exists()
        # an NVDIMM's block device appears only when the namespace is created: the region is what must exist
        if not have_device and not (args.source == "nvdimm" and have_region):
            existing = sorted(glob.glob("/dev/pmem*")) if host.live else []
            where = f"; this host has {', '.join(existing)}" if existing else ""
            if args.source == "memmap":
                plan.steps += [
                    manual_step(f"reserve RAM as emulated persistent memory: add memmap={args.memmap} to "
                                "GRUB_CMDLINE_LINUX in /etc/default/grub",
                                f"sed -i 's/^GRUB_CMDLINE_LINUX=\"/&memmap={args.memmap} /' /etc/default/grub"),
                    manual_step("regenerate the boot configuration", "update-grub"),
                    manual_step(f"reboot; {device} appears on the e820 bus", "reboot"),
                ]
                plan.blockers.append(f"no persistent-memory device: {device} is missing{where}; boot with "
                                     f"memmap={args.memmap} (the manual steps) or install NVDIMMs")
            else:
                plan.blockers.append(f"no NVDIMM here: {device} is missing and no nd region answers{where}; "
                                     "this host cannot provide a DAX device")
        plan.blockers += tool_blockers("ndctl", f"mkfs.{args.fs}")
        if args.source == "memmap":
            plan.steps.append(command_step(f"reconfigure {args.namespace} to fsdax (a raw namespace refuses DAX)",
                                           ["ndctl", "create-namespace", "--force", f"--reconfig={args.namespace}",
                                            "--mode=fsdax"]))
        elif have_device:
            plan.notes.append(f"{device} exists already: its namespace is used as it is (no create-namespace)")
        else:
            argv = ["ndctl", "create-namespace", "--mode=fsdax", f"--region={args.region}"]
            if args.size_bytes:
                argv.append(f"--size={format_size(args.size_bytes)}")
            plan.steps.append(command_step(f"create an fsdax namespace in {args.region}", argv))
            plan.notes.append("the new namespace stays if a later step fails; `ndctl destroy-namespace -f` frees it")
        if args.dax:
            plan.steps.append(command_step(f"make {args.fs} with 4 KiB blocks (DAX needs block size = page size)",
                                           mkfs_argv(args.fs, device, for_dax=True)))
        else:
            plan.steps.append(command_step(f"make {args.fs} (used through the page cache)", mkfs_argv(args.fs, device)))
        if needs_mkdir:
            plan.steps.append(mkdir_step(mountpoint))
        plan.steps.append(mount_step(device, mountpoint, args.fs, (["dax"] if args.dax else []) + list(args.options)))
        plan.steps.append(_verify_dax_step(mountpoint, want=args.dax))
        if args.source == "memmap":
            plan.notes.append("volatile: memmap= emulation is DRAM and is lost at power-off; keep a consistent "
                              "copy (`innotier persist`) of anything on it")
        return plan

    def destroy_steps(self, tier: Tier, host: Host) -> list[Step]:
        return super().destroy_steps(tier, host)  # the namespace stays; `ndctl destroy-namespace` is the user's call


def _resolve_source(request: PmemCreate, host: Host) -> tuple[PmemCreate, NdRegion | None, list[str]]:
    """(the request with source, region and device decided, the NVDIMM region if one is used, notes saying which).

    Without a source, a host with an NVDIMM region (``ndctl list --regions``) uses it; only a host without
    one gets memmap= emulation, which needs a reboot."""
    region = nvdimm_region(host, request.region) if request.source in (None, "nvdimm") else None
    source = request.source or ("nvdimm" if region else "memmap")
    notes = []
    if request.source is None and region is not None:
        free = f", {format_size(region.available)} free" if region.available is not None else ""
        notes.append(f"using the NVDIMM region {region.dev} ({region.provider or 'unknown bus'}{free}); "
                     "no memmap= emulation or reboot needed (--source memmap to emulate anyway)")
    elif request.source is None:
        notes.append("no NVDIMM region (ndctl list --regions shows none): emulating persistent memory with "
                     f"memmap={request.memmap}")
    region_name = region.dev if region is not None else request.region
    device = request.device or (f"/dev/pmem{region_name.removeprefix('region')}" if source == "nvdimm"
                                else "/dev/pmem0")
    return dataclasses.replace(request, source=source, region=region_name, device=device), region, notes


def _devdax_tier(chardev: str, size: int | None, info: PmemInfo | None) -> Tier:
    return Tier(mountpoint=None, device=f"/dev/{chardev}", kind="dcpmm-devdax", fs=None, capacity_bytes=size,
                pmem=info or PmemInfo(namespace=None, mode="devdax", chardev=chardev, size_bytes=size),
                volatile=False, rotational=False,
                notes=("devdax character device: mmap only, no file system; InnoDB files cannot live here",))


def _verify_dax_step(mountpoint, want: bool = True) -> Step:
    """statx on a new file must report what the tier claims: DAX in effect, or (a page-cache tier) not."""
    def action(state: dict) -> None:
        found = probe_dax(mountpoint)
        if want and found is not True:
            raise TierError(f"DAX is not in effect on {mountpoint} (statx reports no STATX_ATTR_DAX); "
                            "see dmesg for why the kernel turned it off")
        if not want and found is True:
            raise TierError(f"DAX is in effect on {mountpoint} although the tier was mounted without it "
                            "(statx reports STATX_ATTR_DAX); check the file system's default dax= mode")

    if want:
        return Step(summary="check that DAX is in effect (statx STATX_ATTR_DAX on a new file)",
                    command=f"# innotier: statx({mountpoint}/.innotier-dax-*) must report STATX_ATTR_DAX",
                    action=action)
    return Step(summary="check that DAX is not in effect (no STATX_ATTR_DAX on a new file: the page cache is used)",
                command=f"# innotier: statx({mountpoint}/.innotier-dax-*) must not report STATX_ATTR_DAX",
                action=action)


PROVIDER = PmemProvider()
