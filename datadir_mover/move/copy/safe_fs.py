"""A directory tree that root changes without following a link the server's user may have planted.

The mover runs as root on trees the server's user can write: the source datadir, and the target
once it is chowned to that user before the pre-copy.  A path such as ``target/db/t.ibd`` is
resolved again at every system call, so that user can swap ``db`` for a symbolic link to ``/etc``
between two calls and have root create, chmod, chown or delete files there (a path to root).
A ``Tree`` never resolves a path twice: every directory under its root is opened once without
following any link (``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``; where the kernel
lacks it, ``O_NOFOLLOW | O_DIRECTORY`` at every component), and every change is made relative to
such a descriptor (``mkdirat``, ``openat`` with ``O_NOFOLLOW``, ``unlinkat``, ``fchownat`` without
following) or on the open descriptor itself (``fchown``, ``fchmod``, ``futimens``, ``fsync``).
A link where a directory is expected is refused (``UnsafePath``), never followed.

The root itself is the operator's choice (a datadir reached through a symbolic link is common):
it is opened once, following links unless told not to (a directory the mover made itself, or a move's
target, which planning made sure is a real path), and everything below it is the server's user's to
change.

``path(rel)`` names a file through its checked parent (``/proc/self/fd/N/name``): functions that
take a path (``blocks.file_blocks``) then resolve only the last component, which they open with
``O_NOFOLLOW``.  It is valid while the tree is open.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import threading
from pathlib import Path

from tuner.core.errors import MoveError

SYS_OPENAT2 = 437  # the same number on every architecture (syscalls added since 5.1 share one table)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class UnsafePath(MoveError):
    """A symbolic link, or something else than a directory, where the tree must have a directory."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_openat2_works: bool | None = None  # None: not tried yet; False: the kernel (or a seccomp filter) refuses it


def _openat2(dirfd: int, rel: str) -> int | None:
    """A directory below ``dirfd`` opened with no link followed on the way; None: openat2 is not available."""
    global _openat2_works
    if _openat2_works is False:
        return None
    how = _OpenHow(DIR_FLAGS | os.O_NOFOLLOW, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(SYS_OPENAT2, dirfd, os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how))
    if fd >= 0:
        _openat2_works = True
        return fd
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and not _openat2_works:
        _openat2_works = False  # an old kernel, or a sandbox's seccomp filter: the component walk below
        return None
    raise OSError(err, os.strerror(err), rel)


def _open_each_component(dirfd: int, rel: str) -> int:
    """The fallback: every component opened with O_NOFOLLOW relative to the one before."""
    fd = os.dup(dirfd)
    try:
        for part in rel.split("/"):
            nxt = os.open(part, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_rel(rel: str) -> str:
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise UnsafePath(f"{rel!r} is not a plain relative path; the mover names files below its tree only")
    return rel


class Tree:
    """A directory tree opened at its root; every directory below reached without following a link.

    Directory descriptors are kept until ``close`` (one open per directory however many files it
    holds); it is safe to share between threads.
    """

    def __init__(self, root: str | os.PathLike, follow_root: bool = True):
        self.root = str(Path(root))
        try:
            fd = os.open(self.root, DIR_FLAGS | (0 if follow_root else os.O_NOFOLLOW))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafePath(f"{self.root} is a symbolic link or not a directory where the mover made or was "
                                 "given one (something changed it while the move ran: the server's user?); the "
                                 "mover follows no link there: put the directory back or remove the link, then run "
                                 "the step again") from None
            raise
        self._fds: dict[str, int] = {"": fd}
        self._lock = threading.Lock()

    def __enter__(self) -> "Tree":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    # -- descriptors

    def dir_fd(self, rel: str = "") -> int:
        """The descriptor of the directory ``rel`` ("" is the root), opened without following a link."""
        with self._lock:
            fd = self._fds.get(rel)
            if fd is not None:
                return fd
            try:
                fd = _openat2(self._fds[""], _check_rel(rel))
                if fd is None:
                    fd = _open_each_component(self._fds[""], rel)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
                    raise self._unsafe(rel) from None
                raise
            self._fds[rel] = fd
            return fd

    def _forget(self, rel: str) -> None:
        with self._lock:
            for r in [r for r in self._fds if r == rel or r.startswith(rel + "/")]:
                os.close(self._fds.pop(r))

    def parent(self, rel: str) -> tuple[int, str]:
        """(descriptor of the checked parent directory, last component) of ``rel``."""
        head, _, name = _check_rel(rel).rpartition("/")
        return self.dir_fd(head), name

    def path(self, rel: str) -> str:
        """A path to ``rel`` that resolves only its last component (see the module docstring)."""
        fd, name = self.parent(rel)
        return f"/proc/self/fd/{fd}/{name}"

    def _unsafe(self, rel: str) -> UnsafePath:
        return UnsafePath(f"{os.path.join(self.root, rel)} is a symbolic link or not a directory where the mover "
                          f"expects a directory (something changed {self.root} while the move ran: the server's "
                          "user?); the mover follows no link there: put the directory back or remove the link, "
                          "then run the step again")

    # -- reading

    def lstat(self, rel: str) -> os.stat_result:
        fd, name = self.parent(rel)
        return os.stat(name, dir_fd=fd, follow_symlinks=False)

    def readlink(self, rel: str) -> str:
        fd, name = self.parent(rel)
        return os.readlink(name, dir_fd=fd)

    # -- changing

    def make_dir(self, rel: str, uid: int, gid: int, mode: int) -> int:
        """The directory ``rel`` made (or kept when it is one), owned and moded through its own descriptor."""
        fd, name = self.parent(rel)
        try:
            os.mkdir(name, 0o700, dir_fd=fd)
        except FileExistsError:
            pass  # dir_fd below refuses anything but a directory
        dfd = self.dir_fd(rel)
        os.fchown(dfd, uid, gid)
        os.fchmod(dfd, mode)
        return dfd

    def set_owner_and_mode(self, uid: int, gid: int, mode: int, rel: str = "") -> None:
        dfd = self.dir_fd(rel)
        os.fchown(dfd, uid, gid)
        os.fchmod(dfd, mode)

    def make_symlink(self, link: str, rel: str, uid: int, gid: int) -> None:
        """A symbolic link ``rel`` -> ``link`` in place of whatever non-directory was there."""
        fd, name = self.parent(rel)
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        os.symlink(link, name, dir_fd=fd)
        os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)

    def set_dir_times(self, rel: str, atime_ns: int, mtime_ns: int) -> None:
        os.utime(self.dir_fd(rel), ns=(atime_ns, mtime_ns))

    def fsync_dir(self, rel: str = "") -> None:
        os.fsync(self.dir_fd(rel))

    def remove(self, rel: str) -> None:
        """Remove the file, link or empty directory ``rel`` (a link is removed, never followed); raise on failure."""
        fd, name = self.parent(rel)
        mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            self._forget(rel)
            os.rmdir(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)


def remove_all(tree: Tree, rels: list[str]) -> int:
    """Remove ``rels`` (deepest first) from ``tree``; one already gone is fine, any other failure is raised as one
    line naming the entry.  The number removed."""
    removed = 0
    for rel in sorted(rels, key=lambda r: r.count("/"), reverse=True):
        try:
            tree.remove(rel)
            removed += 1
        except FileNotFoundError:
            continue
        except UnsafePath:
            raise
        except OSError as exc:
            raise MoveError(f"could not remove {os.path.join(tree.root, rel)}: {exc.strerror}; remove it by hand "
                            "(it is no longer in the source) and run the step again") from None
    return removed
