"""The InnoDB page format and the LSN-skip rule: which blocks of a changed tablespace a delta need not read.

Why skipping is safe.  ``floor`` is the server's last checkpoint LSN, read before the pass
that copied a block began.  Every InnoDB page carries at ``FIL_PAGE_LSN`` the LSN of its
newest modification, and a page is written to its file only from the buffer pool, stamped
that way.  A checkpoint at LSN c means every page whose oldest unflushed modification is
older than c has been written; so a page still dirty when the floor was read, or made dirty
after, carries an LSN >= floor when it is written.  Hence a page whose LSN on disk now is
below the floor of the pass that read it was not written since that read began, and the
copy of it is exact.  A read torn by a concurrent write is no exception: the tear needs a
write, and the write stamps an LSN at or above the floor, so the next pass finds the block
stale (its floor did not move, as the pass that tore it is the last that read it).  The
rule holds the same way while the server runs (an online pass) and after it stopped.

What the rule leaves out, and so is read whole: block 0 (the header page, which the server
writes outside the rule at shutdown), pages with LSN 0 (never written, or a hole: compared
by content), blocks the earlier copy did not have (the file grew) and the last block, every
block of a ROW_FORMAT=COMPRESSED tablespace (its physical pages are smaller than the
server's page size, so ``FIL_PAGE_LSN`` is not at page boundaries), and every page whose
header is not in the page cache (``resident_page_lsns``: a page written with O_DIRECT
since, whose block has to be read anyway).  Only files named like tablespaces
(``TABLESPACE_NAME``) are judged by this rule.
"""

from __future__ import annotations

import mmap
import os
import re
import time
from array import array
from dataclasses import dataclass

from datadir_mover.move.copy.blocks import BLOCK, CHUNK, StaleBlocks, chunk_buffer, mincore, pread_full

FIL_PAGE_LSN = 16  # offset of a page's newest-modification LSN (8 bytes, big-endian) in every InnoDB page
FSP_SPACE_FLAGS = 38 + 16  # FIL_PAGE_DATA + FSP_SPACE_FLAGS: the tablespace's flags in page 0
FSP_FLAGS_FCRC32_MARKER = 1 << 4  # MariaDB 10.5+ full_crc32 format (no ROW_FORMAT=COMPRESSED possible)
FSP_FLAGS_ZIP_SSIZE = 0xF << 1  # ROW_FORMAT=COMPRESSED: physical pages smaller than the server's page size
TABLESPACE_NAME = re.compile(r"(^|/)(ibdata\d+|undo\d+|[^/]+\.ibd)$")  # files made of LSN-stamped pages
HEADER_PROBE = 64  # page headers timed to tell a cached file from one on the device
CACHED_HEADER_S = 20e-6  # slower than this per header: the headers come from the device


@dataclass(frozen=True)
class PageRule:
    """Read a changed tablespace only where its pages are not older than their block's floor."""

    page_size: int
    floors: int | array  # one LSN floor for the file, or one per block (``Manifest.floors``)

    def stale(self, fd: int, size: int, old_blocks: int) -> StaleBlocks:
        return stale_pages(fd, size, self.page_size, self.floors, old_blocks)


def lsn_pages(fd: int, page_size: int) -> bool:
    """True when every ``page_size`` page of the file starts with an InnoDB FIL header (not ROW_FORMAT=COMPRESSED)."""
    raw = os.pread(fd, 4, FSP_SPACE_FLAGS)
    if len(raw) < 4 or page_size <= 0:
        return False
    flags = int.from_bytes(raw, "big")
    return bool(flags & FSP_FLAGS_FCRC32_MARKER) or not flags & FSP_FLAGS_ZIP_SSIZE


def stale_pages(fd: int, size: int, page_size: int, lsn_floor: int | array, old_blocks: int) -> StaleBlocks:
    """The stale blocks of a tablespace, each with the mask of its stale pages (see the module docstring).

    ``lsn_floor``: one floor for the file, or one per block (the floor of the pass that
    last read that block).  ``old_blocks``: the blocks the earlier copy had.
    """
    blocks = -(-size // BLOCK)
    per_block = max(1, BLOCK // page_size) if page_size > 0 else 1
    full = (1 << per_block) - 1
    if not lsn_pages(fd, page_size):
        return StaleBlocks(dict.fromkeys(range(blocks), full), per_block)
    stale = dict.fromkeys(range(min(old_blocks, blocks) - 1 if old_blocks else 0, blocks), full)  # growth, tail
    stale[0] = full
    lsns = resident_page_lsns(fd, size, page_size)
    for page, lsn in enumerate(lsns if lsns is not None else page_lsns(fd, size, page_size)):
        b = page // per_block
        floor = lsn_floor if isinstance(lsn_floor, int) else (lsn_floor[b] if b < len(lsn_floor) else 0)
        if lsn is None or lsn == 0 or lsn >= floor:  # None: not in the page cache, so read it from the source
            stale[b] = stale.get(b, 0) | 1 << (page % per_block)
    return StaleBlocks(stale, per_block)


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
        cached = mincore(m, length)
        if cached is None:
            return None
        return [int.from_bytes(m[o + FIL_PAGE_LSN:o + FIL_PAGE_LSN + 8], "big")
                if cached[o // mmap.PAGESIZE] & 1 else None
                for o in range(0, length, page_size)]
    finally:
        m.close()


def page_lsns(fd: int, size: int, page_size: int, cached: bool | None = None) -> list[int]:
    """FIL_PAGE_LSN of every page: one 8-byte read per page when the file is in the page cache, else sequential reads.

    One by one, headers on the device cost a random read each, far slower than reading the
    file sequentially; so a timed probe of ``HEADER_PROBE`` headers spread over the file picks
    the way (``cached`` forces one).  The probe only chooses how to read, never what.
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
    view = chunk_buffer()
    out: list[int] = []
    step = CHUNK - CHUNK % page_size
    for off in range(0, pages * page_size, step):
        n = pread_full(fd, view[:min(step, pages * page_size - off)], off)
        out += [int.from_bytes(view[o + FIL_PAGE_LSN:o + FIL_PAGE_LSN + 8], "big") for o in range(0, n, page_size)]
    return out
