"""Blocks, digests and the read-back: the units a file is worked in, how its content is hashed, how a copy is read
back from its medium.

Four sizes, each with one name:

- a *piece* (``PIECE``, 64 MiB): the unit of parallel work; a large file's pieces are copied by
  several threads at once (``os.preadv``/``os.pwrite`` and xxhash release the GIL);
- a *chunk* (``CHUNK``, 256 KiB): the unit of I/O; each read lands in a page-aligned buffer of
  this size, small enough to stay in a core's L2 cache between the read, the hash and the write;
- a *block* (``BLOCK``, 64 KiB): the unit of digests; a delta rewrites and reads back whole blocks;
- a *page* (the server's ``innodb_page_size``): the unit InnoDB writes, stamped with an LSN (``pages.py``).

Checksums are xxh3-128, the fast non-cryptographic hash rsync >= 3.2 uses for the same job: it
detects corruption and torn copies, not tampering.  Every block of a file's logical content (holes
read as zeros) has a digest, and the file's digest is the xxh3-128 of its blocks' digests and its
length (``combine``), so pieces hash in parallel and ``digest_file`` computes the same value.

The read-back reads every byte of the target from its medium, holes included: the file
system's extent map is not trusted to say where zeros are.  It opens the target with
``O_DIRECT`` (page cache bypassed, so the device is read), and where the file system refuses
``O_DIRECT`` drops the target's cached pages first (``POSIX_FADV_DONTNEED`` after fsync); on
tmpfs/ramfs memory is the medium and a plain read reads it, so a new copy there is read back chunk by chunk
right after each chunk is written (``read_back_chunk``), while its bytes are still in the core's cache: a
memory pass less than reading the file again once it is written, the same bytes read.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import mmap
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import xxhash

from tuner.core.probe import mount_of

CHUNK = 256 << 10  # bytes per read/write (see docs/relocation.md for the sizes tried)
PIECE = 64 << 20  # a file is copied (in parallel) in pieces of this size
BLOCK = 64 << 10  # a file's digest is a hash of its blocks' digests; a delta rewrites only changed blocks
DIGEST = 16  # bytes of one block digest (xxh3-128)
WORKERS = 4  # pieces in flight: enough to overlap reads, writes and hashing on 2-8 cores
DIRECT_ALIGN = 4096  # O_DIRECT offsets and lengths are multiples of the logical block size (<= 4 KiB)
MEMORY_FS = ("tmpfs", "ramfs")  # memory is the medium: the page cache *is* the device

Progress = Callable[[int], None]  # called with the number of bytes just processed
Range = tuple[int, int]  # [start, end) in bytes

_local = threading.local()
_libc = ctypes.CDLL(None, use_errno=True)


def chunk_buffer(name: str = "io") -> memoryview:
    """This thread's page-aligned buffer of one chunk called ``name`` (anonymous mmap: aligned for O_DIRECT): "io"
    for what is read from a source and written, "back" for what a chunk's read-back reads."""
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    if name not in bufs:
        bufs[name] = memoryview(mmap.mmap(-1, CHUNK))
    return bufs[name]


def data_extents(fd: int, start: int, end: int) -> list[Range]:
    """(offset, end) of the data regions of an open file within [start, end); all of it without SEEK_DATA.

    Only a hint: a caller that leaves a range unwritten because it is a hole here checks
    first that it reads as zeros (``file.copy_piece``).
    """
    extents: list[Range] = []
    pos = start
    while pos < end:
        try:
            a = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after pos: the rest is a hole
                break
            if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                return [(start, end)]
            raise
        if a >= end:
            break
        b = min(os.lseek(fd, a, os.SEEK_HOLE), end)
        extents.append((a, b))
        pos = b
    return extents


def block_digest(data) -> bytes:
    return xxhash.xxh3_128_digest(data)


@functools.lru_cache(maxsize=64)
def zero_digest(length: int) -> bytes:
    """The digest of ``length`` zero bytes (a hole)."""
    return block_digest(bytes(length))


