"""One file's copy: durable, sparse where the source really is, in parallel pieces, and hashed as written.

Every byte of the source is read, holes included: a range is left unwritten (a hole on the
target) only where the file system's extent map says it is a hole *and* the bytes read there
are zeros, so a wrong ``SEEK_DATA`` answer can never turn data into zeros, offline or online
(where the server may also write into a hole after the map was read).  The bytes are read into
this thread's buffer, hashed there and written from it, so the bytes hashed are the bytes
written even while the server writes; one fsync per file.  A stopped source's pages that are
not cached are read with ``O_DIRECT`` (``blocks.Source``): a cold datadir costs no page cache.

A source allocated whole (no hole: a tablespace, a preallocated redo log) gets no hole either, so
its map is not asked: a chunk of zeros is left unwritten, any other chunk is written whole, and
every range left unwritten is then allocated (``_allocate_like``): the target is allocated whole
and holds the bytes read.  A cached run of zeros (a warm redo log's unwritten extents, which the
map then calls data) costs the target an allocation, not a copy.  Zeros are known from the block
digests, the ones the read-back compares with.  Where the target cannot allocate (ramfs) the
map's rule applies.

On tmpfs or ramfs, where the file's pages are the medium, a new copy asked to be read back (``read_back``) is
read back chunk by chunk: each chunk is read from the target right after its writes, into another buffer, and
its block digests compared with those of what was read from the source (``ReadBackMismatch``), before the next
chunk is read, so the bytes read back are still in the core's cache; every byte of the target is read, the
zeros left unwritten included (a source allocated whole gets its target allocated whole *before* the writes
then, so those zeros are read back as allocated and nothing changes the file's bytes after their read-back).
Until its owner and mode are set, after the last chunk, the new file is the mover's with mode 0600, so no other
user can write a chunk between its read-back and the fsync; the caller reads the file back whole if its stat
moved after the fsync (``tree._verified_as_written``).

The paths given name their directory through a checked descriptor (``safe_fs.Tree.path``): only the
last component is resolved here, with ``O_NOFOLLOW``; owner, mode and times are set on the open file.
"""

from __future__ import annotations

import errno
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from datadir_mover.move.copy.blocks import (BLOCK, DIGEST, Progress, Range, Source, block_digest, chunk_buffer,
                                            chunks, coalesce, combine, digests_of, pieces, read_back_chunk, run_all,
                                            write_all, zero_blocks, zero_digest)
from datadir_mover.move.copy.delta import SkipRule, copy_stale_blocks, prefetch, read_blocks
from datadir_mover.move.copy.pages import PageRule


class ReadBackMismatch(Exception):
    """A chunk of a new copy read back right after its writes differs from what was read from the source."""

    def __init__(self, offset: int):
        super().__init__(f"the chunk at byte {offset} differs from its source when read back")
        self.offset = offset


@dataclass
class FileCopy:
    """What one file's copy did: the source's stat and block digests, the ranges written to the target."""

    st: os.stat_result
    blocks: bytes
    written: list[Range]
    delta: bool  # only changed blocks were written (the rest was verified earlier)
    read_blocks: frozenset[int] | None = None  # the blocks read from the source (None: all of them)
    read_back: os.stat_result | None = None  # the target's stat once copied, when it was read back as written

    @property
    def digest(self) -> str:
        return combine(self.blocks, self.st.st_size)

    @property
    def bytes_written(self) -> int:
        return sum(b - a for a, b in self.written)


def copy_piece(source: Source, dfd: int, start: int, end: int, progress: Progress | None,
               old: bytes | None = None, allocated: bool = False,
               back_fd: int | None = None) -> tuple[bytes, list[Range]]:
    """Copy [start, end) from the source to dfd; (block digests of the range, ranges written).

    Without ``old`` (a new target) the data is written, holes are not (see the module
    docstring); with ``allocated`` (every range left unwritten is allocated afterwards) the
    extent map is not asked: a chunk is written whole unless it is all zeros.  With ``old``
    (the block digests of the target's verified copy) only the blocks whose digest changed are
    written, whole.  With ``back_fd`` (the target on tmpfs or ramfs, opened for reading) every chunk is read back
    once written and compared (see the module docstring).
    """
    view = chunk_buffer()
    digests: list[bytes] = []
    written: list[Range] = []
    for c, ce, extents in chunks(source.fd, start, end, extent_map=old is None and not allocated):
        data = source.read(view, c, ce)
        blocks = digests_of(data, ce - c)
        if old is not None:
            first = c // BLOCK
            ranges = [(c + i * BLOCK, min(c + (i + 1) * BLOCK, ce)) for i, d in enumerate(blocks)
                      if old[(first + i) * DIGEST:(first + i + 1) * DIGEST] != d]
        elif allocated:  # whole chunks, so the zeros left to _allocate_like come in runs (few extents)
            ranges = [] if _all_zeros(blocks, ce - c) else [(c, ce)]
        else:
            ranges = coalesce(sorted(extents + _nonzero_gaps(data, c, ce, extents, blocks)))
        for a, b in ranges:
            write_all(dfd, data[a - c:b - c], a)
        if back_fd is not None and read_back_chunk(back_fd, c, ce) != blocks:
            raise ReadBackMismatch(c)
        written += ranges
        digests += blocks
        if progress:
            progress(ce - c)
    return b"".join(digests), written


