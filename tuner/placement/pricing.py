"""A file's measured I/O priced on a tier.

Cost of the same operations on tier T (counts and bytes as measured, unit costs from T's fio figures):
  reads   count x page-size random read latency, plus the bytes beyond one page each at T's sequential read rate;
  writes  count x page-size write latency, plus the bytes beyond one page each at T's sequential write rate;
  misc    count x T's fsync latency (for InnoDB's files, which stay open, misc is the fsyncs).
Saving = the file's wait where it is now minus that cost.  The wait "where it is now" is the measured
wait, or, for a file only *counted* (MariaDB's redo), the same pricing on the tier it is on now (``here``).
"""

from __future__ import annotations

from tuner.placement.model import FileIo, TierCost


def cost_on(io: FileIo, tier: TierCost) -> float:
    page = tier.page_size
    reads = io.reads * tier.randread_s + max(0, io.read_bytes - io.reads * page) / tier.seqread_bps
    writes = io.writes * tier.write_s + max(0, io.write_bytes - io.writes * page) / tier.seqwrite_bps
    return reads + writes + io.misc * tier.fsync_s


def wait_here(io: FileIo, here: TierCost | None) -> float | None:
    """Seconds the I/O takes where the file is now: measured, or priced (None: counted, no tier to price on)."""
    if io.timed:
        return io.wait_s
    return None if here is None else cost_on(io, here)


def saving(io: FileIo, target: TierCost, here: TierCost | None = None) -> float | None:
    now = wait_here(io, here)
    return None if now is None else now - cost_on(io, target)
