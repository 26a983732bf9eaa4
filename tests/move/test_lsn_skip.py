"""The InnoDB page format and the LSN-skip rule (datadir_mover/move/copy/pages.py): which blocks of a changed
tablespace a delta reads, online and offline, and that the result is byte-equal to the source."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from copyhelpers import age, trust_timestamps
from datadir_mover.move.copy import BLOCK, StaleBlocks, copy_tree, digest_file, walk
from datadir_mover.move.copy import delta
from datadir_mover.move.copy.pages import (FIL_PAGE_LSN, FSP_FLAGS_FCRC32_MARKER, FSP_SPACE_FLAGS, page_lsns,
                                           resident_page_lsns)

PAGE = 16384


def _tablespace(path: Path, pages: int, lsn: int, flags: int = FSP_FLAGS_FCRC32_MARKER) -> None:
    """A file shaped like an InnoDB tablespace: random pages, each stamped with ``lsn``; page 0 carries ``flags``."""
    with open(path, "wb") as fh:
        for p in range(pages):
            page = bytearray(os.urandom(PAGE))
            page[FIL_PAGE_LSN:FIL_PAGE_LSN + 8] = lsn.to_bytes(8, "big")
            if p == 0:
                page[FSP_SPACE_FLAGS:FSP_SPACE_FLAGS + 4] = flags.to_bytes(4, "big")
            fh.write(page)


def _write_page(path: Path, page_no: int, lsn: int) -> None:
    page = bytearray(os.urandom(PAGE))
    page[FIL_PAGE_LSN:FIL_PAGE_LSN + 8] = lsn.to_bytes(8, "big")
    with open(path, "r+b") as fh:
        fh.seek(page_no * PAGE)
        fh.write(page)


@pytest.mark.parametrize("flags,reads_all", [(FSP_FLAGS_FCRC32_MARKER, False), (4 << 1, True)],
                         ids=["full_crc32", "row_format_compressed"])
def test_offline_delta_reads_only_blocks_with_pages_written_since_the_pass(tmp_path, flags, reads_all):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "db").mkdir(parents=True)
    dst.mkdir()
    ts = src / "db" / "t.ibd"
    _tablespace(ts, 400, lsn=500, flags=flags)  # 100 blocks of 4 pages
    age(ts)
    first, _ = copy_tree(src, dst, walk(src), lsn_floor=1000)  # the checkpoint was at 1000 when the pass began
    trust_timestamps(first)
    assert first.records["db/t.ibd"].lsn_floor == 1000
    _write_page(ts, 41, lsn=2000)  # the server flushes one page after the pass (block 10), then stops
    read = []
    final, st = copy_tree(src, dst, walk(src), previous=first, verify=False, page_size=PAGE, progress=read.append)
    assert st.files_delta == 1 and st.bytes_copied == BLOCK  # block 10 rewritten
    assert (dst / "db" / "t.ibd").read_bytes() == ts.read_bytes()
    if reads_all:  # ROW_FORMAT=COMPRESSED pages are smaller than the server's: no LSN shortcut
        assert sum(read) == 400 * PAGE
    else:  # block 0 (header page), block 10, and the last block: 3 of 100 read
        assert sum(read) == 3 * BLOCK
    assert final.records["db/t.ibd"].digest == digest_file(str(ts))


def _copied_tablespace(tmp_path: Path):
    """(src, dst, tablespace, manifest): a 400-page tablespace at LSN 500 copied by a pass whose floor was 1000."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "db").mkdir(parents=True)
    dst.mkdir()
    ts = src / "db" / "t.ibd"
    _tablespace(ts, 400, lsn=500)
    age(ts)
    first, _ = copy_tree(src, dst, walk(src), lsn_floor=1000)
    trust_timestamps(first)
    return src, dst, ts, first


def test_offline_delta_reads_blocks_whose_headers_left_the_page_cache_whole(tmp_path):
    """A page the server wrote with O_DIRECT is no longer cached: its block is read whole, no header read first."""
    src, dst, ts, first = _copied_tablespace(tmp_path)
    _write_page(ts, 41, lsn=2000)
    fd = os.open(ts, os.O_RDONLY)
    try:
        os.fsync(fd)
        lsns = resident_page_lsns(fd, 400 * PAGE, PAGE)
        assert lsns is not None and lsns[41] == 2000 and lsns[0] == 500  # cached: headers read in place
        os.posix_fadvise(fd, 80 * PAGE, 8 * PAGE, os.POSIX_FADV_DONTNEED)  # blocks 20 and 21 leave the cache
        lsns = resident_page_lsns(fd, 400 * PAGE, PAGE)
        assert lsns[80:88] == [None] * 8 and lsns[79] == 500 and lsns[88] == 500
    finally:
        os.close(fd)
    read = []
    final, st = copy_tree(src, dst, walk(src), previous=first, verify=False, page_size=PAGE, progress=read.append)
    assert sum(read) == 5 * BLOCK  # header block, block 10 (new LSN), blocks 20-21 (not cached), the last block
    assert st.bytes_copied == BLOCK and (dst / "db" / "t.ibd").read_bytes() == ts.read_bytes()
    assert final.records["db/t.ibd"].digest == digest_file(str(ts))