def _all_zeros(blocks: list[bytes], length: int) -> bool:
    """The chunk of ``length`` bytes whose block digests are ``blocks`` is all zeros (one list compare a chunk)."""
    return blocks == zero_blocks(length)


def _nonzero_gaps(data, c: int, ce: int, extents: list[Range], blocks: list[bytes]) -> list[Range]:
    """The parts of the chunk at ``c`` outside its data extents whose bytes are not all zeros (data all the same),
    block by block: a whole block's zeros are known from its digest in ``blocks``, a part of a block is hashed."""
    gaps, pos = [], c
    for a, b in extents + [(ce, ce)]:
        x = pos
        while x < a:
            head = x - (x - c) % BLOCK  # the start of x's block
            y = min(head + BLOCK, a)
            whole = x == head and y == min(head + BLOCK, ce)
            digest = blocks[(x - c) // BLOCK] if whole else block_digest(data[x - c:y - c])
            if digest != zero_digest(y - x):
                gaps.append((x, y))
            x = y
        pos = b
    return gaps


def copy_file(src: str, dst: str, progress: Progress | None = None, pool: ThreadPoolExecutor | None = None,
              old: bytes | None = None, rule: SkipRule | None = None, target_in_memory: bool = False,
              stopped: bool = False, read_back: bool = False) -> FileCopy:
    """Copy one regular file, keep owner/mode/mtime, fsync.

    Without ``old`` the target is created anew; with ``old`` (the block digests of the
    target as verified earlier) only changed blocks are rewritten.  With ``pool`` the file's
    pieces are copied in parallel.  ``rule``, only with ``old``: the blocks it proves unchanged
    are not even read (``delta``).  ``target_in_memory``: the target is on tmpfs, ramfs or DAX,
    where its pages are the medium: nothing to drop from a cache, and a read of it costs a copy in
    memory, so with a ``PageRule`` a block with only some stale pages reads just those from the
    source and the rest from the target.  ``stopped``: nothing writes the source (the server is
    stopped), so a new target's copy reads the source's uncached pages past the page cache
    (``blocks.Source``).  ``read_back`` (the target is on tmpfs or ramfs): a new copy is read back chunk by chunk as
    it is written, and ``FileCopy.read_back`` holds its stat after the fsync (see the module docstring).
    """
    read_back = read_back and old is None  # a delta's rewritten blocks are read back by the caller
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    source = None
    try:
        st = os.fstat(sfd)
        source = Source.open(src, sfd, st, stopped and old is None)
        # with direct reads, no read-ahead: a cached chunk's read must not bring in the uncached ones after it
        os.posix_fadvise(sfd, 0, 0, os.POSIX_FADV_SEQUENTIAL if source.direct_fd is None else os.POSIX_FADV_RANDOM)
        dfd = _open_target(dst, old is None)
        back_fd = _reopen_for_reading(dfd) if read_back else None
        try:
            if old is not None:
                old = old[: -(-st.st_size // BLOCK) * DIGEST]  # the file may have shrunk or grown
            os.ftruncate(dfd, st.st_size)  # holes stay holes: only data is written below
            allocated = old is None and _allocated_whole(st) and _can_allocate(dfd, st.st_size)
            if allocated and read_back:  # before the writes: the zeros left unwritten are read back as allocated
                os.posix_fallocate(dfd, 0, st.st_size)
            if old is not None and rule is not None:
                parts, read = _copy_delta(sfd, dfd, dst, st, progress, pool, old, rule, target_in_memory)
            else:
                read = None
                parts = run_all(pool, copy_piece, [(source, dfd, a, b, progress, old, allocated,
                                                    back_fd) for a, b in pieces(st.st_size)])
            if old is None and not (allocated and read_back):
                _allocate_like(dfd, st, [r for p in parts for r in p[1]], strict=allocated)
            _keep_metadata_fd(dfd, st)
            os.fsync(dfd)
            target_st = os.fstat(dfd) if read_back else None
            if not target_in_memory:
                os.posix_fadvise(dfd, 0, 0, os.POSIX_FADV_DONTNEED)  # written and durable: leave the cache to others
        finally:
            if back_fd is not None:
                os.close(back_fd)
            os.close(dfd)
    finally:
        if source is not None:
            source.close()
        os.close(sfd)
    return FileCopy(st, b"".join(p[0] for p in parts), [r for p in parts for r in p[1]], old is not None, read,
                    target_st)


def _copy_delta(sfd: int, dfd: int, dst: str, st: os.stat_result, progress: Progress | None,
                pool: ThreadPoolExecutor | None, old: bytes, rule: SkipRule,
                target_in_memory: bool) -> tuple[list, frozenset[int]]:
    """The stale blocks of a changed file copied: (parts, blocks read)."""
    by_page = target_in_memory and isinstance(rule, PageRule)
    stale = rule.stale(sfd, st.st_size, len(old) // DIGEST)
    if not by_page:
        stale = stale.in_whole_blocks()
    tfd = os.open(dst, os.O_RDONLY | os.O_NOFOLLOW) if by_page else None
    try:
        if isinstance(rule, PageRule):  # scattered pages: no read-ahead around them, all of them asked for at once
            os.posix_fadvise(sfd, 0, 0, os.POSIX_FADV_RANDOM)
            prefetch(sfd, stale, st.st_size)
        parts = run_all(pool, copy_stale_blocks, [(sfd, dfd, a, b, progress, old, stale, tfd)
                                                  for a, b in pieces(st.st_size)])
    finally:
        if tfd is not None:
            os.close(tfd)
    return parts, read_blocks(stale, st.st_size, len(old) // DIGEST)


def _open_target(dst: str, new: bool) -> int:
    """The target file opened for writing: a new copy replaces whatever had the name (never writes through a
    link or into another name of a file: a hard link planted there stays as it was), an earlier copy is opened
    only when it is a regular file with one name."""
    if new:
        try:
            os.unlink(dst)
        except FileNotFoundError:
            pass
        return os.open(dst, os.O_WRONLY | os.O_NOFOLLOW | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    fd = os.open(dst, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise OSError(errno.EMLINK, "the earlier copy has another name too (a hard link): not written through", dst)
    return fd


def _reopen_for_reading(fd: int) -> int:
    """The file open at ``fd`` opened again, for reading: through /proc, so the very file written is read back
    whatever its name is by then (the write descriptor stays write-only: glibc's fallocate emulation, which a
    readable descriptor would let fill a ramfs copy, is refused as before)."""
    return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)


def _keep_metadata_fd(fd: int, st: os.stat_result) -> None:
    os.fchown(fd, st.st_uid, st.st_gid)
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def _allocated_whole(st: os.stat_result) -> bool:
    """The file has no hole: as many bytes allocated as its length."""
    return st.st_size > 0 and st.st_blocks * 512 >= st.st_size


def _can_allocate(dfd: int, size: int) -> bool:
    """The target's file system allocates ranges (``fallocate``; ramfs cannot): tried on the file's first block,
    which the copy of a source allocated whole allocates anyway."""
    try:
        os.posix_fallocate(dfd, 0, min(size, BLOCK))
    except OSError:  # EOPNOTSUPP, or glibc's emulation failing on a write-only descriptor: the map's rule applies
        return False
    return True


def _allocate_like(dfd: int, st: os.stat_result, written: list[Range], strict: bool = False) -> None:
    """Allocate what the copy left unwritten when the source is allocated whole (no holes), as the server had it.

    InnoDB preallocates its files (a new redo log, a tablespace's extension) with fallocate(2):
    unwritten extents read as zeros and ``SEEK_DATA`` reports them as holes unless their pages
    are cached, so a copy of the data alone would leave a sparse redo log whose every later
    write allocates blocks.  A source with as many allocated bytes as its length gets its unwritten
    ranges allocated on the target too (tmpfs included: the server would have allocated them there
    too); only those, after the copy, as tmpfs clears every page it allocates.  A sparse source (page
    compression's punched holes) stays sparse; a file system without fallocate (ramfs) keeps the holes.
    ``strict``: the copy left chunks of zeros unwritten that the source may have as data (``copy_piece``),
    so a failure to allocate is an error.
    """
    if not _allocated_whole(st):
        return
    pos = 0
    for a, b in sorted(written) + [(st.st_size, st.st_size)]:
        if a > pos:
            try:
                os.posix_fallocate(dfd, pos, a - pos)
            except OSError as exc:
                if strict or exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
                return
        pos = max(pos, b)
