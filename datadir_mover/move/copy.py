"""Verified, durable, sparse-aware copies of InnoDB files, at the device's speed.

A copy is not trusted until it has been read back from the target and its
checksum matches the source's.  Every copied file is fsynced, then every
directory it lives in (so the names are durable too), and ownership, mode and
modification time are kept.  Holes are kept: only the data extents of a file
(``SEEK_DATA`` / ``SEEK_HOLE``, lseek(2)) are read and written, and the target is
truncated to the source's length, so a sparse ibdata or a page-compressed
tablespace stays sparse.

Speed: files are cut into ``SEGMENT``-sized pieces (64 MiB) that a small thread pool
copies in parallel (several files in flight, and several pieces of one large file:
``os.preadv``/``os.pwrite`` and xxhash release the GIL), each piece read into a
256 KiB page-aligned buffer (it stays in the L2 cache), hashed there and written from it; one fsync per file and
one per directory.  The read-back of the target opens it with ``O_DIRECT`` (page
cache bypassed, so the device is read), and where the file system refuses
``O_DIRECT`` drops the target's cached pages first (``POSIX_FADV_DONTNEED`` after
fsync); on tmpfs/ramfs memory is the medium and a plain read reads it.

Checksums are xxh3-128, the fast non-cryptographic hash rsync >= 3.2 uses for the
same job: it detects corruption and torn copies, not tampering.  Every 64 KiB block
(``BLOCK``) of a file's logical content (holes read as zeros) has a digest, and the
file's digest is the xxh3-128 of its blocks' digests and its length, so pieces hash
in parallel and ``digest_file`` computes the same value.  The block digests of a
verified copy let the next pass of an online pre-copy rewrite only the blocks that
changed (rsync's rolling-free block check at fixed offsets: InnoDB writes pages in
place), and read back only those.  While the server is stopped, a changed tablespace
need not even be read where its pages are older than the checkpoint LSN the last pass
began with (``stale_pages``): only their 8-byte page headers are.

Two passes make the online pre-copy work (as rsync's quick check, with git's
"racily clean" rule): ``copy_tree(..., previous=manifest_of_the_precopy)`` skips a
file only when its size, mtime, ctime and inode are the same as when the
pre-copy read it, *and* its mtime was at least ``RACY_MARGIN_NS`` older than that
read, so a write in the same clock tick as the read cannot be missed; the target
copy must also be unchanged since it was verified.  Everything else is copied
again while the server is stopped.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import re
import stat
import threading
import time
from array import array
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import xxhash

from tuner.core.durable import fsync_dir
from tuner.core.errors import MoveError
from tuner.core.probe import mount_of

# bytes per read/write: large enough for sequential I/O (the block layer splits requests at about this size
# anyway), small enough to stay in the core's L2 cache (1 MiB here) between the read, the hash and the write.
# Measured at W=40 (4.4 GiB, root fs -> tmpfs, page cache warm, shared machine): 8 MiB buffers ran at 0.2-0.5x
# cp -a, 256 KiB at 0.4-1.2x (noisy); mapping the source or the target with MAP_POPULATE instead of reading
# was no faster (a populated 4 KiB page costs about what copying it does, and the hash then reads DRAM).
BUFFER = 256 << 10
SEGMENT = 64 << 20  # a file is copied (in parallel) in pieces of this size
BLOCK = 64 << 10  # a file's digest is a hash of its blocks' digests; a delta rewrites only changed blocks
WORKERS = 4  # pieces in flight: enough to overlap reads, writes and hashing on 2-8 cores
DIRECT_ALIGN = 4096  # O_DIRECT offsets and lengths are multiples of the logical block size (<= 4 KiB)
RACY_MARGIN_NS = 2_000_000_000  # a file modified less than 2 s before the pre-copy read it is copied again

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
    lsn_floor: int = 0  # the server's checkpoint LSN read before the pass that read this file (0: unknown)
    log_floor: int = 0  # the server's flushed redo LSN read before that pass (0: unknown; redo_stale_blocks)


@dataclass
class Manifest:
    """What a copy pass wrote: source root, target root and one record per entry."""

    source: str
    target: str
    records: dict[str, FileRecord] = field(default_factory=dict)
    # rel -> block digests of the verified target copy (kept in memory only: a delta pass after a
    # restart of the mover has none, so it copies changed files whole)
    blocks: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    # rel -> per block, the checkpoint LSN read before the pass that last read that block (memory only too):
    # a pass that reads only some blocks of a file (stale_pages) moves only their floors
    floors: dict[str, array] = field(default_factory=dict, repr=False, compare=False)

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
    files_delta: int = 0  # of files_copied: only changed blocks rewritten (bytes_copied counts those)
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
# One file, in pieces

_local = threading.local()


def _buffer() -> memoryview:
    """This thread's page-aligned I/O buffer (anonymous mmap: aligned for O_DIRECT)."""
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = memoryview(mmap.mmap(-1, BUFFER))
    return buf


