"""Deltas: a changed file copied again by reading only its stale blocks (or pages), the rest keeping its digests.

A delta needs the block digests of the target's verified copy (``old``) and a rule that
proves which blocks cannot have changed since: ``pages.PageRule`` for a tablespace,
``redo.RedoRule`` for a redo log.  Runs of consecutive stale blocks are read in chunks into
this thread's buffer, hashed there and written from it (so also while the server writes).
"""

from __future__ import annotations

import os
from array import array

from datadir_mover.move.copy.blocks import (BLOCK, CHUNK, DIGEST, Progress, Range, StaleBlocks, block_digest,
                                            chunk_buffer, coalesce, pread_full, read_chunk, write_all)
from datadir_mover.move.copy.manifest import FileRecord, Manifest
from datadir_mover.move.copy.pages import TABLESPACE_NAME, PageRule
from datadir_mover.move.copy.redo import REDO_NAME, RedoRule

PREFETCH_MAX = 1 << 16  # at most this many read-ahead requests per file (each one syscall)
SkipRule = PageRule | RedoRule


def skip_rule(rel: str, st: os.stat_result, prev: FileRecord | None, old: bytes | None, page_size: int,
              floors: array | None = None, stopped: bool = False, log_now: int = 0) -> SkipRule | None:
    """How a changed file may be read only in part, or None: read it whole.

    Only for the same file (an undo truncation or a log resize recreates its file) whose
    earlier copy has block digests and LSN floors.  A redo log's rule takes its end LSN
    from the checkpoint of a ``stopped`` server, or online from ``log_now`` (the current
    LSN read before the pass); without either it is read whole.  A tablespace's rule holds
    online as well.
    """
    if old is None or not page_size or prev is None or prev.ino != st.st_ino:
        return None
    if floors is not None and TABLESPACE_NAME.search(rel):
        return PageRule(page_size, floors)
    if prev.log_floor and REDO_NAME.search(rel) and (stopped or log_now):
        return RedoRule(prev.log_floor, None if stopped else log_now)
    return None


