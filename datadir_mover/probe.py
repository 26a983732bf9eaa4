"""Probes of what a file system really does (not what it is assumed to do).

``probe_o_direct(dir)``: create a file in ``dir`` with O_DIRECT and write one
aligned 4 KiB block.  ramfs refuses the open (EINVAL); tmpfs accepts it from
Linux 6.6; ext4/xfs on block devices accept it.  InnoDB falls back to buffered
I/O with a warning where it fails, so innodb_flush_method=O_DIRECT is a no-op there.
``mount_of(path)``: the /proc/mounts entry a path lives on (longest prefix).
"""

from __future__ import annotations

import errno
import mmap
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MountEntry:
    device: str
    mountpoint: str
    fstype: str
    options: tuple[str, ...]

    @property
    def dax(self) -> bool:
        return any(o == "dax" or o == "dax=always" for o in self.options)


def _unescape(s: str) -> str:
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def parse_mounts(text: str) -> list[MountEntry]:
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            out.append(MountEntry(_unescape(parts[0]), _unescape(parts[1]), parts[2], tuple(parts[3].split(","))))
    return out


def read_mounts(proc_root: str = "/proc") -> list[MountEntry]:
    return parse_mounts(Path(proc_root, "mounts").read_text())


def mount_of(path: str | os.PathLike, mounts: list[MountEntry] | None = None) -> MountEntry:
    """The mount a path lives on (the last-mounted, longest matching mount point)."""
    p = os.path.realpath(os.fspath(path))
    while not os.path.exists(p):
        p = os.path.dirname(p)
    best: MountEntry | None = None
    for m in mounts if mounts is not None else read_mounts():
        mp = m.mountpoint.rstrip("/") or "/"
        if p == mp or p.startswith(mp + "/") or mp == "/":
            if best is None or len(mp) >= len(best.mountpoint.rstrip("/") or "/"):
                best = m
    if best is None:
        raise FileNotFoundError(f"no mount found for {path}")
    return best


def probe_o_direct(directory: str | os.PathLike) -> bool:
    """True when a file in ``directory`` can be opened with O_DIRECT and written with an aligned 4 KiB block."""
    d = os.fspath(directory)
    fd_tmp, name = tempfile.mkstemp(prefix=".innotier-odirect-", dir=d)
    os.close(fd_tmp)
    try:
        try:
            fd = os.open(name, os.O_WRONLY | os.O_DIRECT)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                return False
            raise
        try:
            buf = mmap.mmap(-1, 4096)  # page-aligned buffer
            buf.write(b"\0" * 4096)
            try:
                os.write(fd, buf)
            except OSError as exc:
                if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                    return False
                raise
            finally:
                buf.close()
        finally:
            os.close(fd)
        return True
    finally:
        os.unlink(name)
