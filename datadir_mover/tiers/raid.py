"""Linux software RAID (md, mdadm): detection from sysfs, /proc/mdstat and `mdadm --detail`,
creation with `mdadm --create`, and the expected-vs-measured formulas of the RAID paper.

Readers (Documentation/admin-guide/md.rst): /sys/block/mdX/md/{level, chunk_size, raid_disks,
array_state, degraded, sync_action, sync_completed, layout, rdN -> dev-*, dev-*/state}.  md/layout
is a number (RAID 10: 258 = near=2; RAID 5/6: 2 = left-symmetric, as recorded in the lab VM) that
``decode_md_layout`` turns into mdadm's words ("Layout : near=2"); mdstat says "2 near-copies",
"algorithm 2".  RAID 0 has no md/degraded.  mdstat counts sizes in 1 KiB blocks; so does mdadm's "Array Size".
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from dataclasses import dataclass, field

from tuner.core.probe import MountEntry
from datadir_mover.tiers.base import (FILESYSTEMS, TierProvider, check_fs, check_mountpoint, mkdir_step, mkfs_argv,
                                      mount_step, root_blocker, tool_blockers, umount_step)
from datadir_mover.tiers.host import Host
from datadir_mover.tiers.model import RaidInfo, Tier, with_notes
from datadir_mover.tiers.plan import Plan, Step, command_step, run_argv
from datadir_mover.tiers.requests import RaidCreate
from tuner.core.errors import UsageError
from tuner.core.units import format_size, parse_size

NAME_RE = re.compile(r"^md(\d+|_\w+)$")
LEVELS = (0, 1, 5, 6, 10)
# fewest members per level, as the RAID paper builds them (docs/sources.md, section 4.1: "RAID 5 should include
# at least three devices", "RAID 6 ... at least four", "RAID 10 ... at least four devices")
MIN_DEVICES = {0: 2, 1: 2, 5: 3, 6: 4, 10: 4}


# ---- expected performance (the RAID paper, section 4.1) -------------------------------------

@dataclass(frozen=True)
class RaidExpectation:
    level: int
    devices: int
    capacity_factor: float    # usable capacity in units of one member
    read: float               # expected read throughput, in the unit of the single-device figure
    write: float              # expected write throughput


def expected_raid_performance(level: int, devices: int, read_one: float, write_one: float) -> RaidExpectation:
    """The paper's "theoretical and expected performance" of an array of ``devices`` identical members:

    RAID 0:  capacity N,     write N x w,          read N x r
    RAID 1:  capacity 1,     write 1 x w,          read N x r
    RAID 10: capacity N/2,   write N x w / 2,      read N x r
    RAID 5:  capacity N-1,   write (N-1) x w / 4,  read (N-1) x r
    RAID 6:  capacity N-2,   write (N-2) x w / 6,  read (N-2) x r
    """
    if level not in LEVELS:
        raise UsageError(f"RAID level {level} has no formula; choose one of {', '.join(map(str, LEVELS))}")
    if devices < MIN_DEVICES[level]:
        raise UsageError(f"RAID {level} needs at least {MIN_DEVICES[level]} devices, not {devices}")
    n = devices
    if level == 0:
        return RaidExpectation(0, n, n, n * read_one, n * write_one)
    if level == 1:
        return RaidExpectation(1, n, 1, n * read_one, write_one)
    if level == 10:
        return RaidExpectation(10, n, n / 2, n * read_one, n * write_one / 2)
    if level == 5:
        return RaidExpectation(5, n, n - 1, (n - 1) * read_one, (n - 1) * write_one / 4)
    return RaidExpectation(6, n, n - 2, (n - 2) * read_one, (n - 2) * write_one / 6)


def measured_vs_expected(level: int, devices: int, read_one: float, write_one: float,
                         read_measured: float | None, write_measured: float | None) -> dict:
    """Ratios measured / expected (1.0 = the formula's promise; the paper saw down to 0.08 for RAID 6)."""
    exp = expected_raid_performance(level, devices, read_one, write_one)
    return {
        "level": level, "devices": devices, "capacity_factor": exp.capacity_factor,
        "expected_read": exp.read, "expected_write": exp.write,
        "measured_read": read_measured, "measured_write": write_measured,
        "read_ratio": None if read_measured is None or not exp.read else read_measured / exp.read,
        "write_ratio": None if write_measured is None or not exp.write else write_measured / exp.write,
    }


# ---- /proc/mdstat ------------------------------------------------------------------------------

@dataclass
class MdstatArray:
    name: str
    active: bool
    level: str | None = None
    read_only: str | None = None                  # "auto-read-only", "read-only"
    members: list[tuple[str, int, str]] = field(default_factory=list)   # (device, role number, flag F/S/W/R or "")
    blocks_kib: int | None = None
    superblock: str | None = None
    chunk_bytes: int | None = None
    raid_disks: int | None = None
    working_disks: int | None = None
    status: str | None = None                     # "UU_"
    layout: str | None = None                     # "2 near-copies", "algorithm 2"
    action: str | None = None                     # recovery/resync/check/reshape, or "resync=DELAYED"
    progress: float | None = None


_ARRAY_RE = re.compile(r"^(?P<name>\S+)\s*:\s*(?P<state>active|inactive)(?:\s+\((?P<ro>[^)]*)\))?\s*(?P<rest>.*)$")
_MEMBER_RE = re.compile(r"^(?P<dev>\S+?)\[(?P<role>\d+)\](?:\((?P<flag>[A-Z])\))?$")
_CHUNK_RE = re.compile(r"(\d+)([kKmM])\s+chunks?\b")
_PROGRESS_RE = re.compile(r"\b(recovery|resync|check|reshape|repair)\s*=\s*([\d.]+)%")


def parse_mdstat(text: str) -> dict[str, MdstatArray]:
    arrays: dict[str, MdstatArray] = {}
    current: MdstatArray | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("Personalities"):
            continue
        if line.startswith("unused devices"):
            current = None
            continue
        m = _ARRAY_RE.match(line)
        if m and m.group("name") != "bitmap":
            current = MdstatArray(name=m.group("name"), active=m.group("state") == "active", read_only=m.group("ro"))
            for token in m.group("rest").split():
                mm = _MEMBER_RE.match(token)
                if mm:
                    current.members.append((mm.group("dev"), int(mm.group("role")), mm.group("flag") or ""))
                elif current.level is None and not current.members:
                    current.level = token
            arrays[current.name] = current
            continue
        if current is not None:
            _parse_mdstat_detail(current, line)
    return arrays


def _parse_mdstat_detail(arr: MdstatArray, line: str) -> None:
    if (m := re.search(r"^(\d+) blocks", line)):
        arr.blocks_kib = int(m.group(1))
    if (m := re.search(r"super (\S+)", line)):
        arr.superblock = m.group(1)
    if (m := _CHUNK_RE.search(line)):
        arr.chunk_bytes = int(m.group(1)) * (1024 if m.group(2) in "kK" else 1 << 20)
    if (m := re.search(r"\[(\d+)/(\d+)\]", line)):
        arr.raid_disks, arr.working_disks = int(m.group(1)), int(m.group(2))
    if (m := re.search(r"\[([U_]+)\]", line)):
        arr.status = m.group(1)
    if (m := re.search(r"(\d+ (?:near|far|offset)-copies|algorithm \d+)", line)):
        arr.layout = m.group(1)
    if (m := _PROGRESS_RE.search(line)):
        arr.action, arr.progress = m.group(1), float(m.group(2)) / 100
    elif (m := re.search(r"\b(resync|recovery)=(DELAYED|PENDING)", line)):
        arr.action = m.group(0)


# ---- mdadm --detail ----------------------------------------------------------------------------

@dataclass
class MdadmDetail:
    device: str | None
    fields: dict[str, str]
    devices: list[tuple[str, str]]     # (path, state) e.g. ("/dev/sdc", "active sync"), ("/dev/sda1", "spare")

    @property
    def level(self) -> str | None:
        return self.fields.get("Raid Level")

    @property
    def chunk_bytes(self) -> int | None:
        v = self.fields.get("Chunk Size")
        return parse_size(v) if v else None

    @property
    def array_size_bytes(self) -> int | None:
        v = self.fields.get("Array Size")
        return int(v.split()[0]) * 1024 if v else None   # KiB

    def int_field(self, key: str) -> int | None:
        v = self.fields.get(key)
        return int(v.split()[0]) if v and v.split()[0].isdigit() else None


_DEV_ROW_RE = re.compile(r"^\s*(?:\d+|-)\s+\d+\s+\d+\s+(?:\d+|-)\s*(?P<state>.*?)\s*(?P<path>/dev/\S+)\s*$")


def parse_mdadm_detail(text: str) -> MdadmDetail:
    lines = text.splitlines()
    device = lines[0].strip().rstrip(":") if lines and lines[0].strip().endswith(":") else None
    fields: dict[str, str] = {}
    devices: list[tuple[str, str]] = []
    in_table = False
    for line in lines[1:]:
        if re.match(r"^\s*Number\s+Major\s+Minor", line):
            in_table = True
            continue
        if in_table:
            m = _DEV_ROW_RE.match(line)
            if m:
                devices.append((m.group("path"), m.group("state")))
            continue
        key, sep, value = line.partition(" : ")
        if sep:
            fields[key.strip()] = value.strip()
    return MdadmDetail(device=device, fields=fields, devices=devices)


# ---- sysfs md/ ---------------------------------------------------------------------------------

# md/layout numbers for RAID 5/6 (drivers/md/raid5.h ALGORITHM_*), named as mdadm --detail names them
RAID5_ALGORITHMS = {0: "left-asymmetric", 1: "right-asymmetric", 2: "left-symmetric", 3: "right-symmetric",
                    4: "parity-first", 5: "parity-last", 16: "ddf-zero-restart", 17: "ddf-N-restart",
                    18: "ddf-N-continue", 8: "rotating-zero-restart", 9: "rotating-N-restart",
                    10: "rotating-N-continue", 20: "left-asymmetric-6", 21: "right-asymmetric-6",
                    22: "left-symmetric-6", 23: "right-symmetric-6", 24: "parity-first-6"}


def decode_md_layout(level: str | None, value: int | None) -> str | None:
    """md/layout as mdadm prints it: RAID 10 near/far/offset copies (drivers/md/raid10.c: near = bits 0-7,
    far = bits 8-15, offset = bit 16), RAID 5/6 the parity algorithm.  Other levels have no layout."""
    if value is None:
        return None
    if level == "raid10":
        near, far, offset = value & 0xFF, (value >> 8) & 0xFF, bool(value & 0x10000)
        parts = []
        if near > 1:
            parts.append(f"near={near}")
        if far > 1:
            parts.append(f"{'offset' if offset else 'far'}={far}")
        return ", ".join(parts) or None
    if level in ("raid5", "raid6", "raid4"):
        return RAID5_ALGORITHMS.get(value, f"algorithm {value}")
    return None


def read_md_sysfs(name: str, host: Host) -> RaidInfo | None:
    md = host.sys("block", name, "md")
    if not md.is_dir():
        return None
    slots: list[str] = []
    for rd in sorted(md.glob("rd*"), key=lambda p: int(p.name[2:]) if p.name[2:].isdigit() else 0):
        target = os.readlink(rd) if rd.is_symlink() else (host.read(rd) or "")
        slots.append(os.path.basename(target).removeprefix("dev-"))
    states = {p.name.removeprefix("dev-"): (host.read(p / "state") or "") for p in md.glob("dev-*")}
    failed = tuple(sorted(d for d, s in states.items() if "faulty" in s))
    if slots:
        members = tuple(d for d in slots if d not in failed)
    else:
        members = tuple(sorted(d for d, s in states.items() if "in_sync" in s))
    spares = tuple(sorted(d for d, s in states.items() if "spare" in s and d not in members))
    raid_disks_text = host.read(md / "raid_disks") or ""
    m = re.match(r"^(\d+)(?:\s+\((\d+)\))?", raid_disks_text)
    chunk = host.read_int(md / "chunk_size")
    progress = None
    sc = host.read(md / "sync_completed") or ""
    if (pm := re.match(r"^(\d+)\s*/\s*(\d+)$", sc)) and int(pm.group(2)):
        progress = int(pm.group(1)) / int(pm.group(2))
    size = host.read_int(host.sys("block", name, "size"))
    level = host.read(md / "level") or None
    return RaidInfo(
        device=f"/dev/{name}",
        level=level,
        layout=decode_md_layout(level, host.read_int(md / "layout")),
        chunk_bytes=chunk or None,
        raid_disks=int(m.group(1)) if m else None,
        previous_raid_disks=int(m.group(2)) if m and m.group(2) else None,
        members=members, spares=spares, failed=failed,
        state=host.read(md / "array_state") or None,
        degraded=host.read_int(md / "degraded"),
        sync_action=host.read(md / "sync_action") or None,
        sync_progress=progress,
        array_size_bytes=size * 512 if size else None,
        sources=("sysfs",),
    )


def raid_from_mdstat(arr: MdstatArray) -> RaidInfo:
    members = tuple(d for d, _, flag in arr.members if flag not in ("F", "S"))
    raid_disks = arr.raid_disks
    if raid_disks is None and arr.active and arr.level in ("raid0", "linear"):
        raid_disks = len(members)   # mdstat prints no [n/m] for RAID 0: every listed member is a data disk
    return RaidInfo(
        device=f"/dev/{arr.name}", level=arr.level, chunk_bytes=arr.chunk_bytes, raid_disks=raid_disks,
        members=members,
        spares=tuple(d for d, _, flag in arr.members if flag == "S"),
        failed=tuple(d for d, _, flag in arr.members if flag == "F"),
        state=("active" if arr.active else "inactive") + (f" ({arr.read_only})" if arr.read_only else ""),
        degraded=(arr.raid_disks - arr.working_disks) if arr.raid_disks is not None and arr.working_disks is not None else None,
        sync_action=arr.action, sync_progress=arr.progress, layout=arr.layout,
        array_size_bytes=arr.blocks_kib * 1024 if arr.blocks_kib else None, sources=("mdstat",),
    )


def fill(primary: RaidInfo | None, other: RaidInfo | None, only: tuple[str, ...] | None = None) -> RaidInfo | None:
    """Fill the primary source's unknown (None) fields from another source; ``only`` limits which.
    sysfs is authoritative for what it reports (an empty spare list is an answer), so from mdstat and
    mdadm it only takes what sysfs cannot tell: the layout, the array size and (RAID 0 has no md/degraded) the degraded count."""
    if other is None:
        return primary
    if primary is None:
        return other
    updates = {}
    for f in dataclasses.fields(RaidInfo):
        if f.name == "sources" or (only is not None and f.name not in only):
            continue
        if getattr(primary, f.name) is None and getattr(other, f.name) is not None:
            updates[f.name] = getattr(other, f.name)
    if not updates:
        return primary
    return dataclasses.replace(primary, **updates, sources=primary.sources + other.sources)


def raid_from_detail(detail: MdadmDetail, name: str) -> RaidInfo:
    devices = detail.devices
    base = lambda p: p.rsplit("/", 1)[-1]  # noqa: E731
    raid_devices, active = detail.int_field("Raid Devices"), detail.int_field("Active Devices")
    action = progress = None
    for key in ("Reshape Status", "Rebuild Status", "Resync Status", "Check Status"):
        if (m := re.match(r"^(\d+)% complete", detail.fields.get(key, ""))):
            action, progress = key.split()[0].lower(), int(m.group(1)) / 100
    return RaidInfo(
        device=f"/dev/{name}", level=detail.level, chunk_bytes=detail.chunk_bytes,
        raid_disks=raid_devices,
        members=tuple(base(p) for p, s in devices if s.startswith("active") or "rebuilding" in s),
        spares=tuple(base(p) for p, s in devices if s == "spare"),
        failed=tuple(base(p) for p, s in devices if "faulty" in s),
        state=detail.fields.get("State"),
        layout=None if detail.fields.get("Layout") in (None, "-unknown-") else detail.fields["Layout"],  # RAID 0: -unknown-
        degraded=(raid_devices - active) if raid_devices is not None and active is not None else None,
        sync_action=action, sync_progress=progress,
        array_size_bytes=detail.array_size_bytes, sources=("mdadm",),
    )


# sysfs has no layout, and RAID 0 / linear have no md/degraded file (seen in the lab VM, Linux 6.1)
SYSFS_GAPS = ("layout", "array_size_bytes", "degraded")


def read_raid(name: str, host: Host) -> RaidInfo | None:
    sysfs = read_md_sysfs(name, host)
    mdstat_text = host.mdstat()
    from_mdstat = None
    if mdstat_text:
        arr = parse_mdstat(mdstat_text).get(name)
        from_mdstat = raid_from_mdstat(arr) if arr else None
    detail_text = host.tool("mdadm", "--detail", f"/dev/{name}")
    from_detail = raid_from_detail(parse_mdadm_detail(detail_text), name) if detail_text else None
    if sysfs is not None:
        return fill(fill(sysfs, from_detail, SYSFS_GAPS), from_mdstat, SYSFS_GAPS)
    return fill(from_detail, from_mdstat)   # mdadm's words (State: clean, Layout: near=2) first


# ---- the provider ------------------------------------------------------------------------------

class RaidProvider(TierProvider):
    name = "raid"
    kinds = ("md-raid",)
    create_help = "an mdadm software RAID 0/1/5/6/10 array (optionally with a file system, mounted)"
    request_type = RaidCreate

    def claims(self, mount: MountEntry | None, device_name: str | None, host: Host) -> bool:
        return bool(device_name and NAME_RE.match(device_name))

    def describe(self, tier: Tier, host: Host) -> Tier:
        name = tier.device_name or ""
        raid = read_raid(name, host)
        tier = dataclasses.replace(tier, kind="md-raid", raid=raid, volatile=False,
                                   capacity_bytes=tier.capacity_bytes if tier.capacity_bytes is not None
                                   else (raid.array_size_bytes if raid else None))
        notes = []
        if raid is None:
            notes.append("no md state found (sysfs md/, /proc/mdstat and mdadm --detail are all silent)")
        else:
            if raid.degraded:
                notes.append(f"degraded: {raid.degraded} member(s) missing; a further failure may lose data")
            if raid.sync_action and raid.sync_action not in ("idle",):
                notes.append(f"{raid.sync_action} in progress: benchmarks now measure a busy array")
            if raid.level == "container":
                notes.append("metadata container (IMSM/DDF): not a usable tier; its member arrays are")
        return with_notes(tier, *notes)

    def candidates(self, host: Host, seen_devices: set[str]) -> list[Tier]:
        """Arrays /proc/mdstat lists that /sys/block did not (recorded mdstat without a sysfs tree)."""
        text = host.mdstat()
        out = []
        for name in parse_mdstat(text).keys() if text else ():
            if name not in seen_devices:
                out.append(self.describe(Tier(mountpoint=None, device=f"/dev/{name}", kind="md-raid", fs=None), host))
                seen_devices.add(name)
        return out

    def destroy_steps(self, tier: Tier, host: Host) -> list[Step]:
        steps = [umount_step(tier.mountpoint)] if tier.mountpoint else []
        steps.append(command_step(f"stop the array {tier.device}", ["mdadm", "--stop", str(tier.device)]))
        return steps

    def plan_create(self, request: RaidCreate, host: Host) -> Plan:
        args = request
        level, devices = args.level, list(args.devices)
        if level not in LEVELS:
            raise UsageError(f"RAID level {level} is not supported; choose one of {', '.join(map(str, LEVELS))}")
        if len(set(devices)) != len(devices):
            raise UsageError("the member devices list one device twice; give each member once")
        if len(devices) < MIN_DEVICES[level]:
            raise UsageError(f"RAID {level} needs at least {MIN_DEVICES[level]} devices, {len(devices)} given")
        chunk = args.chunk_bytes
        if chunk < 4096 or chunk & (chunk - 1):
            raise UsageError(f"chunk size {format_size(chunk)} must be a power of two of at least 4K, like 64K or 512K")
        if not re.match(r"^[\w.-]+$", args.name):
            raise UsageError(f"array name {args.name!r} may hold only letters, digits, '.', '_' and '-'")
        fs = args.fs or ("ext4" if args.mount else None)
        if fs and not args.mount:
            raise UsageError("a file system needs a mount point: give the directory to mount the new file system on")
        if fs:
            check_fs(fs, FILESYSTEMS, "RAID")
        mountpoint, needs_mkdir = check_mountpoint(args.mount, host) if args.mount else (None, False)
        md = f"/dev/md/{args.name}"
        plan = Plan(title=f"create RAID {level} {md} from {len(devices)} devices (chunk {format_size(chunk)})")
        plan.blockers += root_blocker()
        if host.mdstat() is None and not host.sys("module", "md_mod").exists():
            plan.blockers.append("the md driver is not loaded (/proc/mdstat and /sys/module/md_mod are missing); "
                                 "`modprobe md_mod` (and raid0/raid1/raid456/raid10) on a kernel that has it")
        plan.blockers += tool_blockers("mdadm") + (tool_blockers(f"mkfs.{fs}") if fs else [])
        plan.blockers += _device_blockers(devices, host)
        argv = ["mdadm", "--create", md, f"--level={level}", f"--raid-devices={len(devices)}", "--metadata=1.2"]
        if level != 1:
            argv.insert(4, f"--chunk={chunk // 1024}")  # KiB
        else:
            plan.notes.append("RAID 1 has no chunk size; the chunk size is not used")
        undo = ["mdadm", "--stop", md]
        zero = ["mdadm", "--zero-superblock", *devices]
        plan.steps.append(Step(
            summary="create the array (mdadm refuses devices that already hold data; wipe them first)",
            command=shlex.join(argv + devices),
            action=lambda state: run_argv(argv + devices, state) and None,
            undo=lambda state: (run_argv(undo, state), run_argv(zero, state)) and None,
            undo_command=f"{shlex.join(undo)} && {shlex.join(zero)}"))
        if fs:
            stride = _ext4_stride(level, len(devices), chunk) if fs == "ext4" else None
            plan.steps.append(command_step(f"make {fs} aligned to the stripe", mkfs_argv(fs, md, raid_stride=stride)))
            if needs_mkdir:
                plan.steps.append(mkdir_step(mountpoint))
            plan.steps.append(mount_step(md, mountpoint, fs, list(args.options)))
        plan.notes.append("the initial resync runs in the background; benchmark after /proc/mdstat shows it done")
        plan.notes.append("to assemble at boot: `mdadm --detail --scan >> /etc/mdadm/mdadm.conf && update-initramfs -u`")
        return plan


def _ext4_stride(level: int, n: int, chunk: int) -> tuple[int, int] | None:
    """ext4 -E stride (chunk in 4 KiB blocks) and stripe_width (stride x data disks) (mke2fs(8))."""
    data = {0: n, 1: 0, 5: n - 1, 6: n - 2, 10: n // 2}[level]
    if not data:
        return None
    stride = chunk // 4096
    return stride, stride * data


def _device_blockers(devices: list[str], host: Host) -> list[str]:
    out = []
    mounted = {m.device: m.mountpoint for m in host.mounts()}
    for dev in devices:
        name = dev.rsplit("/", 1)[-1]
        if not dev.startswith("/dev/") or not (os.path.exists(dev) and host.sys("class", "block", name).exists()):
            out.append(f"{dev} is not a block device on this host")
            continue
        if dev in mounted:
            out.append(f"{dev} is mounted on {mounted[dev]}; unmount it (and move its data) first")
        holders = host.sys("class", "block", name, "holders")
        if holders.is_dir() and any(holders.iterdir()):
            out.append(f"{dev} is in use by {', '.join(p.name for p in holders.iterdir())}")
    return out


PROVIDER = RaidProvider()