def floors_of(previous: Manifest, prev: FileRecord) -> array | None:
    """Per-block LSN floors of the previous copy of a file (its record's floor for every block when not kept)."""
    if prev.rel in previous.floors:
        return previous.floors[prev.rel]
    return array("Q", [prev.lsn_floor]) * -(-prev.size // BLOCK) if prev.lsn_floor else None


def floors_after(size: int, read_blocks: frozenset[int] | None, earlier: array | None, floor: int) -> array:
    """Per-block floors after a copy: ``floor`` (this pass's) for the blocks it read, the earlier ones elsewhere."""
    n = -(-size // BLOCK)
    if read_blocks is None or earlier is None:
        return array("Q", [floor]) * n
    out = array("Q", earlier[:n])
    out.extend([0] * (n - len(out)))
    for b in read_blocks:
        if b < n:
            out[b] = floor
    return out


def copy_stale_blocks(sfd: int, dfd: int, start: int, end: int, progress: Progress | None, old: bytes,
                      stale: StaleBlocks, tfd: int | None = None) -> tuple[bytes, list[Range]]:
    """Copy the stale blocks of [start, end): (block digests of the range, ranges written).

    Blocks not in ``stale`` keep their digests from ``old``.  Of a block whose mask names only
    some of its pages (``stale.pages_per_block`` > 1; ``tfd`` the target opened for reading), only
    those pages are read from the source, laid over the block as the target holds it (its other
    pages are provably the source's: the verified copy of a read made after their floor).  A TPC-C
    delta is mostly single pages scattered over large tablespaces, a quarter of the blocks they sit in.
    """
    view = chunk_buffer()
    digests: list[bytes] = []
    written: list[Range] = []
    first, last = start // BLOCK, -(-end // BLOCK)
    bi = first
    while bi < last:
        prev = old[bi * DIGEST:(bi + 1) * DIGEST]
        if bi not in stale and len(prev) == DIGEST:
            digests.append(prev)
            bi += 1
        elif not stale.whole(bi) and len(prev) == DIGEST and (bi + 1) * BLOCK <= end:
            digests.append(_copy_stale_pages(sfd, dfd, tfd, bi * BLOCK, stale, prev, view, progress, written))
            bi += 1
        else:
            run_end = _run_end(bi, last, old, stale)
            digests += _copy_run(sfd, dfd, bi * BLOCK, min(run_end * BLOCK, end), old, view, progress, written)
            bi = run_end
    return b"".join(digests), coalesce(written)


def _run_end(bi: int, last: int, old: bytes, stale: StaleBlocks) -> int:
    """The end of the run of whole stale blocks (or blocks the earlier copy lacks) that starts at ``bi``."""
    run_end = bi + 1
    while run_end < last and run_end - bi < CHUNK // BLOCK and (
            (run_end in stale and stale.whole(run_end)) or len(old[run_end * DIGEST:(run_end + 1) * DIGEST]) < DIGEST):
        run_end += 1
    return run_end


def _copy_run(sfd: int, dfd: int, a: int, b: int, old: bytes, view: memoryview, progress: Progress | None,
              written: list[Range]) -> list[bytes]:
    """Read [a, b) (whole blocks) from the source, write the blocks whose digest changed; their digests."""
    data = read_chunk(sfd, view, a, b)
    digests = []
    for x in range(0, b - a, BLOCK):
        y = min(x + BLOCK, b - a)
        d = block_digest(data[x:y])
        k = (a + x) // BLOCK
        if d != old[k * DIGEST:(k + 1) * DIGEST]:
            write_all(dfd, data[x:y], a + x)
            written.append((a + x, a + y))
        digests.append(d)
    if progress:
        progress(b - a)
    return digests


def _copy_stale_pages(sfd: int, dfd: int, tfd: int, a: int, stale: StaleBlocks, prev: bytes, view: memoryview,
                      progress: Progress | None, written: list[Range]) -> bytes:
    """One whole block at ``a``: the target's copy with its stale pages read from the source; its digest.

    The stale pages are written only when the block's digest differs from ``prev`` (the
    verified one); ``written`` then gets the whole block, which the read-back compares.
    """
    blk = view[:BLOCK]
    n = pread_full(tfd, blk, a)
    if n < BLOCK:
        blk[n:] = bytes(BLOCK - n)
    runs = stale.page_runs(a // BLOCK)
    for x, y in runs:
        m = pread_full(sfd, blk[x:y], a + x)
        if m < y - x:  # the file shrank while being read (online): the rest reads as the target's hole
            blk[x + m:y] = bytes(y - x - m)
    d = block_digest(blk)
    if d != prev:
        for x, y in runs:
            write_all(dfd, blk[x:y], a + x)
        written.append((a, a + BLOCK))
    if progress:
        progress(sum(y - x for x, y in runs))
    return d


def prefetch(fd: int, stale: StaleBlocks, size: int) -> None:
    """Ask the kernel to read the stale pages (or blocks) of a file ahead, all at once (``POSIX_FADV_WILLNEED``).

    A delta's reads are small and scattered over large files; issued one by one from a few
    threads they keep a handful of requests in flight, while read-ahead queues them all, so the
    device works at the queue depth it is built for and the reads that follow find the pages cached.
    """
    runs: list[Range] = []
    for b in sorted(stale.masks):
        for x, y in stale.page_runs(b):
            a, e = b * BLOCK + x, min(b * BLOCK + y, size)
            if runs and runs[-1][1] == a:
                runs[-1] = (runs[-1][0], e)
            elif a < e:
                runs.append((a, e))
    if len(runs) > PREFETCH_MAX:
        return  # so much is stale that the reads are nearly sequential: the kernel's own read-ahead serves them
    for a, e in runs:
        os.posix_fadvise(fd, a, e - a, os.POSIX_FADV_WILLNEED)


def read_blocks(stale: StaleBlocks, size: int, old_blocks: int) -> frozenset[int]:
    """The blocks a delta read from the source: the stale ones and those the earlier copy lacked."""
    return frozenset(b for b in range(-(-size // BLOCK)) if b in stale or b >= old_blocks)
