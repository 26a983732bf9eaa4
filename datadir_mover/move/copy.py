"""Verified, durable, sparse-aware copies of InnoDB files.

A copy is not trusted until it has been read back from the target and its
checksum matches the source's.  Every copied file is fsynced, then every
directory it lives in (so the names are durable too), and ownership, mode and
modification time are kept.  Holes are kept: only the data extents of a file
(``SEEK_DATA`` / ``SEEK_HOLE``, lseek(2)) are read and written, and the target is
truncated to the source's length, so a sparse ibdata or a page-compressed
tablespace stays sparse.

Checksums are xxh3-128 of the file's logical content (holes read as zeros), the
fast non-cryptographic hash rsync >= 3.2 uses for the same job: it detects
corruption and torn copies, not tampering.

Two passes make the online pre-copy work (as rsync's quick check, with git's
"racily clean" rule): ``copy_tree(..., previous=manifest_of_the_precopy)`` skips a
file only when its size, mtime, ctime and inode are the same as when the
pre-copy read it, *and* its mtime was at least ``RACY_MARGIN_NS`` older than that
read, so a write in the same clock tick as the read cannot be missed; the target
copy must also be unchanged since it was verified.  Everything else is copied
again while the server is stopped.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import xxhash

from tuner.core.durable import fsync_dir
from tuner.core.errors import MoveError

CHUNK = 1 << 20  # 1 MiB reads and writes
RACY_MARGIN_NS = 2_000_000_000  # a file modified less than 2 s before the pre-copy read it is copied again
_ZEROS = bytes(CHUNK)

Progress = Callable[[int], None]  # called with the number of bytes just processed


@dataclass
class FileRecord:
    """One entry of a copied tree, as it was read from the source."""

    rel: str  # path relative to the tree's root
    kind: str  # "file", "dir" or "symlink"
    size: int = 0
    mode: int = 0
    uid: int = 0
    gid: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    ino: int = 0
    link: str | None = None
    digest: str | None = None  # xxh3-128 of the source content (files)
    read_at_ns: int = 0  # when the copy read the source (wall clock, ns)
    target_mtime_ns: int = 0  # the target's mtime/ctime/ino right after it was verified
    target_ctime_ns: int = 0
    target_ino: int = 0
    verified: bool = False  # target content read back and equal to ``digest``


@dataclass
class Manifest:
    """What a copy pass wrote: source root, target root and one record per entry."""

    source: str
    target: str
    records: dict[str, FileRecord] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(r.size for r in self.records.values() if r.kind == "file")

    def to_dict(self) -> dict:
        return {"source": self.source, "target": self.target,
                "records": [asdict(r) for r in sorted(self.records.values(), key=lambda r: r.rel)]}

    @classmethod
    def from_dict(cls, d: dict) -> "Manifest":
        return cls(d["source"], d["target"], {r["rel"]: FileRecord(**r) for r in d.get("records", [])})


@dataclass
class CopyStats:
    files_copied: int = 0
    files_skipped: int = 0  # unchanged since the pre-copy
    bytes_copied: int = 0
    bytes_skipped: int = 0
    files_removed: int = 0  # target files whose source disappeared since the pre-copy
    seconds: float = 0.0


# ---------------------------------------------------------------------------
# Listing


def walk(root: str | os.PathLike, top_names: Iterable[str] | None = None,
         exclude: Callable[[str, os.stat_result], bool] | None = None) -> list[tuple[str, os.stat_result]]:
    """(relative path, lstat) of every entry under ``root`` (or under the given top-level names), parents first."""
    base = Path(root)
    names = sorted(top_names) if top_names is not None else sorted(os.listdir(base))
    out: list[tuple[str, os.stat_result]] = []
    stack = [n for n in reversed(names)]
    while stack:
        rel = stack.pop()
        try:
            st = os.lstat(base / rel)
        except FileNotFoundError:
            continue  # gone since listed (a temporary file of the running server)
        if exclude and exclude(rel, st):
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            continue  # sockets, fifos, devices: never data
        out.append((rel, st))
        if stat.S_ISDIR(st.st_mode):
            try:
                children = sorted(os.listdir(base / rel), reverse=True)
            except FileNotFoundError:
                continue
            stack.extend(f"{rel}/{c}" for c in children)
    return out


def allocated_bytes(entries: list[tuple[str, os.stat_result]]) -> int:
    """Space the entries take on disk (holes excluded)."""
    return sum(st.st_blocks * 512 for _, st in entries if stat.S_ISREG(st.st_mode))


def logical_bytes(entries: list[tuple[str, os.stat_result]]) -> int:
    return sum(st.st_size for _, st in entries if stat.S_ISREG(st.st_mode))


# ---------------------------------------------------------------------------
# One file


def _data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """(offset, end) of the data regions of an open file; the whole file where SEEK_DATA is not supported."""
    extents: list[tuple[int, int]] = []
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after pos: the rest is a hole
                break
            if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                return [(0, size)]
            raise
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        extents.append((start, end))
        pos = end
    return extents


def _hash_zeros(h, n: int) -> None:
    while n > 0:
        k = min(n, CHUNK)
        h.update(_ZEROS[:k] if k < CHUNK else _ZEROS)
        n -= k


def copy_file(src: str, dst: str, progress: Progress | None = None) -> tuple[str, os.stat_result]:
    """Copy one regular file (data extents only), keep owner/mode/mtime, fsync; return (source digest, source stat)."""
    h = xxhash.xxh3_128()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        st = os.fstat(sfd)
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            pos = 0
            for start, end in _data_extents(sfd, st.st_size):
                _hash_zeros(h, start - pos)
                off = start
                while off < end:
                    n = os.preadv(sfd, [view[: min(CHUNK, end - off)]], off)
                    if n == 0:
                        break  # the file shrank while being read: the digest will not match, VERIFY fails
                    h.update(view[:n])
                    written = 0
                    while written < n:
                        written += os.pwrite(dfd, view[written:n], off + written)
                    off += n
                    if progress:
                        progress(n)
                pos = off
            _hash_zeros(h, st.st_size - pos)
            os.ftruncate(dfd, st.st_size)
            _keep_metadata_fd(dfd, st)
            os.fsync(dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
    return h.hexdigest(), st


def _keep_metadata_fd(fd: int, st: os.stat_result) -> None:
    os.fchown(fd, st.st_uid, st.st_gid)
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def digest_file(path: str, drop_cache: bool = True) -> str:
    """xxh3-128 of a file's content; with ``drop_cache`` the page cache is dropped first so the device is read."""
    h = xxhash.xxh3_128()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        size = os.fstat(fd).st_size
        if drop_cache:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # no effect on tmpfs, where memory is the medium
        pos = 0
        for start, end in _data_extents(fd, size):
            _hash_zeros(h, start - pos)
            off = start
            while off < end:
                n = os.preadv(fd, [view[: min(CHUNK, end - off)]], off)
                if n == 0:
                    break
                h.update(view[:n])
                off += n
            pos = off
        _hash_zeros(h, size - pos)
    finally:
        os.close(fd)
    return h.hexdigest()