@functools.lru_cache(maxsize=64)
def zero_blocks(length: int) -> list[bytes]:
    """The block digests of ``length`` zero bytes (a chunk of zeros; compared with, never changed)."""
    return digests_of(bytes(length), length)


def digests_of(data, length: int) -> list[bytes]:
    """Block digests of the first ``length`` bytes of ``data`` (a block-aligned chunk)."""
    return [block_digest(data[i:i + BLOCK]) for i in range(0, length, BLOCK)]


def pieces(size: int) -> list[Range]:
    """(start, end) of the pieces a file of ``size`` bytes is worked on in (one empty piece for an empty file)."""
    return [(a, min(a + PIECE, size)) for a in range(0, size, PIECE)] or [(0, 0)]


def combine(blocks: bytes, size: int) -> str:
    """A file's digest: xxh3-128 of its blocks' digests (in order) and its length."""
    h = xxhash.xxh3_128()
    h.update(blocks)
    h.update(size.to_bytes(8, "little"))
    return h.hexdigest()


def pread_full(fd: int, view: memoryview, off: int) -> int:
    """Read into ``view`` at ``off`` until it is full or the file ends; the number of bytes read."""
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], off + got)
        if n == 0:
            break
        got += n
    return got


def read_chunk(fd: int, view: memoryview, start: int, end: int):
    """The bytes [start, end) of the file read into ``view``; past the file's end (it shrank) zeros."""
    n = pread_full(fd, view[:end - start], start)
    return view[:n] if n == end - start else bytes(view[:n]) + bytes(end - start - n)


def mincore(m: mmap.mmap, length: int) -> bytes | None:
    """mincore(2) of a mapping: one byte per memory page, bit 0 set when it is cached; None on failure."""
    vec = ctypes.create_string_buffer(-(-length // mmap.PAGESIZE))
    anchor = ctypes.c_char.from_buffer(m)
    try:
        rc = _libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(length), vec)
    finally:
        del anchor  # the mapping cannot be closed while ctypes holds it
    return vec.raw if rc == 0 else None


def cached_pages(fd: int, size: int) -> bytes | None:
    """Which memory pages of an open file are in the page cache now (``mincore``); None when that is unknown."""
    try:
        m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)  # ctypes: writable
    except (OSError, ValueError):
        return None
    try:
        return mincore(m, size)
    finally:
        m.close()


