"""The redo log (datadir_mover/move/copy/redo.py): the LSN-range delta of a MariaDB 10.8+ ib_logfile0, offline and
online, and no trust by stat for a file the server writes through a shared mapping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from copyhelpers import age, trust_timestamps
from datadir_mover.move.copy import BLOCK, copy_tree, digest_file, walk
from datadir_mover.move.copy.redo import redo_ranges

PAGE = 16384
LOG_SIZE = 8 << 20


def _redo_log(path: Path) -> None:
    """A MariaDB 10.8+ ib_logfile0: "Phys" header with first LSN 12288, checkpoint blocks, random log body."""
    body = bytearray(os.urandom(LOG_SIZE))
    body[:12288] = bytes(12288)  # header and both checkpoint blocks
    body[0:4] = b"Phys"
    body[8:16] = (12288).to_bytes(8, "big")
    path.write_bytes(bytes(body))
    _checkpoint(path, 50_000, 50_000)


def _checkpoint(path: Path, checkpoint: int, end: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(4096)
        fh.write(checkpoint.to_bytes(8, "big") + end.to_bytes(8, "big"))


def _append_log(path: Path, lsn: int, n: int) -> None:
    """The server appends n bytes of log at LSN ``lsn`` (wrapping around the circular file)."""
    data = os.urandom(n)
    with open(path, "r+b") as fh:
        for a, b in redo_ranges(lsn, lsn + n, 12288, LOG_SIZE):
            fh.seek(a)
            fh.write(data[:b - a])
            data = data[b - a:]


def _copied_redo_log(tmp_path: Path, floor: int):
    """(src, dst, log, manifest): a redo log copied by a pass that began with ``floor`` as Innodb_lsn_flushed."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    log = src / "ib_logfile0"
    _redo_log(log)
    age(log)
    first, _ = copy_tree(src, dst, walk(src), log_floor=floor)
    trust_timestamps(first)
    return src, dst, log, first


@pytest.mark.parametrize("floor,written,clean,reads_blocks", [
    (1_000_000, 300_000, True, (2, 10)),  # header and last blocks + those of [floor - margin, end + margin]
    (LOG_SIZE - 100_000, 300_000, True, (2, 10)),  # the new log wraps to the start of the circle
    (1_000_000, 300_000, False, (128, 128)),  # checkpoint behind the end: not a clean stop, read whole
], ids=["inside", "wrapping", "unclean"])
def test_offline_delta_of_the_redo_log_reads_only_what_was_logged_since_the_pass(tmp_path, floor, written, clean,
                                                                                  reads_blocks):
    src, dst, log, first = _copied_redo_log(tmp_path, floor)
    _append_log(log, floor, written)  # logged after the pass read the file, then the shutdown's checkpoint
    _checkpoint(log, floor + written if clean else floor, floor + written)
    read = []
    final, st = copy_tree(src, dst, walk(src), previous=first, verify=False, page_size=PAGE, progress=read.append,
                          stable=True)  # the server is stopped: the end LSN is final
    assert st.files_delta == 1
    assert (dst / "ib_logfile0").read_bytes() == log.read_bytes()
    assert reads_blocks[0] * BLOCK <= sum(read) <= reads_blocks[1] * BLOCK, sum(read) / BLOCK
    assert final.records["ib_logfile0"].digest == digest_file(str(log))
    trust_timestamps(final)
    _append_log(log, floor + written, 1000)  # the server runs again: its checkpoint block says nothing of the end
    read = []
    copy_tree(src, dst, walk(src), previous=final, page_size=PAGE, progress=read.append)
    assert sum(read) == LOG_SIZE  # online without the current LSN: read whole
    assert (dst / "ib_logfile0").read_bytes() == log.read_bytes()


def test_online_redo_pass_reads_the_lsns_up_to_the_current_one(tmp_path):
    src, dst, log, first = _copied_redo_log(tmp_path, 1_000_000)
    _append_log(log, 1_000_000, 200_000)  # logged since; the checkpoint block still says 50,000
    read = []
    second, st = copy_tree(src, dst, walk(src), previous=first, page_size=PAGE, progress=read.append,
                           log_floor=1_150_000, log_now=1_200_010)  # flushed and current LSN at pass start
    assert 2 * BLOCK <= sum(read) <= 8 * BLOCK and st.files_delta == 1
    assert (dst / "ib_logfile0").read_bytes() == log.read_bytes()
    assert second.records["ib_logfile0"].verified and second.records["ib_logfile0"].log_floor == 1_150_000