def _data_extents(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """(offset, end) of the data regions of an open file within [start, end); all of it without SEEK_DATA."""
    extents: list[tuple[int, int]] = []
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


def _block_digest(data) -> bytes:
    return xxhash.xxh3_128_digest(data)


_ZERO_BLOCK = _block_digest(bytes(BLOCK))


def _zero_digests(start: int, end: int) -> list[bytes]:
    """Digests of the blocks of a hole [start, end) (block-aligned start)."""
    out = [_ZERO_BLOCK] * ((end - start) // BLOCK)
    if (end - start) % BLOCK:
        out.append(_block_digest(bytes((end - start) % BLOCK)))
    return out


def segments(size: int) -> list[tuple[int, int]]:
    """(start, end) of the pieces a file of ``size`` bytes is worked on in (one empty piece for an empty file)."""
    return [(a, min(a + SEGMENT, size)) for a in range(0, size, SEGMENT)] or [(0, 0)]


def combine(blocks: bytes, size: int) -> str:
    """A file's digest: xxh3-128 of its blocks' digests (in order) and its length."""
    h = xxhash.xxh3_128()
    h.update(blocks)
    h.update(size.to_bytes(8, "little"))
    return h.hexdigest()


def _pread_full(fd: int, view: memoryview, off: int) -> int:
    """Read into ``view`` at ``off`` until it is full or the file ends; the number of bytes read."""
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], off + got)
        if n == 0:
            break
        got += n
    return got


def _chunks(fd: int, start: int, end: int):
    """(chunk start, chunk end, data extents inside it) for BUFFER-sized, block-aligned chunks of [start, end)."""
    extents = _data_extents(fd, start, end)
    for c in range(start, end, BUFFER):
        ce = min(c + BUFFER, end)
        yield c, ce, [(max(a, c), min(b, ce)) for a, b in extents if a < ce and b > c]


def _write_all(fd: int, data, off: int) -> None:
    written = 0
    while written < len(data):
        written += os.pwrite(fd, data[written:], off + written)