# ---------------------------------------------------------------------------
# A tree


def _unchanged_since(prev: FileRecord, st: os.stat_result, target: Path) -> bool:
    """True when the pre-copy's verified copy of this file is still exact (see the module docstring)."""
    if prev.kind != "file" or not prev.verified or prev.digest is None:
        return False
    if (prev.size, prev.mtime_ns, prev.ctime_ns, prev.ino) != (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
        return False
    if prev.mtime_ns > prev.read_at_ns - RACY_MARGIN_NS or prev.ctime_ns > prev.read_at_ns - RACY_MARGIN_NS:
        return False  # racily clean: modified too close to the read to trust the timestamps
    try:
        tst = os.lstat(target / prev.rel)
    except FileNotFoundError:
        return False
    return (tst.st_mtime_ns, tst.st_ctime_ns, tst.st_ino) == (prev.target_mtime_ns, prev.target_ctime_ns,
                                                               prev.target_ino)


def copy_tree(source: str | os.PathLike, target: str | os.PathLike, entries: list[tuple[str, os.stat_result]],
              previous: Manifest | None = None, progress: Progress | None = None,
              after_file: Callable[[str], None] | None = None, verify: bool = True) -> tuple[Manifest, CopyStats]:
    """Copy ``entries`` (from ``walk``) from ``source`` into ``target``; with ``verify`` read each copy back.

    ``target`` must exist.  With ``previous`` (the pre-copy's manifest) unchanged files
    are kept and target files whose source entry is gone are removed.  Without
    ``verify`` the caller runs ``verify_tree`` (the mover's VERIFY step).
    """
    t0 = time.monotonic()
    src, dst = Path(source), Path(target)
    manifest = Manifest(str(src), str(dst))
    stats = CopyStats()
    dirs: list[tuple[str, os.stat_result]] = []
    for rel, st in entries:
        s_path, d_path = src / rel, dst / rel
        if stat.S_ISDIR(st.st_mode):
            d_path.mkdir(exist_ok=True)
            os.chown(d_path, st.st_uid, st.st_gid, follow_symlinks=False)
            os.chmod(d_path, stat.S_IMODE(st.st_mode))
            dirs.append((rel, st))
            manifest.records[rel] = FileRecord(rel, "dir", 0, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns,
                                               st.st_ctime_ns, st.st_ino, verified=True)
        elif stat.S_ISLNK(st.st_mode):
            link = os.readlink(s_path)
            if d_path.is_symlink() or d_path.exists():
                d_path.unlink()
            os.symlink(link, d_path)
            os.chown(d_path, st.st_uid, st.st_gid, follow_symlinks=False)
            manifest.records[rel] = FileRecord(rel, "symlink", 0, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns,
                                               st.st_ctime_ns, st.st_ino, link=link, verified=True)
        else:
            prev = previous.records.get(rel) if previous else None
            if prev is not None and _unchanged_since(prev, st, dst):
                manifest.records[rel] = prev
                stats.files_skipped += 1
                stats.bytes_skipped += st.st_size
                if progress:
                    progress(st.st_size)
                continue
            read_at = time.time_ns()
            digest, sst = copy_file(str(s_path), str(d_path), progress)
            manifest.records[rel] = FileRecord(rel, "file", sst.st_size, sst.st_mode, sst.st_uid, sst.st_gid,
                                               sst.st_mtime_ns, sst.st_ctime_ns, sst.st_ino, digest=digest,
                                               read_at_ns=read_at)
            stats.files_copied += 1
            stats.bytes_copied += sst.st_size
            if after_file:
                after_file(rel)
    if previous is not None:
        stats.files_removed = _remove_vanished(dst, previous, manifest)
    # directories: fsync deepest first (their entries are now durable), then keep their mtimes
    for rel, st in sorted(dirs, key=lambda x: x[0].count("/"), reverse=True):
        fsync_dir(dst / rel)
        os.utime(dst / rel, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    fsync_dir(dst)
    if verify:
        verify_tree(manifest)
    stats.seconds = time.monotonic() - t0
    return manifest, stats


def _remove_vanished(dst: Path, previous: Manifest, current: Manifest) -> int:
    """Remove target entries the pre-copy wrote whose source is gone (dropped tables, renamed files)."""
    removed = 0
    for rel in sorted(set(previous.records) - set(current.records), key=lambda r: r.count("/"), reverse=True):
        p = dst / rel
        try:
            if p.is_dir() and not p.is_symlink():
                p.rmdir()
            else:
                p.unlink()
            removed += 1
        except FileNotFoundError:
            pass
        except OSError:
            pass  # a non-empty directory left: harmless, reported by verify_tree as an extra entry
    return removed


def verify_tree(manifest: Manifest) -> None:
    """Read every copied file back from the target and compare checksums; raise on the first difference."""
    dst = Path(manifest.target)
    for rec in manifest.records.values():
        if rec.kind != "file" or rec.verified:
            continue
        p = dst / rec.rel
        got = digest_file(str(p))
        if got != rec.digest:
            raise MoveError(f"checksum of the copy {p} ({got}) differs from its source ({rec.digest}); "
                            "the target storage returned different data: check it (dmesg) and run the move again")
        tst = os.lstat(p)
        rec.target_mtime_ns, rec.target_ctime_ns, rec.target_ino = tst.st_mtime_ns, tst.st_ctime_ns, tst.st_ino
        rec.verified = True


def recheck_sources(manifest: Manifest) -> list[str]:
    """Source files whose size/mtime/ctime/inode changed since they were copied (nothing may write during COPY)."""
    changed = []
    src = Path(manifest.source)
    for rec in manifest.records.values():
        if rec.kind != "file":
            continue
        try:
            st = os.lstat(src / rec.rel)
        except FileNotFoundError:
            changed.append(rec.rel)
            continue
        if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != (rec.size, rec.mtime_ns, rec.ctime_ns, rec.ino):
            changed.append(rec.rel)
    return changed


def reverify_targets(manifest: Manifest) -> None:
    """Re-read every target file and compare with its source digest (VERIFY after a crash or a resume)."""
    for rec in manifest.records.values():
        if rec.kind == "file":
            rec.verified = False
    verify_tree(manifest)
