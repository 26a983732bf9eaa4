"""The redo-log format: which blocks of a MariaDB 10.8+ ``ib_logfile0`` a delta must read, and which files the
server may write through a shared mapping (so a stat check cannot tell they changed).

MariaDB 10.8+ keeps one circular log, ``ib_logfile0``: a file header in the first 4 KiB (format
"Phys" and the first LSN), two checkpoint blocks at 4096 and 8192 (checkpoint LSN, end LSN), and
from ``REDO_START`` the log itself, where the record of LSN n lies at
``REDO_START + (n - first_lsn) % capacity``.  The server writes the file only there and in the
checkpoint blocks, so the blocks that can differ from a copy made after the flushed LSN was
``log_floor`` are the header block and those of [floor, end], end being the end LSN of a clean
shutdown's checkpoint or, online, the current LSN read before the pass.

On ``/dev/shm`` (``innodb_log_file_mmap``, default on there) and on a DAX mount MariaDB maps this
file ``MAP_SHARED`` and writes it with stores.  A store into a page of a shared mapping that is
already faulted in changes neither mtime nor ctime, so a changed log can look unchanged to a
stat check: files named by ``SERVER_MAPPED_NAME`` are compared by content or LSN range on every
pass, never kept because their stat is the same.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from datadir_mover.move.copy.blocks import BLOCK, Range, StaleBlocks

REDO_NAME = re.compile(r"(^|/)ib_logfile0$")  # MariaDB 10.8+: one circular redo log file
REDO_FORMATS = (0x50687973, 0x50687973 | 1 << 31)  # "Phys" (10.8+ physical log), and encrypted
REDO_START = 12288  # the log proper begins here; the file header at 0, checkpoint blocks at 4096 and 8192
REDO_CHECKPOINTS = (4096, 8192)
# MySQL 8.0.30+ (log0constants.h; checked on MySQL 9.7.4's files): ``#innodb_redo/#ib_redoN``, each with a 2 KiB
# header of four 512-byte blocks: the file header (format at 0, big-endian; start LSN at 8; creator at 16), two
# checkpoint blocks at 512 and 1536 with the checkpoint LSN 8 bytes into each, written alternately and only in the
# file holding that LSN.  ``#ib_redoN_tmp`` are spares: consumed files renamed for reuse, their stale headers kept
MYSQL_REDO_DIR = "#innodb_redo"
MYSQL_REDO_FILE = re.compile(r"#ib_redo\d+$")
MYSQL_REDO_FORMATS = (6,)  # Log_format::VERSION_8_0_30, still the format of 9.7
MYSQL_REDO_CHECKPOINTS = (512 + 8, 1536 + 8)  # LOG_CHECKPOINT_1/_2 + LOG_CHECKPOINT_LSN
# files a server may write through a shared mapping or rewrite in place at will: every redo log (MariaDB's
# ib_logfile0, older ib_logfileN, MySQL 8.0.30+'s #innodb_redo/#ib_redoN) and the mmap'd XA coordinator log tc.log
SERVER_MAPPED_NAME = re.compile(r"(^|/)(ib_logfile\d+|#innodb_redo/#ib_redo\d+(_tmp)?|tc\.log)$")


@dataclass(frozen=True)
class RedoRule:
    """Read a changed redo log only where the LSNs logged since ``log_floor`` lie."""

    log_floor: int  # the server's flushed LSN read before the pass that copied the file
    end: int | None  # online: the current LSN read before this pass; None: the server is stopped

    def stale(self, fd: int, size: int, old_blocks: int) -> StaleBlocks:
        return redo_stale_blocks(fd, size, self.log_floor, old_blocks, self.end)


def trusted_by_stat(rel: str) -> bool:
    """May an unchanged stat keep this file's earlier copy?  Not for a file the server may write through a map."""
    return not SERVER_MAPPED_NAME.search(rel)


def redo_ranges(lo: int, hi: int, first_lsn: int, size: int) -> list[Range]:
    """File ranges holding the LSNs [lo, hi) of a circular 10.8+ redo log (one range, or two when it wraps)."""
    cap = size - REDO_START
    a = REDO_START + (lo - first_lsn) % cap
    n = hi - lo
    return [(a, a + n)] if a + n <= size else [(a, size), (REDO_START, REDO_START + a + n - size)]


def redo_stale_blocks(fd: int, size: int, log_floor: int, old_blocks: int, end: int | None = None) -> StaleBlocks:
    """Blocks of a MariaDB 10.8+ redo log the server may have written since ``log_floor`` (see the module docstring).

    The write of a batch starts in the block holding the last written, hence flushed, LSN;
    one ``BLOCK`` of margin is read on each side.  Anything not understood (another format, an
    unclean shutdown whose checkpoint is not at the end, a wrap of the whole log since the
    floor) gives every block: the file is compared whole.  ``end`` None: the server is stopped,
    the end LSN is the newest checkpoint block's.
    """
    every = StaleBlocks.every(size)
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
    n = len(every.masks)
    stale = {0}
    stale.update(range(min(old_blocks, n) - 1 if old_blocks else 0, n))  # growth and the tail
    for a, b in redo_ranges(lo, end + BLOCK, first_lsn, size):
        stale.update(range(a // BLOCK, -(-b // BLOCK)))
    return StaleBlocks(dict.fromkeys(sorted(stale), 1))