@dataclass
class Source:
    """A source file opened for a whole copy, read through the page cache only where its pages are cached.

    With ``direct_fd`` (a second descriptor of the same file with ``O_DIRECT``), a chunk with a page that was not
    cached when the copy began is read with it: the device's data lands in this thread's buffer with no page
    cache between (no page to allocate, fill, copy and evict; an unwritten extent costs a clear of the buffer),
    and what the page cache holds stays as it was.  The kernel writes a dirty cached page of the range back
    before a direct read, so either way the bytes are the file's.  Only for a stopped source
    (``tree.copy_tree(stable=True)``): the mover reads a running server's files as the server's page cache
    sees them.
    """

    fd: int
    direct_fd: int | None = None
    cached: bytes | None = None  # cached_pages() when the copy began (None: unknown, read directly)

    @classmethod
    def open(cls, path: str, fd: int, st: os.stat_result, direct: bool) -> "Source":
        if not direct or st.st_size == 0:
            return cls(fd)
        try:
            dfd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECT)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                return cls(fd)  # a file system without O_DIRECT
            raise
        direct_st = os.fstat(dfd)
        if (direct_st.st_dev, direct_st.st_ino) != (st.st_dev, st.st_ino):  # replaced between the two opens
            os.close(dfd)
            return cls(fd)
        return cls(fd, dfd, cached_pages(fd, st.st_size))

    def close(self) -> None:
        if self.direct_fd is not None:
            os.close(self.direct_fd)

    def _all_cached(self, start: int, end: int) -> bool:
        if self.cached is None:
            return False
        return self.cached.find(b"\x00", start // mmap.PAGESIZE, -(-end // mmap.PAGESIZE)) < 0

    def read(self, view: memoryview, start: int, end: int):
        """The bytes [start, end) of the file read into ``view`` (see ``read_chunk``)."""
        if self.direct_fd is None or start % DIRECT_ALIGN or self._all_cached(start, end):
            return read_chunk(self.fd, view, start, end)
        want = -(-(end - start) // DIRECT_ALIGN) * DIRECT_ALIGN  # whole blocks; the file's end reads short
        try:
            n = min(pread_full(self.direct_fd, view[:want], start), end - start)
        except OSError as exc:  # a file system that opens with O_DIRECT but refuses the reads
            if exc.errno != errno.EINVAL:
                raise
            return read_chunk(self.fd, view, start, end)
        return view[:n] if n == end - start else bytes(view[:n]) + bytes(end - start - n)


def chunks(fd: int, start: int, end: int, extent_map: bool = True):
    """(chunk start, chunk end, data extents inside it) for block-aligned chunks of [start, end); without
    ``extent_map`` the file system is not asked (every chunk's list is empty)."""
    extents = data_extents(fd, start, end) if extent_map else []
    for c in range(start, end, CHUNK):
        ce = min(c + CHUNK, end)
        yield c, ce, [(max(a, c), min(b, ce)) for a, b in extents if a < ce and b > c]


def write_all(fd: int, data, off: int) -> None:
    written = 0
    while written < len(data):
        written += os.pwrite(fd, data[written:], off + written)


def coalesce(ranges: list[Range]) -> list[Range]:
    """Adjacent ranges (in order) joined."""
    out: list[Range] = []
    for a, b in ranges:
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def merge_into_pieces(ranges: list[Range]) -> list[Range]:
    """Block-aligned ranges merged and cut into pieces of at most PIECE bytes."""
    out: list[Range] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return [(x, min(x + PIECE, b)) for a, b in out for x in range(a, b, PIECE)]


# ---------------------------------------------------------------------------
# The read-back


def _read_piece(fd: int, start: int, end: int, direct: bool) -> bytes:
    """Block digests of [start, end) of an open file, every byte read; ``direct``: the fd has O_DIRECT."""
    view = chunk_buffer()
    digests: list[bytes] = []
    for c in range(start, end, CHUNK):
        ce = min(c + CHUNK, end)
        want = -(-(ce - c) // DIRECT_ALIGN) * DIRECT_ALIGN if direct else ce - c  # O_DIRECT: whole blocks
        n = min(pread_full(fd, view[:want], c), ce - c)
        data = view[:n] if n == ce - c else bytes(view[:n]) + bytes(ce - c - n)
        digests += digests_of(data, ce - c)
    return b"".join(digests)


def read_back_chunk(fd: int, start: int, end: int) -> list[bytes]:
    """Block digests of [start, end) of a target on tmpfs or ramfs read back through ``fd`` right after it was
    written (``file.copy_piece``): its pages are the medium, read while they are still in this core's cache, into
    this thread's read-back buffer (never the one the chunk was written from); past the file's end, zeros."""
    return digests_of(read_chunk(fd, chunk_buffer("back"), start, end), end - start)


def _open_for_readback(path: str, memory: bool) -> tuple[int, bool]:
    """(fd, direct) to read a copy back from its medium.

    On tmpfs/ramfs the file's pages are the medium, so a plain read reads it (O_DIRECT
    there, accepted since Linux 6.6, only adds a copy); elsewhere ``O_DIRECT`` reads the
    device, and where the file system refuses it the cached pages are dropped first (the
    data was fsynced) and the file is read.
    """
    if not memory:
        try:
            return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECT), True
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    if not memory:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return fd, False


def on_memory_fs(path: str | os.PathLike) -> bool:
    return mount_of(path).fstype in MEMORY_FS


def file_blocks(path: str, drop_cache: bool = True, pool: ThreadPoolExecutor | None = None,
                memory: bool | None = None, ranges: list[Range] | None = None) -> bytes:
    """Block digests of a file (or of the given block-aligned ``ranges`` only), read from its medium.

    With ``drop_cache`` the file is read from its medium (``_open_for_readback``); ``memory``:
    it is on tmpfs/ramfs (found out from the mount table when None).
    """
    if drop_cache:
        fd, direct = _open_for_readback(path, on_memory_fs(path) if memory is None else memory)
    else:
        fd, direct = os.open(path, os.O_RDONLY | os.O_NOFOLLOW), False
    try:
        size = os.fstat(fd).st_size
        work = pieces(size) if ranges is None else merge_into_pieces(ranges)
        try:
            parts = run_all(pool, _read_piece, [(fd, a, b, direct) for a, b in work])
        except OSError as exc:  # a file system that opens with O_DIRECT but refuses the reads
            if not direct or exc.errno != errno.EINVAL:
                raise
            os.close(fd)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            parts = run_all(pool, _read_piece, [(fd, a, b, False) for a, b in work])
    finally:
        os.close(fd)
    return b"".join(parts)


def digest_file(path: str, drop_cache: bool = True, pool: ThreadPoolExecutor | None = None,
                memory: bool | None = None) -> str:
    """The file's digest (see ``combine``), read from its medium with ``drop_cache``."""
    blocks = file_blocks(path, drop_cache, pool, memory)
    return combine(blocks, os.stat(path).st_size)


# ---------------------------------------------------------------------------
# Parallel work


def run_all(pool: ThreadPoolExecutor | None, fn, items: list) -> list:
    """fn(*item) for every item, in the pool when there is one; results in order.

    Every call has finished before this returns or raises (callers close the fds the calls use).
    """
    if pool is None or len(items) == 1:
        return [fn(*it) for it in items]
    return results([pool.submit(fn, *it) for it in items])


def results(futures: list[Future]) -> list:
    """The futures' results in order, after all of them finished; the first failure is raised."""
    out, first = [], None
    for f in futures:
        try:
            out.append(f.result())
        except BaseException as exc:  # noqa: BLE001 - re-raised below once every piece stopped
            out.append(None)
            first = first or exc
    if first is not None:
        raise first
    return out


# ---------------------------------------------------------------------------
# What a delta reads


@dataclass(frozen=True)
class StaleBlocks:
    """The blocks of a file a delta reads from the source (the others provably equal their verified copy).

    ``masks`` maps each stale block to the bit mask of its stale pages (bit p: the block's page p);
    with ``pages_per_block`` 1 a block is read whole.
    """

    masks: dict[int, int]
    pages_per_block: int = 1

    @classmethod
    def every(cls, size: int) -> "StaleBlocks":
        """Every block of a file of ``size`` bytes: it is compared whole."""
        return cls(dict.fromkeys(range(-(-size // BLOCK)), 1))

    @property
    def full(self) -> int:
        return (1 << self.pages_per_block) - 1

    @property
    def page_size(self) -> int:
        return BLOCK // self.pages_per_block

    def __contains__(self, block: int) -> bool:
        return block in self.masks

    def whole(self, block: int) -> bool:
        """The block is read whole (all its pages stale, or no page granularity)."""
        return self.masks.get(block, self.full) == self.full

    def in_whole_blocks(self) -> "StaleBlocks":
        return StaleBlocks(dict.fromkeys(self.masks, 1))

    def page_runs(self, block: int) -> list[Range]:
        """[start, end) byte offsets, inside the block, of its runs of stale pages."""
        mask, per, out = self.masks.get(block, self.full), self.pages_per_block, []
        p = 0
        while p < per:
            if mask >> p & 1:
                q = p
                while q < per and mask >> q & 1:
                    q += 1
                out.append((p * self.page_size, q * self.page_size))
                p = q
            else:
                p += 1
        return out
