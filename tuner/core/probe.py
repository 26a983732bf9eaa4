"""Probes of what a file system really does (not what it is assumed to do).

``probe_o_direct(dir)``: create a file in ``dir`` with O_DIRECT and write one
aligned 4 KiB block.  ramfs refuses the open (EINVAL); tmpfs accepts it from
Linux 6.6; ext4/xfs on block devices accept it.  InnoDB falls back to buffered
I/O with a warning where it fails, so innodb_flush_method=O_DIRECT is a no-op there.
``mount_of(path)``: the /proc/mounts entry a path lives on (longest prefix).
``read_meminfo(proc_root)``: /proc/meminfo in bytes, the one reader of it.
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


def read_meminfo(proc_root: str | os.PathLike = "/proc") -> dict[str, int]:
    """``<proc_root>/meminfo`` in bytes (the kernel's "kB" is KiB); empty when it cannot be read."""
    try:
        text = Path(proc_root, "meminfo").read_text()
    except OSError:
        return {}
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


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


# ---- effective DAX (statx) and mount(8) output; added for tier detection ------------------------

STATX_ATTR_DAX = 0x00200000  # include/uapi/linux/stat.h; 712b2698 (5.8) defined it as 0x2000, 72d1249e (Dec 2020, stable 5.8+) moved it here
_STATX_BASIC_STATS = 0x07FF
_AT_FDCWD = -100


def statx_attributes(path: str | os.PathLike) -> tuple[int, int] | None:
    """(stx_attributes, stx_attributes_mask) from statx(2) through glibc, or None where statx is unavailable.

    struct statx: stx_mask u32 @0, stx_blksize u32 @4, stx_attributes u64 @8, ..., stx_attributes_mask u64 @56.
    """
    import ctypes
    import struct

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.statx
    except (OSError, AttributeError):
        return None
    buf = ctypes.create_string_buffer(256)
    rc = fn(ctypes.c_int(_AT_FDCWD), os.fsencode(os.fspath(path)), ctypes.c_int(0),
            ctypes.c_uint(_STATX_BASIC_STATS), buf)
    if rc != 0:
        return None
    attributes = struct.unpack_from("=Q", buf.raw, 8)[0]
    mask = struct.unpack_from("=Q", buf.raw, 56)[0]
    return attributes, mask


def file_is_dax(path: str | os.PathLike) -> bool | None:
    """True/False when the kernel reports the file's DAX state (STATX_ATTR_DAX, Linux 5.8+), None otherwise."""
    got = statx_attributes(path)
    if got is None:
        return None
    attributes, mask = got
    if not mask & STATX_ATTR_DAX:
        return None
    return bool(attributes & STATX_ATTR_DAX)


def probe_dax(directory: str | os.PathLike) -> bool | None:
    """Effective DAX for new files in ``directory``: create a file and ask statx.  None when the
    directory is not writable or the kernel does not report DAX state.  (Only regular files carry
    the DAX state; a directory never does, so the mount point itself cannot be asked.)"""
    d = os.fspath(directory)
    if not os.access(d, os.W_OK):
        return None
    try:
        fd, name = tempfile.mkstemp(prefix=".innotier-dax-", dir=d)
    except OSError:
        return None
    os.close(fd)
    try:
        return file_is_dax(name)
    finally:
        os.unlink(name)


def parse_mount_command_output(text: str) -> list[MountEntry]:
    """Lines in mount(8) format (``/dev/pmem0 on /pmem type ext4 (rw,relatime,dax)``), as recorded in
    documentation and bug reports; the option list is the same string /proc/mounts carries."""
    import re

    out = []
    for line in text.splitlines():
        m = re.match(r"^(\S+) on (.+) type (\S+) \(([^)]*)\)", line.strip())
        if m:
            out.append(MountEntry(m.group(1), m.group(2), m.group(3), tuple(m.group(4).split(","))))
    return out
