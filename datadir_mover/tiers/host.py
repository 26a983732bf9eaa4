"""Where detection reads from: a /sys root, a /proc root and a command runner.

On a live host these are /sys, /proc and subprocess.  In tests they are recorded
trees (tests/fixtures/recorded/hardware and local-tiers in the repository, each
file's source in that folder's README) and recorded command outputs, so code paths for hardware that is not here (md RAID, pmem,
NVMe) run on real captures.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from tuner.core.probe import MountEntry, parse_mounts, read_meminfo

# A runner takes an argv and returns the command's stdout, or None when the tool
# is missing or fails (detection then falls back to the other sources).
Runner = Callable[[Sequence[str]], "str | None"]


def subprocess_runner(argv: Sequence[str], timeout: float = 20) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


class RecordedRunner:
    """Answers commands from recorded output: {("mdadm", "--detail", "/dev/md0"): text}; anything else is None."""

    def __init__(self, outputs: Mapping[Sequence[str], str] | None = None):
        self.outputs = {tuple(k): v for k, v in (outputs or {}).items()}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> str | None:
        self.calls.append(tuple(argv))
        return self.outputs.get(tuple(argv))


@dataclass
class Host:
    sys_root: str = "/sys"
    proc_root: str = "/proc"
    run: Runner = subprocess_runner
    mounts_override: list[MountEntry] | None = field(default=None, repr=False)
    cache: dict = field(default_factory=dict, repr=False)  # tool output read once per detection

    def tool(self, *argv: str) -> str | None:
        """A command's output through the runner, asked once per Host."""
        if argv not in self.cache:
            self.cache[argv] = self.run(argv)
        return self.cache[argv]

    @property
    def live(self) -> bool:
        """True when reading this machine's own kernel (probes and statvfs make sense)."""
        return self.sys_root == "/sys" and self.proc_root == "/proc"

    def sys(self, *parts: str) -> Path:
        return Path(self.sys_root, *parts)

    def proc(self, *parts: str) -> Path:
        return Path(self.proc_root, *parts)

    def read(self, path: Path) -> str | None:
        """A sysfs/procfs value, stripped; None when absent or unreadable (write-only attributes)."""
        try:
            return path.read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def read_int(self, path: Path) -> int | None:
        text = self.read(path)
        if text is None:
            return None
        try:
            return int(text.split()[0])
        except (ValueError, IndexError):
            return None

    def mounts(self) -> list[MountEntry]:
        if self.mounts_override is not None:
            return list(self.mounts_override)
        try:
            return parse_mounts(self.proc("mounts").read_text())
        except OSError:
            return []

    def mdstat(self) -> str | None:
        try:
            return self.proc("mdstat").read_text()
        except OSError:
            return None

    def meminfo(self) -> dict[str, int]:
        return read_meminfo(self.proc_root)

    def block_devices(self) -> list[str]:
        try:
            return sorted(p.name for p in self.sys("block").iterdir())
        except OSError:
            return []