def _copy_piece(sfd: int, dfd: int, start: int, end: int, progress: Progress | None,
                old: bytes | None = None) -> tuple[bytes, list[tuple[int, int]]]:
    """Copy [start, end) from sfd to dfd; (block digests of the range, ranges written).

    Without ``old`` only the data extents are written (holes stay holes).  With ``old``
    (the block digests of the target's verified copy) only the blocks whose digest
    changed are written, whole.  The bytes are read into this thread's buffer, hashed there
    and written from it, so the bytes hashed are the bytes written even if the source
    changes meanwhile (online passes).  (Mapping the source instead was measured slower
    here: page faults of several threads contend on the process's memory map lock.)
    """
    view = _buffer()
    digests: list[bytes] = []
    written: list[tuple[int, int]] = []
    for c, ce, inside in _chunks(sfd, start, end):
        if not inside:
            digests += _zero_digests(c, ce)
            changed = [] if old is None else [
                (c + i * BLOCK, min(c + (i + 1) * BLOCK, ce)) for i, d in enumerate(_zero_digests(c, ce))
                if old[(c // BLOCK + i) * 16:(c // BLOCK + i + 1) * 16] != d]
            for a, b in changed:  # data became a hole: zeros (writing them is simpler than punching the hole)
                _write_all(dfd, bytes(b - a), a)
            written += changed
            continue
        n = _pread_full(sfd, view[:ce - c], c)
        data = view[:n]
        if n < ce - c:  # the file shrank while being read (online): the rest is the target's hole
            data = bytes(data) + bytes(ce - c - n)
        if old is None and sum(b - a for a, b in inside) < ce - c:
            data = _holes_as_zeros(data, c, inside)
        blocks = [_block_digest(data[i:i + BLOCK]) for i in range(0, ce - c, BLOCK)]
        if old is None:
            for a, b in inside:
                _write_all(dfd, data[a - c:b - c], a)
            written += inside
        else:
            first = c // BLOCK
            for i, d in enumerate(blocks):
                if old[(first + i) * 16:(first + i + 1) * 16] != d:
                    a, b = c + i * BLOCK, min(c + (i + 1) * BLOCK, ce)
                    _write_all(dfd, data[a - c:b - c], a)
                    written.append((a, b))
        digests += blocks
        if progress:
            progress(ce - c)
    return b"".join(digests), written


def _coalesce(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Adjacent ranges (in order) joined."""
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _holes_as_zeros(data, c: int, inside: list[tuple[int, int]]) -> bytearray:
    """The chunk at ``c`` with zeros outside its data extents: what the target holds where only those are written.

    Online the server may write into a hole (or an unwritten extent) after the extent map
    was read: the bytes read there are not written, so they must not be hashed either (the
    next pass finds the file changed and copies that block).
    """
    out = bytearray(data)
    pos = c
    for a, b in inside + [(c + len(out), c + len(out))]:
        out[pos - c:a - c] = bytes(a - pos)
        pos = b
    return out


def _copy_stale_blocks(sfd: int, dfd: int, start: int, end: int, progress: Progress | None, old: bytes,
                       stale: frozenset[int] | dict[int, int], tfd: int | None = None,
                       page_size: int = 0) -> tuple[bytes, list[tuple[int, int]]]:
    """Like ``_copy_piece`` with ``old``, but only the blocks in ``stale`` are read; the rest keep their digests.

    For a file whose blocks outside ``stale`` provably have not been written since the pass
    that copied them (``stale_pages``, ``redo_stale_blocks``).  Runs of consecutive stale
    blocks are read in large reads (up to ``BUFFER``) into this thread's buffer, hashed
    there and written from it (so also while the server writes).

    Page by page (``stale`` a dict from ``stale_pages``, ``tfd`` the target opened for reading
    and ``page_size``): of a block whose mask names only some of its pages, only those pages
    are read from the source, laid over the block as the target holds it (its other pages are
    provably the source's, the verified copy of a read made after their floor), hashed, and only
    they are written when the block's digest changed.  A TPC-C delta is mostly single 16 KiB
    pages scattered over large tablespaces: this reads a quarter of the 64 KiB blocks they sit in.
    """
    view = _buffer()
    digests: list[bytes] = []
    written: list[tuple[int, int]] = []
    per_block = BLOCK // page_size if page_size and tfd is not None else 1
    full = (1 << per_block) - 1
    masks = stale if isinstance(stale, dict) and per_block > 1 else None
    first, last = start // BLOCK, -(-end // BLOCK)
    bi = first
    while bi < last:
        prev = old[bi * 16:(bi + 1) * 16]
        if bi not in stale and len(prev) == 16:
            digests.append(prev)
            bi += 1
            continue
        mask = masks.get(bi, full) if masks is not None else full
        if mask != full and len(prev) == 16 and (bi + 1) * BLOCK <= end:
            digests.append(_copy_stale_pages(sfd, dfd, tfd, bi * BLOCK, mask, page_size, prev, view, progress,
                                             written))
            bi += 1
            continue
        run_end = bi + 1
        while run_end < last and run_end - bi < BUFFER // BLOCK and (
                (run_end in stale and (masks is None or masks.get(run_end, full) == full))
                or len(old[run_end * 16:(run_end + 1) * 16]) < 16):
            run_end += 1
        a, b = bi * BLOCK, min(run_end * BLOCK, end)
        n = _pread_full(sfd, view[:b - a], a)
        data = view[:n] if n == b - a else bytes(view[:n]) + bytes(b - a - n)
        for k in range(bi, run_end):
            x, y = k * BLOCK - a, min((k + 1) * BLOCK, end) - a
            d = _block_digest(data[x:y])
            if d != old[k * 16:(k + 1) * 16]:
                _write_all(dfd, data[x:y], a + x)
                written.append((a + x, a + y))
            digests.append(d)
        if progress:
            progress(b - a)
        bi = run_end
    return b"".join(digests), _coalesce(written)


PREFETCH_MAX = 1 << 16  # at most this many read-ahead requests per file (each one syscall)


def _prefetch(fd: int, stale: frozenset[int] | dict[int, int], page_size: int, size: int) -> None:
    """Ask the kernel to read the stale pages (or blocks) of a file ahead, all at once (``POSIX_FADV_WILLNEED``).

    A delta's reads are small and scattered over large files; issued one by one from a few
    threads they keep a handful of requests in flight, while read-ahead queues them all, so the
    device works at the queue depth it is built for and the reads that follow find the pages cached.
    ``page_size`` > 0: ``stale`` maps blocks to page masks (``stale_pages``).
    """
    runs: list[tuple[int, int]] = []
    per_block = BLOCK // page_size if page_size else 1
    for b in sorted(stale):
        if isinstance(stale, dict) and per_block > 1:
            pieces = [(b * BLOCK + p * page_size, b * BLOCK + q * page_size) for p, q in _page_runs(stale[b], per_block)]
        else:
            pieces = [(b * BLOCK, (b + 1) * BLOCK)]
        for a, e in pieces:
            e = min(e, size)
            if runs and runs[-1][1] == a:
                runs[-1] = (runs[-1][0], e)
            elif a < e:
                runs.append((a, e))
    if len(runs) > PREFETCH_MAX:
        return  # so much is stale that the reads are nearly sequential: the kernel's own read-ahead serves them
    for a, e in runs:
        os.posix_fadvise(fd, a, e - a, os.POSIX_FADV_WILLNEED)


def _page_runs(mask: int, per_block: int) -> list[tuple[int, int]]:
    """(first page, end page) of the runs of set bits of ``mask`` (pages of one block)."""
    runs: list[tuple[int, int]] = []
    p = 0
    while p < per_block:
        if mask >> p & 1:
            q = p
            while q < per_block and mask >> q & 1:
                q += 1
            runs.append((p, q))
            p = q
        else:
            p += 1
    return runs


def _copy_stale_pages(sfd: int, dfd: int, tfd: int, a: int, mask: int, page_size: int, prev: bytes,
                      view: memoryview, progress: Progress | None, written: list[tuple[int, int]]) -> bytes:
    """One whole block at ``a``: the target's copy with the pages in ``mask`` read from the source; its digest.

    The stale pages are written only when the block's digest differs from ``prev`` (the
    verified one); ``written`` then gets the whole block, which the read-back compares.
    """
    blk = view[:BLOCK]
    n = _pread_full(tfd, blk, a)
    if n < BLOCK:
        blk[n:] = bytes(BLOCK - n)
    runs = [(p * page_size, q * page_size) for p, q in _page_runs(mask, BLOCK // page_size)]
    got = 0
    for x, y in runs:
        m = _pread_full(sfd, blk[x:y], a + x)
        if m < y - x:  # the file shrank while being read (online): the rest reads as the target's hole
            blk[x + m:y] = bytes(y - x - m)
        got += y - x
    d = _block_digest(blk)
    if d != prev:
        for x, y in runs:
            _write_all(dfd, blk[x:y], a + x)
        written.append((a, a + BLOCK))
    if progress:
        progress(got)
    return d


FIL_PAGE_LSN = 16  # offset of a page's newest-modification LSN (8 bytes, big-endian) in every InnoDB page
FSP_SPACE_FLAGS = 38 + 16  # FIL_PAGE_DATA + FSP_SPACE_FLAGS: the tablespace's flags in page 0
FSP_FLAGS_FCRC32_MARKER = 1 << 4  # MariaDB 10.5+ full_crc32 format (no ROW_FORMAT=COMPRESSED possible)
FSP_FLAGS_ZIP_SSIZE = 0xF << 1  # ROW_FORMAT=COMPRESSED: physical pages smaller than the server's page size


def _lsn_pages(fd: int, page_size: int) -> bool:
    """True when every ``page_size`` page of the file starts with an InnoDB FIL header (not ROW_FORMAT=COMPRESSED)."""
    raw = os.pread(fd, 4, FSP_SPACE_FLAGS)
    if len(raw) < 4 or page_size <= 0:
        return False
    flags = int.from_bytes(raw, "big")
    return bool(flags & FSP_FLAGS_FCRC32_MARKER) or not flags & FSP_FLAGS_ZIP_SSIZE


TABLESPACE_NAME = re.compile(r"(^|/)(ibdata\d+|undo\d+|[^/]+\.ibd)$")  # files made of LSN-stamped pages


def stale_pages(fd: int, size: int, page_size: int, lsn_floor: int | array, old_blocks: int) -> dict[int, int]:
    """Stale blocks of a tablespace, each with the bit mask of its stale pages (all bits: read it whole): what may
    differ from the copy made after ``lsn_floor`` was read.

    ``lsn_floor`` is the server's last checkpoint LSN, read before the pass that copied the
    file began.  Every page the server writes afterwards was dirty then or later, so it
    carries an LSN >= ``lsn_floor`` (a dirty page's oldest modification is at or after the
    checkpoint); a page whose LSN is below it on disk now was not written since, and the
    copy of it (which was read after ``lsn_floor``) is exact, a torn read included (a tear
    needs a concurrent write, which stamps a newer LSN).  Stale: blocks with a page at or
    above the floor or with LSN 0 (never written, or a hole: compared by content), block 0
    (the header page, where the server writes outside the rule at shutdown), and blocks the
    earlier copy did not have (the file grew).  ``lsn_floor`` may also be one floor per block
    (``Manifest.floors``): the floor of the pass that last read that block.

    While the server runs (an online pass) the rule holds the same way: a header read torn by
    a concurrent write may show the old LSN, but that write stamps an LSN at or above every
    floor read before it, so the next pass, or the offline delta, finds the block stale
    (its floor did not move, as it was not read).

    Block 0, the blocks the earlier copy did not have and every block of a file whose pages
    carry no LSN header are whole; elsewhere a bit is set for each page at or above its
    block's floor, with LSN 0, or not in the page cache.
    """
    blocks = -(-size // BLOCK)
    per_block = max(1, BLOCK // page_size) if page_size > 0 else 1
    full = (1 << per_block) - 1
    if not _lsn_pages(fd, page_size):
        return dict.fromkeys(range(blocks), full)
    stale = dict.fromkeys(range(min(old_blocks, blocks) - 1 if old_blocks else 0, blocks), full)  # growth, tail
    stale[0] = full
    lsns = resident_page_lsns(fd, size, page_size)
    for page, lsn in enumerate(lsns if lsns is not None else page_lsns(fd, size, page_size)):
        b = page // per_block
        floor = lsn_floor if isinstance(lsn_floor, int) else (lsn_floor[b] if b < len(lsn_floor) else 0)
        if lsn is None or lsn == 0 or lsn >= floor:  # None: not in the page cache, so read it from the source
            stale[b] = stale.get(b, 0) | 1 << (page % per_block)
    return stale


_libc = ctypes.CDLL(None, use_errno=True)


def resident_page_lsns(fd: int, size: int, page_size: int) -> list[int | None] | None:
    """FIL_PAGE_LSN of every page whose header is in the page cache, None for the others; None without mincore.

    The headers are read through a private mapping after one mincore(2) call told which
    are cached, so none of them costs a device read: a page the server wrote with O_DIRECT
    since the last pass read it is no longer cached (a direct write drops the cached copy),
    and reading its block whole is the work the delta has to do anyway.  (A cached header is
    the file's current content: the page cache is coherent with every write.)
    """
    pages = size // page_size
    if pages == 0:
        return []
    length = pages * page_size
    try:
        m = mmap.mmap(fd, length, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError:
        return None
    try:
        vec = ctypes.create_string_buffer(-(-length // mmap.PAGESIZE))
        anchor = ctypes.c_char.from_buffer(m)
        try:
            rc = _libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(length), vec)
        finally:
            del anchor  # the mapping cannot be closed while ctypes holds it
        if rc != 0:
            return None
        cached = vec.raw
        out: list[int | None] = []
        for p in range(pages):
            o = p * page_size
            if cached[o // mmap.PAGESIZE] & 1:
                out.append(int.from_bytes(m[o + FIL_PAGE_LSN:o + FIL_PAGE_LSN + 8], "big"))
            else:
                out.append(None)
        return out
    finally:
        m.close()


REDO_NAME = re.compile(r"(^|/)ib_logfile0$")  # MariaDB 10.8+: one circular redo log file
REDO_FORMATS = (0x50687973, 0x50687973 | 1 << 31)  # "Phys" (10.8+ physical log), and encrypted
REDO_START = 12288  # the log proper begins here; the file header at 0, checkpoint blocks at 4096 and 8192
REDO_CHECKPOINTS = (4096, 8192)


def _redo_ranges(lo: int, hi: int, first_lsn: int, size: int) -> list[tuple[int, int]]:
    """File ranges holding the LSNs [lo, hi) of a circular 10.8+ redo log (one range, or two when it wraps)."""
    cap = size - REDO_START
    a = REDO_START + (lo - first_lsn) % cap
    n = hi - lo
    return [(a, a + n)] if a + n <= size else [(a, size), (REDO_START, REDO_START + a + n - size)]


def redo_stale_blocks(fd: int, size: int, log_floor: int, old_blocks: int, end: int | None = None) -> frozenset[int]:
    """Blocks of a MariaDB 10.8+ redo log the server may have written since ``log_floor``.

    ``log_floor`` is the server's flushed LSN (``Innodb_lsn_flushed``) read before the pass
    that copied the file began.  The server writes the log only at the place of the LSNs it
    appends (``REDO_START + (lsn - first_lsn) % capacity``; the write of a batch starts in the
    block holding the last written, hence flushed, LSN) and in the header block (checkpoints).
    So what changed since is the header block and the ranges of [floor, end LSN], end taken
    from the newest checkpoint block; with one ``BLOCK`` of margin on each side.  Anything not
    understood (another format, an unclean shutdown whose checkpoint is not at the end, a
    wrap of the whole log since the floor) gives every block: the file is compared whole.

    While the server runs, ``end`` is its current LSN (``Innodb_lsn_current``) read with the
    floor of this pass, before anything is read: what it logs after that lies at or above
    this pass's floor, so the next pass (or the offline delta) reads it.
    """
    every = frozenset(range(-(-size // BLOCK)))
    head = os.pread(fd, 16, 0)
    if len(head) < 16 or int.from_bytes(head[:4], "big") not in REDO_FORMATS or size <= REDO_START + 4 * BLOCK:
        return every
    first_lsn = int.from_bytes(head[8:16], "big")
    cps = [os.pread(fd, 16, off) for off in REDO_CHECKPOINTS]
    cps = [(int.from_bytes(c[:8], "big"), int.from_bytes(c[8:16], "big")) for c in cps if len(c) == 16]
    if not cps or not log_floor or log_floor < first_lsn:
        return every
    if end is None:
        checkpoint, end = max(cps)
        if checkpoint != end:
            return every  # not a clean shutdown: recovery would need the log, and its end is not known
    if end < log_floor or end - log_floor + 3 * BLOCK >= size - REDO_START:
        return every  # the log wrapped since the floor
    lo = max(first_lsn, log_floor - BLOCK)
    stale = {0}
    stale.update(range(min(old_blocks, len(every)) - 1 if old_blocks else 0, len(every)))  # growth and the tail
    for a, b in _redo_ranges(lo, end + BLOCK, first_lsn, size):
        stale.update(range(a // BLOCK, -(-b // BLOCK)))
    return frozenset(stale)


HEADER_PROBE = 64  # page headers timed to tell a cached file from one on the device
CACHED_HEADER_S = 20e-6  # a header read from the page cache takes 1-4 us here, from the device 100 us or more


def page_lsns(fd: int, size: int, page_size: int, cached: bool | None = None) -> list[int]:
    """FIL_PAGE_LSN of every page: one 8-byte read per page when the file is in the page cache, else sequential reads.

    Measured here on 1 GiB: headers from the cache 0.1 s, from the device one by one 7-13 s
    (a 4 KiB random read each), sequential 8 MiB reads 1.4 s; so a timed probe of
    ``HEADER_PROBE`` headers spread over the file picks the way (``cached`` forces one).
    """
    pages = size // page_size
    if cached is None:
        step = max(1, pages // HEADER_PROBE)
        t0 = time.monotonic()
        for page in range(0, pages, step):
            os.pread(fd, 8, page * page_size + FIL_PAGE_LSN)
        cached = (time.monotonic() - t0) / (-(-pages // step) if pages else 1) <= CACHED_HEADER_S
    if cached:
        return [int.from_bytes(os.pread(fd, 8, p * page_size + FIL_PAGE_LSN).ljust(8, b"\0"), "big")
                for p in range(pages)]
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    view = _buffer()
    out: list[int] = []
    chunk = BUFFER - BUFFER % page_size
    for off in range(0, pages * page_size, chunk):
        n = _pread_full(fd, view[:min(chunk, pages * page_size - off)], off)
        out += [int.from_bytes(view[o + FIL_PAGE_LSN:o + FIL_PAGE_LSN + 8], "big") for o in range(0, n, page_size)]
    return out


def _read_piece(fd: int, start: int, end: int, direct: bool) -> bytes:
    """Block digests of [start, end) of an open file (holes as zeros); ``direct``: the fd has O_DIRECT."""
    view = _buffer()
    digests: list[bytes] = []
    for c, ce, inside in _chunks(fd, start, end):
        if not inside:
            digests += _zero_digests(c, ce)
            continue
        want = -(-(ce - c) // DIRECT_ALIGN) * DIRECT_ALIGN if direct else ce - c  # O_DIRECT: whole blocks
        n = min(_pread_full(fd, view[:want], c), ce - c)
        data = view[:n]
        if n < ce - c:
            data = bytes(data) + bytes(ce - c - n)
        digests += [_block_digest(data[i:i + BLOCK]) for i in range(0, ce - c, BLOCK)]
    return b"".join(digests)


MEMORY_FS = ("tmpfs", "ramfs")  # memory is the medium: the page cache *is* the device


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


def _keep_metadata_fd(fd: int, st: os.stat_result) -> None:
    os.fchown(fd, st.st_uid, st.st_gid)
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def _run(pool: ThreadPoolExecutor | None, fn, items: list) -> list:
    """fn(*item) for every item, in the pool when there is one; results in order.

    Every call has finished before this returns or raises (callers close the fds the calls use).
    """
    if pool is None or len(items) == 1:
        return [fn(*it) for it in items]
    return _results([pool.submit(fn, *it) for it in items])


def _results(futures: list[Future]) -> list:
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


@dataclass
class FileCopy:
    """What one file's copy did: the source's stat and block digests, the ranges written to the target."""

    st: os.stat_result
    blocks: bytes
    written: list[tuple[int, int]]
    delta: bool  # only changed blocks were written (the rest was verified earlier)
    read_blocks: frozenset[int] | None = None  # the blocks read from the source (None: all of them)

    @property
    def digest(self) -> str:
        return combine(self.blocks, self.st.st_size)

    @property
    def bytes_written(self) -> int:
        return sum(b - a for a, b in self.written)


def copy_file(src: str, dst: str, progress: Progress | None = None, pool: ThreadPoolExecutor | None = None,
              old: bytes | None = None, lsn_skip: tuple | None = None, stable: bool = False,
              pages_from_target: bool = False) -> FileCopy:
    """Copy one regular file, keep owner/mode/mtime, fsync.

    Without ``old`` the target is created anew from the source's data extents; with
    ``old`` (the block digests of the target as verified earlier) only changed blocks are
    rewritten.  With ``pool`` the file's pieces are copied in parallel.  ``lsn_skip``, only
    with ``old``: ``("pages", page size, LSN floor(s))`` for a tablespace, blocks whose
    pages are all older than their floor are not even read (``stale_pages``, online too);
    ``("redo", flushed LSN floor, current LSN or None when stopped)`` for a 10.8+ redo log,
    only the blocks of the LSNs written since are (``redo_stale_blocks``).  ``stable``: the
    server is stopped (kept for callers; the bytes always go through this thread's buffer,
    so the bytes hashed are the bytes written even while the server writes).
    ``pages_from_target`` (a tablespace with ``lsn_skip``, the target on memory or DAX, where a
    read costs a copy in memory): a block with only some stale pages reads just those from the
    source and the rest from the target (``_copy_stale_blocks``).
    """
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        st = os.fstat(sfd)
        os.posix_fadvise(sfd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        flags = os.O_WRONLY | os.O_NOFOLLOW | (os.O_CREAT | os.O_TRUNC if old is None else 0)
        dfd = os.open(dst, flags, 0o600)
        try:
            if old is not None:
                old = old[: (st.st_size + BLOCK - 1) // BLOCK * 16]  # the file may have shrunk or grown
            os.ftruncate(dfd, st.st_size)  # holes stay holes: only data is written below
            if old is None:
                _preallocate_like(dfd, st)
            if old is not None and lsn_skip is not None:
                by_page = pages_from_target and lsn_skip[0] == "pages"
                stale = (redo_stale_blocks(sfd, st.st_size, lsn_skip[1], len(old) // 16, lsn_skip[2])
                         if lsn_skip[0] == "redo"
                         else stale_pages(sfd, st.st_size, lsn_skip[1], lsn_skip[2], len(old) // 16))
                tfd = os.open(dst, os.O_RDONLY | os.O_NOFOLLOW) if by_page else None
                if lsn_skip[0] == "pages":  # scattered pages: no read-ahead around them, all of them asked for at once
                    os.posix_fadvise(sfd, 0, 0, os.POSIX_FADV_RANDOM)
                    _prefetch(sfd, stale, lsn_skip[1] if by_page else 0, st.st_size)
                try:
                    parts = _run(pool, _copy_stale_blocks, [(sfd, dfd, a, b, progress, old, stale, tfd,
                                                             lsn_skip[1] if by_page else 0)
                                                            for a, b in segments(st.st_size)])
                finally:
                    if tfd is not None:
                        os.close(tfd)
                read = frozenset(b for b in range(-(-st.st_size // BLOCK)) if b in stale or b * 16 >= len(old))
            else:
                read = None
                parts = _run(pool, _copy_piece, [(sfd, dfd, a, b, progress, old) for a, b in segments(st.st_size)])
            _keep_metadata_fd(dfd, st)
            os.fsync(dfd)
            os.posix_fadvise(dfd, 0, 0, os.POSIX_FADV_DONTNEED)  # written and durable: leave the cache to others
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
    return FileCopy(st, b"".join(p[0] for p in parts), [r for p in parts for r in p[1]], old is not None, read)


def _preallocate_like(dfd: int, st: os.stat_result) -> None:
    """Allocate the whole target when the source is allocated whole (no holes), as the server had it.

    InnoDB preallocates its files (a new redo log, a tablespace's extension) with fallocate(2):
    unwritten extents read as zeros and ``SEEK_DATA`` reports them as holes unless their pages
    are cached, so a copy of data extents alone would leave a sparse redo log whose every later
    write allocates blocks.  A source with as many allocated bytes as its length is allocated
    alike on the target (tmpfs included: the server would have allocated it there too); a sparse
    source (page compression's punched holes) stays sparse.  A file system without fallocate
    (ramfs) keeps the holes.
    """
    if st.st_size == 0 or st.st_blocks * 512 < st.st_size:
        return
    try:
        os.posix_fallocate(dfd, 0, st.st_size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise


def file_blocks(path: str, drop_cache: bool = True, pool: ThreadPoolExecutor | None = None,
                memory: bool | None = None, ranges: list[tuple[int, int]] | None = None) -> bytes:
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
        work = segments(size) if ranges is None else _merge(ranges)
        try:
            parts = _run(pool, _read_piece, [(fd, a, b, direct) for a, b in work])
        except OSError as exc:  # a file system that opens with O_DIRECT but refuses the reads
            if not direct or exc.errno != errno.EINVAL:
                raise
            os.close(fd)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            parts = _run(pool, _read_piece, [(fd, a, b, False) for a, b in work])
    finally:
        os.close(fd)
    return b"".join(parts)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Block-aligned ranges merged and cut into pieces of at most SEGMENT bytes."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return [(x, min(x + SEGMENT, b)) for a, b in out for x in range(a, b, SEGMENT)]


def digest_file(path: str, drop_cache: bool = True, pool: ThreadPoolExecutor | None = None,
                memory: bool | None = None) -> str:
    """The file's digest (see ``combine``), read from its medium with ``drop_cache``."""
    blocks = file_blocks(path, drop_cache, pool, memory)
    return combine(blocks, os.stat(path).st_size)


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
    return _target_intact(prev, target)


def copy_tree(source: str | os.PathLike, target: str | os.PathLike, entries: list[tuple[str, os.stat_result]],
              previous: Manifest | None = None, progress: Progress | None = None,
              after_file: Callable[[str], None] | None = None, verify: bool = True,
              workers: int = WORKERS, lsn_floor: int = 0, page_size: int = 0,
              stable: bool = False, log_floor: int = 0, log_now: int = 0) -> tuple[Manifest, CopyStats]:
    """Copy ``entries`` (from ``walk``) from ``source`` into ``target``; with ``verify`` read each copy back.

    ``target`` must exist.  With ``previous`` (the pre-copy's manifest) unchanged files
    are kept and target files whose source entry is gone are removed.  Without
    ``verify`` the caller runs ``verify_tree`` (the mover's VERIFY step).  ``workers``
    pieces are in flight at once (small files whole, large files in ``SEGMENT`` pieces).
    ``lsn_floor`` and ``log_floor``: the server's checkpoint and flushed LSNs read before
    this pass began, recorded with every file read; ``log_now``: its current LSN read with
    them (online).  ``page_size`` (with ``previous``): a changed tablespace whose previous
    copy has LSN floors is read only where its pages are not older than their block's floor
    (``stale_pages``), a redo log only where the LSNs logged since its log floor lie
    (``redo_stale_blocks``).  ``stable``: nothing writes to the source during this call
    (server stopped), so a redo log's end LSN is final (its checkpoint block says it).
    """
    t0 = time.monotonic()
    src, dst = Path(source), Path(target)
    manifest = Manifest(str(src), str(dst))
    stats = CopyStats()
    dirs: list[tuple[str, os.stat_result]] = []
    todo: list[tuple[str, os.stat_result]] = []
    earlier: dict[str, array] = {}  # rel -> per-block floors of the previous copy (changed files)
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
                if rel in previous.blocks:
                    manifest.blocks[rel] = previous.blocks[rel]
                if rel in previous.floors:
                    manifest.floors[rel] = previous.floors[rel]
                stats.files_skipped += 1
                stats.bytes_skipped += st.st_size
                if progress:
                    progress(st.st_size)
                continue
            old = previous.blocks.get(rel) if prev is not None and _target_intact(prev, dst) else None
            # the page-LSN shortcut only for the same file (an undo truncation recreates its file)
            floors = _floors_of(previous, prev) if old is not None else None
            skip = _skip_rule(rel, st, prev, old, page_size, floors, stable, log_now)
            todo.append((rel, st, old, skip))
            if floors is not None:
                earlier[rel] = floors
    for rec, fc in _copy_files(src, dst, todo, progress, after_file, verify, workers, stable):
        rec.lsn_floor, rec.log_floor = lsn_floor, log_floor
        manifest.records[rec.rel] = rec
        manifest.blocks[rec.rel] = fc.blocks
        manifest.floors[rec.rel] = _floors_after(fc, earlier.get(rec.rel), lsn_floor)
        rec.lsn_floor = min(manifest.floors[rec.rel], default=lsn_floor)  # the file's floor: its oldest block's
        stats.files_copied += 1
        stats.bytes_copied += fc.bytes_written
        stats.files_delta += int(fc.delta)
    if previous is not None:
        stats.files_removed = _remove_vanished(dst, previous, manifest)
    # directories: fsync deepest first (their entries are now durable), then keep their mtimes
    for rel, st in sorted(dirs, key=lambda x: x[0].count("/"), reverse=True):
        fsync_dir(dst / rel)
        os.utime(dst / rel, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    fsync_dir(dst)
    stats.seconds = time.monotonic() - t0
    return manifest, stats


def _floors_of(previous: Manifest, prev: FileRecord) -> array | None:
    """Per-block LSN floors of the previous copy of a file (its record's floor for every block when not kept)."""
    if prev.rel in previous.floors:
        return previous.floors[prev.rel]
    return array("Q", [prev.lsn_floor]) * -(-prev.size // BLOCK) if prev.lsn_floor else None


def _floors_after(fc: "FileCopy", earlier: array | None, floor: int) -> array:
    """Per-block floors after a copy: ``floor`` (this pass's) for the blocks it read, the earlier ones elsewhere."""
    n = -(-fc.st.st_size // BLOCK)
    if fc.read_blocks is None or earlier is None:
        return array("Q", [floor]) * n
    out = array("Q", earlier[:n])
    out.extend([0] * (n - len(out)))
    for b in fc.read_blocks:
        if b < n:
            out[b] = floor
    return out


def _skip_rule(rel: str, st: os.stat_result, prev: FileRecord | None, old: bytes | None,
               page_size: int, floors: array | None = None, stopped: bool = False,
               log_now: int = 0) -> tuple | None:
    """How a changed file may be read only in part (see ``copy_file``), or None: read it whole.

    Only for the same file (an undo truncation or a log resize recreates its file) whose
    earlier copy has block digests and LSN floors.  A redo log's rule takes its end LSN
    from the checkpoint of a ``stopped`` server, or online from ``log_now`` (the current
    LSN read before the pass); without either it is read whole.  A tablespace's rule holds
    online as well (``stale_pages``).
    """
    if old is None or not page_size or prev is None or prev.ino != st.st_ino:
        return None
    if floors is not None and TABLESPACE_NAME.search(rel):
        return ("pages", page_size, floors)
    if prev.log_floor and REDO_NAME.search(rel) and (stopped or log_now):
        return ("redo", prev.log_floor, None if stopped else log_now)
    return None


def _target_intact(prev: FileRecord, target: Path) -> bool:
    """The target copy is still the one verified in the previous pass (so its block digests still hold)."""
    if prev.kind != "file" or not prev.verified:
        return False
    try:
        tst = os.lstat(target / prev.rel)
    except FileNotFoundError:
        return False
    return (tst.st_mtime_ns, tst.st_ctime_ns, tst.st_ino) == (prev.target_mtime_ns, prev.target_ctime_ns,
                                                               prev.target_ino)


def _copy_files(src: Path, dst: Path, todo: list[tuple[str, os.stat_result, bytes | None, tuple | None]],
                progress: Progress | None, after_file: Callable[[str], None] | None, verify: bool,
                workers: int, stable: bool = False) -> list[tuple[FileRecord, FileCopy]]:
    """Copy (and with ``verify`` read back) files: small ones whole in the pool, large ones in parallel pieces.

    A delta copy (only changed blocks rewritten) is always read back at once, the
    rewritten blocks only: the rest was read back when it was written.
    """
    memory = on_memory_fs(dst) if todo else False
    by_page = memory or (bool(todo) and mount_of(dst).dax)  # a read of the target costs a memory copy

    def one(rel: str, old: bytes | None, skip: tuple | None,
            pool: ThreadPoolExecutor | None) -> tuple[FileRecord, FileCopy]:
        read_at = time.time_ns()
        fc = copy_file(str(src / rel), str(dst / rel), progress, pool, old, skip, stable, by_page)
        st = fc.st
        rec = FileRecord(rel, "file", st.st_size, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns,
                         st.st_ctime_ns, st.st_ino, digest=fc.digest, read_at_ns=read_at)
        if fc.delta:
            _verify_ranges(dst, rec, fc, memory, pool)
        elif verify:
            _verify_record(dst, rec, memory, pool)
        if after_file:
            after_file(rel)
        return rec, fc

    large = sorted((x for x in todo if x[1].st_size > SEGMENT), key=lambda x: -x[1].st_size)
    small = [x for x in todo if x[1].st_size <= SEGMENT]
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="innotier-copy") as pool:
        futures = [pool.submit(one, rel, old, skip, None) for rel, _, old, skip in small]
        done_large = []
        try:
            for rel, _, old, skip in large:  # pieces of one large file fill the pool while small files finish
                done_large.append(one(rel, old, skip, pool))
        finally:
            done_small = _results(futures)
    return done_small + done_large


def _verify_ranges(dst: Path, rec: FileRecord, fc: FileCopy, memory: bool,
                   pool: ThreadPoolExecutor | None = None) -> None:
    """Read back the blocks a delta copy rewrote and compare them with the source's; raise on a difference."""
    p = dst / rec.rel
    ranges = _merge(fc.written)
    got = file_blocks(str(p), True, pool, memory, ranges) if ranges else b""
    want = b"".join(fc.blocks[a // BLOCK * 16:-(-b // BLOCK) * 16] for a, b in ranges)
    if got != want:
        raise MoveError(f"the blocks rewritten in the copy {p} differ from their source when read back; "
                        "the target storage returned different data: check it (dmesg) and run the move again")
    _mark_verified(p, rec)


def _mark_verified(p: Path, rec: FileRecord) -> None:
    tst = os.lstat(p)
    rec.target_mtime_ns, rec.target_ctime_ns, rec.target_ino = tst.st_mtime_ns, tst.st_ctime_ns, tst.st_ino
    rec.verified = True


def _verify_record(dst: Path, rec: FileRecord, memory: bool, pool: ThreadPoolExecutor | None = None) -> None:
    """Read one copy back from the target's medium and compare with the source digest; raise on a difference."""
    p = dst / rec.rel
    got = digest_file(str(p), drop_cache=True, pool=pool, memory=memory)
    if got != rec.digest:
        raise MoveError(f"checksum of the copy {p} ({got}) differs from its source ({rec.digest}); "
                        "the target storage returned different data: check it (dmesg) and run the move again")
    _mark_verified(p, rec)


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


def verify_tree(manifest: Manifest, workers: int = WORKERS) -> None:
    """Read every unverified copy back from the target device and compare checksums; raise on a difference."""
    dst = Path(manifest.target)
    todo = [r for r in manifest.records.values() if r.kind == "file" and not r.verified]
    memory = on_memory_fs(dst) if todo else False
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="innotier-verify") as pool:
        futures = [pool.submit(_verify_record, dst, r, memory, None) for r in todo if r.size <= SEGMENT]
        try:
            for r in sorted((r for r in todo if r.size > SEGMENT), key=lambda r: -r.size):
                _verify_record(dst, r, memory, pool)
        finally:
            _results(futures)


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
