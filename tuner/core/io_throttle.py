"""The throttle group: one block-I/O cgroup whose limits make a device slow on purpose.

A fast disk absorbs small synchronous writes in its cache, so moving a file off it shows no gain.  A
throttled tier (``innotier tiers create throttled``) is a loop device whose I/O, from processes in this
group, the kernel holds to a number of operations or bytes a second: the slow device that a placement
needs to tier *from*.  The limits live in the cgroup and apply only to the listed devices, so a process in
the group does its other I/O at full speed; sandbox servers and fio join the group when it has limits.

cgroup v1 (``blkio.throttle.*_device``, Documentation/admin-guide/cgroup-v1/blkio-controller.rst) and
cgroup v2 (``io.max``, Documentation/admin-guide/cgroup-v2.rst).  The kernel attributes a write to the
group of the task that submits it: direct I/O and fsync are throttled; buffered writes that the flusher
threads write back later are not (v1 has no writeback accounting), which is why the tier's notes say so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tuner.core.errors import TierError

GROUP = "innotier-throttled"
LIMIT_KEYS = ("read_iops", "write_iops", "read_bps", "write_bps")
_V1_FILES = {key: f"blkio.throttle.{key}_device" for key in LIMIT_KEYS}
_V2_KEYS = {"read_iops": "riops", "write_iops": "wiops", "read_bps": "rbps", "write_bps": "wbps"}


@dataclass(frozen=True)
class Limits:
    """Per-device ceilings; None is no limit."""

    read_iops: int | None = None
    write_iops: int | None = None
    read_bps: int | None = None
    write_bps: int | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, key) is None for key in LIMIT_KEYS)

    def describe(self) -> str:
        words = {"read_iops": "read IOPS", "write_iops": "write IOPS",
                 "read_bps": "read bytes/s", "write_bps": "write bytes/s"}
        return ", ".join(f"{getattr(self, k)} {words[k]}" for k in LIMIT_KEYS if getattr(self, k) is not None)


@dataclass(frozen=True)
class Served:
    """I/O the group did to one device since the limit was set (throttle.io_serviced / io.stat)."""

    reads: int
    writes: int


@dataclass(frozen=True)
class ThrottleGroup:
    """Where the group lives under a cgroup root (``/sys/fs/cgroup`` live, a recorded tree in tests)."""

    cgroup_root: Path = Path("/sys/fs/cgroup")

    @property
    def unified(self) -> bool:
        """cgroup v2: the root has cgroup.controllers and no blkio hierarchy beside it."""
        return (self.cgroup_root / "cgroup.controllers").exists() and not (self.cgroup_root / "blkio").is_dir()

    @property
    def path(self) -> Path:
        return self.cgroup_root / GROUP if self.unified else self.cgroup_root / "blkio" / GROUP

    @property
    def available(self) -> str | None:
        """None when the group can be made here, else why not (for a plan's blockers)."""
        if self.unified:
            controllers = _read(self.cgroup_root / "cgroup.controllers") or ""
            return None if "io" in controllers.split() else "cgroup v2 without the io controller"
        if (self.cgroup_root / "blkio" / "blkio.throttle.read_iops_device").exists():
            return None
        return f"no blkio throttling under {self.cgroup_root} (cgroup v1 blkio or v2 io controller needed)"

    # ---- reading ----------------------------------------------------------------------------

    def limits(self) -> dict[str, Limits]:
        """Device ("MAJ:MIN") -> its limits; empty when the group does not exist."""
        if not self.path.is_dir():
            return {}
        values: dict[str, dict[str, int]] = {}
        if self.unified:
            for line in (_read(self.path / "io.max") or "").splitlines():
                device, *pairs = line.split()
                for pair in pairs:
                    name, _, value = pair.partition("=")
                    key = next((k for k, v in _V2_KEYS.items() if v == name), None)
                    if key and value != "max":
                        values.setdefault(device, {})[key] = int(value)
        else:
            for key, filename in _V1_FILES.items():
                for line in (_read(self.path / filename) or "").splitlines():
                    device, _, value = line.partition(" ")
                    if value.strip() and int(value) > 0:
                        values.setdefault(device, {})[key] = int(value)
        return {device: Limits(**kv) for device, kv in values.items()}

    def served(self, device: str) -> Served:
        """Operations the group's members did to DEVICE, counted by the kernel's throttle accounting."""
        reads = writes = 0
        if self.unified:
            for line in (_read(self.path / "io.stat") or "").splitlines():
                if line.startswith(device + " "):
                    fields = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
                    reads, writes = int(fields.get("rios", 0)), int(fields.get("wios", 0))
        else:
            for line in (_read(self.path / "blkio.throttle.io_serviced") or "").splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[0] == device:
                    if parts[1] == "Read":
                        reads = int(parts[2])
                    elif parts[1] == "Write":
                        writes = int(parts[2])
        return Served(reads=reads, writes=writes)

    def members(self) -> set[int]:
        text = _read(self.path / "cgroup.procs") if self.path.is_dir() else None
        return {int(p) for p in (text or "").split()}

    # ---- changing (root only) -----------------------------------------------------------------

    def commands(self, device: str, limits: Limits) -> list[str]:
        """The shell lines ``set_limits`` amounts to, for a printed plan (DEVICE may be a shell variable)."""
        if self.unified:
            pairs = " ".join(f"{_V2_KEYS[k]}={getattr(limits, k) or 'max'}" for k in LIMIT_KEYS)
            return [f"mkdir -p {self.path}", f'echo "{device} {pairs}" > {self.path}/io.max']
        return [f"mkdir -p {self.path}"] + [f'echo "{device} {getattr(limits, k) or 0}" > {self.path}/{f}'
                                            for k, f in _V1_FILES.items() if limits.empty or getattr(limits, k)]

    def set_limits(self, device: str, limits: Limits) -> None:
        self.path.mkdir(exist_ok=True)
        if self.unified:
            _enable_io_controller(self.cgroup_root)
            pairs = " ".join(f"{_V2_KEYS[k]}={getattr(limits, k) or 'max'}" for k in LIMIT_KEYS)
            _write(self.path / "io.max", f"{device} {pairs}")
            return
        for key, filename in _V1_FILES.items():
            _write(self.path / filename, f"{device} {getattr(limits, key) or 0}")  # 0 removes the rule

    def clear_limits(self, device: str) -> None:
        if self.path.is_dir():
            self.set_limits(device, Limits())

    def join(self, pid: int) -> None:
        """Move PID (all its threads) into the group."""
        _write(self.path / "cgroup.procs", str(pid))


def joiner(group: ThrottleGroup | None = None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that puts the child in the throttle group, or None when no device is limited.

    Every sandbox server and fio run starts with it: a process outside the group would do its I/O to the
    throttled device at full speed, and the tier would not be slow for it.  The child joins before it execs,
    so none of its I/O escapes.  A user who may not write the group's cgroup.procs (not root) gets None:
    the limits bind only what root starts."""
    group = group or ThrottleGroup()
    if not group.limits() or not os.access(group.path / "cgroup.procs", os.W_OK):
        return None
    procs = str(group.path / "cgroup.procs")

    def join_self() -> None:
        with open(procs, "w") as fh:  # in the forked child: no logging, no locks, just the write
            fh.write(str(os.getpid()))

    return join_self


def device_number(device: str) -> str:
    """"MAJ:MIN" of a block device node, as the cgroup files name devices."""
    st = os.stat(device)
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def _enable_io_controller(root: Path) -> None:
    control = root / "cgroup.subtree_control"
    if "io" not in (_read(control) or "").split():
        _write(control, "+io")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _write(path: Path, text: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(text)
    except OSError as exc:
        raise TierError(f"writing {text!r} to {path} failed: {exc.strerror}; "
                        "the throttle group needs root and a blkio (v1) or io (v2) cgroup controller") from None