def test_online_pass_reads_only_stale_blocks_and_moves_only_their_floors(tmp_path):
    """An online pass re-reads the blocks with pages at or above their floor; the offline delta then uses per-block
    floors, so a page written after the first pass but below the second pass's floor is still found."""
    src, dst, ts, first = _copied_tablespace(tmp_path)
    _write_page(ts, 41, lsn=2000)  # block 10, written after pass 1
    read = []
    second, st = copy_tree(src, dst, walk(src), previous=first, lsn_floor=3000, page_size=PAGE,
                           progress=read.append)  # the online pass 2: its checkpoint floor is 3000
    assert sum(read) == 3 * BLOCK and st.bytes_copied == BLOCK  # header block, block 10, last block
    floors = second.floors["db/t.ibd"]
    assert floors[10] == 3000 and floors[50] == 1000 and second.records["db/t.ibd"].lsn_floor == 1000
    trust_timestamps(second)
    _write_page(ts, 200, lsn=2500)  # block 50: written during pass 2, LSN below pass 2's floor
    read = []
    final, st = copy_tree(src, dst, walk(src), previous=second, verify=False, page_size=PAGE, progress=read.append)
    assert sum(read) == 3 * BLOCK  # header block, block 50 (floor 1000), last block; block 10 not again
    assert (dst / "db" / "t.ibd").read_bytes() == ts.read_bytes()
    assert final.records["db/t.ibd"].digest == digest_file(str(ts))


@pytest.mark.root
def test_delta_onto_memory_reads_only_the_stale_pages_of_a_block(mv_tiers, tmp_path):
    """Onto tmpfs, a block with one stale page reads that page from the source and its other three from the
    target copy; a page that left the page cache is read as well; the result is byte-equal and read back."""
    src = tmp_path / "src"
    (src / "db").mkdir(parents=True)
    dst = Path(mv_tiers["tmpfs"]) / "by-page"
    dst.mkdir()
    try:
        ts = src / "db" / "t.ibd"
        _tablespace(ts, 400, lsn=500)
        age(ts)
        first, _ = copy_tree(src, dst, walk(src), lsn_floor=1000)
        trust_timestamps(first)
        _write_page(ts, 41, lsn=2000)  # block 10, its second page
        _write_page(ts, 82, lsn=2000)  # block 20, its third page
        fd = os.open(ts, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 83 * PAGE, PAGE, os.POSIX_FADV_DONTNEED)  # block 20's fourth page leaves the cache
        finally:
            os.close(fd)
        read = []
        final, st = copy_tree(src, dst, walk(src), previous=first, page_size=PAGE, progress=read.append)
        # the header block and the last block whole, then pages 41, 82 and 83 alone
        assert sum(read) == 2 * BLOCK + 3 * PAGE
        assert st.files_delta == 1 and st.bytes_copied == 2 * BLOCK  # blocks 10 and 20 rewritten (and read back)
        assert (dst / "db" / "t.ibd").read_bytes() == ts.read_bytes()
        assert final.records["db/t.ibd"].digest == digest_file(str(ts))
        assert final.records["db/t.ibd"].verified
    finally:
        shutil.rmtree(dst)


def test_prefetch_asks_for_the_stale_pages_joined_into_runs(monkeypatch):
    calls = []
    monkeypatch.setattr(delta.os, "posix_fadvise", lambda fd, off, n, advice: calls.append((off, n, advice)))
    # block 0 whole; block 1 pages 1-2; block 2 page 0; block 5 page 3
    delta.prefetch(7, StaleBlocks({0: 0b1111, 1: 0b0110, 2: 0b0001, 5: 0b1000}, BLOCK // PAGE), 100 * BLOCK)
    will = delta.os.POSIX_FADV_WILLNEED
    assert calls == [(0, BLOCK, will), (BLOCK + PAGE, 2 * PAGE, will), (2 * BLOCK, PAGE, will),
                     (5 * BLOCK + 3 * PAGE, PAGE, will)]
    calls.clear()
    delta.prefetch(7, StaleBlocks(dict.fromkeys((3, 4, 9), 1)), 9 * BLOCK + 100)  # whole blocks; the last one ends
    assert calls == [(3 * BLOCK, 2 * BLOCK, will), (9 * BLOCK, 100, will)]  # with the file


def test_page_runs_of_a_mask():
    def runs(mask):
        return StaleBlocks({0: mask}, 4).page_runs(0)

    assert runs(0b0000) == []
    assert runs(0b1011) == [(0, 2 * PAGE), (3 * PAGE, 4 * PAGE)]
    assert runs(0b0110) == [(PAGE, 3 * PAGE)]
    assert runs(0b1111) == [(0, 4 * PAGE)]
    assert StaleBlocks({0: 0b0110}, 4).in_whole_blocks().page_runs(0) == [(0, BLOCK)]


def test_page_lsns_read_one_by_one_or_sequentially_agree(tmp_path):
    ts = tmp_path / "t.ibd"
    _tablespace(ts, 1000, lsn=7)
    for p, lsn in ((0, 11), (513, 99), (999, 5)):
        _write_page(ts, p, lsn)
    fd = os.open(ts, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        cached = page_lsns(fd, size, PAGE, cached=True)  # one header read per page
        sequential = page_lsns(fd, size, PAGE, cached=False)  # 8 MiB reads
        probed = page_lsns(fd, size, PAGE)  # either, by the timed probe
    finally:
        os.close(fd)
    assert cached == sequential == probed and len(cached) == 1000
    assert (cached[0], cached[513], cached[999], cached[1]) == (11, 99, 5, 7)
